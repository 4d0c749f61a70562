//! One StatefulSet's reconcile (upstream `stateful_set_control.go`): pick the current and
//! update revisions (creating, reusing or renumbering a ControllerRevision), bring every
//! ordinal in `[start, start+replicas)` to a Running and Ready pod — one at a time in
//! ordinal order for OrderedReady, all at once for Parallel — delete failed pods so they
//! are recreated, delete condemned ordinals from the highest down, roll pods to the update
//! revision from the highest ordinal down to the partition (RollingUpdate; OnDelete
//! leaves that to the user), write the status, and trim the revision history.

use std::future::Future;
use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tracing::{debug, warn};

use super::stateful_pod::{aggregate, StatefulPodControlInterface};
use super::status::{self, complete_rolling_update, inconsistent_status, SetStatus};
use super::utils::{
    allows_burst, apply_revision, choose_update_revision, identity_matches, is_created, is_failed,
    is_healthy, is_pending, is_running_and_available, is_running_and_ready, is_succeeded,
    is_terminating, min_ready_seconds, named_current_revision, new_versioned_stateful_set_pod,
    next_rolling_step, revisions_to_truncate, split_pods, start_ordinal, storage_matches,
    update_strategy_type, RollingStep, UpdateRevision, ON_DELETE,
};
use super::Controller;
use crate::api_errors::is_not_found;
use crate::history::{create_revision, delete_revision, sort_revisions, update_revision_number};
use crate::meta::ResourceNames;
use crate::selector::Selector;
use crate::store::controller_uid;

/// At most this many pod operations at once in Parallel mode (upstream MaxBatchSize).
const MAX_BATCH_SIZE: usize = 500;

/// What one pass got to: the revisions it settled on, the status it computed, and the
/// error that stopped it.
struct Pass {
    current: Option<Arc<ControllerRevision>>,
    update: Option<Arc<ControllerRevision>>,
    status: Option<SetStatus>,
    error: Option<anyhow::Error>,
}

/// Runs `call` for indexes `0..count`: in order, stopping at the first that asks to stop
/// or fails (monotonic); or concurrently in batches of 1, 2, 4, … stopping after a batch
/// with a failure (burst). Returns whether to stop, and the error.
async fn run_for_all<F, Fut>(
    count: usize,
    call: F,
    monotonic: bool,
) -> (bool, Option<anyhow::Error>)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    if monotonic {
        for i in 0..count {
            match call(i).await {
                Ok(false) => {}
                Ok(true) => return (true, None),
                Err(error) => return (true, Some(error)),
            }
        }
        return (false, None);
    }
    let mut next = 0;
    let mut batch = count.min(1);
    while batch > 0 {
        let results = futures::future::join_all((next..next + batch).map(&call)).await;
        next += batch;
        let errors: Vec<anyhow::Error> = results.into_iter().filter_map(Result::err).collect();
        if let Some(error) = aggregate(errors) {
            return (true, Some(error));
        }
        batch = (2 * batch).min(count - next).min(MAX_BATCH_SIZE);
    }
    (false, None)
}

/// What a pod still lacks before a monotonic pass may go past it: "Running and Ready",
/// then "Available" (ready for minReadySeconds); `None` once it has both.
fn not_yet(set: &StatefulSet, pod: &Pod, now: Timestamp) -> Option<&'static str> {
    if !is_running_and_ready(pod) {
        Some("Running and Ready")
    } else if !is_running_and_available(pod, min_ready_seconds(set), now) {
        Some("Available")
    } else {
        None
    }
}

impl Controller {
    /// The set's revisions in the store: in its namespace, matching its selector, owned by
    /// it or by nobody.
    pub(super) fn list_revisions(
        &self,
        set: &StatefulSet,
        selector: &Selector,
    ) -> Vec<Arc<ControllerRevision>> {
        let uid = set.metadata.uid.as_deref().unwrap_or_default();
        self.revisions
            .list_namespace(set.namespace_str())
            .into_iter()
            .filter(|revision| selector.matches(revision.metadata.labels.as_ref()))
            .filter(|revision| controller_uid(&revision.metadata).is_none_or(|owner| owner == uid))
            .collect()
    }

    fn revision_api(&self, set: &StatefulSet) -> Api<ControllerRevision> {
        Api::namespaced(self.client.clone(), set.namespace_str())
    }

    /// Reconciles the set's pods and writes its status; returns the status it wrote (or
    /// found up to date).
    pub(super) async fn update_stateful_set(
        &self,
        set: &StatefulSet,
        selector: &Selector,
        pods: &[Arc<Pod>],
    ) -> anyhow::Result<SetStatus> {
        let mut revisions = self.list_revisions(set, selector);
        sort_revisions(&mut revisions);
        let pass = self.perform_update(set, pods, &revisions).await;
        let truncated = self
            .truncate_history(
                set,
                pods,
                &revisions,
                pass.current.as_deref(),
                pass.update.as_deref(),
            )
            .await
            .err();
        let errors: Vec<anyhow::Error> = pass.error.into_iter().chain(truncated).collect();
        match (aggregate(errors), pass.status) {
            (Some(error), _) => Err(error),
            (None, Some(status)) => Ok(status),
            (None, None) => Err(anyhow!(
                "no status computed for StatefulSet {}",
                set.name_str()
            )),
        }
    }

    async fn perform_update(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
        revisions: &[Arc<ControllerRevision>],
    ) -> Pass {
        let (current, update, collision_count) = match self.get_revisions(set, revisions).await {
            Ok(found) => found,
            Err(error) => {
                return Pass {
                    current: None,
                    update: None,
                    status: None,
                    error: Some(error),
                }
            }
        };
        let (status, error) = update_pods(
            &self.pod_control,
            set,
            &current,
            &update,
            collision_count,
            pods,
        )
        .await;
        let Some(mut status) = status else {
            return Pass {
                current: Some(current),
                update: Some(update),
                status: None,
                error,
            };
        };
        // The status is written even when the pass stopped on an error.
        let status_error = self.update_status(set, &mut status).await.err();
        let error = match (error, status_error) {
            (Some(error), Some(status_error)) => {
                warn!(statefulset = set.name_str(), error = %status_error, "could not update status");
                Some(error)
            }
            (error, status_error) => error.or(status_error),
        };
        debug!(
            statefulset = set.name_str(),
            current_revision = %status.current_revision,
            update_revision = %status.update_revision,
            replicas = status.replicas,
            ready = status.ready_replicas,
            current = status.current_replicas,
            updated = status.updated_replicas,
            "synced"
        );
        Pass {
            current: Some(current),
            update: Some(update),
            status: Some(status),
            error,
        }
    }

    /// The current and update revisions and the collision count: the update revision is
    /// the latest revision when it holds the set's template, an older equal one renumbered
    /// to the next number (a rollback), or a new one; the current revision is the one
    /// status.currentRevision names, else the update revision.
    async fn get_revisions(
        &self,
        set: &StatefulSet,
        revisions: &[Arc<ControllerRevision>],
    ) -> anyhow::Result<(Arc<ControllerRevision>, Arc<ControllerRevision>, i32)> {
        let mut collision_count = set
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let update = match choose_update_revision(set, revisions, collision_count) {
            UpdateRevision::Latest(latest) => latest,
            UpdateRevision::Renumber(found, number) => {
                debug!(
                    statefulset = set.name_str(),
                    revision = found.name_str(),
                    number,
                    "rolling back to an earlier revision"
                );
                Arc::new(
                    update_revision_number(&self.revision_api(set), &found, number)
                        .await
                        .with_context(|| {
                            format!(
                                "updating the number of ControllerRevision {}/{}",
                                set.namespace_str(),
                                found.name_str()
                            )
                        })?,
                )
            }
            UpdateRevision::Create(wanted) => Arc::new(
                create_revision(
                    &self.revision_api(set),
                    set.name_str(),
                    &wanted,
                    &mut collision_count,
                )
                .await
                .with_context(|| {
                    format!(
                        "creating a ControllerRevision for StatefulSet {}/{}",
                        set.namespace_str(),
                        set.name_str()
                    )
                })?,
            ),
        };
        let current = named_current_revision(set, revisions).unwrap_or_else(|| update.clone());
        Ok((current, update, collision_count))
    }

    /// Completes a finished rolling update and writes the status if it changed.
    async fn update_status(&self, set: &StatefulSet, status: &mut SetStatus) -> anyhow::Result<()> {
        complete_rolling_update(set, status);
        if !inconsistent_status(set, status) {
            return Ok(());
        }
        status::write(&self.client, set, status)
            .await
            .with_context(|| {
                format!(
                    "updating status of StatefulSet {}/{}",
                    set.namespace_str(),
                    set.name_str()
                )
            })
    }

    /// Deletes the oldest revisions no pod, nor the current or update revision, uses,
    /// keeping `revisionHistoryLimit` of them.
    async fn truncate_history(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
        revisions: &[Arc<ControllerRevision>],
        current: Option<&ControllerRevision>,
        update: Option<&ControllerRevision>,
    ) -> anyhow::Result<()> {
        let live: Vec<&str> = current
            .into_iter()
            .chain(update)
            .map(|revision| revision.name_str())
            .collect();
        let doomed = revisions_to_truncate(set, pods, revisions, &live);
        if doomed.is_empty() {
            return Ok(());
        }
        let api = self.revision_api(set);
        for revision in doomed {
            delete_revision(&api, revision.name_str())
                .await
                .with_context(|| {
                    format!(
                        "deleting ControllerRevision {}/{}",
                        set.namespace_str(),
                        revision.name_str()
                    )
                })?;
        }
        Ok(())
    }
}

/// Upstream's updateStatefulSet: the pod work of one pass. Returns the status (None
/// when the revisions could not be applied) and the error that stopped the pass.
pub(super) async fn update_pods<P: StatefulPodControlInterface>(
    pod_control: &P,
    set: &StatefulSet,
    current: &ControllerRevision,
    update: &ControllerRevision,
    collision_count: i32,
    pods: &[Arc<Pod>],
) -> (Option<SetStatus>, Option<anyhow::Error>) {
    let (current_set, update_set) =
        match (apply_revision(set, current), apply_revision(set, update)) {
            (Ok(current_set), Ok(update_set)) => (current_set, update_set),
            (Err(error), _) | (_, Err(error)) => return (None, Some(anyhow!(error))),
        };
    let now = Timestamp::now();
    let min_ready = min_ready_seconds(set);
    let mut status = SetStatus {
        observed_generation: set.metadata.generation.unwrap_or(0),
        current_revision: current.name_str().to_string(),
        update_revision: update.name_str().to_string(),
        collision_count,
        ..SetStatus::default()
    };
    status.count(min_ready, &[pods], now);

    let start = start_ordinal(set);
    let (slots, condemned) = split_pods(set, pods);
    let replicas: Vec<Arc<Pod>> = slots
        .into_iter()
        .enumerate()
        .map(|(index, slot)| {
            slot.unwrap_or_else(|| {
                Arc::new(new_versioned_stateful_set_pod(
                    &current_set,
                    &update_set,
                    current.name_str(),
                    update.name_str(),
                    start + index as i32,
                ))
            })
        })
        .collect();

    // The first unhealthy replica by ordinal, else the lowest unhealthy condemned pod.
    let first_unhealthy = replicas
        .iter()
        .find(|pod| !is_healthy(pod))
        .or_else(|| condemned.iter().rev().find(|pod| !is_healthy(pod)))
        .cloned();
    if let Some(pod) = &first_unhealthy {
        debug!(
            statefulset = set.name_str(),
            pod = pod.name_str(),
            "StatefulSet has unhealthy pods"
        );
    }

    // A set being deleted gets its status, nothing else.
    if set.metadata.deletion_timestamp.is_some() {
        return (Some(status), None);
    }
    let monotonic = !allows_burst(set);

    let (stop, error) = run_for_all(
        replicas.len(),
        |i| process_replica(pod_control, set, &update_set, monotonic, &replicas, i, now),
        monotonic,
    )
    .await;
    if stop || error.is_some() {
        status.count(min_ready, &[&replicas, &condemned], now);
        return (Some(status), error);
    }

    // Condemned pods' claims get the ownerReferences that delete them with the pod
    // when the policy deletes claims on scale-down.
    let (stop, error) = run_for_all(
        condemned.len(),
        |i| {
            let pod = &condemned[i];
            let update_set = &update_set;
            async move {
                if !pod_control.claims_match_retention_policy(update_set, pod) {
                    pod_control
                        .update_pod_claim_for_retention_policy(update_set, pod)
                        .await?;
                }
                Ok(false)
            }
        },
        monotonic,
    )
    .await;
    if stop || error.is_some() {
        status.count(min_ready, &[&replicas, &condemned], now);
        return (Some(status), error);
    }

    // Every replica is Running and Ready (monotonic): scale down, highest first.
    let (stop, error) = run_for_all(
        condemned.len(),
        |i| {
            process_condemned(
                pod_control,
                set,
                first_unhealthy.as_ref(),
                monotonic,
                &condemned,
                i,
                now,
            )
        },
        monotonic,
    )
    .await;
    status.count(min_ready, &[&replicas, &condemned], now);
    if stop || error.is_some() {
        return (Some(status), error);
    }

    // OnDelete: pods move to the update revision only when the user deletes them.
    if update_strategy_type(set) == ON_DELETE {
        return (Some(status), None);
    }

    // RollingUpdate (upstream `updateStatefulSetAfterInvariantEstablished`).
    let error = rolling_update(pod_control, set, &replicas, update.name_str(), &mut status).await;
    (Some(status), error)
}

/// RollingUpdate: delete the highest ordinal not at the update revision, down to the
/// partition, one at a time, waiting for each to come back healthy. (The
/// maxUnavailable path belongs to MaxUnavailableStatefulSet, alpha and off in 1.29.)
async fn rolling_update<P: StatefulPodControlInterface>(
    pod_control: &P,
    set: &StatefulSet,
    replicas: &[Arc<Pod>],
    update_revision: &str,
    status: &mut SetStatus,
) -> Option<anyhow::Error> {
    match next_rolling_step(set, replicas, update_revision) {
        RollingStep::Delete(target) => {
            let pod = &replicas[target];
            debug!(
                statefulset = set.name_str(),
                pod = pod.name_str(),
                "terminating pod for update"
            );
            if let Err(error) = pod_control.delete_stateful_pod(set, pod).await {
                if !is_not_found(&error) {
                    return Some(error.into());
                }
            }
            status.current_replicas -= 1;
        }
        RollingStep::Wait(target) => {
            debug!(
                statefulset = set.name_str(),
                pod = replicas[target].name_str(),
                "waiting for pod to update"
            );
        }
        RollingStep::Done => {}
    }
    None
}

/// One replica: replace it if it failed, create it if missing, wait for it in
/// monotonic mode, repair its identity and storage. `Ok(true)` stops a monotonic pass.
async fn process_replica<P: StatefulPodControlInterface>(
    pod_control: &P,
    set: &StatefulSet,
    update_set: &StatefulSet,
    monotonic: bool,
    replicas: &[Arc<Pod>],
    i: usize,
    now: Timestamp,
) -> anyhow::Result<bool> {
    let pod = replicas[i].as_ref();
    // Succeeded counts too: an evicted or node-killed pod's phase follows its exit
    // code, and it must come back either way.
    if is_failed(pod) || is_succeeded(pod) {
        if pod.metadata.deletion_timestamp.is_none() {
            pod_control.delete_stateful_pod(set, pod).await?;
        }
        // The new pod is made at a later sync, once this one is gone.
        return Ok(true);
    }
    if !is_created(pod) {
        if pod_control.pod_claim_is_stale(set, pod) {
            // A claim still belongs to an earlier pod of this ordinal and is about to
            // be deleted: wait for it.
            return Ok(true);
        }
        pod_control.create_stateful_pod(set, pod).await?;
        if monotonic {
            return Ok(true);
        }
    }
    if is_pending(pod) {
        pod_control
            .create_missing_persistent_volume_claims(set, pod)
            .await?;
    }
    if monotonic {
        if is_terminating(pod) {
            debug!(
                statefulset = set.name_str(),
                pod = pod.name_str(),
                "waiting for pod to terminate"
            );
            return Ok(true);
        }
        if let Some(state) = not_yet(set, pod, now) {
            debug!(
                statefulset = set.name_str(),
                pod = pod.name_str(),
                "waiting for pod to be {state}"
            );
            return Ok(true);
        }
    }
    let retention_matches = pod_control.claims_match_retention_policy(update_set, pod);
    if identity_matches(set, pod) && storage_matches(set, pod) && retention_matches {
        return Ok(false);
    }
    pod_control.update_stateful_pod(update_set, pod).await?;
    Ok(false)
}

/// One condemned pod: delete it, in monotonic mode only once every replica is
/// healthy (or it is itself the first unhealthy pod) and no deletion is in progress.
async fn process_condemned<P: StatefulPodControlInterface>(
    pod_control: &P,
    set: &StatefulSet,
    first_unhealthy: Option<&Arc<Pod>>,
    monotonic: bool,
    condemned: &[Arc<Pod>],
    i: usize,
    now: Timestamp,
) -> anyhow::Result<bool> {
    let pod = &condemned[i];
    if is_terminating(pod) {
        // Monotonic: wait for it to go before the next.
        return Ok(monotonic);
    }
    let is_first_unhealthy = first_unhealthy.is_some_and(|first| Arc::ptr_eq(first, pod));
    if monotonic && !is_first_unhealthy {
        if let Some(state) = not_yet(set, pod, now) {
            debug!(
                statefulset = set.name_str(),
                pod = pod.name_str(),
                "waiting for pod to be {state} before scale down"
            );
            return Ok(true);
        }
    }
    debug!(
        statefulset = set.name_str(),
        pod = pod.name_str(),
        "terminating pod for scale down"
    );
    pod_control.delete_stateful_pod(set, pod).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn monotonic_runs_stop_at_the_first_blocker() {
        let seen = Mutex::new(Vec::new());
        let (stop, error) = run_for_all(
            5,
            |i| {
                seen.lock().unwrap().push(i);
                async move { Ok(i == 2) }
            },
            true,
        )
        .await;
        assert!(stop && error.is_none());
        assert_eq!(*seen.lock().unwrap(), [0, 1, 2]);
    }

    #[tokio::test]
    async fn burst_runs_go_in_growing_batches_and_stop_after_a_failing_one() {
        let seen = Mutex::new(Vec::new());
        let (stop, error) = run_for_all(
            10,
            |i| {
                seen.lock().unwrap().push(i);
                async move {
                    if i == 4 {
                        Err(anyhow!("quota"))
                    } else {
                        Ok(true)
                    }
                }
            },
            false,
        )
        .await;
        assert!(stop);
        assert_eq!(error.unwrap().to_string(), "quota");
        // Batches 1, 2, 4: index 4 is in the third; nothing after it runs.
        assert_eq!(*seen.lock().unwrap(), [0, 1, 2, 3, 4, 5, 6]);

        let (stop, error) = run_for_all(3, |_| async { Ok(true) }, false).await;
        assert!(
            !stop && error.is_none(),
            "asking to stop means nothing in burst mode"
        );
    }
}

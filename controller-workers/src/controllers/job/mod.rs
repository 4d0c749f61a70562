//! job-controller: runs a Job's pods to completion (upstream `pkg/controller/job/`).
//!
//! What it does, as upstream for the parts it has: completions and parallelism in the
//! NonIndexed and Indexed modes (each Indexed pod gets its completion index as an
//! annotation and a label, and the hostname `<job>-<index>`); pods carry the
//! `batch.kubernetes.io/job-tracking` finalizer, and a finished pod is counted through
//! `status.uncountedTerminatedPods` before its finalizer is removed, so no pod is counted
//! twice or lost across restarts; a failed pod is replaced after a backoff of 10 s
//! doubling to 10 min; `backoffLimit` and `activeDeadlineSeconds` fail the Job (reasons
//! BackoffLimitExceeded, DeadlineExceeded) and delete its active pods; `suspend` deletes
//! them and sets the Suspended condition (JobSuspended / JobResumed); status counters
//! (active, ready, succeeded, failed, completedIndexes), startTime, completionTime and
//! the Complete condition; podFailurePolicy (FailJob through the FailureTarget
//! condition, reason PodFailurePolicy; Ignore; Count) and podReplacementPolicy (with
//! `Failed`, or any podFailurePolicy, terminating pods are not replaced until they
//! failed; status.terminating); backoffLimitPerIndex (failedIndexes, the FailIndex
//! action, maxFailedIndexes). Not here yet: successPolicy (not served by 1.29),
//! terminated_pods_tracking_finalizer_total.
//!
//! A sync, as upstream's `syncJob`: [`sync`] claims the Job's pods and has them counted
//! ([`counting`]); [`decisions`] decides, without a cluster, whether the Job fails,
//! completes or is suspended, and for a running Job [`active`] which pods to delete or
//! else create (in the removal order of [`order`], held back by [`backoff`]); [`sync`]
//! then deletes or creates the pods (made by [`template`]), settles the conditions on
//! whether the deletions went through, and writes the status in the steps of
//! [`tracking`] around the finalizer removals, before it returns any create or delete
//! error.

mod active;
mod backoff;
mod conditions;
mod counting;
mod decisions;
#[cfg(test)]
mod fixtures;
mod indexes;
mod metrics;
mod order;
mod pod_failure_policy;
mod sync;
mod template;
mod tracking;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use crate::controller::{ControllerContext, Runnable};
use crate::expectations::UidTrackingExpectations;
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::pod_control::PodControl;
use crate::queue::WorkQueue;
use crate::rate_limiter::{Bucket, ItemExponentialFailure, MaxOf};
use crate::recorder::Recorder;
use crate::store::{controller_of, key_of, Store};

pub const NAME: &str = "job-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the node (deletion order) and `status` (phase, conditions, container statuses for the failure policy and backoff).
pub const FIELDS: crate::projection::FieldList = &[("v1/pods", &["spec.nodeName", "status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/pods", "batch/v1/jobs"];
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    pod_control: PodControl,
    jobs: Store<Job>,
    pods: Store<Pod>,
    expectations: UidTrackingExpectations,
    queue: Arc<WorkQueue<String>>,
    metrics: metrics::JobMetrics,
    finalizer_removals: FinalizerRemovals,
    /// The resourceVersion of each Job's last status this controller wrote: a sync waits
    /// until the Job store shows at least that version, so it never counts finished pods
    /// (already released from their finalizer) against a status that does not count them
    /// yet and creates pods beyond the Job's completions.
    written_status: std::sync::Mutex<HashMap<String, u64>>,
    /// Each Job's pod failure backoff (upstream's podBackoffStore): kept in memory only,
    /// so a restarted controller starts every Job's count afresh, as KCM does.
    backoff_records: std::sync::Mutex<HashMap<String, backoff::BackoffRecord>>,
}

/// The pods whose job-tracking finalizer a Job's sync removed and whose update the pod
/// cache has not shown yet (upstream's finalizerExpectations): they are counted already
/// and must not be counted again by a sync that sees the Job's new status before the
/// pods' updates.
#[derive(Default)]
pub(crate) struct FinalizerRemovals {
    expected: std::sync::Mutex<HashMap<String, HashSet<String>>>,
}

impl FinalizerRemovals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.expected.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn expect(&self, key: &str, uids: impl IntoIterator<Item = String>) {
        let mut expected = self.lock();
        let set = expected.entry(key.to_string()).or_default();
        set.extend(uids);
        if set.is_empty() {
            expected.remove(key);
        }
    }

    pub(crate) fn observed(&self, key: &str, uid: &str) {
        let mut expected = self.lock();
        if let Some(set) = expected.get_mut(key) {
            set.remove(uid);
            if set.is_empty() {
                expected.remove(key);
            }
        }
    }

    pub(crate) fn expected(&self, key: &str) -> HashSet<String> {
        self.lock().get(key).cloned().unwrap_or_default()
    }

    fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of job objects that are allowed to sync concurrently. Larger number = more
    /// responsive jobs, but more CPU (and network) load.
    #[arg(long, default_value_t = 5)]
    pub concurrent_job_syncs: usize,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    // Upstream's job queue backs off 1 s doubling to 1 min.
    let queue: Arc<WorkQueue<String>> = WorkQueue::with_rate_limiter(
        "job",
        Box::new(MaxOf::new(vec![
            Box::new(ItemExponentialFailure::new(
                Duration::from_secs(1),
                Duration::from_secs(60),
            )),
            Box::new(Bucket::new(10.0, 100)),
        ])),
        Some(context.metrics.workqueue.for_queue("job")),
    );
    let jobs = context.informers.get::<Job>();
    let pods = context.informers.get::<Pod>();
    let controller = Arc::new(Controller {
        pod_control: PodControl::new(client.clone(), recorder.clone()),
        client,
        recorder,
        jobs: jobs.store().clone(),
        pods: pods.store().clone(),
        expectations: UidTrackingExpectations::new(),
        queue: queue.clone(),
        metrics: metrics::JobMetrics::register(&context.metrics),
        finalizer_removals: FinalizerRemovals::default(),
        written_status: Default::default(),
        backoff_records: Default::default(),
    });
    {
        let controller = controller.clone();
        jobs.add_handler(Arc::new(move |change: &Change<Job>| match change {
            Change::Added(job) | Change::Updated { new: job, .. } => {
                controller.queue.add(key_of(&job.metadata));
            }
            Change::Deleted(deleted) => {
                let key = key_of(&deleted.object().metadata);
                controller.expectations.delete(&key);
                controller.finalizer_removals.forget(&key);
                controller.queue.add(key);
            }
        }));
    }
    pods.handle(&controller, Controller::on_pod);
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_job_syncs,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

impl Controller {
    fn job_of(&self, pod: &Pod) -> Option<Arc<Job>> {
        let namespace = pod.namespace_str();
        self.jobs
            .referenced(namespace, controller_of(&pod.metadata)?)
    }

    fn on_pod(&self, change: &Change<Pod>) {
        match change {
            Change::Added(pod) => {
                if let Some(job) = self.job_of(pod) {
                    let key = key_of(&job.metadata);
                    self.observe_release(&key, pod);
                    if pod.metadata.deletion_timestamp.is_some() {
                        self.expectations
                            .deletion_observed(&key, &key_of(&pod.metadata));
                    } else {
                        self.expectations.creation_observed(&key);
                    }
                    self.queue.add(key);
                }
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                for pod in [old, new] {
                    if let Some(job) = self.job_of(pod) {
                        let key = key_of(&job.metadata);
                        self.observe_release(&key, new);
                        if new.metadata.deletion_timestamp.is_some() {
                            self.expectations
                                .deletion_observed(&key, &key_of(&new.metadata));
                        }
                        self.queue.add(key);
                    }
                }
            }
            Change::Deleted(deleted) => {
                let pod = deleted.object();
                if let Some(job) = self.job_of(pod) {
                    let key = key_of(&job.metadata);
                    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                    self.finalizer_removals.observed(&key, uid);
                    self.expectations
                        .deletion_observed(&key, &key_of(&pod.metadata));
                    self.queue.add(key);
                }
            }
        }
    }

    /// A pod seen without the job-tracking finalizer: its removal has landed.
    fn observe_release(&self, key: &str, pod: &Pod) {
        if !counting::has_finalizer(pod) {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            self.finalizer_removals.observed(key, uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FinalizerRemovals;

    #[test]
    fn released_pods_are_remembered_until_seen() {
        let removals = FinalizerRemovals::default();
        removals.expect("ns/job", ["a".to_string(), "b".to_string()]);
        assert_eq!(removals.expected("ns/job").len(), 2);
        removals.observed("ns/job", "a");
        assert!(removals.expected("ns/job").contains("b"));
        removals.observed("ns/job", "b");
        assert!(removals.expected("ns/job").is_empty());
        removals.expect("ns/job", ["c".to_string()]);
        removals.forget("ns/job");
        assert!(removals.expected("ns/job").is_empty());
    }
}

//! A Job's sync (upstream `syncJob`, `manageJob`, `trackJobStatusAndRemoveFinalizers`).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::debug;

use super::indexes::{self, COMPLETION_INDEX};
use super::pod_failure_policy::{
    is_pod_failed, match_pod_failure_policy, only_replace_failed_pods, Action,
};
use super::{Controller, TRACKING_FINALIZER};
use crate::api_errors::is_not_found;
use crate::controller_ref::RefManager;
use crate::pod_control::{controller_ref, slow_start_batch, SLOW_START_INITIAL_BATCH_SIZE};
use crate::pods::{compare_for_deletion, is_pod_active, is_pod_ready, is_pod_terminating, phase};
use crate::recorder::{NORMAL, WARNING};
use crate::selector::Selector;
use crate::store::{controller_of, key_of, split_key};

/// The environment variable an Indexed Job's containers read their index from.
const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
const POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(600);
/// At most this many pods are created or deleted in one sync (upstream).
const MAX_CREATE_DELETE_PER_SYNC: usize = 500;

fn condition_true(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

pub(super) fn finished(job: &Job) -> bool {
    condition_true(job, "Complete") || condition_true(job, "Failed")
}

/// An object's resourceVersion as the number etcd makes it (`None` if it is not one).
fn resource_version(job: &Job) -> Option<u64> {
    job.metadata.resource_version.as_deref()?.parse().ok()
}

fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status == value && existing.reason.as_deref().unwrap_or("") == reason {
            return false;
        }
        if existing.status != value {
            existing.last_transition_time = Some(Time(now));
        }
        existing.status = value.into();
        existing.reason = (!reason.is_empty()).then(|| reason.into());
        existing.message = (!message.is_empty()).then(|| message.into());
        existing.last_probe_time = Some(Time(now));
        return true;
    }
    conditions.push(JobCondition {
        type_: type_.into(),
        status: value.into(),
        reason: (!reason.is_empty()).then(|| reason.into()),
        message: (!message.is_empty()).then(|| message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    });
    true
}

/// When a pod stopped: its last container's finish time, else its last condition change.
fn finished_at(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| {
            c.state
                .as_ref()?
                .terminated
                .as_ref()?
                .finished_at
                .as_ref()
                .map(|t| t.0)
        })
        .max()
        .or_else(|| {
            status
                .conditions
                .iter()
                .flatten()
                .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
                .max()
        })
        .or_else(|| pod.metadata.deletion_timestamp.as_ref().map(|t| t.0))
}

/// How long to wait before replacing failed pods: 10 s doubling per failure, 10 min cap,
/// from the last failure.
fn backoff_left(
    failures: i32,
    last_failure: Option<Timestamp>,
    now: Timestamp,
) -> Option<Duration> {
    if failures <= 0 {
        return None;
    }
    let delay = POD_FAILURE_BACKOFF
        .saturating_mul(1u32 << (failures - 1).min(16) as u32)
        .min(MAX_POD_FAILURE_BACKOFF);
    let last = last_failure?;
    let ready_at = last + SignedDuration::try_from(delay).ok()?;
    let left = ready_at.as_nanosecond() - now.as_nanosecond();
    (left > 0).then(|| Duration::from_nanos(left as u64))
}

/// With restartPolicy OnFailure failures are container restarts: the restarts of the
/// running and pending pods reaching backoffLimit fail the Job
/// (`pastBackoffLimitOnFailure`).
fn past_backoff_limit_on_failure(
    spec: &k8s_openapi::api::batch::v1::JobSpec,
    pods: &[Arc<Pod>],
    backoff_limit: i32,
) -> bool {
    let restart_policy = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref());
    if restart_policy != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = pods
        .iter()
        .filter(|p| matches!(phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .sum();
    if backoff_limit == 0 {
        restarts > 0
    } else {
        restarts >= backoff_limit
    }
}

fn completion_mode(job: &Job) -> &'static str {
    match job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) {
        Some("Indexed") => "Indexed",
        _ => "NonIndexed",
    }
}

/// The failed pod of `index` a replacement follows (upstream's pod "with delayed
/// deletion"): the one with the most failures, the latest to finish.
fn last_failed_pod<'a>(pods: &'a [Arc<Pod>], index: i32, job: &Job) -> Option<&'a Pod> {
    pods.iter()
        .filter(|p| indexes::of_pod(p) == Some(index) && is_pod_failed(p, job))
        .max_by_key(|p| (indexes::absolute_failure_count(p), finished_at(p)))
        .map(|p| p.as_ref())
}

impl Controller {
    /// Syncs a Job and records the sync in the job_controller metrics.
    pub(super) async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let (namespace, name) = split_key(key);
        let mode = match self.jobs.get_in(namespace, name) {
            Some(job) => completion_mode(&job),
            None => return self.sync_job(key, &mut "reconciling").await,
        };
        let mut action = "reconciling";
        let result = self.sync_job(key, &mut action).await;
        self.metrics.sync(
            mode,
            result.is_ok(),
            action,
            started.elapsed().as_secs_f64(),
        );
        result
    }

    async fn sync_job(&self, key: &str, action: &mut &'static str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(cached) = self.jobs.get_in(namespace, name) else {
            self.expectations.delete(key);
            crate::locks::lock(&self.written_status).remove(key);
            return Ok(());
        };
        if self.status_not_seen_yet(key, &cached) {
            self.queue
                .add_after(key.to_string(), Duration::from_millis(100));
            return Ok(());
        }
        let mut job = cached.as_ref().clone();
        let now = Timestamp::now();
        let spec = job.spec.clone().unwrap_or_default();
        let selector = match Selector::from_label_selector(spec.selector.as_ref()) {
            Ok(selector) => selector,
            Err(_) => return Ok(()),
        };
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let mut candidates = self.pods.claim_candidates(namespace, &uid);
        // Orphans are adopted only while active.
        candidates.retain(|pod| controller_of(&pod.metadata).is_some() || is_pod_active(pod));
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let manager = RefManager::new(
            &job,
            controller_ref(&job),
            &selector,
            Api::<Job>::namespaced(self.client.clone(), namespace),
        );
        let (pods, errors) = manager.claim(candidates, &pod_api).await;
        if let Some(error) = errors.into_iter().next() {
            return Err(error.into());
        }
        let mut status = job.status.clone().unwrap_or_default();
        let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        let uncounted_succeeded: HashSet<String> = uncounted
            .succeeded
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let uncounted_failed: HashSet<String> = uncounted
            .failed
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let indexed = spec.completion_mode.as_deref() == Some("Indexed");
        let completions = spec.completions;

        // Pods that finished and are not counted yet.
        let pod_uid = |pod: &Pod| pod.metadata.uid.clone().unwrap_or_default();
        // A finished Job counts nothing more: pods it deleted on finishing are not
        // failures; their finalizers are only released.
        let counting = !finished(&job);
        // Pods whose finalizer this controller already removed were counted, even if the
        // pod cache still shows the finalizer (the Job's cache may be ahead of it).
        let released = self.finalizer_removals.expected(key);
        let new_succeeded: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|_| counting)
            .filter(|p| {
                phase(p) == "Succeeded"
                    && has_finalizer(p)
                    && !uncounted_succeeded.contains(&pod_uid(p))
                    && !released.contains(&pod_uid(p))
            })
            .collect();
        let policy = spec.pod_failure_policy.as_ref();
        // Failures a podFailurePolicy rule ignores are not counted (their finalizer is
        // still released).
        let (new_failed, new_ignored): (Vec<&Arc<Pod>>, Vec<&Arc<Pod>>) = pods
            .iter()
            .filter(|_| counting)
            .filter(|p| {
                is_pod_failed(p, &job)
                    && has_finalizer(p)
                    && !uncounted_failed.contains(&pod_uid(p))
                    && !released.contains(&pod_uid(p))
            })
            .partition(|p| match_pod_failure_policy(policy, p).count_failed);
        // A failed pod matching a FailJob rule fails the Job.
        let fail_job_message = pods
            .iter()
            .filter(|p| is_pod_failed(p, &job))
            .find_map(|p| match_pod_failure_policy(policy, p).fail_job_message);
        let terminating = pods.iter().filter(|p| is_pod_terminating(p)).count();
        let active_pods: Vec<&Arc<Pod>> = pods.iter().filter(|p| is_pod_active(p)).collect();
        let succeeded = status.succeeded.unwrap_or(0)
            + uncounted_succeeded.len() as i32
            + new_succeeded.len() as i32;
        let failures =
            status.failed.unwrap_or(0) + uncounted_failed.len() as i32 + new_failed.len() as i32;
        let mut completed_indexes = indexes::parse(
            status.completed_indexes.as_deref().unwrap_or_default(),
            completions.unwrap_or(0),
        );
        if indexed {
            for pod in pods.iter().filter(|p| phase(p) == "Succeeded") {
                if let Some(index) = indexes::of_pod(pod) {
                    if index < completions.unwrap_or(0) {
                        completed_indexes.insert(index);
                    }
                }
            }
        }

        // backoffLimitPerIndex: an index whose pods failed that often (or whose pod
        // matched a FailIndex rule) is failed for good.
        let per_index_limit = spec.backoff_limit_per_index.filter(|_| indexed);
        let mut failed_indexes = BTreeSet::new();
        if let Some(limit) = per_index_limit {
            let n = completions.unwrap_or(0);
            failed_indexes =
                indexes::parse(status.failed_indexes.as_deref().unwrap_or_default(), n);
            for pod in pods.iter().filter(|p| has_finalizer(p)) {
                let Some(index) = indexes::of_pod(pod).filter(|i| *i < n) else {
                    continue;
                };
                if is_pod_failed(pod, &job) {
                    let outcome = match_pod_failure_policy(policy, pod);
                    if outcome.action == Some(Action::FailIndex)
                        || (outcome.count_failed && indexes::failure_count(pod) >= limit)
                    {
                        failed_indexes.insert(index);
                    }
                }
            }
        }

        let mut events: Vec<(&str, String, String)> = Vec::new();
        let mut delete: Vec<Arc<Pod>> = Vec::new();
        let mut create_indexes: Vec<Option<i32>> = Vec::new();
        let mut requeue_after: Option<Duration> = None;
        let was_finished = finished(&job);
        let mode = completion_mode(&job);
        let previous_completed = indexes::parse(
            status.completed_indexes.as_deref().unwrap_or_default(),
            completions.unwrap_or(0),
        )
        .len();
        let previous_failed = indexes::parse(
            status.failed_indexes.as_deref().unwrap_or_default(),
            completions.unwrap_or(0),
        )
        .len();
        let mut finished_now: Option<(bool, String)> = None;
        if !was_finished {
            if status.start_time.is_none() && !spec.suspend.unwrap_or(false) {
                status.start_time = Some(Time(now));
            }
            let backoff_limit = spec.backoff_limit.unwrap_or(6);
            let deadline_passed = match (spec.active_deadline_seconds, status.start_time.as_ref()) {
                (Some(seconds), Some(start)) if !spec.suspend.unwrap_or(false) => {
                    let at = start.0 + SignedDuration::from_secs(seconds);
                    if at > now {
                        requeue_after = Some(Duration::from_nanos(
                            (at.as_nanosecond() - now.as_nanosecond()) as u64,
                        ));
                        false
                    } else {
                        true
                    }
                }
                _ => false,
            };
            let failure_target = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "FailureTarget" && c.status == "True")
                .map(|c| {
                    (
                        c.reason.clone().unwrap_or_default(),
                        c.message.clone().unwrap_or_default(),
                    )
                });
            let failure: Option<(String, String)> = if let Some(target) = failure_target {
                Some(target)
            } else if let Some(message) = &fail_job_message {
                // First the interim FailureTarget condition, written with the uncounted
                // pods before their finalizers go; Failed follows once they are counted.
                set_condition(
                    &mut status,
                    "FailureTarget",
                    "True",
                    "PodFailurePolicy",
                    message,
                    now,
                );
                Some(("PodFailurePolicy".to_string(), message.clone()))
            } else if failures > backoff_limit
                || past_backoff_limit_on_failure(&spec, &pods, backoff_limit)
            {
                Some((
                    "BackoffLimitExceeded".into(),
                    "Job has reached the specified backoff limit".into(),
                ))
            } else if deadline_passed {
                Some((
                    "DeadlineExceeded".into(),
                    "Job was active longer than specified deadline".into(),
                ))
            } else if per_index_limit.is_some()
                && spec
                    .max_failed_indexes
                    .is_some_and(|max| failed_indexes.len() as i32 > max)
            {
                Some((
                    "MaxFailedIndexesExceeded".into(),
                    "Job has exceeded the specified maximal number of failed indexes".into(),
                ))
            } else if !failed_indexes.is_empty()
                && (failed_indexes.len() + completed_indexes.len()) as i32
                    >= completions.unwrap_or(0)
            {
                Some(("FailedIndexes".into(), "Job has failed indexes".into()))
            } else {
                None
            };
            let complete = match (indexed, completions) {
                (true, Some(n)) => completed_indexes.len() as i32 >= n,
                (_, None) => succeeded > 0 && active_pods.is_empty(),
                (false, Some(n)) => succeeded >= n,
            };
            if let Some((reason, message)) = failure {
                delete.extend(active_pods.iter().map(|p| (*p).clone()));
                set_condition(&mut status, "Failed", "True", &reason, &message, now);
                finished_now = Some((false, reason.clone()));
                events.push((WARNING, reason, message));
            } else if complete {
                delete.extend(active_pods.iter().map(|p| (*p).clone()));
                set_condition(&mut status, "Complete", "True", "", "", now);
                status.completion_time = Some(Time(now));
                finished_now = Some((true, String::new()));
                events.push((NORMAL, "Completed".into(), "Job completed".into()));
            } else if spec.suspend.unwrap_or(false) {
                delete.extend(active_pods.iter().map(|p| (*p).clone()));
                if set_condition(
                    &mut status,
                    "Suspended",
                    "True",
                    "JobSuspended",
                    "Job suspended",
                    now,
                ) {
                    events.push((NORMAL, "Suspended".into(), "Job suspended".into()));
                }
            } else if self.expectations.satisfied(key) {
                if condition_true(&job, "Suspended") {
                    set_condition(
                        &mut status,
                        "Suspended",
                        "False",
                        "JobResumed",
                        "Job resumed",
                        now,
                    );
                    events.push((NORMAL, "Resumed".into(), "Job resumed".into()));
                    status.start_time = Some(Time(now));
                }
                let parallelism = spec.parallelism.unwrap_or(1).max(0) as usize;
                // Pods still terminating hold their place until they have failed when
                // only failed pods are replaced.
                let held = if only_replace_failed_pods(&job) {
                    terminating
                } else {
                    0
                };
                let terminating_indexes: std::collections::BTreeSet<i32> = if held > 0 {
                    pods.iter()
                        .filter(|p| is_pod_terminating(p))
                        .filter_map(|p| indexes::of_pod(p))
                        .collect()
                } else {
                    Default::default()
                };
                if indexed {
                    let n = completions.unwrap_or(0);
                    let mut running: BTreeMap<i32, Vec<Arc<Pod>>> = BTreeMap::new();
                    for pod in &active_pods {
                        match indexes::of_pod(pod).filter(|i| {
                            *i < n && !completed_indexes.contains(i) && !failed_indexes.contains(i)
                        }) {
                            Some(index) => running.entry(index).or_default().push((*pod).clone()),
                            // Out of range, unindexed, or an index already done or failed.
                            None => delete.push((*pod).clone()),
                        }
                    }
                    for pods in running.values_mut() {
                        // One pod per index.
                        delete.extend(pods.drain(1..));
                    }
                    let missing: Vec<i32> = (0..n)
                        .filter(|i| {
                            !completed_indexes.contains(i)
                                && !failed_indexes.contains(i)
                                && !running.contains_key(i)
                                && !terminating_indexes.contains(i)
                        })
                        .collect();
                    let want = parallelism
                        .saturating_sub(held)
                        .min(running.len() + missing.len());
                    if running.len() > want {
                        let extra = running.len() - want;
                        let highest: Vec<i32> = running.keys().rev().take(extra).copied().collect();
                        for index in highest {
                            delete.extend(running.remove(&index).unwrap_or_default());
                        }
                    } else {
                        create_indexes
                            .extend(missing.into_iter().take(want - running.len()).map(Some));
                    }
                } else {
                    let want = match completions {
                        None if succeeded > 0 => 0,
                        None => parallelism,
                        Some(n) => parallelism.min((n - succeeded).max(0) as usize),
                    };
                    let active = active_pods.len();
                    if active + held < want {
                        create_indexes.extend(std::iter::repeat_n(None, want - active - held));
                    } else if active > want {
                        let mut ranked: Vec<(Arc<Pod>, usize)> =
                            active_pods.iter().map(|p| ((*p).clone(), 0)).collect();
                        ranked.sort_by(|a, b| compare_for_deletion((&a.0, a.1), (&b.0, b.1), now));
                        delete.extend(ranked.into_iter().take(active - want).map(|(p, _)| p));
                    }
                }
                if per_index_limit.is_some() && !create_indexes.is_empty() {
                    // Each index backs off on its own failures, from its last failed
                    // pod (the one its replacement takes the failure counts from).
                    let mut ready = Vec::new();
                    let mut soonest: Option<Duration> = None;
                    for index in create_indexes.iter().flatten() {
                        let replaced = last_failed_pod(&pods, *index, &job);
                        let wait = replaced.and_then(|p| {
                            backoff_left(
                                indexes::absolute_failure_count(p) + 1,
                                finished_at(p).or(p
                                    .metadata
                                    .creation_timestamp
                                    .as_ref()
                                    .map(|t| t.0)),
                                now,
                            )
                        });
                        match wait {
                            None => ready.push(Some(*index)),
                            Some(wait) => soonest = Some(soonest.map_or(wait, |s| s.min(wait))),
                        }
                    }
                    if ready.is_empty() {
                        if let Some(wait) = soonest {
                            debug!(
                                job = key,
                                ?wait,
                                "backing off before replacing failed indexes"
                            );
                            requeue_after = Some(requeue_after.map_or(wait, |r| r.min(wait)));
                        }
                    }
                    create_indexes = ready;
                } else if !create_indexes.is_empty() {
                    let last_failure = pods
                        .iter()
                        .filter(|p| is_pod_failed(p, &job))
                        .filter_map(|p| finished_at(p))
                        .max();
                    // Ignored failures are not counted, but they still back off.
                    let ignored_present = pods
                        .iter()
                        .filter(|p| is_pod_failed(p, &job))
                        .filter(|p| !match_pod_failure_policy(policy, p).count_failed)
                        .count() as i32;
                    if let Some(wait) = backoff_left(failures + ignored_present, last_failure, now)
                    {
                        debug!(job = key, ?wait, "backing off before replacing failed pods");
                        create_indexes.clear();
                        requeue_after = Some(requeue_after.map_or(wait, |r| r.min(wait)));
                    }
                }
                create_indexes.truncate(MAX_CREATE_DELETE_PER_SYNC);
            }
        }

        // Pods to delete and to create.
        delete.truncate(MAX_CREATE_DELETE_PER_SYNC);
        if !delete.is_empty() {
            *action = "pods_deleted";
            self.expectations
                .expect_deletions(key, delete.iter().map(|p| key_of(&p.metadata)).collect());
            for pod in &delete {
                let pod_name = pod.metadata.name.clone().unwrap_or_default();
                if let Err(error) = self
                    .pod_control
                    .delete_pod(namespace, &pod_name, &job)
                    .await
                {
                    self.expectations
                        .deletion_observed(key, &key_of(&pod.metadata));
                    if !is_not_found(&error) {
                        return Err(error.into());
                    }
                }
            }
        }
        let mut create_error = None;
        let mut created_count = 0;
        if !create_indexes.is_empty() {
            self.expectations
                .expect_creations(key, create_indexes.len() as i64);
            let template = spec.template.clone();
            let job_name = job.metadata.name.clone().unwrap_or_default();
            let queue: std::sync::Mutex<Vec<Option<i32>>> =
                std::sync::Mutex::new(create_indexes.clone());
            let (created, error) =
                slow_start_batch(create_indexes.len(), SLOW_START_INITIAL_BATCH_SIZE, || {
                    let index = queue
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .pop()
                        .flatten();
                    let mut template = pod_template(&template, &job_name, index);
                    if let (Some(index), Some(_)) = (index, per_index_limit) {
                        let replaced = last_failed_pod(&pods, index, &job);
                        let (failures, ignored) = replaced
                            .map(|p| {
                                let counted = match_pod_failure_policy(policy, p).count_failed;
                                (
                                    indexes::failure_count(p) + i32::from(counted),
                                    indexes::ignored_failure_count(p) + i32::from(!counted),
                                )
                            })
                            .unwrap_or((0, 0));
                        let annotations = template
                            .metadata
                            .get_or_insert_with(Default::default)
                            .annotations
                            .get_or_insert_with(Default::default);
                        annotations.insert(indexes::FAILURE_COUNT.into(), failures.to_string());
                        if ignored > 0 {
                            annotations
                                .insert(indexes::IGNORED_FAILURE_COUNT.into(), ignored.to_string());
                        }
                    }
                    let generate_name = index.map(|i| format!("{job_name}-{i}-"));
                    let job = &job;
                    async move {
                        self.pod_control
                            .create_pod_with_generate_name(
                                namespace,
                                &template,
                                job,
                                controller_ref(job),
                                generate_name,
                            )
                            .await
                            .map(|_| ())
                    }
                })
                .await;
            created_count = created;
            let recreating = job
                .status
                .as_ref()
                .is_some_and(|s| s.terminating.unwrap_or(0) > 0 || s.failed.unwrap_or(0) > 0);
            let reason = match (recreating, only_replace_failed_pods(&job)) {
                (false, _) => "new",
                (true, true) => "recreate_failed",
                (true, false) => "recreate_terminating_or_failed",
            };
            self.metrics
                .pods_created(reason, created as u64, u64::from(error.is_some()));
            if created > 0 {
                *action = "pods_created";
            }
            let skipped = create_indexes.len() - created;
            if skipped > 0 {
                self.expectations.lower(key, skipped as i64, 0);
            }
            create_error = error;
        }

        // Status: count what finished through uncountedTerminatedPods, drop the
        // finalizers, then move the counts into the counters.
        let ready = active_pods.iter().filter(|p| is_pod_ready(p)).count() as i32;
        let deleted: HashSet<String> = delete.iter().map(|p| pod_uid(p)).collect();
        let still_active = active_pods
            .iter()
            .filter(|p| !deleted.contains(&pod_uid(p)))
            .count();
        status.active = Some((still_active + created_count) as i32);
        status.terminating = Some(terminating as i32);
        status.ready = Some(ready);
        for (type_, reason, message) in &events {
            self.recorder
                .event(&job, type_, reason.as_str(), message.clone());
        }
        let mut all_succeeded: Vec<String> = uncounted_succeeded.iter().cloned().collect();
        all_succeeded.extend(new_succeeded.iter().map(|p| pod_uid(p)));
        let mut all_failed: Vec<String> = uncounted_failed.iter().cloned().collect();
        all_failed.extend(new_failed.iter().map(|p| pod_uid(p)));
        all_succeeded.sort();
        all_failed.sort();
        if !new_succeeded.is_empty() || !new_failed.is_empty() {
            // Record them as uncounted first, without the conditions this sync adds: a
            // Job is seen finished only once every pod of it is counted.
            let mut recording = job.status.clone().unwrap_or_default();
            recording.uncounted_terminated_pods = Some(UncountedTerminatedPods {
                succeeded: Some(all_succeeded.clone()),
                failed: Some(all_failed.clone()),
            });
            recording.active = status.active;
            recording.ready = status.ready;
            recording.start_time = status.start_time.clone();
            recording.terminating = status.terminating;
            if let Some(message) = fail_job_message.as_deref().filter(|_| !was_finished) {
                set_condition(
                    &mut recording,
                    "FailureTarget",
                    "True",
                    "PodFailurePolicy",
                    message,
                    now,
                );
            }
            self.write_status(&mut job, recording).await?;
            if policy.is_some() {
                for pod in new_failed.iter().chain(new_ignored.iter()) {
                    match match_pod_failure_policy(policy, pod).action {
                        Some(Action::FailJob) => self.metrics.failure_handled_by_policy("FailJob"),
                        Some(Action::Ignore) => self.metrics.failure_handled_by_policy("Ignore"),
                        Some(Action::Count) => self.metrics.failure_handled_by_policy("Count"),
                        Some(Action::FailIndex) => {
                            self.metrics.failure_handled_by_policy("FailIndex")
                        }
                        None => {}
                    }
                }
            }
        }
        let ignored: HashSet<String> = new_ignored.iter().map(|p| pod_uid(p)).collect();
        let to_release: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|p| {
                has_finalizer(p)
                    && !released.contains(&pod_uid(p))
                    && (all_succeeded.contains(&pod_uid(p))
                        || all_failed.contains(&pod_uid(p))
                        || ignored.contains(&pod_uid(p))
                        || was_finished)
            })
            .collect();
        self.finalizer_removals
            .expect(key, to_release.iter().map(|p| pod_uid(p)));
        for pod in to_release {
            if let Err(error) = self.remove_finalizer(&pod_api, pod).await {
                self.finalizer_removals.observed(key, &pod_uid(pod));
                return Err(error);
            }
        }
        status.succeeded = Some(succeeded);
        status.failed = Some(failures);
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
        if indexed {
            // An Indexed Job counts succeeded indexes, not pods (as upstream).
            status.succeeded = Some(completed_indexes.len() as i32);
            status.completed_indexes = Some(indexes::format(&completed_indexes));
            if per_index_limit.is_some() {
                status.failed_indexes = Some(indexes::format(&failed_indexes));
            }
        }
        let newly_completed = completed_indexes.len().saturating_sub(previous_completed);
        let newly_failed = failed_indexes.len().saturating_sub(previous_failed);
        if job.status.as_ref() != Some(&status) {
            self.write_status(&mut job, status).await?;
        }
        self.metrics
            .pods_finished(mode, all_succeeded.len() as u64, all_failed.len() as u64);
        if indexed {
            self.metrics.indexes_finished(
                per_index_limit.is_some(),
                newly_completed as u64,
                newly_failed as u64,
            );
        }
        if let Some((succeeded, reason)) = &finished_now {
            self.metrics.job_finished(mode, *succeeded, reason);
        }
        if *action == "reconciling" && !was_finished {
            *action = "tracking";
        }
        if let Some(wait) = requeue_after {
            self.queue
                .add_after(key.to_string(), wait + Duration::from_millis(100));
        }
        match create_error {
            Some(error) => {
                Err(anyhow::Error::new(error).context(format!("creating pods for Job {key}")))
            }
            None => Ok(()),
        }
    }

    /// Whether the Job store is still behind the status this controller last wrote.
    fn status_not_seen_yet(&self, key: &str, cached: &Job) -> bool {
        let mut written = crate::locks::lock(&self.written_status);
        let Some(expected) = written.get(key).copied() else {
            return false;
        };
        match resource_version(cached) {
            Some(seen) if seen < expected => true,
            // Seen (or not comparable: never wait on a version that is not a number).
            _ => {
                written.remove(key);
                false
            }
        }
    }

    async fn write_status(&self, job: &mut Job, status: JobStatus) -> anyhow::Result<()> {
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), &namespace);
        job.status = Some(status);
        let written = api
            .replace_status(&name, &PostParams::default(), job)
            .await
            .with_context(|| format!("updating the status of Job {namespace}/{name}"))?;
        job.metadata.resource_version = written.metadata.resource_version;
        if let Some(version) = resource_version(job) {
            crate::locks::lock(&self.written_status).insert(format!("{namespace}/{name}"), version);
        }
        Ok(())
    }

    async fn remove_finalizer(&self, api: &Api<Pod>, pod: &Pod) -> anyhow::Result<()> {
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
            "uid": pod.metadata.uid,
        }});
        match api
            .patch(
                pod.metadata.name.as_deref().unwrap_or_default(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if is_not_found(&error) => Ok(()),
            Err(error) => {
                Err(anyhow::Error::new(error).context("removing the job-tracking finalizer"))
            }
        }
    }
}

/// The pod template with the tracking finalizer and, for an Indexed Job, the index
/// annotation and label and the hostname.
fn pod_template(template: &PodTemplateSpec, job_name: &str, index: Option<i32>) -> PodTemplateSpec {
    let mut template = template.clone();
    let meta = template.metadata.get_or_insert_with(Default::default);
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.into());
    }
    if let Some(index) = index {
        if let Some(spec) = template.spec.as_mut() {
            let containers = spec
                .init_containers
                .iter_mut()
                .flatten()
                .chain(spec.containers.iter_mut());
            for container in containers {
                let env = container.env.get_or_insert_with(Vec::new);
                if !env.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
                    env.push(EnvVar {
                        name: COMPLETION_INDEX_ENV.into(),
                        value: None,
                        value_from: Some(EnvVarSource {
                            field_ref: Some(ObjectFieldSelector {
                                api_version: None,
                                field_path: format!("metadata.labels['{COMPLETION_INDEX}']"),
                            }),
                            ..EnvVarSource::default()
                        }),
                    });
                }
            }
        }
        let meta = template.metadata.get_or_insert_with(Default::default);
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX.into(), index.to_string());
        meta.labels
            .get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX.into(), index.to_string());
        if let Some(spec) = template.spec.as_mut() {
            spec.hostname = Some(format!("{job_name}-{index}"));
        }
    }
    template
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_10_seconds_to_10_minutes() {
        let now = Timestamp::from_second(10_000).unwrap();
        assert_eq!(backoff_left(0, Some(now), now), None);
        assert_eq!(
            backoff_left(1, Some(now), now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            backoff_left(3, Some(now), now),
            Some(Duration::from_secs(40))
        );
        assert_eq!(
            backoff_left(20, Some(now), now),
            Some(Duration::from_secs(600))
        );
        let later = now + SignedDuration::from_secs(15);
        assert_eq!(
            backoff_left(1, Some(now), later),
            None,
            "10 s after the failure it may go"
        );
    }

    #[test]
    fn indexed_pods_carry_their_index() {
        let template = PodTemplateSpec {
            spec: Some(Default::default()),
            ..Default::default()
        };
        let pod = pod_template(&template, "work", Some(2));
        let meta = pod.metadata.unwrap();
        assert_eq!(meta.annotations.unwrap()[COMPLETION_INDEX], "2");
        assert_eq!(meta.labels.unwrap()[COMPLETION_INDEX], "2");
        assert_eq!(meta.finalizers.unwrap(), [TRACKING_FINALIZER]);
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("work-2"));
    }
}

//! A Job's sync at the edge (upstream `syncJob`, with the API calls of `manageJob` and
//! `trackJobStatusAndRemoveFinalizers`): it claims the Job's pods, has them counted
//! ([`counting`]) and the sync decided ([`decisions`], [`active`](super::active)), then
//! deletes and creates pods, records the events, writes the status in its steps around
//! the finalizer removals ([`tracking`]) and records the metrics.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::debug;

use super::backoff;
use super::conditions::finished;
use super::counting::{self, pod_uid, Counts};
use super::decisions::{self, Outcome};
use super::indexes::{self, completion_mode};
use super::pod_failure_policy::only_replace_failed_pods;
use super::tracking::{self, Uncounted};
use super::{template, Controller, TRACKING_FINALIZER};
use crate::api_errors::is_not_found;
use crate::controller_ref::RefManager;
use crate::meta::ResourceNames;
use crate::pod_control::{controller_ref, slow_start_batch, SLOW_START_INITIAL_BATCH_SIZE};
use crate::pods::is_pod_active;
use crate::selector::Selector;
use crate::store::{controller_of, key_of, split_key};

/// An object's resourceVersion as the number etcd makes it (`None` if it is not one).
fn resource_version(job: &Job) -> Option<u64> {
    job.metadata.resource_version.as_deref()?.parse().ok()
}

impl Controller {
    /// Syncs a Job and records the sync in the job_controller metrics.
    pub(super) async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let (namespace, name) = split_key(key);
        let mode = match self.jobs.get_in(namespace, name) {
            // As upstream, a sync of a Job gone or finished is not measured.
            Some(job) if !finished(&job) => completion_mode(&job),
            _ => return self.sync_job(key, &mut "reconciling").await,
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
            crate::locks::lock(&self.backoff_records).remove(key);
            return Ok(());
        };
        if self.status_not_seen_yet(key, &cached) {
            self.queue
                .add_after(key.to_string(), Duration::from_millis(100));
            return Ok(());
        }
        let mut job = cached.as_ref().clone();
        let now = Timestamp::now();
        // Read before the pods are listed, as upstream: a pod seen after this is counted
        // by the next sync rather than sneaking past its expectation.
        let satisfied = self.expectations.satisfied(key);
        let Some(pods) = self.claim_pods(&job, namespace).await? else {
            return Ok(());
        };
        let was_finished = finished(&job);
        let mut counts = counting::count(&job, pods, self.finalizer_removals.expected(key));
        if was_finished {
            crate::locks::lock(&self.backoff_records).remove(key);
        }
        let kept = crate::locks::lock(&self.backoff_records)
            .get(key)
            .cloned()
            .unwrap_or_default();
        counts.backoff = backoff::record_for(&kept, &counts);
        let plan = decisions::plan(&job, &counts, satisfied, now);
        *action = plan.action;
        if let Some(wait) = plan.backoff {
            let per_index = job.spec.as_ref().and_then(indexes::per_index_limit);
            let what = if per_index.is_some() {
                "indexes"
            } else {
                "pods"
            };
            debug!(
                job = key,
                ?wait,
                "backing off before replacing failed {what}"
            );
        }

        // A plan deletes or creates, never both.
        let (deleted, delete_error) = self
            .delete_pods(key, &job, &plan.delete, plan.managed)
            .await;
        let (created, create_error) = self
            .create_pods(key, &job, &counts.pods, &plan.create)
            .await;
        let all_deleted = deleted.len() == plan.delete.len();
        let requeue_after = plan.requeue_after;
        let Outcome {
            mut status,
            events,
            finished: finished_now,
        } = plan.settle(&job, all_deleted, now);

        tracking::set_pod_counts(&mut status, &counts, &deleted, created);
        for event in events {
            self.recorder
                .event(&job, event.type_, event.reason.as_str(), event.message);
        }
        // The status is tracked even when a deletion or creation failed, so the pods
        // counted in this sync are recorded; that error is returned after.
        let uncounted = self
            .track_status(key, &mut job, &counts, status, now)
            .await
            .context("tracking status")?;
        self.record_finished(&job, &counts, &uncounted, finished_now.as_ref());
        if let Some(wait) = requeue_after {
            self.queue
                .add_after(key.to_string(), wait + Duration::from_millis(100));
        }
        if let Some(error) = delete_error {
            return Err(anyhow::Error::new(error).context(format!("deleting pods of Job {key}")));
        }
        match create_error {
            Some(error) => {
                Err(anyhow::Error::new(error).context(format!("creating pods for Job {key}")))
            }
            None => Ok(()),
        }
    }

    /// The Job's pods: those it controls, and the active orphans its selector matches,
    /// adopted (upstream `getPodsForJob`). `None` when the selector is not valid.
    async fn claim_pods(
        &self,
        job: &Job,
        namespace: &str,
    ) -> anyhow::Result<Option<Vec<Arc<Pod>>>> {
        let selector = job.spec.as_ref().and_then(|s| s.selector.as_ref());
        let Ok(selector) = Selector::from_label_selector(selector) else {
            return Ok(None);
        };
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let mut candidates = self.pods.claim_candidates(namespace, &uid);
        // Orphans are adopted only while active.
        candidates.retain(|pod| controller_of(&pod.metadata).is_some() || is_pod_active(pod));
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let manager = RefManager::new(
            job,
            controller_ref(job),
            &selector,
            Api::<Job>::namespaced(self.client.clone(), namespace),
        );
        let (pods, errors) = manager.claim(candidates, &pod_api).await;
        match errors.into_iter().next() {
            Some(error) => Err(error.into()),
            None => Ok(Some(pods)),
        }
    }

    /// Deletes `pods` one by one; a pod already gone counts as deleted. `managed`
    /// deletions (upstream `deleteJobPods`) are expected and each pod's job-tracking
    /// finalizer goes first, so the pod is counted neither as succeeded nor as failed;
    /// a finishing Job's pods (upstream `deleteActivePods`) are just deleted. Returns the
    /// pods deleted and the first error.
    async fn delete_pods(
        &self,
        key: &str,
        job: &Job,
        pods: &[Arc<Pod>],
        managed: bool,
    ) -> (Vec<Arc<Pod>>, Option<kube::Error>) {
        if pods.is_empty() {
            return (Vec::new(), None);
        }
        if managed {
            self.expectations
                .expect_deletions(key, pods.iter().map(|p| key_of(&p.metadata)).collect());
        }
        let (namespace, _) = split_key(key);
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        // Every deletion is tried (a failed one is no longer expected), so one refusal
        // does not leave the rest expected and undone until the expectations expire.
        let results = futures::future::join_all(pods.iter().map(|pod| async {
            if managed && counting::has_finalizer(pod) {
                self.release(&pod_api, pod).await?;
            }
            let pod_name = pod.name_str().to_string();
            self.pod_control.delete_pod(namespace, &pod_name, job).await
        }))
        .await;
        let mut deleted = Vec::new();
        let mut first_error = None;
        for (pod, result) in pods.iter().zip(results) {
            let Err(error) = result else {
                deleted.push(pod.clone());
                continue;
            };
            // The informer will not show this deletion.
            if managed {
                self.expectations
                    .deletion_observed(key, &key_of(&pod.metadata));
            }
            if is_not_found(&error) {
                deleted.push(pod.clone());
            } else {
                first_error.get_or_insert(error);
            }
        }
        (deleted, first_error)
    }

    /// Creates one pod per entry of `create` in slow-start batches, expecting them; the
    /// ones a failed batch left out are no longer expected. Returns how many were created
    /// and the first error.
    async fn create_pods(
        &self,
        key: &str,
        job: &Job,
        pods: &[Arc<Pod>],
        create: &[Option<i32>],
    ) -> (usize, Option<kube::Error>) {
        if create.is_empty() {
            return (0, None);
        }
        let (namespace, _) = split_key(key);
        self.expectations.expect_creations(key, create.len() as i64);
        // Popped from the back: the lowest indexes are created first, as upstream.
        let queue = std::sync::Mutex::new(create.iter().rev().copied().collect::<Vec<_>>());
        let (created, error) =
            slow_start_batch(create.len(), SLOW_START_INITIAL_BATCH_SIZE, || {
                let index = crate::locks::lock(&queue).pop().flatten();
                let (template, generate_name) = template::new_pod(job, pods, index);
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
        let recreating = job
            .status
            .as_ref()
            .is_some_and(|s| s.terminating.unwrap_or(0) > 0 || s.failed.unwrap_or(0) > 0);
        let reason = match (recreating, only_replace_failed_pods(job)) {
            (false, _) => "new",
            (true, true) => "recreate_failed",
            (true, false) => "recreate_terminating_or_failed",
        };
        self.metrics
            .pods_created(reason, created as u64, u64::from(error.is_some()));
        let skipped = create.len() - created;
        if skipped > 0 {
            self.expectations.lower(key, skipped as i64, 0);
        }
        (created, error)
    }

    /// Counts the finished pods into the status: records the new ones as uncounted,
    /// removes the finalizers, then writes the counters (each write only when needed).
    async fn track_status(
        &self,
        key: &str,
        job: &mut Job,
        counts: &Counts,
        status: JobStatus,
        now: Timestamp,
    ) -> anyhow::Result<Uncounted> {
        let uncounted = tracking::uncounted(counts);
        let recording = tracking::recording_status(job, &status, counts, &uncounted, now);
        let to_release = tracking::pods_to_release(job, counts, &uncounted);
        let counted = tracking::counted_status(job, status, counts);
        if let Some(recording) = recording {
            self.write_status(job, recording).await?;
            // The new finished pods are recorded: their failures now count for the backoff.
            crate::locks::lock(&self.backoff_records)
                .insert(key.to_string(), counts.backoff.clone());
            for action in tracking::policy_actions(job, counts) {
                self.metrics.failure_handled_by_policy(action);
            }
        }
        self.finalizer_removals
            .expect(key, to_release.iter().map(|p| pod_uid(p)));
        let (namespace, _) = split_key(key);
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        for pod in &to_release {
            if let Err(error) = self.remove_finalizer(&pod_api, pod).await {
                self.finalizer_removals.observed(key, &pod_uid(pod));
                return Err(error);
            }
        }
        if job.status.as_ref() != Some(&counted) {
            self.write_status(job, counted).await?;
        }
        Ok(uncounted)
    }

    /// The metrics of pods, indexes and the Job finishing in this sync.
    fn record_finished(
        &self,
        job: &Job,
        counts: &Counts,
        uncounted: &Uncounted,
        finished_now: Option<&(bool, String)>,
    ) {
        let mode = completion_mode(job);
        self.metrics.pods_finished(
            mode,
            uncounted.succeeded.len() as u64,
            uncounted.failed.len() as u64,
        );
        let spec = job.spec.clone().unwrap_or_default();
        if indexes::is_indexed(&spec) {
            let completed = counts.completed_indexes.len();
            let failed = counts.failed_indexes.len();
            self.metrics.indexes_finished(
                indexes::per_index_limit(&spec).is_some(),
                completed.saturating_sub(counts.previous_completed) as u64,
                failed.saturating_sub(counts.previous_failed) as u64,
            );
        }
        if let Some((succeeded, reason)) = finished_now {
            self.metrics.job_finished(mode, *succeeded, reason);
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
        let namespace = job.namespace_str().to_string();
        let name = job.name_str().to_string();
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
        match self.release(api, pod).await {
            Err(error) if !is_not_found(&error) => {
                Err(anyhow::Error::new(error).context("removing the job-tracking finalizer"))
            }
            _ => Ok(()),
        }
    }

    /// Removes the pod's job-tracking finalizer (upstream `removeTrackingFinalizerPatch`,
    /// with the UID as a precondition).
    async fn release(&self, api: &Api<Pod>, pod: &Pod) -> Result<(), kube::Error> {
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
            "uid": pod.metadata.uid,
        }});
        api.patch(
            pod.name_str(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .map(|_| ())
    }
}

//! What one sync of a Job decides before it writes anything (upstream `syncJob`'s
//! decisions): whether the Job fails (the reasons in upstream's order), completes, is
//! suspended or resumed, its start time and the activeDeadlineSeconds requeue, and, for a
//! Job still running, the pod changes [`active::manage`] wants.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::active;
use super::conditions::{condition_true, failure_target, finished, set_condition};
use super::counting::Counts;
use super::indexes;
use crate::pods::phase;
use crate::recorder::{NORMAL, WARNING};

/// An event the sync records on the Job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) type_: &'static str,
    pub(super) reason: String,
    pub(super) message: String,
}

impl Event {
    fn new(type_: &'static str, reason: &str, message: &str) -> Event {
        Event {
            type_,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Everything one sync decides from the Job and its counted pods, before it deletes and
/// creates pods; [`Plan::settle`] then gives the conditions and events, which depend on
/// whether the deletions all went through.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    /// The Job's status with the start time this sync sets (the conditions come in
    /// [`Plan::settle`], the pod counters once the pods are created and deleted).
    pub(super) status: JobStatus,
    pub(super) delete: Vec<Arc<Pod>>,
    /// The deletions are `manageJob`'s (excess pods, or a suspended Job's): each pod's
    /// job-tracking finalizer goes before it is deleted, so it is counted nowhere, and the
    /// deletions are expected. Otherwise they are a finishing Job's pods (upstream
    /// `deleteActivePods`), deleted as they are.
    pub(super) managed: bool,
    /// One pod to create per entry, with its completion index in an Indexed Job.
    pub(super) create: Vec<Option<i32>>,
    /// Sync again after this long (the active deadline, or the end of a backoff).
    pub(super) requeue_after: Option<Duration>,
    /// Pods are wanted but wait this long for the failure backoff.
    pub(super) backoff: Option<Duration>,
    /// The Job finishes in this sync if every deletion goes through.
    pub(super) finish: Option<Finish>,
    /// The job_sync metrics' action: reconciling unless `manageJob` ran.
    pub(super) action: &'static str,
    /// `manageJob` ran (expectations satisfied, the Job not being deleted): unless the Job
    /// finishes, its Suspended condition follows spec.suspend.
    suspension: Option<bool>,
}

/// How a Job finishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Finish {
    Complete,
    Failed(Failure),
}

/// What a sync writes and records once its pods are deleted.
#[derive(Debug)]
pub(super) struct Outcome {
    pub(super) status: JobStatus,
    pub(super) events: Vec<Event>,
    /// The Job finished in this sync: whether it succeeded, and the failure's reason.
    pub(super) finished: Option<(bool, String)>,
}

/// Why a Job fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Failure {
    pub(super) reason: String,
    pub(super) message: String,
    /// A FailJob rule matched and the interim FailureTarget condition is still to be set.
    pub(super) set_target: bool,
}

impl Failure {
    fn new(reason: &str, message: &str) -> Option<Failure> {
        Some(Failure {
            reason: reason.into(),
            message: message.into(),
            set_target: false,
        })
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Deadline {
    None,
    In(Duration),
    Passed,
}

/// activeDeadlineSeconds, counted from the start time while the Job is not suspended.
fn active_deadline(spec: &JobSpec, start: Option<&Time>, now: Timestamp) -> Deadline {
    match (spec.active_deadline_seconds, start) {
        (Some(seconds), Some(start)) if !spec.suspend.unwrap_or(false) => {
            let at = start.0 + SignedDuration::from_secs(seconds);
            if at > now {
                Deadline::In(Duration::from_nanos(
                    (at.as_nanosecond() - now.as_nanosecond()) as u64,
                ))
            } else {
                Deadline::Passed
            }
        }
        _ => Deadline::None,
    }
}

/// With restartPolicy OnFailure failures are container restarts: the restarts of the
/// running and pending pods reaching backoffLimit fail the Job
/// (`pastBackoffLimitOnFailure`).
fn past_backoff_limit_on_failure(spec: &JobSpec, pods: &[Arc<Pod>], backoff_limit: i32) -> bool {
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

/// The first reason the Job fails, in upstream's order: a FailureTarget already set, a
/// FailJob rule, backoffLimit (failures or OnFailure restarts), activeDeadlineSeconds,
/// maxFailedIndexes, then failed indexes once no index is left to run.
pub(super) fn failure(
    spec: &JobSpec,
    status: &JobStatus,
    counts: &Counts,
    deadline_passed: bool,
) -> Option<Failure> {
    if let Some((reason, message)) = failure_target(status) {
        return Failure::new(&reason, &message);
    }
    if let Some(message) = &counts.fail_job_message {
        return Some(Failure {
            reason: "PodFailurePolicy".into(),
            message: message.clone(),
            set_target: true,
        });
    }
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    if counts.failed > backoff_limit
        || past_backoff_limit_on_failure(spec, &counts.pods, backoff_limit)
    {
        return Failure::new(
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        );
    }
    if deadline_passed {
        return Failure::new(
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        );
    }
    let failed_indexes = counts.failed_indexes.len() as i32;
    if indexes::per_index_limit(spec).is_some()
        && spec
            .max_failed_indexes
            .is_some_and(|max| failed_indexes > max)
    {
        return Failure::new(
            "MaxFailedIndexesExceeded",
            "Job has exceeded the specified maximal number of failed indexes",
        );
    }
    let completed_indexes = counts.completed_indexes.len() as i32;
    if failed_indexes > 0 && failed_indexes + completed_indexes >= spec.completions.unwrap_or(0) {
        return Failure::new("FailedIndexes", "Job has failed indexes");
    }
    None
}

/// Whether the Job reached its completions: the succeeded indexes or pods, or for a Job
/// without completions (a work queue) a success.
fn completions_reached(spec: &JobSpec, counts: &Counts) -> bool {
    match (indexes::is_indexed(spec), spec.completions) {
        (true, Some(n)) => counts.completed_indexes.len() as i32 >= n,
        (_, None) => counts.succeeded > 0,
        (false, Some(n)) => counts.succeeded >= n,
    }
}

/// Decides the sync of `job` (upstream `syncJob`). `expectations_satisfied`: every pod
/// creation and deletion an earlier sync asked for has been seen; until then pods are
/// neither created nor deleted (but a failing Job's active pods are), and a failing Job is
/// not declared failed.
pub(super) fn plan(
    job: &Job,
    counts: &Counts,
    expectations_satisfied: bool,
    now: Timestamp,
) -> Plan {
    let mut plan = Plan {
        status: job.status.clone().unwrap_or_default(),
        delete: Vec::new(),
        managed: false,
        create: Vec::new(),
        requeue_after: None,
        backoff: None,
        finish: None,
        action: "reconciling",
        suspension: None,
    };
    if finished(job) {
        return plan;
    }
    let no_spec = JobSpec::default();
    let spec = job.spec.as_ref().unwrap_or(&no_spec);
    let suspend = spec.suspend.unwrap_or(false);
    if plan.status.start_time.is_none() && !suspend {
        plan.status.start_time = Some(Time(now));
    }
    let deadline = active_deadline(spec, plan.status.start_time.as_ref(), now);
    if let Deadline::In(left) = deadline {
        plan.requeue_after = Some(left);
    }
    if let Some(failure) = failure(spec, &plan.status, counts, deadline == Deadline::Passed) {
        // The active pods go in any case; the Job is failed once nothing is pending.
        plan.delete = counts.active.clone();
        plan.finish = expectations_satisfied.then_some(Finish::Failed(failure));
        return plan;
    }
    if expectations_satisfied && job.metadata.deletion_timestamp.is_none() {
        plan.manage(job, counts, suspend, now);
    }
    // Complete once no active pod is left after this sync's deletions.
    if completions_reached(spec, counts) && plan.delete.len() == counts.active.len() {
        plan.finish = Some(Finish::Complete);
    }
    plan
}

impl Plan {
    /// Upstream `manageJob`: a suspended Job's active pods all go; a running Job's are
    /// brought to what it wants.
    fn manage(&mut self, job: &Job, counts: &Counts, suspend: bool, now: Timestamp) {
        self.managed = true;
        self.suspension = Some(suspend);
        if suspend {
            let spec = job.spec.clone().unwrap_or_default();
            self.delete = active::for_removal(&spec, &counts.active, counts.active.len());
            self.action = "pods_deleted";
            return;
        }
        let changes = active::manage(job, counts, now);
        self.action = changes.action;
        self.delete = changes.delete;
        self.create = changes.create;
        if let Some(wait) = changes.backoff {
            self.backoff = Some(wait);
            self.requeue_after = Some(self.requeue_after.map_or(wait, |r| r.min(wait)));
        }
    }

    /// The status and events once the deletions are done: the finish if `all_deleted`,
    /// else (when `manageJob` ran) the Suspended condition as spec.suspend says.
    pub(super) fn settle(self, job: &Job, all_deleted: bool, now: Timestamp) -> Outcome {
        let mut outcome = Outcome {
            status: self.status,
            events: Vec::new(),
            finished: None,
        };
        match self.finish.filter(|_| all_deleted) {
            Some(Finish::Failed(failure)) => outcome.fail(failure, now),
            Some(Finish::Complete) => outcome.complete(now),
            None => match self.suspension {
                Some(true) => outcome.suspend(now),
                Some(false) => outcome.resume(job, now),
                None => {}
            },
        }
        outcome
    }
}

impl Outcome {
    /// The Job fails.
    fn fail(&mut self, failure: Failure, now: Timestamp) {
        let Failure {
            reason,
            message,
            set_target,
        } = failure;
        if set_target {
            // First the interim FailureTarget condition, written with the uncounted pods
            // before their finalizers go; Failed follows once they are counted.
            let target = "PodFailurePolicy";
            set_condition(
                &mut self.status,
                "FailureTarget",
                "True",
                target,
                &message,
                now,
            );
        }
        set_condition(&mut self.status, "Failed", "True", &reason, &message, now);
        self.finished = Some((false, reason.clone()));
        self.events.push(Event {
            type_: WARNING,
            reason,
            message,
        });
    }

    /// The Job completes.
    fn complete(&mut self, now: Timestamp) {
        set_condition(&mut self.status, "Complete", "True", "", "", now);
        self.status.completion_time = Some(Time(now));
        self.finished = Some((true, String::new()));
        self.events
            .push(Event::new(NORMAL, "Completed", "Job completed"));
    }

    /// The Job is suspended; the event only when it becomes so.
    fn suspend(&mut self, now: Timestamp) {
        let (reason, message) = ("JobSuspended", "Job suspended");
        if set_condition(&mut self.status, "Suspended", "True", reason, message, now) {
            self.events.push(Event::new(NORMAL, "Suspended", message));
        }
    }

    /// The Job runs: resumed if it was suspended (its start time restarts).
    fn resume(&mut self, job: &Job, now: Timestamp) {
        if condition_true(job, "Suspended") {
            let (reason, message) = ("JobResumed", "Job resumed");
            set_condition(&mut self.status, "Suspended", "False", reason, message, now);
            self.events.push(Event::new(NORMAL, "Resumed", message));
            self.status.start_time = Some(Time(now));
        }
    }
}

#[cfg(test)]
mod tests;

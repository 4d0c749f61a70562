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

use super::active::{self, MAX_CREATE_DELETE_PER_SYNC};
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

/// Everything one sync sets, decided from the Job and its counted pods.
#[derive(Debug)]
pub(super) struct Plan {
    /// The Job's status with the start time, conditions and completion time this sync
    /// sets (the pod counters come later, once the pods are created and deleted).
    pub(super) status: JobStatus,
    pub(super) events: Vec<Event>,
    pub(super) delete: Vec<Arc<Pod>>,
    /// One pod to create per entry, with its completion index in an Indexed Job.
    pub(super) create: Vec<Option<i32>>,
    /// Sync again after this long (the active deadline, or the end of a backoff).
    pub(super) requeue_after: Option<Duration>,
    /// Pods are wanted but wait this long for the failure backoff.
    pub(super) backoff: Option<Duration>,
    /// The Job finishes in this sync: whether it succeeded, and the failure's reason.
    pub(super) finished: Option<(bool, String)>,
}

/// Why a Job fails.
#[derive(Debug, PartialEq, Eq)]
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

/// Completions reached: the succeeded indexes or pods, or for a Job without completions
/// (a work queue) a success and no active pod left.
fn complete(spec: &JobSpec, counts: &Counts) -> bool {
    match (indexes::is_indexed(spec), spec.completions) {
        (true, Some(n)) => counts.completed_indexes.len() as i32 >= n,
        (_, None) => counts.succeeded > 0 && counts.active.is_empty(),
        (false, Some(n)) => counts.succeeded >= n,
    }
}

/// Decides the sync of `job`. `expectations_satisfied`: every pod creation and deletion
/// an earlier sync asked for has been seen, so pods may be created and deleted again.
pub(super) fn plan(
    job: &Job,
    counts: &Counts,
    expectations_satisfied: bool,
    now: Timestamp,
) -> Plan {
    let mut plan = Plan {
        status: job.status.clone().unwrap_or_default(),
        events: Vec::new(),
        delete: Vec::new(),
        create: Vec::new(),
        requeue_after: None,
        backoff: None,
        finished: None,
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
        plan.fail(failure, counts, now);
    } else if complete(spec, counts) {
        plan.complete(counts, now);
    } else if suspend {
        plan.suspend(counts, now);
    } else if expectations_satisfied {
        plan.run(job, counts, now);
    }
    plan.delete.truncate(MAX_CREATE_DELETE_PER_SYNC);
    plan
}

impl Plan {
    /// The Job fails: its active pods go.
    fn fail(&mut self, failure: Failure, counts: &Counts, now: Timestamp) {
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
        self.delete = counts.active.clone();
        set_condition(&mut self.status, "Failed", "True", &reason, &message, now);
        self.finished = Some((false, reason.clone()));
        self.events.push(Event {
            type_: WARNING,
            reason,
            message,
        });
    }

    /// The Job completes: pods still active go.
    fn complete(&mut self, counts: &Counts, now: Timestamp) {
        self.delete = counts.active.clone();
        set_condition(&mut self.status, "Complete", "True", "", "", now);
        self.status.completion_time = Some(Time(now));
        self.finished = Some((true, String::new()));
        self.events
            .push(Event::new(NORMAL, "Completed", "Job completed"));
    }

    /// The Job is suspended: its active pods go; the event only when it becomes so.
    fn suspend(&mut self, counts: &Counts, now: Timestamp) {
        self.delete = counts.active.clone();
        let (reason, message) = ("JobSuspended", "Job suspended");
        if set_condition(&mut self.status, "Suspended", "True", reason, message, now) {
            self.events.push(Event::new(NORMAL, "Suspended", message));
        }
    }

    /// The Job runs: resumed if it was suspended (its start time restarts), and its
    /// active pods brought to what it wants.
    fn run(&mut self, job: &Job, counts: &Counts, now: Timestamp) {
        if condition_true(job, "Suspended") {
            let (reason, message) = ("JobResumed", "Job resumed");
            set_condition(&mut self.status, "Suspended", "False", reason, message, now);
            self.events.push(Event::new(NORMAL, "Resumed", message));
            self.status.start_time = Some(Time(now));
        }
        let changes = active::manage(job, counts, now);
        self.delete = changes.delete;
        self.create = changes.create;
        if let Some(wait) = changes.backoff {
            self.backoff = Some(wait);
            self.requeue_after = Some(self.requeue_after.map_or(wait, |r| r.min(wait)));
        }
    }
}

#[cfg(test)]
mod tests;

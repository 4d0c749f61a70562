//! How a Job's finished pods reach its status counters (upstream
//! `trackJobStatusAndRemoveFinalizers`): a sync first records them in
//! status.uncountedTerminatedPods, then removes their job-tracking finalizers, then moves
//! them into succeeded and failed, so a pod is never counted twice nor lost if the sync
//! stops halfway. These are the statuses and pod lists of those steps; the writes are in
//! [`sync`](super::sync).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::conditions::{failure_target, finished, set_condition};
use super::counting::{has_finalizer, pod_uid, Counts};
use super::indexes;
use super::pod_failure_policy::{match_pod_failure_policy, Action};
use crate::pods::is_pod_ready;

/// The UIDs status.uncountedTerminatedPods holds once this sync's new finished pods are
/// recorded, sorted.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Uncounted {
    pub(super) succeeded: Vec<String>,
    pub(super) failed: Vec<String>,
}

pub(super) fn uncounted(counts: &Counts) -> Uncounted {
    let all = |listed: &HashSet<String>, new: &[Arc<Pod>]| {
        let mut uids: Vec<String> = listed.iter().cloned().collect();
        uids.extend(new.iter().map(|p| pod_uid(p)));
        uids.sort();
        uids
    };
    Uncounted {
        succeeded: all(&counts.uncounted_succeeded, &counts.new_succeeded),
        failed: all(&counts.uncounted_failed, &counts.new_failed),
    }
}

/// Sets status.active, ready and terminating once `deleted` were deleted and `created`
/// pods created.
pub(super) fn set_pod_counts(
    status: &mut JobStatus,
    counts: &Counts,
    deleted: &[Arc<Pod>],
    created: usize,
) {
    let ready = counts.active.iter().filter(|p| is_pod_ready(p)).count() as i32;
    let deleted: HashSet<String> = deleted.iter().map(|p| pod_uid(p)).collect();
    let still_active = counts
        .active
        .iter()
        .filter(|p| !deleted.contains(&pod_uid(p)))
        .count();
    status.active = Some((still_active + created) as i32);
    status.terminating = Some(counts.terminating as i32);
    status.ready = Some(ready);
}

/// The first write when pods finished: the Job's status as it was with the new pods
/// added to uncountedTerminatedPods, the pod counters and start time of `status`, and
/// the interim FailureTarget when a FailJob rule matched, but none of the conditions
/// this sync adds (a Job is seen finished only once every pod of it is counted).
/// `None` when no pod finished.
pub(super) fn recording_status(
    job: &Job,
    status: &JobStatus,
    counts: &Counts,
    uncounted: &Uncounted,
    now: Timestamp,
) -> Option<JobStatus> {
    if counts.new_succeeded.is_empty() && counts.new_failed.is_empty() {
        return None;
    }
    let mut recording = job.status.clone().unwrap_or_default();
    recording.uncounted_terminated_pods = Some(UncountedTerminatedPods {
        succeeded: Some(uncounted.succeeded.clone()),
        failed: Some(uncounted.failed.clone()),
    });
    recording.active = status.active;
    recording.ready = status.ready;
    recording.start_time = status.start_time.clone();
    recording.terminating = status.terminating;
    // The interim FailureTarget this sync declares (none while the failure waits for the
    // pod expectations or for its pods' deletions).
    if let Some((reason, message)) = failure_target(status).filter(|_| !finished(job)) {
        set_condition(
            &mut recording,
            "FailureTarget",
            "True",
            &reason,
            &message,
            now,
        );
    }
    Some(recording)
}

/// The pods whose finalizer this sync removes: the finished pods it counts or ignores, or
/// every pod of a finished Job, unless an earlier sync's removal is still on its way.
pub(super) fn pods_to_release(job: &Job, counts: &Counts, uncounted: &Uncounted) -> Vec<Arc<Pod>> {
    let was_finished = finished(job);
    let ignored: HashSet<String> = counts.new_ignored.iter().map(|p| pod_uid(p)).collect();
    counts
        .pods
        .iter()
        .filter(|p| {
            let uid = pod_uid(p);
            has_finalizer(p)
                && !counts.released.contains(&uid)
                && (uncounted.succeeded.contains(&uid)
                    || uncounted.failed.contains(&uid)
                    || ignored.contains(&uid)
                    || was_finished)
        })
        .cloned()
        .collect()
}

/// The final status once the finalizers are gone: every finished pod in the counters and
/// none left uncounted; an Indexed Job's succeeded is its completed indexes.
pub(super) fn counted_status(job: &Job, mut status: JobStatus, counts: &Counts) -> JobStatus {
    status.succeeded = Some(counts.succeeded);
    status.failed = Some(counts.failed);
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
    let spec = job.spec.clone().unwrap_or_default();
    if indexes::is_indexed(&spec) {
        status.succeeded = Some(counts.completed_indexes.len() as i32);
        status.completed_indexes = Some(indexes::format(&counts.completed_indexes));
        if indexes::per_index_limit(&spec).is_some() {
            status.failed_indexes = Some(indexes::format(&counts.failed_indexes));
        }
    }
    status
}

/// The podFailurePolicy action that handled each new failure, for the metric.
pub(super) fn policy_actions(job: &Job, counts: &Counts) -> Vec<&'static str> {
    let Some(policy) = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
    else {
        return Vec::new();
    };
    counts
        .new_failed
        .iter()
        .chain(counts.new_ignored.iter())
        .filter_map(
            |pod| match match_pod_failure_policy(Some(policy), pod).action? {
                Action::FailJob => Some("FailJob"),
                Action::Ignore => Some("Ignore"),
                Action::Count => Some("Count"),
                Action::FailIndex => Some("FailIndex"),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::counting::count;
    use crate::controllers::job::fixtures::{
        self, condition, exit_code_policy, job, pod, set_status, spec,
    };

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        let mut names: Vec<String> = pods.iter().map(|p| pod_uid(p)).collect();
        names.sort();
        names
    }

    fn listed(succeeded: &[&str], failed: &[&str]) -> JobStatus {
        let uids = |list: &[&str]| Some(list.iter().map(|s| s.to_string()).collect());
        JobStatus {
            succeeded: Some(3),
            uncounted_terminated_pods: Some(UncountedTerminatedPods {
                succeeded: uids(succeeded),
                failed: uids(failed),
            }),
            ..JobStatus::default()
        }
    }

    #[test]
    fn new_finished_pods_are_recorded_uncounted_before_their_finalizers_go() {
        let mut job = job(spec(2, Some(5)));
        set_status(&mut job, listed(&["s-old"], &[]));
        let pods = vec![
            pod("s-old", "Succeeded").build(),
            pod("s-new", "Succeeded").build(),
            pod("f-new", "Failed").build(),
            pod("s-released", "Succeeded").build(),
            pod("s-gone", "Succeeded").no_finalizer().build(),
            pod("r", "Running").ready().build(),
        ];
        let counts = count(&job, pods, HashSet::from(["s-released".to_string()]));
        let uncounted = uncounted(&counts);
        assert_eq!(uncounted.succeeded, ["s-new", "s-old"]);
        assert_eq!(uncounted.failed, ["f-new"]);

        let mut status = job.status.clone().unwrap();
        set_condition(&mut status, "Complete", "True", "", "", fixtures::now());
        set_pod_counts(&mut status, &counts, &[], 1);
        assert_eq!((status.active, status.ready), (Some(2), Some(1)));
        let recording = recording_status(&job, &status, &counts, &uncounted, fixtures::now())
            .expect("new pods finished");
        assert_eq!(recording.active, Some(2));
        assert_eq!(
            recording.conditions, None,
            "no condition before the pods are counted"
        );
        let listed = recording.uncounted_terminated_pods.unwrap();
        assert_eq!(listed.succeeded.unwrap(), ["s-new", "s-old"]);

        let release = pods_to_release(&job, &counts, &uncounted);
        assert_eq!(names(&release), ["f-new", "s-new", "s-old"]);

        let counted = counted_status(&job, status, &counts);
        assert_eq!((counted.succeeded, counted.failed), (Some(3 + 2), Some(1)));
        assert_eq!(
            counted.uncounted_terminated_pods,
            Some(UncountedTerminatedPods::default())
        );
    }

    #[test]
    fn nothing_new_finished_writes_no_recording() {
        let mut job = job(spec(1, Some(1)));
        set_status(&mut job, listed(&["s-old"], &[]));
        let counts = count(
            &job,
            vec![pod("s-old", "Succeeded").build()],
            HashSet::new(),
        );
        let uncounted = uncounted(&counts);
        let status = job.status.clone().unwrap();
        assert_eq!(
            recording_status(&job, &status, &counts, &uncounted, fixtures::now()),
            None
        );
        assert_eq!(
            names(&pods_to_release(&job, &counts, &uncounted)),
            ["s-old"]
        );
    }

    #[test]
    fn a_finished_job_releases_every_pod() {
        let mut job = job(spec(1, Some(1)));
        set_status(
            &mut job,
            JobStatus {
                conditions: Some(vec![condition("Failed", "True")]),
                ..JobStatus::default()
            },
        );
        let pods = vec![
            pod("r", "Running").deleting().build(),
            pod("s", "Succeeded").build(),
            pod("released", "Failed").build(),
        ];
        let counts = count(&job, pods, HashSet::from(["released".to_string()]));
        let uncounted = uncounted(&counts);
        assert_eq!(uncounted, Uncounted::default(), "nothing more is counted");
        assert_eq!(
            names(&pods_to_release(&job, &counts, &uncounted)),
            ["r", "s"]
        );
    }

    #[test]
    fn a_fail_job_rule_records_the_failure_target_and_ignored_pods_are_released() {
        let mut spec = spec(1, Some(1));
        spec.pod_failure_policy = Some(exit_code_policy(&[("Ignore", 3), ("FailJob", 42)]));
        let job = job(spec);
        let pods = vec![
            pod("fatal", "Failed").exit_code(42).build(),
            pod("ignored", "Failed").exit_code(3).build(),
        ];
        let counts = count(&job, pods, HashSet::new());
        let uncounted = uncounted(&counts);
        let recording = |status: &JobStatus| {
            recording_status(&job, status, &counts, &uncounted, fixtures::now()).unwrap()
        };
        assert_eq!(
            recording(&JobStatus::default()).conditions,
            None,
            "no FailureTarget the sync did not declare"
        );
        let mut status = JobStatus::default();
        set_condition(
            &mut status,
            "FailureTarget",
            "True",
            "PodFailurePolicy",
            "fatal",
            fixtures::now(),
        );
        set_condition(
            &mut status,
            "Failed",
            "True",
            "PodFailurePolicy",
            "fatal",
            fixtures::now(),
        );
        let conditions = recording(&status).conditions.unwrap();
        assert_eq!(
            conditions.len(),
            1,
            "FailureTarget only, Failed comes later"
        );
        assert_eq!(conditions[0].type_, "FailureTarget");
        assert_eq!(conditions[0].reason.as_deref(), Some("PodFailurePolicy"));
        assert_eq!(uncounted.failed, ["fatal"]);
        assert_eq!(
            names(&pods_to_release(&job, &counts, &uncounted)),
            ["fatal", "ignored"]
        );
        assert_eq!(policy_actions(&job, &counts), ["FailJob", "Ignore"]);
    }

    #[test]
    fn an_indexed_job_counts_its_indexes() {
        let mut spec = fixtures::indexed(2, 4);
        let pods = || {
            vec![
                pod("a", "Succeeded").index("0").build(),
                pod("b", "Succeeded").index("0").build(),
                pod("c", "Failed").index("2").build(),
            ]
        };
        let plain = job(spec.clone());
        let counts = count(&plain, pods(), HashSet::new());
        let status = counted_status(&plain, JobStatus::default(), &counts);
        assert_eq!(status.succeeded, Some(1), "indexes, not pods");
        assert_eq!(status.completed_indexes.as_deref(), Some("0"));
        assert_eq!(
            status.failed_indexes, None,
            "only with backoffLimitPerIndex"
        );

        spec.backoff_limit_per_index = Some(0);
        let per_index = job(spec);
        let counts = count(&per_index, pods(), HashSet::new());
        let status = counted_status(&per_index, JobStatus::default(), &counts);
        assert_eq!(status.failed_indexes.as_deref(), Some("2"));
        assert_eq!(status.failed, Some(1));
    }

    #[test]
    fn pod_counts_leave_out_the_deleted() {
        let job = job(spec(3, Some(3)));
        let pods = vec![
            pod("a", "Running").ready().build(),
            pod("b", "Pending").build(),
            pod("t", "Running").deleting().build(),
        ];
        let counts = count(&job, pods, HashSet::new());
        let mut status = JobStatus::default();
        set_pod_counts(&mut status, &counts, &counts.active[..1], 0);
        assert_eq!(
            (status.active, status.ready, status.terminating),
            (Some(1), Some(1), Some(1)),
            "a deleted pod still counts as ready in this sync"
        );
    }
}

//! What a Job's pods say before a sync acts on them (upstream's `syncJobCtx` with
//! `getNewFinishedPods`, `calculateSucceededIndexes` and `calculateFailedIndexes`): the
//! finished pods not counted yet, the counters they lead to, the active and terminating
//! pods, and an Indexed Job's completed and failed indexes. Everything after (the finish
//! decision, the pods to create and delete, the status) reads this one value.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::conditions::finished;
use super::indexes;
use super::pod_failure_policy::{is_pod_failed, match_pod_failure_policy, Action};
use super::TRACKING_FINALIZER;
use crate::pods::{is_pod_active, is_pod_terminating, phase};

/// A Job's pods, sorted and counted for one sync.
pub(super) struct Counts {
    /// The pods the Job owns.
    pub(super) pods: Vec<Arc<Pod>>,
    /// Pods whose finalizer this controller removed and whose update the pod cache does
    /// not show yet: they are counted already, whatever their finalizer says.
    pub(super) released: HashSet<String>,
    /// The UIDs status.uncountedTerminatedPods already holds.
    pub(super) uncounted_succeeded: HashSet<String>,
    pub(super) uncounted_failed: HashSet<String>,
    /// Finished pods holding the finalizer and counted nowhere yet (none once the Job
    /// finished: the pods it deletes on finishing are not failures).
    pub(super) new_succeeded: Vec<Arc<Pod>>,
    /// New failures that count against backoffLimit...
    pub(super) new_failed: Vec<Arc<Pod>>,
    /// ...and those a podFailurePolicy rule ignores (their finalizer still goes).
    pub(super) new_ignored: Vec<Arc<Pod>>,
    /// The message of the first failed pod matching a FailJob rule.
    pub(super) fail_job_message: Option<String>,
    pub(super) active: Vec<Arc<Pod>>,
    /// Pods being deleted that have not finished.
    pub(super) terminating: usize,
    /// The status counters with every finished pod counted.
    pub(super) succeeded: i32,
    pub(super) failed: i32,
    /// An Indexed Job's indexes: from the status, plus those its succeeded pods show.
    pub(super) completed_indexes: BTreeSet<i32>,
    /// With backoffLimitPerIndex: from the status, plus the indexes whose pods failed too
    /// often or matched a FailIndex rule.
    pub(super) failed_indexes: BTreeSet<i32>,
    /// The Job-wide backoff after this sync's new finished pods (set by the sync from
    /// the record it keeps; none in [`count`]).
    pub(super) backoff: super::backoff::BackoffRecord,
    /// How many completed and failed indexes the status listed before this sync.
    pub(super) previous_completed: usize,
    pub(super) previous_failed: usize,
}

pub(super) fn has_finalizer(pod: &Pod) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

pub(super) fn pod_uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn uid_set(uids: Option<&Vec<String>>) -> HashSet<String> {
    uids.cloned().unwrap_or_default().into_iter().collect()
}

/// Counts `pods` for `job`; `released` are the pods whose finalizer removal the pod cache
/// has not shown yet.
pub(super) fn count(job: &Job, pods: Vec<Arc<Pod>>, released: HashSet<String>) -> Counts {
    let spec = job.spec.clone().unwrap_or_default();
    let status = job.status.clone().unwrap_or_default();
    let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
    let uncounted_succeeded = uid_set(uncounted.succeeded.as_ref());
    let uncounted_failed = uid_set(uncounted.failed.as_ref());
    let completions = spec.completions.unwrap_or(0);
    let policy = spec.pod_failure_policy.as_ref();

    let counting = !finished(job);
    let new = |pod: &Pod, uncounted: &HashSet<String>| {
        counting
            && has_finalizer(pod)
            && !uncounted.contains(&pod_uid(pod))
            && !released.contains(&pod_uid(pod))
    };
    let new_succeeded: Vec<Arc<Pod>> = pods
        .iter()
        .filter(|p| phase(p) == "Succeeded" && new(p, &uncounted_succeeded))
        .cloned()
        .collect();
    let (new_failed, new_ignored): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = pods
        .iter()
        .filter(|p| is_pod_failed(p, job) && new(p, &uncounted_failed))
        .cloned()
        .partition(|p| match_pod_failure_policy(policy, p).count_failed);
    let fail_job_message = pods
        .iter()
        .filter(|p| is_pod_failed(p, job))
        .find_map(|p| match_pod_failure_policy(policy, p).fail_job_message);

    let succeeded = status.succeeded.unwrap_or(0)
        + uncounted_succeeded.len() as i32
        + new_succeeded.len() as i32;
    let failed =
        status.failed.unwrap_or(0) + uncounted_failed.len() as i32 + new_failed.len() as i32;

    let listed = |text: Option<&str>| indexes::parse(text.unwrap_or_default(), completions);
    let mut completed_indexes = listed(status.completed_indexes.as_deref());
    if indexes::is_indexed(&spec) {
        completed_indexes.extend(
            pods.iter()
                .filter(|p| phase(p) == "Succeeded")
                .filter_map(|p| indexes::of_pod(p))
                .filter(|i| *i < completions),
        );
    }
    let failed_indexes = match indexes::per_index_limit(&spec) {
        Some(limit) => {
            let listed = listed(status.failed_indexes.as_deref());
            failed_indexes(job, listed, limit, &pods)
        }
        None => BTreeSet::new(),
    };

    Counts {
        terminating: pods.iter().filter(|p| is_pod_terminating(p)).count(),
        active: pods.iter().filter(|p| is_pod_active(p)).cloned().collect(),
        previous_completed: listed(status.completed_indexes.as_deref()).len(),
        previous_failed: listed(status.failed_indexes.as_deref()).len(),
        pods,
        released,
        uncounted_succeeded,
        uncounted_failed,
        new_succeeded,
        new_failed,
        new_ignored,
        fail_job_message,
        backoff: Default::default(),
        succeeded,
        failed,
        completed_indexes,
        failed_indexes,
    }
}

/// With backoffLimitPerIndex, the indexes failed for good (upstream
/// `calculateFailedIndexes`): those the status lists, and those of failed pods still held
/// by the finalizer that failed `limit` times before or matched a FailIndex rule.
fn failed_indexes(
    job: &Job,
    listed: BTreeSet<i32>,
    limit: i32,
    pods: &[Arc<Pod>],
) -> BTreeSet<i32> {
    let completions = job.spec.as_ref().and_then(|s| s.completions).unwrap_or(0);
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref());
    let mut failed = listed;
    for pod in pods.iter().filter(|p| has_finalizer(p)) {
        let Some(index) = indexes::of_pod(pod).filter(|i| *i < completions) else {
            continue;
        };
        if is_pod_failed(pod, job) {
            let outcome = match_pod_failure_policy(policy, pod);
            if outcome.action == Some(Action::FailIndex)
                || (outcome.count_failed && indexes::failure_count(pod) >= limit)
            {
                failed.insert(index);
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::fixtures::{
        condition, exit_code_policy, job, pod, set_status, spec,
    };
    use k8s_openapi::api::batch::v1::{JobStatus, UncountedTerminatedPods};

    fn uids(pods: &[Arc<Pod>]) -> Vec<String> {
        let mut uids: Vec<String> = pods.iter().map(|p| pod_uid(p)).collect();
        uids.sort();
        uids
    }

    #[test]
    fn new_finished_pods_are_those_counted_nowhere_yet() {
        // Cases after upstream's TestGetNewFinshedPods.
        let mut job = job(spec(2, Some(5)));
        set_status(
            &mut job,
            JobStatus {
                succeeded: Some(1),
                failed: Some(2),
                uncounted_terminated_pods: Some(UncountedTerminatedPods {
                    succeeded: Some(vec!["s-uncounted".into()]),
                    failed: Some(vec!["f-uncounted".into()]),
                }),
                ..JobStatus::default()
            },
        );
        let pods = vec![
            pod("s-new", "Succeeded").build(),
            pod("s-uncounted", "Succeeded").build(),
            pod("s-released", "Succeeded").build(),
            pod("s-no-finalizer", "Succeeded").no_finalizer().build(),
            pod("f-new", "Failed").build(),
            pod("f-uncounted", "Failed").build(),
            pod("f-deleted-running", "Running").deleting().build(),
            pod("running", "Running").build(),
            pod("pending", "Pending").build(),
        ];
        let counts = count(&job, pods, HashSet::from(["s-released".to_string()]));
        assert_eq!(uids(&counts.new_succeeded), ["s-new"]);
        assert_eq!(
            uids(&counts.new_failed),
            ["f-deleted-running", "f-new"],
            "a pod deleted before it succeeded is a failure at once"
        );
        assert!(counts.new_ignored.is_empty());
        assert_eq!(counts.succeeded, 1 + 1 + 1, "status + uncounted + new");
        assert_eq!(counts.failed, 2 + 1 + 2);
        assert_eq!(uids(&counts.active), ["pending", "running"]);
        assert_eq!(counts.terminating, 1);
    }

    #[test]
    fn a_finished_job_counts_nothing_new() {
        let mut job = job(spec(1, Some(1)));
        set_status(
            &mut job,
            JobStatus {
                conditions: Some(vec![condition("Failed", "True")]),
                ..JobStatus::default()
            },
        );
        let pods = vec![
            pod("a", "Succeeded").build(),
            pod("b", "Running").deleting().build(),
        ];
        let counts = count(&job, pods, HashSet::new());
        assert!(counts.new_succeeded.is_empty() && counts.new_failed.is_empty());
        assert_eq!((counts.succeeded, counts.failed), (0, 0));
    }

    #[test]
    fn ignored_failures_are_not_counted_and_fail_job_gives_its_message() {
        let mut spec = spec(2, Some(5));
        spec.pod_failure_policy = Some(exit_code_policy(&[("Ignore", 3), ("FailJob", 42)]));
        let job = job(spec);
        let pods = vec![
            pod("ignored", "Failed").exit_code(3).build(),
            pod("counted", "Failed").exit_code(1).build(),
            pod("fatal", "Failed").exit_code(42).build(),
            pod("deleting", "Running").deleting().build(),
        ];
        let counts = count(&job, pods, HashSet::new());
        assert_eq!(uids(&counts.new_failed), ["counted", "fatal"]);
        assert_eq!(uids(&counts.new_ignored), ["ignored"]);
        assert_eq!(counts.failed, 2);
        assert!(counts
            .fail_job_message
            .as_deref()
            .is_some_and(|m| m.contains("exit code 42")));
        assert_eq!(
            counts.terminating, 1,
            "with a policy a deleted pod is not failed before phase Failed"
        );
    }

    #[test]
    fn completed_and_failed_indexes() {
        struct Case {
            name: &'static str,
            listed: (&'static str, &'static str),
            per_index_limit: Option<i32>,
            pods: Vec<Arc<Pod>>,
            completed: Vec<i32>,
            failed: Vec<i32>,
        }
        let cases = [
            Case {
                name: "succeeded pods add their index, in range only (not negative)",
                listed: ("0", ""),
                per_index_limit: None,
                pods: vec![
                    pod("a", "Succeeded").index("2").build(),
                    pod("b", "Succeeded").index("7").build(),
                    pod("c", "Succeeded").index("x").build(),
                    pod("d", "Running").index("3").build(),
                    pod("e", "Succeeded").index("-1").build(),
                ],
                completed: vec![0, 2],
                failed: vec![],
            },
            Case {
                name: "without a per-index limit no index fails",
                listed: ("", "1"),
                per_index_limit: None,
                pods: vec![pod("a", "Failed").index("1").failures(9, 0).build()],
                completed: vec![],
                failed: vec![],
            },
            Case {
                name: "an index fails once a pod failed at the limit (a negative one is none)",
                listed: ("", "4"),
                per_index_limit: Some(1),
                pods: vec![
                    pod("a", "Failed").index("1").failures(1, 0).build(),
                    pod("b", "Failed").index("2").failures(0, 0).build(),
                    pod("c", "Failed")
                        .index("3")
                        .failures(1, 0)
                        .no_finalizer()
                        .build(),
                    pod("d", "Failed").index("-1").failures(1, 0).build(),
                ],
                completed: vec![],
                failed: vec![1, 4],
            },
        ];
        for case in cases {
            let mut spec = spec(2, Some(5));
            spec.completion_mode = Some("Indexed".into());
            spec.backoff_limit_per_index = case.per_index_limit;
            let mut job = job(spec);
            set_status(
                &mut job,
                JobStatus {
                    completed_indexes: Some(case.listed.0.into()),
                    failed_indexes: Some(case.listed.1.into()),
                    ..JobStatus::default()
                },
            );
            let counts = count(&job, case.pods, HashSet::new());
            let completed: Vec<i32> = counts.completed_indexes.iter().copied().collect();
            let failed: Vec<i32> = counts.failed_indexes.iter().copied().collect();
            assert_eq!(completed, case.completed, "{}", case.name);
            assert_eq!(failed, case.failed, "{}", case.name);
            assert_eq!(
                counts.previous_completed,
                usize::from(!case.listed.0.is_empty()),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn a_fail_index_rule_fails_the_index_at_once() {
        let mut spec = spec(2, Some(3));
        spec.completion_mode = Some("Indexed".into());
        spec.backoff_limit_per_index = Some(5);
        spec.pod_failure_policy = Some(exit_code_policy(&[("FailIndex", 7)]));
        let job = job(spec);
        let pods = vec![
            pod("a", "Failed").index("0").exit_code(7).build(),
            pod("b", "Failed").index("1").exit_code(8).build(),
        ];
        let counts = count(&job, pods, HashSet::new());
        assert_eq!(counts.failed_indexes, BTreeSet::from([0]));
    }
}

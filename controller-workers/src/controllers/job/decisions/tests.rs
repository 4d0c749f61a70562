//! Table tests of a Job's finish decision, with cases after upstream's
//! TestControllerSyncJob, TestSyncJobPastDeadline, TestSyncJobWithJobPodFailurePolicy and
//! TestSyncJobWithJobBackoffLimitPerIndex.

use std::collections::HashSet;

use k8s_openapi::api::batch::v1::JobCondition;
use k8s_openapi::api::core::v1::PodSpec;

use super::*;
use crate::controllers::job::backoff::{record_for, BackoffRecord};
use crate::controllers::job::counting::count;
use crate::controllers::job::fixtures::{
    self, condition, exit_code_policy, indexed, job, pod, set_status, spec,
};

fn with(mut spec: JobSpec, change: impl FnOnce(&mut JobSpec)) -> JobSpec {
    change(&mut spec);
    spec
}

fn ago(seconds: i64) -> Time {
    Time(fixtures::now() - SignedDuration::from_secs(seconds))
}

struct Case {
    name: &'static str,
    spec: JobSpec,
    status: JobStatus,
    pods: Vec<Arc<Pod>>,
    satisfied: bool,
    /// Every deletion the plan asks for goes through.
    all_deleted: bool,
    /// The Job has a deletionTimestamp.
    being_deleted: bool,
    /// The reasons of the events recorded, in order.
    events: &'static [&'static str],
    deletes: usize,
    creates: usize,
}

fn case(name: &'static str, spec: JobSpec, pods: Vec<Arc<Pod>>) -> Case {
    Case {
        name,
        spec,
        status: JobStatus::default(),
        pods,
        satisfied: true,
        all_deleted: true,
        being_deleted: false,
        events: &[],
        deletes: 0,
        creates: 0,
    }
}

impl Case {
    fn status(mut self, status: JobStatus) -> Self {
        self.status = status;
        self
    }
    fn unsatisfied(mut self) -> Self {
        self.satisfied = false;
        self
    }
    fn being_deleted(mut self) -> Self {
        self.being_deleted = true;
        self
    }
    fn deletion_fails(mut self) -> Self {
        self.all_deleted = false;
        self
    }
    fn events(mut self, reasons: &'static [&'static str]) -> Self {
        self.events = reasons;
        self
    }
    fn deletes(mut self, count: usize) -> Self {
        self.deletes = count;
        self
    }
    fn creates(mut self, count: usize) -> Self {
        self.creates = count;
        self
    }
}

fn job_with(spec: JobSpec, status: JobStatus) -> Job {
    let mut job = job(spec);
    set_status(&mut job, status);
    job
}

fn decide_for(job: &Job, pods: Vec<Arc<Pod>>, satisfied: bool) -> Plan {
    let mut counts = count(job, pods, HashSet::new());
    // As the sync does, with a controller that sees these pods finish for the first time.
    counts.backoff = record_for(&BackoffRecord::default(), &counts);
    plan(job, &counts, satisfied, fixtures::now())
}

fn decide(spec: JobSpec, status: JobStatus, pods: Vec<Arc<Pod>>, satisfied: bool) -> Plan {
    decide_for(&job_with(spec, status), pods, satisfied)
}

/// The plan, and what it writes once every deletion went through.
fn settled(spec: JobSpec, status: JobStatus, pods: Vec<Arc<Pod>>) -> (Plan, Outcome) {
    let job = job_with(spec, status);
    let plan = decide_for(&job, pods, true);
    let outcome = plan.clone().settle(&job, true, fixtures::now());
    (plan, outcome)
}

fn check(cases: Vec<Case>) {
    for case in cases {
        let mut job = job_with(case.spec, case.status);
        if case.being_deleted {
            job.metadata.deletion_timestamp = Some(Time(fixtures::now()));
        }
        let plan = decide_for(&job, case.pods, case.satisfied);
        assert_eq!(plan.delete.len(), case.deletes, "{}: deleted", case.name);
        assert_eq!(plan.create.len(), case.creates, "{}: created", case.name);
        assert!(
            plan.delete.is_empty() || plan.create.is_empty(),
            "{}: deletes or creates, never both",
            case.name
        );
        let outcome = plan.settle(&job, case.all_deleted, fixtures::now());
        let reasons: Vec<&str> = outcome.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, case.events, "{}: events", case.name);
        let failed = outcome
            .finished
            .as_ref()
            .filter(|(ok, _)| !ok)
            .map(|(_, r)| r);
        let failed_event = outcome.events.first().filter(|e| e.type_ == WARNING);
        assert_eq!(
            failed,
            failed_event.map(|e| &e.reason),
            "{}: a failure is finished with its reason and a warning",
            case.name
        );
    }
}

fn failed(n: i32) -> JobStatus {
    JobStatus {
        failed: Some(n),
        ..JobStatus::default()
    }
}

fn on_failure(spec: JobSpec) -> JobSpec {
    with(spec, |s| {
        s.template.spec = Some(PodSpec {
            restart_policy: Some("OnFailure".into()),
            ..PodSpec::default()
        })
    })
}

fn deadline(spec: JobSpec, seconds: i64) -> JobSpec {
    with(spec, |s| s.active_deadline_seconds = Some(seconds))
}

fn started(seconds_ago: i64) -> JobStatus {
    JobStatus {
        start_time: Some(ago(seconds_ago)),
        ..JobStatus::default()
    }
}

fn per_index(spec: JobSpec, max_failed: Option<i32>) -> JobSpec {
    with(spec, |s| {
        s.backoff_limit_per_index = Some(0);
        s.max_failed_indexes = max_failed;
    })
}

fn conditions(list: Vec<JobCondition>) -> JobStatus {
    JobStatus {
        conditions: Some(list),
        ..JobStatus::default()
    }
}

#[test]
fn failure_reasons_come_in_upstreams_order() {
    let running = || pod("r", "Running").build();
    let fatal = || pod("f", "Failed").exit_code(42).build();
    let fail_job = |s: JobSpec| {
        with(s, |s| {
            s.pod_failure_policy = Some(exit_code_policy(&[("FailJob", 42)]))
        })
    };
    let target = JobCondition {
        reason: Some("PodFailurePolicy".into()),
        message: Some("earlier".into()),
        ..condition("FailureTarget", "True")
    };
    let index_failed = |i: &str| pod(i, "Failed").index(i).build();
    check(vec![
        case("failures at the limit", spec(2, Some(5)), vec![running()])
            .status(failed(6))
            .creates(1),
        case(
            "failures beyond the limit",
            spec(2, Some(5)),
            vec![running()],
        )
        .status(failed(7))
        .events(&["BackoffLimitExceeded"])
        .deletes(1),
        case(
            "a new failure beyond a zero limit",
            with(spec(2, Some(5)), |s| s.backoff_limit = Some(0)),
            vec![pod("f", "Failed").build()],
        )
        .events(&["BackoffLimitExceeded"]),
        case(
            "OnFailure restarts reach the limit",
            on_failure(with(spec(1, Some(1)), |s| s.backoff_limit = Some(2))),
            vec![pod("r", "Running").restarts(2).build()],
        )
        .events(&["BackoffLimitExceeded"])
        .deletes(1),
        case(
            "OnFailure restarts below the limit",
            on_failure(with(spec(1, Some(1)), |s| s.backoff_limit = Some(3))),
            vec![pod("r", "Running").restarts(2).build()],
        ),
        case(
            "with a zero limit one restart is too many",
            on_failure(with(spec(1, Some(1)), |s| s.backoff_limit = Some(0))),
            vec![pod("r", "Running").restarts(1).build()],
        )
        .events(&["BackoffLimitExceeded"])
        .deletes(1),
        case(
            "restarts of a finished pod do not count",
            on_failure(with(spec(1, Some(2)), |s| s.backoff_limit = Some(0))),
            vec![pod("s", "Succeeded").restarts(1).build()],
        )
        .creates(1),
        // Upstream deletes a failing Job's active pods at once, but declares it failed
        // only once its expectations are met and every deletion went through.
        case(
            "failing with expectations pending",
            spec(2, Some(5)),
            vec![running()],
        )
        .status(failed(7))
        .unsatisfied()
        .deletes(1),
        case(
            "failing when a deletion fails",
            spec(2, Some(5)),
            vec![running()],
        )
        .status(failed(7))
        .deletion_fails()
        .deletes(1),
        case(
            "deadline passed",
            deadline(spec(1, Some(1)), 10),
            vec![running()],
        )
        .status(started(11))
        .events(&["DeadlineExceeded"])
        .deletes(1),
        case(
            "backoff limit before deadline",
            deadline(spec(1, Some(1)), 10),
            vec![running()],
        )
        .status(JobStatus {
            failed: Some(7),
            ..started(11)
        })
        .events(&["BackoffLimitExceeded"])
        .deletes(1),
        case(
            "a FailJob rule",
            fail_job(spec(1, Some(1))),
            vec![fatal(), running()],
        )
        .events(&["PodFailurePolicy"])
        .deletes(1),
        case(
            "a FailJob rule before the backoff limit",
            fail_job(spec(1, Some(1))),
            vec![fatal()],
        )
        .status(failed(7))
        .events(&["PodFailurePolicy"]),
        case(
            "a FailureTarget set before wins",
            spec(1, Some(1)),
            vec![running()],
        )
        .status(JobStatus {
            failed: Some(7),
            ..conditions(vec![target.clone()])
        })
        .events(&["PodFailurePolicy"])
        .deletes(1),
        case(
            "maxFailedIndexes exceeded",
            per_index(indexed(2, 4), Some(0)),
            vec![index_failed("0"), running()],
        )
        .events(&["MaxFailedIndexesExceeded"])
        .deletes(1),
        case(
            "maxFailedIndexes reached only",
            per_index(indexed(2, 4), Some(1)),
            vec![index_failed("0")],
        )
        .creates(2),
        case(
            "failed indexes once none is left to run",
            per_index(indexed(2, 2), None),
            vec![index_failed("0"), pod("s", "Succeeded").index("1").build()],
        )
        .events(&["FailedIndexes"]),
        case(
            "failed indexes wait for the others",
            per_index(indexed(1, 3), None),
            vec![index_failed("0"), pod("r", "Running").index("1").build()],
        ),
    ]);
}

#[test]
fn completion_suspension_and_expectations() {
    let suspended = JobCondition {
        reason: Some("JobSuspended".into()),
        ..condition("Suspended", "True")
    };
    let suspend = |s: JobSpec| with(s, |s| s.suspend = Some(true));
    let pods_running = |n: usize| -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| pod(&format!("r{i}"), "Running").build())
            .collect()
    };
    let succeeded = |n: usize| -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| pod(&format!("s{i}"), "Succeeded").build())
            .collect()
    };
    check(vec![
        case("job finish", spec(2, Some(5)), succeeded(5)).events(&["Completed"]),
        case(
            "completions reached with a pod left",
            spec(2, Some(2)),
            [succeeded(2), vec![pod("r", "Running").build()]].concat(),
        )
        .events(&["Completed"])
        .deletes(1),
        case("work queue all finished", spec(2, None), succeeded(2)).events(&["Completed"]),
        case(
            "work queue finished despite a failure",
            spec(2, None),
            [succeeded(1), vec![pod("f", "Failed").build()]].concat(),
        )
        .events(&["Completed"]),
        case(
            "indexed job completed",
            indexed(2, 3),
            vec![
                pod("a", "Succeeded").index("0").build(),
                pod("b", "Failed").index("1").build(),
                pod("c", "Succeeded").index("1").build(),
                pod("d", "Succeeded").index("2").build(),
            ],
        )
        .events(&["Completed"]),
        case(
            "suspending",
            suspend(spec(2, Some(4))),
            vec![pod("a", "Running").build(), pod("b", "Running").build()],
        )
        .events(&["Suspended"])
        .deletes(2),
        // Upstream's "suspending a job with unsatisfied expectations": nothing is
        // deleted, and the Job is not suspended yet.
        case(
            "suspending with expectations pending",
            suspend(spec(2, Some(4))),
            pods_running(3),
        )
        .unsatisfied(),
        case(
            "suspending when a deletion fails",
            suspend(spec(2, Some(4))),
            pods_running(2),
        )
        .deletion_fails()
        .events(&["Suspended"])
        .deletes(2),
        case(
            "completions reached while suspended",
            suspend(spec(2, Some(2))),
            [succeeded(2), pods_running(1)].concat(),
        )
        .events(&["Completed"])
        .deletes(1),
        case(
            "completions reached with expectations pending and a pod left",
            spec(2, Some(2)),
            [succeeded(2), pods_running(1)].concat(),
        )
        .unsatisfied(),
        case(
            "completions reached with expectations pending and no pod left",
            spec(2, Some(2)),
            succeeded(2),
        )
        .unsatisfied()
        .events(&["Completed"]),
        case(
            "completions reached but a pod could not be deleted",
            spec(2, Some(2)),
            [succeeded(2), pods_running(1)].concat(),
        )
        .deletion_fails()
        .deletes(1),
        case(
            "a Job being deleted creates no pods",
            spec(2, Some(4)),
            vec![],
        )
        .being_deleted(),
        case("already suspended", suspend(spec(2, Some(4))), vec![])
            .status(conditions(vec![suspended.clone()])),
        case("resuming", spec(2, Some(4)), vec![])
            .status(conditions(vec![suspended]))
            .events(&["Resumed"])
            .creates(2),
        case("expectations pending", spec(2, Some(4)), vec![]).unsatisfied(),
        case(
            "a finished Job decides nothing",
            spec(2, Some(4)),
            vec![pod("a", "Running").build()],
        )
        .status(JobStatus {
            failed: Some(100),
            ..conditions(vec![condition("Complete", "True")])
        }),
    ]);
}

#[test]
fn start_time_and_deadline() {
    let now = fixtures::now();
    let plan = decide(spec(1, Some(1)), JobStatus::default(), vec![], true);
    assert_eq!(
        plan.status.start_time,
        Some(Time(now)),
        "a first sync starts the Job"
    );
    assert_eq!(plan.requeue_after, None);

    let suspended = with(deadline(spec(1, Some(1)), 10), |s| s.suspend = Some(true));
    let plan = decide(suspended, JobStatus::default(), vec![], true);
    assert_eq!(
        plan.status.start_time, None,
        "a suspended Job has not started"
    );

    let plan = decide(deadline(spec(1, Some(1)), 10), started(4), vec![], true);
    assert_eq!(plan.status.start_time, Some(ago(4)));
    assert_eq!(
        plan.requeue_after,
        Some(Duration::from_secs(6)),
        "again at the deadline"
    );

    let suspended = with(deadline(spec(1, Some(1)), 10), |s| s.suspend = Some(true));
    let (plan, outcome) = settled(suspended, started(100), vec![]);
    assert!(outcome
        .events
        .iter()
        .all(|e| e.reason != "DeadlineExceeded"));
    assert_eq!(plan.requeue_after, None, "no deadline runs while suspended");

    // Resuming restarts the clock; the deadline of this sync still counts from before.
    let resumed = conditions(vec![condition("Suspended", "True")]);
    let status = JobStatus {
        start_time: Some(ago(4)),
        ..resumed
    };
    let (plan, outcome) = settled(deadline(spec(1, Some(1)), 10), status, vec![]);
    assert_eq!(outcome.status.start_time, Some(Time(now)));
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(6)));

    let failed_now = pod("f", "Failed").finished_at(now).build();
    let plan = decide(
        deadline(spec(1, Some(1)), 60),
        started(1),
        vec![failed_now],
        true,
    );
    assert_eq!(plan.backoff, Some(Duration::from_secs(10)));
    assert_eq!(
        plan.requeue_after,
        Some(Duration::from_secs(10)),
        "the backoff ends before the deadline"
    );
}

#[test]
fn conditions_a_finish_sets() {
    let now = fixtures::now();
    let find = |outcome: &Outcome, type_: &str| {
        outcome
            .status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .cloned()
    };
    let fail_job = with(spec(1, Some(1)), |s| {
        s.pod_failure_policy = Some(exit_code_policy(&[("FailJob", 42)]))
    });
    let (_, outcome) = settled(
        fail_job,
        JobStatus::default(),
        vec![pod("f", "Failed").exit_code(42).build()],
    );
    let target = find(&outcome, "FailureTarget").expect("the interim FailureTarget");
    let failed = find(&outcome, "Failed").expect("Failed");
    assert_eq!(target.reason, failed.reason);
    assert_eq!(failed.reason.as_deref(), Some("PodFailurePolicy"));
    assert_eq!(failed.message, Some(outcome.events[0].message.clone()));
    assert_eq!(outcome.finished, Some((false, "PodFailurePolicy".into())));
    assert_eq!(outcome.status.completion_time, None);

    let (_, outcome) = settled(
        spec(1, Some(1)),
        JobStatus::default(),
        vec![pod("s", "Succeeded").build()],
    );
    let complete = find(&outcome, "Complete").expect("Complete");
    assert_eq!((complete.status.as_str(), complete.reason), ("True", None));
    assert_eq!(outcome.status.completion_time, Some(Time(now)));
    assert_eq!(outcome.finished, Some((true, String::new())));

    let resumed = conditions(vec![condition("Suspended", "True")]);
    let (_, outcome) = settled(spec(1, Some(1)), resumed, vec![]);
    let suspended = find(&outcome, "Suspended").expect("Suspended");
    assert_eq!(suspended.status, "False");
    assert_eq!(suspended.reason.as_deref(), Some("JobResumed"));
    assert_eq!(outcome.finished, None);

    // A finish that is not declared leaves no condition behind.
    let job = job_with(
        with(spec(1, Some(1)), |s| s.suspend = Some(true)),
        JobStatus::default(),
    );
    let plan = decide_for(
        &job,
        vec![pod("s", "Succeeded").build(), pod("r", "Running").build()],
        true,
    );
    assert_eq!(plan.finish, Some(Finish::Complete));
    let outcome = plan.settle(&job, false, now);
    assert_eq!(find(&outcome, "Complete"), None);
    assert_eq!(outcome.status.completion_time, None);
    assert_eq!(
        find(&outcome, "Suspended").map(|c| c.status),
        Some("True".into()),
        "a suspended Job that did not complete is suspended still"
    );
}

#[test]
fn at_most_500_pods_are_deleted_at_once_but_a_suspended_job_loses_all() {
    let pods = || -> Vec<Arc<Pod>> {
        (0..600)
            .map(|i| pod(&format!("r{i}"), "Running").build())
            .collect()
    };
    let plan = decide(spec(1, Some(1000)), JobStatus::default(), pods(), true);
    assert_eq!(plan.delete.len(), 500, "beyond parallelism: 500 a sync");
    // Upstream limits only the removal of excess pods; a suspended Job's, like a
    // failing Job's, all go at once.
    let plan = decide(
        with(spec(1, Some(1)), |s| s.suspend = Some(true)),
        JobStatus::default(),
        pods(),
        true,
    );
    assert_eq!(plan.delete.len(), 600);
}

/// The job_sync metrics' action label, as upstream's syncJob sets it.
#[test]
fn the_sync_action() {
    let running = || vec![pod("r", "Running").build()];
    let suspended = with(spec(1, Some(2)), |s| s.suspend = Some(true));
    let cases = [
        (
            "expectations pending",
            spec(1, Some(2)),
            JobStatus::default(),
            vec![],
            false,
            "reconciling",
        ),
        (
            "failing",
            spec(1, Some(2)),
            failed(7),
            running(),
            true,
            "reconciling",
        ),
        (
            "suspended, nothing to delete",
            suspended.clone(),
            JobStatus::default(),
            vec![],
            true,
            "pods_deleted",
        ),
        (
            "suspended",
            suspended,
            JobStatus::default(),
            running(),
            true,
            "pods_deleted",
        ),
        (
            "creating",
            spec(1, Some(2)),
            JobStatus::default(),
            vec![],
            true,
            "pods_created",
        ),
        (
            "nothing to do",
            spec(1, Some(2)),
            JobStatus::default(),
            running(),
            true,
            "tracking",
        ),
    ];
    for (name, spec, status, pods, satisfied, action) in cases {
        assert_eq!(
            decide(spec, status, pods, satisfied).action,
            action,
            "{name}"
        );
    }
}

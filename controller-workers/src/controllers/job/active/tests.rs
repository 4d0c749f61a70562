//! Table tests of the active-pod changes, with cases after upstream's TestControllerSyncJob.

use super::*;
use crate::controllers::job::backoff::{record_for, BackoffRecord};
use crate::controllers::job::counting::count;
use crate::controllers::job::fixtures::{self, indexed, job, pod, spec};
use crate::meta::ResourceNames;
use k8s_openapi::jiff::SignedDuration;
use std::collections::HashSet;

struct Case {
    name: &'static str,
    spec: JobSpec,
    pods: Vec<Arc<Pod>>,
    delete: &'static [&'static str],
    create: Vec<Option<i32>>,
    backoff: Option<u64>,
}

fn case(name: &'static str, spec: JobSpec, pods: Vec<Arc<Pod>>) -> Case {
    Case {
        name,
        spec,
        pods,
        delete: &[],
        create: vec![],
        backoff: None,
    }
}

impl Case {
    fn deletes(mut self, names: &'static [&'static str]) -> Self {
        self.delete = names;
        self
    }
    fn creates(mut self, count: usize) -> Self {
        self.create = vec![None; count];
        self
    }
    fn creates_indexes(mut self, indexes: &[i32]) -> Self {
        self.create = indexes.iter().copied().map(Some).collect();
        self
    }
    fn backs_off(mut self, seconds: u64) -> Self {
        self.backoff = Some(seconds);
        self
    }
}

fn pods(prefix: &str, phase: &str, n: usize) -> Vec<Arc<Pod>> {
    (0..n)
        .map(|i| pod(&format!("{prefix}{i}"), phase).on_node().build())
        .collect()
}

fn terminating(n: usize) -> Vec<Arc<Pod>> {
    (0..n)
        .map(|i| pod(&format!("t{i}"), "Running").deleting().build())
        .collect()
}

fn with(mut spec: JobSpec, change: impl FnOnce(&mut JobSpec)) -> JobSpec {
    change(&mut spec);
    spec
}

fn replace_failed(spec: JobSpec) -> JobSpec {
    with(spec, |s| s.pod_replacement_policy = Some("Failed".into()))
}

fn at_index(items: &[(&str, &str, &str)]) -> Vec<Arc<Pod>> {
    items
        .iter()
        .map(|(name, index, phase)| pod(name, phase).index(index).on_node().build())
        .collect()
}

fn check(cases: Vec<Case>) {
    let now = fixtures::now();
    for case in cases {
        let job = job(case.spec);
        let mut counts = count(&job, case.pods, HashSet::new());
        // As the sync does, with a controller that sees these pods finish for the first time.
        counts.backoff = record_for(&BackoffRecord::default(), &counts);
        let changes = manage(&job, &counts, now);
        let mut deleted: Vec<String> = changes
            .delete
            .iter()
            .map(|p| p.name_str().to_string())
            .collect();
        deleted.sort();
        assert_eq!(deleted, case.delete, "{}: deleted", case.name);
        assert_eq!(changes.create, case.create, "{}: created", case.name);
        let backoff = case.backoff.map(Duration::from_secs);
        assert_eq!(changes.backoff, backoff, "{}: backoff", case.name);
        let action = if !changes.delete.is_empty() {
            "pods_deleted"
        } else if !changes.create.is_empty() || changes.backoff.is_some() {
            "pods_created"
        } else {
            "tracking"
        };
        assert_eq!(changes.action, action, "{}: action", case.name);
    }
}

/// NonIndexed cases after upstream's TestControllerSyncJob.
#[test]
fn nonindexed_jobs_keep_parallelism_within_the_remaining_completions() {
    let unscheduled = pod("unscheduled", "Pending").build();
    let failed_now = pod("failed", "Failed").finished_at(fixtures::now()).build();
    check(vec![
        case("job start", spec(2, Some(5)), vec![]).creates(2),
        case("work queue start", spec(2, None), vec![]).creates(2),
        case("pending pods", spec(2, Some(5)), pods("p", "Pending", 2)),
        case("correct number", spec(3, Some(5)), pods("r", "Running", 3)),
        case(
            "too few active pods",
            spec(2, Some(5)),
            [pods("r", "Running", 1), pods("s", "Succeeded", 1)].concat(),
        )
        .creates(1),
        case(
            "too many active pods: the unscheduled one goes first",
            spec(2, Some(5)),
            [pods("r", "Running", 2), vec![unscheduled]].concat(),
        )
        .deletes(&["unscheduled"]),
        case(
            "more active pods than remaining completions",
            spec(3, Some(4)),
            [pods("r", "Running", 3), pods("s", "Succeeded", 2)].concat(),
        )
        .deletes(&["r0"]),
        case(
            "parallelism zero",
            spec(0, Some(4)),
            pods("r", "Running", 2),
        )
        .deletes(&["r0", "r1"]),
        case(
            "completions reached",
            spec(2, Some(2)),
            pods("s", "Succeeded", 2),
        ),
        // Upstream's "WQ job finishing": once one succeeded the others run on until they
        // end (the Job completes then), none deleted, none added.
        case(
            "work queue after a success",
            spec(2, None),
            [pods("r", "Running", 1), pods("s", "Succeeded", 1)].concat(),
        ),
        case(
            "terminating pods hold their place with podReplacementPolicy Failed",
            replace_failed(spec(1, Some(1))),
            [pods("r", "Running", 2), terminating(4)].concat(),
        )
        .deletes(&["r0"]),
        case(
            "without it a terminating pod is a failure at once, and backs off",
            spec(1, None),
            terminating(1),
        )
        .backs_off(10),
        case(
            "a terminating pod is not replaced with Failed",
            replace_failed(spec(1, None)),
            terminating(1),
        ),
        case(
            "a failure just now backs off",
            spec(1, Some(1)),
            vec![failed_now],
        )
        .backs_off(10),
        case("at most 500 at once", spec(1000, Some(2000)), vec![]).creates(500),
    ]);
}

/// Indexed cases after upstream's TestControllerSyncJob.
#[test]
fn indexed_jobs_run_one_pod_per_pending_index() {
    let now = fixtures::now();
    let per_index = |limit| with(indexed(2, 4), |s| s.backoff_limit_per_index = Some(limit));
    let failed_at = |name: &str, index: &str, ago: i64| {
        pod(name, "Failed")
            .index(index)
            .finished_at(now - SignedDuration::from_secs(ago))
            .build()
    };
    check(vec![
        case("indexed job start", indexed(2, 5), vec![]).creates_indexes(&[0, 1]),
        case(
            "a terminating pod without index holds a place with Failed",
            replace_failed(indexed(2, 5)),
            vec![pod("t", "Running").deleting().build()],
        )
        .creates_indexes(&[0]),
        case(
            "a terminating pod holds its index with Failed",
            replace_failed(indexed(2, 5)),
            vec![pod("t", "Running").index("0").deleting().build()],
        )
        .creates_indexes(&[1]),
        case(
            "repeated completed index",
            indexed(2, 3),
            at_index(&[
                ("a", "0", "Succeeded"),
                ("b", "1", "Succeeded"),
                ("c", "1", "Succeeded"),
            ]),
        )
        .creates_indexes(&[2]),
        case(
            "some running and completed pods",
            indexed(8, 20),
            at_index(&[
                ("a", "0", "Running"),
                ("b", "2", "Succeeded"),
                ("c", "3", "Pending"),
                ("d", "4", "Succeeded"),
                ("e", "5", "Succeeded"),
                ("f", "7", "Succeeded"),
                ("g", "8", "Succeeded"),
                ("h", "9", "Succeeded"),
            ]),
        )
        .creates_indexes(&[1, 6, 10, 11, 12, 13]),
        case(
            "some failed pods",
            indexed(3, 4),
            at_index(&[
                ("a", "0", "Failed"),
                ("b", "1", "Pending"),
                ("c", "2", "Failed"),
            ]),
        )
        .creates_indexes(&[0, 2]),
        case(
            "pods without a valid index are deleted",
            indexed(2, 5),
            [
                at_index(&[
                    ("bad-running", "invalid", "Running"),
                    ("bad-done", "invalid", "Succeeded"),
                    ("bad-pending", "invalid", "Pending"),
                    ("a", "0", "Succeeded"),
                    ("b", "1", "Running"),
                    ("c", "2", "Running"),
                ]),
                pods("unindexed", "Running", 1),
            ]
            .concat(),
        )
        .deletes(&["bad-pending", "bad-running", "unindexed0"]),
        // Upstream's "indexed job repeated indexes": a sync that deletes creates
        // nothing (indexes 3 and 4 come in the next one); of index 2's pods the running
        // one, removed last, is kept.
        case(
            "repeated indexes: delete, create nothing",
            indexed(5, 5),
            at_index(&[
                ("bad", "invalid", "Running"),
                ("a", "0", "Succeeded"),
                ("b", "1", "Running"),
                ("c", "2", "Running"),
                ("d", "2", "Pending"),
            ]),
        )
        .deletes(&["bad", "d"]),
        case(
            "of an index's pods the ready one is kept, whatever their order",
            indexed(2, 2),
            vec![
                pod("ready", "Running").index("0").on_node().ready().build(),
                pod("late", "Running").index("0").on_node().build(),
                pod("other", "Running").index("1").on_node().build(),
            ],
        )
        .deletes(&["late"]),
        // Upstream's "indexed job with indexes outside of range".
        case(
            "indexes beyond completions are deleted",
            indexed(2, 5),
            at_index(&[
                ("a", "0", "Succeeded"),
                ("b", "5", "Running"),
                ("c", "6", "Succeeded"),
                ("d", "7", "Pending"),
                ("e", "8", "Failed"),
            ]),
        )
        .deletes(&["b", "d"]),
        case(
            "a negative index is no index",
            indexed(2, 5),
            at_index(&[("neg", "-1", "Running"), ("a", "0", "Running")]),
        )
        .deletes(&["neg"]),
        case(
            "and is no completed index either",
            indexed(1, 2),
            at_index(&[("neg", "-1", "Succeeded"), ("a", "0", "Succeeded")]),
        )
        .creates_indexes(&[1]),
        case(
            "beyond parallelism, the pods removed first go, not the highest indexes",
            indexed(1, 5),
            vec![
                pod("a", "Running").index("0").on_node().build(),
                pod("b", "Running").index("3").on_node().ready().build(),
                pod("c", "Pending").index("4").on_node().build(),
            ],
        )
        .deletes(&["a", "c"]),
        case(
            "an active pod of a completed index is kept while wanted",
            indexed(3, 4),
            at_index(&[
                ("done", "0", "Succeeded"),
                ("late", "0", "Running"),
                ("b", "1", "Running"),
            ]),
        )
        .creates_indexes(&[2]),
        case(
            "without a per-index limit the whole Job backs off",
            indexed(2, 4),
            vec![failed_at("f", "0", 1)],
        )
        .backs_off(9),
        case(
            "with one, only the failed index waits",
            per_index(3),
            vec![failed_at("f", "0", 1)],
        )
        .creates_indexes(&[1]),
        case(
            "and when every wanted index waits, the soonest",
            with(per_index(3), |s| s.parallelism = Some(1)),
            vec![failed_at("f", "0", 4)],
        )
        .backs_off(6),
        case(
            "a failed index is not recreated",
            per_index(0),
            vec![failed_at("f", "0", 100)],
        )
        .creates_indexes(&[1, 2]),
    ]);
}

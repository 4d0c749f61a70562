//! The pods a running Job should have (upstream `manageJob`, `activePodsForRemoval`,
//! `appendDuplicatedIndexPodsForRemoval` and `firstPendingIndexes`): which active pods to
//! delete or, in a sync that deletes none, how many to create, for the NonIndexed and
//! Indexed modes, held back while the Job, or with backoffLimitPerIndex each index, backs
//! off after failures.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::backoff::{index_backoff, job_backoff};
use super::counting::Counts;
use super::indexes;
use super::order::sort_for_removal;
use super::pod_failure_policy::only_replace_failed_pods;
use crate::pods::is_pod_terminating;

/// At most this many pods are created or deleted in one sync (upstream).
pub(super) const MAX_CREATE_DELETE_PER_SYNC: usize = 500;

/// What a running Job's sync does to its pods: it deletes or creates, never both.
#[derive(Debug)]
pub(super) struct PodChanges {
    pub(super) delete: Vec<Arc<Pod>>,
    /// One pod to create per entry: its completion index, `None` in a NonIndexed Job.
    pub(super) create: Vec<Option<i32>>,
    /// Pods are wanted but the Job (or every wanted index) backs off this long yet.
    pub(super) backoff: Option<Duration>,
    /// The sync's action as the job_sync metrics label it: pods_deleted, pods_created
    /// (also when pods are wanted but wait for a backoff) or tracking.
    pub(super) action: &'static str,
}

impl PodChanges {
    fn new(action: &'static str) -> PodChanges {
        PodChanges {
            delete: Vec::new(),
            create: Vec::new(),
            backoff: None,
            action,
        }
    }
}

/// How many pods the Job wants active: parallelism, within the completions left (in an
/// Indexed Job the indexes not completed); a work queue after a success keeps what runs.
fn wanted_active(spec: &JobSpec, counts: &Counts) -> usize {
    let parallelism = spec.parallelism.unwrap_or(1).max(0) as usize;
    let succeeded = if indexes::is_indexed(spec) {
        counts.completed_indexes.len() as i32
    } else {
        counts.succeeded
    };
    match spec.completions {
        None if succeeded > 0 => counts.active.len(),
        None => parallelism,
        Some(n) => parallelism.min(n.saturating_sub(succeeded).max(0) as usize),
    }
}

/// The changes that bring a running Job's active pods to what it wants. A sync that
/// deletes pods creates none (upstream's `manageJob` returns after deleting).
pub(super) fn manage(job: &Job, counts: &Counts, now: Timestamp) -> PodChanges {
    let no_spec = JobSpec::default();
    let spec = job.spec.as_ref().unwrap_or(&no_spec);
    let active = counts.active.len();
    let want = wanted_active(spec, counts);
    let mut delete = for_removal(spec, &counts.active, active.saturating_sub(want));
    if !delete.is_empty() {
        delete.truncate(MAX_CREATE_DELETE_PER_SYNC);
        return PodChanges {
            delete,
            ..PodChanges::new("pods_deleted")
        };
    }
    // Pods still terminating hold their place until they have failed when only failed
    // pods are replaced.
    let held = if only_replace_failed_pods(job) {
        counts.terminating
    } else {
        0
    };
    let missing = want.saturating_sub(active + held);
    if missing == 0 {
        return PodChanges::new("tracking");
    }
    let per_index = indexes::per_index_limit(spec).is_some();
    if !per_index {
        if let Some(wait) = job_backoff(counts, now) {
            return PodChanges {
                backoff: Some(wait),
                ..PodChanges::new("pods_created")
            };
        }
    }
    let missing = missing.min(MAX_CREATE_DELETE_PER_SYNC);
    if !indexes::is_indexed(spec) {
        return PodChanges {
            create: vec![None; missing],
            ..PodChanges::new("pods_created")
        };
    }
    let pending = first_pending_indexes(job, counts, missing);
    let (create, backoff) = if per_index {
        index_backoff(&pending, job, &counts.pods, now)
    } else {
        (pending, None)
    };
    PodChanges {
        create: create.into_iter().map(Some).collect(),
        backoff,
        ..PodChanges::new("pods_created")
    }
}

/// The active pods to delete (upstream `activePodsForRemoval`): in an Indexed Job those
/// without a valid index and, of the pods sharing an index, all but the one removed last;
/// then, while fewer than `at_least`, the pods left in removal order.
pub(super) fn for_removal(spec: &JobSpec, active: &[Arc<Pod>], at_least: usize) -> Vec<Arc<Pod>> {
    let (mut remove, mut left) = if indexes::is_indexed(spec) {
        duplicates_for_removal(active, spec.completions.unwrap_or(0))
    } else {
        (Vec::new(), active.to_vec())
    };
    if remove.len() < at_least {
        sort_for_removal(&mut left);
        let more = (at_least - remove.len()).min(left.len());
        remove.extend(left.drain(..more));
    }
    remove
}

/// Splits an Indexed Job's active pods into those to remove (no valid index, an index
/// beyond completions, or not the pod of its index sorted last for removal) and the one
/// pod kept per index.
fn duplicates_for_removal(active: &[Arc<Pod>], completions: i32) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let mut remove = Vec::new();
    let mut by_index: BTreeMap<i32, Vec<Arc<Pod>>> = BTreeMap::new();
    for pod in active {
        match indexes::of_pod(pod).filter(|i| *i < completions) {
            Some(index) => by_index.entry(index).or_default().push(pod.clone()),
            None => remove.push(pod.clone()),
        }
    }
    let mut left = Vec::new();
    for mut pods in by_index.into_values() {
        sort_for_removal(&mut pods);
        if let Some(kept) = pods.pop() {
            left.push(kept);
        }
        remove.extend(pods);
    }
    (remove, left)
}

/// The lowest `count` indexes below completions that no pod covers: not completed, not
/// failed, no active pod, and with only failed pods replaced no terminating pod either.
fn first_pending_indexes(job: &Job, counts: &Counts, count: usize) -> Vec<i32> {
    let completions = job.spec.as_ref().and_then(|s| s.completions).unwrap_or(0);
    let mut covered: BTreeSet<i32> = counts
        .active
        .iter()
        .filter_map(|p| indexes::of_pod(p))
        .collect();
    if only_replace_failed_pods(job) {
        covered.extend(
            counts
                .pods
                .iter()
                .filter(|p| is_pod_terminating(p))
                .filter_map(|p| indexes::of_pod(p)),
        );
    }
    (0..completions)
        .filter(|i| {
            !covered.contains(i)
                && !counts.completed_indexes.contains(i)
                && !counts.failed_indexes.contains(i)
        })
        .take(count)
        .collect()
}

#[cfg(test)]
mod tests;

//! The pods a running Job should have (upstream `manageJob`, `firstPendingIndexes`,
//! `activePodsForRemoval`): how many to create or which active pods to delete, for the
//! NonIndexed and Indexed modes, held back while the Job, or with backoffLimitPerIndex
//! each index, backs off after failures.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::backoff::{index_backoff, job_backoff};
use super::counting::Counts;
use super::indexes;
use super::pod_failure_policy::only_replace_failed_pods;
use crate::pods::{compare_for_deletion, is_pod_terminating};

/// At most this many pods are created or deleted in one sync (upstream).
pub(super) const MAX_CREATE_DELETE_PER_SYNC: usize = 500;

/// What a running Job's sync does to its pods.
#[derive(Debug, Default)]
pub(super) struct PodChanges {
    pub(super) delete: Vec<Arc<Pod>>,
    /// One pod to create per entry: its completion index, `None` in a NonIndexed Job.
    pub(super) create: Vec<Option<i32>>,
    /// Pods are wanted but the Job (or every wanted index) backs off this long yet.
    pub(super) backoff: Option<Duration>,
}

/// The changes that bring a running Job's active pods to what it wants.
pub(super) fn manage(job: &Job, counts: &Counts, now: Timestamp) -> PodChanges {
    let no_spec = JobSpec::default();
    let spec = job.spec.as_ref().unwrap_or(&no_spec);
    let parallelism = spec.parallelism.unwrap_or(1).max(0) as usize;
    // Pods still terminating hold their place until they have failed when only failed
    // pods are replaced.
    let held = if only_replace_failed_pods(job) {
        counts.terminating
    } else {
        0
    };
    let mut changes = PodChanges::default();
    if indexes::is_indexed(spec) {
        let terminating: BTreeSet<i32> = if held > 0 {
            counts
                .pods
                .iter()
                .filter(|p| is_pod_terminating(p))
                .filter_map(|p| indexes::of_pod(p))
                .collect()
        } else {
            BTreeSet::new()
        };
        let (delete, create) = indexed_changes(spec, counts, &terminating, parallelism, held);
        changes.delete = delete;
        changes.create = create.into_iter().map(Some).collect();
    } else {
        let active = counts.active.len();
        let want = match spec.completions {
            // A work queue: once a pod succeeded the others finish on their own, and
            // none is added.
            None if counts.succeeded > 0 => active,
            None => parallelism,
            Some(n) => parallelism.min((n - counts.succeeded).max(0) as usize),
        };
        if active + held < want {
            changes.create = vec![None; want - active - held];
        } else if active > want {
            changes.delete = first_to_delete(&counts.active, active - want, now);
        }
    }
    if changes.create.is_empty() {
        return changes;
    }
    if indexes::per_index_limit(spec).is_some() {
        let wanted: Vec<i32> = changes.create.iter().flatten().copied().collect();
        let (ready, wait) = index_backoff(&wanted, job, &counts.pods, now);
        changes.create = ready.into_iter().map(Some).collect();
        changes.backoff = wait;
    } else if let Some(wait) = job_backoff(counts, now) {
        changes.create.clear();
        changes.backoff = Some(wait);
    }
    changes.create.truncate(MAX_CREATE_DELETE_PER_SYNC);
    changes
}

/// The `count` active pods upstream's ranking deletes first (unscheduled, pending and
/// not ready before the rest).
fn first_to_delete(active: &[Arc<Pod>], count: usize, now: Timestamp) -> Vec<Arc<Pod>> {
    let mut ranked: Vec<(Arc<Pod>, usize)> = active.iter().map(|p| (p.clone(), 0)).collect();
    ranked.sort_by(|a, b| compare_for_deletion((&a.0, a.1), (&b.0, b.1), now));
    ranked.into_iter().take(count).map(|(p, _)| p).collect()
}

/// An Indexed Job keeps one pod per pending index: it deletes pods without a valid pending
/// index and the duplicates of an index, then creates the lowest missing indexes (not
/// completed, failed, running or terminating) up to parallelism, or deletes the highest
/// running ones beyond it.
fn indexed_changes(
    spec: &JobSpec,
    counts: &Counts,
    terminating: &BTreeSet<i32>,
    parallelism: usize,
    held: usize,
) -> (Vec<Arc<Pod>>, Vec<i32>) {
    let n = spec.completions.unwrap_or(0);
    let pending = |i: &i32| {
        *i < n && !counts.completed_indexes.contains(i) && !counts.failed_indexes.contains(i)
    };
    let mut delete = Vec::new();
    let mut running: BTreeMap<i32, Vec<Arc<Pod>>> = BTreeMap::new();
    for pod in &counts.active {
        match indexes::of_pod(pod).filter(pending) {
            Some(index) => running.entry(index).or_default().push(pod.clone()),
            None => delete.push(pod.clone()),
        }
    }
    for pods in running.values_mut() {
        delete.extend(pods.drain(1..));
    }
    let missing: Vec<i32> = (0..n)
        .filter(|i| pending(i) && !running.contains_key(i) && !terminating.contains(i))
        .collect();
    let want = parallelism
        .saturating_sub(held)
        .min(running.len() + missing.len());
    let mut create = Vec::new();
    if running.len() > want {
        let extra = running.len() - want;
        let highest: Vec<i32> = running.keys().rev().take(extra).copied().collect();
        for index in highest {
            delete.extend(running.remove(&index).unwrap_or_default());
        }
    } else {
        create.extend(missing.into_iter().take(want - running.len()));
    }
    (delete, create)
}

#[cfg(test)]
mod tests;

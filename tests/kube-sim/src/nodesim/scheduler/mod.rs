//! The simulated scheduler: binds pending pods (`schedulerName: default-scheduler`, no
//! `nodeName`) to one of node-sim's nodes through `pods/binding`, or marks them
//! `PodScheduled=False/Unschedulable` with a `FailedScheduling` event when no node fits.
//!
//! The decision is [`schedule`], a pure function of the pod, the candidate nodes and what is
//! already placed on them; it ports the filters of upstream's default profile that matter to
//! controllers (NodeUnschedulable, TaintToleration, NodeAffinity incl. `matchFields`
//! `metadata.name`, NodeResourcesFit, then VolumeBinding from [`super::volume_binding`]) and
//! a least-allocated score for spreading. No preemption. A pod whose WaitForFirstConsumer
//! claims need binding has its volumes bound first (PreBind) and is bound to its node only
//! once every claim is. [`run`] is the loop at the edge: it reads the shared pod and node stores,
//! decides, and writes.
//!
//! The modules: [`resources`] (what pods ask and nodes hold), [`filters`], [`scoring`] (and
//! the pick), [`cycle`](mod@cycle) (one pass over the pending pods, in phases) and [`binding`] (the
//! writes).

mod binding;
mod cycle;
mod filters;
mod resources;
mod scoring;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::Store;

pub(crate) use filters::term_matches;
pub use filters::{fits, matches_node_affinity, Misfit};
pub use resources::{pod_requests, NodeUsage, Resources};
pub use scoring::{schedule, schedule_with};

use super::csi::StorageStores;
use super::Shared;
use cycle::{cycle, SchedulerCache};

/// The scheduler's name: pods that name it (or none) are this scheduler's.
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// Is this pod waiting for this scheduler?
pub fn is_pending(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    spec.node_name.as_deref().unwrap_or("").is_empty()
        && spec.scheduler_name.as_deref().unwrap_or(SCHEDULER_NAME) == SCHEDULER_NAME
        && pod.metadata.deletion_timestamp.is_none()
        && !matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

/// The scheduling loop: wakes on any pod, node or storage change (and every few seconds,
/// to retry), places every pending pod, then waits again.
pub async fn run(
    shared: Arc<Shared>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    storage: Option<StorageStores>,
) {
    let mut cache = SchedulerCache::default();
    // Not Store::wait_until_ready: it wakes only one of several waiters, and the kubelet's
    // applier already waits on the pod store.
    loop {
        if shared.synced() && storage.as_ref().is_none_or(StorageStores::synced) {
            cycle(&shared, &pods, &nodes, storage.as_ref(), &mut cache).await;
        }
        let retry = if cache.binding_volumes.is_empty() {
            Duration::from_secs(5)
        } else {
            // Pods waiting for their volumes are looked at every second, as PreBind polls.
            Duration::from_secs(1)
        };
        tokio::select! {
            _ = shared.scheduler_wake.notified() => {}
            _ = tokio::time::sleep(retry) => {}
        }
        // Let a burst of watch events land before the next pass over the store.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests;

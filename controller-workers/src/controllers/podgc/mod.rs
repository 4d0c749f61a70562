//! pod-garbage-collector-controller: force-deletes the pods no kubelet will ever finish
//! deleting (upstream `pkg/controller/podgc/`).
//!
//! It has no per-key queue: a pass over the pod and node stores runs once they are synced
//! and then 20 s after each pass ends ([`Runnable::periodic`]). Each pass takes four steps,
//! in upstream's order ([`select`] picks the pods):
//! 1. **terminated**: finished pods beyond `--terminated-pod-gc-threshold`, counted across
//!    the whole cluster, evicted ones first, then the oldest;
//! 2. **out-of-service**: pods being deleted on a node that is not Ready and carries the
//!    `node.kubernetes.io/out-of-service` taint;
//! 3. **orphaned**: pods bound to a node the cache does not hold; the node's name waits 40 s
//!    on the delaying queue `orphaned_pods_nodes` (a node being registered has time to
//!    reach the cache), then a live GET decides, and the pods of a node it does not find
//!    are deleted with the `DisruptionTarget` condition;
//! 4. **unscheduled**: pods being deleted that were never bound to a node.
//!
//! A deletion marks the pod Failed through `pods/status` when it has not finished, then
//! deletes it with a zero grace period ([`operations`]). The first two steps delete
//! concurrently, the last two one pod after another, as upstream. Errors are logged and
//! counted in `pod_gc_collector_force_delete_pod_errors_total`; the next pass tries again.

mod metrics;
mod operations;
mod select;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use tracing::{debug, info, warn};

use crate::controller::{describe, ControllerContext, Runnable};
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::store::{key_of, Store};

use self::metrics::{PodGcMetrics, Reason};
use self::operations::{Gates, Live, Operations};

pub const NAME: &str = "pod-garbage-collector-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the node; `status` (phase, reason).
pub const FIELDS: crate::projection::FieldList = &[("v1/pods", &["spec.nodeName", "status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/nodes", "v1/pods"];
/// How often a pass runs (upstream's `gcCheckPeriod`, not configurable).
const GC_CHECK_PERIOD: Duration = Duration::from_secs(20);
/// How long a node missing from the cache waits before the live check (upstream's
/// `quarantineTime`).
const QUARANTINE: Duration = Duration::from_secs(40);
/// The delaying queue of nodes in quarantine.
const NODE_QUEUE: &str = "orphaned_pods_nodes";

/// The controller's flags (KCM's names, defaults and help).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// Number of terminated pods that can exist before the terminated pod garbage
    /// collector starts deleting terminated pods. If <= 0, the terminated pod garbage
    /// collector is disabled.
    #[arg(long, default_value_t = 12500, allow_negative_numbers = true)]
    pub terminated_pod_gc_threshold: i32,
}

struct Controller<O> {
    operations: O,
    pods: Store<Pod>,
    nodes: Store<Node>,
    /// Names of nodes missing from the cache, each added after the quarantine.
    node_queue: Arc<WorkQueue<String>>,
    threshold: i32,
    quarantine: Duration,
    metrics: PodGcMetrics,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let pods = context.informers.get::<Pod>();
    let nodes = context.informers.get::<Node>();
    let controller = Arc::new(Controller {
        operations: Live {
            client,
            gates: Gates::KCM_1_29,
        },
        pods: pods.store().clone(),
        nodes: nodes.store().clone(),
        node_queue: context.queue(NODE_QUEUE),
        threshold: options.terminated_pod_gc_threshold,
        quarantine: QUARANTINE,
        metrics: PodGcMetrics::register(&context.metrics),
    });
    Ok(Runnable::periodic(
        NAME,
        GC_CHECK_PERIOD,
        controller,
        |controller| async move { controller.gc().await },
    ))
}

/// The condition an orphan is marked with.
fn orphaned_condition() -> PodCondition {
    PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: Some("DeletionByPodGC".into()),
        message: Some("PodGC: node no longer exists".into()),
        ..PodCondition::default()
    }
}

impl<O: Operations> Controller<O> {
    /// One pass: the four steps on one listing of each store.
    async fn gc(&self) {
        let pods = self.pods.list();
        let nodes = self.nodes.list();
        if self.threshold > 0 {
            self.gc_terminated(&pods).await;
        }
        self.gc_terminating_out_of_service(&pods).await;
        self.gc_orphaned(&pods, &nodes).await;
        self.gc_unscheduled_terminating(&pods).await;
    }

    async fn gc_terminated(&self, pods: &[Arc<Pod>]) {
        let doomed = select::terminated_beyond(pods, self.threshold);
        if doomed.is_empty() {
            return;
        }
        info!(
            controller = NAME,
            pods = doomed.len(),
            threshold = self.threshold,
            "garbage collecting terminated pods"
        );
        futures::future::join_all(
            doomed
                .iter()
                .map(|pod| self.force_delete(pod, None, Reason::Terminated)),
        )
        .await;
    }

    async fn gc_terminating_out_of_service(&self, pods: &[Arc<Pod>]) {
        let doomed = select::terminating_out_of_service(pods, |name| {
            let node = self.nodes.get(name);
            if node.is_none() && !name.is_empty() {
                debug!(
                    controller = NAME,
                    node = name,
                    "node of a terminating pod not in the cache"
                );
            }
            node
        });
        if doomed.is_empty() {
            return;
        }
        info!(
            controller = NAME,
            pods = doomed.len(),
            "garbage collecting pods terminating on out-of-service nodes"
        );
        futures::future::join_all(
            doomed
                .iter()
                .map(|pod| self.force_delete(pod, None, Reason::OutOfService)),
        )
        .await;
    }

    async fn gc_orphaned(&self, pods: &[Arc<Pod>], nodes: &[Arc<Node>]) {
        let existing: HashSet<&str> = nodes
            .iter()
            .filter_map(|node| node.metadata.name.as_deref())
            .collect();
        for node in select::missing_nodes(pods, &existing) {
            // A node already in quarantine keeps its earlier time.
            self.node_queue.add_after(node, self.quarantine);
        }
        let Some(deleted) = self.deleted_nodes(&existing).await else {
            return;
        };
        if deleted.is_empty() {
            return;
        }
        let condition = orphaned_condition();
        for pod in select::bound_to(pods, &deleted) {
            info!(controller = NAME, pod = %key_of(&pod.metadata), node = select::node_name(&pod), "deleting a pod whose node no longer exists");
            self.force_delete(&pod, Some(&condition), Reason::Orphaned)
                .await;
        }
    }

    /// The nodes whose quarantine is over that the API server does not have either;
    /// `None` when the queue is shutting down.
    async fn deleted_nodes(&self, existing: &HashSet<&str>) -> Option<HashSet<String>> {
        let mut deleted = HashSet::new();
        while !self.node_queue.is_empty() {
            let name = self.node_queue.get().await?;
            if !existing.contains(name.as_str()) {
                match self.operations.node_exists(&name).await {
                    Ok(true) => {}
                    Ok(false) => {
                        deleted.insert(name.clone());
                    }
                    // A pod still bound to it puts it back in quarantine next pass.
                    Err(error) => {
                        warn!(controller = NAME, node = %name, error = %describe(&error), "cannot check whether the node exists")
                    }
                }
            }
            self.node_queue.done(&name);
        }
        Some(deleted)
    }

    async fn gc_unscheduled_terminating(&self, pods: &[Arc<Pod>]) {
        for pod in select::unscheduled_terminating(pods) {
            info!(controller = NAME, pod = %key_of(&pod.metadata), "deleting an unscheduled pod being deleted");
            self.force_delete(&pod, None, Reason::Unscheduled).await;
        }
    }

    /// One forced deletion, counted; a failure is logged and counted, and left to the
    /// next pass.
    async fn force_delete(&self, pod: &Pod, condition: Option<&PodCondition>, reason: Reason) {
        let namespace = pod.namespace_str();
        let key = key_of(&pod.metadata);
        info!(controller = NAME, pod = %key, reason = reason.label(), "force deleting pod");
        self.metrics.deletion(namespace, reason);
        if let Err(error) = self.operations.mark_failed_and_delete(pod, condition).await {
            warn!(controller = NAME, pod = %key, reason = reason.label(), error = %describe(&error), "cannot force delete the pod; the next pass tries again");
            self.metrics.error(namespace, reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::select::tests::{node, pod, terminating};
    use super::select::OUT_OF_SERVICE_TAINT;
    use super::*;
    use crate::locks::lock;
    use std::sync::Mutex;

    /// The API server as the passes see it: which nodes a live GET finds, which pods
    /// cannot be deleted, and the calls made.
    #[derive(Default)]
    struct Fake {
        live_nodes: Mutex<HashSet<String>>,
        unreachable_nodes: HashSet<String>,
        undeletable: HashSet<String>,
        gets: Mutex<Vec<String>>,
        /// (pod name, the reason of the condition it was marked with)
        deletions: Mutex<Vec<(String, Option<String>)>>,
    }

    impl Operations for Fake {
        async fn node_exists(&self, name: &str) -> anyhow::Result<bool> {
            lock(&self.gets).push(name.to_string());
            if self.unreachable_nodes.contains(name) {
                anyhow::bail!("connection refused");
            }
            Ok(lock(&self.live_nodes).contains(name))
        }

        async fn mark_failed_and_delete(
            &self,
            pod: &Pod,
            condition: Option<&PodCondition>,
        ) -> anyhow::Result<()> {
            let name = pod.name_str().to_string();
            lock(&self.deletions).push((name.clone(), condition.and_then(|c| c.reason.clone())));
            if self.undeletable.contains(&name) {
                anyhow::bail!("pods {name:?} is forbidden");
            }
            Ok(())
        }
    }

    fn controller(fake: Fake, threshold: i32, quarantine: Duration) -> Controller<Fake> {
        Controller {
            operations: fake,
            pods: Store::new(),
            nodes: Store::new(),
            node_queue: WorkQueue::new(NODE_QUEUE, None),
            threshold,
            quarantine,
            metrics: PodGcMetrics::unregistered(),
        }
    }

    impl Controller<Fake> {
        fn add_pod(&self, pod: Arc<Pod>) {
            self.pods.apply(key_of(&pod.metadata), pod);
        }

        fn add_node(&self, node: Arc<Node>) {
            self.nodes.apply(key_of(&node.metadata), node);
        }

        fn take_deletions(&self) -> Vec<(String, Option<String>)> {
            std::mem::take(&mut *lock(&self.operations.deletions))
        }
    }

    fn deleted(names: &[&str]) -> Vec<(String, Option<String>)> {
        names.iter().map(|n| (n.to_string(), None)).collect()
    }

    #[tokio::test]
    async fn a_pass_takes_the_four_steps_in_order() {
        let c = controller(Fake::default(), 1, Duration::ZERO);
        c.add_node(node("down", "False", &[OUT_OF_SERVICE_TAINT]));
        c.add_node(node("up", "True", &[]));
        c.add_pod(pod("finished-old", "Succeeded", 10, "up"));
        c.add_pod(pod("finished-new", "Succeeded", 20, "up"));
        c.add_pod(terminating(pod("stuck", "Running", 30, "down")));
        c.add_pod(pod("orphan", "Running", 40, "ghost"));
        c.add_pod(terminating(pod("unbound", "Pending", 50, "")));
        c.add_pod(pod("running", "Running", 60, "up"));
        c.gc().await;
        assert_eq!(
            c.take_deletions(),
            vec![
                ("finished-old".to_string(), None),
                ("stuck".to_string(), None),
                ("orphan".to_string(), Some("DeletionByPodGC".to_string())),
                ("unbound".to_string(), None),
            ]
        );
        for reason in [
            Reason::Terminated,
            Reason::OutOfService,
            Reason::Orphaned,
            Reason::Unscheduled,
        ] {
            assert_eq!(c.metrics.deletions("ns", reason), 1, "{reason:?}");
            assert_eq!(c.metrics.errors("ns", reason), 0, "{reason:?}");
        }
        assert_eq!(*lock(&c.operations.gets), ["ghost"]);
    }

    #[tokio::test]
    async fn a_threshold_of_zero_or_less_keeps_every_finished_pod() {
        for threshold in [0, -5] {
            let c = controller(Fake::default(), threshold, Duration::ZERO);
            c.add_node(node("up", "True", &[]));
            for (i, name) in ["a", "b", "c"].iter().enumerate() {
                c.add_pod(pod(name, "Failed", i as i64, "up"));
            }
            c.gc().await;
            assert_eq!(c.take_deletions(), deleted(&[]), "threshold {threshold}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn orphans_wait_out_the_quarantine_and_a_returning_node_saves_its_pods() {
        let c = controller(Fake::default(), 12500, QUARANTINE);
        c.add_pod(pod("on-gone", "Running", 1, "gone"));
        c.add_pod(pod("on-back", "Running", 2, "back"));
        c.add_pod(pod("on-lagging", "Running", 3, "lagging"));
        // The API server has `lagging`; the cache has not seen it yet.
        lock(&c.operations.live_nodes).insert("lagging".into());

        c.gc().await;
        tokio::time::sleep(GC_CHECK_PERIOD).await;
        c.gc().await;
        assert_eq!(c.take_deletions(), deleted(&[]), "within the quarantine");
        assert!(lock(&c.operations.gets).is_empty(), "no live check yet");

        // `back` returns to the cache within its 40 s.
        c.add_node(node("back", "True", &[]));
        tokio::time::sleep(GC_CHECK_PERIOD + Duration::from_secs(1)).await;
        c.gc().await;
        assert_eq!(
            c.take_deletions(),
            vec![("on-gone".to_string(), Some("DeletionByPodGC".to_string()))]
        );
        let mut gets = lock(&c.operations.gets).clone();
        gets.sort();
        assert_eq!(
            gets,
            ["gone", "lagging"],
            "a node back in the cache is not looked up"
        );
    }

    #[tokio::test]
    async fn failures_are_counted_and_retried_by_the_next_pass() {
        let fake = Fake {
            undeletable: HashSet::from(["unbound".to_string()]),
            unreachable_nodes: HashSet::from(["ghost".to_string()]),
            ..Fake::default()
        };
        let c = controller(fake, 12500, Duration::ZERO);
        c.add_pod(terminating(pod("unbound", "Pending", 1, "")));
        c.add_pod(pod("orphan", "Running", 1, "ghost"));
        c.gc().await;
        assert_eq!(
            c.take_deletions(),
            deleted(&["unbound"]),
            "the orphan's node could not be checked"
        );
        assert_eq!(c.metrics.deletions("ns", Reason::Unscheduled), 1);
        assert_eq!(c.metrics.errors("ns", Reason::Unscheduled), 1);
        c.gc().await;
        assert_eq!(c.take_deletions(), deleted(&["unbound"]));
        assert_eq!(c.metrics.errors("ns", Reason::Unscheduled), 2);
        assert_eq!(*lock(&c.operations.gets), ["ghost", "ghost"]);
    }
}

//! taint-eviction-controller: deletes the pods of a node with NoExecute taints they do not
//! tolerate (upstream `pkg/controller/tainteviction/`, a controller of its own since 1.29's
//! `SeparateTaintEvictionController`).
//!
//! The node workers (queue `noexec_taint_node`) remember each node's NoExecute taints and
//! look at its pods when they change; the pod workers (queue `noexec_taint_pod`) look at
//! a pod when it is bound, moved, changes its tolerations or goes. Each look decides
//! ([`eviction_delay`]): evict at once, after the smallest `tolerationSeconds` of the
//! tolerations in use, or never; a scheduled eviction is a timer ([`Evictions`]) that is
//! cancelled, with an event, when the taint goes or the pod tolerates it for ever. When
//! it fires, the pod gets the `DisruptionTarget` condition and is deleted. The taints
//! themselves are the node-lifecycle controller's; running without this controller
//! (`--controllers=*,-taint-eviction-controller`) keeps tainting and evicts nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use tracing::{debug, info, warn};

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::{Recorder, NORMAL};
use crate::scheduling::tolerates;
use crate::store::{key_of, split_key, Store};

pub const NAME: &str = "taint-eviction-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the node, the tolerations and `status`.
pub const FIELDS: crate::projection::FieldList =
    &[("v1/pods", &["spec.nodeName", "spec.tolerations", "status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/nodes", "v1/pods"];
const WORKERS: usize = 8;
const DELETE_RETRIES: usize = 5;
const DELETE_RETRY_SLEEP: Duration = Duration::from_millis(10);
/// The NoExecute taints of a list.
pub fn no_execute(taints: &[Taint]) -> Vec<Taint> {
    taints
        .iter()
        .filter(|taint| taint.effect == "NoExecute")
        .cloned()
        .collect()
}

/// Whether every taint is tolerated, and the first toleration that tolerates each
/// (`GetMatchingTolerations`).
pub fn matching_tolerations(
    taints: &[Taint],
    tolerations: &[Toleration],
) -> Option<Vec<Toleration>> {
    taints
        .iter()
        .map(|taint| tolerations.iter().find(|t| tolerates(t, taint)).cloned())
        .collect()
}

/// When a pod with `tolerations` on a node with NoExecute `taints` must go: `Some(0)`
/// at once, `Some(d)` after `d`, `None` never.
pub fn eviction_delay(taints: &[Taint], tolerations: &[Toleration]) -> Option<Duration> {
    let Some(used) = matching_tolerations(taints, tolerations) else {
        return Some(Duration::ZERO);
    };
    if used.is_empty() {
        return Some(Duration::ZERO);
    }
    let mut shortest: Option<i64> = None;
    for seconds in used.iter().filter_map(|t| t.toleration_seconds) {
        if seconds <= 0 {
            return Some(Duration::ZERO);
        }
        shortest = Some(shortest.map_or(seconds, |s| s.min(seconds)));
    }
    shortest.map(|s| Duration::from_secs(s as u64))
}

enum Scheduled {
    Pending {
        id: u64,
        created: Instant,
        timer: tokio::task::AbortHandle,
    },
    /// Fired (or firing): kept so the same pod is not scheduled again, as upstream's
    /// timed queue keeps a finished entry until it is cancelled.
    Fired,
}

/// The scheduled evictions, by pod key.
#[derive(Default)]
struct Evictions {
    entries: Mutex<HashMap<String, Scheduled>>,
    next_id: AtomicU64,
}

struct Metrics {
    deletions: Counter,
    deletion_latency: Histogram,
}

impl Metrics {
    fn register(metrics: &crate::metrics::Metrics) -> Metrics {
        let m = Metrics {
            deletions: Counter::default(),
            deletion_latency: Histogram::new([
                0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 120.0, 180.0, 240.0,
            ]),
        };
        let mut registry = metrics.registry.lock().unwrap_or_else(|p| p.into_inner());
        // The encoder adds the `_total` suffix of counters.
        registry.register(
            "taint_eviction_controller_pod_deletions",
            "Total number of Pods deleted by TaintEvictionController since its start.",
            m.deletions.clone(),
        );
        registry.register(
            "taint_eviction_controller_pod_deletion_duration_seconds",
            "Latency, in seconds, between the time when a taint effect has been activated for the Pod and its deletion via TaintEvictionController.",
            m.deletion_latency.clone(),
        );
        m
    }
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    nodes: Store<Node>,
    pods: Store<Pod>,
    /// Each node's NoExecute taints, for nodes that have some.
    tainted: Mutex<HashMap<String, Vec<Taint>>>,
    evictions: Evictions,
    metrics: Metrics,
    node_queue: Arc<WorkQueue<String>>,
    pod_queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Vec<Runnable>> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let node_queue = context.queue("noexec_taint_node");
    let pod_queue = context.queue("noexec_taint_pod");
    let nodes = context.informers.get::<Node>();
    let pods = context.informers.get::<Pod>();
    crate::pods::index_by_node(pods.store());
    let controller = Arc::new(Controller {
        client,
        recorder,
        nodes: nodes.store().clone(),
        pods: pods.store().clone(),
        tainted: Mutex::new(HashMap::new()),
        evictions: Evictions::default(),
        metrics: Metrics::register(&context.metrics),
        node_queue: node_queue.clone(),
        pod_queue: pod_queue.clone(),
    });
    nodes.handle(&controller, Controller::on_node);
    pods.handle(&controller, Controller::on_pod);
    Ok(vec![
        Runnable::new(
            NAME,
            node_queue,
            WORKERS,
            controller.clone(),
            |controller, name| async move {
                controller.sync_node(&name);
                Ok(())
            },
        ),
        Runnable::new(
            NAME,
            pod_queue,
            WORKERS,
            controller,
            |controller, key| async move {
                controller.sync_pod(&key);
                Ok(())
            },
        ),
    ])
}

fn node_taints(node: &Node) -> Vec<Taint> {
    no_execute(
        node.spec
            .as_ref()
            .and_then(|spec| spec.taints.as_deref())
            .unwrap_or_default(),
    )
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .unwrap_or_default()
}

fn tolerations_of(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.tolerations.as_deref())
        .unwrap_or_default()
}

fn pod_reference(key: &str) -> ObjectReference {
    let (namespace, name) = split_key(key);
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        ..Default::default()
    }
}

impl Controller {
    fn on_node(&self, change: &Change<Node>) {
        let node = change.latest();
        if let Change::Updated { old, new } = change {
            if node_taints(old) == node_taints(new) {
                return;
            }
        }
        self.node_queue.add(node.name_str().to_string());
    }

    fn on_pod(&self, change: &Change<Pod>) {
        if let Change::Updated { old, new } = change {
            if tolerations_of(old) == tolerations_of(new) && node_of(old) == node_of(new) {
                return;
            }
        }
        self.pod_queue.add(key_of(&change.latest().metadata));
    }

    fn sync_node(self: &Arc<Self>, name: &str) {
        let Some(node) = self.nodes.get(name) else {
            lock(&self.tainted).remove(name);
            return;
        };
        let taints = node_taints(&node);
        {
            let mut tainted = lock(&self.tainted);
            if taints.is_empty() {
                tainted.remove(name);
            } else {
                tainted.insert(name.to_string(), taints.clone());
            }
        }
        let pods = self.pods.by_index(crate::pods::BY_NODE, name);
        let now = Instant::now();
        for pod in pods {
            let key = key_of(&pod.metadata);
            if taints.is_empty() {
                self.cancel(&key);
            } else {
                self.decide(&key, tolerations_of(&pod), &taints, now);
            }
        }
    }

    fn sync_pod(self: &Arc<Self>, key: &str) {
        let Some(pod) = self.pods.get(key) else {
            self.cancel(key);
            return;
        };
        let node = node_of(&pod);
        if node.is_empty() {
            return;
        }
        let Some(taints) = lock(&self.tainted).get(node).cloned() else {
            return;
        };
        self.decide(key, tolerations_of(&pod), &taints, Instant::now());
    }

    /// Schedules, keeps, moves or cancels the pod's eviction (`processPodOnNode`).
    fn decide(
        self: &Arc<Self>,
        key: &str,
        tolerations: &[Toleration],
        taints: &[Taint],
        now: Instant,
    ) {
        if taints.is_empty() {
            self.cancel(key);
            return;
        }
        let Some(delay) = eviction_delay(taints, tolerations) else {
            debug!(
                controller = NAME,
                pod = key,
                "tolerated for ever; cancelling any eviction"
            );
            self.cancel(key);
            return;
        };
        if delay.is_zero() && matching_tolerations(taints, tolerations).is_none() {
            info!(
                controller = NAME,
                pod = key,
                "not all NoExecute taints are tolerated; evicting now"
            );
            self.cancel(key);
            self.schedule(key, now, now);
            return;
        }
        let mut created = now;
        let fire_at = now + delay;
        let pending = match lock(&self.evictions.entries).get(key) {
            Some(Scheduled::Pending { created, .. }) => Some(*created),
            _ => None,
        };
        if let Some(scheduled) = pending {
            // An eviction already on its way keeps its start; it only moves later.
            created = scheduled;
            if scheduled + delay < fire_at {
                return;
            }
            self.cancel(key);
        }
        self.schedule(key, created, fire_at);
    }

    /// Cancels the pod's pending eviction, with an event when there was one.
    fn cancel(&self, key: &str) {
        let removed = lock(&self.evictions.entries).remove(key);
        if let Some(Scheduled::Pending { timer, .. }) = removed {
            timer.abort();
            info!(
                controller = NAME,
                pod = key,
                "cancelling the pod's eviction"
            );
            self.recorder.event_for(
                pod_reference(key),
                NORMAL,
                "TaintManagerEviction",
                format!("Cancelling deletion of Pod {key}"),
            );
        }
    }

    fn schedule(self: &Arc<Self>, key: &str, created: Instant, fire_at: Instant) {
        let mut entries = lock(&self.evictions.entries);
        if entries.contains_key(key) {
            return;
        }
        let id = self.evictions.next_id.fetch_add(1, Ordering::Relaxed);
        let controller = self.clone();
        let pod = key.to_string();
        let timer = tokio::spawn(async move {
            tokio::time::sleep_until(tokio::time::Instant::from_std(fire_at)).await;
            controller.fire(&pod, id, fire_at).await;
        });
        debug!(
            controller = NAME,
            pod = key,
            in_seconds = fire_at
                .saturating_duration_since(Instant::now())
                .as_secs_f64(),
            "eviction scheduled"
        );
        entries.insert(
            key.to_string(),
            Scheduled::Pending {
                id,
                created,
                timer: timer.abort_handle(),
            },
        );
    }

    async fn fire(&self, key: &str, id: u64, fire_at: Instant) {
        {
            let mut entries = lock(&self.evictions.entries);
            match entries.get(key) {
                Some(Scheduled::Pending { id: current, .. }) if *current == id => {
                    entries.insert(key.to_string(), Scheduled::Fired);
                }
                _ => return,
            }
        }
        info!(controller = NAME, pod = key, "deleting pod");
        self.recorder.event_for(
            pod_reference(key),
            NORMAL,
            "TaintManagerEviction",
            format!("Marking for deletion Pod {key}"),
        );
        let mut last_error = None;
        for _ in 0..DELETE_RETRIES {
            match self.mark_and_delete(key).await {
                Ok(()) => {
                    self.metrics.deletions.inc();
                    self.metrics
                        .deletion_latency
                        .observe(fire_at.elapsed().as_secs_f64());
                    return;
                }
                Err(error) => last_error = Some(error),
            }
            tokio::time::sleep(DELETE_RETRY_SLEEP).await;
        }
        if let Some(error) = last_error {
            warn!(controller = NAME, pod = key, error = %crate::controller::describe(&error), "cannot evict the pod");
        }
        let mut entries = lock(&self.evictions.entries);
        if matches!(entries.get(key), Some(Scheduled::Fired)) {
            entries.remove(key);
        }
    }

    /// `DisruptionTarget` through `pods/status`, then the deletion with the pod's own
    /// grace period, on the pod as the API server has it now.
    async fn mark_and_delete(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pod = api.get(name).await?;
        let already = pod
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .and_then(|conditions| conditions.iter().find(|c| c.type_ == "DisruptionTarget"))
            .is_some_and(|c| {
                c.status == "True" && c.reason.as_deref() == Some("DeletionByTaintManager")
            });
        if !already {
            let patch = serde_json::json!({
                "metadata": {"uid": pod.metadata.uid},
                "status": {"conditions": [{
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "DeletionByTaintManager",
                    "message": "Taint manager: deleting due to NoExecute taint",
                    "lastTransitionTime": Time(Timestamp::now()),
                }]},
            });
            api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await?;
        }
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            ..Default::default()
        }
    }

    fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: seconds,
            ..Default::default()
        }
    }

    #[test]
    fn eviction_delays() {
        let unreachable = taint("node.kubernetes.io/unreachable");
        let not_ready = taint("node.kubernetes.io/not-ready");
        type Case = (&'static str, Vec<Taint>, Vec<Toleration>, Option<u64>);
        let cases: Vec<Case> = vec![
            ("no toleration", vec![unreachable.clone()], vec![], Some(0)),
            (
                "the smallest seconds",
                vec![unreachable.clone()],
                vec![toleration("node.kubernetes.io/unreachable", Some(20))],
                Some(20),
            ),
            (
                "for ever",
                vec![unreachable.clone()],
                vec![toleration("node.kubernetes.io/unreachable", None)],
                None,
            ),
            (
                "one taint not tolerated",
                vec![unreachable.clone(), not_ready.clone()],
                vec![toleration("node.kubernetes.io/unreachable", Some(300))],
                Some(0),
            ),
            (
                "minimum over the tolerations used",
                vec![unreachable.clone(), not_ready.clone()],
                vec![
                    toleration("node.kubernetes.io/unreachable", Some(300)),
                    toleration("node.kubernetes.io/not-ready", Some(5)),
                ],
                Some(5),
            ),
            (
                "zero or negative seconds mean now",
                vec![unreachable.clone()],
                vec![toleration("node.kubernetes.io/unreachable", Some(-1))],
                Some(0),
            ),
            (
                "only the first matching toleration counts",
                vec![unreachable.clone()],
                vec![
                    toleration("", None),
                    toleration("node.kubernetes.io/unreachable", Some(5)),
                ],
                None,
            ),
        ];
        for (what, taints, tolerations, want) in cases {
            assert_eq!(
                eviction_delay(&taints, &tolerations),
                want.map(Duration::from_secs),
                "{what}"
            );
        }
    }

    #[test]
    fn only_no_execute_taints_count() {
        let mut schedule = taint("a");
        schedule.effect = "NoSchedule".into();
        assert_eq!(no_execute(&[schedule, taint("b")]), vec![taint("b")]);
    }
}

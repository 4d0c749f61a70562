//! node-lifecycle-controller: node health, and the taints that tell the scheduler and the
//! taint-eviction controller about it (upstream `pkg/controller/nodelifecycle/`).
//!
//! Three loops share the controller's state:
//! - the node workers (queue `node_lifecycle_controller`, on every node change) keep the
//!   NoSchedule taints in line with the node's conditions and `spec.unschedulable` — which
//!   lifts the API server's startup `not-ready:NoSchedule` once the node is Ready — and the
//!   beta os/arch labels in line with the stable ones;
//! - the health monitor (every `--node-monitor-period`) judges each node by its Ready
//!   heartbeat and its Lease ([`health`]), turns a silent node's conditions Unknown, marks
//!   the pods of a node that stopped being Ready as not Ready, queues not-Ready nodes on
//!   their zone's tainter and sets each zone's eviction rate from its state ([`zones`]);
//! - the tainting pass (every 100 ms) gives queued nodes their `not-ready` or
//!   `unreachable` NoExecute taint as fast as their zone's rate allows; the
//!   taint-eviction controller then evicts the pods that do not tolerate it.
//!
//! The pod workers (queue `node_lifecycle_controller_pods`) mark a pod newly bound to a
//! not-Ready node as not Ready. Everything is read from the worker's stores; writes go
//! to the API server as `node-controller`.

mod health;
mod metrics;
mod monitor;
mod taints;
mod zones;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tracing::{debug, info, warn};

use crate::client::ClientFactory;
use crate::controller::{ControllerContext, Runnable};
use crate::informer::{Change, Informer};
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::{Recorder, NORMAL, WARNING};
use crate::store::{key_of, Store};

use crate::locks::lock;
use health::NodeHealth;
use metrics::NodeMetrics;
use taints::{template, NO_EXECUTE};
pub use taints::{NOT_READY, UNREACHABLE};
use zones::{Tainter, ZoneState};

pub const NAME: &str = "node-lifecycle-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the node; `status` whole, since marking a pod not ready writes its status back (an update).
pub const FIELDS: crate::projection::FieldList = &[("v1/pods", &["spec.nodeName", "status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["coordination.k8s.io/v1/leases", "v1/nodes", "v1/pods"];
/// The event source upstream's node controller reports as.
const EVENT_SOURCE: &str = "node-controller";
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
const NODE_WORKERS: usize = 8;
const POD_WORKERS: usize = 4;
const TAINTING_PERIOD: Duration = Duration::from_millis(100);
const HEALTH_UPDATE_RETRIES: usize = 5;
const HEALTH_RETRY_SLEEP: Duration = Duration::from_millis(20);

/// The controller's flags (KCM's names, defaults and help).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The period for syncing NodeStatus in NodeController.
    #[arg(long, default_value = "5s", value_parser = crate::flags::parse_go_duration)]
    pub node_monitor_period: Duration,
    /// Amount of time which we allow running Node to be unresponsive before marking it
    /// unhealthy. Must be N times more than kubelet's nodeStatusUpdateFrequency, where N
    /// means number of retries allowed for kubelet to post node status.
    #[arg(long, default_value = "40s", value_parser = crate::flags::parse_go_duration)]
    pub node_monitor_grace_period: Duration,
    /// Amount of time which we allow starting Node to be unresponsive before marking it
    /// unhealthy.
    #[arg(long, default_value = "1m", value_parser = crate::flags::parse_go_duration)]
    pub node_startup_grace_period: Duration,
    /// Number of nodes per second on which pods are deleted in case of node failure when a
    /// zone is healthy (see --unhealthy-zone-threshold for definition of
    /// healthy/unhealthy). Zone refers to entire cluster in non-multizone clusters.
    #[arg(long, default_value_t = 0.1)]
    pub node_eviction_rate: f32,
    /// Number of nodes per second on which pods are deleted in case of node failure when a
    /// zone is unhealthy (see --unhealthy-zone-threshold for definition of
    /// healthy/unhealthy). Zone refers to entire cluster in non-multizone clusters. This
    /// value is implicitly overridden to 0 if the cluster size is smaller than
    /// --large-cluster-size-threshold.
    #[arg(long, default_value_t = 0.01)]
    pub secondary_node_eviction_rate: f32,
    /// Number of nodes from which node-lifecycle-controller treats the cluster as large for
    /// the eviction logic purposes. --secondary-node-eviction-rate is implicitly overridden
    /// to 0 for clusters this size or smaller. Notice: If nodes reside in multiple zones,
    /// this threshold will be considered as zone node size threshold for each zone to
    /// determine node eviction rate independently.
    #[arg(long, default_value_t = 50)]
    pub large_cluster_size_threshold: i32,
    /// Fraction of Nodes in a zone which needs to be not Ready (minimum 3) for zone to be
    /// treated as unhealthy.
    #[arg(long, default_value_t = 0.55)]
    pub unhealthy_zone_threshold: f32,
}

/// The nodes of a pass against the known ones: new, gone, and known but in a zone not
/// seen yet.
struct Classified {
    added: Vec<Arc<Node>>,
    deleted: Vec<Arc<Node>>,
    new_zones: Vec<Arc<Node>>,
}

/// The zones the monitor has seen: their states and tainters.
#[derive(Default)]
struct Zones {
    states: HashMap<String, ZoneState>,
    tainters: HashMap<String, Tainter>,
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    nodes: Store<Node>,
    pods: Store<Pod>,
    leases: Store<Lease>,
    options: Options,
    metrics: NodeMetrics,
    health: Mutex<HashMap<String, NodeHealth>>,
    /// Nodes whose pods could not all be marked not Ready: the next pass tries again.
    retry_pods: Mutex<HashSet<String>>,
    /// Nodes the monitor has registered, for RegisteredNode / RemovingNode.
    known: Mutex<HashMap<String, Arc<Node>>>,
    zones: Mutex<Zones>,
    node_queue: Arc<WorkQueue<String>>,
    pod_queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Vec<Runnable>> {
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let node_queue = context.queue("node_lifecycle_controller");
    let pod_queue = context.queue("node_lifecycle_controller_pods");
    let leases = context.informers.get::<Lease>();
    let nodes = context.informers.get::<Node>();
    let pods = context.informers.get::<Pod>();
    crate::pods::index_by_node(pods.store());
    let controller = Arc::new(Controller {
        client,
        recorder,
        nodes: nodes.store().clone(),
        pods: pods.store().clone(),
        leases: leases.store().clone(),
        options: options.clone(),
        metrics: NodeMetrics::register(&context.metrics),
        health: Mutex::new(HashMap::new()),
        retry_pods: Mutex::new(HashSet::new()),
        known: Mutex::new(HashMap::new()),
        zones: Mutex::new(Zones::default()),
        node_queue: node_queue.clone(),
        pod_queue: pod_queue.clone(),
    });
    nodes.handle(&controller, Controller::on_node);
    pods.handle(&controller, Controller::on_pod);
    spawn_periodic_loops(
        controller.clone(),
        context.clients.clone(),
        leases,
        nodes,
        pods,
    );
    Ok(vec![
        Runnable::new(
            NAME,
            node_queue,
            NODE_WORKERS,
            controller.clone(),
            |controller, name| async move { controller.sync_node(&name).await },
        ),
        Runnable::new(
            NAME,
            pod_queue,
            POD_WORKERS,
            controller,
            |controller, key| async move { controller.sync_pod(&key).await },
        ),
    ])
}

/// The health monitor and the tainting pass, started once the stores hold their first
/// snapshot (judging nodes on a partial view would mark healthy ones unknown) and the
/// controller's credentials are usable.
fn spawn_periodic_loops(
    controller: Arc<Controller>,
    clients: ClientFactory,
    leases: Arc<Informer<Lease>>,
    nodes: Arc<Informer<Node>>,
    pods: Arc<Informer<Pod>>,
) {
    tokio::spawn(async move {
        leases.wait_for_sync().await;
        nodes.wait_for_sync().await;
        pods.wait_for_sync().await;
        clients.ready(NAME).await;
        info!(controller = NAME, "starting node health monitor");
        let tainter = controller.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TAINTING_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                tainter.no_execute_tainting_pass().await;
            }
        });
        let mut tick = tokio::time::interval(controller.options.node_monitor_period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            controller.monitor_node_health().await;
        }
    });
}

fn node_name(node: &Node) -> &str {
    node.name_str()
}

fn node_reference(name: &str, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.to_string()),
        uid: uid.map(str::to_string),
        ..Default::default()
    }
}

impl Controller {
    fn on_node(&self, change: &Change<Node>) {
        match change {
            Change::Added(node) | Change::Updated { new: node, .. } => {
                self.node_queue.add(node_name(node).to_string())
            }
            Change::Deleted(deleted) => {
                lock(&self.retry_pods).remove(node_name(deleted.object()));
            }
        }
    }

    fn on_pod(&self, change: &Change<Pod>) {
        let bound_to = |pod: &Pod| {
            pod.spec
                .as_ref()
                .and_then(|spec| spec.node_name.clone())
                .unwrap_or_default()
        };
        let (old, new) = match change {
            Change::Added(pod) => (None, pod),
            Change::Updated { old, new } => (Some(old), new),
            Change::Deleted(_) => return,
        };
        let node = bound_to(new);
        if !node.is_empty() && old.is_none_or(|old| bound_to(old) != node) {
            self.pod_queue.add(key_of(&new.metadata));
        }
    }

    fn node_event(
        &self,
        name: &str,
        uid: Option<&str>,
        event_type: &str,
        reason: &str,
        what: &str,
    ) {
        self.recorder.event_for(
            node_reference(name, uid),
            event_type,
            reason,
            format!("Node {name} event: {what}"),
        );
    }

    fn pods_on(&self, node: &str) -> Vec<Arc<Pod>> {
        self.pods.by_index(crate::pods::BY_NODE, node)
    }

    /// The renewTime of the node's Lease; a Lease without one says nothing.
    fn lease_renew(&self, node: &str) -> Option<Timestamp> {
        self.leases
            .get_in(NODE_LEASE_NAMESPACE, node)?
            .spec
            .as_ref()?
            .renew_time
            .as_ref()
            .map(|time| time.0)
    }

    /// The node worker: NoSchedule taints, then the beta labels.
    async fn sync_node(&self, name: &str) -> anyhow::Result<()> {
        let Some(node) = self.nodes.get(name) else {
            return Ok(());
        };
        let (add, remove) = taints::no_schedule_changes(&node);
        if !add.is_empty() || !remove.is_empty() {
            taints::swap_taints(&self.client, &node, &add, &remove).await?;
        }
        self.reconcile_labels(&node).await
    }

    /// Sets `beta.kubernetes.io/{os,arch}` to the stable labels' values.
    async fn reconcile_labels(&self, node: &Node) -> anyhow::Result<()> {
        let Some(labels) = node.metadata.labels.as_ref() else {
            return Ok(());
        };
        let mut fixes = serde_json::Map::new();
        for (stable, beta) in [
            ("kubernetes.io/os", "beta.kubernetes.io/os"),
            ("kubernetes.io/arch", "beta.kubernetes.io/arch"),
        ] {
            if let Some(value) = labels.get(stable) {
                if labels.get(beta) != Some(value) {
                    fixes.insert(beta.to_string(), value.clone().into());
                }
            }
        }
        if fixes.is_empty() {
            return Ok(());
        }
        let patch = serde_json::json!({"metadata": {"labels": fixes}});
        let api: Api<Node> = Api::all(self.client.clone());
        match api
            .patch(
                node_name(node),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(anyhow::Error::new(error)
                .context(format!("updating the labels of node {}", node_name(node)))),
        }
    }

    /// The pod worker: a pod bound to a node that is not Ready is not Ready either.
    async fn sync_pod(&self, key: &str) -> anyhow::Result<()> {
        let Some(pod) = self.pods.get(key) else {
            return Ok(());
        };
        let node = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.node_name.clone())
            .unwrap_or_default();
        let Some(status) = lock(&self.health).get(&node).map(|h| h.status.clone()) else {
            return Ok(());
        };
        if self.nodes.get(&node).is_none() {
            anyhow::bail!("node {node} of pod {key} is not in the cache yet");
        }
        match health::condition(&status, "Ready") {
            Some(ready) if ready.status != "True" => self.mark_pods_not_ready(&[pod], &node).await,
            _ => Ok(()),
        }
    }

    /// Sets Ready=False on each pod of `node` that is not already so, with a Warning
    /// `NodeNotReady` event (`MarkPodsNotReady`).
    async fn mark_pods_not_ready(&self, pods: &[Arc<Pod>], node: &str) -> anyhow::Result<()> {
        let mut failures = Vec::new();
        for pod in pods {
            if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node) {
                continue;
            }
            let mut updated = (**pod).clone();
            let Some(ready) = updated
                .status
                .as_mut()
                .and_then(|status| status.conditions.as_mut())
                .and_then(|conditions| conditions.iter_mut().find(|c| c.type_ == "Ready"))
            else {
                continue;
            };
            if ready.status == "False" {
                continue;
            }
            ready.status = "False".into();
            ready.last_transition_time = Some(Time(Timestamp::now()));
            let namespace = pod.namespace_str().to_string();
            let name = pod.name_str().to_string();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            debug!(controller = NAME, pod = %format!("{namespace}/{name}"), "marking pod not ready");
            match api
                .replace_status(&name, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => continue,
                Err(error) => {
                    failures.push(format!("{namespace}/{name}: {error}"));
                    continue;
                }
            }
            self.recorder
                .event(&updated, WARNING, "NodeNotReady", "Node is not ready");
        }
        if failures.is_empty() {
            Ok(())
        } else {
            anyhow::bail!(
                "marking pods of node {node} not ready: {}",
                failures.join("; ")
            )
        }
    }
}

//! node-sim: simulated nodes, kubelets and a scheduler for the development cluster (the role
//! kwok plays for Kubernetes). It talks to the API server only through the Kubernetes API, so
//! it works against kube-sim and against a real kube-apiserver alike.
//!
//! Object flow: [`nodes`] registers N Nodes and heartbeats them (Lease + NodeStatus); one pod
//! watcher feeds a reflector store that both the [`scheduler`] (binds pending pods to a node
//! that fits) and the [`kubelet`] (drives bound pods through their lifecycle) read; one node
//! watcher feeds the scheduler's view of the nodes. Claim, volume and class watchers feed
//! the scheduler's [`volume_binding`] and [`csi`] (csi-sim, the simulated CSI drivers and
//! their sidecars). Faults are set through [`NodeSim`]'s
//! methods, or with annotations on the Node (`kubectl annotate node sim-node-1
//! sim.rkcm.io/heartbeat=stopped`, see [`FAULT_HEARTBEAT`]), and read by the node loops
//! and the kubelet. Pods take annotations of their own, read by the kubelet:
//! [`kubelet::START_DELAY`], [`kubelet::EXIT_AFTER`], [`kubelet::EXIT_CODE`] and
//! [`kubelet::READY`] (`kubectl annotate pod web-1 sim.rkcm.io/ready=false` makes a running
//! pod unready until the annotation is removed).
//!
//! ```no_run
//! # async fn f(client: kube::Client) -> Result<(), kube_sim::nodesim::NodeSimError> {
//! use kube_sim::nodesim::{NodeSim, NodeSimConfig};
//! let sim = NodeSim::start(client, NodeSimConfig { nodes: 3, ..Default::default() });
//! sim.stop_heartbeat("sim-node-1")?;
//! # Ok(()) }
//! ```

pub mod attach;
pub mod csi;
pub mod dra;
pub mod kubelet;
pub mod nodes;
pub mod quantity;
pub mod scheduler;
pub mod volume_binding;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The user agent node-sim's requests carry (`node-sim/<version>`).
pub const USER_AGENT: &str = concat!("node-sim/", env!("CARGO_PKG_VERSION"));

/// Node annotation: `stopped` stops the node's heartbeat (Lease and status), `running`
/// resumes it; `partitioned` cuts the node off the API server (no Lease, no status, no
/// pod status, no pod deletion, no events, while its containers keep running) until the
/// annotation is removed or changed, when it reports everything at once.
pub const FAULT_HEARTBEAT: &str = "sim.rkcm.io/heartbeat";
/// Node annotation prefix: `sim.rkcm.io/condition.MemoryPressure: "True"` reports that
/// condition at that status ("False" for Ready is NotReady); the healthy status clears it.
pub const FAULT_CONDITION_PREFIX: &str = "sim.rkcm.io/condition.";
/// Node annotation: `"true"` kills the node (no heartbeat, no pod status, no pod
/// deletion, for good).
pub const FAULT_KILLED: &str = "sim.rkcm.io/killed";

#[derive(Debug, thiserror::Error)]
pub enum NodeSimError {
    #[error("node {0:?} is not one of this node-sim's nodes")]
    UnknownNode(String),
    #[error("updating node {node}: {source}")]
    Api {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("building a client from the kubeconfig: {0}")]
    Kubeconfig(String),
}

/// Capacity (and allocatable) of every simulated node.
#[derive(Clone, Debug)]
pub struct NodeCapacity {
    pub cpu: String,
    pub memory: String,
    pub pods: String,
    pub ephemeral_storage: String,
}

impl Default for NodeCapacity {
    fn default() -> Self {
        NodeCapacity {
            cpu: "8".into(),
            memory: "32Gi".into(),
            pods: "110".into(),
            ephemeral_storage: "100Gi".into(),
        }
    }
}

/// How to simulate. The defaults are kubelet's (10 s lease renewal, 40 s lease duration,
/// NodeStatus checked every 10 s and reported at least every 5 minutes).
#[derive(Clone, Debug)]
pub struct NodeSimConfig {
    /// How many nodes: `<name_prefix>0` … `<name_prefix>N-1`.
    pub nodes: usize,
    pub name_prefix: String,
    /// Only schedule and run the pods of this namespace (all namespaces when `None`).
    pub namespace: Option<String>,
    /// Run the scheduler (off when a real kube-scheduler does the binding).
    pub scheduler: bool,
    pub capacity: NodeCapacity,
    /// From a pod's admission on a node to its containers running (annotation
    /// `sim.rkcm.io/start-delay` overrides it per pod).
    pub start_delay: Duration,
    pub lease_duration_seconds: i32,
    pub lease_renew_interval: Duration,
    pub node_status_update_frequency: Duration,
    pub node_status_report_frequency: Duration,
    /// The first CrashLoopBackOff wait (doubling per restart up to 5 minutes).
    pub restart_backoff: Duration,
    /// Pods whose status the kubelet writes at the same time.
    pub pod_concurrency: u16,
    /// Post the events a kubelet and kube-scheduler post (Scheduled; Pulled, Created,
    /// Started; Killing). Benchmarks turn them off to measure the controllers alone.
    pub events: bool,
    /// Register each node with its own podCIDR (`10.<244 + i/256>.<i % 256>.0/24`). When
    /// false, nodes register without one and wait for the node-ipam controller to set
    /// `spec.podCIDR`: pods take their IPs from it, and stay Pending until it is there.
    pub assign_pod_cidrs: bool,
    /// Run csi-sim ([`csi`]): the simulated CSI drivers' objects, provisioner, resizer and
    /// attacher.
    pub csi: bool,
    /// Report the `NetworkUnavailable` condition (False, `RouteCreated`) as a network
    /// plugin would. Off (`--no-network-condition`) leaves the condition to the route
    /// controller of a cloud provider: node-sim's status patches merge conditions by type,
    /// as kubelet's do, so they never erase it.
    pub network_condition: bool,
}

impl Default for NodeSimConfig {
    fn default() -> Self {
        NodeSimConfig {
            nodes: 3,
            name_prefix: "sim-node-".into(),
            namespace: None,
            scheduler: true,
            capacity: NodeCapacity::default(),
            start_delay: Duration::from_millis(500),
            lease_duration_seconds: 40,
            lease_renew_interval: Duration::from_secs(10),
            node_status_update_frequency: Duration::from_secs(10),
            node_status_report_frequency: Duration::from_secs(300),
            restart_backoff: Duration::from_secs(10),
            pod_concurrency: 16,
            events: true,
            assign_pod_cidrs: true,
            csi: true,
            network_condition: true,
        }
    }
}

/// A node condition node-sim can be told to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConditionType {
    Ready,
    MemoryPressure,
    DiskPressure,
    PIDPressure,
    NetworkUnavailable,
}

impl ConditionType {
    pub const ALL: [ConditionType; 5] = [
        ConditionType::Ready,
        ConditionType::MemoryPressure,
        ConditionType::DiskPressure,
        ConditionType::PIDPressure,
        ConditionType::NetworkUnavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::MemoryPressure => "MemoryPressure",
            ConditionType::DiskPressure => "DiskPressure",
            ConditionType::PIDPressure => "PIDPressure",
            ConditionType::NetworkUnavailable => "NetworkUnavailable",
        }
    }

    /// The status a healthy node reports (`true` = "True").
    pub fn healthy(self) -> bool {
        self == ConditionType::Ready
    }

    /// Kubelet's reason and message for this condition at this status.
    pub fn reason(self, on: bool) -> (&'static str, &'static str) {
        use ConditionType::*;
        match (self, on) {
            (Ready, true) => ("KubeletReady", "kubelet is posting ready status"),
            (Ready, false) => ("KubeletNotReady", "node-sim was told to report NotReady"),
            (MemoryPressure, false) => (
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            (MemoryPressure, true) => (
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
            ),
            (DiskPressure, false) => ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            (DiskPressure, true) => ("KubeletHasDiskPressure", "kubelet has disk pressure"),
            (PIDPressure, false) => (
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            (PIDPressure, true) => (
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available",
            ),
            (NetworkUnavailable, false) => ("RouteCreated", "node-sim set up the pod network"),
            (NetworkUnavailable, true) => (
                "NoRouteCreated",
                "node-sim was told the pod network is down",
            ),
        }
    }
}

impl std::str::FromStr for ConditionType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        use ConditionType::*;
        [Ready, MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable]
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown node condition {s:?} (Ready, MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable)"))
    }
}

/// The faults set on one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFaults {
    /// Neither the Lease nor the NodeStatus is updated.
    pub heartbeat_stopped: bool,
    /// Nothing is reported any more: no heartbeat, no pod status, no pod deletion.
    pub killed: bool,
    /// Nothing is written until the fault is lifted (a network partition); set only by
    /// the `sim.rkcm.io/heartbeat: partitioned` annotation, and lifted by its removal.
    pub partitioned: bool,
    /// Conditions reported at a status other than the healthy one.
    pub conditions: BTreeMap<ConditionType, bool>,
}

impl NodeFaults {
    /// Report `condition` at status `on`; its healthy status clears the fault.
    pub fn set_condition(&mut self, condition: ConditionType, on: bool) {
        if on == condition.healthy() {
            self.conditions.remove(&condition);
        } else {
            self.conditions.insert(condition, on);
        }
    }
}

/// What every node-sim task shares.
pub struct Shared {
    pub client: kube::Client,
    pub config: NodeSimConfig,
    index: HashMap<String, usize>,
    faults: Mutex<HashMap<String, NodeFaults>>,
    wakes: HashMap<String, Arc<Notify>>,
    pub scheduler_wake: Notify,
    /// Wakes csi-sim: a claim, volume, class or VolumeAttachment changed.
    pub storage_wake: Notify,
    /// The pod and node watches have each listed once.
    pub pods_synced: AtomicBool,
    pub nodes_synced: AtomicBool,
    /// `spec.podCIDR` of our nodes, as the node watch last saw it.
    pod_cidrs: Mutex<HashMap<String, String>>,
}

impl Shared {
    fn new(client: kube::Client, config: NodeSimConfig) -> Shared {
        let index: HashMap<String, usize> = (0..config.nodes)
            .map(|i| (format!("{}{i}", config.name_prefix), i))
            .collect();
        let wakes = index
            .keys()
            .map(|n| (n.clone(), Arc::new(Notify::new())))
            .collect();
        Shared {
            client,
            config,
            index,
            faults: Mutex::new(HashMap::new()),
            wakes,
            scheduler_wake: Notify::new(),
            storage_wake: Notify::new(),
            pods_synced: AtomicBool::new(false),
            nodes_synced: AtomicBool::new(false),
            pod_cidrs: Mutex::new(HashMap::new()),
        }
    }

    pub fn synced(&self) -> bool {
        self.pods_synced.load(Ordering::Relaxed) && self.nodes_synced.load(Ordering::Relaxed)
    }

    /// Is this one of the nodes this node-sim simulates?
    pub fn is_ours(&self, node: &str) -> bool {
        self.index.contains_key(node)
    }

    pub fn node_index(&self, node: &str) -> Option<usize> {
        self.index.get(node).copied()
    }

    /// The IPv4 network the node's pods take their IPs from: the one node-sim gives node
    /// `index`, or, with `assign_pod_cidrs` off, the node's `spec.podCIDR` once set
    /// (`None` before, or when it is not IPv4).
    pub fn pod_network(&self, node: &str, index: usize) -> Option<nodes::PodNetwork> {
        if self.config.assign_pod_cidrs {
            let [a, b, c] = nodes::pod_cidr_base(index);
            return Some(nodes::PodNetwork {
                base: std::net::Ipv4Addr::new(a, b, c, 0),
                prefix: 24,
            });
        }
        let cidrs = self.pod_cidrs.lock().unwrap_or_else(|p| p.into_inner());
        cidrs
            .get(node)
            .and_then(|cidr| nodes::PodNetwork::parse(cidr))
    }

    fn observe_pod_cidr(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if !self.is_ours(name) {
            return;
        }
        let mut cidrs = self.pod_cidrs.lock().unwrap_or_else(|p| p.into_inner());
        match node.spec.as_ref().and_then(|s| s.pod_cidr.clone()) {
            Some(cidr) => cidrs.insert(name.to_string(), cidr),
            None => cidrs.remove(name),
        };
    }

    pub fn watches_namespace(&self, ns: Option<&str>) -> bool {
        self.config
            .namespace
            .as_deref()
            .is_none_or(|want| Some(want) == ns)
    }

    pub fn faults(&self, node: &str) -> NodeFaults {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .cloned()
            .unwrap_or_default()
    }

    fn node_wake(&self, node: &str) -> Arc<Notify> {
        self.wakes.get(node).cloned().unwrap_or_default()
    }

    fn update_faults(
        &self,
        node: &str,
        f: impl FnOnce(&mut NodeFaults),
    ) -> Result<(), NodeSimError> {
        if !self.is_ours(node) {
            return Err(NodeSimError::UnknownNode(node.into()));
        }
        f(self
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(node.into())
            .or_default());
        if let Some(w) = self.wakes.get(node) {
            w.notify_one();
        }
        Ok(())
    }
}

/// Sets the faults a Node's `sim.rkcm.io/` annotations ask for (the CLI face of the
/// fault API: `kubectl annotate node ...`). Annotations that are absent change nothing;
/// an unknown value is logged and ignored.
fn apply_fault_annotations(shared: &Shared, node: &Node) {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if !shared.is_ours(name) {
        return;
    }
    let empty = BTreeMap::new();
    let annotations = node.metadata.annotations.as_ref().unwrap_or(&empty);
    let before = shared.faults(name);
    let mut after = before.clone();
    // A partition lasts exactly as long as its annotation: the annotation is the only
    // switch a partitioned node-sim can still see.
    after.partitioned = false;
    for (key, value) in annotations {
        if key == FAULT_HEARTBEAT {
            match value.as_str() {
                "stopped" => after.heartbeat_stopped = true,
                "running" => after.heartbeat_stopped = false,
                "partitioned" => after.partitioned = true,
                other => tracing::warn!(
                    node = name,
                    value = other,
                    "{FAULT_HEARTBEAT}: expected stopped, running or partitioned"
                ),
            }
        } else if key == FAULT_KILLED {
            if value == "true" {
                after.killed = true;
            }
        } else if let Some(kind) = key.strip_prefix(FAULT_CONDITION_PREFIX) {
            let Some(condition) = ConditionType::ALL.into_iter().find(|c| c.as_str() == kind)
            else {
                tracing::warn!(node = name, annotation = %key, "unknown node condition");
                continue;
            };
            match value.as_str() {
                "True" | "False" => after.set_condition(condition, value == "True"),
                other => {
                    tracing::warn!(node = name, annotation = %key, value = other, "expected True or False")
                }
            }
        }
    }
    if after != before {
        tracing::info!(node = name, faults = ?after, "faults set by annotation");
        let _ = shared.update_faults(name, |f| *f = after);
    }
}

/// Posts a core/v1 Event about `pod`, as `component` (on `host`, for the kubelet)
/// reports it.
pub(crate) async fn pod_event(
    client: &kube::Client,
    pod: &Pod,
    type_: &str,
    reason: &str,
    message: &str,
    component: &str,
    host: Option<&str>,
) -> Result<(), kube::Error> {
    use kube::ResourceExt;
    let ns = pod.namespace().unwrap_or_default();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now_seconds());
    let mut source = serde_json::json!({"component": component});
    if let Some(host) = host {
        source["host"] = serde_json::json!(host);
    }
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{}.{:x}", pod.name_any(), rand::random::<u64>()), "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": pod.name_any(),
                           "uid": pod.uid(), "resourceVersion": pod.resource_version()},
        "reason": reason,
        "message": message,
        "type": type_,
        "source": source,
        "reportingComponent": component,
        "reportingInstance": host.unwrap_or(component),
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }))
    .map_err(kube::Error::SerdeError)?;
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), &ns)
        .create(&kube::api::PostParams::default(), &event)
        .await?;
    Ok(())
}

/// The current time, whole seconds (what the API's `Time` fields keep).
pub fn now_seconds() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// A running node simulator. Dropping it (or [`NodeSim::stop`]) stops every task; the
/// Nodes, Leases and pods stay in the API server as a vanished kubelet would leave them.
pub struct NodeSim {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl NodeSim {
    /// Register the nodes and start heartbeating, scheduling and running pods. Must be
    /// called inside a tokio runtime.
    pub fn start(client: kube::Client, config: NodeSimConfig) -> NodeSim {
        let shared = Arc::new(Shared::new(client, config));
        let mut tasks = Vec::new();
        let mut names: Vec<(&String, &usize)> = shared.index.iter().collect();
        names.sort_by_key(|(_, i)| **i);
        for (name, i) in names {
            tasks.push(tokio::spawn(nodes::run(shared.clone(), name.clone(), *i)));
        }

        let pod_api: Api<Pod> = match &shared.config.namespace {
            Some(ns) => Api::namespaced(shared.client.clone(), ns),
            None => Api::all(shared.client.clone()),
        };
        let (pod_reader, pod_writer) = reflector::store::<Pod>();
        let kubelet = Arc::new(kubelet::Kubelet::new(shared.clone()));
        let pod_events = reflector::reflector(
            pod_writer,
            watcher::watcher(pod_api, watcher::Config::default()).default_backoff(),
        );
        tasks.push(tokio::spawn(kubelet::run(
            kubelet,
            pod_reader.clone(),
            pod_events,
        )));
        tasks.push(tokio::spawn(attach::run(
            shared.clone(),
            pod_reader.clone(),
        )));

        let node_api: Api<Node> = Api::all(shared.client.clone());
        let (node_reader, node_writer) = reflector::store::<Node>();
        let node_events = reflector::reflector(
            node_writer,
            watcher::watcher(node_api, watcher::Config::default()).default_backoff(),
        );
        let wake = shared.clone();
        tasks.push(tokio::spawn(async move {
            node_events
                .for_each(|ev| {
                    match ev {
                        Ok(ev) => {
                            match &ev {
                                watcher::Event::InitDone => {
                                    wake.nodes_synced.store(true, Ordering::Relaxed)
                                }
                                watcher::Event::Apply(node) | watcher::Event::InitApply(node) => {
                                    wake.observe_pod_cidr(node);
                                    apply_fault_annotations(&wake, node)
                                }
                                _ => {}
                            }
                            wake.scheduler_wake.notify_one()
                        }
                        Err(e) => tracing::debug!(error = %e, "node watch failed; retrying"),
                    }
                    async {}
                })
                .await;
        }));
        let storage = (shared.config.scheduler || shared.config.csi)
            .then(|| csi::StorageStores::start(&shared, &mut tasks));
        if let (true, Some(storage)) = (shared.config.csi, &storage) {
            csi::start(
                shared.clone(),
                storage.clone(),
                node_reader.clone(),
                &mut tasks,
            );
        }
        if shared.config.scheduler {
            tasks.push(tokio::spawn(scheduler::run(
                shared.clone(),
                pod_reader,
                node_reader,
                storage,
            )));
        }
        NodeSim { shared, tasks }
    }

    /// The names of the simulated nodes, in index order.
    pub fn node_names(&self) -> Vec<String> {
        let mut v: Vec<(usize, String)> = self
            .shared
            .index
            .iter()
            .map(|(n, i)| (*i, n.clone()))
            .collect();
        v.sort();
        v.into_iter().map(|(_, n)| n).collect()
    }

    /// The faults currently set on a node.
    pub fn faults(&self, node: &str) -> NodeFaults {
        self.shared.faults(node)
    }

    /// Stop renewing the node's Lease and posting its status (a kubelet that hangs or loses
    /// its network); its pods keep running.
    pub fn stop_heartbeat(&self, node: &str) -> Result<(), NodeSimError> {
        self.shared
            .update_faults(node, |f| f.heartbeat_stopped = true)
    }

    /// Heartbeat again, at once.
    pub fn resume_heartbeat(&self, node: &str) -> Result<(), NodeSimError> {
        self.shared
            .update_faults(node, |f| f.heartbeat_stopped = false)
    }

    /// Report `condition` with status `on` (e.g. MemoryPressure true); reporting the healthy
    /// status clears the fault. Posted at the next heartbeat, at once if heartbeating.
    pub fn set_condition(
        &self,
        node: &str,
        condition: ConditionType,
        on: bool,
    ) -> Result<(), NodeSimError> {
        self.shared
            .update_faults(node, |f| f.set_condition(condition, on))
    }

    /// Cordon (or uncordon) the node: `spec.unschedulable`, as `kubectl cordon` sets it.
    pub async fn set_unschedulable(
        &self,
        node: &str,
        unschedulable: bool,
    ) -> Result<(), NodeSimError> {
        if !self.shared.is_ours(node) {
            return Err(NodeSimError::UnknownNode(node.into()));
        }
        let api: Api<Node> = Api::all(self.shared.client.clone());
        let patch = serde_json::json!({"spec": {"unschedulable": if unschedulable { serde_json::json!(true) } else { serde_json::Value::Null }}});
        api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| NodeSimError::Api {
                node: node.into(),
                source,
            })?;
        Ok(())
    }

    /// Kill the node: no heartbeat, no pod status, no pod deletion, from now on. The Node,
    /// its Lease and its pods stay as they are (for node-lifecycle and pod-gc to handle).
    pub fn kill(&self, node: &str) -> Result<(), NodeSimError> {
        self.shared.update_faults(node, |f| f.killed = true)
    }

    /// Stop every task, keeping the handle (as dropping it does).
    pub fn halt(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }

    /// Stop every task.
    pub fn stop(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

impl Drop for NodeSim {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A kube-rs client from a kubeconfig (YAML) that identifies itself as `node-sim/<version>`.
pub async fn client_from_kubeconfig(yaml: &str) -> Result<kube::Client, NodeSimError> {
    let kc = kube::config::Kubeconfig::from_yaml(yaml)
        .map_err(|e| NodeSimError::Kubeconfig(e.to_string()))?;
    let mut cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| NodeSimError::Kubeconfig(e.to_string()))?;
    cfg.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    kube::Client::try_from(cfg).map_err(|e| NodeSimError::Kubeconfig(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_names_parse_case_insensitively() {
        assert_eq!(
            "memorypressure".parse::<ConditionType>(),
            Ok(ConditionType::MemoryPressure)
        );
        assert_eq!(
            "PIDPressure".parse::<ConditionType>(),
            Ok(ConditionType::PIDPressure)
        );
        assert!("Hungry".parse::<ConditionType>().is_err());
    }

    #[tokio::test]
    async fn faults_are_per_node_and_only_for_our_nodes() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let shared = Shared::new(
            client,
            NodeSimConfig {
                nodes: 2,
                ..Default::default()
            },
        );
        shared
            .update_faults("sim-node-1", |f| f.heartbeat_stopped = true)
            .unwrap();
        assert!(shared.faults("sim-node-1").heartbeat_stopped);
        assert!(!shared.faults("sim-node-0").heartbeat_stopped);
        assert!(matches!(
            shared.update_faults("sim-node-2", |f| f.killed = true),
            Err(NodeSimError::UnknownNode(_))
        ));
        assert!(shared.watches_namespace(Some("any")));
    }
}

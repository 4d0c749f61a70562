//! node-ipam-controller, range allocator only (upstream `pkg/controller/nodeipam/`,
//! `ipam/range_allocator.go`): gives every Node a pod CIDR per family out of
//! `--cluster-cidr`, which kubelets (and node-sim) then take their pods' IPs from.
//!
//! Started only with `--allocate-node-cidrs` ([`config`] checks the flags as KCM does).
//! One [`CidrSet`] per cluster CIDR. Once the Node store holds its first snapshot, the
//! CIDRs nodes already have and the service ranges inside the cluster range are marked as
//! used; until then the workers wait. A Node added, or updated while it still has no
//! `spec.podCIDRs`, is queued; its worker takes the next free block of each set and
//! patches `spec.podCIDR`/`spec.podCIDRs` (as `node-controller`, which may patch Nodes).
//! A full range records `CIDRNotAvailable` on the Node and retries with backoff; a
//! deleted Node's blocks go back to their sets.

pub(crate) mod cidr;
mod cidrset;
mod config;
mod metrics;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::{Api, Patch, PatchParams};
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::controller::{ControllerContext, Runnable};
use crate::informer::{Change, Informer};
use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::{Recorder, NORMAL};
use crate::store::Store;

use cidr::Cidr;
use cidrset::CidrSet;
use metrics::CidrSetMetrics;

pub const NAME: &str = "node-ipam-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/nodes"];
/// The event source upstream's range allocator reports as.
const EVENT_SOURCE: &str = "cidrAllocator";
/// Upstream's `cidrUpdateWorkers`.
const WORKERS: usize = 30;
/// Upstream's `cidrUpdateRetries`.
const PATCH_TRIES: usize = 3;

/// The controller's flags (KCM's names, defaults and help). 0 for a mask size means "not
/// given": 24 for IPv4, 64 for IPv6.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// Should CIDRs for Pods be allocated and set on the cloud provider.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub allocate_node_cidrs: bool,
    /// CIDR Range for Pods in cluster. Requires --allocate-node-cidrs to be true
    #[arg(long, default_value = "")]
    pub cluster_cidr: String,
    /// Type of CIDR allocator to use
    #[arg(long, default_value = "RangeAllocator")]
    pub cidr_allocator_type: String,
    /// CIDR Range for Services in cluster. Requires --allocate-node-cidrs to be true
    #[arg(long, default_value = "")]
    pub service_cluster_ip_range: String,
    /// Mask size for node cidr in cluster. Default is 24 for IPv4 and 64 for IPv6.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub node_cidr_mask_size: i32,
    /// Mask size for IPv4 node cidr in dual-stack cluster. Default is 24.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub node_cidr_mask_size_ipv4: i32,
    /// Mask size for IPv6 node cidr in dual-stack cluster. Default is 64.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub node_cidr_mask_size_ipv6: i32,
}

impl Options {
    /// KCM's start-up checks of these flags, with its messages: `None` when
    /// `--allocate-node-cidrs` is off. The worker and the launcher refuse to start (exit
    /// 2) on an error.
    pub fn validate(&self) -> Result<(), String> {
        config::validate(self).map(|_| ())
    }
}

/// Where the allocator stands: the existing CIDRs must be marked before any is handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Startup {
    Waiting,
    Ready,
    Failed(String),
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    nodes: Store<Node>,
    sets: Mutex<Vec<CidrSet>>,
    /// CIDRs this controller patched onto a Node whose new spec the store does not show
    /// yet (so a stale view does not allocate twice).
    patched: Mutex<HashMap<String, Vec<Cidr>>>,
    startup: watch::Sender<Startup>,
    queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Vec<Runnable>> {
    // Taken before the flags are looked at, so what the controller reads is what it
    // declares whether it runs or not.
    let nodes = context.informers.get::<Node>();
    let config = match config::validate(options) {
        Ok(Some(config)) => config,
        Ok(None) => {
            info!(
                controller = NAME,
                "not starting: --allocate-node-cidrs is false"
            );
            return Ok(Vec::new());
        }
        Err(message) => anyhow::bail!("{message}"),
    };
    for warning in &config.warnings {
        info!(controller = NAME, "{warning}");
    }
    let metrics = CidrSetMetrics::register(&context.metrics);
    let mut sets = Vec::new();
    for (cluster, prefix) in config.cluster_cidrs.iter().zip(&config.node_prefixes) {
        sets.push(CidrSet::new(*cluster, *prefix, metrics.clone())?);
    }
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let queue = context.queue("node_ipam_controller");
    let (startup, _) = watch::channel(Startup::Waiting);
    let controller = Arc::new(Controller {
        client,
        recorder,
        nodes: nodes.store().clone(),
        sets: Mutex::new(sets),
        patched: Mutex::new(HashMap::new()),
        startup,
        queue: queue.clone(),
    });
    nodes.handle(&controller, Controller::on_node);
    {
        let controller = controller.clone();
        context
            .ready_checks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((
                "node-ipam-controller CIDR map".to_string(),
                Arc::new(move || *controller.startup.borrow() == Startup::Ready),
            ));
    }
    tokio::spawn(start_up(controller.clone(), nodes, config.service_cidrs));
    Ok(vec![Runnable::new(
        NAME,
        queue,
        WORKERS,
        controller,
        |controller, name| async move { controller.sync(&name).await },
    )])
}

/// Marks the service ranges and the nodes' existing CIDRs as used, from the first full
/// snapshot of the Nodes (upstream lists them live; the store's first snapshot is that
/// list). A node CIDR outside the cluster range keeps the controller from starting, as
/// it keeps KCM from starting.
async fn start_up(controller: Arc<Controller>, nodes: Arc<Informer<Node>>, services: Vec<Cidr>) {
    {
        let mut sets = lock(&controller.sets);
        for service in &services {
            for set in sets.iter_mut().filter(|s| s.cluster().overlaps(service)) {
                if let Err(e) = set.occupy(service) {
                    error!(controller = NAME, service = %service, cluster = %set.cluster(), error = %e, "filtering the service range out of the cluster range");
                }
            }
        }
    }
    nodes.wait_for_sync().await;
    let mut failure = None;
    for node in controller.nodes.list() {
        let cidrs = pod_cidrs(&node);
        if cidrs.is_empty() {
            continue;
        }
        if let Err(message) = controller.occupy(node_name(&node), &cidrs) {
            failure = Some(message);
            break;
        }
    }
    let state = match failure {
        None => {
            info!(controller = NAME, "starting range CIDR allocator");
            Startup::Ready
        }
        Some(message) => {
            error!(controller = NAME, error = %message, "cannot start: an existing node CIDR does not fit the cluster CIDRs");
            Startup::Failed(message)
        }
    };
    controller.startup.send_replace(state);
}

fn node_name(node: &Node) -> &str {
    node.name_str()
}

fn pod_cidrs(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.pod_cidrs.clone())
        .unwrap_or_default()
}

fn is_server_timeout(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.reason == "ServerTimeout")
}

/// The strategic-merge patch that gives a node its CIDRs.
fn cidr_patch(cidrs: &[String]) -> serde_json::Value {
    serde_json::json!({"spec": {"podCIDR": cidrs.first(), "podCIDRs": cidrs}})
}

impl Controller {
    fn on_node(&self, change: &Change<Node>) {
        match change {
            Change::Added(node) => self.queue.add(node_name(node).to_string()),
            Change::Updated { new, .. } => {
                let name = node_name(new);
                if pod_cidrs(new).is_empty() || lock(&self.patched).contains_key(name) {
                    self.queue.add(name.to_string());
                }
            }
            Change::Deleted(deleted) => {
                let node = deleted.object();
                let name = node_name(node);
                let ours = lock(&self.patched).remove(name).unwrap_or_default();
                let mut cidrs: Vec<Cidr> = Vec::new();
                for text in pod_cidrs(node) {
                    match Cidr::parse(&text) {
                        Ok(cidr) => cidrs.push(cidr),
                        Err(e) => {
                            warn!(controller = NAME, node = name, error = %e, "deleted node has an unparsable pod CIDR")
                        }
                    }
                }
                if cidrs.is_empty() {
                    cidrs = ours;
                }
                debug!(controller = NAME, node = name, cidrs = ?cidrs.iter().map(Cidr::to_string).collect::<Vec<_>>(), "releasing the CIDRs of a deleted node");
                self.release(name, &cidrs);
            }
        }
    }

    fn release(&self, node: &str, cidrs: &[Cidr]) {
        let mut sets = lock(&self.sets);
        for (index, cidr) in cidrs.iter().enumerate() {
            let Some(set) = sets.get_mut(index) else {
                warn!(controller = NAME, node, cidr = %cidr, index, "node has a CIDR at an index that does not exist in the cluster CIDRs configuration");
                continue;
            };
            if let Err(e) = set.release(cidr) {
                warn!(controller = NAME, node, cidr = %cidr, error = %e, "releasing CIDR");
            }
        }
    }

    /// Marks a node's existing CIDRs as used.
    fn occupy(&self, node: &str, cidrs: &[String]) -> Result<(), String> {
        let mut sets = lock(&self.sets);
        for (index, text) in cidrs.iter().enumerate() {
            let cidr = Cidr::parse(text)
                .map_err(|_| format!("failed to parse node {node}, CIDR {text}"))?;
            let set = sets.get_mut(index).ok_or_else(|| {
                format!("node:{node} has an allocated cidr: {text} at index:{index} that does not exist in cluster cidrs configuration")
            })?;
            set.occupy(&cidr).map_err(|e| {
                format!("failed to mark cidr[{cidr}] at idx [{index}] as occupied for node: {node}: {e}")
            })?;
        }
        Ok(())
    }

    /// One block from each set, or none at all.
    fn allocate(&self) -> Result<Vec<Cidr>, String> {
        let mut sets = lock(&self.sets);
        let mut taken = Vec::with_capacity(sets.len());
        for index in 0..sets.len() {
            match sets[index].allocate_next() {
                Ok(cidr) => taken.push(cidr),
                Err(e) => {
                    for (set, cidr) in sets.iter_mut().zip(&taken) {
                        let _ = set.release(cidr);
                    }
                    return Err(format!(
                        "failed to allocate cidr from cluster cidr at idx:{index}: {e}"
                    ));
                }
            }
        }
        Ok(taken)
    }

    fn record(&self, node: &Node, reason: &str) {
        let name = node_name(node);
        self.recorder.event_for(
            ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(name.to_string()),
                uid: node.metadata.uid.clone(),
                ..Default::default()
            },
            NORMAL,
            reason,
            format!("Node {name} status is now: {reason}"),
        );
    }

    async fn sync(&self, name: &str) -> anyhow::Result<()> {
        let mut startup = self.startup.subscribe();
        let state = startup
            .wait_for(|s| *s != Startup::Waiting)
            .await
            .map(|s| s.clone())
            .unwrap_or(Startup::Waiting);
        if let Startup::Failed(message) = state {
            anyhow::bail!("the range allocator did not start: {message}");
        }
        let Some(node) = self.nodes.get(name) else {
            return Ok(());
        };
        let existing = pod_cidrs(&node);
        if !existing.is_empty() {
            let ours = lock(&self.patched).remove(name);
            if let Some(ours) = ours {
                let ours_text: Vec<String> = ours.iter().map(Cidr::to_string).collect();
                if ours_text != existing {
                    error!(controller = NAME, node = name, podCIDRs = ?existing, "node already has a CIDR allocated; releasing the new one");
                    self.release(name, &ours);
                }
            }
            if let Err(message) = self.occupy(name, &existing) {
                warn!(controller = NAME, node = name, error = %message, "marking the node's CIDRs as used");
            }
            return Ok(());
        }
        if lock(&self.patched).contains_key(name) {
            // Patched already; the store has not caught up with it yet.
            return Ok(());
        }
        let cidrs = match self.allocate() {
            Ok(cidrs) => cidrs,
            Err(message) => {
                self.record(&node, "CIDRNotAvailable");
                anyhow::bail!("node {name}: {message}");
            }
        };
        let texts: Vec<String> = cidrs.iter().map(Cidr::to_string).collect();
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = cidr_patch(&texts);
        let mut last_error = None;
        for _ in 0..PATCH_TRIES {
            match api
                .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => {
                    lock(&self.patched).insert(name.to_string(), cidrs);
                    info!(controller = NAME, node = name, podCIDRs = ?texts, "set node PodCIDR");
                    return Ok(());
                }
                Err(e) if crate::api_errors::is_not_found(&e) => {
                    self.release(name, &cidrs);
                    return Ok(());
                }
                Err(e) => last_error = Some(e),
            }
        }
        let Some(error) = last_error else {
            return Ok(());
        };
        self.record(&node, "CIDRAssignmentFailed");
        if !is_server_timeout(&error) {
            self.release(name, &cidrs);
        }
        Err(anyhow::Error::new(error).context(format!(
            "failed to update node {name} PodCIDR to {texts:?} after {PATCH_TRIES} attempts"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_sets_both_fields() {
        let cidrs = ["10.244.1.0/24".to_string(), "fd00::/64".to_string()];
        assert_eq!(
            cidr_patch(&cidrs),
            serde_json::json!({"spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00::/64"]}})
        );
    }
}

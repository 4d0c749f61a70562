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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod,
    PodCondition, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::ResourceExt;
use serde_json::json;

use super::csi::{self, StorageStores};
use super::quantity;
use super::volume_binding::{self, PodVolumes, Progress, Written};
use super::Shared;

pub const SCHEDULER_NAME: &str = "default-scheduler";

/// Resource amounts in thousandths (cpu in millicores, memory in milli-bytes), by name.
pub type Resources = BTreeMap<String, i128>;

/// What a node already holds: the sum of its pods' requests and their number.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeUsage {
    pub requested: Resources,
    pub pods: i64,
}

impl NodeUsage {
    pub fn add(&mut self, requests: &Resources) {
        for (k, v) in requests {
            *self.requested.entry(k.clone()).or_default() += v;
        }
        self.pods += 1;
    }
}

/// The effective requests of a pod, as upstream's `PodRequests` computes them: the sum over
/// its containers (and restartable init containers, i.e. sidecars), or the largest single
/// init container if that is more, plus the pod overhead.
pub fn pod_requests(pod: &Pod) -> Resources {
    let mut total = Resources::new();
    let Some(spec) = &pod.spec else { return total };
    let requests_of = |c: &k8s_openapi::api::core::v1::Container| -> Resources {
        let mut r = Resources::new();
        if let Some(res) = c.resources.as_ref() {
            // A limit without a request defaults the request (the API server does this on create;
            // repeated here so a pod from any server counts the same).
            for source in [res.limits.as_ref(), res.requests.as_ref()]
                .into_iter()
                .flatten()
            {
                for (k, q) in source {
                    if let Some(m) = quantity::milli(&q.0) {
                        r.insert(k.clone(), m);
                    }
                }
            }
        }
        r
    };
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for c in spec.init_containers.iter().flatten() {
        let r = requests_of(c);
        if c.restart_policy.as_deref() == Some("Always") {
            for (k, v) in r {
                *sidecars.entry(k).or_default() += v;
            }
        } else {
            // A regular init container runs alongside the sidecars started before it.
            for (k, v) in r {
                let with_sidecars = v + sidecars.get(&k).copied().unwrap_or(0);
                let e = init_peak.entry(k).or_default();
                *e = (*e).max(with_sidecars);
            }
        }
    }
    for c in &spec.containers {
        for (k, v) in requests_of(c) {
            *total.entry(k).or_default() += v;
        }
    }
    for (k, v) in sidecars {
        *total.entry(k).or_default() += v;
    }
    for (k, v) in init_peak {
        let e = total.entry(k).or_default();
        *e = (*e).max(v);
    }
    for (k, q) in spec.overhead.iter().flatten() {
        if let Some(m) = quantity::milli(&q.0) {
            *total.entry(k.clone()).or_default() += m;
        }
    }
    total
}

/// Why one node does not fit, worded as upstream's filter plugins word it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Misfit {
    Unschedulable,
    UntoleratedTaint(String),
    NodeAffinity,
    Insufficient(String),
    TooManyPods,
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misfit::Unschedulable => write!(f, "node(s) were unschedulable"),
            Misfit::UntoleratedTaint(t) => write!(f, "node(s) had untolerated taint {{{t}}}"),
            Misfit::NodeAffinity => write!(f, "node(s) didn't match Pod's node affinity/selector"),
            Misfit::Insufficient(r) => write!(f, "Insufficient {r}"),
            Misfit::TooManyPods => write!(f, "Too many pods"),
        }
    }
}

fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let key_ok =
            t.key.as_deref().is_none_or(|k| k.is_empty()) || t.key.as_deref() == Some(&taint.key);
        let value_ok = match t.operator.as_deref() {
            Some("Exists") => true,
            // Equal is the default operator; an empty key only goes with Exists.
            _ => {
                t.key.as_deref().is_some_and(|k| !k.is_empty())
                    && t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
            }
        };
        effect_ok && key_ok && value_ok
    })
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(v), [bound]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            if op == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

pub(crate) fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    // An empty term selects nothing, as upstream's nodeaffinity helper has it.
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields.iter().all(|r| {
            // metadata.name is the only field a node selector can name.
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && requirement_matches(r, node.metadata.name.as_deref())
        })
}

/// Does the node satisfy the pod's nodeSelector and required node affinity?
pub fn matches_node_affinity(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = &pod.spec else { return true };
    let labels = node.metadata.labels.as_ref();
    if let Some(sel) = &spec.node_selector {
        if !sel
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        Some(ns) => ns.node_selector_terms.iter().any(|t| term_matches(t, node)),
        None => true,
    }
}

/// Every filter, in upstream's order; the first that rejects the node says why.
pub fn fits(pod: &Pod, requests: &Resources, node: &Node, usage: &NodeUsage) -> Result<(), Misfit> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    let node_spec = node.spec.as_ref();
    if node_spec.and_then(|s| s.unschedulable) == Some(true) {
        let cordon = Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        if !tolerates(tolerations, &cordon) {
            return Err(Misfit::Unschedulable);
        }
    }
    for taint in node_spec.and_then(|s| s.taints.as_deref()).unwrap_or(&[]) {
        if matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerates(tolerations, taint)
        {
            return Err(Misfit::UntoleratedTaint(format!(
                "{}: {}",
                taint.key,
                taint.value.as_deref().unwrap_or("")
            )));
        }
    }
    if !matches_node_affinity(pod, node) {
        return Err(Misfit::NodeAffinity);
    }
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let alloc = |name: &str| -> i128 {
        allocatable
            .and_then(|a| a.get(name))
            .and_then(|q| quantity::milli(&q.0))
            .unwrap_or(0)
    };
    if (usage.pods + 1) as i128 * 1000 > alloc("pods") {
        return Err(Misfit::TooManyPods);
    }
    for (name, want) in requests {
        if *want == 0 {
            continue;
        }
        let used = usage.requested.get(name).copied().unwrap_or(0);
        if used + want > alloc(name) {
            return Err(Misfit::Insufficient(name.clone()));
        }
    }
    Ok(())
}

/// Lower is better: the larger of the cpu and memory fractions the node would have requested.
fn score(requests: &Resources, node: &Node, usage: &NodeUsage) -> f64 {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let mut worst: f64 = 0.0;
    for name in ["cpu", "memory", "pods"] {
        let cap = allocatable
            .and_then(|a| a.get(name))
            .and_then(|q| quantity::milli(&q.0))
            .unwrap_or(0);
        if cap <= 0 {
            continue;
        }
        let used = if name == "pods" {
            (usage.pods + 1) as i128 * 1000
        } else {
            usage.requested.get(name).copied().unwrap_or(0)
                + requests.get(name).copied().unwrap_or(0)
        };
        worst = worst.max(used as f64 / cap as f64);
    }
    worst
}

/// Pick the node for `pod`, or say why none fits with upstream's message
/// (`0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.`).
pub fn schedule(
    pod: &Pod,
    nodes: &[&Node],
    usage: &HashMap<String, NodeUsage>,
) -> Result<String, String> {
    schedule_with(pod, nodes, usage, &|_| Ok(()))
}

/// [`schedule`] with one more filter after the built-in ones (VolumeBinding's), which may
/// give a node several reasons.
pub fn schedule_with(
    pod: &Pod,
    nodes: &[&Node],
    usage: &HashMap<String, NodeUsage>,
    extra: &dyn Fn(&Node) -> Result<(), Vec<String>>,
) -> Result<String, String> {
    if nodes.is_empty() {
        return Err("no nodes available to schedule pods".into());
    }
    let requests = pod_requests(pod);
    let empty = NodeUsage::default();
    let mut misfits: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(f64, &str)> = None;
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let u = usage.get(name).unwrap_or(&empty);
        match fits(pod, &requests, node, u)
            .map_err(|m| vec![m.to_string()])
            .and_then(|()| extra(node))
        {
            Ok(()) => {
                let s = score(&requests, node, u);
                if best.is_none_or(|(b, n)| s < b || (s == b && name < n)) {
                    best = Some((s, name));
                }
            }
            Err(reasons) => {
                for reason in reasons {
                    *misfits.entry(reason).or_default() += 1;
                }
            }
        }
    }
    if let Some((_, name)) = best {
        return Ok(name.to_string());
    }
    let mut reasons: Vec<String> = misfits.iter().map(|(r, n)| format!("{n} {r}")).collect();
    reasons.sort();
    Err(format!(
        "0/{} nodes are available: {}.",
        nodes.len(),
        reasons.join(", ")
    ))
}

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

/// Pods on a node count against it until they finish.
fn holds_resources(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// A pod whose volumes are being bound on its chosen node (PreBind): it counts on that
/// node meanwhile, and is bound once every claim is.
struct BindingVolumes {
    pod: Arc<Pod>,
    node: String,
    since: Instant,
    written: Vec<Written>,
}

/// The scheduler's memory between cycles: bindings the watch has not shown yet (upstream's
/// "assumed pods"), pods waiting for their volumes, the last message written per pod, and
/// cached requests.
#[derive(Default)]
struct SchedulerCache {
    assumed: HashMap<String, (String, Instant)>,
    binding_volumes: HashMap<String, BindingVolumes>,
    reported: HashMap<String, String>,
    requests: HashMap<String, Resources>,
}

/// kube-scheduler's bind timeout (`bindTimeoutSeconds`): how long PreBind waits for the
/// binder and the provisioner.
const BIND_TIMEOUT: Duration = Duration::from_secs(600);

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

/// Is the pod pinned by a required `metadata.name` affinity (as DaemonSet pods are) only
/// to existing nodes another simulator runs? Then it is that simulator's to bind, and
/// this one neither binds it nor reports it unschedulable.
fn pinned_elsewhere(pod: &Pod, others: &std::collections::HashSet<String>) -> bool {
    let names: Vec<&String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.iter().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .filter(|r| r.key == "metadata.name" && r.operator == "In")
        .flat_map(|r| r.values.iter().flatten())
        .collect();
    !names.is_empty() && names.iter().all(|n| others.contains(*n))
}

/// What one cycle decided for a pending pod.
enum Placement {
    Bind(Arc<Pod>, String),
    BindVolumes(Arc<Pod>, String, PodVolumes),
    Unschedulable(Arc<Pod>, String),
}

async fn cycle(
    shared: &Shared,
    pods: &Store<Pod>,
    nodes: &Store<Node>,
    storage: Option<&StorageStores>,
    cache: &mut SchedulerCache,
) {
    let all_nodes = nodes.state();
    let others: std::collections::HashSet<String> = all_nodes
        .iter()
        .map(|n| n.name_any())
        .filter(|n| !shared.is_ours(n))
        .collect();
    let our_nodes: Vec<Arc<Node>> = all_nodes
        .into_iter()
        .filter(|n| shared.is_ours(&n.name_any()))
        .collect();
    let mut node_refs: Vec<&Node> = our_nodes.iter().map(|n| n.as_ref()).collect();
    node_refs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut usage: HashMap<String, NodeUsage> = HashMap::new();
    let mut pending = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let now = Instant::now();
    cache
        .assumed
        .retain(|_, (_, at)| now.duration_since(*at) < Duration::from_secs(30));
    for pod in pods.state() {
        let uid = pod.uid().unwrap_or_default();
        seen.insert(uid.clone());
        if !shared.watches_namespace(pod.namespace().as_deref()) {
            continue;
        }
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        let node = match bound {
            Some(n) => {
                cache.assumed.remove(&uid);
                cache.binding_volumes.remove(&uid);
                n
            }
            None => match cache.assumed.get(&uid) {
                Some((n, _)) => n.clone(),
                None => match cache.binding_volumes.get_mut(&uid) {
                    Some(waiting) if is_pending(&pod) => {
                        waiting.pod = pod.clone();
                        waiting.node.clone()
                    }
                    _ => {
                        cache.binding_volumes.remove(&uid);
                        if is_pending(&pod) && !pinned_elsewhere(&pod, &others) {
                            pending.push(pod);
                        }
                        continue;
                    }
                },
            },
        };
        if !shared.is_ours(&node) || !holds_resources(&pod) {
            continue;
        }
        let req = cache
            .requests
            .entry(uid)
            .or_insert_with(|| pod_requests(&pod));
        usage.entry(node).or_default().add(req);
    }
    cache.requests.retain(|uid, _| seen.contains(uid));
    cache.reported.retain(|uid, _| seen.contains(uid));
    cache.binding_volumes.retain(|uid, _| seen.contains(uid));
    pending.sort_by(|a, b| {
        a.metadata
            .creation_timestamp
            .cmp(&b.metadata.creation_timestamp)
    });

    // Volumes promised to pods whose bindings are under way are no one else's.
    let mut promised: HashSet<String> = cache
        .binding_volumes
        .values()
        .flat_map(|b| b.written.iter().filter_map(|w| w.volume.clone()))
        .collect();
    let mut placements = Vec::new();
    for pod in pending {
        // DynamicResources' PreFilter (node-sim has no resource driver: see super::dra).
        if super::dra::has_resource_claims(&pod) {
            match super::dra::check(&shared.client, &pod, super::dra::Phase::Scheduling).await {
                Ok(Ok(_)) => {}
                Ok(Err(problem)) => {
                    let message = format!("0/{} nodes are available: {problem}.", node_refs.len());
                    placements.push(Placement::Unschedulable(pod, message));
                    continue;
                }
                Err(error) => {
                    tracing::debug!(pod = %pod.name_any(), %error, "cannot read the pod's resource claims");
                    continue;
                }
            }
        }
        let claims = match storage.map(|s| volume_binding::pre_filter(&pod, s)) {
            Some(Err(message)) if !node_refs.is_empty() => {
                let message = format!("0/{} nodes are available: {message}.", node_refs.len());
                placements.push(Placement::Unschedulable(pod, message));
                continue;
            }
            Some(Ok(Some(claims))) => Some(claims),
            _ => None,
        };
        let volume_filter = |node: &Node| -> Result<(), Vec<String>> {
            match (&claims, storage) {
                (Some(claims), Some(storage)) => {
                    volume_binding::filter(claims, node, storage, &promised).map(|_| ())
                }
                _ => Ok(()),
            }
        };
        match schedule_with(&pod, &node_refs, &usage, &volume_filter) {
            Ok(node) => {
                let req = pod_requests(&pod);
                usage.entry(node.clone()).or_default().add(&req);
                let volumes = match (
                    &claims,
                    storage,
                    node_refs.iter().find(|n| n.name_any() == node),
                ) {
                    (Some(claims), Some(storage), Some(chosen)) => {
                        volume_binding::filter(claims, chosen, storage, &promised)
                            .unwrap_or_default()
                    }
                    _ => PodVolumes::default(),
                };
                if volumes.is_empty() {
                    cache
                        .assumed
                        .insert(pod.uid().unwrap_or_default(), (node.clone(), now));
                    placements.push(Placement::Bind(pod, node));
                } else {
                    promised.extend(volumes.static_bindings.iter().map(|(v, _)| v.name_any()));
                    placements.push(Placement::BindVolumes(pod, node, volumes));
                }
            }
            Err(message) => placements.push(Placement::Unschedulable(pod, message)),
        }
    }

    let client = shared.client.clone();
    let events = shared.config.events;
    let mut bindings = Vec::new();
    let mut unschedulable = Vec::new();
    for placement in placements {
        match placement {
            Placement::Bind(pod, node) => bindings.push((pod, node)),
            Placement::Unschedulable(pod, message) => {
                let uid = pod.uid().unwrap_or_default();
                if cache.reported.get(&uid) != Some(&message) && !already_reported(&pod, &message) {
                    unschedulable.push((pod, message, "Unschedulable"));
                }
            }
            Placement::BindVolumes(pod, node, volumes) => {
                match write_volume_bindings(&client, &node, &volumes).await {
                    Ok(written) => {
                        tracing::debug!(pod = %pod.name_any(), node, "binding the pod's volumes");
                        cache.binding_volumes.insert(
                            pod.uid().unwrap_or_default(),
                            BindingVolumes {
                                pod,
                                node,
                                since: now,
                                written,
                            },
                        );
                    }
                    Err(error) => {
                        let message = format!("running PreBind plugin \"VolumeBinding\": {error}");
                        unschedulable.push((pod, message, "SchedulerError"));
                    }
                }
            }
        }
    }
    // Pods waiting for their volumes: bound once every claim is, scheduled again if the
    // binding was undone or took too long.
    if let Some(storage) = storage {
        let mut finished = Vec::new();
        for (uid, waiting) in &cache.binding_volumes {
            let Some(node) = node_refs.iter().find(|n| n.name_any() == waiting.node) else {
                finished.push((uid.clone(), Err("node is gone".to_string())));
                continue;
            };
            match volume_binding::check_bindings(node, &waiting.written, storage) {
                Progress::Bound => finished.push((uid.clone(), Ok(()))),
                Progress::Failed(error) => finished.push((uid.clone(), Err(error))),
                Progress::Waiting if now.duration_since(waiting.since) > BIND_TIMEOUT => finished
                    .push((
                        uid.clone(),
                        Err("timed out waiting for the condition".into()),
                    )),
                Progress::Waiting => {}
            }
        }
        for (uid, outcome) in finished {
            let Some(waiting) = cache.binding_volumes.remove(&uid) else {
                continue;
            };
            match outcome {
                Ok(()) => {
                    cache.assumed.insert(uid, (waiting.node.clone(), now));
                    bindings.push((waiting.pod, waiting.node));
                }
                Err(error) => {
                    let message = format!(
                        "running PreBind plugin \"VolumeBinding\": binding volumes: {error}"
                    );
                    unschedulable.push((waiting.pod, message, "SchedulerError"));
                }
            }
        }
    }
    let results: Vec<(String, Option<String>)> = futures::stream::iter(bindings)
        .map(|(pod, node)| {
            let client = client.clone();
            async move {
                let uid = pod.uid().unwrap_or_default();
                // DynamicResources' PreBind: the claims are reserved for the pod first.
                let reserved = if super::dra::has_resource_claims(&pod) {
                    super::dra::reserve(&client, &pod).await
                } else {
                    Ok(())
                };
                let outcome = match reserved {
                    Ok(()) => bind(&client, &pod, &node).await.map_err(|e| e.to_string()),
                    Err(error) => Err(error),
                };
                match outcome {
                    Ok(()) => {
                        if events {
                            let message = format!(
                                "Successfully assigned {}/{} to {node}",
                                pod.namespace().unwrap_or_default(),
                                pod.name_any()
                            );
                            if let Err(e) = super::pod_event(&client, &pod, "Normal", "Scheduled", &message, SCHEDULER_NAME, None).await {
                                tracing::debug!(pod = %pod.name_any(), error = %e, "cannot post the Scheduled event");
                            }
                        }
                        (uid, None)
                    }
                    Err(e) => {
                        tracing::debug!(pod = %pod.name_any(), node, error = %e, "binding failed; will retry");
                        (uid, Some(e.to_string()))
                    }
                }
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    for (uid, err) in results {
        if err.is_some() {
            cache.assumed.remove(&uid);
        }
    }
    for (pod, message, reason) in unschedulable {
        let uid = pod.uid().unwrap_or_default();
        match report_unschedulable(&client, &pod, &message, reason).await {
            Ok(()) => {
                cache.reported.insert(uid, message);
            }
            Err(e) => {
                tracing::debug!(pod = %pod.name_any(), error = %e, "cannot mark pod unschedulable; will retry")
            }
        }
    }
}

/// PreBind's API writes (`bindAPIUpdate`): each matched volume takes its claim (`PUT pv`
/// with the claimRef and `pv.kubernetes.io/bound-by-controller`), each claim to provision
/// the selected node (`PUT pvc`). Returns what was written, with the new resourceVersions.
async fn write_volume_bindings(
    client: &kube::Client,
    node: &str,
    volumes: &PodVolumes,
) -> Result<Vec<Written>, String> {
    let mut written = Vec::new();
    let volumes_api: Api<PersistentVolume> = Api::all(client.clone());
    for (volume, claim) in &volumes.static_bindings {
        let mut next = (**volume).clone();
        let already = volume_binding::is_volume_bound_to_claim(volume, claim);
        let spec = next.spec.get_or_insert_with(Default::default);
        spec.claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: claim.metadata.namespace.clone(),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            field_path: None,
        });
        if !already {
            next.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .entry(volume_binding::ANN_BOUND_BY_CONTROLLER.into())
                .or_insert_with(|| "yes".into());
        }
        let name = volume.name_any();
        let updated = volumes_api
            .replace(&name, &PostParams::default(), &next)
            .await
            .map_err(|e| format!("binding volume {name}: {e}"))?;
        written.push(Written {
            claim: format!(
                "{}/{}",
                claim.namespace().unwrap_or_default(),
                claim.name_any()
            ),
            volume: Some(name),
            resource_version: updated.metadata.resource_version.unwrap_or_default(),
        });
    }
    for claim in &volumes.provisions {
        let ns = claim.namespace().unwrap_or_default();
        let mut next = (**claim).clone();
        next.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(csi::ANN_SELECTED_NODE.into(), node.into());
        let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        let updated = claims_api
            .replace(&claim.name_any(), &PostParams::default(), &next)
            .await
            .map_err(|e| {
                format!(
                    "selecting node {node} for claim {ns}/{}: {e}",
                    claim.name_any()
                )
            })?;
        written.push(Written {
            claim: format!("{ns}/{}", claim.name_any()),
            volume: None,
            resource_version: updated.metadata.resource_version.unwrap_or_default(),
        });
    }
    Ok(written)
}

fn already_reported(pod: &Pod, message: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(message))
}

async fn bind(client: &kube::Client, pod: &Pod, node: &str) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod.name_any(), "namespace": ns, "uid": pod.uid()},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    match api
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &pod.name_any(),
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => Ok(()),
        // Someone else (another scheduler) got there first: nothing left to do.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// `PodScheduled=False` with `reason` (`Unschedulable`, or `SchedulerError` when binding
/// failed) and a `FailedScheduling` event.
async fn report_unschedulable(
    client: &kube::Client,
    pod: &Pod,
    message: &str,
    reason: &str,
) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let now = Time(super::now_seconds());
    let mut conditions: Vec<PodCondition> = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.retain(|c| c.type_ != "PodScheduled");
    conditions.push(PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(now.clone()),
        ..PodCondition::default()
    });
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let patch = json!({"metadata": {"uid": pod.uid()}, "status": {"conditions": conditions}});
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    super::pod_event(
        client,
        pod,
        "Warning",
        "FailedScheduling",
        message,
        SCHEDULER_NAME,
        None,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, extra: serde_json::Value) -> Node {
        let mut n = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": "a"}},
            "spec": {},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "3"}}});
        json_patch::merge(&mut n, &extra);
        serde_json::from_value(n).unwrap()
    }

    fn pod(extra: serde_json::Value) -> Pod {
        let mut p = json!({"metadata": {"name": "p", "namespace": "d", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}});
        json_patch::merge(&mut p, &extra);
        serde_json::from_value(p).unwrap()
    }

    fn run(p: &Pod, nodes: &[Node], usage: &[(&str, NodeUsage)]) -> Result<String, String> {
        let refs: Vec<&Node> = nodes.iter().collect();
        let usage = usage
            .iter()
            .map(|(n, u)| (n.to_string(), u.clone()))
            .collect();
        schedule(p, &refs, &usage)
    }

    #[test]
    fn spreads_to_the_least_requested_node() {
        let nodes = [node("n1", json!({})), node("n2", json!({}))];
        let mut busy = NodeUsage::default();
        busy.add(&pod_requests(&pod(json!({}))));
        assert_eq!(
            run(&pod(json!({})), &nodes, &[("n1", busy)]),
            Ok("n2".into())
        );
        assert_eq!(
            run(&pod(json!({})), &nodes, &[]),
            Ok("n1".into()),
            "ties go by name"
        );
    }

    #[test]
    fn requests_beyond_allocatable_do_not_fit() {
        let nodes = [node("n1", json!({}))];
        let big = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "3"}}}]}}),
        );
        assert_eq!(
            run(&big, &nodes, &[]),
            Err("0/1 nodes are available: 1 Insufficient cpu.".into())
        );
        let mut full = NodeUsage::default();
        for _ in 0..3 {
            full.add(&Resources::new());
        }
        assert_eq!(
            run(&pod(json!({})), &nodes, &[("n1", full)]),
            Err("0/1 nodes are available: 1 Too many pods.".into())
        );
        let gpu = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"example.com/gpu": "1"}}}]}}),
        );
        assert_eq!(
            run(&gpu, &nodes, &[]),
            Err("0/1 nodes are available: 1 Insufficient example.com/gpu.".into())
        );
    }

    #[test]
    fn init_containers_and_sidecars_count_as_upstream_counts_them() {
        let p = pod(json!({"spec": {
            "initContainers": [
                {"name": "side", "image": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "init", "image": "i", "resources": {"requests": {"cpu": "2"}}}],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m"}}}],
            "overhead": {"cpu": "10m"}}}));
        assert_eq!(pod_requests(&p).get("cpu"), Some(&2110));
    }

    #[test]
    fn node_selector_and_required_affinity() {
        let nodes = [
            node("n1", json!({})),
            node(
                "n2",
                json!({"metadata": {"labels": {"disk": "ssd", "gen": "5"}}}),
            ),
        ];
        let sel = pod(json!({"spec": {"nodeSelector": {"disk": "ssd"}}}));
        assert_eq!(run(&sel, &nodes, &[]), Ok("n2".into()));
        let none = pod(json!({"spec": {"nodeSelector": {"disk": "floppy"}}}));
        assert_eq!(
            run(&none, &nodes, &[]),
            Err(
                "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
                    .into()
            )
        );
        let gt = pod(
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}]}}}}}),
        );
        assert_eq!(run(&gt, &nodes, &[]), Ok("n2".into()));
        let not_in = pod(
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}]}}}}}),
        );
        assert_eq!(run(&not_in, &nodes, &[]), Ok("n1".into()));
        let empty_term = pod(
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{}]}}}}}),
        );
        assert!(
            run(&empty_term, &nodes, &[]).is_err(),
            "an empty term selects nothing"
        );
    }

    #[test]
    fn daemonset_pods_name_their_node_with_match_fields() {
        let nodes = [node("n1", json!({})), node("n2", json!({}))];
        let ds = pod(
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}}}),
        );
        assert_eq!(run(&ds, &nodes, &[]), Ok("n2".into()));
        let other_field = pod(
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n2"]}]}]}}}}}),
        );
        assert!(run(&other_field, &nodes, &[]).is_err());
    }

    #[test]
    fn taints_need_tolerations_and_cordoned_nodes_are_skipped() {
        let tainted = node(
            "n1",
            json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}}),
        );
        let noexec = node(
            "n2",
            json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}}),
        );
        let soft = node(
            "n3",
            json!({"spec": {"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}}),
        );
        let cordoned = node("n4", json!({"spec": {"unschedulable": true}}));
        let all = [tainted.clone(), noexec.clone(), cordoned.clone()];
        assert_eq!(
            run(&pod(json!({})), &all, &[]),
            Err("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable.".into())
        );
        assert_eq!(
            run(&pod(json!({})), &[soft], &[]),
            Ok("n3".into()),
            "PreferNoSchedule does not filter"
        );
        let tolerant = pod(
            json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}}),
        );
        assert_eq!(
            run(&tolerant, std::slice::from_ref(&tainted), &[]),
            Ok("n1".into())
        );
        let wrong_value =
            pod(json!({"spec": {"tolerations": [{"key": "dedicated", "value": "cpu"}]}}));
        assert!(run(&wrong_value, std::slice::from_ref(&tainted), &[]).is_err());
        let everything = pod(json!({"spec": {"tolerations": [{"operator": "Exists"}]}}));
        assert_eq!(
            run(&everything, &[cordoned], &[]),
            Ok("n4".into()),
            "tolerating everything includes the cordon"
        );
        assert_eq!(run(&everything, &[noexec], &[]), Ok("n2".into()));
    }

    #[test]
    fn no_nodes_and_what_is_pending() {
        assert_eq!(
            run(&pod(json!({})), &[], &[]),
            Err("no nodes available to schedule pods".into())
        );
        assert!(is_pending(&pod(json!({}))));
        assert!(!is_pending(&pod(json!({"spec": {"nodeName": "n1"}}))));
        assert!(!is_pending(&pod(
            json!({"spec": {"schedulerName": "other"}})
        )));
        assert!(!is_pending(&pod(
            json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})
        )));
        assert!(!is_pending(&pod(json!({"status": {"phase": "Failed"}}))));
    }
}

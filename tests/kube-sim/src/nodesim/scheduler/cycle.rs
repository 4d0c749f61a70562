//! One scheduling cycle over the shared stores, in phases: take a [`Snapshot`] (our nodes,
//! what they hold, the pending pods), [`place`] each pending pod, write the volume bindings
//! PreBind asks for, look at the pods waiting for their volumes, then bind and report.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::Store;
use kube::ResourceExt;

use super::binding::{already_reported, bind, report_unschedulable, write_volume_bindings};
use super::{is_pending, pod_requests, schedule_with, NodeUsage, Resources, SCHEDULER_NAME};
use crate::nodesim::csi::StorageStores;
use crate::nodesim::volume_binding::{self, PodVolumes, Progress, Written};
use crate::nodesim::{dra, Shared};

/// kube-scheduler's bind timeout (`bindTimeoutSeconds`): how long PreBind waits for the
/// binder and the provisioner.
const BIND_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a binding the watch has not shown yet still counts.
const ASSUME_FOR: Duration = Duration::from_secs(30);

/// Pods on a node count against it until they finish.
fn holds_resources(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// A pod whose volumes are being bound on its chosen node (PreBind): it counts on that
/// node meanwhile, and is bound once every claim is.
pub(super) struct BindingVolumes {
    pod: Arc<Pod>,
    node: String,
    since: Instant,
    written: Vec<Written>,
}

/// The scheduler's memory between cycles: bindings the watch has not shown yet (upstream's
/// "assumed pods"), pods waiting for their volumes, the last message written per pod, and
/// cached requests.
#[derive(Default)]
pub(super) struct SchedulerCache {
    assumed: HashMap<String, (String, Instant)>,
    pub(super) binding_volumes: HashMap<String, BindingVolumes>,
    reported: HashMap<String, String>,
    requests: HashMap<String, Resources>,
}

/// Is the pod pinned by a required `metadata.name` affinity (as DaemonSet pods are) only
/// to existing nodes another simulator runs? Then it is that simulator's to bind, and
/// this one neither binds it nor reports it unschedulable.
fn pinned_elsewhere(pod: &Pod, others: &HashSet<String>) -> bool {
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

/// What the cycle sees: our nodes (by name), what each already holds, and the pods to
/// place (oldest first).
struct Snapshot {
    nodes: Vec<Arc<Node>>,
    usage: HashMap<String, NodeUsage>,
    pending: Vec<Arc<Pod>>,
}

/// What is left to write at the end of a cycle: pods to bind to their node, and pods to
/// mark `PodScheduled=False` (message, reason).
#[derive(Default)]
struct Writes {
    bindings: Vec<(Arc<Pod>, String)>,
    unschedulable: Vec<(Arc<Pod>, String, &'static str)>,
}

pub(super) async fn cycle(
    shared: &Shared,
    pods: &Store<Pod>,
    nodes: &Store<Node>,
    storage: Option<&StorageStores>,
    cache: &mut SchedulerCache,
) {
    let now = Instant::now();
    let Snapshot {
        nodes,
        mut usage,
        pending,
    } = snapshot(shared, pods, nodes, cache, now);
    let node_refs: Vec<&Node> = nodes.iter().map(|n| n.as_ref()).collect();
    let placements = place(shared, storage, &node_refs, &mut usage, pending, cache, now).await;
    let mut writes = write_placements(&shared.client, placements, cache, now).await;
    if let Some(storage) = storage {
        check_volume_bindings(storage, &node_refs, cache, now, &mut writes);
    }
    bind_all(shared, writes.bindings, cache).await;
    report_all(&shared.client, writes.unschedulable, cache).await;
}

/// Our nodes, what each holds (bound pods, pods assumed or waiting for their volumes
/// there), and the pending pods this scheduler is to place; the cache forgets pods gone.
fn snapshot(
    shared: &Shared,
    pods: &Store<Pod>,
    nodes: &Store<Node>,
    cache: &mut SchedulerCache,
    now: Instant,
) -> Snapshot {
    let all_nodes = nodes.state();
    let others: HashSet<String> = all_nodes
        .iter()
        .map(|n| n.name_any())
        .filter(|n| !shared.is_ours(n))
        .collect();
    let mut our_nodes: Vec<Arc<Node>> = all_nodes
        .into_iter()
        .filter(|n| shared.is_ours(&n.name_any()))
        .collect();
    our_nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut usage: HashMap<String, NodeUsage> = HashMap::new();
    let mut pending = Vec::new();
    let mut seen = HashSet::new();
    cache
        .assumed
        .retain(|_, (_, at)| now.duration_since(*at) < ASSUME_FOR);
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
    Snapshot {
        nodes: our_nodes,
        usage,
        pending,
    }
}

/// Place each pending pod: DynamicResources' and VolumeBinding's PreFilter, then the
/// filters and the score; a placed pod counts on its node for the pods after it.
async fn place(
    shared: &Shared,
    storage: Option<&StorageStores>,
    node_refs: &[&Node],
    usage: &mut HashMap<String, NodeUsage>,
    pending: Vec<Arc<Pod>>,
    cache: &mut SchedulerCache,
    now: Instant,
) -> Vec<Placement> {
    // Volumes promised to pods whose bindings are under way are no one else's.
    let mut promised: HashSet<String> = cache
        .binding_volumes
        .values()
        .flat_map(|b| b.written.iter().filter_map(|w| w.volume.clone()))
        .collect();
    let mut placements = Vec::new();
    for pod in pending {
        // DynamicResources' PreFilter (node-sim has no resource driver: see crate::nodesim::dra).
        if dra::has_resource_claims(&pod) {
            match dra::check(&shared.client, &pod, dra::Phase::Scheduling).await {
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
        match schedule_with(&pod, node_refs, usage, &volume_filter) {
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
    placements
}

/// Sort the placements into writes; the volume bindings PreBind asks for are written now,
/// and their pods wait for them.
async fn write_placements(
    client: &kube::Client,
    placements: Vec<Placement>,
    cache: &mut SchedulerCache,
    now: Instant,
) -> Writes {
    let mut writes = Writes::default();
    for placement in placements {
        match placement {
            Placement::Bind(pod, node) => writes.bindings.push((pod, node)),
            Placement::Unschedulable(pod, message) => {
                let uid = pod.uid().unwrap_or_default();
                if cache.reported.get(&uid) != Some(&message) && !already_reported(&pod, &message) {
                    writes.unschedulable.push((pod, message, "Unschedulable"));
                }
            }
            Placement::BindVolumes(pod, node, volumes) => {
                match write_volume_bindings(client, &node, &volumes).await {
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
                        writes.unschedulable.push((pod, message, "SchedulerError"));
                    }
                }
            }
        }
    }
    writes
}

/// Pods waiting for their volumes: bound once every claim is, scheduled again if the
/// binding was undone or took too long.
fn check_volume_bindings(
    storage: &StorageStores,
    node_refs: &[&Node],
    cache: &mut SchedulerCache,
    now: Instant,
    writes: &mut Writes,
) {
    let mut finished = Vec::new();
    for (uid, waiting) in &cache.binding_volumes {
        let Some(node) = node_refs.iter().find(|n| n.name_any() == waiting.node) else {
            finished.push((uid.clone(), Err("node is gone".to_string())));
            continue;
        };
        match volume_binding::check_bindings(node, &waiting.written, storage) {
            Progress::Bound => finished.push((uid.clone(), Ok(()))),
            Progress::Failed(error) => finished.push((uid.clone(), Err(error))),
            Progress::Waiting if now.duration_since(waiting.since) > BIND_TIMEOUT => {
                finished.push((
                    uid.clone(),
                    Err("timed out waiting for the condition".into()),
                ))
            }
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
                writes.bindings.push((waiting.pod, waiting.node));
            }
            Err(error) => {
                let message =
                    format!("running PreBind plugin \"VolumeBinding\": binding volumes: {error}");
                writes
                    .unschedulable
                    .push((waiting.pod, message, "SchedulerError"));
            }
        }
    }
}

/// Bind the pods (DynamicResources' PreBind reserves their claims first), with a Scheduled
/// event; a pod whose binding failed is no longer assumed, so it is placed again.
async fn bind_all(shared: &Shared, bindings: Vec<(Arc<Pod>, String)>, cache: &mut SchedulerCache) {
    let client = shared.client.clone();
    let events = shared.config.events;
    let results: Vec<(String, Option<String>)> = futures::stream::iter(bindings)
        .map(|(pod, node)| {
            let client = client.clone();
            async move {
                let uid = pod.uid().unwrap_or_default();
                let reserved = if dra::has_resource_claims(&pod) {
                    dra::reserve(&client, &pod).await
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
                            scheduled_event(&client, &pod, &node).await;
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
}

async fn scheduled_event(client: &kube::Client, pod: &Pod, node: &str) {
    let message = format!(
        "Successfully assigned {}/{} to {node}",
        pod.namespace().unwrap_or_default(),
        pod.name_any()
    );
    if let Err(e) = crate::nodesim::pod_event(
        client,
        pod,
        "Normal",
        "Scheduled",
        &message,
        SCHEDULER_NAME,
        None,
    )
    .await
    {
        tracing::debug!(pod = %pod.name_any(), error = %e, "cannot post the Scheduled event");
    }
}

/// Mark the pods `PodScheduled=False`, remembering what was written so an unchanged
/// message is not written again.
async fn report_all(
    client: &kube::Client,
    unschedulable: Vec<(Arc<Pod>, String, &'static str)>,
    cache: &mut SchedulerCache,
) {
    for (pod, message, reason) in unschedulable {
        let uid = pod.uid().unwrap_or_default();
        match report_unschedulable(client, &pod, &message, reason).await {
            Ok(()) => {
                cache.reported.insert(uid, message);
            }
            Err(e) => {
                tracing::debug!(pod = %pod.name_any(), error = %e, "cannot mark pod unschedulable; will retry")
            }
        }
    }
}

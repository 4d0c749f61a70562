//! Monitors and the graph builder (upstream `graph_builder.go`): one metadata-only
//! informer-server stream per deletable resource (found through the informer-server's
//! discovery, re-read every discovery period so CRDs created later are covered), all
//! feeding one task that applies the changes to the graph in order and tells the
//! collector which objects to look at:
//!
//! - a new or changed object is linked under its owners (owners not seen yet become
//!   virtual nodes, queued for verification); owners it no longer names are revisited
//!   if they wait for their dependents;
//! - an object that starts being deleted with the `orphan` finalizer goes to the orphan
//!   queue; with `foregroundDeletion` it is marked as deleting its dependents, and they
//!   and it go to the delete queue;
//! - a deleted object's dependents go to the delete queue (their owner is gone), and so
//!   do its owners that wait for their dependents.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::Event;
use rkcm_informer_server::client::{self, ClientError};
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::{GroupVersionResource, Projection, ResourceInfo, WatchRequest};
use serde::Deserialize;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use tracing::{debug, info, warn};

use super::graph::{owner_diff, Graph, Node, ObjectRef};
use crate::queue::WorkQueue;

pub const ORPHAN_FINALIZER: &str = "orphan";
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// Resources the garbage collector never watches (KCM's defaults).
pub const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// A PartialObjectMetadata from the stream.
#[derive(Deserialize, Clone, Debug)]
pub struct MetaObject {
    pub metadata: ObjectMeta,
}

pub enum GraphChange {
    Upsert(ObjectRef, Box<ObjectMeta>),
    Delete(ObjectRef),
    /// A monitor's fresh snapshot: objects of (group, kind) not in it are gone.
    Snapshot {
        group: String,
        kind: String,
        uids: HashSet<String>,
    },
    /// The collector found a virtual node's object absent: act as if it was deleted.
    VirtualDelete(String),
}

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

fn api_version(info: &ResourceInfo) -> String {
    if info.group.is_empty() {
        info.version.clone()
    } else {
        format!("{}/{}", info.group, info.version)
    }
}

/// The resources to monitor: preferred version of each, with list, watch and delete,
/// minus the ignored ones.
pub fn deletable(resources: &[ResourceInfo]) -> Vec<ResourceInfo> {
    let mut seen = HashSet::new();
    resources
        .iter()
        .filter(|r| !r.resource.contains('/'))
        .filter(|r| seen.insert((r.group.clone(), r.resource.clone())))
        .filter(|r| {
            ["list", "watch", "delete"]
                .iter()
                .all(|v| r.verbs.iter().any(|x| x == v))
        })
        .filter(|r| !IGNORED.contains(&(r.group.as_str(), r.resource.as_str())))
        .cloned()
        .collect()
}

/// Owners known to be absent (upstream's absentOwnerCache, 500 entries): the dependents
/// of one deleted owner do not each read it again.
#[derive(Default)]
pub struct AbsentOwners {
    order: std::collections::VecDeque<String>,
    set: std::collections::HashSet<String>,
}

impl AbsentOwners {
    const CAPACITY: usize = 500;

    pub fn insert(&mut self, uid: &str) {
        if self.set.insert(uid.to_string()) {
            self.order.push_back(uid.to_string());
            while self.order.len() > Self::CAPACITY {
                if let Some(oldest) = self.order.pop_front() {
                    self.set.remove(&oldest);
                }
            }
        }
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.set.contains(uid)
    }
}

struct Monitor {
    task: tokio::task::JoinHandle<()>,
    synced: Arc<AtomicBool>,
}

pub struct GraphBuilder {
    pub graph: Arc<RwLock<Graph>>,
    /// Objects seen deleted, or found absent as owners.
    pub absent: Arc<std::sync::Mutex<AbsentOwners>>,
    pub changes: mpsc::UnboundedSender<GraphChange>,
    monitors: std::sync::Mutex<HashMap<(String, String), Monitor>>,
    client: InformerClient<Channel>,
    subscriber: String,
}

impl GraphBuilder {
    /// A builder, and the task that applies changes (run it).
    pub fn new(
        client: InformerClient<Channel>,
        subscriber: String,
        attempt_to_delete: Arc<WorkQueue<String>>,
        attempt_to_orphan: Arc<WorkQueue<String>>,
    ) -> (Arc<GraphBuilder>, impl std::future::Future<Output = ()>) {
        let (changes, receiver) = mpsc::unbounded_channel();
        let graph = Arc::new(RwLock::new(Graph::default()));
        let absent = Arc::new(std::sync::Mutex::new(AbsentOwners::default()));
        let builder = Arc::new(GraphBuilder {
            graph: graph.clone(),
            absent: absent.clone(),
            changes,
            monitors: std::sync::Mutex::new(HashMap::new()),
            client,
            subscriber,
        });
        let process = process_changes(
            graph,
            absent,
            receiver,
            attempt_to_delete,
            attempt_to_orphan,
        );
        (builder, process)
    }

    /// Starts monitors for new resources and stops those of vanished ones.
    pub fn sync_monitors(&self, resources: &[ResourceInfo]) {
        let mut monitors = self.monitors.lock().unwrap_or_else(|p| p.into_inner());
        let wanted: HashMap<(String, String), &ResourceInfo> = resources
            .iter()
            .map(|r| ((r.group.clone(), r.resource.clone()), r))
            .collect();
        monitors.retain(|key, monitor| {
            let keep = wanted.contains_key(key);
            if !keep {
                info!(group = %key.0, resource = %key.1, "resource gone; stopping its monitor");
                monitor.task.abort();
            }
            keep
        });
        for (key, info) in wanted {
            if monitors.contains_key(&key) {
                continue;
            }
            debug!(group = %info.group, resource = %info.resource, "starting monitor");
            let synced = Arc::new(AtomicBool::new(false));
            let task = tokio::spawn(monitor(
                self.client.clone(),
                self.subscriber.clone(),
                info.clone(),
                self.changes.clone(),
                synced.clone(),
            ));
            monitors.insert(key, Monitor { task, synced });
        }
    }

    pub fn monitors_synced(&self) -> bool {
        self.monitors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .all(|m| m.synced.load(Ordering::Relaxed))
    }

    pub fn monitor_count(&self) -> usize {
        self.monitors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

async fn monitor(
    client: InformerClient<Channel>,
    subscriber: String,
    info: ResourceInfo,
    changes: mpsc::UnboundedSender<GraphChange>,
    synced: Arc<AtomicBool>,
) {
    let request = WatchRequest {
        resource: Some(GroupVersionResource {
            group: info.group.clone(),
            version: info.version.clone(),
            resource: info.resource.clone(),
        }),
        projection: Projection::Metadata as i32,
        subscriber,
        ..Default::default()
    };
    let api_version = api_version(&info);
    let identity = |meta: &ObjectMeta| ObjectRef {
        api_version: api_version.clone(),
        kind: info.kind.clone(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
    };
    let stream = client::watch::<MetaObject>(client, request);
    futures::pin_mut!(stream);
    let mut snapshot: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        let change = match event {
            Ok(Event::Init) => {
                snapshot = Some(HashSet::new());
                continue;
            }
            Ok(Event::InitApply(object)) => {
                if let Some(uids) = snapshot.as_mut() {
                    uids.insert(object.metadata.uid.clone().unwrap_or_default());
                }
                GraphChange::Upsert(identity(&object.metadata), Box::new(object.metadata))
            }
            Ok(Event::InitDone) => {
                synced.store(true, Ordering::Relaxed);
                GraphChange::Snapshot {
                    group: info.group.clone(),
                    kind: info.kind.clone(),
                    uids: snapshot.take().unwrap_or_default(),
                }
            }
            Ok(Event::Apply(object)) => {
                GraphChange::Upsert(identity(&object.metadata), Box::new(object.metadata))
            }
            Ok(Event::Delete(object)) => GraphChange::Delete(identity(&object.metadata)),
            Err(ClientError::Status(status)) if status.code() == tonic::Code::NotFound => {
                // The resource is gone (a deleted CRD): the next discovery stops us.
                debug!(resource = %info.resource, "resource not served any more");
                continue;
            }
            Err(error) => {
                warn!(group = %info.group, resource = %info.resource, %error, "monitor stream interrupted; reconnecting");
                continue;
            }
        };
        if changes.send(change).is_err() {
            return;
        }
    }
}

async fn process_changes(
    graph: Arc<RwLock<Graph>>,
    absent: Arc<std::sync::Mutex<AbsentOwners>>,
    mut receiver: mpsc::UnboundedReceiver<GraphChange>,
    attempt_to_delete: Arc<WorkQueue<String>>,
    attempt_to_orphan: Arc<WorkQueue<String>>,
) {
    while let Some(change) = receiver.recv().await {
        if let GraphChange::Delete(identity) = &change {
            // Its dependents need not read it again to learn it is gone.
            absent
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(&identity.uid);
        }
        let mut to_delete = Vec::new();
        let mut to_orphan = Vec::new();
        {
            let mut graph = graph.write().unwrap_or_else(|p| p.into_inner());
            apply(&mut graph, change, &mut to_delete, &mut to_orphan);
        }
        for uid in to_delete {
            attempt_to_delete.add(uid);
        }
        for uid in to_orphan {
            attempt_to_orphan.add(uid);
        }
    }
}

/// Applies one change; fills the UIDs to look at.
pub fn apply(
    graph: &mut Graph,
    change: GraphChange,
    to_delete: &mut Vec<String>,
    to_orphan: &mut Vec<String>,
) {
    match change {
        GraphChange::Upsert(identity, meta) => {
            let owners = meta.owner_references.clone().unwrap_or_default();
            let being_deleted = meta.deletion_timestamp.is_some();
            let orphaning = being_deleted && has_finalizer(&meta, ORPHAN_FINALIZER);
            let foreground = being_deleted && has_finalizer(&meta, FOREGROUND_FINALIZER);
            let uid = identity.uid.clone();
            let was_foreground = graph
                .nodes
                .get(&uid)
                .is_some_and(|node| !node.virtual_node && node.deleting_dependents);
            let old_owners = match graph.nodes.get_mut(&uid) {
                Some(node) => {
                    let old = if node.virtual_node {
                        Vec::new()
                    } else {
                        node.owners.clone()
                    };
                    node.virtual_node = false;
                    node.identity = identity.clone();
                    node.owners = owners.clone();
                    node.being_deleted = being_deleted;
                    old
                }
                None => {
                    graph.nodes.insert(
                        uid.clone(),
                        Node {
                            identity: identity.clone(),
                            owners: owners.clone(),
                            dependents: HashSet::new(),
                            virtual_node: false,
                            being_deleted,
                            deleting_dependents: false,
                        },
                    );
                    Vec::new()
                }
            };
            let (added, removed, changed) = owner_diff(&old_owners, &owners);
            graph.unlink(&uid, &removed);
            for owner in removed.iter().chain(changed.iter().map(|(old, _)| old)) {
                if graph.get(&owner.uid).is_some_and(|o| o.deleting_dependents) {
                    // Its set of blocking dependents changed.
                    to_delete.push(owner.uid.clone());
                }
            }
            for virtual_owner in graph.link(&identity, &added) {
                to_delete.push(virtual_owner);
            }
            // An observed namespaced owner in another namespace than its dependent (or
            // named by a cluster-scoped dependent) cannot own it: let the collector
            // judge (and report) the reference.
            let misplaced = added.iter().any(|owner| {
                graph.get(&owner.uid).is_some_and(|o| {
                    !o.virtual_node
                        && !o.identity.namespace.is_empty()
                        && o.identity.namespace != identity.namespace
                })
            });
            if misplaced {
                to_delete.push(uid.clone());
            }
            // Transitions (upstream processTransitions). Orphaning is idempotent, so an
            // object seen again while it waits is simply queued again.
            if orphaning {
                to_orphan.push(uid.clone());
            }
            if foreground && !was_foreground {
                if let Some(node) = graph.nodes.get_mut(&uid) {
                    node.deleting_dependents = true;
                    to_delete.extend(node.dependents.iter().cloned());
                }
                to_delete.push(uid);
            } else if foreground {
                // Still waiting: its dependents may have moved on.
                to_delete.push(uid);
            }
        }
        GraphChange::Delete(identity) => removed(graph, &identity.uid, to_delete),
        GraphChange::VirtualDelete(uid) => {
            if graph.get(&uid).is_some_and(|n| n.virtual_node) {
                removed(graph, &uid, to_delete);
            }
        }
        GraphChange::Snapshot { group, kind, uids } => {
            let gone: Vec<String> = graph
                .nodes
                .values()
                .filter(|n| !n.virtual_node && n.identity.kind == kind)
                .filter(|n| super::operations::group_of(&n.identity.api_version) == group)
                .filter(|n| !uids.contains(&n.identity.uid))
                .map(|n| n.identity.uid.clone())
                .collect();
            for uid in gone {
                removed(graph, &uid, to_delete);
            }
        }
    }
}

fn removed(graph: &mut Graph, uid: &str, to_delete: &mut Vec<String>) {
    let Some(node) = graph.remove(uid) else {
        return;
    };
    to_delete.extend(node.dependents.iter().cloned());
    for owner in &node.owners {
        if graph.get(&owner.uid).is_some_and(|o| o.deleting_dependents) {
            to_delete.push(owner.uid.clone());
        }
    }
}

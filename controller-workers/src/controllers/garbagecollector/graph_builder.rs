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
//!   queue (and goes again when a dependent of it turns up meanwhile); with
//!   `foregroundDeletion` it is marked as deleting its dependents, and they and it go to
//!   the delete queue;
//! - a deleted object's dependents go to the delete queue (their owner is gone), and so
//!   do its owners that wait for their dependents.
//!
//! The collector decides only on a graph that holds what the monitors listed: a monitor
//! is synced once the objects of its list (the first, or the one after a RESET) are
//! applied to the graph, and stops being synced when another list begins; the builder
//! is synced when it has monitors and every one is. A list removes nothing from the graph
//! before it ends (its objects are applied as they come, those it did not name are
//! dropped at its end), so an owner never loses a dependent while its kind is relisted.
//! Keys the collector may not act on yet are held here ([`GraphBuilder::hold_orphan`],
//! [`GraphBuilder::hold_delete`]) and queued again when the monitors have synced.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::Event;
use rkcm_client::informer::{self as client, ClientError};
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
    /// The end of a monitor's list: objects of (group, kind) not in `uids` are gone
    /// (unless the list was cut short, `complete: false`), and the monitor is synced once
    /// this is applied, if it has not begun another list since.
    Snapshot {
        list: ListId,
        group: String,
        kind: String,
        uids: HashSet<String>,
        complete: bool,
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

/// One list of one monitor: a snapshot makes its monitor synced only if no other list
/// has begun since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListId {
    monitor: u64,
    list: u64,
}

struct Monitor {
    id: u64,
    group: String,
    kind: String,
    /// The list under way, or the last one.
    list: u64,
    synced: bool,
    /// `None` for a monitor fed by hand (tests).
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The monitors, and the keys waiting for them: one lock, so that a key is never held
/// after the release it waits for.
#[derive(Default)]
struct Monitors {
    by_resource: HashMap<(String, String), Monitor>,
    next_id: u64,
    /// Every monitor has synced once: before that the collector acts on nothing.
    started: bool,
    held_delete: HashSet<String>,
    held_orphan: HashSet<String>,
}

impl Monitors {
    fn synced(&self) -> bool {
        !self.by_resource.is_empty() && self.by_resource.values().all(|m| m.synced)
    }

    /// True when no monitor of the kind is still listing (a kind nobody monitors, such as
    /// an owner's unknown kind, is checked live only).
    fn kind_synced(&self, group: &str, kind: &str) -> bool {
        self.by_resource
            .values()
            .filter(|m| m.group == group && m.kind == kind)
            .all(|m| m.synced)
    }

    fn add(&mut self, key: (String, String), info: &ResourceInfo) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.by_resource.insert(
            key,
            Monitor {
                id,
                group: info.group.clone(),
                kind: info.kind.clone(),
                list: 0,
                synced: false,
                task: None,
            },
        );
        id
    }

    /// Keys that may be looked at again: all of them once every monitor has synced; the
    /// delete keys also when only some have (each is checked against its own kind
    /// again).
    fn release(&mut self) -> (Vec<String>, Vec<String>) {
        if self.synced() {
            if !self.started {
                self.started = true;
                info!(
                    monitors = self.by_resource.len(),
                    "garbage collector: every monitor has synced; proceeding to collect garbage"
                );
            }
            (
                self.held_delete.drain().collect(),
                self.held_orphan.drain().collect(),
            )
        } else if self.started {
            (self.held_delete.drain().collect(), Vec::new())
        } else {
            (Vec::new(), Vec::new())
        }
    }
}

fn lock(monitors: &Mutex<Monitors>) -> std::sync::MutexGuard<'_, Monitors> {
    monitors.lock().unwrap_or_else(|p| p.into_inner())
}

/// A monitor's link to the builder's bookkeeping.
#[derive(Clone)]
pub struct MonitorHandle {
    monitors: Arc<Mutex<Monitors>>,
    key: (String, String),
    id: u64,
}

impl MonitorHandle {
    /// A list begins (the first, or after a RESET): until its snapshot is applied the
    /// graph may lack objects of this kind.
    pub fn begin_list(&self) -> ListId {
        let mut monitors = lock(&self.monitors);
        let list = match monitors.by_resource.get_mut(&self.key) {
            Some(monitor) if monitor.id == self.id => {
                monitor.list += 1;
                monitor.synced = false;
                monitor.list
            }
            // Stopped meanwhile: its snapshot will match nothing.
            _ => 0,
        };
        ListId {
            monitor: self.id,
            list,
        }
    }
}

pub struct GraphBuilder {
    pub graph: Arc<RwLock<Graph>>,
    /// Objects seen deleted, or found absent as owners.
    pub absent: Arc<std::sync::Mutex<AbsentOwners>>,
    pub changes: mpsc::UnboundedSender<GraphChange>,
    monitors: Arc<Mutex<Monitors>>,
    attempt_to_delete: Arc<WorkQueue<String>>,
    attempt_to_orphan: Arc<WorkQueue<String>>,
    client: InformerClient<Channel>,
    subscriber: String,
}

impl GraphBuilder {
    /// A builder, and the processor that applies its changes (run it).
    pub fn new(
        client: InformerClient<Channel>,
        subscriber: String,
        attempt_to_delete: Arc<WorkQueue<String>>,
        attempt_to_orphan: Arc<WorkQueue<String>>,
    ) -> (Arc<GraphBuilder>, GraphProcessor) {
        let (changes, receiver) = mpsc::unbounded_channel();
        let graph = Arc::new(RwLock::new(Graph::default()));
        let absent = Arc::new(std::sync::Mutex::new(AbsentOwners::default()));
        let monitors = Arc::new(Mutex::new(Monitors::default()));
        let builder = Arc::new(GraphBuilder {
            graph: graph.clone(),
            absent: absent.clone(),
            changes,
            monitors: monitors.clone(),
            attempt_to_delete: attempt_to_delete.clone(),
            attempt_to_orphan: attempt_to_orphan.clone(),
            client,
            subscriber,
        });
        let processor = GraphProcessor {
            receiver,
            graph,
            absent,
            monitors,
            attempt_to_delete,
            attempt_to_orphan,
        };
        (builder, processor)
    }

    /// Starts monitors for new resources and stops those of vanished ones.
    pub fn sync_monitors(&self, resources: &[ResourceInfo]) {
        let released = {
            let mut monitors = lock(&self.monitors);
            let wanted: HashMap<(String, String), &ResourceInfo> = resources
                .iter()
                .map(|r| ((r.group.clone(), r.resource.clone()), r))
                .collect();
            monitors.by_resource.retain(|key, monitor| {
                let keep = wanted.contains_key(key);
                if !keep {
                    info!(group = %key.0, resource = %key.1, "resource gone; stopping its monitor");
                    if let Some(task) = &monitor.task {
                        task.abort();
                    }
                }
                keep
            });
            for (key, info) in wanted {
                if monitors.by_resource.contains_key(&key) {
                    continue;
                }
                debug!(group = %info.group, resource = %info.resource, "starting monitor");
                let id = monitors.add(key.clone(), info);
                let handle = MonitorHandle {
                    monitors: self.monitors.clone(),
                    key: key.clone(),
                    id,
                };
                let task = tokio::spawn(monitor(
                    self.client.clone(),
                    self.subscriber.clone(),
                    info.clone(),
                    self.changes.clone(),
                    handle,
                ));
                if let Some(monitor) = monitors.by_resource.get_mut(&key) {
                    monitor.task = Some(task);
                }
            }
            // A stopped monitor may have been the last one listing.
            monitors.release()
        };
        requeue(&self.attempt_to_delete, &self.attempt_to_orphan, released);
    }

    /// A monitor whose events the caller sends itself (tests stand in for its stream).
    #[cfg(test)]
    pub fn add_monitor_by_hand(&self, info: &ResourceInfo) -> MonitorHandle {
        let key = (info.group.clone(), info.resource.clone());
        let id = lock(&self.monitors).add(key.clone(), info);
        MonitorHandle {
            monitors: self.monitors.clone(),
            key,
            id,
        }
    }

    /// Every monitor has its list in the graph (false while there is none: nothing is
    /// known then).
    pub fn is_synced(&self) -> bool {
        lock(&self.monitors).synced()
    }

    /// The resources whose monitors are listing, for logs.
    pub fn unsynced(&self) -> Vec<String> {
        let monitors = lock(&self.monitors);
        let mut names: Vec<String> = monitors
            .by_resource
            .iter()
            .filter(|(_, m)| !m.synced)
            .map(|((group, resource), _)| {
                if group.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}.{group}")
                }
            })
            .collect();
        names.sort();
        names
    }

    pub fn monitor_count(&self) -> usize {
        lock(&self.monitors).by_resource.len()
    }

    /// Keeps `uid` for later (true) unless every monitor has synced: which objects still
    /// name an owner can be told only from a complete graph, whatever their kind.
    pub fn hold_orphan(&self, uid: &str) -> bool {
        let mut monitors = lock(&self.monitors);
        if monitors.synced() {
            return false;
        }
        monitors.held_orphan.insert(uid.to_string());
        true
    }

    /// Keeps `uid` for later (true) unless every monitor has synced once and the
    /// monitors of its own kind are synced now, or, with `whole_graph`, every monitor is.
    pub fn hold_delete(&self, uid: &str, identity: &ObjectRef, whole_graph: bool) -> bool {
        let mut monitors = lock(&self.monitors);
        let ready = monitors.started
            && if whole_graph {
                monitors.synced()
            } else {
                monitors.kind_synced(
                    super::operations::group_of(&identity.api_version),
                    &identity.kind,
                )
            };
        if ready {
            return false;
        }
        monitors.held_delete.insert(uid.to_string());
        true
    }
}

fn requeue(
    attempt_to_delete: &WorkQueue<String>,
    attempt_to_orphan: &WorkQueue<String>,
    (delete, orphan): (Vec<String>, Vec<String>),
) {
    for uid in delete {
        attempt_to_delete.add(uid);
    }
    for uid in orphan {
        attempt_to_orphan.add(uid);
    }
}

async fn monitor(
    client: InformerClient<Channel>,
    subscriber: String,
    info: ResourceInfo,
    changes: mpsc::UnboundedSender<GraphChange>,
    handle: MonitorHandle,
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
    // One copy for every object of the resource; the graph interns the namespace.
    let (api_version, kind): (Arc<str>, Arc<str>) =
        (api_version(&info).into(), info.kind.as_str().into());
    let identity = |meta: &ObjectMeta| ObjectRef {
        api_version: api_version.clone(),
        kind: kind.clone(),
        namespace: meta.namespace.as_deref().unwrap_or_default().into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
    };
    let stream = client::watch::<MetaObject>(client, request);
    futures::pin_mut!(stream);
    // The list under way: its id, the UIDs it named, and whether it lost none.
    let mut listing: Option<(ListId, HashSet<String>, bool)> = None;
    while let Some(event) = stream.next().await {
        let change = match event {
            Ok(Event::Init) => {
                listing = Some((handle.begin_list(), HashSet::new(), true));
                continue;
            }
            Ok(Event::InitApply(object)) => {
                if let Some((_, uids, _)) = listing.as_mut() {
                    uids.insert(object.metadata.uid.clone().unwrap_or_default());
                }
                GraphChange::Upsert(identity(&object.metadata), Box::new(object.metadata))
            }
            Ok(Event::InitDone) => {
                // Without a list under way there is nothing to tell gone objects by.
                let Some((list, uids, complete)) = listing.take() else {
                    continue;
                };
                GraphChange::Snapshot {
                    list,
                    group: info.group.clone(),
                    kind: info.kind.clone(),
                    uids,
                    complete,
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
                // An object the list could not deliver (a broken stream starts a new
                // list instead): its absence from the list proves nothing.
                if let Some((_, _, complete)) = listing.as_mut() {
                    *complete = false;
                }
                warn!(group = %info.group, resource = %info.resource, %error, "monitor stream interrupted; reconnecting");
                continue;
            }
        };
        if changes.send(change).is_err() {
            return;
        }
    }
}

/// Applies the monitors' changes to the graph, in order, and queues what the collector
/// must look at.
pub struct GraphProcessor {
    receiver: mpsc::UnboundedReceiver<GraphChange>,
    graph: Arc<RwLock<Graph>>,
    absent: Arc<std::sync::Mutex<AbsentOwners>>,
    monitors: Arc<Mutex<Monitors>>,
    attempt_to_delete: Arc<WorkQueue<String>>,
    attempt_to_orphan: Arc<WorkQueue<String>>,
}

impl GraphProcessor {
    pub async fn run(mut self) {
        while let Some(change) = self.receiver.recv().await {
            self.process(change);
        }
    }

    /// Applies what has been sent so far (tests drive the builder step by step).
    #[cfg(test)]
    pub fn process_pending(&mut self) {
        while let Ok(change) = self.receiver.try_recv() {
            self.process(change);
        }
    }

    fn process(&self, change: GraphChange) {
        if let GraphChange::Delete(identity) = &change {
            // Its dependents need not read it again to learn it is gone.
            self.absent
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(&identity.uid);
        }
        let ended = match &change {
            GraphChange::Snapshot { list, .. } => Some(*list),
            _ => None,
        };
        let mut to_delete = Vec::new();
        let mut to_orphan = Vec::new();
        {
            let mut graph = self.graph.write().unwrap_or_else(|p| p.into_inner());
            apply(&mut graph, change, &mut to_delete, &mut to_orphan);
        }
        if let Some(list) = ended {
            // Only now, with the whole list in the graph, may the collector rely on it.
            let mut monitors = lock(&self.monitors);
            if let Some(monitor) = monitors
                .by_resource
                .values_mut()
                .find(|m| m.id == list.monitor && m.list == list.list)
            {
                monitor.synced = true;
            }
            let (delete, orphan) = monitors.release();
            to_delete.extend(delete);
            to_orphan.extend(orphan);
        }
        requeue(
            &self.attempt_to_delete,
            &self.attempt_to_orphan,
            (to_delete, to_orphan),
        );
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
            let identity = graph.intern_identity(identity);
            let owners = graph.owners(meta.owner_references.as_deref().unwrap_or_default());
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
                    node.orphaning = orphaning;
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
                            orphaning,
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
            // An owner already releasing its dependents has one more to release (the
            // owner may not have seen it when it looked).
            for owner in &added {
                if graph
                    .get(&owner.uid)
                    .is_some_and(|o| !o.virtual_node && o.orphaning)
                {
                    to_orphan.push(owner.uid.clone());
                }
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
        GraphChange::Snapshot {
            group,
            kind,
            uids,
            complete,
            ..
        } => {
            if !complete {
                // Dropping what an interrupted list did not name could drop an owner's
                // dependents: keep them until a list ends whole.
                warn!(%group, %kind, "a list ended without some of its objects; keeping what the graph had");
                return;
            }
            let gone: Vec<String> = graph
                .nodes
                .values()
                .filter(|n| !n.virtual_node && *n.identity.kind == *kind)
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

/// A builder whose monitors are fed by hand, for the collector's tests and ours.
#[cfg(test)]
#[path = "graph_builder_test_support.rs"]
pub(crate) mod test_support;

#[cfg(test)]
#[path = "graph_builder_tests.rs"]
mod tests;

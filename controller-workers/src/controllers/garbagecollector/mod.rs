//! garbage-collector-controller: deletes objects whose owners are gone, and carries out
//! foreground and orphan deletion (upstream `pkg/controller/garbagecollector/`).
//!
//! It runs in its own worker process by default (the launcher's `garbage-collector`
//! group): its monitors stream metadata only, for every deletable resource, from the
//! shared informer-server ([`graph_builder`]); the graph ([`graph`]) links owners and
//! dependents by UID; two queues drive the work:
//!
//! - attemptToDelete: an object whose owners may be gone (or an owner waiting for its
//!   dependents). Its live state decides, never the graph alone: owners are read live
//!   (absent, another UID, or a namespaced owner named by a cluster-scoped object count
//!   as dangling); with at least one solid owner only the dangling references are
//!   removed; with none the object is deleted, with the propagation its own finalizers
//!   ask for; an owner deleting its dependents loses its `foregroundDeletion` finalizer
//!   once no dependent blocks it;
//! - attemptToOrphan: an owner deleted with `orphan`: its dependents lose their
//!   reference to it, then it loses the finalizer.
//!
//! Neither acts before the graph holds what every monitor listed (upstream starts its
//! workers only once the graph builder has synced): a key taken too early is handed back
//! to the builder, which queues it again once the monitors it depends on have synced.
//! Orphaning needs every monitor synced (a dependent may be of any kind), and so does
//! finishing a foreground deletion; other deletions need their own kind's monitors
//! synced. The `orphan` finalizer goes only after every dependent the graph knows has
//! been read live without a reference to the owner (or released by our patch), and the
//! graph has shown no new one meanwhile.
//!
//! Sharded (`shards: N` in the launcher's groups, `--shard I/N` of a worker), every shard
//! still streams every resource whole and holds the whole graph, since an owner may live
//! in another namespace's shard or be cluster-scoped; a shard acts only on the objects it
//! holds by the informer-server's hash ([`rkcm_proto::v1::Shard::holds`]: the namespace,
//! or the name of a cluster-scoped object). An object's own collection (deleting it,
//! dropping its dangling references) is its shard's; an owner's side (orphaning its
//! dependents, removing its `orphan` or `foregroundDeletion` finalizer) is the owner's
//! shard's. So no two shards write for the same decision. Virtual owners (referenced,
//! never observed) are verified by every shard: a read, and a change to its own graph.

pub mod graph;
pub mod graph_builder;
pub mod operations;

use std::collections::HashSet;
use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::PropagationPolicy;
use tracing::{debug, info, warn};

use self::graph::ObjectRef;
use self::graph_builder::{GraphBuilder, GraphChange, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use self::operations::{Kinds, OpError, Operations};
use crate::controller::{ControllerContext, Runnable};
use crate::queue::WorkQueue;
use crate::recorder::{Recorder, WARNING};
use rkcm_proto::v1::Shard;

pub const NAME: &str = "garbage-collector-controller";

/// Passes over an orphaning owner's dependents before giving up for a while: each pass
/// handles those the graph showed since the last.
const ORPHAN_ROUNDS: usize = 10;
/// Reads and patches of one dependent whose resourceVersion keeps changing.
const CONFLICT_RETRIES: usize = 5;

pub struct Collector {
    builder: Arc<GraphBuilder>,
    ops: Operations,
    recorder: Recorder,
    attempt_to_delete: Arc<WorkQueue<String>>,
    /// The shard whose objects this collector acts on; `None`: all of them.
    shard: Option<Shard>,
}

/// Whether a collector in `shard` acts on `node`: its own objects, and every virtual
/// owner (verifying one only reads it, and changes this shard's graph alone).
fn acts_on(shard: Option<Shard>, node: &graph::Node) -> bool {
    node.virtual_node
        || shard.is_none_or(|shard| shard.holds(&node.identity.namespace, &node.identity.name))
}

enum OwnerState {
    Solid,
    Dangling,
    WaitingForDependentsDeletion,
}

/// It streams whichever resources discovery lists, not fixed informers.
pub const RESOURCES: &[&str] = &[];

/// The collector's flags (KCM's names and defaults, plus rkcm's discovery period).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of garbage collector workers that are allowed to sync concurrently.
    #[arg(long, default_value_t = 20)]
    pub concurrent_gc_syncs: usize,
    /// Enables the generic garbage collector. MUST be synced with the corresponding flag of
    /// the kube-apiserver (false turns it off even when --controllers selects it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_garbage_collector: bool,
    /// rkcm: how often the garbage collector re-reads discovery for new resources (KCM uses
    /// 30s, fixed).
    #[arg(long, default_value = "30s", value_parser = crate::flags::parse_go_duration)]
    pub garbage_collector_discovery_period: std::time::Duration,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Vec<Runnable>> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let attempt_to_delete = context.queue("garbage_collector_attempt_to_delete");
    let attempt_to_orphan = context.queue("garbage_collector_attempt_to_orphan");
    let informer_client = context.informers.client();
    let (builder, processor) = GraphBuilder::new(
        informer_client.clone(),
        format!("{} garbage-collector", crate::client::USER_AGENT_PREFIX),
        attempt_to_delete.clone(),
        attempt_to_orphan.clone(),
    );
    tokio::spawn(processor.run());
    let collector = Arc::new(Collector {
        builder: builder.clone(),
        ops: Operations {
            client,
            kinds: Kinds::default(),
        },
        recorder,
        attempt_to_delete: attempt_to_delete.clone(),
        shard: context.informers.shard(),
    });
    // Discovery now and every period after (KCM: 30 s), so new CRDs are monitored.
    {
        let collector = collector.clone();
        let period = options.garbage_collector_discovery_period;
        let mut client = informer_client;
        tokio::spawn(async move {
            // Until a discovery has given it monitors the collector decides nothing, so it
            // asks again soon (1 s doubling up to the period) rather than a period later.
            let first_retry = std::time::Duration::from_secs(1).min(period);
            let mut retry = first_retry;
            loop {
                match client
                    .list_resources(rkcm_proto::v1::ListResourcesRequest {})
                    .await
                {
                    Ok(response) => {
                        let resources = response.into_inner().resources;
                        let deletable = graph_builder::deletable(&resources);
                        if deletable.is_empty() {
                            // Not an API server without resources: a discovery that
                            // came back empty. Stopping every monitor would only
                            // relist them all next time.
                            warn!("garbage collector: discovery returned no deletable resource; keeping the current monitors");
                        } else {
                            collector.ops.kinds.replace(&resources);
                            collector.builder.sync_monitors(&deletable);
                        }
                    }
                    Err(status) => {
                        warn!(error = %status.message(), "garbage collector: discovery failed; keeping the current monitors")
                    }
                }
                let wait = if collector.builder.monitor_count() == 0 {
                    let wait = retry;
                    retry = (retry * 2).min(period);
                    wait
                } else {
                    retry = first_retry;
                    period
                };
                tokio::time::sleep(wait).await;
            }
        });
    }
    {
        // rkcm's own gauges (upstream has none for the graph): its size and monitors.
        let nodes = prometheus_client::metrics::gauge::Gauge::<i64>::default();
        let monitors = prometheus_client::metrics::gauge::Gauge::<i64>::default();
        let synced = prometheus_client::metrics::gauge::Gauge::<i64>::default();
        {
            let mut registry = context
                .metrics
                .registry
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            registry.register(
                "rkcm_garbage_collector_graph_nodes",
                "Objects (and virtual owners) in the garbage collector's graph",
                nodes.clone(),
            );
            registry.register(
                "rkcm_garbage_collector_monitors",
                "Resources the garbage collector monitors",
                monitors.clone(),
            );
            registry.register(
                "rkcm_garbage_collector_monitors_synced",
                "1 when every monitor has its first snapshot",
                synced.clone(),
            );
        }
        let builder = collector.builder.clone();
        tokio::spawn(async move {
            let mut unsynced_for = 0u64;
            loop {
                let size = builder
                    .graph
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .nodes
                    .len();
                nodes.set(size as i64);
                monitors.set(builder.monitor_count() as i64);
                let is_synced = builder.is_synced();
                synced.set(i64::from(is_synced));
                unsynced_for = if is_synced { 0 } else { unsynced_for + 1 };
                // Orphaning waits for every monitor: say which ones hold it up.
                if unsynced_for > 0 && unsynced_for.is_multiple_of(30) {
                    if builder.monitor_count() == 0 {
                        warn!(seconds = unsynced_for, "garbage collector: no monitor yet (discovery has not answered); deletions and orphaning wait for it");
                    } else {
                        warn!(seconds = unsynced_for, waiting_for = ?builder.unsynced(), "garbage collector: monitors not synced yet; orphaning waits for them");
                    }
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
    }
    {
        let builder = collector.builder.clone();
        context
            .ready_checks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((
                "garbage-collector monitors".to_string(),
                Arc::new(move || builder.is_synced()),
            ));
    }
    let workers = options.concurrent_gc_syncs;
    let deleting = {
        let collector = collector.clone();
        Runnable {
            name: NAME,
            queue: attempt_to_delete,
            workers,
            sync: Arc::new(move |uid| {
                let collector = collector.clone();
                async move { collector.attempt_to_delete(&uid).await }.boxed()
            }),
            max_retries: None,
        }
    };
    let orphaning = Runnable {
        name: NAME,
        queue: attempt_to_orphan,
        workers,
        sync: Arc::new(move |uid| {
            let collector = collector.clone();
            async move { collector.attempt_to_orphan(&uid).await }.boxed()
        }),
        max_retries: None,
    };
    Ok(vec![deleting, orphaning])
}

impl Collector {
    fn node(&self, uid: &str) -> Option<graph::Node> {
        self.builder
            .graph
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(uid)
            .cloned()
    }

    /// Where an owner reference of `dependent` points, or why it cannot point anywhere.
    async fn owner_state(
        &self,
        dependent: &ObjectRef,
        reference: &OwnerReference,
    ) -> Result<OwnerState, OpError> {
        let info = self
            .ops
            .kinds
            .lookup(&reference.api_version, &reference.kind)
            .ok_or_else(|| {
                OpError::UnknownKind(format!(
                    "{}, Kind={}",
                    reference.api_version, reference.kind
                ))
            })?;
        if info.namespaced && dependent.namespace.is_empty() {
            self.recorder.event_for(
                k8s_openapi::api::core::v1::ObjectReference {
                    api_version: Some(dependent.api_version.clone()),
                    kind: Some(dependent.kind.clone()),
                    name: Some(dependent.name.clone()),
                    uid: Some(dependent.uid.clone()),
                    ..Default::default()
                },
                WARNING,
                "OwnerRefInvalidNamespace",
                format!(
                    "ownerRef [{}, namespace: , name: {}, uid: {}] does not exist in namespace \"\"",
                    format_args!("{}/{}", reference.api_version, reference.kind),
                    reference.name,
                    reference.uid
                ),
            );
            return Ok(OwnerState::Dangling);
        }
        if self
            .builder
            .absent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&reference.uid)
        {
            return Ok(OwnerState::Dangling);
        }
        let owner = ObjectRef {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            namespace: if info.namespaced {
                dependent.namespace.clone()
            } else {
                String::new()
            },
            name: reference.name.clone(),
            uid: reference.uid.clone(),
        };
        Ok(match self.ops.get(&owner).await? {
            None => {
                self.builder
                    .absent
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(&reference.uid);
                OwnerState::Dangling
            }
            Some(meta)
                if meta.deletion_timestamp.is_some()
                    && meta
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f == FOREGROUND_FINALIZER) =>
            {
                OwnerState::WaitingForDependentsDeletion
            }
            Some(_) => OwnerState::Solid,
        })
    }

    async fn attempt_to_delete(&self, uid: &str) -> anyhow::Result<()> {
        let Some(node) = self.node(uid) else {
            return Ok(());
        };
        if !acts_on(self.shard, &node) {
            if node.deleting_dependents {
                // Its shard finishes its foreground deletion; ours deletes the
                // dependents in our share that block it.
                self.queue_blocking_dependents(&node);
            }
            return Ok(());
        }
        if self.builder.hold_delete(uid, &node.identity, false) {
            debug!(object = %node.identity, "waiting for the monitors of its kind to sync");
            return Ok(());
        }
        let live = match self.ops.get(&node.identity).await {
            Ok(live) => live,
            Err(OpError::UnknownKind(kind)) if node.virtual_node => {
                // An owner reference to a kind nobody serves: nothing to verify against.
                debug!(%kind, owner = %node.identity, "owner of an unknown kind");
                let _ = self
                    .builder
                    .changes
                    .send(GraphChange::VirtualDelete(uid.to_string()));
                return Ok(());
            }
            Err(error) => return Err(error.into()),
        };
        let Some(live) = live else {
            // Gone (or another object has its name): its dependents must be looked at.
            debug!(object = %node.identity, "absent; its dependents will be checked");
            let _ = self
                .builder
                .changes
                .send(GraphChange::VirtualDelete(uid.to_string()));
            if !node.virtual_node {
                let _ = self
                    .builder
                    .changes
                    .send(GraphChange::Delete(node.identity.clone()));
            }
            return Ok(());
        };
        if node.virtual_node {
            // It exists: its monitor will report it.
            return Ok(());
        }
        let being_deleted = live.deletion_timestamp.is_some();
        let has = |f: &str| live.finalizers.iter().flatten().any(|x| x == f);
        if being_deleted && !has(FOREGROUND_FINALIZER) {
            return Ok(());
        }
        if being_deleted && has(FOREGROUND_FINALIZER) {
            return self.process_deleting_dependents(&node).await;
        }
        let owners = live.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            return Ok(());
        }
        let mut solid = Vec::new();
        let mut dangling = Vec::new();
        let mut waiting = Vec::new();
        for reference in &owners {
            match self.owner_state(&node.identity, reference).await? {
                OwnerState::Solid => solid.push(reference.clone()),
                OwnerState::Dangling => dangling.push(reference.clone()),
                OwnerState::WaitingForDependentsDeletion => waiting.push(reference.clone()),
            }
        }
        let rv = live.resource_version.clone().unwrap_or_default();
        if !solid.is_empty() {
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(());
            }
            // Keep the object; drop the references that no longer hold it.
            let remaining: Vec<OwnerReference> = owners
                .iter()
                .filter(|o| {
                    !dangling
                        .iter()
                        .chain(waiting.iter())
                        .any(|d| d.uid == o.uid)
                })
                .cloned()
                .collect();
            info!(object = %node.identity, removed = dangling.len() + waiting.len(), "removing dangling owner references");
            self.ops
                .set_owner_references(&node.identity, &remaining, &rv)
                .await?;
            return Ok(());
        }
        if !waiting.is_empty() && !node.dependents.is_empty() {
            // An owner waits for this object, which has dependents of its own: if one of
            // them is itself deleting its dependents, unblock our references to avoid a
            // cycle; then delete this object in the foreground.
            let cycle = node
                .dependents
                .iter()
                .any(|d| self.node(d).is_some_and(|n| n.deleting_dependents));
            // The delete must find the object as read (or as we just wrote it).
            let mut read = (rv, owners.clone());
            if cycle {
                let unblocked: Vec<OwnerReference> = owners
                    .iter()
                    .map(|o| {
                        let mut o = o.clone();
                        if waiting.iter().any(|w| w.uid == o.uid) {
                            o.block_owner_deletion = Some(false);
                        }
                        o
                    })
                    .collect();
                let Some(written) = self
                    .ops
                    .set_owner_references(&node.identity, &unblocked, &read.0)
                    .await?
                else {
                    return Ok(());
                };
                read = (
                    written.resource_version.unwrap_or_default(),
                    written.owner_references.unwrap_or_default(),
                );
            }
            info!(object = %node.identity, "deleting (foreground): its owner waits for it and it has dependents");
            self.ops
                .delete(
                    &node.identity,
                    PropagationPolicy::Foreground,
                    Some((&read.0, &read.1)),
                )
                .await?;
            return Ok(());
        }
        let policy = if has(ORPHAN_FINALIZER) {
            PropagationPolicy::Orphan
        } else if has(FOREGROUND_FINALIZER) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        info!(object = %node.identity, ?policy, "deleting: no owner holds it any more");
        // Its owners were judged on this read: if they changed since (an orphaning
        // owner released it meanwhile, say), the delete must not go through.
        self.ops
            .delete(&node.identity, policy, Some((&rv, &owners)))
            .await?;
        Ok(())
    }

    async fn process_deleting_dependents(&self, node: &graph::Node) -> anyhow::Result<()> {
        // An incomplete graph could show no blocking dependent where there is one.
        if self
            .builder
            .hold_delete(&node.identity.uid, &node.identity, true)
        {
            debug!(object = %node.identity, "waiting for every monitor to sync before finishing a foreground deletion");
            return Ok(());
        }
        let blocking: Vec<graph::Node> = {
            let graph = self.builder.graph.read().unwrap_or_else(|p| p.into_inner());
            graph
                .blocking_dependents(&node.identity.uid)
                .into_iter()
                .cloned()
                .collect()
        };
        if blocking.is_empty() {
            info!(object = %node.identity, "no blocking dependents left; removing foregroundDeletion");
            self.ops
                .remove_finalizer(&node.identity, FOREGROUND_FINALIZER)
                .await?;
            return Ok(());
        }
        for dependent in blocking {
            if !dependent.being_deleted {
                self.attempt_to_delete.add(dependent.identity.uid.clone());
            }
        }
        Ok(())
    }

    /// Queues the dependents in this shard that still block `owner`'s foreground
    /// deletion and are not being deleted yet.
    fn queue_blocking_dependents(&self, owner: &graph::Node) {
        let pending: Vec<String> = {
            let graph = self.builder.graph.read().unwrap_or_else(|p| p.into_inner());
            graph
                .blocking_dependents(&owner.identity.uid)
                .into_iter()
                .filter(|d| !d.being_deleted && acts_on(self.shard, d))
                .map(|d| d.identity.uid.clone())
                .collect()
        };
        for uid in pending {
            self.attempt_to_delete.add(uid);
        }
    }

    async fn attempt_to_orphan(&self, uid: &str) -> anyhow::Result<()> {
        if self
            .node(uid)
            .is_some_and(|owner| !acts_on(self.shard, &owner))
        {
            // Another shard's owner: it orphans the dependents, wherever they are.
            return Ok(());
        }
        if self.builder.hold_orphan(uid) {
            debug!(%uid, "orphaning waits for every monitor to sync");
            return Ok(());
        }
        let Some(node) = self.node(uid) else {
            return Ok(());
        };
        let Some(live) = self.ops.get(&node.identity).await? else {
            return Ok(());
        };
        if live.deletion_timestamp.is_none()
            || !live
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == ORPHAN_FINALIZER)
        {
            return Ok(());
        }
        // Dependents checked live in this pass: none of them names the owner any more.
        let mut released: HashSet<String> = HashSet::new();
        for _ in 0..ORPHAN_ROUNDS {
            // The graph may have learnt of more dependents while we patched.
            let pending: Option<Vec<ObjectRef>> = {
                let graph = self.builder.graph.read().unwrap_or_else(|p| p.into_inner());
                graph.get(uid).map(|owner| {
                    owner
                        .dependents
                        .iter()
                        .filter(|d| !released.contains(*d))
                        .filter_map(|d| graph.get(d))
                        .map(|d| d.identity.clone())
                        .collect()
                })
            };
            let Some(pending) = pending else {
                // Without its node the graph no longer tells its dependents: its next
                // event queues it again.
                debug!(object = %node.identity, "left the graph while orphaning");
                return Ok(());
            };
            if pending.is_empty() {
                // A relist (or a new monitor) may have begun while we patched: what
                // it brings must be seen before the finalizer goes.
                if self.builder.hold_orphan(uid) {
                    debug!(object = %node.identity, "orphaning waits for every monitor to sync");
                    return Ok(());
                }
                info!(object = %node.identity, dependents = released.len(), "orphaned its dependents; removing the orphan finalizer");
                self.ops
                    .remove_finalizer(&node.identity, ORPHAN_FINALIZER)
                    .await?;
                return Ok(());
            }
            for dependent in pending {
                self.release_dependent(&dependent, uid).await?;
                released.insert(dependent.uid);
            }
        }
        anyhow::bail!(
            "{} keeps gaining dependents while they are released; trying again",
            node.identity
        )
    }

    /// Removes `owner_uid` from the live dependent's ownerReferences (nothing when it is
    /// gone or no longer names the owner). The patch carries the resourceVersion read,
    /// so a concurrent change is read again rather than overwritten.
    async fn release_dependent(
        &self,
        dependent: &ObjectRef,
        owner_uid: &str,
    ) -> anyhow::Result<()> {
        for _ in 0..CONFLICT_RETRIES {
            let Some(meta) = self.ops.get(dependent).await? else {
                return Ok(());
            };
            let owners = meta.owner_references.clone().unwrap_or_default();
            if !owners.iter().any(|o| o.uid == owner_uid) {
                return Ok(());
            }
            let remaining: Vec<OwnerReference> =
                owners.into_iter().filter(|o| o.uid != owner_uid).collect();
            match self
                .ops
                .set_owner_references(
                    dependent,
                    &remaining,
                    meta.resource_version.as_deref().unwrap_or_default(),
                )
                .await
            {
                // What the API server stored is what counts: the finalizer may go only
                // once the reference is gone there.
                Ok(Some(written))
                    if written
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == owner_uid) =>
                {
                    anyhow::bail!("{dependent} still names its owner after the patch")
                }
                Ok(_) => return Ok(()),
                Err(OpError::Api(kube::Error::Api(status))) if status.code == 409 => {
                    debug!(object = %dependent, "changed since read; reading it again");
                }
                Err(error) => return Err(error.into()),
            }
        }
        anyhow::bail!("{dependent} kept changing while its owner reference was being removed")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use http_body_util::BodyExt;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use rkcm_proto::v1::ResourceInfo;
    use serde_json::{json, Value};

    use super::graph_builder::test_support::*;
    use super::*;

    /// An object stored (`Some`) or deleted (`None`) at a path.
    type ConcurrentWrite = (String, Option<Value>);

    /// An API server in memory: objects by path, merge patches with the
    /// resourceVersion precondition, answers to fail on purpose, and a log of writes.
    #[derive(Default)]
    struct FakeApi {
        objects: Mutex<HashMap<String, Value>>,
        writes: Mutex<Vec<String>>,
        /// The next write to a path answers this code instead.
        failures: Mutex<HashMap<String, u16>>,
        /// Writes made by somebody else just before the next read of a path.
        before_read: Mutex<HashMap<String, Vec<ConcurrentWrite>>>,
    }

    fn status(code: u16, reason: &str) -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{reason} (fake)"), "reason": reason, "code": code})
    }

    /// JSON merge patch (RFC 7386).
    fn merge(target: &mut Value, patch: &Value) {
        match (target.as_object_mut(), patch.as_object()) {
            (Some(target), Some(patch)) => {
                for (key, value) in patch {
                    if value.is_null() {
                        target.remove(key);
                    } else {
                        merge(target.entry(key.clone()).or_insert(Value::Null), value);
                    }
                }
            }
            _ => *target = patch.clone(),
        }
    }

    impl FakeApi {
        fn put(&self, path: &str, object: Value) {
            self.objects
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(path.to_string(), object);
        }

        fn object(&self, path: &str) -> Option<Value> {
            self.objects
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(path)
                .cloned()
        }

        fn writes(&self) -> Vec<String> {
            self.writes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        }

        fn before_read(&self, path: &str, changes: Vec<ConcurrentWrite>) {
            self.before_read
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(path.to_string(), changes);
        }

        fn fail_next(&self, path: &str, code: u16) {
            self.failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(path.to_string(), code);
        }

        fn answer(&self, method: &http::Method, path: &str, body: &[u8]) -> (u16, Value) {
            if path.ends_with("/events") {
                return (201, serde_json::from_slice(body).unwrap_or(Value::Null));
            }
            if *method == http::Method::GET {
                let concurrent = self
                    .before_read
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(path)
                    .unwrap_or_default();
                for (changed, object) in concurrent {
                    let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
                    match object {
                        Some(object) => objects.insert(changed, object),
                        None => objects.remove(&changed),
                    };
                }
                return match self.object(path) {
                    Some(object) => (200, object),
                    None => (404, status(404, "NotFound")),
                };
            }
            self.writes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("{method} {path}"));
            if let Some(code) = self
                .failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(path)
            {
                let reason = if code == 409 {
                    "Conflict"
                } else {
                    "InternalError"
                };
                return (code, status(code, reason));
            }
            let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
            let Some(object) = objects.get_mut(path) else {
                return (404, status(404, "NotFound"));
            };
            match *method {
                http::Method::PATCH => {
                    let patch: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                    let current = object["metadata"]["resourceVersion"].clone();
                    let wanted = &patch["metadata"]["resourceVersion"];
                    if !wanted.is_null() && *wanted != current {
                        return (409, status(409, "Conflict"));
                    }
                    merge(object, &patch);
                    let next = current
                        .as_str()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                        + 1;
                    object["metadata"]["resourceVersion"] = json!(next.to_string());
                    (200, object.clone())
                }
                http::Method::DELETE => {
                    let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                    let wanted = &options["preconditions"];
                    let held = &object["metadata"];
                    let differs =
                        |field: &str| !wanted[field].is_null() && wanted[field] != held[field];
                    if differs("uid") || differs("resourceVersion") {
                        return (409, status(409, "Conflict"));
                    }
                    let object = object.clone();
                    objects.remove(path);
                    (200, object)
                }
                _ => (405, status(405, "MethodNotAllowed")),
            }
        }
    }

    fn client(api: Arc<FakeApi>) -> kube::Client {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let api = api.clone();
            async move {
                let method = request.method().clone();
                let path = request.uri().path().to_string();
                let body = request.into_body().collect().await?.to_bytes();
                let (code, value) = api.answer(&method, &path, &body);
                http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(bytes::Bytes::from(
                        value.to_string(),
                    )))
                    .map_err(kube::Error::HttpError)
            }
        });
        kube::Client::new(service, "default")
    }

    const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/ns/deployments/d";
    const REPLICA_SET: &str = "/apis/apps/v1/namespaces/ns/replicasets/rs";
    const POD: &str = "/api/v1/namespaces/ns/pods/p";

    fn owner_ref(kind: &str, api_version: &str, name: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": name,
            "controller": true, "blockOwnerDeletion": true})
    }

    /// Deployment d deleted with propagationPolicy=Orphan, its ReplicaSet rs and rs's
    /// Pod p, as the API server holds them.
    fn cluster() -> Arc<FakeApi> {
        let api = Arc::new(FakeApi::default());
        api.put(
            DEPLOYMENT,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "uid": "d", "resourceVersion": "10",
                "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["orphan"]}}),
        );
        api.put(
            REPLICA_SET,
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "rs", "namespace": "ns", "uid": "rs", "resourceVersion": "11",
                "ownerReferences": [owner_ref("Deployment", "apps/v1", "d")]}}),
        );
        api.put(
            POD,
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "p", "resourceVersion": "12",
                "ownerReferences": [owner_ref("ReplicaSet", "apps/v1", "rs")]}}),
        );
        api
    }

    struct Setup {
        h: Harness,
        collector: Collector,
        api: Arc<FakeApi>,
        deployments: ResourceInfo,
        sets: ResourceInfo,
        pods: ResourceInfo,
    }

    fn setup() -> Setup {
        let h = Harness::new();
        let api = cluster();
        let client = client(api.clone());
        let deployments = resource("apps", "deployments", "Deployment");
        let sets = resource("apps", "replicasets", "ReplicaSet");
        let pods = resource("", "pods", "Pod");
        let collector = Collector {
            builder: h.builder.clone(),
            ops: Operations {
                client: client.clone(),
                kinds: Kinds::default(),
            },
            recorder: Recorder::new(client, NAME),
            attempt_to_delete: h.delete.clone(),
            shard: None,
        };
        collector
            .ops
            .kinds
            .replace(&[deployments.clone(), sets.clone(), pods.clone()]);
        Setup {
            h,
            collector,
            api,
            deployments,
            sets,
            pods,
        }
    }

    fn stored_meta(api: &FakeApi, path: &str) -> ObjectMeta {
        meta(api.object(path).expect("stored")["metadata"].clone())
    }

    /// The next key of a queue, as a worker takes it.
    async fn take(queue: &crate::queue::WorkQueue<String>) -> String {
        let key = tokio::time::timeout(std::time::Duration::from_secs(5), queue.get())
            .await
            .expect("a key is queued")
            .expect("the queue runs");
        queue.done(&key);
        key
    }

    /// The failure of issue 31: a restarted collector saw the Deployment (deleted with
    /// orphan) before its ReplicaSet was in the graph, and removed the finalizer with
    /// `dependents=0`; the ReplicaSet, still owned, was then collected.
    #[tokio::test]
    async fn an_orphaning_owner_seen_before_its_dependents_keeps_its_finalizer_until_they_are_released(
    ) {
        let Setup {
            mut h,
            collector,
            api,
            deployments,
            sets,
            pods,
        } = setup();
        let d_monitor = h.monitor(&deployments);
        let rs_monitor = h.monitor(&sets);
        let p_monitor = h.monitor(&pods);
        let d = stored_meta(&api, DEPLOYMENT);
        let rs = stored_meta(&api, REPLICA_SET);
        let p = stored_meta(&api, POD);

        // Deployments list first; the other monitors are still listing.
        h.list(&d_monitor, &deployments, &[&d]);
        let rs_list = rs_monitor.begin_list();
        assert_eq!(take(&h.orphan).await, "d");
        collector.attempt_to_orphan("d").await.expect("held");
        let rs_identity = graph_builder::test_support::identity(&sets, &rs);
        collector
            .attempt_to_delete("rs")
            .await
            .expect("not known yet");
        assert!(
            api.writes().is_empty(),
            "nothing is written before the graph is loaded: {:?}",
            api.writes()
        );
        assert_eq!(
            stored_meta(&api, DEPLOYMENT).finalizers,
            Some(vec!["orphan".to_string()])
        );

        // The ReplicaSet is in, and its owner is queued again for it, but its list has
        // not ended: still nothing.
        h.upsert(&sets, &rs);
        assert_eq!(take(&h.orphan).await, "d");
        collector.attempt_to_orphan("d").await.expect("held");
        collector.attempt_to_delete("rs").await.expect("held");
        assert!(collector.builder.hold_delete("rs", &rs_identity, false));
        assert!(api.writes().is_empty(), "{:?}", api.writes());
        h.end_list(rs_list, &sets, &[&rs]);
        assert_eq!(h.orphan.len(), 0, "pods are still listing");
        h.list(&p_monitor, &pods, &[&p]);

        // Every monitor has synced: the held owner is back, and now it orphans.
        assert_eq!(take(&h.orphan).await, "d");
        collector.attempt_to_orphan("d").await.expect("orphans");
        assert_eq!(
            api.writes(),
            [
                format!("PATCH {REPLICA_SET}"),
                format!("PATCH {DEPLOYMENT}")
            ],
            "the ReplicaSet is released before the finalizer goes"
        );
        assert_eq!(stored_meta(&api, REPLICA_SET).owner_references, None);
        assert_eq!(stored_meta(&api, DEPLOYMENT).finalizers, None);
        assert_eq!(
            stored_meta(&api, POD).owner_references.map(|o| o.len()),
            Some(1),
            "the pod keeps its ReplicaSet"
        );
    }

    #[tokio::test]
    async fn a_relist_of_the_dependents_holds_orphaning_until_it_ends() {
        let Setup {
            mut h,
            collector,
            api,
            deployments,
            sets,
            pods,
        } = setup();
        let d_monitor = h.monitor(&deployments);
        let rs_monitor = h.monitor(&sets);
        let p_monitor = h.monitor(&pods);
        let rs = stored_meta(&api, REPLICA_SET);
        let p = stored_meta(&api, POD);
        let mut d = stored_meta(&api, DEPLOYMENT);
        d.deletion_timestamp = None;
        d.finalizers = None;
        h.list(&d_monitor, &deployments, &[&d]);
        h.list(&rs_monitor, &sets, &[]);
        h.list(&p_monitor, &pods, &[&p]);
        assert!(h.builder.is_synced());

        // The ReplicaSet was made while the stream was down; the stream comes back
        // with a RESET, and the Deployment's deletion arrives mid-relist.
        let relist = rs_monitor.begin_list();
        h.upsert(&deployments, &stored_meta(&api, DEPLOYMENT));
        assert_eq!(take(&h.orphan).await, "d");
        collector.attempt_to_orphan("d").await.expect("held");
        assert!(api.writes().is_empty(), "{:?}", api.writes());
        h.upsert(&sets, &rs);
        h.end_list(relist, &sets, &[&rs]);
        assert_eq!(take(&h.orphan).await, "d");
        collector.attempt_to_orphan("d").await.expect("orphans");
        assert_eq!(
            api.writes(),
            [
                format!("PATCH {REPLICA_SET}"),
                format!("PATCH {DEPLOYMENT}")
            ]
        );
    }

    #[tokio::test]
    async fn a_failed_release_keeps_the_finalizer_and_a_conflict_is_read_again() {
        let Setup {
            mut h,
            collector,
            api,
            deployments,
            sets,
            pods,
        } = setup();
        let d_monitor = h.monitor(&deployments);
        let rs_monitor = h.monitor(&sets);
        let p_monitor = h.monitor(&pods);
        h.list(&d_monitor, &deployments, &[&stored_meta(&api, DEPLOYMENT)]);
        h.list(&rs_monitor, &sets, &[&stored_meta(&api, REPLICA_SET)]);
        h.list(&p_monitor, &pods, &[&stored_meta(&api, POD)]);

        api.fail_next(REPLICA_SET, 500);
        assert!(collector.attempt_to_orphan("d").await.is_err());
        assert_eq!(api.writes(), [format!("PATCH {REPLICA_SET}")]);
        assert_eq!(
            stored_meta(&api, DEPLOYMENT).finalizers,
            Some(vec!["orphan".to_string()])
        );

        api.fail_next(REPLICA_SET, 409);
        collector.attempt_to_orphan("d").await.expect("orphans");
        assert_eq!(
            api.writes(),
            [
                format!("PATCH {REPLICA_SET}"),
                format!("PATCH {REPLICA_SET}"),
                format!("PATCH {REPLICA_SET}"),
                format!("PATCH {DEPLOYMENT}")
            ]
        );
        assert_eq!(stored_meta(&api, REPLICA_SET).owner_references, None);
        assert_eq!(stored_meta(&api, DEPLOYMENT).finalizers, None);
    }

    /// The collector read the ReplicaSet naming its Deployment, then found the Deployment
    /// gone: meanwhile the Deployment's orphaning had released the ReplicaSet. The delete
    /// decided on the old read must not go through.
    #[tokio::test]
    async fn a_delete_decided_on_a_stale_read_does_not_go_through() {
        let Setup {
            mut h,
            collector,
            api,
            deployments,
            sets,
            pods,
        } = setup();
        let d_monitor = h.monitor(&deployments);
        let rs_monitor = h.monitor(&sets);
        let p_monitor = h.monitor(&pods);
        h.list(&d_monitor, &deployments, &[&stored_meta(&api, DEPLOYMENT)]);
        h.list(&rs_monitor, &sets, &[&stored_meta(&api, REPLICA_SET)]);
        h.list(&p_monitor, &pods, &[&stored_meta(&api, POD)]);

        let mut released = api.object(REPLICA_SET).expect("stored");
        released["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("ownerReferences");
        released["metadata"]["resourceVersion"] = json!("20");
        api.before_read(
            DEPLOYMENT,
            vec![
                (REPLICA_SET.to_string(), Some(released)),
                (DEPLOYMENT.to_string(), None),
            ],
        );
        let error = collector
            .attempt_to_delete("rs")
            .await
            .expect_err("the owners changed since the read");
        assert!(
            error.to_string().contains("changed its ownerReferences"),
            "{error:#}"
        );
        assert!(api.object(REPLICA_SET).is_some(), "the ReplicaSet is kept");
        collector
            .attempt_to_delete("rs")
            .await
            .expect("decided again");
        assert!(api.object(REPLICA_SET).is_some());
        assert_eq!(api.writes(), [format!("DELETE {REPLICA_SET}")]);
    }

    fn node(namespace: &str, name: &str, virtual_node: bool) -> graph::Node {
        graph::Node {
            identity: ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: namespace.into(),
                name: name.into(),
                uid: format!("{namespace}-{name}"),
            },
            owners: Vec::new(),
            dependents: HashSet::new(),
            virtual_node,
            being_deleted: false,
            deleting_dependents: false,
            orphaning: false,
        }
    }

    /// The shard of 2 that holds `key`, and the other one.
    fn shards_of(key: &str) -> (Shard, Shard) {
        let index = rkcm_proto::shard_of(key, 2);
        (
            Shard { index, count: 2 },
            Shard {
                index: 1 - index,
                count: 2,
            },
        )
    }

    #[test]
    fn each_object_is_acted_on_by_one_shard_and_virtual_owners_by_all() {
        let (holds_ns, other) = shards_of("ns");
        let (holds_pv, other_pv) = shards_of("pv-1");
        let cases = [
            ("unsharded", None, node("ns", "a", false), true),
            (
                "namespaced, its shard",
                Some(holds_ns),
                node("ns", "a", false),
                true,
            ),
            (
                "namespaced, another shard",
                Some(other),
                node("ns", "a", false),
                false,
            ),
            (
                "cluster-scoped, by its name",
                Some(holds_pv),
                node("", "pv-1", false),
                true,
            ),
            (
                "cluster-scoped, another shard",
                Some(other_pv),
                node("", "pv-1", false),
                false,
            ),
            ("virtual owner", Some(other), node("ns", "a", true), true),
            (
                "one shard only",
                Some(Shard { index: 0, count: 1 }),
                node("ns", "a", false),
                true,
            ),
        ];
        for (what, shard, node, acts) in cases {
            assert_eq!(acts_on(shard, &node), acts, "{what}");
        }
    }

    /// Two collectors sharing one graph, sharded two ways: only the Deployment's shard
    /// orphans its ReplicaSet and removes its finalizer; once the ReplicaSet's owner is
    /// gone, only the ReplicaSet's shard deletes it.
    #[tokio::test]
    async fn only_the_shard_of_an_object_acts_on_it() {
        let Setup {
            mut h,
            collector,
            api,
            deployments,
            sets,
            pods,
        } = setup();
        let d_monitor = h.monitor(&deployments);
        let rs_monitor = h.monitor(&sets);
        let p_monitor = h.monitor(&pods);
        h.list(&d_monitor, &deployments, &[&stored_meta(&api, DEPLOYMENT)]);
        h.list(&rs_monitor, &sets, &[&stored_meta(&api, REPLICA_SET)]);
        h.list(&p_monitor, &pods, &[&stored_meta(&api, POD)]);
        let (mine, theirs) = shards_of("ns");
        let sharded = |shard| Collector {
            builder: collector.builder.clone(),
            ops: Operations {
                client: collector.ops.client.clone(),
                kinds: Kinds::default(),
            },
            recorder: collector.recorder.clone(),
            attempt_to_delete: collector.attempt_to_delete.clone(),
            shard: Some(shard),
        };
        let (holder, other) = (sharded(mine), sharded(theirs));
        for c in [&holder, &other] {
            c.ops
                .kinds
                .replace(&[deployments.clone(), sets.clone(), pods.clone()]);
        }

        other.attempt_to_orphan("d").await.expect("not its owner");
        assert!(api.writes().is_empty(), "{:?}", api.writes());
        holder.attempt_to_orphan("d").await.expect("orphans");
        assert_eq!(
            api.writes(),
            [
                format!("PATCH {REPLICA_SET}"),
                format!("PATCH {DEPLOYMENT}")
            ]
        );

        // The pod's ReplicaSet goes: the pod is collected by its shard only.
        let rs = stored_meta(&api, REPLICA_SET);
        api.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(REPLICA_SET);
        h.send(GraphChange::Delete(graph_builder::test_support::identity(
            &sets, &rs,
        )));
        other.attempt_to_delete("p").await.expect("not its pod");
        assert_eq!(api.writes().len(), 2, "{:?}", api.writes());
        holder.attempt_to_delete("p").await.expect("collects");
        assert_eq!(api.writes()[2], format!("DELETE {POD}"));
        assert!(api.object(POD).is_none());
    }
}

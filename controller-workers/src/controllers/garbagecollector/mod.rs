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
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::Shard;
use tonic::transport::Channel;

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
    spawn_discovery(
        collector.clone(),
        informer_client,
        options.garbage_collector_discovery_period,
    );
    spawn_graph_gauges(context, collector.builder.clone());
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

/// Upstream's periodic `Sync`: discovery now and every `period` after, the monitors
/// following the deletable resources it finds.
fn spawn_discovery(
    collector: Arc<Collector>,
    mut client: InformerClient<Channel>,
    period: std::time::Duration,
) {
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

/// rkcm's own gauges of the graph (upstream has none): its size and its monitors,
/// refreshed every second, with a warning while the monitors hold orphaning up.
fn spawn_graph_gauges(context: &ControllerContext, builder: Arc<GraphBuilder>) {
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
                    api_version: Some(dependent.api_version.to_string()),
                    kind: Some(dependent.kind.to_string()),
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
            api_version: reference.api_version.as_str().into(),
            kind: reference.kind.as_str().into(),
            namespace: if info.namespaced {
                dependent.namespace.clone()
            } else {
                "".into()
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
mod tests;

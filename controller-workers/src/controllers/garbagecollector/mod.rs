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

pub mod graph;
pub mod graph_builder;
pub mod operations;

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

pub const NAME: &str = "garbage-collector-controller";

pub struct Collector {
    builder: Arc<GraphBuilder>,
    ops: Operations,
    recorder: Recorder,
    attempt_to_delete: Arc<WorkQueue<String>>,
}

enum OwnerState {
    Solid,
    Dangling,
    WaitingForDependentsDeletion,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Vec<Runnable>> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let attempt_to_delete = context.queue("garbage_collector_attempt_to_delete");
    let attempt_to_orphan = context.queue("garbage_collector_attempt_to_orphan");
    let informer_client = context.informers.client();
    let (builder, process) = GraphBuilder::new(
        informer_client.clone(),
        format!("{} garbage-collector", crate::client::USER_AGENT_PREFIX),
        attempt_to_delete.clone(),
        attempt_to_orphan.clone(),
    );
    tokio::spawn(process);
    let collector = Arc::new(Collector {
        builder: builder.clone(),
        ops: Operations {
            client,
            kinds: Kinds::default(),
        },
        recorder,
        attempt_to_delete: attempt_to_delete.clone(),
    });
    // Discovery now and every period after (KCM: 30 s), so new CRDs are monitored.
    {
        let collector = collector.clone();
        let period = context.options.garbage_collector_discovery_period;
        let mut client = informer_client;
        tokio::spawn(async move {
            loop {
                match client
                    .list_resources(rkcm_proto::v1::ListResourcesRequest {})
                    .await
                {
                    Ok(response) => {
                        let resources = response.into_inner().resources;
                        collector.ops.kinds.replace(&resources);
                        let deletable = graph_builder::deletable(&resources);
                        collector.builder.sync_monitors(&deletable);
                    }
                    Err(status) => {
                        warn!(error = %status.message(), "garbage collector: discovery failed; keeping the current monitors")
                    }
                }
                tokio::time::sleep(period).await;
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
            loop {
                let size = builder
                    .graph
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .nodes
                    .len();
                nodes.set(size as i64);
                monitors.set(builder.monitor_count() as i64);
                synced.set(i64::from(
                    builder.monitor_count() > 0 && builder.monitors_synced(),
                ));
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
                Arc::new(move || builder.monitor_count() > 0 && builder.monitors_synced()),
            ));
    }
    let workers = context.options.concurrent_gc_syncs;
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
                self.ops
                    .set_owner_references(&node.identity, &unblocked, &rv)
                    .await?;
            }
            info!(object = %node.identity, "deleting (foreground): its owner waits for it and it has dependents");
            self.ops
                .delete(&node.identity, PropagationPolicy::Foreground)
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
        self.ops.delete(&node.identity, policy).await?;
        Ok(())
    }

    async fn process_deleting_dependents(&self, node: &graph::Node) -> anyhow::Result<()> {
        let blocking: Vec<graph::Node> = {
            let graph = self.builder.graph.read().unwrap_or_else(|p| p.into_inner());
            graph
                .blocking_dependents(&node.identity.uid)
                .into_iter()
                .cloned()
                .collect()
        };
        if !self.builder.monitors_synced() {
            // An incomplete graph could show no blocking dependent where there is one.
            anyhow::bail!(
                "waiting for the garbage collector's monitors to sync before finishing {}",
                node.identity
            );
        }
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

    async fn attempt_to_orphan(&self, uid: &str) -> anyhow::Result<()> {
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
        for dependent_uid in &node.dependents {
            let Some(dependent) = self.node(dependent_uid) else {
                continue;
            };
            let Some(meta) = self.ops.get(&dependent.identity).await? else {
                continue;
            };
            let owners = meta.owner_references.clone().unwrap_or_default();
            if !owners.iter().any(|o| o.uid == uid) {
                continue;
            }
            let remaining: Vec<OwnerReference> =
                owners.into_iter().filter(|o| o.uid != uid).collect();
            self.ops
                .set_owner_references(
                    &dependent.identity,
                    &remaining,
                    meta.resource_version.as_deref().unwrap_or_default(),
                )
                .await?;
        }
        info!(object = %node.identity, dependents = node.dependents.len(), "orphaned its dependents; removing the orphan finalizer");
        self.ops
            .remove_finalizer(&node.identity, ORPHAN_FINALIZER)
            .await?;
        Ok(())
    }
}

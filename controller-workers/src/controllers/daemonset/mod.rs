//! daemonset-controller: one daemon pod on every node that should run it (upstream
//! `pkg/controller/daemon/`).
//!
//! A node should run a DaemonSet's pod when the pod template's nodeName (if any),
//! nodeSelector and required node affinity fit it and its NoSchedule/NoExecute taints
//! are tolerated — counting the tolerations every daemon pod gets (not-ready and
//! unreachable NoExecute; disk, memory and PID pressure and unschedulable NoSchedule;
//! network-unavailable for host-network pods). A node whose only untolerated taints are
//! NoSchedule keeps a pod it already runs. Each pod is pinned to its node with a
//! required node affinity on `metadata.name` and left to the scheduler.
//!
//! The template's history is kept in ControllerRevisions (data identical to KCM's, so
//! rkcm takes over KCM's revisions); pods carry `controller-revision-hash` and
//! `pod-template-generation`. Updates are RollingUpdate (maxUnavailable, or maxSurge:
//! the new pod starts before the old one goes) or OnDelete. Failed daemon pods are
//! replaced with a per-node backoff (1 s doubling to 15 min). Status:
//! desired/current/misscheduled/ready/updated/available/unavailable numbers and
//! observedGeneration, through the status subresource.

mod placement;
mod sync;
mod update;
#[cfg(test)]
mod update_tests;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::controller::{ControllerContext, Runnable};
use crate::expectations::ControllerExpectations;
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::pod_control::PodControl;
use crate::queue::WorkQueue;
use crate::rate_limiter::Backoff;
use crate::recorder::Recorder;
use crate::selector::Selector;
use crate::store::{controller_of, key_of, Store};

pub use placement::node_should_run_daemon_pod;

pub const NAME: &str = "daemonset-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the node a daemon pod is for (nodeName or its required node affinity); `status` (phase, readiness, availability).
pub const FIELDS: crate::projection::FieldList =
    &[("v1/pods", &["spec.nodeName", "spec.affinity", "status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &[
    "v1/pods",
    "v1/nodes",
    "apps/v1/daemonsets",
    "apps/v1/controllerrevisions",
];
/// At most this many daemon pods are created or deleted in one sync.
pub const BURST_REPLICAS: usize = 250;

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    pod_control: PodControl,
    daemon_sets: Store<DaemonSet>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    revisions: Store<ControllerRevision>,
    expectations: ControllerExpectations,
    /// Replacing a node's failed daemon pod waits 1 s, doubling to 15 min, per
    /// DaemonSet generation and node.
    failed_pods_backoff: Backoff,
    queue: Arc<WorkQueue<String>>,
}

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of daemonset objects that are allowed to sync concurrently. Larger number = more
    /// responsive daemonsets, but more CPU (and network) load.
    #[arg(long, default_value_t = 2)]
    pub concurrent_daemonset_syncs: usize,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue("daemonset");
    let daemon_sets = context.informers.get::<DaemonSet>();
    let pods = context.informers.get::<Pod>();
    let nodes = context.informers.get::<Node>();
    let revisions = context.informers.get::<ControllerRevision>();
    let controller = Arc::new(Controller {
        pod_control: PodControl::new(client.clone(), recorder.clone()),
        client,
        recorder,
        daemon_sets: daemon_sets.store().clone(),
        pods: pods.store().clone(),
        nodes: nodes.store().clone(),
        revisions: revisions.store().clone(),
        expectations: ControllerExpectations::new(),
        failed_pods_backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(15 * 60)),
        queue: queue.clone(),
    });
    daemon_sets.handle(&controller, Controller::on_daemon_set);
    revisions.handle(&controller, Controller::on_revision);
    pods.handle(&controller, Controller::on_pod);
    nodes.handle(&controller, Controller::on_node);
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_daemonset_syncs,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

fn selector_of(ds: &DaemonSet) -> Option<Selector> {
    Selector::from_label_selector(Some(&ds.spec.as_ref()?.selector)).ok()
}

fn min_ready_seconds(ds: &DaemonSet) -> i32 {
    ds.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

impl Controller {
    fn enqueue(&self, ds: &DaemonSet) {
        self.queue.add(key_of(&ds.metadata));
    }

    fn on_daemon_set(&self, change: &Change<DaemonSet>) {
        match change {
            Change::Added(ds) => self.enqueue(ds),
            Change::Updated { old, new } => {
                if old.metadata.uid != new.metadata.uid {
                    // Deleted and recreated under the same name while we were away.
                    let key = key_of(&old.metadata);
                    self.expectations.delete(&key);
                    self.queue.add(key);
                }
                self.enqueue(new);
            }
            Change::Deleted(deleted) => {
                let key = key_of(&deleted.object().metadata);
                self.expectations.delete(&key);
                self.queue.add(key);
            }
        }
    }

    /// The DaemonSet a controllerRef names, if the cache has it with that UID.
    fn resolve(
        &self,
        namespace: &str,
        reference: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    ) -> Option<Arc<DaemonSet>> {
        self.daemon_sets.referenced(namespace, reference)
    }

    /// DaemonSets of the namespace whose (non-empty) selector matches `labels`.
    fn selecting(
        &self,
        namespace: &str,
        labels: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Vec<Arc<DaemonSet>> {
        self.daemon_sets
            .list_namespace(namespace)
            .into_iter()
            .filter(|ds| selector_of(ds).is_some_and(|s| !s.is_empty() && s.matches(labels)))
            .collect()
    }

    fn on_revision(&self, change: &Change<ControllerRevision>) {
        match change {
            Change::Added(revision) => {
                let namespace = revision.namespace_str();
                if revision.metadata.deletion_timestamp.is_some() {
                    self.revision_deleted(revision);
                } else if controller_of(&revision.metadata).is_none() {
                    // An orphan: whoever selects it may adopt it.
                    for ds in self.selecting(namespace, revision.metadata.labels.as_ref()) {
                        self.enqueue(&ds);
                    }
                }
                // An owned revision appearing is the controller's own doing: nothing to
                // sync (as upstream).
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let route = self.route(&old.metadata, &new.metadata);
                for ds in route
                    .previous
                    .iter()
                    .chain(&route.current)
                    .chain(&route.adopters)
                {
                    self.enqueue(ds);
                }
            }
            Change::Deleted(deleted) => self.revision_deleted(deleted.object()),
        }
    }

    /// Where an update of a pod or revision of `namespace` goes.
    fn route(
        &self,
        old: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        new: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> crate::controller_ref::OwnedUpdate<DaemonSet> {
        let namespace = new.namespace.as_deref().unwrap_or_default();
        crate::controller_ref::route_update(
            old,
            new,
            |r| self.resolve(namespace, r),
            || self.selecting(namespace, new.labels.as_ref()),
        )
    }

    fn revision_deleted(&self, revision: &ControllerRevision) {
        let namespace = revision.namespace_str();
        if let Some(ds) = controller_of(&revision.metadata).and_then(|r| self.resolve(namespace, r))
        {
            self.enqueue(&ds);
        }
    }

    fn on_pod(&self, change: &Change<Pod>) {
        match change {
            Change::Added(pod) => {
                if pod.metadata.deletion_timestamp.is_some() {
                    self.pod_deleted(pod);
                    return;
                }
                let namespace = pod.namespace_str();
                if let Some(reference) = controller_of(&pod.metadata) {
                    if let Some(ds) = self.resolve(namespace, reference) {
                        self.expectations.creation_observed(&key_of(&ds.metadata));
                        self.enqueue(&ds);
                    }
                    return;
                }
                for ds in self.selecting(namespace, pod.metadata.labels.as_ref()) {
                    self.enqueue(&ds);
                }
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                if new.metadata.deletion_timestamp.is_some() {
                    self.pod_deleted(new);
                    return;
                }
                let route = self.route(&old.metadata, &new.metadata);
                for ds in route.previous.iter().chain(&route.adopters) {
                    self.enqueue(ds);
                }
                if let Some(ds) = route.current {
                    self.enqueue(&ds);
                    let min_ready = min_ready_seconds(&ds);
                    if !crate::pods::is_pod_ready(old)
                        && crate::pods::is_pod_ready(new)
                        && min_ready > 0
                    {
                        self.queue.add_after(
                            key_of(&ds.metadata),
                            Duration::from_secs(min_ready as u64) + Duration::from_secs(1),
                        );
                    }
                }
            }
            Change::Deleted(deleted) => self.pod_deleted(deleted.object()),
        }
    }

    fn pod_deleted(&self, pod: &Pod) {
        let namespace = pod.namespace_str();
        if let Some(ds) = controller_of(&pod.metadata).and_then(|r| self.resolve(namespace, r)) {
            self.expectations.deletion_observed(&key_of(&ds.metadata));
            self.enqueue(&ds);
        }
    }

    fn on_node(&self, change: &Change<Node>) {
        match change {
            Change::Added(node) => {
                for ds in self.daemon_sets.list() {
                    if node_should_run_daemon_pod(node, &ds).0 {
                        self.enqueue(&ds);
                    }
                }
            }
            Change::Updated { old, new } => {
                if placement::should_ignore_node_update(old, new) {
                    return;
                }
                for ds in self.daemon_sets.list() {
                    if node_should_run_daemon_pod(old, &ds) != node_should_run_daemon_pod(new, &ds)
                    {
                        self.enqueue(&ds);
                    }
                }
            }
            // As upstream: a deleted node's pods are the pod garbage collector's.
            Change::Deleted(_) => {}
        }
    }
}

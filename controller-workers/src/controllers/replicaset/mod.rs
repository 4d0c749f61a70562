//! replicaset-controller: keeps `spec.replicas` pods of each ReplicaSet (upstream
//! `pkg/controller/replicaset/`).
//!
//! Handlers turn pod and ReplicaSet changes into ReplicaSet keys and count the pod
//! creations and deletions the controller is waiting for (expectations); the sync claims
//! the pods the selector matches (adopting orphans, releasing pods that stopped
//! matching), creates missing pods in slow-start batches or deletes surplus ones in
//! upstream's deletion order, and writes the status.

pub mod kind;
mod status;
mod sync;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};

use crate::controller::{ControllerContext, Runnable};
use crate::expectations::UidTrackingExpectations;
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::pod_control::PodControl;
use crate::queue::WorkQueue;

use self::kind::Replicated;
use crate::store::{controller_of, controller_uid, key_of, Store};

pub const NAME: &str = "replicaset-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the node (deletion ranking) and `status` (phase, readiness, restarts).
pub const FIELDS: crate::projection::FieldList = &[("v1/pods", &["spec.nodeName", "status"])];
/// The resources replicaset-controller's informers read.
pub const RESOURCES: &[&str] = &["v1/pods", "apps/v1/replicasets"];
/// The resources replicationcontroller-controller's informers read.
pub const REPLICATION_CONTROLLER_RESOURCES: &[&str] = &["v1/pods", "v1/replicationcontrollers"];
/// At most this many pods are created or deleted in one sync (upstream BurstReplicas).
pub const BURST_REPLICAS: usize = 500;

pub(crate) struct Controller<K: Replicated> {
    client: kube::Client,
    pod_control: PodControl,
    replica_sets: Store<K>,
    pods: Store<Pod>,
    expectations: UidTrackingExpectations,
    queue: Arc<WorkQueue<String>>,
}

/// replicaset-controller's flags (KCM's names and defaults).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of replica sets that are allowed to sync concurrently. Larger number =
    /// more responsive replica management, but more CPU (and network) load.
    #[arg(long, default_value_t = 5)]
    pub concurrent_replicaset_syncs: usize,
}

/// replicationcontroller-controller's flags (KCM's names and defaults).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct ReplicationControllerOptions {
    /// The number of replication controllers that are allowed to sync concurrently. Larger
    /// number = more responsive replica management, but more CPU (and network) load.
    #[arg(long, default_value_t = 5)]
    pub concurrent_rc_syncs: usize,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    build_for::<ReplicaSet>(context, options.concurrent_replicaset_syncs)
}

/// replicationcontroller-controller: the same controller for core/v1
/// ReplicationControllers, as upstream runs it.
pub fn build_replication_controller(
    context: &ControllerContext,
    options: &ReplicationControllerOptions,
) -> anyhow::Result<Runnable> {
    build_for::<ReplicationController>(context, options.concurrent_rc_syncs)
}

fn build_for<K: Replicated>(
    context: &ControllerContext,
    workers: usize,
) -> anyhow::Result<Runnable> {
    let client = context.clients.client(K::CONTROLLER)?;
    let recorder = crate::recorder::Recorder::new(client.clone(), K::EVENT_SOURCE);
    let queue = context.queue(K::QUEUE);
    let replica_sets = context.informers.get::<K>();
    let pods = context.informers.get::<Pod>();
    let controller = Arc::new(Controller {
        pod_control: PodControl::new(client.clone(), recorder.clone()),
        client,
        replica_sets: replica_sets.store().clone(),
        pods: pods.store().clone(),
        expectations: UidTrackingExpectations::new(),
        queue: queue.clone(),
    });
    replica_sets.handle(&controller, Controller::<K>::on_replica_set);
    pods.handle(&controller, Controller::<K>::on_pod);
    Ok(Runnable::new(
        K::CONTROLLER,
        queue,
        workers,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

impl<K: Replicated> Controller<K> {
    fn on_replica_set(&self, change: &Change<K>) {
        match change {
            Change::Added(rs) => self.queue.add(key_of(rs.meta())),
            Change::Updated { old, new } => {
                if old.meta().uid != new.meta().uid {
                    // Deleted and recreated under the same name while we were away.
                    self.expectations.delete(&key_of(old.meta()));
                }
                self.queue.add(key_of(new.meta()));
            }
            Change::Deleted(deleted) => {
                let key = key_of(deleted.object().meta());
                self.expectations.delete(&key);
                self.queue.add(key);
            }
        }
    }

    /// The ReplicaSet a controllerRef names, if it is in the cache with that UID.
    fn resolve(&self, namespace: &str, pod: &Pod) -> Option<Arc<K>> {
        self.replica_sets
            .referenced(namespace, controller_of(&pod.metadata)?)
    }

    /// ReplicaSets whose selector matches an orphan pod (candidates for adoption).
    fn matching_replica_sets(&self, pod: &Pod) -> Vec<Arc<K>> {
        let namespace = pod.namespace_str();
        self.replica_sets
            .list_namespace(namespace)
            .into_iter()
            .filter(|rs| {
                rs.pod_selector()
                    .map(|selector| {
                        !selector.is_empty() && selector.matches(pod.metadata.labels.as_ref())
                    })
                    .unwrap_or(false)
            })
            .collect()
    }

    fn on_pod(&self, change: &Change<Pod>) {
        match change {
            Change::Added(pod) => {
                if pod.metadata.deletion_timestamp.is_some() {
                    // Seen for the first time already terminating (e.g. after a relist).
                    self.pod_deleted(pod);
                    return;
                }
                let namespace = pod.namespace_str();
                if controller_uid(&pod.metadata).is_some() {
                    if let Some(rs) = self.resolve(namespace, pod) {
                        let key = key_of(rs.meta());
                        self.expectations.creation_observed(&key);
                        self.queue.add(key);
                    }
                    return;
                }
                for rs in self.matching_replica_sets(pod) {
                    self.queue.add(key_of(rs.meta()));
                }
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    // A resync: nothing changed.
                    return;
                }
                let labels_changed = old.metadata.labels != new.metadata.labels;
                if new.metadata.deletion_timestamp.is_some() {
                    // A graceful deletion counts as the deletion we expected, now.
                    self.pod_deleted(new);
                    if labels_changed {
                        self.pod_deleted(old);
                    }
                    return;
                }
                let namespace = new.namespace_str();
                let route = crate::controller_ref::route_update(
                    &old.metadata,
                    &new.metadata,
                    |r| self.replica_sets.referenced(namespace, r),
                    || self.matching_replica_sets(new),
                );
                for rs in route.previous.iter().chain(&route.adopters) {
                    self.queue.add(key_of(rs.meta()));
                }
                if let Some(rs) = route.current {
                    let key = key_of(rs.meta());
                    let min_ready = rs.min_ready_seconds();
                    self.queue.add(key.clone());
                    if !crate::pods::is_pod_ready(old)
                        && crate::pods::is_pod_ready(new)
                        && min_ready > 0
                    {
                        // Check again once it has been ready long enough to count as
                        // available.
                        self.queue.add_after(
                            key,
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
        if let Some(rs) = self.resolve(namespace, pod) {
            let key = key_of(rs.meta());
            self.expectations
                .deletion_observed(&key, &key_of(&pod.metadata));
            self.queue.add(key);
        }
    }
}

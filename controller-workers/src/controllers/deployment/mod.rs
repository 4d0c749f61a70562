//! deployment-controller: rolls a Deployment's pod template out through ReplicaSets
//! (upstream `pkg/controller/deployment/`).
//!
//! `mod.rs` holds the event handlers and the dispatch of a sync; `sync` the shared
//! steps (finding or creating the new ReplicaSet, proportional scaling, cleanup, status);
//! `rolling` and `recreate` the two strategies; `progress` the Progressing
//! condition and the deadline; `rollback` the deprecated rollbackTo annotation; and
//! [`util`] the pure helpers (annotations, revisions, surge arithmetic, hashing).

mod control;
mod new_replica_set;
mod progress;
mod recreate;
#[cfg(test)]
mod recreate_tests;
mod rollback;
mod rolling;
#[cfg(test)]
mod rolling_tests;
mod sync;
pub mod util;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::Recorder;
use crate::selector::Selector;
use crate::store::{controller_of, key_of, Store};

pub const NAME: &str = "deployment-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// only metadata and `status` (a Recreate rollout waits for the old pods to stop running).
pub const FIELDS: crate::projection::FieldList = &[("v1/pods", &["status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/pods", "apps/v1/replicasets", "apps/v1/deployments"];
/// A key that keeps failing is dropped after this many retries (upstream maxRetries).
pub const MAX_RETRIES: u32 = 15;

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    deployments: Store<Deployment>,
    replica_sets: Store<ReplicaSet>,
    pods: Store<Pod>,
    queue: Arc<WorkQueue<String>>,
}

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of deployment objects that are allowed to sync concurrently. Larger number = more
    /// responsive deployments, but more CPU (and network) load.
    #[arg(long, default_value_t = 5)]
    pub concurrent_deployment_syncs: usize,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue("deployment");
    let deployments = context.informers.get::<Deployment>();
    let replica_sets = context.informers.get::<ReplicaSet>();
    let pods = context.informers.get::<Pod>();
    let controller = Arc::new(Controller {
        client,
        recorder,
        deployments: deployments.store().clone(),
        replica_sets: replica_sets.store().clone(),
        pods: pods.store().clone(),
        queue: queue.clone(),
    });
    deployments.enqueue_changes(&queue);
    replica_sets.handle(&controller, Controller::on_replica_set);
    {
        let controller = controller.clone();
        pods.add_handler(Arc::new(move |change: &Change<Pod>| {
            if let Change::Deleted(deleted) = change {
                controller.on_pod_deleted(deleted.object());
            }
        }));
    }
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_deployment_syncs,
        controller,
        |controller, key| async move { controller.sync_deployment(&key).await },
    )
    .with_max_retries(MAX_RETRIES))
}

impl Controller {
    fn enqueue(&self, deployment: &Deployment) {
        self.queue.add(key_of(&deployment.metadata));
    }

    fn resolve(&self, namespace: &str, reference: &OwnerReference) -> Option<Arc<Deployment>> {
        self.deployments.referenced(namespace, reference)
    }

    /// Deployments whose selector matches an orphan ReplicaSet.
    fn deployments_for_orphan(&self, rs: &ReplicaSet) -> Vec<Arc<Deployment>> {
        let namespace = rs.namespace_str();
        self.deployments
            .list_namespace(namespace)
            .into_iter()
            .filter(|d| {
                Selector::from_label_selector(d.spec.as_ref().map(|spec| &spec.selector))
                    .map(|selector| {
                        !selector.is_empty() && selector.matches(rs.metadata.labels.as_ref())
                    })
                    .unwrap_or(false)
            })
            .collect()
    }

    fn on_replica_set(&self, change: &Change<ReplicaSet>) {
        match change {
            Change::Added(rs) => {
                let namespace = rs.namespace_str();
                if rs.metadata.deletion_timestamp.is_some() {
                    if let Some(d) =
                        controller_of(&rs.metadata).and_then(|r| self.resolve(namespace, r))
                    {
                        self.enqueue(&d);
                    }
                    return;
                }
                if let Some(reference) = controller_of(&rs.metadata) {
                    if let Some(d) = self.resolve(namespace, reference) {
                        self.enqueue(&d);
                    }
                    return;
                }
                for d in self.deployments_for_orphan(rs) {
                    self.enqueue(&d);
                }
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let namespace = new.namespace_str();
                let route = crate::controller_ref::route_update(
                    &old.metadata,
                    &new.metadata,
                    |r| self.resolve(namespace, r),
                    || self.deployments_for_orphan(new),
                );
                for d in route
                    .previous
                    .iter()
                    .chain(&route.current)
                    .chain(&route.adopters)
                {
                    self.enqueue(d);
                }
            }
            Change::Deleted(deleted) => {
                let rs = deleted.object();
                let namespace = rs.namespace_str();
                if let Some(d) =
                    controller_of(&rs.metadata).and_then(|r| self.resolve(namespace, r))
                {
                    self.enqueue(&d);
                }
            }
        }
    }

    /// A Recreate rollout waits for the old pods to be gone: the last one's deletion
    /// wakes the Deployment up.
    fn on_pod_deleted(&self, pod: &Pod) {
        let namespace = pod.namespace_str();
        let Some(rs) = controller_of(&pod.metadata)
            .and_then(|reference| self.replica_sets.referenced(namespace, reference))
        else {
            return;
        };
        let Some(d) = controller_of(&rs.metadata).and_then(|r| self.resolve(namespace, r)) else {
            return;
        };
        let recreate = d
            .spec
            .as_ref()
            .and_then(|spec| spec.strategy.as_ref())
            .and_then(|strategy| strategy.type_.as_deref())
            == Some(util::RECREATE_DEPLOYMENT_STRATEGY_TYPE);
        if !recreate {
            return;
        }
        let d_uid = d.metadata.uid.clone().unwrap_or_default();
        let remaining: usize = self
            .replica_sets
            .by_index(crate::store::CONTROLLER_UID_INDEX, &d_uid)
            .iter()
            .map(|rs| {
                self.pods
                    .by_index(
                        crate::store::CONTROLLER_UID_INDEX,
                        rs.metadata.uid.as_deref().unwrap_or_default(),
                    )
                    .len()
            })
            .sum();
        if remaining == 0 {
            self.enqueue(&d);
        }
    }
}

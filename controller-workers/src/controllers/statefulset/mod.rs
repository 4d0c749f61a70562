//! statefulset-controller: pods with a stable identity and stable storage (upstream
//! `pkg/controller/statefulset/`).
//!
//! Each ordinal of a StatefulSet gets a pod `<set>-<ordinal>` (from `spec.ordinals.start`)
//! with hostname `<set>-<ordinal>` under the set's service, and one claim
//! `<template>-<set>-<ordinal>` per volumeClaimTemplate, created before the pod. Pods come
//! up in ordinal order, each Running and Ready before the next (OrderedReady), or all at
//! once (Parallel); scale-down removes the highest ordinals first. The template's history
//! is kept in ControllerRevisions (data identical to KCM's); pods carry their revision's
//! name in `controller-revision-hash`, and a RollingUpdate replaces them from the highest
//! ordinal down to the partition. Claims get ownerReferences as the PVC retention policy
//! asks, so the garbage collector deletes them with the set or the scaled-down pod.
//!
//! Here: the handlers (pod and set changes to set keys), the sync entry point (adopt
//! orphan revisions, claim pods); `control.rs` reconciles, `stateful_pod.rs` writes pods
//! and claims, `status.rs` counts and writes the status, `utils.rs` holds the pure rules.

mod control;
#[cfg(test)]
mod control_tests;
#[cfg(test)]
mod fake_pod_control;
mod stateful_pod;
mod status;
mod utils;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use tracing::{debug, warn};

use self::stateful_pod::StatefulPodControl;
use self::utils::{is_member_of, min_ready_seconds, replicas, spec};
use crate::controller::{ControllerContext, Runnable};
use crate::controller_ref::RefManager;
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::pod_control::controller_ref;
use crate::pods::is_pod_ready;
use crate::queue::WorkQueue;
use crate::selector::Selector;
use crate::store::{controller_of, key_of, split_key, Store};

pub const NAME: &str = "statefulset-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// identity (hostname, subdomain), claim volumes and `status`; a pod whose identity or storage is repaired is read from the API server before its update.
pub const FIELDS: crate::projection::FieldList = &[(
    "v1/pods",
    &[
        "spec.nodeName",
        "spec.hostname",
        "spec.subdomain",
        "spec.volumes",
        "status",
    ],
)];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &[
    "v1/pods",
    "apps/v1/statefulsets",
    "apps/v1/controllerrevisions",
    "v1/persistentvolumeclaims",
];
/// The queue's name (the `name` label of the workqueue metrics), as upstream.
const QUEUE: &str = "statefulset";

pub(crate) struct Controller {
    client: kube::Client,
    sets: Store<StatefulSet>,
    pods: Store<Pod>,
    revisions: Store<ControllerRevision>,
    pod_control: StatefulPodControl,
    queue: Arc<WorkQueue<String>>,
}

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of statefulset objects that are allowed to sync concurrently. Larger number =
    /// more responsive statefulsets, but more CPU (and network) load.
    #[arg(long, default_value_t = 5)]
    pub concurrent_statefulset_syncs: usize,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue(QUEUE);
    let sets = context.informers.get::<StatefulSet>();
    let pods = context.informers.get::<Pod>();
    let revisions = context.informers.get::<ControllerRevision>();
    let claims = context.informers.get::<PersistentVolumeClaim>();
    let controller = Arc::new(Controller {
        pod_control: StatefulPodControl::new(client.clone(), recorder, claims.store().clone()),
        client,
        sets: sets.store().clone(),
        pods: pods.store().clone(),
        revisions: revisions.store().clone(),
        queue: queue.clone(),
    });
    sets.handle(&controller, Controller::on_set);
    pods.handle(&controller, Controller::on_pod);
    Ok(Runnable::new(
        NAME,
        queue,
        options.concurrent_statefulset_syncs,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

fn selector_of(set: &StatefulSet) -> Result<Selector, String> {
    Selector::from_label_selector(Some(&spec(set).selector))
}

impl Controller {
    fn on_set(&self, change: &Change<StatefulSet>) {
        let set = match change {
            Change::Added(set) => set,
            Change::Updated { old, new } => {
                let replicas = |s: &StatefulSet| s.status.as_ref().map(|s| s.replicas);
                if replicas(old) != replicas(new) {
                    debug!(key = %key_of(&new.metadata), old = ?replicas(old), new = ?replicas(new), "observed updated replica count");
                }
                new
            }
            Change::Deleted(deleted) => deleted.object(),
        };
        self.queue.add(key_of(&set.metadata));
    }

    /// The set a pod's controllerRef names, if the store holds it with that UID.
    fn resolve(&self, pod: &ObjectMeta) -> Option<Arc<StatefulSet>> {
        let namespace = pod.namespace.as_deref().unwrap_or_default();
        self.sets.referenced(namespace, controller_of(pod)?)
    }

    /// The sets whose selector matches an orphan pod (candidates to adopt it).
    fn sets_for_pod(&self, pod: &Pod) -> Vec<Arc<StatefulSet>> {
        let Some(labels) = pod.metadata.labels.as_ref().filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let namespace = pod.namespace_str();
        let sets: Vec<Arc<StatefulSet>> = self
            .sets
            .list_namespace(namespace)
            .into_iter()
            .filter(|set| {
                // A set with an empty selector matches nothing, not everything.
                selector_of(set)
                    .is_ok_and(|selector| !selector.is_empty() && selector.matches(Some(labels)))
            })
            .collect();
        if sets.len() > 1 {
            let names: Vec<&str> = sets.iter().map(|s| s.name_str()).collect();
            warn!(pod = %key_of(&pod.metadata), sets = ?names, "user error: more than one StatefulSet is selecting pods with labels {labels:?}");
        }
        sets
    }

    fn on_pod(&self, change: &Change<Pod>) {
        match change {
            Change::Added(pod) => {
                if pod.metadata.deletion_timestamp.is_some() {
                    // Seen for the first time already terminating (after a restart).
                    self.pod_deleted(pod);
                    return;
                }
                if controller_of(&pod.metadata).is_some() {
                    if let Some(set) = self.resolve(&pod.metadata) {
                        self.queue.add(key_of(&set.metadata));
                    }
                    return;
                }
                for set in self.sets_for_pod(pod) {
                    self.queue.add(key_of(&set.metadata));
                }
            }
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    // A resync: nothing changed.
                    return;
                }
                let namespace = new.namespace_str();
                let route = crate::controller_ref::route_update(
                    &old.metadata,
                    &new.metadata,
                    |r| self.sets.referenced(namespace, r),
                    || self.sets_for_pod(new),
                );
                for set in route.previous.iter().chain(&route.adopters) {
                    self.queue.add(key_of(&set.metadata));
                }
                if let Some(set) = route.current {
                    let key = key_of(&set.metadata);
                    self.queue.add(key.clone());
                    let min_ready = min_ready_seconds(&set);
                    if !is_pod_ready(old) && is_pod_ready(new) && min_ready > 0 {
                        // Look again once it has been ready long enough to be available
                        // (a second more against clock skew).
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
        // Nobody cares about an orphan going.
        if let Some(set) = self.resolve(&pod.metadata) {
            self.queue.add(key_of(&set.metadata));
        }
    }

    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let (namespace, name) = split_key(key);
        let Some(set) = self.sets.get_in(namespace, name) else {
            debug!(key, "StatefulSet has been deleted");
            return Ok(());
        };
        let selector = match selector_of(&set) {
            Ok(selector) => selector,
            Err(error) => {
                // Not transient: the API server validates selectors.
                warn!(key, %error, "error converting StatefulSet selector");
                return Ok(());
            }
        };
        self.adopt_orphan_revisions(&set, &selector).await?;
        let pods = self.claim_pods(&set, &selector).await?;
        debug!(key, pods = pods.len(), "syncing StatefulSet");
        let status = self.update_stateful_set(&set, &selector, &pods).await?;
        let min_ready = min_ready_seconds(&set);
        if min_ready > 0 && status.available_replicas != replicas(&set) {
            // Once more when the ready pods may have become available.
            self.queue
                .add_after(key.to_string(), Duration::from_secs(min_ready as u64));
        }
        debug!(key, elapsed = ?started.elapsed(), "finished syncing StatefulSet");
        Ok(())
    }

    /// Adopts the revisions the set's selector matches that nobody owns (after a live
    /// check that the set is still there and not being deleted).
    async fn adopt_orphan_revisions(
        &self,
        set: &StatefulSet,
        selector: &Selector,
    ) -> anyhow::Result<()> {
        let orphans: Vec<Arc<ControllerRevision>> = self
            .list_revisions(set, selector)
            .into_iter()
            .filter(|revision| controller_of(&revision.metadata).is_none())
            .collect();
        if orphans.is_empty() {
            return Ok(());
        }
        let namespace = set.namespace_str();
        let manager = RefManager::new(
            set,
            controller_ref(set),
            selector,
            Api::<StatefulSet>::namespaced(self.client.clone(), namespace),
        );
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), namespace);
        let (_, errors) = manager.claim(orphans, &api).await;
        match errors.into_iter().next() {
            Some(error) => {
                Err(anyhow::Error::new(error).context("can't adopt ControllerRevisions"))
            }
            None => Ok(()),
        }
    }

    /// The pods the set owns after adopting orphans that match its selector and are named
    /// after it, and releasing owned pods that no longer do.
    async fn claim_pods(
        &self,
        set: &StatefulSet,
        selector: &Selector,
    ) -> anyhow::Result<Vec<Arc<Pod>>> {
        let namespace = set.namespace_str();
        let uid = set.metadata.uid.as_deref().unwrap_or_default();
        // Pods another controller owns are never claimed, so the candidates are the
        // set's own pods and the namespace's orphans.
        let candidates = self.pods.claim_candidates(namespace, uid);
        let member = |meta: &ObjectMeta| is_member_of(set, meta);
        let manager = RefManager::new(
            set,
            controller_ref(set),
            selector,
            Api::<StatefulSet>::namespaced(self.client.clone(), namespace),
        )
        .with_filter(&member);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let (pods, errors) = manager.claim(candidates, &api).await;
        match errors.into_iter().next() {
            Some(error) => Err(error).with_context(|| {
                format!(
                    "claiming pods of StatefulSet {namespace}/{}",
                    set.name_str()
                )
            }),
            None => Ok(pods),
        }
    }
}

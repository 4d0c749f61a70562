//! persistentvolume-attach-detach-controller: attaches the volumes of scheduled pods to
//! their nodes and detaches them when no pod there uses them any more (upstream
//! `pkg/controller/volume/attachdetach/`, with the CSI attacher of
//! `pkg/volume/csi/csi_attacher.go` and the operations of
//! `pkg/volume/util/operationexecutor`).
//!
//! Object flow: pod, node and claim events fill the [`desired`] state (the attachable
//! volumes of the scheduled, non-terminated pods of nodes annotated
//! `volumes.kubernetes.io/controller-managed-attach-detach`); node events tell the
//! [`actual`] state which attached volumes each node still uses (`status.volumesInUse`).
//! The [`reconciler`] compares the two every 100 ms and runs attaches and detaches through
//! the [`csi`] attacher (VolumeAttachments that the driver's external-attacher acts on),
//! then writes `status.volumesAttached` ([`status`]). At start the actual state is seeded
//! from the nodes' `status.volumesAttached` and the existing VolumeAttachments, so a
//! restarted controller neither detaches nor re-creates anything; the populator re-reads
//! the pods every minute to drop the ones that went unseen.
//!
//! Only the CSI plugin is ported (see [`volumes`] for what that leaves out).

mod actual;
mod csi;
mod desired;
mod metrics;
mod options;
mod pending;
mod reconciler;
mod status;
mod volumes;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, VolumeAttachment};
use tracing::{debug, info};

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::Recorder;
use crate::store::{key_of, Store};
use crate::volume_util;

use self::actual::{ActualState, AttachState};
use self::csi::{Attacher, WATCH_TIMEOUT};
use self::desired::DesiredState;
use self::metrics::{AttachDetachMetrics, InUseCounts};
use self::pending::PendingOperations;
use self::volumes::{Listers, PodVolume};

pub use self::options::Options;

pub const NAME: &str = "persistentvolume-attach-detach-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the pod's node and volumes; `status` (whether it terminated).
pub const FIELDS: crate::projection::FieldList =
    &[("v1/pods", &["spec.nodeName", "spec.volumes", "status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &[
    "storage.k8s.io/v1/csidrivers",
    "storage.k8s.io/v1/csinodes",
    "storage.k8s.io/v1/volumeattachments",
    "v1/nodes",
    "v1/persistentvolumeclaims",
    "v1/persistentvolumes",
    "v1/pods",
];
/// Its events' source, as upstream's recorder names it.
pub const EVENT_SOURCE: &str = "attachdetach-controller";
const PVC_QUEUE: &str = "pvcs";
/// The node annotation that hands a node's attaching to the controller.
pub const ANN_CONTROLLER_MANAGED: &str = "volumes.kubernetes.io/controller-managed-attach-detach";
/// The node annotation that keeps the volumes of its terminated pods attached.
pub const ANN_KEEP_TERMINATED_POD_VOLUMES: &str =
    "volumes.kubernetes.io/keep-terminated-pod-volumes";

/// `DefaultTimerConfig`.
const RECONCILER_LOOP_PERIOD: Duration = Duration::from_millis(100);
const POPULATOR_LOOP_PERIOD: Duration = Duration::from_secs(60);
const POPULATOR_LIST_PODS_RETRY: Duration = Duration::from_secs(180);

/// `DetermineVolumeAction`: whether the pod's volumes are wanted (a terminated pod's only
/// on a node that keeps them).
pub fn volume_action(pod: &Pod, keep_terminated_on_node: bool) -> bool {
    let has_volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| !v.is_empty());
    if !has_volumes || !volume_util::is_pod_terminated(pod) {
        return true;
    }
    keep_terminated_on_node
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// The loops' bookkeeping.
struct Timers {
    initialized: bool,
    last_sync: Instant,
    last_populate: Instant,
    last_list_pods: Option<Instant>,
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    pods: Store<Pod>,
    nodes: Store<Node>,
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    drivers: Store<CSIDriver>,
    attachments: Store<VolumeAttachment>,
    desired: Arc<Mutex<DesiredState>>,
    actual: Arc<Mutex<ActualState>>,
    pending: Mutex<PendingOperations>,
    attacher: Attacher,
    metrics: AttachDetachMetrics,
    pvc_queue: Arc<WorkQueue<String>>,
    sync_disabled: bool,
    sync_period: Duration,
    timers: Mutex<Timers>,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Vec<Runnable>> {
    options.validate().map_err(anyhow::Error::msg)?;
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let pods = context.informers.get::<Pod>();
    let nodes = context.informers.get::<Node>();
    let claims = context.informers.get::<PersistentVolumeClaim>();
    let volumes = context.informers.get::<PersistentVolume>();
    // Read by upstream's CSI plugin for migrated volumes only; synced all the same.
    let _csi_nodes = context.informers.get::<CSINode>();
    let drivers = context.informers.get::<CSIDriver>();
    let attachments = context.informers.get::<VolumeAttachment>();
    volume_util::add_pvc_index(pods.store());
    let pvc_queue = context.queue(PVC_QUEUE);
    let desired = Arc::new(Mutex::new(DesiredState::default()));
    let actual = Arc::new(Mutex::new(ActualState::default()));
    let in_use = {
        let (pods, claims, volumes, drivers) = (
            pods.store().clone(),
            claims.store().clone(),
            volumes.store().clone(),
            drivers.store().clone(),
        );
        Arc::new(move || in_use_counts(&pods.list(), &claims, &volumes, &drivers))
    };
    let metrics =
        AttachDetachMetrics::register(&context.metrics, desired.clone(), actual.clone(), in_use);
    let now = Instant::now();
    let controller = Arc::new(Controller {
        attacher: Attacher {
            client: client.clone(),
            attachments: attachments.store().clone(),
            timeout: WATCH_TIMEOUT,
        },
        client,
        recorder,
        pods: pods.store().clone(),
        nodes: nodes.store().clone(),
        claims: claims.store().clone(),
        volumes: volumes.store().clone(),
        drivers: drivers.store().clone(),
        attachments: attachments.store().clone(),
        desired,
        actual,
        pending: Mutex::default(),
        metrics,
        pvc_queue: pvc_queue.clone(),
        sync_disabled: options.disable_attach_detach_reconcile_sync,
        sync_period: options.attach_detach_reconcile_sync_period,
        timers: Mutex::new(Timers {
            initialized: false,
            last_sync: now,
            last_populate: now,
            last_list_pods: None,
        }),
    });
    pods.handle(&controller, Controller::on_pod);
    nodes.handle(&controller, Controller::on_node);
    claims.handle(&controller, Controller::on_claim);
    Ok(vec![
        Runnable::new(
            NAME,
            pvc_queue,
            1,
            controller.clone(),
            |controller, key| async move { controller.sync_claim(&key) },
        ),
        Runnable::periodic(
            NAME,
            RECONCILER_LOOP_PERIOD,
            controller,
            |controller| async move { controller.pass().await },
        ),
    ])
}

/// `storage_count_attachable_volumes_in_use`: the scheduled pods' volumes of attachable
/// plugins, by node and plugin.
fn in_use_counts(
    pods: &[Arc<Pod>],
    claims: &Store<PersistentVolumeClaim>,
    volumes: &Store<PersistentVolume>,
    drivers: &Store<CSIDriver>,
) -> InUseCounts {
    let listers = Listers {
        claims,
        volumes,
        drivers,
    };
    let mut counts = InUseCounts::new();
    for pod in pods {
        let node = node_name(pod);
        if node.is_empty() {
            continue;
        }
        for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let plugin = match volumes::resolve(pod, volume, &listers) {
                Ok(PodVolume::Csi { spec, .. }) => Some(spec.plugin_label()),
                Ok(PodVolume::Other(plugin)) => plugin,
                Err(_) => None,
            };
            if let Some(plugin) = plugin {
                *counts.entry((node.to_string(), plugin)).or_default() += 1;
            }
        }
    }
    counts
}

impl Controller {
    fn listers(&self) -> Listers<'_> {
        Listers {
            claims: &self.claims,
            volumes: &self.volumes,
            drivers: &self.drivers,
        }
    }

    /// One pass of the loop: the start-up population once, then the reconciler, the
    /// periodic verification and the populator when they are due.
    async fn pass(self: Arc<Self>) {
        let (initialize, sync_due, populate_due) = {
            let mut timers = lock(&self.timers);
            let initialize = !timers.initialized;
            timers.initialized = true;
            let sync_due = !self.sync_disabled && timers.last_sync.elapsed() > self.sync_period;
            let populate_due = timers.last_populate.elapsed() >= POPULATOR_LOOP_PERIOD;
            (initialize, sync_due, populate_due)
        };
        if initialize {
            self.populate_actual_state();
            self.populate_desired_state();
            info!(controller = NAME, "actual and desired states populated");
        }
        self.reconcile().await;
        if sync_due {
            self.verify_attached().await;
            lock(&self.timers).last_sync = Instant::now();
        }
        if populate_due {
            self.populate();
            lock(&self.timers).last_populate = Instant::now();
        }
    }

    /// `addNodeToDswp`.
    fn add_node_to_desired(&self, node: &Node) {
        let annotations = node.metadata.annotations.as_ref();
        if !annotations.is_some_and(|a| a.contains_key(ANN_CONTROLLER_MANAGED)) {
            return;
        }
        let keep = annotations
            .and_then(|a| a.get(ANN_KEEP_TERMINATED_POD_VOLUMES))
            .is_some_and(|v| v == "true");
        let name = node.name_str();
        lock(&self.desired).add_node(name, keep);
    }

    /// `processVolumesInUse`.
    fn process_volumes_in_use(&self, node: &str, in_use: &[String]) {
        let mut actual = lock(&self.actual);
        for volume in actual.attached_volumes_for_node(node) {
            let mounted = in_use.contains(&volume);
            actual.set_mounted_by_node(&volume, node, mounted);
        }
    }

    fn on_node(&self, change: &Change<Node>) {
        let node = change.latest();
        let name = node.name_str().to_string();
        let in_use = node
            .status
            .as_ref()
            .and_then(|s| s.volumes_in_use.clone())
            .unwrap_or_default();
        match change {
            Change::Added(_) | Change::Updated { .. } => {
                self.add_node_to_desired(node);
                self.process_volumes_in_use(&name, &in_use);
                if matches!(change, Change::Added(_)) {
                    lock(&self.actual).set_node_status_update_needed(&name);
                }
            }
            Change::Deleted(_) => {
                let deleted = lock(&self.desired).delete_node(&name);
                if let Err(error) = deleted {
                    info!(controller = NAME, node = %name, %error, "error removing node from desired state");
                }
                self.process_volumes_in_use(&name, &in_use);
            }
        }
    }

    fn on_pod(&self, change: &Change<Pod>) {
        let pod = change.latest();
        match change {
            Change::Added(_) | Change::Updated { .. } => {
                let node = node_name(pod);
                if node.is_empty() {
                    return;
                }
                let keep = lock(&self.desired).keep_terminated_pod_volumes(node);
                self.process_pod_volumes(pod, volume_action(pod, keep));
            }
            Change::Deleted(_) => self.process_pod_volumes(pod, false),
        }
    }

    fn on_claim(&self, change: &Change<PersistentVolumeClaim>) {
        if let Change::Added(claim) | Change::Updated { new: claim, .. } = change {
            self.pvc_queue.add(key_of(&claim.metadata));
        }
    }

    /// `ProcessPodVolumes`: adds (or removes) the pod's attachable volumes on its node.
    fn process_pod_volumes(&self, pod: &Arc<Pod>, add: bool) {
        let Some(pod_volumes) = pod.spec.as_ref().and_then(|s| s.volumes.as_ref()) else {
            return;
        };
        let node = node_name(pod);
        if pod_volumes.is_empty() || node.is_empty() || !lock(&self.desired).node_exists(node) {
            return;
        }
        let listers = self.listers();
        for volume in pod_volumes {
            let spec = match volumes::resolve(pod, volume, &listers) {
                Ok(resolved) => match resolved.attachable() {
                    Some(spec) => spec,
                    None => continue,
                },
                Err(error) => {
                    debug!(controller = NAME, pod = %key_of(&pod.metadata), volume = %volume.name, %error, "error processing volume for pod");
                    continue;
                }
            };
            let mut desired = lock(&self.desired);
            if add {
                if let Err(error) = desired.add_pod(pod_uid(pod), pod.clone(), &spec, node) {
                    debug!(controller = NAME, pod = %key_of(&pod.metadata), %error, "failed to add volume for pod to desired state");
                }
            } else {
                desired.delete_pod(pod_uid(pod), &spec.unique_name(), node);
            }
        }
    }

    /// `syncPVCByKey`: a claim that bound makes its pods' volumes resolvable.
    fn sync_claim(&self, key: &str) -> anyhow::Result<()> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(());
        };
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let volume = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref());
        if !bound || volume.is_none_or(str::is_empty) {
            return Ok(());
        }
        for pod in self.pods.by_index(volume_util::PVC_INDEX, key) {
            let node = node_name(&pod);
            if node.is_empty() || volume_util::is_pod_terminated(&pod) {
                continue;
            }
            let keep = lock(&self.desired).keep_terminated_pod_volumes(node);
            self.process_pod_volumes(&pod, volume_action(&pod, keep));
        }
        Ok(())
    }

    /// `populateActualStateOfWorld`: what the nodes report attached, then the
    /// VolumeAttachments of attachable volumes not known yet, as uncertain.
    fn populate_actual_state(&self) {
        for node in self.nodes.list() {
            let name = node.name_str().to_string();
            let status = node.status.as_ref();
            let attached = status
                .and_then(|s| s.volumes_attached.clone())
                .unwrap_or_default();
            if attached.is_empty() {
                continue;
            }
            {
                let mut actual = lock(&self.actual);
                for volume in &attached {
                    actual.add_volume_node(&volume.name, None, &name, &volume.device_path, true);
                }
            }
            let in_use = status
                .and_then(|s| s.volumes_in_use.clone())
                .unwrap_or_default();
            self.process_volumes_in_use(&name, &in_use);
            self.add_node_to_desired(&node);
        }
        for attachment in self.attachments.list() {
            let Some(pv_name) = attachment.spec.source.persistent_volume_name.as_deref() else {
                continue;
            };
            let Some(pv) = self.volumes.get(pv_name) else {
                debug!(
                    controller = NAME,
                    pv = pv_name,
                    "unable to look up the VolumeAttachment's PV"
                );
                continue;
            };
            let Some(spec) = volumes::volume_of(&pv, &self.drivers).attachable() else {
                continue;
            };
            let node = &attachment.spec.node_name;
            let unique = spec.unique_name();
            let mut actual = lock(&self.actual);
            if actual.attach_state(&unique, node) == AttachState::Detached {
                actual.mark_uncertain(&unique, Some(spec), node);
            }
        }
    }

    /// `populateDesiredStateOfWorld`: every pod, and the specs of what the nodes reported.
    fn populate_desired_state(&self) {
        let listers = self.listers();
        for pod in self.pods.list() {
            let node = node_name(&pod).to_string();
            if !node.is_empty() {
                let keep = lock(&self.desired).keep_terminated_pod_volumes(&node);
                self.process_pod_volumes(&pod, volume_action(&pod, keep));
            }
            for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
                let Some(spec) = volumes::resolve(&pod, volume, &listers)
                    .ok()
                    .and_then(PodVolume::attachable)
                else {
                    continue;
                };
                let unique = spec.unique_name();
                let mut actual = lock(&self.actual);
                if actual.attach_state(&unique, &node) == AttachState::Attached {
                    let path = self
                        .nodes
                        .get(&node)
                        .and_then(|n| n.status.clone())
                        .and_then(|s| s.volumes_attached)
                        .unwrap_or_default()
                        .into_iter()
                        .find(|v| v.name == unique)
                        .map(|v| v.device_path);
                    if let Some(path) = path {
                        actual.add_volume_node(&unique, Some(spec), &node, &path, true);
                    }
                }
            }
        }
    }

    /// The desired-state populator's pass: drops the pods that are gone (or no longer
    /// want their volumes) and volumes no longer attachable; every 3 minutes it re-adds
    /// every active pod.
    fn populate(&self) {
        let entries = lock(&self.desired).pods_to_add();
        for entry in entries {
            let (namespace, name) = (entry.pod.namespace_str(), entry.pod.name_str());
            if let Some(pod) = self.pods.get_in(namespace, name) {
                let keep = lock(&self.desired).keep_terminated_pod_volumes(node_name(&pod));
                if volume_action(&pod, keep) && pod_uid(&pod) == entry.pod_uid {
                    continue;
                }
            }
            debug!(controller = NAME, pod = %format!("{namespace}/{name}"), volume = %entry.unique_name, "removing pod from desired state: it no longer exists or no longer wants its volumes");
            lock(&self.desired).delete_pod(&entry.pod_uid, &entry.unique_name, &entry.node);
        }
        let wanted = lock(&self.desired).volumes_to_attach();
        for volume in wanted {
            if volumes::skip_attach(&self.drivers, &volume.spec.driver) {
                let mut desired = lock(&self.desired);
                for pod in &volume.scheduled_pods {
                    desired.delete_pod(pod_uid(pod), &volume.unique_name, &volume.node);
                }
            }
        }
        let list_due = lock(&self.timers)
            .last_list_pods
            .is_none_or(|at| at.elapsed() >= POPULATOR_LIST_PODS_RETRY);
        if list_due {
            lock(&self.timers).last_list_pods = Some(Instant::now());
            for pod in self.pods.list() {
                if !volume_util::is_pod_terminated(&pod) {
                    self.process_pod_volumes(&pod, true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut value = json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"nodeName": "n1", "containers": [], "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]},
            "status": {"phase": "Running"}});
        if let (Some(v), Some(e)) = (value.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                v.insert(k.clone(), x.clone());
            }
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn terminated_pods_keep_their_volumes_only_where_the_node_says_so() {
        let running = pod(json!({}));
        let done = pod(json!({"status": {"phase": "Succeeded"}}));
        let no_volumes = pod(json!({"spec": {"containers": []}, "status": {"phase": "Failed"}}));
        let cases = [
            (&running, false, true),
            (&done, false, false),
            (&done, true, true),
            (&no_volumes, false, true),
        ];
        for (pod, keep, want) in cases {
            assert_eq!(volume_action(pod, keep), want);
        }
    }
}

//! csi-sim: a simulated CSI driver with the sidecars a real one runs beside it, for the
//! development cluster's storage. It plays what a cluster's storage vendor deploys, never
//! what KCM does: it never binds a claim to a volume (the persistentvolume-binder does).
//!
//! Two drivers: [`DRIVER`] (`csi.sim.rkcm.io`, attach required) and [`NOATTACH_DRIVER`]
//! (`noattach.csi.sim.rkcm.io`, no attach), each with its CSIDriver object, registered on
//! every node-sim node's CSINode (owned by the Node, as kubelet makes it). Then, in passes
//! over the shared claim, volume, class and VolumeAttachment stores:
//!
//! - **external-provisioner**: a claim whose `volume.kubernetes.io/storage-provisioner` names
//!   one of the drivers (the binder sets it) gets PV `pvc-<claim uid>` (provisioned-by,
//!   `csi {driver, volumeHandle: <claim uid>, fsType: ext4}`, capacity, modes, volumeMode,
//!   class, reclaim policy, mount options, claimRef, and the zone of the selected node as
//!   node affinity), with the events `Provisioning` and `ProvisioningSucceeded` (or Warning
//!   `ProvisioningFailed`). A WaitForFirstConsumer claim waits for the scheduler's
//!   `volume.kubernetes.io/selected-node`, and is this node-sim's only when that node is
//!   one of its own. A `Released` volume it provisioned with policy Delete is deleted.
//! - **external-resizer**: a Bound claim on one of the drivers asking for more than its
//!   `status.capacity` gets the `Resizing` condition, then its volume's `spec.capacity`,
//!   then `status.capacity` and `VolumeResizeSuccessful`.
//! - **external-attacher** (driver [`DRIVER`]): a VolumeAttachment gets the finalizer
//!   [`ATTACHER_FINALIZER`] and `status.attached: true`; once deleted, the finalizer goes.
//!
//! Knobs, as StorageClass `parameters` or claim annotations (the claim's win):
//! [`PROVISION_DELAY`], [`PROVISION_ERROR`], [`ATTACH_DELAY`], [`ATTACH_ERROR`].
//!
//! The decisions ([`provision_decision`], [`volume_for`], [`should_delete`],
//! [`resize_decision`], [`attach_decision`]) are pure; [`run`] is the loop at the edge.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass, VolumeAttachment};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use rkcm_gocompat::quantity::{Format, Quantity};
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::{quantity, Shared};

/// The driver whose volumes need attaching (CSIDriver `attachRequired: true`).
pub const DRIVER: &str = "csi.sim.rkcm.io";
/// The driver whose volumes need no attaching (CSIDriver `attachRequired: false`).
pub const NOATTACH_DRIVER: &str = "noattach.csi.sim.rkcm.io";
/// Both drivers, with whether each needs attaching.
pub const DRIVERS: [(&str, bool); 2] = [(DRIVER, true), (NOATTACH_DRIVER, false)];

/// Knob: how long provisioning takes (a duration: `5s`).
pub const PROVISION_DELAY: &str = "sim.rkcm.io/provision-delay";
/// Knob: provisioning fails with this message.
pub const PROVISION_ERROR: &str = "sim.rkcm.io/provision-error";
/// Knob: how long attaching takes.
pub const ATTACH_DELAY: &str = "sim.rkcm.io/attach-delay";
/// Knob: attaching fails with this message (`status.attachError.message`).
pub const ATTACH_ERROR: &str = "sim.rkcm.io/attach-error";

/// external-attacher's finalizer on the VolumeAttachments it handles (`external-attacher/`
/// and the driver name with dots as dashes).
pub const ATTACHER_FINALIZER: &str = "external-attacher/csi-sim-rkcm-io";

pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub const ANN_STORAGE_RESIZER: &str = "volume.kubernetes.io/storage-resizer";
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// kubelet's annotation on a CSINode: the in-tree plugins whose volumes it hands to CSI
/// drivers (CSI migration, on for these in 1.29).
pub const ANN_MIGRATED_PLUGINS: &str = "storage.alpha.kubernetes.io/migrated-plugins";
const MIGRATED_PLUGINS: &str = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/vsphere-volume";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The attribute external-provisioner records on the volumes it creates.
const PROVISIONER_IDENTITY_ATTRIBUTE: &str = "storage.kubernetes.io/csiProvisionerIdentity";

/// How often the stores are looked at again without a watch event (delays, retries).
const PASS_PERIOD: Duration = Duration::from_secs(1);
/// external-provisioner's retry backoff after a failed provisioning: 1 s doubling to 5 min.
const RETRY_BASE: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(300);

/// The storage objects node-sim's scheduler and csi-sim read: claims (of node-sim's
/// namespace, when it has one), volumes and classes, each kept by a watch.
#[derive(Clone)]
pub struct StorageStores {
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    pub classes: Store<StorageClass>,
    synced: Arc<[AtomicBool; 3]>,
}

impl StorageStores {
    /// Starts the three watches; every change wakes the scheduler and csi-sim.
    pub fn start(shared: &Arc<Shared>, tasks: &mut Vec<tokio::task::JoinHandle<()>>) -> Self {
        let client = shared.client.clone();
        let claims_api: Api<PersistentVolumeClaim> = match &shared.config.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let synced: Arc<[AtomicBool; 3]> = Arc::new(Default::default());
        let claims = watch_into(shared, claims_api, synced.clone(), 0, tasks);
        let volumes = watch_into(shared, Api::all(client.clone()), synced.clone(), 1, tasks);
        let classes = watch_into(shared, Api::all(client), synced.clone(), 2, tasks);
        StorageStores {
            claims,
            volumes,
            classes,
            synced,
        }
    }

    /// Every watch has listed once.
    pub fn synced(&self) -> bool {
        self.synced.iter().all(|s| s.load(Ordering::Relaxed))
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims
            .get(&reflector::ObjectRef::new(name).within(namespace))
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(&reflector::ObjectRef::new(name))
    }

    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(&reflector::ObjectRef::new(name))
    }
}

/// A reflector for `api` whose events wake the scheduler and csi-sim; `synced[slot]` turns
/// true at its first complete list.
fn watch_into<K>(
    shared: &Arc<Shared>,
    api: Api<K>,
    synced: Arc<[AtomicBool; 3]>,
    slot: usize,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let events = reflector::reflector(
        writer,
        watcher::watcher(api, watcher::Config::default()).default_backoff(),
    );
    let wake = shared.clone();
    tasks.push(tokio::spawn(async move {
        events
            .for_each(|event| {
                match event {
                    Ok(event) => {
                        if matches!(event, watcher::Event::InitDone) {
                            synced[slot].store(true, Ordering::Relaxed);
                        }
                        wake.scheduler_wake.notify_one();
                        wake.storage_wake.notify_one();
                    }
                    Err(e) => tracing::debug!(error = %e, "storage watch failed; retrying"),
                }
                async {}
            })
            .await;
    }));
    reader
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Is `name` one of csi-sim's drivers?
pub fn is_our_driver(name: &str) -> bool {
    DRIVERS.iter().any(|(driver, _)| *driver == name)
}

/// The claim's class: the beta annotation first, then `spec.storageClassName`, else "".
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    if let Some(class) = annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS) {
        return class.to_string();
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// The volume's class: the beta annotation first, then `spec.storageClassName`, else "".
pub fn volume_class(volume: &PersistentVolume) -> String {
    if let Some(class) = annotation(&volume.metadata, ANN_BETA_STORAGE_CLASS) {
        return class.to_string();
    }
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// The driver a claim is handed to (`volume.kubernetes.io/storage-provisioner`, or the beta
/// annotation), when it is one of csi-sim's.
pub fn claim_driver(claim: &PersistentVolumeClaim) -> Option<&str> {
    annotation(&claim.metadata, ANN_STORAGE_PROVISIONER)
        .or_else(|| annotation(&claim.metadata, ANN_BETA_STORAGE_PROVISIONER))
        .filter(|driver| is_our_driver(driver))
}

/// A knob's value: the claim's annotation, else the class's parameter (empty = unset).
pub fn knob(
    claim: Option<&PersistentVolumeClaim>,
    class: Option<&StorageClass>,
    key: &str,
) -> Option<String> {
    claim
        .and_then(|c| annotation(&c.metadata, key))
        .filter(|v| !v.is_empty())
        .map(String::from)
        .or_else(|| {
            class
                .and_then(|c| c.parameters.as_ref())
                .and_then(|p| p.get(key))
                .filter(|v| !v.is_empty())
                .cloned()
        })
}

/// A duration knob; an unreadable one counts as absent (and is logged).
fn duration_knob(
    claim: Option<&PersistentVolumeClaim>,
    class: Option<&StorageClass>,
    key: &str,
) -> Option<Duration> {
    let text = knob(claim, class, key)?;
    let parsed = quantity::duration(&text);
    if parsed.is_none() {
        tracing::warn!(knob = key, value = %text, "not a duration (e.g. 5s, 1m); ignored");
    }
    parsed
}

fn storage_request(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .map(|q| q.0.as_str())
}

fn status_capacity(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .status
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .map(|q| q.0.as_str())
}

fn volume_capacity(volume: &PersistentVolume) -> Option<&str> {
    volume
        .spec
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .map(|q| q.0.as_str())
}

/// A size in bytes as a CSI driver's answer comes back as a quantity (`resource.NewQuantity(bytes,
/// BinarySI)`, Go's `String()`): the largest binary suffix that divides it, else plain bytes.
pub fn bytes_quantity(bytes: i128) -> String {
    match i64::try_from(bytes) {
        Ok(bytes) => Quantity::from_int(bytes, Format::BinarySI).to_string(),
        // Beyond any volume: written as plain bytes.
        Err(_) => bytes.to_string(),
    }
}

/// A quantity's bytes, rounded up (`None` when it is no quantity).
fn bytes_of(text: &str) -> Option<i128> {
    let milli = quantity::milli(text)?;
    Some((milli + 999).div_euclid(1000))
}

/// What the provisioner does with a claim now.
#[derive(Clone, Debug, PartialEq)]
pub enum ProvisionDecision {
    /// Not ours, not ready, or already provisioned.
    Skip,
    /// Its class is missing: a Warning, then retries.
    ClassMissing(String),
    /// The provision-delay knob holds it until then (from when it was first seen ready).
    WaitUntil(Instant),
    /// The provision-error knob: provisioning fails with this message.
    Fail(String),
    /// Create the volume on `driver`, for `node` when the scheduler selected one.
    Provision {
        driver: String,
        node: Option<String>,
    },
}

/// Whether and how to provision `claim` now. `is_ours_node` says whether a node is one of
/// this node-sim's; `volume_exists` whether PV `pvc-<uid>` is already there; `first_ready`
/// when the claim was first seen ready to provision.
pub fn provision_decision(
    claim: &PersistentVolumeClaim,
    class: Option<&StorageClass>,
    is_ours_node: &dyn Fn(&str) -> bool,
    volume_exists: bool,
    first_ready: Instant,
) -> ProvisionDecision {
    let Some(driver) = claim_driver(claim) else {
        return ProvisionDecision::Skip;
    };
    let bound = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    if bound || claim.metadata.deletion_timestamp.is_some() || volume_exists {
        return ProvisionDecision::Skip;
    }
    let class_name = claim_class(claim);
    let Some(class) = class else {
        return ProvisionDecision::ClassMissing(class_name);
    };
    if class.provisioner != driver {
        return ProvisionDecision::Skip;
    }
    let delayed = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
    let node = annotation(&claim.metadata, ANN_SELECTED_NODE).map(String::from);
    match &node {
        // A WaitForFirstConsumer claim waits for the scheduler.
        None if delayed => return ProvisionDecision::Skip,
        // Another node-sim's node: its csi-sim provisions, as a per-node
        // external-provisioner would.
        Some(n) if !is_ours_node(n) => return ProvisionDecision::Skip,
        _ => {}
    }
    if let Some(delay) = duration_knob(Some(claim), Some(class), PROVISION_DELAY) {
        let due = first_ready + delay;
        if Instant::now() < due {
            return ProvisionDecision::WaitUntil(due);
        }
    }
    if let Some(message) = knob(Some(claim), Some(class), PROVISION_ERROR) {
        return ProvisionDecision::Fail(message);
    }
    ProvisionDecision::Provision {
        driver: driver.to_string(),
        node,
    }
}

/// The name external-provisioner gives the volume of a claim.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default())
}

/// The PersistentVolume external-provisioner creates for `claim` of `class` on `driver`,
/// with node affinity to `zone` when the scheduler selected a node there.
pub fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    driver: &str,
    zone: Option<&str>,
    identity: &str,
) -> Result<Value, String> {
    let key = format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    );
    let request =
        storage_request(claim).ok_or_else(|| format!("claim {key} requests no storage"))?;
    let bytes = bytes_of(request)
        .ok_or_else(|| format!("claim {key} requests {request:?}, which is not a quantity"))?;
    let spec = claim.spec.clone().unwrap_or_default();
    let block = spec.volume_mode.as_deref() == Some("Block");
    let mut csi = json!({
        "driver": driver,
        "volumeHandle": claim.metadata.uid.as_deref().unwrap_or_default(),
        "volumeAttributes": {PROVISIONER_IDENTITY_ATTRIBUTE: identity},
    });
    if !block {
        csi["fsType"] = json!("ext4");
    }
    let mut pv = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": volume_name(claim), "annotations": {ANN_PROVISIONED_BY: driver}},
        "spec": {
            "accessModes": spec.access_modes.clone().unwrap_or_default(),
            "capacity": {"storage": bytes_quantity(bytes)},
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": claim.namespace(), "name": claim.name_any(),
                "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version,
            },
            "csi": csi,
            "persistentVolumeReclaimPolicy": class.reclaim_policy.as_deref().unwrap_or("Delete"),
            "storageClassName": claim_class(claim),
            "volumeMode": spec.volume_mode.as_deref().unwrap_or("Filesystem"),
        },
    });
    if let Some(options) = class.mount_options.as_ref().filter(|o| !o.is_empty()) {
        pv["spec"]["mountOptions"] = json!(options);
    }
    if let Some(zone) = zone {
        pv["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}]}});
    }
    Ok(pv)
}

/// Does csi-sim delete this volume: Released, reclaim policy Delete, provisioned by one of
/// its drivers, not already being deleted?
pub fn should_delete(volume: &PersistentVolume) -> bool {
    let released = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    let delete = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        == Some("Delete");
    let ours = annotation(&volume.metadata, ANN_PROVISIONED_BY).is_some_and(is_our_driver);
    released && delete && ours && volume.metadata.deletion_timestamp.is_none()
}

/// What the resizer does with a claim now.
#[derive(Clone, Debug, PartialEq)]
pub enum ResizeDecision {
    Skip,
    /// Grow the volume and the claim to this size (the claim's request).
    Resize(String),
}

fn has_condition(claim: &PersistentVolumeClaim, type_: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// external-resizer's `pvcNeedResize` and `pvNeedResize` for csi-sim's drivers.
pub fn resize_decision(
    claim: &PersistentVolumeClaim,
    volume: Option<&PersistentVolume>,
) -> ResizeDecision {
    let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default();
    let (Some(request), Some(volume)) = (storage_request(claim), volume) else {
        return ResizeDecision::Skip;
    };
    if !bound || volume_name.is_empty() {
        return ResizeDecision::Skip;
    }
    let (Some(wanted), actual) = (
        quantity::milli(request),
        status_capacity(claim)
            .and_then(quantity::milli)
            .unwrap_or(0),
    ) else {
        return ResizeDecision::Skip;
    };
    if wanted <= actual {
        return ResizeDecision::Skip;
    }
    let driver = volume
        .spec
        .as_ref()
        .and_then(|s| s.csi.as_ref())
        .map(|c| c.driver.as_str());
    if !driver.is_some_and(is_our_driver) {
        return ResizeDecision::Skip;
    }
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let bound_to_claim = claim_ref.is_some_and(|r| {
        r.namespace == claim.metadata.namespace && r.uid.is_some() && r.uid == claim.metadata.uid
    });
    if !bound_to_claim {
        return ResizeDecision::Skip;
    }
    let volume_size = volume_capacity(volume)
        .and_then(quantity::milli)
        .unwrap_or(0);
    // Already grown and waiting for the node's file-system resize: kubelet's to finish.
    if volume_size >= wanted && has_condition(claim, "FileSystemResizePending") {
        return ResizeDecision::Skip;
    }
    ResizeDecision::Resize(request.to_string())
}

/// What the attacher does with a VolumeAttachment now.
#[derive(Clone, Debug, PartialEq)]
pub enum AttachDecision {
    Skip,
    AddFinalizer,
    /// The attach-delay knob holds it until then.
    WaitUntil(Instant),
    /// The attach-error knob: record this error (when it is not recorded yet).
    Fail(String),
    Attach,
    /// Deleted: detach, i.e. drop the finalizer.
    Detach,
}

fn has_finalizer(va: &VolumeAttachment) -> bool {
    va.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == ATTACHER_FINALIZER)
}

/// external-attacher's handling of one VolumeAttachment of [`DRIVER`]; the knobs come from
/// the attached volume's claim and class.
pub fn attach_decision(
    va: &VolumeAttachment,
    claim: Option<&PersistentVolumeClaim>,
    class: Option<&StorageClass>,
    first_seen: Instant,
) -> AttachDecision {
    if va.spec.attacher != DRIVER {
        return AttachDecision::Skip;
    }
    if va.metadata.deletion_timestamp.is_some() {
        return if has_finalizer(va) {
            AttachDecision::Detach
        } else {
            AttachDecision::Skip
        };
    }
    if !has_finalizer(va) {
        return AttachDecision::AddFinalizer;
    }
    let status = va.status.as_ref();
    if status.is_some_and(|s| s.attached) {
        return AttachDecision::Skip;
    }
    if let Some(delay) = duration_knob(claim, class, ATTACH_DELAY) {
        let due = first_seen + delay;
        if Instant::now() < due {
            return AttachDecision::WaitUntil(due);
        }
    }
    if let Some(message) = knob(claim, class, ATTACH_ERROR) {
        let recorded = status
            .and_then(|s| s.attach_error.as_ref())
            .and_then(|e| e.message.as_deref());
        return if recorded == Some(message.as_str()) {
            AttachDecision::Skip
        } else {
            AttachDecision::Fail(message)
        };
    }
    AttachDecision::Attach
}

/// The CSIDriver object of one of the drivers.
pub fn csi_driver_object(name: &str, attach_required: bool) -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"attachRequired": attach_required, "volumeLifecycleModes": ["Persistent"]},
    })
}

/// The CSINode kubelet registers for `node` once both drivers' node plugins are up.
pub fn csi_node_object(node: &str, node_uid: &str) -> Value {
    let drivers: Vec<Value> = DRIVERS
        .iter()
        .map(|(name, _)| json!({"name": name, "nodeID": node, "topologyKeys": [ZONE_LABEL]}))
        .collect();
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {
            "name": node,
            "annotations": {ANN_MIGRATED_PLUGINS: MIGRATED_PLUGINS},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}],
        },
        "spec": {"drivers": drivers},
    })
}

/// What csi-sim remembers between passes.
#[derive(Default)]
struct CsiState {
    /// Keys of operations in flight (`provision/<uid>`, `resize/<uid>`, ...).
    in_flight: HashSet<String>,
    /// When a claim (or VolumeAttachment) was first seen ready, for the delay knobs.
    first_ready: HashMap<String, Instant>,
    /// Failed operations: retry no earlier than this, after this many failures.
    backoff: HashMap<String, (Instant, u32)>,
    /// Claims provisioned (their volume may not be in the store yet).
    provisioned: HashSet<String>,
    /// Claims resized to a size (the store may not show it yet).
    resized: HashMap<String, String>,
    /// Volumes deleted.
    deleted: HashSet<String>,
    /// Nodes (by uid) whose CSINode is registered.
    csinodes: HashSet<String>,
    drivers_created: bool,
}

impl CsiState {
    fn ready_since(&mut self, key: &str) -> Instant {
        *self
            .first_ready
            .entry(key.to_string())
            .or_insert_with(Instant::now)
    }

    fn backing_off(&self, key: &str) -> bool {
        self.backoff
            .get(key)
            .is_some_and(|(until, _)| Instant::now() < *until)
    }

    fn failed(&mut self, key: &str) {
        let failures = self.backoff.get(key).map_or(0, |(_, n)| *n) + 1;
        let wait = RETRY_BASE
            .saturating_mul(1u32 << (failures - 1).min(10))
            .min(RETRY_MAX);
        self.backoff
            .insert(key.to_string(), (Instant::now() + wait, failures));
    }

    fn succeeded(&mut self, key: &str) {
        self.backoff.remove(key);
    }
}

/// One thing to do against the API server.
enum Action {
    EnsureDrivers,
    EnsureCsiNode {
        node: String,
        uid: String,
    },
    ClassMissing {
        claim: Arc<PersistentVolumeClaim>,
        class: String,
    },
    ProvisionFail {
        claim: Arc<PersistentVolumeClaim>,
        class: String,
        message: String,
    },
    Provision {
        claim: Arc<PersistentVolumeClaim>,
        class: Arc<StorageClass>,
        driver: String,
        zone: Option<String>,
    },
    Delete(Arc<PersistentVolume>),
    Resize {
        claim: Arc<PersistentVolumeClaim>,
        volume: Arc<PersistentVolume>,
        size: String,
    },
    Attach(Arc<VolumeAttachment>, AttachDecision),
}

impl Action {
    fn key(&self) -> String {
        match self {
            Action::EnsureDrivers => "drivers".into(),
            Action::EnsureCsiNode { uid, .. } => format!("csinode/{uid}"),
            Action::ClassMissing { claim, .. }
            | Action::ProvisionFail { claim, .. }
            | Action::Provision { claim, .. } => {
                format!(
                    "provision/{}",
                    claim.metadata.uid.as_deref().unwrap_or_default()
                )
            }
            Action::Delete(volume) => format!("delete/{}", volume.name_any()),
            Action::Resize { claim, .. } => {
                format!(
                    "resize/{}",
                    claim.metadata.uid.as_deref().unwrap_or_default()
                )
            }
            Action::Attach(va, _) => format!("attach/{}", va.name_any()),
        }
    }
}

/// A running csi-sim's handles.
pub struct Csi {
    shared: Arc<Shared>,
    stores: StorageStores,
    nodes: Store<Node>,
    attachments: Store<VolumeAttachment>,
    attachments_synced: Arc<AtomicBool>,
    state: Mutex<CsiState>,
    /// external-provisioner's identity (recorded on its volumes) and event source.
    identity: String,
}

impl Csi {
    fn state(&self) -> std::sync::MutexGuard<'_, CsiState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn provisioner_component(&self, driver: &str) -> String {
        format!("{driver}_node-sim_{}", self.identity)
    }

    fn watches(&self, namespace: Option<&str>) -> bool {
        self.shared.watches_namespace(namespace)
    }

    fn zone_of(&self, node: &str) -> Option<String> {
        self.nodes
            .get(&reflector::ObjectRef::new(node))
            .and_then(|n| n.labels().get(ZONE_LABEL).cloned())
    }

    /// Decides what to do on this pass, leaving out what is in flight or backing off.
    fn plan(&self) -> Vec<Action> {
        let mut actions = Vec::new();
        let mut st = self.state();
        if !st.drivers_created {
            actions.push(Action::EnsureDrivers);
        }
        for node in self.nodes.state() {
            let name = node.name_any();
            let uid = node.metadata.uid.clone().unwrap_or_default();
            if self.shared.is_ours(&name) && !uid.is_empty() && !st.csinodes.contains(&uid) {
                actions.push(Action::EnsureCsiNode { node: name, uid });
            }
        }
        let is_ours = |n: &str| self.shared.is_ours(n);
        let mut live_claims = HashSet::new();
        for claim in self.stores.claims.state() {
            let uid = claim.metadata.uid.clone().unwrap_or_default();
            live_claims.insert(uid.clone());
            let class_name = claim_class(&claim);
            let class = self.stores.class(&class_name);
            let provision_key = format!("provision/{uid}");
            if claim_driver(&claim).is_some() && !st.provisioned.contains(&uid) {
                let exists = self.stores.volume(&volume_name(&claim)).is_some();
                let since = st
                    .first_ready
                    .get(&provision_key)
                    .copied()
                    .unwrap_or_else(Instant::now);
                let decision =
                    provision_decision(&claim, class.as_deref(), &is_ours, exists, since);
                // The delay knob counts from when the claim was first ready to provision
                // (for WaitForFirstConsumer, from the selected node).
                if !matches!(
                    decision,
                    ProvisionDecision::Skip | ProvisionDecision::ClassMissing(_)
                ) {
                    st.first_ready.entry(provision_key.clone()).or_insert(since);
                }
                match decision {
                    ProvisionDecision::Skip | ProvisionDecision::WaitUntil(_) => {}
                    ProvisionDecision::ClassMissing(class) => actions.push(Action::ClassMissing {
                        claim: claim.clone(),
                        class,
                    }),
                    ProvisionDecision::Fail(message) => actions.push(Action::ProvisionFail {
                        claim: claim.clone(),
                        class: class_name.clone(),
                        message,
                    }),
                    ProvisionDecision::Provision { driver, node } => {
                        if let Some(class) = class.clone() {
                            let zone = node.as_deref().and_then(|n| self.zone_of(n));
                            actions.push(Action::Provision {
                                claim: claim.clone(),
                                class,
                                driver,
                                zone,
                            });
                        }
                    }
                }
            }
            let volume_name = claim
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .unwrap_or_default();
            let volume = (!volume_name.is_empty())
                .then(|| self.stores.volume(&volume_name))
                .flatten();
            match resize_decision(&claim, volume.as_deref()) {
                ResizeDecision::Resize(size) => {
                    if st.resized.get(&uid) != Some(&size) {
                        if let Some(volume) = volume {
                            actions.push(Action::Resize {
                                claim: claim.clone(),
                                volume,
                                size,
                            });
                        }
                    }
                }
                ResizeDecision::Skip => {
                    st.resized.remove(&uid);
                }
            }
        }
        st.provisioned.retain(|uid| live_claims.contains(uid));
        st.first_ready.retain(|key, _| {
            key.strip_prefix("provision/")
                .is_none_or(|uid| live_claims.contains(uid))
        });
        let mut live_volumes = HashSet::new();
        for volume in self.stores.volumes.state() {
            let name = volume.name_any();
            live_volumes.insert(name.clone());
            let namespace = volume
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| r.namespace.as_deref());
            if should_delete(&volume) && self.watches(namespace) && !st.deleted.contains(&name) {
                actions.push(Action::Delete(volume));
            }
        }
        st.deleted.retain(|name| live_volumes.contains(name));
        let mut live_attachments = HashSet::new();
        for va in self.attachments.state() {
            let key = format!("attach/{}", va.name_any());
            live_attachments.insert(key.clone());
            let volume = va
                .spec
                .source
                .persistent_volume_name
                .as_deref()
                .and_then(|name| self.stores.volume(name));
            let claim = volume
                .as_ref()
                .and_then(|v| v.spec.as_ref())
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| {
                    self.stores
                        .claim(r.namespace.as_deref()?, r.name.as_deref()?)
                });
            let class = volume
                .as_deref()
                .map(volume_class)
                .and_then(|c| self.stores.class(&c));
            let since = st.ready_since(&key);
            match attach_decision(&va, claim.as_deref(), class.as_deref(), since) {
                AttachDecision::Skip | AttachDecision::WaitUntil(_) => {}
                decision => actions.push(Action::Attach(va.clone(), decision)),
            }
        }
        st.first_ready
            .retain(|key, _| !key.starts_with("attach/") || live_attachments.contains(key));
        actions.retain(|a| {
            let key = a.key();
            !st.in_flight.contains(&key) && !st.backing_off(&key)
        });
        for action in &actions {
            st.in_flight.insert(action.key());
        }
        actions
    }

    async fn act(&self, action: Action) {
        let key = action.key();
        let result = match action {
            Action::EnsureDrivers => self.ensure_drivers().await,
            Action::EnsureCsiNode { node, uid } => self.ensure_csi_node(&node, &uid).await,
            Action::ClassMissing { claim, class } => {
                self.claim_event(
                    &claim,
                    claim_driver(&claim).unwrap_or(DRIVER),
                    "Warning",
                    "ProvisioningFailed",
                    &format!("storageclass.storage.k8s.io \"{class}\" not found"),
                )
                .await;
                Err(format!("class {class} not found"))
            }
            Action::ProvisionFail {
                claim,
                class,
                message,
            } => {
                let driver = claim_driver(&claim).unwrap_or(DRIVER).to_string();
                self.provisioning_event(&claim, &driver).await;
                self.claim_event(
                    &claim,
                    &driver,
                    "Warning",
                    "ProvisioningFailed",
                    &format!("failed to provision volume with StorageClass \"{class}\": rpc error: code = Internal desc = {message}"),
                )
                .await;
                Err(message)
            }
            Action::Provision {
                claim,
                class,
                driver,
                zone,
            } => {
                self.provision(&claim, &class, &driver, zone.as_deref())
                    .await
            }
            Action::Delete(volume) => self.delete(&volume).await,
            Action::Resize {
                claim,
                volume,
                size,
            } => self.resize(&claim, &volume, &size).await,
            Action::Attach(va, decision) => self.attach(&va, decision).await,
        };
        let mut st = self.state();
        st.in_flight.remove(&key);
        match result {
            Ok(()) => st.succeeded(&key),
            Err(error) => {
                tracing::debug!(operation = %key, %error, "csi-sim operation failed; retrying");
                st.failed(&key);
            }
        }
    }

    async fn ensure_drivers(&self) -> Result<(), String> {
        let api: Api<CSIDriver> = Api::all(self.shared.client.clone());
        for (name, attach) in DRIVERS {
            let driver: CSIDriver = serde_json::from_value(csi_driver_object(name, attach))
                .map_err(|e| e.to_string())?;
            match api.create(&PostParams::default(), &driver).await {
                Ok(_) => {}
                // Another node-sim (or the administrator) registered it already.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(format!("creating CSIDriver {name}: {e}")),
            }
        }
        self.state().drivers_created = true;
        Ok(())
    }

    async fn ensure_csi_node(&self, node: &str, uid: &str) -> Result<(), String> {
        let api: Api<CSINode> = Api::all(self.shared.client.clone());
        let wanted: CSINode =
            serde_json::from_value(csi_node_object(node, uid)).map_err(|e| e.to_string())?;
        match api.get_opt(node).await.map_err(|e| e.to_string())? {
            None => match api.create(&PostParams::default(), &wanted).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    return Err(format!("CSINode {node} appeared meanwhile"))
                }
                Err(e) => return Err(format!("creating CSINode {node}: {e}")),
            },
            // A CSINode of an earlier Node of that name (a node-sim restarted onto a
            // re-created Node): kubelet takes it over.
            Some(current) => {
                let owned = current
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.uid == uid);
                if !owned || current.spec.drivers.is_empty() {
                    let mut next = wanted;
                    next.metadata.resource_version = current.metadata.resource_version;
                    api.replace(node, &PostParams::default(), &next)
                        .await
                        .map_err(|e| format!("updating CSINode {node}: {e}"))?;
                }
            }
        }
        self.state().csinodes.insert(uid.to_string());
        Ok(())
    }

    async fn provisioning_event(&self, claim: &PersistentVolumeClaim, driver: &str) {
        let message = format!(
            "External provisioner is provisioning volume for claim \"{}/{}\"",
            claim.namespace().unwrap_or_default(),
            claim.name_any()
        );
        self.claim_event(claim, driver, "Normal", "Provisioning", &message)
            .await;
    }

    async fn provision(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        driver: &str,
        zone: Option<&str>,
    ) -> Result<(), String> {
        self.provisioning_event(claim, driver).await;
        let pv = match volume_for(claim, class, driver, zone, &self.identity) {
            Ok(pv) => pv,
            Err(message) => {
                self.claim_event(
                    claim,
                    driver,
                    "Warning",
                    "ProvisioningFailed",
                    &format!(
                        "failed to provision volume with StorageClass \"{}\": {message}",
                        claim_class(claim)
                    ),
                )
                .await;
                return Err(message);
            }
        };
        let name = volume_name(claim);
        let volume: PersistentVolume = serde_json::from_value(pv).map_err(|e| e.to_string())?;
        let api: Api<PersistentVolume> = Api::all(self.shared.client.clone());
        match api.create(&PostParams::default(), &volume).await {
            Ok(_) => {
                self.claim_event(
                    claim,
                    driver,
                    "Normal",
                    "ProvisioningSucceeded",
                    &format!("Successfully provisioned volume {name}"),
                )
                .await;
            }
            // Created by an earlier attempt whose answer was lost, or by another csi-sim.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                return Err(format!("creating PersistentVolume {name}: {e}"));
            }
        }
        tracing::info!(claim = %format!("{}/{}", claim.namespace().unwrap_or_default(), claim.name_any()), volume = %name, "provisioned");
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        self.state().provisioned.insert(uid);
        Ok(())
    }

    async fn delete(&self, volume: &PersistentVolume) -> Result<(), String> {
        let name = volume.name_any();
        // A claim of that name and uid still there (the watch lagging): not released yet.
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if let Some(r) = claim_ref {
            if let (Some(ns), Some(claim)) = (r.namespace.as_deref(), r.name.as_deref()) {
                let api: Api<PersistentVolumeClaim> =
                    Api::namespaced(self.shared.client.clone(), ns);
                if let Some(live) = api.get_opt(claim).await.map_err(|e| e.to_string())? {
                    if live.metadata.uid == r.uid && live.metadata.deletion_timestamp.is_none() {
                        return Ok(());
                    }
                }
            }
        }
        let api: Api<PersistentVolume> = Api::all(self.shared.client.clone());
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: volume.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(format!("deleting PersistentVolume {name}: {e}")),
        }
        tracing::info!(volume = %name, "deleted a released volume");
        self.state().deleted.insert(name);
        Ok(())
    }

    async fn resize(
        &self,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
        size: &str,
    ) -> Result<(), String> {
        let ns = claim.namespace().unwrap_or_default();
        let name = claim.name_any();
        let driver = volume
            .spec
            .as_ref()
            .and_then(|s| s.csi.as_ref())
            .map(|c| c.driver.clone())
            .unwrap_or_default();
        let component = format!("external-resizer {driver}");
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.shared.client.clone(), &ns);
        let now = super::now_seconds();
        // Resize conditions replaced, the others kept (MergeResizeConditionsOfPVC).
        let others: Vec<Value> = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ != "Resizing" && c.type_ != "FileSystemResizePending")
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        let mut resizing = others.clone();
        let already = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.type_ == "Resizing" && c.status == "True")
            })
            .and_then(|c| serde_json::to_value(c).ok());
        resizing.push(already.unwrap_or_else(|| {
            json!({"type": "Resizing", "status": "True", "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)})
        }));
        let patch = json!({"metadata": {"resourceVersion": claim.metadata.resource_version},
            "status": {"conditions": resizing}});
        let claim = claims
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("marking claim {ns}/{name} as resizing: {e}"))?;
        self.object_event(
            claim_reference(&claim),
            &component,
            "Normal",
            "Resizing",
            &format!("External resizer is resizing volume {}", volume.name_any()),
        )
        .await;
        let volumes: Api<PersistentVolume> = Api::all(self.shared.client.clone());
        let patch = json!({"spec": {"capacity": {"storage": size}}});
        if let Err(e) = volumes
            .patch(
                &volume.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            self.object_event(
                claim_reference(&claim),
                &component,
                "Warning",
                "VolumeResizeFailed",
                &format!("resize volume {} failed: {e}", volume.name_any()),
            )
            .await;
            return Err(format!("growing volume {}: {e}", volume.name_any()));
        }
        let patch = json!({"metadata": {"resourceVersion": claim.metadata.resource_version},
            "status": {"capacity": {"storage": size}, "conditions": others}});
        claims
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("recording the new size of claim {ns}/{name}: {e}"))?;
        self.object_event(
            claim_reference(&claim),
            &component,
            "Normal",
            "VolumeResizeSuccessful",
            "Resize volume succeeded",
        )
        .await;
        tracing::info!(claim = %format!("{ns}/{name}"), size, "resized");
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        self.state().resized.insert(uid, size.to_string());
        Ok(())
    }

    async fn attach(&self, va: &VolumeAttachment, decision: AttachDecision) -> Result<(), String> {
        let name = va.name_any();
        let api: Api<VolumeAttachment> = Api::all(self.shared.client.clone());
        let rv = va.metadata.resource_version.clone();
        let finalizers = |with: bool| -> Vec<String> {
            let mut list: Vec<String> = va
                .metadata
                .finalizers
                .iter()
                .flatten()
                .filter(|f| *f != ATTACHER_FINALIZER)
                .cloned()
                .collect();
            if with {
                list.push(ATTACHER_FINALIZER.to_string());
            }
            list
        };
        let result = match decision {
            AttachDecision::AddFinalizer => {
                let patch =
                    json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers(true)}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            AttachDecision::Detach => {
                let patch =
                    json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers(false)}});
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    other => other.map(|_| ()),
                }
            }
            AttachDecision::Fail(message) => {
                let now =
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(super::now_seconds());
                let patch = json!({"status": {"attached": false,
                    "attachError": {"time": now, "message": message}}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            AttachDecision::Attach => {
                let patch = json!({"status": {"attached": true, "attachError": null}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            AttachDecision::Skip | AttachDecision::WaitUntil(_) => Ok(()),
        };
        result.map_err(|e| format!("VolumeAttachment {name}: {e}"))
    }

    async fn claim_event(
        &self,
        claim: &PersistentVolumeClaim,
        driver: &str,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        let component = self.provisioner_component(driver);
        self.object_event(claim_reference(claim), &component, type_, reason, message)
            .await;
    }

    async fn object_event(
        &self,
        involved: Value,
        component: &str,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        if !self.shared.config.events {
            return;
        }
        if let Err(e) = post_event(
            &self.shared.client,
            involved,
            component,
            type_,
            reason,
            message,
        )
        .await
        {
            tracing::debug!(reason, error = %e, "cannot post a csi-sim event");
        }
    }
}

fn claim_reference(claim: &PersistentVolumeClaim) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "namespace": claim.namespace(), "name": claim.name_any(),
        "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version})
}

/// Posts a core/v1 Event about `involved` (an ObjectReference) as `component`, in the
/// object's namespace (`default` for cluster-scoped objects).
async fn post_event(
    client: &kube::Client,
    involved: Value,
    component: &str,
    type_: &str,
    reason: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let ns = involved
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or("default")
        .to_string();
    let name = involved
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(super::now_seconds());
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.{:x}", rand::random::<u64>()), "namespace": ns},
        "involvedObject": involved,
        "reason": reason, "message": message, "type": type_,
        "source": {"component": component},
        "reportingComponent": component, "reportingInstance": component,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }))
    .map_err(kube::Error::SerdeError)?;
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &event)
        .await?;
    Ok(())
}

/// Starts csi-sim: its VolumeAttachment watch, then the passes over the stores.
pub fn start(
    shared: Arc<Shared>,
    stores: StorageStores,
    nodes: Store<Node>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    let (attachments, writer) = reflector::store::<VolumeAttachment>();
    let attachments_synced = Arc::new(AtomicBool::new(false));
    let events = reflector::reflector(
        writer,
        watcher::watcher(
            Api::<VolumeAttachment>::all(shared.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff(),
    );
    let wake = shared.clone();
    let synced = attachments_synced.clone();
    tasks.push(tokio::spawn(async move {
        events
            .for_each(|event| {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        synced.store(true, Ordering::Relaxed);
                        wake.storage_wake.notify_one();
                    }
                    Ok(_) => wake.storage_wake.notify_one(),
                    Err(e) => {
                        tracing::debug!(error = %e, "VolumeAttachment watch failed; retrying")
                    }
                }
                async {}
            })
            .await;
    }));
    let csi = Arc::new(Csi {
        identity: format!(
            "{}-{:04}-{DRIVER}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default(),
            rand::random::<u16>() % 10_000
        ),
        shared,
        stores,
        nodes,
        attachments,
        attachments_synced,
        state: Mutex::new(CsiState::default()),
    });
    tasks.push(tokio::spawn(run(csi)));
}

/// The loop: a pass on every storage change and every second (delays and retries).
async fn run(csi: Arc<Csi>) {
    let wake: &Notify = &csi.shared.storage_wake;
    loop {
        if csi.stores.synced()
            && csi.attachments_synced.load(Ordering::Relaxed)
            && csi.shared.nodes_synced.load(Ordering::Relaxed)
        {
            let actions = csi.plan();
            if !actions.is_empty() {
                // Each runs on its own, so that a slow call delays no other.
                for action in actions {
                    let csi = csi.clone();
                    tokio::spawn(async move { csi.act(action).await });
                }
            }
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(PASS_PERIOD) => {}
        }
        // Let a burst of watch events land before the next pass.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(extra: Value) -> PersistentVolumeClaim {
        let mut c = json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "annotations": {ANN_STORAGE_PROVISIONER: DRIVER}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}});
        json_patch::merge(&mut c, &extra);
        serde_json::from_value(c).unwrap()
    }

    fn class(extra: Value) -> StorageClass {
        let mut c = json!({"metadata": {"name": "standard"}, "provisioner": DRIVER,
            "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"});
        json_patch::merge(&mut c, &extra);
        serde_json::from_value(c).unwrap()
    }

    fn ours(node: &str) -> bool {
        node.starts_with("sim-node-")
    }

    fn decide(c: &PersistentVolumeClaim, sc: Option<&StorageClass>) -> ProvisionDecision {
        provision_decision(c, sc, &ours, false, Instant::now())
    }

    #[test]
    fn waits_for_first_consumer_then_provisions_on_the_selected_node() {
        let sc = class(json!({}));
        assert_eq!(
            decide(&claim(json!({})), Some(&sc)),
            ProvisionDecision::Skip
        );
        let selected =
            claim(json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "sim-node-1"}}}));
        assert_eq!(
            decide(&selected, Some(&sc)),
            ProvisionDecision::Provision {
                driver: DRIVER.into(),
                node: Some("sim-node-1".into())
            }
        );
        let elsewhere = claim(json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "other-0"}}}));
        assert_eq!(decide(&elsewhere, Some(&sc)), ProvisionDecision::Skip);
        let immediate = class(json!({"volumeBindingMode": "Immediate"}));
        assert_eq!(
            decide(&claim(json!({})), Some(&immediate)),
            ProvisionDecision::Provision {
                driver: DRIVER.into(),
                node: None
            }
        );
    }

    #[test]
    fn only_unbound_claims_handed_to_our_drivers() {
        let sc = class(json!({"volumeBindingMode": "Immediate"}));
        let other =
            claim(json!({"metadata": {"annotations": {ANN_STORAGE_PROVISIONER: "example.com/x"}}}));
        assert_eq!(decide(&other, Some(&sc)), ProvisionDecision::Skip);
        let beta = claim(
            json!({"metadata": {"annotations": {ANN_STORAGE_PROVISIONER: null,
            ANN_BETA_STORAGE_PROVISIONER: NOATTACH_DRIVER}}}),
        );
        let noattach =
            class(json!({"provisioner": NOATTACH_DRIVER, "volumeBindingMode": "Immediate"}));
        assert!(matches!(
            decide(&beta, Some(&noattach)),
            ProvisionDecision::Provision { .. }
        ));
        let bound = claim(json!({"spec": {"volumeName": "pv-1"}}));
        assert_eq!(decide(&bound, Some(&sc)), ProvisionDecision::Skip);
        assert_eq!(
            provision_decision(&claim(json!({})), Some(&sc), &ours, true, Instant::now()),
            ProvisionDecision::Skip,
            "already provisioned"
        );
        assert_eq!(
            decide(&claim(json!({})), None),
            ProvisionDecision::ClassMissing("standard".into())
        );
        let mismatch =
            class(json!({"provisioner": "example.com/x", "volumeBindingMode": "Immediate"}));
        assert_eq!(
            decide(&claim(json!({})), Some(&mismatch)),
            ProvisionDecision::Skip
        );
    }

    #[test]
    fn knobs_from_the_claim_win_over_the_class() {
        let sc = class(json!({"volumeBindingMode": "Immediate",
            "parameters": {PROVISION_ERROR: "class says no", PROVISION_DELAY: "1h"}}));
        let started = Instant::now();
        assert!(matches!(
            provision_decision(&claim(json!({})), Some(&sc), &ours, false, started),
            ProvisionDecision::WaitUntil(_)
        ));
        let c = claim(
            json!({"metadata": {"annotations": {PROVISION_DELAY: "0s", PROVISION_ERROR: "boom"}}}),
        );
        assert_eq!(
            provision_decision(&c, Some(&sc), &ours, false, started),
            ProvisionDecision::Fail("boom".into())
        );
        let bad = claim(
            json!({"metadata": {"annotations": {PROVISION_DELAY: "soon", PROVISION_ERROR: ""}}}),
        );
        assert_eq!(
            provision_decision(&bad, Some(&sc), &ours, false, started),
            ProvisionDecision::Fail("class says no".into()),
            "an unreadable delay counts as none, an empty error as none"
        );
    }

    #[test]
    fn the_volume_takes_the_claim_and_class() {
        let sc = class(json!({"reclaimPolicy": "Retain", "mountOptions": ["noatime"]}));
        let c = claim(json!({"spec": {"volumeMode": "Filesystem"}}));
        let pv = volume_for(&c, &sc, DRIVER, Some("zone-b"), "id-1").unwrap();
        assert_eq!(pv["metadata"]["name"], "pvc-u-1");
        assert_eq!(pv["metadata"]["annotations"][ANN_PROVISIONED_BY], DRIVER);
        let spec = &pv["spec"];
        assert_eq!(spec["capacity"]["storage"], "1Gi");
        assert_eq!(spec["accessModes"], json!(["ReadWriteOnce"]));
        assert_eq!(spec["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(spec["storageClassName"], "standard");
        assert_eq!(spec["mountOptions"], json!(["noatime"]));
        assert_eq!(spec["csi"]["driver"], DRIVER);
        assert_eq!(spec["csi"]["volumeHandle"], "u-1");
        assert_eq!(spec["csi"]["fsType"], "ext4");
        assert_eq!(spec["claimRef"]["uid"], "u-1");
        assert_eq!(spec["claimRef"]["namespace"], "ns");
        assert_eq!(
            spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
            json!({"key": ZONE_LABEL, "operator": "In", "values": ["zone-b"]})
        );
        serde_json::from_value::<PersistentVolume>(pv).unwrap();
        let block = claim(json!({"spec": {"volumeMode": "Block"}}));
        let pv = volume_for(&block, &class(json!({})), DRIVER, None, "id-1").unwrap();
        assert!(pv["spec"]["csi"].get("fsType").is_none());
        assert!(pv["spec"].get("nodeAffinity").is_none());
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
        let bad = claim(json!({"spec": {"resources": {"requests": {"storage": "lots"}}}}));
        assert!(volume_for(&bad, &sc, DRIVER, None, "id")
            .unwrap_err()
            .contains("not a quantity"));
    }

    #[test]
    fn capacities_print_as_binary_quantities() {
        assert_eq!(bytes_quantity(1 << 30), "1Gi");
        assert_eq!(bytes_quantity(3 << 20), "3Mi");
        assert_eq!(bytes_quantity(1_000_000_000), "1000000000");
        assert_eq!(bytes_quantity(1536), "1536");
        assert_eq!(bytes_quantity(512), "512");
        assert_eq!(bytes_of("1G"), Some(1_000_000_000));
        assert_eq!(bytes_of("0.5"), Some(1), "rounded up");
    }

    fn volume(extra: Value) -> PersistentVolume {
        let mut v = json!({"metadata": {"name": "pvc-u-1", "annotations": {ANN_PROVISIONED_BY: DRIVER}},
            "spec": {"capacity": {"storage": "1Gi"}, "persistentVolumeReclaimPolicy": "Delete",
                "csi": {"driver": DRIVER, "volumeHandle": "u-1"},
                "claimRef": {"namespace": "ns", "name": "c", "uid": "u-1"}},
            "status": {"phase": "Released"}});
        json_patch::merge(&mut v, &extra);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn deletes_only_its_released_delete_volumes() {
        assert!(should_delete(&volume(json!({}))));
        assert!(!should_delete(&volume(
            json!({"status": {"phase": "Bound"}})
        )));
        assert!(!should_delete(&volume(
            json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}})
        )));
        assert!(!should_delete(&volume(
            json!({"metadata": {"annotations": {ANN_PROVISIONED_BY: "kubernetes.io/host-path"}}})
        )));
        assert!(!should_delete(&volume(
            json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})
        )));
    }

    #[test]
    fn resizes_bound_claims_that_ask_for_more() {
        let bound = |request: &str, capacity: &str| {
            claim(
                json!({"spec": {"volumeName": "pvc-u-1", "resources": {"requests": {"storage": request}}},
                "status": {"phase": "Bound", "capacity": {"storage": capacity}}}),
            )
        };
        let pv = volume(json!({"status": {"phase": "Bound"}}));
        assert_eq!(
            resize_decision(&bound("2Gi", "1Gi"), Some(&pv)),
            ResizeDecision::Resize("2Gi".into())
        );
        assert_eq!(
            resize_decision(&bound("1Gi", "1Gi"), Some(&pv)),
            ResizeDecision::Skip
        );
        assert_eq!(
            resize_decision(&bound("2Gi", "1Gi"), None),
            ResizeDecision::Skip
        );
        let pending = claim(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}));
        assert_eq!(resize_decision(&pending, Some(&pv)), ResizeDecision::Skip);
        let gce = volume(json!({"spec": {"csi": null, "gcePersistentDisk": {"pdName": "d"}}}));
        assert_eq!(
            resize_decision(&bound("2Gi", "1Gi"), Some(&gce)),
            ResizeDecision::Skip
        );
        let other_claim = volume(json!({"spec": {"claimRef": {"uid": "u-2"}}}));
        assert_eq!(
            resize_decision(&bound("2Gi", "1Gi"), Some(&other_claim)),
            ResizeDecision::Skip
        );
        let grown = volume(json!({"spec": {"capacity": {"storage": "2Gi"}}}));
        let pending_fs = claim(
            json!({"spec": {"volumeName": "pvc-u-1", "resources": {"requests": {"storage": "2Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"},
                "conditions": [{"type": "FileSystemResizePending", "status": "True"}]}}),
        );
        assert_eq!(
            resize_decision(&pending_fs, Some(&grown)),
            ResizeDecision::Skip
        );
        assert_eq!(
            resize_decision(&bound("2Gi", "1Gi"), Some(&grown)),
            ResizeDecision::Resize("2Gi".into()),
            "a grown volume whose claim is still Resizing is finished"
        );
    }

    fn va(extra: Value) -> VolumeAttachment {
        let mut v = json!({"metadata": {"name": "csi-abc", "finalizers": [ATTACHER_FINALIZER]},
            "spec": {"attacher": DRIVER, "nodeName": "sim-node-0", "source": {"persistentVolumeName": "pvc-u-1"}},
            "status": {"attached": false}});
        json_patch::merge(&mut v, &extra);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn attaches_with_a_finalizer_and_detaches_by_dropping_it() {
        let now = Instant::now();
        assert_eq!(
            attach_decision(
                &va(json!({"metadata": {"finalizers": null}})),
                None,
                None,
                now
            ),
            AttachDecision::AddFinalizer
        );
        assert_eq!(
            attach_decision(&va(json!({})), None, None, now),
            AttachDecision::Attach
        );
        assert_eq!(
            attach_decision(&va(json!({"status": {"attached": true}})), None, None, now),
            AttachDecision::Skip
        );
        assert_eq!(
            attach_decision(
                &va(json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})),
                None,
                None,
                now
            ),
            AttachDecision::Detach
        );
        assert_eq!(
            attach_decision(
                &va(json!({"spec": {"attacher": NOATTACH_DRIVER}})),
                None,
                None,
                now
            ),
            AttachDecision::Skip
        );
        let c = claim(json!({"metadata": {"annotations": {ATTACH_ERROR: "boom"}}}));
        assert_eq!(
            attach_decision(&va(json!({})), Some(&c), None, now),
            AttachDecision::Fail("boom".into())
        );
        assert_eq!(
            attach_decision(
                &va(json!({"status": {"attachError": {"message": "boom"}}})),
                Some(&c),
                None,
                now
            ),
            AttachDecision::Skip,
            "recorded once"
        );
        let slow = class(json!({"parameters": {ATTACH_DELAY: "5m"}}));
        assert!(matches!(
            attach_decision(&va(json!({})), None, Some(&slow), now),
            AttachDecision::WaitUntil(_)
        ));
    }

    #[test]
    fn csi_objects() {
        let node = csi_node_object("sim-node-0", "uid-0");
        assert_eq!(node["metadata"]["ownerReferences"][0]["uid"], "uid-0");
        assert_eq!(node["spec"]["drivers"][0]["name"], DRIVER);
        assert_eq!(node["spec"]["drivers"][1]["name"], NOATTACH_DRIVER);
        assert_eq!(
            node["spec"]["drivers"][0]["topologyKeys"],
            json!([ZONE_LABEL])
        );
        serde_json::from_value::<CSINode>(node.clone()).unwrap();
        let driver = csi_driver_object(NOATTACH_DRIVER, false);
        assert_eq!(driver["spec"]["attachRequired"], false);
        serde_json::from_value::<CSIDriver>(driver).unwrap();
        assert!(node["metadata"]["annotations"][ANN_MIGRATED_PLUGINS]
            .as_str()
            .unwrap()
            .contains("kubernetes.io/gce-pd"));
    }
}

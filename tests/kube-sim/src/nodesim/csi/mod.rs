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

//!
//! The modules follow the sidecars: [`provisioner`], [`resizer`], [`attacher`] and the
//! drivers' [`registration`] (CSIDriver, CSINode), each with its pure decision and its
//! API calls; [`plan`] is one pass over the stores, [`stores`] the shared watches,
//! [`fields`] what is read off the objects, [`events`] what is posted.

mod attacher;
mod events;
mod fields;
mod plan;
mod provisioner;
mod registration;
mod resizer;
mod state;
mod stores;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use tokio::sync::Notify;

pub use attacher::{attach_decision, AttachDecision};
pub use fields::{bytes_quantity, claim_class, claim_driver, is_our_driver, knob, volume_class};
pub use provisioner::{
    provision_decision, should_delete, volume_for, volume_name, ProvisionDecision,
};
pub use registration::{csi_driver_object, csi_node_object};
pub use resizer::{resize_decision, ResizeDecision};
pub use stores::StorageStores;

use super::Shared;
use state::CsiState;

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
mod tests;

//! external-provisioner: a volume for each claim handed to one of csi-sim's drivers, and the
//! deletion of the Released volumes it provisioned with policy Delete.

use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::fields::{
    annotation, bytes_of, bytes_quantity, claim_class, claim_driver, duration_knob, is_our_driver,
    knob, storage_request,
};
use super::{
    Csi, ANN_PROVISIONED_BY, ANN_SELECTED_NODE, PROVISIONER_IDENTITY_ATTRIBUTE, PROVISION_DELAY,
    PROVISION_ERROR, ZONE_LABEL,
};

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

impl Csi {
    pub(super) async fn provisioning_event(&self, claim: &PersistentVolumeClaim, driver: &str) {
        let message = format!(
            "External provisioner is provisioning volume for claim \"{}/{}\"",
            claim.namespace().unwrap_or_default(),
            claim.name_any()
        );
        self.claim_event(claim, driver, "Normal", "Provisioning", &message)
            .await;
    }

    pub(super) async fn provision(
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

    pub(super) async fn delete(&self, volume: &PersistentVolume) -> Result<(), String> {
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
}

//! external-resizer: a Bound claim on one of csi-sim's drivers asking for more than it has
//! gets its volume grown, with the `Resizing` condition meanwhile.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::events::claim_reference;
use super::fields::{is_our_driver, status_capacity, storage_request, volume_capacity};
use super::Csi;
use crate::nodesim::quantity;

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

impl Csi {
    pub(super) async fn resize(
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
        let now = crate::nodesim::now_seconds();
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
        resizing.push(already.unwrap_or_else(
            || json!({"type": "Resizing", "status": "True", "lastTransitionTime": Time(now)}),
        ));
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
}

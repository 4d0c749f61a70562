//! The writes that bind and unbind (upstream `bind`, `unbindVolume`, `updateClaimStatus`,
//! `updateVolumePhase` and their helpers): each change is computed by a plain function
//! that says what the object should become, or that it already is so (no write), and the
//! controller saves it with a PUT (of the object or its status) and keeps the answer in
//! its own cache, so that the next step of a bind starts from what it wrote.
//!
//! A bind is four steps, each only when needed: the volume's claimRef (and
//! `bound-by-controller` unless the user pre-bound it), the volume's phase, the claim's
//! volumeName (`bound-by-controller` when the controller chose) and `bind-completed`, and
//! the claim's phase, access modes and capacity. Any failure stops it; the next sync of
//! either object finishes it.

use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus, PersistentVolumeStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use kube::api::{Api, PostParams};
use tracing::{debug, info};

use crate::meta::ResourceNames;
use crate::recorder::reference_to;
use rkcm_gocompat::quantity::Quantity;

use super::helpers::{
    annotation, claim_key, claim_phase, claim_volume_name, has_annotation,
    is_volume_bound_to_claim, set_annotation, uid, volume_phase, ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER, ANN_PRE_RESIZE_CAPACITY, CLAIM_BOUND, STORAGE, VOLUME_AVAILABLE,
    VOLUME_BOUND,
};
use super::Controller;

/// `GetBindVolumeToClaim`: the volume with its claimRef pointing at the claim (and
/// `bound-by-controller` when it was not pre-bound to it), or `None` when it already is.
pub(super) fn volume_bound_to_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Option<PersistentVolume> {
    let set_bound_by_controller = !is_volume_bound_to_claim(volume, claim);
    let mut bound = volume.clone();
    let mut dirty = false;
    let spec = bound.spec.get_or_insert_with(Default::default);
    let points_at_claim = spec.claim_ref.as_ref().is_some_and(|reference| {
        reference.name.as_deref().unwrap_or_default() == claim.name_str()
            && reference.namespace.as_deref().unwrap_or_default() == claim.namespace_str()
            && reference.uid.as_deref().unwrap_or_default() == uid(&claim.metadata)
    });
    if !points_at_claim {
        spec.claim_ref = Some(reference_to(claim));
        dirty = true;
    }
    if set_bound_by_controller && !has_annotation(&bound.metadata, ANN_BOUND_BY_CONTROLLER) {
        set_annotation(&mut bound.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
        dirty = true;
    }
    dirty.then_some(bound)
}

/// `bindClaimToVolume`'s change: volumeName (with `bound-by-controller` when the
/// controller sets it) and `bind-completed`; `None` when both are there.
pub(super) fn claim_bound_to_volume(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
) -> Option<PersistentVolumeClaim> {
    let mut bound = claim.clone();
    let mut dirty = false;
    let volume_name = volume.name_str();
    if claim_volume_name(claim) != volume_name {
        bound.spec.get_or_insert_with(Default::default).volume_name = Some(volume_name.into());
        if !has_annotation(&bound.metadata, ANN_BOUND_BY_CONTROLLER) {
            set_annotation(&mut bound.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
        }
        dirty = true;
    }
    if !has_annotation(&bound.metadata, ANN_BIND_COMPLETED) {
        set_annotation(&mut bound.metadata, ANN_BIND_COMPLETED, "yes");
        dirty = true;
    }
    dirty.then_some(bound)
}

/// `updateClaimStatus`'s change: the phase, and the access modes and capacity of `volume`
/// (cleared without one). The capacity is copied only when the claim becomes `phase`, so
/// a deliberate difference (a filesystem smaller than its block device) survives, and is
/// the pre-resize capacity when the volume carries one. `None` when nothing changes.
pub(super) fn claim_with_status(
    claim: &PersistentVolumeClaim,
    phase: &str,
    volume: Option<&PersistentVolume>,
) -> Result<Option<PersistentVolumeClaim>, String> {
    let mut updated = claim.clone();
    let old = claim.status.clone().unwrap_or_default();
    let status = updated
        .status
        .get_or_insert_with(PersistentVolumeClaimStatus::default);
    let mut dirty = false;
    if claim_phase(claim) != phase {
        status.phase = Some(phase.to_string());
        dirty = true;
    }
    match volume {
        None => {
            if status.access_modes.is_some() {
                status.access_modes = None;
                dirty = true;
            }
            if status.capacity.is_some() {
                status.capacity = None;
                dirty = true;
            }
        }
        Some(volume) => {
            let spec = volume.spec.clone().unwrap_or_default();
            if old.access_modes != spec.access_modes {
                status.access_modes = spec.access_modes.clone();
                dirty = true;
            }
            if claim_phase(claim) != phase {
                let Some(volume_capacity) =
                    spec.capacity.as_ref().and_then(|c| c.get(STORAGE)).cloned()
                else {
                    return Err(format!(
                        "PersistentVolume {:?} is without a storage capacity",
                        volume.name_str()
                    ));
                };
                let claim_capacity = old.capacity.as_ref().and_then(|c| c.get(STORAGE));
                if let Some(pre_resize) = annotation(&volume.metadata, ANN_PRE_RESIZE_CAPACITY) {
                    let capacity = match Quantity::from_api(pre_resize) {
                        Ok(_) => ApiQuantity(pre_resize.to_string()),
                        Err(error) => {
                            info!(volume = volume.name_str(), %error, "Parsing pre-resize-capacity from PV failed");
                            volume_capacity
                        }
                    };
                    status
                        .capacity
                        .get_or_insert_with(Default::default)
                        .insert(STORAGE.to_string(), capacity);
                    dirty = true;
                } else if claim_capacity
                    .is_none_or(|claimed| !same_quantity(claimed, &volume_capacity))
                {
                    status.capacity = spec.capacity.clone();
                    dirty = true;
                }
            }
        }
    }
    Ok(dirty.then_some(updated))
}

fn same_quantity(a: &ApiQuantity, b: &ApiQuantity) -> bool {
    match (Quantity::from_api(&a.0), Quantity::from_api(&b.0)) {
        (Ok(a), Ok(b)) => a.cmp_value(&b).is_eq(),
        _ => a.0 == b.0,
    }
}

/// `updateVolumePhase`'s change: the phase and message, or `None` when the phase is set.
pub(super) fn volume_with_phase(
    volume: &PersistentVolume,
    phase: &str,
    message: &str,
) -> Option<PersistentVolume> {
    if volume_phase(volume) == phase {
        return None;
    }
    let mut updated = volume.clone();
    let status = updated
        .status
        .get_or_insert_with(PersistentVolumeStatus::default);
    status.phase = Some(phase.to_string());
    status.message = (!message.is_empty()).then(|| message.to_string());
    Some(updated)
}

/// `unbindVolume`'s change: a binding the controller made is removed with its
/// annotation; a user's pre-binding keeps its claim and loses only the uid.
pub(super) fn volume_unbound(volume: &PersistentVolume) -> PersistentVolume {
    let mut unbound = volume.clone();
    if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
        if let Some(spec) = unbound.spec.as_mut() {
            spec.claim_ref = None;
        }
        if let Some(annotations) = unbound.metadata.annotations.as_mut() {
            annotations.remove(ANN_BOUND_BY_CONTROLLER);
            if annotations.is_empty() {
                unbound.metadata.annotations = None;
            }
        }
    } else if let Some(reference) = unbound.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
        reference.uid = None;
    }
    unbound
}

impl Controller {
    fn volumes_api(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    fn claims_api(&self, namespace: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// `PUT` of a volume, kept in the cache.
    pub(super) async fn save_volume(
        &self,
        volume: &PersistentVolume,
    ) -> anyhow::Result<Arc<PersistentVolume>> {
        let volume_name = volume.name_str();
        let saved = self
            .volumes_api()
            .replace(volume_name, &PostParams::default(), volume)
            .await
            .with_context(|| format!("updating PersistentVolume {volume_name}"))?;
        let saved = Arc::new(saved);
        self.store_volume_update(saved.clone())?;
        Ok(saved)
    }

    /// `PUT` of a claim, kept in the cache.
    pub(super) async fn save_claim(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> anyhow::Result<Arc<PersistentVolumeClaim>> {
        let saved = self
            .claims_api(claim.namespace_str())
            .replace(claim.name_str(), &PostParams::default(), claim)
            .await
            .with_context(|| format!("updating PersistentVolumeClaim {}", claim_key(claim)))?;
        let saved = Arc::new(saved);
        self.store_claim_update(saved.clone())?;
        Ok(saved)
    }

    /// `updateClaimStatus`.
    pub(super) async fn update_claim_status(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        phase: &str,
        volume: Option<&PersistentVolume>,
    ) -> anyhow::Result<Arc<PersistentVolumeClaim>> {
        let Some(updated) = claim_with_status(claim, phase, volume).map_err(anyhow::Error::msg)?
        else {
            return Ok(claim.clone());
        };
        let key = claim_key(claim);
        let saved = self
            .claims_api(claim.namespace_str())
            .replace_status(claim.name_str(), &PostParams::default(), &updated)
            .await
            .with_context(|| format!("setting the status of PersistentVolumeClaim {key}"))?;
        let saved = Arc::new(saved);
        self.store_claim_update(saved.clone())?;
        info!(controller = super::NAME, claim = %key, phase, "Claim entered phase");
        Ok(saved)
    }

    /// `updateClaimStatusWithEvent`: the event only when the phase changes.
    pub(super) async fn update_claim_status_with_event(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        phase: &str,
        event: (&str, &str, &str),
    ) -> anyhow::Result<Arc<PersistentVolumeClaim>> {
        if claim_phase(claim) == phase {
            return Ok(claim.clone());
        }
        let saved = self.update_claim_status(claim, phase, None).await?;
        let (event_type, reason, message) = event;
        self.recorder
            .event(saved.as_ref(), event_type, reason, message);
        Ok(saved)
    }

    /// `updateVolumePhase`.
    pub(super) async fn update_volume_phase(
        &self,
        volume: &Arc<PersistentVolume>,
        phase: &str,
        message: &str,
    ) -> anyhow::Result<Arc<PersistentVolume>> {
        let Some(updated) = volume_with_phase(volume, phase, message) else {
            return Ok(volume.clone());
        };
        let volume_name = volume.name_str();
        let saved = self
            .volumes_api()
            .replace_status(volume_name, &PostParams::default(), &updated)
            .await
            .with_context(|| format!("setting the phase of PersistentVolume {volume_name}"))?;
        let saved = Arc::new(saved);
        self.store_volume_update(saved.clone())?;
        info!(
            controller = super::NAME,
            volume = volume_name,
            phase,
            "Volume entered phase"
        );
        Ok(saved)
    }

    /// `updateVolumePhaseWithEvent`: the event only when the phase changes.
    pub(super) async fn update_volume_phase_with_event(
        &self,
        volume: &Arc<PersistentVolume>,
        phase: &str,
        event: (&str, &str, &str),
    ) -> anyhow::Result<Arc<PersistentVolume>> {
        if volume_phase(volume) == phase {
            return Ok(volume.clone());
        }
        let (event_type, reason, message) = event;
        let saved = self.update_volume_phase(volume, phase, message).await?;
        self.recorder
            .event(saved.as_ref(), event_type, reason, message);
        Ok(saved)
    }

    /// `bind`: volume first, then the claim; each step only when needed.
    pub(super) async fn bind(
        &self,
        volume: &Arc<PersistentVolume>,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> anyhow::Result<()> {
        debug!(controller = super::NAME, claim = %claim_key(claim), volume = volume.name_str(), "binding volume to claim");
        let mut volume = volume.clone();
        if let Some(bound) = volume_bound_to_claim(&volume, claim) {
            info!(controller = super::NAME, claim = %claim_key(claim), volume = volume.name_str(), "Claim bound to volume");
            volume = self.save_volume(&bound).await?;
        }
        let volume = self.update_volume_phase(&volume, VOLUME_BOUND, "").await?;
        let mut claim = claim.clone();
        if let Some(bound) = claim_bound_to_volume(&claim, &volume) {
            info!(controller = super::NAME, claim = %claim_key(&claim), volume = volume.name_str(), "Volume bound to claim");
            claim = self.save_claim(&bound).await?;
        }
        self.update_claim_status(&claim, CLAIM_BOUND, Some(&volume))
            .await?;
        Ok(())
    }

    /// `unbindVolume`: the binding rolled back, then `Available`.
    pub(super) async fn unbind_volume(&self, volume: &Arc<PersistentVolume>) -> anyhow::Result<()> {
        let saved = self.save_volume(&volume_unbound(volume)).await?;
        self.update_volume_phase(&saved, VOLUME_AVAILABLE, "")
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::helpers::fixtures::{claim_ref, pv, pvc};
    use super::*;
    use serde_json::json;

    #[test]
    fn binding_a_volume_sets_the_full_claim_reference() {
        let claim = pvc("c1", "1Gi", json!({"metadata": {"resourceVersion": "7"}}));
        let bound = volume_bound_to_claim(&pv("v", "1Gi", json!({})), &claim).unwrap();
        let reference = bound.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
        assert_eq!(reference.kind.as_deref(), Some("PersistentVolumeClaim"));
        assert_eq!(reference.api_version.as_deref(), Some("v1"));
        assert_eq!(reference.namespace.as_deref(), Some("ns"));
        assert_eq!(reference.name.as_deref(), Some("c1"));
        assert_eq!(reference.uid.as_deref(), Some("uid-c1"));
        assert_eq!(reference.resource_version.as_deref(), Some("7"));
        assert_eq!(
            annotation(&bound.metadata, ANN_BOUND_BY_CONTROLLER),
            Some("yes")
        );
        // Pre-bound by the user (no uid): the uid is filled, no annotation.
        let prebound = volume_bound_to_claim(&pv("v", "1Gi", claim_ref("c1", "")), &claim).unwrap();
        assert!(!has_annotation(&prebound.metadata, ANN_BOUND_BY_CONTROLLER));
        assert_eq!(
            prebound.spec.unwrap().claim_ref.unwrap().uid.as_deref(),
            Some("uid-c1")
        );
        // Already bound: nothing to write.
        assert!(
            volume_bound_to_claim(&pv("v", "1Gi", claim_ref("c1", "uid-c1")), &claim).is_none()
        );
    }

    #[test]
    fn binding_a_claim() {
        let volume = pv("v", "2Gi", json!({}));
        let chosen = claim_bound_to_volume(&pvc("c", "1Gi", json!({})), &volume).unwrap();
        assert_eq!(claim_volume_name(&chosen), "v");
        assert_eq!(
            annotation(&chosen.metadata, ANN_BOUND_BY_CONTROLLER),
            Some("yes")
        );
        assert_eq!(
            annotation(&chosen.metadata, ANN_BIND_COMPLETED),
            Some("yes")
        );
        let asked = claim_bound_to_volume(
            &pvc("c", "1Gi", json!({"spec": {"volumeName": "v"}})),
            &volume,
        )
        .unwrap();
        assert!(!has_annotation(&asked.metadata, ANN_BOUND_BY_CONTROLLER));
        assert_eq!(annotation(&asked.metadata, ANN_BIND_COMPLETED), Some("yes"));
        assert!(claim_bound_to_volume(&chosen, &volume).is_none());
    }

    #[test]
    fn claim_status_follows_the_volume() {
        let volume = pv(
            "v",
            "2Gi",
            json!({"spec": {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"]}}),
        );
        let pending = pvc("c", "1Gi", json!({}));
        let bound = claim_with_status(&pending, "Bound", Some(&volume))
            .unwrap()
            .unwrap();
        let status = bound.status.clone().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Bound"));
        assert_eq!(status.capacity.unwrap()["storage"].0, "2Gi");
        assert_eq!(status.access_modes.unwrap().len(), 2);
        assert!(claim_with_status(&bound, "Bound", Some(&volume))
            .unwrap()
            .is_none());
        // Already Bound with another capacity (resized filesystem): left alone.
        let mut resized = bound.clone();
        resized.status.as_mut().unwrap().capacity =
            Some([("storage".to_string(), ApiQuantity("1Gi".into()))].into());
        assert!(claim_with_status(&resized, "Bound", Some(&volume))
            .unwrap()
            .is_none());
        // Pending again: modes and capacity cleared.
        let cleared = claim_with_status(&bound, "Pending", None).unwrap().unwrap();
        let status = cleared.status.unwrap();
        assert_eq!(status.capacity, None);
        assert_eq!(status.access_modes, None);
        // Pre-resize capacity wins; a volume without capacity is an error.
        let pre = pv(
            "v",
            "2Gi",
            json!({"metadata": {"annotations": {ANN_PRE_RESIZE_CAPACITY: "1500Mi"}}}),
        );
        let bound = claim_with_status(&pending, "Bound", Some(&pre))
            .unwrap()
            .unwrap();
        assert_eq!(
            bound.status.unwrap().capacity.unwrap()["storage"].0,
            "1500Mi"
        );
        let empty = pv("v", "2Gi", json!({"spec": {"capacity": null}}));
        assert_eq!(
            claim_with_status(&pending, "Bound", Some(&empty)).unwrap_err(),
            "PersistentVolume \"v\" is without a storage capacity"
        );
        // Equal quantities written differently are the same capacity.
        let mut same = pending.clone();
        same.status = Some(PersistentVolumeClaimStatus {
            capacity: Some([("storage".to_string(), ApiQuantity("2048Mi".into()))].into()),
            ..Default::default()
        });
        let bound = claim_with_status(&same, "Bound", Some(&pv("v", "2Gi", json!({}))))
            .unwrap()
            .unwrap();
        assert_eq!(
            bound.status.unwrap().capacity.unwrap()["storage"].0,
            "2048Mi"
        );
    }

    #[test]
    fn unbinding() {
        let by_controller = pv(
            "v",
            "1Gi",
            json!({"metadata": {"annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}}, "spec": {"claimRef": {"name": "c", "namespace": "ns", "uid": "u"}}}),
        );
        let unbound = volume_unbound(&by_controller);
        assert!(unbound.spec.unwrap().claim_ref.is_none());
        assert!(unbound.metadata.annotations.is_none());
        let by_user = volume_unbound(&pv("v", "1Gi", claim_ref("c", "u")));
        let reference = by_user.spec.unwrap().claim_ref.unwrap();
        assert_eq!(reference.name.as_deref(), Some("c"));
        assert_eq!(reference.uid, None);
        assert!(volume_with_phase(&pv("v", "1Gi", json!({})), "Available", "").is_none());
        let failed = volume_with_phase(&pv("v", "1Gi", json!({})), "Failed", "boom").unwrap();
        assert_eq!(failed.status.unwrap().message.as_deref(), Some("boom"));
    }
}

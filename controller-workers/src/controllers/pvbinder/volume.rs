//! `syncVolume`: what to do with a volume, decided by [`decide_volume`] once the claim its
//! claimRef names has been looked for (the cache, then the informer, then the API server,
//! so that a volume is never released because a claim had not reached the cache yet).
//!
//! A volume without a claimRef, or reserved for a claim by name only, is `Available`. A
//! volume whose claim is gone is `Released` and reclaimed by its policy. A claim not bound
//! yet is synced at once (it may be waiting for this very volume, as after an external
//! provisioner created it); a mismatched volumeMode is reported instead. A claim bound to
//! the volume makes it `Bound`; a claim bound to another volume releases a provisioned
//! Delete volume, and otherwise the volume is unbound.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::Api;
use tracing::{debug, info};

use crate::api_errors::is_not_found;
use crate::meta::ResourceNames;
use crate::recorder::WARNING;

use super::helpers::{
    claim_ref_key, claim_ref_uid, claim_volume_name, has_annotation, reclaim_policy, uid,
    volume_mode_mismatch, volume_phase, ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED,
    RECLAIM_DELETE, RECLAIM_RETAIN, VOLUME_AVAILABLE, VOLUME_BOUND, VOLUME_FAILED, VOLUME_RELEASED,
};
use super::Controller;

/// What a volume needs.
#[derive(Debug, PartialEq)]
pub(super) enum VolumeStep {
    /// Unused, or reserved for a claim that has not bound yet.
    Available,
    /// Its claim is gone (or it was provisioned for a claim bound elsewhere): mark it
    /// `Released` unless it is Released or Failed already, then reclaim it.
    Release,
    /// Its claim asks for another volumeMode: say so on both.
    VolumeModeMismatch,
    /// Its claim is not bound yet: sync the claim.
    SyncClaim(String),
    /// Bound both ways.
    Bound,
    /// Bound to a claim that is bound elsewhere: roll back.
    Unbind,
}

/// `syncVolume`'s decision; `claim` is the claim the claimRef names with the claimRef's
/// uid (`None` when there is none, or one of that name with another uid).
pub(super) fn decide_volume(
    volume: &PersistentVolume,
    claim: Option<&PersistentVolumeClaim>,
) -> VolumeStep {
    match claim_ref_uid(volume) {
        None | Some("") => return VolumeStep::Available,
        Some(_) => {}
    }
    let Some(claim) = claim else {
        return VolumeStep::Release;
    };
    let bound_to = claim_volume_name(claim);
    if bound_to.is_empty() {
        if volume_mode_mismatch(claim, volume) {
            return VolumeStep::VolumeModeMismatch;
        }
        return VolumeStep::SyncClaim(super::helpers::claim_key(claim));
    }
    if bound_to == volume.name_str() {
        return VolumeStep::Bound;
    }
    if has_annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED)
        && reclaim_policy(volume) == RECLAIM_DELETE
    {
        return VolumeStep::Release;
    }
    VolumeStep::Unbind
}

impl Controller {
    /// `syncVolume`.
    pub(super) async fn sync_volume(
        self: &Arc<Self>,
        volume: Arc<PersistentVolume>,
    ) -> anyhow::Result<()> {
        let volume_name = volume.name_str().to_string();
        debug!(controller = super::NAME, volume = %volume_name, phase = volume_phase(&volume), "synchronizing PersistentVolume");
        let volume = self.update_volume_migration_annotations(volume).await?;
        let claim = match claim_ref_uid(&volume) {
            None | Some("") => None,
            Some(_) => self.claim_of(&volume).await?,
        };
        let step = decide_volume(&volume, claim.as_deref());
        debug!(controller = super::NAME, volume = %volume_name, ?step, "volume");
        match step {
            VolumeStep::Available => {
                self.update_volume_phase(&volume, VOLUME_AVAILABLE, "")
                    .await?;
            }
            VolumeStep::Release => {
                let mut volume = volume;
                let phase = volume_phase(&volume);
                if phase != VOLUME_RELEASED && phase != VOLUME_FAILED {
                    info!(controller = super::NAME, volume = %volume_name, policy = reclaim_policy(&volume), "Volume is released and reclaim policy will be executed");
                    volume = self
                        .update_volume_phase(&volume, VOLUME_RELEASED, "")
                        .await?;
                }
                self.reclaim_volume(&volume).await?;
                if reclaim_policy(&volume) == RECLAIM_RETAIN {
                    debug!(controller = super::NAME, volume = %volume_name, claim = ?claim_ref_key(&volume), "PersistentVolume references a claim that is not found");
                }
            }
            VolumeStep::VolumeModeMismatch => {
                if let Some(claim) = &claim {
                    let claim_name = claim.name_str();
                    self.recorder.event(
                        volume.as_ref(),
                        WARNING,
                        "VolumeMismatch",
                        format!("Cannot bind PersistentVolume to requested PersistentVolumeClaim {claim_name:?} due to incompatible volumeMode."),
                    );
                    self.recorder.event(
                        claim.as_ref(),
                        WARNING,
                        "VolumeMismatch",
                        format!("Cannot bind PersistentVolume {volume_name:?} to requested PersistentVolumeClaim due to incompatible volumeMode."),
                    );
                }
            }
            VolumeStep::SyncClaim(key) => {
                if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
                    debug!(controller = super::NAME, volume = %volume_name, "volume not bound yet, waiting for syncClaim to fix it");
                } else {
                    debug!(controller = super::NAME, volume = %volume_name, "volume was bound and got unbound (by user?), waiting for syncClaim to fix it");
                }
                self.claim_queue.add(key);
            }
            VolumeStep::Bound => {
                self.update_volume_phase(&volume, VOLUME_BOUND, "").await?;
            }
            VolumeStep::Unbind => {
                self.unbind_volume(&volume).await?;
            }
        }
        Ok(())
    }

    /// The claim a bound volume's claimRef names, with its uid: the cached one; when the
    /// cache has none and the volume is not Released or Failed yet, the informer's or the
    /// API server's; when the one found has another uid, the API server's.
    async fn claim_of(
        &self,
        volume: &PersistentVolume,
    ) -> anyhow::Result<Option<Arc<PersistentVolumeClaim>>> {
        let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
            return Ok(None);
        };
        let namespace = reference.namespace.as_deref().unwrap_or_default();
        let claim_name = reference.name.as_deref().unwrap_or_default();
        let reference_uid = reference.uid.as_deref().unwrap_or_default();
        let key = format!("{namespace}/{claim_name}");
        let mut claim = self.claims.get(&key);
        let phase = volume_phase(volume);
        if claim.is_none() && phase != VOLUME_RELEASED && phase != VOLUME_FAILED {
            claim = match self.claim_lister.get(&key) {
                Some(claim) => Some(claim),
                None => self.live_claim(namespace, claim_name).await?,
            };
        }
        if let Some(found) = &claim {
            if uid(&found.metadata) != reference_uid {
                debug!(controller = super::NAME, claim = %key, "the cached claim may be stale; reading it from the API server");
                claim = self
                    .live_claim(namespace, claim_name)
                    .await?
                    .filter(|live| uid(&live.metadata) == reference_uid);
            }
        }
        Ok(claim)
    }

    async fn live_claim(
        &self,
        namespace: &str,
        claim_name: &str,
    ) -> anyhow::Result<Option<Arc<PersistentVolumeClaim>>> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        match claims.get(claim_name).await {
            Ok(claim) => Ok(Some(Arc::new(claim))),
            Err(error) if is_not_found(&error) => Ok(None),
            Err(error) => Err(anyhow::Error::new(error).context(format!(
                "reading PersistentVolumeClaim {namespace}/{claim_name}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::helpers::fixtures::{claim_ref, pv, pvc};
    use super::*;
    use serde_json::json;

    #[test]
    fn volume_table() {
        let provisioned = |policy: &str| {
            let mut overlay = claim_ref("c1", "uid-c1");
            overlay["metadata"] =
                json!({"annotations": {ANN_DYNAMICALLY_PROVISIONED: "example.com/p"}});
            overlay["spec"]["persistentVolumeReclaimPolicy"] = json!(policy);
            pv("v", "1Gi", overlay)
        };
        let elsewhere = pvc("c1", "1Gi", json!({"spec": {"volumeName": "other"}}));
        let cases = [
            (
                "unused",
                pv("v", "1Gi", json!({})),
                None,
                VolumeStep::Available,
            ),
            (
                "pre-bound by name",
                pv("v", "1Gi", claim_ref("c1", "")),
                None,
                VolumeStep::Available,
            ),
            (
                "claim gone",
                pv("v", "1Gi", claim_ref("c1", "uid-c1")),
                None,
                VolumeStep::Release,
            ),
            (
                "claim not bound yet",
                pv("v", "1Gi", claim_ref("c1", "uid-c1")),
                Some(pvc("c1", "1Gi", json!({}))),
                VolumeStep::SyncClaim("ns/c1".into()),
            ),
            (
                "claim not bound yet, other volumeMode",
                pv("v", "1Gi", claim_ref("c1", "uid-c1")),
                Some(pvc("c1", "1Gi", json!({"spec": {"volumeMode": "Block"}}))),
                VolumeStep::VolumeModeMismatch,
            ),
            (
                "bound both ways",
                pv("v", "1Gi", claim_ref("c1", "uid-c1")),
                Some(pvc("c1", "1Gi", json!({"spec": {"volumeName": "v"}}))),
                VolumeStep::Bound,
            ),
            (
                "claim bound elsewhere",
                pv("v", "1Gi", claim_ref("c1", "uid-c1")),
                Some(elsewhere.clone()),
                VolumeStep::Unbind,
            ),
            (
                "provisioned Delete, claim bound elsewhere",
                provisioned("Delete"),
                Some(elsewhere.clone()),
                VolumeStep::Release,
            ),
            (
                "provisioned Retain, claim bound elsewhere",
                provisioned("Retain"),
                Some(elsewhere),
                VolumeStep::Unbind,
            ),
        ];
        for (what, volume, claim, want) in cases {
            assert_eq!(decide_volume(&volume, claim.as_ref()), want, "{what}");
        }
    }
}

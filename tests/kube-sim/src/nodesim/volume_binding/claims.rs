//! PreFilter: the pod's claims, checked and split into bound and WaitForFirstConsumer ones.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::{StorageLookup, ANN_BIND_COMPLETED, UNBOUND_IMMEDIATE};
use crate::nodesim::csi;

/// The claim a pod volume uses, and whether it is a generic ephemeral volume's.
fn claim_of(pod: &Pod, volume: &Volume) -> Option<(String, bool)> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some((source.claim_name.clone(), false));
    }
    volume
        .ephemeral
        .as_ref()
        .map(|_| (format!("{}-{}", pod.name_any(), volume.name), true))
}

/// The claims of a pod's volumes, in order, with whether each is an ephemeral volume's.
pub fn pod_claims(pod: &Pod) -> Vec<(String, bool)> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| claim_of(pod, v))
        .collect()
}

/// `ephemeral.VolumeIsForPod`: the claim of a generic ephemeral volume must be controlled
/// by the pod.
pub fn ephemeral_owner_error(pod: &Pod, claim: &PersistentVolumeClaim) -> Option<String> {
    let owned = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && Some(&r.uid) == pod.metadata.uid.as_ref());
    (!owned).then(|| {
        format!(
            "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
            claim.namespace().unwrap_or_default(),
            claim.name_any(),
            pod.namespace().unwrap_or_default(),
            pod.name_any()
        )
    })
}

fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// `isPVCFullyBound`: a volume name and the binder's bind-completed annotation.
pub fn is_fully_bound(claim: &PersistentVolumeClaim) -> bool {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty())
        && has_annotation(&claim.metadata, ANN_BIND_COMPLETED)
}

/// A pod's claims, split as the plugin keeps them.
#[derive(Clone, Debug, Default)]
pub struct PodClaims {
    pub bound: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims of WaitForFirstConsumer classes.
    pub delayed: Vec<Arc<PersistentVolumeClaim>>,
}

/// PreFilter: `Ok(None)` for a pod without claims; `Err` with the message that makes the
/// pod unschedulable on every node.
pub fn pre_filter(pod: &Pod, storage: &dyn StorageLookup) -> Result<Option<PodClaims>, String> {
    let namespace = pod.namespace().unwrap_or_default();
    let wanted = pod_claims(pod);
    if wanted.is_empty() {
        return Ok(None);
    }
    let mut claims = Vec::new();
    for (name, ephemeral) in &wanted {
        let Some(claim) = storage.claim(&namespace, name) else {
            return Err(if *ephemeral {
                format!("waiting for ephemeral volume controller to create the persistentvolumeclaim \"{name}\"")
            } else {
                format!("persistentvolumeclaim \"{name}\" not found")
            });
        };
        if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            let volume = claim
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .unwrap_or_default();
            return Err(format!(
                "persistentvolumeclaim \"{name}\" bound to non-existent persistentvolume \"{volume}\""
            ));
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        if *ephemeral {
            if let Some(error) = ephemeral_owner_error(pod, &claim) {
                return Err(error);
            }
        }
        claims.push(claim);
    }
    let mut split = PodClaims::default();
    let mut immediate = false;
    for claim in claims {
        if is_fully_bound(&claim) {
            split.bound.push(claim);
            continue;
        }
        let unnamed = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .is_none_or(str::is_empty);
        if is_delay_binding(&claim, storage)? && unnamed {
            split.delayed.push(claim);
        } else {
            // Immediate claims (and claims pre-bound to a volume) are the binder's.
            immediate = true;
        }
    }
    if immediate {
        return Err(UNBOUND_IMMEDIATE.into());
    }
    Ok(Some(split))
}

/// `IsDelayBindingMode`: the claim's class exists and is WaitForFirstConsumer.
fn is_delay_binding(
    claim: &PersistentVolumeClaim,
    storage: &dyn StorageLookup,
) -> Result<bool, String> {
    let name = csi::claim_class(claim);
    if name.is_empty() {
        return Ok(false);
    }
    let Some(class) = storage.class(&name) else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        Some(mode) => Ok(mode == "WaitForFirstConsumer"),
        None => Err(format!(
            "VolumeBindingMode not set for StorageClass \"{name}\""
        )),
    }
}

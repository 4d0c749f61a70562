//! The binding vocabulary the binder shares with the scheduler and the external
//! provisioners (upstream `component-helpers/storage/volume`): the annotations and phases,
//! whether a volume is (pre-)bound to a claim, and the volumeMode, access-mode and size
//! comparisons.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::meta::ResourceNames;
use crate::volume_util::BETA_STORAGE_CLASS_ANNOTATION;
use rkcm_gocompat::quantity::{Format, Quantity};

/// On a claim: its binding went through the controller once (value irrelevant).
pub(super) const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a volume or claim: the controller (not the user) set the binding.
pub(super) const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a claim: the node the scheduler chose, which starts delayed provisioning.
pub(super) const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// On a volume: the plugin or provisioner that created it.
pub(super) const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// On a claim or volume: the CSI driver that stands in for an in-tree plugin.
pub(super) const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";
/// On a claim: who is to provision it (and the deprecated beta form, set too).
pub(super) const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub(super) const ANN_BETA_STORAGE_PROVISIONER: &str =
    "volume.beta.kubernetes.io/storage-provisioner";
/// On a volume: the size a claim had before an offline resize.
pub(super) const ANN_PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";
/// On a volume made by the host-path provisioner.
pub(super) const ANN_CREATED_BY: &str = "kubernetes.io/createdby";

pub(super) const VOLUME_AVAILABLE: &str = "Available";
pub(super) const VOLUME_BOUND: &str = "Bound";
pub(super) const VOLUME_RELEASED: &str = "Released";
pub(super) const VOLUME_FAILED: &str = "Failed";
pub(super) const CLAIM_PENDING: &str = "Pending";
pub(super) const CLAIM_BOUND: &str = "Bound";
pub(super) const CLAIM_LOST: &str = "Lost";

pub(super) const RECLAIM_RETAIN: &str = "Retain";
pub(super) const RECLAIM_DELETE: &str = "Delete";
pub(super) const RECLAIM_RECYCLE: &str = "Recycle";

pub(super) const FILESYSTEM: &str = "Filesystem";
pub(super) const STORAGE: &str = "storage";

pub(super) fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(key))
}

pub(super) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

pub(super) fn set_annotation(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_string(), value.to_string());
}

pub(super) fn uid(meta: &ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or_default()
}

/// `ns/name` of a claim.
pub(super) fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!("{}/{}", claim.namespace_str(), claim.name_str())
}

/// `ns/name` of the claim a volume's claimRef names, if it has one.
pub(super) fn claim_ref_key(volume: &PersistentVolume) -> Option<String> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(format!(
        "{}/{}",
        reference.namespace.as_deref().unwrap_or_default(),
        reference.name.as_deref().unwrap_or_default()
    ))
}

pub(super) fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

pub(super) fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// `spec.volumeName` of a claim, "" when unset.
pub(super) fn claim_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|spec| spec.volume_name.as_deref())
        .unwrap_or_default()
}

/// The claimRef's uid, "" when unset; `None` without a claimRef.
pub(super) fn claim_ref_uid(volume: &PersistentVolume) -> Option<&str> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(reference.uid.as_deref().unwrap_or_default())
}

pub(super) fn reclaim_policy(volume: &PersistentVolume) -> &str {
    volume
        .spec
        .as_ref()
        .and_then(|spec| spec.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or_default()
}

/// `PersistentVolumeClaimHasClass`: a class asked for, by field or beta annotation (even
/// "").
pub(super) fn claim_has_class(claim: &PersistentVolumeClaim) -> bool {
    claim
        .spec
        .as_ref()
        .is_some_and(|spec| spec.storage_class_name.is_some())
        || has_annotation(&claim.metadata, BETA_STORAGE_CLASS_ANNOTATION)
}

/// `IsVolumeBoundToClaim`: the volume's claimRef names the claim (and, when it has a uid,
/// the same uid).
pub(super) fn is_volume_bound_to_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> bool {
    let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if reference.name.as_deref().unwrap_or_default() != claim.name_str()
        || reference.namespace.as_deref().unwrap_or_default() != claim.namespace_str()
    {
        return false;
    }
    let reference_uid = reference.uid.as_deref().unwrap_or_default();
    reference_uid.is_empty() || reference_uid == uid(&claim.metadata)
}

/// `CheckVolumeModeMismatches`: an unset volumeMode is Filesystem on either side.
pub(super) fn volume_mode_mismatch(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
) -> bool {
    let requested = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or(FILESYSTEM);
    let offered = volume
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or(FILESYSTEM);
    requested != offered
}

/// `CheckAccessModes`: the volume has every mode the claim asks for.
pub(super) fn check_access_modes(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let offered = volume
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_ref())
        .cloned()
        .unwrap_or_default();
    claim_access_modes(claim)
        .iter()
        .all(|mode| offered.contains(mode))
}

pub(super) fn claim_access_modes(claim: &PersistentVolumeClaim) -> Vec<String> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.clone())
        .unwrap_or_default()
}

pub(super) fn volume_access_modes(volume: &PersistentVolume) -> Vec<String> {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.clone())
        .unwrap_or_default()
}

/// A storage quantity as the API wrote it; an absent or unreadable one counts as zero (the
/// API server validates them, so only an empty field gets here in practice).
fn storage_quantity(text: Option<&str>) -> Quantity {
    text.and_then(|text| Quantity::from_api(text).ok())
        .unwrap_or_else(|| Quantity::zero(Format::DecimalSI))
}

/// The storage a claim requests.
pub(super) fn requested_storage(claim: &PersistentVolumeClaim) -> Quantity {
    storage_quantity(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|requests| requests.get(STORAGE))
            .map(|q| q.0.as_str()),
    )
}

/// The storage a volume offers.
pub(super) fn volume_storage(volume: &PersistentVolume) -> Quantity {
    storage_quantity(volume_storage_text(volume))
}

pub(super) fn volume_storage_text(volume: &PersistentVolume) -> Option<&str> {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|capacity| capacity.get(STORAGE))
        .map(|q| q.0.as_str())
}

#[cfg(test)]
pub(super) mod fixtures {
    //! Claims and volumes for the table tests, from JSON fragments.
    use super::*;
    use serde_json::{json, Value};

    pub(in super::super) fn merge(base: &mut Value, overlay: Value) {
        match (base, overlay) {
            (Value::Object(base), Value::Object(overlay)) => {
                for (key, value) in overlay {
                    merge(base.entry(key).or_insert(Value::Null), value);
                }
            }
            (base, overlay) => *base = overlay,
        }
    }

    /// A volume `name` of `size`, RWO, class "", Available, Retain, with `overlay` merged.
    pub(in super::super) fn pv(name: &str, size: &str, overlay: Value) -> PersistentVolume {
        let mut value = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": format!("/tmp/{name}")},
                "volumeMode": "Filesystem",
            },
            "status": {"phase": "Available"},
        });
        merge(&mut value, overlay);
        serde_json::from_value(value).unwrap()
    }

    /// A claim `ns/name` for `size`, RWO, class "", with `overlay` merged.
    pub(in super::super) fn pvc(name: &str, size: &str, overlay: Value) -> PersistentVolumeClaim {
        let mut value = json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "1"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}},
                "storageClassName": "",
                "volumeMode": "Filesystem",
            },
            "status": {"phase": "Pending"},
        });
        merge(&mut value, overlay);
        serde_json::from_value(value).unwrap()
    }

    /// A claimRef overlay naming claim `ns/name` (uid "" for a pre-bound volume).
    pub(in super::super) fn claim_ref(name: &str, uid: &str) -> Value {
        json!({"spec": {"claimRef": {"kind": "PersistentVolumeClaim", "namespace": "ns", "name": name, "uid": uid}}})
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn bound_to_claim_by_name_and_uid_when_set() {
        let claim = pvc("c", "1Gi", json!({}));
        let cases = [
            (json!({}), false),
            (claim_ref("c", ""), true),
            (claim_ref("c", "uid-c"), true),
            (claim_ref("c", "other"), false),
            (claim_ref("d", "uid-c"), false),
        ];
        for (overlay, want) in cases {
            let volume = pv("v", "1Gi", overlay.clone());
            assert_eq!(is_volume_bound_to_claim(&volume, &claim), want, "{overlay}");
        }
    }

    #[test]
    fn modes_and_sizes() {
        let block = pvc("c", "1Gi", json!({"spec": {"volumeMode": "Block"}}));
        let unset = pvc("c", "1Gi", json!({"spec": {"volumeMode": null}}));
        let fs = pv("v", "1Gi", json!({}));
        assert!(volume_mode_mismatch(&block, &fs));
        assert!(!volume_mode_mismatch(&unset, &fs));
        let rwx = pvc(
            "c",
            "1Gi",
            json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
        );
        assert!(!check_access_modes(&rwx, &fs));
        assert!(check_access_modes(&unset, &fs));
        assert_eq!(
            requested_storage(&rwx).cmp_value(&volume_storage(&fs)),
            std::cmp::Ordering::Equal
        );
        assert!(claim_has_class(&rwx));
        assert!(!claim_has_class(&pvc(
            "c",
            "1Gi",
            json!({"spec": {"storageClassName": null}})
        )));
    }
}

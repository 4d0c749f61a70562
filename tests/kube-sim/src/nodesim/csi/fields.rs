//! What csi-sim reads off claims, volumes and classes: their class, the driver a claim is
//! handed to, the knobs, and sizes.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rkcm_gocompat::quantity::{Format, Quantity};

use super::{
    ANN_BETA_STORAGE_CLASS, ANN_BETA_STORAGE_PROVISIONER, ANN_STORAGE_PROVISIONER, DRIVERS,
};
use crate::nodesim::quantity;

pub(super) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
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
pub(super) fn duration_knob(
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

pub(super) fn storage_request(claim: &PersistentVolumeClaim) -> Option<&str> {
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

pub(super) fn status_capacity(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .status
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .map(|q| q.0.as_str())
}

pub(super) fn volume_capacity(volume: &PersistentVolume) -> Option<&str> {
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
pub(super) fn bytes_of(text: &str) -> Option<i128> {
    let milli = quantity::milli(text)?;
    Some((milli + 999).div_euclid(1000))
}

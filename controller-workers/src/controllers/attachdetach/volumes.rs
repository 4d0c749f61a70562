//! Which of a pod's volumes the controller attaches, and the names it gives them
//! (upstream `attachdetach/util.CreateVolumeSpec`, the CSI plugin's `CanAttach`,
//! `GetVolumeName` and `getAttachmentName`, and `util.IsMultiAttachAllowed`).
//!
//! Only the CSI plugin is ported: a volume is attachable when it is a PersistentVolume with
//! `spec.csi` whose driver has no CSIDriver object or one with `attachRequired` not false.
//! Inline `csi` volumes are never attached by the controller. The in-tree attachable
//! plugins KCM 1.29 still carries (fc, iscsi) only report their volumes in
//! `volumesAttached` and are left out; so is the translation of migrated in-tree volumes
//! (gce-pd, aws-ebs, ...) to CSI, which KCM does only for nodes whose CSINode lists the
//! plugin as migrated.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::CSIDriver;

use crate::meta::ResourceNames;
use crate::store::Store;
use crate::volume_util;

/// The CSI plugin's name (the prefix of its volumes' unique names).
pub(super) const CSI_PLUGIN: &str = "kubernetes.io/csi";
/// Separates a CSI volume's driver from its handle in its unique name.
const VOLUME_NAME_SEPARATOR: char = '^';

/// An attachable volume as the controller works with it (upstream's `volume.Spec` of a
/// CSI PersistentVolume).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct VolumeSpec {
    /// The PersistentVolume's name (`spec.Name()`, what events name).
    pub(super) name: String,
    pub(super) driver: String,
    pub(super) handle: String,
    /// `IsMultiAttachAllowed`: the volume's access modes include ReadWriteMany or
    /// ReadOnlyMany, or are empty.
    pub(super) multi_attach: bool,
}

impl VolumeSpec {
    /// `kubernetes.io/csi/<driver>^<volumeHandle>`.
    pub(super) fn unique_name(&self) -> String {
        unique_name(&self.driver, &self.handle)
    }

    /// `GetFullQualifiedPluginNameForVolume`: the plugin label of its metrics.
    pub(super) fn plugin_label(&self) -> String {
        format!("{CSI_PLUGIN}:{}", self.driver)
    }
}

/// A CSI volume's unique name.
pub(super) fn unique_name(driver: &str, handle: &str) -> String {
    format!("{CSI_PLUGIN}/{driver}{VOLUME_NAME_SEPARATOR}{handle}")
}

/// The driver and handle of a CSI unique name (what the detacher reads back).
pub(super) fn split_unique_name(unique: &str) -> Option<(&str, &str)> {
    let rest = unique.strip_prefix(CSI_PLUGIN)?.strip_prefix('/')?;
    let mut parts = rest.split(VOLUME_NAME_SEPARATOR);
    let (driver, handle) = (parts.next()?, parts.next()?);
    parts.next().is_none().then_some((driver, handle))
}

/// The VolumeAttachment's name: `csi-` and the hex SHA-256 of handle, driver and node.
pub(super) fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{handle}{driver}{node}").as_bytes(),
    );
    let hex: String = digest
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("csi-{hex}")
}

/// `IsMultiAttachAllowed` for a PersistentVolume's access modes.
pub(super) fn multi_attach_allowed(access_modes: &[String]) -> bool {
    access_modes.is_empty()
        || access_modes
            .iter()
            .any(|mode| mode == "ReadWriteMany" || mode == "ReadOnlyMany")
}

/// The CSI plugin's `skipAttach`: the driver's CSIDriver says `attachRequired: false`.
pub(super) fn skip_attach(drivers: &Store<CSIDriver>, driver: &str) -> bool {
    drivers
        .get(driver)
        .and_then(|d| d.spec.attach_required)
        .is_some_and(|required| !required)
}

/// The stores a volume spec is read from.
pub(super) struct Listers<'a> {
    pub(super) claims: &'a Store<PersistentVolumeClaim>,
    pub(super) volumes: &'a Store<PersistentVolume>,
    pub(super) drivers: &'a Store<CSIDriver>,
}

/// What one of a pod's volumes is to the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PodVolume {
    /// A CSI PersistentVolume; `attachable` unless its driver needs no attaching.
    Csi { spec: VolumeSpec, attachable: bool },
    /// An inline volume (or a volume of a plugin the controller has no attacher for); the
    /// plugin name when it is one of the attachable plugins' (for the in-use metric).
    Other(Option<String>),
}

impl PodVolume {
    pub(super) fn attachable(self) -> Option<VolumeSpec> {
        match self {
            PodVolume::Csi {
                spec,
                attachable: true,
            } => Some(spec),
            _ => None,
        }
    }
}

/// `CreateVolumeSpec`: resolves a pod volume through its claim (or the generic ephemeral
/// volume's claim) to the bound PersistentVolume; the error says why it cannot (a claim
/// missing or not bound, a volume not bound to that claim).
pub(super) fn resolve(
    pod: &Pod,
    volume: &Volume,
    listers: &Listers<'_>,
) -> Result<PodVolume, String> {
    let namespace = pod.namespace_str();
    let Some(claim_name) = volume_util::volume_claim_name(pod, volume) else {
        return Ok(PodVolume::Other(inline_plugin(volume)));
    };
    let claim = listers
        .claims
        .get_in(namespace, &claim_name)
        .ok_or_else(|| {
            format!("error processing PVC \"{namespace}\"/\"{claim_name}\": PVC {namespace}/{claim_name} not found")
        })?;
    if volume.ephemeral.is_some() {
        volume_util::ephemeral_claim_is_for_pod(pod, &claim)?;
    }
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Bound") || volume_name.is_empty() {
        return Err(format!(
            "error processing PVC \"{namespace}\"/\"{claim_name}\": PVC {namespace}/{claim_name} has non-bound phase ({:?}) or empty pvc.Spec.VolumeName ({volume_name:?})",
            phase.unwrap_or_default()
        ));
    }
    let pv = listers.volumes.get(&volume_name).ok_or_else(|| {
        format!("error processing PVC \"{namespace}\"/\"{claim_name}\": failed to find PV {volume_name:?} in PVInformer cache")
    })?;
    let claim_uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let bound_uid = pv
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .and_then(|r| r.uid.as_deref());
    if bound_uid != Some(claim_uid) {
        return Err(format!(
            "error processing PVC \"{namespace}\"/\"{claim_name}\": found PV object {volume_name:?} but its pv.Spec.ClaimRef does not point to claim.UID {claim_uid}"
        ));
    }
    Ok(volume_of(&pv, listers.drivers))
}

/// What a PersistentVolume is to the controller.
pub(super) fn volume_of(pv: &PersistentVolume, drivers: &Store<CSIDriver>) -> PodVolume {
    let spec = pv.spec.as_ref();
    let Some(csi) = spec.and_then(|s| s.csi.as_ref()) else {
        let plugin = spec.and_then(|s| {
            if s.fc.is_some() {
                Some("kubernetes.io/fc".to_string())
            } else if s.iscsi.is_some() {
                Some("kubernetes.io/iscsi".to_string())
            } else {
                None
            }
        });
        return PodVolume::Other(plugin);
    };
    let modes = spec
        .and_then(|s| s.access_modes.clone())
        .unwrap_or_default();
    let volume = VolumeSpec {
        name: pv.name_str().to_string(),
        driver: csi.driver.clone(),
        handle: csi.volume_handle.clone(),
        multi_attach: multi_attach_allowed(&modes),
    };
    PodVolume::Csi {
        attachable: !skip_attach(drivers, &volume.driver),
        spec: volume,
    }
}

/// The attachable plugin an inline volume belongs to, if any (for the in-use metric).
fn inline_plugin(volume: &Volume) -> Option<String> {
    if let Some(csi) = &volume.csi {
        Some(format!("{CSI_PLUGIN}:{}", csi.driver))
    } else if volume.fc.is_some() {
        Some("kubernetes.io/fc".to_string())
    } else if volume.iscsi.is_some() {
        Some("kubernetes.io/iscsi".to_string())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn attachment_names_are_upstreams() {
        // printf '%s' "handle-1""csi.sim.rkcm.io""sim-node-0" | sha256sum
        assert_eq!(
            attachment_name("handle-1", "csi.sim.rkcm.io", "sim-node-0"),
            "csi-4305ec740a435b890502dfd778ce10fe9fde26cea484d8618af38214fd6d4fb7"
        );
    }

    #[test]
    fn unique_names_round_trip() {
        let name = unique_name("csi.sim.rkcm.io", "h-1");
        assert_eq!(name, "kubernetes.io/csi/csi.sim.rkcm.io^h-1");
        assert_eq!(split_unique_name(&name), Some(("csi.sim.rkcm.io", "h-1")));
        for bad in [
            "kubernetes.io/csi/nohandle",
            "other/x^y",
            "kubernetes.io/csi/a^b^c",
        ] {
            assert_eq!(split_unique_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn multi_attach_needs_a_shared_mode_or_none() {
        let cases: [(&[&str], bool); 5] = [
            (&[], true),
            (&["ReadWriteOnce"], false),
            (&["ReadWriteOncePod"], false),
            (&["ReadWriteOnce", "ReadOnlyMany"], true),
            (&["ReadWriteMany"], true),
        ];
        for (modes, want) in cases {
            let modes: Vec<String> = modes.iter().map(|m| m.to_string()).collect();
            assert_eq!(multi_attach_allowed(&modes), want, "{modes:?}");
        }
    }

    fn object<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> Arc<K> {
        Arc::new(serde_json::from_value(value).unwrap())
    }

    #[test]
    fn pod_volumes_resolve_through_bound_claims() {
        let claims = Store::<PersistentVolumeClaim>::new();
        let volumes = Store::<PersistentVolume>::new();
        let drivers = Store::<CSIDriver>::new();
        let claim = |name: &str, uid: &str, volume: &str, phase: &str| {
            object::<PersistentVolumeClaim>(
                json!({"metadata": {"name": name, "namespace": "ns", "uid": uid},
                "spec": {"volumeName": volume}, "status": {"phase": phase}}),
            )
        };
        let pv = |name: &str, driver: &str, claim_uid: &str, modes: serde_json::Value| {
            object::<PersistentVolume>(json!({"metadata": {"name": name},
                "spec": {"accessModes": modes, "csi": {"driver": driver, "volumeHandle": format!("h-{name}")},
                         "claimRef": {"namespace": "ns", "name": "c", "uid": claim_uid}}}))
        };
        claims.apply("ns/bound".into(), claim("bound", "u1", "pv1", "Bound"));
        claims.apply("ns/pending".into(), claim("pending", "u2", "", "Pending"));
        claims.apply("ns/stolen".into(), claim("stolen", "u3", "pv3", "Bound"));
        claims.apply(
            "ns/noattach".into(),
            claim("noattach", "u4", "pv4", "Bound"),
        );
        volumes.apply("pv1".into(), pv("pv1", "d", "u1", json!(["ReadWriteOnce"])));
        volumes.apply(
            "pv3".into(),
            pv("pv3", "d", "other", json!(["ReadWriteOnce"])),
        );
        volumes.apply(
            "pv4".into(),
            pv("pv4", "na", "u4", json!(["ReadWriteMany"])),
        );
        drivers.apply(
            "na".into(),
            object(json!({"metadata": {"name": "na"}, "spec": {"attachRequired": false}})),
        );
        let listers = Listers {
            claims: &claims,
            volumes: &volumes,
            drivers: &drivers,
        };
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "pu"},
            "spec": {"containers": [], "volumes": [
                {"name": "a", "persistentVolumeClaim": {"claimName": "bound"}},
                {"name": "b", "persistentVolumeClaim": {"claimName": "pending"}},
                {"name": "c", "persistentVolumeClaim": {"claimName": "stolen"}},
                {"name": "d", "persistentVolumeClaim": {"claimName": "noattach"}},
                {"name": "e", "persistentVolumeClaim": {"claimName": "missing"}},
                {"name": "f", "csi": {"driver": "inline.csi"}},
                {"name": "g", "emptyDir": {}}]}}),
        )
        .unwrap();
        let got: Vec<Result<PodVolume, String>> = pod
            .spec
            .as_ref()
            .unwrap()
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| resolve(&pod, v, &listers))
            .collect();
        assert_eq!(
            got[0],
            Ok(PodVolume::Csi {
                spec: VolumeSpec {
                    name: "pv1".into(),
                    driver: "d".into(),
                    handle: "h-pv1".into(),
                    multi_attach: false
                },
                attachable: true
            })
        );
        assert!(got[1].as_ref().unwrap_err().contains("non-bound phase"));
        assert!(got[2]
            .as_ref()
            .unwrap_err()
            .contains("does not point to claim"));
        assert!(
            matches!(&got[3], Ok(PodVolume::Csi { attachable: false, spec }) if spec.multi_attach)
        );
        assert!(got[4].as_ref().unwrap_err().contains("not found"));
        assert_eq!(
            got[5],
            Ok(PodVolume::Other(Some(
                "kubernetes.io/csi:inline.csi".into()
            )))
        );
        assert_eq!(got[6], Ok(PodVolume::Other(None)));
    }
}

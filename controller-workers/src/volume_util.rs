//! What the storage controllers share (upstream `pkg/controller/volume/common`,
//! `protectionutil`, `pkg/volume/util` and `component-helpers/storage`): the pod-to-claim
//! index, when a pod counts as terminated, generic ephemeral claim names and ownership,
//! the protection finalizers, a claim's or volume's class, the default class, and the
//! in-tree plugin to CSI driver names of CSI migration.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ContainerStatus, PersistentVolume, PersistentVolumeClaim, Pod, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::meta::ResourceNames;
use crate::store::Store;

/// The pod index by the claims its volumes use (`common.PodPVCIndex`): `ns/claim`.
pub const PVC_INDEX: &str = "pod-pvc-index";
/// `v1.BetaStorageClassAnnotation`: read before `spec.storageClassName`.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// `storageutil.IsDefaultStorageClassAnnotation` and its beta form.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
pub const BETA_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// The claim a pod volume uses, if any: its `persistentVolumeClaim.claimName`, or the
/// generated claim of a generic ephemeral volume.
pub fn volume_claim_name(pod: &Pod, volume: &Volume) -> Option<String> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some(source.claim_name.clone()).filter(|name| !name.is_empty());
    }
    volume
        .ephemeral
        .as_ref()
        .map(|_| ephemeral_claim_name(pod, volume))
}

/// `ephemeral.VolumeClaimName`: `<pod>-<volume>`.
pub fn ephemeral_claim_name(pod: &Pod, volume: &Volume) -> String {
    format!("{}-{}", pod.name_str(), volume.name)
}

/// `ephemeral.VolumeIsForPod`: the claim of a generic ephemeral volume may be used by the
/// pod only if the pod created it (same namespace, the pod its controller); the error is
/// upstream's sentence, complete enough for an event.
pub fn ephemeral_claim_is_for_pod(pod: &Pod, claim: &PersistentVolumeClaim) -> Result<(), String> {
    let pod_namespace = pod.namespace_str();
    let claim_namespace = claim.namespace_str();
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let controlled = crate::store::controller_uid(&claim.metadata) == Some(pod_uid);
    if claim_namespace != pod_namespace || !controlled {
        return Err(format!(
            "PVC {claim_namespace}/{} was not created for pod {pod_namespace}/{} (pod is not owner)",
            claim.name_str(),
            pod.name_str(),
        ));
    }
    Ok(())
}

/// `common.PodPVCIndexFunc`: `ns/claim` for every claim the pod's volumes use.
pub fn pod_pvc_keys(pod: &Pod) -> Vec<String> {
    let namespace = pod.namespace_str();
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter_map(|volume| volume_claim_name(pod, volume))
        .map(|claim| format!("{namespace}/{claim}"))
        .collect()
}

/// Adds [`PVC_INDEX`] to a pod store (a no-op when another controller of the worker has).
pub fn add_pvc_index(pods: &Store<Pod>) {
    pods.add_index(PVC_INDEX, Arc::new(|pod: &Pod| pod_pvc_keys(pod)));
}

/// `volumeutil.PVCProtectionFinalizer`: held on a claim while a pod may use it.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
/// `volumeutil.PVProtectionFinalizer`: held on a volume while a claim is bound to it.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

/// `protectionutil.IsDeletionCandidate`: being deleted and still holding `finalizer`.
pub fn is_deletion_candidate(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, finalizer)
}

/// `protectionutil.NeedToAddFinalizer`: not being deleted and lacking `finalizer`.
pub fn need_to_add_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_none() && !has_finalizer(meta, finalizer)
}

/// `util.IsPodTerminated`: Failed or Succeeded, or being deleted with no container
/// (init, regular or ephemeral) still running.
pub fn is_pod_terminated(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or_default();
    if phase == "Failed" || phase == "Succeeded" {
        return true;
    }
    if pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let not_running = |statuses: Option<&Vec<ContainerStatus>>| {
        statuses.into_iter().flatten().all(|status| {
            status
                .state
                .as_ref()
                .is_some_and(|state| state.terminated.is_some() || state.waiting.is_some())
        })
    };
    status.is_none_or(|s| {
        not_running(s.init_container_statuses.as_ref())
            && not_running(s.container_statuses.as_ref())
            && not_running(s.ephemeral_container_statuses.as_ref())
    })
}

/// `storagehelpers.GetPersistentVolumeClaimClass`: the beta annotation first, then
/// `spec.storageClassName`, else "".
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    if let Some(class) = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return class.clone();
    }
    claim
        .spec
        .as_ref()
        .and_then(|spec| spec.storage_class_name.clone())
        .unwrap_or_default()
}

/// `storagehelpers.GetPersistentVolumeClass`: the beta annotation first, then
/// `spec.storageClassName`, else "".
pub fn volume_class(volume: &PersistentVolume) -> String {
    if let Some(class) = volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return class.clone();
    }
    volume
        .spec
        .as_ref()
        .and_then(|spec| spec.storage_class_name.clone())
        .unwrap_or_default()
}

/// Whether a class is marked default (`storageutil.IsDefaultAnnotation`: either
/// annotation equal to "true").
pub fn is_default_class(class: &StorageClass) -> bool {
    class.metadata.annotations.as_ref().is_some_and(|a| {
        a.get(DEFAULT_CLASS_ANNOTATION).map(String::as_str) == Some("true")
            || a.get(BETA_DEFAULT_CLASS_ANNOTATION).map(String::as_str) == Some("true")
    })
}

/// `util.GetDefaultClass`: of the classes marked default, the newest; ties by name
/// ascending. `None` when no class is default.
pub fn default_class<'a>(
    classes: impl IntoIterator<Item = &'a StorageClass>,
) -> Option<&'a StorageClass> {
    let mut defaults: Vec<&StorageClass> = classes
        .into_iter()
        .filter(|class| is_default_class(class))
        .collect();
    defaults.sort_by(|a, b| {
        let created = |c: &StorageClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(b)
            .cmp(&created(a))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    defaults.into_iter().next()
}

/// CSI migration's in-tree plugin to CSI driver names (csi-translation-lib), with whether
/// migration is on for the plugin in 1.29 (portworx and rbd are off by default).
pub const IN_TREE_TO_CSI: &[(&str, &str, bool)] = &[
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io", true),
    ("kubernetes.io/aws-ebs", "ebs.csi.aws.com", true),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com", true),
    ("kubernetes.io/azure-file", "file.csi.azure.com", true),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org", true),
    (
        "kubernetes.io/vsphere-volume",
        "csi.vsphere.vmware.com",
        true,
    ),
    ("kubernetes.io/portworx-volume", "pxd.portworx.com", false),
    ("kubernetes.io/rbd", "rbd.csi.ceph.com", false),
];

/// The CSI driver an in-tree plugin name migrates to, when its migration is on.
pub fn migrated_driver(plugin: &str) -> Option<&'static str> {
    IN_TREE_TO_CSI
        .iter()
        .find(|(name, _, on)| *name == plugin && *on)
        .map(|(_, driver, _)| *driver)
}

/// The in-tree plugin of a PersistentVolume, from its source field (the ones CSI
/// migration knows).
pub fn in_tree_plugin(volume: &PersistentVolume) -> Option<&'static str> {
    let spec = volume.spec.as_ref()?;
    if spec.gce_persistent_disk.is_some() {
        Some("kubernetes.io/gce-pd")
    } else if spec.aws_elastic_block_store.is_some() {
        Some("kubernetes.io/aws-ebs")
    } else if spec.azure_disk.is_some() {
        Some("kubernetes.io/azure-disk")
    } else if spec.azure_file.is_some() {
        Some("kubernetes.io/azure-file")
    } else if spec.cinder.is_some() {
        Some("kubernetes.io/cinder")
    } else if spec.vsphere_volume.is_some() {
        Some("kubernetes.io/vsphere-volume")
    } else if spec.portworx_volume.is_some() {
        Some("kubernetes.io/portworx-volume")
    } else if spec.rbd.is_some() {
        Some("kubernetes.io/rbd")
    } else {
        None
    }
}

/// The buckets of upstream's volume operation histograms (`storage_operation_duration_seconds`,
/// `volume_operation_total_seconds`).
pub(crate) fn operation_histogram() -> prometheus_client::metrics::histogram::Histogram {
    prometheus_client::metrics::histogram::Histogram::new([
        0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn index_keys_name_claims_and_ephemeral_claims() {
        let pod = pod(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "c1"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "cfg", "configMap": {"name": "x"}},
            ]},
        }));
        assert_eq!(pod_pvc_keys(&pod), vec!["ns/c1", "ns/p-scratch"]);
    }

    #[test]
    fn terminated_pods() {
        let cases = [
            (json!({"phase": "Failed"}), false, true),
            (json!({"phase": "Succeeded"}), false, true),
            (json!({"phase": "Running"}), false, false),
            (json!({"phase": "Running"}), true, true),
            (
                json!({"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]}),
                true,
                false,
            ),
            (
                json!({"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}]}),
                true,
                true,
            ),
        ];
        for (status, deleting, want) in cases {
            let mut metadata = json!({"name": "p", "namespace": "ns"});
            if deleting {
                metadata["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
            }
            let pod = pod(json!({"metadata": metadata, "status": status}));
            assert_eq!(
                is_pod_terminated(&pod),
                want,
                "{status} deleting={deleting}"
            );
        }
    }

    #[test]
    fn the_newest_default_class_wins_then_the_first_name() {
        let class = |name: &str, created: &str, default: bool| -> StorageClass {
            let mut annotations = serde_json::Map::new();
            if default {
                annotations.insert(DEFAULT_CLASS_ANNOTATION.into(), json!("true"));
            }
            serde_json::from_value(json!({
                "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
                "provisioner": "p",
            }))
            .unwrap()
        };
        let classes = [
            class("old", "2024-01-01T00:00:00Z", true),
            class("b", "2024-02-01T00:00:00Z", true),
            class("a", "2024-02-01T00:00:00Z", true),
            class("newest", "2024-03-01T00:00:00Z", false),
        ];
        assert_eq!(
            default_class(&classes).and_then(|c| c.metadata.name.as_deref()),
            Some("a")
        );
        assert!(default_class(&classes[3..]).is_none());
    }

    #[test]
    fn an_ephemeral_claim_is_the_pods_only_if_the_pod_controls_it() {
        let pod = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}));
        let claim = |namespace: &str, owner: serde_json::Value| -> PersistentVolumeClaim {
            serde_json::from_value(json!({
                "metadata": {"name": "p-scratch", "namespace": namespace, "ownerReferences": owner},
            }))
            .unwrap()
        };
        let owner = |uid: &str, controller: bool| json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid, "controller": controller}]);
        assert_eq!(
            ephemeral_claim_is_for_pod(&pod, &claim("ns", owner("u1", true))),
            Ok(())
        );
        let refused =
            Err("PVC ns/p-scratch was not created for pod ns/p (pod is not owner)".into());
        assert_eq!(
            ephemeral_claim_is_for_pod(&pod, &claim("ns", owner("u1", false))),
            refused
        );
        assert_eq!(
            ephemeral_claim_is_for_pod(&pod, &claim("ns", owner("u2", true))),
            refused
        );
        assert_eq!(
            ephemeral_claim_is_for_pod(&pod, &claim("ns", json!([]))),
            refused
        );
        assert_eq!(
            ephemeral_claim_is_for_pod(&pod, &claim("other", owner("u1", true))),
            Err("PVC other/p-scratch was not created for pod ns/p (pod is not owner)".into())
        );
    }

    #[test]
    fn class_annotation_comes_first() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "c", "annotations": {BETA_STORAGE_CLASS_ANNOTATION: "beta"}},
            "spec": {"storageClassName": "spec"},
        }))
        .unwrap();
        assert_eq!(claim_class(&claim), "beta");
    }
}

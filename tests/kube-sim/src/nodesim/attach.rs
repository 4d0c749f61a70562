//! The kubelet's side of controller-managed attaching: nodes are registered with
//! `volumes.kubernetes.io/controller-managed-attach-detach: "true"`, so the attach/detach
//! controller (not the kubelet) attaches their volumes. The kubelet then
//!
//! - reports in `status.volumesInUse` the attachable volumes of its non-terminated pods
//!   (kubelet's volume manager reports a volume in use before it waits for it, and drops
//!   it once its pods stopped), a merge patch of that field alone, frozen on a killed or
//!   partitioned node;
//! - keeps a pod's containers from starting until each of its attachable volumes is
//!   both reported in use and listed in `status.volumesAttached`.
//!
//! A volume is attachable when it is a PersistentVolume with `spec.csi` whose driver has
//! no CSIDriver or one that does not say `attachRequired: false` (the CSI plugin's rule);
//! its unique name is `kubernetes.io/csi/<driver>^<volumeHandle>`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSIDriver;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::ResourceExt;
use serde_json::json;

use super::Shared;

/// The node annotation that hands attaching to the attach/detach controller.
pub const ANN_CONTROLLER_MANAGED: &str = "volumes.kubernetes.io/controller-managed-attach-detach";
/// How often the nodes' `volumesInUse` is brought up to date.
const IN_USE_PERIOD: Duration = Duration::from_secs(1);

/// A CSI volume's unique name.
pub fn unique_name(driver: &str, handle: &str) -> String {
    format!("kubernetes.io/csi/{driver}^{handle}")
}

/// The unique name of a volume the controller attaches, given its driver's CSIDriver.
pub fn attachable_name(volume: &PersistentVolume, driver: Option<&CSIDriver>) -> Option<String> {
    let csi = volume.spec.as_ref()?.csi.as_ref()?;
    let skip = driver
        .and_then(|d| d.spec.attach_required)
        .is_some_and(|required| !required);
    (!skip).then(|| unique_name(&csi.driver, &csi.volume_handle))
}

/// The unique names of the pod's attachable volumes whose claims are bound to them.
pub async fn attachable_volumes(
    client: &kube::Client,
    pod: &Pod,
) -> Result<Vec<String>, kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let drivers: Api<CSIDriver> = Api::all(client.clone());
    let mut names = Vec::new();
    for (claim_name, _) in super::volume_binding::pod_claims(pod) {
        let Some(claim) = claims.get_opt(&claim_name).await? else {
            continue;
        };
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone());
        let (true, Some(volume_name)) = (bound, volume_name) else {
            continue;
        };
        let Some(volume) = volumes.get_opt(&volume_name).await? else {
            continue;
        };
        let Some(csi) = volume.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
            continue;
        };
        let driver = drivers.get_opt(&csi.driver).await?;
        if let Some(name) = attachable_name(&volume, driver.as_ref()) {
            names.push(name);
        }
    }
    Ok(names)
}

/// Why the pod's attachable volumes keep its containers from starting, if they do:
/// each must be reported in use and attached by the node's status.
pub fn attach_problem(node: &Node, pod: &Pod, wanted: &[String]) -> Option<String> {
    let status = node.status.as_ref();
    let in_use = status.and_then(|s| s.volumes_in_use.as_ref());
    let attached = status.and_then(|s| s.volumes_attached.as_ref());
    for name in wanted {
        let reported = in_use.is_some_and(|list| list.contains(name));
        let is_attached = attached.is_some_and(|list| list.iter().any(|v| &v.name == name));
        if !reported || !is_attached {
            return Some(format!(
                "operationExecutor.VerifyControllerAttachedVolume failed for volume (UniqueName: {name:?}) pod {:?} (UID: {:?}) : Volume not attached according to node status",
                pod.name_any(),
                pod.metadata.uid.as_deref().unwrap_or_default()
            ));
        }
    }
    None
}

/// The first reason the pod's volumes are not attached yet (a live read of the node).
pub async fn first_attach_problem(
    client: &kube::Client,
    pod: &Pod,
    node: &str,
) -> Result<Option<String>, kube::Error> {
    let wanted = attachable_volumes(client, pod).await?;
    if wanted.is_empty() {
        return Ok(None);
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(node).await?;
    Ok(attach_problem(&node, pod, &wanted))
}

fn terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// The patch that sets the node's volumes in use (`null` clears them).
pub fn in_use_patch(names: &BTreeSet<String>) -> serde_json::Value {
    if names.is_empty() {
        json!({"status": {"volumesInUse": null}})
    } else {
        json!({"status": {"volumesInUse": names}})
    }
}

async fn node_in_use(
    shared: &Shared,
    pods: &Store<Pod>,
    node: &str,
) -> Result<BTreeSet<String>, kube::Error> {
    let mut names = BTreeSet::new();
    for pod in pods.state() {
        let on_node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
        if !on_node || terminated(&pod) || super::volume_binding::pod_claims(&pod).is_empty() {
            continue;
        }
        names.extend(attachable_volumes(&shared.client, &pod).await?);
    }
    Ok(names)
}

/// Keeps every node's `status.volumesInUse` equal to its pods' attachable volumes.
pub async fn run(shared: Arc<Shared>, pods: Store<Pod>) {
    let api: Api<Node> = Api::all(shared.client.clone());
    let mut written: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut tick = tokio::time::interval(IN_USE_PERIOD);
    loop {
        tick.tick().await;
        if !shared.synced() {
            continue;
        }
        let mut nodes: Vec<&String> = shared.index.keys().collect();
        nodes.sort();
        for node in nodes {
            let faults = shared.faults(node);
            if faults.killed || faults.partitioned {
                continue;
            }
            let names = match node_in_use(&shared, &pods, node).await {
                Ok(names) => names,
                Err(error) => {
                    tracing::debug!(node = %node, %error, "cannot read the volumes of the node's pods");
                    continue;
                }
            };
            if written.get(node.as_str()) == Some(&names) {
                continue;
            }
            let current: BTreeSet<String> = match api.get_opt(node).await {
                Ok(Some(n)) => n
                    .status
                    .and_then(|s| s.volumes_in_use)
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
                Ok(None) => continue,
                Err(error) => {
                    tracing::debug!(node = %node, %error, "cannot read node");
                    continue;
                }
            };
            if current != names {
                let patch = in_use_patch(&names);
                if let Err(error) = api
                    .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::debug!(node = %node, %error, "cannot update volumesInUse");
                    continue;
                }
            }
            written.insert(node.clone(), names);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(driver: &str) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "pv"},
            "spec": {"csi": {"driver": driver, "volumeHandle": "h"}}}))
        .unwrap()
    }

    fn driver(attach: Option<bool>) -> CSIDriver {
        serde_json::from_value(
            json!({"metadata": {"name": "d"}, "spec": {"attachRequired": attach}}),
        )
        .unwrap()
    }

    #[test]
    fn csi_volumes_are_attachable_unless_their_driver_says_not() {
        assert_eq!(
            attachable_name(&volume("d"), None).as_deref(),
            Some("kubernetes.io/csi/d^h")
        );
        assert!(attachable_name(&volume("d"), Some(&driver(Some(true)))).is_some());
        assert!(attachable_name(&volume("d"), Some(&driver(None))).is_some());
        assert!(attachable_name(&volume("d"), Some(&driver(Some(false)))).is_none());
        let nfs: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pv"},
            "spec": {"nfs": {"server": "s", "path": "/"}}}))
        .unwrap();
        assert!(attachable_name(&nfs, None).is_none());
    }

    #[test]
    fn a_pod_waits_until_its_volumes_are_in_use_and_attached() {
        let pod = Pod::default();
        let wanted = vec!["kubernetes.io/csi/d^h".to_string()];
        let node = |status: serde_json::Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n"}, "status": status})).unwrap()
        };
        let attached = json!([{"name": "kubernetes.io/csi/d^h", "devicePath": ""}]);
        assert!(attach_problem(&node(json!({})), &pod, &wanted).is_some());
        assert!(attach_problem(
            &node(json!({"volumesInUse": ["kubernetes.io/csi/d^h"]})),
            &pod,
            &wanted
        )
        .is_some());
        assert!(
            attach_problem(&node(json!({"volumesAttached": attached})), &pod, &wanted).is_some()
        );
        assert!(attach_problem(
            &node(json!({"volumesInUse": ["kubernetes.io/csi/d^h"], "volumesAttached": attached})),
            &pod,
            &wanted
        )
        .is_none());
        assert!(attach_problem(&node(json!({})), &pod, &[]).is_none());
    }

    #[test]
    fn in_use_patches_set_or_clear_the_list() {
        let names: BTreeSet<String> = ["b".to_string(), "a".to_string()].into();
        assert_eq!(
            in_use_patch(&names),
            json!({"status": {"volumesInUse": ["a", "b"]}})
        );
        assert_eq!(
            in_use_patch(&BTreeSet::new()),
            json!({"status": {"volumesInUse": null}})
        );
    }
}

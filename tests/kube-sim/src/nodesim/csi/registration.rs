//! The drivers' registration, as their deployment and the node plugins make it: a CSIDriver
//! object per driver and, on each of node-sim's nodes, the CSINode kubelet writes.

use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

use super::{Csi, ANN_MIGRATED_PLUGINS, DRIVERS, MIGRATED_PLUGINS, ZONE_LABEL};

/// The CSIDriver object of one of the drivers.
pub fn csi_driver_object(name: &str, attach_required: bool) -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"attachRequired": attach_required, "volumeLifecycleModes": ["Persistent"]},
    })
}

/// The CSINode kubelet registers for `node` once both drivers' node plugins are up.
pub fn csi_node_object(node: &str, node_uid: &str) -> Value {
    let drivers: Vec<Value> = DRIVERS
        .iter()
        .map(|(name, _)| json!({"name": name, "nodeID": node, "topologyKeys": [ZONE_LABEL]}))
        .collect();
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {
            "name": node,
            "annotations": {ANN_MIGRATED_PLUGINS: MIGRATED_PLUGINS},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}],
        },
        "spec": {"drivers": drivers},
    })
}

impl Csi {
    pub(super) async fn ensure_drivers(&self) -> Result<(), String> {
        let api: Api<CSIDriver> = Api::all(self.shared.client.clone());
        for (name, attach) in DRIVERS {
            let driver: CSIDriver = serde_json::from_value(csi_driver_object(name, attach))
                .map_err(|e| e.to_string())?;
            match api.create(&PostParams::default(), &driver).await {
                Ok(_) => {}
                // Another node-sim (or the administrator) registered it already.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(format!("creating CSIDriver {name}: {e}")),
            }
        }
        self.state().drivers_created = true;
        Ok(())
    }

    pub(super) async fn ensure_csi_node(&self, node: &str, uid: &str) -> Result<(), String> {
        let api: Api<CSINode> = Api::all(self.shared.client.clone());
        let wanted: CSINode =
            serde_json::from_value(csi_node_object(node, uid)).map_err(|e| e.to_string())?;
        match api.get_opt(node).await.map_err(|e| e.to_string())? {
            None => match api.create(&PostParams::default(), &wanted).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    return Err(format!("CSINode {node} appeared meanwhile"))
                }
                Err(e) => return Err(format!("creating CSINode {node}: {e}")),
            },
            // A CSINode of an earlier Node of that name (a node-sim restarted onto a
            // re-created Node): kubelet takes it over.
            Some(current) => {
                let owned = current
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.uid == uid);
                if !owned || current.spec.drivers.is_empty() {
                    let mut next = wanted;
                    next.metadata.resource_version = current.metadata.resource_version;
                    api.replace(node, &PostParams::default(), &next)
                        .await
                        .map_err(|e| format!("updating CSINode {node}: {e}"))?;
                }
            }
        }
        self.state().csinodes.insert(uid.to_string());
        Ok(())
    }
}

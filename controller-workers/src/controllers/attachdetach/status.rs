//! The node status updater (upstream `attachdetach/statusupdater`): writes a node's
//! `status.volumesAttached` from the actual state's report list, by a strategic-merge
//! patch of `nodes/<name>/status` (the list is atomic, so the patch replaces it whole).

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

use crate::api_errors;
use crate::locks::lock;

use super::Controller;

/// The patch that sets the node's attached volumes (`null` clears the list, as the
/// two-way merge of a list that became empty does).
pub(super) fn volumes_attached_patch(volumes: &[(String, String)]) -> Value {
    if volumes.is_empty() {
        return json!({"status": {"volumesAttached": null}});
    }
    let list: Vec<Value> = volumes
        .iter()
        .map(|(name, path)| json!({"name": name, "devicePath": path}))
        .collect();
    json!({"status": {"volumesAttached": list}})
}

impl Controller {
    /// `UpdateNodeStatusForNode`: patches the node if its report changed; on failure the
    /// node is marked to be patched again.
    pub(super) async fn update_node_status(&self, node: &str) -> Result<(), String> {
        let Some(volumes) = lock(&self.actual).take_node_update(node) else {
            return Ok(());
        };
        if self.nodes.get(node).is_none() {
            // Upstream skips a node its cache does not have (it may be gone).
            tracing::debug!(
                controller = super::NAME,
                node,
                "could not update node status: node not in the informer's cache"
            );
            return Ok(());
        }
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = volumes_attached_patch(&volumes);
        match api
            .patch_status(node, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                tracing::debug!(controller = super::NAME, node, volumes = ?volumes, "updated node status volumesAttached");
                Ok(())
            }
            Err(error) => {
                lock(&self.actual).set_node_status_update_needed(node);
                Err(format!(
                    "failed to patch status of node {node:?}: {}",
                    api_errors::message(&error)
                ))
            }
        }
    }

    /// `UpdateNodeStatuses`: every node whose report changed.
    pub(super) async fn update_node_statuses(&self) {
        let nodes = lock(&self.actual).nodes_needing_update();
        for node in nodes {
            if let Err(error) = self.update_node_status(&node).await {
                tracing::info!(controller = super::NAME, node = %node, %error, "UpdateNodeStatuses failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_replace_or_clear_the_list() {
        assert_eq!(
            volumes_attached_patch(&[("kubernetes.io/csi/d^h".into(), String::new())]),
            json!({"status": {"volumesAttached": [{"name": "kubernetes.io/csi/d^h", "devicePath": ""}]}})
        );
        assert_eq!(
            volumes_attached_patch(&[]),
            json!({"status": {"volumesAttached": null}})
        );
    }
}

//! cloud-node-lifecycle-controller: Nodes whose cloud instance is gone are deleted, and
//! Nodes whose instance is shut down are tainted (upstream
//! `staging/src/k8s.io/cloud-provider/controllers/nodelifecycle/node_lifecycle_controller.go`),
//! through the [`InstancesV2`](crate::cloud::InstancesV2) capability of the cloud provider.
//!
//! Every `--node-monitor-period` (5 s, the flag it shares with node-lifecycle-controller)
//! one pass over the Nodes: a Ready one loses the taint
//! `node.cloudprovider.kubernetes.io/shutdown:NoSchedule`; for any other one the cloud is
//! asked whether its instance exists (no: Normal event `DeletingNode` and the Node is
//! deleted) and else whether it is shut down (yes: the taint is added). It uses
//! node-lifecycle-controller's identity (`node-controller`), as KCM does.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Taint};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use tracing::{error, info};

use crate::cloud::{self, CloudProvider};
use crate::controller::{ControllerContext, Runnable};
use crate::generic_options::GenericOptions;
use crate::meta::ResourceNames;
use crate::recorder::{Recorder, NORMAL};
use crate::store::Store;

pub const NAME: &str = "cloud-node-lifecycle-controller";
/// The resources its informers read.
pub const RESOURCES: &[&str] = &["v1/nodes"];
/// `cloudproviderapi.TaintNodeShutdown`.
pub const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
const DELETE_NODE_EVENT: &str = "DeletingNode";

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    cloud: Arc<dyn CloudProvider>,
    nodes: Store<Node>,
}

pub fn build(
    context: &ControllerContext,
    node_monitor_period: Duration,
    generic: &GenericOptions,
) -> anyhow::Result<Vec<Runnable>> {
    let reason = match cloud::provider(generic)? {
        None => Err("no cloud provider provided"),
        Some(cloud) if cloud.instances_v2().is_none() => {
            Err("cloud provider does not support instances")
        }
        Some(cloud) => Ok(cloud),
    };
    let cloud = match reason {
        Ok(cloud) => cloud,
        Err(reason) => {
            error!(
                error = reason,
                "Failed to start cloud node lifecycle controller"
            );
            return Ok(vec![]);
        }
    };
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), NAME);
    let nodes = context.informers.get::<Node>();
    let controller = Arc::new(Controller {
        client,
        recorder,
        cloud,
        nodes: nodes.store().clone(),
    });
    Ok(vec![Runnable::periodic(
        NAME,
        node_monitor_period,
        controller,
        |controller| async move { controller.monitor_nodes().await },
    )])
}

/// What a pass does to one node.
#[derive(Debug, PartialEq)]
enum Step {
    /// Ready: the shutdown taint goes (if there).
    Untaint,
    /// Not ready: ask the cloud.
    AskCloud,
}

fn step_for(node: &Node) -> Step {
    let ready = node
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if ready {
        Step::Untaint
    } else {
        Step::AskCloud
    }
}

fn shutdown_taint() -> Taint {
    Taint {
        key: SHUTDOWN_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

fn has_shutdown_taint(node: &Node) -> bool {
    taints(node)
        .iter()
        .any(|t| t.key == SHUTDOWN_TAINT && t.effect == "NoSchedule")
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.clone())
        .unwrap_or_default()
}

/// The node's taints with the shutdown taint added or removed; `None` when nothing changes.
fn tainted(node: &Node, add: bool) -> Option<Vec<Taint>> {
    if has_shutdown_taint(node) == add {
        return None;
    }
    let mut list = taints(node);
    if add {
        list.retain(|t| !(t.key == SHUTDOWN_TAINT && t.effect == "NoSchedule"));
        list.push(shutdown_taint());
    } else {
        list.retain(|t| !(t.key == SHUTDOWN_TAINT && t.effect == "NoSchedule"));
    }
    Some(list)
}

impl Controller {
    async fn monitor_nodes(&self) {
        let Some(instances) = self.cloud.instances_v2() else {
            return;
        };
        for node in self.nodes.list() {
            let name = node.name_str().to_string();
            if step_for(&node) == Step::Untaint {
                if let Err(e) = self.set_shutdown_taint(&node, false).await {
                    error!(controller = NAME, node = %name, "error patching node taints: {e}");
                }
                continue;
            }
            let exists = match cloud::call(instances.instance_exists(&node)).await {
                Ok(exists) => exists,
                Err(e) => {
                    error!(
                        controller = NAME,
                        "error checking if node {name} exists: {e}"
                    );
                    continue;
                }
            };
            if !exists {
                info!(
                    controller = NAME,
                    "deleting node since it is no longer present in cloud provider: {name}"
                );
                self.recorder.event_for(
                    ObjectReference {
                        kind: Some("Node".into()),
                        name: Some(name.clone()),
                        uid: node.metadata.uid.clone(),
                        ..Default::default()
                    },
                    NORMAL,
                    DELETE_NODE_EVENT,
                    format!("Deleting node {name} because it does not exist in the cloud provider"),
                );
                let api: Api<Node> = Api::all(self.client.clone());
                if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
                    error!(controller = NAME, "unable to delete node {name:?}: {e}");
                }
                continue;
            }
            match cloud::call(instances.instance_shutdown(&node)).await {
                Ok(true) => {
                    if let Err(e) = self.set_shutdown_taint(&node, true).await {
                        error!(controller = NAME, "failed to apply shutdown taint to node {name}, it may have been deleted: {e}");
                    }
                }
                Ok(false) => {}
                Err(e) => error!(
                    controller = NAME,
                    "error checking if node {name} is shutdown: {e}"
                ),
            }
        }
    }

    /// Adds or removes the shutdown taint by a patch of the whole taint list guarded by
    /// the resourceVersion it was computed from; a conflict reads the node again.
    async fn set_shutdown_taint(&self, node: &Node, add: bool) -> anyhow::Result<()> {
        let name = node.name_str().to_string();
        let api: Api<Node> = Api::all(self.client.clone());
        let mut current = node.clone();
        for attempt in 0..5 {
            let Some(list) = tainted(&current, add) else {
                return Ok(());
            };
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"taints": list},
            });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if crate::api_errors::is_not_found(&e) => return Ok(()),
                Err(e) if crate::api_errors::is_conflict(&e) && attempt < 4 => {
                    match api.get_opt(&name).await? {
                        Some(fresh) => current = fresh,
                        None => return Ok(()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        anyhow::bail!("node {name} kept changing")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn ready_nodes_are_untainted_and_others_asked_about() {
        let ready = node(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
        let unknown =
            node(json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}));
        assert_eq!(step_for(&ready), Step::Untaint);
        assert_eq!(step_for(&unknown), Step::AskCloud);
        assert_eq!(step_for(&node(json!({}))), Step::AskCloud);
    }

    #[test]
    fn the_shutdown_taint_is_added_once_and_removed_alone() {
        let other = json!({"key": "a", "effect": "NoExecute"});
        let plain = node(json!({"spec": {"taints": [other]}}));
        let added = tainted(&plain, true).unwrap();
        assert_eq!(added.len(), 2);
        assert_eq!(added[1].key, SHUTDOWN_TAINT);
        assert_eq!(tainted(&plain, false), None);
        let with = node(
            json!({"spec": {"taints": [other, {"key": SHUTDOWN_TAINT, "effect": "NoSchedule"}]}}),
        );
        assert_eq!(tainted(&with, true), None);
        let removed = tainted(&with, false).unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].key, "a");
    }
}

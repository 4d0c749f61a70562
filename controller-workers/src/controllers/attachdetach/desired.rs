//! The desired state of the world (upstream `attachdetach/cache/desired_state_of_world.go`):
//! the nodes the controller manages (those annotated
//! `volumes.kubernetes.io/controller-managed-attach-detach`), and on each the attachable
//! volumes its scheduled pods use, with those pods. Filled by the pod, node and claim
//! handlers and the populator; read by the reconciler, which attaches what is here and
//! detaches what is attached but not here.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::volumes::VolumeSpec;

#[derive(Default)]
struct NodeEntry {
    keep_terminated_pod_volumes: bool,
    /// By unique volume name.
    volumes: BTreeMap<String, VolumeEntry>,
}

struct VolumeEntry {
    spec: VolumeSpec,
    multi_attach_error_reported: bool,
    /// By pod uid.
    pods: BTreeMap<String, Arc<Pod>>,
}

/// A volume to attach to a node, as the reconciler reads it.
#[derive(Clone, Debug)]
pub(super) struct VolumeToAttach {
    pub(super) unique_name: String,
    pub(super) spec: VolumeSpec,
    pub(super) node: String,
    pub(super) scheduled_pods: Vec<Arc<Pod>>,
    pub(super) multi_attach_error_reported: bool,
}

/// One pod's use of one volume on one node (what the populator checks is still wanted).
#[derive(Clone, Debug)]
pub(super) struct PodToAdd {
    pub(super) pod_uid: String,
    pub(super) pod: Arc<Pod>,
    pub(super) unique_name: String,
    pub(super) node: String,
}

#[derive(Default)]
pub(super) struct DesiredState {
    nodes: BTreeMap<String, NodeEntry>,
}

impl DesiredState {
    /// Manages the node (keeping its volumes when it is already managed).
    pub(super) fn add_node(&mut self, node: &str, keep_terminated_pod_volumes: bool) {
        self.nodes
            .entry(node.to_string())
            .or_default()
            .keep_terminated_pod_volumes = keep_terminated_pod_volumes;
    }

    /// Stops managing the node; refused while volumes are still wanted on it.
    pub(super) fn delete_node(&mut self, node: &str) -> Result<(), String> {
        match self.nodes.get(node) {
            None => Ok(()),
            Some(entry) if entry.volumes.is_empty() => {
                self.nodes.remove(node);
                Ok(())
            }
            Some(_) => Err(format!(
                "failed to delete node {node:?} from list of nodes managed by attach/detach controller--the node still contains volumes in its list of volumes to attach"
            )),
        }
    }

    pub(super) fn node_exists(&self, node: &str) -> bool {
        self.nodes.contains_key(node)
    }

    pub(super) fn keep_terminated_pod_volumes(&self, node: &str) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|n| n.keep_terminated_pod_volumes)
    }

    /// Adds the pod's use of the volume on a managed node.
    pub(super) fn add_pod(
        &mut self,
        pod_uid: &str,
        pod: Arc<Pod>,
        spec: &VolumeSpec,
        node: &str,
    ) -> Result<String, String> {
        let Some(entry) = self.nodes.get_mut(node) else {
            return Err(format!(
                "no node with the name {node:?} exists in the list of managed nodes"
            ));
        };
        let unique_name = spec.unique_name();
        let volume = entry
            .volumes
            .entry(unique_name.clone())
            .or_insert_with(|| VolumeEntry {
                spec: spec.clone(),
                multi_attach_error_reported: false,
                pods: BTreeMap::new(),
            });
        volume.spec = spec.clone();
        volume.pods.insert(pod_uid.to_string(), pod);
        Ok(unique_name)
    }

    /// Removes the pod's use of the volume; the volume goes with its last pod.
    pub(super) fn delete_pod(&mut self, pod_uid: &str, unique_name: &str, node: &str) {
        let Some(entry) = self.nodes.get_mut(node) else {
            return;
        };
        let Some(volume) = entry.volumes.get_mut(unique_name) else {
            return;
        };
        volume.pods.remove(pod_uid);
        if volume.pods.is_empty() {
            entry.volumes.remove(unique_name);
        }
    }

    pub(super) fn volume_exists(&self, unique_name: &str, node: &str) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|n| n.volumes.contains_key(unique_name))
    }

    pub(super) fn set_multi_attach_error_reported(&mut self, unique_name: &str, node: &str) {
        if let Some(volume) = self
            .nodes
            .get_mut(node)
            .and_then(|n| n.volumes.get_mut(unique_name))
        {
            volume.multi_attach_error_reported = true;
        }
    }

    pub(super) fn volumes_to_attach(&self) -> Vec<VolumeToAttach> {
        let mut out = Vec::new();
        for (node, entry) in &self.nodes {
            for (unique_name, volume) in &entry.volumes {
                out.push(VolumeToAttach {
                    unique_name: unique_name.clone(),
                    spec: volume.spec.clone(),
                    node: node.clone(),
                    scheduled_pods: volume.pods.values().cloned().collect(),
                    multi_attach_error_reported: volume.multi_attach_error_reported,
                });
            }
        }
        out
    }

    pub(super) fn pods_to_add(&self) -> Vec<PodToAdd> {
        let mut out = Vec::new();
        for (node, entry) in &self.nodes {
            for (unique_name, volume) in &entry.volumes {
                for (uid, pod) in &volume.pods {
                    out.push(PodToAdd {
                        pod_uid: uid.clone(),
                        pod: pod.clone(),
                        unique_name: unique_name.clone(),
                        node: node.clone(),
                    });
                }
            }
        }
        out
    }

    /// The pods on these nodes that use the volume (for the Multi-Attach error).
    pub(super) fn volume_pods_on_nodes(
        &self,
        nodes: &[String],
        unique_name: &str,
    ) -> Vec<Arc<Pod>> {
        nodes
            .iter()
            .filter_map(|node| self.nodes.get(node)?.volumes.get(unique_name))
            .flat_map(|volume| volume.pods.values().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(handle: &str) -> VolumeSpec {
        VolumeSpec {
            name: format!("pv-{handle}"),
            driver: "d".into(),
            handle: handle.into(),
            multi_attach: false,
        }
    }

    #[test]
    fn volumes_live_as_long_as_their_pods_on_managed_nodes() {
        let mut dsw = DesiredState::default();
        let pod = Arc::new(Pod::default());
        assert!(dsw.add_pod("p1", pod.clone(), &spec("a"), "n1").is_err());
        dsw.add_node("n1", false);
        let name = dsw.add_pod("p1", pod.clone(), &spec("a"), "n1").unwrap();
        dsw.add_pod("p2", pod.clone(), &spec("a"), "n1").unwrap();
        assert!(dsw.volume_exists(&name, "n1"));
        assert_eq!(dsw.volumes_to_attach()[0].scheduled_pods.len(), 2);
        assert!(dsw.delete_node("n1").is_err());
        dsw.delete_pod("p1", &name, "n1");
        assert!(dsw.volume_exists(&name, "n1"));
        dsw.delete_pod("p2", &name, "n1");
        assert!(!dsw.volume_exists(&name, "n1"));
        assert!(dsw.delete_node("n1").is_ok());
        assert!(!dsw.node_exists("n1"));
    }

    #[test]
    fn the_multi_attach_error_is_remembered_per_volume_and_node() {
        let mut dsw = DesiredState::default();
        dsw.add_node("n1", true);
        let name = dsw
            .add_pod("p1", Arc::new(Pod::default()), &spec("a"), "n1")
            .unwrap();
        assert!(dsw.keep_terminated_pod_volumes("n1"));
        assert!(!dsw.volumes_to_attach()[0].multi_attach_error_reported);
        dsw.set_multi_attach_error_reported(&name, "n1");
        assert!(dsw.volumes_to_attach()[0].multi_attach_error_reported);
        assert_eq!(
            dsw.volume_pods_on_nodes(&["n1".into(), "n2".into()], &name)
                .len(),
            1
        );
    }
}

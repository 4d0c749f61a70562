//! After PreBind's writes: whether every binding of the pod is complete (`checkBindings`).

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::{is_fully_bound, volume_fits_node, StorageLookup};
use crate::nodesim::csi::ANN_SELECTED_NODE;

/// One binding the scheduler made, with the resourceVersion its write returned (the store
/// may still show an older object).
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// `ns/name` of the claim.
    pub claim: String,
    /// The volume bound statically (`None` for a claim to provision).
    pub volume: Option<String>,
    pub resource_version: String,
}

/// How binding a pod's volumes stands.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    Bound,
    Waiting,
    /// Scheduling starts over (the provisioner gave up, the binding was undone).
    Failed(String),
}

/// Is the store's object at least as new as what was written?
fn caught_up(stored: Option<&str>, written: &str) -> bool {
    match (
        stored.and_then(|s| s.parse::<u64>().ok()),
        written.parse::<u64>().ok(),
    ) {
        (Some(stored), Some(written)) => stored >= written,
        _ => true,
    }
}

/// `checkBindings`: whether every binding of the pod on `node` is complete.
pub fn check_bindings(node: &Node, written: &[Written], storage: &dyn StorageLookup) -> Progress {
    let node_name = node.name_any();
    let mut waiting = false;
    for w in written {
        let (namespace, name) = w.claim.split_once('/').unwrap_or(("", &w.claim));
        let Some(claim) = storage.claim(namespace, name) else {
            return Progress::Failed(format!(
                "failed to check binding: persistentvolumeclaim \"{name}\" not found"
            ));
        };
        match &w.volume {
            Some(volume_name) => {
                let Some(volume) = storage.volume(volume_name) else {
                    return Progress::Failed(format!(
                        "failed to check binding: persistentvolume \"{volume_name}\" not found"
                    ));
                };
                if !caught_up(
                    volume.metadata.resource_version.as_deref(),
                    &w.resource_version,
                ) {
                    waiting = true;
                    continue;
                }
                if !volume_fits_node(&volume, node) {
                    return Progress::Failed(format!("pv \"{volume_name}\" node affinity doesn't match node \"{node_name}\": no matching NodeSelectorTerms"));
                }
                let reset = volume
                    .spec
                    .as_ref()
                    .and_then(|s| s.claim_ref.as_ref())
                    .is_none_or(|r| r.uid.as_deref().is_none_or(str::is_empty));
                if reset {
                    return Progress::Failed(format!(
                        "ClaimRef got reset for pv \"{volume_name}\""
                    ));
                }
            }
            None => {
                if !caught_up(
                    claim.metadata.resource_version.as_deref(),
                    &w.resource_version,
                ) {
                    waiting = true;
                    continue;
                }
                let selected = claim
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANN_SELECTED_NODE));
                if selected != Some(&node_name) {
                    return Progress::Failed(format!("provisioning failed for PVC \"{name}\""));
                }
                let volume_name = claim
                    .spec
                    .as_ref()
                    .and_then(|s| s.volume_name.clone())
                    .unwrap_or_default();
                if !volume_name.is_empty() {
                    match storage.volume(&volume_name) {
                        None => {
                            waiting = true;
                            continue;
                        }
                        Some(volume) if !volume_fits_node(&volume, node) => {
                            return Progress::Failed(format!("pv \"{volume_name}\" node affinity doesn't match node \"{node_name}\": no matching NodeSelectorTerms"));
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        if !is_fully_bound(&claim) {
            waiting = true;
        }
    }
    if waiting {
        Progress::Waiting
    } else {
        Progress::Bound
    }
}

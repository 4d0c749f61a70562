//! Filter, per node: whether the pod's claims can be bound there, and what that takes.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use kube::ResourceExt;

use super::matching::{claim_request, topology_allows};
use super::{
    find_matching_volume, volume_fits_node, PodClaims, StorageLookup, NOT_SUPPORTED_PROVISIONER,
    REASON_BIND_CONFLICT, REASON_NODE_CONFLICT, REASON_PV_NOT_EXIST,
};
use crate::nodesim::csi::{self, ANN_SELECTED_NODE};

/// What binding the pod's volumes on a node takes.
#[derive(Clone, Debug, Default)]
pub struct PodVolumes {
    /// Volumes to bind to claims (`PUT pv`).
    pub static_bindings: Vec<(Arc<PersistentVolume>, Arc<PersistentVolumeClaim>)>,
    /// Claims to provision on the node (`PUT pvc` with the selected node).
    pub provisions: Vec<Arc<PersistentVolumeClaim>>,
}

impl PodVolumes {
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.provisions.is_empty()
    }
}

/// Filter for one node: what binding its volumes there would take, or why it cannot
/// (kube-scheduler's reasons, in its order). `excluded` are volumes promised to other
/// pods' claims already.
pub fn filter(
    claims: &PodClaims,
    node: &Node,
    storage: &dyn StorageLookup,
    excluded: &HashSet<String>,
) -> Result<PodVolumes, Vec<String>> {
    let mut bound_ok = true;
    let mut unbound_ok = true;
    let mut bound_found = true;
    let mut volumes = PodVolumes::default();
    for claim in &claims.bound {
        let name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        match storage.volume(&name) {
            None => {
                bound_found = false;
                break;
            }
            Some(volume) if !volume_fits_node(&volume, node) => {
                bound_ok = false;
                break;
            }
            Some(_) => {}
        }
    }
    if !claims.delayed.is_empty() {
        unbound_ok = unbound_fit(claims, node, storage, excluded, &mut volumes)?;
    }
    let mut reasons = Vec::new();
    if !bound_ok {
        reasons.push(REASON_NODE_CONFLICT.to_string());
    }
    if !unbound_ok {
        reasons.push(REASON_BIND_CONFLICT.to_string());
    }
    if !bound_found {
        reasons.push(REASON_PV_NOT_EXIST.to_string());
    }
    if reasons.is_empty() {
        Ok(volumes)
    } else {
        Err(reasons)
    }
}

/// The unbound WaitForFirstConsumer claims on `node`: matched volumes, else provisioning.
fn unbound_fit(
    claims: &PodClaims,
    node: &Node,
    storage: &dyn StorageLookup,
    excluded: &HashSet<String>,
    volumes: &mut PodVolumes,
) -> Result<bool, Vec<String>> {
    let node_name = node.name_any();
    let mut to_match = Vec::new();
    let mut to_provision = Vec::new();
    for claim in &claims.delayed {
        match claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_SELECTED_NODE))
        {
            Some(selected) if *selected != node_name => return Ok(false),
            Some(_) => to_provision.push(claim.clone()),
            None => to_match.push(claim.clone()),
        }
    }
    // Smallest requests first, so each takes the smallest volume that fits.
    to_match.sort_by_key(|c| claim_request(c));
    let mut chosen = excluded.clone();
    for claim in to_match {
        let candidates = storage.volumes_of_class(&csi::claim_class(&claim));
        match find_matching_volume(&claim, &candidates, node, &chosen) {
            Some(volume) => {
                chosen.insert(volume.name_any());
                volumes.static_bindings.push((volume, claim));
            }
            None => to_provision.push(claim),
        }
    }
    for claim in to_provision {
        let class_name = csi::claim_class(&claim);
        let key = format!(
            "{}/{}",
            claim.namespace().unwrap_or_default(),
            claim.name_any()
        );
        if class_name.is_empty() {
            return Err(vec![format!("no class for claim \"{key}\"")]);
        }
        let Some(class) = storage.class(&class_name) else {
            return Err(vec![format!(
                "failed to find storage class \"{class_name}\""
            )]);
        };
        if class.provisioner.is_empty()
            || class.provisioner == NOT_SUPPORTED_PROVISIONER
            || !topology_allows(&class, node)
        {
            return Ok(false);
        }
        volumes.provisions.push(claim);
    }
    Ok(true)
}

//! Volumes against nodes and claims: node affinity, label selectors, sizes, and
//! `FindMatchingVolume`.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;

use crate::nodesim::{csi, quantity, scheduler};

/// `CheckNodeAffinity`: a volume's required node affinity against the node's labels.
pub fn volume_fits_node(volume: &PersistentVolume, node: &Node) -> bool {
    let Some(required) = volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    // Only the labels count, as upstream builds a node of the labels alone.
    let labels_only = Node {
        metadata: ObjectMeta {
            labels: node.metadata.labels.clone(),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    required
        .node_selector_terms
        .iter()
        .any(|t| scheduler::term_matches(t, &labels_only))
}

/// A label selector against labels (matchLabels and matchExpressions).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or(&[]);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    by_labels && by_expressions
}

fn storage_milli(map: Option<&BTreeMap<String, Quantity>>) -> i128 {
    map.and_then(|m| m.get("storage"))
        .and_then(|q| quantity::milli(&q.0))
        .unwrap_or(0)
}

pub(super) fn claim_request(claim: &PersistentVolumeClaim) -> i128 {
    storage_milli(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
    )
}

fn volume_size(volume: &PersistentVolume) -> i128 {
    storage_milli(volume.spec.as_ref().and_then(|s| s.capacity.as_ref()))
}

/// `IsVolumeBoundToClaim`: claimRef names the claim (and its uid, when it has one).
pub fn is_volume_bound_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if r.name.as_deref() != claim.metadata.name.as_deref()
        || r.namespace.as_deref() != claim.metadata.namespace.as_deref()
    {
        return false;
    }
    r.uid.as_deref().is_none_or(str::is_empty) || r.uid == claim.metadata.uid
}

/// `FindMatchingVolume` on the scheduler's path: the smallest Available volume of the
/// claim's class that fits it and the node, or the one pre-bound to it.
pub fn find_matching_volume(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    node: &Node,
    excluded: &HashSet<String>,
) -> Option<Arc<PersistentVolume>> {
    let requested = claim_request(claim);
    let class = csi::claim_class(claim);
    let spec = claim.spec.clone().unwrap_or_default();
    let claim_mode = spec.volume_mode.as_deref().unwrap_or("Filesystem");
    let mut best: Option<(i128, Arc<PersistentVolume>)> = None;
    for volume in volumes {
        if excluded.contains(&volume.name_any()) {
            continue;
        }
        let vspec = volume.spec.clone().unwrap_or_default();
        if vspec.claim_ref.is_some() && !is_volume_bound_to_claim(volume, claim) {
            continue;
        }
        let size = volume_size(volume);
        if size < requested
            || vspec.volume_mode.as_deref().unwrap_or("Filesystem") != claim_mode
            || volume.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let affinity_ok = volume_fits_node(volume, node);
        if is_volume_bound_to_claim(volume, claim) {
            return affinity_ok.then(|| volume.clone());
        }
        let available =
            volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available");
        let empty = BTreeMap::new();
        let selected = spec
            .selector
            .as_ref()
            .is_none_or(|s| selector_matches(s, volume.metadata.labels.as_ref().unwrap_or(&empty)));
        let modes: HashSet<&String> = vspec.access_modes.iter().flatten().collect();
        let modes_ok = spec
            .access_modes
            .iter()
            .flatten()
            .all(|m| modes.contains(m));
        if !available
            || !selected
            || csi::volume_class(volume) != class
            || !affinity_ok
            || !modes_ok
        {
            continue;
        }
        if best.as_ref().is_none_or(|(b, _)| size < *b) {
            best = Some((size, volume.clone()));
        }
    }
    best.map(|(_, v)| v)
}

/// `MatchTopologySelectorTerms`: no terms allow every node.
pub(super) fn topology_allows(class: &StorageClass, node: &Node) -> bool {
    let terms = class.allowed_topologies.as_deref().unwrap_or(&[]);
    if terms.is_empty() {
        return true;
    }
    let labels = node.labels();
    terms.iter().any(|term| {
        term.match_label_expressions.iter().flatten().all(|e| {
            labels
                .get(&e.key)
                .is_some_and(|v| e.values.iter().any(|x| x == v))
        })
    })
}

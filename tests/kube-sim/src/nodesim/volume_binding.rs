//! The scheduler's VolumeBinding plugin (kube-scheduler's `volumebinding`), the part that
//! matters to the storage controllers, with kube-scheduler's messages:
//!
//! - [`pre_filter`]: every claim a pod's volumes use must exist, not be lost or being
//!   deleted, and (for a generic ephemeral volume) be owned by the pod; claims not yet
//!   bound must be WaitForFirstConsumer ones (`pod has unbound immediate
//!   PersistentVolumeClaims`).
//! - [`filter`], per node: the volumes of bound claims must allow the node (`node(s) had
//!   volume node affinity conflict`); each WaitForFirstConsumer claim needs an Available
//!   volume that fits it and the node, or a class that can provision there (`node(s) didn't
//!   find available persistent volumes to bind`).
//! - Binding (in the scheduler's loop): a matched volume gets the claim as its claimRef and
//!   `pv.kubernetes.io/bound-by-controller: "yes"` (`PUT pv`), a claim to provision gets
//!   `volume.kubernetes.io/selected-node` (`PUT pvc`); the pod is bound once
//!   [`check_bindings`] says every claim is fully bound (the binder's
//!   `pv.kubernetes.io/bind-completed`), or scheduled again if provisioning gave up.
//!
//! Everything here is pure over a [`StorageLookup`].

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;

use super::csi::{self, StorageStores, ANN_SELECTED_NODE};
use super::quantity;

pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// A class with this provisioner cannot provision.
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";

pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// What the plugin reads.
pub trait StorageLookup {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>>;
    fn class(&self, name: &str) -> Option<Arc<StorageClass>>;
    /// The volumes of a class (`""` for the volumes without one).
    fn volumes_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>>;
}

impl StorageLookup for StorageStores {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        StorageStores::claim(self, namespace, name)
    }
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        StorageStores::volume(self, name)
    }
    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        StorageStores::class(self, name)
    }
    fn volumes_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        self.volumes
            .state()
            .into_iter()
            .filter(|v| csi::volume_class(v) == class)
            .collect()
    }
}

/// The claim a pod volume uses, and whether it is a generic ephemeral volume's.
fn claim_of(pod: &Pod, volume: &Volume) -> Option<(String, bool)> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some((source.claim_name.clone(), false));
    }
    volume
        .ephemeral
        .as_ref()
        .map(|_| (format!("{}-{}", pod.name_any(), volume.name), true))
}

/// The claims of a pod's volumes, in order, with whether each is an ephemeral volume's.
pub fn pod_claims(pod: &Pod) -> Vec<(String, bool)> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| claim_of(pod, v))
        .collect()
}

/// `ephemeral.VolumeIsForPod`: the claim of a generic ephemeral volume must be controlled
/// by the pod.
pub fn ephemeral_owner_error(pod: &Pod, claim: &PersistentVolumeClaim) -> Option<String> {
    let owned = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && Some(&r.uid) == pod.metadata.uid.as_ref());
    (!owned).then(|| {
        format!(
            "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
            claim.namespace().unwrap_or_default(),
            claim.name_any(),
            pod.namespace().unwrap_or_default(),
            pod.name_any()
        )
    })
}

fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// `isPVCFullyBound`: a volume name and the binder's bind-completed annotation.
pub fn is_fully_bound(claim: &PersistentVolumeClaim) -> bool {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty())
        && has_annotation(&claim.metadata, ANN_BIND_COMPLETED)
}

/// A pod's claims, split as the plugin keeps them.
#[derive(Clone, Debug, Default)]
pub struct PodClaims {
    pub bound: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims of WaitForFirstConsumer classes.
    pub delayed: Vec<Arc<PersistentVolumeClaim>>,
}

/// PreFilter: `Ok(None)` for a pod without claims; `Err` with the message that makes the
/// pod unschedulable on every node.
pub fn pre_filter(pod: &Pod, storage: &dyn StorageLookup) -> Result<Option<PodClaims>, String> {
    let namespace = pod.namespace().unwrap_or_default();
    let wanted = pod_claims(pod);
    if wanted.is_empty() {
        return Ok(None);
    }
    let mut claims = Vec::new();
    for (name, ephemeral) in &wanted {
        let Some(claim) = storage.claim(&namespace, name) else {
            return Err(if *ephemeral {
                format!("waiting for ephemeral volume controller to create the persistentvolumeclaim \"{name}\"")
            } else {
                format!("persistentvolumeclaim \"{name}\" not found")
            });
        };
        if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            let volume = claim
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .unwrap_or_default();
            return Err(format!(
                "persistentvolumeclaim \"{name}\" bound to non-existent persistentvolume \"{volume}\""
            ));
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        if *ephemeral {
            if let Some(error) = ephemeral_owner_error(pod, &claim) {
                return Err(error);
            }
        }
        claims.push(claim);
    }
    let mut split = PodClaims::default();
    let mut immediate = false;
    for claim in claims {
        if is_fully_bound(&claim) {
            split.bound.push(claim);
            continue;
        }
        let unnamed = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .is_none_or(str::is_empty);
        if is_delay_binding(&claim, storage)? && unnamed {
            split.delayed.push(claim);
        } else {
            // Immediate claims (and claims pre-bound to a volume) are the binder's.
            immediate = true;
        }
    }
    if immediate {
        return Err(UNBOUND_IMMEDIATE.into());
    }
    Ok(Some(split))
}

/// `IsDelayBindingMode`: the claim's class exists and is WaitForFirstConsumer.
fn is_delay_binding(
    claim: &PersistentVolumeClaim,
    storage: &dyn StorageLookup,
) -> Result<bool, String> {
    let name = csi::claim_class(claim);
    if name.is_empty() {
        return Ok(false);
    }
    let Some(class) = storage.class(&name) else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        Some(mode) => Ok(mode == "WaitForFirstConsumer"),
        None => Err(format!(
            "VolumeBindingMode not set for StorageClass \"{name}\""
        )),
    }
}

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
        .any(|t| super::scheduler::term_matches(t, &labels_only))
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

fn storage_milli(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> i128 {
    map.and_then(|m| m.get("storage"))
        .and_then(|q| quantity::milli(&q.0))
        .unwrap_or(0)
}

fn claim_request(claim: &PersistentVolumeClaim) -> i128 {
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
fn topology_allows(class: &StorageClass, node: &Node) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::collections::HashMap;

    #[derive(Default)]
    struct Fake {
        claims: HashMap<String, Arc<PersistentVolumeClaim>>,
        volumes: HashMap<String, Arc<PersistentVolume>>,
        classes: HashMap<String, Arc<StorageClass>>,
    }

    impl StorageLookup for Fake {
        fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
            self.claims.get(&format!("{namespace}/{name}")).cloned()
        }
        fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
            self.volumes.get(name).cloned()
        }
        fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
            self.classes.get(name).cloned()
        }
        fn volumes_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
            self.volumes
                .values()
                .filter(|v| csi::volume_class(v) == class)
                .cloned()
                .collect()
        }
    }

    impl Fake {
        fn with_claim(mut self, name: &str, extra: Value) -> Self {
            let mut c = json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "5"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                "status": {"phase": "Pending"}});
            json_patch::merge(&mut c, &extra);
            self.claims.insert(
                format!("ns/{name}"),
                Arc::new(serde_json::from_value(c).unwrap()),
            );
            self
        }
        fn with_volume(mut self, name: &str, extra: Value) -> Self {
            let mut v = json!({"metadata": {"name": name, "resourceVersion": "5"},
                "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}},
                "status": {"phase": "Available"}});
            json_patch::merge(&mut v, &extra);
            self.volumes
                .insert(name.into(), Arc::new(serde_json::from_value(v).unwrap()));
            self
        }
        fn with_class(mut self, name: &str, mode: &str, provisioner: &str) -> Self {
            let c = json!({"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode});
            self.classes
                .insert(name.into(), Arc::new(serde_json::from_value(c).unwrap()));
            self
        }
    }

    fn pod(volumes: Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": volumes}}),
        )
        .unwrap()
    }

    fn node(name: &str, zone: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, csi::ZONE_LABEL: zone}}}))
        .unwrap()
    }

    fn claim_volume(claim: &str) -> Value {
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])
    }

    fn bound(volume: &str) -> Value {
        json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": volume}, "status": {"phase": "Bound"}})
    }

    #[test]
    fn pre_filter_messages() {
        let fake = Fake::default()
            .with_class("wait", "WaitForFirstConsumer", csi::DRIVER)
            .with_class("now", "Immediate", csi::DRIVER)
            .with_claim(
                "deleting",
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
            )
            .with_claim(
                "lost",
                json!({"spec": {"volumeName": "gone"}, "status": {"phase": "Lost"}}),
            )
            .with_claim("immediate", json!({"spec": {"storageClassName": "now"}}))
            .with_claim("noclass", json!({"spec": {"storageClassName": ""}}))
            .with_claim("delayed", json!({"spec": {"storageClassName": "wait"}}))
            .with_claim("p-scratch", json!({}));
        let cases = [
            ("missing", "persistentvolumeclaim \"missing\" not found"),
            (
                "deleting",
                "persistentvolumeclaim \"deleting\" is being deleted",
            ),
            (
                "lost",
                "persistentvolumeclaim \"lost\" bound to non-existent persistentvolume \"gone\"",
            ),
            ("immediate", UNBOUND_IMMEDIATE),
            ("noclass", UNBOUND_IMMEDIATE),
        ];
        for (claim, message) in cases {
            assert_eq!(
                pre_filter(&pod(claim_volume(claim)), &fake).unwrap_err(),
                message
            );
        }
        let split = pre_filter(&pod(claim_volume("delayed")), &fake)
            .unwrap()
            .unwrap();
        assert_eq!((split.bound.len(), split.delayed.len()), (0, 1));
        assert!(
            pre_filter(&pod(json!([{"name": "e", "emptyDir": {}}])), &fake)
                .unwrap()
                .is_none()
        );
        let ephemeral =
            json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
        assert_eq!(
            pre_filter(&pod(ephemeral.clone()), &fake).unwrap_err(),
            "PVC ns/p-scratch was not created for pod ns/p (pod is not owner)"
        );
        let unmade = json!([{"name": "other", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
        assert_eq!(
            pre_filter(&pod(unmade), &fake).unwrap_err(),
            "waiting for ephemeral volume controller to create the persistentvolumeclaim \"p-other\""
        );
        let owned = Fake::default().with_claim(
            "p-scratch",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true}]}}),
        );
        assert_eq!(
            pre_filter(&pod(ephemeral), &owned).unwrap_err(),
            UNBOUND_IMMEDIATE,
            "owned, but not bound and of no class"
        );
    }

    #[test]
    fn bound_volumes_must_allow_the_node() {
        let affinity = json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}}});
        let fake = Fake::default()
            .with_claim("c", bound("local"))
            .with_volume("local", affinity)
            .with_claim("orphan", bound("nothing"));
        let claims = pre_filter(&pod(claim_volume("c")), &fake).unwrap().unwrap();
        let none = HashSet::new();
        assert!(filter(&claims, &node("n2", "a"), &fake, &none).is_ok());
        assert_eq!(
            filter(&claims, &node("n1", "a"), &fake, &none).unwrap_err(),
            vec![REASON_NODE_CONFLICT]
        );
        let claims = pre_filter(&pod(claim_volume("orphan")), &fake)
            .unwrap()
            .unwrap();
        assert_eq!(
            filter(&claims, &node("n1", "a"), &fake, &none).unwrap_err(),
            vec![REASON_PV_NOT_EXIST]
        );
    }

    #[test]
    fn delayed_claims_match_the_smallest_fitting_volume_or_provision() {
        let fake = Fake::default()
            .with_class("local", "WaitForFirstConsumer", NOT_SUPPORTED_PROVISIONER)
            .with_class("standard", "WaitForFirstConsumer", csi::DRIVER)
            .with_claim("c", json!({"spec": {"storageClassName": "local"}}))
            .with_volume(
                "big",
                json!({"spec": {"storageClassName": "local", "capacity": {"storage": "10Gi"}}}),
            )
            .with_volume(
                "small",
                json!({"spec": {"storageClassName": "local", "capacity": {"storage": "2Gi"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": csi::ZONE_LABEL, "operator": "In", "values": ["b"]}]}]}}}}),
            )
            .with_volume(
                "tiny",
                json!({"spec": {"storageClassName": "local", "capacity": {"storage": "1Mi"}}}),
            )
            .with_volume(
                "taken",
                json!({"spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"},
                "claimRef": {"namespace": "ns", "name": "other"}}}),
            )
            .with_claim("d", json!({"spec": {"storageClassName": "standard"}}));
        let claims = pre_filter(&pod(claim_volume("c")), &fake).unwrap().unwrap();
        let none = HashSet::new();
        let on_b = filter(&claims, &node("n1", "b"), &fake, &none).unwrap();
        assert_eq!(on_b.static_bindings[0].0.name_any(), "small");
        let on_a = filter(&claims, &node("n0", "a"), &fake, &none).unwrap();
        assert_eq!(on_a.static_bindings[0].0.name_any(), "big");
        let promised: HashSet<String> = ["big".to_string()].into();
        assert_eq!(
            filter(&claims, &node("n0", "a"), &fake, &promised).unwrap_err(),
            vec![REASON_BIND_CONFLICT],
            "no volume left and the class cannot provision"
        );
        let claims = pre_filter(&pod(claim_volume("d")), &fake).unwrap().unwrap();
        let provision = filter(&claims, &node("n0", "a"), &fake, &none).unwrap();
        assert_eq!(provision.provisions.len(), 1);
        assert!(provision.static_bindings.is_empty());
        let selected = Fake::default()
            .with_class("standard", "WaitForFirstConsumer", csi::DRIVER)
            .with_claim(
                "d",
                json!({"spec": {"storageClassName": "standard"},
                "metadata": {"annotations": {ANN_SELECTED_NODE: "n1"}}}),
            );
        let claims = pre_filter(&pod(claim_volume("d")), &selected)
            .unwrap()
            .unwrap();
        assert!(filter(&claims, &node("n1", "a"), &selected, &none).is_ok());
        assert_eq!(
            filter(&claims, &node("n0", "a"), &selected, &none).unwrap_err(),
            vec![REASON_BIND_CONFLICT]
        );
    }

    #[test]
    fn selectors_modes_and_volume_modes() {
        let fake = Fake::default()
            .with_class("local", "WaitForFirstConsumer", NOT_SUPPORTED_PROVISIONER)
            .with_claim("sel", json!({"spec": {"storageClassName": "local",
                "selector": {"matchLabels": {"tier": "gold"}}}}))
            .with_claim("rwx", json!({"spec": {"storageClassName": "local", "accessModes": ["ReadWriteMany"]}}))
            .with_claim("block", json!({"spec": {"storageClassName": "local", "volumeMode": "Block"}}))
            .with_volume("silver", json!({"metadata": {"labels": {"tier": "silver"}}, "spec": {"storageClassName": "local"}}));
        let none = HashSet::new();
        for claim in ["sel", "rwx", "block"] {
            let claims = pre_filter(&pod(claim_volume(claim)), &fake)
                .unwrap()
                .unwrap();
            assert!(
                filter(&claims, &node("n0", "a"), &fake, &none).is_err(),
                "{claim}"
            );
        }
        let expr: LabelSelector = serde_json::from_value(json!({"matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["gold"]}, {"key": "zone", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert!(selector_matches(
            &expr,
            &[("tier".to_string(), "silver".to_string())].into()
        ));
    }

    #[test]
    fn bindings_complete_when_the_binder_finishes() {
        let n1 = node("n1", "a");
        let written = vec![
            Written {
                claim: "ns/c".into(),
                volume: Some("pv".into()),
                resource_version: "6".into(),
            },
            Written {
                claim: "ns/d".into(),
                volume: None,
                resource_version: "6".into(),
            },
        ];
        let claim_ref = json!({"spec": {"claimRef": {"namespace": "ns", "name": "c", "uid": "uid-c"}}, "metadata": {"resourceVersion": "6"}});
        let selected =
            json!({"metadata": {"resourceVersion": "7", "annotations": {ANN_SELECTED_NODE: "n1"}}});
        let pending = Fake::default()
            .with_volume("pv", claim_ref.clone())
            .with_claim("c", json!({}))
            .with_claim("d", selected.clone());
        assert_eq!(check_bindings(&n1, &written, &pending), Progress::Waiting);
        let lagging = Fake::default()
            .with_volume("pv", json!({}))
            .with_claim("c", json!({}))
            .with_claim("d", selected.clone());
        assert_eq!(
            check_bindings(&n1, &written, &lagging),
            Progress::Waiting,
            "the store has not seen the write yet"
        );
        let mut done_d = selected.clone();
        json_patch::merge(&mut done_d, &bound("pvc-d"));
        let done = Fake::default()
            .with_volume("pv", claim_ref.clone())
            .with_volume("pvc-d", json!({}))
            .with_claim("c", bound("pv"))
            .with_claim("d", done_d);
        assert_eq!(check_bindings(&n1, &written, &done), Progress::Bound);
        let gave_up = Fake::default()
            .with_volume("pv", claim_ref)
            .with_claim("c", bound("pv"))
            .with_claim("d", json!({"metadata": {"resourceVersion": "8"}}));
        assert_eq!(
            check_bindings(&n1, &written, &gave_up),
            Progress::Failed("provisioning failed for PVC \"d\"".into())
        );
        let reset = Fake::default()
            .with_volume("pv", json!({"metadata": {"resourceVersion": "9"}}))
            .with_claim("c", json!({}));
        assert_eq!(
            check_bindings(&n1, &written[..1], &reset),
            Progress::Failed("ClaimRef got reset for pv \"pv\"".into())
        );
    }
}

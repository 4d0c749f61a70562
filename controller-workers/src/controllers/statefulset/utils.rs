//! The StatefulSet's pure rules (upstream `stateful_set_utils.go`): a pod's identity
//! (`<set>-<ordinal>`, hostname, subdomain, the pod-name and pod-index labels), its
//! storage (one claim `<template>-<set>-<ordinal>` per volumeClaimTemplate), which
//! ownerReferences its claims carry under the PVC retention policy, its revision label,
//! the pods a sync builds, and the revisions a set's template makes. No API calls here:
//! `control.rs` decides with these and `stateful_pod.rs` writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use crate::history;
use crate::meta::ResourceNames;
use crate::pod_control::{controller_ref, pod_from_template};
use crate::pods::{is_pod_available, is_pod_ready, phase};

/// The label naming a StatefulSet pod (`apps.StatefulSetPodNameLabel`).
pub(super) const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label carrying a pod's ordinal (`apps.PodIndexLabel`, the PodIndexLabel feature,
/// beta and on in 1.29).
pub(super) const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

pub(super) const ROLLING_UPDATE: &str = "RollingUpdate";
pub(super) const ON_DELETE: &str = "OnDelete";
pub(super) const PARALLEL: &str = "Parallel";
pub(super) const RETAIN: &str = "Retain";
pub(super) const DELETE: &str = "Delete";

/// The spec, or an empty one for a set the API server sent without one.
pub(super) fn spec(set: &StatefulSet) -> std::borrow::Cow<'_, StatefulSetSpec> {
    match &set.spec {
        Some(spec) => std::borrow::Cow::Borrowed(spec),
        None => std::borrow::Cow::Owned(StatefulSetSpec::default()),
    }
}

/// `spec.replicas` (the API defaults it to 1).
pub(super) fn replicas(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub(super) fn min_ready_seconds(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// `spec.updateStrategy.type` (the API defaults it to RollingUpdate).
pub(super) fn update_strategy_type(set: &StatefulSet) -> &str {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .filter(|t| !t.is_empty())
        .unwrap_or(ROLLING_UPDATE)
}

/// `spec.updateStrategy.rollingUpdate.partition` when there is a rollingUpdate.
pub(super) fn partition(set: &StatefulSet) -> Option<i32> {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref())
        .map(|r| r.partition.unwrap_or(0))
}

/// OrderedReady (one pod at a time) unless the set asks for Parallel.
pub(super) fn allows_burst(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        == Some(PARALLEL)
}

/// `spec.revisionHistoryLimit` (the API defaults it to 10).
pub(super) fn revision_history_limit(set: &StatefulSet) -> usize {
    set.spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10)
        .max(0) as usize
}

/// The set's name and the ordinal of a pod named `<parent>-<digits>`; no parent and -1
/// for other names, a parent and -1 when the digits overflow 32 bits.
pub(super) fn parent_and_ordinal(pod_name: &str) -> (Option<&str>, i32) {
    match pod_name.rsplit_once('-') {
        Some((parent, digits))
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (Some(parent), digits.parse::<i32>().unwrap_or(-1))
        }
        _ => (None, -1),
    }
}

pub(super) fn ordinal(pod: &Pod) -> i32 {
    parent_and_ordinal(pod.name_str()).1
}

/// The first ordinal the set uses: `spec.ordinals.start` (StatefulSetStartOrdinal, beta
/// and on in 1.29), else 0.
pub(super) fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

/// The last ordinal the set uses (inclusive).
pub(super) fn end_ordinal(set: &StatefulSet) -> i32 {
    start_ordinal(set) + replicas(set) - 1
}

pub(super) fn pod_in_ordinal_range(pod: &Pod, set: &StatefulSet) -> bool {
    let ordinal = ordinal(pod);
    ordinal >= start_ordinal(set) && ordinal <= end_ordinal(set)
}

pub(super) fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set.name_str())
}

/// `<template>-<set>-<ordinal>`.
pub(super) fn claim_name(
    set: &StatefulSet,
    template: &PersistentVolumeClaim,
    ordinal: i32,
) -> String {
    format!("{}-{}-{ordinal}", template.name_str(), set.name_str())
}

/// Is the pod named as one of the set's (whatever its ordinal)?
pub(super) fn is_member_of(set: &StatefulSet, pod_meta: &ObjectMeta) -> bool {
    parent_and_ordinal(pod_meta.name.as_deref().unwrap_or_default()).0 == Some(set.name_str())
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Does the pod have its network identity: its name, namespace and pod-name label?
pub(super) fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let name = pod.name_str();
    let (parent, ordinal) = parent_and_ordinal(name);
    ordinal >= 0
        && parent == Some(set.name_str())
        && name == pod_name(set, ordinal)
        && pod.namespace_str() == set.namespace_str()
        && label(pod, POD_NAME_LABEL) == Some(name)
}

/// Does the pod mount a claim of the right name for every volumeClaimTemplate?
pub(super) fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let ordinal = ordinal(pod);
    if ordinal < 0 {
        return false;
    }
    // Later volumes of a name win, as in a map built from the list.
    let mut volumes: BTreeMap<&str, &Volume> = BTreeMap::new();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        volumes.insert(volume.name.as_str(), volume);
    }
    spec(set)
        .volume_claim_templates
        .iter()
        .flatten()
        .all(|template| {
            let wanted = claim_name(set, template, ordinal);
            volumes
                .get(template.name_str())
                .and_then(|v| v.persistent_volume_claim.as_ref())
                .is_some_and(|pvc| pvc.claim_name == wanted)
        })
}

/// The claims a pod of `ordinal` uses, by template name, in template order: each
/// template with the pod's claim name, the set's namespace, and the set selector's
/// matchLabels added to its labels.
pub(super) fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<(String, PersistentVolumeClaim)> {
    let spec = spec(set);
    let selector_labels = spec.selector.match_labels.clone();
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|template| {
            let mut claim = template.clone();
            claim.metadata.name = Some(claim_name(set, template, ordinal));
            claim.metadata.namespace = Some(set.namespace_str().to_string());
            match claim.metadata.labels.as_mut() {
                Some(labels) => {
                    for (key, value) in selector_labels.iter().flatten() {
                        labels.insert(key.clone(), value.clone());
                    }
                }
                None => claim.metadata.labels = selector_labels.clone(),
            }
            (template.name_str().to_string(), claim)
        })
        .collect()
}

/// Points the pod's volumes of the templates' names at its claims; other volumes stay.
pub(super) fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let claims = claims_for(set, ordinal(pod));
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    let current = spec.volumes.take().unwrap_or_default();
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(name, claim)| Volume {
            name: name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.name_str().to_string(),
                read_only: None,
            }),
            ..Volume::default()
        })
        .collect();
    volumes.extend(
        current
            .into_iter()
            .filter(|v| !claims.iter().any(|(name, _)| *name == v.name)),
    );
    spec.volumes = Some(volumes);
}

/// Name, namespace and the pod-name and pod-index labels of the pod's ordinal.
pub(super) fn update_identity(set: &StatefulSet, pod: &mut Pod) {
    let ordinal = ordinal(pod);
    let name = pod_name(set, ordinal);
    pod.metadata.name = Some(name.clone());
    pod.metadata.namespace = Some(set.namespace_str().to_string());
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), name);
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
}

/// The identity plus hostname and subdomain, which are set only at creation.
pub(super) fn init_identity(set: &StatefulSet, pod: &mut Pod) {
    update_identity(set, pod);
    let hostname = pod.metadata.name.clone();
    let subdomain = spec(set).service_name.clone().filter(|s| !s.is_empty());
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    spec.hostname = hostname;
    spec.subdomain = subdomain;
}

pub(super) fn pod_revision(pod: &Pod) -> &str {
    label(pod, history::POD_REVISION_LABEL).unwrap_or_default()
}

pub(super) fn set_pod_revision(pod: &mut Pod, revision: &str) {
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(history::POD_REVISION_LABEL.into(), revision.to_string());
}

pub(super) fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && is_pod_ready(pod)
}

pub(super) fn is_running_and_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    is_pod_available(pod, min_ready_seconds, now)
}

/// Created and kept by the API server (a pod the sync only built has no phase).
pub(super) fn is_created(pod: &Pod) -> bool {
    !phase(pod).is_empty()
}

pub(super) fn is_pending(pod: &Pod) -> bool {
    phase(pod) == "Pending"
}

pub(super) fn is_failed(pod: &Pod) -> bool {
    phase(pod) == "Failed"
}

pub(super) fn is_succeeded(pod: &Pod) -> bool {
    phase(pod) == "Succeeded"
}

pub(super) fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

pub(super) fn is_healthy(pod: &Pod) -> bool {
    is_running_and_ready(pod) && !is_terminating(pod)
}

/// A new pod of the set (at the set's template) for `ordinal`: the template's labels,
/// annotations and finalizers, the set as controller, its identity and its claims.
pub(super) fn new_stateful_set_pod(set: &StatefulSet, ordinal: i32) -> Pod {
    let template = &spec(set).template;
    let mut pod = pod_from_template(template, set.name_str(), Some(controller_ref(set)));
    pod.metadata.name = Some(pod_name(set, ordinal));
    init_identity(set, &mut pod);
    update_storage(set, &mut pod);
    pod
}

/// The pod an empty ordinal gets: at the current revision below the partition (or, for
/// a RollingUpdate without rollingUpdate, below status.currentReplicas), at the update
/// revision otherwise.
pub(super) fn new_versioned_stateful_set_pod(
    current_set: &StatefulSet,
    update_set: &StatefulSet,
    current_revision: &str,
    update_revision: &str,
    ordinal: i32,
) -> Pod {
    let start = start_ordinal(current_set);
    let current_replicas = current_set
        .status
        .as_ref()
        .and_then(|s| s.current_replicas)
        .unwrap_or(0);
    let at_current = match partition(current_set) {
        None => {
            update_strategy_type(current_set) == ROLLING_UPDATE
                && ordinal < start + current_replicas
        }
        Some(partition) => ordinal < start + partition,
    };
    let (set, revision) = if at_current {
        (current_set, current_revision)
    } else {
        (update_set, update_revision)
    };
    let mut pod = new_stateful_set_pod(set, ordinal);
    set_pod_revision(&mut pod, revision);
    pod
}

/// The revision of the set's current template, numbered `revision`: the template patch,
/// the template's labels plus the hash label, the set as controller, and the set's
/// annotations.
pub(super) fn new_revision(
    set: &StatefulSet,
    revision: i64,
    collision_count: i32,
) -> ControllerRevision {
    let template = &spec(set).template;
    let mut cr = history::new_revision(
        &controller_ref(set),
        set.namespace_str(),
        template.metadata.as_ref().and_then(|m| m.labels.as_ref()),
        history::template_patch(template),
        revision,
        Some(collision_count),
    );
    cr.metadata.annotations = set
        .metadata
        .annotations
        .clone()
        .filter(|annotations| !annotations.is_empty());
    cr
}

/// The set as `revision` describes it: its template replaced by the revision's
/// (upstream's ApplyRevision; the patch replaces the whole template).
pub(super) fn apply_revision(
    set: &StatefulSet,
    revision: &ControllerRevision,
) -> Result<StatefulSet, String> {
    let template: PodTemplateSpec = history::template_of(revision).ok_or_else(|| {
        format!(
            "ControllerRevision {} holds no pod template patch",
            revision.name_str()
        )
    })?;
    let mut restored = set.clone();
    restored
        .spec
        .get_or_insert_with(StatefulSetSpec::default)
        .template = template;
    Ok(restored)
}

/// Sorts pods by descending ordinal (unparseable names last).
pub(super) fn sort_descending_ordinal(pods: &mut [Arc<Pod>]) {
    pods.sort_by_key(|pod| std::cmp::Reverse(ordinal(pod)));
}

/// The pods of one pass: those in the ordinal range by slot (`ordinal - start`, empty
/// slots still to be made), and the condemned ones (an ordinal outside the range) by
/// descending ordinal. Pods without an ordinal are left out.
pub(super) fn split_pods(
    set: &StatefulSet,
    pods: &[Arc<Pod>],
) -> (Vec<Option<Arc<Pod>>>, Vec<Arc<Pod>>) {
    let start = start_ordinal(set);
    let mut slots: Vec<Option<Arc<Pod>>> = vec![None; replicas(set).max(0) as usize];
    let mut condemned = Vec::new();
    for pod in pods {
        if pod_in_ordinal_range(pod, set) {
            if let Some(slot) = slots.get_mut((ordinal(pod) - start) as usize) {
                *slot = Some(pod.clone());
            }
        } else if ordinal(pod) >= 0 {
            condemned.push(pod.clone());
        }
    }
    sort_descending_ordinal(&mut condemned);
    (slots, condemned)
}

/// Where the update revision comes from.
#[derive(Debug)]
pub(super) enum UpdateRevision {
    /// The latest revision already holds the set's template.
    Latest(Arc<ControllerRevision>),
    /// An older revision holds it (a rollback): it gets the next number.
    Renumber(Arc<ControllerRevision>, i64),
    /// No revision holds it: this one is to be created.
    Create(Box<ControllerRevision>),
}

/// Chooses the update revision among `revisions` (sorted oldest first) for the set's
/// current template (upstream's getStatefulSetRevisions).
pub(super) fn choose_update_revision(
    set: &StatefulSet,
    revisions: &[Arc<ControllerRevision>],
    collision_count: i32,
) -> UpdateRevision {
    let wanted = new_revision(set, history::next_revision(revisions), collision_count);
    let equal = history::find_equal_revisions(revisions, &wanted);
    match (equal.last(), revisions.last()) {
        (Some(found), Some(latest)) if history::equal_revision(latest, found) => {
            UpdateRevision::Latest(latest.clone())
        }
        (Some(found), _) => UpdateRevision::Renumber(found.clone(), wanted.revision),
        (None, _) => UpdateRevision::Create(Box::new(wanted)),
    }
}

/// The revision status.currentRevision names, if it is among `revisions`.
pub(super) fn named_current_revision(
    set: &StatefulSet,
    revisions: &[Arc<ControllerRevision>],
) -> Option<Arc<ControllerRevision>> {
    let name = set.status.as_ref()?.current_revision.as_deref()?;
    revisions
        .iter()
        .find(|revision| revision.metadata.name.as_deref() == Some(name))
        .cloned()
}

/// The revisions to delete to keep `revisionHistoryLimit`: the oldest of those that are
/// neither live (used by a pod, or the current or update revision) nor within the limit.
pub(super) fn revisions_to_truncate<'a>(
    set: &StatefulSet,
    pods: &[Arc<Pod>],
    revisions: &'a [Arc<ControllerRevision>],
    live: &[&str],
) -> Vec<&'a Arc<ControllerRevision>> {
    let history: Vec<&Arc<ControllerRevision>> = revisions
        .iter()
        .filter(|revision| {
            let name = revision.name_str();
            !live.contains(&name) && !pods.iter().any(|pod| pod_revision(pod) == name)
        })
        .collect();
    let excess = history.len().saturating_sub(revision_history_limit(set));
    history.into_iter().take(excess).collect()
}

/// The next move of a RollingUpdate over `replicas` (by slot).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum RollingStep {
    /// Delete this slot's pod: the highest not at the update revision.
    Delete(usize),
    /// A higher pod is at the update revision but not healthy yet.
    Wait(usize),
    /// Every slot from the partition up is updated and healthy.
    Done,
}

/// From the highest slot down to the partition: the first pod not at the update
/// revision (and not already going) is deleted; an updated pod that is not healthy
/// stops the walk.
pub(super) fn next_rolling_step(
    set: &StatefulSet,
    replicas: &[Arc<Pod>],
    update_revision: &str,
) -> RollingStep {
    let update_min = partition(set).unwrap_or(0).max(0) as usize;
    for target in (update_min..replicas.len()).rev() {
        let pod = &replicas[target];
        if pod_revision(pod) != update_revision && !is_terminating(pod) {
            return RollingStep::Delete(target);
        }
        if !is_healthy(pod) {
            return RollingStep::Wait(target);
        }
    }
    RollingStep::Done
}

// ---------------------------------------------------------------------------
// PVC retention policy (StatefulSetAutoDeletePVC, beta and on in 1.29)
// ---------------------------------------------------------------------------

/// `spec.persistentVolumeClaimRetentionPolicy`: what happens to claims when the set is
/// deleted and when it scales down. Unknown values count as Retain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RetentionPolicy {
    pub delete_when_deleted: bool,
    pub delete_when_scaled: bool,
}

pub(super) fn retention_policy(set: &StatefulSet) -> RetentionPolicy {
    let policy = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    // No policy is Retain/Retain; a policy with a field unset is an unknown policy.
    let (deleted, scaled) = match policy {
        None => (RETAIN, RETAIN),
        Some(p) => (
            p.when_deleted.as_deref().unwrap_or_default(),
            p.when_scaled.as_deref().unwrap_or_default(),
        ),
    };
    let known = |v: &str| v == RETAIN || v == DELETE;
    if !known(deleted) || !known(scaled) {
        // Upstream treats any policy it does not know as Retain/Retain.
        return RetentionPolicy {
            delete_when_deleted: false,
            delete_when_scaled: false,
        };
    }
    RetentionPolicy {
        delete_when_deleted: deleted == DELETE,
        delete_when_scaled: scaled == DELETE,
    }
}

/// Who may own a claim: the set or one of its pods.
pub(super) struct Owner<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

impl<'a> Owner<'a> {
    pub(super) fn set(set: &'a StatefulSet) -> Self {
        Owner {
            api_version: "apps/v1",
            kind: "StatefulSet",
            name: set.name_str(),
            uid: set.metadata.uid.as_deref().unwrap_or_default(),
        }
    }

    pub(super) fn pod(pod: &'a Pod) -> Self {
        Owner {
            api_version: "v1",
            kind: "Pod",
            name: pod.name_str(),
            uid: pod.metadata.uid.as_deref().unwrap_or_default(),
        }
    }
}

pub(super) fn has_owner_ref(target: &ObjectMeta, owner: &Owner) -> bool {
    target
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == owner.uid)
}

/// A reference to an owner of the same name but another UID (an earlier pod of that
/// ordinal, or a pod never created).
pub(super) fn has_stale_owner_ref(target: &ObjectMeta, owner: &Owner) -> bool {
    target
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.name == owner.name && r.uid != owner.uid)
}

/// Adds a plain (non-controller) reference to `owner`; true if the target changed.
pub(super) fn set_owner_ref(target: &mut ObjectMeta, owner: &Owner) -> bool {
    if has_owner_ref(target, owner) {
        return false;
    }
    target
        .owner_references
        .get_or_insert_with(Vec::new)
        .push(OwnerReference {
            api_version: owner.api_version.into(),
            kind: owner.kind.into(),
            name: owner.name.into(),
            uid: owner.uid.into(),
            controller: None,
            block_owner_deletion: None,
        });
    true
}

/// Removes the references to `owner`; true if the target changed.
pub(super) fn remove_owner_ref(target: &mut ObjectMeta, owner: &Owner) -> bool {
    if !has_owner_ref(target, owner) {
        return false;
    }
    if let Some(refs) = target.owner_references.as_mut() {
        refs.retain(|r| r.uid != owner.uid);
    }
    true
}

/// Are the claim's ownerReferences what the policy asks for this pod: the set owns it
/// when claims go with the set (and the pod is in range), the pod owns it when claims go
/// with a scale-down and the pod is condemned.
pub(super) fn claim_owner_matches_set_and_pod(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    let policy = retention_policy(set);
    let set_owner = Owner::set(set);
    let pod_owner = Owner::pod(pod);
    let has_set = has_owner_ref(&claim.metadata, &set_owner);
    let has_pod = has_owner_ref(&claim.metadata, &pod_owner);
    let scaled_down = !pod_in_ordinal_range(pod, set);
    match (policy.delete_when_scaled, policy.delete_when_deleted) {
        (false, false) => !has_set && !has_pod,
        (false, true) => has_set && !has_pod,
        (true, false) => !has_set && scaled_down == has_pod,
        (true, true) => scaled_down != has_set && scaled_down == has_pod,
    }
}

/// Sets the claim's ownerReferences as the policy asks; true if the claim changed.
pub(super) fn update_claim_owner_refs(
    claim: &mut PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    let policy = retention_policy(set);
    let set_owner = Owner::set(set);
    let pod_owner = Owner::pod(pod);
    let meta = &mut claim.metadata;
    let scaled_down = !pod_in_ordinal_range(pod, set);
    let mut changed = false;
    match (policy.delete_when_scaled, policy.delete_when_deleted) {
        (false, false) => {
            changed |= remove_owner_ref(meta, &set_owner);
            changed |= remove_owner_ref(meta, &pod_owner);
        }
        (false, true) => {
            changed |= set_owner_ref(meta, &set_owner);
            changed |= remove_owner_ref(meta, &pod_owner);
        }
        (true, false) => {
            changed |= remove_owner_ref(meta, &set_owner);
            if scaled_down {
                changed |= set_owner_ref(meta, &pod_owner);
            } else {
                changed |= remove_owner_ref(meta, &pod_owner);
            }
        }
        (true, true) => {
            if scaled_down {
                changed |= remove_owner_ref(meta, &set_owner);
                changed |= set_owner_ref(meta, &pod_owner);
            } else {
                changed |= set_owner_ref(meta, &set_owner);
                changed |= remove_owner_ref(meta, &pod_owner);
            }
        }
    }
    changed
}

#[cfg(test)]
#[path = "utils_tests.rs"]
mod tests;

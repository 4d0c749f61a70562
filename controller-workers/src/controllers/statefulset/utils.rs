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

pub(super) fn set_name(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

pub(super) fn set_namespace(set: &StatefulSet) -> &str {
    set.metadata.namespace.as_deref().unwrap_or_default()
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
    parent_and_ordinal(pod.metadata.name.as_deref().unwrap_or_default()).1
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
    format!("{}-{ordinal}", set_name(set))
}

/// `<template>-<set>-<ordinal>`.
pub(super) fn claim_name(
    set: &StatefulSet,
    template: &PersistentVolumeClaim,
    ordinal: i32,
) -> String {
    format!(
        "{}-{}-{ordinal}",
        template.metadata.name.as_deref().unwrap_or_default(),
        set_name(set)
    )
}

/// Is the pod named as one of the set's (whatever its ordinal)?
pub(super) fn is_member_of(set: &StatefulSet, pod_meta: &ObjectMeta) -> bool {
    parent_and_ordinal(pod_meta.name.as_deref().unwrap_or_default()).0 == Some(set_name(set))
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Does the pod have its network identity: its name, namespace and pod-name label?
pub(super) fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let (parent, ordinal) = parent_and_ordinal(name);
    ordinal >= 0
        && parent == Some(set_name(set))
        && name == pod_name(set, ordinal)
        && pod.metadata.namespace.as_deref().unwrap_or_default() == set_namespace(set)
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
                .get(template.metadata.name.as_deref().unwrap_or_default())
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
            claim.metadata.namespace = Some(set_namespace(set).to_string());
            match claim.metadata.labels.as_mut() {
                Some(labels) => {
                    for (key, value) in selector_labels.iter().flatten() {
                        labels.insert(key.clone(), value.clone());
                    }
                }
                None => claim.metadata.labels = selector_labels.clone(),
            }
            (template.metadata.name.clone().unwrap_or_default(), claim)
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
                claim_name: claim.metadata.name.clone().unwrap_or_default(),
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
    pod.metadata.namespace = Some(set_namespace(set).to_string());
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
    let mut pod = pod_from_template(template, set_name(set), Some(controller_ref(set)));
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
        set_namespace(set),
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
            revision.metadata.name.as_deref().unwrap_or_default()
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
            let name = revision.metadata.name.as_deref().unwrap_or_default();
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
            name: set_name(set),
            uid: set.metadata.uid.as_deref().unwrap_or_default(),
        }
    }

    pub(super) fn pod(pod: &'a Pod) -> Self {
        Owner {
            api_version: "v1",
            kind: "Pod",
            name: pod.metadata.name.as_deref().unwrap_or_default(),
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
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        RollingUpdateStatefulSetStrategy, StatefulSetOrdinals,
        StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetStatus,
        StatefulSetUpdateStrategy,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use serde_json::json;

    fn set(replicas: i32) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid",
                         "annotations": {"note": "kept"}},
            "spec": {
                "replicas": replicas,
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "nginx"}},
                "template": {
                    "metadata": {"labels": {"app": "nginx"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}],
                             "volumes": [{"name": "cache", "emptyDir": {}}]}
                },
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data", "labels": {"tier": "db"}},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}}
                }]
            }
        }))
        .unwrap()
    }

    fn named(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn names_parse_as_parent_and_ordinal() {
        assert_eq!(parent_and_ordinal("web-0"), (Some("web"), 0));
        assert_eq!(parent_and_ordinal("my-web-12"), (Some("my-web"), 12));
        assert_eq!(parent_and_ordinal("web-007"), (Some("web"), 7));
        assert_eq!(parent_and_ordinal("web"), (None, -1));
        assert_eq!(parent_and_ordinal("web-"), (None, -1));
        assert_eq!(parent_and_ordinal("web-1a"), (None, -1));
        assert_eq!(parent_and_ordinal("web-99999999999"), (Some("web"), -1));
        assert_eq!(parent_and_ordinal("-3"), (Some(""), 3));
    }

    #[test]
    fn ordinal_ranges_follow_ordinals_start() {
        let mut s = set(3);
        assert_eq!((start_ordinal(&s), end_ordinal(&s)), (0, 2));
        assert!(pod_in_ordinal_range(&named("web-2"), &s));
        assert!(!pod_in_ordinal_range(&named("web-3"), &s));
        s.spec.as_mut().unwrap().ordinals = Some(StatefulSetOrdinals { start: Some(5) });
        assert_eq!((start_ordinal(&s), end_ordinal(&s)), (5, 7));
        assert!(!pod_in_ordinal_range(&named("web-2"), &s));
        assert!(pod_in_ordinal_range(&named("web-7"), &s));
        assert_eq!(pod_name(&s, 5), "web-5");
    }

    #[test]
    fn new_pods_have_identity_storage_and_owner() {
        let s = set(3);
        let pod = new_stateful_set_pod(&s, 1);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "nginx");
        assert_eq!(labels[POD_NAME_LABEL], "web-1");
        assert_eq!(labels[POD_INDEX_LABEL], "1");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-1"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let volumes: Vec<_> = spec
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(volumes, ["data", "cache"]);
        assert_eq!(
            spec.volumes.as_ref().unwrap()[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "data-web-1"
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("StatefulSet", "set-uid", Some(true))
        );
        assert!(identity_matches(&s, &pod));
        assert!(storage_matches(&s, &pod));
    }

    #[test]
    fn identity_and_storage_mismatches_are_found_and_fixed() {
        let s = set(3);
        let mut pod = new_stateful_set_pod(&s, 0);
        pod.metadata.labels.as_mut().unwrap().remove(POD_NAME_LABEL);
        assert!(!identity_matches(&s, &pod));
        update_identity(&s, &mut pod);
        assert!(identity_matches(&s, &pod));

        pod.spec.as_mut().unwrap().volumes = Some(vec![Volume {
            name: "data".into(),
            empty_dir: Some(Default::default()),
            ..Volume::default()
        }]);
        assert!(!storage_matches(&s, &pod));
        update_storage(&s, &mut pod);
        assert!(storage_matches(&s, &pod));
        assert_eq!(
            pod.spec.as_ref().unwrap().volumes.as_ref().unwrap().len(),
            1
        );

        let other = named("db-0");
        assert!(!identity_matches(&s, &other));
        assert!(!storage_matches(&s, &named("web")));
        let mut wrong_ns = new_stateful_set_pod(&s, 0);
        wrong_ns.metadata.namespace = Some("elsewhere".into());
        assert!(!identity_matches(&s, &wrong_ns));
    }

    #[test]
    fn claims_carry_template_and_selector_labels() {
        let mut s = set(1);
        let claims = claims_for(&s, 4);
        assert_eq!(claims.len(), 1);
        let (template, claim) = &claims[0];
        assert_eq!(template, "data");
        assert_eq!(claim.metadata.name.as_deref(), Some("data-web-4"));
        assert_eq!(claim.metadata.namespace.as_deref(), Some("ns"));
        let labels = claim.metadata.labels.as_ref().unwrap();
        assert_eq!(
            (labels["tier"].as_str(), labels["app"].as_str()),
            ("db", "nginx")
        );
        // A template without labels gets the selector's.
        s.spec
            .as_mut()
            .unwrap()
            .volume_claim_templates
            .as_mut()
            .unwrap()[0]
            .metadata
            .labels = None;
        let claims = claims_for(&s, 0);
        assert_eq!(
            claims[0].1.metadata.labels,
            Some([("app".to_string(), "nginx".to_string())].into())
        );
        s.spec.as_mut().unwrap().selector = LabelSelector::default();
        assert_eq!(claims_for(&s, 0)[0].1.metadata.labels, None);
    }

    #[test]
    fn membership_is_by_name() {
        let s = set(1);
        assert!(is_member_of(&s, &named("web-9").metadata));
        assert!(!is_member_of(&s, &named("webby-0").metadata));
        assert!(!is_member_of(&s, &named("web").metadata));
    }

    #[test]
    fn versioned_pods_respect_the_partition() {
        let mut current = set(4);
        current.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some(ROLLING_UPDATE.into()),
            rolling_update: Some(RollingUpdateStatefulSetStrategy {
                partition: Some(2),
                max_unavailable: None,
            }),
        });
        let mut update = current.clone();
        update
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("nginx:2".into());
        let image = |pod: &Pod| {
            pod.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        };
        let low = new_versioned_stateful_set_pod(&current, &update, "web-a", "web-b", 1);
        let high = new_versioned_stateful_set_pod(&current, &update, "web-a", "web-b", 2);
        assert_eq!(
            (pod_revision(&low), image(&low).as_str()),
            ("web-a", "nginx:1")
        );
        assert_eq!(
            (pod_revision(&high), image(&high).as_str()),
            ("web-b", "nginx:2")
        );

        // Without a rollingUpdate, status.currentReplicas plays the partition.
        current.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some(ROLLING_UPDATE.into()),
            rolling_update: None,
        });
        current.status = Some(StatefulSetStatus {
            current_replicas: Some(3),
            ..Default::default()
        });
        let pod = new_versioned_stateful_set_pod(&current, &update, "web-a", "web-b", 2);
        assert_eq!(pod_revision(&pod), "web-a");
        // OnDelete creates at the update revision.
        current.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some(ON_DELETE.into()),
            rolling_update: None,
        });
        let pod = new_versioned_stateful_set_pod(&current, &update, "web-a", "web-b", 0);
        assert_eq!(pod_revision(&pod), "web-b");
    }

    #[test]
    fn revisions_round_trip_the_template_and_keep_annotations() {
        let s = set(1);
        let revision = new_revision(&s, 3, 0);
        assert_eq!(revision.revision, 3);
        let name = revision.metadata.name.clone().unwrap();
        let hash =
            &revision.metadata.labels.as_ref().unwrap()[history::CONTROLLER_REVISION_HASH_LABEL];
        assert_eq!(name, format!("web-{hash}"));
        assert_eq!(revision.metadata.labels.as_ref().unwrap()["app"], "nginx");
        assert_eq!(
            revision.metadata.annotations.as_ref().unwrap()["note"],
            "kept"
        );
        assert_ne!(new_revision(&s, 3, 1).metadata.name, revision.metadata.name);

        let mut changed = s.clone();
        changed
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("nginx:2".into());
        let restored = apply_revision(&changed, &revision).unwrap();
        // Equal as Go writes templates (the revision spells out the empty `resources`).
        let go = |set: &StatefulSet| {
            history::go_json(&history::go_template_value(
                &set.spec.as_ref().unwrap().template,
            ))
        };
        assert_eq!(go(&restored), go(&s));
        assert!(history::equal_revision(
            &revision,
            &new_revision(&restored, 9, 0)
        ));
        assert!(apply_revision(&s, &ControllerRevision::default()).is_err());
    }

    #[test]
    fn descending_ordinal_order() {
        let mut pods: Vec<Arc<Pod>> = ["web-1", "web-10", "x", "web-2"]
            .iter()
            .map(|n| Arc::new(named(n)))
            .collect();
        sort_descending_ordinal(&mut pods);
        let names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["web-10", "web-2", "web-1", "x"]);
    }

    fn running(name: &str, revision: &str, ready: bool) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"controller-revision-hash": revision}},
                "status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": if ready { "True" } else { "False" }}]}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn pods_split_into_slots_and_condemned() {
        let mut s = set(3);
        s.spec.as_mut().unwrap().ordinals = Some(StatefulSetOrdinals { start: Some(1) });
        let pods: Vec<Arc<Pod>> = ["web-1", "web-3", "web-0", "web-7", "web-x", "web-5"]
            .iter()
            .map(|n| Arc::new(named(n)))
            .collect();
        let (slots, condemned) = split_pods(&s, &pods);
        let slot_names: Vec<Option<&str>> = slots
            .iter()
            .map(|p| p.as_ref().and_then(|p| p.metadata.name.as_deref()))
            .collect();
        assert_eq!(slot_names, [Some("web-1"), None, Some("web-3")]);
        let condemned: Vec<&str> = condemned
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(condemned, ["web-7", "web-5", "web-0"]);
    }

    #[test]
    fn update_revision_is_the_latest_a_renumbered_one_or_new() {
        let v1 = set(1);
        let mut v2 = set(1);
        v2.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("nginx:2".into());
        let first = Arc::new(new_revision(&v1, 1, 0));
        let second = Arc::new(new_revision(&v2, 2, 0));

        assert!(
            matches!(choose_update_revision(&v1, &[], 0), UpdateRevision::Create(r) if r.revision == 1)
        );
        let history = [first.clone(), second.clone()];
        assert!(
            matches!(choose_update_revision(&v2, &history, 0), UpdateRevision::Latest(r) if Arc::ptr_eq(&r, &second))
        );
        // A rollback to v1 renumbers the first revision past the latest.
        assert!(matches!(choose_update_revision(&v1, &history, 0),
            UpdateRevision::Renumber(r, 3) if Arc::ptr_eq(&r, &first)));
        let mut v3 = set(1);
        v3.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("nginx:3".into());
        match choose_update_revision(&v3, &history, 4) {
            UpdateRevision::Create(r) => {
                assert_eq!(r.revision, 3);
                assert_eq!(r.metadata.name, new_revision(&v3, 3, 4).metadata.name);
            }
            other => panic!("expected a new revision, got {other:?}"),
        }

        let mut with_status = v1.clone();
        with_status.status = Some(StatefulSetStatus {
            current_revision: second.metadata.name.clone(),
            ..Default::default()
        });
        assert!(named_current_revision(&with_status, &history)
            .is_some_and(|r| Arc::ptr_eq(&r, &second)));
        assert!(named_current_revision(&v1, &history).is_none());
    }

    #[test]
    fn history_keeps_live_revisions_and_the_limit() {
        let mut s = set(1);
        s.spec.as_mut().unwrap().revision_history_limit = Some(1);
        let revisions: Vec<Arc<ControllerRevision>> = (1..=5)
            .map(|n| {
                let mut r = ControllerRevision::default();
                r.metadata.name = Some(format!("web-r{n}"));
                r.revision = n;
                Arc::new(r)
            })
            .collect();
        let pods = vec![running("web-0", "web-r2", true)];
        let doomed: Vec<&str> = revisions_to_truncate(&s, &pods, &revisions, &["web-r5", "web-r4"])
            .iter()
            .filter_map(|r| r.metadata.name.as_deref())
            .collect();
        // r2 is live (a pod uses it); of r1 and r3 one may stay: the newer.
        assert_eq!(doomed, ["web-r1"]);
        s.spec.as_mut().unwrap().revision_history_limit = None;
        assert!(revisions_to_truncate(&s, &pods, &revisions, &[]).is_empty());
    }

    #[test]
    fn rolling_updates_go_down_from_the_top_to_the_partition() {
        let mut s = set(3);
        let replicas = vec![
            running("web-0", "old", true),
            running("web-1", "old", true),
            running("web-2", "old", true),
        ];
        assert_eq!(
            next_rolling_step(&s, &replicas, "new"),
            RollingStep::Delete(2)
        );
        let replicas = vec![
            running("web-0", "old", true),
            running("web-1", "old", true),
            running("web-2", "new", false),
        ];
        assert_eq!(
            next_rolling_step(&s, &replicas, "new"),
            RollingStep::Wait(2)
        );
        let replicas = vec![
            running("web-0", "old", true),
            running("web-1", "new", true),
            running("web-2", "new", true),
        ];
        assert_eq!(
            next_rolling_step(&s, &replicas, "new"),
            RollingStep::Delete(0)
        );
        s.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some(ROLLING_UPDATE.into()),
            rolling_update: Some(RollingUpdateStatefulSetStrategy {
                partition: Some(1),
                max_unavailable: None,
            }),
        });
        assert_eq!(next_rolling_step(&s, &replicas, "new"), RollingStep::Done);
        // A pod already going is not deleted again; the walk goes on below it.
        let mut going = (*running("web-2", "old", false)).clone();
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::from_second(1).unwrap(),
            ));
        let replicas = vec![
            running("web-0", "old", true),
            running("web-1", "old", true),
            Arc::new(going),
        ];
        assert_eq!(
            next_rolling_step(&s, &replicas, "new"),
            RollingStep::Wait(2)
        );
    }

    fn claim_with_refs(refs: &[(&str, &str)]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data-web-0".into()),
                owner_references: Some(
                    refs.iter()
                        .map(|(name, uid)| OwnerReference {
                            name: name.to_string(),
                            uid: uid.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Default::default()
        }
    }

    fn with_policy(deleted: &str, scaled: &str) -> StatefulSet {
        let mut s = set(2);
        s.spec
            .as_mut()
            .unwrap()
            .persistent_volume_claim_retention_policy =
            Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some(deleted.into()),
                when_scaled: Some(scaled.into()),
            });
        s
    }

    #[test]
    fn retention_policy_owner_refs() {
        let mut in_range = named("web-0");
        in_range.metadata.uid = Some("pod-0".into());
        let mut condemned = named("web-5");
        condemned.metadata.uid = Some("pod-5".into());

        // Retain/Retain: nobody owns the claim.
        let s = with_policy(RETAIN, RETAIN);
        let mut claim = claim_with_refs(&[("web", "set-uid")]);
        assert!(!claim_owner_matches_set_and_pod(&claim, &s, &in_range));
        assert!(update_claim_owner_refs(&mut claim, &s, &in_range));
        assert!(claim_owner_matches_set_and_pod(&claim, &s, &in_range));
        assert!(!update_claim_owner_refs(&mut claim, &s, &in_range));

        // WhenDeleted=Delete: the set owns every claim.
        let s = with_policy(DELETE, RETAIN);
        let mut claim = claim_with_refs(&[]);
        assert!(!claim_owner_matches_set_and_pod(&claim, &s, &in_range));
        assert!(update_claim_owner_refs(&mut claim, &s, &in_range));
        let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("apps/v1", "StatefulSet", "set-uid", None)
        );

        // WhenScaled=Delete: a condemned pod owns its claim; an in-range one does not.
        let s = with_policy(RETAIN, DELETE);
        let mut claim = claim_with_refs(&[]);
        assert!(claim_owner_matches_set_and_pod(&claim, &s, &in_range));
        assert!(!claim_owner_matches_set_and_pod(&claim, &s, &condemned));
        assert!(update_claim_owner_refs(&mut claim, &s, &condemned));
        assert!(has_owner_ref(&claim.metadata, &Owner::pod(&condemned)));
        assert!(claim_owner_matches_set_and_pod(&claim, &s, &condemned));

        // Delete/Delete: set while in range, pod once condemned.
        let s = with_policy(DELETE, DELETE);
        let mut claim = claim_with_refs(&[("web", "set-uid")]);
        assert!(claim_owner_matches_set_and_pod(&claim, &s, &in_range));
        assert!(!claim_owner_matches_set_and_pod(&claim, &s, &condemned));
        assert!(update_claim_owner_refs(&mut claim, &s, &condemned));
        assert!(!has_owner_ref(&claim.metadata, &Owner::set(&s)));
        assert!(has_owner_ref(&claim.metadata, &Owner::pod(&condemned)));

        // Unknown values are Retain.
        assert_eq!(
            retention_policy(&with_policy("Sometimes", DELETE)),
            RetentionPolicy {
                delete_when_deleted: false,
                delete_when_scaled: false
            }
        );
    }

    #[test]
    fn stale_owner_refs_name_the_pod_with_another_uid() {
        let claim = claim_with_refs(&[("web-0", "old-uid")]);
        let mut pod = named("web-0");
        assert!(has_stale_owner_ref(&claim.metadata, &Owner::pod(&pod)));
        pod.metadata.uid = Some("old-uid".into());
        assert!(!has_stale_owner_ref(&claim.metadata, &Owner::pod(&pod)));
        assert!(!has_stale_owner_ref(
            &claim.metadata,
            &Owner::pod(&named("web-1"))
        ));
    }

    #[test]
    fn pod_states() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-0"},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        assert!(is_created(&pod) && is_running_and_ready(&pod) && is_healthy(&pod));
        let later = Timestamp::from_second(1_704_067_200 + 30).unwrap();
        assert!(is_running_and_available(&pod, 10, later));
        assert!(!is_running_and_available(&pod, 60, later));
        assert!(!is_created(&named("web-0")));
        let mut terminating = pod.clone();
        terminating.metadata.deletion_timestamp = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c[0].last_transition_time.clone());
        assert!(!is_healthy(&terminating) && is_terminating(&terminating));
    }
}

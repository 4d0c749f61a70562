//! Pure helper logic for the Deployment controller.
//!
//! This is the Rust counterpart of kube-controller-manager's deployment
//! utility package plus the handful of generic controller helpers the
//! Deployment controller leans on (template hashing, replica-set ordering,
//! active-set filtering, label cloning). Nothing here talks to the API server:
//! every function takes objects and returns values, so the reconcile loop can
//! stay small and this file can be unit tested on its own.
//!
//! # Conventions
//!
//! * Objects are expected to have been through API-server defaulting. Where a
//!   field that defaulting always fills is nevertheless missing (typically in
//!   hand-built objects), the API default is assumed: `spec.replicas` → 1,
//!   `spec.strategy.type` → `RollingUpdate`, `maxSurge`/`maxUnavailable` →
//!   `25%`. Status counters default to 0, like Go's zero values.
//! * Time is [`k8s_openapi::jiff::Timestamp`], because that is what
//!   `meta/v1 Time` wraps in k8s-openapi 0.29.
//! * Errors are plain `String`s: the controller only ever logs them or puts
//!   them into events/conditions.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetCondition,
    ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

// ---------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------

/// Annotation on a ReplicaSet (mirrored onto its Deployment) recording which
/// rollout sequence number the ReplicaSet's template belongs to.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Comma-separated list of earlier revisions a ReplicaSet has served; it grows
/// when a rollback re-activates an existing ReplicaSet under a new revision.
pub const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// Deployment size recorded on a ReplicaSet, so that scaling events can be
/// told apart from rollouts and saturation can be judged.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` recorded on a ReplicaSet; it is the
/// denominator used when scaling ReplicaSets proportionally.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// kubectl's client-side-apply annotation; it describes the Deployment
/// object itself and must not leak onto ReplicaSets.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Annotation used to round-trip the removed `spec.rollbackTo` field.
pub const DEPRECATED_ROLLBACK_TO_ANNOTATION: &str = "deprecated.deployment.rollback.to";

/// Label added to ReplicaSet selectors/templates (and hence pods) so that
/// ReplicaSets of one Deployment never select each other's pods.
pub const DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: &str = "pod-template-hash";

/// Upper bound (in characters) the controller allows the revision-history
/// annotation to grow to.
pub const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;

/// Event reason: the requested rollback revision does not exist.
pub const ROLLBACK_REVISION_NOT_FOUND: &str = "DeploymentRollbackRevisionNotFound";
/// Event reason: the rollback target has the template already in use.
pub const ROLLBACK_TEMPLATE_UNCHANGED: &str = "DeploymentRollbackTemplateUnchanged";
/// Event reason: a rollback was performed.
pub const ROLLBACK_DONE: &str = "DeploymentRollback";
/// Event message when there is no previous revision to roll back to.
pub const ROLLBACK_LAST_REVISION_NOT_FOUND_MESSAGE: &str = "Unable to find last revision.";
/// Event message when the requested revision to roll back to is unknown.
pub const ROLLBACK_REVISION_NOT_FOUND_MESSAGE: &str = "Unable to find the revision to rollback to.";

/// Event message for a successful rollback (wording matches upstream events).
pub fn rollback_done_message(deployment_name: &str, revision: i64) -> String {
    format!("Rolled back deployment {deployment_name:?} to revision {revision}")
}

/// Event message when the rollback target's template equals the current one.
pub fn rollback_template_unchanged_message(deployment_name: &str) -> String {
    format!("The rollback revision contains the same template as current deployment {deployment_name:?}")
}

/// Progressing reason: a ReplicaSet was scaled/updated as part of a rollout.
pub const REPLICA_SET_UPDATED_REASON: &str = "ReplicaSetUpdated";
/// Progressing reason: creating the new ReplicaSet failed.
pub const FAILED_RS_CREATE_REASON: &str = "ReplicaSetCreateError";
/// Progressing reason: a new ReplicaSet was created.
pub const NEW_REPLICA_SET_REASON: &str = "NewReplicaSetCreated";
/// Progressing reason: an existing ReplicaSet was adopted as the new one.
pub const FOUND_NEW_RS_REASON: &str = "FoundNewReplicaSet";
/// Progressing reason: the new ReplicaSet reached its minimum availability;
/// the rollout is complete.
pub const NEW_RS_AVAILABLE_REASON: &str = "NewReplicaSetAvailable";
/// Progressing reason: no progress was made within `progressDeadlineSeconds`.
pub const TIMED_OUT_REASON: &str = "ProgressDeadlineExceeded";
/// Progressing reason: the Deployment is paused, so lack of progress is
/// expected and must not count against the deadline.
pub const PAUSED_DEPLOY_REASON: &str = "DeploymentPaused";
/// Progressing reason: the Deployment was resumed; restarts the deadline clock.
pub const RESUMED_DEPLOY_REASON: &str = "DeploymentResumed";
/// Available reason: at least `replicas - maxUnavailable` pods are available.
pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
/// Available reason: fewer than the minimum required pods are available.
pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// Deployment condition type `Available`.
pub const DEPLOYMENT_AVAILABLE: &str = "Available";
/// Deployment condition type `Progressing`.
pub const DEPLOYMENT_PROGRESSING: &str = "Progressing";
/// Deployment condition type `ReplicaFailure`.
pub const DEPLOYMENT_REPLICA_FAILURE: &str = "ReplicaFailure";
/// ReplicaSet condition type `ReplicaFailure`.
pub const REPLICA_SET_REPLICA_FAILURE: &str = "ReplicaFailure";

/// Condition status values.
pub const CONDITION_TRUE: &str = "True";
/// Condition status values.
pub const CONDITION_FALSE: &str = "False";
/// Condition status values.
pub const CONDITION_UNKNOWN: &str = "Unknown";

/// Deployment strategy type `RollingUpdate` (the API default).
pub const ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE: &str = "RollingUpdate";
/// Deployment strategy type `Recreate`.
pub const RECREATE_DEPLOYMENT_STRATEGY_TYPE: &str = "Recreate";

/// Annotations that belong to the Deployment (or are managed per ReplicaSet
/// by the controller) and therefore are never copied between the two.
pub const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    LAST_APPLIED_CONFIG_ANNOTATION,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    DEPRECATED_ROLLBACK_TO_ANNOTATION,
];

/// API default for `maxSurge` / `maxUnavailable` when a rolling update leaves
/// them unset.
const DEFAULT_ROLLING_PARAM: &str = "25%";

// ---------------------------------------------------------------------------
// Small accessors (API defaults for missing fields)
// ---------------------------------------------------------------------------

/// Desired size of the Deployment (`spec.replicas`, API default 1).
pub fn deployment_replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Desired size of a ReplicaSet (`spec.replicas`, API default 1).
pub fn replica_set_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn rs_status(rs: &ReplicaSet) -> Option<&ReplicaSetStatus> {
    rs.status.as_ref()
}

fn rs_template(rs: &ReplicaSet) -> Option<&PodTemplateSpec> {
    rs.spec.as_ref().and_then(|s| s.template.as_ref())
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Parses an integer the way Go's `strconv.Atoi`/`ParseInt(s, 10, 64)` do:
/// optional sign, decimal digits only, no whitespace.
fn parse_go_int(s: &str) -> Result<i64, String> {
    s.parse::<i64>()
        .map_err(|e| format!("strconv.ParseInt: parsing {s:?}: {e}"))
}

/// Strategy type with the API default applied.
fn strategy_type(d: &Deployment) -> &str {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .unwrap_or(ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE)
}

/// `(maxSurge, maxUnavailable)` with the API defaults applied.
fn rolling_update_params(d: &Deployment) -> (IntOrString, IntOrString) {
    let ru = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let default = || IntOrString::String(DEFAULT_ROLLING_PARAM.to_string());
    (
        ru.and_then(|r| r.max_surge.clone()).unwrap_or_else(default),
        ru.and_then(|r| r.max_unavailable.clone())
            .unwrap_or_else(default),
    )
}

// ---------------------------------------------------------------------------
// Conditions
// ---------------------------------------------------------------------------

/// Builds a condition whose update and transition times are both `now`.
///
/// Empty reason/message are stored as `None`, which is how they travel over
/// the wire anyway.
pub fn new_deployment_condition(
    cond_type: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> DeploymentCondition {
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    DeploymentCondition {
        type_: cond_type.to_string(),
        status: status.to_string(),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: non_empty(reason),
        message: non_empty(message),
    }
}

/// Returns the first condition of the given type, if any.
pub fn get_deployment_condition<'a>(
    status: &'a DeploymentStatus,
    cond_type: &str,
) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == cond_type)
}

/// Installs `condition`, replacing any existing condition of the same type.
///
/// Nothing changes when the existing condition already has the same status
/// and reason: that keeps `lastUpdateTime` meaningful as "last time something
/// actually changed", which the progress-deadline check relies on. When only
/// the reason changes, the old `lastTransitionTime` is kept because the
/// status did not transition.
pub fn set_deployment_condition(status: &mut DeploymentStatus, mut condition: DeploymentCondition) {
    if let Some(current) = get_deployment_condition(status, &condition.type_) {
        let same_reason =
            current.reason.as_deref().unwrap_or("") == condition.reason.as_deref().unwrap_or("");
        if current.status == condition.status && same_reason {
            return;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    let mut conditions = filter_out_condition(status.conditions.take(), &condition.type_);
    conditions.push(condition);
    status.conditions = Some(conditions);
}

/// Removes every condition of the given type. An emptied list becomes `None`
/// so the field disappears from the serialised status.
pub fn remove_deployment_condition(status: &mut DeploymentStatus, cond_type: &str) {
    let conditions = filter_out_condition(status.conditions.take(), cond_type);
    status.conditions = (!conditions.is_empty()).then_some(conditions);
}

fn filter_out_condition(
    conditions: Option<Vec<DeploymentCondition>>,
    cond_type: &str,
) -> Vec<DeploymentCondition> {
    conditions
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != cond_type)
        .collect()
}

/// Promotes a ReplicaSet condition (e.g. a ReplicaFailure) to a Deployment
/// condition. ReplicaSet conditions have no update time, so the transition
/// time stands in for both.
pub fn replica_set_to_deployment_condition(cond: &ReplicaSetCondition) -> DeploymentCondition {
    DeploymentCondition {
        type_: cond.type_.clone(),
        status: cond.status.clone(),
        last_transition_time: cond.last_transition_time.clone(),
        last_update_time: cond.last_transition_time.clone(),
        reason: cond.reason.clone(),
        message: cond.message.clone(),
    }
}

/// Returns the first ReplicaSet condition of the given type, if any.
pub fn get_replica_set_condition<'a>(
    status: &'a ReplicaSetStatus,
    cond_type: &str,
) -> Option<&'a ReplicaSetCondition> {
    status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == cond_type)
}

// ---------------------------------------------------------------------------
// Revisions and annotations
// ---------------------------------------------------------------------------

/// Revision number recorded on an object. A missing annotation means
/// revision 0 (not yet assigned); an unparsable one is an error.
pub fn revision(meta: &ObjectMeta) -> Result<i64, String> {
    match annotation(meta, REVISION_ANNOTATION) {
        None => Ok(0),
        Some(v) => parse_go_int(v),
    }
}

/// Highest revision among the ReplicaSets; unparsable revisions are ignored
/// so that one corrupted annotation cannot block reconciliation.
pub fn max_revision<R: Borrow<ReplicaSet>>(all_rss: &[R]) -> i64 {
    all_rss
        .iter()
        .filter_map(|rs| revision(&rs.borrow().metadata).ok())
        .fold(0, i64::max)
}

/// Second-highest revision among the ReplicaSets, i.e. the revision a
/// "rollback to previous" targets. Unparsable revisions are ignored.
///
/// Duplicated maxima count twice (so `[3, 3]` yields 3), as upstream.
pub fn last_revision<R: Borrow<ReplicaSet>>(all_rss: &[R]) -> i64 {
    let (mut max, mut second) = (0i64, 0i64);
    for v in all_rss
        .iter()
        .filter_map(|rs| revision(&rs.borrow().metadata).ok())
    {
        if v >= max {
            second = max;
            max = v;
        } else if v > second {
            second = v;
        }
    }
    second
}

/// Records `revision` on the Deployment; returns whether it changed.
pub fn set_deployment_revision(deployment: &mut Deployment, revision: &str) -> bool {
    let annotations = deployment
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    if annotations.get(REVISION_ANNOTATION).map(String::as_str) == Some(revision) {
        return false;
    }
    annotations.insert(REVISION_ANNOTATION.to_string(), revision.to_string());
    true
}

/// Brings the new ReplicaSet's annotations in line with its Deployment and
/// returns whether anything changed.
///
/// * Copies the Deployment's own annotations (except the skipped ones).
/// * Raises the revision to `new_revision`, but never lowers it: old
///   ReplicaSets may have been deleted since `new_revision` was computed.
/// * When an existing revision is replaced (a rollback re-activated this
///   ReplicaSet), the replaced revision is appended to the revision-history
///   annotation, dropping the oldest entries to stay within
///   `rev_history_limit_in_chars`; if even that cannot make it fit, the
///   history is left untouched.
/// * For a ReplicaSet that does not exist yet (`exists == false`) the
///   desired/max replicas annotations are set.
///
/// Returns `false` (after the copy step already happened) when either
/// revision is not an integer, matching upstream.
pub fn set_new_replica_set_annotations(
    deployment: &Deployment,
    new_rs: &mut ReplicaSet,
    new_revision: &str,
    exists: bool,
    rev_history_limit_in_chars: usize,
) -> bool {
    let mut changed = copy_deployment_annotations_to_replica_set(deployment, new_rs);
    {
        let annotations = new_rs
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        let old_revision = annotations.get(REVISION_ANNOTATION).cloned();
        let old_rev_str = old_revision.as_deref().unwrap_or("");
        let old_rev = match parse_go_int(old_rev_str) {
            Ok(v) => v,
            Err(_) if old_rev_str.is_empty() => 0,
            Err(_) => return false,
        };
        let Ok(new_rev) = parse_go_int(new_revision) else {
            return false;
        };
        if old_rev < new_rev {
            annotations.insert(REVISION_ANNOTATION.to_string(), new_revision.to_string());
            changed = true;
        }
        if old_revision.is_some() && old_rev < new_rev {
            let history = annotations
                .get(REVISION_HISTORY_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            let old_revisions: Vec<&str> = history.split(',').collect();
            if old_revisions[0].is_empty() {
                annotations.insert(
                    REVISION_HISTORY_ANNOTATION.to_string(),
                    old_rev_str.to_string(),
                );
            } else {
                let limit = rev_history_limit_in_chars as i64;
                let mut total_len = (history.len() + old_rev_str.len() + 1) as i64;
                let mut start = 0usize;
                while total_len > limit && start < old_revisions.len() {
                    total_len -= old_revisions[start].len() as i64 + 1;
                    start += 1;
                }
                if total_len <= limit {
                    let mut kept = old_revisions[start..].to_vec();
                    kept.push(old_rev_str);
                    annotations.insert(REVISION_HISTORY_ANNOTATION.to_string(), kept.join(","));
                }
            }
        }
    }
    if !exists {
        let replicas = deployment_replicas(deployment);
        if set_replicas_annotations(
            new_rs,
            replicas,
            replicas.wrapping_add(max_surge(deployment)),
        ) {
            changed = true;
        }
    }
    changed
}

/// Whether an annotation key must never be copied between a Deployment and
/// its ReplicaSets.
pub fn skip_copy_annotation(key: &str) -> bool {
    ANNOTATIONS_TO_SKIP.contains(&key)
}

/// Copies the Deployment's user annotations onto the ReplicaSet (overwriting
/// differing values) and reports whether the ReplicaSet changed. Annotations
/// only present on the ReplicaSet are kept. The revision annotations are
/// skipped on purpose: the ReplicaSet's revision is authoritative and the
/// Deployment's copy may be stale.
pub fn copy_deployment_annotations_to_replica_set(
    deployment: &Deployment,
    rs: &mut ReplicaSet,
) -> bool {
    let rs_annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in deployment.metadata.annotations.iter().flatten() {
        if skip_copy_annotation(k) || rs_annotations.get(k) == Some(v) {
            continue;
        }
        rs_annotations.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// On rollback, replaces the Deployment's user annotations with those of the
/// ReplicaSet being rolled back to, keeping the Deployment's own skipped
/// (controller/kubectl managed) annotations.
pub fn set_deployment_annotations_to(deployment: &mut Deployment, rollback_to_rs: &ReplicaSet) {
    let mut annotations = get_skipped_annotations(
        deployment
            .metadata
            .annotations
            .as_ref()
            .unwrap_or(&BTreeMap::new()),
    );
    for (k, v) in rollback_to_rs.metadata.annotations.iter().flatten() {
        if !skip_copy_annotation(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    deployment.metadata.annotations = Some(annotations);
}

/// The subset of `annotations` whose keys are in the skip list.
pub fn get_skipped_annotations(annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    annotations
        .iter()
        .filter(|(k, _)| skip_copy_annotation(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// On rollback, installs a ReplicaSet's template into the Deployment, minus
/// the pod-template-hash label the controller added to it.
pub fn set_from_replica_set_template(deployment: &mut Deployment, template: &PodTemplateSpec) {
    let mut template = template.clone();
    if let Some(meta) = template.metadata.as_mut() {
        let labels =
            clone_and_remove_label(meta.labels.as_ref(), DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
        meta.labels = (!labels.is_empty()).then_some(labels);
    }
    deployment
        .spec
        .get_or_insert_with(Default::default)
        .template = template;
}

// ---------------------------------------------------------------------------
// Labels
// ---------------------------------------------------------------------------

/// Copy of `labels` with `key=value` added (no-op copy for an empty key).
pub fn clone_and_add_label(
    labels: Option<&BTreeMap<String, String>>,
    key: &str,
    value: &str,
) -> BTreeMap<String, String> {
    let mut out = labels.cloned().unwrap_or_default();
    if !key.is_empty() {
        out.insert(key.to_string(), value.to_string());
    }
    out
}

/// Copy of `labels` without `key`.
pub fn clone_and_remove_label(
    labels: Option<&BTreeMap<String, String>>,
    key: &str,
) -> BTreeMap<String, String> {
    let mut out = labels.cloned().unwrap_or_default();
    out.remove(key);
    out
}

/// Copy of `selector` whose matchLabels also require `key=value`; used to
/// make a ReplicaSet's selector unique to its template hash.
pub fn clone_selector_and_add_label(
    selector: &LabelSelector,
    key: &str,
    value: &str,
) -> LabelSelector {
    let mut out = selector.clone();
    if !key.is_empty() {
        out.match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
    }
    out
}

// ---------------------------------------------------------------------------
// Replica annotations, fenceposts and proportional scaling
// ---------------------------------------------------------------------------

/// Deployment size recorded on the ReplicaSet, if present and numeric.
pub fn get_desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    get_int_from_annotation(rs, DESIRED_REPLICAS_ANNOTATION)
}

/// `replicas + maxSurge` recorded on the ReplicaSet, if present and numeric.
pub fn get_max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    get_int_from_annotation(rs, MAX_REPLICAS_ANNOTATION)
}

/// Reads an integer annotation; `None` when absent or not an integer.
/// Values outside i32 wrap, like Go's `int32(...)` conversion.
pub fn get_int_from_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    let raw = annotation(&rs.metadata, key)?;
    parse_go_int(raw).ok().map(|v| v as i32)
}

/// Writes the desired/max replicas annotations; returns whether either changed.
pub fn set_replicas_annotations(
    rs: &mut ReplicaSet,
    desired_replicas: i32,
    max_replicas: i32,
) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut updated = false;
    for (key, value) in [
        (DESIRED_REPLICAS_ANNOTATION, desired_replicas),
        (MAX_REPLICAS_ANNOTATION, max_replicas),
    ] {
        let value = value.to_string();
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.to_string(), value);
            updated = true;
        }
    }
    updated
}

/// Whether [`set_replicas_annotations`] would change anything.
pub fn replicas_annotations_need_update(
    rs: &ReplicaSet,
    desired_replicas: i32,
    max_replicas: i32,
) -> bool {
    let Some(annotations) = rs.metadata.annotations.as_ref() else {
        return true;
    };
    annotations.get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired_replicas.to_string())
        || annotations.get(MAX_REPLICAS_ANNOTATION) != Some(&max_replicas.to_string())
}

/// Resolves an int-or-percent against `total`.
///
/// Integers are taken as-is. Strings must be `<int>%`; the percentage of
/// `total` is rounded up or down as requested. Any other string is an error
/// (a bare `"5"` is rejected on purpose, as upstream's "safe" variant does).
pub fn get_scaled_value_from_int_or_percent(
    value: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32, String> {
    match value {
        IntOrString::Int(v) => Ok(*v),
        IntOrString::String(s) => {
            let Some(digits) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_string(),
                );
            };
            let pct = parse_go_int(digits)
                .map_err(|e| format!("invalid value for IntOrString: invalid value {s:?}: {e}"))?;
            let scaled = pct as f64 * total as f64 / 100.0;
            let rounded = if round_up {
                scaled.ceil()
            } else {
                scaled.floor()
            };
            Ok(rounded as i64 as i32)
        }
    }
}

/// Resolves `maxSurge` and `maxUnavailable` together for `desired` replicas.
///
/// Surge rounds up and unavailability rounds down, so small percentages
/// still allow progress by surging. Missing values count as 0. If both end up
/// 0 the rollout could never make progress, so unavailability becomes 1
/// (surging might be blocked by quota, removing a pod never is).
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), String> {
    let zero = IntOrString::Int(0);
    let surge = get_scaled_value_from_int_or_percent(max_surge.unwrap_or(&zero), desired, true)?;
    let mut unavailable =
        get_scaled_value_from_int_or_percent(max_unavailable.unwrap_or(&zero), desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// Maximum number of pods above `spec.replicas` a rolling update may run
/// (0 for non-rolling strategies). Invalid values resolve to 0; validation
/// keeps them out in practice.
pub fn max_surge(deployment: &Deployment) -> i32 {
    if !is_rolling_update(deployment) {
        return 0;
    }
    let (surge, unavailable) = rolling_update_params(deployment);
    resolve_fenceposts(
        Some(&surge),
        Some(&unavailable),
        deployment_replicas(deployment),
    )
    .map(|(s, _)| s)
    .unwrap_or(0)
}

/// Maximum number of pods that may be unavailable during a rolling update,
/// capped at `spec.replicas` (0 for non-rolling strategies or 0 replicas).
pub fn max_unavailable(deployment: &Deployment) -> i32 {
    let replicas = deployment_replicas(deployment);
    if !is_rolling_update(deployment) || replicas == 0 {
        return 0;
    }
    let (surge, unavailable) = rolling_update_params(deployment);
    let unavailable = resolve_fenceposts(Some(&surge), Some(&unavailable), replicas)
        .map(|(_, u)| u)
        .unwrap_or(0);
    unavailable.min(replicas)
}

/// Minimum number of available pods the Deployment must keep (0 for
/// non-rolling strategies, where downtime is accepted).
pub fn min_available(deployment: &Deployment) -> i32 {
    if !is_rolling_update(deployment) {
        return 0;
    }
    deployment_replicas(deployment) - max_unavailable(deployment)
}

/// How many replicas `rs` should gain (positive) or lose (negative) in a
/// proportional scaling step, bounded so that the running total never
/// overshoots `deployment_replicas_to_add`.
pub fn get_proportion(
    rs: Option<&ReplicaSet>,
    deployment: &Deployment,
    deployment_replicas_to_add: i32,
    deployment_replicas_added: i32,
) -> i32 {
    let Some(rs) = rs else {
        return 0;
    };
    if replica_set_replicas(rs) == 0
        || deployment_replicas_to_add == 0
        || deployment_replicas_to_add == deployment_replicas_added
    {
        return 0;
    }
    let fraction = get_replica_set_fraction(rs, deployment);
    let allowed = deployment_replicas_to_add - deployment_replicas_added;
    if deployment_replicas_to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// Change in size that keeps `rs` at the same share of the Deployment after
/// a resize: `rs.replicas * (new replicas + surge) / max-replicas annotation`
/// (the annotation records the size the share was computed against; the
/// current `status.replicas` is the fallback). Scaling to zero removes the
/// whole ReplicaSet.
pub fn get_replica_set_fraction(rs: &ReplicaSet, deployment: &Deployment) -> i32 {
    let rs_replicas = replica_set_replicas(rs);
    let d_replicas = deployment_replicas(deployment);
    if d_replicas == 0 {
        return rs_replicas.wrapping_neg();
    }
    let deployment_size = d_replicas.wrapping_add(max_surge(deployment));
    let annotated = get_max_replicas_annotation(rs).unwrap_or_else(|| {
        deployment
            .status
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(0)
    });
    let new_size = f64::from(rs_replicas.wrapping_mul(deployment_size)) / f64::from(annotated);
    round_to_i32(new_size).wrapping_sub(rs_replicas)
}

/// Half-away-from-zero rounding by offset-and-truncate, as upstream does.
fn round_to_i32(a: f64) -> i32 {
    if a < 0.0 {
        (a - 0.5) as i32
    } else {
        (a + 0.5) as i32
    }
}

/// Size the new ReplicaSet should have next.
///
/// Rolling update: grow towards `spec.replicas` but keep the total across
/// all ReplicaSets (which must include `new_rs`) within
/// `replicas + maxSurge`. Recreate: jump straight to `spec.replicas` (old
/// pods are already gone by then).
pub fn new_rs_new_replicas<R: Borrow<ReplicaSet>>(
    deployment: &Deployment,
    all_rss: &[R],
    new_rs: &ReplicaSet,
) -> Result<i32, String> {
    let d_replicas = deployment_replicas(deployment);
    let new_rs_replicas = replica_set_replicas(new_rs);
    match strategy_type(deployment) {
        ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE => {
            let (surge, _) = rolling_update_params(deployment);
            let surge = get_scaled_value_from_int_or_percent(&surge, d_replicas, true)?;
            let current = get_replica_count_for_replica_sets(all_rss);
            let max_total = d_replicas.wrapping_add(surge);
            if current >= max_total {
                return Ok(new_rs_replicas);
            }
            let scale_up = (max_total - current).min(d_replicas.wrapping_sub(new_rs_replicas));
            Ok(new_rs_replicas.wrapping_add(scale_up))
        }
        RECREATE_DEPLOYMENT_STRATEGY_TYPE => Ok(d_replicas),
        other => Err(format!("deployment type {other} isn't supported")),
    }
}

/// Whether the new ReplicaSet fully owns the Deployment: its size, its
/// desired-replicas annotation and its available pods all equal
/// `spec.replicas`. The annotation check guards against treating a
/// ReplicaSet as saturated in the middle of a Deployment resize.
pub fn is_saturated(deployment: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else {
        return false;
    };
    let Some(desired) =
        annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION).and_then(|v| parse_go_int(v).ok())
    else {
        return false;
    };
    let d_replicas = deployment_replicas(deployment);
    let available = rs_status(rs)
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    replica_set_replicas(rs) == d_replicas
        && desired as i32 == d_replicas
        && available == d_replicas
}

/// When at most one ReplicaSet is active (non-zero size), returns it — or,
/// if none is active, the new ReplicaSet, else the newest old one — so a
/// resize can be applied to it alone. Returns `None` when several are active
/// (proportional scaling is needed) or when there are no ReplicaSets.
///
/// Unlike upstream, `old_rss` is not reordered in place.
pub fn find_active_or_latest<'a>(
    new_rs: Option<&'a ReplicaSet>,
    old_rss: &[&'a ReplicaSet],
) -> Option<&'a ReplicaSet> {
    if new_rs.is_none() && old_rss.is_empty() {
        return None;
    }
    let mut sorted_old: Vec<&'a ReplicaSet> = old_rss.to_vec();
    sorted_old.sort_by(|a, b| cmp_by_creation_timestamp(b, a));
    let candidates: Vec<&'a ReplicaSet> = sorted_old.iter().copied().chain(new_rs).collect();
    let active = filter_active_replica_sets(&candidates);
    match active.len() {
        0 => new_rs.or_else(|| sorted_old.first().copied()),
        1 => Some(active[0]),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Finding and counting ReplicaSets
// ---------------------------------------------------------------------------

/// Compares two pod templates the way the API server's semantic equality
/// would, ignoring the `pod-template-hash` label (the Deployment's template
/// never carries it, and its value depends on the hashing scheme).
///
/// Comparison is on the JSON form with absent, `null`, empty lists and empty
/// objects treated alike — Go's semantic equality equates nil and empty
/// slices/maps and zero-valued structs. Known approximations: a nil vs empty
/// pointer-to-struct (e.g. `securityContext: {}` vs absent) compares equal,
/// and quantities are compared textually (`"1000m"` ≠ `"1"`); objects read
/// from the API server carry canonical quantities, so this does not arise in
/// practice.
pub fn equal_ignore_hash(template1: &PodTemplateSpec, template2: &PodTemplateSpec) -> bool {
    fn strip(t: &PodTemplateSpec) -> PodTemplateSpec {
        let mut t = t.clone();
        if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.remove(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
        }
        t
    }
    let (t1, t2) = (strip(template1), strip(template2));
    match (serde_json::to_value(&t1), serde_json::to_value(&t2)) {
        (Ok(mut v1), Ok(mut v2)) => {
            prune_empty(&mut v1);
            prune_empty(&mut v2);
            v1 == v2
        }
        // Serialisation only fails on unrepresentable timestamps; fall back to
        // structural equality rather than guessing.
        _ => t1 == t2,
    }
}

/// Removes `null`, empty arrays and empty objects from objects, bottom-up.
/// Array elements are never removed (that would change the list length).
fn prune_empty(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for child in map.values_mut() {
                prune_empty(child);
            }
            map.retain(|_, child| !is_empty_value(child));
        }
        Value::Array(items) => items.iter_mut().for_each(prune_empty),
        _ => {}
    }
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The ReplicaSet whose template matches the Deployment's, if any.
///
/// Several may match (e.g. after an upgrade changed the hashing); the oldest
/// by creation timestamp (then name) wins so that the choice is stable.
pub fn find_new_replica_set<'a>(
    deployment: &Deployment,
    rs_list: &[&'a ReplicaSet],
) -> Option<&'a ReplicaSet> {
    let default_template = PodTemplateSpec::default();
    let d_template = deployment
        .spec
        .as_ref()
        .map(|s| &s.template)
        .unwrap_or(&default_template);
    let mut sorted = rs_list.to_vec();
    sort_replica_sets_by_creation_timestamp(&mut sorted);
    sorted
        .into_iter()
        .find(|rs| equal_ignore_hash(rs_template(rs).unwrap_or(&default_template), d_template))
}

/// Splits the Deployment's ReplicaSets, excluding the new one, into
/// `(all_old, old_with_nonzero_replicas)`, both in creation-timestamp order.
///
/// NOTE: upstream returns the pair the other way round (active first).
/// The new ReplicaSet is recognised by UID, or by identity when it has no
/// UID (objects not yet persisted).
pub fn find_old_replica_sets<'a>(
    deployment: &Deployment,
    rs_list: &[&'a ReplicaSet],
) -> (Vec<&'a ReplicaSet>, Vec<&'a ReplicaSet>) {
    let new_rs = find_new_replica_set(deployment, rs_list);
    let is_new = |rs: &ReplicaSet| {
        new_rs.is_some_and(|n| {
            std::ptr::eq(n, rs) || (n.metadata.uid.is_some() && n.metadata.uid == rs.metadata.uid)
        })
    };
    let mut sorted = rs_list.to_vec();
    sort_replica_sets_by_creation_timestamp(&mut sorted);
    let all: Vec<&'a ReplicaSet> = sorted.into_iter().filter(|rs| !is_new(rs)).collect();
    let active = all
        .iter()
        .copied()
        .filter(|rs| replica_set_replicas(rs) != 0)
        .collect();
    (all, active)
}

/// Sum of `spec.replicas`.
pub fn get_replica_count_for_replica_sets<R: Borrow<ReplicaSet>>(rss: &[R]) -> i32 {
    rss.iter().fold(0i32, |acc, rs| {
        acc.wrapping_add(replica_set_replicas(rs.borrow()))
    })
}

/// Sum of `status.replicas` (pods that exist, ready or not).
pub fn get_actual_replica_count_for_replica_sets<R: Borrow<ReplicaSet>>(rss: &[R]) -> i32 {
    sum_status(rss, |s| s.replicas)
}

/// Sum of `status.readyReplicas`.
pub fn get_ready_replica_count_for_replica_sets<R: Borrow<ReplicaSet>>(rss: &[R]) -> i32 {
    sum_status(rss, |s| s.ready_replicas.unwrap_or(0))
}

/// Sum of `status.availableReplicas`.
pub fn get_available_replica_count_for_replica_sets<R: Borrow<ReplicaSet>>(rss: &[R]) -> i32 {
    sum_status(rss, |s| s.available_replicas.unwrap_or(0))
}

fn sum_status<R: Borrow<ReplicaSet>>(rss: &[R], f: impl Fn(&ReplicaSetStatus) -> i32) -> i32 {
    rss.iter().fold(0i32, |acc, rs| {
        acc.wrapping_add(rs_status(rs.borrow()).map(&f).unwrap_or(0))
    })
}

/// ReplicaSets with a non-zero desired size, in input order.
pub fn filter_active_replica_sets<'a>(rss: &[&'a ReplicaSet]) -> Vec<&'a ReplicaSet> {
    filter_replica_sets(rss, |rs| replica_set_replicas(rs) > 0)
}

/// ReplicaSets matching `pred`, in input order.
pub fn filter_replica_sets<'a>(
    rss: &[&'a ReplicaSet],
    pred: impl Fn(&ReplicaSet) -> bool,
) -> Vec<&'a ReplicaSet> {
    rss.iter().copied().filter(|rs| pred(rs)).collect()
}

// ---------------------------------------------------------------------------
// Status predicates
// ---------------------------------------------------------------------------

/// Whether the strategy is a rolling update (the API default when unset).
pub fn is_rolling_update(deployment: &Deployment) -> bool {
    strategy_type(deployment) == ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE
}

/// A rollout is complete once every desired replica is updated and available,
/// no extra (old) pods remain, and the status reflects the latest spec.
pub fn deployment_complete(deployment: &Deployment, new_status: &DeploymentStatus) -> bool {
    let replicas = deployment_replicas(deployment);
    new_status.updated_replicas.unwrap_or(0) == replicas
        && new_status.replicas.unwrap_or(0) == replicas
        && new_status.available_replicas.unwrap_or(0) == replicas
        && new_status.observed_generation.unwrap_or(0)
            >= deployment.metadata.generation.unwrap_or(0)
}

/// Whether `new_status` shows progress over the Deployment's current status:
/// more updated, ready or available pods, or fewer old pods.
pub fn deployment_progressing(deployment: &Deployment, new_status: &DeploymentStatus) -> bool {
    let default_status = DeploymentStatus::default();
    let old = deployment.status.as_ref().unwrap_or(&default_status);
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old_pods = n(old.replicas) - n(old.updated_replicas);
    let new_old_pods = n(new_status.replicas) - n(new_status.updated_replicas);
    n(new_status.updated_replicas) > n(old.updated_replicas)
        || new_old_pods < old_old_pods
        || n(new_status.ready_replicas) > n(old.ready_replicas)
        || n(new_status.available_replicas) > n(old.available_replicas)
}

/// Whether the rollout has exceeded its progress deadline as of `now`.
///
/// Judged from the Progressing condition in `new_status`: absent → no
/// basis, not timed out; reason NewReplicaSetAvailable → the last rollout
/// finished, not timed out; reason ProgressDeadlineExceeded → already timed
/// out. Otherwise timed out when `lastUpdateTime + deadline < now`. A
/// missing `lastUpdateTime` behaves like Go's zero time (long ago).
pub fn deployment_timed_out(
    deployment: &Deployment,
    new_status: &DeploymentStatus,
    now: Timestamp,
) -> bool {
    if !has_progress_deadline(deployment) {
        return false;
    }
    let Some(condition) = get_deployment_condition(new_status, DEPLOYMENT_PROGRESSING) else {
        return false;
    };
    match condition.reason.as_deref().unwrap_or("") {
        NEW_RS_AVAILABLE_REASON => return false,
        TIMED_OUT_REASON => return true,
        _ => {}
    }
    let deadline = deployment
        .spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .unwrap_or(0);
    let Some(from) = condition.last_update_time.as_ref() else {
        return true;
    };
    match from
        .0
        .checked_add(SignedDuration::from_secs(i64::from(deadline)))
    {
        Ok(expiry) => expiry < now,
        // The deadline lies beyond the representable range: not reached.
        Err(_) => false,
    }
}

/// Whether a progress deadline applies (`i32::MAX` means "never").
pub fn has_progress_deadline(deployment: &Deployment) -> bool {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .is_some_and(|v| v != i32::MAX)
}

/// Whether old ReplicaSets are pruned (`i32::MAX` means "keep all").
pub fn has_revision_history_limit(deployment: &Deployment) -> bool {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .is_some_and(|v| v != i32::MAX)
}

// ---------------------------------------------------------------------------
// Template hashing
// ---------------------------------------------------------------------------

pub use crate::history::{safe_encode_string, SAFE_ALPHANUMS};

pub use crate::history::compute_hash;
#[cfg(test)]
use crate::history::fnv1a32;

// ---------------------------------------------------------------------------
// Ordering
// ---------------------------------------------------------------------------

/// Oldest first; ties broken by name so the order is total and stable.
/// A missing timestamp sorts first, like Go's zero time.
pub fn cmp_by_creation_timestamp(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    a.metadata
        .creation_timestamp
        .cmp(&b.metadata.creation_timestamp)
        .then_with(|| name_of(&a.metadata).cmp(name_of(&b.metadata)))
}

/// Largest first; equal sizes oldest first. Used when scaling up, so the
/// surplus goes to the biggest, oldest ReplicaSets.
pub fn cmp_by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    replica_set_replicas(b)
        .cmp(&replica_set_replicas(a))
        .then_with(|| cmp_by_creation_timestamp(a, b))
}

/// Largest first; equal sizes newest first. Used when scaling down, so the
/// newest of equally sized ReplicaSets shrinks first.
pub fn cmp_by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    replica_set_replicas(b)
        .cmp(&replica_set_replicas(a))
        .then_with(|| cmp_by_creation_timestamp(b, a))
}

/// Lowest revision first; equal revisions by creation timestamp then name.
///
/// Upstream falls back to timestamps whenever either revision is unparsable,
/// which is not a total order (Rust's sort requires one); here unparsable
/// revisions count as 0, the same value a missing annotation has.
pub fn cmp_by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let rev = |rs: &ReplicaSet| revision(&rs.metadata).unwrap_or(0);
    rev(a)
        .cmp(&rev(b))
        .then_with(|| cmp_by_creation_timestamp(a, b))
}

/// Sorts oldest first (see [`cmp_by_creation_timestamp`]).
pub fn sort_replica_sets_by_creation_timestamp<R: Borrow<ReplicaSet>>(rss: &mut [R]) {
    rss.sort_by(|a, b| cmp_by_creation_timestamp(a.borrow(), b.borrow()));
}

/// Sorts largest first, ties oldest first (see [`cmp_by_size_older`]).
pub fn sort_replica_sets_by_size_older<R: Borrow<ReplicaSet>>(rss: &mut [R]) {
    rss.sort_by(|a, b| cmp_by_size_older(a.borrow(), b.borrow()));
}

/// Sorts largest first, ties newest first (see [`cmp_by_size_newer`]).
pub fn sort_replica_sets_by_size_newer<R: Borrow<ReplicaSet>>(rss: &mut [R]) {
    rss.sort_by(|a, b| cmp_by_size_newer(a.borrow(), b.borrow()));
}

/// Sorts lowest revision first (see [`cmp_by_revision`]).
pub fn sort_replica_sets_by_revision<R: Borrow<ReplicaSet>>(rss: &mut [R]) {
    rss.sort_by(|a, b| cmp_by_revision(a.borrow(), b.borrow()));
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        DeploymentSpec, DeploymentStrategy, ReplicaSetSpec, RollingUpdateDeployment,
    };
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    fn deployment(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some(ROLLING_UPDATE_DEPLOYMENT_STRATEGY_TYPE.into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(surge),
                        max_unavailable: Some(unavailable),
                    }),
                }),
                template: template("nginx:1"),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    fn rs(name: &str, replicas: i32, created: i64, tmpl: PodTemplateSpec) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(Time(ts(created))),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                template: Some(tmpl),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn with_annotations(mut rs: ReplicaSet, pairs: &[(&str, &str)]) -> ReplicaSet {
        rs.metadata.annotations = Some(labels(pairs));
        rs
    }

    fn with_status(mut rs: ReplicaSet, actual: i32, ready: i32, available: i32) -> ReplicaSet {
        rs.status = Some(ReplicaSetStatus {
            replicas: actual,
            ready_replicas: Some(ready),
            available_replicas: Some(available),
            ..Default::default()
        });
        rs
    }

    fn names(rss: &[&ReplicaSet]) -> Vec<String> {
        rss.iter()
            .map(|r| name_of(&r.metadata).to_string())
            .collect()
    }

    // -- constants -----------------------------------------------------------

    #[test]
    fn constants_match_upstream_strings() {
        assert_eq!(REVISION_ANNOTATION, "deployment.kubernetes.io/revision");
        assert_eq!(
            REVISION_HISTORY_ANNOTATION,
            "deployment.kubernetes.io/revision-history"
        );
        assert_eq!(FAILED_RS_CREATE_REASON, "ReplicaSetCreateError");
        assert_eq!(ROLLBACK_DONE, "DeploymentRollback");
        assert_eq!(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, "pod-template-hash");
        assert!(skip_copy_annotation(LAST_APPLIED_CONFIG_ANNOTATION));
        assert!(skip_copy_annotation("deprecated.deployment.rollback.to"));
        assert!(!skip_copy_annotation("team"));
        assert_eq!(
            rollback_done_message("web", 3),
            "Rolled back deployment \"web\" to revision 3"
        );
    }

    // -- intstr and fenceposts -----------------------------------------------

    #[test]
    fn scaled_value_rounding_and_errors() {
        let f = get_scaled_value_from_int_or_percent;
        assert_eq!(f(&pct("25%"), 10, true), Ok(3));
        assert_eq!(f(&pct("25%"), 10, false), Ok(2));
        assert_eq!(f(&pct("50%"), 3, true), Ok(2));
        assert_eq!(f(&pct("50%"), 3, false), Ok(1));
        assert_eq!(f(&pct("0%"), 100, true), Ok(0));
        assert_eq!(f(&pct("+10%"), 10, true), Ok(1));
        assert_eq!(f(&IntOrString::Int(7), 100, false), Ok(7));
        assert!(f(&pct("5"), 10, true).is_err());
        assert!(f(&pct("abc%"), 10, true).is_err());
        assert!(f(&pct("%"), 10, true).is_err());
        assert!(f(&pct("5 %"), 10, true).is_err());
        assert!(f(&pct("10%%"), 10, true).is_err());
    }

    #[test]
    fn resolve_fenceposts_cases() {
        let r = |s: Option<&str>, u: Option<&str>, d| {
            resolve_fenceposts(s.map(pct).as_ref(), u.map(pct).as_ref(), d)
        };
        assert_eq!(r(Some("25%"), Some("25%"), 10), Ok((3, 2)));
        assert_eq!(r(Some("0%"), Some("0%"), 0), Ok((0, 1)));
        assert_eq!(r(Some("39%"), Some("39%"), 10), Ok((4, 3)));
        assert_eq!(r(None, Some("39%"), 10), Ok((0, 3)));
        assert_eq!(r(Some("39%"), None, 10), Ok((4, 0)));
        assert_eq!(r(None, None, 10), Ok((0, 1)));
        // 1% of 2 rounds down to zero unavailability, surge 0 -> forced to 1.
        assert_eq!(r(Some("0%"), Some("1%"), 2), Ok((0, 1)));
        assert!(r(Some("oops"), Some("39%"), 10).is_err());
        assert!(r(Some("55%"), Some("urg"), 10).is_err());
    }

    #[test]
    fn max_surge_unavailable_min_available() {
        let d = deployment(10, pct("25%"), pct("25%"));
        assert_eq!(max_surge(&d), 3);
        assert_eq!(max_unavailable(&d), 2);
        assert_eq!(min_available(&d), 8);

        // Unavailability is capped at the replica count.
        let d = deployment(1, IntOrString::Int(0), IntOrString::Int(5));
        assert_eq!(max_unavailable(&d), 1);
        assert_eq!(min_available(&d), 0);

        // Zero replicas -> nothing may be unavailable.
        let d = deployment(0, IntOrString::Int(1), IntOrString::Int(1));
        assert_eq!(max_unavailable(&d), 0);

        // Both zero -> unavailable 1.
        let d = deployment(10, IntOrString::Int(0), IntOrString::Int(0));
        assert_eq!(max_surge(&d), 0);
        assert_eq!(max_unavailable(&d), 1);

        // Recreate: no surge, no unavailability bound, no minimum.
        let mut d = deployment(10, pct("25%"), pct("25%"));
        d.spec.as_mut().unwrap().strategy = Some(DeploymentStrategy {
            type_: Some(RECREATE_DEPLOYMENT_STRATEGY_TYPE.into()),
            rolling_update: None,
        });
        assert_eq!(max_surge(&d), 0);
        assert_eq!(max_unavailable(&d), 0);
        assert_eq!(min_available(&d), 0);

        // Unset strategy gets the API defaults: RollingUpdate, 25%/25%.
        let mut d = deployment(4, pct("0%"), pct("0%"));
        d.spec.as_mut().unwrap().strategy = None;
        assert!(is_rolling_update(&d));
        assert_eq!(max_surge(&d), 1);
        assert_eq!(max_unavailable(&d), 1);
    }

    // -- proportional scaling -----------------------------------------------

    #[test]
    fn replica_set_fraction_and_proportion() {
        // Deployment scaled from 10 (+3 surge = 13) to 20 (+5 surge = 25).
        let mut d = deployment(20, pct("25%"), pct("25%"));
        d.status = Some(DeploymentStatus {
            replicas: Some(13),
            ..Default::default()
        });
        let a = with_annotations(
            rs("a", 8, 1, template("x")),
            &[(MAX_REPLICAS_ANNOTATION, "13")],
        );
        let b = with_annotations(
            rs("b", 5, 2, template("y")),
            &[(MAX_REPLICAS_ANNOTATION, "13")],
        );
        // 8*25/13 = 15.38 -> 15 -> +7 ; 5*25/13 = 9.6 -> 10 -> +5
        assert_eq!(get_replica_set_fraction(&a, &d), 7);
        assert_eq!(get_replica_set_fraction(&b, &d), 5);
        assert_eq!(get_proportion(Some(&a), &d, 12, 0), 7);
        // Only 5 left to hand out after the first got 7.
        assert_eq!(get_proportion(Some(&b), &d, 12, 7), 5);
        // Bounded by what remains.
        assert_eq!(get_proportion(Some(&b), &d, 12, 10), 2);
        assert_eq!(get_proportion(Some(&b), &d, 12, 12), 0);
        assert_eq!(get_proportion(None, &d, 12, 0), 0);
        assert_eq!(get_proportion(Some(&a), &d, 0, 0), 0);

        // Without annotation the current status.replicas is the denominator.
        let c = rs("c", 8, 3, template("z"));
        assert_eq!(get_replica_set_fraction(&c, &d), 7);

        // Scale down from 25 to 10 (+3 = 13): negative fractions, bounded below.
        let mut down = deployment(10, pct("25%"), pct("25%"));
        down.status = Some(DeploymentStatus {
            replicas: Some(25),
            ..Default::default()
        });
        let big = with_annotations(
            rs("big", 15, 1, template("x")),
            &[(MAX_REPLICAS_ANNOTATION, "25")],
        );
        // 15*13/25 = 7.8 -> 8 -> -7
        assert_eq!(get_replica_set_fraction(&big, &down), -7);
        assert_eq!(get_proportion(Some(&big), &down, -12, 0), -7);
        assert_eq!(get_proportion(Some(&big), &down, -12, -8), -4);

        // Scaling the deployment to zero removes the whole ReplicaSet.
        let zero = deployment(0, pct("25%"), pct("25%"));
        assert_eq!(get_replica_set_fraction(&big, &zero), -15);

        // Empty ReplicaSets never take part.
        let empty = rs("e", 0, 1, template("x"));
        assert_eq!(get_proportion(Some(&empty), &d, 12, 0), 0);
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(round_to_i32(2.5), 3);
        assert_eq!(round_to_i32(2.49), 2);
        assert_eq!(round_to_i32(-2.5), -3);
        assert_eq!(round_to_i32(-2.49), -2);
    }

    // -- new replica count ---------------------------------------------------

    #[test]
    fn new_rs_new_replicas_cases() {
        let other = rs("old", 5, 1, template("old"));

        // Rolling, cannot scale up: total (5+5) >= 1+1.
        let d = deployment(1, IntOrString::Int(1), IntOrString::Int(1));
        let new = rs("new", 5, 2, template("nginx:1"));
        assert_eq!(new_rs_new_replicas(&d, &[&other, &new], &new), Ok(5));

        // Rolling, scale up but never past spec.replicas: 6 desired, surge 10.
        let d = deployment(6, IntOrString::Int(10), IntOrString::Int(1));
        let new = rs("new", 2, 2, template("nginx:1"));
        assert_eq!(new_rs_new_replicas(&d, &[&other, &new], &new), Ok(6));

        // Rolling, bounded by surge: 10 desired, 25% surge -> max 13 pods;
        // 10 old + 0 new -> new may grow to 3.
        let d = deployment(10, pct("25%"), pct("25%"));
        let old10 = rs("old", 10, 1, template("old"));
        let new = rs("new", 0, 2, template("nginx:1"));
        assert_eq!(new_rs_new_replicas(&d, &[&old10, &new], &new), Ok(3));

        // Recreate jumps straight to spec.replicas.
        let mut d = deployment(3, IntOrString::Int(1), IntOrString::Int(1));
        d.spec.as_mut().unwrap().strategy.as_mut().unwrap().type_ =
            Some(RECREATE_DEPLOYMENT_STRATEGY_TYPE.into());
        let new = rs("new", 1, 2, template("nginx:1"));
        assert_eq!(new_rs_new_replicas(&d, &[&other, &new], &new), Ok(3));

        // Unknown strategies and invalid surge are errors.
        d.spec.as_mut().unwrap().strategy.as_mut().unwrap().type_ = Some("Bogus".into());
        assert!(new_rs_new_replicas(&d, &[&new], &new).is_err());
        let d = deployment(3, pct("x"), IntOrString::Int(1));
        assert!(new_rs_new_replicas(&d, &[&new], &new).is_err());
    }

    #[test]
    fn saturation() {
        let d = deployment(3, pct("25%"), pct("25%"));
        let base = with_status(rs("a", 3, 1, template("x")), 3, 3, 3);
        assert!(!is_saturated(&d, None));
        assert!(!is_saturated(&d, Some(&base)), "missing annotation");
        let ok = with_annotations(base.clone(), &[(DESIRED_REPLICAS_ANNOTATION, "3")]);
        assert!(is_saturated(&d, Some(&ok)));
        let wrong = with_annotations(base.clone(), &[(DESIRED_REPLICAS_ANNOTATION, "2")]);
        assert!(!is_saturated(&d, Some(&wrong)));
        let junk = with_annotations(base.clone(), &[(DESIRED_REPLICAS_ANNOTATION, "x")]);
        assert!(!is_saturated(&d, Some(&junk)));
        let unavailable = with_status(ok.clone(), 3, 3, 2);
        assert!(!is_saturated(&d, Some(&unavailable)));
    }

    #[test]
    fn active_or_latest() {
        let new = rs("new", 0, 30, template("n"));
        let old1 = rs("old1", 0, 10, template("o1"));
        let old2 = rs("old2", 0, 20, template("o2"));
        let active_old = rs("old3", 2, 5, template("o3"));
        let active_new = rs("new2", 4, 40, template("n2"));

        assert!(find_active_or_latest(None, &[]).is_none());
        // Nothing active: prefer the new RS, otherwise the newest old one.
        assert_eq!(
            find_active_or_latest(Some(&new), &[&old1, &old2]).map(|r| &r.metadata.name),
            Some(&Some("new".to_string()))
        );
        let latest = find_active_or_latest(None, &[&old1, &old2]).unwrap();
        assert_eq!(name_of(&latest.metadata), "old2");
        // Exactly one active.
        let one = find_active_or_latest(Some(&new), &[&old1, &active_old]).unwrap();
        assert_eq!(name_of(&one.metadata), "old3");
        // Several active -> proportional scaling needed.
        assert!(find_active_or_latest(Some(&active_new), &[&active_old]).is_none());
    }

    // -- replica annotations ---------------------------------------------------

    #[test]
    fn replicas_annotations() {
        let mut r = rs("a", 1, 1, template("x"));
        assert!(replicas_annotations_need_update(&r, 10, 11));
        assert!(set_replicas_annotations(&mut r, 10, 11));
        assert_eq!(get_desired_replicas_annotation(&r), Some(10));
        assert_eq!(get_max_replicas_annotation(&r), Some(11));
        assert!(!replicas_annotations_need_update(&r, 10, 11));
        assert!(!set_replicas_annotations(&mut r, 10, 11));
        assert!(replicas_annotations_need_update(&r, 10, 12));
        assert!(replicas_annotations_need_update(&r, 9, 11));
        assert!(set_replicas_annotations(&mut r, 10, 12));
        assert_eq!(get_max_replicas_annotation(&r), Some(12));

        let junk = with_annotations(
            rs("b", 1, 1, template("x")),
            &[(DESIRED_REPLICAS_ANNOTATION, "ten")],
        );
        assert_eq!(get_desired_replicas_annotation(&junk), None);
        assert_eq!(get_int_from_annotation(&junk, "absent"), None);
    }

    // -- conditions -------------------------------------------------------------

    #[test]
    fn condition_lifecycle() {
        let mut status = DeploymentStatus::default();
        assert!(get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).is_none());

        let c1 = new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_TRUE,
            REPLICA_SET_UPDATED_REASON,
            "m1",
            ts(100),
        );
        assert_eq!(c1.last_update_time, Some(Time(ts(100))));
        assert_eq!(c1.last_transition_time, Some(Time(ts(100))));
        set_deployment_condition(&mut status, c1.clone());
        assert_eq!(
            get_deployment_condition(&status, DEPLOYMENT_PROGRESSING),
            Some(&c1)
        );

        // Same status and reason: nothing changes, not even the message/time.
        let same = new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_TRUE,
            REPLICA_SET_UPDATED_REASON,
            "m2",
            ts(200),
        );
        set_deployment_condition(&mut status, same);
        assert_eq!(
            get_deployment_condition(&status, DEPLOYMENT_PROGRESSING),
            Some(&c1)
        );

        // Same status, new reason: replaced, transition time kept.
        let reason = new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_TRUE,
            NEW_RS_AVAILABLE_REASON,
            "m3",
            ts(300),
        );
        set_deployment_condition(&mut status, reason);
        let got = get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).unwrap();
        assert_eq!(got.reason.as_deref(), Some(NEW_RS_AVAILABLE_REASON));
        assert_eq!(got.last_update_time, Some(Time(ts(300))));
        assert_eq!(got.last_transition_time, Some(Time(ts(100))));

        // Status flips: transition time moves.
        let flip = new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_FALSE,
            TIMED_OUT_REASON,
            "",
            ts(400),
        );
        set_deployment_condition(&mut status, flip);
        let got = get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).unwrap();
        assert_eq!(got.last_transition_time, Some(Time(ts(400))));
        assert_eq!(got.message, None);

        // Other types coexist; only one condition per type.
        let avail = new_deployment_condition(
            DEPLOYMENT_AVAILABLE,
            CONDITION_TRUE,
            MINIMUM_REPLICAS_AVAILABLE,
            "",
            ts(500),
        );
        set_deployment_condition(&mut status, avail);
        assert_eq!(status.conditions.as_ref().unwrap().len(), 2);

        remove_deployment_condition(&mut status, DEPLOYMENT_PROGRESSING);
        assert!(get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).is_none());
        assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
        remove_deployment_condition(&mut status, DEPLOYMENT_AVAILABLE);
        assert_eq!(status.conditions, None);
    }

    #[test]
    fn replica_set_condition_promotion() {
        let rc = ReplicaSetCondition {
            type_: REPLICA_SET_REPLICA_FAILURE.into(),
            status: CONDITION_TRUE.into(),
            last_transition_time: Some(Time(ts(42))),
            reason: Some("FailedCreate".into()),
            message: Some("quota".into()),
        };
        let status = ReplicaSetStatus {
            conditions: Some(vec![rc.clone()]),
            ..Default::default()
        };
        assert_eq!(
            get_replica_set_condition(&status, REPLICA_SET_REPLICA_FAILURE),
            Some(&rc)
        );
        let dc = replica_set_to_deployment_condition(&rc);
        assert_eq!(dc.type_, DEPLOYMENT_REPLICA_FAILURE);
        assert_eq!(dc.last_update_time, Some(Time(ts(42))));
        assert_eq!(dc.last_transition_time, Some(Time(ts(42))));
        assert_eq!(dc.message.as_deref(), Some("quota"));
    }

    // -- revisions ----------------------------------------------------------------

    #[test]
    fn revision_parsing_and_max_last() {
        let r = |name: &str, rev: Option<&str>| {
            let base = rs(name, 1, 1, template("x"));
            match rev {
                Some(v) => with_annotations(base, &[(REVISION_ANNOTATION, v)]),
                None => base,
            }
        };
        assert_eq!(revision(&r("a", None).metadata), Ok(0));
        assert_eq!(revision(&r("a", Some("7")).metadata), Ok(7));
        assert!(revision(&r("a", Some("x")).metadata).is_err());
        assert!(revision(&r("a", Some("")).metadata).is_err());

        let set = [
            r("a", Some("3")),
            r("b", Some("9")),
            r("c", Some("bad")),
            r("d", Some("5")),
        ];
        assert_eq!(max_revision(&set), 9);
        assert_eq!(last_revision(&set), 5);
        assert_eq!(max_revision::<ReplicaSet>(&[]), 0);
        assert_eq!(last_revision(&[r("a", Some("4"))]), 0);
        assert_eq!(last_revision(&[r("a", Some("4")), r("b", Some("4"))]), 4);
    }

    #[test]
    fn deployment_revision() {
        let mut d = deployment(1, pct("25%"), pct("25%"));
        assert!(set_deployment_revision(&mut d, "3"));
        assert!(!set_deployment_revision(&mut d, "3"));
        assert!(set_deployment_revision(&mut d, "4"));
        assert_eq!(revision(&d.metadata), Ok(4));
    }

    #[test]
    fn revision_history_is_trimmed_to_limit() {
        let d = deployment(1, pct("25%"), pct("25%"));
        let mut r = rs("a", 1, 1, template("x"));
        for i in 10..20 {
            let next = (i + 1).to_string();
            set_new_replica_set_annotations(&d, &mut r, &next, true, 5);
            let ann = r.metadata.annotations.as_ref().unwrap();
            assert_eq!(ann.get(REVISION_ANNOTATION), Some(&next));
            match i {
                10 => assert_eq!(ann.get(REVISION_HISTORY_ANNOTATION), None),
                11 => assert_eq!(ann.get(REVISION_HISTORY_ANNOTATION).unwrap(), "11"),
                _ => assert_eq!(
                    ann.get(REVISION_HISTORY_ANNOTATION).unwrap(),
                    &format!("{},{}", i - 1, i)
                ),
            }
        }

        // A single entry that can never fit leaves the history untouched.
        let mut r = with_annotations(
            rs("b", 1, 1, template("x")),
            &[
                (REVISION_ANNOTATION, "100"),
                (REVISION_HISTORY_ANNOTATION, "1,2"),
            ],
        );
        assert!(set_new_replica_set_annotations(&d, &mut r, "101", true, 2));
        let ann = r.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann.get(REVISION_ANNOTATION).unwrap(), "101");
        assert_eq!(ann.get(REVISION_HISTORY_ANNOTATION).unwrap(), "1,2");

        // Plenty of room: appended.
        let mut r = with_annotations(
            rs("c", 1, 1, template("x")),
            &[
                (REVISION_ANNOTATION, "4"),
                (REVISION_HISTORY_ANNOTATION, "1,2"),
            ],
        );
        set_new_replica_set_annotations(&d, &mut r, "5", true, MAX_REV_HISTORY_LENGTH_IN_CHARS);
        assert_eq!(
            r.metadata
                .annotations
                .as_ref()
                .unwrap()
                .get(REVISION_HISTORY_ANNOTATION)
                .unwrap(),
            "1,2,4"
        );
    }

    #[test]
    fn new_replica_set_annotations_rules() {
        let mut d = deployment(10, pct("25%"), pct("25%"));
        d.metadata.annotations = Some(labels(&[
            ("team", "a"),
            (REVISION_ANNOTATION, "99"),
            (LAST_APPLIED_CONFIG_ANNOTATION, "{}"),
        ]));

        // Brand-new RS: copies user annotations, sets revision and replica annotations.
        let mut r = rs("a", 0, 1, template("x"));
        assert!(set_new_replica_set_annotations(
            &d, &mut r, "3", false, 2000
        ));
        let ann = r.metadata.annotations.clone().unwrap();
        assert_eq!(ann.get("team").unwrap(), "a");
        assert_eq!(ann.get(REVISION_ANNOTATION).unwrap(), "3");
        assert_eq!(ann.get(DESIRED_REPLICAS_ANNOTATION).unwrap(), "10");
        assert_eq!(ann.get(MAX_REPLICAS_ANNOTATION).unwrap(), "13");
        assert!(!ann.contains_key(LAST_APPLIED_CONFIG_ANNOTATION));
        assert!(!ann.contains_key(REVISION_HISTORY_ANNOTATION));

        // Nothing to do the second time round.
        assert!(!set_new_replica_set_annotations(
            &d, &mut r, "3", true, 2000
        ));
        // Revision is never lowered.
        assert!(!set_new_replica_set_annotations(
            &d, &mut r, "2", true, 2000
        ));
        assert_eq!(revision(&r.metadata), Ok(3));

        // Bad revisions report "unchanged".
        assert!(!set_new_replica_set_annotations(
            &d, &mut r, "x", true, 2000
        ));
        let mut bad = with_annotations(rs("b", 0, 1, template("x")), &[(REVISION_ANNOTATION, "x")]);
        assert!(!set_new_replica_set_annotations(
            &d, &mut bad, "4", true, 2000
        ));

        // An empty revision annotation counts as 0 but is "present": the
        // history records the empty value, as upstream does.
        let mut empty =
            with_annotations(rs("c", 0, 1, template("x")), &[(REVISION_ANNOTATION, "")]);
        assert!(set_new_replica_set_annotations(
            &d, &mut empty, "4", true, 2000
        ));
        let ann = empty.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann.get(REVISION_ANNOTATION).unwrap(), "4");
        assert_eq!(ann.get(REVISION_HISTORY_ANNOTATION).unwrap(), "");
    }

    #[test]
    fn annotation_copy_and_rollback() {
        let mut d = deployment(1, pct("25%"), pct("25%"));
        d.metadata.annotations = Some(labels(&[
            ("team", "a"),
            (REVISION_ANNOTATION, "5"),
            (LAST_APPLIED_CONFIG_ANNOTATION, "{}"),
        ]));
        let mut r = with_annotations(
            rs("a", 1, 1, template("x")),
            &[("rs-only", "1"), ("team", "a")],
        );
        assert!(!copy_deployment_annotations_to_replica_set(&d, &mut r));
        d.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("team".into(), "b".into());
        assert!(copy_deployment_annotations_to_replica_set(&d, &mut r));
        let ann = r.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann.get("team").unwrap(), "b");
        assert_eq!(ann.get("rs-only").unwrap(), "1");
        assert!(!ann.contains_key(REVISION_ANNOTATION));

        let skipped = get_skipped_annotations(d.metadata.annotations.as_ref().unwrap());
        assert_eq!(
            skipped,
            labels(&[
                (REVISION_ANNOTATION, "5"),
                (LAST_APPLIED_CONFIG_ANNOTATION, "{}")
            ])
        );

        let target = with_annotations(
            rs("old", 1, 1, template("x")),
            &[
                ("team", "old"),
                (REVISION_ANNOTATION, "2"),
                (DESIRED_REPLICAS_ANNOTATION, "1"),
            ],
        );
        set_deployment_annotations_to(&mut d, &target);
        assert_eq!(
            d.metadata.annotations.unwrap(),
            labels(&[
                ("team", "old"),
                (REVISION_ANNOTATION, "5"),
                (LAST_APPLIED_CONFIG_ANNOTATION, "{}")
            ])
        );
    }

    #[test]
    fn rollback_template_drops_hash_label() {
        let mut d = deployment(1, pct("25%"), pct("25%"));
        let mut t = template("nginx:2");
        t.metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "abc".into());
        set_from_replica_set_template(&mut d, &t);
        assert_eq!(d.spec.as_ref().unwrap().template, template("nginx:2"));
    }

    // -- labels -------------------------------------------------------------------

    #[test]
    fn label_cloning() {
        let base = labels(&[("app", "web")]);
        let added = clone_and_add_label(Some(&base), "k", "v");
        assert_eq!(added, labels(&[("app", "web"), ("k", "v")]));
        assert_eq!(base.len(), 1);
        assert_eq!(clone_and_add_label(None, "", "v"), BTreeMap::new());
        assert_eq!(clone_and_remove_label(Some(&added), "k"), base);

        let sel = LabelSelector {
            match_labels: Some(base.clone()),
            ..Default::default()
        };
        let out = clone_selector_and_add_label(&sel, DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, "h");
        assert_eq!(
            out.match_labels.unwrap(),
            labels(&[("app", "web"), (DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, "h")])
        );
        let empty = clone_selector_and_add_label(&LabelSelector::default(), "k", "v");
        assert_eq!(empty.match_labels.unwrap(), labels(&[("k", "v")]));
    }

    // -- template equality and finding ---------------------------------------------

    #[test]
    fn equal_ignore_hash_cases() {
        let a = template("nginx:1");
        let mut hashed = a.clone();
        hashed
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "xyz".into());
        let mut hashed2 = hashed.clone();
        hashed2
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "other".into());
        assert!(equal_ignore_hash(&a, &hashed));
        assert!(equal_ignore_hash(&hashed, &hashed2));
        assert!(!equal_ignore_hash(&a, &template("nginx:2")));

        // A different non-hash label matters.
        let mut relabelled = a.clone();
        relabelled
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert("tier".into(), "fe".into());
        assert!(!equal_ignore_hash(&a, &relabelled));

        // Only the hash label present on one side vs no labels on the other.
        let bare = PodTemplateSpec::default();
        let only_hash = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels(&[(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, "h")])),
                ..Default::default()
            }),
            spec: None,
        };
        assert!(equal_ignore_hash(&bare, &only_hash));

        // Nil vs empty collections and zero-valued structs are equivalent.
        let mut nil_vs_empty = a.clone();
        let spec = nil_vs_empty.spec.as_mut().unwrap();
        spec.volumes = Some(vec![]);
        spec.node_selector = Some(BTreeMap::new());
        spec.containers[0].resources = Some(ResourceRequirements::default());
        spec.containers[0].env = Some(vec![]);
        nil_vs_empty.metadata.as_mut().unwrap().annotations = Some(BTreeMap::new());
        assert!(equal_ignore_hash(&a, &nil_vs_empty));

        // Annotations on the template do matter.
        let mut annotated = a.clone();
        annotated.metadata.as_mut().unwrap().annotations = Some(labels(&[("x", "y")]));
        assert!(!equal_ignore_hash(&a, &annotated));
    }

    #[test]
    fn find_new_picks_oldest_match() {
        let d = deployment(3, pct("25%"), pct("25%"));
        let mut matching = template("nginx:1");
        matching
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), "h1".into());
        let newer = rs("newer", 1, 200, matching.clone());
        let older = rs("older", 1, 100, matching.clone());
        let same_time_b = rs("b", 1, 50, matching.clone());
        let same_time_a = rs("a", 1, 50, matching.clone());
        let unrelated = rs("unrelated", 1, 10, template("nginx:0"));

        let found = find_new_replica_set(&d, &[&newer, &unrelated, &older]).unwrap();
        assert_eq!(name_of(&found.metadata), "older");
        let found = find_new_replica_set(&d, &[&same_time_b, &newer, &same_time_a]).unwrap();
        assert_eq!(name_of(&found.metadata), "a");
        assert!(find_new_replica_set(&d, &[&unrelated]).is_none());
        assert!(find_new_replica_set(&d, &[]).is_none());
    }

    #[test]
    fn find_old_splits_all_and_active() {
        let d = deployment(3, pct("25%"), pct("25%"));
        let new = rs("new", 3, 300, template("nginx:1"));
        let dup_new = rs("dup-new", 1, 400, template("nginx:1"));
        let old_active = rs("old-active", 2, 200, template("nginx:0"));
        let old_empty = rs("old-empty", 0, 100, template("nginx:-1"));

        let (all, active) = find_old_replica_sets(&d, &[&new, &old_active, &dup_new, &old_empty]);
        assert_eq!(names(&all), ["old-empty", "old-active", "dup-new"]);
        assert_eq!(names(&active), ["old-active", "dup-new"]);

        let (all, active) = find_old_replica_sets(&d, &[&old_active]);
        assert_eq!(names(&all), ["old-active"]);
        assert_eq!(names(&active), ["old-active"]);

        // Without UIDs the new RS is recognised by identity.
        let mut new_no_uid = new.clone();
        new_no_uid.metadata.uid = None;
        let mut old_no_uid = old_active.clone();
        old_no_uid.metadata.uid = None;
        let (all, _) = find_old_replica_sets(&d, &[&new_no_uid, &old_no_uid]);
        assert_eq!(names(&all), ["old-active"]);
    }

    #[test]
    fn counts_and_filters() {
        let a = with_status(rs("a", 3, 1, template("x")), 4, 2, 1);
        let b = with_status(rs("b", 0, 2, template("y")), 1, 1, 1);
        let c = rs("c", 2, 3, template("z"));
        let all = [&a, &b, &c];
        assert_eq!(get_replica_count_for_replica_sets(&all), 5);
        assert_eq!(get_actual_replica_count_for_replica_sets(&all), 5);
        assert_eq!(get_ready_replica_count_for_replica_sets(&all), 3);
        assert_eq!(get_available_replica_count_for_replica_sets(&all), 2);
        assert_eq!(names(&filter_active_replica_sets(&all)), ["a", "c"]);
        assert_eq!(
            names(&filter_replica_sets(&all, |r| replica_set_replicas(r) == 0)),
            ["b"]
        );
        // Owned values work too.
        assert_eq!(
            get_replica_count_for_replica_sets(&[a.clone(), c.clone()]),
            5
        );
    }

    // -- status predicates ------------------------------------------------------------

    #[test]
    fn completeness_and_progress() {
        let mut d = deployment(3, pct("25%"), pct("25%"));
        d.metadata.generation = Some(2);
        let status = |replicas, updated, available, ready, observed| DeploymentStatus {
            replicas: Some(replicas),
            updated_replicas: Some(updated),
            available_replicas: Some(available),
            ready_replicas: Some(ready),
            observed_generation: Some(observed),
            ..Default::default()
        };
        assert!(deployment_complete(&d, &status(3, 3, 3, 3, 2)));
        assert!(!deployment_complete(&d, &status(3, 3, 3, 3, 1)));
        assert!(!deployment_complete(&d, &status(4, 3, 3, 3, 2)));
        assert!(!deployment_complete(&d, &status(3, 2, 3, 3, 2)));
        assert!(!deployment_complete(&d, &status(3, 3, 2, 3, 2)));

        d.status = Some(status(5, 2, 2, 2, 2));
        assert!(!deployment_progressing(&d, &status(5, 2, 2, 2, 2)));
        assert!(
            deployment_progressing(&d, &status(5, 3, 2, 2, 2)),
            "more updated"
        );
        assert!(
            deployment_progressing(&d, &status(4, 2, 2, 2, 2)),
            "fewer old"
        );
        assert!(
            deployment_progressing(&d, &status(5, 2, 2, 3, 2)),
            "more ready"
        );
        assert!(
            deployment_progressing(&d, &status(5, 2, 3, 2, 2)),
            "more available"
        );
        assert!(
            !deployment_progressing(&d, &status(6, 2, 1, 1, 2)),
            "regress"
        );
    }

    #[test]
    fn timed_out() {
        let mk = |pds: Option<i32>, reason: &str, from: i64| {
            let mut d = deployment(1, pct("25%"), pct("25%"));
            d.spec.as_mut().unwrap().progress_deadline_seconds = pds;
            let status = DeploymentStatus {
                conditions: Some(vec![new_deployment_condition(
                    DEPLOYMENT_PROGRESSING,
                    CONDITION_TRUE,
                    reason,
                    "",
                    ts(from),
                )]),
                ..Default::default()
            };
            (d, status)
        };
        let now = ts(80);
        let (d, s) = mk(None, "", 69);
        assert!(!deployment_timed_out(&d, &s, now), "no deadline");
        let (d, s) = mk(Some(i32::MAX), "", 69);
        assert!(!deployment_timed_out(&d, &s, now), "infinite deadline");
        let (d, s) = mk(Some(10), "", 69);
        assert!(deployment_timed_out(&d, &s, now), "11s > 10s");
        let (d, s) = mk(Some(10), "", 71);
        assert!(!deployment_timed_out(&d, &s, now), "9s < 10s");
        let (d, s) = mk(Some(10), "", 70);
        assert!(!deployment_timed_out(&d, &s, now), "exactly at deadline");
        let (d, s) = mk(Some(10), NEW_RS_AVAILABLE_REASON, 0);
        assert!(
            !deployment_timed_out(&d, &s, now),
            "previous rollout complete"
        );
        let (d, s) = mk(Some(10), TIMED_OUT_REASON, 79);
        assert!(deployment_timed_out(&d, &s, now), "already timed out");
        let (d, _) = mk(Some(10), "", 0);
        assert!(
            !deployment_timed_out(&d, &DeploymentStatus::default(), now),
            "no condition"
        );
    }

    #[test]
    fn deadline_and_history_limit_flags() {
        let mut d = deployment(1, pct("25%"), pct("25%"));
        assert!(!has_progress_deadline(&d));
        assert!(!has_revision_history_limit(&d));
        let spec = d.spec.as_mut().unwrap();
        spec.progress_deadline_seconds = Some(600);
        spec.revision_history_limit = Some(0);
        assert!(has_progress_deadline(&d));
        assert!(has_revision_history_limit(&d));
        let spec = d.spec.as_mut().unwrap();
        spec.progress_deadline_seconds = Some(i32::MAX);
        spec.revision_history_limit = Some(i32::MAX);
        assert!(!has_progress_deadline(&d));
        assert!(!has_revision_history_limit(&d));
    }

    // -- hashing --------------------------------------------------------------------------

    #[test]
    fn fnv_reference_vectors() {
        assert_eq!(fnv1a32(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv1a32(&[b"a"]), 0xe40c_292c);
        assert_eq!(fnv1a32(&[b"foobar"]), 0xbf9c_f968);
        assert_eq!(fnv1a32(&[b"foo", b"bar"]), 0xbf9c_f968);
    }

    #[test]
    fn safe_encoding_matches_alphabet_mapping() {
        // '0' is code 48 -> 48 % 27 = 21 -> '4'; '6' is 54 -> 0 -> 'b'.
        assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
        assert_eq!(safe_encode_string(""), "");
    }

    #[test]
    fn compute_hash_properties() {
        let t = template("nginx:1");
        let h = compute_hash(&t, None);
        assert_eq!(h, compute_hash(&t.clone(), None), "stable");
        assert!(
            !h.is_empty() && h.len() <= 10,
            "decimal u32 has at most 10 digits"
        );
        assert_ne!(h, compute_hash(&template("nginx:2"), None));
        let c0 = compute_hash(&t, Some(0));
        let c1 = compute_hash(&t, Some(1));
        assert_ne!(h, c0);
        assert_ne!(c0, c1);
        assert_eq!(c1, compute_hash(&t, Some(1)));
        for s in [&h, &c0, &c1, &compute_hash(&t, Some(-1))] {
            assert!(s.bytes().all(|b| SAFE_ALPHANUMS.contains(&b)), "{s}");
        }
        // The hash is a pure function of the serialised template.
        let body = serde_json::to_vec(&t).unwrap();
        assert_eq!(h, safe_encode_string(&fnv1a32(&[&body]).to_string()));
        let trailer = [1u8, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            c1,
            safe_encode_string(&fnv1a32(&[&body, &trailer]).to_string())
        );
    }

    // -- ordering ---------------------------------------------------------------------------

    #[test]
    fn orderings() {
        let a = rs("a", 3, 100, template("x"));
        let b = rs("b", 3, 100, template("x"));
        let c = rs("c", 5, 50, template("x"));
        let d = rs("d", 3, 10, template("x"));
        let mut no_ts = rs("z", 1, 0, template("x"));
        no_ts.metadata.creation_timestamp = None;

        let mut v = vec![&c, &b, &a, &d, &no_ts];
        sort_replica_sets_by_creation_timestamp(&mut v);
        assert_eq!(names(&v), ["z", "d", "c", "a", "b"]);

        sort_replica_sets_by_size_older(&mut v);
        assert_eq!(names(&v), ["c", "d", "a", "b", "z"]);

        sort_replica_sets_by_size_newer(&mut v);
        assert_eq!(names(&v), ["c", "b", "a", "d", "z"]);

        let r = |name: &str, rev: &str, created| {
            with_annotations(
                rs(name, 1, created, template("x")),
                &[(REVISION_ANNOTATION, rev)],
            )
        };
        let mut owned = vec![
            r("r10", "10", 1),
            r("r2", "2", 5),
            r("r2b", "2", 3),
            r("bad", "x", 9),
            r("r1", "1", 7),
        ];
        sort_replica_sets_by_revision(&mut owned);
        let got: Vec<&str> = owned.iter().map(|r| name_of(&r.metadata)).collect();
        assert_eq!(got, ["bad", "r1", "r2b", "r2", "r10"]);
    }
}

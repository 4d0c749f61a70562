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

mod conditions;
pub use conditions::*;

mod revisions;
pub use revisions::*;

mod labels;
pub use labels::*;

mod replicas;
pub use replicas::*;

mod replica_sets;
pub use replica_sets::*;

mod progress;
pub use progress::*;

// ---------------------------------------------------------------------------
// Template hashing
// ---------------------------------------------------------------------------

pub use crate::history::{safe_encode_string, SAFE_ALPHANUMS};

pub use crate::history::compute_hash;
#[cfg(test)]
use crate::history::fnv1a32;

mod ordering;
pub use ordering::*;

#[cfg(test)]
mod tests;

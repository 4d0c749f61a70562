//! Status predicates: complete, progressing, timed out.

use super::*;

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

//! Deployment and ReplicaSet conditions: making, finding, setting and removing them.

use super::*;

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

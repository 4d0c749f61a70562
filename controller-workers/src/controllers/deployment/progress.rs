//! The Progressing condition and the progress deadline (upstream `progress.go`): a
//! rollout that makes no progress for progressDeadlineSeconds is marked
//! ProgressDeadlineExceeded, and a Deployment still in progress is re-checked when its
//! deadline would pass.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::jiff::Timestamp;

use super::sync::{calculate_status, same_status};
use super::util;
use super::Controller;
use crate::meta::ResourceNames;
use crate::store::key_of;

impl Controller {
    pub(super) async fn sync_rollout_status(
        &self,
        all: &[ReplicaSet],
        new_rs: Option<&ReplicaSet>,
        d: &mut Deployment,
    ) -> anyhow::Result<()> {
        let now = Timestamp::now();
        let mut status = calculate_status(all, new_rs, d, now);
        let current_status = d.status.clone().unwrap_or_default();
        let has_deadline = util::has_progress_deadline(d);
        if !has_deadline {
            util::remove_deployment_condition(&mut status, util::DEPLOYMENT_PROGRESSING);
        }
        let current =
            util::get_deployment_condition(&current_status, util::DEPLOYMENT_PROGRESSING).cloned();
        let complete = status.replicas == status.updated_replicas
            && current
                .as_ref()
                .is_some_and(|c| c.reason.as_deref() == Some(util::NEW_RS_AVAILABLE_REASON));
        let d_name = d.name_str().to_string();
        let rs_name = new_rs.and_then(|rs| rs.metadata.name.clone());
        if has_deadline && !complete {
            if util::deployment_complete(d, &status) {
                let message = match &rs_name {
                    Some(rs) => format!("ReplicaSet {rs:?} has successfully progressed."),
                    None => format!("Deployment {d_name:?} has successfully progressed."),
                };
                let condition = util::new_deployment_condition(
                    util::DEPLOYMENT_PROGRESSING,
                    util::CONDITION_TRUE,
                    util::NEW_RS_AVAILABLE_REASON,
                    &message,
                    now,
                );
                util::set_deployment_condition(&mut status, condition);
            } else if util::deployment_progressing(d, &status) {
                let message = match &rs_name {
                    Some(rs) => format!("ReplicaSet {rs:?} is progressing."),
                    None => format!("Deployment {d_name:?} is progressing."),
                };
                let mut condition = util::new_deployment_condition(
                    util::DEPLOYMENT_PROGRESSING,
                    util::CONDITION_TRUE,
                    util::REPLICA_SET_UPDATED_REASON,
                    &message,
                    now,
                );
                // Progress moves lastUpdateTime (the deadline restarts), but the status
                // did not transition.
                if let Some(current) = &current {
                    if current.status == util::CONDITION_TRUE {
                        condition.last_transition_time = current.last_transition_time.clone();
                    }
                    util::remove_deployment_condition(&mut status, util::DEPLOYMENT_PROGRESSING);
                }
                util::set_deployment_condition(&mut status, condition);
            } else if util::deployment_timed_out(d, &status, now) {
                let message = match &rs_name {
                    Some(rs) => format!("ReplicaSet {rs:?} has timed out progressing."),
                    None => format!("Deployment {d_name:?} has timed out progressing."),
                };
                let condition = util::new_deployment_condition(
                    util::DEPLOYMENT_PROGRESSING,
                    util::CONDITION_FALSE,
                    util::TIMED_OUT_REASON,
                    &message,
                    now,
                );
                util::set_deployment_condition(&mut status, condition);
            }
        }
        match replica_failures(all, new_rs).into_iter().next() {
            Some(failure) => util::set_deployment_condition(&mut status, failure),
            None => {
                util::remove_deployment_condition(&mut status, util::DEPLOYMENT_REPLICA_FAILURE)
            }
        }
        if same_status(d.status.as_ref(), &status) {
            self.requeue_stuck_deployment(d, &status, now);
            return Ok(());
        }
        d.status = Some(status);
        self.update_status(d).await
    }

    /// A Deployment in progress is checked again when its deadline would pass.
    fn requeue_stuck_deployment(
        &self,
        d: &Deployment,
        new_status: &DeploymentStatus,
        now: Timestamp,
    ) -> Option<Duration> {
        let current_status = d.status.clone().unwrap_or_default();
        let current =
            util::get_deployment_condition(&current_status, util::DEPLOYMENT_PROGRESSING)?;
        if !util::has_progress_deadline(d)
            || util::deployment_complete(d, new_status)
            || current.reason.as_deref() == Some(util::TIMED_OUT_REASON)
        {
            return None;
        }
        let deadline = d
            .spec
            .as_ref()
            .and_then(|s| s.progress_deadline_seconds)
            .unwrap_or(600);
        let last_update = current
            .last_update_time
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let after_nanos = (last_update.as_nanosecond() + i128::from(deadline) * 1_000_000_000)
            - now.as_nanosecond();
        let key = key_of(&d.metadata);
        if after_nanos < 1_000_000_000 {
            self.queue.add_rate_limited(key);
            return Some(Duration::ZERO);
        }
        let after = Duration::from_nanos(after_nanos as u64);
        self.queue.add_after(key, after + Duration::from_secs(1));
        Some(after)
    }
}

/// ReplicaFailure conditions of the new ReplicaSet, else of any ReplicaSet.
fn replica_failures(all: &[ReplicaSet], new_rs: Option<&ReplicaSet>) -> Vec<DeploymentCondition> {
    let of = |rs: &ReplicaSet| -> Vec<DeploymentCondition> {
        rs.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|conditions| {
                conditions
                    .iter()
                    .filter(|c| c.type_ == util::REPLICA_SET_REPLICA_FAILURE)
                    .map(util::replica_set_to_deployment_condition)
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(rs) = new_rs {
        let conditions = of(rs);
        if !conditions.is_empty() {
            return conditions;
        }
    }
    all.iter().flat_map(of).collect()
}

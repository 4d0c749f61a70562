//! An HPA's status and conditions (upstream `setCondition`, `setStatus`,
//! `setCurrentReplicasAndMetricsInStatus` and `updateStatusIfNeeded`).

use anyhow::anyhow;
use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus,
    MetricStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tracing::debug;

use crate::meta::ResourceNames;

use super::Controller;

pub(super) fn now_time() -> Time {
    Time(jiff::Timestamp::now())
}

/// Upstream `setCondition`: the transition time moves only when the status does.
pub(super) fn set_condition(
    status: &mut HorizontalPodAutoscalerStatus,
    type_: &str,
    condition_status: &str,
    reason: &str,
    message: String,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let index = match conditions.iter().position(|c| c.type_ == type_) {
        Some(index) => index,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.to_string(),
                status: String::new(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let condition = &mut conditions[index];
    if condition.status != condition_status {
        condition.last_transition_time = Some(now_time());
    }
    condition.status = condition_status.to_string();
    condition.reason = Some(reason.to_string());
    condition.message = Some(message);
}

/// [`set_condition`] on the HPA's status, created when missing.
pub(super) fn set_hpa_condition(
    hpa: &mut HorizontalPodAutoscaler,
    type_: &str,
    condition_status: &str,
    reason: &str,
    message: String,
) {
    set_condition(
        hpa.status.get_or_insert_with(Default::default),
        type_,
        condition_status,
        reason,
        message,
    );
}

/// Upstream `setCurrentReplicasAndMetricsInStatus`.
pub(super) fn set_current_status(
    hpa: &mut HorizontalPodAutoscaler,
    current: i32,
    statuses: Option<Vec<MetricStatus>>,
) {
    let status = hpa.status.get_or_insert_with(Default::default);
    status.current_replicas = (current != 0).then_some(current);
    status.current_metrics = statuses.filter(|s| !s.is_empty());
    status.observed_generation = None;
}

/// Upstream `setStatus`: observedGeneration is not carried over, and zero and empty
/// fields are omitted as Go's encoding omits them; the last scale time moves on a
/// rescale only.
pub(super) fn set_status(
    hpa: &mut HorizontalPodAutoscaler,
    current: i32,
    desired: i32,
    statuses: Option<Vec<MetricStatus>>,
    rescaled: bool,
) {
    let status = hpa.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.take();
    let last_scale_time = if rescaled {
        Some(now_time())
    } else {
        status.last_scale_time.take()
    };
    *status = HorizontalPodAutoscalerStatus {
        current_replicas: (current != 0).then_some(current),
        desired_replicas: desired,
        last_scale_time,
        current_metrics: statuses.filter(|s| !s.is_empty()),
        conditions,
        observed_generation: None,
    };
}

impl Controller {
    pub(super) fn warn(
        &self,
        hpa: &HorizontalPodAutoscaler,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.recorder.event(hpa, "Warning", reason, message);
    }

    /// Writes the status if it changed (upstream `updateStatusIfNeeded`).
    pub(super) async fn update_status_if_needed(
        &self,
        original: &Option<HorizontalPodAutoscalerStatus>,
        hpa: &HorizontalPodAutoscaler,
    ) -> anyhow::Result<()> {
        if original == &hpa.status {
            return Ok(());
        }
        if let Err(error) = self.operations.update_status(hpa).await {
            let message = crate::controller::describe(&error);
            self.warn(hpa, "FailedUpdateStatus", message.clone());
            return Err(anyhow!(
                "failed to update status for {}: {message}",
                hpa.name_str()
            ));
        }
        debug!(
            controller = super::NAME,
            hpa = hpa.name_str(),
            "successfully updated status"
        );
        Ok(())
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

//! One HPA's sync (upstream `reconcileAutoscaler`): read the target's scale, decide the
//! replicas (bounds, then the metrics' proposal from [`super::metrics`] and the
//! normalization), rescale, and write the status with its conditions
//! ([`super::status`]) when it changed. Each failure leaves its event and condition, as
//! upstream's do.

use std::time::Instant;

use anyhow::anyhow;
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
    HorizontalPodAutoscalerStatus, MetricStatus,
};
use tracing::{debug, info};

use crate::locks::lock;
use crate::meta::ResourceNames;

use super::behavior::{default_scale_down, default_scale_up};
use super::metrics::{is_spec_error, SpecError};
use super::monitor::{Action, ErrorKind};
use super::operations::Mapping;
use super::status::{set_current_status, set_hpa_condition, set_status};
use super::Controller;

/// What a sync decided: the replicas, whether (and why) to rescale, the metrics'
/// statuses, and the error of metrics that failed while others decided.
struct Decision {
    desired: i32,
    rescale: bool,
    reason: String,
    statuses: Option<Vec<MetricStatus>>,
    deferred_error: Option<anyhow::Error>,
}

impl Decision {
    fn keep() -> Decision {
        Decision {
            desired: 0,
            rescale: false,
            reason: String::new(),
            statuses: None,
            deferred_error: None,
        }
    }

    fn bound(desired: i32, reason: &str) -> Decision {
        Decision {
            desired,
            rescale: true,
            reason: reason.into(),
            ..Decision::keep()
        }
    }
}

/// The state one sync carries between its steps.
struct Sync<'a> {
    key: &'a str,
    hpa: HorizontalPodAutoscaler,
    original: Option<HorizontalPodAutoscalerStatus>,
    spec: HorizontalPodAutoscalerSpec,
    /// `Kind/namespace/name` of the target, for messages.
    reference: String,
}

impl Controller {
    pub(super) async fn reconcile(
        &self,
        shared: &HorizontalPodAutoscaler,
        key: &str,
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        let mut action = Action::None;
        let result = self.reconcile_inner(shared, key, &mut action).await;
        let error = match &result {
            Ok(()) => ErrorKind::None,
            Err(error) if is_spec_error(error) => ErrorKind::Spec,
            Err(_) => ErrorKind::Internal,
        };
        self.monitor
            .reconciliation(action, error, started.elapsed());
        result
    }

    async fn reconcile_inner(
        &self,
        shared: &HorizontalPodAutoscaler,
        key: &str,
        action: &mut Action,
    ) -> anyhow::Result<()> {
        let spec = shared.spec.clone().unwrap_or_default();
        let target = &spec.scale_target_ref;
        let reference = format!("{}/{}/{}", target.kind, shared.namespace_str(), target.name);
        let mut sync = Sync {
            key,
            hpa: shared.clone(),
            original: shared.status.clone(),
            spec: spec.clone(),
            reference,
        };
        let (mut scale, mapping) = self.target_scale(&mut sync, target).await?;
        set_hpa_condition(
            &mut sync.hpa,
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale".into(),
        );
        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        lock(&self.histories)
            .entry(key.to_string())
            .or_default()
            .record_initial(current, Instant::now());

        let decision = self.decide(&mut sync, &scale, current).await?;
        let desired = if decision.rescale {
            self.rescale(&mut sync, &mut scale, &mapping, current, &decision)
                .await?;
            *action = if decision.desired > current {
                Action::ScaleUp
            } else {
                Action::ScaleDown
            };
            decision.desired
        } else {
            debug!(controller = super::NAME, target = %sync.reference, desired = decision.desired, "decided not to scale");
            current
        };
        set_status(
            &mut sync.hpa,
            current,
            desired,
            decision.statuses,
            decision.rescale,
        );
        self.update_status_if_needed(&sync.original, &sync.hpa)
            .await?;
        match decision.deferred_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The target's scale, through the mappings of its kind; each failure sets
    /// AbleToScale False/`FailedGetScale`.
    async fn target_scale(
        &self,
        sync: &mut Sync<'_>,
        target: &CrossVersionObjectReference,
    ) -> anyhow::Result<(Scale, Mapping)> {
        let api_version = target.api_version.as_deref().unwrap_or_default();
        let group = match api_version.split('/').collect::<Vec<_>>()[..] {
            [_version] => "",
            [group, _version] if !group.is_empty() => group,
            _ => {
                let message = format!("unexpected GroupVersion string: {api_version}");
                self.fail_get_scale(sync, &message).await;
                return Err(anyhow::Error::new(SpecError(format!(
                    "invalid API version in scale target reference: {message}"
                ))));
            }
        };
        let mappings = match self.operations.mappings(group, &target.kind).await {
            Ok(mappings) => mappings,
            Err(error) => {
                let message = format!("{error:#}");
                self.fail_get_scale(sync, &message).await;
                return Err(anyhow!(
                    "unable to determine resource for scale target reference: {message}"
                ));
            }
        };
        let found = self
            .operations
            .get_scale(sync.hpa.namespace_str(), &target.name, &mappings)
            .await;
        match found {
            Ok(found) => Ok(found),
            Err(error) => {
                let message = crate::controller::describe(&anyhow::Error::from(error));
                self.fail_get_scale(sync, &message).await;
                Err(anyhow!(
                    "failed to query scale subresource for {}: {message}",
                    sync.reference
                ))
            }
        }
    }

    /// AbleToScale False/`FailedGetScale`, its event and the status.
    async fn fail_get_scale(&self, sync: &mut Sync<'_>, message: &str) {
        self.warn(&sync.hpa, "FailedGetScale", message);
        set_hpa_condition(
            &mut sync.hpa,
            "AbleToScale",
            "False",
            "FailedGetScale",
            format!("the HPA controller was unable to get the target's current scale: {message}"),
        );
        if let Err(error) = self
            .update_status_if_needed(&sync.original, &sync.hpa)
            .await
        {
            info!(controller = super::NAME, error = %error, "updating status");
        }
    }

    /// The replicas the sync wants: the bounds when the current count is outside them,
    /// else the metrics' proposal, normalized.
    async fn decide(
        &self,
        sync: &mut Sync<'_>,
        scale: &Scale,
        current: i32,
    ) -> anyhow::Result<Decision> {
        let min = sync.spec.min_replicas.unwrap_or(1);
        let max = sync.spec.max_replicas;
        if current == 0 && min != 0 {
            set_hpa_condition(
                &mut sync.hpa,
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero".into(),
            );
            return Ok(Decision::keep());
        }
        if current > max {
            return Ok(Decision::bound(
                max,
                "Current number of replicas above Spec.MaxReplicas",
            ));
        }
        if current < min {
            return Ok(Decision::bound(
                min,
                "Current number of replicas below Spec.MinReplicas",
            ));
        }
        let key = sync.key;
        let proposal = match self
            .compute_replicas_for_metrics(&mut sync.hpa, scale, key)
            .await
        {
            Ok(proposal) => proposal,
            Err((statuses, error)) => {
                set_current_status(&mut sync.hpa, current, statuses);
                if let Err(error) = self
                    .update_status_if_needed(&sync.original, &sync.hpa)
                    .await
                {
                    info!(controller = super::NAME, key, error = %error, "updating status");
                }
                let message = format!("{error:#}");
                self.warn(&sync.hpa, "FailedComputeMetricsReplicas", message.clone());
                let failure = anyhow!(
                    "failed to compute desired number of replicas based on listed metrics for {}: {message}",
                    sync.reference
                );
                return Err(if is_spec_error(&error) {
                    anyhow::Error::new(SpecError(failure.to_string()))
                } else {
                    failure
                });
            }
        };
        debug!(controller = super::NAME, key, desired = proposal.replicas, metric = %proposal.metric, target = %sync.reference, "proposing desired replicas");
        let mut desired = 0;
        let mut rescale_metric = String::new();
        if proposal.replicas > desired {
            desired = proposal.replicas;
            rescale_metric = proposal.metric;
        }
        let mut reason = String::new();
        if desired > current {
            reason = format!("{rescale_metric} above target");
        }
        if desired < current {
            reason = "All metrics below target".into();
        }
        let desired = self.normalize(&mut sync.hpa, key, current, desired, min);
        Ok(Decision {
            desired,
            rescale: desired != current,
            reason,
            statuses: proposal.statuses,
            deferred_error: proposal.error,
        })
    }

    /// Stabilization and limits, with or without `spec.behavior`; sets AbleToScale and
    /// ScalingLimited.
    fn normalize(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        key: &str,
        current: i32,
        desired: i32,
        min: i32,
    ) -> i32 {
        let spec = hpa.spec.clone().unwrap_or_default();
        let max = spec.max_replicas;
        let now = Instant::now();
        let normalized = {
            let mut histories = lock(&self.histories);
            let history = histories.entry(key.to_string()).or_default();
            match &spec.behavior {
                None => history.normalize(current, desired, min, max, self.downscale_window, now),
                Some(behavior) => {
                    let up = behavior.scale_up.clone().unwrap_or_else(default_scale_up);
                    let down = behavior
                        .scale_down
                        .clone()
                        .unwrap_or_else(default_scale_down);
                    history.normalize_with_behavior(
                        current,
                        desired,
                        min,
                        max,
                        &up,
                        &down,
                        self.downscale_window,
                        now,
                    )
                }
            }
        };
        set_hpa_condition(
            hpa,
            "AbleToScale",
            "True",
            normalized.able_to_scale.reason,
            normalized.able_to_scale.message.into(),
        );
        set_hpa_condition(
            hpa,
            "ScalingLimited",
            if normalized.limited { "True" } else { "False" },
            normalized.scaling_limited.reason,
            normalized.scaling_limited.message.into(),
        );
        normalized.replicas
    }

    /// Writes the decided replicas to the target's scale, with the event, the
    /// AbleToScale condition and the scale event the behavior's policies count.
    async fn rescale(
        &self,
        sync: &mut Sync<'_>,
        scale: &mut Scale,
        mapping: &Mapping,
        current: i32,
        decision: &Decision,
    ) -> anyhow::Result<()> {
        let (desired, reason) = (decision.desired, &decision.reason);
        scale.spec.get_or_insert_with(ScaleSpec::default).replicas = Some(desired);
        let target = &sync.spec.scale_target_ref.name;
        let updated = self
            .operations
            .update_scale(sync.hpa.namespace_str(), target, mapping, scale)
            .await;
        if let Err(error) = updated {
            let message = crate::controller::describe(&anyhow::Error::from(error));
            self.warn(
                &sync.hpa,
                "FailedRescale",
                format!("New size: {desired}; reason: {reason}; error: {message}"),
            );
            set_hpa_condition(
                &mut sync.hpa,
                "AbleToScale",
                "False",
                "FailedUpdateScale",
                format!("the HPA controller was unable to update the target scale: {message}"),
            );
            set_current_status(&mut sync.hpa, current, decision.statuses.clone());
            if let Err(error) = self
                .update_status_if_needed(&sync.original, &sync.hpa)
                .await
            {
                info!(controller = super::NAME, key = sync.key, error = %error, "updating status");
            }
            return Err(anyhow!("failed to rescale {}: {message}", sync.reference));
        }
        set_hpa_condition(
            &mut sync.hpa,
            "AbleToScale",
            "True",
            "SucceededRescale",
            format!("the HPA controller was able to update the target scale to {desired}"),
        );
        self.recorder.event(
            &sync.hpa,
            "Normal",
            "SuccessfulRescale",
            format!("New size: {desired}; reason: {reason}"),
        );
        let rules = sync.spec.behavior.as_ref().map(|behavior| {
            (
                behavior.scale_up.clone().unwrap_or_else(default_scale_up),
                behavior
                    .scale_down
                    .clone()
                    .unwrap_or_else(default_scale_down),
            )
        });
        lock(&self.histories)
            .entry(sync.key.to_string())
            .or_default()
            .store_scale_event(
                rules.as_ref().map(|(up, down)| (up, down)),
                current,
                desired,
                Instant::now(),
            );
        info!(controller = super::NAME, hpa = sync.key, current_replicas = current, desired_replicas = desired, reason = %reason, "successfully rescaled");
        Ok(())
    }
}

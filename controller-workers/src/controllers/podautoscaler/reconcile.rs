//! One HPA's sync (upstream `reconcileAutoscaler` and `computeReplicasForMetrics`): read
//! the target's scale, decide the replicas (bounds, then each metric's proposal and the
//! normalization), rescale, and write the status with its conditions when it changed.
//! Each failure leaves its event and condition, as upstream's do.

use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, ExternalMetricStatus, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus, MetricIdentifier, MetricSpec,
    MetricStatus, MetricTarget, MetricValueStatus, ObjectMetricStatus, PodsMetricStatus,
    ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tracing::{debug, info};

use crate::locks::lock;
use crate::selector::Selector;
use rkcm_gocompat::quantity::{Format, Quantity};

use super::behavior::{default_scale_down, default_scale_up};
use super::monitor::{Action, ErrorKind};
use super::operations::selector_string;
use super::replica_calculator::{ready_pods, Proposal};
use super::Controller;

/// An error of the HPA's own spec (upstream's `errSpec`), for the `error` label.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct SpecError(String);

/// A metric that could not be computed: the error and the ScalingActive condition it
/// sets when every metric fails.
struct MetricFailure {
    error: anyhow::Error,
    condition: Option<(&'static str, String)>,
}

fn now_time() -> Time {
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

fn milli(value: i64) -> ApiQuantity {
    ApiQuantity(Quantity::from_milli(value, Format::DecimalSI).to_string())
}

fn milli_of(quantity: Option<&ApiQuantity>) -> Option<i64> {
    Quantity::from_api(&quantity?.0).ok()?.milli_value()
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Go's `%+v` of a `*metav1.LabelSelector`, enough for the metric names upstream prints.
fn selector_debug(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> String {
    match selector {
        None => "<nil>".into(),
        Some(selector) => format!(
            "&LabelSelector{{MatchLabels:map[{}],MatchExpressions:[]LabelSelectorRequirement{{{}}},}}",
            selector
                .match_labels
                .iter()
                .flatten()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(" "),
            selector
                .match_expressions
                .iter()
                .flatten()
                .map(|e| format!(
                    "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}}",
                    e.key,
                    e.operator,
                    e.values.clone().unwrap_or_default().join(" ")
                ))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

impl Controller {
    fn warn(&self, hpa: &HorizontalPodAutoscaler, reason: &str, message: impl Into<String>) {
        self.recorder.event(hpa, "Warning", reason, message);
    }

    /// Writes the status if it changed (upstream `updateStatusIfNeeded`).
    async fn update_status_if_needed(
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
                hpa.metadata.name.as_deref().unwrap_or_default()
            ));
        }
        debug!(
            controller = super::NAME,
            hpa = hpa.metadata.name.as_deref().unwrap_or_default(),
            "successfully updated status"
        );
        Ok(())
    }

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
            Err(error) if error.downcast_ref::<SpecError>().is_some() => ErrorKind::Spec,
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
        let mut hpa = shared.clone();
        let original = hpa.status.clone();
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let spec = hpa.spec.clone().unwrap_or_default();
        let target = spec.scale_target_ref.clone();
        let reference = format!("{}/{namespace}/{}", target.kind, target.name);

        // The target's scale, through the mappings of its kind.
        let api_version = target.api_version.clone().unwrap_or_default();
        let group: Result<&str, String> = match api_version.split('/').collect::<Vec<_>>()[..] {
            [_version] => Ok(""),
            [group, _version] if !group.is_empty() => Ok(group),
            _ => Err(format!("unexpected GroupVersion string: {api_version}")),
        };
        let group = match group {
            Ok(group) => group.to_string(),
            Err(message) => {
                self.fail_get_scale(&mut hpa, &original, &message).await;
                return Err(anyhow::Error::new(SpecError(format!(
                    "invalid API version in scale target reference: {message}"
                ))));
            }
        };
        let mappings = match self.operations.mappings(&group, &target.kind).await {
            Ok(mappings) => mappings,
            Err(error) => {
                let message = format!("{error:#}");
                self.fail_get_scale(&mut hpa, &original, &message).await;
                return Err(anyhow!(
                    "unable to determine resource for scale target reference: {message}"
                ));
            }
        };
        let (mut scale, mapping) = match self
            .operations
            .get_scale(&namespace, &target.name, &mappings)
            .await
        {
            Ok(found) => found,
            Err(error) => {
                let message = crate::controller::describe(&anyhow::Error::from(error));
                self.fail_get_scale(&mut hpa, &original, &message).await;
                return Err(anyhow!(
                    "failed to query scale subresource for {reference}: {message}"
                ));
            }
        };
        let status = hpa.status.get_or_insert_with(Default::default);
        set_condition(
            status,
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

        let min = spec.min_replicas.unwrap_or(1);
        let max = spec.max_replicas;
        let mut desired = 0;
        let mut rescale_reason = String::new();
        let mut statuses: Option<Vec<MetricStatus>> = None;
        let mut deferred_error = None;
        let rescale;
        if current == 0 && min != 0 {
            rescale = false;
            set_condition(
                hpa.status.get_or_insert_with(Default::default),
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero".into(),
            );
        } else if current > max {
            rescale_reason = "Current number of replicas above Spec.MaxReplicas".into();
            desired = max;
            rescale = true;
        } else if current < min {
            rescale_reason = "Current number of replicas below Spec.MinReplicas".into();
            desired = min;
            rescale = true;
        } else {
            let computed = self
                .compute_replicas_for_metrics(&mut hpa, &scale, key)
                .await;
            let (proposal, metric, computed_statuses, error) = match computed {
                Err((computed_statuses, error)) => {
                    self.set_current_status(&mut hpa, current, computed_statuses);
                    if let Err(error) = self.update_status_if_needed(&original, &hpa).await {
                        info!(controller = super::NAME, key, error = %error, "updating status");
                    }
                    let message = format!("{error:#}");
                    self.warn(&hpa, "FailedComputeMetricsReplicas", message.clone());
                    let failure = anyhow!(
                        "failed to compute desired number of replicas based on listed metrics for {reference}: {message}"
                    );
                    return Err(if error.downcast_ref::<SpecError>().is_some() {
                        anyhow::Error::new(SpecError(failure.to_string()))
                    } else {
                        failure
                    });
                }
                Ok(found) => found,
            };
            statuses = computed_statuses;
            deferred_error = error;
            debug!(controller = super::NAME, key, desired = proposal, metric = %metric, target = %reference, "proposing desired replicas");
            let mut rescale_metric = String::new();
            if proposal > desired {
                desired = proposal;
                rescale_metric = metric;
            }
            if desired > current {
                rescale_reason = format!("{rescale_metric} above target");
            }
            if desired < current {
                rescale_reason = "All metrics below target".into();
            }
            desired = self.normalize(&mut hpa, key, current, desired, min);
            rescale = desired != current;
        }

        if rescale {
            if let Some(spec) = scale.spec.as_mut() {
                spec.replicas = Some(desired);
            } else {
                scale.spec = Some(k8s_openapi::api::autoscaling::v1::ScaleSpec {
                    replicas: Some(desired),
                });
            }
            if let Err(error) = self
                .operations
                .update_scale(&namespace, &target.name, &mapping, &scale)
                .await
            {
                let message = crate::controller::describe(&anyhow::Error::from(error));
                self.warn(
                    &hpa,
                    "FailedRescale",
                    format!("New size: {desired}; reason: {rescale_reason}; error: {message}"),
                );
                set_condition(
                    hpa.status.get_or_insert_with(Default::default),
                    "AbleToScale",
                    "False",
                    "FailedUpdateScale",
                    format!("the HPA controller was unable to update the target scale: {message}"),
                );
                self.set_current_status(&mut hpa, current, statuses);
                if let Err(error) = self.update_status_if_needed(&original, &hpa).await {
                    info!(controller = super::NAME, key, error = %error, "updating status");
                }
                return Err(anyhow!("failed to rescale {reference}: {message}"));
            }
            set_condition(
                hpa.status.get_or_insert_with(Default::default),
                "AbleToScale",
                "True",
                "SucceededRescale",
                format!("the HPA controller was able to update the target scale to {desired}"),
            );
            self.recorder.event(
                &hpa,
                "Normal",
                "SuccessfulRescale",
                format!("New size: {desired}; reason: {rescale_reason}"),
            );
            let rules = spec.behavior.as_ref().map(|behavior| {
                (
                    behavior.scale_up.clone().unwrap_or_else(default_scale_up),
                    behavior
                        .scale_down
                        .clone()
                        .unwrap_or_else(default_scale_down),
                )
            });
            lock(&self.histories)
                .entry(key.to_string())
                .or_default()
                .store_scale_event(
                    rules.as_ref().map(|(up, down)| (up, down)),
                    current,
                    desired,
                    Instant::now(),
                );
            info!(controller = super::NAME, hpa = key, current_replicas = current, desired_replicas = desired, reason = %rescale_reason, "successfully rescaled");
            *action = if desired > current {
                Action::ScaleUp
            } else {
                Action::ScaleDown
            };
        } else {
            debug!(controller = super::NAME, target = %reference, desired, "decided not to scale");
            desired = current;
        }
        let status = hpa.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.take();
        let last_scale_time = if rescale {
            Some(now_time())
        } else {
            status.last_scale_time.take()
        };
        // Upstream's setStatus: observedGeneration is not carried over, and zero and
        // empty fields are omitted as Go's encoding omits them.
        *status = HorizontalPodAutoscalerStatus {
            current_replicas: (current != 0).then_some(current),
            desired_replicas: desired,
            last_scale_time,
            current_metrics: statuses.filter(|s| !s.is_empty()),
            conditions,
            observed_generation: None,
        };
        self.update_status_if_needed(&original, &hpa).await?;
        match deferred_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// AbleToScale False/`FailedGetScale`, its event and the status.
    async fn fail_get_scale(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        original: &Option<HorizontalPodAutoscalerStatus>,
        message: &str,
    ) {
        self.warn(hpa, "FailedGetScale", message);
        set_condition(
            hpa.status.get_or_insert_with(Default::default),
            "AbleToScale",
            "False",
            "FailedGetScale",
            format!("the HPA controller was unable to get the target's current scale: {message}"),
        );
        if let Err(error) = self.update_status_if_needed(original, hpa).await {
            info!(controller = super::NAME, error = %error, "updating status");
        }
    }

    /// Upstream `setCurrentReplicasAndMetricsInStatus`.
    fn set_current_status(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        current: i32,
        statuses: Option<Vec<MetricStatus>>,
    ) {
        let status = hpa.status.get_or_insert_with(Default::default);
        status.current_replicas = (current != 0).then_some(current);
        status.current_metrics = statuses.filter(|s| !s.is_empty());
        status.observed_generation = None;
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
        let status = hpa.status.get_or_insert_with(Default::default);
        set_condition(
            status,
            "AbleToScale",
            "True",
            normalized.able_to_scale.reason,
            normalized.able_to_scale.message.into(),
        );
        set_condition(
            status,
            "ScalingLimited",
            if normalized.limited { "True" } else { "False" },
            normalized.scaling_limited.reason,
            normalized.scaling_limited.message.into(),
        );
        normalized.replicas
    }

    /// Upstream `validateAndParseSelector`: the target's selector, refused when missing,
    /// unparsable, or shared with another HPA.
    fn validate_selector(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        key: &str,
        selector: Option<&str>,
    ) -> anyhow::Result<(Selector, String, Vec<Arc<Pod>>)> {
        let selector_text = selector.unwrap_or_default();
        if selector_text.is_empty() {
            let message = "selector is required";
            self.warn(hpa, "SelectorRequired", message);
            set_condition(
                hpa.status.get_or_insert_with(Default::default),
                "ScalingActive",
                "False",
                "InvalidSelector",
                "the HPA target's scale is missing a selector".into(),
            );
            return Err(anyhow!(message));
        }
        let selector = match Selector::parse(selector_text) {
            Ok(selector) => selector,
            Err(error) => {
                let message = format!(
                    "couldn't convert selector into a corresponding internal selector object: {error}"
                );
                self.warn(hpa, "InvalidSelector", message.clone());
                set_condition(
                    hpa.status.get_or_insert_with(Default::default),
                    "ScalingActive",
                    "False",
                    "InvalidSelector",
                    message.clone(),
                );
                return Err(anyhow!(message));
            }
        };
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_namespace(&namespace)
            .into_iter()
            .filter(|pod| selector.matches(pod.metadata.labels.as_ref()))
            .collect();
        let selecting = self.hpas_selecting(key, &selector, &pods);
        if selecting.len() > 1 {
            let message = format!(
                "pods by selector {selector_text} are controlled by multiple HPAs: [{}]",
                selecting.into_iter().collect::<Vec<_>>().join(" ")
            );
            self.warn(hpa, "AmbiguousSelector", message.clone());
            set_condition(
                hpa.status.get_or_insert_with(Default::default),
                "ScalingActive",
                "False",
                "AmbiguousSelector",
                message.clone(),
            );
            return Err(anyhow!(message));
        }
        Ok((selector, selector_text.to_string(), pods))
    }

    /// Upstream `computeReplicasForMetrics`: the largest proposal (and its metric's name)
    /// with the metrics' statuses; an error with the statuses when every metric failed,
    /// or some failed and the rest would scale down. The third item is the error of the
    /// metrics that failed when the others could decide.
    #[allow(clippy::type_complexity)]
    async fn compute_replicas_for_metrics(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        scale: &Scale,
        key: &str,
    ) -> Result<
        (
            i32,
            String,
            Option<Vec<MetricStatus>>,
            Option<anyhow::Error>,
        ),
        (Option<Vec<MetricStatus>>, anyhow::Error),
    > {
        let scale_status = scale.status.as_ref();
        let (_, selector_text, pods) = match self.validate_selector(
            hpa,
            key,
            scale_status.and_then(|s| s.selector.as_deref()),
        ) {
            Ok(found) => found,
            Err(error) => return Err((None, error)),
        };
        let spec_replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let status_replicas = scale_status.map_or(0, |s| s.replicas);
        let specs = hpa
            .spec
            .as_ref()
            .and_then(|s| s.metrics.clone())
            .unwrap_or_default();
        let mut statuses = vec![MetricStatus::default(); specs.len()];
        let (mut replicas, mut metric) = (0, String::new());
        let mut invalid = 0;
        let mut first_failure: Option<MetricFailure> = None;
        for (index, spec) in specs.iter().enumerate() {
            let started = Instant::now();
            let computed = self
                .compute_metric(
                    hpa,
                    spec,
                    spec_replicas,
                    status_replicas,
                    &selector_text,
                    &pods,
                )
                .await;
            let current_replicas = hpa
                .status
                .as_ref()
                .and_then(|s| s.current_replicas)
                .unwrap_or(0);
            let (action, error) = match &computed {
                Ok((proposal, _, _)) => (Action::of(current_replicas, *proposal), ErrorKind::None),
                Err(failure) if failure.error.downcast_ref::<SpecError>().is_some() => {
                    (Action::None, ErrorKind::Spec)
                }
                Err(_) => (Action::None, ErrorKind::Internal),
            };
            self.monitor
                .computation(action, error, started.elapsed(), &spec.type_);
            match computed {
                Ok((proposal, name, status)) => {
                    statuses[index] = status;
                    if replicas == 0 || proposal > replicas {
                        replicas = proposal;
                        metric = name;
                    }
                }
                Err(failure) => {
                    if invalid == 0 {
                        first_failure = Some(failure);
                    }
                    invalid += 1;
                }
            }
        }
        let invalid_error = first_failure.as_ref().map(|failure| {
            let message = format!(
                "invalid metrics ({invalid} invalid out of {}), first error is: {:#}",
                specs.len(),
                failure.error
            );
            if failure.error.downcast_ref::<SpecError>().is_some() {
                anyhow::Error::new(SpecError(message))
            } else {
                anyhow!(message)
            }
        });
        if invalid >= specs.len() || (invalid > 0 && replicas < spec_replicas) {
            if let Some((reason, message)) = first_failure.and_then(|f| f.condition) {
                set_condition(
                    hpa.status.get_or_insert_with(Default::default),
                    "ScalingActive",
                    "False",
                    reason,
                    message,
                );
            }
            let error = invalid_error.unwrap_or_else(|| anyhow!("the HPA has no metrics"));
            return Err((Some(statuses), error));
        }
        set_condition(
            hpa.status.get_or_insert_with(Default::default),
            "ScalingActive",
            "True",
            "ValidMetricFound",
            format!("the HPA was able to successfully calculate a replica count from {metric}"),
        );
        Ok((replicas, metric, Some(statuses), invalid_error))
    }

    /// The event and condition of a metric that failed (upstream
    /// `getUnableComputeReplicaCountCondition`).
    fn unable(
        &self,
        hpa: &HorizontalPodAutoscaler,
        reason: &'static str,
        error: anyhow::Error,
    ) -> MetricFailure {
        let message = format!("{error:#}");
        self.warn(hpa, reason, message.clone());
        MetricFailure {
            error,
            condition: Some((
                reason,
                format!("the HPA was unable to compute the replica count: {message}"),
            )),
        }
    }

    /// Upstream `computeReplicasForMetric`: one metric's proposal, name and status.
    async fn compute_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        spec: &MetricSpec,
        spec_replicas: i32,
        status_replicas: i32,
        selector: &str,
        pods: &[Arc<Pod>],
    ) -> Result<(i32, String, MetricStatus), MetricFailure> {
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        match (spec.type_.as_str(), spec) {
            (
                "Object",
                MetricSpec {
                    object: Some(object),
                    ..
                },
            ) => {
                let metric_selector = selector_string(object.metric.selector.as_ref())
                    .map_err(|e| self.unable(hpa, "FailedGetObjectMetric", anyhow!(e)))
                    .map_err(|mut f| {
                        f.error = anyhow!("failed to get object metric value: {:#}", f.error);
                        f
                    })?;
                let name = &object.metric.name;
                let fetch_error = |e: String| {
                    anyhow!(
                        "unable to get metric {name}: {} on {} {namespace}/{}",
                        e,
                        object.described_object.kind,
                        object.described_object.name
                    )
                };
                let wrap = |f: MetricFailure| MetricFailure {
                    error: anyhow!("failed to get object metric value: {:#}", f.error),
                    condition: f.condition,
                };
                let target = &object.target;
                if target.type_ == "Value" && target.value.is_some() {
                    let target_value = milli_of(target.value.as_ref()).unwrap_or(0);
                    let (usage, _) = self
                        .operations
                        .object_metric(name, &namespace, &object.described_object, &metric_selector)
                        .await
                        .map_err(|e| {
                            wrap(self.unable(hpa, "FailedGetObjectMetric", fetch_error(e)))
                        })?;
                    let ratio = usage as f64 / target_value as f64;
                    let replicas = self
                        .calculator
                        .usage_ratio_replicas(spec_replicas, ratio, || ready_pods(pods))
                        .map_err(|e| wrap(self.unable(hpa, "FailedGetObjectMetric", anyhow!(e))))?;
                    let status = MetricStatus {
                        type_: "Object".into(),
                        object: Some(ObjectMetricStatus {
                            described_object: object.described_object.clone(),
                            metric: object.metric.clone(),
                            current: MetricValueStatus {
                                value: Some(milli(usage)),
                                ..Default::default()
                            },
                        }),
                        ..Default::default()
                    };
                    Ok((
                        replicas,
                        format!("{} metric {name}", object.described_object.kind),
                        status,
                    ))
                } else if target.type_ == "AverageValue" && target.average_value.is_some() {
                    let target_average = milli_of(target.average_value.as_ref()).unwrap_or(0);
                    let (usage, _) = self
                        .operations
                        .object_metric(name, &namespace, &object.described_object, &metric_selector)
                        .await
                        .map_err(|e| {
                            wrap(self.unable(hpa, "FailedGetObjectMetric", fetch_error(e)))
                        })?;
                    let (replicas, average) =
                        self.calculator
                            .per_pod_replicas(status_replicas, usage, target_average);
                    let status = MetricStatus {
                        type_: "Object".into(),
                        object: Some(ObjectMetricStatus {
                            described_object: Default::default(),
                            metric: object.metric.clone(),
                            current: MetricValueStatus {
                                average_value: Some(milli(average)),
                                ..Default::default()
                            },
                        }),
                        ..Default::default()
                    };
                    Ok((
                        replicas,
                        format!(
                            "external metric {name}({})",
                            selector_debug(object.metric.selector.as_ref())
                        ),
                        status,
                    ))
                } else {
                    Err(wrap(self.unable(
                        hpa,
                        "FailedGetObjectMetric",
                        anyhow!("invalid object metric source: neither a value target nor an average value target was set"),
                    )))
                }
            }
            (
                "Pods",
                MetricSpec {
                    pods: Some(source), ..
                },
            ) => {
                let wrap = |f: MetricFailure| MetricFailure {
                    error: anyhow!("failed to get pods metric value: {:#}", f.error),
                    condition: f.condition,
                };
                let metric_selector = selector_string(source.metric.selector.as_ref())
                    .map_err(|e| wrap(self.unable(hpa, "FailedGetPodsMetric", anyhow!(e))))?;
                let name = &source.metric.name;
                let target = milli_of(source.target.average_value.as_ref()).unwrap_or(0);
                let (samples, _) = self
                    .operations
                    .raw_metric(name, &namespace, selector, &metric_selector)
                    .await
                    .map_err(|e| {
                        wrap(self.unable(
                            hpa,
                            "FailedGetPodsMetric",
                            anyhow!("unable to get metric {name}: {e}"),
                        ))
                    })?;
                let proposal = self
                    .calculator
                    .plain_metric_replicas(spec_replicas, target, "", pods, samples, now_ms())
                    .map_err(|e| wrap(self.unable(hpa, "FailedGetPodsMetric", anyhow!(e))))?;
                let status = MetricStatus {
                    type_: "Pods".into(),
                    pods: Some(PodsMetricStatus {
                        metric: source.metric.clone(),
                        current: MetricValueStatus {
                            average_value: Some(milli(proposal.raw)),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                };
                Ok((proposal.replicas, format!("pods metric {name}"), status))
            }
            (
                "Resource",
                MetricSpec {
                    resource: Some(source),
                    ..
                },
            ) => {
                let (proposal, name, current) = self
                    .compute_resource(
                        spec_replicas,
                        &source.target,
                        &source.name,
                        &namespace,
                        "",
                        selector,
                        pods,
                        false,
                    )
                    .await
                    .map_err(|e| {
                        let failure = self.unable(hpa, "FailedGetResourceMetric", e);
                        MetricFailure {
                            error: anyhow!(
                                "failed to get {} resource metric value: {:#}",
                                source.name,
                                failure.error
                            ),
                            condition: failure.condition,
                        }
                    })?;
                let status = MetricStatus {
                    type_: "Resource".into(),
                    resource: Some(ResourceMetricStatus {
                        name: source.name.clone(),
                        current,
                    }),
                    ..Default::default()
                };
                Ok((proposal, name, status))
            }
            (
                "ContainerResource",
                MetricSpec {
                    container_resource: Some(source),
                    ..
                },
            ) => {
                // HPAContainerMetrics is Beta and on in 1.29.
                let (proposal, name, current) = self
                    .compute_resource(
                        spec_replicas,
                        &source.target,
                        &source.name,
                        &namespace,
                        &source.container,
                        selector,
                        pods,
                        true,
                    )
                    .await
                    .map_err(|e| {
                        let failure = self.unable(hpa, "FailedGetContainerResourceMetric", e);
                        MetricFailure {
                            error: anyhow!(
                                "failed to get {} container metric value: {:#}",
                                source.container,
                                failure.error
                            ),
                            condition: failure.condition,
                        }
                    })?;
                let status = MetricStatus {
                    type_: "ContainerResource".into(),
                    container_resource: Some(ContainerResourceMetricStatus {
                        name: source.name.clone(),
                        container: source.container.clone(),
                        current,
                    }),
                    ..Default::default()
                };
                Ok((proposal, name, status))
            }
            (
                "External",
                MetricSpec {
                    external: Some(source),
                    ..
                },
            ) => {
                let name = &source.metric.name;
                let metric_name = format!(
                    "external metric {name}({})",
                    selector_debug(source.metric.selector.as_ref())
                );
                let metric_selector = selector_string(source.metric.selector.as_ref())
                    .map_err(|e| self.unable(hpa, "FailedGetExternalMetric", anyhow!(e)))?;
                let fetch_error = |e: String| {
                    anyhow!(
                        "unable to get external metric {namespace}/{name}/{}: {e}",
                        selector_debug(source.metric.selector.as_ref())
                    )
                };
                let identifier = MetricIdentifier {
                    name: name.clone(),
                    selector: source.metric.selector.clone(),
                };
                if source.target.average_value.is_some() {
                    let target = milli_of(source.target.average_value.as_ref()).unwrap_or(0);
                    let (values, _) = self
                        .operations
                        .external_metric(name, &namespace, &metric_selector)
                        .await
                        .map_err(|e| {
                            let f = self.unable(hpa, "FailedGetExternalMetric", fetch_error(e));
                            MetricFailure {
                                error: anyhow!(
                                    "failed to get {name} external metric: {:#}",
                                    f.error
                                ),
                                condition: f.condition,
                            }
                        })?;
                    let usage: i64 = values.iter().sum();
                    let (replicas, average) =
                        self.calculator
                            .per_pod_replicas(status_replicas, usage, target);
                    let status = MetricStatus {
                        type_: "External".into(),
                        external: Some(ExternalMetricStatus {
                            metric: identifier,
                            current: MetricValueStatus {
                                average_value: Some(milli(average)),
                                ..Default::default()
                            },
                        }),
                        ..Default::default()
                    };
                    Ok((replicas, metric_name, status))
                } else if source.target.value.is_some() {
                    let target = milli_of(source.target.value.as_ref()).unwrap_or(0);
                    let wrap = |f: MetricFailure| MetricFailure {
                        error: anyhow!("failed to get external metric {name}: {:#}", f.error),
                        condition: f.condition,
                    };
                    let (values, _) = self
                        .operations
                        .external_metric(name, &namespace, &metric_selector)
                        .await
                        .map_err(|e| {
                            wrap(self.unable(hpa, "FailedGetExternalMetric", fetch_error(e)))
                        })?;
                    let usage: i64 = values.iter().sum();
                    let replicas = self
                        .calculator
                        .usage_ratio_replicas(spec_replicas, usage as f64 / target as f64, || {
                            ready_pods(pods)
                        })
                        .map_err(|e| {
                            wrap(self.unable(hpa, "FailedGetExternalMetric", anyhow!(e)))
                        })?;
                    let status = MetricStatus {
                        type_: "External".into(),
                        external: Some(ExternalMetricStatus {
                            metric: identifier,
                            current: MetricValueStatus {
                                value: Some(milli(usage)),
                                ..Default::default()
                            },
                        }),
                        ..Default::default()
                    };
                    Ok((replicas, metric_name, status))
                } else {
                    Err(self.unable(
                        hpa,
                        "FailedGetExternalMetric",
                        anyhow!("invalid external metric source: neither a value target nor an average value target was set"),
                    ))
                }
            }
            (other, _) => {
                let error =
                    anyhow::Error::new(SpecError(format!("unknown metric source type {other:?}")));
                Err(self.unable(hpa, "InvalidMetricSourceType", error))
            }
        }
    }

    /// Upstream `computeStatusForResourceMetricGeneric`.
    #[allow(clippy::too_many_arguments)]
    async fn compute_resource(
        &self,
        current: i32,
        target: &MetricTarget,
        resource: &str,
        namespace: &str,
        container: &str,
        selector: &str,
        pods: &[Arc<Pod>],
        container_metric: bool,
    ) -> anyhow::Result<(i32, String, MetricValueStatus)> {
        let fetch = || async {
            self.operations
                .resource_metric(resource, namespace, selector, container)
                .await
                .map_err(|e| format!("unable to get metrics for resource {resource}: {e}"))
        };
        if let Some(average) = target.average_value.as_ref() {
            let target_usage = milli_of(Some(average)).unwrap_or(0);
            let result = match fetch().await {
                Ok((samples, _)) => self.calculator.plain_metric_replicas(
                    current,
                    target_usage,
                    resource,
                    pods,
                    samples,
                    now_ms(),
                ),
                Err(e) => Err(e),
            };
            let Proposal { replicas, raw, .. } =
                result.map_err(|e| anyhow!("failed to get {resource} usage: {e}"))?;
            return Ok((
                replicas,
                format!("{resource} resource"),
                MetricValueStatus {
                    average_value: Some(milli(raw)),
                    ..Default::default()
                },
            ));
        }
        let Some(target_utilization) = target.average_utilization else {
            return Err(anyhow!("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set"));
        };
        let result = match fetch().await {
            Ok((samples, _)) => self.calculator.resource_replicas(
                current,
                target_utilization,
                resource,
                container,
                pods,
                samples,
                now_ms(),
            ),
            Err(e) => Err(e),
        };
        let proposal = result.map_err(|e| anyhow!("failed to get {resource} utilization: {e}"))?;
        let name = if container_metric {
            format!("{resource} container resource utilization (percentage of request)")
        } else {
            format!("{resource} resource utilization (percentage of request)")
        };
        Ok((
            proposal.replicas,
            name,
            MetricValueStatus {
                average_utilization: Some(proposal.utilization),
                average_value: Some(milli(proposal.raw)),
                value: None,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_move_their_time_only_on_a_status_change() {
        let mut status = HorizontalPodAutoscalerStatus::default();
        set_condition(
            &mut status,
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "m".into(),
        );
        let first = status.conditions.as_ref().unwrap()[0]
            .last_transition_time
            .clone();
        assert!(first.is_some());
        let old = Time(jiff::Timestamp::from_second(1).unwrap());
        status.conditions.as_mut().unwrap()[0].last_transition_time = Some(old.clone());
        set_condition(
            &mut status,
            "AbleToScale",
            "True",
            "SucceededRescale",
            "n".into(),
        );
        let condition = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(condition.last_transition_time, Some(old.clone()));
        assert_eq!(condition.reason.as_deref(), Some("SucceededRescale"));
        set_condition(
            &mut status,
            "AbleToScale",
            "False",
            "FailedGetScale",
            "x".into(),
        );
        assert_ne!(
            status.conditions.as_ref().unwrap()[0].last_transition_time,
            Some(old)
        );
        set_condition(
            &mut status,
            "ScalingActive",
            "True",
            "ValidMetricFound",
            "y".into(),
        );
        assert_eq!(status.conditions.as_ref().unwrap().len(), 2);
    }

    #[test]
    fn quantities_are_written_in_thousandths() {
        assert_eq!(milli(100).0, "100m");
        assert_eq!(milli(2000).0, "2");
        assert_eq!(milli_of(Some(&ApiQuantity("1.5".into()))), Some(1500));
    }
}

//! Upstream `computeReplicasForMetrics` and `validateAndParseSelector`: the target's
//! selector is checked, every metric proposes (see [`super::metric_sources`]), and the
//! largest proposal wins unless too many metrics failed.

use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, MetricStatus};
use k8s_openapi::api::core::v1::Pod;

use crate::meta::ResourceNames;
use crate::selector::Selector;

use super::metric_sources::MetricInputs;
use super::monitor::{Action, ErrorKind};
use super::status::set_hpa_condition;
use super::Controller;

/// An error of the HPA's own spec (upstream's `errSpec`), for the `error` label.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct SpecError(pub(super) String);

/// Whether an error (or the error it wraps) is of the HPA's spec.
pub(super) fn is_spec_error(error: &anyhow::Error) -> bool {
    error.downcast_ref::<SpecError>().is_some()
}

/// A metric that could not be computed: the error and the ScalingActive condition it
/// sets when every metric fails.
pub(super) struct MetricFailure {
    pub(super) error: anyhow::Error,
    pub(super) condition: Option<(&'static str, String)>,
}

/// What the metrics decided when they could.
pub(super) struct MetricsProposal {
    /// The largest proposal.
    pub(super) replicas: i32,
    /// The name of the metric that made it.
    pub(super) metric: String,
    /// Every metric's status, in the spec's order (empty ones for the failed).
    pub(super) statuses: Option<Vec<MetricStatus>>,
    /// The error of the metrics that failed while the others could decide.
    pub(super) error: Option<anyhow::Error>,
}

/// The metrics could not decide: the statuses computed so far and why.
pub(super) type MetricsFailure = (Option<Vec<MetricStatus>>, anyhow::Error);

impl Controller {
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
            set_hpa_condition(
                hpa,
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
                set_hpa_condition(
                    hpa,
                    "ScalingActive",
                    "False",
                    "InvalidSelector",
                    message.clone(),
                );
                return Err(anyhow!(message));
            }
        };
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_namespace_labelled(hpa.namespace_str(), |labels| selector.matches(labels));
        let selecting = self.hpas_selecting(key, &selector, &pods);
        if selecting.len() > 1 {
            let message = format!(
                "pods by selector {selector_text} are controlled by multiple HPAs: [{}]",
                selecting.into_iter().collect::<Vec<_>>().join(" ")
            );
            self.warn(hpa, "AmbiguousSelector", message.clone());
            set_hpa_condition(
                hpa,
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
    /// or some failed and the rest would scale down.
    pub(super) async fn compute_replicas_for_metrics(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        scale: &Scale,
        key: &str,
    ) -> Result<MetricsProposal, MetricsFailure> {
        let scale_status = scale.status.as_ref();
        let selector = scale_status.and_then(|s| s.selector.as_deref());
        let (_, selector_text, pods) = match self.validate_selector(hpa, key, selector) {
            Ok(found) => found,
            Err(error) => return Err((None, error)),
        };
        let inputs = MetricInputs {
            spec_replicas: scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0),
            status_replicas: scale_status.map_or(0, |s| s.replicas),
            selector: &selector_text,
            pods: &pods,
        };
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
            let computed = self.compute_metric(hpa, spec, &inputs).await;
            let current_replicas = hpa
                .status
                .as_ref()
                .and_then(|s| s.current_replicas)
                .unwrap_or(0);
            let (action, error) = match &computed {
                Ok((proposal, _, _)) => (Action::of(current_replicas, *proposal), ErrorKind::None),
                Err(failure) if is_spec_error(&failure.error) => (Action::None, ErrorKind::Spec),
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
            if is_spec_error(&failure.error) {
                anyhow::Error::new(SpecError(message))
            } else {
                anyhow!(message)
            }
        });
        if invalid >= specs.len() || (invalid > 0 && replicas < inputs.spec_replicas) {
            if let Some((reason, message)) = first_failure.and_then(|f| f.condition) {
                set_hpa_condition(hpa, "ScalingActive", "False", reason, message);
            }
            let error = invalid_error.unwrap_or_else(|| anyhow!("the HPA has no metrics"));
            return Err((Some(statuses), error));
        }
        set_hpa_condition(
            hpa,
            "ScalingActive",
            "True",
            "ValidMetricFound",
            format!("the HPA was able to successfully calculate a replica count from {metric}"),
        );
        Ok(MetricsProposal {
            replicas,
            metric,
            statuses: Some(statuses),
            error: invalid_error,
        })
    }
}

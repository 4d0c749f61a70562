//! One metric's proposal, per source type (upstream `computeReplicasForMetric` and its
//! `computeStatusForObjectMetric`, `computeStatusForPodsMetric`,
//! `computeStatusForResourceMetric`, `computeStatusForContainerResourceMetric` and
//! `computeStatusForExternalMetric`): each returns the replicas it proposes, the metric's
//! name for the conditions and events, and the metric's status.

use std::sync::Arc;

use anyhow::anyhow;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricSource, ContainerResourceMetricStatus, ExternalMetricSource,
    ExternalMetricStatus, HorizontalPodAutoscaler, MetricIdentifier, MetricSpec, MetricStatus,
    MetricTarget, MetricValueStatus, ObjectMetricSource, ObjectMetricStatus, PodsMetricSource,
    PodsMetricStatus, ResourceMetricSource, ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use rkcm_gocompat::quantity::{Format, Quantity};

use crate::meta::ResourceNames;

use super::metrics::{MetricFailure, SpecError};
use super::operations::selector_string;
use super::replica_calculator::{ready_pods, Proposal};
use super::Controller;

/// A metric's proposal, name and status, or why it has none.
pub(super) type Computed = Result<(i32, String, MetricStatus), MetricFailure>;

/// What every metric of one sync is computed against.
pub(super) struct MetricInputs<'a> {
    /// The target's `spec.replicas`.
    pub(super) spec_replicas: i32,
    /// The target's `status.replicas`.
    pub(super) status_replicas: i32,
    /// The target's pod selector, as its scale reports it.
    pub(super) selector: &'a str,
    /// The pods it selects.
    pub(super) pods: &'a [Arc<Pod>],
}

pub(super) fn milli(value: i64) -> ApiQuantity {
    ApiQuantity(Quantity::from_milli(value, Format::DecimalSI).to_string())
}

pub(super) fn milli_of(quantity: Option<&ApiQuantity>) -> Option<i64> {
    Quantity::from_api(&quantity?.0).ok()?.milli_value()
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Go's `%+v` of a `*metav1.LabelSelector`, enough for the metric names upstream prints.
fn selector_debug(selector: Option<&LabelSelector>) -> String {
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

/// A failure whose error gains `prefix` (upstream's `fmt.Errorf("...: %v", err)`), its
/// condition kept.
fn prefixed(prefix: impl std::fmt::Display, failure: MetricFailure) -> MetricFailure {
    MetricFailure {
        error: anyhow!("{prefix}: {:#}", failure.error),
        condition: failure.condition,
    }
}

impl Controller {
    /// The event and condition of a metric that failed (upstream
    /// `getUnableComputeReplicaCountCondition`).
    pub(super) fn unable(
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
    pub(super) async fn compute_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        spec: &MetricSpec,
        inputs: &MetricInputs<'_>,
    ) -> Computed {
        match (spec.type_.as_str(), spec) {
            (
                "Object",
                MetricSpec {
                    object: Some(source),
                    ..
                },
            ) => self.object_metric(hpa, source, inputs).await,
            (
                "Pods",
                MetricSpec {
                    pods: Some(source), ..
                },
            ) => self.pods_metric(hpa, source, inputs).await,
            (
                "Resource",
                MetricSpec {
                    resource: Some(source),
                    ..
                },
            ) => self.resource_metric(hpa, source, inputs).await,
            (
                "ContainerResource",
                MetricSpec {
                    container_resource: Some(source),
                    ..
                },
            ) => self.container_resource_metric(hpa, source, inputs).await,
            (
                "External",
                MetricSpec {
                    external: Some(source),
                    ..
                },
            ) => self.external_metric(hpa, source, inputs).await,
            (other, _) => {
                let error =
                    anyhow::Error::new(SpecError(format!("unknown metric source type {other:?}")));
                Err(self.unable(hpa, "InvalidMetricSourceType", error))
            }
        }
    }

    /// Upstream `computeStatusForObjectMetric`.
    async fn object_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        object: &ObjectMetricSource,
        inputs: &MetricInputs<'_>,
    ) -> Computed {
        const REASON: &str = "FailedGetObjectMetric";
        const PREFIX: &str = "failed to get object metric value";
        let namespace = hpa.namespace_str();
        let metric_selector = selector_string(object.metric.selector.as_ref())
            .map_err(|e| self.unable(hpa, REASON, anyhow!(e)))
            .map_err(|f| prefixed(PREFIX, f))?;
        let name = &object.metric.name;
        let described = &object.described_object;
        let fetch_error = |e: String| {
            anyhow!(
                "unable to get metric {name}: {e} on {} {namespace}/{}",
                described.kind,
                described.name
            )
        };
        let target = &object.target;
        if target.type_ == "Value" && target.value.is_some() {
            let target_value = milli_of(target.value.as_ref()).unwrap_or(0);
            let (usage, _) = self
                .operations
                .object_metric(name, namespace, described, &metric_selector)
                .await
                .map_err(|e| prefixed(PREFIX, self.unable(hpa, REASON, fetch_error(e))))?;
            let ratio = usage as f64 / target_value as f64;
            let replicas = self
                .calculator
                .usage_ratio_replicas(inputs.spec_replicas, ratio, || ready_pods(inputs.pods))
                .map_err(|e| prefixed(PREFIX, self.unable(hpa, REASON, anyhow!(e))))?;
            let status = MetricStatus {
                type_: "Object".into(),
                object: Some(ObjectMetricStatus {
                    described_object: described.clone(),
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
                format!("{} metric {name}", described.kind),
                status,
            ))
        } else if target.type_ == "AverageValue" && target.average_value.is_some() {
            let target_average = milli_of(target.average_value.as_ref()).unwrap_or(0);
            let (usage, _) = self
                .operations
                .object_metric(name, namespace, described, &metric_selector)
                .await
                .map_err(|e| prefixed(PREFIX, self.unable(hpa, REASON, fetch_error(e))))?;
            let (replicas, average) =
                self.calculator
                    .per_pod_replicas(inputs.status_replicas, usage, target_average);
            // Upstream leaves the described object out of this status, and names the
            // metric as an external one.
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
            let metric_name = format!(
                "external metric {name}({})",
                selector_debug(object.metric.selector.as_ref())
            );
            Ok((replicas, metric_name, status))
        } else {
            Err(prefixed(PREFIX, self.unable(
                hpa,
                REASON,
                anyhow!("invalid object metric source: neither a value target nor an average value target was set"),
            )))
        }
    }

    /// Upstream `computeStatusForPodsMetric`.
    async fn pods_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        source: &PodsMetricSource,
        inputs: &MetricInputs<'_>,
    ) -> Computed {
        const REASON: &str = "FailedGetPodsMetric";
        const PREFIX: &str = "failed to get pods metric value";
        let metric_selector = selector_string(source.metric.selector.as_ref())
            .map_err(|e| prefixed(PREFIX, self.unable(hpa, REASON, anyhow!(e))))?;
        let name = &source.metric.name;
        let target = milli_of(source.target.average_value.as_ref()).unwrap_or(0);
        let (samples, _) = self
            .operations
            .raw_metric(name, hpa.namespace_str(), inputs.selector, &metric_selector)
            .await
            .map_err(|e| {
                let error = anyhow!("unable to get metric {name}: {e}");
                prefixed(PREFIX, self.unable(hpa, REASON, error))
            })?;
        let proposal = self
            .calculator
            .plain_metric_replicas(
                inputs.spec_replicas,
                target,
                "",
                inputs.pods,
                samples,
                now_ms(),
            )
            .map_err(|e| prefixed(PREFIX, self.unable(hpa, REASON, anyhow!(e))))?;
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

    /// Upstream `computeStatusForResourceMetric`.
    async fn resource_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        source: &ResourceMetricSource,
        inputs: &MetricInputs<'_>,
    ) -> Computed {
        let (proposal, name, current) = self
            .compute_resource(hpa, &source.target, &source.name, "", false, inputs)
            .await
            .map_err(|e| {
                let failure = self.unable(hpa, "FailedGetResourceMetric", e);
                let prefix = format!("failed to get {} resource metric value", source.name);
                prefixed(prefix, failure)
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

    /// Upstream `computeStatusForContainerResourceMetric` (HPAContainerMetrics is Beta
    /// and on in 1.29).
    async fn container_resource_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        source: &ContainerResourceMetricSource,
        inputs: &MetricInputs<'_>,
    ) -> Computed {
        let (proposal, name, current) = self
            .compute_resource(
                hpa,
                &source.target,
                &source.name,
                &source.container,
                true,
                inputs,
            )
            .await
            .map_err(|e| {
                let failure = self.unable(hpa, "FailedGetContainerResourceMetric", e);
                let prefix = format!("failed to get {} container metric value", source.container);
                prefixed(prefix, failure)
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

    /// Upstream `computeStatusForExternalMetric`.
    async fn external_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        source: &ExternalMetricSource,
        inputs: &MetricInputs<'_>,
    ) -> Computed {
        const REASON: &str = "FailedGetExternalMetric";
        let namespace = hpa.namespace_str();
        let name = &source.metric.name;
        let selector = selector_debug(source.metric.selector.as_ref());
        let metric_name = format!("external metric {name}({selector})");
        let metric_selector = selector_string(source.metric.selector.as_ref())
            .map_err(|e| self.unable(hpa, REASON, anyhow!(e)))?;
        let fetch_error =
            |e: String| anyhow!("unable to get external metric {namespace}/{name}/{selector}: {e}");
        let identifier = MetricIdentifier {
            name: name.clone(),
            selector: source.metric.selector.clone(),
        };
        let current = if source.target.average_value.is_some() {
            let target = milli_of(source.target.average_value.as_ref()).unwrap_or(0);
            let (values, _) = self
                .operations
                .external_metric(name, namespace, &metric_selector)
                .await
                .map_err(|e| {
                    let prefix = format!("failed to get {name} external metric");
                    prefixed(prefix, self.unable(hpa, REASON, fetch_error(e)))
                })?;
            let usage: i64 = values.iter().sum();
            let (replicas, average) =
                self.calculator
                    .per_pod_replicas(inputs.status_replicas, usage, target);
            let current = MetricValueStatus {
                average_value: Some(milli(average)),
                ..Default::default()
            };
            (replicas, current)
        } else if source.target.value.is_some() {
            let target = milli_of(source.target.value.as_ref()).unwrap_or(0);
            let prefix = format!("failed to get external metric {name}");
            let (values, _) = self
                .operations
                .external_metric(name, namespace, &metric_selector)
                .await
                .map_err(|e| prefixed(&prefix, self.unable(hpa, REASON, fetch_error(e))))?;
            let usage: i64 = values.iter().sum();
            let ratio = usage as f64 / target as f64;
            let replicas = self
                .calculator
                .usage_ratio_replicas(inputs.spec_replicas, ratio, || ready_pods(inputs.pods))
                .map_err(|e| prefixed(&prefix, self.unable(hpa, REASON, anyhow!(e))))?;
            let current = MetricValueStatus {
                value: Some(milli(usage)),
                ..Default::default()
            };
            (replicas, current)
        } else {
            return Err(self.unable(
                hpa,
                REASON,
                anyhow!("invalid external metric source: neither a value target nor an average value target was set"),
            ));
        };
        let (replicas, current) = current;
        let status = MetricStatus {
            type_: "External".into(),
            external: Some(ExternalMetricStatus {
                metric: identifier,
                current,
            }),
            ..Default::default()
        };
        Ok((replicas, metric_name, status))
    }

    /// Upstream `computeStatusForResourceMetricGeneric`; `container` is empty for a
    /// pod-level Resource metric.
    async fn compute_resource(
        &self,
        hpa: &HorizontalPodAutoscaler,
        target: &MetricTarget,
        resource: &str,
        container: &str,
        container_metric: bool,
        inputs: &MetricInputs<'_>,
    ) -> anyhow::Result<(i32, String, MetricValueStatus)> {
        let current = inputs.spec_replicas;
        let fetch = || async {
            self.operations
                .resource_metric(resource, hpa.namespace_str(), inputs.selector, container)
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
                    inputs.pods,
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
                inputs.pods,
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
#[path = "metric_sources_tests.rs"]
mod tests;

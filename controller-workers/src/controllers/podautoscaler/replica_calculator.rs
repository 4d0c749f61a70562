//! The replica count each metric proposes (upstream `replica_calculator.go` and
//! `metrics/utilization.go`): pure functions of the pods the target's selector picks, the
//! metric samples the metrics APIs returned, and the target. Pods are grouped first
//! (ignored, unready, missing a sample, ready); the ratio of usage to target over the
//! ready ones decides, and the unready and missing ones are then counted pessimistically
//! so that a scale never overshoots on partial data.

use crate::meta::ResourceNames;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use rkcm_gocompat::quantity::Quantity;

/// Go's zero `time.Time`, far enough in the past that adding a window cannot overflow.
pub(super) const ZERO_TIME_MS: i64 = i64::MIN / 4;

/// One pod's sample, in thousandths of the unit (upstream `PodMetric`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PodMetric {
    /// When the sample was taken, in Unix milliseconds.
    pub timestamp_ms: i64,
    pub window_ms: i64,
    pub value: i64,
}

/// Samples by pod name.
pub(super) type PodMetrics = HashMap<String, PodMetric>;

/// The tunables of the calculation (KCM's flags).
#[derive(Clone, Copy, Debug)]
pub(super) struct Calculator {
    pub tolerance: f64,
    pub cpu_initialization_period: Duration,
    pub initial_readiness_delay: Duration,
}

/// The pods of a target, by how their samples count.
#[derive(Debug, Default, PartialEq)]
pub(super) struct PodGroups {
    pub ready: usize,
    pub unready: BTreeSet<String>,
    pub missing: BTreeSet<String>,
    pub ignored: BTreeSet<String>,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

fn time_ms(time: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> i64 {
    time.map_or(ZERO_TIME_MS, |time| time.0.as_millisecond())
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        .unwrap_or("")
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == "Ready")
}

/// Upstream `groupPods`: deleting and Failed pods are ignored, Pending ones unready, pods
/// without a sample missing; for CPU, a pod is also unready while it is not Ready, or
/// within the initialization period when its sample may predate readiness, or when it
/// never became Ready within the initial-readiness delay.
pub(super) fn group_pods(
    pods: &[Arc<Pod>],
    metrics: &PodMetrics,
    resource: &str,
    cpu_initialization_period: Duration,
    initial_readiness_delay: Duration,
    now_ms: i64,
) -> PodGroups {
    let mut groups = PodGroups::default();
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() || phase(pod) == "Failed" {
            groups.ignored.insert(pod.name_str().to_string());
            continue;
        }
        if phase(pod) == "Pending" {
            groups.unready.insert(pod.name_str().to_string());
            continue;
        }
        let Some(metric) = metrics.get(&pod.name_str().to_string()) else {
            groups.missing.insert(pod.name_str().to_string());
            continue;
        };
        if resource == "cpu" {
            let start = pod.status.as_ref().and_then(|s| s.start_time.as_ref());
            let unready = match (ready_condition(pod), start) {
                (Some(condition), Some(start)) => {
                    let start_ms = start.0.as_millisecond();
                    let transition_ms = time_ms(condition.last_transition_time.as_ref());
                    if start_ms.saturating_add(millis(cpu_initialization_period)) > now_ms {
                        condition.status == "False"
                            || metric.timestamp_ms < transition_ms.saturating_add(metric.window_ms)
                    } else {
                        condition.status == "False"
                            && start_ms.saturating_add(millis(initial_readiness_delay))
                                > transition_ms
                    }
                }
                _ => true,
            };
            if unready {
                groups.unready.insert(pod.name_str().to_string());
                continue;
            }
        }
        groups.ready += 1;
    }
    groups
}

/// Upstream `calculatePodRequests`: each pod's request of `resource` in thousandths,
/// summed over its containers (and sidecar init containers), or over `container` only.
pub(super) fn pod_requests(
    pods: &[Arc<Pod>],
    container: &str,
    resource: &str,
) -> Result<HashMap<String, i64>, String> {
    let mut requests = HashMap::new();
    for pod in pods {
        let mut sum: i64 = 0;
        let spec = pod.spec.as_ref();
        let containers = spec
            .map(|spec| spec.containers.iter())
            .into_iter()
            .flatten()
            .chain(
                spec.and_then(|spec| spec.init_containers.as_ref())
                    .into_iter()
                    .flatten()
                    .filter(|c| c.restart_policy.as_deref() == Some("Always")),
            );
        for c in containers {
            if !container.is_empty() && container != c.name {
                continue;
            }
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|requests| requests.get(resource));
            let Some(request) = request else {
                return Err(format!(
                    "missing request for {resource} in container {} of Pod {}",
                    c.name,
                    pod.name_str()
                ));
            };
            let milli = Quantity::from_api(&request.0)
                .ok()
                .and_then(|q| q.milli_value())
                .ok_or_else(|| {
                    format!(
                        "invalid request {:?} for {resource} in container {} of Pod {}",
                        request.0,
                        c.name,
                        pod.name_str()
                    )
                })?;
            sum = sum.saturating_add(milli);
        }
        requests.insert(pod.name_str().to_string(), sum);
    }
    Ok(requests)
}

/// Upstream `GetResourceUtilizationRatio`: (ratio to target, utilization %, average raw
/// value) over the pods that have both a sample and a request.
pub(super) fn utilization_ratio(
    metrics: &PodMetrics,
    requests: &HashMap<String, i64>,
    target_utilization: i32,
) -> Result<(f64, i32, i64), String> {
    let (mut metrics_total, mut requests_total, mut entries) = (0i64, 0i64, 0i64);
    for (pod, metric) in metrics {
        let Some(request) = requests.get(pod) else {
            continue;
        };
        metrics_total = metrics_total.saturating_add(metric.value);
        requests_total = requests_total.saturating_add(*request);
        entries += 1;
    }
    if requests_total == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    let utilization = (metrics_total.saturating_mul(100) / requests_total) as i32;
    Ok((
        f64::from(utilization) / f64::from(target_utilization),
        utilization,
        metrics_total / entries,
    ))
}

/// Upstream `GetMetricUsageRatio`: (ratio to target, average usage).
pub(super) fn usage_ratio(metrics: &PodMetrics, target_usage: i64) -> (f64, i64) {
    let total: i64 = metrics.values().map(|m| m.value).sum();
    let average = total / (metrics.len().max(1) as i64);
    (average as f64 / target_usage as f64, average)
}

fn ceil(value: f64) -> i32 {
    value.ceil() as i32
}

/// The outcome of a per-pod calculation.
#[derive(Debug, PartialEq)]
pub(super) struct Proposal {
    pub replicas: i32,
    /// Utilization in percent of the request (resource utilization targets only).
    pub utilization: i32,
    /// The average raw value in thousandths.
    pub raw: i64,
}

/// How to rate a pod without a sample, by the direction of the first estimate.
enum Fallback {
    /// A resource utilization: max(100 %, target) of the pod's request on scale-down.
    Utilization(i32, HashMap<String, i64>),
    /// A plain average: the target on scale-down.
    Target(i64),
}

impl Calculator {
    /// Upstream `GetResourceReplicas`: a Resource (or ContainerResource) metric with an
    /// utilization target.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn resource_replicas(
        &self,
        current: i32,
        target_utilization: i32,
        resource: &str,
        container: &str,
        pods: &[Arc<Pod>],
        mut metrics: PodMetrics,
        now_ms: i64,
    ) -> Result<Proposal, String> {
        if pods.is_empty() {
            return Err("no pods returned by selector while calculating replica count".into());
        }
        let groups = self.group(pods, &metrics, resource, now_ms);
        remove(&mut metrics, &groups);
        if metrics.is_empty() {
            return Err("did not receive metrics for targeted pods (pods might be unready)".into());
        }
        let requests = pod_requests(pods, container, resource)?;
        let (ratio, utilization, raw) = utilization_ratio(&metrics, &requests, target_utilization)?;
        let ratio_of = |metrics: &PodMetrics| {
            utilization_ratio(metrics, &requests, target_utilization).map(|(r, _, _)| r)
        };
        let replicas = self.adjust(
            current,
            ratio,
            &groups,
            &mut metrics,
            Fallback::Utilization(target_utilization, requests.clone()),
            ratio_of,
        )?;
        Ok(Proposal {
            replicas,
            utilization,
            raw,
        })
    }

    /// Upstream `calcPlainMetricReplicas`: a Resource metric with an AverageValue target
    /// (`resource` names it) or a Pods metric (`resource` empty).
    pub(super) fn plain_metric_replicas(
        &self,
        current: i32,
        target_usage: i64,
        resource: &str,
        pods: &[Arc<Pod>],
        mut metrics: PodMetrics,
        now_ms: i64,
    ) -> Result<Proposal, String> {
        if pods.is_empty() {
            return Err("no pods returned by selector while calculating replica count".into());
        }
        let groups = self.group(pods, &metrics, resource, now_ms);
        remove(&mut metrics, &groups);
        if metrics.is_empty() {
            return Err("did not receive metrics for targeted pods (pods might be unready)".into());
        }
        let (ratio, usage) = usage_ratio(&metrics, target_usage);
        let replicas = self.adjust(
            current,
            ratio,
            &groups,
            &mut metrics,
            Fallback::Target(target_usage),
            |metrics| Ok(usage_ratio(metrics, target_usage).0),
        )?;
        Ok(Proposal {
            replicas,
            utilization: 0,
            raw: usage,
        })
    }

    fn group(
        &self,
        pods: &[Arc<Pod>],
        metrics: &PodMetrics,
        resource: &str,
        now: i64,
    ) -> PodGroups {
        group_pods(
            pods,
            metrics,
            resource,
            self.cpu_initialization_period,
            self.initial_readiness_delay,
            now,
        )
    }

    /// The second half shared by the per-pod calculations: the plain estimate when every
    /// pod counted, else a recount with the missing and unready pods rated pessimistically.
    fn adjust(
        &self,
        current: i32,
        ratio: f64,
        groups: &PodGroups,
        metrics: &mut PodMetrics,
        fallback: Fallback,
        ratio_of: impl Fn(&PodMetrics) -> Result<f64, String>,
    ) -> Result<i32, String> {
        let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if (1.0 - ratio).abs() <= self.tolerance {
                return Ok(current);
            }
            return Ok(ceil(ratio * groups.ready as f64));
        }
        let zero = PodMetric {
            timestamp_ms: ZERO_TIME_MS,
            window_ms: 0,
            value: 0,
        };
        if !groups.missing.is_empty() {
            for pod in &groups.missing {
                let value = if ratio < 1.0 {
                    match &fallback {
                        Fallback::Utilization(target, requests) => {
                            let request = requests.get(pod).copied().unwrap_or(0);
                            request * i64::from((*target).max(100)) / 100
                        }
                        Fallback::Target(target) => *target,
                    }
                } else if ratio > 1.0 {
                    0
                } else {
                    continue;
                };
                metrics.insert(pod.clone(), PodMetric { value, ..zero });
            }
        }
        if scale_up_with_unready {
            for pod in &groups.unready {
                metrics.insert(pod.clone(), zero);
            }
        }
        let new_ratio = ratio_of(metrics)?;
        if (1.0 - new_ratio).abs() <= self.tolerance
            || (ratio < 1.0 && new_ratio > 1.0)
            || (ratio > 1.0 && new_ratio < 1.0)
        {
            return Ok(current);
        }
        let replicas = ceil(new_ratio * metrics.len() as f64);
        if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
            return Ok(current);
        }
        Ok(replicas)
    }

    /// Upstream `getUsageRatioReplicaCount` (Object and External metrics with a Value
    /// target): `ready` counts the Running and Ready pods of the target, asked only when
    /// needed.
    pub(super) fn usage_ratio_replicas(
        &self,
        current: i32,
        ratio: f64,
        ready: impl FnOnce() -> Result<usize, String>,
    ) -> Result<i32, String> {
        if current == 0 {
            return Ok(ceil(ratio));
        }
        if (1.0 - ratio).abs() <= self.tolerance {
            return Ok(current);
        }
        let ready = ready().map_err(|e| format!("unable to calculate ready pods: {e}"))?;
        Ok(ceil(ratio * ready as f64))
    }

    /// Upstream `GetObjectPerPodMetricReplicas` / `GetExternalPerPodMetricReplicas`: an
    /// AverageValue target over the target's status replicas; returns (replicas, average).
    pub(super) fn per_pod_replicas(
        &self,
        status_replicas: i32,
        usage: i64,
        target_average: i64,
    ) -> (i32, i64) {
        let mut replicas = status_replicas;
        let ratio = usage as f64 / (target_average as f64 * f64::from(status_replicas));
        if (1.0 - ratio).abs() > self.tolerance {
            replicas = ceil(usage as f64 / target_average as f64);
        }
        let average = (usage as f64 / f64::from(status_replicas)).ceil() as i64;
        (replicas, average)
    }
}

fn remove(metrics: &mut PodMetrics, groups: &PodGroups) {
    for pod in groups.ignored.iter().chain(&groups.unready) {
        metrics.remove(pod);
    }
}

/// The Running and Ready pods among `pods` (upstream `getReadyPodsCount`).
pub(super) fn ready_pods(pods: &[Arc<Pod>]) -> Result<usize, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    Ok(pods
        .iter()
        .filter(|pod| {
            phase(pod) == "Running"
                && ready_condition(pod).is_some_and(|condition| condition.status == "True")
        })
        .count())
}

#[cfg(test)]
#[path = "replica_calculator_tests.rs"]
mod tests;

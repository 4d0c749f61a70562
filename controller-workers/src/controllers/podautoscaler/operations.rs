//! The HPA controller's live calls, kept at the edge: the target's `scale` subresource
//! (found through discovery as a RESTMapper finds it), the three metrics APIs (upstream
//! `metrics/client.go`: `metrics.k8s.io/v1beta1` PodMetrics, `custom.metrics.k8s.io/
//! v1beta2`, `external.metrics.k8s.io/v1beta1`) and the HPA's status.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{CrossVersionObjectReference, HorizontalPodAutoscaler};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, APIResourceList, LabelSelector};
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::flags::parse_go_duration;
use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::selector::Selector;
use rkcm_gocompat::quantity::Quantity;

use super::replica_calculator::{PodMetric, PodMetrics};

/// How long discovery answers are reused (client-go's deferred mapper is reset every 30 s
/// by KCM).
const DISCOVERY_TTL: Duration = Duration::from_secs(30);
/// The window a custom metric without one is taken to have (upstream's
/// `metricServerDefaultMetricWindow`).
const DEFAULT_METRIC_WINDOW_MS: i64 = 60_000;

/// Where a kind is served: its group, version and plural resource name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Mapping {
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl Mapping {
    fn prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// `resource.group` (just `resource` in the core group), as the custom metrics API
    /// names resources.
    fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

type MappingCache = HashMap<(String, String), (Instant, Vec<Mapping>)>;

pub(super) struct Operations {
    client: kube::Client,
    mappings: Mutex<MappingCache>,
}

fn query(pairs: &[(&str, &str)]) -> String {
    let encoded: Vec<String> = pairs
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| format!("{key}={}", percent_encode(value)))
        .collect();
    if encoded.is_empty() {
        String::new()
    } else {
        format!("?{}", encoded.join("&"))
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `metav1.LabelSelectorAsSelector(selector).String()` (the one conversion,
/// [`crate::selector::Selector`]): requirements sorted by key; a missing selector is the
/// empty string.
pub(super) fn selector_string(selector: Option<&LabelSelector>) -> Result<String, String> {
    let Some(selector) = selector else {
        return Ok(String::new());
    };
    Selector::from_label_selector(Some(selector)).map(|selector| selector.to_string())
}

fn milli_of(value: &Value) -> Option<i64> {
    Quantity::from_api(value.as_str()?).ok()?.milli_value()
}

fn timestamp_ms(value: &Value) -> i64 {
    value
        .as_str()
        .and_then(|text| text.parse::<jiff::Timestamp>().ok())
        .map_or(super::replica_calculator::ZERO_TIME_MS, |t| {
            t.as_millisecond()
        })
}

impl Operations {
    pub(super) fn new(client: kube::Client) -> Operations {
        Operations {
            client,
            mappings: Mutex::new(HashMap::new()),
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, kube::Error> {
        let request = http::Request::get(path)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        self.client.request::<T>(request).await
    }

    /// Every resource serving `kind` in `group`, the preferred version first (a
    /// RESTMapper's `RESTMappings`).
    pub(super) async fn mappings(&self, group: &str, kind: &str) -> anyhow::Result<Vec<Mapping>> {
        let cache_key = (group.to_string(), kind.to_string());
        if let Some((at, mappings)) = lock(&self.mappings).get(&cache_key) {
            if at.elapsed() < DISCOVERY_TTL {
                return Ok(mappings.clone());
            }
        }
        let versions: Vec<String> = if group.is_empty() {
            vec!["v1".to_string()]
        } else {
            let api_group: APIGroup = self
                .get(&format!("/apis/{group}"))
                .await
                .map_err(|e| anyhow!("no matches for kind {kind:?} in group {group:?}: {e}"))?;
            let preferred = api_group.preferred_version.map(|v| v.version);
            let mut versions: Vec<String> = preferred.iter().cloned().collect();
            versions.extend(
                api_group
                    .versions
                    .into_iter()
                    .map(|v| v.version)
                    .filter(|v| Some(v) != preferred.as_ref()),
            );
            versions
        };
        let mut mappings = Vec::new();
        for version in versions {
            let path = if group.is_empty() {
                format!("/api/{version}")
            } else {
                format!("/apis/{group}/{version}")
            };
            let Ok(list) = self.get::<APIResourceList>(&path).await else {
                continue;
            };
            for resource in list.resources {
                if resource.kind == kind && !resource.name.contains('/') {
                    mappings.push(Mapping {
                        group: group.to_string(),
                        version: version.clone(),
                        resource: resource.name,
                    });
                }
            }
        }
        if mappings.is_empty() {
            bail!("no matches for kind {kind:?} in group {group:?}");
        }
        lock(&self.mappings).insert(cache_key, (Instant::now(), mappings.clone()));
        Ok(mappings)
    }

    /// Upstream `scaleForResourceMappings`: the first mapping whose scale answers; the
    /// first error otherwise.
    pub(super) async fn get_scale(
        &self,
        namespace: &str,
        name: &str,
        mappings: &[Mapping],
    ) -> Result<(Scale, Mapping), kube::Error> {
        let mut first_error = None;
        for mapping in mappings {
            let path = format!(
                "{}/namespaces/{namespace}/{}/{name}/scale",
                mapping.prefix(),
                mapping.resource
            );
            match self.get::<Scale>(&path).await {
                Ok(scale) => return Ok((scale, mapping.clone())),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| {
            kube::Error::Discovery(kube::error::DiscoveryError::MissingResource(
                "unrecognized resource".into(),
            ))
        }))
    }

    pub(super) async fn update_scale(
        &self,
        namespace: &str,
        name: &str,
        mapping: &Mapping,
        scale: &Scale,
    ) -> Result<Scale, kube::Error> {
        let path = format!(
            "{}/namespaces/{namespace}/{}/{name}/scale",
            mapping.prefix(),
            mapping.resource
        );
        let body = serde_json::to_vec(scale).map_err(kube::Error::SerdeError)?;
        let request = http::Request::put(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(kube::Error::HttpError)?;
        self.client.request::<Scale>(request).await
    }

    /// Upstream `GetResourceMetric`: the pods' usage of `resource` (summed over their
    /// containers, or of `container` only) and the first sample's time.
    pub(super) async fn resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &str,
        container: &str,
    ) -> Result<(PodMetrics, i64), String> {
        let path = format!(
            "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods{}",
            query(&[("labelSelector", selector)])
        );
        let list: Value = self
            .get(&path)
            .await
            .map_err(|e| format!("unable to fetch metrics from resource metrics API: {e}"))?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let Some(first) = items.first() else {
            return Err("no metrics returned from resource metrics API".into());
        };
        let timestamp = timestamp_ms(&first["timestamp"]);
        let mut metrics = PodMetrics::new();
        for item in &items {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            let sample = |value: i64| PodMetric {
                timestamp_ms: timestamp_ms(&item["timestamp"]),
                window_ms: item["window"]
                    .as_str()
                    .and_then(|w| parse_go_duration(w).ok())
                    .map_or(0, |w| i64::try_from(w.as_millis()).unwrap_or(0)),
                value,
            };
            let containers = item["containers"].as_array().cloned().unwrap_or_default();
            if !container.is_empty() {
                let Some(found) = containers.iter().find(|c| c["name"] == container) else {
                    return Err(format!(
                        "failed to get container metrics: container {container} not present in metrics for pod {namespace}/{name}"
                    ));
                };
                if let Some(value) = milli_of(&found["usage"][resource]) {
                    metrics.insert(name.to_string(), sample(value));
                }
                continue;
            }
            if containers.is_empty() {
                continue;
            }
            let values: Option<Vec<i64>> = containers
                .iter()
                .map(|c| milli_of(&c["usage"][resource]))
                .collect();
            if let Some(values) = values {
                metrics.insert(name.to_string(), sample(values.iter().sum()));
            }
        }
        Ok((metrics, timestamp))
    }

    /// The custom metrics API's version (discovery's preferred one; v1beta2 when the
    /// group does not say).
    async fn custom_version(&self) -> String {
        match self.get::<APIGroup>("/apis/custom.metrics.k8s.io").await {
            Ok(group) => group
                .preferred_version
                .map(|v| v.version)
                .unwrap_or_else(|| "v1beta2".into()),
            Err(_) => "v1beta2".into(),
        }
    }

    /// Upstream `GetRawMetric`: a Pods metric for the pods `selector` picks.
    pub(super) async fn raw_metric(
        &self,
        metric: &str,
        namespace: &str,
        selector: &str,
        metric_selector: &str,
    ) -> Result<(PodMetrics, i64), String> {
        let version = self.custom_version().await;
        let path = format!(
            "/apis/custom.metrics.k8s.io/{version}/namespaces/{namespace}/pods/*/{}{}",
            percent_encode(metric),
            query(&[
                ("labelSelector", selector),
                ("metricLabelSelector", metric_selector)
            ])
        );
        let list: Value = self
            .get(&path)
            .await
            .map_err(|e| format!("unable to fetch metrics from custom metrics API: {e}"))?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let Some(first) = items.first() else {
            return Err("no metrics returned from custom metrics API".into());
        };
        let timestamp = timestamp_ms(&first["timestamp"]);
        let mut metrics = PodMetrics::new();
        for item in &items {
            let name = item["describedObject"]["name"].as_str().unwrap_or_default();
            let window_ms = item["windowSeconds"]
                .as_i64()
                .map_or(DEFAULT_METRIC_WINDOW_MS, |s| s.saturating_mul(1000));
            let value = milli_of(&item["value"])
                .ok_or_else(|| format!("invalid value for metric {metric} of pod {name}"))?;
            metrics.insert(
                name.to_string(),
                PodMetric {
                    timestamp_ms: timestamp_ms(&item["timestamp"]),
                    window_ms,
                    value,
                },
            );
        }
        Ok((metrics, timestamp))
    }

    /// Upstream `GetObjectMetric`: one object's metric, in thousandths.
    pub(super) async fn object_metric(
        &self,
        metric: &str,
        namespace: &str,
        object: &CrossVersionObjectReference,
        metric_selector: &str,
    ) -> Result<(i64, i64), String> {
        let group = object
            .api_version
            .as_deref()
            .unwrap_or("")
            .rsplit_once('/')
            .map_or("", |(group, _)| group);
        let version = self.custom_version().await;
        let base = format!("/apis/custom.metrics.k8s.io/{version}/namespaces/{namespace}");
        let path = if object.kind == "Namespace" && group.is_empty() {
            format!("{base}/metrics/{}", percent_encode(metric))
        } else {
            let mapping = self
                .mappings(group, &object.kind)
                .await
                .map_err(|e| format!("unable to map kind {} to a resource: {e}", object.kind))?;
            format!(
                "{base}/{}/{}/{}",
                mapping[0].group_resource(),
                percent_encode(&object.name),
                percent_encode(metric)
            )
        };
        let path = format!(
            "{path}{}",
            query(&[("metricLabelSelector", metric_selector)])
        );
        let list: Value = self
            .get(&path)
            .await
            .map_err(|e| format!("unable to fetch metrics from custom metrics API: {e}"))?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if items.len() != 1 {
            return Err(format!(
                "unable to fetch metrics from custom metrics API: the custom metrics API server returned {} results when we asked for exactly one",
                items.len()
            ));
        }
        let value = milli_of(&items[0]["value"])
            .ok_or_else(|| format!("invalid value for metric {metric}"))?;
        Ok((value, timestamp_ms(&items[0]["timestamp"])))
    }

    /// Upstream `GetExternalMetric`: every series' value, in thousandths.
    pub(super) async fn external_metric(
        &self,
        metric: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<(Vec<i64>, i64), String> {
        let path = format!(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{}{}",
            percent_encode(metric),
            query(&[("labelSelector", selector)])
        );
        let list: Value = self
            .get(&path)
            .await
            .map_err(|e| format!("unable to fetch metrics from external metrics API: {e}"))?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let Some(first) = items.first() else {
            return Err("no metrics returned from external metrics API".into());
        };
        let values = items
            .iter()
            .map(|item| milli_of(&item["value"]))
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| format!("invalid value for external metric {metric}"))?;
        Ok((values, timestamp_ms(&first["timestamp"])))
    }

    /// A full `PUT horizontalpodautoscalers/status`.
    pub(super) async fn update_status(&self, hpa: &HorizontalPodAutoscaler) -> anyhow::Result<()> {
        let namespace = hpa.namespace_str();
        let name = hpa.name_str();
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(self.client.clone(), namespace);
        api.replace_status(name, &PostParams::default(), hpa)
            .await
            .map(|_| ())
            .map_err(anyhow::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn selectors_print_as_apimachinery_prints_them() {
        assert_eq!(selector_string(None).unwrap(), "");
        let selector = LabelSelector {
            match_labels: Some([("z".to_string(), "1".to_string())].into()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "a".into(),
                    operator: "In".into(),
                    values: Some(vec!["y".into(), "x".into()]),
                },
                LabelSelectorRequirement {
                    key: "m".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        assert_eq!(
            selector_string(Some(&selector)).unwrap(),
            "a in (x,y),!m,z=1"
        );
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(selector_string(Some(&bad)).is_err());
    }

    #[test]
    fn queries_are_encoded() {
        assert_eq!(
            query(&[("labelSelector", "app=web,x in (a)")]),
            "?labelSelector=app%3Dweb%2Cx%20in%20%28a%29"
        );
        assert_eq!(query(&[("labelSelector", "")]), "");
        let mapping = Mapping {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
        };
        assert_eq!(mapping.prefix(), "/apis/apps/v1");
        assert_eq!(mapping.group_resource(), "deployments.apps");
    }
}

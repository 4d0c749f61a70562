//! The resource, custom and external metrics APIs, served as a real cluster's aggregated
//! API servers (metrics-server, a custom-metrics adapter) would serve them, with values
//! the tests set through annotations instead of a kubelet's measurements:
//!
//! - `metrics.k8s.io/v1beta1`: `PodMetrics` for every Running pod whose containers have
//!   started, from the pod annotations [`CPU_USAGE`] and [`MEMORY_USAGE`] (the pod's total,
//!   split evenly over its containers; `sim.rkcm.io/cpu-usage.<container>` sets one
//!   container's own value; none means 0), and `NodeMetrics`, the sum over a node's pods.
//!   `kubectl top` and the horizontal-pod-autoscaler read these.
//! - `custom.metrics.k8s.io/v1beta2` (and `v1beta1`): a `MetricValueList` valued from the
//!   annotation [`CUSTOM_METRIC_PREFIX`]`<metric>` on the pod or object described.
//! - `external.metrics.k8s.io/v1beta1`: an `ExternalMetricValueList` valued from the
//!   Namespace annotation [`EXTERNAL_METRIC_PREFIX`]`<metric>`.
//!
//! The groups are registered in the [`Registry`] (so `/apis`, aggregated discovery and the
//! OpenAPI index list them); every request under them is answered here, ahead of the
//! storage handlers. Absent metrics answer 404 with a `Status`, as the adapters do.

use std::collections::BTreeMap;

use http::Method;
use serde_json::{json, Map, Value};

use crate::api::{now, timestamp, Sim};
use crate::request::{ApiRequest, ApiResponse};
use crate::resources::{Registry, ResourceDef};
use crate::status::ApiError;
use crate::store::ResKey;
use rkcm_gocompat::quantity::{Format, Quantity};
use rkcm_gocompat::{FieldSelector, LabelSelector};

/// Pod annotation: the pod's CPU usage (a quantity, e.g. `250m`), split over its containers.
pub const CPU_USAGE: &str = "sim.rkcm.io/cpu-usage";
/// Pod annotation: the pod's memory usage (a quantity, e.g. `64Mi`), split over its containers.
pub const MEMORY_USAGE: &str = "sim.rkcm.io/memory-usage";
/// Annotation prefix on a pod or any object: `sim.rkcm.io/metric.rps: "10"` is the custom
/// metric `rps` of that object.
pub const CUSTOM_METRIC_PREFIX: &str = "sim.rkcm.io/metric.";
/// Namespace annotation prefix: `sim.rkcm.io/external-metric.queue_depth: "30"` is the
/// external metric `queue_depth` in that namespace.
pub const EXTERNAL_METRIC_PREFIX: &str = "sim.rkcm.io/external-metric.";

pub const RESOURCE_METRICS_GROUP: &str = "metrics.k8s.io";
pub const CUSTOM_METRICS_GROUP: &str = "custom.metrics.k8s.io";
pub const EXTERNAL_METRICS_GROUP: &str = "external.metrics.k8s.io";

/// metrics-server's scrape window.
const WINDOW: &str = "15s";

/// Adds the three metrics groups to the registry, as their APIServices would.
pub fn register(registry: &Registry) {
    let def = |resource: &str, kind: &str, namespaced: bool| ResourceDef {
        group: RESOURCE_METRICS_GROUP.into(),
        version: "v1beta1".into(),
        resource: resource.into(),
        kind: kind.into(),
        singular: String::new(),
        namespaced,
        verbs: vec!["get".into(), "list".into()],
        short_names: Vec::new(),
        categories: Vec::new(),
        storage_version_hash: String::new(),
        subresources: Vec::new(),
        custom: None,
    };
    registry.add_aggregated(
        RESOURCE_METRICS_GROUP,
        vec!["v1beta1".into()],
        vec![
            def("nodes", "NodeMetrics", false),
            def("pods", "PodMetrics", true),
        ],
    );
    // The adapters' resources are the metrics that exist right now: their discovery
    // documents are built per request ([`resource_list`]).
    registry.add_aggregated(
        CUSTOM_METRICS_GROUP,
        vec!["v1beta2".into(), "v1beta1".into()],
        Vec::new(),
    );
    registry.add_aggregated(EXTERNAL_METRICS_GROUP, vec!["v1beta1".into()], Vec::new());
}

/// Answers a request under one of the metrics groups; `None` for any other path (and for
/// the group documents, which discovery builds from the registry).
pub fn route(sim: &Sim, req: &ApiRequest, path: &str) -> Option<ApiResponse> {
    let segs: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(crate::request::percent_decode)
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        [apis, g, v, rest @ ..] if apis == "apis" => (g.as_str(), v.as_str(), rest),
        _ => return None,
    };
    let known = match group {
        RESOURCE_METRICS_GROUP => version == "v1beta1",
        CUSTOM_METRICS_GROUP => matches!(version, "v1beta1" | "v1beta2"),
        EXTERNAL_METRICS_GROUP => version == "v1beta1",
        _ => return None,
    };
    if !known {
        return Some(error(ApiError::no_route()));
    }
    if req.method != Method::GET {
        return Some(error(ApiError::method_not_allowed(req.method.as_str())));
    }
    if rest.is_empty() && group == RESOURCE_METRICS_GROUP {
        // Static: the registry's document.
        return None;
    }
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    let result = match group {
        RESOURCE_METRICS_GROUP => resource_metrics(sim, req, &rest),
        _ if rest.is_empty() => Ok(resource_list(sim, group, version)),
        CUSTOM_METRICS_GROUP => custom_metrics(sim, req, version, &rest),
        _ => external_metrics(sim, req, &rest),
    };
    Some(match result {
        Ok(v) => ApiResponse::json(200, v),
        Err(e) => error(e),
    })
}

fn error(e: ApiError) -> ApiResponse {
    ApiResponse::json(e.code, e.to_status())
}

// ----- metrics.k8s.io -----

fn resource_metrics(sim: &Sim, req: &ApiRequest, rest: &[&str]) -> Result<Value, ApiError> {
    if req.flag("watch") {
        return Err(ApiError::method_not_allowed("watch"));
    }
    let api_version = format!("{RESOURCE_METRICS_GROUP}/v1beta1");
    let now = timestamp(now());
    match rest {
        ["pods"] => pod_metrics_list(sim, req, None, &now),
        ["namespaces", ns, "pods"] => pod_metrics_list(sim, req, Some(ns), &now),
        ["namespaces", ns, "pods", name] => {
            let pod = sim.store.lock().get(&ResKey::new("", "pods"), ns, name);
            let metrics = pod.and_then(|p| pod_metrics(&p, &now));
            match metrics {
                Some(mut m) => {
                    m["kind"] = json!("PodMetrics");
                    m["apiVersion"] = json!(api_version);
                    Ok(put_type_first(m))
                }
                None => Err(metrics_not_found("podmetrics", &format!("{ns}/{name}"))),
            }
        }
        ["nodes"] => {
            let selectors = Selectors::from(req, None)?;
            let items: Vec<Value> = node_metrics(sim, None, &now)
                .into_iter()
                .filter(|(labels, _)| selectors.labels_match(labels))
                .map(|(_, m)| m)
                .collect();
            Ok(list("NodeMetricsList", &api_version, items))
        }
        ["nodes", name] => match node_metrics(sim, Some(name), &now).pop() {
            Some((_, mut m)) => {
                m["kind"] = json!("NodeMetrics");
                m["apiVersion"] = json!(api_version);
                Ok(put_type_first(m))
            }
            None => Err(metrics_not_found("nodemetrics", name)),
        },
        _ => Err(ApiError::no_route()),
    }
}

fn metrics_not_found(resource: &str, name: &str) -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        format!("{resource}.{RESOURCE_METRICS_GROUP} \"{name}\" not found"),
    )
    .with_details(json!({"name": name, "group": RESOURCE_METRICS_GROUP, "kind": resource}))
}

fn list(kind: &str, api_version: &str, items: Vec<Value>) -> Value {
    json!({"kind": kind, "apiVersion": api_version, "metadata": {}, "items": items})
}

/// `kind` and `apiVersion` lead, as Go's encoder writes a typed object.
fn put_type_first(v: Value) -> Value {
    let Value::Object(m) = v else { return v };
    let mut out = Map::new();
    for k in ["kind", "apiVersion"] {
        if let Some(x) = m.get(k) {
            out.insert(k.into(), x.clone());
        }
    }
    for (k, x) in m {
        if k != "kind" && k != "apiVersion" {
            out.insert(k, x);
        }
    }
    Value::Object(out)
}

/// A request's `labelSelector` and `fieldSelector`, parsed (a bad one is a 400).
struct Selectors {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl Selectors {
    fn from(req: &ApiRequest, field_resource: Option<&str>) -> Result<Selectors, ApiError> {
        let labels = match req.param("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(LabelSelector::parse(s).map_err(ApiError::bad_request)?),
            None => None,
        };
        let fields = match (
            req.param("fieldSelector").filter(|s| !s.is_empty()),
            field_resource,
        ) {
            (Some(s), Some(resource)) => {
                let f = FieldSelector::parse(s).map_err(ApiError::bad_request)?;
                f.check_supported(resource).map_err(ApiError::bad_request)?;
                Some(f)
            }
            _ => None,
        };
        Ok(Selectors { labels, fields })
    }

    fn labels_match(&self, labels: &BTreeMap<String, String>) -> bool {
        self.labels.as_ref().is_none_or(|s| s.matches(labels))
    }

    fn pod_matches(&self, pod: &Value) -> bool {
        self.labels_match(&string_map(&pod["metadata"]["labels"]))
            && self.fields.as_ref().is_none_or(|f| {
                f.matches(&|name| rkcm_gocompat::fields::field_value("pods", pod, name))
            })
    }
}

fn pod_metrics_list(
    sim: &Sim,
    req: &ApiRequest,
    ns: Option<&str>,
    now: &str,
) -> Result<Value, ApiError> {
    let selectors = Selectors::from(req, Some("pods"))?;
    let items: Vec<Value> = {
        let txn = sim.store.lock();
        txn.range(&ResKey::new("", "pods"), ns, None)
            .filter(|(_, p)| selectors.pod_matches(p))
            .filter_map(|(_, p)| pod_metrics(p, now))
            .collect()
    };
    Ok(list(
        "PodMetricsList",
        &format!("{RESOURCE_METRICS_GROUP}/v1beta1"),
        items,
    ))
}

/// One container's usage: CPU in nanocores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_nanos: i128,
    pub memory_bytes: i128,
}

impl Usage {
    fn to_json(self) -> Value {
        json!({"cpu": cpu_quantity(self.cpu_nanos), "memory": memory_quantity(self.memory_bytes)})
    }
}

/// CPU as metrics-server writes it (a scaled nano quantity: `100m`, `33333333n`).
fn cpu_quantity(nanos: i128) -> String {
    match Quantity::parse(&format!("{nanos}n")) {
        // Adding to zero drops the text as written, leaving Go's canonical form.
        Ok(q) => Quantity::zero(Format::DecimalSI).plus(&q).to_string(),
        Err(_) => "0".into(),
    }
}

/// Memory as metrics-server writes it (bytes in the binary format: `64Mi`, `1000`).
fn memory_quantity(bytes: i128) -> String {
    let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
    Quantity::from_int(bytes, Format::BinarySI).to_string()
}

/// A quantity annotation's value × 10⁹; an absent, malformed or negative value is 0.
fn annotation_nanos(annotations: &Map<String, Value>, key: &str) -> Option<i128> {
    let text = annotations.get(key)?.as_str()?;
    match Quantity::from_api(text).ok().and_then(|q| q.nano_value()) {
        Some(n) if n >= 0 => Some(n),
        _ => {
            tracing::debug!(
                annotation = key,
                value = text,
                "not a usable quantity; using 0"
            );
            Some(0)
        }
    }
}

/// Each container's usage, from the pod's annotations: the pod total split evenly (the
/// remainder going to the first containers), unless a container has its own annotation.
pub fn container_usage(annotations: &Map<String, Value>, containers: &[&str]) -> Vec<Usage> {
    let split = |total: Option<i128>, per_container: &dyn Fn(&str) -> Option<i128>| {
        let total = total.unwrap_or(0);
        let shared: Vec<usize> = (0..containers.len())
            .filter(|&i| per_container(containers[i]).is_none())
            .collect();
        let n = shared.len().max(1) as i128;
        let (each, mut extra) = (total / n, total % n);
        let mut out = vec![0i128; containers.len()];
        for (i, name) in containers.iter().enumerate() {
            out[i] = match per_container(name) {
                Some(v) => v,
                None => {
                    let bump = i128::from(extra > 0);
                    extra -= bump;
                    each + bump
                }
            };
        }
        out
    };
    let cpu = split(annotation_nanos(annotations, CPU_USAGE), &|c| {
        annotation_nanos(annotations, &format!("{CPU_USAGE}.{c}"))
    });
    let memory = split(
        annotation_nanos(annotations, MEMORY_USAGE).map(|n| ceil_div(n, 1_000_000_000)),
        &|c| {
            annotation_nanos(annotations, &format!("{MEMORY_USAGE}.{c}"))
                .map(|n| ceil_div(n, 1_000_000_000))
        },
    );
    cpu.into_iter()
        .zip(memory)
        .map(|(cpu_nanos, memory_bytes)| Usage {
            cpu_nanos,
            memory_bytes,
        })
        .collect()
}

fn ceil_div(a: i128, b: i128) -> i128 {
    (a + b - 1) / b
}

/// The names of a pod's containers when the pod is Running and every container has started;
/// `None` when metrics-server would have nothing for it.
pub fn running_containers(pod: &Value) -> Option<Vec<&str>> {
    if pod["status"]["phase"].as_str() != Some("Running")
        || !pod["metadata"]["deletionTimestamp"].is_null()
    {
        return None;
    }
    let statuses = pod["status"]["containerStatuses"].as_array()?;
    let names: Vec<&str> = pod["spec"]["containers"]
        .as_array()?
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    let started = |name: &str| {
        statuses.iter().any(|s| {
            s["name"].as_str() == Some(name)
                && s["state"]["running"].is_object()
                && s["started"].as_bool() != Some(false)
        })
    };
    (!names.is_empty() && names.iter().all(|n| started(n))).then_some(names)
}

fn pod_usage(pod: &Value) -> Option<(Vec<&str>, Vec<Usage>)> {
    let names = running_containers(pod)?;
    let empty = Map::new();
    let annotations = pod["metadata"]["annotations"].as_object().unwrap_or(&empty);
    let usage = container_usage(annotations, &names);
    Some((names, usage))
}

/// A pod's `PodMetrics` (without kind/apiVersion, as a list item).
fn pod_metrics(pod: &Value, now: &str) -> Option<Value> {
    let (names, usage) = pod_usage(pod)?;
    let md = &pod["metadata"];
    let mut metadata =
        json!({"name": md["name"], "namespace": md["namespace"], "creationTimestamp": now});
    if md["labels"].is_object() {
        metadata["labels"] = md["labels"].clone();
    }
    let containers: Vec<Value> = names
        .iter()
        .zip(usage)
        .map(|(name, u)| json!({"name": name, "usage": u.to_json()}))
        .collect();
    Some(
        json!({"metadata": metadata, "timestamp": now, "window": WINDOW, "containers": containers}),
    )
}

/// `NodeMetrics` of every node (or the named one) with its labels, summed over its pods.
fn node_metrics(
    sim: &Sim,
    only: Option<&str>,
    now: &str,
) -> Vec<(BTreeMap<String, String>, Value)> {
    let txn = sim.store.lock();
    let mut totals: BTreeMap<String, Usage> = BTreeMap::new();
    let nodes: Vec<_> = match only {
        Some(name) => txn
            .get(&ResKey::new("", "nodes"), "", name)
            .into_iter()
            .collect(),
        None => txn
            .range(&ResKey::new("", "nodes"), None, None)
            .map(|(_, n)| n.clone())
            .collect(),
    };
    for (_, pod) in txn.range(&ResKey::new("", "pods"), None, None) {
        let Some(node) = pod["spec"]["nodeName"].as_str() else {
            continue;
        };
        if only.is_some_and(|o| o != node) {
            continue;
        }
        if let Some((_, usage)) = pod_usage(pod) {
            let t = totals.entry(node.to_string()).or_default();
            for u in usage {
                t.cpu_nanos += u.cpu_nanos;
                t.memory_bytes += u.memory_bytes;
            }
        }
    }
    nodes
        .iter()
        .filter_map(|n| {
            let name = n["metadata"]["name"].as_str()?;
            let labels = string_map(&n["metadata"]["labels"]);
            let mut metadata = json!({"name": name, "creationTimestamp": now});
            if n["metadata"]["labels"].is_object() {
                metadata["labels"] = n["metadata"]["labels"].clone();
            }
            let usage = totals.get(name).copied().unwrap_or_default();
            Some((
                labels,
                json!({"metadata": metadata, "timestamp": now, "window": WINDOW, "usage": usage.to_json()}),
            ))
        })
        .collect()
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

// ----- custom.metrics.k8s.io and external.metrics.k8s.io -----

/// An adapter's discovery document: one entry per metric that exists now.
fn resource_list(sim: &Sim, group: &str, version: &str) -> Value {
    let mut entries: BTreeMap<String, Value> = BTreeMap::new();
    let txn = sim.store.lock();
    if group == EXTERNAL_METRICS_GROUP {
        for (_, ns) in txn.range(&ResKey::new("", "namespaces"), None, None) {
            for metric in annotated_metrics(ns, EXTERNAL_METRIC_PREFIX) {
                entries.insert(
                    metric.clone(),
                    json!({"name": metric, "singularName": "", "namespaced": true,
                           "kind": "ExternalMetricValueList", "verbs": ["get"]}),
                );
            }
        }
    } else {
        for def in sim.registry.all() {
            if def.group == RESOURCE_METRICS_GROUP || !def.is_stored() {
                continue;
            }
            let gr = def.qualified_resource();
            for (_, obj) in txn.range(&def.key(), None, None) {
                for metric in annotated_metrics(obj, CUSTOM_METRIC_PREFIX) {
                    let name = format!("{gr}/{metric}");
                    // A namespace's own metrics are cluster-scoped; the metrics of
                    // namespaced objects are read per namespace.
                    entries.entry(name.clone()).or_insert_with(|| {
                        json!({"name": name, "singularName": "", "namespaced": def.namespaced,
                               "kind": "MetricValueList", "verbs": ["get"]})
                    });
                }
            }
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1",
           "groupVersion": format!("{group}/{version}"),
           "resources": entries.into_values().collect::<Vec<_>>()})
}

fn annotated_metrics(obj: &Value, prefix: &str) -> Vec<String> {
    obj["metadata"]["annotations"]
        .as_object()
        .map(|m| {
            m.keys()
                .filter_map(|k| k.strip_prefix(prefix))
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `obj`'s metric annotation, canonicalized; `None` when absent or malformed.
fn annotated_value(obj: &Value, key: &str) -> Option<String> {
    let text = obj["metadata"]["annotations"][key].as_str()?;
    match Quantity::parse(text.trim()) {
        Ok(q) => Some(q.to_string()),
        Err(e) => {
            tracing::debug!(annotation = key, value = text, error = %e, "not a quantity; metric absent");
            None
        }
    }
}

/// The adapters' "metric not found" (custom-metrics-apiserver's `NewMetricNotFound*Error`).
fn metric_not_found(metric: &str, resource: &str, name: Option<&str>) -> ApiError {
    let message = match name {
        Some(n) => format!("the server could not find the metric {metric} for {resource} {n}"),
        None => format!("the server could not find the metric {metric} for {resource}"),
    };
    ApiError::new(404, "NotFound", message)
}

/// The served resource a custom-metrics path names: `pods`, `deployments.apps`, …
fn custom_target(sim: &Sim, resource: &str) -> Option<std::sync::Arc<ResourceDef>> {
    let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
    sim.registry
        .all()
        .into_iter()
        .find(|d| d.resource == plural && d.group == group && d.is_stored())
}

fn custom_metrics(
    sim: &Sim,
    req: &ApiRequest,
    version: &str,
    rest: &[&str],
) -> Result<Value, ApiError> {
    // (namespace, resource, object name or "*", metric)
    let (ns, resource, name, metric) = match rest {
        ["namespaces", ns, "metrics", metric] => (None, "namespaces", *ns, *metric),
        ["namespaces", ns, resource, name, metric] => (Some(*ns), *resource, *name, *metric),
        [resource, name, metric] => (None, *resource, *name, *metric),
        _ => return Err(ApiError::no_route()),
    };
    let def = custom_target(sim, resource).ok_or_else(ApiError::no_route)?;
    if def.namespaced != ns.is_some() {
        return Err(ApiError::no_route());
    }
    let metric_selector = match req.param("metricLabelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s).map_err(ApiError::bad_request)?),
        None => None,
    };
    let gr = def.qualified_resource();
    // The annotation metrics carry no labels: a selector asking for any finds nothing.
    if metric_selector
        .as_ref()
        .is_some_and(|s| !s.matches(&BTreeMap::new()))
    {
        return Err(metric_not_found(metric, &gr, (name != "*").then_some(name)));
    }
    let key = format!("{CUSTOM_METRIC_PREFIX}{metric}");
    let objects: Vec<std::sync::Arc<Value>> = {
        let txn = sim.store.lock();
        if name == "*" {
            let selectors = Selectors::from(req, None)?;
            txn.range(&def.key(), ns, None)
                .filter(|(_, o)| selectors.labels_match(&string_map(&o["metadata"]["labels"])))
                .map(|(_, o)| o.clone())
                .collect()
        } else {
            txn.get(&def.key(), ns.unwrap_or(""), name)
                .into_iter()
                .collect()
        }
    };
    let now = timestamp(now());
    let items: Vec<Value> = objects
        .iter()
        .filter_map(|o| {
            let value = annotated_value(o, &key)?;
            let md = &o["metadata"];
            let mut described = json!({"kind": def.kind, "name": md["name"],
                                       "apiVersion": format!("{}/{}", def.group, def.version)});
            if def.namespaced {
                described["namespace"] = md["namespace"].clone();
            }
            let mut item = json!({"describedObject": described, "timestamp": now, "value": value});
            if version == "v1beta2" {
                item["metric"] = json!({"name": metric});
            } else {
                item["metricName"] = json!(metric);
            }
            Some(item)
        })
        .collect();
    if items.is_empty() {
        return Err(metric_not_found(metric, &gr, (name != "*").then_some(name)));
    }
    Ok(list(
        "MetricValueList",
        &format!("{CUSTOM_METRICS_GROUP}/{version}"),
        items,
    ))
}

fn external_metrics(sim: &Sim, req: &ApiRequest, rest: &[&str]) -> Result<Value, ApiError> {
    let ["namespaces", ns, metric] = rest else {
        return Err(ApiError::no_route());
    };
    let selector = match req.param("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s).map_err(ApiError::bad_request)?),
        None => None,
    };
    let not_found = || metric_not_found(metric, "namespaces", Some(ns));
    if selector
        .as_ref()
        .is_some_and(|s| !s.matches(&BTreeMap::new()))
    {
        return Err(not_found());
    }
    let namespace = sim
        .store
        .lock()
        .get(&ResKey::new("", "namespaces"), "", ns)
        .ok_or_else(not_found)?;
    let value = annotated_value(&namespace, &format!("{EXTERNAL_METRIC_PREFIX}{metric}"))
        .ok_or_else(not_found)?;
    Ok(list(
        "ExternalMetricValueList",
        &format!("{EXTERNAL_METRICS_GROUP}/v1beta1"),
        vec![
            json!({"metricName": metric, "metricLabels": {}, "timestamp": timestamp(now()), "value": value}),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs.iter().map(|(k, v)| ((*k).into(), json!(v))).collect()
    }

    #[test]
    fn pod_total_is_split_over_containers_with_overrides() {
        let a = annotations(&[(CPU_USAGE, "100m"), (MEMORY_USAGE, "64Mi")]);
        let u = container_usage(&a, &["a", "b"]);
        assert_eq!(u[0].cpu_nanos, 50_000_000);
        assert_eq!(u[1].cpu_nanos, 50_000_000);
        assert_eq!(u[0].memory_bytes, 32 << 20);

        let a = annotations(&[
            (CPU_USAGE, "100m"),
            ("sim.rkcm.io/cpu-usage.sidecar", "10m"),
        ]);
        let u = container_usage(&a, &["app", "sidecar"]);
        assert_eq!(u[0].cpu_nanos, 100_000_000);
        assert_eq!(u[1].cpu_nanos, 10_000_000);
        assert_eq!(u[0].memory_bytes, 0);

        // Remainders go to the first containers, so the pod's sum stays exact.
        let a = annotations(&[(CPU_USAGE, "100m")]);
        let u = container_usage(&a, &["a", "b", "c"]);
        assert_eq!(u.iter().map(|u| u.cpu_nanos).sum::<i128>(), 100_000_000);
        assert_eq!(u[0].cpu_nanos, 33_333_334);

        // Nothing annotated, or garbage: zero.
        let a = annotations(&[(CPU_USAGE, "lots")]);
        assert_eq!(container_usage(&a, &["a"]), vec![Usage::default()]);
    }

    #[test]
    fn quantities_are_written_as_metrics_server_writes_them() {
        assert_eq!(cpu_quantity(100_000_000), "100m");
        assert_eq!(cpu_quantity(33_333_333), "33333333n");
        assert_eq!(cpu_quantity(0), "0");
        assert_eq!(cpu_quantity(2_000_000_000), "2");
        assert_eq!(memory_quantity(64 << 20), "64Mi");
        assert_eq!(memory_quantity(0), "0");
    }

    #[test]
    fn only_running_pods_with_started_containers_have_metrics() {
        let pod = |phase: &str, running: bool| {
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
                   "status": {"phase": phase, "containerStatuses": [
                       {"name": "a", "started": running,
                        "state": if running { json!({"running": {}}) } else { json!({"waiting": {}}) }}]}})
        };
        assert_eq!(running_containers(&pod("Running", true)), Some(vec!["a"]));
        assert_eq!(running_containers(&pod("Running", false)), None);
        assert_eq!(running_containers(&pod("Pending", false)), None);
        assert_eq!(
            running_containers(&json!({"status": {"phase": "Running"}})),
            None
        );
    }
}

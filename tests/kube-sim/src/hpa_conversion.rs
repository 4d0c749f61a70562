//! HorizontalPodAutoscaler conversion between `autoscaling/v1` and `autoscaling/v2`, as
//! kube-apiserver's `pkg/apis/autoscaling/v1` conversion does it. kube-sim stores every HPA
//! in the v2 shape (the storage version); writes through v1 are converted on the way in
//! ([`to_storage`]) and reads through v1 on the way out ([`to_served`]), so list, watch,
//! get, update and status of either version see one object.
//!
//! v1 has room for one CPU utilization target and one current CPU utilization; everything
//! else v2 holds travels in the round-trip annotations ([`METRICS_ANNOTATION`],
//! [`CURRENT_METRICS_ANNOTATION`], [`CONDITIONS_ANNOTATION`], [`BEHAVIOR_ANNOTATION`]),
//! written on v1 reads and read back (then dropped) on v1 writes. A v2 write drops them too.

use serde_json::{json, Map, Value};

pub const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
pub const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
const ROUND_TRIP: [&str; 4] = [
    METRICS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    CONDITIONS_ANNOTATION,
];

/// v1 HPAs have this target when they name none (autoscaling's `DefaultCPUUtilization`).
const DEFAULT_CPU_UTILIZATION: i64 = 80;

fn is_hpa(group: &str, kind: &str) -> bool {
    group == "autoscaling" && kind == "HorizontalPodAutoscaler"
}

/// Whether objects of this group/version/kind are served converted from storage.
pub fn converts(group: &str, version: &str, kind: &str) -> bool {
    is_hpa(group, kind) && version == "v1"
}

/// Turns an HPA written in `version` (already defaulted in that version) into its stored
/// v2 form, defaulted as v2. Other kinds are left alone.
pub fn to_storage(group: &str, version: &str, kind: &str, obj: &mut Value) {
    if !is_hpa(group, kind) || !obj.is_object() {
        return;
    }
    if version == "v1" {
        *obj = v1_to_v2(obj);
        crate::defaults::apply_defaults(group, "v2", kind, obj);
    } else {
        drop_round_trip_annotations(obj);
    }
    obj["apiVersion"] = json!("autoscaling/v2");
}

/// Keeps a stored HPA labelled with its storage version whichever version wrote it.
pub fn keep_storage_version(group: &str, kind: &str, obj: &mut Value) {
    if is_hpa(group, kind) && obj.is_object() {
        obj["apiVersion"] = json!("autoscaling/v2");
    }
}

/// Turns a stored HPA into the version a request asked for.
pub fn to_served(group: &str, version: &str, kind: &str, obj: &mut Value) {
    if converts(group, version, kind) && obj.is_object() {
        *obj = v2_to_v1(obj);
    }
}

// ----- helpers on JSON -----

/// A field of a decoded object, matched as Go's decoder matches (exact, then ignoring case).
fn field<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    let m = obj.as_object()?;
    m.get(key)
        .or_else(|| {
            m.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .filter(|v| !v.is_null())
}

/// Copies `key` from `from` into `to` under `as_key` when set.
fn copy(to: &mut Map<String, Value>, as_key: &str, from: &Value, key: &str) {
    if let Some(v) = field(from, key) {
        to.insert(as_key.into(), v.clone());
    }
}

/// A quantity field as Go writes a non-pointer `resource.Quantity`: "0" when unset.
fn quantity_or_zero(from: &Value, key: &str) -> Value {
    field(from, key).cloned().unwrap_or_else(|| json!("0"))
}

fn annotations(obj: &Value) -> Map<String, Value> {
    obj["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// Writes the annotations back sorted (as Go encodes a map), or removes an empty map.
fn set_annotations(obj: &mut Value, mut annotations: Map<String, Value>) {
    let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if annotations.is_empty() {
        md.remove("annotations");
        return;
    }
    let mut keys: Vec<String> = annotations.keys().cloned().collect();
    keys.sort();
    let sorted: Map<String, Value> = keys
        .into_iter()
        .filter_map(|k| annotations.remove(&k).map(|v| (k, v)))
        .collect();
    md.insert("annotations".into(), Value::Object(sorted));
}

/// Removes the round-trip annotations (autoscaling's `DropRoundTripHorizontalPodAutoscalerAnnotations`).
fn drop_round_trip_annotations(obj: &mut Value) {
    let mut a = annotations(obj);
    if ROUND_TRIP.iter().any(|k| a.contains_key(*k)) {
        for k in ROUND_TRIP {
            a.remove(k);
        }
        set_annotations(obj, a);
    }
}

/// A round-trip annotation decoded as a JSON array; `None` when absent or not decodable
/// (upstream then ignores it).
fn annotation_array(a: &Map<String, Value>, key: &str) -> Option<Vec<Value>> {
    let text = a.get(key)?.as_str()?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) if items.iter().all(|i| i.is_object()) => Some(items),
        Ok(Value::Null) => Some(Vec::new()),
        _ => None,
    }
}

/// `metadata` and the rest of an object other than `spec`/`status`, in `api_version`.
fn skeleton(obj: &Value, api_version: &str) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("kind".into(), json!("HorizontalPodAutoscaler"));
    out.insert("apiVersion".into(), json!(api_version));
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            if !matches!(k.as_str(), "kind" | "apiVersion" | "spec" | "status") {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

fn condition(c: &Value) -> Value {
    let mut out = Map::new();
    for k in ["type", "status", "lastTransitionTime", "reason", "message"] {
        copy(&mut out, k, c, k);
    }
    Value::Object(out)
}

fn metric_identifier(name_from: &Value, name_key: &str, selector_key: &str) -> Value {
    let mut id = Map::new();
    id.insert(
        "name".into(),
        field(name_from, name_key).cloned().unwrap_or(json!("")),
    );
    copy(&mut id, "selector", name_from, selector_key);
    Value::Object(id)
}

fn cross_version_ref(r: Option<&Value>) -> Value {
    let r = r.cloned().unwrap_or(json!({}));
    let mut out = Map::new();
    out.insert(
        "kind".into(),
        field(&r, "kind").cloned().unwrap_or(json!("")),
    );
    out.insert(
        "name".into(),
        field(&r, "name").cloned().unwrap_or(json!("")),
    );
    copy(&mut out, "apiVersion", &r, "apiVersion");
    Value::Object(out)
}

// ----- v1 -> v2 -----

fn v1_metric_spec_to_v2(m: &Value) -> Value {
    let mut out = Map::new();
    out.insert(
        "type".into(),
        field(m, "type").cloned().unwrap_or(json!("")),
    );
    if let Some(o) = field(m, "object") {
        let average = field(o, "averageValue");
        let mut target = Map::new();
        target.insert(
            "type".into(),
            json!(if average.is_none() {
                "Value"
            } else {
                "AverageValue"
            }),
        );
        target.insert("value".into(), quantity_or_zero(o, "targetValue"));
        copy(&mut target, "averageValue", o, "averageValue");
        out.insert(
            "object".into(),
            json!({"describedObject": cross_version_ref(field(o, "target")),
                   "target": target,
                   "metric": metric_identifier(o, "metricName", "selector")}),
        );
    }
    if let Some(p) = field(m, "pods") {
        out.insert(
            "pods".into(),
            json!({"metric": metric_identifier(p, "metricName", "selector"),
                   "target": {"type": "AverageValue", "averageValue": quantity_or_zero(p, "targetAverageValue")}}),
        );
    }
    for key in ["resource", "containerResource"] {
        if let Some(r) = field(m, key) {
            let mut target = Map::new();
            let utilization = field(r, "targetAverageUtilization");
            target.insert(
                "type".into(),
                json!(if utilization.is_none() {
                    "AverageValue"
                } else {
                    "Utilization"
                }),
            );
            copy(&mut target, "averageValue", r, "targetAverageValue");
            copy(
                &mut target,
                "averageUtilization",
                r,
                "targetAverageUtilization",
            );
            let mut source = Map::new();
            source.insert(
                "name".into(),
                field(r, "name").cloned().unwrap_or(json!("")),
            );
            source.insert("target".into(), Value::Object(target));
            if key == "containerResource" {
                source.insert(
                    "container".into(),
                    field(r, "container").cloned().unwrap_or(json!("")),
                );
            }
            out.insert(key.into(), Value::Object(source));
        }
    }
    if let Some(e) = field(m, "external") {
        let value = field(e, "targetValue");
        let mut target = Map::new();
        target.insert(
            "type".into(),
            json!(if value.is_none() {
                "AverageValue"
            } else {
                "Value"
            }),
        );
        copy(&mut target, "value", e, "targetValue");
        copy(&mut target, "averageValue", e, "targetAverageValue");
        out.insert(
            "external".into(),
            json!({"metric": metric_identifier(e, "metricName", "metricSelector"), "target": target}),
        );
    }
    Value::Object(out)
}

fn v1_metric_status_to_v2(m: &Value) -> Value {
    let mut out = Map::new();
    out.insert(
        "type".into(),
        field(m, "type").cloned().unwrap_or(json!("")),
    );
    if let Some(o) = field(m, "object") {
        let mut current = Map::new();
        current.insert("value".into(), quantity_or_zero(o, "currentValue"));
        copy(&mut current, "averageValue", o, "averageValue");
        out.insert(
            "object".into(),
            json!({"metric": metric_identifier(o, "metricName", "selector"),
                   "current": current,
                   "describedObject": cross_version_ref(field(o, "target"))}),
        );
    }
    if let Some(p) = field(m, "pods") {
        out.insert(
            "pods".into(),
            json!({"metric": metric_identifier(p, "metricName", "selector"),
                   "current": {"averageValue": quantity_or_zero(p, "currentAverageValue")}}),
        );
    }
    for key in ["resource", "containerResource"] {
        if let Some(r) = field(m, key) {
            let mut current = Map::new();
            current.insert(
                "averageValue".into(),
                quantity_or_zero(r, "currentAverageValue"),
            );
            copy(
                &mut current,
                "averageUtilization",
                r,
                "currentAverageUtilization",
            );
            let mut status = Map::new();
            status.insert(
                "name".into(),
                field(r, "name").cloned().unwrap_or(json!("")),
            );
            status.insert("current".into(), Value::Object(current));
            if key == "containerResource" {
                status.insert(
                    "container".into(),
                    field(r, "container").cloned().unwrap_or(json!("")),
                );
            }
            out.insert(key.into(), Value::Object(status));
        }
    }
    if let Some(e) = field(m, "external") {
        let mut current = Map::new();
        current.insert("value".into(), quantity_or_zero(e, "currentValue"));
        copy(&mut current, "averageValue", e, "currentAverageValue");
        out.insert(
            "external".into(),
            json!({"metric": metric_identifier(e, "metricName", "metricSelector"), "current": current}),
        );
    }
    Value::Object(out)
}

/// The behavior annotation (upstream marshals its internal type: Go field names, nulls
/// for unset pointers) as the v2 field.
fn behavior_from_annotation(text: &str) -> Option<Value> {
    let b: Value = serde_json::from_str(text).ok()?;
    if !b.is_object() {
        return None;
    }
    let rules = |r: &Value| {
        let mut out = Map::new();
        copy(
            &mut out,
            "stabilizationWindowSeconds",
            r,
            "stabilizationWindowSeconds",
        );
        copy(&mut out, "selectPolicy", r, "selectPolicy");
        if let Some(Value::Array(ps)) = field(r, "policies") {
            let policies: Vec<Value> = ps
                .iter()
                .map(|p| {
                    let mut out = Map::new();
                    for k in ["type", "value", "periodSeconds"] {
                        copy(&mut out, k, p, k);
                    }
                    Value::Object(out)
                })
                .collect();
            out.insert("policies".into(), Value::Array(policies));
        }
        Value::Object(out)
    };
    let mut out = Map::new();
    if let Some(up) = field(&b, "scaleUp").filter(|v| v.is_object()) {
        out.insert("scaleUp".into(), rules(up));
    }
    if let Some(down) = field(&b, "scaleDown").filter(|v| v.is_object()) {
        out.insert("scaleDown".into(), rules(down));
    }
    // An empty behavior is no behavior.
    (!out.is_empty()).then_some(Value::Object(out))
}

fn cpu_utilization_metric(target: Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}})
}

/// An `autoscaling/v1` HPA as `autoscaling/v2` (through upstream's internal version).
pub fn v1_to_v2(v1: &Value) -> Value {
    let mut out = skeleton(v1, "autoscaling/v2");
    let a = annotations(v1);
    let empty = json!({});
    let spec = field(v1, "spec").unwrap_or(&empty);
    let status = field(v1, "status").unwrap_or(&empty);

    let mut spec2 = Map::new();
    if let Some(r) = field(spec, "scaleTargetRef") {
        spec2.insert("scaleTargetRef".into(), cross_version_ref(Some(r)));
    } else {
        spec2.insert("scaleTargetRef".into(), json!({"kind": "", "name": ""}));
    }
    copy(&mut spec2, "minReplicas", spec, "minReplicas");
    spec2.insert(
        "maxReplicas".into(),
        field(spec, "maxReplicas").cloned().unwrap_or(json!(0)),
    );
    let mut metrics: Vec<Value> = field(spec, "targetCPUUtilizationPercentage")
        .map(|t| vec![cpu_utilization_metric(t.clone())])
        .unwrap_or_default();
    if let Some(others) = annotation_array(&a, METRICS_ANNOTATION) {
        // The other metrics first, then the CPU target if v1 had one.
        let mut all: Vec<Value> = others.iter().map(v1_metric_spec_to_v2).collect();
        all.extend(metrics.into_iter().take(1));
        metrics = all;
    }
    if metrics.is_empty() {
        metrics.push(cpu_utilization_metric(json!(DEFAULT_CPU_UTILIZATION)));
    }
    spec2.insert("metrics".into(), Value::Array(metrics));
    if let Some(b) = a
        .get(BEHAVIOR_ANNOTATION)
        .and_then(Value::as_str)
        .and_then(behavior_from_annotation)
    {
        spec2.insert("behavior".into(), b);
    }

    let mut status2 = Map::new();
    copy(
        &mut status2,
        "observedGeneration",
        status,
        "observedGeneration",
    );
    copy(&mut status2, "lastScaleTime", status, "lastScaleTime");
    // v2's currentReplicas is omitted when 0.
    if let Some(c) = field(status, "currentReplicas").filter(|c| c.as_i64() != Some(0)) {
        status2.insert("currentReplicas".into(), c.clone());
    }
    status2.insert(
        "desiredReplicas".into(),
        field(status, "desiredReplicas")
            .cloned()
            .unwrap_or(json!(0)),
    );
    let mut current = Value::Null;
    if let Some(u) = field(status, "currentCPUUtilizationPercentage") {
        current = json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": u}}}]);
    }
    if let Some(statuses) = annotation_array(&a, CURRENT_METRICS_ANNOTATION) {
        // These say more than currentCPUUtilizationPercentage does.
        current = Value::Array(statuses.iter().map(v1_metric_status_to_v2).collect());
    }
    status2.insert("currentMetrics".into(), current);
    if let Some(conditions) = annotation_array(&a, CONDITIONS_ANNOTATION) {
        if !conditions.is_empty() {
            status2.insert(
                "conditions".into(),
                Value::Array(conditions.iter().map(condition).collect()),
            );
        }
    }

    out.insert("spec".into(), Value::Object(spec2));
    out.insert("status".into(), Value::Object(status2));
    let mut v2 = Value::Object(out);
    drop_round_trip_annotations(&mut v2);
    v2
}

// ----- v2 -> v1 -----

fn is_cpu_utilization_target(m: &Value) -> bool {
    field(m, "type").and_then(Value::as_str) == Some("Resource")
        && field(m, "resource").is_some_and(|r| {
            field(r, "name").and_then(Value::as_str) == Some("cpu")
                && field(r, "target").is_some_and(|t| field(t, "averageUtilization").is_some())
        })
}

fn v2_metric_spec_to_v1(m: &Value) -> Value {
    let empty = json!({});
    let mut out = Map::new();
    out.insert(
        "type".into(),
        field(m, "type").cloned().unwrap_or(json!("")),
    );
    if let Some(o) = field(m, "object") {
        let target = field(o, "target").unwrap_or(&empty);
        let metric = field(o, "metric").unwrap_or(&empty);
        let mut src = Map::new();
        src.insert(
            "target".into(),
            cross_version_ref(field(o, "describedObject")),
        );
        src.insert(
            "metricName".into(),
            field(metric, "name").cloned().unwrap_or(json!("")),
        );
        src.insert("targetValue".into(), quantity_or_zero(target, "value"));
        copy(&mut src, "selector", metric, "selector");
        copy(&mut src, "averageValue", target, "averageValue");
        out.insert("object".into(), Value::Object(src));
    }
    if let Some(p) = field(m, "pods") {
        let target = field(p, "target").unwrap_or(&empty);
        let metric = field(p, "metric").unwrap_or(&empty);
        let mut src = Map::new();
        src.insert(
            "metricName".into(),
            field(metric, "name").cloned().unwrap_or(json!("")),
        );
        src.insert(
            "targetAverageValue".into(),
            quantity_or_zero(target, "averageValue"),
        );
        copy(&mut src, "selector", metric, "selector");
        out.insert("pods".into(), Value::Object(src));
    }
    for key in ["resource", "containerResource"] {
        if let Some(r) = field(m, key) {
            let target = field(r, "target").unwrap_or(&empty);
            let mut src = Map::new();
            src.insert(
                "name".into(),
                field(r, "name").cloned().unwrap_or(json!("")),
            );
            copy(
                &mut src,
                "targetAverageUtilization",
                target,
                "averageUtilization",
            );
            copy(&mut src, "targetAverageValue", target, "averageValue");
            if key == "containerResource" {
                src.insert(
                    "container".into(),
                    field(r, "container").cloned().unwrap_or(json!("")),
                );
            }
            out.insert(key.into(), Value::Object(src));
        }
    }
    if let Some(e) = field(m, "external") {
        let target = field(e, "target").unwrap_or(&empty);
        let metric = field(e, "metric").unwrap_or(&empty);
        let mut src = Map::new();
        src.insert(
            "metricName".into(),
            field(metric, "name").cloned().unwrap_or(json!("")),
        );
        copy(&mut src, "metricSelector", metric, "selector");
        copy(&mut src, "targetValue", target, "value");
        copy(&mut src, "targetAverageValue", target, "averageValue");
        out.insert("external".into(), Value::Object(src));
    }
    Value::Object(out)
}

fn v2_metric_status_to_v1(m: &Value) -> Value {
    let empty = json!({});
    let mut out = Map::new();
    out.insert(
        "type".into(),
        field(m, "type").cloned().unwrap_or(json!("")),
    );
    if let Some(o) = field(m, "object") {
        let current = field(o, "current").unwrap_or(&empty);
        let metric = field(o, "metric").unwrap_or(&empty);
        let mut st = Map::new();
        st.insert(
            "target".into(),
            cross_version_ref(field(o, "describedObject")),
        );
        st.insert(
            "metricName".into(),
            field(metric, "name").cloned().unwrap_or(json!("")),
        );
        st.insert("currentValue".into(), quantity_or_zero(current, "value"));
        copy(&mut st, "selector", metric, "selector");
        copy(&mut st, "averageValue", current, "averageValue");
        out.insert("object".into(), Value::Object(st));
    }
    if let Some(p) = field(m, "pods") {
        let current = field(p, "current").unwrap_or(&empty);
        let metric = field(p, "metric").unwrap_or(&empty);
        let mut st = Map::new();
        st.insert(
            "metricName".into(),
            field(metric, "name").cloned().unwrap_or(json!("")),
        );
        st.insert(
            "currentAverageValue".into(),
            quantity_or_zero(current, "averageValue"),
        );
        copy(&mut st, "selector", metric, "selector");
        out.insert("pods".into(), Value::Object(st));
    }
    for key in ["resource", "containerResource"] {
        if let Some(r) = field(m, key) {
            let current = field(r, "current").unwrap_or(&empty);
            let mut st = Map::new();
            st.insert(
                "name".into(),
                field(r, "name").cloned().unwrap_or(json!("")),
            );
            copy(
                &mut st,
                "currentAverageUtilization",
                current,
                "averageUtilization",
            );
            st.insert(
                "currentAverageValue".into(),
                quantity_or_zero(current, "averageValue"),
            );
            if key == "containerResource" {
                st.insert(
                    "container".into(),
                    field(r, "container").cloned().unwrap_or(json!("")),
                );
            }
            out.insert(key.into(), Value::Object(st));
        }
    }
    if let Some(e) = field(m, "external") {
        let current = field(e, "current").unwrap_or(&empty);
        let metric = field(e, "metric").unwrap_or(&empty);
        let mut st = Map::new();
        st.insert(
            "metricName".into(),
            field(metric, "name").cloned().unwrap_or(json!("")),
        );
        copy(&mut st, "metricSelector", metric, "selector");
        st.insert("currentValue".into(), quantity_or_zero(current, "value"));
        copy(&mut st, "currentAverageValue", current, "averageValue");
        out.insert("external".into(), Value::Object(st));
    }
    Value::Object(out)
}

/// The v2 behavior as upstream's annotation holds it: its internal type marshalled with
/// Go's field names, unset pointers as null.
fn behavior_annotation(b: &Value) -> Value {
    let rules = |r: Option<&Value>| match r {
        None => Value::Null,
        Some(r) => {
            let policies = match field(r, "policies") {
                Some(Value::Array(ps)) => Value::Array(
                    ps.iter()
                        .map(|p| {
                            json!({"Type": field(p, "type").cloned().unwrap_or(json!("")),
                                   "Value": field(p, "value").cloned().unwrap_or(json!(0)),
                                   "PeriodSeconds": field(p, "periodSeconds").cloned().unwrap_or(json!(0))})
                        })
                        .collect(),
                ),
                _ => Value::Null,
            };
            json!({"StabilizationWindowSeconds": field(r, "stabilizationWindowSeconds").cloned().unwrap_or(Value::Null),
                   "SelectPolicy": field(r, "selectPolicy").cloned().unwrap_or(Value::Null),
                   "Policies": policies})
        }
    };
    json!({"ScaleUp": rules(field(b, "scaleUp")), "ScaleDown": rules(field(b, "scaleDown"))})
}

/// A stored (`autoscaling/v2`) HPA as `autoscaling/v1`.
pub fn v2_to_v1(v2: &Value) -> Value {
    let mut out = skeleton(v2, "autoscaling/v1");
    let empty = json!({});
    let spec = field(v2, "spec").unwrap_or(&empty);
    let status = field(v2, "status").unwrap_or(&empty);
    let metrics: &[Value] = field(spec, "metrics")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let current: &[Value] = field(status, "currentMetrics")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let conditions: &[Value] = field(status, "conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);

    let mut spec1 = Map::new();
    spec1.insert(
        "scaleTargetRef".into(),
        cross_version_ref(field(spec, "scaleTargetRef")),
    );
    copy(&mut spec1, "minReplicas", spec, "minReplicas");
    spec1.insert(
        "maxReplicas".into(),
        field(spec, "maxReplicas").cloned().unwrap_or(json!(0)),
    );
    if let Some(cpu) = metrics.iter().find(|m| is_cpu_utilization_target(m)) {
        spec1.insert(
            "targetCPUUtilizationPercentage".into(),
            cpu["resource"]["target"]["averageUtilization"].clone(),
        );
    }

    let mut status1 = Map::new();
    copy(
        &mut status1,
        "observedGeneration",
        status,
        "observedGeneration",
    );
    copy(&mut status1, "lastScaleTime", status, "lastScaleTime");
    status1.insert(
        "currentReplicas".into(),
        field(status, "currentReplicas")
            .cloned()
            .unwrap_or(json!(0)),
    );
    status1.insert(
        "desiredReplicas".into(),
        field(status, "desiredReplicas")
            .cloned()
            .unwrap_or(json!(0)),
    );
    // The last CPU status with a utilization wins, as upstream's loop has it.
    for m in current {
        if field(m, "type").and_then(Value::as_str) == Some("Resource") {
            if let Some(r) = field(m, "resource") {
                if field(r, "name").and_then(Value::as_str) == Some("cpu") {
                    if let Some(u) =
                        field(r, "current").and_then(|c| field(c, "averageUtilization"))
                    {
                        status1.insert("currentCPUUtilizationPercentage".into(), u.clone());
                    }
                }
            }
        }
    }

    let mut a = annotations(v2);
    for k in ROUND_TRIP {
        a.remove(k);
    }
    let encode = |v: Value| json!(v.to_string());
    let others: Vec<Value> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization_target(m))
        .map(v2_metric_spec_to_v1)
        .collect();
    if !others.is_empty() {
        a.insert(METRICS_ANNOTATION.into(), encode(Value::Array(others)));
    }
    if !current.is_empty() {
        a.insert(
            CURRENT_METRICS_ANNOTATION.into(),
            encode(Value::Array(
                current.iter().map(v2_metric_status_to_v1).collect(),
            )),
        );
    }
    if let Some(b) = field(spec, "behavior") {
        a.insert(BEHAVIOR_ANNOTATION.into(), encode(behavior_annotation(b)));
    }
    if !conditions.is_empty() {
        a.insert(
            CONDITIONS_ANNOTATION.into(),
            encode(Value::Array(conditions.iter().map(condition).collect())),
        );
    }

    out.insert("spec".into(), Value::Object(spec1));
    out.insert("status".into(), Value::Object(status1));
    let mut v1 = Value::Object(out);
    if v1.get("metadata").is_some_and(Value::is_object) {
        set_annotations(&mut v1, a);
    } else if !a.is_empty() {
        v1["metadata"] = json!({});
        set_annotations(&mut v1, a);
    }
    v1
}

#[cfg(test)]
#[path = "hpa_conversion_tests.rs"]
mod tests;

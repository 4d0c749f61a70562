//! Row printers of the kinds of the remaining groups: autoscaling, rbac, certificates,
//! coordination, storage, scheduling, node and admissionregistration.

use super::custom::go_text;
use super::fields::{
    age, annotation, at, flag, human, int, list, name, opt_int, or, quantity, s, st,
};
use super::Now;
use chrono::TimeDelta;
use serde_json::{json, Value};

pub(super) fn hpa_row(o: &Value, now: Now) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        st(o, "spec.scaleTargetRef.kind"),
        st(o, "spec.scaleTargetRef.name")
    );
    let (specs, statuses) = hpa_metrics(o);
    let min = opt_int(o, "spec.minReplicas").map_or_else(|| "<unset>".into(), |m| m.to_string());
    vec![
        s(name(o)),
        s(reference),
        s(format_hpa_metrics(&specs, &statuses)),
        s(min),
        json!(int(o, "spec.maxReplicas")),
        json!(int(o, "status.currentReplicas")),
        age(o, now),
    ]
}

/// Metric specs and statuses in the autoscaling/v2 shape; autoscaling/v1 objects are converted
/// (targetCPUUtilizationPercentage, defaulting to the 80% CPU target the API applies).
fn hpa_metrics(o: &Value) -> (Vec<Value>, Vec<Value>) {
    let v1 = st(o, "apiVersion") == "autoscaling/v1"
        || at(o, "spec.targetCPUUtilizationPercentage").is_some();
    if !v1 {
        let specs = list(o, "spec.metrics").to_vec();
        // Defaulting gives an HPA without metrics the 80% CPU target.
        let specs = if specs.is_empty() {
            cpu_metric(80)
        } else {
            specs
        };
        return (specs, list(o, "status.currentMetrics").to_vec());
    }
    let target = opt_int(o, "spec.targetCPUUtilizationPercentage").unwrap_or(80);
    let current = opt_int(o, "status.currentCPUUtilizationPercentage").map(|c| {
        vec![json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": c}}})]
    });
    (cpu_metric(target), current.unwrap_or_default())
}

fn cpu_metric(target: i64) -> Vec<Value> {
    vec![
        json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}),
    ]
}

fn format_hpa_metrics(specs: &[Value], statuses: &[Value]) -> String {
    if specs.is_empty() {
        return "<none>".into();
    }
    let shown: Vec<String> = specs
        .iter()
        .take(2)
        .enumerate()
        .map(|(i, spec)| {
            let ty = st(spec, "type");
            let field = match ty {
                "External" => "external",
                "Pods" => "pods",
                "Object" => "object",
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                _ => return "<unknown type>".to_string(),
            };
            let target = at(spec, field)
                .and_then(|x| x.get("target"))
                .unwrap_or(&Value::Null);
            let current = statuses.get(i).and_then(|x| at(x, field));
            let cur = |key: &str| match current {
                Some(c) => quantity(at(c, "current").and_then(|x| x.get(key)), "<nil>"),
                None => "<unknown>".to_string(),
            };
            let average = target.get("averageValue").filter(|v| !v.is_null());
            match (ty, average) {
                ("External" | "Object", Some(avg)) => {
                    // Current stays <unknown> unless the status reports an average value.
                    let c = current
                        .and_then(|c| at(c, "current.averageValue"))
                        .map_or_else(|| "<unknown>".to_string(), |v| quantity(Some(v), "<nil>"));
                    format!("{c}/{} (avg)", quantity(Some(avg), "<nil>"))
                }
                ("External" | "Object", None) => format!(
                    "{}/{}",
                    cur("value"),
                    quantity(target.get("value"), "<nil>")
                ),
                ("Pods", _) => format!("{}/{}", cur("averageValue"), quantity(average, "<nil>")),
                (_, Some(avg)) => {
                    format!("{}/{}", cur("averageValue"), quantity(Some(avg), "<nil>"))
                }
                (_, None) => {
                    let c = current
                        .and_then(|c| opt_int(c, "current.averageUtilization"))
                        .map_or_else(|| "<unknown>".to_string(), |u| format!("{u}%"));
                    let t = opt_int(target, "averageUtilization")
                        .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
                    format!("{c}/{t}")
                }
            }
        })
        .collect();
    let joined = shown.join(", ");
    if specs.len() > 2 {
        format!("{joined} + {} more...", specs.len() - 2)
    } else {
        joined
    }
}

pub(super) fn role_binding_row(o: &Value, now: Now) -> Vec<Value> {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for subj in list(o, "subjects") {
        match st(subj, "kind") {
            "ServiceAccount" => sas.push(format!("{}/{}", st(subj, "namespace"), st(subj, "name"))),
            "User" => users.push(st(subj, "name").to_string()),
            "Group" => groups.push(st(subj, "name").to_string()),
            _ => {}
        }
    }
    vec![
        s(name(o)),
        s(format!(
            "{}/{}",
            st(o, "roleRef.kind"),
            st(o, "roleRef.name")
        )),
        age(o, now),
        s(users.join(", ")),
        s(groups.join(", ")),
        s(sas.join(", ")),
    ]
}

pub(super) fn csr_row(o: &Value, now: Now) -> Vec<Value> {
    let has = |ty: &str| {
        list(o, "status.conditions")
            .iter()
            .any(|c| st(c, "type") == ty)
    };
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !st(o, "status.certificate").is_empty() {
        status.push_str(",Issued");
    }
    let duration = opt_int(o, "spec.expirationSeconds").map_or_else(
        || "<none>".to_string(),
        |secs| TimeDelta::try_seconds(secs).map_or_else(|| "<invalid>".into(), human),
    );
    vec![
        s(name(o)),
        age(o, now),
        s(or(st(o, "spec.signerName"), "<none>")),
        s(st(o, "spec.username")),
        s(duration),
        s(status),
    ]
}

pub(super) fn lease_row(o: &Value, now: Now) -> Vec<Value> {
    vec![s(name(o)), s(st(o, "spec.holderIdentity")), age(o, now)]
}

pub(super) fn storage_class_row(o: &Value, now: Now) -> Vec<Value> {
    let default = [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|a| annotation(o, a) == Some("true"));
    let shown = if default {
        format!("{} (default)", name(o))
    } else {
        name(o).to_string()
    };
    vec![
        s(shown),
        s(st(o, "provisioner")),
        s(or(st(o, "reclaimPolicy"), "Delete")),
        s(or(st(o, "volumeBindingMode"), "Immediate")),
        json!(flag(o, "allowVolumeExpansion")),
        age(o, now),
    ]
}

pub(super) fn priority_class_row(o: &Value, now: Now) -> Vec<Value> {
    vec![
        s(name(o)),
        json!(int(o, "value")),
        json!(flag(o, "globalDefault")),
        age(o, now),
    ]
}

pub(super) fn runtime_class_row(o: &Value, now: Now) -> Vec<Value> {
    vec![s(name(o)), s(st(o, "handler")), age(o, now)]
}

pub(super) fn webhooks_row(o: &Value, now: Now) -> Vec<Value> {
    vec![s(name(o)), json!(list(o, "webhooks").len()), age(o, now)]
}

pub(super) fn admission_policy_row(o: &Value, now: Now) -> Vec<Value> {
    let param_kind = match at(o, "spec.paramKind").filter(|p| p.is_object()) {
        Some(_) => format!(
            "{}/{}",
            st(o, "spec.paramKind.apiVersion"),
            st(o, "spec.paramKind.kind")
        ),
        None => "<unset>".into(),
    };
    let validations = list(o, "spec.validations").len();
    vec![s(name(o)), json!(validations), s(param_kind), age(o, now)]
}

pub(super) fn admission_policy_binding_row(o: &Value, now: Now) -> Vec<Value> {
    let mut param = "<unset>".to_string();
    if at(o, "spec.paramRef").is_some_and(Value::is_object) {
        let (ns, ref_name) = (
            st(o, "spec.paramRef.namespace"),
            st(o, "spec.paramRef.name"),
        );
        if !ref_name.is_empty() {
            // A param without a namespace may be cluster-scoped or in every namespace.
            param = format!("{}/{ref_name}", or(ns, "*"));
        } else if let Some(sel) = at(o, "spec.paramRef.selector").filter(|v| v.is_object()) {
            param = go_label_selector_string(sel);
        }
    }
    vec![
        s(name(o)),
        s(st(o, "spec.policyName")),
        s(param),
        age(o, now),
    ]
}

/// A LabelSelector as its generated protobuf `String()` prints it.
fn go_label_selector_string(sel: &Value) -> String {
    let labels: std::collections::BTreeMap<&String, String> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k, go_text(v))).collect())
        .unwrap_or_default();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let expressions: String = list(sel, "matchExpressions")
        .iter()
        .map(|r| {
            let values: Vec<String> = list(r, "values").iter().map(go_text).collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                st(r, "key"),
                st(r, "operator"),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

//! Kinds of the other groups: autoscaling, rbac, networking, admissionregistration and
//! apiextensions.

use super::{
    child, child_or_create, default_str, default_val, each_obj, get_str, is_empty_coll,
    is_unset_str, Obj,
};
use serde_json::{json, Value};

pub(super) fn default_hpa(version: &str, o: &mut Obj) {
    let Some(spec) = child_or_create(o, "spec") else {
        return;
    };
    default_val(spec, "minReplicas", json!(1));
    child_or_create(spec, "scaleTargetRef");
    if version == "v1" {
        // v1's CPU target default (80) is applied in conversion, where the metrics the
        // round-trip annotation carries are known.
        return;
    }
    if is_empty_coll(spec.get("metrics")) {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(b) = child(spec, "behavior") {
        let up = b.get("scaleUp").cloned();
        let down = b.get("scaleDown").cloned();
        b.insert(
            "scaleUp".into(),
            merge_scaling_rules(
                up.as_ref(),
                json!({
                    "stabilizationWindowSeconds": 0,
                    "selectPolicy": "Max",
                    "policies": [
                        {"type": "Pods", "value": 4, "periodSeconds": 15},
                        {"type": "Percent", "value": 100, "periodSeconds": 15}
                    ]
                }),
            ),
        );
        b.insert(
            "scaleDown".into(),
            merge_scaling_rules(
                down.as_ref(),
                json!({
                    "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]
                }),
            ),
        );
    }
    if let Some(st) = child_or_create(o, "status") {
        default_val(st, "desiredReplicas", json!(0));
        if !st.contains_key("currentMetrics") {
            st.insert("currentMetrics".into(), Value::Null);
        }
    }
}

fn merge_scaling_rules(from: Option<&Value>, mut defaults: Value) -> Value {
    if let (Some(Value::Object(f)), Some(d)) = (from, defaults.as_object_mut()) {
        for k in ["selectPolicy", "stabilizationWindowSeconds", "policies"] {
            if let Some(v) = f.get(k).filter(|v| !v.is_null()) {
                d.insert(k.into(), v.clone());
            }
        }
    }
    defaults
}

pub(super) fn default_role_binding(o: &mut Obj) {
    if let Some(rr) = child_or_create(o, "roleRef") {
        default_str(rr, "apiGroup", "rbac.authorization.k8s.io");
    }
    each_obj(o, "subjects", |s| {
        if is_unset_str(s.get("apiGroup")) && matches!(get_str(s, "kind"), "User" | "Group") {
            s.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
        }
    });
}

pub(super) fn default_network_policy(o: &mut Obj) {
    let Some(spec) = child_or_create(o, "spec") else {
        return;
    };
    child_or_create(spec, "podSelector");
    if is_empty_coll(spec.get("policyTypes")) {
        let mut types = vec![json!("Ingress")];
        if !is_empty_coll(spec.get("egress")) {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
    for dir in ["ingress", "egress"] {
        each_obj(spec, dir, |rule| {
            each_obj(rule, "ports", |p| default_val(p, "protocol", json!("TCP")))
        });
    }
}

pub(super) fn default_webhook(w: &mut Obj, mutating: bool) {
    default_val(w, "failurePolicy", json!("Fail"));
    default_val(w, "matchPolicy", json!("Equivalent"));
    default_val(w, "namespaceSelector", json!({}));
    default_val(w, "objectSelector", json!({}));
    default_val(w, "timeoutSeconds", json!(10));
    if mutating {
        default_val(w, "reinvocationPolicy", json!("Never"));
    }
    each_obj(w, "rules", |r| default_val(r, "scope", json!("*")));
    if let Some(svc) = child(w, "clientConfig").and_then(|c| child(c, "service")) {
        default_val(svc, "port", json!(443));
    }
}

pub(super) fn default_crd(o: &mut Obj) {
    if let Some(spec) = child_or_create(o, "spec") {
        if let Some(names) = child_or_create(spec, "names") {
            let kind = get_str(names, "kind").to_string();
            if is_unset_str(names.get("singular")) && !kind.is_empty() {
                names.insert("singular".into(), json!(kind.to_lowercase()));
            }
            if is_unset_str(names.get("listKind")) && !kind.is_empty() {
                names.insert("listKind".into(), json!(format!("{kind}List")));
            }
        }
        if let Some(conv) = child_or_create(spec, "conversion") {
            default_str(conv, "strategy", "None");
            if let Some(svc) = child(conv, "webhook")
                .and_then(|w| child(w, "clientConfig"))
                .and_then(|c| child(c, "service"))
            {
                default_val(svc, "port", json!(443));
            }
        }
    }
    if let Some(st) = child_or_create(o, "status") {
        if !st.contains_key("conditions") {
            st.insert("conditions".into(), Value::Null);
        }
        if let Some(an) = child_or_create(st, "acceptedNames") {
            default_val(an, "plural", json!(""));
            default_val(an, "kind", json!(""));
        }
        default_val(st, "storedVersions", Value::Null);
    }
}

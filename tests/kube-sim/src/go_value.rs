//! A JSON object seen as kube-apiserver's internal Go value, for messages that print it with
//! `%#v`.
//!
//! `field.Invalid(path, value, ...)` prints a struct value (after following one pointer) as Go
//! syntax: the internal type's name (`core.Toleration`, `apps.DeploymentStrategy`,
//! `v1.LabelSelector`), every field in declaration order, nested pointers as an address,
//! nil slices and maps as `[]T(nil)`. The layouts of the small internal types validation
//! prints are written by hand below (`STRUCTS`, `NAMED`); the printing is
//! `rkcm_gocompat::gofmt::GoValue`. Types with a custom Go form are handled here:
//! `metav1.Time` (its `GoString`, `time.Date(...)`) and `intstr.IntOrString` (its fields). A
//! type without a layout prints as its name and `{}`.

use rkcm_gocompat::gofmt::{go_time, GoValue};
use serde_json::Value;

/// One field of a struct: its Go name, its JSON name, its Go type (as `%#v` names it).
type Field = (&'static str, &'static str, &'static str);

/// The internal structs whose values validation messages print, their fields in declaration
/// order (from the internal API types of kube-apiserver 1.29).
const STRUCTS: &[(&str, &[Field])] = &[
    // metav1.LabelSelector and its requirements.
    (
        "v1.LabelSelector",
        &[
            ("MatchLabels", "matchLabels", "map[string]string"),
            (
                "MatchExpressions",
                "matchExpressions",
                "[]v1.LabelSelectorRequirement",
            ),
        ],
    ),
    (
        "v1.LabelSelectorRequirement",
        &[
            ("Key", "key", "string"),
            ("Operator", "operator", "v1.LabelSelectorOperator"),
            ("Values", "values", "[]string"),
        ],
    ),
    // metav1.OwnerReference.
    (
        "v1.OwnerReference",
        &[
            ("APIVersion", "apiVersion", "string"),
            ("Kind", "kind", "string"),
            ("Name", "name", "string"),
            ("UID", "uid", "types.UID"),
            ("Controller", "controller", "*bool"),
            ("BlockOwnerDeletion", "blockOwnerDeletion", "*bool"),
        ],
    ),
    // core.Toleration and core.Taint.
    (
        "core.Toleration",
        &[
            ("Key", "key", "string"),
            ("Operator", "operator", "core.TolerationOperator"),
            ("Value", "value", "string"),
            ("Effect", "effect", "core.TaintEffect"),
            ("TolerationSeconds", "tolerationSeconds", "*int64"),
        ],
    ),
    (
        "core.Taint",
        &[
            ("Key", "key", "string"),
            ("Value", "value", "string"),
            ("Effect", "effect", "core.TaintEffect"),
            ("TimeAdded", "timeAdded", "*v1.Time"),
        ],
    ),
    // core.ServicePort.
    (
        "core.ServicePort",
        &[
            ("Name", "name", "string"),
            ("Protocol", "protocol", "core.Protocol"),
            ("AppProtocol", "appProtocol", "*string"),
            ("Port", "port", "int32"),
            ("TargetPort", "targetPort", "intstr.IntOrString"),
            ("NodePort", "nodePort", "int32"),
        ],
    ),
    // The Deployment strategy and its rolling update.
    (
        "apps.DeploymentStrategy",
        &[
            ("Type", "type", "apps.DeploymentStrategyType"),
            (
                "RollingUpdate",
                "rollingUpdate",
                "*apps.RollingUpdateDeployment",
            ),
        ],
    ),
    (
        "apps.RollingUpdateDeployment",
        &[
            ("MaxUnavailable", "maxUnavailable", "intstr.IntOrString"),
            ("MaxSurge", "maxSurge", "intstr.IntOrString"),
        ],
    ),
    // The StatefulSet update strategy and its rolling update.
    (
        "apps.StatefulSetUpdateStrategy",
        &[
            ("Type", "type", "apps.StatefulSetUpdateStrategyType"),
            (
                "RollingUpdate",
                "rollingUpdate",
                "*apps.RollingUpdateStatefulSetStrategy",
            ),
        ],
    ),
    (
        "apps.RollingUpdateStatefulSetStrategy",
        &[
            ("Partition", "partition", "int32"),
            ("MaxUnavailable", "maxUnavailable", "*intstr.IntOrString"),
        ],
    ),
    // The DaemonSet update strategy and its rolling update.
    (
        "apps.DaemonSetUpdateStrategy",
        &[
            ("Type", "type", "apps.DaemonSetUpdateStrategyType"),
            (
                "RollingUpdate",
                "rollingUpdate",
                "*apps.RollingUpdateDaemonSet",
            ),
        ],
    ),
    (
        "apps.RollingUpdateDaemonSet",
        &[
            ("MaxUnavailable", "maxUnavailable", "intstr.IntOrString"),
            ("MaxSurge", "maxSurge", "intstr.IntOrString"),
        ],
    ),
    // The PodDisruptionBudget spec.
    (
        "policy.PodDisruptionBudgetSpec",
        &[
            ("MinAvailable", "minAvailable", "*intstr.IntOrString"),
            ("Selector", "selector", "*v1.LabelSelector"),
            ("MaxUnavailable", "maxUnavailable", "*intstr.IntOrString"),
            (
                "UnhealthyPodEvictionPolicy",
                "unhealthyPodEvictionPolicy",
                "*policy.UnhealthyPodEvictionPolicyType",
            ),
        ],
    ),
];

/// The named string types those structs hold (`%#v` prints their values as strings).
const NAMED: &[&str] = &[
    "v1.LabelSelectorOperator",
    "core.TolerationOperator",
    "core.TaintEffect",
    "core.Protocol",
    "apps.DeploymentStrategyType",
    "apps.StatefulSetUpdateStrategyType",
    "apps.DaemonSetUpdateStrategyType",
    "policy.UnhealthyPodEvictionPolicyType",
];

/// `value` (JSON, absent as `None`) as Go's `%#v` prints a value of Go type `ty`
/// (`core.Toleration`, `[]v1.OwnerReference`, `*int64`, ...).
pub(crate) fn go_syntax(ty: &str, value: Option<&Value>) -> String {
    go_value(ty, value).go_syntax()
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn go_value(ty: &str, value: Option<&Value>) -> GoValue {
    let value = present(value);
    if let Some(target) = ty.strip_prefix('*') {
        // metav1.Time has a GoString method: a nil one prints `<nil>`.
        if target == "v1.Time" || target == "v1.MicroTime" {
            return match value {
                None => GoValue::Raw("<nil>".into()),
                Some(v) => GoValue::Raw(time_syntax(Some(v))),
            };
        }
        return GoValue::Ptr {
            ty: target.to_string(),
            nil: value.is_none(),
        };
    }
    if let Some(elem) = ty.strip_prefix("[]") {
        return GoValue::Slice {
            ty: ty.to_string(),
            items: value
                .and_then(Value::as_array)
                .map(|items| items.iter().map(|i| go_value(elem, Some(i))).collect()),
        };
    }
    if let Some(rest) = ty.strip_prefix("map[") {
        let (key_ty, elem_ty) = rest.split_once(']').unwrap_or(("string", "string"));
        return map_value(ty, key_ty, elem_ty, value);
    }
    match ty {
        "string" | "types.UID" => return GoValue::Str(str_of(value)),
        "bool" => {
            return GoValue::Plain(value.and_then(Value::as_bool).unwrap_or(false).to_string())
        }
        "int" | "int32" | "int64" | "uint" | "uint32" | "uint64" | "byte" => {
            return GoValue::Plain(
                value
                    .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
                    .unwrap_or(0)
                    .to_string(),
            )
        }
        "float32" | "float64" => {
            return GoValue::Plain(value.and_then(Value::as_f64).unwrap_or(0.0).to_string())
        }
        "v1.Time" | "v1.MicroTime" => return GoValue::Raw(time_syntax(value)),
        "intstr.IntOrString" => return int_or_string(value),
        _ => {}
    }
    if NAMED.contains(&ty) {
        return GoValue::Str(str_of(value));
    }
    match STRUCTS.iter().find(|(name, _)| *name == ty) {
        Some((_, fields)) => struct_value(ty, fields, value),
        // A type without a layout: its name and nothing else.
        None => GoValue::Raw(format!("{ty}{{}}")),
    }
}

fn struct_value(ty: &str, fields: &[Field], value: Option<&Value>) -> GoValue {
    let shown = fields
        .iter()
        .map(|(go_name, json, field_ty)| {
            let v = value.and_then(|v| v.get(json));
            (go_name.to_string(), go_value(field_ty, v))
        })
        .collect();
    GoValue::Struct {
        ty: ty.to_string(),
        fields: shown,
    }
}

fn map_value(ty: &str, key_ty: &str, elem_ty: &str, value: Option<&Value>) -> GoValue {
    GoValue::Map {
        ty: ty.to_string(),
        entries: value.and_then(Value::as_object).map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let key = go_value(key_ty, Some(&Value::String(k.clone())));
                    (key, go_value(elem_ty, Some(v)))
                })
                .collect()
        }),
    }
}

fn str_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// `intstr.IntOrString{Type:0, IntVal:80, StrVal:""}` (Type 1 for a string).
fn int_or_string(value: Option<&Value>) -> GoValue {
    let (kind, int, text) = match value {
        Some(Value::String(s)) => (1, 0, s.clone()),
        Some(v) => (0, v.as_i64().unwrap_or(0), String::new()),
        None => (0, 0, String::new()),
    };
    GoValue::Struct {
        ty: "intstr.IntOrString".into(),
        fields: vec![
            ("Type".into(), GoValue::Plain(kind.to_string())),
            ("IntVal".into(), GoValue::Plain(int.to_string())),
            ("StrVal".into(), GoValue::Str(text)),
        ],
    }
}

/// A `metav1.Time` through `time.Time`'s `GoString`: the zero time is UTC, a decoded one
/// is in the server's local zone (`time.Local`).
fn time_syntax(value: Option<&Value>) -> String {
    let text = value.and_then(Value::as_str).unwrap_or("");
    let parsed = (|| {
        let (date, time) = text.split_once('T')?;
        let mut d = date.splitn(3, '-');
        let year: i64 = d.next()?.parse().ok()?;
        let month: u32 = d.next()?.parse().ok()?;
        let day: u32 = d.next()?.parse().ok()?;
        let clock = time.trim_end_matches('Z');
        let clock = clock.split(['+', '.']).next()?;
        let mut t = clock.splitn(3, ':');
        let h: u32 = t.next()?.parse().ok()?;
        let m: u32 = t.next()?.parse().ok()?;
        let s: u32 = t.next()?.parse().ok()?;
        Some((year, month, day, (h, m, s)))
    })();
    match parsed {
        Some((y, mo, d, hms)) => go_time(y, mo, d, hms, 0, true),
        None => go_time(1, 1, 1, (0, 0, 0), 0, false),
    }
}

#[cfg(test)]
mod tests {
    use super::{go_syntax, NAMED, STRUCTS};
    use serde_json::json;

    #[test]
    fn internal_values_print_as_the_real_server_prints_them() {
        let cases = [
            (
                "v1.LabelSelector",
                json!({"matchLabels": {"app": "web"}}),
                r#"v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#,
            ),
            (
                "core.Toleration",
                json!({"key": "k", "operator": "Exists", "value": "v", "tolerationSeconds": 5}),
                r#"core.Toleration{Key:"k", Operator:"Exists", Value:"v", Effect:"", TolerationSeconds:(*int64)(0xc000000000)}"#,
            ),
            (
                "core.Taint",
                json!({"key": "k", "effect": "NoSchedule"}),
                r#"core.Taint{Key:"k", Value:"", Effect:"NoSchedule", TimeAdded:<nil>}"#,
            ),
            (
                "apps.DeploymentStrategy",
                json!({"type": "Bogus"}),
                r#"apps.DeploymentStrategy{Type:"Bogus", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}"#,
            ),
            (
                "apps.RollingUpdateStatefulSetStrategy",
                json!({"partition": 2}),
                r#"apps.RollingUpdateStatefulSetStrategy{Partition:2, MaxUnavailable:(*intstr.IntOrString)(nil)}"#,
            ),
            (
                "intstr.IntOrString",
                json!("120%"),
                r#"intstr.IntOrString{Type:1, IntVal:0, StrVal:"120%"}"#,
            ),
            (
                "[]v1.OwnerReference",
                json!([{"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "u", "controller": true}]),
                r#"[]v1.OwnerReference{v1.OwnerReference{APIVersion:"v1", Kind:"Pod", Name:"a", UID:"u", Controller:(*bool)(0xc000000000), BlockOwnerDeletion:(*bool)(nil)}}"#,
            ),
        ];
        for (ty, value, printed) in cases {
            assert_eq!(go_syntax(ty, Some(&value)), printed, "{ty}");
        }
    }

    #[test]
    fn every_layout_field_has_a_printable_type() {
        let known = |ty: &str| {
            let base = ty.trim_start_matches('*').trim_start_matches("[]");
            let base = base.strip_prefix("map[string]").unwrap_or(base);
            matches!(
                base,
                "string"
                    | "bool"
                    | "int32"
                    | "int64"
                    | "types.UID"
                    | "v1.Time"
                    | "intstr.IntOrString"
            ) || NAMED.contains(&base)
                || STRUCTS.iter().any(|(name, _)| *name == base)
        };
        for (name, fields) in STRUCTS {
            for (go_name, _, ty) in *fields {
                assert!(known(ty), "{name}.{go_name}: {ty}");
            }
        }
        // The PDB spec, whole: pointers print as addresses, a nil one as nil.
        let spec = json!({"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}});
        assert_eq!(
            go_syntax("policy.PodDisruptionBudgetSpec", Some(&spec)),
            "policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0xc000000000), Selector:(*v1.LabelSelector)(0xc000000000), MaxUnavailable:(*intstr.IntOrString)(nil), UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}"
        );
        let port = json!({"name": "http", "protocol": "TCP", "port": 80, "targetPort": "web"});
        assert_eq!(
            go_syntax("core.ServicePort", Some(&port)),
            r#"core.ServicePort{Name:"http", Protocol:"TCP", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:1, IntVal:0, StrVal:"web"}, NodePort:0}"#
        );
    }
}

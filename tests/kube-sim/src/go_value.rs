//! A JSON object seen as kube-apiserver's internal Go value, for messages that print it with
//! `%#v`.
//!
//! `field.Invalid(path, value, ...)` prints a struct value (after following one pointer) as Go
//! syntax: the internal type's name (`core.Toleration`, `apps.DeploymentStrategy`,
//! `v1.LabelSelector`), every field in declaration order, nested pointers as an address,
//! nil slices and maps as `[]T(nil)`. The layouts of the small internal types validation
//! prints are written by hand below (`STRUCTS`, `NAMED`); the printing is
//! `rkcm_gocompat::gofmt::GoValue`. Types with a custom Go form are handled here:
//! `metav1.Time` (its `GoString`, `time.Date(...)`), `intstr.IntOrString` (its fields),
//! `resource.Quantity` (its unexported fields, see `quantity`) and `core.ResourceList`. The
//! pod types a `core.PodTemplateSpec` reaches are in `pod_layouts` and `volume_layouts`. A
//! type without a layout prints as its name and `{}`.

mod cmp_format;
mod cmp_text;
mod cmp_tree;
mod pod_layouts;
mod quantity;
mod volume_layouts;

use pod_layouts::{POD_NAMED, POD_STRUCTS};
use quantity::GoQuantity;
use rkcm_gocompat::gofmt::{go_time, GoValue};
use serde_json::Value;
use volume_layouts::VOLUME_STRUCTS;

/// One field of a struct: its Go name, its JSON name (empty for an embedded struct whose
/// fields are inlined in the same JSON object), its Go type (as `%#v` names it).
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
    // The Job's pod failure policy.
    (
        "batch.PodFailurePolicy",
        &[("Rules", "rules", "[]batch.PodFailurePolicyRule")],
    ),
    (
        "batch.PodFailurePolicyRule",
        &[
            ("Action", "action", "batch.PodFailurePolicyAction"),
            (
                "OnExitCodes",
                "onExitCodes",
                "*batch.PodFailurePolicyOnExitCodesRequirement",
            ),
            (
                "OnPodConditions",
                "onPodConditions",
                "[]batch.PodFailurePolicyOnPodConditionsPattern",
            ),
        ],
    ),
    (
        "batch.PodFailurePolicyOnExitCodesRequirement",
        &[
            ("ContainerName", "containerName", "*string"),
            (
                "Operator",
                "operator",
                "batch.PodFailurePolicyOnExitCodesOperator",
            ),
            ("Values", "values", "[]int32"),
        ],
    ),
    (
        "batch.PodFailurePolicyOnPodConditionsPattern",
        &[
            ("Type", "type", "core.PodConditionType"),
            ("Status", "status", "core.ConditionStatus"),
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
    "batch.PodFailurePolicyAction",
    "batch.PodFailurePolicyOnExitCodesOperator",
    "core.ConditionStatus",
];

/// The layout of struct type `ty`, wherever it is written.
fn layout(ty: &str) -> Option<&'static [Field]> {
    STRUCTS
        .iter()
        .chain(POD_STRUCTS)
        .chain(VOLUME_STRUCTS)
        .find(|(name, _)| *name == ty)
        .map(|(_, fields)| *fields)
}

fn is_named_string(ty: &str) -> bool {
    NAMED.contains(&ty) || POD_NAMED.contains(&ty)
}

/// `value` (JSON, absent as `None`) as Go's `%#v` prints a value of Go type `ty`
/// (`core.Toleration`, `[]v1.OwnerReference`, `*int64`, ...).
pub(crate) fn go_syntax(ty: &str, value: Option<&Value>) -> String {
    go_value(ty, value).go_syntax()
}

/// go-cmp's `cmp.Diff(old, new)` of two JSON objects read as values of the internal Go type
/// `ty` (`core.PodSpec`, `core.PersistentVolumeClaimSpec`); empty when they are equal. See
/// `cmp_format` for what of go-cmp's report is reproduced.
pub(crate) fn cmp_diff(ty: &str, old: &Value, new: &Value) -> String {
    let x = cmp_tree::typed(ty, Some(old));
    let y = cmp_tree::typed(ty, Some(new));
    let root = cmp_tree::compare(Some(&x), Some(&y));
    if root.num_diff == 0 {
        return String::new();
    }
    cmp_format::report(&root)
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
        "resource.Quantity" => return quantity(value).go_value(),
        // map[core.ResourceName]resource.Quantity; every list of a pod spec is defaulted
        // (rounded up to milli-units) before validation sees it.
        "core.ResourceList" => {
            return GoValue::Map {
                ty: ty.to_string(),
                entries: value.and_then(Value::as_object).map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            let q = quantity(Some(v)).round_up_to_milli();
                            (GoValue::Str(k.clone()), q.go_value())
                        })
                        .collect()
                }),
            }
        }
        "core.PodSpec" => {
            let internal = internal_pod_spec(value);
            return struct_value(ty, layout(ty).unwrap_or(&[]), Some(&internal));
        }
        _ => {}
    }
    if is_named_string(ty) {
        return GoValue::Str(str_of(value));
    }
    match layout(ty) {
        Some(fields) => struct_value(ty, fields, value),
        // A type without a layout: its name and nothing else.
        None => GoValue::Raw(format!("{ty}{{}}")),
    }
}

fn quantity(value: Option<&Value>) -> GoQuantity {
    match value {
        Some(Value::String(s)) => GoQuantity::parse(s),
        Some(Value::Number(n)) => GoQuantity::parse(&n.to_string()),
        _ => GoQuantity::zero(),
    }
}

/// A `v1` pod spec as the internal one holds it: the host namespace fields move into the
/// security context, which conversion always creates, and the deprecated `serviceAccount`
/// stands in for an empty `serviceAccountName`.
fn internal_pod_spec(value: Option<&Value>) -> Value {
    let mut spec = value
        .filter(|v| v.is_object())
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    let Some(m) = spec.as_object_mut() else {
        return spec;
    };
    let mut context = match m.remove("securityContext") {
        Some(Value::Object(c)) => c,
        _ => Default::default(),
    };
    for key in [
        "hostNetwork",
        "hostPID",
        "hostIPC",
        "shareProcessNamespace",
        "hostUsers",
    ] {
        match m.remove(key) {
            Some(v) => context.insert(key.to_string(), v),
            None => context.remove(key),
        };
    }
    m.insert("securityContext".into(), Value::Object(context));
    let named = m
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if !named {
        if let Some(old) = m.get("serviceAccount").cloned() {
            m.insert("serviceAccountName".into(), old);
        }
    }
    spec
}

fn struct_value(ty: &str, fields: &[Field], value: Option<&Value>) -> GoValue {
    let shown = fields
        .iter()
        .map(|(go_name, json, field_ty)| {
            // An embedded struct inlined in JSON reads the same object.
            let v = if json.is_empty() {
                value
            } else {
                value.and_then(|v| v.get(json))
            };
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
    use super::{go_syntax, is_named_string, layout, POD_STRUCTS, STRUCTS, VOLUME_STRUCTS};
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
    fn a_pod_template_prints_as_the_internal_struct() {
        let template = json!({
            "metadata": {"labels": {"app": "x"}},
            "spec": {
                "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}],
                "restartPolicy": "Never",
                "hostNetwork": true,
            },
        });
        let meta = concat!(
            r#"v1.ObjectMeta{Name:"", GenerateName:"", Namespace:"", SelfLink:"", UID:"", "#,
            r#"ResourceVersion:"", Generation:0, CreationTimestamp:time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC), "#,
            r#"DeletionTimestamp:<nil>, DeletionGracePeriodSeconds:(*int64)(nil), Labels:map[string]string{"app":"x"}, "#,
            r#"Annotations:map[string]string(nil), OwnerReferences:[]v1.OwnerReference(nil), Finalizers:[]string(nil), "#,
            r#"ManagedFields:[]v1.ManagedFieldsEntry(nil)}"#,
        );
        let container = concat!(
            r#"core.Container{Name:"c", Image:"busybox", Command:[]string(nil), Args:[]string(nil), WorkingDir:"", "#,
            r#"Ports:[]core.ContainerPort(nil), EnvFrom:[]core.EnvFromSource(nil), Env:[]core.EnvVar(nil), "#,
            r#"Resources:core.ResourceRequirements{Limits:core.ResourceList{"cpu":resource.Quantity{i:resource.int64Amount{value:1, scale:0}, "#,
            r#"d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"1", Format:"DecimalSI"}}, Requests:core.ResourceList(nil), "#,
            r#"Claims:[]core.ResourceClaim(nil)}, ResizePolicy:[]core.ContainerResizePolicy(nil), "#,
            r#"RestartPolicy:(*core.ContainerRestartPolicy)(nil), VolumeMounts:[]core.VolumeMount(nil), "#,
            r#"VolumeDevices:[]core.VolumeDevice(nil), LivenessProbe:(*core.Probe)(nil), ReadinessProbe:(*core.Probe)(nil), "#,
            r#"StartupProbe:(*core.Probe)(nil), Lifecycle:(*core.Lifecycle)(nil), TerminationMessagePath:"", "#,
            r#"TerminationMessagePolicy:"", ImagePullPolicy:"", SecurityContext:(*core.SecurityContext)(nil), "#,
            r#"Stdin:false, StdinOnce:false, TTY:false}"#,
        );
        let spec = concat!(
            r#"core.PodSpec{Volumes:[]core.Volume(nil), InitContainers:[]core.Container(nil), Containers:[]core.Container{CONTAINER}, "#,
            r#"EphemeralContainers:[]core.EphemeralContainer(nil), RestartPolicy:"Never", TerminationGracePeriodSeconds:(*int64)(nil), "#,
            r#"ActiveDeadlineSeconds:(*int64)(nil), DNSPolicy:"", NodeSelector:map[string]string(nil), ServiceAccountName:"", "#,
            r#"AutomountServiceAccountToken:(*bool)(nil), NodeName:"", SecurityContext:(*core.PodSecurityContext)(0xc000000000), "#,
            r#"ImagePullSecrets:[]core.LocalObjectReference(nil), Hostname:"", Subdomain:"", SetHostnameAsFQDN:(*bool)(nil), "#,
            r#"Affinity:(*core.Affinity)(nil), SchedulerName:"", Tolerations:[]core.Toleration(nil), HostAliases:[]core.HostAlias(nil), "#,
            r#"PriorityClassName:"", Priority:(*int32)(nil), PreemptionPolicy:(*core.PreemptionPolicy)(nil), "#,
            r#"DNSConfig:(*core.PodDNSConfig)(nil), ReadinessGates:[]core.PodReadinessGate(nil), RuntimeClassName:(*string)(nil), "#,
            r#"Overhead:core.ResourceList(nil), EnableServiceLinks:(*bool)(nil), "#,
            r#"TopologySpreadConstraints:[]core.TopologySpreadConstraint(nil), OS:(*core.PodOS)(nil), "#,
            r#"SchedulingGates:[]core.PodSchedulingGate(nil), ResourceClaims:[]core.PodResourceClaim(nil)}"#,
        )
        .replace("CONTAINER", container);
        assert_eq!(
            go_syntax("core.PodTemplateSpec", Some(&template)),
            format!("core.PodTemplateSpec{{ObjectMeta:{meta}, Spec:{spec}}}")
        );
        // A volume's source is embedded: its field is named as its type.
        let volume = json!({"name": "data", "emptyDir": {}});
        let printed = go_syntax("core.Volume", Some(&volume));
        assert!(
            printed.starts_with(r#"core.Volume{Name:"data", VolumeSource:core.VolumeSource{HostPath:(*core.HostPathVolumeSource)(nil), EmptyDir:(*core.EmptyDirVolumeSource)(0xc000000000), "#),
            "{printed}"
        );
        let policy = json!({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]});
        assert_eq!(
            go_syntax("batch.PodFailurePolicy", Some(&policy)),
            r#"batch.PodFailurePolicy{Rules:[]batch.PodFailurePolicyRule{batch.PodFailurePolicyRule{Action:"FailJob", OnExitCodes:(*batch.PodFailurePolicyOnExitCodesRequirement)(0xc000000000), OnPodConditions:[]batch.PodFailurePolicyOnPodConditionsPattern(nil)}}}"#
        );
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
                    | "resource.Quantity"
                    | "core.ResourceList"
                    // Only ever behind a pointer: printed as an address.
                    | "v1.FieldsV1"
            ) || is_named_string(base)
                || layout(base).is_some()
        };
        for (name, fields) in STRUCTS.iter().chain(POD_STRUCTS).chain(VOLUME_STRUCTS) {
            for (go_name, json, ty) in *fields {
                assert!(known(ty), "{name}.{go_name}: {ty}");
                // An inlined field is an embedded struct, named as its type.
                if json.is_empty() {
                    assert!(ty.ends_with(&format!(".{go_name}")), "{name}.{go_name}");
                }
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

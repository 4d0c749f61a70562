//! The field manager's types, read from kube-apiserver 1.29's OpenAPI definitions as its type
//! converter reads them (kube-openapi's `schemaconv`):
//!
//! * a list's `x-kubernetes-list-type`: `atomic`, `set`, or `map` keyed by
//!   `x-kubernetes-list-map-keys`; without one, a `merge` patch strategy makes it keyed by its
//!   patch merge key (a set without one); any other list is atomic;
//! * `x-kubernetes-map-type: atomic` on a definition or on the field referring to it makes the
//!   value one leaf;
//! * a definition with properties is a struct, one with `additionalProperties` or without any
//!   schema of its own (RawExtension, apiextensions JSON) a map whose keys are entries;
//!   scalars (strings, Quantity, Time, IntOrString) are leaves.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use super::{ElemTy, Ty};
use crate::strategic_merge::meta::{definitions, version_priority};

/// The definition objects of (group, kind) are served as: the most preferred version.
pub(super) fn root(group: &str, kind: &str) -> Option<&'static str> {
    definitions()
        .gvks()
        .filter(|(g, _, k, _)| *g == group && *k == kind)
        .max_by_key(|(_, v, _, _)| version_priority(v))
        .map(|(_, _, _, name)| name)
}

/// The type of field `name` of struct definition `t`; `None` when `t` has no such field.
pub(super) fn field(t: &str, name: &str) -> Option<Ty> {
    fields().get(&(t, name)).copied()
}

/// Every field of every definition, worked out once (list keys need a `'static` home).
fn fields() -> &'static HashMap<(&'static str, &'static str), Ty> {
    static FIELDS: OnceLock<HashMap<(&'static str, &'static str), Ty>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let mut out = HashMap::new();
        for (name, def) in definitions().iter() {
            let Some(props) = def.get("properties").and_then(Value::as_object) else {
                continue;
            };
            for (field, prop) in props {
                out.insert((name, field.as_str()), property_ty(prop));
            }
        }
        out
    })
}

fn property_ty(prop: &'static Value) -> Ty {
    if prop.get("type").and_then(Value::as_str) != Some("array") {
        return value_ty(prop);
    }
    let elem = || match prop.get("items").map(value_ty) {
        Some(Ty::Obj(t)) => ElemTy::Obj(t),
        Some(Ty::Atomic) => ElemTy::Atomic,
        _ => ElemTy::Obj(None),
    };
    let str_of = |k: &str| prop.get(k).and_then(Value::as_str);
    match str_of("x-kubernetes-list-type") {
        Some("map") => {
            let keys: Vec<&'static str> = prop
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Ty::Keyed(Box::leak(keys.into_boxed_slice()), elem())
        }
        Some("set") => Ty::Set,
        Some(_) => Ty::Atomic,
        None => match (
            str_of("x-kubernetes-patch-strategy"),
            str_of("x-kubernetes-patch-merge-key"),
        ) {
            (Some("merge" | "merge,retainKeys"), Some(key)) => {
                Ty::Keyed(Box::leak(Box::new([key])), elem())
            }
            (Some("merge" | "merge,retainKeys"), None) => Ty::Set,
            _ => Ty::Atomic,
        },
    }
}

/// The type of a (non-list) value with this schema.
fn value_ty(schema: &'static Value) -> Ty {
    let map_type = |s: &'static Value| s.get("x-kubernetes-map-type").and_then(Value::as_str);
    let Some(name) = rkcm_openapi::referenced_name(schema) else {
        return match map_type(schema) {
            Some("atomic") => Ty::Atomic,
            _ => shape_ty(schema, None),
        };
    };
    let Some(def) = definitions().get(name) else {
        return Ty::Obj(None);
    };
    // The referring field's map type overrides the definition's.
    match map_type(schema).or_else(|| map_type(def)) {
        Some("atomic") => Ty::Atomic,
        _ => shape_ty(def, Some(name)),
    }
}

/// A struct, a map, or a leaf.
fn shape_ty(schema: &Value, name: Option<&'static str>) -> Ty {
    if schema.get("properties").is_some() {
        return Ty::Obj(name);
    }
    let ty = schema.get("type").and_then(Value::as_str);
    let free_form = ty.is_none() && schema.get("oneOf").is_none() && schema.get("format").is_none();
    if schema.get("additionalProperties").is_some() || ty == Some("object") || free_form {
        Ty::Deduced
    } else {
        // A scalar: owned as a leaf; `null` (a nil pointer Go writes) is nothing to own.
        Ty::Obj(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_by_group_and_kind() {
        assert_eq!(root("", "Pod"), Some("io.k8s.api.core.v1.Pod"));
        assert_eq!(
            root("events.k8s.io", "Event"),
            Some("io.k8s.api.events.v1.Event")
        );
        assert_eq!(root("", "Event"), Some("io.k8s.api.core.v1.Event"));
        assert_eq!(
            root("autoscaling", "HorizontalPodAutoscaler"),
            Some("io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler")
        );
        assert_eq!(root("example.com", "Widget"), None);
    }

    #[test]
    fn list_and_map_types() {
        let pod_spec = "io.k8s.api.core.v1.PodSpec";
        let container = "io.k8s.api.core.v1.Container";
        let keyed = |t: &str, f: &str| match field(t, f) {
            Some(Ty::Keyed(keys, elem)) => Some((keys.to_vec(), elem)),
            _ => None,
        };
        assert_eq!(
            keyed(pod_spec, "containers"),
            Some((vec!["name"], ElemTy::Obj(Some(container))))
        );
        assert_eq!(
            keyed(container, "ports"),
            Some((
                vec!["containerPort", "protocol"],
                ElemTy::Obj(Some("io.k8s.api.core.v1.ContainerPort"))
            ))
        );
        assert_eq!(
            keyed("io.k8s.api.core.v1.ServiceSpec", "ports").map(|k| k.0),
            Some(vec!["port", "protocol"])
        );
        assert_eq!(
            keyed(pod_spec, "topologySpreadConstraints").map(|k| k.0),
            Some(vec!["topologyKey", "whenUnsatisfiable"])
        );
        // Keyed by patch merge key (no list type); items that are atomic references.
        assert_eq!(
            keyed(pod_spec, "imagePullSecrets"),
            Some((vec!["name"], ElemTy::Atomic))
        );
        assert_eq!(
            keyed("io.k8s.api.core.v1.ServiceAccount", "secrets"),
            Some((vec!["name"], ElemTy::Atomic))
        );
        assert_eq!(
            keyed(
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "ownerReferences"
            ),
            Some((vec!["uid"], ElemTy::Atomic))
        );
        let meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
        assert_eq!(field(meta, "finalizers"), Some(Ty::Set));
        assert_eq!(field(meta, "labels"), Some(Ty::Deduced));
        assert_eq!(field(meta, "name"), Some(Ty::Obj(None)));
        assert_eq!(field(meta, "creationTimestamp"), Some(Ty::Obj(None)));
        assert_eq!(field(meta, "nope"), None);
        assert_eq!(field(pod_spec, "tolerations"), Some(Ty::Atomic));
        assert_eq!(field(pod_spec, "nodeSelector"), Some(Ty::Atomic));
        assert_eq!(
            field("io.k8s.api.apps.v1.DeploymentSpec", "selector"),
            Some(Ty::Atomic)
        );
        assert_eq!(
            field("io.k8s.api.batch.v1.JobStatus", "conditions"),
            Some(Ty::Atomic)
        );
        assert_eq!(
            field("io.k8s.api.batch.v1.UncountedTerminatedPods", "succeeded"),
            Some(Ty::Set)
        );
        assert_eq!(
            field("io.k8s.api.core.v1.ResourceRequirements", "limits"),
            Some(Ty::Deduced)
        );
        assert_eq!(
            field("io.k8s.api.apps.v1.ControllerRevision", "data"),
            Some(Ty::Deduced)
        );
        assert_eq!(
            field("io.k8s.api.core.v1.Pod", "spec"),
            Some(Ty::Obj(Some(pod_spec)))
        );
    }
}

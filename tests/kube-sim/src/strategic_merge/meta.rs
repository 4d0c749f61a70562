//! Patch metadata of the served types, read from kube-apiserver 1.29's OpenAPI definitions
//! ([`rkcm_openapi::builtin`], plus [`rkcm_openapi::gated`] for the group-versions kube-sim
//! serves behind `--runtime-config`): a field's `x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key` (the Go types' `patchStrategy` / `patchMergeKey` tags), and
//! its Go shape: a struct (a definition with properties), a Go map (`additionalProperties`), a
//! list (`type: array`), or a struct without JSON fields of its own (RawExtension, apiextensions
//! JSON, ...: a definition with neither).

use std::collections::HashMap;
use std::sync::OnceLock;

use rkcm_openapi::Definitions;
use serde_json::Value;

use super::{Strat, Ty};

/// The definitions the metadata comes from (the field manager's types too).
#[cfg(not(test))]
pub(crate) fn definitions() -> &'static Definitions {
    rkcm_openapi::all()
}

/// The definitions the metadata comes from, with upstream's strategic merge test types.
#[cfg(test)]
pub(crate) fn definitions() -> &'static Definitions {
    static DEFS: OnceLock<Definitions> = OnceLock::new();
    DEFS.get_or_init(|| rkcm_openapi::all().merged(&test_types::definitions()))
}

/// The definition an object of `kind` is served as: the core group's when it has one (Event),
/// else the most preferred version (autoscaling/v2 HorizontalPodAutoscaler, flowcontrol v1).
fn kinds() -> &'static HashMap<&'static str, &'static str> {
    static KINDS: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    KINDS.get_or_init(|| {
        // How much a definition is preferred for its kind: core group first, then version.
        type Rank = (bool, (u8, u32, u32));
        let mut best: HashMap<&'static str, (Rank, &'static str)> = HashMap::new();
        for (group, version, kind, name) in definitions().gvks() {
            let rank = (group.is_empty(), version_priority(version));
            let entry = best.entry(kind).or_insert((rank, name));
            if rank > entry.0 {
                *entry = (rank, name);
            }
        }
        best.into_iter().map(|(k, (_, n))| (k, n)).collect()
    })
}

/// Kubernetes' version order: GA before beta before alpha, higher numbers first.
pub(crate) fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let major = rest[..digits].parse().unwrap_or(0);
    let tail = &rest[digits..];
    let (stage, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stage, major, minor)
}

/// The definition name an object of `kind` is served as.
pub(super) fn root_type(kind: &str) -> Option<&'static str> {
    kinds().get(kind).copied()
}

/// Field `field` of the struct definition `ty`: its child type (a list's element type), patch
/// strategy, and whether upstream's list lookup accepts it (a slice, or a pointer: the JSON
/// wrappers of apiextensions are always pointers or slices; RawExtension is a value field).
/// `None` for a field the definition lacks.
pub(super) fn field_meta(ty: &str, field: &str) -> Option<(Ty, Strat, bool)> {
    let prop = definitions().get(ty)?.get("properties")?.get(field)?;
    let is_array = prop.get("type").and_then(Value::as_str) == Some("array");
    let target = if is_array { prop.get("items")? } else { prop };
    let child = child_type(target);
    let strategy = prop
        .get("x-kubernetes-patch-strategy")
        .and_then(Value::as_str)
        .unwrap_or("");
    let merge_key = prop
        .get("x-kubernetes-patch-merge-key")
        .and_then(Value::as_str)
        .unwrap_or("");
    let strat = if strategy.split(',').any(|s| s == "merge") {
        if merge_key.is_empty() {
            Strat::MergePrim
        } else {
            Strat::MergeKey(merge_key)
        }
    } else if strategy.split(',').any(|s| s == "replace") {
        Strat::Replace
    } else {
        Strat::None
    };
    let list_like = is_array || matches!(child, Ty::Opaque(n) if n != "RawExtension");
    Some((child, strat, list_like))
}

/// The Go shape of a value with this schema.
fn child_type(schema: &'static Value) -> Ty {
    if let Some(name) = rkcm_openapi::referenced_name(schema) {
        return match definitions().get(name) {
            Some(def) if def.get("properties").is_some() => Ty::S(name),
            Some(def) if def.get("additionalProperties").is_some() => Ty::Map,
            Some(_) => Ty::Opaque(name.rsplit('.').next().unwrap_or(name)),
            None => Ty::Any,
        };
    }
    if schema.get("additionalProperties").is_some() {
        Ty::Map
    } else {
        Ty::Any
    }
}

/// The types of upstream's strategic merge tests (`MergeItem`), served as kind `__MergeItem`.
#[cfg(test)]
mod test_types {
    use serde_json::json;

    pub(super) fn definitions() -> rkcm_openapi::Definitions {
        let item = "#/components/schemas/test.MergeItem";
        let list = |strategy: Option<&str>| {
            let mut p = json!({"type": "array", "items": {"$ref": item}});
            if let Some(s) = strategy {
                p["x-kubernetes-patch-strategy"] = json!(s);
                p["x-kubernetes-patch-merge-key"] = json!("name");
            }
            p
        };
        let ints = json!({"type": "array", "items": {"type": "integer"}, "x-kubernetes-patch-strategy": "merge"});
        let doc = json!({"components": {"schemas": {
            "test.MergeItem": {"type": "object", "properties": {
                "mergingList": list(Some("merge")),
                "nonMergingList": list(None),
                "mergingIntList": ints,
                // A pointer to a slice upstream.
                "mergeItemPtr": list(Some("merge")),
                "replacingItem": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.runtime.RawExtension"}],
                                  "x-kubernetes-patch-strategy": "replace"},
                "retainKeysMap": {"allOf": [{"$ref": "#/components/schemas/test.RetainKeysMergeItem"}],
                                  "x-kubernetes-patch-strategy": "retainKeys"},
                "retainKeysMergingList": list(Some("merge,retainKeys")),
            }, "x-kubernetes-group-version-kind": [{"group": "test", "version": "v1", "kind": "__MergeItem"}]},
            "test.RetainKeysMergeItem": {"type": "object", "properties": {
                "mergingIntList": ints,
                "mergingList": list(Some("merge")),
                "nonMergingList": list(None),
            }},
        }}});
        rkcm_openapi::Definitions::from_documents([&doc])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD_SPEC: &str = "io.k8s.api.core.v1.PodSpec";
    const CONTAINER: &str = "io.k8s.api.core.v1.Container";

    #[test]
    fn roots_by_kind() {
        assert_eq!(root_type("Pod"), Some("io.k8s.api.core.v1.Pod"));
        assert_eq!(root_type("Event"), Some("io.k8s.api.core.v1.Event"));
        assert_eq!(
            root_type("HorizontalPodAutoscaler"),
            Some("io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler")
        );
        assert_eq!(
            root_type("FlowSchema"),
            Some("io.k8s.api.flowcontrol.v1.FlowSchema")
        );
        assert_eq!(root_type("Scale"), Some("io.k8s.api.autoscaling.v1.Scale"));
        assert_eq!(
            root_type("ServiceCIDR"),
            Some("io.k8s.api.networking.v1alpha1.ServiceCIDR")
        );
        assert_eq!(
            root_type("ResourceClaim"),
            Some("io.k8s.api.resource.v1alpha2.ResourceClaim")
        );
        assert_eq!(root_type("Widget"), None);
        assert!(version_priority("v2") > version_priority("v1"));
        assert!(version_priority("v1") > version_priority("v1beta3"));
        assert!(version_priority("v1beta1") > version_priority("v1alpha2"));
        assert!(version_priority("v2beta1") > version_priority("v1beta3"));
    }

    #[test]
    fn pod_lists() {
        let cases: &[(&str, &str, Strat, &str)] = &[
            (POD_SPEC, "containers", Strat::MergeKey("name"), CONTAINER),
            (
                POD_SPEC,
                "initContainers",
                Strat::MergeKey("name"),
                CONTAINER,
            ),
            (
                POD_SPEC,
                "ephemeralContainers",
                Strat::MergeKey("name"),
                "io.k8s.api.core.v1.EphemeralContainer",
            ),
            (
                POD_SPEC,
                "volumes",
                Strat::MergeKey("name"),
                "io.k8s.api.core.v1.Volume",
            ),
            (
                POD_SPEC,
                "tolerations",
                Strat::None,
                "io.k8s.api.core.v1.Toleration",
            ),
            (
                POD_SPEC,
                "hostAliases",
                Strat::MergeKey("ip"),
                "io.k8s.api.core.v1.HostAlias",
            ),
            (
                POD_SPEC,
                "topologySpreadConstraints",
                Strat::MergeKey("topologyKey"),
                "io.k8s.api.core.v1.TopologySpreadConstraint",
            ),
            (
                CONTAINER,
                "ports",
                Strat::MergeKey("containerPort"),
                "io.k8s.api.core.v1.ContainerPort",
            ),
            (
                CONTAINER,
                "env",
                Strat::MergeKey("name"),
                "io.k8s.api.core.v1.EnvVar",
            ),
            (
                CONTAINER,
                "volumeMounts",
                Strat::MergeKey("mountPath"),
                "io.k8s.api.core.v1.VolumeMount",
            ),
            (
                "io.k8s.api.core.v1.ServiceSpec",
                "ports",
                Strat::MergeKey("port"),
                "io.k8s.api.core.v1.ServicePort",
            ),
            (
                "io.k8s.api.core.v1.NodeStatus",
                "addresses",
                Strat::MergeKey("type"),
                "io.k8s.api.core.v1.NodeAddress",
            ),
            (
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "ownerReferences",
                Strat::MergeKey("uid"),
                "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
            ),
            (
                "io.k8s.api.apps.v1.DeploymentStatus",
                "conditions",
                Strat::MergeKey("type"),
                "io.k8s.api.apps.v1.DeploymentCondition",
            ),
        ];
        for (ty, field, strat, elem) in cases {
            assert_eq!(
                field_meta(ty, field),
                Some((Ty::S(elem), *strat, true)),
                "{}.{}",
                ty,
                field
            );
        }
    }

    #[test]
    fn scalars_structs_maps_and_opaque_values() {
        let meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
        assert_eq!(
            field_meta(meta, "finalizers"),
            Some((Ty::Any, Strat::MergePrim, true))
        );
        assert_eq!(
            field_meta("io.k8s.api.core.v1.NodeSpec", "podCIDRs"),
            Some((Ty::Any, Strat::MergePrim, true))
        );
        assert_eq!(
            field_meta(meta, "labels"),
            Some((Ty::Map, Strat::None, false))
        );
        assert_eq!(
            field_meta(meta, "name"),
            Some((Ty::Any, Strat::None, false))
        );
        assert_eq!(field_meta(meta, "nope"), None);
        assert_eq!(
            field_meta("io.k8s.api.core.v1.Pod", "spec"),
            Some((Ty::S(POD_SPEC), Strat::None, false))
        );
        assert_eq!(
            field_meta("io.k8s.api.policy.v1.PodDisruptionBudgetSpec", "selector"),
            Some((
                Ty::S("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
                Strat::Replace,
                false
            ))
        );
        assert_eq!(
            field_meta("io.k8s.api.apps.v1.ControllerRevision", "data"),
            Some((Ty::Opaque("RawExtension"), Strat::None, false))
        );
        let props = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";
        assert_eq!(
            field_meta(props, "default"),
            Some((Ty::Opaque("JSON"), Strat::None, true))
        );
        assert_eq!(
            field_meta(props, "items"),
            Some((Ty::Opaque("JSONSchemaPropsOrArray"), Strat::None, true))
        );
        assert_eq!(
            field_meta(props, "properties"),
            Some((Ty::Map, Strat::None, false))
        );
        assert_eq!(
            field_meta(props, "x-kubernetes-validations"),
            Some((
                Ty::S("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ValidationRule"),
                Strat::MergeKey("rule"),
                true
            ))
        );
        assert_eq!(
            field_meta(
                "io.k8s.api.certificates.v1.CertificateSigningRequestSpec",
                "extra"
            ),
            Some((Ty::Map, Strat::None, false))
        );
        // A Quantity is a struct without fields of its own.
        assert_eq!(
            field_meta("io.k8s.api.core.v1.ResourceRequirements", "limits"),
            Some((Ty::Map, Strat::None, false))
        );
    }
}

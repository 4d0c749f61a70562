//! Dynamic resource allocation as kube-apiserver 1.29 serves it: `resource.k8s.io/v1alpha2`
//! (ResourceClass, ResourceClaim, ResourceClaimTemplate, PodSchedulingContext) only with
//! `--runtime-config=resource.k8s.io/v1alpha2=true`, and around it the
//! `DynamicResourceAllocation` gate: the bootstrap role
//! `system:controller:resource-claim-controller`, and a Pod's `spec.resourceClaims`,
//! its containers' `resources.claims` and `status.resourceClaimStatuses`, which the server
//! drops when the gate is off (unless the stored pod already has claims), as its
//! `dropDisabledFields` does.
//!
//! k8s-openapi here is 1.33, whose `PodResourceClaim` has the claim names at the top: the
//! Pod decoder keeps 1.29's `source` instead ([`restore_pod_claims`]). Left out: the same
//! for the pod templates of workloads, and the kinds' OpenAPI schemas (kube-sim describes
//! none).

use std::sync::atomic::Ordering;

use serde_json::{json, Map, Value};

use crate::api::Sim;
use crate::gated_apis::GatedApis;
use crate::resources::ResourceDef;

pub const GROUP: &str = "resource.k8s.io";
pub const VERSION: &str = "v1alpha2";
/// The `--runtime-config` key that serves the group version.
pub const RESOURCE_ALPHA: &str = "resource.k8s.io/v1alpha2";
pub const GATE: &str = "DynamicResourceAllocation";
/// The controller's ServiceAccount, named by the gated bootstrap role.
pub const CONTROLLER_ACCOUNT: &str = "resource-claim-controller";

fn def(resource: &str, kind: &str, namespaced: bool, status: bool) -> ResourceDef {
    crate::gated_apis::alpha_resource(GROUP, VERSION, resource, kind, namespaced, &[], status)
}

/// Serves the group version when `--runtime-config` asks, and records the gate.
pub fn register(sim: &Sim, apis: &GatedApis) {
    sim.dynamic_resource_allocation
        .store(apis.gate(GATE), Ordering::Relaxed);
    if apis.serves(RESOURCE_ALPHA) {
        sim.registry.add_builtin_version(
            GROUP,
            VERSION,
            vec![
                def("podschedulingcontexts", "PodSchedulingContext", true, true),
                def("resourceclaims", "ResourceClaim", true, true),
                def(
                    "resourceclaimtemplates",
                    "ResourceClaimTemplate",
                    true,
                    false,
                ),
                def("resourceclasses", "ResourceClass", false, false),
            ],
        );
    }
}

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources})
}

/// The rules of `system:controller:resource-claim-controller` (1.29's bootstrap policy,
/// present only with the gate on).
pub fn controller_rules() -> Vec<Value> {
    vec![
        rule(&["get", "list", "watch"], "", &["pods"]),
        rule(&["update"], "", &["pods/finalizers"]),
        rule(
            &["get", "list", "watch", "create", "delete"],
            GROUP,
            &["resourceclaims"],
        ),
        rule(
            &["get", "list", "watch", "create", "update", "patch"],
            GROUP,
            &["podschedulingcontexts"],
        ),
        rule(&["update", "patch"], GROUP, &["resourceclaims/status"]),
        rule(&["update", "patch"], "", &["pods/status"]),
        json!({"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]}),
    ]
}

/// The API server's defaults: a claim's (and a template's claim's) `allocationMode` is
/// `WaitForFirstConsumer` when unset.
pub fn apply_defaults(kind: &str, obj: &mut Value) {
    let spec = match kind {
        "ResourceClaim" => obj.get_mut("spec"),
        "ResourceClaimTemplate" => obj.get_mut("spec").and_then(|s| s.get_mut("spec")),
        _ => None,
    };
    if let Some(Value::Object(spec)) = spec {
        let unset = spec
            .get("allocationMode")
            .is_none_or(|m| m.is_null() || m == "");
        if unset {
            spec.insert("allocationMode".into(), json!("WaitForFirstConsumer"));
        }
    }
}

/// The Pod decoder's fix-up: `spec.resourceClaims` as sent, in 1.29's shape (`name` and
/// `source.{resourceClaimName,resourceClaimTemplateName}`), replacing what the 1.33 type
/// made of it; the fields 1.29 does not have are the unknown ones.
pub fn restore_pod_claims(sent: &Value, kept: &mut Value, unknown: &mut Vec<String>) {
    unknown.retain(|field| !field.starts_with("spec.resourceClaims["));
    let Some(claims) = sent
        .get("spec")
        .and_then(|s| s.get("resourceClaims"))
        .and_then(Value::as_array)
    else {
        return;
    };
    let mut out = Vec::with_capacity(claims.len());
    for (i, claim) in claims.iter().enumerate() {
        let Some(claim) = claim.as_object() else {
            continue;
        };
        let mut kept_claim = Map::new();
        for (field, value) in claim {
            match (field.as_str(), value) {
                ("name", _) => {
                    kept_claim.insert(field.clone(), value.clone());
                }
                ("source", Value::Object(source)) => {
                    let mut kept_source = Map::new();
                    for (name, v) in source {
                        if matches!(
                            name.as_str(),
                            "resourceClaimName" | "resourceClaimTemplateName"
                        ) {
                            if !v.is_null() {
                                kept_source.insert(name.clone(), v.clone());
                            }
                        } else if !v.is_null() {
                            unknown.push(format!("spec.resourceClaims[{i}].source.{name}"));
                        }
                    }
                    kept_claim.insert(field.clone(), Value::Object(kept_source));
                }
                ("source", Value::Null) => {}
                (_, Value::Null) => {}
                _ => unknown.push(format!("spec.resourceClaims[{i}].{field}")),
            }
        }
        out.push(Value::Object(kept_claim));
    }
    if let Some(spec) = kept.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("resourceClaims".into(), Value::Array(out));
    }
}

fn has_claims(pod: Option<&Value>) -> bool {
    pod.and_then(|p| p.pointer("/spec/resourceClaims"))
        .and_then(Value::as_array)
        .is_some_and(|claims| !claims.is_empty())
}

/// `dropDisabledDynamicResourceAllocationFields` and its status counterpart: with the gate
/// off, and no claims in the stored pod, the claims go.
pub fn drop_disabled_pod_fields(enabled: bool, pod: &mut Value, old: Option<&Value>) {
    if enabled || has_claims(old) {
        return;
    }
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("resourceClaims");
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            for container in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(resources) = container
                    .get_mut("resources")
                    .and_then(Value::as_object_mut)
                {
                    resources.remove("claims");
                }
            }
        }
    }
    if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("resourceClaimStatuses");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_claims_keep_their_1_29_shape() {
        let sent = json!({"spec": {"resourceClaims": [
            {"name": "a", "source": {"resourceClaimTemplateName": "t", "colour": "red"}},
            {"name": "b", "resourceClaimName": "c"},
        ]}});
        let mut kept = json!({"spec": {"resourceClaims": [{"name": "a"}, {"name": "b", "resourceClaimName": "c"}]}});
        let mut unknown = vec!["spec.resourceClaims[0].source".to_string()];
        restore_pod_claims(&sent, &mut kept, &mut unknown);
        assert_eq!(
            kept,
            json!({"spec": {"resourceClaims": [
                {"name": "a", "source": {"resourceClaimTemplateName": "t"}},
                {"name": "b"},
            ]}})
        );
        assert_eq!(
            unknown,
            [
                "spec.resourceClaims[0].source.colour",
                "spec.resourceClaims[1].resourceClaimName"
            ]
        );
    }

    #[test]
    fn claims_are_dropped_with_the_gate_off_unless_already_used() {
        let pod = json!({"spec": {"resourceClaims": [{"name": "a", "source": {"resourceClaimName": "c"}}],
                                  "containers": [{"name": "x", "resources": {"claims": [{"name": "a"}]}}]},
                         "status": {"resourceClaimStatuses": [{"name": "a"}]}});
        let mut on = pod.clone();
        drop_disabled_pod_fields(true, &mut on, None);
        assert_eq!(on, pod);
        let mut used = pod.clone();
        drop_disabled_pod_fields(false, &mut used, Some(&pod));
        assert_eq!(used, pod);
        let mut off = pod.clone();
        drop_disabled_pod_fields(false, &mut off, None);
        assert_eq!(
            off,
            json!({"spec": {"containers": [{"name": "x", "resources": {}}]}, "status": {}})
        );
    }

    #[test]
    fn the_controller_role_comes_with_the_gate() {
        let names = |gates: &str| -> Vec<String> {
            crate::gated_apis::bootstrap_policy(&GatedApis::parse("", gates).unwrap())
                .into_iter()
                .map(|(r, o)| format!("{r}/{}", o["metadata"]["name"].as_str().unwrap_or("")))
                .collect()
        };
        assert!(names("").is_empty());
        assert_eq!(
            names("DynamicResourceAllocation=true"),
            [
                "clusterroles/system:controller:resource-claim-controller",
                "clusterrolebindings/system:controller:resource-claim-controller"
            ]
        );
        let apis = GatedApis::parse(RESOURCE_ALPHA, "").unwrap();
        assert!(apis.serves(RESOURCE_ALPHA) && !apis.gate(GATE));
    }

    #[test]
    fn claims_default_to_wait_for_first_consumer() {
        let mut claim = json!({"spec": {"resourceClassName": "gpu"}});
        apply_defaults("ResourceClaim", &mut claim);
        assert_eq!(claim["spec"]["allocationMode"], "WaitForFirstConsumer");
        let mut immediate = json!({"spec": {"spec": {"allocationMode": "Immediate"}}});
        apply_defaults("ResourceClaimTemplate", &mut immediate);
        assert_eq!(immediate["spec"]["spec"]["allocationMode"], "Immediate");
    }
}

//! `admissionregistration.k8s.io/v1beta1` ValidatingAdmissionPolicy and
//! ValidatingAdmissionPolicyBinding as kube-apiserver 1.29 serves them.
//!
//! - `--runtime-config=admissionregistration.k8s.io/v1beta1=true` alone decides what is
//!   served (as upstream's storage provider does; the gate plays no part in it):
//!   `validatingadmissionpolicies` (cluster-scoped, with `status`) and
//!   `validatingadmissionpolicybindings` (cluster-scoped), both in the `api-extensions`
//!   category, without short names, stored as v1beta1.
//! - The `ValidatingAdmissionPolicy` gate (Beta, off in 1.29) adds the bootstrap role
//!   `system:controller:validatingadmissionpolicy-status-controller` and its binding.
//! - The strategies: a policy is created with an empty status and generation 1; a write of
//!   the main resource keeps the stored status and bumps the generation when the spec
//!   changed; a status write keeps the spec and the labels, annotations, finalizers and
//!   owner references (`ResetObjectMetaForStatus`). A binding has generation 1 and bumps it
//!   on spec changes.
//! - Defaults ([`apply_defaults`]), validation (`crate::validation::admission_policy`, with
//!   each CEL expression compiled by `rkcm-cel` as the API server compiles it) and the
//!   `kubectl get` columns (`crate::table`) are upstream's.
//!
//! - The strategies' authorization of parameters (`param_authorization`): a writer outside
//!   `system:masters` must be allowed to `get` every object of a policy's `paramKind`, and to
//!   `get` (or `list`, without a name) what a binding's `paramRef` names.
//!
//! Enforcement (the admission plugin, on with the gate) is `crate::admission_policy_enforce`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::api::Sim;
use crate::gated_apis::GatedApis;
use crate::rbac::{Attributes, Policy, ResourceAttributes};
use crate::request::User;
use crate::resources::{Registry, ResourceDef};
use crate::validation::FieldCause;

pub const GROUP: &str = "admissionregistration.k8s.io";
pub const VERSION: &str = "v1beta1";
/// The `--runtime-config` key that serves the group version.
pub const RUNTIME_KEY: &str = "admissionregistration.k8s.io/v1beta1";
pub const GATE: &str = "ValidatingAdmissionPolicy";
/// The status controller's ServiceAccount, named by the gated bootstrap role.
pub const CONTROLLER_ACCOUNT: &str = "validatingadmissionpolicy-status-controller";
pub const POLICY_KIND: &str = "ValidatingAdmissionPolicy";
pub const BINDING_KIND: &str = "ValidatingAdmissionPolicyBinding";

fn def(resource: &str, kind: &str, status: bool) -> ResourceDef {
    let mut def =
        crate::gated_apis::alpha_resource(GROUP, VERSION, resource, kind, false, &[], status);
    def.categories = vec!["api-extensions".into()];
    def
}

/// Serves the group version when `--runtime-config` asks, and records the gate (which
/// turns enforcement on).
pub fn register(sim: &Sim, apis: &GatedApis) {
    sim.validating_admission_policy
        .store(apis.gate(GATE), std::sync::atomic::Ordering::Relaxed);
    if apis.serves(RUNTIME_KEY) {
        sim.registry.add_builtin_version(
            GROUP,
            VERSION,
            vec![
                def("validatingadmissionpolicies", POLICY_KIND, true),
                def("validatingadmissionpolicybindings", BINDING_KIND, false),
            ],
        );
    }
}

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources})
}

/// The rules of `system:controller:validatingadmissionpolicy-status-controller` (1.29's
/// bootstrap policy, present only with the gate on).
pub fn controller_rules() -> Vec<Value> {
    vec![
        rule(
            &["get", "list", "watch"],
            GROUP,
            &["validatingadmissionpolicies"],
        ),
        rule(
            &["get", "patch", "update"],
            GROUP,
            &["validatingadmissionpolicies/status"],
        ),
        json!({"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]}),
    ]
}

fn default_str(m: &mut Map<String, Value>, key: &str, value: &str) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.into(), json!(value));
    }
}

/// `SetDefaults_MatchResources` and each rule's `SetDefaults_Rule` (scope `*`).
fn default_match_resources(m: &mut Map<String, Value>) {
    default_str(m, "matchPolicy", "Equivalent");
    for selector in ["namespaceSelector", "objectSelector"] {
        if m.get(selector).is_none_or(Value::is_null) {
            m.insert(selector.into(), json!({}));
        }
    }
    for rules in ["resourceRules", "excludeResourceRules"] {
        for rule in m
            .get_mut(rules)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(rule) = rule.as_object_mut() {
                default_str(rule, "scope", "*");
            }
        }
    }
}

/// The v1beta1 defaulters: a policy's `failurePolicy` is `Fail`; a policy's
/// `matchConstraints` and a binding's `matchResources` get `matchPolicy: Equivalent`,
/// empty namespace and object selectors, and scope `*` on every rule.
pub fn apply_defaults(kind: &str, obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        if kind == POLICY_KIND {
            if let Some(o) = obj.as_object_mut() {
                o.insert("spec".into(), json!({"failurePolicy": "Fail"}));
            }
        }
        return;
    };
    let match_field = match kind {
        POLICY_KIND => {
            default_str(spec, "failurePolicy", "Fail");
            "matchConstraints"
        }
        BINDING_KIND => "matchResources",
        _ => return,
    };
    if let Some(m) = spec.get_mut(match_field).and_then(Value::as_object_mut) {
        default_match_resources(m);
    }
}

/// The policy strategy's `PrepareForCreate`: the status starts empty.
pub fn prepare_for_create(kind: &str, obj: &mut Value) {
    if kind == POLICY_KIND {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
    }
}

/// Whether a write of `def` by `user` goes through [`param_authorization`] (the strategies
/// skip it for `system:masters`).
pub(crate) fn authorizes_params(def: &ResourceDef, user: &User) -> bool {
    def.group == GROUP
        && def.custom.is_none()
        && (def.kind == POLICY_KIND || def.kind == BINDING_KIND)
        && !user.is_admin()
}

/// Go's `%v` of the request's `*user.DefaultInfo`: `&{name uid [groups] map[extra]}`.
fn go_user(user: &User) -> String {
    let extra: Vec<String> = user
        .extra
        .iter()
        .map(|(k, v)| format!("{k}:[{}]", v.join(" ")))
        .collect();
    format!(
        "&{{{} {} [{}] map[{}]}}",
        user.name,
        user.uid,
        user.groups.join(" "),
        extra.join(" ")
    )
}

/// The group, version and resource a paramKind is authorized on: what its apiVersion and
/// kind resolve to, `*` for what does not parse or resolve.
fn param_resource(registry: &Registry, param_kind: Option<&Value>) -> (String, String, String) {
    let star = || "*".to_string();
    let Some(pk) = param_kind.filter(|p| p.is_object()) else {
        return (star(), star(), star());
    };
    let api_version = pk["apiVersion"].as_str().unwrap_or("");
    // schema.ParseGroupVersion: "" and "/" are the empty group version, more than one
    // slash is an error.
    let (group, version) = match api_version.matches('/').count() {
        _ if api_version.is_empty() || api_version == "/" => ("", ""),
        0 => ("", api_version),
        1 => api_version.split_once('/').unwrap_or(("", api_version)),
        _ => return (star(), star(), star()),
    };
    let kind = pk["kind"].as_str().unwrap_or("");
    let resource = registry
        .by_kind(group, version, kind)
        .map_or_else(star, |d| d.resource.clone());
    (group.to_string(), version.to_string(), resource)
}

fn forbidden(field: &str, message: String) -> FieldCause {
    FieldCause {
        reason: "FieldValueForbidden",
        message: format!("Forbidden: {message}"),
        field: field.into(),
    }
}

/// The policy and binding strategies' check that the writer may read the parameters
/// (`authz.go`), once the object is valid: `Some` is the field error refusing the write.
/// `stored_policy` reads a policy by name (a binding's parameters are its policy's kind).
pub(crate) fn param_authorization(
    rbac: &Policy,
    registry: &Registry,
    user: &User,
    kind: &str,
    obj: &Value,
    old: Option<&Value>,
    stored_policy: impl Fn(&str) -> Option<Arc<Value>>,
) -> Option<FieldCause> {
    let spec = &obj["spec"];
    let allowed = |verb: &str, group: &str, version: &str, resource: &str, name: &str, ns: &str| {
        let attrs = Attributes::resource(
            verb,
            ResourceAttributes {
                group: group.into(),
                version: version.into(),
                resource: resource.into(),
                subresource: String::new(),
                name: name.into(),
                namespace: ns.into(),
            },
        );
        rbac.authorize(user, &attrs).allowed
    };
    match kind {
        POLICY_KIND => {
            let pk = spec.get("paramKind").filter(|p| p.is_object())?;
            let unchanged = old
                .and_then(|o| o["spec"].get("paramKind"))
                .filter(|p| p.is_object())
                .is_some_and(|o| o["apiVersion"] == pk["apiVersion"] && o["kind"] == pk["kind"]);
            if unchanged {
                return None;
            }
            let (group, version, resource) = param_resource(registry, Some(pk));
            if allowed("get", &group, &version, &resource, "*", "*") {
                return None;
            }
            Some(forbidden(
                "spec.paramKind",
                format!(
                    "user {} must have \"get\" permission on all objects of the referenced paramKind (kind={}, apiVersion={})",
                    go_user(user),
                    pk["kind"].as_str().unwrap_or(""),
                    pk["apiVersion"].as_str().unwrap_or("")
                ),
            ))
        }
        BINDING_KIND => {
            // Upstream compares the old and new paramRef as structs holding pointers
            // (selector, parameterNotFoundAction): a set one never equals, so every write
            // of a binding with a paramRef is authorized.
            let pr = spec.get("paramRef").filter(|p| p.is_object())?;
            let policy_name = spec["policyName"].as_str().unwrap_or("");
            let stored = stored_policy(policy_name);
            let param_kind = stored.as_deref().and_then(|p| p["spec"].get("paramKind"));
            let (group, version, resource) = param_resource(registry, param_kind);
            let name = pr["name"].as_str().unwrap_or("");
            let verb = if name.is_empty() { "list" } else { "get" };
            let ns = pr["namespace"].as_str().unwrap_or("");
            if allowed(verb, &group, &version, &resource, name, ns) {
                return None;
            }
            // Upstream's message has its two arguments the other way round.
            Some(forbidden(
                "spec.paramRef",
                format!(
                    "user {verb} does not have \"{}\" permission on the object referenced by paramRef",
                    go_user(user)
                ),
            ))
        }
        _ => None,
    }
}

/// [`param_authorization`] inside a write, the store locked: a refusal is the write's 422.
pub(crate) fn confirm_params(
    sim: &Sim,
    t: &crate::store::Txn,
    rbac: Option<&Policy>,
    user: &User,
    def: &ResourceDef,
    obj: &Value,
    old: Option<&Value>,
) -> crate::status::ApiResult<()> {
    let Some(rbac) = rbac else { return Ok(()) };
    let policies = crate::store::ResKey::new(GROUP, "validatingadmissionpolicies");
    let stored = |name: &str| t.get(&policies, "", name);
    match param_authorization(rbac, &sim.registry, user, &def.kind, obj, old, stored) {
        None => Ok(()),
        Some(cause) => {
            let name = obj["metadata"]["name"].as_str().unwrap_or("");
            Err(crate::status::ApiError::invalid(
                crate::status::Subject::new(&def.group, &def.kind, name),
                &[cause],
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_get_upstreams_defaults() {
        let mut policy = json!({"spec": {"matchConstraints": {
            "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]},
                              {"scope": "Namespaced"}],
            "excludeResourceRules": [{}]}}});
        apply_defaults(POLICY_KIND, &mut policy);
        let spec = &policy["spec"];
        assert_eq!(spec["failurePolicy"], "Fail");
        let m = &spec["matchConstraints"];
        assert_eq!(m["matchPolicy"], "Equivalent");
        assert_eq!(m["namespaceSelector"], json!({}));
        assert_eq!(m["objectSelector"], json!({}));
        assert_eq!(m["resourceRules"][0]["scope"], "*");
        assert_eq!(m["resourceRules"][1]["scope"], "Namespaced");
        assert_eq!(m["excludeResourceRules"][0]["scope"], "*");

        let mut ignore = json!({"spec": {"failurePolicy": "Ignore"}});
        apply_defaults(POLICY_KIND, &mut ignore);
        assert_eq!(
            ignore,
            json!({"spec": {"failurePolicy": "Ignore"}}),
            "no matchConstraints: nothing more"
        );
        let mut empty = json!({});
        apply_defaults(POLICY_KIND, &mut empty);
        assert_eq!(empty, json!({"spec": {"failurePolicy": "Fail"}}));
    }

    #[test]
    fn bindings_default_only_their_match_resources() {
        let mut binding =
            json!({"spec": {"policyName": "p", "matchResources": {"matchPolicy": "Exact"}}});
        apply_defaults(BINDING_KIND, &mut binding);
        assert_eq!(
            binding["spec"],
            json!({"policyName": "p", "matchResources": {"matchPolicy": "Exact",
                   "namespaceSelector": {}, "objectSelector": {}}})
        );
        let mut bare = json!({"spec": {"policyName": "p"}});
        apply_defaults(BINDING_KIND, &mut bare);
        assert_eq!(bare, json!({"spec": {"policyName": "p"}}));
    }

    #[test]
    fn the_runtime_config_serves_and_the_gate_adds_the_role() {
        let names = |rt: &str, gates: &str| -> Vec<String> {
            crate::gated_apis::bootstrap_policy(&GatedApis::parse(rt, gates).unwrap())
                .into_iter()
                .map(|(r, o)| format!("{r}/{}", o["metadata"]["name"].as_str().unwrap_or("")))
                .collect()
        };
        assert!(names(RUNTIME_KEY, "").is_empty());
        assert_eq!(
            names("", "ValidatingAdmissionPolicy=true"),
            [
                "clusterroles/system:controller:validatingadmissionpolicy-status-controller",
                "clusterrolebindings/system:controller:validatingadmissionpolicy-status-controller"
            ]
        );
        let apis = GatedApis::parse(RUNTIME_KEY, "").unwrap();
        assert!(apis.serves(RUNTIME_KEY) && !apis.gate(GATE));
    }

    fn user(name: &str) -> User {
        User {
            name: name.into(),
            uid: String::new(),
            groups: vec!["system:authenticated".into()],
            extra: Default::default(),
        }
    }

    /// A policy that lets `reader` get configmaps everywhere and nothing else.
    fn reader_policy() -> Policy {
        let objects = crate::rbac::PolicyObjects {
            cluster_roles: vec![Arc::new(json!({"metadata": {"name": "cm"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]}))],
            cluster_role_bindings: vec![Arc::new(json!({"metadata": {"name": "cm"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm"},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "reader"}]}))],
            ..Default::default()
        };
        Policy::compile(1, &objects)
    }

    #[test]
    fn writers_must_be_able_to_read_the_parameters() {
        let (rbac, registry) = (reader_policy(), Registry::builtin());
        let policy = json!({"metadata": {"name": "p"},
                            "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}});
        let none = |_: &str| None;
        let check = |who: &str, kind: &str, o: &Value, old: Option<&Value>| {
            param_authorization(&rbac, &registry, &user(who), kind, o, old, none)
                .map(|c| format!("{}: {}", c.field, c.message))
        };
        assert_eq!(check("reader", POLICY_KIND, &policy, None), None);
        assert_eq!(
            check("writer", POLICY_KIND, &policy, None).as_deref(),
            Some("spec.paramKind: Forbidden: user &{writer  [system:authenticated] map[]} must have \"get\" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)")
        );
        assert_eq!(
            check("writer", POLICY_KIND, &policy, Some(&policy)),
            None,
            "an unchanged paramKind is not checked again"
        );
        assert_eq!(
            check("writer", POLICY_KIND, &json!({"spec": {}}), None),
            None
        );

        let binding = json!({"metadata": {"name": "b"},
            "spec": {"policyName": "p", "paramRef": {"namespace": "default", "parameterNotFoundAction": "Deny",
                                                      "selector": {}}}});
        let stored = |_: &str| Some(Arc::new(policy.clone()));
        let by = |who: &str, o: &Value| {
            param_authorization(
                &rbac,
                &registry,
                &user(who),
                BINDING_KIND,
                o,
                Some(o),
                stored,
            )
            .map(|c| format!("{}: {}", c.field, c.message))
        };
        assert_eq!(
            by("reader", &binding).as_deref(),
            Some("spec.paramRef: Forbidden: user list does not have \"&{reader  [system:authenticated] map[]}\" permission on the object referenced by paramRef"),
            "no name: list, which the reader may not"
        );
        let mut named = binding.clone();
        named["spec"]["paramRef"] =
            json!({"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"});
        assert_eq!(by("reader", &named), None);
    }

    #[test]
    fn a_new_policy_has_an_empty_status() {
        let mut policy = json!({"spec": {}, "status": {"observedGeneration": 4}});
        prepare_for_create(POLICY_KIND, &mut policy);
        assert_eq!(policy["status"], json!({}));
        let mut binding = json!({"spec": {}});
        prepare_for_create(BINDING_KIND, &mut binding);
        assert!(binding.get("status").is_none());
    }
}

//! The ValidatingAdmissionPolicy admission plugin of kube-apiserver 1.29
//! (`plugin/validatingadmissionpolicy`): every create, update and delete (after mutation
//! and validation, before storage) is checked against the stored
//! `admissionregistration.k8s.io/v1beta1` policies and their bindings.
//!
//! - Policies and bindings themselves are never checked (`isPolicyResource`).
//! - A policy matches by its `matchConstraints`, a binding by its `matchResources` (absent:
//!   everything): resource rules with operations, subresources and resource names, excluded
//!   rules, namespace and object selectors ([`matching`]).
//! - Parameters: none without `paramKind` or `paramRef` (`params` is null), the object
//!   `paramRef.name` names, or every object `paramRef.selector` selects, in `paramRef.namespace`
//!   or the request's namespace for a namespaced kind; none found with
//!   `parameterNotFoundAction: Deny` is a configuration error.
//! - Each validation, after the match conditions, is evaluated by `rkcm-cel` ([`evaluate`]);
//!   errors follow the policy's `failurePolicy`, as do configuration errors (an unknown
//!   `paramKind`, a bad selector, missing parameters).
//! - A failed validation with `Deny` refuses the request with upstream's `Status` (reason and
//!   code from the validation's `reason`, default `Invalid`/422; the first denial in policy
//!   and binding name order is reported); with `Warn` it adds a `Warning` response header
//!   (`299 - "Validation failed for ValidatingAdmissionPolicy ..."`).
//!
//! Left out: `Audit` (kube-sim keeps no audit log, so neither audit annotations nor
//! `auditAnnotations` are evaluated), Kubernetes' runtime cost budget, the per-request
//! caching of authorizer decisions (each check asks RBAC again, with the same answer), and
//! `matchPolicy: Equivalent` (treated as `Exact`). Writes of the `scale` subresource are not
//! checked (kube-sim has no `Scale` object to show the policies).

mod compiled;
mod evaluate;
mod matching;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::admission_policies::GROUP;
use crate::api::Sim;
use crate::rbac::{Attributes, Policy, ResourceAttributes};
use crate::request::{ApiResponse, User};
use crate::resources::{Registry, ResourceDef};
use crate::status::{ApiError, ApiResult, Subject};
use crate::store::{ResKey, Txn};

use evaluate::{Decision, Inputs};

/// The admission attributes of one request.
#[derive(Debug)]
pub(crate) struct Attrs<'a> {
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: &'a str,
    pub(crate) kind: &'a str,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub(crate) operation: &'a str,
    /// The name the request gave (empty for a create with `generateName`).
    pub(crate) name: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) object: Option<&'a Value>,
    pub(crate) old_object: Option<&'a Value>,
    pub(crate) user: &'a User,
    pub(crate) dry_run: bool,
    /// The operation's options object (`CreateOptions`, `UpdateOptions`, `DeleteOptions`).
    pub(crate) options: Value,
}

impl<'a> Attrs<'a> {
    /// The attributes of `operation` on `def` (its `sub` subresource, `""` for the main
    /// resource): no objects, not a dry run, no options yet.
    pub(crate) fn new(
        def: &'a ResourceDef,
        sub: &'a str,
        operation: &'a str,
        name: &'a str,
        namespace: &'a str,
        user: &'a User,
    ) -> Attrs<'a> {
        // A Namespace's own requests are in the namespace they name (upstream's request
        // info), except its create.
        let namespace =
            if def.group.is_empty() && def.resource == "namespaces" && operation != "CREATE" {
                name
            } else {
                namespace
            };
        Attrs {
            group: &def.group,
            version: &def.version,
            resource: &def.resource,
            subresource: sub,
            kind: &def.kind,
            operation,
            name,
            namespace,
            object: None,
            old_object: None,
            user,
            dry_run: false,
            options: Value::Null,
        }
    }

    /// The options object of the operation (`CreateOptions`, `UpdateOptions`,
    /// `DeleteOptions`), with `dryRun: [All]` on a dry run.
    pub(crate) fn options_of(kind: &str, dry_run: bool) -> Value {
        let mut o = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
        if dry_run {
            o["dryRun"] = json!(["All"]);
        }
        o
    }
}

/// The plugin, when the `ValidatingAdmissionPolicy` gate turns it on, with the RBAC policy
/// its `authorizer` asks (taken before the store's lock: compiling RBAC reads the store).
pub(crate) struct PolicyAdmission {
    rbac: Arc<Policy>,
}

impl Sim {
    /// The plugin for one request, `None` when the gate is off.
    pub(crate) fn policy_admission(&self) -> Option<PolicyAdmission> {
        self.validating_admission_policy
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| PolicyAdmission {
                rbac: self.authorizer.policy(&self.store),
            })
    }
}

impl PolicyAdmission {
    /// [`admit`] with this request's RBAC.
    pub(crate) fn admit(&self, t: &Txn, registry: &Registry, a: &Attrs) -> ApiResult<()> {
        admit(t, registry, Some(self.rbac.clone()), a)
    }

    /// [`PolicyAdmission::admit`] for the deletion of `current` with `options` (a
    /// `DeleteOptions`).
    pub(crate) fn admit_delete(
        &self,
        t: &Txn,
        registry: &Registry,
        def: &ResourceDef,
        current: &Value,
        options: &Value,
        user: &User,
    ) -> ApiResult<()> {
        let meta = &current["metadata"];
        let name = meta["name"].as_str().unwrap_or("");
        let ns = meta["namespace"].as_str().unwrap_or("");
        let mut a = Attrs::new(def, "", "DELETE", name, ns, user);
        a.old_object = Some(current);
        a.dry_run = crate::query_options::delete_is_dry_run(options);
        let mut opts = Attrs::options_of("DeleteOptions", false);
        for (k, v) in options.as_object().into_iter().flatten() {
            if k != "kind" && k != "apiVersion" {
                opts[k] = v.clone();
            }
        }
        a.options = opts;
        self.admit(t, registry, &a)
    }
}

fn policies_key() -> ResKey {
    ResKey::new(GROUP, "validatingadmissionpolicies")
}

fn bindings_key() -> ResKey {
    ResKey::new(GROUP, "validatingadmissionpolicybindings")
}

thread_local! {
    static WARNINGS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Runs `f` (one request's handling, on this thread) and returns the admission warnings it
/// produced.
pub(crate) fn collect_warnings<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let previous = WARNINGS.with(|w| w.borrow_mut().replace(Vec::new()));
    let out = f();
    let warnings = WARNINGS.with(|w| std::mem::replace(&mut *w.borrow_mut(), previous));
    (out, warnings.unwrap_or_default())
}

fn record_warning(text: String) {
    WARNINGS.with(|w| {
        if let Some(list) = w.borrow_mut().as_mut() {
            if !list.contains(&text) {
                list.push(text);
            }
        }
    });
}

/// Adds `Warning: 299 - "..."` headers (Go's quoting of the text).
pub(crate) fn add_warning_headers(r: &mut ApiResponse, warnings: Vec<String>) {
    for w in warnings {
        let quoted = w.replace('\\', "\\\\").replace('"', "\\\"");
        r.headers
            .push(("Warning".into(), format!("299 - \"{quoted}\"")));
    }
}

/// The authorizer behind `authorizer`: kube-sim's RBAC for the request's user (or the
/// ServiceAccount a check names); `system:masters` is allowed everything.
struct RbacAuthorizer {
    policy: Option<Arc<Policy>>,
    user: User,
}

impl rkcm_cel::Authorizer for RbacAuthorizer {
    fn authorize(&self, check: &rkcm_cel::AuthzCheck) -> rkcm_cel::AuthzDecision {
        let user = match &check.service_account {
            Some((ns, name)) => User {
                name: format!("system:serviceaccount:{ns}:{name}"),
                uid: String::new(),
                groups: vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                ],
                extra: BTreeMap::new(),
            },
            None => self.user.clone(),
        };
        if user.is_admin() {
            return rkcm_cel::AuthzDecision {
                allowed: true,
                ..Default::default()
            };
        }
        let attrs = match &check.path {
            Some(path) => Attributes::non_resource(&check.verb, path),
            None => Attributes::resource(
                &check.verb,
                ResourceAttributes {
                    group: check.group.clone(),
                    version: "*".into(),
                    resource: check.resource.clone(),
                    subresource: check.subresource.clone(),
                    name: check.name.clone(),
                    namespace: check.namespace.clone(),
                },
            ),
        };
        let decision = self
            .policy
            .as_ref()
            .map(|p| p.authorize(&user, &attrs))
            .unwrap_or_default();
        rkcm_cel::AuthzDecision {
            allowed: decision.allowed,
            reason: decision.reason,
            error: None,
        }
    }
}

/// A denial, with the policy and binding it comes from.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

/// Where a parameter kind is stored and whether it is namespaced.
struct ParamSource {
    key: ResKey,
    namespaced: bool,
}

/// The policy's `paramKind`, resolved (`Err`: the configuration error).
fn param_source(registry: &Registry, spec: &Value) -> Result<Option<ParamSource>, String> {
    let Some(pk) = spec.get("paramKind").filter(|p| p.is_object()) else {
        return Ok(None);
    };
    let api_version = pk["apiVersion"].as_str().unwrap_or("");
    let kind = pk["kind"].as_str().unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    match registry.by_kind(group, version, kind) {
        Some(def) => Ok(Some(ParamSource {
            key: def.key(),
            namespaced: def.namespaced,
        })),
        None => Err(format!(
            "failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind}'"
        )),
    }
}

/// `collectParams`: the parameters a binding evaluates with (`None` is "no parameter").
fn collect_params(
    t: &Txn,
    source: Option<&ParamSource>,
    param_ref: Option<&Value>,
    namespace: &str,
) -> Result<Vec<Option<Arc<Value>>>, String> {
    let (Some(source), Some(pr)) = (source, param_ref) else {
        return Ok(vec![None]);
    };
    let ref_ns = pr["namespace"].as_str().unwrap_or("");
    let ns = if source.namespaced {
        if !ref_ns.is_empty() {
            ref_ns
        } else if !namespace.is_empty() {
            namespace
        } else {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .into(),
            );
        }
    } else if !ref_ns.is_empty() {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
        );
    } else {
        ""
    };
    let name = pr["name"].as_str().unwrap_or("");
    let params: Vec<Option<Arc<Value>>> = if !name.is_empty() {
        if pr.get("selector").is_some_and(|s| !s.is_null()) {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        t.get(&source.key, ns, name).into_iter().map(Some).collect()
    } else if let Some(sel) = pr.get("selector").filter(|s| !s.is_null()) {
        let selector = matching::Selector::parse(Some(sel))?;
        let scope = source.namespaced.then_some(ns);
        t.range(&source.key, scope, None)
            .filter(|(_, o)| selector.matches(&matching::labels_of(o)))
            .map(|(_, o)| Some(o.clone()))
            .collect()
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if params.is_empty() && pr["parameterNotFoundAction"].as_str() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(params)
}

fn name_of(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// Checks a request against every policy: `Err` is the refusal. Warnings go to the
/// collector of [`collect_warnings`].
pub(crate) fn admit(
    t: &Txn,
    registry: &Registry,
    rbac: Option<Arc<Policy>>,
    a: &Attrs,
) -> ApiResult<()> {
    if a.group == GROUP
        && matches!(
            a.resource,
            "validatingadmissionpolicies" | "validatingadmissionpolicybindings"
        )
    {
        return Ok(());
    }
    if a.subresource == "scale" || t.count(&policies_key()) == 0 {
        return Ok(());
    }
    let namespaces = ResKey::new("", "namespaces");
    let namespace_labels = |name: &str| {
        t.get(&namespaces, "", name)
            .map(|n| matching::labels_of(&n))
            .ok_or_else(|| format!("namespaces \"{name}\" not found"))
    };
    let authorizer: Arc<dyn rkcm_cel::Authorizer> = Arc::new(RbacAuthorizer {
        policy: rbac,
        user: a.user.clone(),
    });
    let request = evaluate::request_json(a);
    let bindings: Vec<Arc<Value>> = t
        .range(&bindings_key(), None, None)
        .map(|(_, b)| b.clone())
        .collect();
    let mut denials: Vec<Denial> = Vec::new();
    for (_, policy) in t.range(&policies_key(), None, None) {
        let policy_name = name_of(policy);
        let spec = &policy["spec"];
        let fail = spec["failurePolicy"].as_str() != Some("Ignore");
        let config_error = |denials: &mut Vec<Denial>, binding: Option<String>, err: String| {
            if fail {
                let what = if binding.is_some() {
                    "binding"
                } else {
                    "policy"
                };
                denials.push(Denial {
                    policy: policy_name.clone(),
                    binding,
                    message: format!("failed to configure {what}: {err}"),
                    reason: None,
                });
            }
        };
        let Some(constraints) = spec.get("matchConstraints").filter(|m| m.is_object()) else {
            continue;
        };
        match matching::matches(constraints, a, &namespace_labels) {
            Err(e) => {
                config_error(&mut denials, None, e);
                continue;
            }
            Ok(false) => continue,
            Ok(true) => {}
        }
        let source = match param_source(registry, spec) {
            Ok(s) => s,
            Err(e) => {
                config_error(&mut denials, None, e);
                continue;
            }
        };
        let compiled = compiled::compiled(policy);
        for binding in bindings
            .iter()
            .filter(|b| b["spec"]["policyName"].as_str() == Some(policy_name.as_str()))
        {
            let binding_name = name_of(binding);
            let bspec = &binding["spec"];
            if let Some(m) = bspec.get("matchResources").filter(|m| m.is_object()) {
                match matching::matches(m, a, &namespace_labels) {
                    Err(e) => {
                        config_error(&mut denials, Some(binding_name), e);
                        continue;
                    }
                    Ok(false) => continue,
                    Ok(true) => {}
                }
            }
            let param_ref = bspec.get("paramRef").filter(|p| p.is_object());
            let params = match collect_params(t, source.as_ref(), param_ref, a.namespace) {
                Ok(p) => p,
                Err(e) => {
                    config_error(&mut denials, Some(binding_name), e);
                    continue;
                }
            };
            // A Namespace's own request has no namespace object.
            let namespace =
                if a.namespace.is_empty() || (a.group.is_empty() && a.kind == "Namespace") {
                    None
                } else {
                    Some(t.get(&namespaces, "", a.namespace).ok_or_else(|| {
                        ApiError::not_found(Subject::new("", "namespaces", a.namespace))
                    })?)
                };
            let actions: Vec<&str> = bspec["validationActions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for param in &params {
                let inputs = Inputs {
                    attrs: a,
                    request: &request,
                    params: param.as_deref(),
                    namespace: namespace.as_deref(),
                    authorizer: authorizer.clone(),
                };
                for decision in evaluate::validate(&compiled, &inputs, fail) {
                    let Decision::Deny { message, reason } = decision else {
                        continue;
                    };
                    for action in &actions {
                        match *action {
                            "Deny" => denials.push(Denial {
                                policy: policy_name.clone(),
                                binding: Some(binding_name.clone()),
                                message: message.clone(),
                                reason: reason.clone(),
                            }),
                            "Warn" => record_warning(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {message}"
                            )),
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    match denials.into_iter().next() {
        None => Ok(()),
        Some(d) => Err(refusal(a, d)),
    }
}

/// `admission.NewForbidden` with the decision's reason and code, the message also as a cause.
fn refusal(a: &Attrs, d: Denial) -> ApiError {
    let message = match &d.binding {
        Some(b) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
            d.policy, d.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            d.policy, d.message
        ),
    };
    let object_name = a
        .object
        .or(a.old_object)
        .map(|o| {
            let meta = &o["metadata"];
            let name = meta["name"].as_str().unwrap_or("");
            if name.is_empty() {
                meta["generateName"].as_str().unwrap_or("").to_string()
            } else {
                name.to_string()
            }
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "Unknown".into());
    let name = if a.name.is_empty() {
        object_name
    } else {
        a.name.to_string()
    };
    let mut err = ApiError::forbidden(Subject::new(a.group, a.resource, &name), &message);
    let (reason, code) = match d.reason.as_deref() {
        Some("Forbidden") => ("Forbidden", 403),
        Some("Unauthorized") => ("Unauthorized", 401),
        Some("RequestEntityTooLarge") => ("RequestEntityTooLarge", 413),
        _ => ("Invalid", 422),
    };
    err.reason = reason;
    err.code = code;
    if let Some(details) = err.details.as_deref_mut() {
        details["causes"] = json!([{ "message": message }]);
    }
    err
}

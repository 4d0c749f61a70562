//! Validation of `admissionregistration.k8s.io` ValidatingAdmissionPolicy and
//! ValidatingAdmissionPolicyBinding (upstream `pkg/apis/admissionregistration/validation`:
//! `ValidateValidatingAdmissionPolicy`, its update and status update, and the binding's),
//! with upstream's field paths (the binding's `spec.matchResouces` typo included) and
//! messages. Each CEL expression is compiled as the API server compiles it
//! ([`super::admission_policy_cel`]).
//!
//! A status write is validated as a whole object: its spec is the stored one (valid when
//! stored) and a spec write keeps the stored status, so checking both on every write gives
//! upstream's answers.

use std::collections::BTreeSet;

use serde_json::Value;

use super::admission_policy_cel::{Compiler, Returns};
use super::{
    arr, child, go_string_slice, idx, is_dns1035_label, is_dns1123_subdomain, is_path_segment_name,
    is_qualified_name, q, sem_eq, str_of, validate_label_selector, Errs,
};

const MAX_AUDIT_ANNOTATIONS: usize = 20;
const MAX_AUDIT_VALUE_EXPRESSION_LEN: usize = 5 * 1024;
const MAX_MATCH_CONDITIONS: usize = 64;
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];

/// A slice of a named string type as Go's `%#v` prints it.
fn go_named_slice(type_name: &str, v: Option<&Value>) -> String {
    let items: Vec<String> = arr(v).iter().map(|x| q(str_of(Some(x)))).collect();
    format!("[]{type_name}{{{}}}", items.join(", "))
}

fn has_wildcard(v: Option<&Value>) -> bool {
    arr(v).iter().any(|x| x == "*")
}

/// What an update may keep as it was: the expressions already stored (compiled in the
/// stored-expressions environment upstream, which kube-sim's single environment covers)
/// and whether the match conditions need checking again.
struct Options {
    ignore_match_conditions: bool,
    allow_params_in_match_conditions: bool,
}

/// `ValidateValidatingAdmissionPolicy` (create) and `...Update` (update), and the status
/// rules.
pub(super) fn validate_policy(e: &mut Errs, o: &Value, old: Option<&Value>) {
    let spec = o.get("spec");
    let ignore_match_conditions = old.is_some_and(|old| {
        let old_spec = old.get("spec");
        let field = |s: Option<&Value>, f: &str| s.and_then(|s| s.get(f)).cloned();
        sem_eq(
            field(spec, "paramKind").as_ref(),
            field(old_spec, "paramKind").as_ref(),
        ) && sem_eq(
            field(spec, "matchConditions").as_ref(),
            field(old_spec, "matchConditions").as_ref(),
        )
    });
    let mut opts = Options {
        ignore_match_conditions,
        allow_params_in_match_conditions: false,
    };
    let name = str_of(o.pointer("/metadata/name"));
    validate_policy_spec(e, name, spec, &mut opts);
    validate_status(e, o.get("status"));
}

fn validate_policy_spec(e: &mut Errs, name: &str, spec: Option<&Value>, opts: &mut Options) {
    let path = "spec";
    let field = |f: &str| spec.and_then(|s| s.get(f)).filter(|v| !v.is_null());
    let variables = arr(field("variables"));
    let mut compiler = Compiler::new(!variables.is_empty());
    match field("failurePolicy") {
        None => e.required(&child(path, "failurePolicy"), ""),
        Some(p) if !matches!(str_of(Some(p)), "Fail" | "Ignore") => e.not_supported(
            &child(path, "failurePolicy"),
            &q(str_of(Some(p))),
            &["Fail", "Ignore"],
        ),
        Some(_) => {}
    }
    let param_kind = field("paramKind");
    if let Some(kind) = param_kind {
        opts.allow_params_in_match_conditions = true;
        validate_param_kind(e, kind, &child(path, "paramKind"));
    }
    let has_params = param_kind.is_some();
    match field("matchConstraints") {
        None => e.required(&child(path, "matchConstraints"), ""),
        Some(mc) => {
            validate_match_resources(e, mc, &child(path, "matchConstraints"));
            if arr(mc.get("resourceRules")).is_empty() {
                e.required("spec.matchConstraints.resourceRules", "");
            }
        }
    }
    if !opts.ignore_match_conditions {
        validate_match_conditions(e, field("matchConditions"), opts, "spec.matchConditions");
    }
    for (i, variable) in variables.iter().enumerate() {
        let p = idx("spec.variables", i);
        validate_variable(e, &mut compiler, variable, has_params, &p);
    }
    let validations = arr(field("validations"));
    let audit = field("auditAnnotations");
    if validations.is_empty() && arr(audit).is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        e.required("spec.validations", why);
        e.required("spec.auditAnnotations", why);
        return;
    }
    for (i, v) in validations.iter().enumerate() {
        let p = idx("spec.validations", i);
        validate_validation(e, &compiler, v, has_params, opts, &p);
    }
    let Some(audit) = audit.and_then(Value::as_array) else {
        return;
    };
    if audit.len() > MAX_AUDIT_ANNOTATIONS {
        e.invalid(
            "spec.auditAnnotations",
            &go_audit_annotations(audit),
            &format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        );
    }
    let mut keys = BTreeSet::new();
    for (i, a) in audit.iter().enumerate() {
        let p = idx("spec.auditAnnotations", i);
        validate_audit_annotation(e, &compiler, name, a, has_params, &p);
        let key = str_of(a.get("key"));
        if !keys.insert(key.to_string()) {
            e.duplicate(&child(&p, "key"), &q(key));
        }
    }
}

fn go_audit_annotations(list: &[Value]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|a| {
            format!(
                "admissionregistration.AuditAnnotation{{Key:{}, ValueExpression:{}}}",
                q(str_of(a.get("key"))),
                q(str_of(a.get("valueExpression")))
            )
        })
        .collect();
    format!(
        "[]admissionregistration.AuditAnnotation{{{}}}",
        items.join(", ")
    )
}

/// upstream `parseGroupVersion`: `group/version`, a bare version, or an error.
fn parse_group_version(gv: &str) -> Result<(&str, &str), String> {
    if gv.is_empty() || gv == "/" {
        return Ok(("", ""));
    }
    match gv.matches('/').count() {
        0 => Ok(("", gv)),
        1 => Ok(gv.split_once('/').unwrap_or(("", gv))),
        _ => Err(format!("unexpected GroupVersion string: {gv}")),
    }
}

fn validate_param_kind(e: &mut Errs, kind: &Value, path: &str) {
    let api_version = str_of(kind.get("apiVersion"));
    let api_path = child(path, "apiVersion");
    if api_version.is_empty() {
        e.required(&api_path, "");
    } else {
        match parse_group_version(api_version) {
            Err(msg) => e.invalid(&api_path, &q(api_version), &msg),
            Ok((group, version)) => {
                if !group.is_empty() {
                    let errs = is_dns1123_subdomain(group);
                    if !errs.is_empty() {
                        e.invalid(&api_path, &q(group), &errs.join(","));
                    }
                }
                if version.is_empty() {
                    e.invalid(&api_path, &q(api_version), "version must be specified");
                } else {
                    let errs = is_dns1035_label(version);
                    if !errs.is_empty() {
                        e.invalid(&api_path, &q(version), &errs.join(","));
                    }
                }
            }
        }
    }
    let k = str_of(kind.get("kind"));
    if k.is_empty() {
        e.required(&child(path, "kind"), "");
    } else {
        let errs = is_dns1035_label(&k.to_lowercase());
        if !errs.is_empty() {
            e.invalid(
                &child(path, "kind"),
                &q(k),
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    errs.join(",")
                ),
            );
        }
    }
}

/// `validateMatchResources` (a policy's `matchConstraints`, a binding's `matchResources`).
fn validate_match_resources(e: &mut Errs, mc: &Value, path: &str) {
    match mc.get("matchPolicy").filter(|v| !v.is_null()) {
        None => e.required(&child(path, "matchPolicy"), ""),
        Some(p) if !matches!(str_of(Some(p)), "Equivalent" | "Exact") => e.not_supported(
            &child(path, "matchPolicy"),
            &q(str_of(Some(p))),
            &["Equivalent", "Exact"],
        ),
        Some(_) => {}
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        let p = child(path, selector);
        match mc.get(selector).filter(|v| !v.is_null()) {
            None => e.required(&p, ""),
            Some(sel) => validate_label_selector(e, Some(sel), &p),
        }
    }
    for rules in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in arr(mc.get(rules)).iter().enumerate() {
            validate_named_rule(e, rule, &idx(&child(path, rules), i));
        }
    }
}

fn validate_named_rule(e: &mut Errs, rule: &Value, path: &str) {
    let mut names = BTreeSet::new();
    for (i, n) in arr(rule.get("resourceNames")).iter().enumerate() {
        let n = str_of(Some(n));
        let p = idx(&child(path, "resourceNames"), i);
        for msg in is_path_segment_name(n) {
            e.invalid(&p, &q(n), &msg);
        }
        if !names.insert(n.to_string()) {
            e.duplicate(&p, &q(n));
        }
    }
    let operations = rule.get("operations");
    let ops = arr(operations);
    if ops.is_empty() {
        e.required(&child(path, "operations"), "");
    }
    if ops.len() > 1 && has_wildcard(operations) {
        e.invalid(
            &child(path, "operations"),
            &go_named_slice("admissionregistration.OperationType", operations),
            "if '*' is present, must not specify other operations",
        );
    }
    for (i, op) in ops.iter().enumerate() {
        let op = str_of(Some(op));
        if !OPERATIONS.contains(&op) {
            e.not_supported(&idx(&child(path, "operations"), i), &q(op), OPERATIONS);
        }
    }
    validate_rule(e, rule, path);
}

/// `validateRule` with subresources allowed.
fn validate_rule(e: &mut Errs, rule: &Value, path: &str) {
    let groups = rule.get("apiGroups");
    if arr(groups).is_empty() {
        e.required(&child(path, "apiGroups"), "");
    }
    if arr(groups).len() > 1 && has_wildcard(groups) {
        e.invalid(
            &child(path, "apiGroups"),
            &go_string_slice(groups),
            "if '*' is present, must not specify other API groups",
        );
    }
    let versions = rule.get("apiVersions");
    if arr(versions).is_empty() {
        e.required(&child(path, "apiVersions"), "");
    }
    if arr(versions).len() > 1 && has_wildcard(versions) {
        e.invalid(
            &child(path, "apiVersions"),
            &go_string_slice(versions),
            "if '*' is present, must not specify other API versions",
        );
    }
    for (i, v) in arr(versions).iter().enumerate() {
        if str_of(Some(v)).is_empty() {
            e.required(&idx(&child(path, "apiVersions"), i), "");
        }
    }
    validate_resources(e, rule.get("resources"), &child(path, "resources"));
    if let Some(scope) = rule.get("scope").filter(|v| !v.is_null()) {
        let scope = str_of(Some(scope));
        if !SCOPES.contains(&scope) {
            e.not_supported(&child(path, "scope"), &q(scope), SCOPES);
        }
    }
}

/// `validateResources`: `resource` or `resource/subresource`, with upstream's wildcard
/// rules.
fn validate_resources(e: &mut Errs, resources: Option<&Value>, path: &str) {
    let list = arr(resources);
    if list.is_empty() {
        e.required(path, "");
    }
    let mut wildcard_sub_of = BTreeSet::new();
    let mut wildcard_res_for = BTreeSet::new();
    let (mut double_wildcard, mut single_wildcard, mut without_sub) = (false, false, false);
    for (i, entry) in list.iter().enumerate() {
        let entry = str_of(Some(entry));
        if entry.is_empty() {
            e.required(&idx(path, i), "");
            continue;
        }
        double_wildcard |= entry == "*/*";
        single_wildcard |= entry == "*";
        let Some((res, sub)) = entry.split_once('/') else {
            // Upstream assigns (not accumulates): the last plain entry decides.
            without_sub = entry != "*";
            continue;
        };
        if wildcard_sub_of.contains(res) {
            e.invalid(
                &idx(path, i),
                &q(entry),
                &format!("if '{res}/*' is present, must not specify {entry}"),
            );
        }
        if wildcard_res_for.contains(sub) {
            e.invalid(
                &idx(path, i),
                &q(entry),
                &format!("if '*/{sub}' is present, must not specify {entry}"),
            );
        }
        if sub == "*" {
            wildcard_sub_of.insert(res.to_string());
        }
        if res == "*" {
            wildcard_res_for.insert(sub.to_string());
        }
    }
    if list.len() > 1 && double_wildcard {
        e.invalid(
            path,
            &go_string_slice(resources),
            "if '*/*' is present, must not specify other resources",
        );
    }
    if single_wildcard && without_sub {
        e.invalid(
            path,
            &go_string_slice(resources),
            "if '*' is present, must not specify other resources without subresources",
        );
    }
}

fn validate_match_conditions(e: &mut Errs, list: Option<&Value>, opts: &Options, path: &str) {
    let list = arr(list);
    if list.len() > MAX_MATCH_CONDITIONS {
        e.too_many(path, list.len(), MAX_MATCH_CONDITIONS);
    }
    let mut names = BTreeSet::new();
    for (i, mc) in list.iter().enumerate() {
        let p = idx(path, i);
        let expression = str_of(mc.get("expression")).trim();
        if expression.is_empty() {
            e.required(&child(&p, "expression"), "");
        } else {
            let params = opts.allow_params_in_match_conditions;
            let stateless = Compiler::new(false);
            if let Err(detail) = stateless.compile(expression, params, true, Returns::Bool) {
                e.invalid(&child(&p, "expression"), &q(expression), &detail);
            }
        }
        let name = str_of(mc.get("name"));
        if name.is_empty() {
            e.required(&child(&p, "name"), "");
        } else {
            e.invalid_msgs(&child(&p, "name"), name, is_qualified_name(name));
        }
        if !name.is_empty() && !names.insert(name.to_string()) {
            e.duplicate(&child(&p, "name"), &q(name));
        }
    }
}

fn validate_variable(
    e: &mut Errs,
    compiler: &mut Compiler,
    v: &Value,
    has_params: bool,
    path: &str,
) {
    let name = str_of(v.get("name"));
    if name.trim().is_empty() {
        e.required(&child(path, "name"), "name is not specified");
    } else if !rkcm_cel::is_identifier(name) {
        e.invalid(
            &child(path, "name"),
            &q(name),
            "name is not a valid CEL identifier",
        );
    }
    let expression = str_of(v.get("expression"));
    if expression.trim().is_empty() {
        e.required(&child(path, "expression"), "expression is not specified");
    } else if let Err(detail) = compiler.compile_and_store_variable(name, expression, has_params) {
        e.invalid(&child(path, "expression"), &q(expression), &detail);
    }
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

fn validate_validation(
    e: &mut Errs,
    compiler: &Compiler,
    v: &Value,
    has_params: bool,
    opts: &Options,
    path: &str,
) {
    let expression = str_of(v.get("expression"));
    if expression.trim().is_empty() {
        e.required(&child(path, "expression"), "expression is not specified");
    } else if let Err(detail) = compiler.compile(expression, has_params, true, Returns::Bool) {
        e.invalid(&child(path, "expression"), &q(expression), &detail);
    }
    let message_expression = str_of(v.get("messageExpression"));
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        e.invalid(
            &child(path, "messageExpression"),
            &q(message_expression),
            "must be non-empty if specified",
        );
    } else if !message_expression.trim().is_empty() {
        let params = opts.allow_params_in_match_conditions;
        if let Err(detail) = compiler.compile(message_expression, params, false, Returns::String) {
            e.invalid(
                &child(path, "messageExpression"),
                &q(message_expression),
                &detail,
            );
        }
    }
    let message = str_of(v.get("message"));
    if !message.is_empty() && message.trim().is_empty() {
        e.invalid(
            &child(path, "message"),
            &q(message),
            "message must be non-empty if specified",
        );
    } else if has_newlines(message.trim()) {
        e.invalid(
            &child(path, "message"),
            &q(message),
            "message must not contain line breaks",
        );
    }
    if let Some(reason) = v.get("reason").filter(|r| !r.is_null()) {
        let reason = str_of(Some(reason));
        if !REASONS.contains(&reason) {
            e.not_supported(&child(path, "reason"), &q(reason), REASONS);
        }
    }
}

fn validate_audit_annotation(
    e: &mut Errs,
    compiler: &Compiler,
    policy_name: &str,
    a: &Value,
    has_params: bool,
    path: &str,
) {
    let key = str_of(a.get("key"));
    if policy_name.is_empty() {
        e.invalid(
            &child(path, "key"),
            &q(key),
            "requires metadata.name be non-empty",
        );
    } else {
        let qualified = format!("{policy_name}/{key}");
        e.invalid_msgs(
            &child(path, "key"),
            &qualified,
            is_qualified_name(&qualified),
        );
    }
    let value_expression = str_of(a.get("valueExpression"));
    let trimmed = value_expression.trim();
    let p = child(path, "valueExpression");
    if trimmed.is_empty() {
        e.required(&p, "valueExpression is not specified");
    } else if trimmed.len() > MAX_AUDIT_VALUE_EXPRESSION_LEN {
        e.required(
            &p,
            &format!("must not exceed {MAX_AUDIT_VALUE_EXPRESSION_LEN} bytes in length"),
        );
    } else if let Err(detail) = compiler.compile(trimmed, has_params, true, Returns::StringOrNull) {
        e.invalid(&p, &q(value_expression), &detail);
    }
}

/// `validateValidatingAdmissionPolicyStatus`.
fn validate_status(e: &mut Errs, status: Option<&Value>) {
    let Some(status) = status.filter(|s| s.is_object()) else {
        return;
    };
    let warnings = status
        .get("typeChecking")
        .and_then(|t| t.get("expressionWarnings"));
    for (i, w) in arr(warnings).iter().enumerate() {
        let p = idx("status.typeChecking.expressionWarnings", i);
        if str_of(w.get("warning")).is_empty() {
            e.required(&child(&p, "warning"), "");
        }
        let field_ref = str_of(w.get("fieldRef")).trim();
        if field_ref.is_empty() {
            e.required(&child(&p, "fieldRef"), "");
        } else if let Err(why) = super::jsonpath_syntax::parse(&format!("{{{field_ref}}}")) {
            e.invalid(
                &child(&p, "fieldRef"),
                &q(field_ref),
                &format!("invalid JSONPath: {why}"),
            );
        }
    }
    validate_conditions(e, status.get("conditions"), "status.conditions");
}

const REASON_FMT: &str = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?";
const REASON_MSG: &str = "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'";

fn is_condition_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let Some((first, rest)) = bytes.split_first() else {
        return false;
    };
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':');
    first.is_ascii_alphabetic()
        && rest.iter().all(inner)
        && rest
            .last()
            .is_none_or(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// apimachinery's `ValidateConditions` (metav1.Condition lists).
pub(super) fn validate_conditions(e: &mut Errs, list: Option<&Value>, path: &str) {
    let mut seen = BTreeSet::new();
    for (i, c) in arr(list).iter().enumerate() {
        let p = idx(path, i);
        let ty = str_of(c.get("type"));
        if !seen.insert(ty.to_string()) {
            e.duplicate(&child(&p, "type"), &q(ty));
        }
        e.invalid_msgs(&child(&p, "type"), ty, is_qualified_name(ty));
        let status = str_of(c.get("status"));
        if !matches!(status, "True" | "False" | "Unknown") {
            e.not_supported(
                &child(&p, "status"),
                &q(status),
                &["False", "True", "Unknown"],
            );
        }
        if let Some(g) = super::int_of(c.get("observedGeneration")).filter(|g| *g < 0) {
            e.invalid(
                &child(&p, "observedGeneration"),
                &g.to_string(),
                "must be greater than or equal to zero",
            );
        }
        if str_of(c.get("lastTransitionTime")).is_empty() {
            e.required(&child(&p, "lastTransitionTime"), "must be set");
        }
        let reason = str_of(c.get("reason"));
        if reason.is_empty() {
            e.required(&child(&p, "reason"), "must be set");
        } else {
            if !is_condition_reason(reason) {
                let msg = rkcm_gocompat::validation::regex_error(
                    REASON_MSG,
                    REASON_FMT,
                    &[
                        "my_name",
                        "MY_NAME",
                        "MyName",
                        "ReasonA,ReasonB",
                        "ReasonA:ReasonB",
                    ],
                );
                e.invalid(&child(&p, "reason"), &q(reason), &msg);
            }
            if reason.len() > 1024 {
                e.too_long(&child(&p, "reason"), 1024);
            }
        }
        if str_of(c.get("message")).len() > 32 * 1024 {
            e.too_long(&child(&p, "message"), 32 * 1024);
        }
    }
}

/// `ValidateValidatingAdmissionPolicyBinding` (create and update alike).
pub(super) fn validate_binding(e: &mut Errs, o: &Value) {
    let spec = o.get("spec");
    let field = |f: &str| spec.and_then(|s| s.get(f)).filter(|v| !v.is_null());
    let policy = str_of(field("policyName"));
    if policy.is_empty() {
        e.required("spec.policyName", "");
    } else {
        e.invalid_msgs("spec.policyName", policy, is_dns1123_subdomain(policy));
    }
    if let Some(pr) = field("paramRef") {
        validate_param_ref(e, pr, "spec.paramRef");
    }
    if let Some(mr) = field("matchResources") {
        validate_match_resources(e, mr, "spec.matchResouces");
    }
    validate_actions(e, field("validationActions"), "spec.validationActions");
}

fn validate_param_ref(e: &mut Errs, pr: &Value, path: &str) {
    let name = str_of(pr.get("name"));
    let selector = pr.get("selector").filter(|s| !s.is_null());
    let exclusive = "name and selector are mutually exclusive";
    if !name.is_empty() {
        e.invalid_msgs(&child(path, "name"), name, is_path_segment_name(name));
        if selector.is_some() {
            e.forbidden(&child(path, "name"), exclusive);
        }
    }
    if let Some(sel) = selector {
        validate_label_selector(e, Some(sel), &child(path, "selector"));
        if !name.is_empty() {
            e.forbidden(&child(path, "selector"), exclusive);
        }
    }
    if name.is_empty() && selector.is_none() {
        e.required(path, "one of name or selector must be specified");
    }
    let action = str_of(pr.get("parameterNotFoundAction"));
    let p = child(path, "parameterNotFoundAction");
    if action.is_empty() {
        e.required(&p, "");
    } else if !matches!(action, "Deny" | "Allow") {
        e.not_supported(&p, &q(action), &["Deny", "Allow"]);
    }
}

fn validate_actions(e: &mut Errs, actions: Option<&Value>, path: &str) {
    let mut seen = BTreeSet::new();
    for (i, a) in arr(actions).iter().enumerate() {
        let a = str_of(Some(a));
        if !ACTIONS.contains(&a) {
            e.not_supported(&idx(path, i), &q(a), ACTIONS);
        }
        if !seen.insert(a.to_string()) {
            e.duplicate(&idx(path, i), &q(a));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        e.invalid(
            path,
            &go_named_slice("admissionregistration.ValidationAction", actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        );
    }
    if seen.is_empty() {
        e.required(path, "at least one validation action is required");
    }
}

/// Whether the object is one of the kinds this module validates.
pub(super) fn validate(e: &mut Errs, kind: &str, o: &Value, old: Option<&Value>) {
    match kind {
        crate::admission_policies::POLICY_KIND => validate_policy(e, o, old),
        crate::admission_policies::BINDING_KIND => validate_binding(e, o),
        _ => {}
    }
}

#[cfg(test)]
#[path = "admission_policy_tests.rs"]
mod tests;

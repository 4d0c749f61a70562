//! Evaluating a compiled policy for one binding and one parameter (`validator.go`'s
//! `Validate`, the match conditions matcher and `plugin/cel/filter.go`'s activation).
//!
//! `variables` are evaluated in order before the expressions that use them (upstream
//! evaluates them lazily, on first use): a variable that fails is left out of `variables`
//! and an expression reading it reports the variable's error, as upstream's lazy map does.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use rkcm_cel::{compile, Activation, Checked, Env, EvalError, MapKey, Type, Value as Cel};
use serde_json::{json, Value};

use super::compiled::{CompiledPolicy, Expr};
use super::Attrs;

/// `celconfig.MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// What one validation decided.
#[derive(Debug, PartialEq)]
pub(super) enum Decision {
    Admit,
    /// A denial: its message and, for failed validations, the reason asked for.
    Deny {
        message: String,
        reason: Option<String>,
    },
}

/// The request as `request` shows it (`CreateAdmissionRequest`, then converted to JSON).
pub(super) fn request_json(a: &Attrs) -> Value {
    let mut r = json!({
        "uid": "",
        "kind": {"group": a.group, "version": a.version, "kind": a.kind},
        "resource": {"group": a.group, "version": a.version, "resource": a.resource},
        "requestKind": {"group": a.group, "version": a.version, "kind": a.kind},
        "requestResource": {"group": a.group, "version": a.version, "resource": a.resource},
        "operation": a.operation,
        "userInfo": {},
        "dryRun": a.dry_run,
    });
    let set = |r: &mut Value, k: &str, v: &str| {
        if !v.is_empty() {
            r[k] = json!(v);
        }
    };
    set(&mut r, "subResource", a.subresource);
    set(&mut r, "requestSubResource", a.subresource);
    set(&mut r, "name", a.name);
    set(&mut r, "namespace", a.namespace);
    let u = a.user;
    let mut user = serde_json::Map::new();
    if !u.name.is_empty() {
        user.insert("username".into(), json!(u.name));
    }
    if !u.uid.is_empty() {
        user.insert("uid".into(), json!(u.uid));
    }
    if !u.groups.is_empty() {
        user.insert("groups".into(), json!(u.groups));
    }
    if !u.extra.is_empty() {
        user.insert("extra".into(), json!(u.extra));
    }
    r["userInfo"] = Value::Object(user);
    if !a.options.is_null() {
        r["options"] = a.options.clone();
    }
    r
}

/// `CreateNamespaceObject`: the namespace's metadata (without managed fields and owners),
/// spec and status.
pub(super) fn namespace_json(ns: &Value) -> Value {
    let mut meta = serde_json::Map::new();
    for k in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ] {
        if let Some(v) = ns["metadata"].get(k).filter(|v| !v.is_null()) {
            meta.insert(k.into(), v.clone());
        }
    }
    let mut out = json!({"metadata": meta});
    for k in ["spec", "status"] {
        out[k] = ns.get(k).cloned().unwrap_or_else(|| json!({}));
    }
    out
}

/// `authorizer.requestResource`: a resource check of the request's resource, built by the
/// authorizer library itself.
fn request_resource(authorizer: Arc<dyn rkcm_cel::Authorizer>, a: &Attrs) -> Option<Cel> {
    static BUILD: OnceLock<Option<Checked>> = OnceLock::new();
    let build = BUILD.get_or_init(|| {
        let env = Env::admission(None, None, false, true)
            .with_variable("g", Type::String)
            .with_variable("r", Type::String)
            .with_variable("s", Type::String)
            .with_variable("ns", Type::String)
            .with_variable("n", Type::String);
        compile(
            &env,
            "authorizer.group(g).resource(r).subresource(s).namespace(ns).name(n)",
        )
        .ok()
    });
    let act = Activation::new()
        .with_authorizer(authorizer)
        .with_json("g", &json!(a.group))
        .with_json("r", &json!(a.resource))
        .with_json("s", &json!(a.subresource))
        .with_json("ns", &json!(a.namespace))
        .with_json("n", &json!(a.name));
    build.as_ref()?.evaluate(&act).ok()
}

/// The inputs of one evaluation.
pub(super) struct Inputs<'a> {
    pub(super) attrs: &'a Attrs<'a>,
    pub(super) request: &'a Value,
    pub(super) params: Option<&'a Value>,
    pub(super) namespace: Option<&'a Value>,
    pub(super) authorizer: Arc<dyn rkcm_cel::Authorizer>,
}

/// The activation: `with_namespace` is false for match conditions (upstream passes no
/// namespace to them); `with_authorizer` false for message expressions.
fn activation(
    i: &Inputs,
    policy: &CompiledPolicy,
    with_namespace: bool,
    with_authorizer: bool,
) -> Activation {
    let json_or_null = |v: Option<&Value>| v.map_or(Cel::Null, Cel::from_json);
    let mut act = Activation::new()
        .with("object", json_or_null(i.attrs.object))
        .with("oldObject", json_or_null(i.attrs.old_object))
        .with_json("request", i.request)
        .with(
            "namespaceObject",
            if with_namespace {
                json_or_null(i.namespace.map(namespace_json).as_ref())
            } else {
                Cel::Null
            },
        );
    if policy.has_params {
        act = act.with("params", json_or_null(i.params));
    }
    if with_authorizer {
        act = act.with_authorizer(i.authorizer.clone());
        if let Some(rr) = request_resource(i.authorizer.clone(), i.attrs) {
            act = act.with("authorizer.requestResource", rr);
        }
    }
    act
}

/// The variables' values, and the errors of those that failed.
struct Variables {
    values: BTreeMap<MapKey, Cel>,
    errors: Vec<(String, String)>,
}

impl Variables {
    fn value(&self) -> Cel {
        Cel::Map(Arc::new(self.values.clone()))
    }

    /// An expression's error, with a failed variable's own error in place of the missing key.
    fn explain(&self, e: &EvalError) -> String {
        for (name, err) in &self.errors {
            if e.message() == format!("no such key: {name}") {
                return err.clone();
            }
        }
        e.to_string()
    }
}

fn evaluate_variables(policy: &CompiledPolicy, base: &Activation) -> Variables {
    let mut vars = Variables {
        values: BTreeMap::new(),
        errors: Vec::new(),
    };
    for v in &policy.variables {
        let key = MapKey::String(v.name.as_str().into());
        vars.values.remove(&key);
        vars.errors.retain(|(n, _)| *n != v.name);
        let outcome = match &v.expr.program {
            Err(e) => Err(format!(
                "composited variable {:?} fails to compile: {e}",
                v.name
            )),
            Ok(p) => p
                .evaluate(&base.clone().with("variables", vars.value()))
                .map_err(|e| {
                    format!(
                        "composited variable {:?} fails to evaluate: {}",
                        v.name,
                        vars.explain(&e)
                    )
                }),
        };
        match outcome {
            Ok(value) => {
                vars.values.insert(key, value);
            }
            Err(e) => vars.errors.push((v.name.clone(), e)),
        }
    }
    vars
}

/// An expression's value or its error as the filter reports it.
fn run(expr: &Expr, act: &Activation, vars: &Variables) -> Result<Cel, String> {
    match &expr.program {
        Err(e) => Err(format!("compilation error: {e}")),
        Ok(p) => p.evaluate(act).map_err(|e| {
            format!(
                "expression '{}' resulted in error: {}",
                expr.source,
                vars.explain(&e)
            )
        }),
    }
}

/// The match conditions' verdict: `Ok(false)` skips the binding, `Err` is their errors
/// (aggregated) when none is false.
fn match_conditions(policy: &CompiledPolicy, i: &Inputs, vars: &Variables) -> Result<bool, String> {
    if policy.match_conditions.is_empty() {
        return Ok(true);
    }
    let act = activation(i, policy, false, true).with("variables", vars.value());
    let mut errors = Vec::new();
    for m in &policy.match_conditions {
        match run(&m.expr, &act, vars) {
            Ok(Cel::Bool(false)) => return Ok(false),
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(true)
    } else {
        Err(crate::rbac::aggregate(&errors))
    }
}

/// The message of a failed validation: the message expression's string (trimmed, if short
/// and on one line), else the message, else `failed expression: ...`.
fn failure_message(v: &super::compiled::Validation, act: &Activation, vars: &Variables) -> String {
    let from_expr = v
        .message_expr
        .as_ref()
        .and_then(|m| run(m, act, vars).ok())
        .and_then(|r| match r {
            Cel::String(s) => Some(s.trim().to_string()),
            _ => None,
        })
        .filter(|m| m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'))
        .unwrap_or_default();
    if !from_expr.is_empty() {
        return from_expr;
    }
    let message = v.message.trim();
    if !message.is_empty() {
        return message.to_string();
    }
    format!("failed expression: {}", v.expr.source.trim())
}

/// `Validate`: the decisions of every validation (none when a match condition is false).
/// `fail` is whether the failure policy is `Fail`.
pub(super) fn validate(policy: &CompiledPolicy, i: &Inputs, fail: bool) -> Vec<Decision> {
    let on_error = |message: String| {
        if fail {
            Decision::Deny {
                message,
                reason: None,
            }
        } else {
            Decision::Admit
        }
    };
    let base = activation(i, policy, true, true);
    let vars = evaluate_variables(policy, &base);
    match match_conditions(policy, i, &vars) {
        Ok(true) => {}
        Ok(false) => return Vec::new(),
        Err(e) => return vec![on_error(e)],
    }
    let act = base.with("variables", vars.value());
    let message_act = activation(i, policy, true, false).with("variables", vars.value());
    policy
        .validations
        .iter()
        .map(|v| match run(&v.expr, &act, &vars) {
            Err(e) => on_error(e),
            Ok(Cel::Bool(true)) => Decision::Admit,
            Ok(_) => Decision::Deny {
                message: failure_message(v, &message_act, &vars),
                reason: Some(v.reason.clone().unwrap_or_else(|| "Invalid".into())),
            },
        })
        .collect()
}

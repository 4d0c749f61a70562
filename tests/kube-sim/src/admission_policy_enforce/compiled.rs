//! A policy's expressions compiled as the admission plugin compiles them
//! (`plugin/cel/compile.go` and `composition.go`), cached by the policy's uid and
//! resourceVersion so a changed policy is compiled again.
//!
//! Environments: `object` and `oldObject` are `dyn`, `request` and `namespaceObject` have
//! their Kubernetes types, `params` (`dyn`) is declared when the policy has a `paramKind`,
//! `authorizer` and `authorizer.requestResource` for validations, match conditions and
//! variables (not for message expressions), and `variables` is an object type whose fields
//! are the variables compiled before (each variable sees the ones above it; validations see
//! them all).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rkcm_cel::{compile, Checked, Env, ObjectType, Type};
use serde_json::Value;

/// The type name upstream gives the `variables` object.
const VARIABLES_TYPE: &str = "kubernetes.variables";
const RESOURCE_CHECK_TYPE: &str = "kubernetes.authorization.ResourceCheck";

/// One expression: its source and its program, or the compilation error's text
/// (`compilation failed: ...`, `must evaluate to bool`).
#[derive(Debug)]
pub(super) struct Expr {
    pub(super) source: String,
    pub(super) program: Result<Checked, String>,
}

#[derive(Debug)]
pub(super) struct Validation {
    pub(super) expr: Expr,
    pub(super) message: String,
    pub(super) reason: Option<String>,
    pub(super) message_expr: Option<Expr>,
}

#[derive(Debug)]
pub(super) struct MatchCondition {
    pub(super) expr: Expr,
}

#[derive(Debug)]
pub(super) struct Variable {
    pub(super) name: String,
    pub(super) expr: Expr,
}

/// Everything evaluation needs from a policy.
#[derive(Debug)]
pub(super) struct CompiledPolicy {
    pub(super) has_params: bool,
    pub(super) variables: Vec<Variable>,
    pub(super) match_conditions: Vec<MatchCondition>,
    pub(super) validations: Vec<Validation>,
}

/// What an expression must evaluate to.
#[derive(Clone, Copy)]
enum Want {
    Bool,
    String,
    Any,
}

fn env(has_params: bool, has_authorizer: bool, variables: &[(String, Type)]) -> Env {
    let mut env = Env::admission(None, None, has_params, has_authorizer);
    if has_authorizer {
        env = env.with_variable(
            "authorizer.requestResource",
            Type::object(ObjectType::opaque(RESOURCE_CHECK_TYPE)),
        );
    }
    env.with_variable(
        "variables",
        Type::object(ObjectType::new(VARIABLES_TYPE, variables.iter().cloned())),
    )
}

fn compile_expr(env: &Env, source: &str, want: Want) -> Expr {
    let program = match compile(env, source) {
        Err(issues) => Err(format!("compilation failed: {issues}")),
        Ok(checked) => {
            let expected = match want {
                Want::Bool => Some(Type::Bool),
                Want::String => Some(Type::String),
                Want::Any => None,
            };
            match expected {
                Some(t) if *checked.output_type() != t => Err(format!("must evaluate to {t}")),
                _ => Ok(checked),
            }
        }
    };
    Expr {
        source: source.to_string(),
        program,
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn items(v: &Value, key: &str) -> Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Compiles a policy's spec.
pub(super) fn compile_policy(spec: &Value) -> CompiledPolicy {
    let has_params = spec.get("paramKind").is_some_and(Value::is_object);
    let mut declared: Vec<(String, Type)> = Vec::new();
    let mut variables = Vec::new();
    for v in items(spec, "variables") {
        let name = str_of(&v, "name").to_string();
        let expr = compile_expr(
            &env(has_params, true, &declared),
            str_of(&v, "expression"),
            Want::Any,
        );
        let ty = expr
            .program
            .as_ref()
            .map_or(Type::Dyn, |c| c.output_type().clone());
        declared.retain(|(n, _)| *n != name);
        declared.push((name.clone(), ty));
        variables.push(Variable { name, expr });
    }
    let full = env(has_params, true, &declared);
    let messages = env(has_params, false, &declared);
    let match_conditions = items(spec, "matchConditions")
        .iter()
        .map(|m| MatchCondition {
            expr: compile_expr(&full, str_of(m, "expression"), Want::Bool),
        })
        .collect();
    let validations = items(spec, "validations")
        .iter()
        .map(|v| Validation {
            expr: compile_expr(&full, str_of(v, "expression"), Want::Bool),
            message: str_of(v, "message").to_string(),
            reason: v.get("reason").and_then(Value::as_str).map(str::to_string),
            message_expr: Some(str_of(v, "messageExpression"))
                .filter(|m| !m.is_empty())
                .map(|m| compile_expr(&messages, m, Want::String)),
        })
        .collect();
    CompiledPolicy {
        has_params,
        variables,
        match_conditions,
        validations,
    }
}

type Cache = Mutex<HashMap<(String, String), Arc<CompiledPolicy>>>;

/// Compiled policies kept across requests; more than this many and the cache starts over.
const CACHE_LIMIT: usize = 256;

/// The compiled form of a stored policy (compiled once per uid and resourceVersion).
pub(super) fn compiled(policy: &Value) -> Arc<CompiledPolicy> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let meta = &policy["metadata"];
    let key = (
        str_of(meta, "uid").to_string(),
        str_of(meta, "resourceVersion").to_string(),
    );
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return hit.clone();
    }
    let compiled = Arc::new(compile_policy(&policy["spec"]));
    let mut guard = cache.lock().unwrap_or_else(|p| p.into_inner());
    if guard.len() >= CACHE_LIMIT {
        guard.clear();
    }
    guard.insert(key, compiled.clone());
    compiled
}

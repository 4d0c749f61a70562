//! CEL as Kubernetes 1.29 compiles it: cel-go v0.17.7's parser and type checker, with its
//! error messages, plus Kubernetes' CEL environment and OpenAPI-schema types.
//!
//! The entry point is [`compile`] (cel-go's `env.Compile`): parse (with the macros), type
//! check, then run the AST validators Kubernetes 1.29 enables; on failure every issue is
//! returned, and [`Issues`]' `Display` is exactly cel-go's `Issues.String()`.
//!
//! [`Env::admission`] is the environment the ValidatingAdmissionPolicy status controller
//! checks against (`typechecking.go`'s `buildEnv`), and [`schema_decl_type`] turns an OpenAPI
//! schema into the object type of `object`/`params` (`SchemaDeclType` with
//! `MaybeAssignTypeName`).
//!
//! ```
//! use rkcm_cel::{compile, schema_decl_type, Env};
//!
//! let schema = serde_json::json!({"type": "object", "properties": {
//!     "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}});
//! let object = schema_decl_type(&schema, true, "Deployment1").expect("a CEL type");
//! let env = Env::admission(Some(object), None, false, true);
//! assert_eq!(compile(&env, "object.spec.replicas > 1").map(|c| c.output_type().to_string()).ok(),
//!            Some("bool".to_string()));
//! let issues = compile(&env, "object.spec.replicass > 1").err().expect("an undefined field");
//! assert_eq!(issues.to_string(), "ERROR: <input>:1:12: undefined field 'replicass'\n\
//!                                 \x20| object.spec.replicass > 1\n\
//!                                 \x20| ...........^");
//! ```
//!
//! [`Checked::evaluate`] runs a compiled expression against an [`Activation`] (variables as
//! [`Value`]s, usually from JSON, and an optional [`Authorizer`]):
//!
//! ```
//! use rkcm_cel::{compile, Activation, Env, Type, Value};
//!
//! let env = Env::kubernetes_base().with_variable("object", Type::Dyn);
//! let checked = compile(&env, "object.spec.replicas <= 5 && object.metadata.name.startsWith('web')")
//!     .expect("compiles");
//! let object = serde_json::json!({"metadata": {"name": "web-1"}, "spec": {"replicas": 3}});
//! let result = checked.evaluate(&Activation::new().with_json("object", &object));
//! assert!(matches!(result, Ok(Value::Bool(true))));
//! let missing = checked.evaluate(&Activation::new().with_json("object", &serde_json::json!({"spec": {}})));
//! assert_eq!(missing.err().map(|e| e.to_string()).as_deref(), Some("no such key: replicas"));
//! ```
//!
//! # Evaluation
//!
//! cel-go v0.17.7's interpreter semantics: errors are values absorbed by `&&`/`||` when the
//! other side decides, the leftmost error otherwise; heterogeneous numeric equality and
//! ordering (`1 == 1.0`, `1 < 1.5u`); checked int/uint/duration/timestamp arithmetic with
//! cel-go's messages (`integer overflow`, `unsigned integer overflow`, `division by zero`,
//! `modulus by zero`, `timestamp overflow`); `no such key: f` for a missing field, `index out
//! of bounds: i`, `no such overload` (or `no such overload: _+_` when the left operand's type
//! lacks the operator); comprehension macros with `@not_strictly_false` loop conditions;
//! optional values (`.?f`, `[?i]`, `optional.of/none/ofNonZeroValue`, `or`, `orValue`,
//! `hasValue`, `value`, `optMap`, `optFlatMap`). Libraries: the standard functions and
//! conversions, timestamp and duration accessors, `strings` (version 2, with
//! `format`), `sets`, and Kubernetes' lists, regex, URL, quantity and authorizer libraries. Variables
//! whose checked type comes from a schema are converted as Kubernetes does (integral numbers
//! of `number` fields are doubles; `date-time`, `duration` and `byte` strings become
//! timestamps, durations and bytes), and escaped property names (`__namespace__`,
//! `x__dash__y`) select their JSON keys.
//!
//! Regular expressions follow Go's RE2 dialect on the `regex` crate (`\d`, `\w`, `\s` and
//! `\b` are ASCII-only as in Go; `\Q...\E` quotes).
//!
//! Left out (an [`EvalError`], never a wrong value): the locale-aware `%f` and `%e` clauses
//! of `string.format`; time zones other than `UTC` and fixed offsets (`+02:00`) in timestamp
//! accessors (IANA names such as `Europe/Paris`). Not
//! reproduced: Go's exact text for invalid `matches` patterns (the `regex` crate's reason
//! follows cel-go's `error parsing regexp: ` prefix) and Go's URL parser in full (URLs are
//! split into scheme, authority, path and query as `url.Parse` does for common inputs).
//! Kubernetes' runtime cost limit (the per-expression budget) is not enforced.
//!
//! # Fidelity
//!
//! - Type-checking messages, their locations (including cel-go's quirk of placing a node that
//!   starts a line at the end of the previous one), type formatting, and the ordering and
//!   truncation of issues follow cel-go v0.17.7.
//! - Visitor errors of the parser (invalid literals, reserved identifiers, macro argument
//!   errors, unsupported syntax) and the recursion/size limits use cel-go's wording.
//! - Syntax errors: cel-go reports ANTLR's messages. Lexer errors (`token recognition error at:
//!   '...'`) follow ANTLR's rules exactly. Parser errors emulate ANTLR's default error strategy:
//!   `mismatched input 'X' expecting {...}` / `extraneous input 'X' ...` (single-token deletion)
//!   at the start of an operand, a list, a map, a message or call arguments; `missing ':' at
//!   'X'` (single-token insertion); `mismatched input 'X' expecting ')'` and the like;
//!   trailing input `expecting <EOF>`; `no viable alternative at input '...'` (with cel-go's
//!   rewrite for keywords after a dot); error recovery mode (nothing reported until a token
//!   matches) and resynchronisation on a token an enclosing construct waits for. Of the 54
//!   error cases of cel-go v0.17.7's parser tests, 47 give the same text; of the other 7, six
//!   set non-default limits (recursion, recovery attempts, reported errors) and `--` misses its
//!   second error. ANTLR's adaptive prediction is not reproduced, so unusual inputs may get a
//!   different expected-token set or follow-on error.
//! - Parser and checker errors are never both reported: a syntax error stops compilation (as in
//!   cel-go).
//! - Literal `matches()` patterns are checked against Go's RE2 syntax rules; Unicode class names
//!   (`\p{...}`) and Go's program-size limits are not checked (such patterns are accepted).

mod ast;
mod checker;
mod decls;
mod env;
mod eval;
mod goregex;
mod gotime;
mod issues;
mod k8s;
mod lexer;
mod literals;
mod macros;
mod parser;
mod schema;
mod source;
mod types;
mod validators;

use std::sync::Arc;

pub use env::Env;
pub use eval::{
    Activation, Authorizer, AuthzCheck, AuthzDecision, EvalError, MapKey, Object, QuantityValue,
    Timestamp, UrlValue, Value,
};
pub use issues::Issues;
pub use schema::{is_identifier, schema_decl_type};
pub use types::{ObjectType, Type};

/// A successfully compiled expression.
#[derive(Clone, Debug)]
pub struct Checked {
    output_type: Type,
    /// The checked tree (names resolved), which [`Checked::evaluate`] walks.
    expr: ast::Expr,
    /// Each node's checked type.
    types: std::collections::HashMap<i64, Type>,
    /// Whether evaluation needs a large stack (as compilation did).
    deep: bool,
}

impl Checked {
    /// The type of the whole expression (type parameters left unbound become `dyn`).
    pub fn output_type(&self) -> &Type {
        &self.output_type
    }
}

/// Parses and checks `source` in `env` (cel-go's `env.Compile`).
pub fn compile(env: &Env, source: &str) -> Result<Checked, Issues> {
    if nesting_estimate(source) <= SHALLOW_NESTING {
        return compile_here(env, source);
    }
    // Deeply nested expressions (up to cel-go's limit of 250 levels) recurse deeper than a
    // default thread stack allows: compile them on a thread with a large stack.
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(s, || compile_here(env, source))
            .ok()
            .and_then(|h| h.join().ok())
    })
    .unwrap_or_else(|| compile_here(env, source))
}

/// Nesting up to which the calling thread's stack is enough.
const SHALLOW_NESTING: usize = 24;
pub(crate) const DEEP_STACK_BYTES: usize = 512 << 20;

/// An upper bound of the parser's nesting: bracket depth plus conditionals.
fn nesting_estimate(source: &str) -> usize {
    let (mut depth, mut max, mut conditionals) = (0usize, 0usize, 0usize);
    for c in source.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '?' => conditionals += 1,
            _ => {}
        }
    }
    max + conditionals
}

fn compile_here(env: &Env, source: &str) -> Result<Checked, Issues> {
    let src = Arc::new(source::Source::new(source));
    let opts = parser::ParserOptions {
        optional_syntax: env.optional_syntax,
    };
    let mut parsed = parser::parse(src.clone(), opts)?;
    let mut issues = Issues::new(src);
    let types = checker::check(env, &mut parsed, &mut issues);
    if !issues.is_empty() {
        return Err(issues);
    }
    validators::validate(env, &parsed, &types, &mut issues);
    if !issues.is_empty() {
        return Err(issues);
    }
    let output_type = types.get(&parsed.expr.id).cloned().unwrap_or(Type::Dyn);
    Ok(Checked {
        output_type,
        deep: nesting_estimate(source) > SHALLOW_NESTING,
        expr: parsed.expr,
        types,
    })
}

#[cfg(test)]
mod checker_tests;
#[cfg(test)]
mod parser_tests;
#[cfg(test)]
mod schema_tests;

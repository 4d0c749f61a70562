//! The AST validators of Kubernetes' base environments (cel-go's
//! `cel/validator.go`): literal arguments of `duration()` and `timestamp()` must convert, and
//! literal `matches()` patterns must compile (Go's RE2 syntax), and list and map literals must
//! be homogeneous (except inside `format()` arguments).

use std::collections::HashMap;

use crate::ast::{Expr, ExprKind, Literal, ParsedExpr};
use crate::env::Env;
use crate::issues::Issues;
use crate::types::Type;
use crate::{goregex, gotime};

/// Functions whose literal list/map arguments may be heterogeneous.
const HOMOGENEOUS_EXEMPT: &[&str] = &["format"];

pub(crate) fn validate(
    env: &Env,
    parsed: &ParsedExpr,
    types: &HashMap<i64, Type>,
    issues: &mut Issues,
) {
    let mut v = Validator {
        parsed,
        types,
        issues,
    };
    // cel-go runs the validators in the order they were added: the homogeneous aggregate
    // literals (Kubernetes 1.0 options), then durations, timestamps and regexes (1.29).
    if env.homogeneous_literals {
        v.aggregates(&parsed.expr, false, Aggregate::List);
        v.aggregates(&parsed.expr, false, Aggregate::Map);
    }
    if env.literal_validators {
        v.literals(&parsed.expr, "duration");
        v.literals(&parsed.expr, "timestamp");
        v.literals(&parsed.expr, "matches");
    }
}

struct Validator<'a> {
    parsed: &'a ParsedExpr,
    types: &'a HashMap<i64, Type>,
    issues: &'a mut Issues,
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    List,
    Map,
}

/// The direct children of a node (comprehension parts in cel-go's navigation order).
fn children(e: &Expr) -> Vec<&Expr> {
    match &e.kind {
        ExprKind::Select { operand, .. } => vec![operand],
        ExprKind::Call { target, args, .. } => {
            target.iter().map(|t| &**t).chain(args.iter()).collect()
        }
        ExprKind::List { elements, .. } => elements.iter().collect(),
        ExprKind::Map { entries } => entries.iter().flat_map(|en| [&en.key, &en.value]).collect(),
        ExprKind::Struct { fields, .. } => fields.iter().map(|f| &f.value).collect(),
        ExprKind::Comprehension(c) => {
            vec![
                &c.iter_range,
                &c.accu_init,
                &c.loop_condition,
                &c.loop_step,
                &c.result,
            ]
        }
        _ => vec![],
    }
}

/// Whether a literal converts as `duration(lit)` / `timestamp(lit)` would at run time.
fn literal_converts(function: &str, lit: &Literal) -> bool {
    match (function, lit) {
        ("duration", Literal::String(s)) => gotime::parse_duration(s).is_some(),
        ("timestamp", Literal::String(s)) => gotime::parse_rfc3339(s)
            .is_some_and(|t| (gotime::MIN_UNIX_TIME..=gotime::MAX_UNIX_TIME).contains(&t)),
        ("timestamp", Literal::Int(i)) => {
            (gotime::MIN_UNIX_TIME..=gotime::MAX_UNIX_TIME).contains(i)
        }
        // cel-go v0.17.7 declares `duration(int)` but its int values do not convert to
        // durations, so evaluating the call fails.
        ("duration", Literal::Int(_)) => false,
        ("matches", Literal::String(s)) => goregex::is_valid(s),
        _ => true,
    }
}

impl Validator<'_> {
    fn report(&mut self, id: i64, msg: String) {
        let off = self.parsed.offset(id);
        self.issues.report_at_offset(off, msg);
    }

    fn type_of(&self, id: i64) -> Type {
        self.types.get(&id).cloned().unwrap_or(Type::Dyn)
    }

    fn literals(&mut self, e: &Expr, function: &str) {
        if let ExprKind::Call {
            function: f, args, ..
        } = &e.kind
        {
            if f == function {
                if let Some(Expr {
                    id,
                    kind: ExprKind::Literal(lit),
                }) = args.first()
                {
                    if !literal_converts(function, lit) {
                        self.report(*id, format!("invalid {function} argument"));
                    }
                }
            }
        }
        for c in children(e) {
            self.literals(c, function);
        }
    }

    /// `exempt`: whether this node sits (through lists and maps only) in an exempt call.
    fn aggregates(&mut self, e: &Expr, exempt: bool, which: Aggregate) {
        match (&e.kind, which) {
            (
                ExprKind::List {
                    elements,
                    optional_indices,
                },
                Aggregate::List,
            ) if !exempt => {
                let mut first: Option<Type> = None;
                for (i, el) in elements.iter().enumerate() {
                    let mut t = self.type_of(el.id);
                    if optional_indices.contains(&i) {
                        t = match t {
                            Type::Optional(inner) => *inner,
                            other => other,
                        };
                    }
                    match &first {
                        None => first = Some(t),
                        Some(f) if !f.is_equivalent(&t) => {
                            self.report(el.id, format!("expected type '{f}' but found '{t}'"));
                            break;
                        }
                        Some(_) => {}
                    }
                }
            }
            (ExprKind::Map { entries }, Aggregate::Map) if !exempt => {
                let mut first: Option<(Type, Type)> = None;
                for en in entries {
                    let kt = self.type_of(en.key.id);
                    let mut vt = self.type_of(en.value.id);
                    if en.optional {
                        vt = match vt {
                            Type::Optional(inner) => *inner,
                            other => other,
                        };
                    }
                    match &first {
                        None => first = Some((kt, vt)),
                        Some((k0, v0)) => {
                            let (k0, v0) = (k0.clone(), v0.clone());
                            if !k0.is_equivalent(&kt) {
                                self.report(
                                    en.key.id,
                                    format!("expected type '{k0}' but found '{kt}'"),
                                );
                            }
                            if !v0.is_equivalent(&vt) {
                                self.report(
                                    en.value.id,
                                    format!("expected type '{v0}' but found '{vt}'"),
                                );
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        let child_exempt = match &e.kind {
            ExprKind::Call { function, .. } => HOMOGENEOUS_EXEMPT.contains(&function.as_str()),
            ExprKind::List { .. } | ExprKind::Map { .. } => exempt,
            _ => false,
        };
        for c in children(e) {
            self.aggregates(c, child_exempt, which);
        }
    }
}

//! The tree-walking interpreter: variables, field selection, indexing, the lazy operators
//! (`&&`, `||`, `?:`, optional `or`/`orValue`) and comprehensions; every other call goes to
//! [`super::stdlib::call`].

use std::collections::HashMap;
use std::sync::Arc;

use super::value::{key_text, map_find, Value};
use super::{Activation, EvalError};
use crate::ast::{Comprehension, Expr, ExprKind, Literal};
use crate::types::Type;

pub(super) type R = Result<Value, EvalError>;

pub(super) struct Interpreter<'a> {
    types: &'a HashMap<i64, Type>,
    pub(super) activation: &'a Activation,
    /// Comprehension variables, innermost last (an accumulator may hold an error).
    scopes: Vec<(String, R)>,
    /// Activation variables already converted to their checked types.
    converted: HashMap<String, Value>,
}

impl<'a> Interpreter<'a> {
    pub(super) fn new(types: &'a HashMap<i64, Type>, activation: &'a Activation) -> Self {
        Interpreter {
            types,
            activation,
            scopes: Vec::new(),
            converted: HashMap::new(),
        }
    }

    pub(super) fn eval(&mut self, e: &Expr) -> R {
        match &e.kind {
            ExprKind::Literal(l) => Ok(literal(l)),
            ExprKind::Ident(name) => self.ident(e.id, name),
            ExprKind::Select {
                operand,
                field,
                test_only,
            } => {
                let v = self.eval(operand)?;
                select(v, field, *test_only)
            }
            ExprKind::Call {
                target,
                function,
                args,
            } => self.call(e.id, target.as_deref(), function, args),
            ExprKind::List {
                elements,
                optional_indices,
            } => {
                let mut out = Vec::with_capacity(elements.len());
                for (i, el) in elements.iter().enumerate() {
                    let v = self.eval(el)?;
                    if optional_indices.contains(&i) {
                        match v {
                            Value::Optional(Some(inner)) => out.push(*inner),
                            Value::Optional(None) => {}
                            _ => return Err(EvalError::no_such_overload()),
                        }
                    } else {
                        out.push(v);
                    }
                }
                Ok(Value::list(out))
            }
            ExprKind::Map { entries } => {
                let mut out = std::collections::BTreeMap::new();
                for en in entries {
                    let k = self.eval(&en.key)?;
                    let v = self.eval(&en.value)?;
                    let Some(key) = k.to_key() else {
                        return Err(EvalError::new(format!(
                            "unsupported key type: {}",
                            k.type_name()
                        )));
                    };
                    let v = if en.optional {
                        match v {
                            Value::Optional(Some(inner)) => *inner,
                            Value::Optional(None) => continue,
                            _ => return Err(EvalError::no_such_overload()),
                        }
                    } else {
                        v
                    };
                    if out.insert(key, v).is_some() {
                        return Err(EvalError::new(format!(
                            "Failed with repeated key: {}",
                            key_text(&k)
                        )));
                    }
                }
                Ok(Value::Map(Arc::new(out)))
            }
            ExprKind::Struct { name, .. } => Err(EvalError::new(format!("unknown type: '{name}'"))),
            ExprKind::Comprehension(c) => self.comprehension(c),
            ExprKind::Unspecified => Err(EvalError::new("unsupported expr")),
        }
    }

    fn ident(&mut self, id: i64, name: &str) -> R {
        if let Some((_, v)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return v.clone();
        }
        if let Some(v) = self.converted.get(name) {
            return Ok(v.clone());
        }
        let checked = self.types.get(&id);
        if let Some(v) = self.activation.get(name) {
            let v = match checked {
                Some(t) if needs_conversion(t) => convert(v.clone(), t),
                _ => v.clone(),
            };
            self.converted.insert(name.to_string(), v.clone());
            return Ok(v);
        }
        if let Some(Type::Type(t)) = checked {
            return Ok(Value::Type(runtime_type_name(t).into()));
        }
        if let Some(Type::TypeType) = checked {
            return Ok(Value::Type("type".into()));
        }
        Err(EvalError::new(format!(
            "no such attribute(s): id: {id}, names: [{name}]"
        )))
    }

    fn call(&mut self, id: i64, target: Option<&Expr>, function: &str, args: &[Expr]) -> R {
        match (function, target, args) {
            ("_&&_", None, [a, b]) => return self.logical(a, b, false),
            ("_||_", None, [a, b]) => return self.logical(a, b, true),
            ("_?_:_", None, [c, t, f]) => {
                return match self.eval(c)? {
                    Value::Bool(true) => self.eval(t),
                    Value::Bool(false) => self.eval(f),
                    _ => Err(EvalError::no_such_overload()),
                }
            }
            ("@not_strictly_false", None, [a]) => {
                return Ok(Value::Bool(!matches!(self.eval(a), Ok(Value::Bool(false)))))
            }
            ("_?._", None, [operand, field]) => {
                let v = self.eval(operand)?;
                let ExprKind::Literal(Literal::String(f)) = &field.kind else {
                    return Err(EvalError::no_such_overload());
                };
                return optional_select(v, f);
            }
            ("or" | "orValue", Some(t), [alt]) => {
                let v = self.eval(t)?;
                return match v {
                    Value::Optional(Some(inner)) if function == "orValue" => Ok(*inner),
                    Value::Optional(Some(_)) => Ok(v),
                    Value::Optional(None) => {
                        let alt = self.eval(alt)?;
                        if function == "or" && !matches!(alt, Value::Optional(_)) {
                            return Err(EvalError::no_such_overload());
                        }
                        Ok(alt)
                    }
                    _ => Err(EvalError::no_such_overload()),
                };
            }
            _ => {}
        }
        let mut values = Vec::with_capacity(args.len() + 1);
        if let Some(t) = target {
            values.push(self.eval(t)?);
        }
        for a in args {
            values.push(self.eval(a)?);
        }
        if let ("sum", [Value::List(l)]) = (function, values.as_slice()) {
            if l.is_empty() {
                // The zero of the overload's element type (`sum(init)`).
                return Ok(match self.types.get(&id) {
                    Some(Type::Double) => Value::Double(0.0),
                    Some(Type::Uint) => Value::Uint(0),
                    Some(Type::Duration) => Value::Duration(0),
                    _ => Value::Int(0),
                });
            }
        }
        super::stdlib::call(self, function, target.is_some(), values)
    }

    /// `&&` (`or` false) and `||` (`or` true): the deciding value wins over an error on
    /// either side; otherwise the left error, then the right one.
    fn logical(&mut self, a: &Expr, b: &Expr, or: bool) -> R {
        let l = self.eval(a);
        if matches!(l, Ok(Value::Bool(v)) if v == or) {
            return Ok(Value::Bool(or));
        }
        let r = self.eval(b);
        if matches!(r, Ok(Value::Bool(v)) if v == or) {
            return Ok(Value::Bool(or));
        }
        match (l?, r?) {
            (Value::Bool(_), Value::Bool(_)) => Ok(Value::Bool(!or)),
            _ => Err(EvalError::no_such_overload()),
        }
    }

    fn comprehension(&mut self, c: &Comprehension) -> R {
        let range = self.eval(&c.iter_range)?;
        let items: Vec<Value> = match &range {
            Value::List(l) => l.iter().cloned().collect(),
            Value::Map(m) => m.keys().map(|k| k.to_value()).collect(),
            other => {
                return Err(EvalError::new(format!(
                    "got '{}', expected iterable type",
                    go_type_name(other)
                )))
            }
        };
        let accu = self.eval(&c.accu_init);
        let base = self.scopes.len();
        self.scopes.push((c.accu_var.clone(), accu));
        for item in items {
            self.scopes.truncate(base + 1);
            self.scopes.push((c.iter_var.clone(), Ok(item)));
            let cond = self.eval(&c.loop_condition);
            if matches!(cond, Ok(Value::Bool(false))) {
                break;
            }
            let step = self.eval(&c.loop_step);
            self.scopes[base].1 = step;
        }
        self.scopes.truncate(base + 1);
        let result = self.eval(&c.result);
        self.scopes.truncate(base);
        result
    }
}

fn literal(l: &Literal) -> Value {
    match l {
        Literal::Bool(b) => Value::Bool(*b),
        Literal::Int(i) => Value::Int(*i),
        Literal::Uint(u) => Value::Uint(*u),
        Literal::Double(d) => Value::Double(*d),
        Literal::String(s) => Value::string(s.as_str()),
        Literal::Bytes(b) => Value::Bytes(b.as_slice().into()),
        Literal::Null => Value::Null,
    }
}

/// Field selection (`a.f`) and presence tests (`has(a.f)`): map lookups by key.
pub(super) fn select(v: Value, field: &str, test_only: bool) -> R {
    match v {
        Value::Map(m) => {
            let found = m
                .get(&super::value::MapKey::String(field.into()))
                .or_else(|| {
                    let name = unescape_field(field)?;
                    m.get(&super::value::MapKey::String(name.into()))
                });
            match (found, test_only) {
                (Some(_), true) => Ok(Value::Bool(true)),
                (None, true) => Ok(Value::Bool(false)),
                (Some(x), false) => Ok(x.clone()),
                (None, false) => Err(EvalError::new(format!("no such key: {field}"))),
            }
        }
        Value::Optional(None) if !test_only => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) if !test_only => optional_select(*inner, field),
        _ if test_only => Ok(Value::Bool(false)),
        _ => Err(EvalError::new(format!("no such key: {field}"))),
    }
}

/// Kubernetes' `Unescape` of a property name written as a CEL identifier (`__dash__`,
/// `__dot__`, `__slash__`, `__underscores__`, `__<reserved word>__`); `None` when nothing
/// is escaped.
fn unescape_field(field: &str) -> Option<String> {
    if !field.contains("__") {
        return None;
    }
    if let Some(inner) = field.strip_prefix("__").and_then(|f| f.strip_suffix("__")) {
        if crate::schema::RESERVED_SYMBOLS.contains(&inner) {
            return Some(inner.to_string());
        }
    }
    Some(
        field
            .replace("__underscores__", "\u{0}")
            .replace("__dash__", "-")
            .replace("__dot__", ".")
            .replace("__slash__", "/")
            .replace("\u{0}", "__"),
    )
}

/// `a.?f`: `optional.of(a.f)` when `f` is present, `optional.none()` otherwise.
fn optional_select(v: Value, field: &str) -> R {
    let v = match v {
        Value::Optional(None) => return Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => *inner,
        v => v,
    };
    match &v {
        Value::Map(m) => Ok(Value::Optional(
            m.get(&super::value::MapKey::String(field.into()))
                .or_else(|| {
                    let name = unescape_field(field)?;
                    m.get(&super::value::MapKey::String(name.into()))
                })
                .map(|x| Box::new(x.clone())),
        )),
        _ => Ok(Value::Optional(None)),
    }
}

/// `a[i]`: list index or map key.
pub(super) fn index(container: &Value, idx: &Value) -> R {
    match container {
        Value::List(l) => {
            let i = list_index(idx)?;
            usize::try_from(i)
                .ok()
                .and_then(|i| l.get(i))
                .cloned()
                .ok_or_else(|| EvalError::new(format!("index out of bounds: {}", key_text(idx))))
        }
        Value::Map(m) => match map_find(m, idx)? {
            Some(v) => Ok(v.clone()),
            None => Err(EvalError::new(format!("no such key: {}", key_text(idx)))),
        },
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => optional_index(inner, idx),
        _ => Err(EvalError::new(format!("no such key: {}", key_text(idx)))),
    }
}

/// `a[?i]`: `optional.of(a[i])` when present, `optional.none()` otherwise.
pub(super) fn optional_index(container: &Value, idx: &Value) -> R {
    match container {
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => optional_index(inner, idx),
        Value::List(l) => {
            let i = list_index(idx)?;
            Ok(Value::Optional(
                usize::try_from(i)
                    .ok()
                    .and_then(|i| l.get(i))
                    .map(|v| Box::new(v.clone())),
            ))
        }
        Value::Map(m) => Ok(Value::Optional(
            map_find(m, idx)?.map(|v| Box::new(v.clone())),
        )),
        _ => Err(EvalError::no_such_overload()),
    }
}

/// cel-go's `IndexOrError`: ints, uints and integral doubles index lists.
fn list_index(idx: &Value) -> Result<i64, EvalError> {
    let bad = || EvalError::new(format!("unsupported index value {} in list", key_text(idx)));
    match idx {
        Value::Int(i) => Ok(*i),
        Value::Uint(u) => i64::try_from(*u).map_err(|_| bad()),
        Value::Double(d) if d.fract() == 0.0 && d.is_finite() && d.abs() < 9.2e18 => Ok(*d as i64),
        Value::Double(_) => Err(bad()),
        other => Err(EvalError::new(format!(
            "unsupported index type '{}' in list",
            other.type_name()
        ))),
    }
}

/// Go's `%T` of cel-go's value types, as the comprehension error prints it.
fn go_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "types.Null",
        Value::Bool(_) => "types.Bool",
        Value::Int(_) => "types.Int",
        Value::Uint(_) => "types.Uint",
        Value::Double(_) => "types.Double",
        Value::String(_) => "types.String",
        Value::Bytes(_) => "types.Bytes",
        Value::Timestamp(_) => "types.Timestamp",
        Value::Duration(_) => "types.Duration",
        Value::Type(_) => "*types.Type",
        Value::Optional(_) => "*types.Optional",
        Value::List(_) | Value::Map(_) | Value::Object(_) => "ref.Val",
    }
}

/// The runtime name of a type value (`type(int)` is `int`, lists are `list`).
pub(super) fn runtime_type_name(t: &Type) -> String {
    match t {
        Type::Int => "int".into(),
        Type::Uint => "uint".into(),
        Type::Double => "double".into(),
        Type::Bool => "bool".into(),
        Type::String => "string".into(),
        Type::Bytes => "bytes".into(),
        Type::Null => "null_type".into(),
        Type::Dyn => "dyn".into(),
        Type::Timestamp => "google.protobuf.Timestamp".into(),
        Type::Duration => "google.protobuf.Duration".into(),
        Type::List(_) => "list".into(),
        Type::Map(..) => "map".into(),
        Type::Object(o) => o.name().into(),
        Type::Type(_) | Type::TypeType => "type".into(),
        Type::Optional(_) => "optional_type".into(),
        Type::Opaque(n, _) => n.clone(),
        Type::TypeParam(n) => n.clone(),
        Type::Error => "error".into(),
    }
}

/// Whether values of type `t` may hold JSON that the schema-aware conversion changes.
fn needs_conversion(t: &Type) -> bool {
    match t {
        Type::Double | Type::Timestamp | Type::Duration | Type::Bytes => true,
        Type::List(e) => needs_conversion(e),
        Type::Map(_, v) => needs_conversion(v),
        Type::Object(o) => o.fields().any(|(_, f)| needs_conversion(f)),
        _ => false,
    }
}

/// Kubernetes' schema-aware conversion of unstructured JSON values: integral numbers of
/// `number` fields are doubles; `date-time`, `duration` and `byte` strings become timestamps,
/// durations and bytes (a string that does not parse stays a string, as the API server
/// would have rejected it).
fn convert(v: Value, t: &Type) -> Value {
    match (v, t) {
        (Value::Int(i), Type::Double) => Value::Double(i as f64),
        (Value::Uint(u), Type::Double) => Value::Double(u as f64),
        (Value::String(s), Type::Timestamp) => super::stdlib::parse_timestamp(&s)
            .map(Value::Timestamp)
            .unwrap_or(Value::String(s)),
        (Value::String(s), Type::Duration) => crate::gotime::parse_duration(&s)
            .map(Value::Duration)
            .unwrap_or(Value::String(s)),
        (Value::String(s), Type::Bytes) => super::strings::base64_decode(&s)
            .map(|b| Value::Bytes(b.into()))
            .unwrap_or(Value::String(s)),
        (Value::List(l), Type::List(e)) if needs_conversion(e) => {
            Value::list(l.iter().map(|x| convert(x.clone(), e)).collect())
        }
        (Value::Map(m), Type::Map(_, e)) if needs_conversion(e) => Value::Map(Arc::new(
            m.iter()
                .map(|(k, x)| (k.clone(), convert(x.clone(), e)))
                .collect(),
        )),
        (Value::Map(m), Type::Object(o)) if needs_conversion(t) => Value::Map(Arc::new(
            m.iter()
                .map(|(k, x)| {
                    let ft = match k {
                        super::value::MapKey::String(name) => o.field(name),
                        _ => None,
                    };
                    let x = match ft {
                        Some(ft) if needs_conversion(ft) => convert(x.clone(), ft),
                        _ => x.clone(),
                    };
                    (k.clone(), x)
                })
                .collect(),
        )),
        (v, _) => v,
    }
}

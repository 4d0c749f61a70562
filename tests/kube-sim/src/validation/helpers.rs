//! Field-error constructors (the wording of upstream's `field.Error` bodies), Go value
//! rendering, and JSON access helpers tolerant of wrong types, shared by every validator.

use super::{FieldCause, Obj};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

// ---------------------------------------------------------------------------------------
// Error constructors (the wording of upstream's field.Error bodies)
// ---------------------------------------------------------------------------------------

#[derive(Default)]
pub(super) struct Errs(pub(super) Vec<FieldCause>);

fn with_detail(head: &str, detail: &str) -> String {
    if detail.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {detail}")
    }
}

impl Errs {
    pub(super) fn push(&mut self, reason: &'static str, field: &str, message: String) {
        self.0.push(FieldCause {
            reason,
            message,
            field: field.to_string(),
        });
    }
    pub(super) fn required(&mut self, field: &str, detail: &str) {
        self.push(
            "FieldValueRequired",
            field,
            with_detail("Required value", detail),
        );
    }
    pub(super) fn forbidden(&mut self, field: &str, detail: &str) {
        self.push(
            "FieldValueForbidden",
            field,
            with_detail("Forbidden", detail),
        );
    }
    /// `value` is already rendered the way Go prints it (see `q`, `go_map`, ...).
    pub(super) fn invalid(&mut self, field: &str, value: &str, detail: &str) {
        self.push(
            "FieldValueInvalid",
            field,
            with_detail(&format!("Invalid value: {value}"), detail),
        );
    }
    pub(super) fn duplicate(&mut self, field: &str, value: &str) {
        self.push(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {value}"),
        );
    }
    pub(super) fn not_found(&mut self, field: &str, value: &str) {
        self.push("FieldValueNotFound", field, format!("Not found: {value}"));
    }
    pub(super) fn not_supported(&mut self, field: &str, value: &str, valid: &[&str]) {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            format!(
                "supported values: {}",
                valid.iter().map(|v| q(v)).collect::<Vec<_>>().join(", ")
            )
        };
        self.push(
            "FieldValueNotSupported",
            field,
            with_detail(&format!("Unsupported value: {value}"), &detail),
        );
    }
    pub(super) fn too_long(&mut self, field: &str, max: usize) {
        self.push(
            "FieldValueTooLong",
            field,
            format!("Too long: must have at most {max} bytes"),
        );
    }
    /// `field.TooMany`: the count is an `int`, printed with `%#v`.
    pub(super) fn too_many(&mut self, field: &str, actual: usize, max: usize) {
        self.push(
            "FieldValueTooMany",
            field,
            format!("Too many: {actual}: must have at most {max} items"),
        );
    }
    pub(super) fn invalid_msgs(&mut self, field: &str, value: &str, msgs: Vec<String>) {
        for m in msgs {
            self.invalid(field, &q(value), &m);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Go value rendering
// ---------------------------------------------------------------------------------------

/// A string as Go's `%q` prints it.
pub(crate) fn q(s: &str) -> String {
    rkcm_gocompat::gofmt::quote(s)
}

/// A `map[string]string` as Go's `%#v` prints it (keys sorted).
pub(super) fn go_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".to_string(),
        Some(m) => {
            let sorted: BTreeMap<&String, String> =
                m.iter().map(|(k, v)| (k, scalar_string(v))).collect();
            let body: Vec<String> = sorted
                .iter()
                .map(|(k, v)| format!("{}:{}", q(k), q(v)))
                .collect();
            format!("map[string]string{{{}}}", body.join(", "))
        }
    }
}

/// A `*metav1.LabelSelector` in a field error: the error follows the pointer and prints the
/// struct with `%#v` (its `String()` method is on the pointer, so it is not used); nil is `"null"`.
pub(super) fn go_selector(v: Option<&Value>) -> String {
    match v.filter(|v| !v.is_null()) {
        None => q("null"),
        Some(sel) => crate::go_value::go_syntax("v1.LabelSelector", Some(sel)),
    }
}

/// A JSON number or other scalar as Go's `%v` prints it.
pub(super) fn num(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => q(s),
        Value::Null => q("null"),
        other => other.to_string(),
    }
}

pub(super) fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// An IntOrString through its `String()` method.
pub(super) fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => num(other),
    }
}

/// A `[]string` as Go's `%#v` prints it.
pub(super) fn go_string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => rkcm_gocompat::gofmt::go_string_slice(&[], true),
        Some(a) => {
            let items: Vec<String> = a.iter().map(scalar_string).collect();
            rkcm_gocompat::gofmt::go_string_slice(&items, false)
        }
    }
}

// ---------------------------------------------------------------------------------------
// JSON access helpers (tolerant of wrong types)
// ---------------------------------------------------------------------------------------

pub(super) fn obj(v: Option<&Value>) -> Option<&Obj> {
    v.and_then(Value::as_object)
}

pub(super) fn arr(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(super) fn str_of(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or("")
}

pub(super) fn int_of(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        _ => None,
    }
}

pub(super) fn present(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

pub(super) fn bool_of(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool).unwrap_or(false)
}

pub(super) fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    obj(v)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), scalar_string(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// Semantic equality: a null member equals an absent one, numbers compare by value.
pub(super) fn sem_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    let a = a.filter(|v| !v.is_null());
    let b = b.filter(|v| !v.is_null());
    match (a, b) {
        (None, None) => true,
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().all(|k| sem_eq(x.get(k), y.get(k)))
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, r)| sem_eq(Some(p), Some(r)))
        }
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

pub(super) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

pub(super) fn idx(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

pub(super) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

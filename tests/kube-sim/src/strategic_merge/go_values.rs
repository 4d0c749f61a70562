//! Go value semantics over JSON values: the dynamic type a decoded value has upstream, Go's
//! equality (and where it would panic), and the `%v`/`%s` renderings upstream's errors print.

use super::{JMap, PatchError, Res};
use serde_json::Value;

/// The dynamic Go type a decoded JSON value has upstream (integers decode as int64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GoKind {
    Bool,
    Int,
    Float,
    Str,
    Slice,
    Map,
}

pub(super) fn go_kind(v: &Value) -> Option<GoKind> {
    match v {
        Value::Null => None,
        Value::Bool(_) => Some(GoKind::Bool),
        Value::Number(n) => Some(if n.as_i64().is_some() {
            GoKind::Int
        } else {
            GoKind::Float
        }),
        Value::String(_) => Some(GoKind::Str),
        Value::Array(_) => Some(GoKind::Slice),
        Value::Object(_) => Some(GoKind::Map),
    }
}

/// `reflect.TypeOf(v)` as `%s` prints it.
fn go_type_name(v: &Value) -> &'static str {
    match go_kind(v) {
        None => "%!s(<nil>)",
        Some(GoKind::Bool) => "bool",
        Some(GoKind::Int) => "int64",
        Some(GoKind::Float) => "float64",
        Some(GoKind::Str) => "string",
        Some(GoKind::Slice) => "[]interface {}",
        Some(GoKind::Map) => "map[string]interface {}",
    }
}

/// Go's `==` on two `interface{}` values: false for different dynamic types, a runtime panic
/// for two maps or two slices.
pub(super) fn go_eq(a: &Value, b: &Value) -> Res<bool> {
    let (ka, kb) = (go_kind(a), go_kind(b));
    if ka != kb {
        return Ok(false);
    }
    match ka {
        Some(GoKind::Map) | Some(GoKind::Slice) => Err(PatchError::panic()),
        _ => Ok(a == b),
    }
}

/// Go's `==` where a missing map entry is `nil`.
pub(super) fn go_eq_opt(a: Option<&Value>, b: Option<&Value>) -> Res<bool> {
    let a = a.filter(|v| !v.is_null());
    let b = b.filter(|v| !v.is_null());
    match (a, b) {
        (None, None) => Ok(true),
        (Some(x), Some(y)) => go_eq(x, y),
        _ => Ok(false),
    }
}

/// Using a value as a Go map key panics for maps and slices.
pub(super) fn go_hashable(v: &Value) -> Res<()> {
    match v {
        Value::Array(_) | Value::Object(_) => Err(PatchError::panic()),
        _ => Ok(()),
    }
}

pub(super) fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".to_string();
    }
    // Shortest round-trip digits laid out as Go's %v does (%g with the shortest precision:
    // exponent form when the exponent is below -4 or at least 6, e.g. 1e+06, 1.5e-07).
    let sci = format!("{:e}", f);
    let (mant, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let mut s = String::from(sign);
        s.push_str(&digits[..1.min(digits.len())]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            s.push('0');
        }
        s.push_str(&e.to_string());
        s
    } else if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        format!("{}0.{}{}", sign, zeros, digits)
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            format!("{}{}{}", sign, digits, "0".repeat(int_len - digits.len()))
        } else {
            format!("{}{}.{}", sign, &digits[..int_len], &digits[int_len..])
        }
    }
}

fn go_number(n: &serde_json::Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => go_float(n.as_f64().unwrap_or(0.0)),
    }
}

/// `fmt.Sprintf("%v", v)` of a decoded JSON value.
pub(super) fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", k, m.get(k.as_str()).map(go_v).unwrap_or_default()))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// `fmt.Sprintf("%s", v)` of a decoded JSON value.
pub(super) fn go_s(v: &Value) -> String {
    match v {
        Value::Null => "%!s(<nil>)".to_string(),
        Value::Bool(b) => format!("%!s(bool={})", b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => format!("%!s(int64={})", i),
            None => format!("%!s(float64={})", go_number(n)),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_s).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", k, m.get(k.as_str()).map(go_s).unwrap_or_default()))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

fn go_v_map(m: &JMap) -> String {
    go_v(&Value::Object(m.clone()))
}

pub(super) fn go_v_list(l: &[Value]) -> String {
    format!("[{}]", l.iter().map(go_v).collect::<Vec<_>>().join(" "))
}

pub(super) fn err_no_merge_key(m: &JMap, key: &str) -> PatchError {
    PatchError::new(format!(
        "map: {} does not contain declared merge key: {}",
        go_v_map(m),
        key
    ))
}

pub(super) fn err_bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    PatchError::new(format!(
        "expected a {}, but received a {}",
        expected,
        go_type_name(actual)
    ))
}

pub(super) fn err_bad_patch_type(t: &Value, m: &JMap) -> PatchError {
    PatchError::new(format!(
        "unknown patch type: {} in map: {}",
        go_s(t),
        go_v_map(m)
    ))
}

pub(super) const MAP_TYPE: &str = "map[string]interface {}";
pub(super) const SLICE_TYPE: &str = "[]interface {}";

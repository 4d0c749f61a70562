//! cel-go's standard library at run time: operators, `size`, string tests, `matches`, type
//! conversions, time accessors and the optional-value functions. Calls to other functions
//! go on to the extension libraries.

use std::cmp::Ordering;

use chrono::{Datelike, FixedOffset, TimeZone, Timelike};

use super::interp::{index, optional_index, Interpreter, R};
use super::value::{compare, equals, map_find, Timestamp, Value};
use super::EvalError;
use crate::gotime::{MAX_UNIX_TIME, MIN_UNIX_TIME};

fn err(msg: impl Into<String>) -> EvalError {
    EvalError::new(msg)
}

fn overload() -> EvalError {
    EvalError::no_such_overload()
}

/// Calls `function` on evaluated arguments (the receiver first for member calls).
pub(super) fn call(it: &Interpreter<'_>, function: &str, member: bool, args: Vec<Value>) -> R {
    use Value::*;
    if let Some(first) = args.first() {
        if lacks_operator_trait(function, first) {
            return Err(err(format!("no such overload: {function}")));
        }
    }
    match (function, args.as_slice()) {
        ("_==_", [a, b]) => Ok(Bool(equals(a, b))),
        ("_!=_", [a, b]) => Ok(Bool(!equals(a, b))),
        ("_<_", [a, b]) => compare(a, b).map(|o| Bool(o == Ordering::Less)),
        ("_<=_", [a, b]) => compare(a, b).map(|o| Bool(o != Ordering::Greater)),
        ("_>_", [a, b]) => compare(a, b).map(|o| Bool(o == Ordering::Greater)),
        ("_>=_", [a, b]) => compare(a, b).map(|o| Bool(o != Ordering::Less)),
        ("_+_", [a, b]) => add(a, b),
        ("_-_", [a, b]) => subtract(a, b),
        ("_*_", [a, b]) => multiply(a, b),
        ("_/_", [a, b]) => divide(a, b),
        ("_%_", [a, b]) => modulo(a, b),
        ("-_", [Int(i)]) => i
            .checked_neg()
            .map(Int)
            .ok_or_else(|| err("integer overflow")),
        ("-_", [Double(d)]) => Ok(Double(-d)),
        ("-_", [Duration(d)]) => d.checked_neg().map(Duration).ok_or_else(int_overflow),
        ("!_", [Bool(b)]) => Ok(Bool(!b)),
        ("_[_]", [c, i]) => index(c, i),
        ("_[?_]", [c, i]) => optional_index(c, i),
        ("@in", [v, List(l)]) => Ok(Bool(l.iter().any(|x| equals(v, x)))),
        ("@in", [v, Map(m)]) => Ok(Bool(matches!(map_find(m, v), Ok(Some(_))))),
        ("size", [v]) => size(v),
        ("contains", [String(s), String(t)]) if member => Ok(Bool(s.contains(&**t))),
        ("startsWith", [String(s), String(t)]) if member => Ok(Bool(s.starts_with(&**t))),
        ("endsWith", [String(s), String(t)]) if member => Ok(Bool(s.ends_with(&**t))),
        ("matches", [String(s), String(re)]) => {
            super::strings::regex(re).map(|r| Bool(r.is_match(s)))
        }
        ("dyn", [v]) => Ok(v.clone()),
        ("type", [v]) => Ok(Type(v.type_name().into())),
        ("int", [v]) => to_int(v),
        ("uint", [v]) => to_uint(v),
        ("double", [v]) => to_double(v),
        ("string", [v]) => to_string(v),
        ("bytes", [String(s)]) => Ok(Bytes(s.as_bytes().into())),
        ("bytes", [Bytes(b)]) => Ok(Bytes(b.clone())),
        ("bool", [Bool(b)]) => Ok(Bool(*b)),
        ("bool", [String(s)]) => parse_bool(s),
        ("duration", [Duration(d)]) => Ok(Duration(*d)),
        ("duration", [Int(i)]) => Ok(Duration(*i)),
        ("duration", [String(s)]) => rkcm_gocompat::duration::parse(s)
            .map(Duration)
            .map_err(|_| string_conversion("google.protobuf.Duration")),
        ("timestamp", [Timestamp(t)]) => Ok(Timestamp(*t)),
        ("timestamp", [Int(i)]) => checked_timestamp(i128::from(*i) * 1_000_000_000),
        ("timestamp", [String(s)]) => match crate::gotime::parse_rfc3339(s) {
            None => Err(string_conversion("google.protobuf.Timestamp")),
            Some(_) => parse_timestamp(s)
                .map(Timestamp)
                .ok_or_else(|| err("timestamp overflow")),
        },
        ("optional.of", [v]) => Ok(Optional(Some(Box::new(v.clone())))),
        ("optional.ofNonZeroValue", [v]) => {
            Ok(Optional((!is_zero_value(v)).then(|| Box::new(v.clone()))))
        }
        ("optional.none", []) => Ok(Optional(None)),
        ("hasValue", [Optional(o)]) => Ok(Bool(o.is_some())),
        ("value", [Optional(Some(v))]) => Ok((**v).clone()),
        ("value", [Optional(None)]) => Err(err("optional.none() dereference")),
        (
            "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
            | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds",
            [Timestamp(t), rest @ ..],
        ) if member && rest.len() <= 1 => timestamp_part(function, t, rest.first()),
        ("getHours" | "getMinutes" | "getSeconds" | "getMilliseconds", [Duration(d)]) if member => {
            Ok(Int(match function {
                "getHours" => d / 3_600_000_000_000,
                "getMinutes" => d / 60_000_000_000,
                "getSeconds" => d / 1_000_000_000,
                _ => d / 1_000_000,
            }))
        }
        ("-_" | "!_", [_]) => Err(overload()),
        _ => super::strings::call(it, function, member, args),
    }
}

/// Whether an operator's first operand lacks the trait cel-go's operator binding requires
/// (then the interpreter answers `no such overload: <operator>`).
fn lacks_operator_trait(function: &str, v: &Value) -> bool {
    use Value::*;
    let numeric = matches!(v, Int(_) | Uint(_) | Double(_));
    match function {
        "_+_" => {
            !(numeric
                || matches!(
                    v,
                    String(_) | Bytes(_) | List(_) | Duration(_) | Timestamp(_)
                ))
        }
        "_-_" => !(numeric || matches!(v, Duration(_) | Timestamp(_))),
        "_*_" | "_/_" => !numeric,
        "_%_" => !matches!(v, Int(_) | Uint(_)),
        "-_" => !matches!(v, Int(_) | Double(_) | Bool(_) | Duration(_)),
        "_<_" | "_<=_" | "_>_" | "_>=_" => {
            !(numeric
                || matches!(
                    v,
                    String(_) | Bytes(_) | Bool(_) | Duration(_) | Timestamp(_)
                ))
        }
        "size" => !matches!(v, String(_) | Bytes(_) | List(_) | Map(_)),
        "matches" => !matches!(v, String(_)),
        _ => false,
    }
}

fn size(v: &Value) -> R {
    let n = match v {
        Value::String(s) => s.chars().count(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.len(),
        _ => return Err(overload()),
    };
    Ok(Value::Int(n as i64))
}

fn int_overflow() -> EvalError {
    err("integer overflow")
}

fn uint_overflow() -> EvalError {
    err("unsigned integer overflow")
}

fn checked_timestamp(nanos: i128) -> R {
    let t = Timestamp::from_nanos(nanos);
    if t.seconds < MIN_UNIX_TIME || t.seconds > MAX_UNIX_TIME {
        return Err(err("timestamp overflow"));
    }
    Ok(Value::Timestamp(t))
}

fn checked_duration(nanos: i128) -> R {
    i64::try_from(nanos)
        .map(Value::Duration)
        .map_err(|_| err("integer overflow"))
}

fn add(a: &Value, b: &Value) -> R {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => x.checked_add(*y).map(Int).ok_or_else(int_overflow),
        (Uint(x), Uint(y)) => x.checked_add(*y).map(Uint).ok_or_else(uint_overflow),
        (Double(x), Double(y)) => Ok(Double(x + y)),
        (String(x), String(y)) => Ok(Value::string(format!("{x}{y}"))),
        (Bytes(x), Bytes(y)) => Ok(Bytes([&x[..], &y[..]].concat().into())),
        (List(x), List(y)) => Ok(Value::list(x.iter().chain(y.iter()).cloned().collect())),
        (Duration(x), Duration(y)) => x.checked_add(*y).map(Duration).ok_or_else(int_overflow),
        (Timestamp(t), Duration(d)) | (Duration(d), Timestamp(t)) => {
            checked_timestamp(t.total_nanos() + i128::from(*d))
        }
        _ => Err(overload()),
    }
}

fn subtract(a: &Value, b: &Value) -> R {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => x.checked_sub(*y).map(Int).ok_or_else(int_overflow),
        (Uint(x), Uint(y)) => x.checked_sub(*y).map(Uint).ok_or_else(uint_overflow),
        (Double(x), Double(y)) => Ok(Double(x - y)),
        (Duration(x), Duration(y)) => x.checked_sub(*y).map(Duration).ok_or_else(int_overflow),
        (Timestamp(_), Duration(i64::MIN)) => Err(int_overflow()),
        (Timestamp(t), Duration(d)) => checked_timestamp(t.total_nanos() - i128::from(*d)),
        (Timestamp(x), Timestamp(y)) => checked_duration(x.total_nanos() - y.total_nanos()),
        _ => Err(overload()),
    }
}

fn multiply(a: &Value, b: &Value) -> R {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => x.checked_mul(*y).map(Int).ok_or_else(int_overflow),
        (Uint(x), Uint(y)) => x.checked_mul(*y).map(Uint).ok_or_else(uint_overflow),
        (Double(x), Double(y)) => Ok(Double(x * y)),
        _ => Err(overload()),
    }
}

fn divide(a: &Value, b: &Value) -> R {
    use Value::*;
    match (a, b) {
        (Int(_), Int(0)) | (Uint(_), Uint(0)) => Err(err("division by zero")),
        (Int(x), Int(y)) => x.checked_div(*y).map(Int).ok_or_else(int_overflow),
        (Uint(x), Uint(y)) => Ok(Uint(x / y)),
        (Double(x), Double(y)) => Ok(Double(x / y)),
        _ => Err(overload()),
    }
}

fn modulo(a: &Value, b: &Value) -> R {
    use Value::*;
    match (a, b) {
        (Int(_), Int(0)) | (Uint(_), Uint(0)) => Err(err("modulus by zero")),
        (Int(x), Int(y)) => x.checked_rem(*y).map(Int).ok_or_else(int_overflow),
        (Uint(x), Uint(y)) => Ok(Uint(x % y)),
        _ => Err(overload()),
    }
}

/// cel-go's failed `ConvertToType` of a string (Go's `strconv` error is not kept).
fn string_conversion(to: &str) -> EvalError {
    err(format!("type conversion error from 'string' to '{to}'"))
}

fn to_int(v: &Value) -> R {
    use Value::*;
    match v {
        Int(i) => Ok(Int(*i)),
        Uint(u) => i64::try_from(*u).map(Int).map_err(|_| int_overflow()),
        Double(d) => {
            if d.is_nan() || *d <= -9.223_372_036_854_776e18 || *d >= 9.223_372_036_854_776e18 {
                Err(int_overflow())
            } else {
                Ok(Int(*d as i64))
            }
        }
        String(s) => parse_go_int(s)
            .map(Int)
            .ok_or_else(|| string_conversion("int")),
        Timestamp(t) => Ok(Int(t.seconds)),
        Duration(d) => Ok(Int(*d)),
        _ => Err(conversion_error(v, "int")),
    }
}

fn conversion_error(v: &Value, to: &str) -> EvalError {
    err(format!(
        "type conversion error from '{}' to '{to}'",
        v.type_name()
    ))
}

/// Go's `strconv.ParseInt(s, 10, 64)`.
fn parse_go_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

fn to_uint(v: &Value) -> R {
    use Value::*;
    match v {
        Uint(u) => Ok(Uint(*u)),
        Int(i) => u64::try_from(*i).map(Uint).map_err(|_| uint_overflow()),
        Double(d) => {
            if d.is_nan() || *d < 0.0 || *d >= 1.844_674_407_370_955_2e19 {
                Err(uint_overflow())
            } else {
                Ok(Uint(*d as u64))
            }
        }
        String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s
            .parse::<u64>()
            .map(Uint)
            .map_err(|_| string_conversion("uint")),
        String(_) => Err(string_conversion("uint")),
        _ => Err(conversion_error(v, "uint")),
    }
}

fn to_double(v: &Value) -> R {
    use Value::*;
    match v {
        Double(d) => Ok(Double(*d)),
        Int(i) => Ok(Double(*i as f64)),
        Uint(u) => Ok(Double(*u as f64)),
        String(s) => {
            let t = s.to_ascii_lowercase();
            let t = t.strip_prefix(['+', '-']).unwrap_or(&t);
            let word = matches!(t, "inf" | "infinity" | "nan");
            let numeric = !t.is_empty()
                && t.bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'+' | b'-'));
            match s.parse::<f64>() {
                Ok(d) if word || (numeric && d.is_finite()) => Ok(Double(d)),
                _ => Err(string_conversion("double")),
            }
        }
        _ => Err(conversion_error(v, "double")),
    }
}

fn to_string(v: &Value) -> R {
    use Value::*;
    Ok(Value::string(match v {
        String(s) => return Ok(String(s.clone())),
        Bool(b) => b.to_string(),
        Int(i) => i.to_string(),
        Uint(u) => u.to_string(),
        Double(d) => format_double(*d),
        Bytes(b) => std::str::from_utf8(b)
            .map_err(|_| err("invalid UTF-8 in bytes, cannot convert to string"))?
            .to_string(),
        Timestamp(t) => format_timestamp(t),
        Duration(d) => format_duration(*d),
        Type(t) => t.to_string(),
        _ => return Err(conversion_error(v, "string")),
    }))
}

fn parse_bool(s: &str) -> R {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Value::Bool(true)),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Value::Bool(false)),
        _ => Err(string_conversion("bool")),
    }
}

fn is_zero_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Double(d) => *d == 0.0,
        Value::String(s) => s.is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Duration(d) => *d == 0,
        Value::Timestamp(t) => t.seconds == 0 && t.nanos == 0,
        Value::Optional(o) => o.is_none(),
        Value::Type(_) | Value::Object(_) => false,
    }
}

/// Go's `strconv.FormatFloat(d, 'g', -1, 64)`, as cel-go's `string(double)` writes doubles.
pub(crate) fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Shortest round-trip digits and the decimal exponent.
    let sci = format!("{:e}", d.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if d < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        return format_e(sign, &digits, exp);
    }
    let nd = digits.len() as i32;
    let dp = exp + 1;
    let out = if dp <= 0 {
        format!("0.{}{digits}", "0".repeat((-dp) as usize))
    } else if dp >= nd {
        format!("{digits}{}", "0".repeat((dp - nd) as usize))
    } else {
        format!("{}.{}", &digits[..dp as usize], &digits[dp as usize..])
    };
    format!("{sign}{out}")
}

fn format_e(sign: &str, digits: &str, exp: i32) -> String {
    let (first, rest) = digits.split_at(1);
    let frac = if rest.is_empty() {
        String::new()
    } else {
        format!(".{rest}")
    };
    let esign = if exp < 0 { '-' } else { '+' };
    format!("{sign}{first}{frac}e{esign}{:02}", exp.abs())
}

/// cel-go's `string(duration)`: seconds with the shortest fraction, then `s`.
pub(crate) fn format_duration(nanos: i64) -> String {
    // Go's `Duration.Seconds`: whole seconds plus the fraction.
    let secs = (nanos / 1_000_000_000) as f64 + (nanos % 1_000_000_000) as f64 / 1e9;
    let text = format!("{secs}");
    let text = text.strip_suffix(".0").unwrap_or(&text).to_string();
    format!("{text}s")
}

/// `time.RFC3339Nano` in UTC, as cel-go's `string(timestamp)` writes it.
pub(crate) fn format_timestamp(t: &Timestamp) -> String {
    let Some(dt) = chrono::DateTime::from_timestamp(t.seconds, t.nanos) else {
        return String::new();
    };
    let mut out = dt.format("%Y-%m-%dT%H:%M:%S").to_string();
    if t.nanos != 0 {
        let frac = format!("{:09}", t.nanos);
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// Go's `time.Parse(time.RFC3339, s)` with its fraction, within cel-go's timestamp range.
pub(crate) fn parse_timestamp(s: &str) -> Option<Timestamp> {
    let seconds = crate::gotime::parse_rfc3339(s)?;
    let mut nanos = 0u32;
    if let Some(frac) = s.get(19..).and_then(|r| r.strip_prefix(['.', ','])) {
        let digits: String = frac.chars().take_while(char::is_ascii_digit).collect();
        let padded = format!("{digits:0<9}");
        nanos = padded.get(..9)?.parse().ok()?;
    }
    if !(MIN_UNIX_TIME..=MAX_UNIX_TIME).contains(&seconds) {
        return None;
    }
    Some(Timestamp { seconds, nanos })
}

/// A time zone argument: `UTC`, empty, or a fixed offset `[+-]HH:MM`. IANA names are not
/// supported (an error, never a wrong value).
fn zone(tz: Option<&Value>) -> Result<FixedOffset, EvalError> {
    let utc = FixedOffset::east_opt(0).ok_or_else(overload)?;
    let Some(tz) = tz else { return Ok(utc) };
    let Value::String(tz) = tz else {
        return Err(overload());
    };
    if tz.is_empty() || &**tz == "UTC" {
        return Ok(utc);
    }
    let (sign, rest) = match tz.as_bytes().first() {
        Some(b'+') => (1, &tz[1..]),
        Some(b'-') => (-1, &tz[1..]),
        _ => {
            return Err(err(format!(
                "time zone {tz} is not supported (only UTC and fixed offsets)"
            )))
        }
    };
    let parsed = rest
        .split_once(':')
        .and_then(|(h, m)| Some((h.parse::<i32>().ok()?, m.parse::<i32>().ok()?)));
    parsed
        .and_then(|(h, m)| FixedOffset::east_opt(sign * (h * 3600 + m * 60)))
        .ok_or_else(|| err(format!("unknown time zone {tz}")))
}

fn timestamp_part(function: &str, t: &Timestamp, tz: Option<&Value>) -> R {
    let zone = zone(tz)?;
    let dt = zone
        .timestamp_opt(t.seconds, t.nanos)
        .single()
        .ok_or_else(|| err("timestamp overflow"))?;
    let v = match function {
        "getFullYear" => i64::from(dt.year()),
        "getMonth" => i64::from(dt.month0()),
        "getDayOfYear" => i64::from(dt.ordinal0()),
        "getDayOfMonth" => i64::from(dt.day0()),
        "getDate" => i64::from(dt.day()),
        "getDayOfWeek" => i64::from(dt.weekday().num_days_from_sunday()),
        "getHours" => i64::from(dt.hour()),
        "getMinutes" => i64::from(dt.minute()),
        "getSeconds" => i64::from(dt.second()),
        _ => i64::from(t.nanos / 1_000_000),
    };
    Ok(Value::Int(v))
}

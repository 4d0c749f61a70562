//! `string.format` of cel-go v0.17.7's strings extension (`ext/strings.go` with
//! `interpreter/formatting.go`): `%s`, `%d`, `%b`, `%x`, `%X`, `%o` and `%%`. The locale-aware
//! clauses `%f` and `%e` (formatted by `golang.org/x/text` for `en_US`) are not reproduced:
//! they give an error, never a different text.

use rkcm_gocompat::gofmt::quote;

use super::stdlib::{format_double, format_duration, format_timestamp};
use super::value::Value;
use super::EvalError;

/// Precision of doubles inside lists and maps (`defaultPrecision`).
const DEFAULT_PRECISION: usize = 6;

type Clause = fn(&Value) -> Result<String, String>;

/// `<string>.format(<list>)`.
pub(super) fn format(text: &str, args: &[Value]) -> Result<Value, EvalError> {
    interpolate(text, args)
        .map(Value::string)
        .map_err(EvalError::new)
}

fn interpolate(text: &str, args: &[Value]) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut arg_index = 0usize;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        if bytes.get(i + 1) == Some(&b'%') {
            out.push(b'%');
            i += 2;
            continue;
        }
        let Some(arg) = args.get(arg_index) else {
            return Err(format!("index {arg_index} out of range"));
        };
        if i + 1 >= bytes.len() {
            return Err("unexpected end of string".into());
        }
        let (read, clause) = parse_clause(&bytes[i + 1..])
            .map_err(|e| format!("could not parse formatting clause: {e}"))?;
        let formatted = clause(arg).map_err(|e| format!("error during formatting: {e}"))?;
        out.extend_from_slice(formatted.as_bytes());
        i += 1 + read;
        arg_index += 1;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Parses `[.precision]verb`: the bytes read and the clause.
fn parse_clause(s: &[u8]) -> Result<(usize, Clause), String> {
    let mut i = 0;
    if s.first() == Some(&b'.') {
        i = 1;
        loop {
            match s.get(i) {
                None => {
                    return Err(
                        "error while parsing precision: could not find end of precision \
                                specifier"
                            .into(),
                    )
                }
                Some(c) if c.is_ascii_digit() => i += 1,
                Some(_) => break,
            }
        }
        if i == 1 {
            return Err(
                "error while parsing precision: error while converting precision to \
                        integer: strconv.Atoi: parsing \"\": invalid syntax"
                    .into(),
            );
        }
    }
    let Some(&verb) = s.get(i) else {
        return Err("unexpected end of string".into());
    };
    let clause: Clause = match verb {
        b's' => format_string,
        b'd' => format_decimal,
        b'f' | b'e' => unsupported_float,
        b'b' => format_binary,
        b'x' => |v| format_hex(v, false),
        b'X' => |v| format_hex(v, true),
        b'o' => format_octal,
        // Go reads one byte as the verb (a multi-byte character shows as its first byte).
        _ => {
            return Err(format!(
                "unrecognized formatting clause \"{}\"",
                char::from(verb)
            ))
        }
    };
    Ok((i + 1, clause))
}

fn unsupported_float(_: &Value) -> Result<String, String> {
    Err("the locale-aware %f and %e clauses are not supported by rkcm-cel".into())
}

/// `%s` (cel-go's `FormatString`).
fn format_string(v: &Value) -> Result<String, String> {
    Ok(match v {
        Value::List(l) => format_list(l)?,
        Value::Map(_) => format_map(v)?,
        Value::Null => "null".into(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => format_double(*d),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.to_string(),
        Value::Timestamp(t) => format_timestamp(t),
        Value::Duration(d) => format_duration(*d),
        Value::Type(t) => t.to_string(),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => s.to_string(),
            Err(_) => {
                return Err(format!(
                    "could not convert argument {} to string",
                    quote("invalid UTF-8 in bytes, cannot convert to string")
                ))
            }
        },
        other => {
            return Err(format!(
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, \
                 lists, types, durations, and timestamps, was given {}",
                other.type_name()
            ))
        }
    })
}

/// A list or map member as a CEL literal (`clauseForType` then `quoteForCEL`).
fn format_member(v: &Value) -> Result<String, String> {
    let unquoted = match v {
        Value::Int(_) | Value::Uint(_) => format_decimal(v)?,
        Value::String(_) | Value::Bytes(_) | Value::Bool(_) | Value::Null | Value::Type(_) => {
            format_string(v)?
        }
        Value::Timestamp(t) => format!("timestamp({})", quote(&format_timestamp(t))),
        Value::Duration(d) => format!("duration({})", quote(&format_duration(*d))),
        Value::List(l) => format_list(l)?,
        Value::Map(_) => format_map(v)?,
        Value::Double(d) => go_fixed(*d, DEFAULT_PRECISION),
        other => return Err(format!("no formatting function for {}", other.type_name())),
    };
    Ok(match v {
        Value::String(_) => quote(&unquoted),
        Value::Bytes(_) => format!("b{}", quote(&unquoted)),
        Value::Double(d) if !d.is_finite() => quote(&unquoted),
        _ => unquoted,
    })
}

/// Go's `%.Nf`.
fn go_fixed(d: f64, precision: usize) -> String {
    if d.is_nan() {
        "NaN".into()
    } else if d.is_infinite() {
        if d > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{d:.precision$}")
    }
}

fn format_list(l: &[Value]) -> Result<String, String> {
    let parts = l.iter().map(format_member).collect::<Result<Vec<_>, _>>()?;
    Ok(format!("[{}]", parts.join(", ")))
}

fn format_map(v: &Value) -> Result<String, String> {
    let Value::Map(m) = v else {
        return Err("no formatting function for map".into());
    };
    let mut pairs = Vec::with_capacity(m.len());
    for (k, value) in m.iter() {
        let key = k.to_value();
        let key_text = match &key {
            Value::String(s) => quote(s),
            Value::Bool(b) => b.to_string(),
            Value::Int(_) | Value::Uint(_) => format_decimal(&key)?,
            other => {
                return Err(format!(
                    "no formatting function for map key of type {}",
                    other.type_name()
                ))
            }
        };
        pairs.push((key_text, format_member(value)?));
    }
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let parts: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
    Ok(format!("{{{}}}", parts.join(", ")))
}

fn format_decimal(v: &Value) -> Result<String, String> {
    match v {
        Value::Int(i) => Ok(i.to_string()),
        Value::Uint(u) => Ok(u.to_string()),
        other => Err(format!(
            "decimal clause can only be used on integers, was given {}",
            other.type_name()
        )),
    }
}

/// Go's `%b`/`%o`/`%x` of a signed integer: the magnitude with a leading `-`.
fn signed(i: i64, radix: fn(u64) -> String) -> String {
    let magnitude = radix(i.unsigned_abs());
    if i < 0 {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

fn format_binary(v: &Value) -> Result<String, String> {
    match v {
        Value::Int(i) => Ok(signed(*i, |u| format!("{u:b}"))),
        Value::Uint(u) => Ok(format!("{u:b}")),
        Value::Bool(b) => Ok(if *b { "1" } else { "0" }.into()),
        other => Err(format!(
            "only integers and bools can be formatted as binary, was given {}",
            other.type_name()
        )),
    }
}

fn format_hex(v: &Value, upper: bool) -> Result<String, String> {
    let text = match v {
        Value::String(s) => s.bytes().map(|b| format!("{b:02x}")).collect(),
        Value::Bytes(b) => b.iter().map(|b| format!("{b:02x}")).collect(),
        Value::Int(i) => signed(*i, |u| format!("{u:x}")),
        Value::Uint(u) => format!("{u:x}"),
        other => {
            return Err(format!(
                "only integers, byte buffers, and strings can be formatted as hex, was given {}",
                other.type_name()
            ))
        }
    };
    Ok(if upper { text.to_uppercase() } else { text })
}

fn format_octal(v: &Value) -> Result<String, String> {
    match v {
        Value::Int(i) => Ok(signed(*i, |u| format!("{u:o}"))),
        Value::Uint(u) => Ok(format!("{u:o}")),
        other => Err(format!(
            "octal clause can only be used on integers, was given {}",
            other.type_name()
        )),
    }
}

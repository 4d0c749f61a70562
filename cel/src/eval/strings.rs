//! cel-go's `strings` extension (version 2), the `sets` extension, and Kubernetes' list and
//! regex libraries. Other calls go on to [`super::k8s::call`].

use std::cmp::Ordering;

use super::interp::{Interpreter, R};
use super::value::{compare, equals, Value};
use super::EvalError;

fn err(msg: impl Into<String>) -> EvalError {
    EvalError::new(msg)
}

/// Compiles a Go (RE2) pattern for `matches`.
pub(super) fn regex(pattern: &str) -> Result<regex::Regex, EvalError> {
    super::goregex_rt::compile(pattern, "error parsing regexp: ")
}

/// The regex library's compile error (`find`, `findAll`).
fn library_regex(pattern: &str) -> Result<regex::Regex, EvalError> {
    super::goregex_rt::compile(pattern, "Illegal regex: ")
}

pub(super) fn call(it: &Interpreter<'_>, function: &str, member: bool, args: Vec<Value>) -> R {
    use Value::*;
    match (function, args.as_slice()) {
        ("charAt", [String(s), Int(i)]) if member => char_at(s, *i),
        ("indexOf", [String(s), String(t)]) if member => index_of(s, t, 0, false),
        ("indexOf", [String(s), String(t), Int(i)]) if member => index_of(s, t, *i, false),
        ("lastIndexOf", [String(s), String(t)]) if member => {
            let n = s.chars().count() as i64;
            // An empty needle is found at the end; otherwise search from the last character.
            index_of(s, t, if t.is_empty() { n } else { n - 1 }, true)
        }
        ("lastIndexOf", [String(s), String(t), Int(i)]) if member => index_of(s, t, *i, true),
        ("lowerAscii", [String(s)]) if member => Ok(Value::string(s.to_ascii_lowercase())),
        ("upperAscii", [String(s)]) if member => Ok(Value::string(s.to_ascii_uppercase())),
        ("replace", [String(s), String(a), String(b)]) if member => {
            Ok(Value::string(s.replace(&**a, b)))
        }
        ("replace", [String(s), String(a), String(b), Int(n)]) if member => {
            Ok(Value::string(replace_n(s, a, b, *n)))
        }
        ("split", [String(s), String(sep)]) if member => Ok(split(s, sep, -1)),
        ("split", [String(s), String(sep), Int(n)]) if member => Ok(split(s, sep, *n)),
        ("substring", [String(s), Int(a)]) if member => substring(s, *a, s.chars().count() as i64),
        ("substring", [String(s), Int(a), Int(b)]) if member => substring(s, *a, *b),
        ("trim", [String(s)]) if member => Ok(Value::string(s.trim_matches(is_go_space))),
        ("join", [List(l)]) if member => join(l, ""),
        ("join", [List(l), String(sep)]) if member => join(l, sep),
        ("strings.quote", [String(s)]) => Ok(Value::string(quote(s))),
        ("format", [String(s), List(l)]) if member => super::format::format(s, l),
        ("sets.contains", [List(a), List(b)]) => {
            Ok(Bool(b.iter().all(|x| a.iter().any(|y| equals(x, y)))))
        }
        ("sets.equivalent", [List(a), List(b)]) => Ok(Bool(
            b.iter().all(|x| a.iter().any(|y| equals(x, y)))
                && a.iter().all(|x| b.iter().any(|y| equals(x, y))),
        )),
        ("sets.intersects", [List(a), List(b)]) => {
            Ok(Bool(a.iter().any(|x| b.iter().any(|y| equals(x, y)))))
        }
        ("find", [String(s), String(re)]) if member => {
            let r = library_regex(re)?;
            Ok(Value::string(r.find(s).map(|m| m.as_str()).unwrap_or("")))
        }
        ("findAll", [String(s), String(re)]) if member => find_all(s, re, -1),
        ("findAll", [String(s), String(re), Int(n)]) if member => find_all(s, re, *n),
        ("isSorted", [List(l)]) if member => {
            for w in l.windows(2) {
                if compare(&w[0], &w[1])? == Ordering::Greater {
                    return Ok(Bool(false));
                }
            }
            Ok(Bool(true))
        }
        ("sum", [List(l)]) if member => sum(it, l),
        ("min" | "max", [List(l)]) if member => min_max(l, function == "max"),
        ("indexOf", [List(l), v]) if member => Ok(Int(l
            .iter()
            .position(|x| equals(x, v))
            .map_or(-1, |i| i as i64))),
        ("lastIndexOf", [List(l), v]) if member => Ok(Int(l
            .iter()
            .rposition(|x| equals(x, v))
            .map_or(-1, |i| i as i64))),
        _ => super::k8s::call(it, function, member, args),
    }
}

/// Go's `unicode.IsSpace` (what `strings.TrimSpace` trims).
fn is_go_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{85}' | '\u{A0}'
    ) || (c as u32 > 0xFF && c.is_whitespace())
}

fn char_at(s: &str, i: i64) -> R {
    let n = s.chars().count() as i64;
    if i < 0 || i > n {
        return Err(err(format!("index out of range: {i}")));
    }
    Ok(Value::string(
        s.chars()
            .nth(i as usize)
            .map(String::from)
            .unwrap_or_default(),
    ))
}

/// `indexOf` / `lastIndexOf` in code points, from `offset` forward or backward (cel-go's
/// `indexOfOffset` / `lastIndexOfOffset`, bounds checks included).
fn index_of(s: &str, t: &str, offset: i64, last: bool) -> R {
    if t.is_empty() {
        return Ok(Value::Int(offset));
    }
    let hay: Vec<char> = s.chars().collect();
    let needle: Vec<char> = t.chars().collect();
    let n = hay.len() as i64;
    if offset < 0 || offset >= n {
        return Err(err(format!("index out of range: {offset}")));
    }
    let m = needle.len() as i64;
    let matches_at = |i: i64| hay[i as usize..(i + m) as usize] == needle[..];
    if last {
        let mut i = offset.min(n - m);
        while i >= 0 {
            if matches_at(i) {
                return Ok(Value::Int(i));
            }
            i -= 1;
        }
    } else {
        let mut i = offset;
        while i < n - (m - 1) {
            if matches_at(i) {
                return Ok(Value::Int(i));
            }
            i += 1;
        }
    }
    Ok(Value::Int(-1))
}

/// Go's `strings.Replace(s, a, b, n)` (n < 0: all).
fn replace_n(s: &str, a: &str, b: &str, n: i64) -> String {
    if n < 0 {
        return s.replace(a, b);
    }
    s.replacen(a, b, n as usize)
}

/// Go's `strings.SplitN` (n < 0: all; 0: none).
fn split(s: &str, sep: &str, n: i64) -> Value {
    let parts: Vec<Value> = match n {
        0 => Vec::new(),
        _ if sep.is_empty() => {
            let chars: Vec<String> = s.chars().map(String::from).collect();
            if n > 0 && (n as usize) < chars.len() {
                let mut out: Vec<String> = chars[..n as usize - 1].to_vec();
                out.push(chars[n as usize - 1..].concat());
                out.into_iter().map(Value::string).collect()
            } else {
                chars.into_iter().map(Value::string).collect()
            }
        }
        _ if n < 0 => s.split(sep).map(Value::string).collect(),
        _ => s.splitn(n as usize, sep).map(Value::string).collect(),
    };
    Value::list(parts)
}

fn substring(s: &str, start: i64, end: i64) -> R {
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len() as i64;
    if start < 0 || start > n {
        return Err(err(format!("index out of range: {start}")));
    }
    if end < 0 || end > n {
        return Err(err(format!("index out of range: {end}")));
    }
    if start > end {
        return Err(err(format!(
            "invalid substring range. start: {start}, end: {end}"
        )));
    }
    Ok(Value::string(
        chars[start as usize..end as usize]
            .iter()
            .collect::<String>(),
    ))
}

fn join(l: &[Value], sep: &str) -> R {
    let mut parts = Vec::with_capacity(l.len());
    for v in l {
        match v {
            Value::String(s) => parts.push(s.to_string()),
            _ => return Err(EvalError::no_such_overload()),
        }
    }
    Ok(Value::string(parts.join(sep)))
}

/// `strings.quote`: a double-quoted string with escapes (cel-go's `quote`).
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0B}' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn find_all(s: &str, re: &str, n: i64) -> R {
    let r = library_regex(re)?;
    let found = r.find_iter(s).map(|m| Value::string(m.as_str()));
    let out: Vec<Value> = match n {
        0 => Vec::new(),
        n if n < 0 => found.collect(),
        n => found.take(n as usize).collect(),
    };
    Ok(Value::list(out))
}

/// `sum()`: the list's elements added (the interpreter answers for the empty list, with the
/// zero of the checked element type).
fn sum(it: &Interpreter<'_>, l: &[Value]) -> R {
    let mut iter = l.iter();
    let Some(first) = iter.next() else {
        return Ok(Value::Int(0));
    };
    let mut acc = first.clone();
    for v in iter {
        acc = super::stdlib::call(it, "_+_", false, vec![acc, v.clone()])?;
    }
    Ok(acc)
}

fn min_max(l: &[Value], max: bool) -> R {
    let mut iter = l.iter();
    let Some(first) = iter.next() else {
        let which = if max { "max" } else { "min" };
        return Err(err(format!("{which} called on empty list")));
    };
    let mut best = first;
    for v in iter {
        let o = compare(v, best)?;
        if (max && o == Ordering::Greater) || (!max && o == Ordering::Less) {
            best = v;
        }
    }
    Ok(best.clone())
}

/// Standard base64 (Go's `base64.StdEncoding`, padded), as OpenAPI `byte` strings are.
pub(super) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    };
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|b| **b == b'=').count();
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            let v = if i >= 4 - pad { 0 } else { val(*c)? };
            n = (n << 6) | v;
        }
        let b = n.to_be_bytes();
        out.extend_from_slice(&b[1..4 - pad]);
    }
    Some(out)
}

/// Standard padded base64 (Go's `base64.StdEncoding`).
pub(super) fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

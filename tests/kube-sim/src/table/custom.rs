//! Custom resources: a CRD version's additionalPrinterColumns, evaluated with a JSONPath subset.

use super::columns::{D_AGE, NAME};
use super::fields::{int, s, since, st};
use super::Now;
use chrono::DateTime;
use serde_json::{json, Value};

pub(super) type CustomCol = (String, Vec<Step>);

pub(super) fn custom_columns(spec: &Value) -> (Vec<Value>, Vec<CustomCol>) {
    let listed = spec.as_array().or_else(|| {
        spec.get("additionalPrinterColumns")
            .and_then(Value::as_array)
    });
    let fallback = [json!({"name": "Age", "type": "date", "description": D_AGE,
                           "jsonPath": ".metadata.creationTimestamp"})];
    let columns: &[Value] = match listed {
        Some(c) if !c.is_empty() => c,
        _ => &fallback,
    };
    let mut defs = vec![NAME.to_json()];
    let mut cols = Vec::new();
    for c in columns {
        let path = st(c, "jsonPath");
        let Some(steps) = parse_path(path) else { break };
        let desc = match st(c, "description") {
            "" => format!("Custom resource definition column (in JSONPath format): {path}"),
            d => d.to_string(),
        };
        defs.push(
            json!({"name": st(c, "name"), "type": st(c, "type"), "format": st(c, "format"),
                         "description": desc, "priority": int(c, "priority")}),
        );
        cols.push((st(c, "type").to_string(), steps));
    }
    (defs, cols)
}

pub(super) fn custom_cell(ty: &str, v: Option<&Value>, now: Now) -> Value {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Value::Null;
    };
    match ty {
        "string" => s(go_text(v)),
        "integer" => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        "number" => v.as_f64().map_or(Value::Null, |f| json!(f)),
        "boolean" => v.as_bool().map_or(Value::Null, Value::Bool),
        "date" => match v.as_str() {
            Some("") => s("<unknown>"),
            Some(t) if DateTime::parse_from_rfc3339(t).is_err() => s("<invalid>"),
            Some(_) => s(since(Some(v), now)),
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

/// How a JSONPath result prints as text: strings bare, containers as compact JSON, numbers as
/// Go's `%v` would.
pub(super) fn go_text(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Number(n) if n.is_f64() => go_float(n.as_f64().unwrap_or(0.0)),
        Value::Array(_) | Value::Object(_) => {
            let mut out = String::new();
            go_json(v, &mut out);
            out
        }
        other => other.to_string(),
    }
}

/// Go's `%v` for a float64: shortest round-trip digits, in exponent form (`1e+06`, `1.5e-05`)
/// when the decimal exponent is below -4 or at least 6.
fn go_float(f: f64) -> String {
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        format!(
            "{mantissa}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        )
    }
}

/// Compact JSON with sorted keys and Go's HTML-safe escaping, as encoding/json writes it.
fn go_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(&Value::String((*k).clone()), out);
                out.push(':');
                go_json(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(x, out);
            }
            out.push(']');
        }
        Value::String(x) => {
            let quoted = Value::String(x.clone()).to_string();
            out.push_str(
                &quoted
                    .replace('<', "\\u003c")
                    .replace('>', "\\u003e")
                    .replace('&', "\\u0026")
                    .replace('\u{2028}', "\\u2028")
                    .replace('\u{2029}', "\\u2029"),
            );
        }
        other => out.push_str(&other.to_string()),
    }
}

pub(super) enum Step {
    Key(String),
    Index(i64),
    All,
    /// `[?(@.path)]`, `[?(@.path=="x")]`, `[?(@.path!="x")]`
    Filter(Vec<Step>, Option<(bool, Value)>),
}

pub(super) fn parse_path(src: &str) -> Option<Vec<Step>> {
    let mut p = src.trim();
    if let Some(inner) = p.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        p = inner.trim();
    }
    let p = p.strip_prefix('$').unwrap_or(p);
    let chars: Vec<char> = p.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                match chars.get(i) {
                    Some('.') => return None,
                    Some('*') => {
                        steps.push(Step::All);
                        i += 1;
                    }
                    _ => {
                        let start = i;
                        while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                            i += 1;
                        }
                        if i > start {
                            steps.push(Step::Key(chars[start..i].iter().collect()));
                        }
                    }
                }
            }
            '[' => {
                let close = closing_bracket(&chars, i)?;
                let inner: String = chars[i + 1..close].iter().collect();
                steps.push(parse_bracket(inner.trim())?);
                i = close + 1;
            }
            _ => return None,
        }
    }
    Some(steps)
}

fn closing_bracket(chars: &[char], open: usize) -> Option<usize> {
    let (mut quote, mut depth) = (None, 0i32);
    for (j, &ch) in chars.iter().enumerate().skip(open + 1) {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(ch),
            (None, '(') => depth += 1,
            (None, ')') => depth -= 1,
            (None, ']') if depth == 0 => return Some(j),
            _ => {}
        }
    }
    None
}

fn parse_bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Some(lit) = quoted(inner) {
        return Some(Step::Key(lit));
    }
    if let Some(filter) = inner.strip_prefix("?(").and_then(|x| x.strip_suffix(')')) {
        let (lhs, cmp) = match (filter.split_once("=="), filter.split_once("!=")) {
            (Some((l, r)), _) => (l, Some((true, r))),
            (None, Some((l, r))) => (l, Some((false, r))),
            (None, None) => (filter, None),
        };
        let path = parse_path(lhs.trim().strip_prefix('@')?)?;
        let cmp = match cmp {
            None => None,
            Some((eq, r)) => Some((eq, literal(r.trim())?)),
        };
        return Some(Step::Filter(path, cmp));
    }
    inner.parse().ok().map(Step::Index)
}

fn quoted(x: &str) -> Option<String> {
    let b = x.as_bytes();
    let ok = b.len() >= 2 && (b[0] == b'\'' || b[0] == b'"') && b[b.len() - 1] == b[0];
    ok.then(|| x[1..x.len() - 1].to_string())
}

fn literal(x: &str) -> Option<Value> {
    if let Some(q) = quoted(x) {
        return Some(Value::String(q));
    }
    match x {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        _ => x.parse::<f64>().ok().map(|f| json!(f)),
    }
}

pub(super) fn eval<'a>(root: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut cur = vec![root];
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Key(k) => next.extend(v.get(k.as_str())),
                Step::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let idx = if *i < 0 {
                            (a.len() as i64).saturating_add(*i)
                        } else {
                            *i
                        };
                        next.extend(usize::try_from(idx).ok().and_then(|ix| a.get(ix)));
                    }
                }
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter(path, cmp) => {
                    for el in v.as_array().map_or(&[][..], Vec::as_slice) {
                        let found = eval(el, path);
                        let keep = match cmp {
                            None => !found.is_empty(),
                            Some((eq, lit)) => found.first().is_some_and(|x| same(x, lit) == *eq),
                        };
                        if keep {
                            next.push(el);
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

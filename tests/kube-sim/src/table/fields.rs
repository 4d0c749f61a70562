//! Helpers shared by the printers: field access over plain JSON, labels and selectors,
//! human-readable ages and quantities.

use super::Now;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Map, Value};

pub(super) fn s(x: impl Into<String>) -> Value {
    Value::String(x.into())
}

/// The value at a dotted path; JSON null reads as absent.
pub(super) fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for key in path.split('.') {
        cur = cur.get(key)?;
    }
    (!cur.is_null()).then_some(cur)
}

pub(super) fn st<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn or<'a>(x: &'a str, default: &'a str) -> &'a str {
    if x.is_empty() {
        default
    } else {
        x
    }
}

pub(super) fn num(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .unwrap_or(0)
}

pub(super) fn opt_int(v: &Value, path: &str) -> Option<i64> {
    at(v, path).filter(|x| x.is_number()).map(num)
}

pub(super) fn int(v: &Value, path: &str) -> i64 {
    opt_int(v, path).unwrap_or(0)
}

pub(super) fn flag(v: &Value, path: &str) -> bool {
    at(v, path).and_then(Value::as_bool).unwrap_or(false)
}

pub(super) fn list<'a>(v: &'a Value, path: &str) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(super) fn map_len(v: &Value, path: &str) -> usize {
    at(v, path).and_then(Value::as_object).map_or(0, Map::len)
}

pub(super) fn name(o: &Value) -> &str {
    st(o, "metadata.name")
}

pub(super) fn annotation<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    at(o, "metadata.annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// spec.replicas, which defaulting sets to 1 for every workload kind.
pub(super) fn replicas(o: &Value) -> i64 {
    opt_int(o, "spec.replicas").unwrap_or(1)
}

pub(super) fn int_or_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(x) => Some(x.clone()),
        n @ Value::Number(_) => Some(num(n).to_string()),
        _ => None,
    }
}

/// Names and images of the containers at `path`, each joined by commas.
pub(super) fn containers(o: &Value, path: &str) -> (Value, Value) {
    let cs = list(o, path);
    let names: Vec<&str> = cs.iter().map(|c| st(c, "name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| st(c, "image")).collect();
    (s(names.join(",")), s(images.join(",")))
}

pub(super) fn age(o: &Value, now: Now) -> Value {
    s(since(at(o, "metadata.creationTimestamp"), now))
}

// ---------------------------------------------------------------------------------------------
// Labels and selectors

/// `k=v` pairs sorted by key, or `<none>`.
pub(super) fn format_labels(labels: Option<&Value>) -> String {
    let mut pairs: Vec<(&String, &str)> = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A LabelSelector as `kubectl` writes it (`a=b,c in (d,e),!f`), requirements sorted by key;
/// `None` for a selector the API would reject (unknown operator, missing or extra values).
pub(super) fn selector_string(sel: Option<&Value>) -> Option<String> {
    let Some(sel) = sel else {
        return Some(String::new());
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(ml) = sel.get("matchLabels").filter(|m| !m.is_null()) {
        for (k, v) in ml.as_object()? {
            reqs.push((k.clone(), format!("{k}={}", v.as_str()?)));
        }
    }
    for e in list(sel, "matchExpressions") {
        let key = st(e, "key");
        let mut values: Vec<&str> = list(e, "values").iter().filter_map(Value::as_str).collect();
        values.sort_unstable();
        let rendered = match st(e, "operator") {
            "In" | "NotIn" if values.is_empty() => return None,
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" | "DoesNotExist" if !values.is_empty() => return None,
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        reqs.push((key.to_string(), rendered));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        reqs.into_iter()
            .map(|(_, r)| r)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `selector_string` with the printer's placeholders: `<none>` when empty, `<error>` when invalid.
pub(super) fn format_label_selector(sel: Option<&Value>) -> String {
    match selector_string(sel) {
        None => "<error>".into(),
        Some(x) if x.is_empty() => "<none>".into(),
        Some(x) => x,
    }
}

// ---------------------------------------------------------------------------------------------
// Time

const NANOS: i128 = 1_000_000_000;

/// An RFC 3339 timestamp; absent, unparsable and Go's zero time (year 1) all read as `None`.
pub(super) fn time(v: Option<&Value>) -> Option<Now> {
    let t = DateTime::parse_from_rfc3339(v?.as_str()?)
        .ok()?
        .with_timezone(&Utc);
    (t.timestamp() != -62_135_596_800).then_some(t)
}

/// How long ago `v` was, or `<unknown>` without a timestamp.
pub(super) fn since(v: Option<&Value>, now: Now) -> String {
    time(v).map_or_else(|| "<unknown>".to_string(), |t| human(now - t))
}

pub(super) fn human(d: TimeDelta) -> String {
    human_duration(
        d.num_nanoseconds()
            .map_or_else(|| i128::from(d.num_seconds()) * NANOS, i128::from),
    )
}

/// A duration with two or three significant figures: `0s`, `90s`, `5m2s`, `3h4m`, `3d4h`, `2y5d`.
fn human_duration(ns: i128) -> String {
    let secs = ns / NANOS;
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

// ---------------------------------------------------------------------------------------------
// Quantities

/// A resource quantity in canonical form (`1024Mi` -> `1Gi`, `1.5` -> `1500m`, `2000` -> `2k`);
/// `missing` when absent; the raw text when it does not parse.
pub(super) fn quantity(v: Option<&Value>, missing: &str) -> String {
    let raw = match v {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Null) | None => return missing.to_string(),
        Some(other) => return other.to_string(),
    };
    match rkcm_gocompat::quantity::Quantity::from_api(&raw) {
        Ok(quantity) => quantity.to_string(),
        Err(_) => raw,
    }
}

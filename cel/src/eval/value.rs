//! Runtime values (cel-go's `common/types`): JSON conversion, heterogeneous equality and
//! ordering, and type names.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::k8s::{AuthzValue, UrlValue};
use super::k8s_quantity::QuantityValue;
use super::EvalError;

/// A map key: CEL allows bool, int, uint and string keys.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MapKey {
    Bool(bool),
    Int(i64),
    Uint(u64),
    String(Arc<str>),
}

impl MapKey {
    /// The key as a value.
    pub fn to_value(&self) -> Value {
        match self {
            MapKey::Bool(b) => Value::Bool(*b),
            MapKey::Int(i) => Value::Int(*i),
            MapKey::Uint(u) => Value::Uint(*u),
            MapKey::String(s) => Value::String(s.clone()),
        }
    }
}

/// A point in time: seconds since the Unix epoch and nanoseconds (0..1e9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp {
    pub seconds: i64,
    pub nanos: u32,
}

impl Timestamp {
    pub(crate) fn from_nanos(total: i128) -> Timestamp {
        let seconds = total.div_euclid(1_000_000_000) as i64;
        let nanos = total.rem_euclid(1_000_000_000) as u32;
        Timestamp { seconds, nanos }
    }

    pub(crate) fn total_nanos(&self) -> i128 {
        i128::from(self.seconds) * 1_000_000_000 + i128::from(self.nanos)
    }
}

/// Kubernetes' object-typed values (URLs, quantities, authorizer checks).
#[derive(Clone, Debug)]
pub enum Object {
    Url(Arc<UrlValue>),
    Quantity(Arc<QuantityValue>),
    Authz(Arc<AuthzValue>),
}

impl Object {
    fn type_name(&self) -> &'static str {
        match self {
            Object::Url(_) => "kubernetes.URL",
            Object::Quantity(_) => "kubernetes.Quantity",
            Object::Authz(a) => a.type_name(),
        }
    }
}

/// A CEL value.
#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
    List(Arc<Vec<Value>>),
    Map(Arc<BTreeMap<MapKey, Value>>),
    Timestamp(Timestamp),
    /// A duration in nanoseconds (Go's `time.Duration`).
    Duration(i64),
    /// A type value, by its CEL name (`int`, `list`, `google.protobuf.Timestamp`, ...).
    Type(Arc<str>),
    Optional(Option<Box<Value>>),
    Object(Object),
}

impl Value {
    pub(crate) fn string(s: impl Into<Arc<str>>) -> Value {
        Value::String(s.into())
    }

    pub(crate) fn list(v: Vec<Value>) -> Value {
        Value::List(Arc::new(v))
    }

    /// A JSON value as Kubernetes' unstructured conversion gives it without a schema: numbers
    /// without a fraction are ints (uints above `i64::MAX`), others doubles.
    pub fn from_json(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::Uint(u)
                } else {
                    Value::Double(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(s) => Value::string(s.as_str()),
            serde_json::Value::Array(a) => Value::list(a.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(o) => Value::Map(Arc::new(
                o.iter()
                    .map(|(k, v)| (MapKey::String(k.as_str().into()), Value::from_json(v)))
                    .collect(),
            )),
        }
    }

    /// The value as JSON (cel-go's `ConvertToNative` to `structpb.Value`): timestamps and
    /// durations as their strings, bytes as base64; type values, optionals, objects, maps
    /// with non-string keys and non-finite doubles give `None`.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        use serde_json::Value as J;
        Some(match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Uint(u) => J::from(*u),
            Value::Double(d) => J::Number(serde_json::Number::from_f64(*d)?),
            Value::String(s) => J::String(s.to_string()),
            Value::List(l) => J::Array(l.iter().map(Value::to_json).collect::<Option<_>>()?),
            Value::Map(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m.iter() {
                    let MapKey::String(k) = k else { return None };
                    out.insert(k.to_string(), v.to_json()?);
                }
                J::Object(out)
            }
            Value::Timestamp(t) => J::String(super::stdlib::format_timestamp(t)),
            Value::Duration(d) => J::String(super::stdlib::format_duration(*d)),
            Value::Bytes(b) => J::String(super::strings::base64_encode(b)),
            Value::Type(_) | Value::Optional(_) | Value::Object(_) => return None,
        })
    }

    /// cel-go's runtime type name of the value.
    pub fn type_name(&self) -> &str {
        match self {
            Value::Null => "null_type",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Uint(_) => "uint",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Timestamp(_) => "google.protobuf.Timestamp",
            Value::Duration(_) => "google.protobuf.Duration",
            Value::Type(_) => "type",
            Value::Optional(_) => "optional_type",
            Value::Object(o) => o.type_name(),
        }
    }

    /// The value as a map key, if its type can be one.
    pub(crate) fn to_key(&self) -> Option<MapKey> {
        Some(match self {
            Value::Bool(b) => MapKey::Bool(*b),
            Value::Int(i) => MapKey::Int(*i),
            Value::Uint(u) => MapKey::Uint(*u),
            Value::String(s) => MapKey::String(s.clone()),
            _ => return None,
        })
    }
}

/// Looks a key up in a map with heterogeneous numeric keys (cel-go's `baseMap.Find`):
/// `Ok(None)` when absent, an error for a key type maps cannot have.
pub(crate) fn map_find<'a>(
    map: &'a BTreeMap<MapKey, Value>,
    key: &Value,
) -> Result<Option<&'a Value>, EvalError> {
    let numeric = |i: Option<i64>, u: Option<u64>| {
        i.and_then(|i| map.get(&MapKey::Int(i)))
            .or_else(|| u.and_then(|u| map.get(&MapKey::Uint(u))))
    };
    Ok(match key {
        Value::Int(i) => numeric(Some(*i), u64::try_from(*i).ok()),
        Value::Uint(u) => numeric(i64::try_from(*u).ok(), Some(*u)),
        Value::Double(d) => {
            if d.fract() != 0.0 || !d.is_finite() {
                None
            } else {
                let i = (*d >= -9.223_372_036_854_776e18 && *d < 9.223_372_036_854_776e18)
                    .then_some(*d as i64);
                let u = (*d >= 0.0 && *d < 1.844_674_407_370_955_2e19).then_some(*d as u64);
                numeric(i, u)
            }
        }
        Value::Bool(_) | Value::String(_) => key.to_key().and_then(|k| map.get(&k)),
        _ => return Err(EvalError::no_such_overload()),
    })
}

/// Formats a key as cel-go's `%v` of the value does in `no such key: %v`.
pub(crate) fn key_text(key: &Value) -> String {
    match key {
        Value::String(s) => s.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => super::stdlib::format_double(*d),
        other => other.type_name().to_string(),
    }
}

fn cmp_int_double(i: i64, d: f64) -> Option<Ordering> {
    if d.is_nan() {
        return None;
    }
    if d < -9.223_372_036_854_776e18 {
        return Some(Ordering::Greater);
    }
    if d >= 9.223_372_036_854_776e18 {
        return Some(Ordering::Less);
    }
    // Compare as cel-go does: the int converted to a double.
    (i as f64).partial_cmp(&d)
}

fn cmp_uint_double(u: u64, d: f64) -> Option<Ordering> {
    if d.is_nan() {
        return None;
    }
    if d < 0.0 {
        return Some(Ordering::Greater);
    }
    if d >= 1.844_674_407_370_955_2e19 {
        return Some(Ordering::Less);
    }
    (u as f64).partial_cmp(&d)
}

fn cmp_int_uint(i: i64, u: u64) -> Ordering {
    match u64::try_from(i) {
        Ok(iu) => iu.cmp(&u),
        Err(_) => Ordering::Less,
    }
}

/// Ordering of two values (`<`, `<=`, ...), with cross-type numeric comparison. `None` when the
/// types cannot be ordered; NaN gives an error as in cel-go.
pub(crate) fn compare(a: &Value, b: &Value) -> Result<Ordering, EvalError> {
    use Value::*;
    let nan = || EvalError::new("NaN values cannot be ordered");
    let o = match (a, b) {
        (Int(x), Int(y)) => x.cmp(y),
        (Uint(x), Uint(y)) => x.cmp(y),
        (Double(x), Double(y)) => x.partial_cmp(y).ok_or_else(nan)?,
        (Int(x), Uint(y)) => cmp_int_uint(*x, *y),
        (Uint(x), Int(y)) => cmp_int_uint(*y, *x).reverse(),
        (Int(x), Double(y)) => cmp_int_double(*x, *y).ok_or_else(nan)?,
        (Double(x), Int(y)) => cmp_int_double(*y, *x).ok_or_else(nan)?.reverse(),
        (Uint(x), Double(y)) => cmp_uint_double(*x, *y).ok_or_else(nan)?,
        (Double(x), Uint(y)) => cmp_uint_double(*y, *x).ok_or_else(nan)?.reverse(),
        (Bool(x), Bool(y)) => x.cmp(y),
        (String(x), String(y)) => x.cmp(y),
        (Bytes(x), Bytes(y)) => x.cmp(y),
        (Timestamp(x), Timestamp(y)) => x.cmp(y),
        (Duration(x), Duration(y)) => x.cmp(y),
        _ => return Err(EvalError::no_such_overload()),
    };
    Ok(o)
}

/// cel-go's heterogeneous equality: values of different types are unequal, except numbers,
/// which compare by value; lists and maps compare deeply (an element error is an error).
pub(crate) fn equals(a: &Value, b: &Value) -> bool {
    use Value::*;
    match (a, b) {
        (Null, Null) => true,
        (Int(_) | Uint(_) | Double(_), Int(_) | Uint(_) | Double(_)) => {
            matches!(compare(a, b), Ok(Ordering::Equal))
        }
        (Bool(x), Bool(y)) => x == y,
        (String(x), String(y)) => x == y,
        (Bytes(x), Bytes(y)) => x == y,
        (Timestamp(x), Timestamp(y)) => x == y,
        (Duration(x), Duration(y)) => x == y,
        (Type(x), Type(y)) => x == y,
        (List(x), List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| equals(a, b))
        }
        (Map(x), Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| matches!(map_find(y, &k.to_value()), Ok(Some(w)) if equals(v, w)))
        }
        (Optional(x), Optional(y)) => match (x, y) {
            (None, None) => true,
            (Some(x), Some(y)) => equals(x, y),
            _ => false,
        },
        (Object(super::value::Object::Url(x)), Object(super::value::Object::Url(y))) => {
            x.text == y.text
        }
        (Object(super::value::Object::Quantity(x)), Object(super::value::Object::Quantity(y))) => {
            x.quantity.cmp_value(&y.quantity) == Ordering::Equal
        }
        _ => false,
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        // Same-type structural equality for tests; CEL's `==` is `equals`.
        self.type_name() == other.type_name() && equals(self, other)
            || matches!((self, other), (Value::Double(a), Value::Double(b)) if a.is_nan() && b.is_nan())
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Uint(u) => write!(f, "{u}u"),
            Value::Double(d) => f.write_str(&super::stdlib::format_double(*d)),
            Value::String(s) => write!(f, "{s:?}"),
            Value::Bytes(b) => write!(f, "b{:?}", String::from_utf8_lossy(b)),
            Value::List(l) => {
                f.write_str("[")?;
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Map(m) => {
                f.write_str("{")?;
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {v}", k.to_value())?;
                }
                f.write_str("}")
            }
            Value::Timestamp(t) => write!(f, "timestamp({:?})", super::stdlib::format_timestamp(t)),
            Value::Duration(d) => write!(f, "duration({:?})", super::stdlib::format_duration(*d)),
            Value::Type(t) => f.write_str(t),
            Value::Optional(None) => f.write_str("optional.none()"),
            Value::Optional(Some(v)) => write!(f, "optional.of({v})"),
            Value::Object(o) => f.write_str(o.type_name()),
        }
    }
}

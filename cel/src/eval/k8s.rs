//! Kubernetes' URL and authorizer libraries (`k8s.io/apiserver/pkg/cel/library/urls.go`,
//! `authz.go`); quantities are in [`super::k8s_quantity`].

use std::collections::BTreeMap;
use std::sync::Arc;

use rkcm_gocompat::gofmt::quote;

use super::interp::{Interpreter, R};
use super::value::{MapKey, Object, Value};
use super::EvalError;

/// A URL parsed as Go's `url.Parse` splits it (after `url.ParseRequestURI` accepted it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlValue {
    pub text: String,
    pub scheme: String,
    /// Host and port (`host:port`, `[v6]:port`), without user info.
    pub host: String,
    /// The path as written (escaped).
    pub path: String,
    pub raw_query: String,
}

impl UrlValue {
    /// `url.ParseRequestURI` (an absolute URL `scheme:...` or an absolute path) then
    /// `url.Parse` (whose parts the getters return; the fragment is dropped). Go's checks of
    /// control characters, `%` escapes in the path and the host, host characters and ports
    /// are made; user info is not validated.
    pub fn parse(text: &str) -> Option<UrlValue> {
        if text.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return None;
        }
        let (rest, _fragment) = text.split_once('#').unwrap_or((text, ""));
        if rest.is_empty() {
            return None;
        }
        let (scheme, rest) = match rest.find(':') {
            Some(0) => return None,
            Some(i)
                if rest[..i].starts_with(|c: char| c.is_ascii_alphabetic())
                    && rest[..i]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
            {
                (rest[..i].to_ascii_lowercase(), &rest[i + 1..])
            }
            _ => (String::new(), rest),
        };
        let (rest, raw_query) = match rest.strip_suffix('?') {
            Some(r) if !r.contains('?') => (r, ""),
            _ => rest.split_once('?').unwrap_or((rest, "")),
        };
        if !rest.starts_with('/') {
            // `scheme:opaque` has neither host nor path; a relative reference is invalid.
            return (!scheme.is_empty()).then(|| UrlValue {
                text: text.to_string(),
                scheme,
                host: String::new(),
                path: String::new(),
                raw_query: raw_query.to_string(),
            });
        }
        let (host, path) = match rest.strip_prefix("//") {
            // `url.Parse` (not a request URI) reads an authority after `//` without a scheme
            // too, unless `///` starts the path.
            Some(auth) if !scheme.is_empty() || !auth.starts_with('/') => {
                let end = auth.find('/').unwrap_or(auth.len());
                let authority = &auth[..end];
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                (host.to_string(), &auth[end..])
            }
            _ => (String::new(), rest),
        };
        if !valid_host(&host) || unescape_path(path).is_none() {
            return None;
        }
        Some(UrlValue {
            text: text.to_string(),
            scheme,
            host,
            path: escaped_path(path),
            raw_query: raw_query.to_string(),
        })
    }

    fn hostname(&self) -> &str {
        let h = &self.host;
        if let Some(v6) = h.strip_prefix('[') {
            return v6.split_once(']').map_or(v6, |(a, _)| a);
        }
        h.rsplit_once(':').map_or(h, |(a, _)| a)
    }

    fn port(&self) -> &str {
        let h = &self.host;
        let after = match h.rfind(']') {
            Some(i) => &h[i + 1..],
            None => h,
        };
        after.rsplit_once(':').map_or("", |(_, p)| p)
    }
}

fn valid_host(host: &str) -> bool {
    let port_ok = |p: &str| p.bytes().all(|c| c.is_ascii_digit());
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        match v6.split_once(']') {
            Some((addr, rest)) => (addr, rest),
            None => return false,
        }
    } else {
        match host.rfind(':') {
            Some(i) => (&host[..i], &host[i..]),
            None => (host, ""),
        }
    };
    let port_valid = port.is_empty() || port.strip_prefix(':').is_some_and(port_ok);
    // Go's host characters: unreserved, sub-delimiters, `:`, `<`, `>`, `"` and escapes.
    let chars_valid = name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:<>\"%".contains(&c))
        && percent_valid(name);
    port_valid && chars_valid
}

/// Whether every `%` starts a two-digit hex escape.
fn percent_valid(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let ok = b
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
            if !ok {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// Go's `unescape(path, encodePath)`: `None` for a malformed escape.
fn unescape_path(s: &str) -> Option<Vec<u8>> {
    if !percent_valid(s) {
        return None;
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Go's `shouldEscape(c, encodePath)`.
fn path_should_escape(c: u8) -> bool {
    !(c.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&c))
}

/// Go's `URL.EscapedPath`: the path as written when it is a valid encoding, else the decoded
/// path escaped again.
fn escaped_path(raw: &str) -> String {
    let valid = raw
        .bytes()
        .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !path_should_escape(c));
    if valid {
        return raw.to_string();
    }
    let decoded = unescape_path(raw).unwrap_or_default();
    let mut out = String::with_capacity(decoded.len() * 3);
    for c in decoded {
        if path_should_escape(c) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(char::from(c));
        }
    }
    out
}

/// Go's `url.QueryUnescape`.
fn unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Go's `url.ParseQuery`, skipping malformed pairs.
fn query_map(raw: &str) -> Value {
    let mut map: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for pair in raw.split(['&']).filter(|p| !p.is_empty()) {
        if pair.contains(';') {
            continue;
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if let (Some(k), Some(v)) = (unescape(k), unescape(v)) {
            map.entry(k).or_default().push(Value::string(v));
        }
    }
    Value::Map(Arc::new(
        map.into_iter()
            .map(|(k, v)| (MapKey::String(k.into()), Value::list(v)))
            .collect(),
    ))
}

/// What an authorization check asks (a `SubjectAccessReview`'s attributes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthzCheck {
    /// `(namespace, name)` when asked for a service account (`authorizer.serviceAccount`),
    /// else the request's user.
    pub service_account: Option<(String, String)>,
    /// A non-resource path (`authorizer.path(...)`), or `None` for a resource check.
    pub path: Option<String>,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub verb: String,
}

/// An authorizer's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthzDecision {
    pub allowed: bool,
    pub reason: String,
    /// The authorizer's error, if it failed.
    pub error: Option<String>,
}

/// The authorizer the caller provides (the API server's authorizer for the request's user).
pub trait Authorizer: Send + Sync {
    fn authorize(&self, check: &AuthzCheck) -> AuthzDecision;
}

/// The authorizer library's values.
#[derive(Clone)]
pub enum AuthzValue {
    Authorizer(Arc<dyn Authorizer>, AuthzCheck),
    PathCheck(Arc<dyn Authorizer>, AuthzCheck),
    GroupCheck(Arc<dyn Authorizer>, AuthzCheck),
    ResourceCheck(Arc<dyn Authorizer>, AuthzCheck),
    Decision(AuthzDecision),
}

impl std::fmt::Debug for AuthzValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.type_name())
    }
}

impl AuthzValue {
    pub(super) fn type_name(&self) -> &'static str {
        match self {
            AuthzValue::Authorizer(..) => "kubernetes.authorization.Authorizer",
            AuthzValue::PathCheck(..) => "kubernetes.authorization.PathCheck",
            AuthzValue::GroupCheck(..) => "kubernetes.authorization.GroupCheck",
            AuthzValue::ResourceCheck(..) => "kubernetes.authorization.ResourceCheck",
            AuthzValue::Decision(_) => "kubernetes.authorization.Decision",
        }
    }
}

pub(super) fn authorizer_value(a: Arc<dyn Authorizer>, sa: Option<(String, String)>) -> Value {
    let check = AuthzCheck {
        service_account: sa,
        ..AuthzCheck::default()
    };
    authz(AuthzValue::Authorizer(a, check))
}

fn authz(v: AuthzValue) -> Value {
    Value::Object(Object::Authz(Arc::new(v)))
}

fn authz_call(function: &str, recv: &AuthzValue, args: &[Value]) -> Option<R> {
    use AuthzValue as A;
    let s = |i: usize| match args.get(i) {
        Some(Value::String(s)) => Some(s.to_string()),
        _ => None,
    };
    let v = match (function, recv) {
        ("path", A::Authorizer(_, _)) | ("resource", A::GroupCheck(_, _))
            if s(0)?.trim().is_empty() =>
        {
            let what = if function == "path" {
                "path"
            } else {
                "resource"
            };
            return Some(Err(EvalError::new(format!("{what} must not be empty"))));
        }
        ("path", A::Authorizer(a, c)) => A::PathCheck(
            a.clone(),
            AuthzCheck {
                path: Some(s(0)?),
                ..c.clone()
            },
        ),
        ("group", A::Authorizer(a, c)) => A::GroupCheck(
            a.clone(),
            AuthzCheck {
                group: s(0)?,
                ..c.clone()
            },
        ),
        ("serviceAccount", A::Authorizer(a, _)) => {
            let (namespace, name) = (s(0)?, s(1)?);
            if !rkcm_gocompat::validation::is_dns1123_subdomain(&name).is_empty() {
                return Some(Err(EvalError::new("Invalid service account name")));
            }
            if !is_dns1123_label(&namespace) {
                return Some(Err(EvalError::new("Invalid service account namespace")));
            }
            return Some(Ok(authorizer_value(a.clone(), Some((namespace, name)))));
        }
        ("resource", A::GroupCheck(a, c)) => A::ResourceCheck(
            a.clone(),
            AuthzCheck {
                resource: s(0)?,
                ..c.clone()
            },
        ),
        ("subresource" | "namespace" | "name", A::ResourceCheck(a, c)) => {
            let mut c = c.clone();
            let v = s(0)?;
            match function {
                "subresource" => c.subresource = v,
                "namespace" => c.namespace = v,
                _ => c.name = v,
            }
            A::ResourceCheck(a.clone(), c)
        }
        ("check", A::PathCheck(a, c) | A::ResourceCheck(a, c)) => {
            let c = AuthzCheck {
                verb: s(0)?,
                ..c.clone()
            };
            A::Decision(a.authorize(&c))
        }
        ("allowed", A::Decision(d)) => return Some(Ok(Value::Bool(d.allowed))),
        ("reason", A::Decision(d)) => return Some(Ok(Value::string(d.reason.as_str()))),
        ("errored", A::Decision(d)) => return Some(Ok(Value::Bool(d.error.is_some()))),
        ("error", A::Decision(d)) => {
            return Some(Ok(Value::string(d.error.clone().unwrap_or_default())))
        }
        _ => return None,
    };
    Some(Ok(authz(v)))
}

/// Kubernetes' `IsDNS1123Label` (what `ValidateNamespaceName` checks).
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

pub(super) fn call(_it: &Interpreter<'_>, function: &str, member: bool, args: Vec<Value>) -> R {
    use Value::String as S;
    match (function, args.as_slice()) {
        ("url", [S(s)]) => UrlValue::parse(s)
            .map(|u| Value::Object(Object::Url(Arc::new(u))))
            .ok_or_else(|| {
                EvalError::new(format!(
                    "URL parse error during conversion from string: parse {}: invalid URI for request",
                    quote(s)
                ))
            }),
        ("isURL", [S(s)]) => Ok(Value::Bool(UrlValue::parse(s).is_some())),
        (_, [Value::Object(Object::Url(u))]) if member => Ok(match function {
            "getScheme" => Value::string(u.scheme.as_str()),
            "getHost" => Value::string(u.host.as_str()),
            "getHostname" => Value::string(u.hostname()),
            "getPort" => Value::string(u.port()),
            "getEscapedPath" => Value::string(u.path.as_str()),
            "getQuery" => query_map(&u.raw_query),
            _ => return Err(EvalError::no_such_overload()),
        }),
        (_, [Value::Object(Object::Authz(a)), rest @ ..]) if member => {
            authz_call(function, a, rest).unwrap_or_else(|| Err(EvalError::no_such_overload()))
        }
        _ => super::k8s_quantity::call(function, member, &args),
    }
}

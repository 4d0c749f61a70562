//! One API request as the handlers see it (after TLS, authentication and body collection),
//! the answer they give, and the parsing of a resource path into its parts, the way
//! kube-apiserver's RequestInfo does it.

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

/// An authenticated client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// `user.Info`'s extra attributes (only impersonation sets them here).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }

    /// Who an unauthenticated request is, as kube-apiserver's anonymous authenticator says.
    pub fn anonymous() -> User {
        User {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..User::default()
        }
    }
}

pub struct ApiRequest {
    pub method: http::Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub accept: String,
    pub content_type: String,
    pub user_agent: String,
    pub body: Bytes,
    pub user: Option<User>,
}

impl ApiRequest {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter as the server decodes it: present and not `0` or `false`.
    pub fn flag(&self, key: &str) -> bool {
        self.param(key).is_some_and(crate::query_options::go_bool)
    }

    /// What representation the client asked for in `Accept`.
    pub fn wants(&self) -> Representation {
        let a = &self.accept;
        for part in a.split(',') {
            let p = part.replace(' ', "");
            if p.contains("as=Table") && p.contains("g=meta.k8s.io") {
                return Representation::Table;
            }
            if p.contains("as=PartialObjectMetadata") && p.contains("g=meta.k8s.io") {
                return Representation::Metadata;
            }
            if p.starts_with("application/json") || p.starts_with("*/*") || p.is_empty() {
                return Representation::Object;
            }
        }
        if a.contains("application/vnd.kubernetes.protobuf")
            && !a.contains("json")
            && !a.contains("*/*")
        {
            return Representation::Unsupported;
        }
        Representation::Object
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Representation {
    Object,
    Metadata,
    Table,
    Unsupported,
}

pub enum Body {
    Json(Value),
    /// A raw body with its content type (metrics, plain health answers).
    Raw(Bytes, &'static str),
    /// A watch: each item is one JSON-encoded event line.
    Stream(mpsc::Receiver<Bytes>),
}

pub struct ApiResponse {
    pub code: u16,
    pub body: Body,
    pub content_type: Option<String>,
    pub headers: Vec<(String, String)>,
}

impl ApiResponse {
    pub fn json(code: u16, v: Value) -> Self {
        ApiResponse {
            code,
            body: Body::Json(v),
            content_type: None,
            headers: Vec::new(),
        }
    }

    pub fn text(code: u16, s: &str) -> Self {
        ApiResponse {
            code,
            body: Body::Raw(Bytes::from(s.to_string()), "text/plain; charset=utf-8"),
            content_type: None,
            headers: Vec::new(),
        }
    }

    pub fn header(mut self, k: &str, v: String) -> Self {
        self.headers.push((k.to_string(), v));
        self
    }
}

/// The parts of a resource path (`/api/v1/namespaces/ns/pods/name/status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// `None` when the path names no resource (discovery paths, or too many segments).
pub fn parse_resource_path(path: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return None,
    };
    if rest.is_empty() || rest.iter().any(|s| s.is_empty()) {
        return None;
    }
    let mut rest: Vec<String> = rest.iter().map(|s| percent_decode(s)).collect();
    let mut namespace = None;
    if rest[0] == "namespaces" && rest.len() > 1 {
        namespace = Some(rest[1].clone());
        if rest.len() > 2 && rest[2] != "status" && rest[2] != "finalize" {
            rest.drain(0..2);
        } else {
            // The namespace object itself (and its status/finalize subresources).
            namespace = None;
        }
    }
    if rest.len() > 3 {
        return None;
    }
    Some(ResourcePath {
        group,
        version,
        namespace,
        resource: rest[0].clone(),
        name: rest.get(1).cloned(),
        subresource: rest.get(2).cloned(),
    })
}

pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(kv), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_paths_parse_like_request_info() {
        let p = parse_resource_path("/api/v1/namespaces/ns/pods/p/status").unwrap();
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.resource.as_str(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            (Some("ns"), "pods", Some("p"), Some("status"))
        );
        let p = parse_resource_path("/api/v1/namespaces/ns").unwrap();
        assert_eq!(
            (p.namespace, p.resource.as_str(), p.name.as_deref()),
            (None, "namespaces", Some("ns"))
        );
        let p = parse_resource_path("/api/v1/namespaces/ns/finalize").unwrap();
        assert_eq!(p.subresource.as_deref(), Some("finalize"));
        let p = parse_resource_path("/apis/apps/v1/deployments").unwrap();
        assert_eq!(
            (p.group.as_str(), p.namespace, p.name),
            ("apps", None, None)
        );
        assert!(parse_resource_path("/apis/apps/v1/namespaces/a/deployments/b/scale/x").is_none());
    }

    #[test]
    fn queries_are_percent_decoded() {
        let q = parse_query(Some("labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1"));
        assert_eq!(q[0].1, "app=web,tier in (a)");
        assert_eq!(q[1], ("watch".into(), "1".into()));
    }
}

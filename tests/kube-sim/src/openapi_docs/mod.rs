//! `/openapi/v2` and `/openapi/v3` as a v1.29 kube-apiserver serves them, built from the
//! recorded definitions (`rkcm-openapi`, descriptions stripped) for what the registry serves:
//! the v3 index (`{"paths": {"apis/apps/v1": {"serverRelativeURL": ".../apis/apps/v1?hash=H"}}}`),
//! one v3 document per group version (paths and `components.schemas`), custom resources'
//! definitions built from their CRDs, and the Swagger 2.0 document (JSON or protobuf).
//!
//! HTTP behaviour follows kube-openapi's handlers behind kube-aggregator: the index is served
//! without an ETag (and, as upstream's content sniffing makes it, as `text/plain`); a document
//! carries `ETag` (the SHA-512 of its JSON, upper-case hex, as in the index's `hash`),
//! answers `If-None-Match` with 304, redirects (301) a stale `?hash=` to the current one and
//! marks a matching one `Cache-Control: public, immutable`; an unknown group version is a bare
//! 404. Differences: v3 documents are JSON only (a client accepting nothing but protobuf gets
//! 406), nothing is gzip-compressed, and `If-Modified-Since` and ranges are not honoured.

mod catalog;
mod paths;
mod proto;
mod v2;
mod v3;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::{json, Value};
use sha2::{Digest, Sha512};

use crate::api::Sim;
use crate::request::{ApiResponse, Body};

use catalog::Catalog;

const V2_PROTOBUF: &str = "com.github.proto-openapi.spec.v2.v1.0+protobuf";
const V2_PROTOBUF_DEPRECATED: &str = "com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// kube-openapi's ETag and `hash`: the SHA-512 of the served JSON, in upper-case hex.
fn etag_of(data: &[u8]) -> String {
    Sha512::digest(data)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect()
}

/// A document as served: its JSON and ETag.
struct Served {
    json: Bytes,
    etag: String,
}

impl Served {
    fn of(v: &Value) -> Served {
        let json = Bytes::from(v.to_string());
        let etag = etag_of(&json);
        Served { json, etag }
    }
}

/// Every document of one catalog, rendered once.
struct Rendered {
    v3: BTreeMap<String, Served>,
    index: Bytes,
    /// The v2 document (JSON, protobuf), rendered on first use.
    v2: OnceLock<(Served, Bytes)>,
    catalog: Catalog,
    last_modified: String,
}

impl Rendered {
    fn new(catalog: Catalog) -> Rendered {
        let v3: BTreeMap<String, Served> = v3::documents(&catalog)
            .iter()
            .map(|(k, d)| (k.clone(), Served::of(d)))
            .collect();
        let mut paths = serde_json::Map::new();
        for (key, doc) in &v3 {
            paths.insert(
                key.clone(),
                json!({"serverRelativeURL": relative_url(key, &doc.etag)}),
            );
        }
        Rendered {
            v3,
            index: Bytes::from(json!({"paths": paths}).to_string()),
            v2: OnceLock::new(),
            catalog,
            last_modified: http_date(chrono::Utc::now()),
        }
    }

    fn v2(&self) -> &(Served, Bytes) {
        self.v2.get_or_init(|| {
            let doc = v2::document(&self.catalog);
            let pb = Bytes::from(proto::document(&doc));
            (Served::of(&doc), pb)
        })
    }
}

/// The rendered documents of `sim`'s current catalog (re-rendered when what it serves
/// changed: a CRD, a gated group version).
fn rendered(sim: &Sim) -> Arc<Rendered> {
    static CACHE: Mutex<Option<(String, Arc<Rendered>)>> = Mutex::new(None);
    let crd_key = crate::store::ResKey::new("apiextensions.k8s.io", "customresourcedefinitions");
    let catalog = Catalog::build(&sim.registry, |name| {
        sim.store.lock().get(&crd_key, "", name)
    });
    let fingerprint = catalog.fingerprint();
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((f, r)) = cache.as_ref() {
        if *f == fingerprint {
            return r.clone();
        }
    }
    let r = Arc::new(Rendered::new(catalog));
    *cache = Some((fingerprint, r.clone()));
    r
}

/// `/openapi/v3/<key>?hash=<etag>`.
fn relative_url(key: &str, etag: &str) -> String {
    format!("/openapi/v3/{key}?hash={etag}")
}

fn http_date(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// The answer to a GET of `/openapi/v2`, `/openapi/v3` or `/openapi/v3/<key>`; None for any
/// other request (routed as before).
pub(crate) fn route(
    sim: &Sim,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
) -> Option<ApiResponse> {
    if method != Method::GET {
        return None;
    }
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let accept = header("accept");
    let if_none_match = header("if-none-match");
    if path == "/openapi/v2" {
        return Some(serve_v2(&rendered(sim), &accept, &if_none_match));
    }
    if path == "/openapi/v3" {
        let r = rendered(sim);
        return Some(ApiResponse {
            code: 200,
            body: Body::Raw(r.index.clone(), "text/plain; charset=utf-8"),
            content_type: None,
            headers: vec![
                ("Accept-Ranges".into(), "bytes".into()),
                ("Last-Modified".into(), http_date(chrono::Utc::now())),
            ],
        });
    }
    let key = path.strip_prefix("/openapi/v3/")?;
    let hash = query
        .iter()
        .find(|(k, _)| k == "hash")
        .map(|(_, v)| v.as_str());
    Some(serve_v3(&rendered(sim), key, hash, &accept, &if_none_match))
}

fn serve_v3(
    r: &Rendered,
    key: &str,
    hash: Option<&str>,
    accept: &str,
    if_none_match: &str,
) -> ApiResponse {
    let Some(doc) = r.v3.get(key) else {
        return raw(404, Bytes::new(), "text/plain; charset=utf-8", Vec::new());
    };
    let mut headers = vec![("Vary".to_string(), "Accept".to_string())];
    if negotiate(accept, &[("json", Format::Json)]).is_none() {
        return raw(406, Bytes::new(), "text/plain; charset=utf-8", headers);
    }
    headers.push(("ETag".into(), format!("\"{}\"", doc.etag)));
    match hash {
        Some(h) if !h.is_empty() && h != doc.etag => {
            // Upstream redirects after setting the JSON content type, so no HTML body.
            headers.push(("Location".into(), relative_url(key, &doc.etag)));
            return raw(301, Bytes::new(), "application/json", headers);
        }
        Some(h) if !h.is_empty() => {
            headers.push(("Cache-Control".into(), "public, immutable".into()));
            let expires = chrono::Utc::now() + chrono::Duration::days(365);
            headers.push((
                "Expires".into(),
                expires.format("%a, %d %b %Y %H:%M:%S UTC").to_string(),
            ));
        }
        _ => {}
    }
    content(
        r,
        doc.json.clone(),
        &doc.etag,
        "application/json",
        headers,
        if_none_match,
    )
}

fn serve_v2(r: &Rendered, accept: &str, if_none_match: &str) -> ApiResponse {
    let headers = vec![("Vary".to_string(), "Accept".to_string())];
    let formats = [
        ("json", Format::Json),
        (V2_PROTOBUF_DEPRECATED, Format::Protobuf),
        (V2_PROTOBUF, Format::Protobuf),
    ];
    let Some(kind) = negotiate(accept, &formats) else {
        return raw(406, Bytes::new(), "text/plain; charset=utf-8", headers);
    };
    let (doc, pb) = r.v2();
    let (data, ct) = match kind {
        Format::Json => (doc.json.clone(), "application/json"),
        Format::Protobuf => (
            pb.clone(),
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        ),
    };
    let mut headers = headers;
    headers.push(("ETag".into(), format!("\"{}\"", doc.etag)));
    content(r, data, &doc.etag, ct, headers, if_none_match)
}

/// `http.ServeContent`'s part that matters here: 304 for a matching `If-None-Match`.
fn content(
    r: &Rendered,
    data: Bytes,
    etag: &str,
    content_type: &'static str,
    mut headers: Vec<(String, String)>,
    if_none_match: &str,
) -> ApiResponse {
    headers.push(("Last-Modified".into(), r.last_modified.clone()));
    let quoted = format!("\"{etag}\"");
    let matches = if_none_match.trim() == "*"
        || if_none_match
            .split(',')
            .any(|t| t.trim().trim_start_matches("W/") == quoted);
    if matches {
        return raw(304, Bytes::new(), content_type, headers);
    }
    headers.push(("Accept-Ranges".into(), "bytes".into()));
    raw(200, data, content_type, headers)
}

fn raw(
    code: u16,
    data: Bytes,
    content_type: &'static str,
    headers: Vec<(String, String)>,
) -> ApiResponse {
    ApiResponse {
        code,
        body: Body::Raw(data, content_type),
        content_type: None,
        headers,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Protobuf,
}

/// goautoneg's order of the `Accept` clauses: by q (highest first), then the more specific
/// range first; clauses with q=0 are dropped. An empty header is `*/*`.
fn accept_clauses(accept: &str) -> Vec<(String, String)> {
    let accept = if accept.trim().is_empty() {
        "*/*"
    } else {
        accept
    };
    let mut clauses: Vec<(f64, String, String)> = Vec::new();
    for part in accept.split(',') {
        let mut pieces = part.split(';');
        let range = pieces.next().unwrap_or("").trim();
        let mut q = 1.0;
        for p in pieces {
            if let Some(v) = p.trim().strip_prefix("q=") {
                q = v.trim().parse().unwrap_or(0.0);
            }
        }
        let (t, s) = match range.split_once('/') {
            Some((t, s)) => (t.trim().to_string(), s.trim().to_string()),
            None if range == "*" => ("*".into(), "*".into()),
            None => continue,
        };
        if q > 0.0 {
            clauses.push((q, t, s));
        }
    }
    let specificity = |t: &str, s: &str| u8::from(t != "*") + u8::from(s != "*");
    clauses.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| specificity(&b.1, &b.2).cmp(&specificity(&a.1, &a.2)))
    });
    clauses.into_iter().map(|(_, t, s)| (t, s)).collect()
}

/// The first served format (`application/<subtype>`) the clauses accept, in the clauses'
/// order then `served`'s. A clause naming only a format not served here (v3's protobuf) is
/// passed over.
fn negotiate(accept: &str, served: &[(&str, Format)]) -> Option<Format> {
    for (t, s) in accept_clauses(accept) {
        if t != "application" && t != "*" {
            continue;
        }
        if let Some((_, f)) = served.iter().find(|(sub, _)| s == *sub || s == "*") {
            return Some(*f);
        }
    }
    None
}

#[cfg(test)]
mod tests;

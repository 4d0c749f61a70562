//! Replay of what a real kube-apiserver v1.29.6 answered (`RKCM_APISERVER_REFERENCE`,
//! shared/apiserver-reference): a fresh kube-sim gets the recorded requests in order and
//! each answer is compared with the record — the status code always, and the body once
//! what legitimately differs between runs is normalised (uids, resourceVersions,
//! timestamps, generated name suffixes, cluster IPs, continue tokens).
//!
//! The exchanges of `rbac/` (recorded on another fresh server with RBAC authorization, some
//! sent by the admin as another identity through `Impersonate-*` headers) are replayed the same
//! way on a second fresh kube-sim, headers included; tokens are compared by their JWT header
//! and claims.
//!
//! Values a later request depends on (a stale resourceVersion, a continue token, a
//! generated name, a uid) are carried over from this run's own earlier answers.
//! Differences kept on purpose are listed in `replay-allowlist.txt` (exchange, field,
//! reason); differences still to fix are listed in `replay-known-differences.txt`: both
//! lists are read here, and an exchange that differs without being listed fails the run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::BodyExt;
use regex::Regex;
use serde_json::{json, Value};

struct Exchange {
    file: String,
    note: String,
    method: String,
    path: String,
    body: Option<Value>,
    content_type: Option<String>,
    accept: Option<String>,
    /// Request headers sent as recorded (the impersonation headers).
    headers: Vec<(String, String)>,
    code: u16,
    response: Value,
}

fn load(dir: &Path) -> anyhow::Result<Vec<Exchange>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.as_bytes()[0].is_ascii_digit())
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let text = std::fs::read_to_string(&f).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{name}: not JSON: {e}"))?;
        let req = &v["request"];
        let resp = &v["response"];
        let field = |x: &Value, k: &str| x[k].as_str().map(String::from);
        out.push(Exchange {
            note: field(&v, "note").unwrap_or_default(),
            method: field(req, "method")
                .ok_or_else(|| anyhow::anyhow!("{name}: request.method missing"))?,
            path: field(req, "path")
                .ok_or_else(|| anyhow::anyhow!("{name}: request.path missing"))?,
            body: req.get("body").cloned(),
            content_type: field(req, "content_type"),
            accept: field(req, "accept"),
            headers: req["headers"]
                .as_object()
                .map(|h| {
                    h.iter()
                        .flat_map(|(k, v)| match v {
                            Value::Array(values) => values
                                .iter()
                                .filter_map(|x| x.as_str().map(|x| (k.clone(), x.to_string())))
                                .collect(),
                            other => other
                                .as_str()
                                .map(|x| vec![(k.clone(), x.to_string())])
                                .unwrap_or_default(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            code: resp["code"]
                .as_u64()
                .ok_or_else(|| anyhow::anyhow!("{name}: response.code missing"))?
                as u16,
            response: resp["body"].clone(),
            file: name,
        });
    }
    Ok(out)
}

/// Recorded value -> the value this run produced for the same thing.
#[derive(Default)]
struct Substitutions {
    map: BTreeMap<String, String>,
}

impl Substitutions {
    /// Walk a recorded and a live answer side by side and remember differing identities
    /// (only object metadata: uid, resourceVersion, continue, and generated names).
    fn learn(&mut self, rec: &Value, live: &Value) {
        match (rec, live) {
            (Value::Object(r), Value::Object(l)) => {
                if let (Some(rm), Some(lm)) = (
                    r.get("metadata").and_then(Value::as_object),
                    l.get("metadata").and_then(Value::as_object),
                ) {
                    for k in ["uid", "resourceVersion", "continue", "name"] {
                        if k == "name" && !rm.contains_key("generateName") {
                            continue;
                        }
                        if let (Some(a), Some(b)) = (
                            rm.get(k).and_then(Value::as_str),
                            lm.get(k).and_then(Value::as_str),
                        ) {
                            if a != b {
                                self.map.insert(a.to_string(), b.to_string());
                            }
                        }
                    }
                }
                for (k, rv) in r {
                    if let Some(lv) = l.get(k) {
                        self.learn(rv, lv);
                    }
                }
            }
            (Value::Array(r), Value::Array(l)) => {
                for (a, b) in r.iter().zip(l) {
                    self.learn(a, b);
                }
            }
            _ => {}
        }
    }

    fn apply_path(&self, path: &str) -> String {
        let (p, q) = path.split_once('?').unwrap_or((path, ""));
        let segs: Vec<String> = p
            .split('/')
            .map(|s| self.map.get(s).cloned().unwrap_or_else(|| s.to_string()))
            .collect();
        let mut out = segs.join("/");
        if !q.is_empty() {
            let params: Vec<String> = q
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) if matches!(k, "resourceVersion" | "continue") => {
                        format!(
                            "{k}={}",
                            self.map.get(v).cloned().unwrap_or_else(|| v.to_string())
                        )
                    }
                    _ => kv.to_string(),
                })
                .collect();
            out = format!("{out}?{}", params.join("&"));
        }
        out
    }

    fn apply_body(&self, v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| {
                        let nx = match (k.as_str(), x.as_str()) {
                            ("uid" | "resourceVersion" | "name", Some(s)) => {
                                json!(self.map.get(s).cloned().unwrap_or_else(|| s.to_string()))
                            }
                            _ => self.apply_body(x),
                        };
                        (k.clone(), nx)
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.apply_body(x)).collect()),
            other => other.clone(),
        }
    }
}

struct Normaliser {
    uuid: Regex,
    time: Regex,
    api_access: Regex,
    ip: Regex,
    age: Regex,
}

impl Normaliser {
    fn new() -> Self {
        Normaliser {
            uuid: Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
                .unwrap(),
            time: Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z").unwrap(),
            api_access: Regex::new(r"kube-api-access-[a-z0-9]{5}").unwrap(),
            ip: Regex::new(r"^\d+\.\d+\.\d+\.\d+$").unwrap(),
            age: Regex::new(r"^\d+(s|m\d*s?|h\d*m?|d\d*h?|y\d*d?)$").unwrap(),
        }
    }

    fn norm(&self, v: &Value, key: &str, generated: &BTreeSet<String>) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), self.norm(x, k, generated)))
                    .collect(),
            ),
            Value::Array(a) => {
                let mut items: Vec<Value> =
                    a.iter().map(|x| self.norm(x, key, generated)).collect();
                if key == "managedFields" {
                    // kube-apiserver sorts the entries by operation, time, manager, version and
                    // subresource; with the times normalised, sort the same way without them
                    // (an entry without a time, as /scale writes, still first).
                    items.sort_by_key(|e| {
                        let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
                        (
                            s("operation"),
                            e.get("time").is_some(),
                            s("manager"),
                            s("apiVersion"),
                            s("subresource"),
                        )
                    });
                }
                Value::Array(items)
            }
            Value::String(s) if key == "token" => match jwt_parts(s) {
                Some(jwt) => self.norm(&jwt, "", generated),
                None => json!("<token>"),
            },
            Value::String(s) => {
                if matches!(key, "resourceVersion" | "continue") && !s.is_empty() {
                    return json!(format!("<{key}>"));
                }
                if matches!(key, "clusterIP" | "clusterIPs") && self.ip.is_match(s) {
                    return json!("<ip>");
                }
                if key == "cells" && self.age.is_match(s) {
                    // A Table's Age column: how long ago, at the moment it was asked.
                    return json!("<age>");
                }
                if key == "serverAddress" {
                    return json!("<addr>");
                }
                if key == "serverRelativeURL" {
                    return json!(s.split('?').next().unwrap_or(s));
                }
                let mut t = self.uuid.replace_all(s, "<uid>").into_owned();
                t = self.time.replace_all(&t, "<time>").into_owned();
                t = self
                    .api_access
                    .replace_all(&t, "kube-api-access-<suffix>")
                    .into_owned();
                for g in generated {
                    if let Some(prefix) = g.get(..g.len().saturating_sub(5)) {
                        if t == *g {
                            t = format!("{prefix}<suffix>");
                        }
                    }
                }
                json!(t)
            }
            Value::Number(n) if key == "resourceVersion" => json!(format!("<rv:{n}>")),
            other => other.clone(),
        }
    }
}

/// A service-account token's header and claims, with what differs from run to run made
/// relative: the key id, the issue time (expiry and not-before as offsets from it). The
/// signature is not compared (the record's is removed).
fn jwt_parts(token: &str) -> Option<Value> {
    use base64::Engine;
    let mut parts = token.split('.');
    let mut decode = || -> Option<Value> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts.next()?)
            .ok()?;
        serde_json::from_slice(&bytes).ok()
    };
    let mut header = decode()?;
    let mut claims = decode()?;
    if header.get("kid").is_some() {
        header["kid"] = json!("<kid>");
    }
    let iat = claims["iat"].as_i64()?;
    for k in ["exp", "nbf"] {
        if let Some(t) = claims[k].as_i64() {
            claims[k] = json!(format!("iat+{}", t - iat));
        }
    }
    claims["iat"] = json!("<iat>");
    Some(json!({"jwtHeader": header, "jwtClaims": claims}))
}

/// Paths (a.b[2].c) where two values differ.
fn diff(rec: &Value, live: &Value, path: &str, out: &mut Vec<String>) {
    match (rec, live) {
        (Value::Object(r), Value::Object(l)) => {
            for (k, rv) in r {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match l.get(k) {
                    Some(lv) => diff(rv, lv, &p, out),
                    None => out.push(format!("{p}: missing (recorded {})", short(rv))),
                }
            }
            for (k, lv) in l {
                if !r.contains_key(k) {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    out.push(format!("{p}: unexpected {}", short(lv)));
                }
            }
        }
        (Value::Array(r), Value::Array(l)) if r.len() == l.len() => {
            for (i, (a, b)) in r.iter().zip(l).enumerate() {
                diff(a, b, &format!("{path}[{i}]"), out);
            }
        }
        _ if rec != live => out.push(format!(
            "{path}: recorded {} got {}",
            short(rec),
            short(live)
        )),
        _ => {}
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 160 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(160).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s
    }
}

/// `NNN-name field reason` lines; `*` as the field covers the whole body.
fn read_list(name: &str) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(out);
    };
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, char::is_whitespace);
        let (Some(ex), Some(field)) = (parts.next(), parts.next()) else {
            anyhow::bail!("{name}:{}: expected `EXCHANGE FIELD REASON`", i + 1);
        };
        if parts.next().unwrap_or("").trim().is_empty() {
            anyhow::bail!("{name}:{}: every entry needs a reason", i + 1);
        }
        out.entry(ex.to_string())
            .or_default()
            .push(field.to_string());
    }
    Ok(out)
}

fn covered(diffs: &[String], fields: Option<&Vec<String>>) -> bool {
    let Some(fields) = fields else { return false };
    // List entries name fields without list indices: `items.metadata.managedFields`.
    let strip = |d: &str| {
        let mut out = String::new();
        let mut skipping = false;
        for c in d.chars() {
            match c {
                '[' => skipping = true,
                ']' if skipping => skipping = false,
                _ if !skipping => out.push(c),
                _ => {}
            }
        }
        out
    };
    diffs.iter().map(|d| strip(d)).all(|d| {
        fields
            .iter()
            .any(|f| f == "*" || d.starts_with(&format!("{f}:")) || d.starts_with(&format!("{f}.")))
    })
}

async fn send(
    client: &kube::Client,
    ex: &Exchange,
    subs: &Substitutions,
) -> anyhow::Result<(u16, Value)> {
    let mut path = subs.apply_path(&ex.path);
    // A watch from a recorded resourceVersion this run never saw (the record's list was not
    // recorded) starts from this run's current one, as a client's own list would give it.
    let is_watch = path.contains("watch=1") || path.contains("watch=true");
    if is_watch && ex.code == 200 && !ex.file.starts_with("108") && !ex.file.starts_with("118") {
        let rv = path
            .split(['?', '&'])
            .find_map(|kv| kv.strip_prefix("resourceVersion="))
            .map(String::from);
        if let Some(rv) = rv.filter(|rv| rv != "0" && !subs.map.values().any(|v| v == rv)) {
            let list_path = path.split('?').next().unwrap_or("").to_string();
            let req = http::Request::get(format!("{list_path}?limit=1")).body(Vec::new())?;
            let list: Value = client.request(req).await?;
            if let Some(live) = list["metadata"]["resourceVersion"].as_str() {
                path = path.replace(
                    &format!("resourceVersion={rv}"),
                    &format!("resourceVersion={live}"),
                );
            }
        }
    }
    let body: Vec<u8> = match &ex.body {
        None => Vec::new(),
        Some(Value::String(s)) => s.clone().into_bytes(),
        Some(v) => serde_json::to_vec(&subs.apply_body(v))?,
    };
    // The record was made with Python's urllib, which kube-apiserver names its requests'
    // field manager after (the user agent up to its `/`): replay as that client.
    let mut b = http::Request::builder()
        .method(ex.method.as_str())
        .uri(&path)
        .header("user-agent", RECORDED_USER_AGENT);
    for (k, v) in &ex.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    if let Some(ct) = &ex.content_type {
        b = b.header("content-type", ct);
    }
    b = b.header(
        "accept",
        ex.accept
            .clone()
            .unwrap_or_else(|| "application/json".into()),
    );
    let resp = client.send(b.body(kube::client::Body::from(body))?).await?;
    let concurrent = during(&ex.file);
    if !concurrent.is_empty() {
        let client = client.clone();
        let stem = ex.file.clone();
        tokio::spawn(async move {
            if let Err(e) = run_requests(&client, &stem, concurrent).await {
                eprintln!("{e:#}");
            }
        });
    }
    let code = resp.status().as_u16();
    let mut body = resp.into_body();
    if is_watch && code == 200 {
        // Long recorded streams are cut, ending with {"_truncated": N}: compare what was kept.
        let expected = ex.response["_stream"].as_array().map_or(0, |a| {
            a.iter()
                .filter(|e| e.get("_truncated").is_none() && e["type"] != "BOOKMARK")
                .count()
        });
        let mut buf = Vec::new();
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
        while events.len() < expected {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(Ok(f))) => f,
                _ => break,
            };
            if let Ok(data) = frame.into_data() {
                buf.extend_from_slice(&data);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                        if v["type"] != "BOOKMARK" {
                            events.push(v);
                        }
                    }
                }
            }
        }
        return Ok((code, json!({"_stream": events})));
    }
    let bytes = body.collect().await?.to_bytes();
    // A text answer is recorded as {"_text": ...}.
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| json!({"_text": String::from_utf8_lossy(&bytes)}));
    Ok((code, v))
}

/// Requests the recording made without recording them (setup the records show the
/// result of): sent before the exchange named, so that its answer can be compared.
fn fixtures(set: Set, stem: &str) -> Vec<(&'static str, String, Value)> {
    if set == Set::Rbac {
        return match stem.get(..3).unwrap_or("") {
            // The namespace the rbac/ exchanges work in existed before them.
            "001" => vec![(
                "POST",
                "/api/v1/namespaces".into(),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rb"}}),
            )],
            _ => vec![],
        };
    }
    let rs = |n: &str| {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": n},
               "spec": {"replicas": 0, "selector": {"matchLabels": {"x": n}},
                        "template": {"metadata": {"labels": {"x": n}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}})
    };
    let ns = "/api/v1/namespaces/ref";
    match stem.get(..3).unwrap_or("") {
        // c1 was written again between its creation (038) and the stale update (053).
        "053" => vec![("PATCH", format!("{ns}/configmaps/c1"), json!({"data": {"a": "c"}}))],
        // The labelled configmaps the list exchanges page through.
        "065" => (0..5)
            .map(|i| ("POST", format!("{ns}/configmaps"), json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("page{i}"), "labels": {"i": i.to_string(), "page": "yes"}}})))
            .collect(),
        // A running pod p2 on n1 covered by the PDB, whose controller saw it healthy.
        "093" => vec![
            ("POST", format!("{ns}/pods"), json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p2", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})),
            ("POST", format!("{ns}/pods/p2/binding"), json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p2"},
                "target": {"kind": "Node", "name": "n1"}})),
            ("PATCH", format!("{ns}/pods/p2/status"), json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": null}]}})),
            ("PATCH", "/apis/policy/v1/namespaces/ref/poddisruptionbudgets/pdb/status".to_string(), json!({"status": {"observedGeneration": 1,
                "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})),
        ],
        "095" => vec![("POST", "/apis/apps/v1/namespaces/ref/replicasets".into(), rs("del-foreground"))],
        "097" => vec![("POST", "/apis/apps/v1/namespaces/ref/replicasets".into(), rs("del-orphan"))],
        "099" => vec![("POST", "/apis/apps/v1/namespaces/ref/replicasets".into(), rs("del-background"))],
        "101" => vec![("POST", format!("{ns}/configmaps"), json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fin", "finalizers": ["example.com/hold"]}}))],
        // The compacted-history watch was recorded on a server whose etcd had compacted.
        "118" => vec![("POST", "/kube-sim/faults/compact".into(), json!({}))],
        _ => vec![],
    }
}

/// Writes the recording made while a watch exchange was open: sent once the watch is.
fn during(stem: &str) -> Vec<(&'static str, String, Value)> {
    let cms = "/api/v1/namespaces/ref/configmaps";
    match stem.get(..3).unwrap_or("") {
        "105" => vec![
            (
                "POST",
                cms.into(),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1"}, "data": {"a": "1"}}),
            ),
            ("PATCH", format!("{cms}/w1"), json!({"data": {"a": "2"}})),
            ("DELETE", format!("{cms}/w1"), json!({})),
        ],
        _ => vec![],
    }
}

async fn setup(client: &kube::Client, set: Set, stem: &str) -> anyhow::Result<()> {
    run_requests(client, stem, fixtures(set, stem)).await
}

async fn run_requests(
    client: &kube::Client,
    stem: &str,
    reqs: Vec<(&'static str, String, Value)>,
) -> anyhow::Result<()> {
    for (method, path, body) in reqs {
        let ct = if method == "PATCH" {
            "application/strategic-merge-patch+json"
        } else {
            "application/json"
        };
        let req = http::Request::builder()
            .method(method)
            .uri(&path)
            .header("content-type", ct)
            .header("user-agent", RECORDED_USER_AGENT)
            .body(kube::client::Body::from(serde_json::to_vec(&body)?))?;
        let resp = client.send(req).await?;
        if !resp.status().is_success() {
            anyhow::bail!("{stem}: fixture {method} {path} failed: {}", resp.status());
        }
    }
    Ok(())
}

/// The user agent of the client the record was made with.
const RECORDED_USER_AGENT: &str = "Python-urllib/3.12";

fn main() -> anyhow::Result<()> {
    let Ok(dir) = std::env::var("RKCM_APISERVER_REFERENCE") else {
        println!("replay: skipped (RKCM_APISERVER_REFERENCE is not set)");
        return Ok(());
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(Path::new(&dir)))
}

/// Which recorded set an exchange belongs to: the main one, or `rbac/`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Set {
    Main,
    Rbac,
}

/// What one replayed set came to.
#[derive(Default)]
struct Tally {
    total: usize,
    matched: usize,
    allowed: usize,
    known: usize,
    failures: Vec<String>,
}

async fn run(dir: &Path) -> anyhow::Result<()> {
    let allow = read_list("replay-allowlist.txt")?;
    let known = read_list("replay-known-differences.txt")?;
    let main = replay(Set::Main, load(dir)?, &allow, &known).await?;
    println!(
        "{}/{} exchanges match ({} allow-listed, {} known differences still to fix)",
        main.matched, main.total, main.allowed, main.known
    );
    let rbac = replay(Set::Rbac, load(&dir.join("rbac"))?, &allow, &known).await?;
    println!(
        "{}/{} rbac exchanges match ({} allow-listed, {} known differences still to fix)",
        rbac.matched, rbac.total, rbac.allowed, rbac.known
    );
    let failures: Vec<String> = main.failures.into_iter().chain(rbac.failures).collect();
    if !failures.is_empty() {
        println!("unlisted differences:\n  {}", failures.join("\n  "));
        anyhow::bail!(
            "{} exchanges differ from the real kube-apiserver",
            failures.len()
        );
    }
    Ok(())
}

/// Sends one set's exchanges, in order, to a fresh kube-sim (each set was recorded on a fresh
/// server) and compares the answers.
/// The API groups kube-sim serves in the place of add-ons a cluster installs as
/// aggregated APIServices (metrics-server, custom and external metrics adapters); the
/// recorded cluster had none, so its discovery does not list them.
const ADD_ON_GROUPS: &[&str] = &[
    "metrics.k8s.io",
    "custom.metrics.k8s.io",
    "external.metrics.k8s.io",
];

/// A discovery answer (legacy `groups` or aggregated `items`) without [`ADD_ON_GROUPS`].
fn without_add_on_groups(mut live: Value) -> Value {
    for (list, name) in [("groups", "/name"), ("items", "/metadata/name")] {
        if let Some(groups) = live.get_mut(list).and_then(Value::as_array_mut) {
            groups.retain(|group| {
                !group
                    .pointer(name)
                    .and_then(Value::as_str)
                    .is_some_and(|n| ADD_ON_GROUPS.contains(&n))
            });
        }
    }
    live
}

async fn replay(
    set: Set,
    exchanges: Vec<Exchange>,
    allow: &BTreeMap<String, Vec<String>>,
    known: &BTreeMap<String, Vec<String>>,
) -> anyhow::Result<Tally> {
    let sim = kube_sim::KubeSim::start(kube_sim::Config::default()).await?;
    // Answers are compared as given: no client-side retry of 429s.
    let kc = kube::config::Kubeconfig::from_yaml(sim.kubeconfig())?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    cfg.default_retry = false;
    let client = kube::Client::try_from(cfg)?;
    let norm = Normaliser::new();
    let mut subs = Substitutions::default();
    let mut generated = BTreeSet::new();
    let mut tally = Tally {
        total: exchanges.len(),
        ..Tally::default()
    };
    let verbose = std::env::var("RKCM_REPLAY_VERBOSE").is_ok();
    for ex in &exchanges {
        setup(&client, set, &ex.file).await?;
        let (code, live) = send(&client, ex, &subs)
            .await
            .map_err(|e| anyhow::anyhow!("{}: sending failed: {e:#}", ex.file))?;
        subs.learn(&ex.response, &live);
        for v in [&ex.response, &live] {
            if let Some(g) = v["metadata"]["generateName"].as_str() {
                if let Some(n) = v["metadata"]["name"].as_str() {
                    if n.starts_with(g) {
                        generated.insert(n.to_string());
                    }
                }
            }
        }
        let mut diffs = Vec::new();
        if code != ex.code {
            diffs.push(format!("code: recorded {} got {code}", ex.code));
        }
        let mut recorded = ex.response.clone();
        if let Some(events) = recorded.get_mut("_stream").and_then(Value::as_array_mut) {
            // Bookmarks come when the server's timers say; their timing is not compared.
            events.retain(|e| e.get("_truncated").is_none() && e["type"] != "BOOKMARK");
        }
        let live = without_add_on_groups(live);
        diff(
            &norm.norm(&recorded, "", &generated),
            &norm.norm(&live, "", &generated),
            "body",
            &mut diffs,
        );
        let diffs: Vec<String> = diffs
            .into_iter()
            .map(|d| d.trim_start_matches("body.").to_string())
            .collect();
        let stem = match set {
            Set::Main => ex.file.trim_end_matches(".json").to_string(),
            Set::Rbac => format!("rbac/{}", ex.file.trim_end_matches(".json")),
        };
        if diffs.is_empty() {
            tally.matched += 1;
            if known.contains_key(&stem) {
                tally.failures.push(format!(
                    "{stem} matches now: remove it from replay-known-differences.txt"
                ));
            }
        } else if !diffs.iter().any(|d| d.starts_with("code:")) && covered(&diffs, allow.get(&stem))
        {
            tally.allowed += 1;
        } else if covered(&diffs, known.get(&stem)) {
            tally.known += 1;
            if verbose {
                println!("known difference {stem}: {}", diffs.join("; "));
            }
        } else {
            tally.failures.push(format!(
                "{stem} ({}):\n    {}",
                ex.note,
                diffs.join("\n    ")
            ));
        }
    }
    Ok(tally)
}

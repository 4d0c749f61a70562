//! The launcher's HTTPS endpoint on --bind-address:--secure-port (10257, as KCM), with
//! a self-signed certificate when none is given (KCM makes one in memory too):
//!
//! - `/healthz`, `/livez`: the launcher itself and `leaderElection` (failing when the
//!   leader has not renewed for the lease duration plus 20 s, KCM's adaptor); a
//!   crash-looping child does not fail them, so the kubelet never restarts the whole
//!   pod for one child;
//! - `/readyz`: one named check per child (`informer-server`, `worker-default`, ...):
//!   running and answering its own health endpoint; workers count only while leading;
//! - `?verbose` lists the checks as `[+]name ok` / `[-]name failed`, `?exclude=name`
//!   skips one, as KCM's healthz;
//! - `/metrics`: the launcher's own (`leader_election_master_status`,
//!   `rkcm_child_restarts_total`) and every child's, merged, each child's samples
//!   labelled `rkcm_child`.
//!
//! With --authentication-kubeconfig and --authorization-kubeconfig, requests outside
//! --authorization-always-allow-paths need a bearer token that a TokenReview accepts
//! and a SubjectAccessReview (non-resource `get` on the path) allows, as KCM delegates.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::launcher::State;

pub(crate) struct Auth {
    pub authentication: Option<kube::Client>,
    pub authorization: Option<kube::Client>,
    pub always_allow: Vec<String>,
}

pub(crate) fn tls_config(
    cert: Option<&std::path::Path>,
    key: Option<&std::path::Path>,
) -> anyhow::Result<rustls::ServerConfig> {
    let (cert_pem, key_pem) = match (cert, key) {
        (Some(cert), Some(key)) => (
            std::fs::read(cert)
                .with_context(|| format!("reading --tls-cert-file {}", cert.display()))?,
            std::fs::read(key)
                .with_context(|| format!("reading --tls-private-key-file {}", key.display()))?,
        ),
        (None, None) => {
            let (cert, key) = crate::certs::self_signed_serving(&[
                "localhost".to_string(),
                "127.0.0.1".to_string(),
                "kube-controller-manager".to_string(),
            ])
            .context("making a self-signed serving certificate")?;
            (cert.into_bytes(), key.into_bytes())
        }
        _ => anyhow::bail!("--tls-cert-file and --tls-private-key-file go together"),
    };
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .context("parsing the serving certificate")?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .context("parsing the serving key")?
        .context("no private key in the serving key file")?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .context("the serving certificate and key do not match")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

pub(crate) async fn serve(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    state: Arc<State>,
    auth: Arc<Auth>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "secure port accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let state = state.clone();
        let auth = auth.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(
                Duration::from_secs(10),
                acceptor.accept(stream),
            )
            .await
            {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let state = state.clone();
                let auth = auth.clone();
                async move { Ok::<_, Infallible>(respond(request, &state, &auth).await) }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn text(status: u16, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .header("x-content-type-options", "nosniff")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

async fn authorize(request: &Request<Incoming>, auth: &Auth) -> Result<(), Response<Full<Bytes>>> {
    let path = request.uri().path();
    if auth.always_allow.iter().any(|allowed| {
        allowed == path
            || (allowed.ends_with('*') && path.starts_with(allowed.trim_end_matches('*')))
    }) {
        return Ok(());
    }
    let Some(authentication) = &auth.authentication else {
        // No delegated authentication configured: as KCM without those kubeconfigs.
        return Ok(());
    };
    let token = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_string);
    let Some(token) = token else {
        return Err(text(401, "Unauthorized\n".into()));
    };
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token),
            audiences: None,
        },
        ..Default::default()
    };
    let reviewed = Api::<TokenReview>::all(authentication.clone())
        .create(&PostParams::default(), &review)
        .await;
    let user = match reviewed
        .ok()
        .and_then(|r| r.status)
        .filter(|s| s.authenticated == Some(true))
    {
        Some(status) => status.user.unwrap_or_default(),
        None => return Err(text(401, "Unauthorized\n".into())),
    };
    let Some(authorization) = &auth.authorization else {
        return Ok(());
    };
    let access = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let allowed = Api::<SubjectAccessReview>::all(authorization.clone())
        .create(&PostParams::default(), &access)
        .await
        .ok()
        .and_then(|r| r.status)
        .is_some_and(|s| s.allowed);
    if allowed {
        Ok(())
    } else {
        Err(text(
            403,
            format!(
                "forbidden: User \"{}\" cannot get path \"{path}\"\n",
                user.username.unwrap_or_default()
            ),
        ))
    }
}

async fn respond(request: Request<Incoming>, state: &State, auth: &Auth) -> Response<Full<Bytes>> {
    if let Err(denied) = authorize(&request, auth).await {
        return denied;
    }
    let query: BTreeMap<String, Vec<String>> = request
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .fold(BTreeMap::new(), |mut map, pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            map.entry(key.to_string())
                .or_default()
                .push(value.to_string());
            map
        });
    let verbose = query.contains_key("verbose");
    let excluded = query.get("exclude").cloned().unwrap_or_default();
    match request.uri().path() {
        "/healthz" | "/livez" => {
            checks_response("healthz", state.health_checks(), verbose, &excluded)
        }
        "/readyz" => checks_response("readyz", state.ready_checks().await, verbose, &excluded),
        "/metrics" => Response::builder()
            .status(200)
            .header(
                "content-type",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
            .body(Full::new(Bytes::from(state.metrics_text().await)))
            .unwrap_or_default(),
        _ => text(404, "404 page not found\n".into()),
    }
}

fn checks_response(
    kind: &str,
    checks: Vec<(String, Result<(), String>)>,
    verbose: bool,
    excluded: &[String],
) -> Response<Full<Bytes>> {
    let mut lines = Vec::new();
    let mut failed = false;
    for (name, result) in &checks {
        if excluded.contains(name) {
            lines.push(format!("[+]{name} excluded: ok"));
            continue;
        }
        match result {
            Ok(()) => lines.push(format!("[+]{name} ok")),
            Err(reason) => {
                failed = true;
                lines.push(format!("[-]{name} failed: {reason}"));
            }
        }
    }
    if failed {
        info!(kind, checks = ?lines, "health check failed");
        return text(500, format!("{}\n{kind} check failed\n", lines.join("\n")));
    }
    if verbose {
        text(200, format!("{}\n{kind} check passed\n", lines.join("\n")))
    } else {
        text(200, "ok".into())
    }
}

/// Merges Prometheus text from several sources: one HELP/TYPE per family, each source's
/// samples labelled with `label="source"` (none for the launcher's own).
pub(crate) fn merge_metrics(sources: &[(Option<String>, String)], label: &str) -> String {
    let mut families: Vec<String> = Vec::new();
    let mut meta: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut samples: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (source, text) in sources {
        let mut family = String::new();
        for line in text.lines() {
            if line.trim().is_empty() || line.starts_with("# EOF") {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                let mut parts = rest.splitn(3, ' ');
                let (Some(_kind), Some(name)) = (parts.next(), parts.next()) else {
                    continue;
                };
                family = name.to_string();
                if !meta.contains_key(&family) {
                    families.push(family.clone());
                }
                let entry = meta.entry(family.clone()).or_default();
                if !entry.iter().any(|l| l == line) && entry.len() < 3 {
                    entry.push(line.to_string());
                }
                continue;
            }
            let labelled = match source {
                None => line.to_string(),
                Some(source) => add_label(line, label, source),
            };
            if family.is_empty() || !line.starts_with(&family) {
                // A sample outside its family's block: file it under its own name.
                let name: String = line
                    .chars()
                    .take_while(|c| *c != '{' && *c != ' ')
                    .collect();
                family = families
                    .iter()
                    .find(|f| name.starts_with(f.as_str()))
                    .cloned()
                    .unwrap_or(name);
                if !meta.contains_key(&family) && !samples.contains_key(&family) {
                    families.push(family.clone());
                }
            }
            samples.entry(family.clone()).or_default().push(labelled);
        }
    }
    let mut out = String::new();
    for family in families {
        for line in meta.get(&family).into_iter().flatten() {
            out.push_str(line);
            out.push('\n');
        }
        for line in samples.get(&family).into_iter().flatten() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

fn add_label(sample: &str, label: &str, value: &str) -> String {
    let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
    match sample.find(['{', ' ']) {
        Some(at) if sample.as_bytes()[at] == b'{' => {
            let close_empty = sample[at..].starts_with("{}");
            if close_empty {
                format!(
                    "{}{{{label}=\"{escaped}\"}}{}",
                    &sample[..at],
                    &sample[at + 2..]
                )
            } else {
                format!(
                    "{}{{{label}=\"{escaped}\",{}",
                    &sample[..at],
                    &sample[at + 1..]
                )
            }
        }
        Some(at) => format!(
            "{}{{{label}=\"{escaped}\"}}{}",
            &sample[..at],
            &sample[at..]
        ),
        None => sample.to_string(),
    }
}

pub(crate) fn bind_addr(ip: std::net::IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(ip, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_metrics_have_one_header_per_family_and_a_label_per_child() {
        let a = "# HELP workqueue_depth Current depth of workqueue\n# TYPE workqueue_depth gauge\nworkqueue_depth{name=\"deployment\"} 1\n# EOF\n";
        let b = "# HELP workqueue_depth Current depth of workqueue\n# TYPE workqueue_depth gauge\nworkqueue_depth{name=\"replicaset\"} 2\n";
        let own = "# TYPE leader_election_master_status gauge\nleader_election_master_status{name=\"kube-controller-manager\"} 1\n";
        let merged = merge_metrics(
            &[
                (None, own.into()),
                (Some("worker-a".into()), a.into()),
                (Some("worker-b".into()), b.into()),
            ],
            "rkcm_child",
        );
        assert_eq!(
            merged.matches("# TYPE workqueue_depth gauge").count(),
            1,
            "{merged}"
        );
        assert!(
            merged.contains("workqueue_depth{rkcm_child=\"worker-a\",name=\"deployment\"} 1"),
            "{merged}"
        );
        assert!(
            merged.contains("workqueue_depth{rkcm_child=\"worker-b\",name=\"replicaset\"} 2"),
            "{merged}"
        );
        assert!(
            merged.contains("leader_election_master_status{name=\"kube-controller-manager\"} 1")
        );
        assert_eq!(merged.matches("# EOF").count(), 1, "one EOF, at the end");
        assert_eq!(add_label("up 1", "c", "x"), "up{c=\"x\"} 1");
    }
}

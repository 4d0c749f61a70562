//! The HTTP side: TLS (with optional client certificates, verified against the cluster CA),
//! HTTP/1.1 and HTTP/2 (kubectl negotiates h2 by ALPN), authentication, the non-resource
//! paths (health, version, discovery, OpenAPI, metrics, fault injection) and the handoff of
//! resource paths to `Sim`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::api::Sim;
use crate::discovery;
use crate::faults::Failure;
use crate::rbac;
use crate::request::{
    parse_query, parse_resource_path, ApiRequest, ApiResponse, Body, ResourcePath, User,
};
use crate::status::ApiError;

type RespBody = UnsyncBoxBody<Bytes, Infallible>;

/// The largest request body accepted (kube-apiserver's limit is 3 MiB for most requests).
const MAX_BODY: usize = 3 * 1024 * 1024;

pub struct ServerState {
    pub sim: Arc<Sim>,
    pub addr: SocketAddr,
    pub tls: bool,
}

pub fn tls_config(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: &str,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = rustls_pemfile::certs(&mut cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())?
        .ok_or_else(|| anyhow::anyhow!("no private key in the serving key PEM"))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut client_ca_pem.as_bytes()) {
        roots.add(c?)?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Accept connections until the listener fails or the task is aborted.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ServerState>,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    // The connections belong to this task: stopping it (a restart, the cluster dropped)
    // ends them too, as a stopped API server's connections end.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (sock, _peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        let state = state.clone();
        let acceptor = acceptor.clone();
        connections.spawn(async move {
            match acceptor {
                Some(acc) => {
                    let Ok(stream) = acc.accept(sock).await else {
                        return;
                    };
                    let user = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| user_from_cert(c.as_ref()));
                    serve_conn(TokioIo::new(stream), state, user).await;
                }
                None => serve_conn(TokioIo::new(sock), state, None).await,
            }
        });
    }
}

async fn serve_conn<I>(io: I, state: Arc<ServerState>, cert_user: Option<User>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let state = state.clone();
        let cert_user = cert_user.clone();
        async move { Ok::<_, Infallible>(handle(state, req, cert_user).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let _ = builder.serve_connection(io, svc).await;
}

/// The user a verified client certificate names: CN is the user, each O a group.
fn user_from_cert(der: &[u8]) -> Option<User> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    groups.push("system:authenticated".into());
    Some(User {
        name,
        groups,
        ..User::default()
    })
}

async fn handle(
    state: Arc<ServerState>,
    req: Request<Incoming>,
    cert_user: Option<User>,
) -> Response<RespBody> {
    let faults_path = req.uri().path().starts_with("/kube-sim/faults");
    // The fault API must answer while serving is paused: it is how a pause is lifted.
    if !faults_path {
        state.sim.faults.wait_if_paused().await;
    }
    let (parts, body) = req.into_parts();
    let header = |n: &str| {
        parts
            .headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let bearer = header("authorization")
        .strip_prefix("Bearer ")
        .map(|t| t.trim().to_string());
    let authenticated = match bearer {
        Some(t) => match state.sim.user_for_token(&t) {
            Some(u) => u,
            None => match state.sim.authenticate_legacy_token(&t, None) {
                crate::legacy_tokens::LegacyOutcome::Authenticated(u) => u,
                // A credential that does not authenticate is refused outright, as
                // upstream does.
                crate::legacy_tokens::LegacyOutcome::Refused(why) => {
                    tracing::debug!(error = %why, "legacy service account token refused");
                    return to_http(error_response(ApiError::unauthorized()));
                }
                crate::legacy_tokens::LegacyOutcome::NotLegacy => {
                    return to_http(error_response(ApiError::unauthorized()))
                }
            },
        },
        // Plain HTTP is kube-apiserver's old insecure port: whoever connects is the admin
        // (kubectl never sends a token over plain HTTP).
        None if !state.tls => User {
            name: "kubernetes-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..User::default()
        },
        // No credential at all: the anonymous user, as kube-apiserver's default
        // --anonymous-auth=true makes it; RBAC lets it reach health and version only.
        None => cert_user.unwrap_or_else(User::anonymous),
    };
    let path = parts.uri.path().to_string();
    let query = parse_query(parts.uri.query());
    let request_uri = parts
        .uri
        .path_and_query()
        .map_or_else(|| path.clone(), |p| p.as_str().to_string());
    let user = match rbac::impersonation::impersonate(
        &state.sim.authorizer,
        &state.sim.store,
        &authenticated,
        &parts.headers,
        &request_uri,
    ) {
        Ok(Some(acting_as)) => acting_as,
        Ok(None) => authenticated,
        Err(rbac::impersonation::Refusal::Forbidden(e)) => {
            return to_http(error_response(e));
        }
        Err(rbac::impersonation::Refusal::Internal(text)) => {
            return to_http(ApiResponse::text(500, &format!("{text}\n")));
        }
    };
    let attrs = rbac::request_info::attributes(&parts.method, &path, &query);
    // The fault API keeps its own rule (admin only), checked where it is served.
    if !faults_path {
        let decision = state.sim.authorize(&user, &attrs);
        if !decision.allowed {
            let resp = error_response(rbac::forbidden(&user, &attrs, &decision.reason));
            let resource = parse_resource_path(&path);
            account(
                &state,
                &parts.method,
                &query,
                resource.as_ref(),
                &user,
                &attrs,
                resp.code,
            );
            return to_http(resp);
        }
    }
    if let Some(resp) =
        crate::openapi_docs::route(&state.sim, &parts.method, &path, &query, &parts.headers)
    {
        return to_http(resp);
    }
    let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return to_http(error_response(ApiError::new(
                413,
                "RequestEntityTooLarge",
                "the request body is too large",
            )));
        }
    };
    let req = ApiRequest {
        method: parts.method.clone(),
        path,
        query,
        accept: header("accept"),
        content_type: header("content-type"),
        user_agent: header("user-agent"),
        body,
        user: Some(user),
    };
    let resource = parse_resource_path(&req.path);
    let resp = route(&state, &req, resource.clone());
    if let Some(user) = &req.user {
        account(
            &state,
            &req.method,
            &req.query,
            resource.as_ref(),
            user,
            &attrs,
            resp.code,
        );
    }
    tracing::debug!(method = %req.method, path = %req.path, code = resp.code, "request");
    to_http(resp)
}

/// Counts a finished request in `/metrics`: upstream's `apiserver_request_total`, and who
/// did what (`kube_sim_requests_by_user_total`).
fn account(
    state: &ServerState,
    method: &Method,
    query: &[(String, String)],
    resource: Option<&ResourcePath>,
    user: &User,
    attrs: &rbac::Attributes,
    code: u16,
) {
    if let Some(p) = resource {
        let watch = query
            .iter()
            .any(|(k, v)| k == "watch" && crate::query_options::go_bool(v));
        let verb = verb_of(method, watch, p.name.is_some());
        let scope = if p.namespace.is_some() {
            "namespace"
        } else if p.name.is_some() {
            "resource"
        } else {
            "cluster"
        };
        state.sim.metrics.request(
            verb,
            &p.group,
            &p.version,
            &p.resource,
            p.subresource.as_deref().unwrap_or(""),
            scope,
            code,
        );
    }
    if let Some(r) = &attrs.resource {
        state.sim.metrics.request_by_user(
            &user.name,
            &attrs.verb,
            &r.group,
            &r.resource,
            &r.subresource,
            code,
        );
    }
}

fn verb_of(method: &Method, watch: bool, named: bool) -> &'static str {
    match (method, named) {
        (&Method::GET, _) if watch => "WATCH",
        (&Method::GET, true) => "GET",
        (&Method::GET, false) => "LIST",
        (&Method::POST, _) => "POST",
        (&Method::PUT, _) => "PUT",
        (&Method::PATCH, _) => "PATCH",
        (&Method::DELETE, true) => "DELETE",
        (&Method::DELETE, false) => "DELETECOLLECTION",
        _ => "OTHER",
    }
}

fn error_response(e: ApiError) -> ApiResponse {
    let mut r = ApiResponse::json(e.code, e.to_status());
    if let Some(s) = e.retry_after {
        r.headers.push(("Retry-After".into(), s.to_string()));
    }
    r
}

fn route(
    state: &Arc<ServerState>,
    req: &ApiRequest,
    resource: Option<crate::request::ResourcePath>,
) -> ApiResponse {
    let sim = &state.sim;
    let path = req.path.trim_end_matches('/');
    // Who may reach these was settled by the authorizer (the bootstrap policy lets anyone
    // read health and version).
    match path {
        "/healthz" | "/livez" | "/readyz" | "/healthz/ping" | "/livez/ping" | "/readyz/ping" => {
            return ApiResponse::text(200, "ok");
        }
        "/version" => {
            return ApiResponse::json(
                200,
                json!({
                "major": "1", "minor": "29", "gitVersion": "v1.29.6-kube-sim", "gitCommit": env!("CARGO_PKG_VERSION"),
                "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z", "goVersion": "kube-sim",
                "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH)}),
            );
        }
        _ => {}
    }
    let Some(user) = req.user.as_ref() else {
        return error_response(ApiError::unauthorized());
    };
    if path.starts_with("/kube-sim/faults") {
        if !user.is_admin() {
            return error_response(ApiError::forbidden(
                crate::status::Subject::default(),
                &format!("User \"{}\" cannot use fault injection", user.name),
            ));
        }
        return faults(sim, req, path);
    }
    if path == "/metrics" {
        return ApiResponse {
            code: 200,
            body: Body::Raw(
                Bytes::from(sim.metrics.render()),
                "text/plain; version=0.0.4; charset=utf-8",
            ),
            content_type: None,
            headers: Vec::new(),
        };
    }
    if let Some(failure) = sim.faults.take_failure() {
        return error_response(match failure {
            Failure::TooManyRequests => ApiError::too_many_requests(
                "kube-sim: injected fault: too many requests, please try again later",
                1,
            ),
            Failure::Internal => ApiError::internal("kube-sim: injected fault: internal error"),
        });
    }
    // The aggregated metrics APIs answer for their whole groups, as their servers would.
    if let Some(r) = crate::metrics_api::route(sim, req, path) {
        return r;
    }
    if req.method == Method::GET {
        if let Some(r) = discovery_route(state, req, path) {
            return r;
        }
    }
    match resource {
        Some(p) => {
            // Admission warnings (ValidatingAdmissionPolicy `Warn`) go out with any answer.
            let (result, warnings) =
                crate::admission_policy_enforce::collect_warnings(|| sim.handle_resource(req, p));
            let mut r = result.unwrap_or_else(error_response);
            crate::admission_policy_enforce::add_warning_headers(&mut r, warnings);
            r
        }
        None => error_response(ApiError::no_route()),
    }
}

fn discovery_route(state: &ServerState, req: &ApiRequest, path: &str) -> Option<ApiResponse> {
    let reg = &state.sim.registry;
    let aggregated = discovery::aggregated_version(&req.accept);
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let json = |v: Value| Some(ApiResponse::json(200, v));
    let agg = |legacy: bool| {
        let v = aggregated?;
        let mut r = ApiResponse::json(200, discovery::aggregated(reg, legacy, v));
        let short = v.rsplit('/').next().unwrap_or("v2beta1");
        r.content_type = Some(format!(
            "application/json;g=apidiscovery.k8s.io;v={short};as=APIGroupDiscoveryList"
        ));
        Some(r)
    };
    match segs.as_slice() {
        ["api"] => agg(true).or_else(|| json(discovery::api_versions(&state.addr.to_string()))),
        ["apis"] => agg(false).or_else(|| json(discovery::api_group_list(reg))),
        ["api", v] => Some(match discovery::api_resource_list(reg, "", v) {
            Some(d) => ApiResponse::json(200, d),
            None => error_response(ApiError::no_route()),
        }),
        ["apis", g] => Some(match discovery::api_group(reg, g) {
            Some(d) => ApiResponse::json(200, d),
            None => error_response(ApiError::no_route()),
        }),
        ["apis", g, v] => Some(match discovery::api_resource_list(reg, g, v) {
            Some(d) => ApiResponse::json(200, d),
            None => error_response(ApiError::no_route()),
        }),
        _ => None,
    }
}

fn faults(sim: &Sim, req: &ApiRequest, path: &str) -> ApiResponse {
    if req.method != Method::POST {
        return error_response(ApiError::method_not_allowed(req.method.as_str()));
    }
    let count = req.param("count").and_then(|c| c.parse().ok()).unwrap_or(1);
    match path.trim_start_matches("/kube-sim/faults/") {
        "drop-watches" => sim.faults.drop_watches(),
        "fail-429" => sim.faults.fail_next(count, Failure::TooManyRequests),
        "fail-500" => sim.faults.fail_next(count, Failure::Internal),
        "compact" => sim.store.compact(),
        "pause" => sim.faults.pause(),
        "resume" => sim.faults.resume(),
        "clock" => {
            let offset = req.param("offset").unwrap_or("0");
            match crate::faults::parse_signed_duration(offset) {
                Ok(offset) => sim.faults.set_clock_offset(offset),
                Err(why) => return error_response(ApiError::bad_request(why)),
            }
        }
        _ => return error_response(ApiError::no_route()),
    }
    ApiResponse::json(200, crate::status::success(Some(200), None))
}

fn to_http(r: ApiResponse) -> Response<RespBody> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(r.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    let (body, ct): (RespBody, String) = match r.body {
        Body::Json(v) => (
            Full::new(Bytes::from(v.to_string())).boxed_unsync(),
            r.content_type.unwrap_or_else(|| "application/json".into()),
        ),
        Body::Raw(bytes, ct) => (
            Full::new(bytes).boxed_unsync(),
            r.content_type.unwrap_or_else(|| ct.into()),
        ),
        Body::Stream(rx) => {
            let stream = tokio_stream_from(rx).map(|b| Ok::<_, Infallible>(Frame::data(b)));
            (
                StreamBody::new(stream).boxed_unsync(),
                "application/json".into(),
            )
        }
    };
    b = b.header("content-type", ct);
    // Every answer is private and uncached unless its handler says otherwise (a hashed
    // OpenAPI document is immutable).
    if !r
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("cache-control"))
    {
        b = b.header("cache-control", "no-cache, private");
    }
    for (k, v) in r.headers {
        b = b.header(k, v);
    }
    b.body(body).unwrap_or_else(|_| {
        Response::new(Full::new(Bytes::from_static(b"invalid response header")).boxed_unsync())
    })
}

fn tokio_stream_from(rx: tokio::sync::mpsc::Receiver<Bytes>) -> impl futures::Stream<Item = Bytes> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) })
}

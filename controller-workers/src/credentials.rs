//! Whose credentials a controller's API client carries, and what it says when the API
//! server refuses them.
//!
//! Without `--use-service-account-credentials` every controller uses the kubeconfig's
//! identity. With it, as KCM does, each controller authenticates as its own ServiceAccount
//! in `kube-system` (`deployment-controller`, `generic-garbage-collector`, ...: the names
//! the API server's bootstrap policy binds to `system:controller:<name>`). The
//! ServiceAccount is created when missing and its bearer token comes from the TokenRequest
//! API (`serviceaccounts/<name>/token`, one hour, renewed once 80% of its life has passed,
//! as KCM's dynamic client builder does), both asked for with the kubeconfig's identity.
//! A refused or failed request is retried with backoff and reported (log and `/readyz`),
//! never fatal: the other controllers keep working. A 401 with a token drops it and asks
//! for a new one at once (the ServiceAccount was recreated, the signing key rotated).
//!
//! Every controller client also logs the requests the API server refuses (403), naming the
//! controller, the verb, the resource and the refused identity, once per distinct refusal
//! a minute, so a missing RBAC grant shows in the log without flooding it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use tokio::sync::{watch, Notify};
use tower::{Layer, Service};
use tracing::{info, warn};

use crate::api_errors::is_already_exists;

/// Where KCM keeps its controllers' ServiceAccounts.
pub const NAMESPACE: &str = "kube-system";
/// The lifetime KCM asks for.
const EXPIRATION_SECONDS: i64 = 3600;
/// The share of a token's life left when it is renewed.
const LEEWAY_PERCENT: u32 = 20;
/// A shorter lifetime than this is taken as clock skew (KCM pins it the same way).
const MIN_LIFETIME: Duration = Duration::from_secs(600);
const RETRY_INITIAL: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(60);
/// A distinct refusal is logged at most once in this period.
const REFUSAL_LOG_PERIOD: Duration = Duration::from_secs(60);

/// The user name a ServiceAccount of [`NAMESPACE`] authenticates as.
pub fn username(service_account: &str) -> String {
    format!("system:serviceaccount:{NAMESPACE}:{service_account}")
}

/// When to renew a token the API server said expires `lifetime` from now.
pub fn renew_after(lifetime: Duration) -> Duration {
    let lifetime = lifetime.max(MIN_LIFETIME);
    lifetime - lifetime * LEEWAY_PERCENT / 100
}

/// One ServiceAccount's bearer token, kept fresh by a background task for as long as a
/// client holds it.
pub struct ServiceAccountToken {
    service_account: String,
    token: watch::Sender<Option<Arc<str>>>,
    problem: Mutex<Option<String>>,
    renew_now: Notify,
}

impl ServiceAccountToken {
    /// Starts keeping a token for `service_account`, asked for through `root` (a client
    /// with the kubeconfig's identity). Needs a tokio runtime.
    pub fn start(root: kube::Client, service_account: &str) -> Arc<Self> {
        let this = Arc::new(ServiceAccountToken {
            service_account: service_account.to_string(),
            token: watch::channel(None).0,
            problem: Mutex::new(None),
            renew_now: Notify::new(),
        });
        tokio::spawn(keep_fresh(Arc::downgrade(&this), root));
        this
    }

    pub fn current(&self) -> Option<Arc<str>> {
        self.token.borrow().clone()
    }

    /// Why there is no token yet (the last failure), if there is none.
    pub fn not_ready_reason(&self) -> Option<String> {
        if self.current().is_some() {
            return None;
        }
        Some(
            self.problem
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_else(|| "waiting for the first token".to_string()),
        )
    }

    /// Resolves once a token is there.
    pub async fn ready(&self) {
        let mut changes = self.token.subscribe();
        let _ = changes.wait_for(Option::is_some).await;
    }

    /// Drops the token (the API server no longer accepts it) and asks for a new one.
    fn invalidate(&self, rejected: &str) {
        self.token.send_if_modified(|current| {
            if current.as_deref() == Some(rejected) {
                *current = None;
                true
            } else {
                false
            }
        });
        self.renew_now.notify_one();
    }

    fn set_problem(&self, problem: Option<String>) {
        *self.problem.lock().unwrap_or_else(|p| p.into_inner()) = problem;
    }
}

/// Gets a token, publishes it, sleeps until it needs renewing; retries failures with
/// backoff. Ends when the last holder drops the token source.
async fn keep_fresh(source: Weak<ServiceAccountToken>, root: kube::Client) {
    let mut retry = RETRY_INITIAL;
    let mut last_logged: Option<(String, Instant)> = None;
    loop {
        let Some(this) = source.upgrade() else { return };
        let wait = match request_token(&root, &this.service_account).await {
            Ok((token, lifetime)) => {
                let first = this.current().is_none();
                this.token.send_replace(Some(Arc::from(token)));
                this.set_problem(None);
                retry = RETRY_INITIAL;
                last_logged = None;
                if first {
                    info!(service_account = %username(&this.service_account), "controller credentials ready");
                }
                renew_after(lifetime)
            }
            Err(problem) => {
                let repeated = matches!(&last_logged, Some((text, at)) if *text == problem && at.elapsed() < REFUSAL_LOG_PERIOD);
                if !repeated {
                    warn!(service_account = %username(&this.service_account), error = %problem, retry_in = ?retry, "cannot get the controller's ServiceAccount token; retrying");
                    last_logged = Some((problem.clone(), Instant::now()));
                }
                this.set_problem(Some(problem));
                let wait = retry;
                retry = (retry * 2).min(RETRY_MAX);
                wait
            }
        };
        let renew_now = async { this.renew_now.notified().await };
        let sleep = tokio::time::sleep(wait);
        tokio::select! {
            _ = sleep => {}
            _ = renew_now => {}
        }
    }
}

/// KCM's get-or-create of the ServiceAccount (creating `kube-system` first if it is
/// missing, tolerating a refusal there), then a TokenRequest. Returns the token and its
/// remaining lifetime.
async fn request_token(
    root: &kube::Client,
    service_account: &str,
) -> Result<(String, Duration), String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    let subject = format!("serviceaccount {NAMESPACE}/{service_account}");
    match accounts.get_opt(service_account).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            let namespaces: Api<Namespace> = Api::all(root.clone());
            if let Ok(None) = namespaces.get_opt(NAMESPACE).await {
                let namespace = Namespace {
                    metadata: kube::api::ObjectMeta {
                        name: Some(NAMESPACE.to_string()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                if let Err(error) = namespaces.create(&PostParams::default(), &namespace).await {
                    if !is_already_exists(&error) {
                        warn!(%error, "cannot create namespace {NAMESPACE}");
                    }
                }
            }
            let account = ServiceAccount {
                metadata: kube::api::ObjectMeta {
                    name: Some(service_account.to_string()),
                    namespace: Some(NAMESPACE.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match accounts.create(&PostParams::default(), &account).await {
                Ok(_) => info!(%subject, "created the controller's ServiceAccount"),
                Err(error) if is_already_exists(&error) => {}
                Err(error) => return Err(format!("creating {subject}: {}", describe(&error))),
            }
        }
        Err(error) => return Err(format!("reading {subject}: {}", describe(&error))),
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(EXPIRATION_SECONDS),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = accounts
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .map_err(|error| format!("requesting a token for {subject}: {}", describe(&error)))?;
    let status = answer
        .status
        .ok_or_else(|| format!("the token request for {subject} came back without a status"))?;
    if status.token.is_empty() {
        return Err(format!(
            "the token request for {subject} came back without a token"
        ));
    }
    // An expiry in the past (clock skew) renews at the minimum lifetime's pace.
    let lifetime = Duration::try_from(
        status
            .expiration_timestamp
            .0
            .duration_since(k8s_openapi::jiff::Timestamp::now()),
    )
    .unwrap_or_default();
    Ok((status.token, lifetime))
}

/// An API error as one line: the server's own message for refusals.
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

/// Remembers which refusals were logged lately, so each distinct one is logged at most
/// once a minute however often the controller retries.
#[derive(Default)]
pub struct RefusalLog {
    logged: Mutex<HashMap<String, Instant>>,
}

impl RefusalLog {
    /// True when `key` was not logged in the last minute (and marks it logged).
    pub fn should_log(&self, key: &str) -> bool {
        let mut logged = self.logged.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if logged.len() > 4096 {
            logged.retain(|_, at| now.duration_since(*at) < REFUSAL_LOG_PERIOD);
        }
        match logged.get(key) {
            Some(at) if now.duration_since(*at) < REFUSAL_LOG_PERIOD => false,
            _ => {
                logged.insert(key.to_string(), now);
                true
            }
        }
    }
}

/// The verb and resource of a request path, as the API server's authorizer names them
/// (`create`, `pods` in `ns`), for the refusal log.
pub fn describe_request(method: &http::Method, path: &str) -> (String, String) {
    let segments: Vec<&str> = path
        .split('?')
        .next()
        .unwrap_or("")
        .trim_matches('/')
        .split('/')
        .collect();
    let rest: &[&str] = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => &[],
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..]
            if !rest.is_empty() && !matches!(rest, ["status" | "finalize"]) =>
        {
            (Some(*ns), rest)
        }
        _ => (None, rest),
    };
    let group = match segments.as_slice() {
        ["apis", group, ..] => format!(".{group}"),
        _ => String::new(),
    };
    let resource = match rest {
        [] => path.to_string(),
        [resource] | [resource, _] => format!("{resource}{group}"),
        [resource, _, sub, ..] => format!("{resource}{group}/{sub}"),
    };
    let named = rest.len() >= 2;
    let verb = match *method {
        http::Method::GET if path.contains("watch=true") || path.contains("watch=1") => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "request",
    };
    let resource = match namespace {
        Some(ns) => format!("{resource} in namespace {ns}"),
        None => resource,
    };
    (verb.to_string(), resource)
}

/// The per-controller client layer: bearer token when the controller has a ServiceAccount
/// token source, refusal logging always.
#[derive(Clone)]
pub struct CredentialsLayer {
    pub controller: Arc<str>,
    /// Who the requests are made as, for the refusal log.
    pub identity: Arc<str>,
    pub token: Option<Arc<ServiceAccountToken>>,
    pub refusals: Arc<RefusalLog>,
}

impl<S> Layer<S> for CredentialsLayer {
    type Service = Credentials<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Credentials {
            inner,
            layer: self.clone(),
            waiting: None,
        }
    }
}

pub struct Credentials<S> {
    inner: S,
    layer: CredentialsLayer,
    waiting: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for Credentials<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Requests wait for the first token rather than go out anonymous and be refused.
        if let Some(token) = &self.layer.token {
            if token.current().is_none() {
                let token = token.clone();
                let waiting = self
                    .waiting
                    .get_or_insert_with(|| Box::pin(async move { token.ready().await }));
                if waiting.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            self.waiting = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        let sent_token = self.layer.token.as_ref().and_then(|t| t.current());
        if let Some(token) = &sent_token {
            if let Ok(value) = http::HeaderValue::from_str(&format!("Bearer {token}")) {
                let mut value = value;
                value.set_sensitive(true);
                request
                    .headers_mut()
                    .insert(http::header::AUTHORIZATION, value);
            }
        }
        let method = request.method().clone();
        let path = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let layer = self.layer.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            match response.status().as_u16() {
                403 => {
                    let (verb, resource) = describe_request(&method, &path);
                    let key = format!("{verb} {resource}");
                    if layer.refusals.should_log(&key) {
                        warn!(controller = %layer.controller, verb = %verb, resource = %resource, identity = %layer.identity, "the API server refused the request (403 Forbidden)");
                    }
                }
                401 => {
                    if let (Some(source), Some(token)) = (&layer.token, &sent_token) {
                        if layer
                            .refusals
                            .should_log(&format!("401 {}", layer.identity))
                        {
                            warn!(controller = %layer.controller, identity = %layer.identity, "the API server no longer accepts the ServiceAccount token (401): requesting a new one");
                        }
                        source.invalidate(token);
                    }
                }
                _ => {}
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_with_a_fifth_of_their_life_left() {
        assert_eq!(
            renew_after(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        // A lifetime shorter than ten minutes is taken as clock skew.
        assert_eq!(
            renew_after(Duration::from_secs(60)),
            Duration::from_secs(480)
        );
    }

    #[test]
    fn requests_are_described_as_the_authorizer_names_them() {
        let cases = [
            (
                http::Method::POST,
                "/apis/apps/v1/namespaces/rb/replicasets",
                "create",
                "replicasets.apps in namespace rb",
            ),
            (
                http::Method::PATCH,
                "/api/v1/namespaces/rb/pods/p?fieldManager=x",
                "patch",
                "pods in namespace rb",
            ),
            (
                http::Method::PUT,
                "/apis/apps/v1/namespaces/rb/deployments/d/status",
                "update",
                "deployments.apps/status in namespace rb",
            ),
            (http::Method::GET, "/api/v1/nodes", "list", "nodes"),
            (
                http::Method::DELETE,
                "/api/v1/namespaces/gone",
                "delete",
                "namespaces",
            ),
            (
                http::Method::PUT,
                "/api/v1/namespaces/gone/finalize",
                "update",
                "namespaces/finalize",
            ),
            (
                http::Method::DELETE,
                "/api/v1/namespaces/x/configmaps",
                "deletecollection",
                "configmaps in namespace x",
            ),
        ];
        for (method, path, verb, resource) in cases {
            assert_eq!(
                describe_request(&method, path),
                (verb.to_string(), resource.to_string()),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn a_refusal_is_logged_once_a_minute() {
        let log = RefusalLog::default();
        assert!(log.should_log("create pods"));
        assert!(!log.should_log("create pods"));
        assert!(log.should_log("create replicasets.apps"));
    }
}

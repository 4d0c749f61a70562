//! API clients for controllers: one per controller, as KCM's client builder makes them,
//! each with its own user agent (`rkcm-worker/0.1.0 ... /<controller>`), its own
//! client-side token bucket (`--kube-api-qps`, `--kube-api-burst`, applied per client as
//! client-go does), and its credentials: the kubeconfig's identity, or with
//! `--use-service-account-credentials` the controller's own ServiceAccount
//! ([`crate::credentials`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rkcm_client::rate_limit::TokenBucket;
use tower::{Layer, Service};

use crate::credentials::{self, CredentialsLayer, RefusalLog, ServiceAccountToken};
use crate::metrics::RestClientMetrics;

pub const USER_AGENT_PREFIX: &str = concat!("rkcm-worker/", env!("CARGO_PKG_VERSION"));

/// The name of the client that asks for ServiceAccounts and tokens (the kubeconfig's
/// identity, as KCM's root client builder).
const CREDENTIALS_CLIENT: &str = "controller-credentials";

#[derive(Clone)]
pub struct ClientFactory {
    config: kube::Config,
    qps: f32,
    burst: u32,
    /// Per-controller ServiceAccount credentials (`--use-service-account-credentials`).
    service_accounts: Option<Arc<ServiceAccounts>>,
    /// Which ServiceAccount a controller uses, by its name.
    service_account_of: fn(&str) -> Option<&'static str>,
    refusals: Arc<RefusalLog>,
    /// client-go's `rest_client_*` metrics, once the worker's registry is given.
    rest_metrics: Option<RestClientMetrics>,
}

/// The token sources by ServiceAccount (controllers may share one, as the certificate
/// controllers do), and which controller uses which.
struct ServiceAccounts {
    root: kube::Client,
    tokens: Mutex<BTreeMap<&'static str, Arc<ServiceAccountToken>>>,
    by_controller: Mutex<BTreeMap<String, Arc<ServiceAccountToken>>>,
}

impl ClientFactory {
    /// Clients with the kubeconfig's identity for every controller, or with
    /// `service_account_of` each controller's own ServiceAccount
    /// (`--use-service-account-credentials`).
    pub async fn new(
        kubeconfig: Option<&Path>,
        qps: f32,
        burst: u32,
        service_account_of: Option<fn(&str) -> Option<&'static str>>,
    ) -> anyhow::Result<Self> {
        let config = rkcm_client::kube_config(kubeconfig).await?;
        Self::from_config(config, qps, burst, service_account_of)
    }

    /// As [`ClientFactory::new`], from a loaded configuration.
    pub fn from_config(
        config: kube::Config,
        qps: f32,
        burst: u32,
        service_account_of: Option<fn(&str) -> Option<&'static str>>,
    ) -> anyhow::Result<Self> {
        let mut factory = ClientFactory {
            config,
            qps,
            burst,
            service_accounts: None,
            service_account_of: |_| None,
            refusals: Arc::default(),
            rest_metrics: None,
        };
        if let Some(service_account_of) = service_account_of {
            factory.service_account_of = service_account_of;
            let root = factory.build(CREDENTIALS_CLIENT, factory.config.clone(), None)?;
            factory.service_accounts = Some(Arc::new(ServiceAccounts {
                root,
                tokens: Mutex::default(),
                by_controller: Mutex::default(),
            }));
        }
        Ok(factory)
    }

    /// Records every request of the clients built from now on in `metrics` (client-go's
    /// `rest_client_*` families).
    pub fn with_metrics(mut self, metrics: RestClientMetrics) -> Self {
        self.rest_metrics = Some(metrics);
        self
    }

    /// The certificate authorities the kubeconfig trusts for the API server, PEM-encoded
    /// (KCM's `CAData` of a controller's client config); `None` when it names none.
    pub fn root_ca_pem(&self) -> Option<String> {
        use base64::Engine as _;
        let certs = self.config.root_cert.as_ref().filter(|c| !c.is_empty())?;
        let mut pem = String::new();
        for der in certs {
            let encoded = base64::engine::general_purpose::STANDARD.encode(der);
            pem.push_str("-----BEGIN CERTIFICATE-----\n");
            let mut rest = encoded.as_str();
            while !rest.is_empty() {
                let (line, tail) = rest.split_at(rest.len().min(64));
                pem.push_str(line);
                pem.push('\n');
                rest = tail;
            }
            pem.push_str("-----END CERTIFICATE-----\n");
        }
        Some(pem)
    }

    /// A client for the controller `name` (KCM's canonical controller name). With
    /// ServiceAccount credentials it carries no kubeconfig credential of its own (KCM's
    /// anonymous copy of the config) and waits for its token before its first request.
    pub fn client(&self, name: &str) -> anyhow::Result<kube::Client> {
        let service_account = (self.service_account_of)(name);
        match (&self.service_accounts, service_account) {
            (Some(accounts), Some(service_account)) => {
                let token = accounts.token(service_account);
                accounts
                    .by_controller
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name.to_string(), token.clone());
                let mut config = self.config.clone();
                config.auth_info = Default::default();
                let identity = credentials::username(service_account);
                self.build(name, config, Some((token, identity)))
            }
            _ => self.build(name, self.config.clone(), None),
        }
    }

    fn build(
        &self,
        name: &str,
        mut config: kube::Config,
        token: Option<(Arc<ServiceAccountToken>, String)>,
    ) -> anyhow::Result<kube::Client> {
        let agent = format!(
            "{USER_AGENT_PREFIX} ({}/{}) rkcm/{name}",
            std::env::consts::OS,
            std::env::consts::ARCH
        );
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_str(&agent)?,
        ));
        let bucket = Arc::new(TokenBucket::new(self.qps, self.burst));
        // client-go's `host` label: the API server's host and port.
        let host: Arc<str> = Arc::from(
            config
                .cluster_url
                .authority()
                .map(|a| a.as_str())
                .unwrap_or_default(),
        );
        let metrics = self
            .rest_metrics
            .clone()
            .map(|metrics| RequestMetrics { metrics, host });
        let (token, identity) = match token {
            Some((token, identity)) => (Some(token), identity),
            None => (None, "the kubeconfig's user".to_string()),
        };
        let credentials = CredentialsLayer {
            controller: Arc::from(name),
            identity: Arc::from(identity),
            token,
            refusals: self.refusals.clone(),
        };
        let builder = kube::client::ClientBuilder::try_from(config)
            .with_context(|| format!("building the API client of {name}"))?;
        Ok(builder
            .with_layer(&RequestMetricsLayer {
                metrics: metrics.clone(),
            })
            .with_layer(&RateLimitLayer { bucket, metrics })
            .with_layer(&credentials)
            .build())
    }

    /// Resolves once the controller's credentials can be used (at once without
    /// ServiceAccount credentials).
    pub async fn ready(&self, controller: &str) {
        let token = self.service_accounts.as_ref().and_then(|accounts| {
            accounts
                .by_controller
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(controller)
                .cloned()
        });
        if let Some(token) = token {
            token.ready().await;
        }
    }

    /// The controllers whose credentials are not usable yet, each with the reason, for
    /// `/readyz`.
    pub fn not_ready(&self) -> Vec<String> {
        let Some(accounts) = &self.service_accounts else {
            return Vec::new();
        };
        accounts
            .by_controller
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|(controller, token)| {
                token
                    .not_ready_reason()
                    .map(|reason| format!("credentials of {controller}: {reason}"))
            })
            .collect()
    }
}

impl ServiceAccounts {
    fn token(&self, service_account: &'static str) -> Arc<ServiceAccountToken> {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(service_account)
            .or_insert_with(|| ServiceAccountToken::start(self.root.clone(), service_account))
            .clone()
    }
}

/// Makes each request wait for a token. kube's client drives one request's readiness at
/// a time (its buffer), so waiting in `poll_ready` keeps requests in order.
#[derive(Clone)]
struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
    metrics: Option<RequestMetrics>,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            have_token: false,
            metrics: self.metrics.clone(),
            wait_started: None,
            waited: Duration::ZERO,
        }
    }
}

struct RateLimited<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    have_token: bool,
    metrics: Option<RequestMetrics>,
    /// When the request now waiting for a token began to wait, and how long the one that
    /// got its token waited.
    wait_started: Option<Instant>,
    waited: Duration,
}

impl<S, B> Service<http::Request<B>> for RateLimited<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.have_token {
            let started = *self.wait_started.get_or_insert_with(Instant::now);
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            match self.bucket.try_take() {
                None => {
                    self.have_token = true;
                    self.wait_started = None;
                    self.waited = started.elapsed();
                }
                Some(delay) => self.wait = Some(Box::pin(tokio::time::sleep(delay))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.have_token = false;
        if let Some(m) = &self.metrics {
            m.metrics.rate_limited(
                request.method().as_str(),
                &m.host,
                self.waited.as_secs_f64(),
            );
        }
        Box::pin(self.inner.call(request))
    }
}

/// Where a client records its requests, and the `host` label it records them under.
#[derive(Clone)]
struct RequestMetrics {
    metrics: RestClientMetrics,
    host: Arc<str>,
}

/// Times each request from sending it to its response's headers and counts it by status
/// (inside the rate limiter, so its wait is not counted, as client-go).
#[derive(Clone)]
struct RequestMetricsLayer {
    metrics: Option<RequestMetrics>,
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetered<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequestMetered {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

struct RequestMetered<S> {
    inner: S,
    metrics: Option<RequestMetrics>,
}

impl<S, B, RB> Service<http::Request<B>> for RequestMetered<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Some(metrics) = self.metrics.clone() else {
            return Box::pin(self.inner.call(request));
        };
        let method = request.method().clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            metrics.metrics.request(
                method.as_str(),
                &metrics.host,
                &code,
                started.elapsed().as_secs_f64(),
            );
            result
        })
    }
}

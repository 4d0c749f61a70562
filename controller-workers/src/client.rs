//! API clients for controllers: one per controller, as KCM's client builder makes them,
//! each with its own user agent (`rkcm-worker/0.1.0 ... /<controller>`) and its own
//! client-side token bucket (`--kube-api-qps`, `--kube-api-burst`, applied per client as
//! client-go does).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use anyhow::Context as _;
use rkcm_informer_server::rate_limit::TokenBucket;
use tower::{Layer, Service};

pub const USER_AGENT_PREFIX: &str = concat!("rkcm-worker/", env!("CARGO_PKG_VERSION"));

#[derive(Clone)]
pub struct ClientFactory {
    config: kube::Config,
    qps: f32,
    burst: u32,
}

impl ClientFactory {
    pub async fn new(kubeconfig: Option<&Path>, qps: f32, burst: u32) -> anyhow::Result<Self> {
        let config = rkcm_informer_server::server::kube_config(kubeconfig).await?;
        Ok(ClientFactory { config, qps, burst })
    }

    /// A client for the controller `name` (KCM's canonical controller name).
    pub fn client(&self, name: &str) -> anyhow::Result<kube::Client> {
        let mut config = self.config.clone();
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
        let builder = kube::client::ClientBuilder::try_from(config)
            .with_context(|| format!("building the API client of {name}"))?;
        Ok(builder.with_layer(&RateLimitLayer { bucket }).build())
    }
}

/// Makes each request wait for a token. kube's client drives one request's readiness at
/// a time (its buffer), so waiting in `poll_ready` keeps requests in order.
#[derive(Clone)]
struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            have_token: false,
        }
    }
}

struct RateLimited<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    have_token: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.have_token {
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            match self.bucket.try_take() {
                None => self.have_token = true,
                Some(delay) => self.wait = Some(Box::pin(tokio::time::sleep(delay))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.have_token = false;
        Box::pin(self.inner.call(request))
    }
}

//! The one reflector of a resource: LIST (pages of 500) then WATCH with bookmarks from the
//! list's resourceVersion, feeding the resource's cache, as client-go's Reflector does.
//!
//! A watch that ends is reopened from the last resourceVersion seen; a 410 Gone (the API
//! server no longer holds that history) relists, and the cache sends RESET and the new
//! snapshot to its subscribers. Failures back off as client-go's reflector does (800 ms
//! doubling to 30 s, with jitter, reset after two quiet minutes) and turn the resource's
//! health to NOT_SERVING until a list or watch succeeds again.
//!
//! kube-runtime's `watcher` does all of this too, but keeps the list's resourceVersion and
//! the API server's bookmarks to itself; the cache needs both (the version a List answers
//! with, and the progress that lets subscribers resume), hence a reflector of our own on
//! kube-client's list/watch requests and kube-runtime's backoff.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ListParams, WatchParams};
use kube::core::{Request, WatchEvent};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::DefaultBackoff;
use rand::Rng;
use serde::Deserialize;
use serde_json::Value;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;
use tracing::{debug, info, warn};

use crate::cache::ResourceCache;
use crate::object::CachedObject;
use rkcm_client::rate_limit::TokenBucket;

/// What a reflector needs besides its cache.
#[derive(Clone)]
pub struct ReflectorContext {
    pub client: kube::Client,
    pub limiter: Arc<TokenBucket>,
    pub health: HealthReporter,
    pub page_size: u32,
}

#[derive(Debug, thiserror::Error)]
enum ReflectError {
    #[error("the API server no longer holds resourceVersion {0} (410 Gone)")]
    Gone(String),
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Other(String),
}

#[derive(Deserialize)]
struct ListPage {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Vec<Value>,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: String,
}

pub fn url_path(cache: &ResourceCache) -> String {
    let gvr = &cache.info.gvr;
    if gvr.group.is_empty() {
        format!("/api/{}/{}", gvr.version, gvr.resource)
    } else {
        format!("/apis/{}/{}/{}", gvr.group, gvr.version, gvr.resource)
    }
}

/// Runs until aborted.
pub async fn run(cache: Arc<ResourceCache>, ctx: ReflectorContext) {
    let resource = cache.info.gvr.path();
    let request = Request::new(url_path(&cache));
    let mut backoff = DefaultBackoff::default();
    loop {
        let mut rv = match list(&cache, &ctx, &request).await {
            Ok(rv) => rv,
            Err(error) => {
                let delay = backoff.next().unwrap_or(Duration::from_secs(30));
                warn!(%resource, %error, ?delay, "list failed; retrying");
                ctx.health
                    .set_service_status(&resource, ServingStatus::NotServing)
                    .await;
                tokio::time::sleep(delay).await;
                continue;
            }
        };
        backoff.reset();
        ctx.health
            .set_service_status(&resource, ServingStatus::Serving)
            .await;
        loop {
            match watch(&cache, &ctx, &request, &mut rv).await {
                Ok(()) => backoff.reset(),
                Err(ReflectError::Gone(from)) => {
                    info!(%resource, %from, "watch history expired; relisting");
                    break;
                }
                Err(error) => {
                    let delay = backoff.next().unwrap_or(Duration::from_secs(30));
                    warn!(%resource, %error, ?delay, "watch failed; retrying");
                    ctx.health
                        .set_service_status(&resource, ServingStatus::NotServing)
                        .await;
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}

/// Lists every page, then replaces the cache with the result. Returns the list's
/// resourceVersion.
async fn list(
    cache: &ResourceCache,
    ctx: &ReflectorContext,
    request: &Request,
) -> Result<String, ReflectError> {
    let mut objects = Vec::new();
    let mut continue_token: Option<String> = None;
    let (api_version, kind) = type_meta(cache);
    let rv = loop {
        ctx.limiter.acquire().await;
        let params = ListParams {
            limit: Some(ctx.page_size),
            continue_token: continue_token.clone(),
            ..ListParams::default()
        };
        let http_request = request.list(&params).map_err(kube::Error::BuildRequest)?;
        let page: ListPage = match ctx.client.request(http_request).await {
            Ok(page) => page,
            Err(kube::Error::Api(status)) if status.code == 410 => {
                // The continue token expired: start the list again.
                continue_token = None;
                objects.clear();
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        for item in page.items {
            let item = with_type_meta(item, &api_version, &kind);
            match CachedObject::from_value(&cache.gvr, item) {
                Ok(object) => objects.push(Arc::new(object)),
                Err(error) => {
                    warn!(resource = %cache.info.gvr.path(), %error, "skipping a listed object")
                }
            }
        }
        if page.metadata.continue_token.is_empty() {
            break page.metadata.resource_version;
        }
        continue_token = Some(page.metadata.continue_token);
    };
    debug!(resource = %cache.info.gvr.path(), objects = objects.len(), %rv, "listed");
    cache.replace(objects, &rv);
    Ok(rv)
}

/// One watch, from `rv`, until the API server ends it. Keeps `rv` at the last version seen.
async fn watch(
    cache: &ResourceCache,
    ctx: &ReflectorContext,
    request: &Request,
    rv: &mut String,
) -> Result<(), ReflectError> {
    ctx.limiter.acquire().await;
    // As client-go: a random timeout between 5 and 10 minutes spreads the re-watches.
    let timeout = rand::rng().random_range(300..600);
    let params = WatchParams {
        bookmarks: true,
        timeout: Some(timeout),
        ..WatchParams::default()
    };
    let http_request = request
        .watch(&params, rv)
        .map_err(kube::Error::BuildRequest)?;
    let stream = match ctx.client.request_events::<Value>(http_request).await {
        Ok(stream) => stream,
        Err(kube::Error::Api(status)) if status.code == 410 => {
            return Err(ReflectError::Gone(rv.clone()))
        }
        Err(error) => return Err(error.into()),
    };
    ctx.health
        .set_service_status(&cache.info.gvr.path(), ServingStatus::Serving)
        .await;
    let (api_version, kind) = type_meta(cache);
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                // The connection broke mid-stream: reopen from where we are.
                debug!(resource = %cache.info.gvr.path(), %error, "watch stream ended");
                return Ok(());
            }
        };
        let (object, deleted) = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
            WatchEvent::Deleted(o) => (o, true),
            WatchEvent::Bookmark(bookmark) => {
                *rv = bookmark.metadata.resource_version.clone();
                cache.bookmark(rv);
                continue;
            }
            WatchEvent::Error(status) if status.code == 410 => {
                return Err(ReflectError::Gone(rv.clone()))
            }
            WatchEvent::Error(status) => {
                return Err(ReflectError::Other(format!(
                    "watch error {}: {}",
                    status.code, status.message
                )))
            }
        };
        match CachedObject::from_value(&cache.gvr, with_type_meta(object, &api_version, &kind)) {
            Ok(object) => {
                *rv = object.resource_version().to_string();
                cache.apply(Arc::new(object), deleted);
            }
            Err(error) => {
                warn!(resource = %cache.info.gvr.path(), %error, "skipping a watched object")
            }
        }
    }
    Ok(())
}

fn type_meta(cache: &ResourceCache) -> (String, String) {
    let gvr = &cache.info.gvr;
    let api_version = if gvr.group.is_empty() {
        gvr.version.clone()
    } else {
        format!("{}/{}", gvr.group, gvr.version)
    };
    (api_version, cache.info.kind.clone())
}

/// List items come without apiVersion and kind; a cached object carries both (first, as
/// the API server writes them), so it reads the same whether it came from a list or a watch.
fn with_type_meta(object: Value, api_version: &str, kind: &str) -> Value {
    match object {
        Value::Object(map) if !map.contains_key("kind") || !map.contains_key("apiVersion") => {
            let mut out = serde_json::Map::with_capacity(map.len() + 2);
            out.insert("kind".into(), Value::String(kind.to_string()));
            out.insert("apiVersion".into(), Value::String(api_version.to_string()));
            for (k, v) in map {
                if k != "kind" && k != "apiVersion" {
                    out.insert(k, v);
                }
            }
            Value::Object(out)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_get_their_type_first() {
        let item = serde_json::json!({"metadata": {"name": "a"}, "spec": {}});
        let out = with_type_meta(item, "apps/v1", "Deployment");
        let text = serde_json::to_string(&out).unwrap();
        assert!(
            text.starts_with(r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata""#),
            "{text}"
        );
    }
}

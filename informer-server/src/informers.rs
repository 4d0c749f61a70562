//! The running resources: one cache and one reflector per resource, started by the first
//! List, Get or Watch that names it (or by `--warm`), kept while subscribed, and stopped
//! after `--idle-resource-timeout` without subscribers. Resource names are resolved against
//! the API server's discovery, refreshed when a request names a resource it does not know
//! (a CRD created since).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::discovery::{verbs, Discovery, Scope};
use rkcm_proto::v1::GroupVersionResource;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::cache::{ResourceCache, ResourceInfo};
use crate::reflector::{self, ReflectorContext};

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("the server doesn't have a resource type {0:?}")]
    NotFound(String),
    #[error("resource {0:?} cannot be listed and watched (verbs: {1})")]
    NotWatchable(String, String),
    #[error("resource discovery failed (is the API server reachable?): {0}")]
    Unavailable(String),
    #[error("a resource needs at least its version and plural name, got {0:?}")]
    Invalid(String),
}

pub struct Running {
    pub cache: Arc<ResourceCache>,
    pub warm: bool,
    task: JoinHandle<()>,
    last_used: Mutex<Instant>,
}

impl Running {
    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
        self.cache.close_all();
    }
}

struct DiscoveryCache {
    fetched: Instant,
    resources: Arc<Vec<ResourceInfo>>,
}

pub struct Informers {
    ctx: ReflectorContext,
    history_limit: usize,
    idle_timeout: Duration,
    discovery: tokio::sync::Mutex<Option<DiscoveryCache>>,
    running: Mutex<HashMap<String, Arc<Running>>>,
}

/// Discovery is refreshed at most this often when a request names an unknown resource.
const DISCOVERY_REFRESH: Duration = Duration::from_secs(5);

impl Informers {
    pub fn new(ctx: ReflectorContext, history_limit: usize, idle_timeout: Duration) -> Self {
        Informers {
            ctx,
            history_limit,
            idle_timeout,
            discovery: tokio::sync::Mutex::new(None),
            running: Mutex::new(HashMap::new()),
        }
    }

    fn running_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Running>>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every resource the API server serves (from discovery, refreshed if `refresh`).
    pub async fn resources(&self, refresh: bool) -> Result<Arc<Vec<ResourceInfo>>, LookupError> {
        let mut cached = self.discovery.lock().await;
        if let Some(c) = cached.as_ref() {
            if !refresh || c.fetched.elapsed() < DISCOVERY_REFRESH {
                return Ok(c.resources.clone());
            }
        }
        self.ctx.limiter.acquire().await;
        let resources = Arc::new(discover(&self.ctx.client).await?);
        *cached = Some(DiscoveryCache {
            fetched: Instant::now(),
            resources: resources.clone(),
        });
        Ok(resources)
    }

    async fn resolve(&self, gvr: &GroupVersionResource) -> Result<ResourceInfo, LookupError> {
        if gvr.resource.is_empty() {
            return Err(LookupError::Invalid(gvr.path()));
        }
        let find = |all: &[ResourceInfo]| {
            all.iter()
                .find(|r| {
                    r.gvr.group == gvr.group
                        && r.gvr.resource == gvr.resource
                        && (gvr.version.is_empty() || r.gvr.version == gvr.version)
                })
                .cloned()
        };
        let info = match find(&self.resources(false).await?) {
            Some(info) => info,
            None => find(&self.resources(true).await?)
                .ok_or_else(|| LookupError::NotFound(describe(gvr)))?,
        };
        if !(info.verbs.iter().any(|v| v == verbs::LIST)
            && info.verbs.iter().any(|v| v == verbs::WATCH))
        {
            return Err(LookupError::NotWatchable(
                describe(gvr),
                info.verbs.join(","),
            ));
        }
        Ok(info)
    }

    /// The cache of a resource, starting its reflector if it is not running.
    pub async fn start(
        &self,
        gvr: &GroupVersionResource,
        warm: bool,
    ) -> Result<Arc<ResourceCache>, LookupError> {
        if let Some(running) = self.running_map().get(&gvr.path()) {
            running.touch();
            return Ok(running.cache.clone());
        }
        let info = self.resolve(gvr).await?;
        let key = info.gvr.path();
        let mut map = self.running_map();
        if let Some(running) = map.get(&key) {
            running.touch();
            return Ok(running.cache.clone());
        }
        info!(resource = %key, warm, "starting reflector");
        let cache = Arc::new(ResourceCache::new(info, self.history_limit));
        let task = tokio::spawn(reflector::run(cache.clone(), self.ctx.clone()));
        let running = Arc::new(Running {
            cache: cache.clone(),
            warm,
            task,
            last_used: Mutex::new(Instant::now()),
        });
        if key != gvr.path() {
            // Asked without a version: remember the alias too.
            map.insert(gvr.path(), running.clone());
        }
        map.insert(key, running);
        Ok(cache)
    }

    /// Every running resource.
    pub fn running(&self) -> Vec<Arc<Running>> {
        let mut seen = std::collections::HashSet::new();
        self.running_map()
            .values()
            .filter(|r| seen.insert(Arc::as_ptr(r)))
            .cloned()
            .collect()
    }

    /// Stops the resources nobody has used for the idle timeout.
    pub fn reap(&self) {
        let mut map = self.running_map();
        let before = map.len();
        map.retain(|key, running| {
            let keep = running.warm
                || running.cache.subscriber_count() > 0
                || running.idle_for() < self.idle_timeout;
            if !keep {
                info!(resource = %key, "stopping idle reflector");
            }
            keep
        });
        if map.len() != before {
            tracing::debug!(running = map.len(), "reaped idle resources");
        }
    }

    /// Marks a running resource as used now (a subscriber left; its idle time starts).
    pub fn touch(&self, gvr: &GroupVersionResource) {
        if let Some(running) = self.running_map().get(&gvr.path()) {
            running.touch();
        }
    }
}

fn describe(gvr: &GroupVersionResource) -> String {
    if gvr.group.is_empty() {
        gvr.resource.clone()
    } else {
        format!("{}.{}", gvr.resource, gvr.group)
    }
}

/// The API server's resources, preferred versions first, subresources left out.
async fn discover(client: &kube::Client) -> Result<Vec<ResourceInfo>, LookupError> {
    let discovery = match Discovery::new(client.clone()).run_aggregated().await {
        Ok(d) => d,
        Err(error) => {
            warn!(%error, "aggregated discovery failed; falling back to per-group discovery");
            Discovery::new(client.clone())
                .run()
                .await
                .map_err(|e| LookupError::Unavailable(e.to_string()))?
        }
    };
    let mut out = Vec::new();
    for group in discovery.groups() {
        let preferred = group.preferred_version_or_latest().to_string();
        let mut versions: Vec<String> = group.versions().map(str::to_string).collect();
        versions.sort_by_key(|v| *v != preferred);
        for version in versions {
            for (resource, caps) in group.versioned_resources(&version) {
                out.push(ResourceInfo {
                    gvr: GroupVersionResource {
                        group: resource.group.clone(),
                        version: resource.version.clone(),
                        resource: resource.plural.clone(),
                    },
                    kind: resource.kind.clone(),
                    namespaced: caps.scope == Scope::Namespaced,
                    verbs: caps.operations.clone(),
                });
            }
        }
    }
    Ok(out)
}

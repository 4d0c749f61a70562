//! The quota monitors (upstream `resource_quota_monitor.go`): one metadata-only
//! informer-server stream per quotable resource that the controller does not read typed,
//! found through the informer-server's discovery (re-read every 30 s, so a CRD created
//! later is counted too). A monitor keeps only the names of its objects by namespace,
//! which is all `count/<resource>` needs, and tells the controller of each deletion (an
//! object that leaves a relist counts as one), so the quotas counting it are recomputed.
//!
//! Quotable: the preferred version of each namespaced resource that can be created,
//! listed, watched and deleted, minus the resources quota ignores. Pods, Services,
//! PersistentVolumeClaims and ResourceQuotas are read through the worker's typed
//! informers instead.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::Event;
use rkcm_client::informer::{self as client, ClientError};
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::{GroupVersionResource, Projection, ResourceInfo, Shard, WatchRequest};
use serde::Deserialize;
use tonic::transport::Channel;
use tracing::{debug, info, warn};

use super::evaluator::IGNORED;

/// Resources read through typed informers, not monitors.
pub(super) const TYPED: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "services"),
    ("", "persistentvolumeclaims"),
    ("", "resourcequotas"),
];

/// Called with (group, resource, namespace) when an object of a monitored resource is
/// deleted.
pub(super) type Replenish = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// A PartialObjectMetadata from the stream.
#[derive(Deserialize)]
struct MetaObject {
    metadata: ObjectMeta,
}

/// The (namespace, name) key of a streamed object.
fn key_of(object: &MetaObject) -> (String, String) {
    let meta = &object.metadata;
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The quotable resources of a discovery (see the module documentation), typed ones
/// included.
pub(super) fn quotable(resources: &[ResourceInfo]) -> Vec<ResourceInfo> {
    let mut seen = HashSet::new();
    resources
        .iter()
        .filter(|r| r.namespaced && !r.resource.contains('/'))
        .filter(|r| seen.insert((r.group.clone(), r.resource.clone())))
        .filter(|r| {
            ["create", "list", "watch", "delete"]
                .iter()
                .all(|verb| r.verbs.iter().any(|v| v == verb))
        })
        .filter(|r| !IGNORED.contains(&(r.group.as_str(), r.resource.as_str())))
        .cloned()
        .collect()
}

#[derive(Default)]
struct Objects {
    /// The first list has ended.
    synced: bool,
    by_namespace: HashMap<String, HashSet<String>>,
    /// A list under way (after a RESET): replaces `by_namespace` when it ends.
    listing: Option<HashMap<String, HashSet<String>>>,
}

/// One resource's monitor.
pub(super) struct Monitor {
    objects: RwLock<Objects>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Monitor {
    fn new() -> Arc<Monitor> {
        Arc::new(Monitor {
            objects: RwLock::new(Objects::default()),
            task: Mutex::new(None),
        })
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects> {
        self.objects.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    fn synced(&self) -> bool {
        self.read().synced
    }

    fn begin_list(&self) {
        self.write().listing = Some(HashMap::new());
    }

    fn upsert(&self, (namespace, name): (String, String)) {
        let mut objects = self.write();
        let target = match objects.listing.as_mut() {
            Some(listing) => listing,
            None => &mut objects.by_namespace,
        };
        target.entry(namespace).or_default().insert(name);
    }

    /// Forgets an object; whether it was known.
    fn remove(&self, (namespace, name): &(String, String)) -> bool {
        let mut objects = self.write();
        if let Some(listing) = objects.listing.as_mut() {
            if let Some(names) = listing.get_mut(namespace) {
                names.remove(name);
            }
        }
        let Some(names) = objects.by_namespace.get_mut(namespace) else {
            return false;
        };
        let known = names.remove(name);
        if names.is_empty() {
            objects.by_namespace.remove(namespace);
        }
        known
    }

    /// Ends a list: its objects replace the old ones. The namespaces that lost objects.
    fn end_list(&self) -> Vec<String> {
        let mut objects = self.write();
        objects.synced = true;
        let Some(mut listed) = objects.listing.take() else {
            return Vec::new();
        };
        listed.retain(|_, names| !names.is_empty());
        let lost: Vec<String> = objects
            .by_namespace
            .iter()
            .filter(|(namespace, names)| {
                let now = listed.get(*namespace);
                names
                    .iter()
                    .any(|name| now.is_none_or(|now| !now.contains(name)))
            })
            .map(|(namespace, _)| namespace.clone())
            .collect();
        objects.by_namespace = listed;
        lost
    }

    /// The number of objects in a namespace.
    pub(super) fn count(&self, namespace: &str) -> usize {
        self.read()
            .by_namespace
            .get(namespace)
            .map_or(0, HashSet::len)
    }
}

pub(super) struct Monitors {
    client: InformerClient<Channel>,
    subscriber: String,
    shard: Option<Shard>,
    replenish: Replenish,
    by_resource: Mutex<HashMap<(String, String), Arc<Monitor>>>,
}

impl Monitors {
    pub(super) fn new(
        client: InformerClient<Channel>,
        subscriber: String,
        shard: Option<Shard>,
        replenish: Replenish,
    ) -> Monitors {
        Monitors {
            client,
            subscriber,
            shard,
            replenish,
            by_resource: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Monitor>>> {
        self.by_resource.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts monitors for the quotable resources not monitored yet and stops those of
    /// resources that are gone (upstream `SyncMonitors` and `StartMonitors`).
    pub(super) fn sync(&self, quotable: &[ResourceInfo]) {
        let wanted: HashMap<(String, String), &ResourceInfo> = quotable
            .iter()
            .filter(|r| !TYPED.contains(&(r.group.as_str(), r.resource.as_str())))
            .map(|r| ((r.group.clone(), r.resource.clone()), r))
            .collect();
        let mut monitors = self.lock();
        let (mut kept, mut added, mut removed) = (0, 0, 0);
        monitors.retain(|key, monitor| {
            let keep = wanted.contains_key(key);
            if keep {
                kept += 1;
            } else {
                removed += 1;
                if let Some(task) = monitor
                    .task
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                {
                    task.abort();
                }
            }
            keep
        });
        for (key, info) in wanted {
            if monitors.contains_key(&key) {
                continue;
            }
            let monitor = Monitor::new();
            let task = tokio::spawn(run(
                self.client.clone(),
                WatchRequest {
                    resource: Some(GroupVersionResource {
                        group: info.group.clone(),
                        version: info.version.clone(),
                        resource: info.resource.clone(),
                    }),
                    projection: Projection::Metadata as i32,
                    subscriber: self.subscriber.clone(),
                    shard: self.shard,
                    ..Default::default()
                },
                monitor.clone(),
                self.replenish.clone(),
            ));
            *monitor.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
            monitors.insert(key, monitor);
            added += 1;
        }
        debug!(added, kept, removed, "quota synced monitors");
    }

    /// Some monitor exists and every one has its first list (upstream `IsSynced`).
    pub(super) fn is_synced(&self) -> bool {
        let monitors = self.lock();
        !monitors.is_empty() && monitors.values().all(|m| m.synced())
    }

    /// The resources whose first list has not ended, for logs.
    pub(super) fn unsynced(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, monitor)| !monitor.synced())
            .map(|((group, resource), _)| {
                if group.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}.{group}")
                }
            })
            .collect();
        names.sort();
        names
    }

    /// A synced monitor holding `names` of `namespace`, fed by nothing (tests stand in for
    /// its stream).
    #[cfg(test)]
    pub(super) fn insert_synced(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        names: &[&str],
    ) {
        let monitor = Monitor::new();
        monitor.begin_list();
        for name in names {
            monitor.upsert((namespace.to_string(), name.to_string()));
        }
        monitor.end_list();
        self.lock()
            .insert((group.to_string(), resource.to_string()), monitor);
    }

    /// The monitor of a resource, once it has its first list.
    pub(super) fn synced_monitor(&self, group: &str, resource: &str) -> Option<Arc<Monitor>> {
        self.lock()
            .get(&(group.to_string(), resource.to_string()))
            .filter(|monitor| monitor.synced())
            .cloned()
    }
}

async fn run(
    client: InformerClient<Channel>,
    request: WatchRequest,
    monitor: Arc<Monitor>,
    replenish: Replenish,
) {
    let (group, resource) = request
        .resource
        .as_ref()
        .map(|r| (r.group.clone(), r.resource.clone()))
        .unwrap_or_default();
    let stream = client::watch::<MetaObject>(client, request);
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => monitor.begin_list(),
            Ok(Event::InitApply(object)) | Ok(Event::Apply(object)) => {
                monitor.upsert(key_of(&object))
            }
            Ok(Event::InitDone) => {
                let first = !monitor.synced();
                for namespace in monitor.end_list() {
                    replenish(&group, &resource, &namespace);
                }
                if first {
                    debug!(%group, %resource, "quota monitor synced");
                }
            }
            Ok(Event::Delete(object)) => {
                let key = key_of(&object);
                monitor.remove(&key);
                replenish(&group, &resource, &key.0);
            }
            Err(ClientError::Status(status)) if status.code() == tonic::Code::NotFound => {
                // The resource is gone (a deleted CRD): the next discovery stops us.
                debug!(%group, %resource, "resource not served any more");
            }
            Err(error) => {
                warn!(%group, %resource, %error, "quota monitor stream interrupted; reconnecting")
            }
        }
    }
    info!(%group, %resource, "quota monitor stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(group: &str, resource: &str, namespaced: bool, verbs: &[&str]) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            kind: "Kind".into(),
            namespaced,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn quotable_resources_are_namespaced_creatable_and_not_ignored() {
        let all = ["create", "delete", "get", "list", "watch"];
        let resources = [
            info("", "configmaps", true, &all),
            info("", "pods", true, &all),
            info("", "pods/status", true, &["get", "update"]),
            info("", "events", true, &all),
            info("", "nodes", false, &all),
            info("", "bindings", true, &["create"]),
            info(
                "authorization.k8s.io",
                "localsubjectaccessreviews",
                true,
                &["create"],
            ),
            info("apps", "deployments", true, &all),
            info("example.com", "widgets", true, &all),
            info("example.com", "widgets", true, &all),
            info("metrics.k8s.io", "pods", true, &["get", "list"]),
        ];
        let names: Vec<String> = quotable(&resources)
            .iter()
            .map(|r| format!("{}/{}", r.group, r.resource))
            .collect();
        assert_eq!(
            names,
            [
                "/configmaps",
                "/pods",
                "apps/deployments",
                "example.com/widgets"
            ]
        );
    }

    #[test]
    fn a_monitor_counts_by_namespace_and_reports_what_a_relist_lost() {
        let monitor = Monitor::new();
        let key = |ns: &str, name: &str| (ns.to_string(), name.to_string());
        monitor.begin_list();
        monitor.upsert(key("a", "x"));
        monitor.upsert(key("a", "y"));
        monitor.upsert(key("b", "z"));
        assert!(!monitor.synced());
        assert!(monitor.end_list().is_empty());
        assert!(monitor.synced());
        assert_eq!(
            (monitor.count("a"), monitor.count("b"), monitor.count("c")),
            (2, 1, 0)
        );
        assert!(monitor.remove(&key("a", "x")));
        assert!(!monitor.remove(&key("a", "x")), "already gone");
        assert_eq!(monitor.count("a"), 1);
        // A relist that no longer holds b/z: counts stay until it ends.
        monitor.begin_list();
        monitor.upsert(key("a", "y"));
        monitor.upsert(key("c", "new"));
        assert_eq!(monitor.count("b"), 1);
        assert_eq!(monitor.end_list(), ["b"]);
        assert_eq!(
            (monitor.count("a"), monitor.count("b"), monitor.count("c")),
            (1, 0, 1)
        );
    }
}

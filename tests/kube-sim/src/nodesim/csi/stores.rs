//! The storage objects node-sim's scheduler and csi-sim share, each kept by a watch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};

use crate::nodesim::Shared;

/// The storage objects node-sim's scheduler and csi-sim read: claims (of node-sim's
/// namespace, when it has one), volumes and classes, each kept by a watch.
#[derive(Clone)]
pub struct StorageStores {
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    pub classes: Store<StorageClass>,
    synced: Arc<[AtomicBool; 3]>,
}

impl StorageStores {
    /// Starts the three watches; every change wakes the scheduler and csi-sim.
    pub fn start(shared: &Arc<Shared>, tasks: &mut Vec<tokio::task::JoinHandle<()>>) -> Self {
        let client = shared.client.clone();
        let claims_api: Api<PersistentVolumeClaim> = match &shared.config.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let synced: Arc<[AtomicBool; 3]> = Arc::new(Default::default());
        let claims = watch_into(shared, claims_api, synced.clone(), 0, tasks);
        let volumes = watch_into(shared, Api::all(client.clone()), synced.clone(), 1, tasks);
        let classes = watch_into(shared, Api::all(client), synced.clone(), 2, tasks);
        StorageStores {
            claims,
            volumes,
            classes,
            synced,
        }
    }

    /// Every watch has listed once.
    pub fn synced(&self) -> bool {
        self.synced.iter().all(|s| s.load(Ordering::Relaxed))
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims
            .get(&reflector::ObjectRef::new(name).within(namespace))
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(&reflector::ObjectRef::new(name))
    }

    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(&reflector::ObjectRef::new(name))
    }
}

/// A reflector for `api` whose events wake the scheduler and csi-sim; `synced[slot]` turns
/// true at its first complete list.
fn watch_into<K>(
    shared: &Arc<Shared>,
    api: Api<K>,
    synced: Arc<[AtomicBool; 3]>,
    slot: usize,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let events = reflector::reflector(
        writer,
        watcher::watcher(api, watcher::Config::default()).default_backoff(),
    );
    let wake = shared.clone();
    tasks.push(tokio::spawn(async move {
        events
            .for_each(|event| {
                match event {
                    Ok(event) => {
                        if matches!(event, watcher::Event::InitDone) {
                            synced[slot].store(true, Ordering::Relaxed);
                        }
                        wake.scheduler_wake.notify_one();
                        wake.storage_wake.notify_one();
                    }
                    Err(e) => tracing::debug!(error = %e, "storage watch failed; retrying"),
                }
                async {}
            })
            .await;
    }));
    reader
}

//! persistentvolume-binder-controller: binds PersistentVolumeClaims to PersistentVolumes,
//! hands claims to their provisioners and reclaims released volumes (upstream
//! `pkg/controller/volume/persistentvolume/`, `pv_controller_base.go` and
//! `pv_controller.go`).
//!
//! Two queues of one worker each, `claims` (`ns/name`) and `volumes` (`name`), take the keys
//! of every change of the two kinds, and all of them again every
//! `--pvclaimbinder-sync-period`. The controller keeps caches of its own of both kinds,
//! filled from the informers and from the answers to its own writes, where an object only
//! replaces an older resourceVersion (`storeObjectUpdate`): a bind is four writes, and the
//! cache lets each sync start from what the last one wrote rather than from an informer
//! that has not seen it yet. A key gone from the informer is a deletion: a deleted claim
//! syncs its volume, a deleted volume its claim.
//!
//! The decisions are plain functions ([`claim`], [`volume`], [`index`]); the writes are in
//! [`binding`]; provisioning ([`provision`]) and reclaiming ([`reclaim`], [`recycler`])
//! run as named operations apart from the queues ([`operations`]). Sync errors are logged
//! and retried at the next resync, as upstream's queues do not rate-limit.

mod binding;
mod claim;
mod helpers;
mod index;
mod metrics;
mod operations;
mod options;
mod plugins;
mod provision;
mod reclaim;
mod recycler;
mod volume;

use std::future::Future;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Resource;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::api_errors::{any_in_chain, is_conflict};
use crate::controller::{describe, ControllerContext, Runnable};
use crate::informer::Change;
use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::Recorder;
use crate::store::{key_of, Store};
use crate::volume_util::add_pvc_index;

use self::helpers::{claim_key, claim_ref_key, claim_volume_name};
use self::metrics::{BinderMetrics, OperationTimestamps};
use self::operations::{Refused, RunningOperations};
use self::options::Recyclers;

pub use self::options::Options;

pub const NAME: &str = "persistentvolume-binder-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the claims a pod uses and whether it is scheduled or finished.
pub const FIELDS: crate::projection::FieldList =
    &[("v1/pods", &["spec.nodeName", "spec.volumes", "status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &[
    "storage.k8s.io/v1/storageclasses",
    "v1/nodes",
    "v1/persistentvolumeclaims",
    "v1/persistentvolumes",
    "v1/pods",
];
/// The source of its events, as upstream's recorder names it.
const EVENT_SOURCE: &str = "persistentvolume-controller";
const CLAIM_QUEUE: &str = "claims";
const VOLUME_QUEUE: &str = "volumes";

/// What the flags decide at start.
struct Config {
    enable_dynamic_provisioning: bool,
    enable_hostpath_provisioner: bool,
    recyclers: Recyclers,
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    /// The informers' stores.
    volume_lister: Store<PersistentVolume>,
    claim_lister: Store<PersistentVolumeClaim>,
    classes: Store<StorageClass>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    /// The controller's own caches.
    volumes: Store<PersistentVolume>,
    claims: Store<PersistentVolumeClaim>,
    initialized: Mutex<bool>,
    claim_queue: Arc<WorkQueue<String>>,
    volume_queue: Arc<WorkQueue<String>>,
    operations: Arc<RunningOperations>,
    timestamps: OperationTimestamps,
    metrics: BinderMetrics,
    config: Config,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Vec<Runnable>> {
    options.validate_period()?;
    options.warn_deprecated();
    let recyclers = options.recyclers()?;
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let volume_informer = context.informers.get::<PersistentVolume>();
    let claim_informer = context.informers.get::<PersistentVolumeClaim>();
    let classes = context.informers.get::<StorageClass>();
    let pods = context.informers.get::<Pod>();
    let nodes = context.informers.get::<Node>();
    add_pvc_index(pods.store());
    let claim_queue = context.queue(CLAIM_QUEUE);
    let volume_queue = context.queue(VOLUME_QUEUE);
    let volumes = Store::new();
    let claims = Store::new();
    let metrics = BinderMetrics::register(&context.metrics, volumes.clone(), claims.clone());
    let controller = Arc::new(Controller {
        client,
        recorder,
        volume_lister: volume_informer.store().clone(),
        claim_lister: claim_informer.store().clone(),
        classes: classes.store().clone(),
        pods: pods.store().clone(),
        nodes: nodes.store().clone(),
        volumes,
        claims,
        initialized: Mutex::new(false),
        claim_queue: claim_queue.clone(),
        volume_queue: volume_queue.clone(),
        operations: Arc::default(),
        timestamps: OperationTimestamps::default(),
        metrics,
        config: Config {
            enable_dynamic_provisioning: options.enable_dynamic_provisioning,
            enable_hostpath_provisioner: options.enable_hostpath_provisioner,
            recyclers,
        },
    });
    volume_informer.handle(&controller, Controller::on_volume);
    claim_informer.handle(&controller, Controller::on_claim);
    Ok(vec![
        Runnable::new(
            NAME,
            volume_queue,
            1,
            controller.clone(),
            |controller, key| async move {
                controller.volume_worker(&key).await;
                Ok(())
            },
        ),
        Runnable::new(
            NAME,
            claim_queue,
            1,
            controller.clone(),
            |controller, key| async move {
                controller.claim_worker(&key).await;
                Ok(())
            },
        ),
        Runnable::periodic(
            NAME,
            options.pvclaimbinder_sync_period,
            controller,
            |controller| async move { controller.resync() },
        ),
    ])
}

/// `storeObjectUpdate`: stores `object` unless the cache holds a newer resourceVersion;
/// whether it did (the same version passes, so that resyncs sync).
fn store_object_update<K>(store: &Store<K>, object: Arc<K>, kind: &str) -> Result<bool, String>
where
    K: Resource + Send + Sync + 'static,
{
    let key = key_of(object.meta());
    let Some(old) = store.get(&key) else {
        store.apply(key, object);
        return Ok(true);
    };
    let version = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.resource_version
            .as_deref()
            .unwrap_or_default()
            .parse::<i64>()
    };
    let new = version(object.meta()).map_err(|error| {
        format!(
            "error parsing ResourceVersion {:?} of {kind} {key:?}: {error}",
            object
                .meta()
                .resource_version
                .as_deref()
                .unwrap_or_default()
        )
    })?;
    let current = version(old.meta()).map_err(|error| {
        format!(
            "error parsing old ResourceVersion {:?} of {kind} {key:?}: {error}",
            old.meta().resource_version.as_deref().unwrap_or_default()
        )
    })?;
    if current > new {
        debug!(controller = NAME, kind, key = %key, "ignoring an older version");
        return Ok(false);
    }
    store.apply(key, object);
    Ok(true)
}

impl Controller {
    fn on_volume(&self, change: &Change<PersistentVolume>) {
        self.volume_queue.add(key_of(change.latest().meta()));
    }

    fn on_claim(&self, change: &Change<PersistentVolumeClaim>) {
        self.claim_queue.add(key_of(change.latest().meta()));
    }

    fn store_volume_update(&self, volume: Arc<PersistentVolume>) -> anyhow::Result<bool> {
        store_object_update(&self.volumes, volume, "volume").map_err(anyhow::Error::msg)
    }

    fn store_claim_update(&self, claim: Arc<PersistentVolumeClaim>) -> anyhow::Result<bool> {
        store_object_update(&self.claims, claim, "claim").map_err(anyhow::Error::msg)
    }

    /// `initializeCaches`: the caches filled from the informers once, before the first
    /// sync (the workers start once the informers hold their first snapshot).
    fn ensure_initialized(&self) {
        let mut initialized = lock(&self.initialized);
        if *initialized {
            return;
        }
        for volume in self.volume_lister.list() {
            if let Err(error) = self.store_volume_update(volume) {
                warn!(controller = NAME, %error, "error updating volume cache");
            }
        }
        for claim in self.claim_lister.list() {
            if let Err(error) = self.store_claim_update(claim) {
                warn!(controller = NAME, %error, "error updating claim cache");
            }
        }
        *initialized = true;
        debug!(controller = NAME, "controller caches initialized");
    }

    /// `resync`: every claim and volume queued again.
    fn resync(&self) {
        debug!(controller = NAME, "resyncing PV controller");
        for key in self.claim_lister.keys() {
            self.claim_queue.add(key);
        }
        for key in self.volume_lister.keys() {
            self.volume_queue.add(key);
        }
    }

    /// `volumeWorker`'s step for one key.
    async fn volume_worker(self: &Arc<Self>, key: &str) {
        self.ensure_initialized();
        let Some(volume) = self.volume_lister.get(key) else {
            match self.volumes.get(key) {
                Some(volume) => self.delete_volume(&volume),
                None => debug!(
                    controller = NAME,
                    volume = key,
                    "deletion of volume was already processed"
                ),
            }
            return;
        };
        match self.store_volume_update(volume.clone()) {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                warn!(controller = NAME, volume = key, error = %error, "cannot update the volume cache");
                return;
            }
        }
        if let Err(error) = self.sync_volume(volume).await {
            log_sync_error("volume", key, &error);
        }
    }

    /// `claimWorker`'s step for one key.
    async fn claim_worker(self: &Arc<Self>, key: &str) {
        self.ensure_initialized();
        let Some(claim) = self.claim_lister.get(key) else {
            match self.claims.get(key) {
                Some(claim) => self.delete_claim(&claim),
                None => debug!(
                    controller = NAME,
                    claim = key,
                    "deletion of claim was already processed"
                ),
            }
            return;
        };
        match self.store_claim_update(claim.clone()) {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                warn!(controller = NAME, claim = key, error = %error, "cannot update the claim cache");
                return;
            }
        }
        if let Err(error) = self.sync_claim(claim).await {
            log_sync_error("claim", key, &error);
        }
    }

    /// `deleteVolume`: forgotten, its deletion timed, and its claim synced (it is `Lost`
    /// now).
    fn delete_volume(&self, volume: &PersistentVolume) {
        let volume_name = volume.name_str();
        self.volumes.remove(volume_name);
        debug!(controller = NAME, volume = volume_name, "volume deleted");
        self.timestamps.record(volume_name, false, &self.metrics);
        if let Some(key) = claim_ref_key(volume) {
            self.claim_queue.add(key);
        }
    }

    /// `deleteClaim`: forgotten, any provisioning timing dropped, and its volume synced
    /// (it is released now).
    fn delete_claim(&self, claim: &PersistentVolumeClaim) {
        let key = claim_key(claim);
        self.claims.remove(&key);
        debug!(controller = NAME, claim = %key, "claim deleted");
        self.timestamps.delete(&key);
        let volume_name = claim_volume_name(claim);
        if !volume_name.is_empty() {
            self.volume_queue.add(volume_name.to_string());
        }
    }

    /// `scheduleOperation`: runs `operation` on its own task unless one of that name runs
    /// or backs off after a failure.
    fn schedule_operation<F>(&self, operation_name: String, operation: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        match self.operations.start(&operation_name, Instant::now()) {
            Err(Refused::AlreadyRunning) => {
                debug!(controller = NAME, operation = %operation_name, "operation is already running, skipping");
            }
            Err(Refused::BackingOff { remaining }) => {
                debug!(controller = NAME, operation = %operation_name, ?remaining, "operation postponed due to exponential backoff");
            }
            Ok(()) => {
                let operations = self.operations.clone();
                tokio::spawn(async move {
                    let result = operation.await;
                    if let Err(error) = &result {
                        info!(controller = NAME, operation = %operation_name, error = %describe(error), "operation failed; retried after a backoff");
                    }
                    operations.finish(&operation_name, result.is_ok(), Instant::now());
                });
            }
        }
    }
}

/// Upstream logs a failed sync (a conflict quietly: it happens whenever the cache lags)
/// and leaves the retry to the next event or resync.
fn log_sync_error(kind: &str, key: &str, error: &anyhow::Error) {
    let message = describe(error);
    if any_in_chain(error, is_conflict) {
        debug!(controller = NAME, kind, key, error = %message, "could not sync (conflict)");
    } else {
        warn!(controller = NAME, kind, key, error = %message, "could not sync");
    }
}

#[cfg(test)]
mod tests {
    use super::helpers::fixtures::pv;
    use super::*;
    use serde_json::json;

    #[test]
    fn the_cache_takes_only_newer_versions() {
        let store = Store::new();
        let version =
            |rv: &str| Arc::new(pv("v", "1Gi", json!({"metadata": {"resourceVersion": rv}})));
        assert_eq!(
            store_object_update(&store, version("5"), "volume"),
            Ok(true)
        );
        assert_eq!(
            store_object_update(&store, version("5"), "volume"),
            Ok(true),
            "the same version passes"
        );
        assert_eq!(
            store_object_update(&store, version("4"), "volume"),
            Ok(false)
        );
        assert_eq!(
            store.get("v").unwrap().metadata.resource_version.as_deref(),
            Some("5")
        );
        assert_eq!(
            store_object_update(&store, version("12"), "volume"),
            Ok(true),
            "compared as numbers"
        );
        assert_eq!(
            store_object_update(&store, version("x"), "volume"),
            Err("error parsing ResourceVersion \"x\" of volume \"v\": invalid digit found in string".into())
        );
    }
}

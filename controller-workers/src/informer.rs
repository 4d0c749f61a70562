//! A worker's informer for one resource: it consumes the informer-server's stream (the
//! remote watcher of `rkcm_client::informer`), keeps a [`Store`], and tells the
//! registered handlers what changed, as client-go's shared informer does:
//!
//! - `Added`, `Updated { old, new }`, `Deleted` with the final state, or, when the
//!   deletion happened while the stream was cut and a fresh snapshot no longer holds the
//!   object, `Deleted(DeletedObject::Unknown)` with the last state known (client-go's
//!   `DeletedFinalStateUnknown` tombstone);
//! - a snapshot (at start, or after a RESET) is applied at once when complete, so readers
//!   never see half of it; `has_synced` turns true after the first one;
//! - every resync period (jittered in `[period, 2 * period)`, KCM's `--min-resync-period`
//!   rule) each object is delivered again as `Updated` with `old == new`.
//!
//! Handlers run on the informer's task and must be quick: rkcm's handlers only compute
//! keys and add them to a work queue, so there is no per-handler buffer as in client-go.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::watcher::Event;
use kube::Resource;
use rand::Rng;
use rkcm_client::informer::{self as client, ClientError};
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::{GroupVersionResource, WatchRequest};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tonic::transport::Channel;
use tracing::{debug, warn};

use crate::queue::WorkQueue;
use crate::store::{key_of, Store};

/// How an object left the store.
pub enum DeletedObject<K> {
    /// The stream reported the deletion, with the object's final state.
    Final(Arc<K>),
    /// The object is gone from a new snapshot: its final state is unknown, this is the
    /// last state the store held.
    Unknown { key: String, last: Arc<K> },
}

impl<K> DeletedObject<K> {
    pub fn object(&self) -> &Arc<K> {
        match self {
            DeletedObject::Final(object) => object,
            DeletedObject::Unknown { last, .. } => last,
        }
    }
}

pub enum Change<K> {
    Added(Arc<K>),
    Updated { old: Arc<K>, new: Arc<K> },
    Deleted(DeletedObject<K>),
}

impl<K> Change<K> {
    /// The object's latest state: the new one, or for a deletion the last one known.
    pub fn latest(&self) -> &Arc<K> {
        match self {
            Change::Added(object) | Change::Updated { new: object, .. } => object,
            Change::Deleted(deleted) => deleted.object(),
        }
    }

    /// The object while it exists; `None` for a deletion.
    pub fn live(&self) -> Option<&Arc<K>> {
        match self {
            Change::Added(object) | Change::Updated { new: object, .. } => Some(object),
            Change::Deleted(_) => None,
        }
    }
}

pub type Handler<K> = Arc<dyn Fn(&Change<K>) + Send + Sync>;

/// An object of a snapshot being received: a compact store's snapshot keeps the JSON
/// only (decoded again, one at a time, when the complete snapshot is applied), so a large
/// first list never holds every object typed at once.
enum Pending<K> {
    Typed(Arc<K>),
    Json(String),
}

pub struct Informer<K> {
    resource: GroupVersionResource,
    /// The fields the stream keeps (empty: the whole objects).
    fields: Vec<String>,
    store: Store<K>,
    handlers: RwLock<Vec<Handler<K>>>,
    synced: watch::Sender<bool>,
}

/// The resource of a k8s-openapi type, as the informer-server names it.
pub fn resource_of<K: Resource<DynamicType = ()>>() -> GroupVersionResource {
    GroupVersionResource {
        group: K::group(&()).into_owned(),
        version: K::version(&()).into_owned(),
        resource: K::plural(&()).into_owned(),
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
{
    /// An informer whose stream keeps only `fields` of each object (the informer-server's
    /// projection, `metadata` always whole; empty for whole objects) and that feeds
    /// `store` (typed, or a [`Store::compact`] one).
    pub fn with_store(fields: Vec<String>, store: Store<K>) -> Arc<Self> {
        Arc::new(Informer {
            resource: resource_of::<K>(),
            fields,
            store,
            handlers: RwLock::new(Vec::new()),
            synced: watch::channel(false).0,
        })
    }

    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    pub fn resource(&self) -> &GroupVersionResource {
        &self.resource
    }

    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    pub async fn wait_for_sync(&self) {
        let mut synced = self.synced.subscribe();
        // The sender lives as long as self.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    /// Registers a handler; one added after the first snapshot is told `Added` for every
    /// object already stored, as client-go does for a late handler.
    pub fn add_handler(&self, handler: Handler<K>) {
        let mut handlers = self
            .handlers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.has_synced() {
            for object in self.store.list() {
                handler(&Change::Added(object));
            }
        }
        handlers.push(handler);
    }

    /// Sends every change to `handler` of `controller`: the way a controller listens to
    /// the kinds it reads (`pods.handle(&controller, Controller::on_pod)`).
    pub fn handle<C>(&self, controller: &Arc<C>, handler: fn(&C, &Change<K>))
    where
        C: Send + Sync + 'static,
    {
        let controller = controller.clone();
        self.add_handler(Arc::new(move |change: &Change<K>| {
            handler(&controller, change)
        }));
    }

    /// Puts the key (`namespace/name`) of every changed object, deletions included, on
    /// `queue`.
    pub fn enqueue_changes(&self, queue: &Arc<WorkQueue<String>>)
    where
        K: Resource,
    {
        let queue = queue.clone();
        self.add_handler(Arc::new(move |change: &Change<K>| {
            queue.add(key_of(change.latest().meta()))
        }));
    }

    /// Puts the key of every added or updated object on `queue` (deletions need no sync).
    pub fn enqueue_live(&self, queue: &Arc<WorkQueue<String>>)
    where
        K: Resource,
    {
        let queue = queue.clone();
        self.add_handler(Arc::new(move |change: &Change<K>| {
            if let Some(object) = change.live() {
                queue.add(key_of(object.meta()))
            }
        }));
    }

    fn notify(&self, change: Change<K>) {
        let handlers = self
            .handlers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for handler in handlers.iter() {
            handler(&change);
        }
    }

    /// Feeds the store from the informer-server until the process ends.
    pub async fn run(
        self: Arc<Self>,
        client: InformerClient<Channel>,
        subscriber: String,
        min_resync: Duration,
        shard: Option<rkcm_proto::v1::Shard>,
    ) {
        let request = WatchRequest {
            resource: Some(self.resource.clone()),
            subscriber,
            shard,
            fields: self.fields.clone(),
            ..Default::default()
        };
        let compact = self.store.is_compact();
        let stream = client::watch_encoded::<K>(client, request);
        futures::pin_mut!(stream);
        let mut snapshot: Option<HashMap<String, Pending<K>>> = None;
        let mut resync = tokio::time::Instant::now() + jittered(min_resync);
        loop {
            let event = tokio::select! {
                event = stream.next() => event,
                _ = tokio::time::sleep_until(resync), if !min_resync.is_zero() => {
                    resync = tokio::time::Instant::now() + jittered(min_resync);
                    self.resync();
                    continue;
                }
            };
            let Some(event) = event else { return };
            match event {
                Ok(Event::Init) => snapshot = Some(HashMap::new()),
                Ok(Event::InitApply(client::Encoded { object, json })) => {
                    let key = key_of(object.meta());
                    match snapshot.as_mut() {
                        Some(snapshot) if compact => {
                            snapshot.insert(key, Pending::Json(json));
                        }
                        Some(snapshot) => {
                            snapshot.insert(key, Pending::Typed(Arc::new(object)));
                        }
                        None => self.apply(key, Arc::new(object), compact.then_some(json)),
                    }
                }
                Ok(Event::InitDone) => {
                    let replacement = snapshot.take().unwrap_or_default();
                    self.replace(replacement);
                    if !self.has_synced() {
                        debug!(resource = %path(&self.resource), objects = self.store.len(), "informer synced");
                    }
                    self.synced.send_replace(true);
                }
                Ok(Event::Apply(client::Encoded { object, json })) => {
                    self.apply(
                        key_of(object.meta()),
                        Arc::new(object),
                        compact.then_some(json),
                    );
                }
                Ok(Event::Delete(client::Encoded { object, .. })) => {
                    let key = key_of(object.meta());
                    if self.store.remove(&key).is_some() {
                        self.notify(Change::Deleted(DeletedObject::Final(Arc::new(object))));
                    }
                }
                Err(ClientError::Decode { kind, name, error }) => {
                    warn!(resource = %path(&self.resource), %kind, %name, %error, "skipping an object the stream sent that does not decode");
                }
                Err(error) => {
                    warn!(resource = %path(&self.resource), %error, "informer stream interrupted; reconnecting");
                }
            }
        }
    }

    fn apply(&self, key: String, object: Arc<K>, json: Option<String>) {
        match self.store.apply_encoded(key, object.clone(), json) {
            Some(old) => self.notify(Change::Updated { old, new: object }),
            None => self.notify(Change::Added(object)),
        }
    }

    /// Swaps in a complete snapshot: adds and updates for what it holds, tombstones for
    /// what it no longer holds.
    fn replace(&self, mut replacement: HashMap<String, Pending<K>>) {
        for key in self.store.keys() {
            if !replacement.contains_key(&key) {
                if let Some(last) = self.store.remove(&key) {
                    self.notify(Change::Deleted(DeletedObject::Unknown { key, last }));
                }
            }
        }
        for (key, pending) in replacement.drain() {
            match pending {
                Pending::Typed(object) => self.apply(key, object, None),
                Pending::Json(json) => match serde_json::from_str::<K>(&json) {
                    Ok(object) => self.apply(key, Arc::new(object), Some(json)),
                    Err(error) => {
                        warn!(resource = %path(&self.resource), %key, %error, "skipping an object that decoded once and no longer does");
                    }
                },
            }
        }
    }

    fn resync(&self) {
        for object in self.store.list() {
            self.notify(Change::Updated {
                old: object.clone(),
                new: object,
            });
        }
    }
}

fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + rand::rng().random::<f64>())
}

pub fn path(resource: &GroupVersionResource) -> String {
    if resource.group.is_empty() {
        format!("{}/{}", resource.version, resource.resource)
    } else {
        format!(
            "{}/{}/{}",
            resource.group, resource.version, resource.resource
        )
    }
}

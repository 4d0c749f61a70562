//! The worker's informers, one per resource whatever the number of its controllers that
//! read it (client-go's SharedInformerFactory): controllers ask for the informers they
//! need while they are built; [`Informers::start`] then opens one informer-server stream
//! for each.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Resource;
use rkcm_proto::v1::informer_client::InformerClient;
use serde::de::DeserializeOwned;
use tonic::transport::Channel;

use rkcm_proto::v1::Shard;

use crate::informer::{path, resource_of, Informer};
use crate::projection::with_required;
use crate::store::Store;
use rkcm_openapi::Definitions;

type Starter = Box<dyn FnOnce(InformerClient<Channel>, String, Duration, Option<Shard>) + Send>;

struct Entry {
    informer: Arc<dyn Any + Send + Sync>,
    synced: Box<dyn Fn() -> bool + Send + Sync>,
    resource: String,
    fields: Vec<String>,
    starter: Option<Starter>,
}

pub struct Informers {
    client: InformerClient<Channel>,
    subscriber: String,
    min_resync: Duration,
    shard: Option<Shard>,
    /// Resources streamed whole even in a shard.
    whole: Vec<String>,
    /// Per resource, the fields its controllers read (the others are streamed whole).
    fields: HashMap<String, Vec<String>>,
    /// Resources whose stores keep JSON ([`Store::compact`]).
    compact: Vec<String>,
    /// The recorded definitions, while informers are being made (for the fields each
    /// kind's decode requires); released by [`Informers::start`].
    definitions: Mutex<Option<Definitions>>,
    entries: Mutex<HashMap<TypeId, Entry>>,
}

impl Informers {
    pub fn new(client: InformerClient<Channel>, subscriber: String, min_resync: Duration) -> Self {
        Informers {
            client,
            subscriber,
            min_resync,
            shard: None,
            whole: Vec::new(),
            fields: HashMap::new(),
            compact: Vec::new(),
            definitions: Mutex::new(None),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Streams only one namespace-hash shard, `(index, count)`, of every resource but the
    /// `whole` ones (`"v1/nodes"`), which every shard receives entire.
    pub fn with_shard(mut self, shard: Option<(u32, u32)>, whole: &[&str]) -> Self {
        self.shard = shard.map(|(index, count)| Shard { index, count });
        self.whole = whole.iter().map(|r| r.to_string()).collect();
        self
    }

    /// Streams only the named fields of each listed resource (`"v1/pods"` ->
    /// `["spec.nodeName", ...]`), completed with the fields each kind's decode requires:
    /// the stores hold projected objects. Resources not listed are streamed whole.
    pub fn with_fields(mut self, fields: HashMap<String, Vec<String>>) -> Self {
        self.fields = fields;
        self
    }

    /// Keeps the objects of the listed resources (`"v1/pods"`) as their JSON, decoded when
    /// read ([`Store::compact`]).
    pub fn with_compact(mut self, resources: &[String]) -> Self {
        self.compact = resources
            .iter()
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect();
        self
    }

    /// The fields requested of a resource's objects (empty: the whole objects), once its
    /// informer exists.
    pub fn fields_of(&self, resource: &str) -> Option<Vec<String>> {
        self.lock()
            .values()
            .find(|entry| entry.resource == resource)
            .map(|entry| entry.fields.clone())
    }

    /// The informer-server connection, for controllers that stream resources not known
    /// at build time (the garbage collector's monitors).
    pub fn client(&self) -> InformerClient<Channel> {
        self.client.clone()
    }

    /// The namespace-hash shard this worker streams, for controllers that open streams of
    /// their own on namespaced resources (the resource quota monitors).
    pub fn shard(&self) -> Option<Shard> {
        self.shard
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TypeId, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The informer of `K`, made on first request.
    pub fn get<K>(&self) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
    {
        let mut entries = self.lock();
        let entry = entries.entry(TypeId::of::<K>()).or_insert_with(|| {
            let resource = path(&resource_of::<K>());
            let fields = self
                .fields
                .get(&resource)
                .and_then(|declared| {
                    let mut definitions = self
                        .definitions
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    let definitions = definitions.get_or_insert_with(rkcm_openapi::load_all);
                    with_required(
                        definitions,
                        &K::group(&()),
                        &K::version(&()),
                        &K::kind(&()),
                        declared,
                    )
                })
                .unwrap_or_default();
            let store = if self.compact.contains(&resource) {
                Store::compact()
            } else {
                Store::new()
            };
            let informer = Informer::<K>::with_store(fields.clone(), store);
            let for_sync = informer.clone();
            let for_start = informer.clone();
            Entry {
                resource: path(informer.resource()),
                fields,
                informer: informer as Arc<dyn Any + Send + Sync>,
                synced: Box::new(move || for_sync.has_synced()),
                starter: Some(Box::new(move |client, subscriber, resync, shard| {
                    tokio::spawn(for_start.run(client, subscriber, resync, shard));
                })),
            }
        });
        entry
            .informer
            .clone()
            .downcast::<Informer<K>>()
            .unwrap_or_else(|_| unreachable!("entries are keyed by their type"))
    }

    /// Starts every informer not started yet, and gives back the memory of the
    /// definitions their projections were derived from (a few MB).
    pub fn start(&self) {
        let released = self
            .definitions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if released.is_some() {
            drop(released);
            rkcm_client::memory::release_free_memory();
        }
        let mut entries = self.lock();
        for entry in entries.values_mut() {
            if let Some(start) = entry.starter.take() {
                let shard = if self.whole.contains(&entry.resource) {
                    None
                } else {
                    self.shard
                };
                start(
                    self.client.clone(),
                    self.subscriber.clone(),
                    self.min_resync,
                    shard,
                );
            }
        }
    }

    /// The resources whose first snapshot has not arrived yet.
    pub fn unsynced(&self) -> Vec<String> {
        let mut pending: Vec<String> = self
            .lock()
            .values()
            .filter(|entry| !(entry.synced)())
            .map(|entry| entry.resource.clone())
            .collect();
        pending.sort();
        pending
    }

    pub fn resources(&self) -> Vec<String> {
        let mut resources: Vec<String> = self.lock().values().map(|e| e.resource.clone()).collect();
        resources.sort();
        resources
    }

    pub fn has_synced(&self) -> bool {
        self.unsynced().is_empty()
    }

    /// Waits until every informer has its first snapshot.
    pub async fn wait_for_sync(&self) {
        let mut delay = Duration::from_millis(10);
        while !self.has_synced() {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(200));
        }
    }
}

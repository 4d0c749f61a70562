//! A worker's local cache of one resource (client-go's Indexer): objects by `ns/name`
//! key, plus named indexes. One writer (the informer that feeds it from the stream),
//! any number of cheap readers (controllers' reconciles and handlers).
//!
//! A store holds its objects typed, or, made with [`Store::compact`], as the JSON the
//! stream delivered: a typed k8s-openapi object costs its struct sizes whatever it holds
//! (a projected Pod over 10 KB, its JSON about 1 KB), so the stores of the many (pods)
//! keep the text and decode an object when it is read (a few microseconds for a projected
//! pod; a converge of 5,000 pods costs the worker no measurable CPU more). A compact
//! store also keeps each object's labels, interned (the pods
//! of one ReplicaSet share one set), so a listing by label selector decodes only what
//! matches ([`Store::list_namespace_labelled`]).

use crate::meta::ResourceNames;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use serde::de::DeserializeOwned;
use tracing::warn;

/// Objects by namespace.
pub const NAMESPACE_INDEX: &str = "namespace";
/// Objects by the UID of their controller (the ownerReference with `controller: true`).
pub const CONTROLLER_UID_INDEX: &str = "controllerUID";
/// Objects without a controller, by namespace (upstream's pod controller-UID index keeps
/// them under one orphan key), so adoption finds a namespace's orphans without a scan.
pub const ORPHAN_INDEX: &str = "orphans";

pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// `namespace/name`, or `name` for a cluster-scoped object (client-go's
/// MetaNamespaceKeyFunc).
pub fn key_of(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name.to_string(),
    }
}

/// Splits a key into (namespace, name); the namespace is empty for cluster-scoped keys.
pub fn split_key(key: &str) -> (&str, &str) {
    match key.split_once('/') {
        Some((namespace, name)) => (namespace, name),
        None => ("", key),
    }
}

/// One stored object: typed, or as its JSON (compact stores).
struct Slot<K> {
    object: Option<Arc<K>>,
    json: Option<Box<str>>,
    /// The object's labels, interned (compact stores).
    labels: Option<Arc<Labels>>,
}

type Labels = BTreeMap<String, String>;

/// A stored key, shared by the object map and every index that lists it.
type Key = Arc<str>;

/// How a compact store decodes its objects, and the label sets they share.
struct Compact<K> {
    decode: fn(&str) -> serde_json::Result<K>,
    /// Every distinct label set a stored object has, once.
    label_sets: HashSet<Arc<Labels>>,
}

impl<K> Compact<K> {
    fn intern(&mut self, labels: Option<&Labels>) -> Option<Arc<Labels>> {
        let labels = labels.filter(|labels| !labels.is_empty())?;
        if let Some(interned) = self.label_sets.get(labels) {
            return Some(interned.clone());
        }
        let interned = Arc::new(labels.clone());
        self.label_sets.insert(interned.clone());
        Some(interned)
    }

    /// Forgets a label set no stored object has any more.
    fn release(&mut self, labels: Option<Arc<Labels>>) {
        if let Some(labels) = labels {
            // Held by the set and by `labels` only.
            if Arc::strong_count(&labels) == 2 {
                self.label_sets.remove(&labels);
            }
        }
    }
}

struct Inner<K> {
    objects: HashMap<Key, Slot<K>>,
    compact: Option<Compact<K>>,
    indexers: Vec<(&'static str, IndexFn<K>)>,
    indices: HashMap<&'static str, HashMap<String, BTreeSet<Key>>>,
}

impl<K> Inner<K> {
    /// The typed object of a slot, decoded from its JSON when it holds none.
    fn object(&self, key: &str, slot: &Slot<K>) -> Option<Arc<K>> {
        if let Some(object) = &slot.object {
            return Some(object.clone());
        }
        let (json, compact) = (slot.json.as_deref()?, self.compact.as_ref()?);
        match (compact.decode)(json) {
            Ok(object) => Some(Arc::new(object)),
            Err(error) => {
                // It decoded when it arrived: only a bug gets here.
                warn!(%key, %error, "a stored object no longer decodes; leaving it out");
                None
            }
        }
    }

    fn get(&self, key: &str) -> Option<Arc<K>> {
        self.object(key, self.objects.get(key)?)
    }

    /// The keys index `index` lists under `value`.
    fn keys_of(&self, index: &str, value: &str) -> Option<&BTreeSet<Key>> {
        self.indices.get(index)?.get(value)
    }
}

pub struct Store<K> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            inner: self.inner.clone(),
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Default for Store<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + Send + Sync + 'static> Store<K> {
    /// A store with the namespace and controller-UID indexes.
    pub fn new() -> Self {
        Self::with(None)
    }

    /// A store that keeps each object as its JSON and decodes it when read.
    pub fn compact() -> Self
    where
        K: DeserializeOwned,
    {
        Self::with(Some(Compact {
            decode: |json| serde_json::from_str(json),
            label_sets: HashSet::new(),
        }))
    }

    /// Whether objects are held as JSON ([`Store::compact`]).
    pub fn is_compact(&self) -> bool {
        self.read().compact.is_some()
    }

    fn with(compact: Option<Compact<K>>) -> Self {
        let store = Store {
            inner: Arc::new(RwLock::new(Inner {
                objects: HashMap::new(),
                compact,
                indexers: Vec::new(),
                indices: HashMap::new(),
            })),
        };
        store.add_index(
            NAMESPACE_INDEX,
            Arc::new(|object: &K| vec![object.namespace_str().to_string()]),
        );
        store.add_index(
            CONTROLLER_UID_INDEX,
            Arc::new(|object: &K| {
                controller_uid(object.meta())
                    .map(str::to_string)
                    .into_iter()
                    .collect()
            }),
        );
        store.add_index(
            ORPHAN_INDEX,
            Arc::new(|object: &K| match controller_uid(object.meta()) {
                Some(_) => Vec::new(),
                None => vec![object.namespace_str().to_string()],
            }),
        );
        store
    }

    /// Adds an index (a no-op if one of that name exists); objects already stored are
    /// indexed at once.
    pub fn add_index(&self, name: &'static str, index: IndexFn<K>) {
        let mut inner = self.write();
        if inner.indexers.iter().any(|(existing, _)| *existing == name) {
            return;
        }
        let mut values: HashMap<String, BTreeSet<Key>> = HashMap::new();
        for (key, slot) in &inner.objects {
            let Some(object) = inner.object(key, slot) else {
                continue;
            };
            for value in index(&object) {
                values.entry(value).or_default().insert(key.clone());
            }
        }
        inner.indices.insert(name, values);
        inner.indexers.push((name, index));
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner<K>> {
        self.inner
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner<K>> {
        self.inner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().get(key)
    }

    pub fn get_in(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        if namespace.is_empty() {
            self.get(name)
        } else {
            self.get(&format!("{namespace}/{name}"))
        }
    }

    pub fn list(&self) -> Vec<Arc<K>> {
        let inner = self.read();
        inner
            .objects
            .iter()
            .filter_map(|(key, slot)| inner.object(key, slot))
            .collect()
    }

    pub fn keys(&self) -> Vec<String> {
        self.read()
            .objects
            .keys()
            .map(|key| key.to_string())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects whose index `index` yields `value` (empty for an unknown index).
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let inner = self.read();
        let Some(keys) = inner.keys_of(index, value) else {
            return Vec::new();
        };
        keys.iter().filter_map(|key| inner.get(key)).collect()
    }

    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_index(NAMESPACE_INDEX, namespace)
    }

    /// The objects of `namespace` whose labels `select` accepts (a label selector's
    /// `matches`): a compact store decodes only those.
    pub fn list_namespace_labelled(
        &self,
        namespace: &str,
        select: impl Fn(Option<&Labels>) -> bool,
    ) -> Vec<Arc<K>> {
        let inner = self.read();
        let Some(keys) = inner.keys_of(NAMESPACE_INDEX, namespace) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|key| {
                let slot = inner.objects.get(key)?;
                let labels = match (&slot.object, &slot.labels) {
                    (_, Some(labels)) => Some(labels.as_ref()),
                    (Some(object), None) => object.meta().labels.as_ref(),
                    (None, None) => None,
                };
                select(labels).then(|| inner.object(key, slot)).flatten()
            })
            .collect()
    }

    /// What an owner may claim: the objects it controls (by UID) and the orphans of its
    /// namespace. Objects another controller owns are never claimed, so they are not
    /// looked at.
    pub fn claim_candidates(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<K>> {
        let mut candidates = self.by_index(CONTROLLER_UID_INDEX, owner_uid);
        candidates.extend(self.by_index(ORPHAN_INDEX, namespace));
        candidates
    }

    /// The object `reference` (an ownerReference of something in `namespace`) points
    /// at, if the store holds it: same kind and group, same name, same UID (a recreated
    /// object of that name is another owner).
    pub fn referenced(&self, namespace: &str, reference: &OwnerReference) -> Option<Arc<K>>
    where
        K: Resource<DynamicType = ()>,
    {
        let group = reference
            .api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("");
        if reference.kind != K::kind(&()) || group != K::group(&()) {
            return None;
        }
        let object = self.get_in(namespace, &reference.name)?;
        (object.meta().uid.as_deref() == Some(reference.uid.as_str())).then_some(object)
    }

    /// Stores `object`, returning what it replaced.
    pub(crate) fn apply(&self, key: String, object: Arc<K>) -> Option<Arc<K>> {
        self.apply_encoded(key, object, None)
    }

    /// Stores `object`, whose JSON (as received) is `json` when known, returning what it
    /// replaced. A compact store keeps the JSON (and the object typed when its JSON is
    /// not given).
    pub(crate) fn apply_encoded(
        &self,
        key: String,
        object: Arc<K>,
        json: Option<String>,
    ) -> Option<Arc<K>> {
        let mut inner = self.write();
        let json = json
            .filter(|_| inner.compact.is_some())
            .map(String::into_boxed_str);
        // The key already stored, if any, so the map and the indexes share one copy.
        let key: Key = match inner.objects.get_key_value(key.as_str()) {
            Some((stored, _)) => stored.clone(),
            None => Arc::from(key),
        };
        let labels = match inner.compact.as_mut() {
            Some(compact) => compact.intern(object.meta().labels.as_ref()),
            None => None,
        };
        let slot = Slot {
            object: json.is_none().then(|| object.clone()),
            json,
            labels,
        };
        let old = inner.objects.insert(key.clone(), slot).and_then(|mut old| {
            if let Some(compact) = inner.compact.as_mut() {
                compact.release(old.labels.take());
            }
            inner.object(&key, &old)
        });
        let Inner {
            indexers, indices, ..
        } = &mut *inner;
        for (name, index) in indexers.iter() {
            let values = indices.entry(name).or_default();
            if let Some(old) = &old {
                for value in index(old) {
                    remove_from(values, &value, &key);
                }
            }
            for value in index(&object) {
                values.entry(value).or_default().insert(key.clone());
            }
        }
        old
    }

    pub(crate) fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.write();
        let mut slot = inner.objects.remove(key)?;
        if let Some(compact) = inner.compact.as_mut() {
            compact.release(slot.labels.take());
        }
        // Only an object that no longer decodes (a bug) leaves its index entries behind;
        // readers skip keys the store does not hold.
        let old = inner.object(key, &slot)?;
        let Inner {
            indexers, indices, ..
        } = &mut *inner;
        for (name, index) in indexers.iter() {
            if let Some(values) = indices.get_mut(name) {
                for value in index(&old) {
                    remove_from(values, &value, key);
                }
            }
        }
        Some(old)
    }
}

fn remove_from(values: &mut HashMap<String, BTreeSet<Key>>, value: &str, key: &str) {
    if let Some(keys) = values.get_mut(value) {
        keys.remove(key);
        if keys.is_empty() {
            values.remove(value);
        }
    }
}

/// The object's controller ownerReference (the one with `controller: true`), if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|reference| reference.controller == Some(true))
}

/// The group of an apiVersion (`apps/v1` -> `apps`, `v1` -> the core group, "").
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// The UID of the object's controller ownerReference, if any.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    controller_of(meta).map(|reference| reference.uid.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(namespace: &str, name: &str, owner: Option<&str>, node: &str) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some(namespace.into());
        pod.metadata.name = Some(name.into());
        pod.metadata.owner_references = owner.map(|uid| {
            vec![OwnerReference {
                uid: uid.into(),
                controller: Some(true),
                ..Default::default()
            }]
        });
        pod.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        });
        Arc::new(pod)
    }

    fn index_node_names(store: &Store<Pod>) {
        store.add_index(
            "nodeName",
            Arc::new(|pod: &Pod| {
                pod.spec
                    .as_ref()
                    .and_then(|spec| spec.node_name.clone())
                    .into_iter()
                    .collect()
            }),
        );
    }

    #[test]
    fn indexes_follow_updates_and_deletes() {
        let store = Store::<Pod>::new();
        index_node_names(&store);
        store.apply("a/p1".into(), pod("a", "p1", Some("rs1"), "n1"));
        store.apply("a/p2".into(), pod("a", "p2", None, "n1"));
        store.apply("b/p3".into(), pod("b", "p3", Some("rs1"), "n2"));
        assert_eq!(store.list_namespace("a").len(), 2);
        assert_eq!(store.by_index(CONTROLLER_UID_INDEX, "rs1").len(), 2);
        assert_eq!(store.by_index(ORPHAN_INDEX, "a").len(), 1);
        // p2 adopted and moved
        store.apply("a/p2".into(), pod("a", "p2", Some("rs2"), "n2"));
        assert!(store.by_index(ORPHAN_INDEX, "a").is_empty());
        assert_eq!(store.by_index("nodeName", "n2").len(), 2);
        assert_eq!(store.by_index("nodeName", "n1").len(), 1);
        store.remove("b/p3");
        assert_eq!(store.by_index(CONTROLLER_UID_INDEX, "rs1").len(), 1);
        assert!(store.list_namespace("b").is_empty());
        assert_eq!(
            store.get_in("a", "p2").unwrap().metadata.name.as_deref(),
            Some("p2")
        );
    }

    fn json(pod: &Pod) -> Option<String> {
        Some(serde_json::to_string(pod).unwrap())
    }

    #[test]
    fn a_compact_store_reads_back_what_it_was_given() {
        let store = Store::<Pod>::compact();
        assert!(store.is_compact());
        for (key, pod) in [
            ("a/p1", pod("a", "p1", Some("rs1"), "n1")),
            ("a/p2", pod("a", "p2", None, "n1")),
            ("b/p3", pod("b", "p3", Some("rs1"), "n2")),
            ("b/p4", pod("b", "p4", Some("rs2"), "n2")),
        ] {
            store.apply_encoded(key.into(), pod.clone(), json(&pod));
        }
        // Every object is held as JSON only.
        assert!(store
            .read()
            .objects
            .values()
            .all(|slot| slot.object.is_none()));
        assert_eq!(
            *store.get("a/p1").unwrap(),
            *pod("a", "p1", Some("rs1"), "n1")
        );
        assert_eq!(store.list().len(), 4);
        assert_eq!(store.by_index(CONTROLLER_UID_INDEX, "rs1").len(), 2);
        // rs2 controls p4 (owned objects are found by UID whatever their namespace) and
        // a/p2 is an orphan of "a".
        assert_eq!(store.claim_candidates("a", "rs2").len(), 2);
        // An update returns the old state, decoded; the indexes follow it.
        let moved = pod("a", "p1", Some("rs2"), "n2");
        let old = store.apply_encoded("a/p1".into(), moved.clone(), json(&moved));
        assert_eq!(
            old.unwrap().metadata.owner_references.as_ref().unwrap()[0].uid,
            "rs1"
        );
        assert_eq!(store.by_index(CONTROLLER_UID_INDEX, "rs2").len(), 2);
        // A removal returns the last state, and an index added later sees every object.
        assert_eq!(
            store.remove("a/p2").unwrap().metadata.name.as_deref(),
            Some("p2")
        );
        index_node_names(&store);
        assert_eq!(store.by_index("nodeName", "n2").len(), 3);
        assert_eq!(store.len(), 3);
    }

    fn labelled(name: &str, app: &str) -> Arc<Pod> {
        let mut pod = pod("a", name, None, "n1").as_ref().clone();
        pod.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        Arc::new(pod)
    }

    #[test]
    fn listings_by_label_decode_only_what_matches_and_label_sets_are_shared() {
        for store in [Store::<Pod>::new(), Store::<Pod>::compact()] {
            for (name, app) in [("w1", "web"), ("w2", "web"), ("d1", "db")] {
                let pod = labelled(name, app);
                store.apply_encoded(format!("a/{name}"), pod.clone(), json(&pod));
            }
            let web = |labels: Option<&Labels>| {
                labels.and_then(|l| l.get("app")).map(String::as_str) == Some("web")
            };
            let mut names: Vec<String> = store
                .list_namespace_labelled("a", web)
                .iter()
                .map(|pod| pod.name_str().to_string())
                .collect();
            names.sort();
            assert_eq!(names, ["w1", "w2"]);
            assert!(store.list_namespace_labelled("b", web).is_empty());
            if store.is_compact() {
                assert_eq!(store.read().compact.as_ref().unwrap().label_sets.len(), 2);
                // The last pod labelled db relabelled, then the web ones gone: only the
                // set still held remains.
                let relabelled = labelled("d1", "cache");
                store.apply_encoded("a/d1".into(), relabelled.clone(), json(&relabelled));
                store.remove("a/w1");
                assert_eq!(store.read().compact.as_ref().unwrap().label_sets.len(), 2);
                store.remove("a/w2");
                let inner = store.read();
                let sets = &inner.compact.as_ref().unwrap().label_sets;
                assert_eq!(sets.len(), 1);
                assert_eq!(sets.iter().next().unwrap()["app"], "cache");
            }
        }
    }

    #[test]
    fn a_compact_store_keeps_typed_what_came_without_json() {
        let store = Store::<Pod>::compact();
        store.apply("a/p1".into(), pod("a", "p1", None, "n1"));
        let p2 = pod("a", "p2", None, "n1");
        store.apply_encoded("a/p2".into(), p2.clone(), json(&p2));
        let p3 = pod("a", "p3", None, "n1");
        store.apply_encoded("a/p3".into(), p3.clone(), json(&p3));
        assert!(store.read().objects["a/p1"].object.is_some());
        assert!(store.read().objects["a/p2"].object.is_none());
        assert_eq!(store.list_namespace("a").len(), 3);
    }

    #[test]
    fn keys_as_client_go() {
        let mut meta = ObjectMeta {
            name: Some("x".into()),
            ..Default::default()
        };
        assert_eq!(key_of(&meta), "x");
        meta.namespace = Some("ns".into());
        assert_eq!(key_of(&meta), "ns/x");
        assert_eq!(split_key("ns/x"), ("ns", "x"));
        assert_eq!(split_key("x"), ("", "x"));
    }
}

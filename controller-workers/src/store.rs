//! A worker's local cache of one resource (client-go's Indexer): objects by `ns/name`
//! key, plus named indexes. One writer (the informer that feeds it from the stream),
//! any number of cheap readers (controllers' reconciles and handlers).

use crate::meta::ResourceNames;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

/// Objects by namespace.
pub const NAMESPACE_INDEX: &str = "namespace";
/// Objects by the UID of their controller (the ownerReference with `controller: true`);
/// objects without one are under [`ORPHAN_INDEX_KEY`], as upstream's pod controller-UID
/// index keeps them, so adoption finds orphans without a scan.
pub const CONTROLLER_UID_INDEX: &str = "controllerUID";
pub const ORPHAN_INDEX_KEY: &str = "";

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

struct Inner<K> {
    objects: HashMap<String, Arc<K>>,
    indexers: Vec<(&'static str, IndexFn<K>)>,
    indices: HashMap<&'static str, HashMap<String, BTreeSet<String>>>,
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
        let store = Store {
            inner: Arc::new(RwLock::new(Inner {
                objects: HashMap::new(),
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
                vec![controller_uid(object.meta())
                    .unwrap_or(ORPHAN_INDEX_KEY)
                    .to_string()]
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
        let mut values: HashMap<String, BTreeSet<String>> = HashMap::new();
        for (key, object) in &inner.objects {
            for value in index(object) {
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
        self.read().objects.get(key).cloned()
    }

    pub fn get_in(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        if namespace.is_empty() {
            self.get(name)
        } else {
            self.get(&format!("{namespace}/{name}"))
        }
    }

    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().objects.values().cloned().collect()
    }

    pub fn keys(&self) -> Vec<String> {
        self.read().objects.keys().cloned().collect()
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
        let Some(keys) = inner
            .indices
            .get(index)
            .and_then(|values| values.get(value))
        else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|key| inner.objects.get(key).cloned())
            .collect()
    }

    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_index(NAMESPACE_INDEX, namespace)
    }

    /// What an owner may claim: the objects it controls (by UID) and the orphans of its
    /// namespace. Objects another controller owns are never claimed, so they are not
    /// looked at.
    pub fn claim_candidates(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<K>> {
        let mut candidates = self.by_index(CONTROLLER_UID_INDEX, owner_uid);
        candidates.extend(
            self.by_index(CONTROLLER_UID_INDEX, ORPHAN_INDEX_KEY)
                .into_iter()
                .filter(|o| o.namespace_str() == namespace),
        );
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
        let mut inner = self.write();
        let old = inner.objects.insert(key.clone(), object.clone());
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
        let old = inner.objects.remove(key)?;
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

fn remove_from(values: &mut HashMap<String, BTreeSet<String>>, value: &str, key: &str) {
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

    #[test]
    fn indexes_follow_updates_and_deletes() {
        let store = Store::<Pod>::new();
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
        store.apply("a/p1".into(), pod("a", "p1", Some("rs1"), "n1"));
        store.apply("a/p2".into(), pod("a", "p2", None, "n1"));
        store.apply("b/p3".into(), pod("b", "p3", Some("rs1"), "n2"));
        assert_eq!(store.list_namespace("a").len(), 2);
        assert_eq!(store.by_index(CONTROLLER_UID_INDEX, "rs1").len(), 2);
        assert_eq!(
            store.by_index(CONTROLLER_UID_INDEX, ORPHAN_INDEX_KEY).len(),
            1
        );
        // p2 adopted and moved
        store.apply("a/p2".into(), pod("a", "p2", Some("rs2"), "n2"));
        assert!(store
            .by_index(CONTROLLER_UID_INDEX, ORPHAN_INDEX_KEY)
            .is_empty());
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

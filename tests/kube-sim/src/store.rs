//! The in-memory object store: what etcd plus the watch cache are to kube-apiserver.
//!
//! Every object lives under its resource (group + plural, shared by all served versions)
//! and its `namespace/name` key, ordered like etcd keys so that paginated lists are stable.
//! One global, monotonically increasing resourceVersion orders every write; each write is
//! appended to a bounded history (the watch window) and broadcast to open watches. A watch
//! that asks for a resourceVersion older than the retained history gets `410 Expired`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

/// Storage identity of a resource: group and plural name (all versions share storage).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResKey {
    pub group: String,
    pub resource: String,
}

impl ResKey {
    pub fn new(group: &str, resource: &str) -> Self {
        ResKey {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

/// `namespace` ("" for cluster-scoped) and `name`; ordered as etcd orders keys.
pub type ObjKey = (String, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed write, as watches see it.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub res: ResKey,
    pub kind: EventType,
    pub namespace: String,
    pub name: String,
    /// The new state (for DELETED: the last state, with the deletion's resourceVersion).
    pub object: Arc<Value>,
    /// The state before this write, so selector-filtered watches can turn a change that
    /// leaves the selector into DELETED and one that enters it into ADDED.
    pub old: Option<Arc<Value>>,
}

pub struct Inner {
    rv: u64,
    objects: HashMap<ResKey, BTreeMap<ObjKey, Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// Writes at or below this resourceVersion are no longer in the history.
    compacted_rv: u64,
}

pub struct Store {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Arc<Event>>,
    /// The resourceVersion of the last write to an RBAC object: the authorizer's compiled
    /// policy is keyed by it, so a request can tell without the lock whether it is current.
    rbac_rv: AtomicU64,
}

/// The API group whose writes move [`Store::rbac_rv`].
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The start of a watch: the events already committed after the requested resourceVersion,
/// and a receiver for everything after them (subscribed under the same lock, so nothing is lost).
pub struct WatchStart {
    pub backlog: Vec<Arc<Event>>,
    pub receiver: broadcast::Receiver<Arc<Event>>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct TooOld {
    pub requested: u64,
    pub oldest: u64,
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        let (events, _) = broadcast::channel(history_limit.clamp(1024, 1 << 16));
        Store {
            inner: Mutex::new(Inner {
                rv: 1,
                objects: HashMap::new(),
                history: VecDeque::new(),
                history_limit: history_limit.max(1),
                compacted_rv: 1,
            }),
            events,
            rbac_rv: AtomicU64::new(0),
        }
    }

    /// The resourceVersion of the last write to a Role, ClusterRole or binding (0: none yet).
    pub fn rbac_rv(&self) -> u64 {
        self.rbac_rv.load(Ordering::Acquire)
    }

    /// Take the store's lock for a read-modify-write; every write goes through a `Txn`.
    pub fn lock(&self) -> Txn<'_> {
        Txn {
            inner: self.inner.lock().unwrap_or_else(|p| p.into_inner()),
            events: &self.events,
            rbac_rv: &self.rbac_rv,
        }
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().inner.rv
    }

    /// Forget all history: any watch or exact list from an older resourceVersion gets 410.
    pub fn compact(&self) {
        let mut t = self.lock();
        t.inner.history.clear();
        t.inner.compacted_rv = t.inner.rv;
    }

    /// Begin a watch on `res` from `from_rv` (exclusive).
    pub fn watch_from(&self, res: &ResKey, from_rv: u64) -> Result<WatchStart, TooOld> {
        let t = self.lock();
        if from_rv < t.inner.compacted_rv {
            return Err(TooOld {
                requested: from_rv,
                oldest: t.inner.compacted_rv,
            });
        }
        let backlog = t
            .inner
            .history
            .iter()
            .filter(|e| e.rv > from_rv && &e.res == res)
            .cloned()
            .collect();
        Ok(WatchStart {
            backlog,
            receiver: self.events.subscribe(),
        })
    }

    /// Begin a watch that first sees the current state as ADDED events (resourceVersion 0 or unset).
    pub fn watch_now(
        &self,
        res: &ResKey,
    ) -> (u64, Vec<Arc<Value>>, broadcast::Receiver<Arc<Event>>) {
        let t = self.lock();
        let items = t
            .inner
            .objects
            .get(res)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        (t.inner.rv, items, self.events.subscribe())
    }
}

/// A locked view of the store. Writes made through it are committed in order.
pub struct Txn<'a> {
    inner: MutexGuard<'a, Inner>,
    events: &'a broadcast::Sender<Arc<Event>>,
    rbac_rv: &'a AtomicU64,
}

impl Txn<'_> {
    pub fn rv(&self) -> u64 {
        self.inner.rv
    }

    pub fn compacted_rv(&self) -> u64 {
        self.inner.compacted_rv
    }

    pub fn get(&self, res: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.inner
            .objects
            .get(res)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Objects of `res` in key order, in `namespace` if given, starting after `after` if given.
    pub fn range<'s>(
        &'s self,
        res: &ResKey,
        namespace: Option<&'s str>,
        after: Option<&'s ObjKey>,
    ) -> Box<dyn Iterator<Item = (&'s ObjKey, &'s Arc<Value>)> + 's> {
        let Some(map) = self.inner.objects.get(res) else {
            return Box::new(std::iter::empty());
        };
        use std::ops::Bound;
        let start = match (after, namespace) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let iter = map.range((start, Bound::Unbounded));
        match namespace {
            Some(ns) => Box::new(iter.take_while(move |(k, _)| k.0 == ns)),
            None => Box::new(iter),
        }
    }

    pub fn count(&self, res: &ResKey) -> usize {
        self.inner.objects.get(res).map_or(0, |m| m.len())
    }

    /// Allocate the resourceVersion the next write will carry.
    fn next_rv(&mut self) -> u64 {
        self.inner.rv += 1;
        self.inner.rv
    }

    /// Store `obj` (its metadata.resourceVersion is set here) and emit ADDED or MODIFIED.
    pub fn put(&mut self, res: &ResKey, mut obj: Value) -> Arc<Value> {
        let rv = self.next_rv();
        set_rv(&mut obj, rv);
        let (ns, name) = obj_key(&obj);
        let obj = Arc::new(obj);
        let old = self
            .inner
            .objects
            .entry(res.clone())
            .or_default()
            .insert((ns.clone(), name.clone()), obj.clone());
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.publish(Event {
            rv,
            res: res.clone(),
            kind,
            namespace: ns,
            name,
            object: obj.clone(),
            old,
        });
        obj
    }

    /// Remove an object and emit DELETED with its final state.
    pub fn remove(&mut self, res: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        let key = (ns.to_string(), name.to_string());
        let old = self.inner.objects.get_mut(res)?.remove(&key)?;
        let rv = self.next_rv();
        let mut last = (*old).clone();
        set_rv(&mut last, rv);
        let last = Arc::new(last);
        self.publish(Event {
            rv,
            res: res.clone(),
            kind: EventType::Deleted,
            namespace: key.0,
            name: key.1,
            object: last.clone(),
            old: Some(old),
        });
        Some(last)
    }

    /// Drop a whole resource (a CRD was deleted) without events: its watches are ended by the caller.
    pub fn drop_resource(&mut self, res: &ResKey) {
        self.inner.objects.remove(res);
    }

    fn publish(&mut self, event: Event) {
        if event.res.group == RBAC_GROUP {
            // Stored before the lock is released, so the next request sees the new policy.
            self.rbac_rv.store(event.rv, Ordering::Release);
        }
        let event = Arc::new(event);
        if self.inner.history.len() >= self.inner.history_limit {
            if let Some(gone) = self.inner.history.pop_front() {
                self.inner.compacted_rv = gone.rv;
            }
        }
        self.inner.history.push_back(event.clone());
        // No receiver is fine: nobody is watching.
        let _ = self.events.send(event);
    }
}

pub fn obj_key(obj: &Value) -> ObjKey {
    let meta = &obj["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_string(),
        meta["name"].as_str().unwrap_or_default().to_string(),
    )
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(ns: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "name": name}})
    }

    #[test]
    fn writes_get_increasing_resource_versions_and_events() {
        let store = Store::new(100);
        let res = ResKey::new("", "configmaps");
        let start = store.watch_from(&res, store.current_rv()).unwrap();
        let mut rx = start.receiver;
        let a = store.lock().put(&res, cm("a", "x"));
        let b = store.lock().put(&res, cm("a", "x"));
        let ra: u64 = a["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let rb: u64 = b["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rb > ra);
        assert_eq!(rx.try_recv().unwrap().kind, EventType::Added);
        assert_eq!(rx.try_recv().unwrap().kind, EventType::Modified);
        store.lock().remove(&res, "a", "x");
        let del = rx.try_recv().unwrap();
        assert_eq!(del.kind, EventType::Deleted);
        assert!(del.rv > rb);
    }

    #[test]
    fn range_is_ordered_by_namespace_then_name_and_resumes_after_a_key() {
        let store = Store::new(100);
        let res = ResKey::new("", "configmaps");
        for (ns, n) in [("b", "2"), ("a", "2"), ("b", "1"), ("a", "1")] {
            store.lock().put(&res, cm(ns, n));
        }
        let t = store.lock();
        let all: Vec<_> = t.range(&res, None, None).map(|(k, _)| k.clone()).collect();
        assert_eq!(
            all,
            vec![
                ("a".into(), "1".into()),
                ("a".into(), "2".into()),
                ("b".into(), "1".into()),
                ("b".into(), "2".into())
            ]
        );
        let in_b: Vec<_> = t
            .range(&res, Some("b"), None)
            .map(|(k, _)| k.1.clone())
            .collect();
        assert_eq!(in_b, vec!["1", "2"]);
        let after = ("a".to_string(), "2".to_string());
        let rest: Vec<_> = t
            .range(&res, None, Some(&after))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(rest.len(), 2);
    }

    #[test]
    fn history_window_expires_old_resource_versions() {
        let store = Store::new(3);
        let res = ResKey::new("", "configmaps");
        let first = store.current_rv();
        for i in 0..5 {
            store.lock().put(&res, cm("a", &i.to_string()));
        }
        assert!(store.watch_from(&res, first).is_err());
        let recent = store.current_rv() - 2;
        let start = store.watch_from(&res, recent).unwrap();
        assert_eq!(start.backlog.len(), 2);
        store.compact();
        assert!(store.watch_from(&res, recent).is_err());
        assert!(store.watch_from(&res, store.current_rv()).is_ok());
    }
}

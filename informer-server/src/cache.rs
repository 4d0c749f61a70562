//! The cache of one resource: its objects (ordered by `namespace/name`, so a namespace is
//! a key range), indexes by owner uid and by node (pods' spec.nodeName), the recent changes
//! kept for resuming subscribers, and the subscribers themselves.
//!
//! The reflector is the one writer. Each change is applied to the objects, recorded in the
//! history and offered to every subscriber's queue under one lock, so a subscriber that
//! joins sees either the state before a change (and then the change) or after it, never a
//! gap.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use rkcm_proto::v1::GroupVersionResource;
use tokio::sync::watch;

use crate::object::{CachedObject, ObjectKey};
use crate::projection::{FieldPaths, Projections, SharedProjection};
use crate::selector::{Filter, OWNER_UID_FIELD};
use crate::subscriber_queue::SubscriberQueue;

type Obj = Arc<CachedObject>;

/// What the API server says about a resource (from discovery).
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceInfo {
    pub gvr: GroupVersionResource,
    pub kind: String,
    pub namespaced: bool,
    pub verbs: Vec<String>,
}

struct Change {
    rv: u64,
    old: Option<Obj>,
    new: Obj,
    deleted: bool,
}

struct Subscriber {
    id: u64,
    queue: Arc<SubscriberQueue>,
    /// Has received its initial snapshot (or resume).
    started: bool,
    resume_from: Option<String>,
}

struct Inner {
    objects: BTreeMap<ObjectKey, Obj>,
    by_owner: HashMap<String, BTreeSet<ObjectKey>>,
    by_node: HashMap<String, BTreeSet<ObjectKey>>,
    resource_version: String,
    synced: bool,
    history: VecDeque<Change>,
    /// The history holds every change after this resourceVersion.
    history_floor: u64,
    subscribers: Vec<Subscriber>,
    next_subscriber: u64,
    cached_bytes: usize,
    /// Bytes of the object versions only the history holds (superseded or deleted).
    history_bytes: usize,
}

impl Change {
    /// Bytes of the versions this change alone keeps from being freed once it leaves the
    /// cache's present: the superseded or deleted state, and a deletion's final state.
    /// (A version's own change is followed by the one that supersedes it, which holds it
    /// until it is evicted in turn.)
    fn held_bytes(&self) -> usize {
        self.old.as_ref().map_or(0, |o| o.heap_bytes())
            + if self.deleted {
                self.new.heap_bytes()
            } else {
                0
            }
    }
}

#[derive(Default, Debug)]
pub struct ResourceCounters {
    pub events_received: AtomicU64,
    pub relists: AtomicU64,
    /// Objects received in (re)lists.
    pub objects_listed: AtomicU64,
    /// Of subscribers that have left (the live ones are summed at read time).
    pub delivered_by_gone: AtomicU64,
    pub coalesced_by_gone: AtomicU64,
    pub bytes_sent_by_gone: AtomicU64,
}

pub struct ResourceCache {
    pub info: ResourceInfo,
    pub gvr: Arc<GroupVersionResource>,
    pub counters: ResourceCounters,
    /// The resource-only envelope used for SYNCED, RESET and BOOKMARK events.
    pub empty_body: Bytes,
    history_limit: usize,
    inner: Mutex<Inner>,
    projections: Projections,
    synced_tx: watch::Sender<bool>,
}

/// One page of a List.
pub struct Page {
    pub resource_version: String,
    pub items: Vec<Obj>,
    /// The key to continue after, when more remain.
    pub continue_after: Option<ObjectKey>,
}

/// What a resource's subscribers have been sent, the departed ones included.
pub struct DeliveryTotals {
    pub delivered: u64,
    pub coalesced: u64,
    pub bytes_sent: u64,
}

impl ResourceCache {
    pub fn new(info: ResourceInfo, history_limit: usize) -> Self {
        let gvr = Arc::new(info.gvr.clone());
        let empty_body = rkcm_proto::SharedWatchEvent::encode_body(&gvr, "", "", "", "", b"");
        ResourceCache {
            info,
            gvr,
            counters: ResourceCounters::default(),
            empty_body,
            history_limit: history_limit.max(1),
            inner: Mutex::new(Inner {
                objects: BTreeMap::new(),
                by_owner: HashMap::new(),
                by_node: HashMap::new(),
                resource_version: String::new(),
                synced: false,
                history: VecDeque::new(),
                history_floor: 0,
                subscribers: Vec::new(),
                next_subscriber: 0,
                cached_bytes: 0,
                history_bytes: 0,
            }),
            synced_tx: watch::channel(false).0,
            projections: Projections::default(),
        }
    }

    /// The projection of this resource that keeps `paths`, shared by its subscribers.
    pub fn projection(&self, paths: FieldPaths) -> Arc<SharedProjection> {
        self.projections.get(paths)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the initial list is in the cache.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced_tx.subscribe();
        let _ = rx.wait_for(|synced| *synced).await;
    }

    pub fn is_synced(&self) -> bool {
        *self.synced_tx.borrow()
    }

    /// Replaces the whole content with a (re)list at `rv`. Subscribers that already hold
    /// state receive RESET and the new snapshot; waiting ones their first snapshot.
    pub fn replace(&self, objects: Vec<Obj>, rv: &str) {
        let mut inner = self.lock();
        let relist = inner.synced;
        inner.objects.clear();
        inner.by_owner.clear();
        inner.by_node.clear();
        inner.cached_bytes = 0;
        for projection in self.projections.live() {
            projection.clear();
        }
        self.counters
            .objects_listed
            .fetch_add(objects.len() as u64, Ordering::Relaxed);
        for object in objects {
            index_insert(&mut inner, &object);
            inner.cached_bytes += object.heap_bytes();
            inner.objects.insert(object.key.clone(), object);
        }
        inner.resource_version = rv.to_string();
        inner.history.clear();
        inner.history_bytes = 0;
        inner.history_floor = rv.parse().unwrap_or(u64::MAX);
        inner.synced = true;
        if relist {
            self.counters.relists.fetch_add(1, Ordering::Relaxed);
        }
        let Inner {
            objects,
            subscribers,
            ..
        } = &mut *inner;
        for subscriber in subscribers.iter_mut() {
            let reset = subscriber.started || subscriber.resume_from.is_some();
            subscriber.queue.snapshot(objects.values(), rv, reset);
            subscriber.started = true;
        }
        drop(inner);
        self.synced_tx.send_replace(true);
    }

    /// Applies one change from the watch. `deleted` marks the object's final state.
    pub fn apply(&self, object: Obj, deleted: bool) {
        self.counters
            .events_received
            .fetch_add(1, Ordering::Relaxed);
        let mut inner = self.lock();
        let rv = object.resource_version().to_string();
        let old = if deleted {
            inner.objects.remove(&object.key)
        } else {
            inner.objects.insert(object.key.clone(), object.clone())
        };
        if deleted {
            for projection in self.projections.live() {
                projection.forget(&object.key);
            }
        }
        if let Some(old) = &old {
            index_remove(&mut inner, old);
            inner.cached_bytes = inner.cached_bytes.saturating_sub(old.heap_bytes());
        }
        if !deleted {
            index_insert(&mut inner, &object);
            inner.cached_bytes += object.heap_bytes();
        }
        inner.resource_version = rv.clone();
        if deleted && old.is_none() {
            // Never cached: nobody holds it.
            for subscriber in inner.subscribers.iter().filter(|s| s.started) {
                subscriber.queue.observe(&rv);
            }
            return;
        }
        for subscriber in inner.subscribers.iter().filter(|s| s.started) {
            subscriber.queue.offer(old.as_ref(), &object, deleted, &rv);
        }
        if object.rv == 0 {
            // Without numeric versions there is no resuming: keep no history.
            inner.history_floor = u64::MAX;
            return;
        }
        let change = Change {
            rv: object.rv,
            old,
            new: object,
            deleted,
        };
        inner.history_bytes += change.held_bytes();
        inner.history.push_back(change);
        while inner.history.len() > self.history_limit {
            if let Some(evicted) = inner.history.pop_front() {
                inner.history_floor = evicted.rv;
                inner.history_bytes = inner.history_bytes.saturating_sub(evicted.held_bytes());
            }
        }
    }

    /// The API server's progress with no object change (a watch bookmark).
    pub fn bookmark(&self, rv: &str) {
        let mut inner = self.lock();
        if let (Ok(new), Ok(old)) = (rv.parse::<u64>(), inner.resource_version.parse::<u64>()) {
            if new <= old {
                return;
            }
            // Nothing changed between old and new: the history stays complete up to new.
        }
        inner.resource_version = rv.to_string();
        for subscriber in inner.subscribers.iter().filter(|s| s.started) {
            subscriber.queue.observe(rv);
        }
    }

    /// Registers a subscriber. If the cache is synced it receives, now, either the changes
    /// after `resume_from` (when the history still holds them) or a snapshot (preceded by
    /// RESET when it asked to resume); otherwise it receives its snapshot when the initial
    /// list completes. Returns the id to unsubscribe with.
    pub fn subscribe(&self, queue: Arc<SubscriberQueue>, resume_from: Option<String>) -> u64 {
        let mut inner = self.lock();
        let id = inner.next_subscriber;
        inner.next_subscriber += 1;
        let mut started = false;
        if inner.synced {
            let rv = inner.resource_version.clone();
            match resume_from
                .as_deref()
                .and_then(|from| resumable(&inner, from))
            {
                Some(from) => {
                    let missed = inner
                        .history
                        .iter()
                        .filter(|c| c.rv > from)
                        .map(|c| (c.old.as_ref(), &c.new, c.deleted));
                    queue.resume(missed, &rv);
                }
                None => queue.snapshot(inner.objects.values(), &rv, resume_from.is_some()),
            }
            started = true;
        }
        inner.subscribers.push(Subscriber {
            id,
            queue,
            started,
            resume_from,
        });
        id
    }

    pub fn unsubscribe(&self, id: u64) {
        let mut inner = self.lock();
        if let Some(pos) = inner.subscribers.iter().position(|s| s.id == id) {
            let gone = inner.subscribers.swap_remove(pos);
            let c = &gone.queue.counters;
            self.counters
                .delivered_by_gone
                .fetch_add(c.delivered.load(Ordering::Relaxed), Ordering::Relaxed);
            self.counters
                .coalesced_by_gone
                .fetch_add(c.coalesced.load(Ordering::Relaxed), Ordering::Relaxed);
            self.counters
                .bytes_sent_by_gone
                .fetch_add(c.bytes_sent.load(Ordering::Relaxed), Ordering::Relaxed);
            gone.queue.close();
        }
    }

    /// Closes every subscriber's stream (the resource is being stopped).
    pub fn close_all(&self) {
        for subscriber in &self.lock().subscribers {
            subscriber.queue.close();
        }
    }

    pub fn subscriber_count(&self) -> usize {
        self.lock().subscribers.len()
    }

    pub fn subscribers(&self) -> Vec<Arc<SubscriberQueue>> {
        self.lock()
            .subscribers
            .iter()
            .map(|s| s.queue.clone())
            .collect()
    }

    /// Totals over the live subscribers plus those that have left.
    pub fn delivery_totals(&self) -> DeliveryTotals {
        let inner = self.lock();
        let live =
            |f: fn(&crate::subscriber_queue::QueueCounters) -> &std::sync::atomic::AtomicU64| {
                inner
                    .subscribers
                    .iter()
                    .map(|s| f(&s.queue.counters).load(Ordering::Relaxed))
                    .sum::<u64>()
            };
        let c = &self.counters;
        DeliveryTotals {
            delivered: c.delivered_by_gone.load(Ordering::Relaxed) + live(|q| &q.delivered),
            coalesced: c.coalesced_by_gone.load(Ordering::Relaxed) + live(|q| &q.coalesced),
            bytes_sent: c.bytes_sent_by_gone.load(Ordering::Relaxed) + live(|q| &q.bytes_sent),
        }
    }

    pub fn len(&self) -> usize {
        self.lock().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn resource_version(&self) -> String {
        self.lock().resource_version.clone()
    }

    /// Bytes of the object versions kept only for resuming subscribers (superseded and
    /// deleted states in the history).
    pub fn history_bytes(&self) -> usize {
        self.lock().history_bytes
    }

    /// Bytes held by the cached objects (envelopes, keys, indexed fields) and by the
    /// projected envelopes subscribers share.
    pub fn cached_bytes(&self) -> usize {
        let projected: usize = self.projections.live().iter().map(|p| p.bytes()).sum();
        self.lock().cached_bytes + projected
    }

    pub fn get(&self, namespace: &str, name: &str) -> (Option<Obj>, String) {
        let inner = self.lock();
        let key = crate::object::object_key(namespace, name);
        (
            inner.objects.get(key.as_str()).cloned(),
            inner.resource_version.clone(),
        )
    }

    /// Objects matching `filter`, in key order, after `continue_after`, at most `limit`
    /// (0: all). Uses the namespace range, the node index or the owner index when the
    /// filter pins one.
    pub fn list(&self, filter: &Filter, limit: usize, continue_after: Option<&str>) -> Page {
        let inner = self.lock();
        let after = |key: &ObjectKey| continue_after.is_none_or(|c| &**key > c);
        let keys_of =
            |index: &HashMap<String, BTreeSet<ObjectKey>>, value: &str| -> Vec<ObjectKey> {
                index
                    .get(value)
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default()
            };
        let is_pods = self.info.gvr.group.is_empty() && self.info.gvr.resource == "pods";
        let indexed: Option<Vec<ObjectKey>> = match (
            filter.fields.required(OWNER_UID_FIELD),
            filter.fields.required("spec.nodeName").filter(|_| is_pods),
        ) {
            (Some(uid), _) => Some(keys_of(&inner.by_owner, uid)),
            (None, Some(node)) => Some(keys_of(&inner.by_node, node)),
            (None, None) => None,
        };
        let mut candidates: Box<dyn Iterator<Item = &Obj>> = match (&indexed, &filter.namespace) {
            (Some(keys), _) => Box::new(keys.iter().filter_map(|k| inner.objects.get(k))),
            (None, Some(ns)) => {
                // Keys of a namespace are "ns/..."; '0' is the byte after '/'.
                let start: ObjectKey = format!("{ns}/").into();
                let end: ObjectKey = format!("{ns}0").into();
                Box::new(
                    inner
                        .objects
                        .range::<ObjectKey, _>((Bound::Included(start), Bound::Excluded(end)))
                        .map(|(_, o)| o),
                )
            }
            (None, None) => Box::new(inner.objects.values()),
        };
        let mut items = Vec::new();
        let mut continue_after = None;
        for object in candidates.by_ref() {
            if !after(&object.key) || !filter.matches(object) {
                continue;
            }
            if limit > 0 && items.len() == limit {
                continue_after = items.last().map(|o: &Obj| o.key.clone());
                break;
            }
            items.push(object.clone());
        }
        Page {
            resource_version: inner.resource_version.clone(),
            items,
            continue_after,
        }
    }
}

/// The resourceVersion to resume after, if the history still holds everything after it.
fn resumable(inner: &Inner, from: &str) -> Option<u64> {
    let from: u64 = from.parse().ok()?;
    let current: u64 = inner.resource_version.parse().ok()?;
    (inner.history_floor <= from && from <= current).then_some(from)
}

fn node_of(object: &CachedObject) -> Option<&str> {
    object.field("spec.nodeName").filter(|v| !v.is_empty())
}

fn index_insert(inner: &mut Inner, object: &Obj) {
    for uid in object.owner_uids() {
        match inner.by_owner.get_mut(uid) {
            Some(set) => {
                set.insert(object.key.clone());
            }
            None => {
                let set = BTreeSet::from([object.key.clone()]);
                inner.by_owner.insert(uid.to_string(), set);
            }
        }
    }
    if let Some(node) = node_of(object) {
        inner
            .by_node
            .entry(node.to_string())
            .or_default()
            .insert(object.key.clone());
    }
}

fn index_remove(inner: &mut Inner, object: &Obj) {
    for uid in object.owner_uids() {
        if let Some(set) = inner.by_owner.get_mut(uid) {
            set.remove(&object.key);
            if set.is_empty() {
                inner.by_owner.remove(uid);
            }
        }
    }
    if let Some(node) = node_of(object) {
        if let Some(set) = inner.by_node.get_mut(node) {
            set.remove(&object.key);
            if set.is_empty() {
                inner.by_node.remove(node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use rkcm_proto::v1::{EventType, WatchEvent};
    use serde_json::json;
    use std::time::Duration;

    fn cache(history: usize) -> ResourceCache {
        ResourceCache::new(
            ResourceInfo {
                gvr: GroupVersionResource {
                    group: String::new(),
                    version: "v1".into(),
                    resource: "pods".into(),
                },
                kind: "Pod".into(),
                namespaced: true,
                verbs: vec![],
            },
            history,
        )
    }

    fn pod(c: &ResourceCache, ns: &str, name: &str, rv: u64, node: &str, owner: &str) -> Obj {
        Arc::new(
            CachedObject::from_value(
                &c.gvr,
                json!({"metadata": {"name": name, "namespace": ns, "uid": format!("{ns}-{name}"),
                    "resourceVersion": rv.to_string(),
                    "ownerReferences": [{"uid": owner}]},
                    "spec": {"nodeName": node}}),
            )
            .unwrap(),
        )
    }

    fn queue(c: &ResourceCache) -> Arc<SubscriberQueue> {
        Arc::new(SubscriberQueue::new(
            "t".into(),
            Filter::default(),
            false,
            Duration::from_secs(3600),
            c.empty_body.clone(),
        ))
    }

    async fn take(q: &SubscriberQueue, n: usize) -> Vec<(EventType, String, String)> {
        let mut out = Vec::new();
        for _ in 0..n {
            let e = tokio::time::timeout(Duration::from_secs(5), q.next())
                .await
                .unwrap()
                .unwrap();
            let e = WatchEvent::decode(&prost::Message::encode_to_vec(&e)[..]).unwrap();
            out.push((e.r#type(), e.name, e.resource_version));
        }
        out
    }

    #[test]
    fn lists_by_namespace_node_and_owner_with_pages() {
        let c = cache(10);
        let objects = vec![
            pod(&c, "a", "p1", 1, "n1", "o1"),
            pod(&c, "a", "p2", 2, "n2", "o1"),
            pod(&c, "ab", "p3", 3, "n1", "o2"),
            pod(&c, "b", "p4", 4, "n1", "o2"),
        ];
        c.replace(objects, "4");
        let names = |p: Page| {
            p.items
                .iter()
                .map(|o| o.name().to_string())
                .collect::<Vec<_>>()
        };
        let ns_a = Filter::new("", "pods", "a", "", "", None).unwrap();
        assert_eq!(names(c.list(&ns_a, 0, None)), vec!["p1", "p2"]);
        let n1 = Filter::new("", "pods", "", "", "spec.nodeName=n1", None).unwrap();
        assert_eq!(names(c.list(&n1, 0, None)), vec!["p1", "p3", "p4"]);
        let o2 = Filter::new("", "pods", "", "", "metadata.ownerReferences.uid=o2", None).unwrap();
        assert_eq!(names(c.list(&o2, 0, None)), vec!["p3", "p4"]);
        let all = Filter::default();
        let first = c.list(&all, 3, None);
        assert_eq!(first.continue_after.as_deref(), Some("ab/p3"));
        let rest = c.list(&all, 3, first.continue_after.as_deref());
        assert_eq!(names(rest), vec!["p4"]);
        c.apply(pod(&c, "a", "p1", 5, "n3", "o1"), false);
        assert_eq!(names(c.list(&n1, 0, None)), vec!["p3", "p4"]);
        c.apply(pod(&c, "b", "p4", 6, "n1", "o2"), true);
        assert_eq!(names(c.list(&o2, 0, None)), vec!["p3"]);
        assert_eq!(c.resource_version(), "6");
    }

    #[tokio::test]
    async fn a_resumed_subscriber_receives_only_what_it_missed() {
        let c = cache(100);
        c.replace(vec![pod(&c, "a", "p1", 1, "", "")], "1");
        c.apply(pod(&c, "a", "p2", 2, "", ""), false);
        c.apply(pod(&c, "a", "p3", 3, "", ""), false);
        let q = queue(&c);
        c.subscribe(q.clone(), Some("2".into()));
        assert_eq!(
            take(&q, 2).await,
            vec![
                (EventType::Added, "p3".into(), "3".into()),
                (EventType::Synced, String::new(), "3".into())
            ]
        );
    }

    #[tokio::test]
    async fn a_subscriber_resuming_beyond_the_history_gets_reset_and_snapshot() {
        let c = cache(2);
        c.replace(vec![], "1");
        for rv in 2..=5 {
            c.apply(pod(&c, "a", &format!("p{rv}"), rv, "", ""), false);
        }
        let q = queue(&c);
        c.subscribe(q.clone(), Some("2".into()));
        let events = take(&q, 6).await;
        assert_eq!(events[0].0, EventType::Reset);
        assert_eq!(events.iter().filter(|e| e.0 == EventType::Added).count(), 4);
        assert_eq!(events[5], (EventType::Synced, String::new(), "5".into()));
        // Within the history: only the last change.
        let q = queue(&c);
        c.subscribe(q.clone(), Some("4".into()));
        assert_eq!(
            take(&q, 2).await[0],
            (EventType::Added, "p5".into(), "5".into())
        );
    }

    /// The history's bytes are those of the versions only it holds: superseded states
    /// until the change that superseded them is evicted, deleted ones likewise.
    #[test]
    fn history_bytes_follow_what_only_the_history_holds() {
        let c = cache(2);
        let v: Vec<Obj> = (1..=5).map(|rv| pod(&c, "a", "p1", rv, "", "")).collect();
        let b = |i: usize| v[i].heap_bytes();
        c.replace(vec![v[0].clone()], "1");
        c.apply(v[1].clone(), false);
        assert_eq!(c.history_bytes(), b(0));
        c.apply(v[2].clone(), false);
        assert_eq!(c.history_bytes(), b(0) + b(1));
        c.apply(v[3].clone(), false);
        assert_eq!(c.history_bytes(), b(1) + b(2));
        c.apply(v[4].clone(), true);
        assert_eq!(c.history_bytes(), b(2) + b(3) + b(4));
        assert_eq!(c.cached_bytes(), 0);
        c.replace(vec![], "9");
        assert_eq!(c.history_bytes(), 0);
    }

    /// Two subscribers of one projection receive the same projected bytes; the cache's
    /// count of bytes includes them, and a deletion drops them.
    #[tokio::test]
    async fn subscribers_of_a_projection_share_its_events() {
        let c = cache(10);
        c.replace(vec![pod(&c, "a", "p1", 1, "n1", "o1")], "1");
        let fields = vec!["spec.nodeName".to_string()];
        let paths = || FieldPaths::parse(&fields).unwrap().unwrap();
        let (q1, q2) = (queue(&c), queue(&c));
        let q1 = Arc::new(
            Arc::into_inner(q1)
                .unwrap()
                .with_projection(c.projection(paths())),
        );
        let q2 = Arc::new(
            Arc::into_inner(q2)
                .unwrap()
                .with_projection(c.projection(paths())),
        );
        c.subscribe(q1.clone(), None);
        c.subscribe(q2.clone(), None);
        let before = c.cached_bytes();
        let e1 = tokio::time::timeout(Duration::from_secs(5), q1.next())
            .await
            .unwrap()
            .unwrap();
        let e2 = tokio::time::timeout(Duration::from_secs(5), q2.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e1.body.as_ptr(), e2.body.as_ptr());
        assert_eq!(c.cached_bytes(), before + e1.body.len());
        let decoded = WatchEvent::decode(&prost::Message::encode_to_vec(&e1)[..]).unwrap();
        let object: serde_json::Value = serde_json::from_str(&decoded.object).unwrap();
        assert_eq!(object["spec"], json!({"nodeName": "n1"}));
        assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "o1");
        c.apply(pod(&c, "a", "p1", 2, "n1", "o1"), true);
        assert_eq!(c.cached_bytes(), 0);
    }

    #[tokio::test]
    async fn subscribers_before_the_first_list_get_it_as_their_snapshot() {
        let c = cache(10);
        let q = queue(&c);
        c.subscribe(q.clone(), None);
        c.replace(vec![pod(&c, "a", "p1", 1, "", "")], "1");
        assert_eq!(take(&q, 2).await[0].0, EventType::Added);
        // A relist resets.
        c.replace(vec![], "9");
        assert_eq!(
            take(&q, 2).await,
            vec![
                (EventType::Reset, String::new(), String::new()),
                (EventType::Synced, String::new(), "9".into())
            ]
        );
    }
}

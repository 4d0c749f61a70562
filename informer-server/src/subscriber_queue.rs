//! One Watch subscriber's pending events, with DeltaFIFO semantics: the events of one
//! object coalesce while they wait, so a slow subscriber receives the latest state of
//! each changed object, its queue never holds more than one slot per object, and a fast
//! subscriber never waits for it (each subscriber has its own queue).
//!
//! The resource's reflector offers every change (old and new state) to every queue; the
//! queue decides, from its filter, what the change means for its subscriber (an object
//! that starts matching is ADDED, one that stops matching is DELETED), then coalesces:
//!
//! | pending  | incoming | result                                              |
//! |----------|----------|-----------------------------------------------------|
//! | ADDED    | MODIFIED | ADDED with the new state                            |
//! | ADDED    | DELETED  | nothing: the subscriber never received the object   |
//! | MODIFIED | MODIFIED | MODIFIED with the new state                         |
//! | MODIFIED | DELETED  | DELETED with the final state                        |
//! | DELETED  | ADDED    | DELETED of the old object, then ADDED of the new one|
//!
//! Per object, deliveries keep resourceVersion order. Because objects are delivered in the
//! order they first became pending, resourceVersions across objects are not monotonic: the
//! resume point of a stream is the resource_version of its last SYNCED or BOOKMARK, which
//! the queue emits when it has delivered everything up to that version.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rkcm_proto::v1::EventType;
use rkcm_proto::SharedWatchEvent;
use tokio::sync::Notify;

use crate::object::{CachedObject, ObjectKey};
use crate::projection::SharedProjection;
use crate::selector::Filter;

type Obj = Arc<CachedObject>;

enum Last {
    Nothing,
    Added(Obj),
    Modified(Obj),
    Deleted(Obj),
}

struct Pending {
    /// The DELETED of an object the subscriber holds, when the key was re-created since.
    deleted_first: Option<Obj>,
    last: Last,
    /// When the key became pending (the oldest change it carries).
    since: Instant,
}

enum Slot {
    Key(ObjectKey),
    Reset,
    Synced(String),
}

struct State {
    order: VecDeque<Slot>,
    pending: HashMap<ObjectKey, Pending>,
    closed: bool,
    /// The resource's resourceVersion as of the last change offered to this queue.
    observed_rv: String,
    /// The last resume point delivered (SYNCED or BOOKMARK).
    delivered_rv: String,
    last_bookmark: Instant,
}

/// Counters shared with Stats and the metrics.
#[derive(Default, Debug)]
pub struct QueueCounters {
    pub delivered: AtomicU64,
    pub coalesced: AtomicU64,
    pub depth: AtomicU64,
    pub bytes_sent: AtomicU64,
}

pub struct SubscriberQueue {
    pub subscriber: String,
    pub filter: Filter,
    pub metadata_only: bool,
    /// The fields this subscriber keeps, shared with the others that keep the same.
    projection: Option<Arc<SharedProjection>>,
    pub counters: QueueCounters,
    bookmark_interval: Duration,
    empty_body: Bytes,
    state: Mutex<State>,
    notify: Notify,
}

impl SubscriberQueue {
    /// `empty_body` is the envelope (resource only) used for SYNCED, RESET and BOOKMARK.
    pub fn new(
        subscriber: String,
        filter: Filter,
        metadata_only: bool,
        bookmark_interval: Duration,
        empty_body: Bytes,
    ) -> Self {
        SubscriberQueue {
            subscriber,
            filter,
            metadata_only,
            projection: None,
            counters: QueueCounters::default(),
            bookmark_interval,
            empty_body,
            state: Mutex::new(State {
                order: VecDeque::new(),
                pending: HashMap::new(),
                closed: false,
                observed_rv: String::new(),
                delivered_rv: String::new(),
                last_bookmark: Instant::now(),
            }),
            notify: Notify::new(),
        }
    }

    /// Sends objects with only the fields of `projection` (FULL subscribers only).
    pub fn with_projection(mut self, projection: Arc<SharedProjection>) -> Self {
        self.projection = Some(projection);
        self
    }

    fn event(&self, event_type: EventType, object: &Obj) -> SharedWatchEvent {
        match &self.projection {
            Some(projection) => SharedWatchEvent::new(event_type, projection.body(object)),
            None => object.event(event_type, self.metadata_only),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the queue half-updated in a way that
        // matters more than losing the subscriber; keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Slots waiting (at most one per object, plus markers).
    pub fn depth(&self) -> usize {
        self.lock().order.len()
    }

    /// Offers a change of the resource: `old` is the cached state before it (None for a
    /// creation), `new` the state after (for a deletion, the final state, with
    /// `deleted` set). `rv` is the resource's resourceVersion after the change.
    pub fn offer(&self, old: Option<&Obj>, new: &Obj, deleted: bool, rv: &str) {
        let was = old.is_some_and(|o| self.filter.matches(o));
        let is = !deleted && self.filter.matches(new);
        let change = match (was, is, deleted) {
            (true, _, true) => Some(EventType::Deleted),
            (false, _, true) => None,
            (false, true, false) => Some(EventType::Added),
            (true, true, false) => Some(EventType::Modified),
            (true, false, false) => Some(EventType::Deleted),
            (false, false, false) => None,
        };
        let mut state = self.lock();
        state.observed_rv = rv.to_string();
        if let Some(change) = change {
            self.push(&mut state, change, new.clone());
        }
        self.publish_depth(&state);
        drop(state);
        self.notify.notify_one();
    }

    /// The resource moved to `rv` with no change of an object (an API server bookmark).
    pub fn observe(&self, rv: &str) {
        let mut state = self.lock();
        if state.observed_rv != rv {
            state.observed_rv = rv.to_string();
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Queues the current objects as ADDED followed by SYNCED at `rv`; with `reset`, first
    /// drops everything pending and queues RESET, so the subscriber replaces its state.
    pub fn snapshot<'a>(&self, objects: impl Iterator<Item = &'a Obj>, rv: &str, reset: bool) {
        let mut state = self.lock();
        if reset {
            state.order.clear();
            state.pending.clear();
            state.order.push_back(Slot::Reset);
        }
        for object in objects {
            if self.filter.matches(object) {
                self.push(&mut state, EventType::Added, object.clone());
            }
        }
        state.order.push_back(Slot::Synced(rv.to_string()));
        state.observed_rv = rv.to_string();
        self.publish_depth(&state);
        drop(state);
        self.notify.notify_one();
    }

    /// Queues changes a resumed subscriber missed (already filtered by `offer` rules),
    /// then SYNCED at `rv`.
    pub fn resume<'a>(
        &self,
        missed: impl Iterator<Item = (Option<&'a Obj>, &'a Obj, bool)>,
        rv: &str,
    ) {
        for (old, new, deleted) in missed {
            self.offer(old, new, deleted, rv);
        }
        let mut state = self.lock();
        state.order.push_back(Slot::Synced(rv.to_string()));
        state.observed_rv = rv.to_string();
        self.publish_depth(&state);
        drop(state);
        self.notify.notify_one();
    }

    /// Ends the stream: the subscriber receives what is queued, then the end.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_one();
    }

    fn push(&self, state: &mut State, change: EventType, object: Obj) {
        let key = object.key.clone();
        match state.pending.entry(key.clone()) {
            Entry::Vacant(vacant) => {
                let last = match change {
                    EventType::Added => Last::Added(object),
                    EventType::Modified => Last::Modified(object),
                    _ => Last::Deleted(object),
                };
                vacant.insert(Pending {
                    deleted_first: None,
                    last,
                    since: Instant::now(),
                });
                state.order.push_back(Slot::Key(key));
            }
            Entry::Occupied(mut occupied) => {
                self.counters.coalesced.fetch_add(1, Ordering::Relaxed);
                let pending = occupied.get_mut();
                let last = std::mem::replace(&mut pending.last, Last::Nothing);
                pending.last = match (last, change) {
                    (Last::Added(_), EventType::Deleted) => Last::Nothing,
                    (Last::Added(_), _) => Last::Added(object),
                    (Last::Modified(_), EventType::Deleted) => Last::Deleted(object),
                    (Last::Modified(_), _) => Last::Modified(object),
                    (Last::Deleted(gone), EventType::Added | EventType::Modified) => {
                        pending.deleted_first = Some(gone);
                        Last::Added(object)
                    }
                    (Last::Deleted(_), _) => Last::Deleted(object),
                    (Last::Nothing, EventType::Deleted) => Last::Nothing,
                    // The subscriber does not hold this object (its creation was cancelled).
                    (Last::Nothing, _) => Last::Added(object),
                };
            }
        }
    }

    fn publish_depth(&self, state: &State) {
        self.counters
            .depth
            .store(state.order.len() as u64, Ordering::Relaxed);
    }

    /// The next event, waiting for one; None once closed and drained.
    pub async fn next(&self) -> Option<SharedWatchEvent> {
        loop {
            let notified = self.notify.notified();
            let wait = {
                let mut state = self.lock();
                if let Some(event) = self.pop(&mut state) {
                    self.publish_depth(&state);
                    drop(state);
                    self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                    return Some(event);
                }
                if state.closed {
                    return None;
                }
                if !state.observed_rv.is_empty() && state.observed_rv != state.delivered_rv {
                    let due = state.last_bookmark + self.bookmark_interval;
                    let now = Instant::now();
                    if now >= due {
                        state.last_bookmark = now;
                        state.delivered_rv = state.observed_rv.clone();
                        let rv = state.delivered_rv.clone();
                        drop(state);
                        return Some(self.marker(EventType::Bookmark, &rv));
                    }
                    Some(due - now)
                } else {
                    None
                }
            };
            match wait {
                Some(delay) => {
                    let _ = tokio::time::timeout(delay, notified).await;
                }
                None => notified.await,
            }
        }
    }

    fn pop(&self, state: &mut State) -> Option<SharedWatchEvent> {
        while let Some(slot) = state.order.pop_front() {
            let key = match slot {
                Slot::Reset => return Some(self.marker(EventType::Reset, "")),
                Slot::Synced(rv) => {
                    state.delivered_rv = rv.clone();
                    state.last_bookmark = Instant::now();
                    return Some(self.marker(EventType::Synced, &rv));
                }
                Slot::Key(key) => key,
            };
            let Some(mut pending) = state.pending.remove(&key) else {
                continue;
            };
            if let Some(gone) = pending.deleted_first.take() {
                if !matches!(pending.last, Last::Nothing) {
                    state.pending.insert(key.clone(), pending);
                    state.order.push_front(Slot::Key(key));
                }
                return Some(self.event(EventType::Deleted, &gone));
            }
            let since = pending.since;
            let (event_type, object) = match pending.last {
                Last::Nothing => continue,
                Last::Added(o) => (EventType::Added, o),
                Last::Modified(o) => (EventType::Modified, o),
                Last::Deleted(o) => (EventType::Deleted, o),
            };
            crate::metrics::observe_delivery(since.elapsed());
            return Some(self.event(event_type, &object));
        }
        release_spare_capacity(state);
        None
    }

    fn marker(&self, event_type: EventType, rv: &str) -> SharedWatchEvent {
        if rv.is_empty() {
            return SharedWatchEvent::new(event_type, self.empty_body.clone());
        }
        // The resource envelope, plus field 6 (resource_version).
        let mut body = self.empty_body.to_vec();
        prost::encoding::string::encode(6, &rv.to_string(), &mut body);
        SharedWatchEvent::new(event_type, Bytes::from(body))
    }
}

/// Slots a drained queue keeps room for; beyond, the room a burst needed is given back.
const KEPT_CAPACITY: usize = 64;

/// Once drained, drops the room a burst (a snapshot of every object) left behind: a
/// subscriber is idle most of its life, and each of its queues would otherwise keep a
/// table sized for the largest burst it ever saw.
fn release_spare_capacity(state: &mut State) {
    if state.order.is_empty() && state.pending.is_empty() {
        if state.order.capacity() > KEPT_CAPACITY {
            state.order.shrink_to(KEPT_CAPACITY);
        }
        if state.pending.capacity() > KEPT_CAPACITY {
            state.pending.shrink_to(KEPT_CAPACITY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use rkcm_proto::v1::{GroupVersionResource, WatchEvent};
    use serde_json::json;

    fn gvr() -> Arc<GroupVersionResource> {
        Arc::new(GroupVersionResource {
            group: String::new(),
            version: "v1".into(),
            resource: "configmaps".into(),
        })
    }

    fn obj(name: &str, uid: &str, rv: u64, label: &str) -> Obj {
        Arc::new(
            CachedObject::from_value(
                &gvr(),
                json!({"metadata": {"name": name, "namespace": "ns", "uid": uid,
                    "resourceVersion": rv.to_string(), "labels": {"l": label}}}),
            )
            .unwrap(),
        )
    }

    fn queue(label_selector: &str) -> SubscriberQueue {
        let empty = rkcm_proto::SharedWatchEvent::encode_body(&gvr(), "", "", "", "", b"");
        SubscriberQueue::new(
            "test".into(),
            Filter::new("", "configmaps", "", label_selector, "", None).unwrap(),
            false,
            Duration::from_secs(3600),
            empty,
        )
    }

    /// Everything queued now, as (type, name, uid, rv).
    fn drain(q: &SubscriberQueue) -> Vec<(EventType, String, String, String)> {
        let mut out = Vec::new();
        let mut state = q.lock();
        while let Some(event) = q.pop(&mut state) {
            let e = WatchEvent::decode(&event.encode_to_vec()[..]).unwrap();
            out.push((e.r#type(), e.name, e.uid, e.resource_version));
        }
        out
    }

    fn kinds(events: &[(EventType, String, String, String)]) -> Vec<(EventType, &str)> {
        events.iter().map(|(t, n, _, _)| (*t, n.as_str())).collect()
    }

    #[test]
    fn updates_of_one_object_coalesce_to_the_latest_state() {
        let q = queue("");
        let a1 = obj("a", "u", 1, "x");
        q.offer(None, &a1, false, "1");
        let mut prev = a1;
        for rv in 2..=1000 {
            let next = obj("a", "u", rv, "x");
            q.offer(Some(&prev), &next, false, &rv.to_string());
            prev = next;
        }
        assert_eq!(q.depth(), 1);
        let events = drain(&q);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, EventType::Added);
        assert_eq!(events[0].3, "1000");
        assert_eq!(q.counters.coalesced.load(Ordering::Relaxed), 999);
    }

    #[test]
    fn a_drained_queue_gives_back_the_room_of_a_snapshot() {
        let q = queue("");
        let objects: Vec<Obj> = (0..5_000)
            .map(|i| obj(&format!("o{i}"), "u", i, "x"))
            .collect();
        q.snapshot(objects.iter(), "5000", false);
        assert!(q.lock().pending.capacity() >= 5_000);
        assert_eq!(drain(&q).len(), 5_001);
        let state = q.lock();
        assert!(state.pending.capacity() <= 2 * KEPT_CAPACITY);
        assert!(state.order.capacity() <= 2 * KEPT_CAPACITY);
    }

    #[test]
    fn a_deletion_of_an_object_never_received_is_dropped() {
        let q = queue("");
        let a = obj("a", "u", 1, "x");
        q.offer(None, &a, false, "1");
        q.offer(Some(&a), &obj("a", "u", 2, "x"), true, "2");
        assert!(drain(&q).is_empty());
    }

    #[test]
    fn received_then_modified_then_deleted_delivers_the_final_state() {
        let q = queue("");
        let a = obj("a", "u", 1, "x");
        q.offer(None, &a, false, "1");
        assert_eq!(kinds(&drain(&q)), vec![(EventType::Added, "a")]);
        let a2 = obj("a", "u", 2, "x");
        q.offer(Some(&a), &a2, false, "2");
        q.offer(Some(&a2), &obj("a", "u", 3, "x"), true, "3");
        let events = drain(&q);
        assert_eq!(kinds(&events), vec![(EventType::Deleted, "a")]);
        assert_eq!(events[0].3, "3");
    }

    #[test]
    fn a_recreated_object_is_deleted_then_added_with_both_uids() {
        let q = queue("");
        let old = obj("a", "old", 1, "x");
        q.offer(None, &old, false, "1");
        drain(&q);
        q.offer(Some(&old), &obj("a", "old", 2, "x"), true, "2");
        let new = obj("a", "new", 3, "x");
        q.offer(None, &new, false, "3");
        q.offer(Some(&new), &obj("a", "new", 4, "x"), false, "4");
        assert_eq!(q.depth(), 1);
        let events = drain(&q);
        assert_eq!(
            events
                .iter()
                .map(|(t, _, u, rv)| (*t, u.as_str(), rv.as_str()))
                .collect::<Vec<_>>(),
            vec![
                (EventType::Deleted, "old", "2"),
                (EventType::Added, "new", "4")
            ]
        );
    }

    #[test]
    fn churn_of_one_key_keeps_one_slot() {
        let q = queue("");
        let mut prev: Option<Obj> = None;
        for rv in 1..=500u64 {
            let o = obj("a", &format!("u{}", rv / 2), rv, "x");
            if rv % 2 == 1 {
                q.offer(None, &o, false, &rv.to_string());
                prev = Some(o);
            } else {
                q.offer(prev.as_ref(), &o, true, &rv.to_string());
            }
            assert!(q.depth() <= 1);
        }
        assert!(drain(&q).is_empty());
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let q = queue("l=match");
        let a = obj("a", "u", 1, "other");
        q.offer(None, &a, false, "1");
        assert!(drain(&q).is_empty());
        let a2 = obj("a", "u", 2, "match");
        q.offer(Some(&a), &a2, false, "2");
        assert_eq!(kinds(&drain(&q)), vec![(EventType::Added, "a")]);
        let a3 = obj("a", "u", 3, "other");
        q.offer(Some(&a2), &a3, false, "3");
        assert_eq!(kinds(&drain(&q)), vec![(EventType::Deleted, "a")]);
        q.offer(Some(&a3), &obj("a", "u", 4, "other"), true, "4");
        assert!(drain(&q).is_empty());
    }

    #[test]
    fn reset_replaces_whatever_was_pending() {
        let q = queue("");
        q.offer(None, &obj("gone", "g", 1, "x"), false, "1");
        let kept = obj("kept", "k", 2, "x");
        q.snapshot([&kept].into_iter(), "5", true);
        let events = drain(&q);
        assert_eq!(
            kinds(&events),
            vec![
                (EventType::Reset, ""),
                (EventType::Added, "kept"),
                (EventType::Synced, "")
            ]
        );
        assert_eq!(events[2].3, "5");
    }

    #[tokio::test]
    async fn a_caught_up_subscriber_gets_a_bookmark_at_the_resource_version() {
        let empty = rkcm_proto::SharedWatchEvent::encode_body(&gvr(), "", "", "", "", b"");
        let q = SubscriberQueue::new(
            "t".into(),
            Filter::default(),
            false,
            Duration::from_millis(10),
            empty,
        );
        q.snapshot(std::iter::empty(), "3", false);
        let synced = WatchEvent::decode(&q.next().await.unwrap().encode_to_vec()[..]).unwrap();
        assert_eq!(
            (synced.r#type(), synced.resource_version.as_str()),
            (EventType::Synced, "3")
        );
        q.observe("9");
        let bookmark = WatchEvent::decode(&q.next().await.unwrap().encode_to_vec()[..]).unwrap();
        assert_eq!(
            (bookmark.r#type(), bookmark.resource_version.as_str()),
            (EventType::Bookmark, "9")
        );
        q.close();
        assert!(q.next().await.is_none());
    }
}

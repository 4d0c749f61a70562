//! The event recorder: core/v1 Events about the objects a controller acts on, written as
//! client-go's recorder writes them (KCM's controllers use that one), so `kubectl
//! describe` shows the same thing:
//!
//! - `source.component` and `reportingController` = the controller's name, event name
//!   `<object>.<hex nanoseconds>`, in the object's namespace (`default` for
//!   cluster-scoped objects);
//! - the same event again (same object, type, reason, message) within the cache's memory
//!   patches the existing Event: `count` + 1 and a new `lastTimestamp`;
//! - more than 10 events differing only in message within 10 minutes are aggregated into
//!   one whose message starts `(combined from similar events): `;
//! - a spam filter per object allows a burst of 25 then one event per 5 minutes.
//!
//! Recording never blocks a reconcile: events go through a bounded buffer (1000) to a
//! writer task, and are dropped with a log line when it is full, as client-go does.

use crate::meta::ResourceNames;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Resource;
use tokio::sync::mpsc;
use tracing::{debug, warn};

pub const NORMAL: &str = "Normal";
pub const WARNING: &str = "Warning";

const CACHE_ENTRIES: usize = 4096;
const AGGREGATE_MAX_EVENTS: usize = 10;
const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
const SPAM_BURST: f64 = 25.0;
const SPAM_QPS: f64 = 1.0 / 300.0;
const BUFFER: usize = 1000;
const MAX_TRIES: usize = 12;
const RETRY_SLEEP: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct Recorder {
    component: String,
    sender: mpsc::Sender<Event>,
}

/// A reference to `object` for an Event's `involvedObject`.
pub fn reference_to<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    let meta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

impl Recorder {
    /// A recorder for the controller `component`, writing with `client`.
    pub fn new(client: kube::Client, component: &str) -> Self {
        let (sender, receiver) = mpsc::channel(BUFFER);
        tokio::spawn(write_events(client, receiver));
        Recorder {
            component: component.to_string(),
            sender,
        }
    }

    pub fn event<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        event_type: &str,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.event_for(reference_to(object), event_type, reason, message.into());
    }

    pub fn event_for(
        &self,
        reference: ObjectReference,
        event_type: &str,
        reason: &str,
        message: String,
    ) {
        let now = Timestamp::now();
        let namespace = reference
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".into());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    reference.name.as_deref().unwrap_or_default(),
                    now.as_nanosecond()
                )),
                namespace: Some(namespace),
                ..Default::default()
            },
            involved_object: reference,
            reason: Some(reason.to_string()),
            message: Some(message),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            type_: Some(event_type.to_string()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            reporting_component: Some(self.component.clone()),
            ..Default::default()
        };
        debug!(
            component = %self.component,
            object = %event.involved_object.name.as_deref().unwrap_or_default(),
            r#type = %event_type,
            reason = %reason,
            message = %event.message.as_deref().unwrap_or_default(),
            "event"
        );
        if self.sender.try_send(event).is_err() {
            warn!(component = %self.component, reason, "too many queued events; event dropped");
        }
    }
}

async fn write_events(client: kube::Client, mut receiver: mpsc::Receiver<Event>) {
    let mut correlator = Correlator::default();
    while let Some(event) = receiver.recv().await {
        let Some(result) = correlator.correlate(event, Instant::now()) else {
            continue;
        };
        let namespace = result.event.namespace_str().to_string();
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        for attempt in 1..=MAX_TRIES {
            let written = match &result.patch {
                Some(patch) => {
                    let name = result.event.name_str().to_string();
                    match api
                        .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
                        .await
                    {
                        Err(kube::Error::Api(status)) if status.code == 404 => {
                            let mut fresh = result.event.clone();
                            fresh.metadata.resource_version = None;
                            api.create(&PostParams::default(), &fresh).await
                        }
                        other => other,
                    }
                }
                None => api.create(&PostParams::default(), &result.event).await,
            };
            match written {
                Ok(stored) => {
                    correlator.update_state(&result.key, &stored);
                    break;
                }
                Err(kube::Error::Api(status)) => {
                    // The server rejected it; sending it again would not change that.
                    debug!(code = status.code, message = %status.message, "server rejected event (will not retry)");
                    break;
                }
                Err(error) if attempt < MAX_TRIES => {
                    warn!(%error, "unable to write event (will retry)");
                    tokio::time::sleep(RETRY_SLEEP).await;
                }
                Err(error) => warn!(%error, "unable to write event; giving up"),
            }
        }
    }
}

struct Correlated {
    event: Event,
    key: String,
    /// A strategic merge patch for an existing Event, or none to create one.
    patch: Option<serde_json::Value>,
}

struct Seen {
    count: i32,
    first: Option<Time>,
    name: String,
}

struct Aggregate {
    messages: HashSet<String>,
    last: Instant,
}

#[derive(Default)]
struct Correlator {
    seen: HashMap<String, Seen>,
    seen_order: VecDeque<String>,
    aggregates: HashMap<String, Aggregate>,
    spam: HashMap<String, (f64, Instant)>,
}

fn reference_key(reference: &ObjectReference) -> String {
    [
        reference.kind.as_deref(),
        reference.namespace.as_deref(),
        reference.name.as_deref(),
        reference.field_path.as_deref(),
        reference.uid.as_deref(),
        reference.api_version.as_deref(),
    ]
    .map(Option::unwrap_or_default)
    .join("\u{0}")
}

fn source_of(event: &Event) -> String {
    event
        .source
        .as_ref()
        .and_then(|source| source.component.clone())
        .unwrap_or_default()
}

impl Correlator {
    fn correlate(&mut self, mut event: Event, now: Instant) -> Option<Correlated> {
        let base = format!(
            "{}\u{0}{}\u{0}{}\u{0}{}",
            source_of(&event),
            reference_key(&event.involved_object),
            event.type_.as_deref().unwrap_or_default(),
            event.reason.as_deref().unwrap_or_default()
        );
        let message = event.message.clone().unwrap_or_default();
        // Similar events (same but for the message) aggregate past 10 in 10 minutes.
        let aggregate = self.aggregates.entry(base.clone()).or_insert(Aggregate {
            messages: HashSet::new(),
            last: now,
        });
        if now.duration_since(aggregate.last) > AGGREGATE_INTERVAL {
            aggregate.messages.clear();
        }
        aggregate.messages.insert(message.clone());
        aggregate.last = now;
        let key = if aggregate.messages.len() >= AGGREGATE_MAX_EVENTS {
            event.message = Some(format!("(combined from similar events): {message}"));
            base.clone()
        } else {
            format!("{base}\u{0}{message}")
        };
        // Spam filter per source and object.
        let spam_key = format!(
            "{}\u{0}{}\u{0}{}",
            source_of(&event),
            reference_key(&event.involved_object),
            event.type_.as_deref().unwrap_or_default()
        );
        let (tokens, last) = self.spam.entry(spam_key).or_insert((SPAM_BURST, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * SPAM_QPS).min(SPAM_BURST);
        *last = now;
        if *tokens < 1.0 {
            return None;
        }
        *tokens -= 1.0;
        if self.spam.len() > CACHE_ENTRIES {
            self.spam.clear();
        }
        let patch = match self.seen.get(&key) {
            Some(seen) => {
                event.count = Some(seen.count + 1);
                event.first_timestamp = seen.first.clone();
                event.metadata.name = Some(seen.name.clone());
                Some(serde_json::json!({
                    "count": event.count,
                    "lastTimestamp": event.last_timestamp,
                    "message": event.message,
                }))
            }
            None => None,
        };
        // Remember it now so a burst of the same event patches one object.
        self.remember(&key, &event);
        Some(Correlated { event, key, patch })
    }

    fn remember(&mut self, key: &str, event: &Event) {
        if !self.seen.contains_key(key) {
            self.seen_order.push_back(key.to_string());
            while self.seen_order.len() > CACHE_ENTRIES {
                if let Some(oldest) = self.seen_order.pop_front() {
                    self.seen.remove(&oldest);
                }
            }
        }
        self.seen.insert(
            key.to_string(),
            Seen {
                count: event.count.unwrap_or(1),
                first: event.first_timestamp.clone(),
                name: event.name_str().to_string(),
            },
        );
    }

    /// Records the server's version (name, count) of what was written.
    fn update_state(&mut self, key: &str, stored: &Event) {
        self.remember(key, stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str, message: &str) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("web.{message}")),
                namespace: Some("default".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("ReplicaSet".into()),
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            count: Some(1),
            type_: Some(NORMAL.into()),
            source: Some(EventSource {
                component: Some("replicaset-controller".into()),
                host: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_same_event_patches_count_on_the_first_object() {
        let mut correlator = Correlator::default();
        let now = Instant::now();
        let first = correlator
            .correlate(event("FailedCreate", "quota"), now)
            .unwrap();
        assert!(first.patch.is_none());
        let second = correlator
            .correlate(event("FailedCreate", "quota"), now)
            .unwrap();
        assert_eq!(second.event.metadata.name.as_deref(), Some("web.quota"));
        assert_eq!(second.patch.unwrap()["count"], 2);
        let third = correlator
            .correlate(event("FailedCreate", "quota"), now)
            .unwrap();
        assert_eq!(third.event.count, Some(3));
        let other = correlator
            .correlate(event("SuccessfulCreate", "quota"), now)
            .unwrap();
        assert!(other.patch.is_none(), "another reason is another event");
    }

    #[test]
    fn similar_events_are_combined_after_ten() {
        let mut correlator = Correlator::default();
        let now = Instant::now();
        for i in 0..9 {
            let out = correlator
                .correlate(
                    event("SuccessfulCreate", &format!("Created pod: p{i}")),
                    now,
                )
                .unwrap();
            assert!(out.patch.is_none());
        }
        let tenth = correlator
            .correlate(event("SuccessfulCreate", "Created pod: p9"), now)
            .unwrap();
        assert_eq!(
            tenth.event.message.as_deref(),
            Some("(combined from similar events): Created pod: p9")
        );
        let eleventh = correlator
            .correlate(event("SuccessfulCreate", "Created pod: p10"), now)
            .unwrap();
        assert!(eleventh.patch.is_some(), "the combined event is counted up");
    }

    #[test]
    fn spam_filter_allows_a_burst_of_25_per_object() {
        let mut correlator = Correlator::default();
        let now = Instant::now();
        let passed = (0..40)
            .filter(|_| correlator.correlate(event("X", "same"), now).is_some())
            .count();
        assert_eq!(passed, 25);
        let later = now + Duration::from_secs(300);
        assert!(correlator.correlate(event("X", "same"), later).is_some());
    }
}

//! The `endpoints.kubernetes.io/last-change-trigger-time` of a Service's endpoints
//! (upstream `TriggerTimeTracker`): the earliest time something changed since the last
//! sync, so the data plane can measure how long a change took to reach it.

use crate::meta::ResourceNames;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::jiff::Timestamp;

#[derive(Default)]
struct ServiceState {
    service_trigger: Option<Timestamp>,
    pod_triggers: BTreeMap<String, Timestamp>,
}

/// Remembers, per Service, the trigger times seen at its last sync.
#[derive(Default)]
pub struct TriggerTimeTracker {
    states: Mutex<HashMap<(String, String), ServiceState>>,
}

fn pod_trigger(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|time| time.0)
}

fn earliest(current: Option<Timestamp>, candidate: Timestamp) -> Option<Timestamp> {
    Some(current.map_or(candidate, |current| current.min(candidate)))
}

impl TriggerTimeTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// The trigger time for this sync of the Service's endpoints, given the pods it
    /// selects: on the first sync the Service's creation; later the earliest Ready
    /// transition (or Service creation) newer than what the previous sync saw; `None`
    /// when nothing changed that way.
    pub fn compute(&self, service: &Service, pods: &[&Pod]) -> Option<Timestamp> {
        let namespace = service.namespace_str().to_string();
        let name = service.name_str().to_string();
        let created = service.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let mut states = crate::locks::lock(&self.states);
        let known = states.contains_key(&(namespace.clone(), name.clone()));
        let state = states.entry((namespace, name)).or_default();
        let mut changed = None;
        let mut triggers = BTreeMap::new();
        for pod in pods {
            let Some(trigger) = pod_trigger(pod) else {
                continue;
            };
            let pod_name = pod.name_str().to_string();
            if state
                .pod_triggers
                .get(&pod_name)
                .is_none_or(|seen| trigger > *seen)
            {
                changed = earliest(changed, trigger);
            }
            triggers.insert(pod_name, trigger);
        }
        if let Some(created) = created {
            if state.service_trigger.is_none_or(|seen| created > seen) {
                changed = earliest(changed, created);
            }
        }
        state.pod_triggers = triggers;
        state.service_trigger = created;
        if known {
            changed
        } else {
            created
        }
    }

    /// Forgets a deleted Service.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        crate::locks::lock(&self.states).remove(&(namespace.to_string(), name.to_string()));
    }
}

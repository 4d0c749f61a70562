//! The EndpointSlice generations a controller wrote, per Service (upstream
//! `EndpointSliceTracker`): its slice handlers ignore the echoes of its own writes, and a
//! sync refuses to work from a cache older than what it wrote.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::SERVICE_NAME_LABEL;
use crate::meta::ResourceNames;

/// Marks a slice this controller has deleted and expects to see go.
const DELETION_EXPECTED: i64 = -1;

type ServiceKey = (String, String);

/// Generations by slice UID, by Service (namespace, name).
#[derive(Default)]
pub struct EndpointSliceTracker {
    generations: Mutex<HashMap<ServiceKey, HashMap<String, i64>>>,
}

fn service_of(slice: &EndpointSlice) -> ServiceKey {
    let service = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(SERVICE_NAME_LABEL))
        .cloned()
        .unwrap_or_default();
    (slice.namespace_str().to_string(), service)
}

fn uid(slice: &EndpointSlice) -> String {
    slice.metadata.uid.clone().unwrap_or_default()
}

fn generation(slice: &EndpointSlice) -> i64 {
    slice.metadata.generation.unwrap_or_default()
}

impl EndpointSliceTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether this slice is one the controller wrote (or expects deleted).
    pub fn has(&self, slice: &EndpointSlice) -> bool {
        crate::locks::lock(&self.generations)
            .get(&service_of(slice))
            .is_some_and(|slices| slices.contains_key(&uid(slice)))
    }

    /// Whether a slice change is someone else's: a slice it does not know, or a
    /// generation newer than the one it wrote.
    pub fn should_sync(&self, slice: &EndpointSlice) -> bool {
        match crate::locks::lock(&self.generations)
            .get(&service_of(slice))
            .and_then(|slices| slices.get(&uid(slice)))
        {
            None => true,
            Some(written) => generation(slice) > *written,
        }
    }

    /// Whether the cached slices of the Service are older than what the controller wrote:
    /// one it deleted is still there, one shows an older generation, or one it wrote is
    /// missing.
    pub fn stale_slices(&self, namespace: &str, service: &str, slices: &[&EndpointSlice]) -> bool {
        let generations = crate::locks::lock(&self.generations);
        let Some(written) = generations.get(&(namespace.to_string(), service.to_string())) else {
            return false;
        };
        let mut provided = std::collections::HashSet::new();
        for slice in slices {
            let uid = uid(slice);
            if let Some(&expected) = written.get(&uid) {
                if expected == DELETION_EXPECTED || expected > generation(slice) {
                    return true;
                }
            }
            provided.insert(uid);
        }
        written
            .iter()
            .any(|(uid, &expected)| expected != DELETION_EXPECTED && !provided.contains(uid))
    }

    /// Records a slice the controller created or updated.
    pub fn update(&self, slice: &EndpointSlice) {
        crate::locks::lock(&self.generations)
            .entry(service_of(slice))
            .or_default()
            .insert(uid(slice), generation(slice));
    }

    /// Records a slice the controller deleted.
    pub fn expect_deletion(&self, slice: &EndpointSlice) {
        crate::locks::lock(&self.generations)
            .entry(service_of(slice))
            .or_default()
            .insert(uid(slice), DELETION_EXPECTED);
    }

    /// Forgets a deleted slice; `true` when the deletion was expected (or the slice was
    /// never tracked), `false` when someone else deleted a slice the controller wrote.
    pub fn handle_deletion(&self, slice: &EndpointSlice) -> bool {
        let mut generations = crate::locks::lock(&self.generations);
        let Some(slices) = generations.get_mut(&service_of(slice)) else {
            return true;
        };
        match slices.remove(&uid(slice)) {
            Some(written) => written == DELETION_EXPECTED,
            None => true,
        }
    }

    /// Forgets a deleted Service.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        crate::locks::lock(&self.generations).remove(&(namespace.to_string(), name.to_string()));
    }
}

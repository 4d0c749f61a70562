//! The resourceVersions of Endpoints this controller has replaced (upstream
//! `endpoints_tracker.go`): a cached Endpoints still at such a version is older than the
//! controller's own last write, so deciding from it would undo that write; the sync fails
//! and is retried once the cache has caught up.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Endpoints;

use crate::locks::lock;
use crate::meta::ResourceNames;

#[derive(Default)]
pub(super) struct StaleEndpointsTracker {
    /// `(namespace, name)` -> the resourceVersion this controller replaced.
    replaced: Mutex<HashMap<(String, String), String>>,
}

fn key_of(endpoints: &Endpoints) -> (String, String) {
    (
        endpoints.namespace_str().to_string(),
        endpoints.name_str().to_string(),
    )
}

impl StaleEndpointsTracker {
    /// Remembers that this version of the object has been replaced.
    pub(super) fn stale(&self, endpoints: &Endpoints) {
        let version = endpoints
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        lock(&self.replaced).insert(key_of(endpoints), version);
    }

    /// Whether this copy is one this controller has already replaced.
    pub(super) fn is_stale(&self, endpoints: &Endpoints) -> bool {
        let version = endpoints
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default();
        lock(&self.replaced)
            .get(&key_of(endpoints))
            .is_some_and(|replaced| replaced == version)
    }

    /// Forgets the object (its Service is gone).
    pub(super) fn delete(&self, namespace: &str, name: &str) {
        lock(&self.replaced).remove(&(namespace.to_string(), name.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn endpoints(namespace: &str, name: &str, version: &str) -> Endpoints {
        Endpoints {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn only_the_replaced_version_of_that_object_is_stale() {
        let tracker = StaleEndpointsTracker::default();
        assert!(!tracker.is_stale(&endpoints("ns", "web", "7")));
        tracker.stale(&endpoints("ns", "web", "7"));
        assert!(tracker.is_stale(&endpoints("ns", "web", "7")));
        assert!(!tracker.is_stale(&endpoints("ns", "web", "8")), "newer");
        assert!(!tracker.is_stale(&endpoints("other", "web", "7")));
        assert!(!tracker.is_stale(&endpoints("ns", "api", "7")));
        tracker.delete("ns", "web");
        assert!(!tracker.is_stale(&endpoints("ns", "web", "7")));
    }
}

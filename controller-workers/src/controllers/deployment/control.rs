//! The ReplicaSet writes the rollout decisions make (upstream `rsControl` and the
//! event recorder of `DeploymentController`), behind a small trait so the rolling and
//! recreate logic runs against the API server in the controller and against an
//! in-memory fake (`fake::FakeReplicaSetControl`) in table tests.

use std::future::Future;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, PostParams};

use super::Controller;
use crate::meta::ResourceNames;

/// Writes a scaled ReplicaSet and reports it on the Deployment.
pub(super) trait ReplicaSetControl: Sync {
    /// PUTs `rs` (its spec.replicas and annotations changed); returns what the server
    /// stored.
    fn update_replica_set(
        &self,
        rs: &ReplicaSet,
    ) -> impl Future<Output = anyhow::Result<ReplicaSet>> + Send;

    /// Records an event on the Deployment.
    fn deployment_event(&self, d: &Deployment, event_type: &str, reason: &str, message: String);
}

impl ReplicaSetControl for Controller {
    async fn update_replica_set(&self, rs: &ReplicaSet) -> anyhow::Result<ReplicaSet> {
        let namespace = rs.namespace_str().to_string();
        let name = rs.name_str().to_string();
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
        Ok(api.replace(&name, &PostParams::default(), rs).await?)
    }

    fn deployment_event(&self, d: &Deployment, event_type: &str, reason: &str, message: String) {
        self.recorder.event(d, event_type, reason, message);
    }
}

/// An in-memory [`ReplicaSetControl`] that records every write and event.
#[cfg(test)]
pub(super) mod fake {
    use std::sync::Mutex;

    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

    use super::ReplicaSetControl;
    use crate::controllers::deployment::util::replica_set_replicas;
    use crate::meta::ResourceNames;

    #[derive(Default)]
    struct Calls {
        updates: Vec<ReplicaSet>,
        events: Vec<(String, String, String)>,
    }

    /// Records the ReplicaSets written and the events; with `fail` set, every write
    /// fails (a conflict, as a stale cache would make it).
    #[derive(Default)]
    pub(in crate::controllers::deployment) struct FakeReplicaSetControl {
        calls: Mutex<Calls>,
        fail: bool,
    }

    impl FakeReplicaSetControl {
        /// A fake whose every write fails.
        pub(in crate::controllers::deployment) fn failing() -> Self {
            FakeReplicaSetControl {
                fail: true,
                ..FakeReplicaSetControl::default()
            }
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, Calls> {
            self.calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        /// The ReplicaSets written, in order.
        pub(in crate::controllers::deployment) fn updates(&self) -> Vec<ReplicaSet> {
            self.lock().updates.clone()
        }

        /// (name, spec.replicas) of each write, in order.
        pub(in crate::controllers::deployment) fn scales(&self) -> Vec<(String, i32)> {
            self.lock()
                .updates
                .iter()
                .map(|rs| (rs.name_str().to_string(), replica_set_replicas(rs)))
                .collect()
        }

        /// (type, reason, message) of each event, in order.
        pub(in crate::controllers::deployment) fn events(&self) -> Vec<(String, String, String)> {
            self.lock().events.clone()
        }
    }

    impl ReplicaSetControl for FakeReplicaSetControl {
        fn update_replica_set(
            &self,
            rs: &ReplicaSet,
        ) -> impl std::future::Future<Output = anyhow::Result<ReplicaSet>> + Send {
            let result = if self.fail {
                Err(anyhow::anyhow!(
                    "Operation cannot be fulfilled on replicasets.apps {:?}: the object has been modified",
                    rs.name_str()
                ))
            } else {
                self.lock().updates.push(rs.clone());
                Ok(rs.clone())
            };
            std::future::ready(result)
        }

        fn deployment_event(
            &self,
            _d: &Deployment,
            event_type: &str,
            reason: &str,
            message: String,
        ) {
            self.lock()
                .events
                .push((event_type.into(), reason.into(), message));
        }
    }
}

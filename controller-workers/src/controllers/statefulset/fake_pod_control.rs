//! An in-memory [`StatefulPodControlInterface`] (upstream's `fakeObjectManager` behind
//! `StatefulPodControl`): it holds the set's pods as the API server would (created
//! pods are Pending, deleted ones are gone), records every write in order, and leaves
//! claims alone (no volume claim templates in the tests that use it).

use std::collections::BTreeMap;
use std::future::{ready, Future};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::stateful_pod::StatefulPodControlInterface;
use super::utils::{ordinal, pod_revision, update_identity, update_storage};
use crate::meta::ResourceNames;

/// One recorded write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Write {
    Create(String),
    Update(String),
    Delete(String),
}

#[derive(Default)]
struct State {
    pods: BTreeMap<String, Pod>,
    writes: Vec<Write>,
}

#[derive(Default)]
pub(super) struct FakeStatefulPodControl {
    state: Mutex<State>,
}

fn not_found(name: &str) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure(&format!("pods {name:?} not found"), "NotFound")
            .with_code(404)
            .boxed(),
    )
}

fn already_exists(name: &str) -> anyhow::Error {
    anyhow::Error::new(kube::Error::Api(
        kube::core::Status::failure(&format!("pods {name:?} already exists"), "AlreadyExists")
            .with_code(409)
            .boxed(),
    ))
}

impl FakeStatefulPodControl {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pods as the informer would list them.
    pub(super) fn pods(&self) -> Vec<Arc<Pod>> {
        self.lock().pods.values().cloned().map(Arc::new).collect()
    }

    /// The writes since the last call, in order.
    pub(super) fn take_writes(&self) -> Vec<Write> {
        std::mem::take(&mut self.lock().writes)
    }

    /// (ordinal, revision) of every pod, by ordinal.
    pub(super) fn revisions(&self) -> Vec<(i32, String)> {
        let mut list: Vec<(i32, String)> = self
            .lock()
            .pods
            .values()
            .map(|pod| (ordinal(pod), pod_revision(pod).to_string()))
            .collect();
        list.sort();
        list
    }

    /// Every pod Running and Ready since `since` (the kubelet's part).
    pub(super) fn mark_all_ready(&self, since: Timestamp) {
        for pod in self.lock().pods.values_mut() {
            if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
                continue;
            }
            pod.status = Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(since)),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            });
        }
    }

    /// Sets a pod's phase (a container exited, the node lost it).
    pub(super) fn set_phase(&self, name: &str, phase: &str) {
        if let Some(pod) = self.lock().pods.get_mut(name) {
            pod.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        }
    }

    /// Deletes a pod as a user would (not recorded as the controller's write).
    pub(super) fn user_delete(&self, name: &str) {
        self.lock().pods.remove(name);
    }
}

impl StatefulPodControlInterface for FakeStatefulPodControl {
    fn create_stateful_pod(
        &self,
        _set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        let name = pod.name_str().to_string();
        let mut state = self.lock();
        let result = if state.pods.contains_key(&name) {
            Err(already_exists(&name))
        } else {
            let mut created = pod.clone();
            created.metadata.uid = Some(format!("uid-{name}"));
            created.status = Some(PodStatus {
                phase: Some("Pending".into()),
                ..PodStatus::default()
            });
            state.pods.insert(name.clone(), created);
            state.writes.push(Write::Create(name));
            Ok(())
        };
        ready(result)
    }

    fn update_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        let mut updated = pod.clone();
        update_identity(set, &mut updated);
        update_storage(set, &mut updated);
        let name = updated.name_str().to_string();
        let mut state = self.lock();
        state.pods.insert(name.clone(), updated);
        state.writes.push(Write::Update(name));
        ready(Ok(()))
    }

    fn delete_stateful_pod(
        &self,
        _set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send {
        let name = pod.name_str().to_string();
        let mut state = self.lock();
        let result = match state.pods.remove(&name) {
            Some(_) => {
                state.writes.push(Write::Delete(name));
                Ok(())
            }
            None => Err(not_found(&name)),
        };
        ready(result)
    }

    fn claims_match_retention_policy(&self, _set: &StatefulSet, _pod: &Pod) -> bool {
        true
    }

    fn update_pod_claim_for_retention_policy(
        &self,
        _set: &StatefulSet,
        _pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        ready(Ok(()))
    }

    fn pod_claim_is_stale(&self, _set: &StatefulSet, _pod: &Pod) -> bool {
        false
    }

    fn create_missing_persistent_volume_claims(
        &self,
        _set: &StatefulSet,
        _pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        ready(Ok(()))
    }
}

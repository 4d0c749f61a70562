//! The ReplicaSet sync: claim pods, create or delete to match `spec.replicas`, write the
//! status (upstream `syncReplicaSet` and `manageReplicas`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tracing::{debug, warn};

use super::kind::Replicated;
use super::{status, Controller, BURST_REPLICAS};
use crate::api_errors::is_not_found;
use crate::controller_ref::RefManager;
use crate::meta::ResourceNames;
use crate::pod_control::{controller_ref, slow_start_batch, SLOW_START_INITIAL_BATCH_SIZE};
use crate::pods::{compare_for_deletion, is_pod_active};
use crate::store::{key_of, split_key, CONTROLLER_UID_INDEX};

/// Why manageReplicas failed, kept for the ReplicaFailure condition.
pub(super) struct ManageError {
    pub reason: &'static str,
    pub error: anyhow::Error,
}

impl<K: Replicated> Controller<K> {
    pub(super) async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(rs) = self.replica_sets.get_in(namespace, name) else {
            debug!(key, "replica set has been deleted");
            self.expectations.delete(key);
            return Ok(());
        };
        let needs_sync = self.expectations.satisfied(key);
        let selector = match rs.pod_selector() {
            Ok(selector) => selector,
            Err(error) => {
                // The API server validates selectors; a bad one can never match a pod.
                warn!(key, %error, "error converting pod selector to selector");
                return Ok(());
            }
        };
        let uid = rs.meta().uid.clone().unwrap_or_default();
        // Candidates: pods this ReplicaSet controls, and orphans of its namespace (pods
        // another controller owns are never claimed, so they need not be looked at).
        let mut candidates = self.pods.claim_candidates(namespace, &uid);
        candidates.retain(|pod| is_pod_active(pod));
        let manager = RefManager::new(
            rs.as_ref(),
            controller_ref(rs.as_ref()),
            &selector,
            Api::<K>::namespaced(self.client.clone(), namespace),
        );
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let (pods, claim_errors) = manager.claim(candidates, &pod_api).await;
        if let Some(error) = claim_errors.into_iter().next() {
            // Act on nothing until the claim is clean, as upstream (it returns the error).
            return Err(error.into());
        }

        let mut manage_error = None;
        if needs_sync && rs.meta().deletion_timestamp.is_none() {
            manage_error = self.manage_replicas(&pods, &rs).await.err();
        }
        let new_status =
            status::calculate(rs.as_ref(), &pods, manage_error.as_ref(), Timestamp::now());
        let updated = status::update(&self.client, &rs, new_status)
            .await
            .with_context(|| format!("updating status of {} {key}", K::kind(&())))?;
        let replicas = updated.replicas();
        let min_ready = updated.min_ready_seconds();
        let status = updated.common_status();
        if manage_error.is_none()
            && min_ready > 0
            && status.ready_replicas.unwrap_or(0) == replicas
            && status.available_replicas.unwrap_or(0) != replicas
        {
            self.queue
                .add_after(key.to_string(), Duration::from_secs(min_ready as u64));
        }
        match manage_error {
            Some(failure) => Err(failure.error),
            None => Ok(()),
        }
    }

    async fn manage_replicas(&self, pods: &[Arc<Pod>], rs: &Arc<K>) -> Result<(), ManageError> {
        let key = key_of(rs.meta());
        let namespace = rs.namespace_str().to_string();
        let replicas = rs.replicas().max(0) as usize;
        if pods.len() < replicas {
            let diff = (replicas - pods.len()).min(BURST_REPLICAS);
            // Set before creating: the informer may see a pod before create returns.
            self.expectations.expect_creations(&key, diff as i64);
            let template = rs.template().cloned().unwrap_or_default();
            let reference = controller_ref(rs.as_ref());
            debug!(key, need = replicas, creating = diff, "too few replicas");
            let (created, error) = slow_start_batch(diff, SLOW_START_INITIAL_BATCH_SIZE, || {
                let template = &template;
                let reference = reference.clone();
                let namespace = &namespace;
                async move {
                    match self
                        .pod_control
                        .create_pod(namespace, template, rs.as_ref(), reference)
                        .await
                    {
                        Ok(_) => Ok(()),
                        // A timeout may still have created the pod; the informer will
                        // tell. Anything else is a failure.
                        Err(error) => Err(error),
                    }
                }
            })
            .await;
            let skipped = diff - created;
            if skipped > 0 {
                // Those creations will never be observed.
                self.expectations.lower(&key, skipped as i64, 0);
            }
            if let Some(error) = error {
                return Err(ManageError {
                    reason: "FailedCreate",
                    error: anyhow!(crate::api_errors::message(&error)),
                });
            }
        } else if pods.len() > replicas {
            let diff = (pods.len() - replicas).min(BURST_REPLICAS);
            debug!(key, need = replicas, deleting = diff, "too many replicas");
            let related = self.related_pods(rs);
            let to_delete = pods_to_delete(pods, &related, diff, Timestamp::now());
            let pod_keys: Vec<String> = to_delete.iter().map(|pod| key_of(&pod.metadata)).collect();
            self.expectations.expect_deletions(&key, pod_keys.clone());
            let results = futures::future::join_all(to_delete.iter().map(|pod| {
                let name = pod.name_str().to_string();
                let namespace = namespace.clone();
                async move {
                    self.pod_control
                        .delete_pod(&namespace, &name, rs.as_ref())
                        .await
                }
            }))
            .await;
            let mut first_error = None;
            for (result, pod_key) in results.into_iter().zip(pod_keys) {
                if let Err(error) = result {
                    // The informer will never see this deletion.
                    self.expectations.deletion_observed(&key, &pod_key);
                    if !is_not_found(&error) && first_error.is_none() {
                        first_error = Some(error);
                    }
                }
            }
            if let Some(error) = first_error {
                return Err(ManageError {
                    reason: "FailedDelete",
                    error: anyhow!(crate::api_errors::message(&error)),
                });
            }
        }
        Ok(())
    }

    /// Pods of every ReplicaSet that has the same controller (Deployment) as `rs`: a
    /// scale-down prefers pods doubled up with their siblings on a node.
    fn related_pods(&self, rs: &K) -> Vec<Arc<Pod>> {
        let namespace = rs.namespace_str();
        let siblings: Vec<Arc<K>> = match crate::store::controller_uid(rs.meta()) {
            Some(owner) => self
                .replica_sets
                .by_index(CONTROLLER_UID_INDEX, owner)
                .into_iter()
                .filter(|other| other.meta().namespace.as_deref() == Some(namespace))
                .collect(),
            None => self
                .replica_sets
                .get(&key_of(rs.meta()))
                .into_iter()
                .collect(),
        };
        let mut seen = std::collections::HashSet::new();
        siblings
            .iter()
            .flat_map(|sibling| {
                self.pods.by_index(
                    CONTROLLER_UID_INDEX,
                    sibling.meta().uid.as_deref().unwrap_or_default(),
                )
            })
            .filter(|pod| seen.insert(pod.metadata.uid.clone()))
            .collect()
    }
}

/// The `diff` pods to delete first, in upstream's order.
pub(super) fn pods_to_delete(
    pods: &[Arc<Pod>],
    related: &[Arc<Pod>],
    diff: usize,
    now: Timestamp,
) -> Vec<Arc<Pod>> {
    if diff >= pods.len() {
        return pods.to_vec();
    }
    let node = |pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|spec| spec.node_name.clone())
            .unwrap_or_default()
    };
    let mut on_node: HashMap<String, usize> = HashMap::new();
    for pod in related.iter().filter(|pod| is_pod_active(pod)) {
        *on_node.entry(node(pod)).or_default() += 1;
    }
    let mut ranked: Vec<(Arc<Pod>, usize)> = pods
        .iter()
        .map(|pod| (pod.clone(), on_node.get(&node(pod)).copied().unwrap_or(0)))
        .collect();
    ranked.sort_by(|a, b| compare_for_deletion((&a.0, a.1), (&b.0, b.1), now));
    ranked.into_iter().take(diff).map(|(pod, _)| pod).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};

    fn pod(name: &str, node: &str, phase: &str) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.uid = Some(name.into());
        pod.spec = Some(PodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        });
        Arc::new(pod)
    }

    #[test]
    fn scale_down_takes_pending_then_doubled_up_pods() {
        let pods = vec![
            pod("a", "n1", "Running"),
            pod("b", "n1", "Running"),
            pod("c", "n2", "Running"),
            pod("d", "n3", "Pending"),
        ];
        let chosen = pods_to_delete(&pods, &pods, 2, Timestamp::now());
        let names: Vec<_> = chosen
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names[0], "d", "pending first");
        assert!(
            names[1] == "a" || names[1] == "b",
            "then a pod doubled up on n1: {names:?}"
        );
        assert_eq!(pods_to_delete(&pods, &pods, 9, Timestamp::now()).len(), 4);
    }
}

//! A ReplicaSet's status from its pods (upstream `replica_set_utils.go`): replicas,
//! fullyLabeledReplicas, readyReplicas, availableReplicas (ready for minReadySeconds),
//! observedGeneration, and the ReplicaFailure condition while creating or deleting pods
//! fails.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::ResourceExt;

use super::kind::Replicated;
use super::sync::ManageError;
use crate::meta::ResourceNames;
use crate::pods::{is_pod_available, is_pod_ready};

pub(super) const REPLICA_FAILURE: &str = "ReplicaFailure";
/// One retry with a fresh read after a conflict, as upstream.
const STATUS_UPDATE_RETRIES: usize = 1;

pub(super) fn calculate<K: Replicated>(
    rs: &K,
    pods: &[Arc<Pod>],
    manage_error: Option<&ManageError>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let mut status = rs.common_status();
    let template_labels = rs.template_labels();
    let min_ready = rs.min_ready_seconds();
    let (mut fully_labeled, mut ready, mut available) = (0, 0, 0);
    for pod in pods {
        let labels = pod.labels().clone();
        if template_labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
        {
            fully_labeled += 1;
        }
        if is_pod_ready(pod) {
            ready += 1;
            if is_pod_available(pod, min_ready, now) {
                available += 1;
            }
        }
    }
    let has_failure = status
        .conditions
        .as_ref()
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == REPLICA_FAILURE));
    match manage_error {
        Some(failure) if !has_failure => {
            status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(ReplicaSetCondition {
                    type_: REPLICA_FAILURE.into(),
                    status: "True".into(),
                    reason: Some(failure.reason.into()),
                    message: Some(failure.error.to_string()),
                    last_transition_time: Some(Time(now)),
                });
        }
        None if has_failure => {
            if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| c.type_ != REPLICA_FAILURE);
                if conditions.is_empty() {
                    status.conditions = None;
                }
            }
        }
        _ => {}
    }
    status.replicas = pods.len() as i32;
    // Zero counts are omitted by the API (`omitempty`).
    let non_zero = |count: i32| (count != 0).then_some(count);
    status.fully_labeled_replicas = non_zero(fully_labeled);
    status.ready_replicas = non_zero(ready);
    status.available_replicas = non_zero(available);
    status
}

fn same_counts(a: &ReplicaSetStatus, b: &ReplicaSetStatus) -> bool {
    a.replicas == b.replicas
        && a.fully_labeled_replicas.unwrap_or(0) == b.fully_labeled_replicas.unwrap_or(0)
        && a.ready_replicas.unwrap_or(0) == b.ready_replicas.unwrap_or(0)
        && a.available_replicas.unwrap_or(0) == b.available_replicas.unwrap_or(0)
        && a.conditions.clone().unwrap_or_default() == b.conditions.clone().unwrap_or_default()
}

/// Writes `status` (with observedGeneration) unless nothing changed; returns the
/// ReplicaSet as stored.
pub(super) async fn update<K: Replicated>(
    client: &kube::Client,
    rs: &Arc<K>,
    mut status: ReplicaSetStatus,
) -> Result<Arc<K>, kube::Error> {
    let current = rs.common_status();
    let generation = rs.meta().generation;
    if same_counts(&current, &status) && current.observed_generation == generation {
        return Ok(rs.clone());
    }
    status.observed_generation = generation;
    let namespace = rs.namespace_str().to_string();
    let name = rs.name_str().to_string();
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    let mut object = rs.as_ref().clone();
    let mut attempt = 0;
    loop {
        object.set_common_status(status.clone());
        match api
            .replace_status(&name, &PostParams::default(), &object)
            .await
        {
            Ok(updated) => return Ok(Arc::new(updated)),
            Err(error) if attempt >= STATUS_UPDATE_RETRIES => return Err(error),
            Err(_) => {
                attempt += 1;
                object = api.get(&name).await?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(labels: &[(&str, &str)], ready_since: Option<i64>) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        pod.status = Some(PodStatus {
            conditions: ready_since.map(|secs| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(Timestamp::from_second(secs).unwrap())),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        Arc::new(pod)
    }

    #[test]
    fn counts_and_the_failure_condition() {
        let rs = ReplicaSet {
            spec: Some(ReplicaSetSpec {
                replicas: Some(3),
                min_ready_seconds: Some(10),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(
                            [("app".into(), "web".into()), ("v".into(), "2".into())].into(),
                        ),
                        ..Default::default()
                    }),
                    spec: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let now = Timestamp::from_second(1000).unwrap();
        let pods = vec![
            pod(&[("app", "web"), ("v", "2")], Some(100)),
            pod(&[("app", "web")], Some(995)),
        ];
        let failure = ManageError {
            reason: "FailedCreate",
            error: anyhow::anyhow!("exceeded quota"),
        };
        let status = calculate(&rs, &pods, Some(&failure), now);
        assert_eq!(status.replicas, 2);
        assert_eq!(status.fully_labeled_replicas, Some(1));
        assert_eq!(calculate(&rs, &[], None, now).ready_replicas, None);
        assert_eq!(status.ready_replicas, Some(2));
        assert_eq!(status.available_replicas, Some(1));
        let condition = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (
                condition.type_.as_str(),
                condition.reason.as_deref(),
                condition.message.as_deref()
            ),
            (
                REPLICA_FAILURE,
                Some("FailedCreate"),
                Some("exceeded quota")
            )
        );
        let healed = ReplicaSet {
            status: Some(status),
            ..rs
        };
        assert!(calculate(&healed, &pods, None, now).conditions.is_none());
    }
}

//! What the replica controller needs of the kind it manages. Upstream runs the same
//! controller for ReplicaSets (apps/v1) and ReplicationControllers (core/v1) through
//! adapters; here each kind says how to read its replicas, selector, template and status,
//! with the ReplicaSet status as the common form.

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{
    PodTemplateSpec, ReplicationController, ReplicationControllerCondition,
    ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::selector::Selector;

pub trait Replicated:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
    /// KCM's canonical controller name.
    const CONTROLLER: &'static str;
    /// The work queue's name (the `name` label of its metrics), as upstream.
    const QUEUE: &'static str;
    /// The events' source component, as upstream.
    const EVENT_SOURCE: &'static str;

    fn replicas(&self) -> i32;
    fn min_ready_seconds(&self) -> i32;
    fn pod_selector(&self) -> Result<Selector, String>;
    fn template(&self) -> Option<&PodTemplateSpec>;
    fn common_status(&self) -> ReplicaSetStatus;
    fn set_common_status(&mut self, status: ReplicaSetStatus);

    fn template_labels(&self) -> BTreeMap<String, String> {
        self.template()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.clone())
            .unwrap_or_default()
    }
}

impl Replicated for ReplicaSet {
    const CONTROLLER: &'static str = "replicaset-controller";
    const QUEUE: &'static str = "replicaset";
    const EVENT_SOURCE: &'static str = "replicaset-controller";

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }
    fn pod_selector(&self) -> Result<Selector, String> {
        Selector::from_label_selector(self.spec.as_ref().map(|s| &s.selector))
    }
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }
    fn common_status(&self) -> ReplicaSetStatus {
        self.status.clone().unwrap_or_default()
    }
    fn set_common_status(&mut self, status: ReplicaSetStatus) {
        self.status = Some(status);
    }
}

impl Replicated for ReplicationController {
    const CONTROLLER: &'static str = "replicationcontroller-controller";
    const QUEUE: &'static str = "replicationmanager";
    const EVENT_SOURCE: &'static str = "replication-controller";

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }
    /// A ReplicationController's selector is a plain label map (equality only).
    fn pod_selector(&self) -> Result<Selector, String> {
        let labels = self.spec.as_ref().and_then(|s| s.selector.clone());
        Selector::from_label_selector(Some(&LabelSelector {
            match_labels: labels,
            match_expressions: None,
        }))
    }
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }
    fn common_status(&self) -> ReplicaSetStatus {
        let status = self.status.clone().unwrap_or_default();
        ReplicaSetStatus {
            replicas: status.replicas,
            fully_labeled_replicas: status.fully_labeled_replicas,
            ready_replicas: status.ready_replicas,
            available_replicas: status.available_replicas,
            observed_generation: status.observed_generation,
            terminating_replicas: None,
            conditions: status.conditions.map(|conditions| {
                conditions
                    .into_iter()
                    .map(|c| ReplicaSetCondition {
                        type_: c.type_,
                        status: c.status,
                        reason: c.reason,
                        message: c.message,
                        last_transition_time: c.last_transition_time,
                    })
                    .collect()
            }),
        }
    }
    fn set_common_status(&mut self, status: ReplicaSetStatus) {
        self.status = Some(ReplicationControllerStatus {
            replicas: status.replicas,
            fully_labeled_replicas: status.fully_labeled_replicas,
            ready_replicas: status.ready_replicas,
            available_replicas: status.available_replicas,
            observed_generation: status.observed_generation,
            conditions: status.conditions.map(|conditions| {
                conditions
                    .into_iter()
                    .map(|c| ReplicationControllerCondition {
                        type_: c.type_,
                        status: c.status,
                        reason: c.reason,
                        message: c.message,
                        last_transition_time: c.last_transition_time,
                    })
                    .collect()
            }),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ReplicationControllerSpec;

    #[test]
    fn a_replication_controller_reads_as_a_replica_set() {
        let mut rc = ReplicationController {
            spec: Some(ReplicationControllerSpec {
                replicas: Some(3),
                selector: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(rc.replicas(), 3);
        let selector = rc.pod_selector().unwrap();
        assert!(selector.matches(Some(&[("app".to_string(), "web".to_string())].into())));
        assert!(!selector.matches(Some(&[("app".to_string(), "db".to_string())].into())));
        let mut status = ReplicaSetStatus {
            replicas: 2,
            ready_replicas: Some(1),
            ..Default::default()
        };
        status.conditions = Some(vec![ReplicaSetCondition {
            type_: "ReplicaFailure".into(),
            status: "True".into(),
            ..Default::default()
        }]);
        rc.set_common_status(status.clone());
        assert_eq!(rc.common_status(), status);
    }
}

//! A StatefulSet's status (upstream `updateStatus`, `completeRollingUpdate`,
//! `inconsistentStatus` and the status updater): counted from the pods, completed when a
//! rolling update has reached every replica, and written through the `/status`
//! subresource only when it differs from what the set shows.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

use super::utils::{
    is_created, is_running_and_available, is_running_and_ready, is_terminating, pod_revision,
    replicas, update_strategy_type, ROLLING_UPDATE,
};
use crate::api_errors::is_conflict;
use crate::meta::ResourceNames;

/// The status fields the controller owns, as plain numbers (the API omits zeros).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct SetStatus {
    pub observed_generation: i64,
    pub replicas: i32,
    pub ready_replicas: i32,
    pub available_replicas: i32,
    pub current_replicas: i32,
    pub updated_replicas: i32,
    pub current_revision: String,
    pub update_revision: String,
    pub collision_count: i32,
}

impl SetStatus {
    pub(super) fn of(set: &StatefulSet) -> SetStatus {
        let Some(status) = set.status.as_ref() else {
            return SetStatus::default();
        };
        SetStatus {
            observed_generation: status.observed_generation.unwrap_or(0),
            replicas: status.replicas,
            ready_replicas: status.ready_replicas.unwrap_or(0),
            available_replicas: status.available_replicas.unwrap_or(0),
            current_replicas: status.current_replicas.unwrap_or(0),
            updated_replicas: status.updated_replicas.unwrap_or(0),
            current_revision: status.current_revision.clone().unwrap_or_default(),
            update_revision: status.update_revision.clone().unwrap_or_default(),
            collision_count: status.collision_count.unwrap_or(0),
        }
    }

    /// The API object, zeros left out where the API leaves them out. Conditions are not
    /// carried over: upstream writes a fresh status.
    pub(super) fn to_api(&self) -> StatefulSetStatus {
        let non_zero = |n: i32| (n != 0).then_some(n);
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        StatefulSetStatus {
            observed_generation: (self.observed_generation != 0)
                .then_some(self.observed_generation),
            replicas: self.replicas,
            ready_replicas: non_zero(self.ready_replicas),
            available_replicas: Some(self.available_replicas),
            current_replicas: non_zero(self.current_replicas),
            updated_replicas: non_zero(self.updated_replicas),
            current_revision: non_empty(&self.current_revision),
            update_revision: non_empty(&self.update_revision),
            collision_count: Some(self.collision_count),
            conditions: None,
        }
    }

    /// Recounts the replica numbers from `lists` (pods the sync only built, with no
    /// phase, count for nothing; terminating pods count as neither current nor updated).
    pub(super) fn count(&mut self, min_ready_seconds: i32, lists: &[&[Arc<Pod>]], now: Timestamp) {
        self.replicas = 0;
        self.ready_replicas = 0;
        self.available_replicas = 0;
        self.current_replicas = 0;
        self.updated_replicas = 0;
        for pod in lists.iter().flat_map(|list| list.iter()) {
            if is_created(pod) {
                self.replicas += 1;
            }
            if is_running_and_ready(pod) {
                self.ready_replicas += 1;
                if is_running_and_available(pod, min_ready_seconds, now) {
                    self.available_replicas += 1;
                }
            }
            if is_created(pod) && !is_terminating(pod) {
                let revision = pod_revision(pod);
                if revision == self.current_revision {
                    self.current_replicas += 1;
                }
                if revision == self.update_revision {
                    self.updated_replicas += 1;
                }
            }
        }
    }
}

/// A RollingUpdate whose every replica is updated and ready is complete: the update
/// revision becomes the current one.
pub(super) fn complete_rolling_update(set: &StatefulSet, status: &mut SetStatus) {
    let wanted = replicas(set);
    if update_strategy_type(set) == ROLLING_UPDATE
        && status.updated_replicas == wanted
        && status.ready_replicas == wanted
        && status.replicas == wanted
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
}

/// Does `status` say something the set's status does not? (The collision count alone
/// does not count, as upstream.)
pub(super) fn inconsistent_status(set: &StatefulSet, status: &SetStatus) -> bool {
    let shown = SetStatus::of(set);
    status.observed_generation > shown.observed_generation
        || status.replicas != shown.replicas
        || status.current_replicas != shown.current_replicas
        || status.ready_replicas != shown.ready_replicas
        || status.updated_replicas != shown.updated_replicas
        || status.current_revision != shown.current_revision
        || status.available_replicas != shown.available_replicas
        || status.update_revision != shown.update_revision
}

const STATUS_UPDATE_ATTEMPTS: usize = 5;

/// Writes `status` to the set's `/status`, re-reading the set after a conflict.
pub(super) async fn write(
    client: &kube::Client,
    set: &StatefulSet,
    status: &SetStatus,
) -> Result<(), kube::Error> {
    let namespace = set.namespace_str().to_string();
    let name = set.name_str().to_string();
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), &namespace);
    let mut object = set.clone();
    let mut attempt = 0;
    loop {
        object.status = Some(status.to_api());
        match api
            .replace_status(&name, &PostParams::default(), &object)
            .await
        {
            Ok(_) => return Ok(()),
            Err(error) if is_conflict(&error) && attempt + 1 < STATUS_UPDATE_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
                object = api.get(&name).await?;
            }
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(
        name: &str,
        revision: &str,
        phase: &str,
        ready_since: Option<i64>,
        deleting: bool,
    ) -> Arc<Pod> {
        let mut value = json!({
            "metadata": {"name": name, "labels": {"controller-revision-hash": revision}},
            "status": {"phase": phase}
        });
        if let Some(since) = ready_since {
            value["status"]["conditions"] = json!([{
                "type": "Ready", "status": "True",
                "lastTransitionTime": Timestamp::from_second(since).unwrap().to_string()
            }]);
        }
        if deleting {
            value["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        Arc::new(serde_json::from_value(value).unwrap())
    }

    fn set(replicas: i32, strategy: &str) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": 4},
            "spec": {"replicas": replicas, "selector": {}, "template": {},
                     "updateStrategy": {"type": strategy}},
            "status": {"replicas": 3, "observedGeneration": 3,
                       "currentRevision": "web-a", "updateRevision": "web-b"}
        }))
        .unwrap()
    }

    #[test]
    fn counts_replicas_by_state_and_revision() {
        let now = Timestamp::from_second(1000).unwrap();
        let replicas = vec![
            pod("web-0", "web-a", "Running", Some(100), false),
            pod("web-1", "web-b", "Running", Some(995), false),
            pod("web-2", "web-b", "Pending", None, false),
            // Built by the sync, not created: counts for nothing.
            pod("web-3", "web-b", "", None, false),
        ];
        let condemned = vec![pod("web-4", "web-a", "Running", Some(100), true)];
        let mut status = SetStatus {
            current_revision: "web-a".into(),
            update_revision: "web-b".into(),
            ..Default::default()
        };
        status.count(10, &[&replicas, &condemned], now);
        assert_eq!(
            (
                status.replicas,
                status.ready_replicas,
                status.available_replicas,
                status.current_replicas,
                status.updated_replicas
            ),
            (4, 3, 2, 1, 2)
        );
    }

    #[test]
    fn a_finished_rolling_update_becomes_current() {
        let s = set(3, ROLLING_UPDATE);
        let mut status = SetStatus {
            replicas: 3,
            ready_replicas: 3,
            updated_replicas: 3,
            current_replicas: 0,
            current_revision: "web-a".into(),
            update_revision: "web-b".into(),
            ..Default::default()
        };
        complete_rolling_update(&s, &mut status);
        assert_eq!(
            (status.current_revision.as_str(), status.current_replicas),
            ("web-b", 3)
        );

        let mut unready = SetStatus {
            ready_replicas: 2,
            current_revision: "web-a".into(),
            ..status.clone()
        };
        complete_rolling_update(&s, &mut unready);
        assert_eq!(unready.current_revision, "web-a");

        let mut on_delete = SetStatus {
            current_revision: "web-a".into(),
            ..status
        };
        complete_rolling_update(&set(3, "OnDelete"), &mut on_delete);
        assert_eq!(on_delete.current_revision, "web-a");
    }

    #[test]
    fn only_changes_are_written() {
        let s = set(3, ROLLING_UPDATE);
        let shown = SetStatus::of(&s);
        assert!(!inconsistent_status(&s, &shown));
        assert!(inconsistent_status(
            &s,
            &SetStatus {
                observed_generation: 4,
                ..shown.clone()
            }
        ));
        assert!(!inconsistent_status(
            &s,
            &SetStatus {
                collision_count: 2,
                ..shown.clone()
            }
        ));
        assert!(inconsistent_status(
            &s,
            &SetStatus {
                ready_replicas: 1,
                ..shown.clone()
            }
        ));
        let api = SetStatus {
            ready_replicas: 0,
            available_replicas: 0,
            ..shown
        }
        .to_api();
        assert_eq!(
            (api.ready_replicas, api.available_replicas),
            (None, Some(0))
        );
        assert_eq!(api.current_revision.as_deref(), Some("web-a"));
    }
}

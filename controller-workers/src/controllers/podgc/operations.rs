//! The pod garbage collector's API calls, kept at the edge behind [`Operations`] so the
//! passes can be tested without a cluster: a live GET of a node, and a forced deletion
//! (upstream's `markFailedAndDeletePodWithCondition`: the pod marked Failed through
//! `pods/status`, then deleted with a zero grace period).

use std::future::Future;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{json, Value};

use crate::api_errors::is_not_found;
use crate::meta::ResourceNames;
use crate::pods::phase;

pub(super) trait Operations: Send + Sync + 'static {
    /// Whether the API server holds the node now (a live GET, not the cache).
    fn node_exists(&self, name: &str) -> impl Future<Output = anyhow::Result<bool>> + Send;

    /// Marks the pod Failed (with `condition`, when given) unless it finished already,
    /// then deletes it with a zero grace period.
    fn mark_failed_and_delete(
        &self,
        pod: &Pod,
        condition: Option<&PodCondition>,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// The feature gates the forced deletion reads. rkcm has no `--feature-gates`: it runs with
/// KCM 1.29's defaults ([`Gates::KCM_1_29`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Gates {
    /// `PodDisruptionConditions`: the DisruptionTarget condition on orphans, and the
    /// Failed phase.
    pub(super) pod_disruption_conditions: bool,
    /// `JobPodReplacementPolicy`: the Failed phase (so a Job sees the pod finished
    /// before it is gone).
    pub(super) job_pod_replacement_policy: bool,
}

impl Gates {
    /// Both Beta and on in 1.29.
    pub(super) const KCM_1_29: Gates = Gates {
        pod_disruption_conditions: true,
        job_pod_replacement_policy: true,
    };
}

/// The strategic-merge patch of `pods/status` that marks `pod` Failed before its forced
/// deletion, with `condition` merged in as upstream's `UpdatePodCondition` does (its
/// lastTransitionTime kept when its status does not change); the pod's UID rides along as a
/// precondition. `None` when the pod already finished, or when neither gate is on.
pub(super) fn failed_status_patch(
    pod: &Pod,
    condition: Option<&PodCondition>,
    gates: Gates,
    now: Timestamp,
) -> Option<Value> {
    if !(gates.pod_disruption_conditions || gates.job_pod_replacement_policy) {
        return None;
    }
    if matches!(phase(pod), "Succeeded" | "Failed") {
        return None;
    }
    let mut status = json!({"phase": "Failed"});
    if let Some(condition) = condition.filter(|_| gates.pod_disruption_conditions) {
        if let Some(entry) = condition_entry(pod, condition, now) {
            status["conditions"] = json!([entry]);
        }
    }
    let mut patch = json!({"status": status});
    if let Some(uid) = &pod.metadata.uid {
        patch["metadata"] = json!({"uid": uid});
    }
    Some(patch)
}

/// The condition as the patch carries it, or `None` when the pod has it already.
fn condition_entry(pod: &Pod, condition: &PodCondition, now: Timestamp) -> Option<Value> {
    let existing = pod
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == condition.type_));
    let transition = match existing {
        Some(old) if old.status == condition.status => old.last_transition_time.clone(),
        _ => Some(Time(now)),
    };
    if let Some(old) = existing {
        let unchanged = old.status == condition.status
            && old.reason == condition.reason
            && old.message == condition.message
            && old.last_probe_time.is_none()
            && old.last_transition_time == transition;
        if unchanged {
            return None;
        }
    }
    let mut entry = json!({"type": condition.type_, "status": condition.status});
    if let Some(reason) = &condition.reason {
        entry["reason"] = json!(reason);
    }
    if let Some(message) = &condition.message {
        entry["message"] = json!(message);
    }
    if let Some(transition) = transition {
        entry["lastTransitionTime"] = json!(transition);
    }
    if existing.is_some_and(|old| old.last_probe_time.is_some()) {
        // The condition is replaced whole: a probe time it had goes.
        entry["lastProbeTime"] = Value::Null;
    }
    Some(entry)
}

/// The API server, as `pod-garbage-collector`.
pub(super) struct Live {
    pub(super) client: kube::Client,
    pub(super) gates: Gates,
}

impl Operations for Live {
    async fn node_exists(&self, name: &str) -> anyhow::Result<bool> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        match nodes.get(name).await {
            Ok(_) => Ok(true),
            Err(error) if is_not_found(&error) => Ok(false),
            Err(error) => Err(anyhow::Error::new(error).context(format!("getting node {name}"))),
        }
    }

    async fn mark_failed_and_delete(
        &self,
        pod: &Pod,
        condition: Option<&PodCondition>,
    ) -> anyhow::Result<()> {
        let namespace = pod.namespace_str();
        let name = pod.name_str();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        if let Some(patch) = failed_status_patch(pod, condition, self.gates, Timestamp::now()) {
            pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
                .with_context(|| format!("marking pod {namespace}/{name} Failed"))?;
        }
        let force = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        pods.delete(name, &force)
            .await
            .with_context(|| format!("deleting pod {namespace}/{name}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, conditions: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "status": {"phase": phase, "conditions": conditions},
        }))
        .unwrap()
    }

    fn orphaned() -> PodCondition {
        PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("DeletionByPodGC".into()),
            message: Some("PodGC: node no longer exists".into()),
            ..PodCondition::default()
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(2_000_000_000).unwrap()
    }

    const NOW: &str = "2033-05-18T03:33:20Z";

    #[test]
    fn a_running_pod_is_marked_failed_with_its_uid_as_precondition() {
        let patch = failed_status_patch(&pod("Running", json!([])), None, Gates::KCM_1_29, now());
        assert_eq!(
            patch,
            Some(json!({"metadata": {"uid": "u-1"}, "status": {"phase": "Failed"}}))
        );
    }

    #[test]
    fn a_finished_pod_is_only_deleted() {
        for phase in ["Succeeded", "Failed"] {
            let patch = failed_status_patch(
                &pod(phase, json!([])),
                Some(&orphaned()),
                Gates::KCM_1_29,
                now(),
            );
            assert_eq!(patch, None, "{phase}");
        }
    }

    #[test]
    fn an_orphan_gets_the_disruption_target_condition() {
        let patch = failed_status_patch(
            &pod("Running", json!([{"type": "Ready", "status": "True"}])),
            Some(&orphaned()),
            Gates::KCM_1_29,
            now(),
        );
        assert_eq!(
            patch,
            Some(
                json!({"metadata": {"uid": "u-1"}, "status": {"phase": "Failed", "conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists", "lastTransitionTime": NOW}]}})
            )
        );
    }

    #[test]
    fn a_condition_of_the_same_status_keeps_its_transition_time() {
        let earlier = "2020-01-01T00:00:00Z";
        let patch = failed_status_patch(
            &pod(
                "Running",
                json!([{"type": "DisruptionTarget", "status": "True", "reason": "Other",
                    "lastTransitionTime": earlier, "lastProbeTime": earlier}]),
            ),
            Some(&orphaned()),
            Gates::KCM_1_29,
            now(),
        )
        .unwrap();
        assert_eq!(
            patch["status"]["conditions"],
            json!([{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists", "lastTransitionTime": earlier,
                "lastProbeTime": null}])
        );
        // Already there as it would be set: only the phase changes.
        let patch = failed_status_patch(
            &pod(
                "Running",
                json!([{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                    "message": "PodGC: node no longer exists", "lastTransitionTime": earlier}]),
            ),
            Some(&orphaned()),
            Gates::KCM_1_29,
            now(),
        )
        .unwrap();
        assert_eq!(patch["status"], json!({"phase": "Failed"}));
    }

    #[test]
    fn the_gates_decide_the_phase_and_the_condition() {
        let running = pod("Running", json!([]));
        let off = Gates {
            pod_disruption_conditions: false,
            job_pod_replacement_policy: false,
        };
        assert_eq!(
            failed_status_patch(&running, Some(&orphaned()), off, now()),
            None
        );
        let replacement_only = Gates {
            pod_disruption_conditions: false,
            job_pod_replacement_policy: true,
        };
        assert_eq!(
            failed_status_patch(&running, Some(&orphaned()), replacement_only, now()),
            Some(json!({"metadata": {"uid": "u-1"}, "status": {"phase": "Failed"}}))
        );
    }
}

//! The scheduler's writes: PreBind's volume bindings, the pod's binding, and
//! `PodScheduled=False` with its `FailedScheduling` event.

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use super::SCHEDULER_NAME;
use crate::nodesim::csi;
use crate::nodesim::volume_binding::{self, PodVolumes, Written};

/// PreBind's API writes (`bindAPIUpdate`): each matched volume takes its claim (`PUT pv`
/// with the claimRef and `pv.kubernetes.io/bound-by-controller`), each claim to provision
/// the selected node (`PUT pvc`). Returns what was written, with the new resourceVersions.
pub(super) async fn write_volume_bindings(
    client: &kube::Client,
    node: &str,
    volumes: &PodVolumes,
) -> Result<Vec<Written>, String> {
    let mut written = Vec::new();
    let volumes_api: Api<PersistentVolume> = Api::all(client.clone());
    for (volume, claim) in &volumes.static_bindings {
        let mut next = (**volume).clone();
        let already = volume_binding::is_volume_bound_to_claim(volume, claim);
        let spec = next.spec.get_or_insert_with(Default::default);
        spec.claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: claim.metadata.namespace.clone(),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            field_path: None,
        });
        if !already {
            next.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .entry(volume_binding::ANN_BOUND_BY_CONTROLLER.into())
                .or_insert_with(|| "yes".into());
        }
        let name = volume.name_any();
        let updated = volumes_api
            .replace(&name, &PostParams::default(), &next)
            .await
            .map_err(|e| format!("binding volume {name}: {e}"))?;
        written.push(Written {
            claim: format!(
                "{}/{}",
                claim.namespace().unwrap_or_default(),
                claim.name_any()
            ),
            volume: Some(name),
            resource_version: updated.metadata.resource_version.unwrap_or_default(),
        });
    }
    for claim in &volumes.provisions {
        let ns = claim.namespace().unwrap_or_default();
        let mut next = (**claim).clone();
        next.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(csi::ANN_SELECTED_NODE.into(), node.into());
        let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        let updated = claims_api
            .replace(&claim.name_any(), &PostParams::default(), &next)
            .await
            .map_err(|e| {
                format!(
                    "selecting node {node} for claim {ns}/{}: {e}",
                    claim.name_any()
                )
            })?;
        written.push(Written {
            claim: format!("{ns}/{}", claim.name_any()),
            volume: None,
            resource_version: updated.metadata.resource_version.unwrap_or_default(),
        });
    }
    Ok(written)
}

pub(super) fn already_reported(pod: &Pod, message: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(message))
}

pub(super) async fn bind(client: &kube::Client, pod: &Pod, node: &str) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod.name_any(), "namespace": ns, "uid": pod.uid()},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    match api
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &pod.name_any(),
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => Ok(()),
        // Someone else (another scheduler) got there first: nothing left to do.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// `PodScheduled=False` with `reason` (`Unschedulable`, or `SchedulerError` when binding
/// failed) and a `FailedScheduling` event.
pub(super) async fn report_unschedulable(
    client: &kube::Client,
    pod: &Pod,
    message: &str,
    reason: &str,
) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let now = Time(crate::nodesim::now_seconds());
    let mut conditions: Vec<PodCondition> = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.retain(|c| c.type_ != "PodScheduled");
    conditions.push(PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(now.clone()),
        ..PodCondition::default()
    });
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let patch = json!({"metadata": {"uid": pod.uid()}, "status": {"conditions": conditions}});
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    crate::nodesim::pod_event(
        client,
        pod,
        "Warning",
        "FailedScheduling",
        message,
        SCHEDULER_NAME,
        None,
    )
    .await
}

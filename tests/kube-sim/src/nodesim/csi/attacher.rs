//! external-attacher (driver [`DRIVER`]): a VolumeAttachment gets the finalizer
//! [`ATTACHER_FINALIZER`] and `status.attached: true`; once deleted, the finalizer goes.

use std::time::Instant;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;

use super::fields::{duration_knob, knob};
use super::{Csi, ATTACHER_FINALIZER, ATTACH_DELAY, ATTACH_ERROR, DRIVER};

/// What the attacher does with a VolumeAttachment now.
#[derive(Clone, Debug, PartialEq)]
pub enum AttachDecision {
    Skip,
    AddFinalizer,
    /// The attach-delay knob holds it until then.
    WaitUntil(Instant),
    /// The attach-error knob: record this error (when it is not recorded yet).
    Fail(String),
    Attach,
    /// Deleted: detach, i.e. drop the finalizer.
    Detach,
}

fn has_finalizer(va: &VolumeAttachment) -> bool {
    va.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == ATTACHER_FINALIZER)
}

/// external-attacher's handling of one VolumeAttachment of [`DRIVER`]; the knobs come from
/// the attached volume's claim and class.
pub fn attach_decision(
    va: &VolumeAttachment,
    claim: Option<&PersistentVolumeClaim>,
    class: Option<&StorageClass>,
    first_seen: Instant,
) -> AttachDecision {
    if va.spec.attacher != DRIVER {
        return AttachDecision::Skip;
    }
    if va.metadata.deletion_timestamp.is_some() {
        return if has_finalizer(va) {
            AttachDecision::Detach
        } else {
            AttachDecision::Skip
        };
    }
    if !has_finalizer(va) {
        return AttachDecision::AddFinalizer;
    }
    let status = va.status.as_ref();
    if status.is_some_and(|s| s.attached) {
        return AttachDecision::Skip;
    }
    if let Some(delay) = duration_knob(claim, class, ATTACH_DELAY) {
        let due = first_seen + delay;
        if Instant::now() < due {
            return AttachDecision::WaitUntil(due);
        }
    }
    if let Some(message) = knob(claim, class, ATTACH_ERROR) {
        let recorded = status
            .and_then(|s| s.attach_error.as_ref())
            .and_then(|e| e.message.as_deref());
        return if recorded == Some(message.as_str()) {
            AttachDecision::Skip
        } else {
            AttachDecision::Fail(message)
        };
    }
    AttachDecision::Attach
}

impl Csi {
    pub(super) async fn attach(
        &self,
        va: &VolumeAttachment,
        decision: AttachDecision,
    ) -> Result<(), String> {
        let name = va.name_any();
        let api: Api<VolumeAttachment> = Api::all(self.shared.client.clone());
        let rv = va.metadata.resource_version.clone();
        let finalizers = |with: bool| -> Vec<String> {
            let mut list: Vec<String> = va
                .metadata
                .finalizers
                .iter()
                .flatten()
                .filter(|f| *f != ATTACHER_FINALIZER)
                .cloned()
                .collect();
            if with {
                list.push(ATTACHER_FINALIZER.to_string());
            }
            list
        };
        let result = match decision {
            AttachDecision::AddFinalizer => {
                let patch =
                    json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers(true)}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            AttachDecision::Detach => {
                let patch =
                    json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers(false)}});
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    other => other.map(|_| ()),
                }
            }
            AttachDecision::Fail(message) => {
                let now = Time(crate::nodesim::now_seconds());
                let patch = json!({"status": {"attached": false,
                    "attachError": {"time": now, "message": message}}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            AttachDecision::Attach => {
                let patch = json!({"status": {"attached": true, "attachError": null}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            AttachDecision::Skip | AttachDecision::WaitUntil(_) => Ok(()),
        };
        result.map_err(|e| format!("VolumeAttachment {name}: {e}"))
    }
}

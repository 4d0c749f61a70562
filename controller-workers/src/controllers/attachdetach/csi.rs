//! The CSI attacher as KCM runs it (upstream `pkg/volume/csi/csi_attacher.go`): attaching
//! is creating the VolumeAttachment `csi-<sha256(handle+driver+node)>` that the driver's
//! external-attacher acts on, then waiting (on the informer's cache, backing off from
//! 500 ms to 7 s) up to 2 minutes for its `status.attached`; detaching is deleting it and
//! waiting for it to go. `status.attachError`/`detachError` end the wait with the driver's
//! message.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{
    VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};

use crate::api_errors;
use crate::store::Store;

use super::volumes::{attachment_name, split_unique_name, VolumeSpec};

/// The attacher's and detacher's wait (`csiTimeout`).
pub(super) const WATCH_TIMEOUT: Duration = Duration::from_secs(120);
const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(7);
const BACKOFF_FACTOR: f64 = 1.05;

/// The plugin's log prefix, which its errors carry too.
fn csi_error(message: impl std::fmt::Display) -> String {
    format!("kubernetes.io/csi: {message}")
}

/// What one look at the VolumeAttachment says about the wait.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum WaitStatus {
    Done,
    Waiting,
    Failed(String),
}

/// `verifyAttachmentStatus`.
pub(super) fn attachment_status(attachment: Option<&VolumeAttachment>) -> WaitStatus {
    let Some(attachment) = attachment else {
        // Not in the cache yet: the lister wait keeps waiting.
        return WaitStatus::Waiting;
    };
    if attachment.metadata.deletion_timestamp.is_some() {
        return WaitStatus::Failed("volume attachment is being deleted".into());
    }
    let status = attachment.status.as_ref();
    if status.is_some_and(|s| s.attached) {
        return WaitStatus::Done;
    }
    match status.and_then(|s| s.attach_error.as_ref()) {
        Some(error) => WaitStatus::Failed(error.message.clone().unwrap_or_default()),
        None => WaitStatus::Waiting,
    }
}

/// `verifyDetachmentStatus`: gone is done.
pub(super) fn detachment_status(attachment: Option<&VolumeAttachment>) -> WaitStatus {
    let Some(attachment) = attachment else {
        return WaitStatus::Done;
    };
    match attachment
        .status
        .as_ref()
        .and_then(|s| s.detach_error.as_ref())
    {
        Some(error) => WaitStatus::Failed(error.message.clone().unwrap_or_default()),
        None => WaitStatus::Waiting,
    }
}

/// `waitForVolumeAttachDetachStatusWithLister`: looks after each backoff step until the
/// status is final or `timeout` passed (upstream's message then).
pub(super) async fn wait_for_status<F, Fut>(
    timeout: Duration,
    driver: &str,
    operation: &str,
    handle: &str,
    mut check: F,
) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = WaitStatus>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut backoff = INITIAL_BACKOFF;
    loop {
        let wake = tokio::time::Instant::now() + backoff;
        if wake >= deadline {
            tokio::time::sleep_until(deadline).await;
            return Err(format!(
                "timed out waiting for external-attacher of {driver} CSI driver to {} volume {handle}",
                operation.to_lowercase()
            ));
        }
        tokio::time::sleep_until(wake).await;
        match check().await {
            WaitStatus::Done => return Ok(()),
            WaitStatus::Failed(message) => return Err(message),
            WaitStatus::Waiting => {}
        }
        backoff = backoff.mul_f64(BACKOFF_FACTOR).min(MAX_BACKOFF);
    }
}

/// The VolumeAttachment the attacher creates.
pub(super) fn attachment_object(spec: &VolumeSpec, node: &str) -> VolumeAttachment {
    VolumeAttachment {
        metadata: ObjectMeta {
            name: Some(attachment_name(&spec.handle, &spec.driver, node)),
            ..ObjectMeta::default()
        },
        spec: VolumeAttachmentSpec {
            attacher: spec.driver.clone(),
            node_name: node.to_string(),
            source: VolumeAttachmentSource {
                persistent_volume_name: Some(spec.name.clone()),
                ..VolumeAttachmentSource::default()
            },
        },
        status: None,
    }
}

/// The attacher: its client and the VolumeAttachment cache.
#[derive(Clone)]
pub(super) struct Attacher {
    pub(super) client: kube::Client,
    pub(super) attachments: Store<VolumeAttachment>,
    pub(super) timeout: Duration,
}

impl Attacher {
    /// `Attach`: creates the VolumeAttachment unless the cache has it, then waits for the
    /// driver to attach the volume.
    pub(super) async fn attach(&self, spec: &VolumeSpec, node: &str) -> Result<(), String> {
        let name = attachment_name(&spec.handle, &spec.driver, node);
        if self.attachments.get(&name).is_none() {
            let api: Api<VolumeAttachment> = Api::all(self.client.clone());
            match api
                .create(&PostParams::default(), &attachment_object(spec, node))
                .await
            {
                Ok(_) => {
                    tracing::debug!(attachment = %name, handle = %spec.handle, "VolumeAttachment created")
                }
                Err(error) if api_errors::is_already_exists(&error) => {}
                Err(error) => {
                    return Err(csi_error(format!(
                        "attacher.Attach failed: {}",
                        api_errors::message(&error)
                    )))
                }
            }
        }
        let attachments = self.attachments.clone();
        wait_for_status(self.timeout, &spec.driver, "Attach", &spec.handle, || {
            let status = attachment_status(attachments.get(&name).as_deref());
            async move { status }
        })
        .await
    }

    /// `Detach`: deletes the VolumeAttachment of the unique name at the node and waits
    /// for it to go.
    pub(super) async fn detach(&self, unique_name: &str, node: &str) -> Result<(), String> {
        let Some((driver, handle)) = split_unique_name(unique_name) else {
            return Err("volumeName missing expected data".into());
        };
        let name = attachment_name(handle, driver, node);
        let api: Api<VolumeAttachment> = Api::all(self.client.clone());
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(error) if api_errors::is_not_found(&error) => return Ok(()),
            Err(error) => {
                return Err(csi_error(format!(
                    "detacher.Detach failed to delete VolumeAttachment [{name}]: {}",
                    api_errors::message(&error)
                )))
            }
        }
        let attachments = self.attachments.clone();
        // Upstream's detacher has no spec, so its timeout names the driver "unknown".
        wait_for_status(self.timeout, "unknown", "Detach", handle, || {
            let status = detachment_status(attachments.get(&name).as_deref());
            async move { status }
        })
        .await
    }

    /// `VolumesAreAttached` for one volume on one node: the cache's `status.attached`,
    /// else the API server's; a driver that needs no attaching counts as attached.
    pub(super) async fn is_attached(
        &self,
        spec: &VolumeSpec,
        node: &str,
        skip_attach: bool,
    ) -> bool {
        if skip_attach {
            return true;
        }
        let name = attachment_name(&spec.handle, &spec.driver, node);
        if let Some(attachment) = self.attachments.get(&name) {
            return attachment.status.as_ref().is_some_and(|s| s.attached);
        }
        let api: Api<VolumeAttachment> = Api::all(self.client.clone());
        match api.get(&name).await {
            Ok(attachment) => attachment.status.is_some_and(|s| s.attached),
            Err(error) => {
                tracing::debug!(attachment = %name, error = %api_errors::message(&error), "attacher.VolumesAreAttached failed");
                false
            }
        }
    }

    /// `verifyVolumeIsSafeToDetach`: a live read of the node; refused while the node
    /// reports the volume in use (a node that is gone is safe).
    pub(super) async fn verify_safe_to_detach(
        &self,
        unique_name: &str,
        node: &str,
    ) -> Result<(), String> {
        let api: Api<Node> = Api::all(self.client.clone());
        let detail = |prefix: &str, error: &str| {
            format!("{prefix} for volume {unique_name:?} (UniqueName: {unique_name:?}) on node {node:?} : {error}")
        };
        let found = match api.get(node).await {
            Ok(found) => found,
            Err(error) if api_errors::is_not_found(&error) => return Ok(()),
            Err(error) => {
                return Err(detail(
                    "DetachVolume failed fetching node from API server",
                    &api_errors::message(&error),
                ))
            }
        };
        let in_use = found
            .status
            .and_then(|s| s.volumes_in_use)
            .unwrap_or_default();
        if in_use.iter().any(|v| v == unique_name) {
            return Err(detail(
                "DetachVolume failed",
                "volume is still in use by node, according to Node status",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attachment(status: serde_json::Value, deleting: bool) -> VolumeAttachment {
        let mut value = json!({"metadata": {"name": "csi-x"},
            "spec": {"attacher": "d", "nodeName": "n", "source": {"persistentVolumeName": "pv"}},
            "status": status});
        if deleting {
            value["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn attachment_statuses() {
        let cases = [
            (None, WaitStatus::Waiting),
            (
                Some(attachment(json!({"attached": false}), false)),
                WaitStatus::Waiting,
            ),
            (
                Some(attachment(json!({"attached": true}), false)),
                WaitStatus::Done,
            ),
            (
                Some(attachment(
                    json!({"attached": false, "attachError": {"message": "boom"}}),
                    false,
                )),
                WaitStatus::Failed("boom".into()),
            ),
            (
                Some(attachment(json!({"attached": true}), true)),
                WaitStatus::Failed("volume attachment is being deleted".into()),
            ),
        ];
        for (object, want) in cases {
            assert_eq!(attachment_status(object.as_ref()), want, "{object:?}");
        }
        assert_eq!(detachment_status(None), WaitStatus::Done);
        let failing = attachment(
            json!({"attached": true, "detachError": {"message": "stuck"}}),
            true,
        );
        assert_eq!(
            detachment_status(Some(&failing)),
            WaitStatus::Failed("stuck".into())
        );
        assert_eq!(
            detachment_status(Some(&attachment(json!({"attached": true}), true))),
            WaitStatus::Waiting
        );
    }

    #[test]
    fn the_attachment_names_the_volume_node_and_driver() {
        let spec = VolumeSpec {
            name: "pv".into(),
            driver: "csi.sim.rkcm.io".into(),
            handle: "handle-1".into(),
            multi_attach: false,
        };
        let object = attachment_object(&spec, "sim-node-0");
        assert_eq!(
            object.metadata.name.as_deref(),
            Some("csi-4305ec740a435b890502dfd778ce10fe9fde26cea484d8618af38214fd6d4fb7")
        );
        assert_eq!(object.spec.attacher, "csi.sim.rkcm.io");
        assert_eq!(object.spec.node_name, "sim-node-0");
        assert_eq!(
            object.spec.source.persistent_volume_name.as_deref(),
            Some("pv")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_times_out_with_upstreams_message() {
        let started = tokio::time::Instant::now();
        let mut looks = 0;
        let result = wait_for_status(WATCH_TIMEOUT, "csi.sim.rkcm.io", "Attach", "h-1", || {
            looks += 1;
            async { WaitStatus::Waiting }
        })
        .await;
        assert_eq!(
            result,
            Err("timed out waiting for external-attacher of csi.sim.rkcm.io CSI driver to attach volume h-1".into())
        );
        assert_eq!(started.elapsed(), WATCH_TIMEOUT);
        assert!(looks > 20, "{looks}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_on_the_first_final_status() {
        let mut looks = 0;
        let result = wait_for_status(WATCH_TIMEOUT, "d", "Detach", "h", || {
            looks += 1;
            let status = if looks < 3 {
                WaitStatus::Waiting
            } else {
                WaitStatus::Failed("stuck".into())
            };
            async move { status }
        })
        .await;
        assert_eq!(result, Err("stuck".into()));
        assert_eq!(looks, 3);
    }
}

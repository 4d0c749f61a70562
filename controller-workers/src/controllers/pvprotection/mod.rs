//! persistentvolume-protection-controller: a PersistentVolume keeps the
//! `kubernetes.io/pv-protection` finalizer while a claim is bound to it, so that deleting
//! a volume in use leaves it Terminating until it is released (upstream
//! `pkg/controller/volume/pvprotection/`).
//!
//! Keys are volume names (queue `pvprotection`, one worker). A volume is queued when it
//! lacks the finalizer and is not being deleted (the API server's
//! StorageObjectInUseProtection admission adds it at create; this covers older volumes),
//! or is being deleted with it. The sync puts a missing finalizer back, and takes it off a
//! deleted volume whose phase is not `Bound` (the binder's word on whether a claim holds
//! it). It emits no events.

use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::queue::WorkQueue;
use crate::store::Store;
use crate::volume_util::{is_deletion_candidate, need_to_add_finalizer, PV_PROTECTION_FINALIZER};

pub const NAME: &str = "persistentvolume-protection-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/persistentvolumes"];
const QUEUE: &str = "pvprotection";
/// Upstream runs one worker, not configurable.
const WORKERS: usize = 1;

/// Whether a volume's change puts it on the queue: it lacks the finalizer, or it is being
/// deleted and still holds it.
fn volume_needs_sync(volume: &PersistentVolume) -> bool {
    need_to_add_finalizer(&volume.metadata, PV_PROTECTION_FINALIZER)
        || is_deletion_candidate(&volume.metadata, PV_PROTECTION_FINALIZER)
}

/// A volume is in use while its phase is `Bound`.
fn is_being_used(volume: &PersistentVolume) -> bool {
    volume
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        == Some("Bound")
}

/// What a sync does to a volume.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    RemoveFinalizer,
    AddFinalizer,
    /// Being deleted, but still bound: wait for its claim to let go.
    Keep,
    Nothing,
}

fn action_for(volume: &PersistentVolume) -> Action {
    if is_deletion_candidate(&volume.metadata, PV_PROTECTION_FINALIZER) {
        if is_being_used(volume) {
            Action::Keep
        } else {
            Action::RemoveFinalizer
        }
    } else if need_to_add_finalizer(&volume.metadata, PV_PROTECTION_FINALIZER) {
        Action::AddFinalizer
    } else {
        Action::Nothing
    }
}

pub(crate) struct Controller {
    client: kube::Client,
    volumes: Store<PersistentVolume>,
    queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let queue = context.queue(QUEUE);
    let volumes = context.informers.get::<PersistentVolume>();
    let controller = Arc::new(Controller {
        client,
        volumes: volumes.store().clone(),
        queue: queue.clone(),
    });
    volumes.handle(&controller, Controller::on_volume);
    Ok(Runnable::new(
        NAME,
        queue,
        WORKERS,
        controller,
        |controller, name| async move { controller.sync(&name).await },
    ))
}

impl Controller {
    fn on_volume(&self, change: &Change<PersistentVolume>) {
        if let Some(volume) = change.live() {
            if volume_needs_sync(volume) {
                if let Some(name) = &volume.metadata.name {
                    self.queue.add(name.clone());
                }
            }
        }
    }

    async fn sync(&self, name: &str) -> anyhow::Result<()> {
        let Some(volume) = self.volumes.get(name) else {
            debug!(
                controller = NAME,
                volume = name,
                "volume not found, ignoring"
            );
            return Ok(());
        };
        let mut updated = (*volume).clone();
        let finalizers = updated.metadata.finalizers.get_or_insert_with(Vec::new);
        match action_for(&volume) {
            Action::RemoveFinalizer => finalizers.retain(|f| f != PV_PROTECTION_FINALIZER),
            Action::AddFinalizer => finalizers.push(PV_PROTECTION_FINALIZER.to_string()),
            Action::Keep => {
                debug!(
                    controller = NAME,
                    volume = name,
                    "keeping the volume: it is bound"
                );
                return Ok(());
            }
            Action::Nothing => return Ok(()),
        }
        // A PUT of the cached volume: a cache behind the server gets a conflict, and the
        // key is tried again.
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.replace(name, &PostParams::default(), &updated)
            .await
            .with_context(|| format!("updating the protection finalizer of volume {name}"))?;
        debug!(
            controller = NAME,
            volume = name,
            "updated the protection finalizer"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn volume(metadata: Value, phase: &str) -> PersistentVolume {
        let mut meta = json!({"name": "pv"});
        if let (Some(target), Some(extra)) = (meta.as_object_mut(), metadata.as_object()) {
            target.extend(extra.clone());
        }
        serde_json::from_value(json!({"metadata": meta, "status": {"phase": phase}})).unwrap()
    }

    const DELETING: &str = "2024-01-01T00:00:00Z";

    #[test]
    fn volumes_are_queued_when_the_finalizer_is_missing_or_due_to_go() {
        let cases = [
            (json!({}), true),
            (json!({"finalizers": [PV_PROTECTION_FINALIZER]}), false),
            (
                json!({"finalizers": [PV_PROTECTION_FINALIZER], "deletionTimestamp": DELETING}),
                true,
            ),
            (
                json!({"finalizers": ["other"], "deletionTimestamp": DELETING}),
                false,
            ),
        ];
        for (metadata, want) in cases {
            assert_eq!(
                volume_needs_sync(&volume(metadata.clone(), "Available")),
                want,
                "{metadata}"
            );
        }
    }

    #[test]
    fn a_deleted_volume_is_released_unless_bound() {
        let deleting =
            || json!({"finalizers": ["a", PV_PROTECTION_FINALIZER], "deletionTimestamp": DELETING});
        let cases = [
            (deleting(), "Bound", Action::Keep),
            (deleting(), "Released", Action::RemoveFinalizer),
            (deleting(), "Available", Action::RemoveFinalizer),
            (deleting(), "Pending", Action::RemoveFinalizer),
            (deleting(), "Failed", Action::RemoveFinalizer),
            (json!({}), "Bound", Action::AddFinalizer),
            (
                json!({"finalizers": [PV_PROTECTION_FINALIZER]}),
                "Bound",
                Action::Nothing,
            ),
            (
                json!({"deletionTimestamp": DELETING, "finalizers": ["a"]}),
                "Released",
                Action::Nothing,
            ),
        ];
        for (metadata, phase, want) in cases {
            assert_eq!(
                action_for(&volume(metadata.clone(), phase)),
                want,
                "{metadata} {phase}"
            );
        }
        let mut no_status = volume(deleting(), "");
        no_status.status = None;
        assert_eq!(action_for(&no_status), Action::RemoveFinalizer);
    }
}

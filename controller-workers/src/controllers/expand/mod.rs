//! persistentvolume-expander-controller: what KCM does when a bound claim asks for more
//! storage (upstream `pkg/controller/volume/expand/expand_controller.go` with
//! `pkg/volume/util/resize_util.go`'s `SetClaimResizer`).
//!
//! KCM 1.29 grows no CSI volume itself: the driver's external-resizer does. The controller
//! watches claims (added, deleted, and updated when the storage request or
//! `status.capacity` grew; only Bound ones are queued, queue `volume_expand`, 10 workers)
//! and for a claim asking for more than it has, reads its volume live and:
//!
//! - a volume of an in-tree plugin that CSI migration hands to a driver (gce-pd, aws-ebs,
//!   azure-disk, azure-file, cinder, vsphere-volume): Normal `ExternalExpanding` "CSI
//!   migration enabled for `<plugin>`; waiting for external resizer to expand the pvc", then
//!   the claim's `volume.kubernetes.io/storage-resizer` annotation set to the driver by a
//!   strategic-merge patch of `pvc/status` (its metadata goes through the status
//!   subresource), which is what that driver's external-resizer waits for;
//! - any other volume no in-tree expander handles (every CSI volume, nfs, local, ...):
//!   Warning `ExternalExpanding` "waiting for an external controller to expand this PVC".
//!
//! Left out, as the plugins they need are not ported: the in-tree expanders of rbd,
//! portworx and fc, and FlexVolume's node-only resize (logged, nothing written).
//! RecoverVolumeExpansionFailure is alpha in 1.29 and off.

use std::cmp::Ordering;
use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};
use tracing::{debug, info};

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::{Recorder, NORMAL, WARNING};
use crate::store::{key_of, Store};
use crate::volume_util;
use rkcm_gocompat::quantity::Quantity;

pub const NAME: &str = "persistentvolume-expander-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/persistentvolumeclaims"];
/// Its events' source, as upstream's recorder names it.
pub const EVENT_SOURCE: &str = "volume_expand";
const QUEUE: &str = "volume_expand";
/// Upstream's `defaultWorkerCount`, not configurable.
const WORKERS: usize = 10;

/// `volumetypes.VolumeResizerKey`: the resizer that is to grow the claim's volume.
pub const ANN_STORAGE_RESIZER: &str = "volume.kubernetes.io/storage-resizer";
/// `util.AnnPreResizeCapacity`: set on a volume whose file system still has to grow.
pub const ANN_PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";
/// `events.ExternalExpanding`.
pub const EXTERNAL_EXPANDING: &str = "ExternalExpanding";
pub const WAITING_FOR_EXTERNAL: &str = "waiting for an external controller to expand this PVC";

/// The storage quantity of a resource list (absent or unreadable: zero, as Go's map
/// lookup gives the zero Quantity).
fn storage_of(
    list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) -> Quantity {
    list.and_then(|l| l.get("storage"))
        .and_then(|q| Quantity::from_api(&q.0).ok())
        .unwrap_or_else(|| Quantity::zero(rkcm_gocompat::quantity::Format::BinarySI))
}

fn requested(claim: &PersistentVolumeClaim) -> Quantity {
    storage_of(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
    )
}

fn capacity(claim: &PersistentVolumeClaim) -> Quantity {
    storage_of(claim.status.as_ref().and_then(|s| s.capacity.as_ref()))
}

fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// Does an update queue the claim: its request or its `status.capacity` grew?
pub fn grew(old: &PersistentVolumeClaim, new: &PersistentVolumeClaim) -> bool {
    requested(new).cmp_value(&requested(old)) == Ordering::Greater
        || capacity(new).cmp_value(&capacity(old)) == Ordering::Greater
}

/// What the controller does for a claim and its volume.
#[derive(Clone, Debug, PartialEq)]
pub enum Expansion {
    /// The claim has what it asked for.
    Nothing,
    /// The volume is not bound to this claim (an error: the claim is retried).
    NotBound,
    /// A migrated in-tree volume: hand it to this CSI driver's resizer.
    Migrated { plugin: String, driver: String },
    /// No in-tree expander: an external controller's job.
    External,
    /// An in-tree expander rkcm does not port (rbd, portworx, fc, flexVolume).
    Unported(&'static str),
}

/// The in-tree plugins whose expanders KCM 1.29 would run, which rkcm does not port.
fn unported_expander(volume: &PersistentVolume) -> Option<&'static str> {
    let spec = volume.spec.as_ref()?;
    if spec.rbd.is_some() {
        Some("kubernetes.io/rbd")
    } else if spec.portworx_volume.is_some() {
        Some("kubernetes.io/portworx-volume")
    } else if spec.fc.is_some() {
        Some("kubernetes.io/fc")
    } else if spec.flex_volume.is_some() {
        Some("kubernetes.io/flexvolume")
    } else {
        None
    }
}

/// `syncHandler`'s decision once the volume is read.
pub fn decide(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> Expansion {
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let bound_here = claim_ref.is_some_and(|r| {
        r.namespace.as_deref().unwrap_or_default() == claim.namespace_str()
            && r.uid.as_deref().unwrap_or_default()
                == claim.metadata.uid.as_deref().unwrap_or_default()
    });
    if !bound_here {
        return Expansion::NotBound;
    }
    let pre_resize = volume
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANN_PRE_RESIZE_CAPACITY));
    if requested(claim).cmp_value(&capacity(claim)) != Ordering::Greater && !pre_resize {
        return Expansion::Nothing;
    }
    if let Some(plugin) = volume_util::in_tree_plugin(volume) {
        if let Some(driver) = volume_util::migrated_driver(plugin) {
            return Expansion::Migrated {
                plugin: plugin.to_string(),
                driver: driver.to_string(),
            };
        }
    }
    match unported_expander(volume) {
        Some(plugin) => Expansion::Unported(plugin),
        None => Expansion::External,
    }
}

/// `SetClaimResizer`'s strategic-merge patch: the annotation (left out when it already
/// names the driver) and the resourceVersion read, so a stale claim is refused.
pub fn resizer_patch(claim: &PersistentVolumeClaim, driver: &str) -> Value {
    let current = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_STORAGE_RESIZER));
    let mut metadata = json!({"resourceVersion": claim.metadata.resource_version});
    if current.map(String::as_str) != Some(driver) {
        metadata["annotations"] = json!({ANN_STORAGE_RESIZER: driver});
    }
    json!({ "metadata": metadata })
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    claims: Store<PersistentVolumeClaim>,
    queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let queue = context.queue(QUEUE);
    let claims = context.informers.get::<PersistentVolumeClaim>();
    let controller = Arc::new(Controller {
        client,
        recorder,
        claims: claims.store().clone(),
        queue: queue.clone(),
    });
    claims.handle(&controller, Controller::on_claim);
    Ok(Runnable::new(
        NAME,
        queue,
        WORKERS,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

impl Controller {
    fn on_claim(&self, change: &Change<PersistentVolumeClaim>) {
        let queue_it = match change {
            Change::Added(_) | Change::Deleted(_) => true,
            Change::Updated { old, new } => grew(old, new),
        };
        let claim = change.latest();
        if queue_it && is_bound(claim) {
            self.queue.add(key_of(&claim.metadata));
        }
    }

    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(());
        };
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let volume = volumes
            .get(&volume_name)
            .await
            .with_context(|| format!("failed to get PV {volume_name:?}"))?;
        match decide(&claim, &volume) {
            Expansion::Nothing => Ok(()),
            Expansion::NotBound => Err(anyhow!(
                "persistent Volume is not bound to PVC being updated : {key}"
            )),
            Expansion::Migrated { plugin, driver } => {
                self.recorder.event(
                    claim.as_ref(),
                    NORMAL,
                    EXTERNAL_EXPANDING,
                    format!("CSI migration enabled for {plugin}; waiting for external resizer to expand the pvc"),
                );
                self.set_resizer(key, &claim, &driver).await
            }
            Expansion::External => {
                self.recorder.event(
                    claim.as_ref(),
                    WARNING,
                    EXTERNAL_EXPANDING,
                    WAITING_FOR_EXTERNAL,
                );
                info!(
                    controller = NAME,
                    key, "waiting for an external controller to expand the PVC"
                );
                // An external controller grows it: nothing to retry here.
                Ok(())
            }
            Expansion::Unported(plugin) => {
                debug!(controller = NAME, key, plugin, "this version of rkcm has no in-tree expander for the volume's plugin; the claim is left as it is");
                Ok(())
            }
        }
    }

    async fn set_resizer(
        &self,
        key: &str,
        claim: &PersistentVolumeClaim,
        driver: &str,
    ) -> anyhow::Result<()> {
        let namespace = claim.namespace_str();
        let name = claim.name_str();
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let patch = resizer_patch(claim, driver);
        if let Err(error) = claims
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            let message = format!(
                "error setting resizer annotation to pvc {key}, with error patchPVCStatus failed to patch PVC \"{name}\": {}",
                crate::api_errors::message(&error)
            );
            self.recorder
                .event(claim, WARNING, EXTERNAL_EXPANDING, message.clone());
            return Err(anyhow!(message));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7386 merge of `patch` into `target` (null removes).
    fn merge(target: &mut Value, patch: &Value) {
        match (target.as_object_mut(), patch.as_object()) {
            (Some(t), Some(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            _ => *target = patch.clone(),
        }
    }

    fn claim(extra: Value) -> PersistentVolumeClaim {
        let mut c = json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u1", "resourceVersion": "9"},
            "spec": {"volumeName": "pv", "resources": {"requests": {"storage": "2Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}});
        merge(&mut c, &extra);
        serde_json::from_value(c).unwrap()
    }

    fn volume(extra: Value) -> PersistentVolume {
        let mut v = json!({"metadata": {"name": "pv"},
            "spec": {"capacity": {"storage": "1Gi"}, "claimRef": {"namespace": "ns", "name": "c", "uid": "u1"},
                "csi": {"driver": "csi.sim.rkcm.io", "volumeHandle": "h"}}});
        merge(&mut v, &extra);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn decisions() {
        let gce = json!({"spec": {"csi": null, "gcePersistentDisk": {"pdName": "d"}}});
        let cases: Vec<(&str, Value, Value, Expansion)> = vec![
            ("csi", json!({}), json!({}), Expansion::External),
            (
                "grown already",
                json!({"status": {"capacity": {"storage": "2Gi"}}}),
                json!({}),
                Expansion::Nothing,
            ),
            (
                "more than asked",
                json!({"status": {"capacity": {"storage": "3Gi"}}}),
                json!({}),
                Expansion::Nothing,
            ),
            (
                "a file system still to grow",
                json!({"status": {"capacity": {"storage": "2Gi"}}}),
                json!({"metadata": {"annotations": {ANN_PRE_RESIZE_CAPACITY: "1Gi"}}}),
                Expansion::External,
            ),
            (
                "another claim's",
                json!({}),
                json!({"spec": {"claimRef": {"uid": "u2"}}}),
                Expansion::NotBound,
            ),
            (
                "another namespace's",
                json!({}),
                json!({"spec": {"claimRef": {"namespace": "other"}}}),
                Expansion::NotBound,
            ),
            (
                "gce-pd",
                json!({}),
                gce,
                Expansion::Migrated {
                    plugin: "kubernetes.io/gce-pd".into(),
                    driver: "pd.csi.storage.gke.io".into(),
                },
            ),
            (
                "nfs",
                json!({}),
                json!({"spec": {"csi": null, "nfs": {"server": "s", "path": "/"}}}),
                Expansion::External,
            ),
            (
                "rbd: migration off, in-tree expander not ported",
                json!({}),
                json!({"spec": {"csi": null, "rbd": {"monitors": ["m"], "image": "i"}}}),
                Expansion::Unported("kubernetes.io/rbd"),
            ),
            (
                "no request",
                json!({"spec": {"resources": {"requests": null}}}),
                json!({}),
                Expansion::Nothing,
            ),
            (
                "unreadable request",
                json!({"spec": {"resources": {"requests": {"storage": "lots"}}}}),
                json!({}),
                Expansion::Nothing,
            ),
        ];
        for (what, c, v, want) in cases {
            assert_eq!(decide(&claim(c), &volume(v)), want, "{what}");
        }
        let mut unbound = volume(json!({}));
        unbound.spec.as_mut().unwrap().claim_ref = None;
        assert_eq!(decide(&claim(json!({})), &unbound), Expansion::NotBound);
    }

    #[test]
    fn only_growth_of_request_or_capacity_queues_an_update() {
        let before = claim(json!({}));
        assert!(grew(
            &before,
            &claim(json!({"spec": {"resources": {"requests": {"storage": "3Gi"}}}}))
        ));
        assert!(grew(
            &before,
            &claim(json!({"status": {"capacity": {"storage": "2Gi"}}}))
        ));
        assert!(!grew(
            &before,
            &claim(json!({"metadata": {"labels": {"a": "b"}}}))
        ));
        assert!(!grew(
            &before,
            &claim(json!({"spec": {"resources": {"requests": {"storage": "2048Mi"}}}}))
        ));
    }

    #[test]
    fn the_resizer_patch_carries_the_resource_version() {
        assert_eq!(
            resizer_patch(&claim(json!({})), "pd.csi.storage.gke.io"),
            json!({"metadata": {"resourceVersion": "9", "annotations": {ANN_STORAGE_RESIZER: "pd.csi.storage.gke.io"}}})
        );
        let set = claim(
            json!({"metadata": {"annotations": {ANN_STORAGE_RESIZER: "pd.csi.storage.gke.io"}}}),
        );
        assert_eq!(
            resizer_patch(&set, "pd.csi.storage.gke.io"),
            json!({"metadata": {"resourceVersion": "9"}})
        );
    }
}

//! Reclaiming a released volume by its `persistentVolumeReclaimPolicy` (upstream
//! `reclaimVolume`, `deleteVolumeOperation`, `recycleVolumeOperation`): Retain keeps it
//! `Released`; Delete leaves volumes of external provisioners and CSI drivers to them,
//! deletes a host-path volume under `/tmp` on this host and then its PersistentVolume, and
//! marks any other `Failed` with `VolumeFailedDelete`; Recycle scrubs a host-path or NFS
//! volume with a recycler pod and makes it `Available` again. Deleting and recycling run as
//! operations apart from the sync loop, each checking first, on the volume read afresh,
//! that it still needs reclaiming.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DeleteParams};
use tracing::{debug, info, warn};

use crate::api_errors::message;
use crate::meta::ResourceNames;
use crate::recorder::{NORMAL, WARNING};
use crate::volume_util::{is_pod_terminated, volume_class, PVC_INDEX};

use super::helpers::{
    annotation, claim_ref_key, claim_ref_uid, claim_volume_name, has_annotation, reclaim_policy,
    uid, ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO, RECLAIM_DELETE, RECLAIM_RECYCLE,
    RECLAIM_RETAIN, VOLUME_FAILED,
};
use super::plugins::{self, Plugin, IN_TREE_PREFIX};
use super::recycler::{recycle_with_pod, recycler_pod};
use super::Controller;

/// `findDeletablePlugin`: the in-tree plugin that deletes the volume, `None` when an
/// external provisioner or CSI driver does, or why none can.
pub(super) fn find_deletable_plugin(volume: &PersistentVolume) -> Result<Option<Plugin>, String> {
    if let Some(provisioner) =
        annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED).filter(|p| !p.is_empty())
    {
        return match plugins::find_deletable_by_name(provisioner) {
            Ok(plugin) => Ok(Some(plugin)),
            Err(_) if !provisioner.starts_with(IN_TREE_PREFIX) => Ok(None),
            Err(error) => Err(error),
        };
    }
    if has_annotation(&volume.metadata, ANN_MIGRATED_TO) {
        return Ok(None);
    }
    if volume.spec.as_ref().is_some_and(|s| s.csi.is_some()) {
        return Ok(None);
    }
    plugins::find_deletable_by_volume(volume)
        .map(Some)
        .map_err(|error| {
            format!(
                "error getting deleter volume plugin for volume {:?}: {error}",
                volume.name_str()
            )
        })
}

/// The host-path deleter's check: only paths matching `/tmp/.+` (anywhere in the path, as
/// Go's unanchored match).
pub(super) fn host_path_deletable(path: &str) -> Result<(), String> {
    let ok = path
        .match_indices("/tmp/")
        .any(|(at, m)| path.len() > at + m.len());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "host_path deleter only supports /tmp/.+ but received provided {path}"
        ))
    }
}

/// Removes a path and everything under it; a missing path is fine (Go's `RemoveAll`).
pub(super) async fn remove_all(path: &str) -> std::io::Result<()> {
    match tokio::fs::symlink_metadata(path).await {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
        Ok(meta) if meta.is_dir() => tokio::fs::remove_dir_all(path).await,
        Ok(_) => tokio::fs::remove_file(path).await,
    }
}

/// What deleting a volume's storage came to.
enum Deleted {
    /// An external provisioner or CSI driver deletes it.
    External,
    /// The plugin deleted it.
    Done,
}

impl Controller {
    /// `reclaimVolume`.
    pub(super) async fn reclaim_volume(
        self: &Arc<Self>,
        volume: &Arc<PersistentVolume>,
    ) -> anyhow::Result<()> {
        if annotation(&volume.metadata, ANN_MIGRATED_TO).is_some_and(|m| !m.is_empty()) {
            // The CSI driver's external provisioner handles it.
            return Ok(());
        }
        let volume_name = volume.name_str().to_string();
        let volume_uid = uid(&volume.metadata).to_string();
        match reclaim_policy(volume) {
            RECLAIM_RETAIN => {
                debug!(controller = super::NAME, volume = %volume_name, "reclaim policy is Retain, nothing to do");
            }
            RECLAIM_RECYCLE => {
                let this = self.clone();
                let volume = volume.clone();
                self.schedule_operation(
                    format!("recycle-{volume_name}[{volume_uid}]"),
                    async move {
                        this.recycle_volume_operation(&volume).await;
                        Ok(())
                    },
                );
            }
            RECLAIM_DELETE => {
                let provisioner = self.provisioner_name_from_volume(volume);
                self.timestamps
                    .add_if_not_exist(&volume_name, &provisioner, "delete");
                let this = self.clone();
                let volume = volume.clone();
                self.schedule_operation(
                    format!("delete-{volume_name}[{volume_uid}]"),
                    async move {
                        let result = this.delete_volume_operation(&volume).await;
                        if result.is_err() {
                            // The latency is recorded when the volume's deletion is seen.
                            this.timestamps.record(&volume_name, true, &this.metrics);
                        }
                        result
                    },
                );
            }
            _ => {
                self.update_volume_phase_with_event(
                    volume,
                    VOLUME_FAILED,
                    (
                        WARNING,
                        "VolumeUnknownReclaimPolicy",
                        "Volume has unrecognized PersistentVolumeReclaimPolicy",
                    ),
                )
                .await?;
            }
        }
        Ok(())
    }

    /// `isVolumeReleased`: bound to a claim (by uid) that is gone, or that is bound to
    /// another volume.
    fn is_volume_released(&self, volume: &PersistentVolume) -> bool {
        match claim_ref_uid(volume) {
            None | Some("") => return false,
            Some(_) => {}
        }
        let Some(key) = claim_ref_key(volume) else {
            return false;
        };
        match self.claims.get(&key) {
            Some(claim) if Some(uid(&claim.metadata)) == claim_ref_uid(volume) => {
                let bound_to = claim_volume_name(&claim);
                !bound_to.is_empty() && bound_to != volume.name_str()
            }
            _ => true,
        }
    }

    /// `isVolumeUsed`: the non-terminated pods using the volume's claim, `ns/name`, sorted.
    fn pods_using(&self, volume: &PersistentVolume) -> Vec<String> {
        let Some(key) = claim_ref_key(volume) else {
            return Vec::new();
        };
        let mut pods: Vec<String> = self
            .pods
            .by_index(PVC_INDEX, &key)
            .iter()
            .filter(|pod| !is_pod_terminated(pod))
            .map(|pod| format!("{}/{}", pod.namespace_str(), pod.name_str()))
            .collect();
        pods.sort();
        pods.dedup();
        pods
    }

    /// The volume read afresh, or `None` (logged) when it cannot be.
    async fn live_volume(&self, volume_name: &str) -> Option<Arc<PersistentVolume>> {
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        match volumes.get(volume_name).await {
            Ok(volume) => Some(Arc::new(volume)),
            Err(error) => {
                debug!(controller = super::NAME, volume = volume_name, error = %message(&error), "error reading persistent volume");
                None
            }
        }
    }

    /// `deleteVolumeOperation`: an error backs the operation off and is retried at the
    /// next sync.
    async fn delete_volume_operation(&self, volume: &Arc<PersistentVolume>) -> anyhow::Result<()> {
        let volume_name = volume.name_str();
        let Some(current) = self.live_volume(volume_name).await else {
            return Ok(());
        };
        if current.metadata.deletion_timestamp.is_some() {
            debug!(
                controller = super::NAME,
                volume = volume_name,
                "volume is already being deleted"
            );
            return Ok(());
        }
        if !self.is_volume_released(&current) {
            debug!(
                controller = super::NAME,
                volume = volume_name,
                "volume no longer needs deletion, skipping"
            );
            return Ok(());
        }
        match self.delete_storage(volume).await {
            Err(error) => {
                info!(controller = super::NAME, volume = volume_name, %error, "deletion of volume failed");
                self.update_volume_phase_with_event(
                    volume,
                    VOLUME_FAILED,
                    (WARNING, "VolumeFailedDelete", &error),
                )
                .await?;
                Err(anyhow::Error::msg(error))
            }
            Ok(Deleted::External) => Ok(()),
            Ok(Deleted::Done) => {
                info!(
                    controller = super::NAME,
                    volume = volume_name,
                    "deleting PersistentVolume of deleted storage"
                );
                let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
                if let Err(error) = volumes.delete(volume_name, &DeleteParams::default()).await {
                    // Tried again at the next sync.
                    info!(controller = super::NAME, volume = volume_name, error = %message(&error), "failed to delete volume from database");
                }
                Ok(())
            }
        }
    }

    /// `doDeleteVolume`: the storage deleted by its in-tree plugin (only host-path does
    /// anything), or left to an external deleter.
    async fn delete_storage(&self, volume: &PersistentVolume) -> Result<Deleted, String> {
        let Some(plugin) = find_deletable_plugin(volume)? else {
            debug!(
                controller = super::NAME,
                volume = volume.name_str(),
                "external deleter for volume requested, ignoring"
            );
            return Ok(Deleted::External);
        };
        let volume_name = volume.name_str();
        let cannot_create =
            |why: String| format!("failed to create deleter for volume {volume_name:?}: {why}");
        match plugin {
            Plugin::HostPath => {
                let path = volume
                    .spec
                    .as_ref()
                    .and_then(|s| s.host_path.as_ref())
                    .map(|h| h.path.clone())
                    .ok_or_else(|| {
                        cannot_create("spec.PersistentVolumeSource.HostPath is nil".into())
                    })?;
                host_path_deletable(&path)?;
                remove_all(&path).await.map_err(|e| e.to_string())?;
                info!(controller = super::NAME, volume = volume_name, path = %path, "Volume deleted");
                Ok(Deleted::Done)
            }
            other => Err(cannot_create(plugins::backend_unavailable(other))),
        }
    }

    /// `getProvisionerNameFromVolume`, for the operation metrics.
    pub(super) fn provisioner_name_from_volume(&self, volume: &PersistentVolume) -> String {
        match find_deletable_plugin(volume) {
            Err(_) => "N/A".into(),
            Ok(Some(plugin)) => plugin.name().into(),
            Ok(None) => {
                let class_name = volume_class(volume);
                let Some(class) = self.classes.get(&class_name) else {
                    return "N/A".into();
                };
                let provisioner = class.provisioner.as_str();
                crate::volume_util::migrated_driver(provisioner)
                    .unwrap_or(provisioner)
                    .to_string()
            }
        }
    }

    /// `recycleVolumeOperation`: it handles its own failures (the volume becomes `Failed`,
    /// and is tried again at the next sync).
    async fn recycle_volume_operation(&self, volume: &Arc<PersistentVolume>) {
        let volume_name = volume.name_str().to_string();
        let Some(current) = self.live_volume(&volume_name).await else {
            return;
        };
        if !self.is_volume_released(&current) {
            debug!(controller = super::NAME, volume = %volume_name, "volume no longer needs recycling, skipping");
            return;
        }
        let pods = self.pods_using(&current);
        // A cached claim of that name is another claim, using another volume: this one
        // may be recycled whatever pods that claim has.
        let claim_cached = claim_ref_key(volume).is_some_and(|key| self.claims.get(&key).is_some());
        if !pods.is_empty() && !claim_cached {
            let message = format!("Volume is used by pods: {}", pods.join(","));
            debug!(controller = super::NAME, volume = %volume_name, %message, "can't recycle volume");
            self.recorder
                .event(current.as_ref(), NORMAL, "VolumeFailedRecycle", message);
            return;
        }
        let volume = current;
        let plugin = match plugins::find_recyclable_by_volume(&volume) {
            Ok(plugin) => plugin,
            Err(_) => {
                if let Err(error) = self
                    .update_volume_phase_with_event(
                        &volume,
                        VOLUME_FAILED,
                        (
                            WARNING,
                            "VolumeFailedRecycle",
                            "No recycler plugin found for the volume!",
                        ),
                    )
                    .await
                {
                    debug!(controller = super::NAME, volume = %volume_name, error = %error, "failed to mark volume as failed");
                }
                return;
            }
        };
        let config = match plugin {
            Plugin::Nfs => &self.config.recyclers.nfs,
            _ => &self.config.recyclers.host_path,
        };
        let result = match recycler_pod(plugin, config, &volume) {
            Ok(pod) => {
                let recorder = self.recorder.clone();
                let target = volume.clone();
                recycle_with_pod(&self.client, pod, move |event_type, message| {
                    recorder.event(
                        target.as_ref(),
                        event_type,
                        "RecyclerPod",
                        format!("Recycler pod: {message}"),
                    )
                })
                .await
            }
            Err(error) => Err(error),
        };
        if let Err(error) = result {
            let message = format!("Recycle failed: {error}");
            if let Err(error) = self
                .update_volume_phase_with_event(
                    &volume,
                    VOLUME_FAILED,
                    (WARNING, "VolumeFailedRecycle", &message),
                )
                .await
            {
                debug!(controller = super::NAME, volume = %volume_name, error = %error, "failed to mark volume as failed");
            }
            return;
        }
        info!(controller = super::NAME, volume = %volume_name, "Volume recycled");
        self.recorder
            .event(volume.as_ref(), NORMAL, "VolumeRecycled", "Volume recycled");
        if let Err(error) = self.unbind_volume(&volume).await {
            // It is recycled again at the next sync.
            warn!(controller = super::NAME, volume = %volume_name, error = %error, "failed to make recycled volume 'Available', we will recycle the volume again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::helpers::fixtures::pv;
    use super::*;
    use serde_json::json;

    #[test]
    fn who_deletes_a_volume() {
        let cases = [
            ("host path", pv("v", "1Gi", json!({})), Ok(Some(Plugin::HostPath))),
            (
                "external provisioner",
                pv("v", "1Gi", json!({"metadata": {"annotations": {ANN_DYNAMICALLY_PROVISIONED: "csi.sim.rkcm.io"}}})),
                Ok(None),
            ),
            (
                "in-tree provisioner that does not delete",
                pv("v", "1Gi", json!({"metadata": {"annotations": {ANN_DYNAMICALLY_PROVISIONED: "kubernetes.io/nfs"}}})),
                Err("no deletable volume plugin matched".to_string()),
            ),
            (
                "migrated",
                pv("v", "1Gi", json!({"metadata": {"annotations": {ANN_MIGRATED_TO: "pd.csi.storage.gke.io"}}, "spec": {"hostPath": null, "gcePersistentDisk": {"pdName": "d"}}})),
                Ok(None),
            ),
            (
                "csi",
                pv("v", "1Gi", json!({"spec": {"hostPath": null, "csi": {"driver": "d", "volumeHandle": "h"}}})),
                Ok(None),
            ),
            (
                "local",
                pv("pv-l", "1Gi", json!({"spec": {"hostPath": null, "local": {"path": "/mnt/disk"}}})),
                Err("error getting deleter volume plugin for volume \"pv-l\": no deletable volume plugin matched".to_string()),
            ),
            (
                "no plugin at all",
                pv("pv-g", "1Gi", json!({"spec": {"hostPath": null, "gcePersistentDisk": {"pdName": "d"}}})),
                Err("error getting deleter volume plugin for volume \"pv-g\": no volume plugin matched".to_string()),
            ),
        ];
        for (what, volume, want) in cases {
            assert_eq!(find_deletable_plugin(&volume), want, "{what}");
        }
    }

    #[test]
    fn host_path_deletes_only_under_tmp() {
        assert!(host_path_deletable("/tmp/x").is_ok());
        assert!(
            host_path_deletable("/var/tmp/x").is_ok(),
            "unanchored, as Go"
        );
        assert_eq!(
            host_path_deletable("/tmp/"),
            Err("host_path deleter only supports /tmp/.+ but received provided /tmp/".into())
        );
        assert!(host_path_deletable("/data").is_err());
    }

    #[tokio::test]
    async fn remove_all_is_rm_rf() {
        let dir = std::env::temp_dir().join(format!("rkcm-pvbinder-rm-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("a/b/f"), "x").unwrap();
        remove_all(dir.to_str().unwrap()).await.unwrap();
        assert!(!dir.exists());
        remove_all(dir.to_str().unwrap()).await.unwrap();
    }
}

//! Dynamic provisioning (upstream `provisionClaim` and its operations) and the CSI
//! migration annotations.
//!
//! A claim with a class is handed to its class's provisioner: an external one (any name
//! outside `kubernetes.io/`, or an in-tree plugin migrated to CSI, under its driver's name)
//! is named in the claim's `volume.kubernetes.io/storage-provisioner` annotation and its
//! beta twin, and an `ExternalProvisioning` event says the claim waits for it (again at
//! every sync). Of the in-tree provisioners only host-path works, behind
//! `--enable-hostpath-provisioner`, making `/tmp/hostpath_pv/<uuid>` on this host and a
//! PersistentVolume `pvc-<claim uid>` bound to the claim; other `kubernetes.io/` names get
//! upstream's `ProvisioningFailed`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use tracing::{debug, info, warn};

use crate::api_errors::{is_already_exists, is_not_found, message};
use crate::meta::ResourceNames;
use crate::recorder::{reference_to, NORMAL, WARNING};
use crate::volume_util::{claim_class, migrated_driver};

use super::helpers::{
    annotation, claim_key, has_annotation, set_annotation, uid, ANN_BETA_STORAGE_PROVISIONER,
    ANN_BOUND_BY_CONTROLLER, ANN_CREATED_BY, ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO,
    ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER, RECLAIM_DELETE, STORAGE,
};
use super::plugins::{self, Plugin, CSI, IN_TREE_PREFIX};
use super::reclaim::{host_path_deletable, remove_all};
use super::Controller;

/// How many times, and how far apart, a provisioned volume's PersistentVolume is saved.
const CREATE_PROVISIONED_PV_RETRIES: usize = 5;
const CREATE_PROVISIONED_PV_INTERVAL: Duration = Duration::from_secs(10);

/// `updateMigrationAnnotations`: sets `pv.kubernetes.io/migrated-to` when the claim's
/// (or volume's) provisioner is an in-tree plugin migrated to CSI, removes it when not.
/// Whether it changed anything.
pub(super) fn update_migration_annotations(
    annotations: &mut Option<BTreeMap<String, String>>,
    claim: bool,
) -> bool {
    let Some(annotations) = annotations.as_mut() else {
        return false;
    };
    let provisioner = if claim {
        annotations
            .get(ANN_STORAGE_PROVISIONER)
            .or_else(|| annotations.get(ANN_BETA_STORAGE_PROVISIONER))
    } else {
        annotations.get(ANN_DYNAMICALLY_PROVISIONED)
    };
    let Some(provisioner) = provisioner.cloned() else {
        return false;
    };
    let migrated_to = annotations
        .get(ANN_MIGRATED_TO)
        .cloned()
        .unwrap_or_default();
    match migrated_driver(&provisioner) {
        Some(driver) if migrated_to != driver => {
            annotations.insert(ANN_MIGRATED_TO.to_string(), driver.to_string());
            true
        }
        Some(_) => false,
        None if !migrated_to.is_empty() => {
            annotations.remove(ANN_MIGRATED_TO);
            true
        }
        None => false,
    }
}

/// Who provisions a claim's volume.
#[derive(Debug, PartialEq)]
pub(super) enum Provisioner {
    /// An external provisioner (or CSI driver), by the name the claim will carry.
    External(String),
    /// An in-tree plugin.
    InTree(Plugin),
}

/// `findProvisionablePlugin` (with the name translation of
/// `provisionClaimOperationExternal`): the class's provisioner, or the event message of
/// why there is none.
pub(super) fn find_provisioner(class: &StorageClass) -> Result<Provisioner, String> {
    let provisioner = class.provisioner.as_str();
    if let Some(driver) = migrated_driver(provisioner) {
        return Ok(Provisioner::External(driver.to_string()));
    }
    match plugins::find_provisionable_by_name(provisioner) {
        Ok(plugin) => Ok(Provisioner::InTree(plugin)),
        Err(_) if !provisioner.starts_with(IN_TREE_PREFIX) => {
            Ok(Provisioner::External(provisioner.to_string()))
        }
        Err(error) => Err(error),
    }
}

/// `setClaimProvisioner`'s change: both provisioner annotations (and the migration
/// annotation brought up to date), or `None` when the claim names `provisioner` already.
pub(super) fn claim_with_provisioner(
    claim: &PersistentVolumeClaim,
    provisioner: &str,
) -> Option<PersistentVolumeClaim> {
    if annotation(&claim.metadata, ANN_STORAGE_PROVISIONER) == Some(provisioner) {
        return None;
    }
    let mut updated = claim.clone();
    set_annotation(
        &mut updated.metadata,
        ANN_BETA_STORAGE_PROVISIONER,
        provisioner,
    );
    set_annotation(&mut updated.metadata, ANN_STORAGE_PROVISIONER, provisioner);
    update_migration_annotations(&mut updated.metadata.annotations, true);
    Some(updated)
}

/// The message of the event that says a claim waits for an external provisioner.
pub(super) fn external_provisioning_message(provisioner: &str) -> String {
    format!(
        "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
    )
}

/// The PersistentVolume the host-path provisioner makes for `claim` at `path`, bound to
/// it.
pub(super) fn host_path_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    volume_name: &str,
    path: &str,
) -> PersistentVolume {
    let spec = claim.spec.clone().unwrap_or_default();
    let capacity = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|requests| requests.get(STORAGE))
        .cloned()
        .map(|quantity| BTreeMap::from([(STORAGE.to_string(), quantity)]));
    let access_modes = spec
        .access_modes
        .clone()
        .filter(|modes| !modes.is_empty())
        .unwrap_or_else(|| vec!["ReadWriteOnce".into()]);
    let mut volume = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(volume_name.to_string()),
            annotations: Some(BTreeMap::from([(
                ANN_CREATED_BY.to_string(),
                "hostpath-dynamic-provisioner".to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| RECLAIM_DELETE.to_string()),
            ),
            access_modes: Some(access_modes),
            capacity,
            host_path: Some(HostPathVolumeSource {
                path: path.to_string(),
                type_: None,
            }),
            claim_ref: Some(reference_to(claim)),
            storage_class_name: Some(claim_class(claim)),
            ..Default::default()
        }),
        status: None,
    };
    set_annotation(&mut volume.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
    set_annotation(
        &mut volume.metadata,
        ANN_DYNAMICALLY_PROVISIONED,
        plugins::HOST_PATH,
    );
    volume
}

/// A random (version 4) UUID, for the host-path provisioner's directories.
fn new_uuid() -> String {
    let bytes: [u8; 16] = rand::random();
    let hex: String = bytes
        .iter()
        .enumerate()
        .map(|(i, b)| match i {
            6 => format!("{:02x}", (b & 0x0f) | 0x40),
            8 => format!("{:02x}", (b & 0x3f) | 0x80),
            _ => format!("{b:02x}"),
        })
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

impl Controller {
    /// `updateClaimMigrationAnnotations`.
    pub(super) async fn update_claim_migration_annotations(
        &self,
        claim: Arc<PersistentVolumeClaim>,
    ) -> anyhow::Result<Arc<PersistentVolumeClaim>> {
        let mut updated = claim.as_ref().clone();
        if !update_migration_annotations(&mut updated.metadata.annotations, true) {
            return Ok(claim);
        }
        self.save_claim(&updated).await.map_err(|e| {
            e.context("persistent Volume Controller can't anneal migration annotations")
        })
    }

    /// `updateVolumeMigrationAnnotationsAndFinalizers` (the finalizers are those of
    /// HonorPVReclaimPolicy, off in 1.29).
    pub(super) async fn update_volume_migration_annotations(
        &self,
        volume: Arc<PersistentVolume>,
    ) -> anyhow::Result<Arc<PersistentVolume>> {
        let mut updated = volume.as_ref().clone();
        if !update_migration_annotations(&mut updated.metadata.annotations, false) {
            return Ok(volume);
        }
        self.save_volume(&updated).await.map_err(|e| {
            e.context(
                "persistent Volume Controller can't anneal migration annotations or finalizer",
            )
        })
    }

    /// `provisionClaim`: starts the provisioning operation, unless dynamic provisioning is
    /// off or the class has no usable provisioner (said in a `ProvisioningFailed` event;
    /// tried again at every sync).
    pub(super) async fn provision_claim(self: &Arc<Self>, claim: Arc<PersistentVolumeClaim>) {
        if !self.config.enable_dynamic_provisioning {
            return;
        }
        let key = claim_key(&claim);
        let class_name = claim_class(&claim);
        let found = match self.classes.get(&class_name) {
            None => Err(format!(
                "storageclass.storage.k8s.io {class_name:?} not found"
            )),
            Some(class) => find_provisioner(&class).map(|provisioner| (class, provisioner)),
        };
        let (class, provisioner) = match found {
            Ok(found) => found,
            Err(error) => {
                warn!(controller = super::NAME, claim = %key, %error, "Error finding provisioning plugin for claim");
                self.recorder
                    .event(claim.as_ref(), WARNING, "ProvisioningFailed", error);
                return;
            }
        };
        let operation = format!("provision-{key}[{}]", uid(&claim.metadata));
        let this = self.clone();
        self.schedule_operation(operation, async move {
            let plugin_name = match &provisioner {
                Provisioner::External(name) => name.clone(),
                Provisioner::InTree(plugin) => plugin.name().to_string(),
            };
            this.timestamps
                .add_if_not_exist(&key, &plugin_name, "provision");
            let result = match provisioner {
                Provisioner::External(name) => this.provision_external(&claim, &name).await,
                Provisioner::InTree(plugin) => this.provision_in_tree(&claim, plugin, &class).await,
            };
            if result.is_err() {
                this.timestamps.record(&key, true, &this.metrics);
            }
            result
        });
    }

    /// `setClaimProvisioner`.
    async fn set_claim_provisioner(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        provisioner: &str,
    ) -> anyhow::Result<Arc<PersistentVolumeClaim>> {
        match claim_with_provisioner(claim, provisioner) {
            None => Ok(claim.clone()),
            Some(updated) => self.save_claim(&updated).await,
        }
    }

    /// `provisionClaimOperationExternal`.
    async fn provision_external(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        provisioner: &str,
    ) -> anyhow::Result<()> {
        let claim = match self.set_claim_provisioner(claim, provisioner).await {
            Ok(claim) => claim,
            Err(error) => {
                let reason = crate::controller::describe(&error);
                self.recorder.event(
                    claim.as_ref(),
                    WARNING,
                    "ProvisioningFailed",
                    format!("Error saving claim: {reason}"),
                );
                return Err(error);
            }
        };
        let message = external_provisioning_message(provisioner);
        debug!(controller = super::NAME, claim = %claim_key(&claim), %message, "provisioning claim externally");
        self.recorder
            .event(claim.as_ref(), NORMAL, "ExternalProvisioning", message);
        Ok(())
    }

    /// `provisionClaimOperation` for the in-tree plugins: host-path does it; the others'
    /// backends are not available.
    async fn provision_in_tree(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        plugin: Plugin,
        class: &StorageClass,
    ) -> anyhow::Result<()> {
        let key = claim_key(claim);
        let plugin_name = plugin.name();
        let class_name = class.name_str();
        let failed = |message: String| {
            self.recorder
                .event(claim.as_ref(), WARNING, "ProvisioningFailed", message);
        };
        if plugin_name != CSI
            && claim
                .spec
                .as_ref()
                .is_some_and(|spec| spec.data_source.is_some())
        {
            let message = format!("plugin {plugin_name:?} is not a CSI plugin. Only CSI plugin can provision a claim with a datasource");
            failed(message.clone());
            anyhow::bail!(message);
        }
        let claim = self
            .set_claim_provisioner(claim, &class.provisioner)
            .await?;
        let volume_name = format!("pvc-{}", uid(&claim.metadata));
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        match volumes.get(&volume_name).await {
            Ok(_) => {
                debug!(controller = super::NAME, claim = %key, "volume already exists, skipping");
                return Ok(());
            }
            Err(error) if is_not_found(&error) => {}
            Err(error) => {
                return Err(anyhow::Error::new(error)
                    .context(format!("reading PersistentVolume {volume_name}")))
            }
        }
        let mount_options = class.mount_options.clone().unwrap_or_default();
        if plugin == Plugin::HostPath && !mount_options.is_empty() {
            // host-path takes no mount options.
            failed(format!(
                "Mount options are not supported by the provisioner but StorageClass {class_name:?} has mount options [{}]",
                mount_options.join(" ")
            ));
            anyhow::bail!("provisioner {plugin_name:?} doesn't support mount options");
        }
        let creating = match plugin {
            Plugin::HostPath if self.config.enable_hostpath_provisioner => Ok(()),
            Plugin::HostPath => Err(format!(
                "provisioning in volume plugin {plugin_name:?} is disabled"
            )),
            other => Err(plugins::backend_unavailable(other)),
        };
        if let Err(error) = creating {
            failed(format!("Failed to create provisioner: {error}"));
            anyhow::bail!(error);
        }
        if let Some(node) = annotation(&claim.metadata, ANN_SELECTED_NODE) {
            if self.nodes.get(node).is_none() {
                let error = format!("node {node:?} not found");
                failed(format!("Failed to get target node: {error}"));
                anyhow::bail!(error);
            }
        }
        let provisioned = self.provision_host_path(&claim, class, &volume_name).await;
        let volume = match provisioned {
            Ok(volume) => volume,
            Err(error) => {
                self.reschedule_provisioning(&claim).await;
                failed(format!(
                    "Failed to provision volume with StorageClass {class_name:?}: {error}"
                ));
                anyhow::bail!(error);
            }
        };
        let mut saved = Err(String::new());
        for attempt in 0..CREATE_PROVISIONED_PV_RETRIES {
            match volumes.create(&PostParams::default(), &volume).await {
                Ok(created) => {
                    let _ = self.store_volume_update(Arc::new(created));
                    saved = Ok(());
                    break;
                }
                Err(error) if is_already_exists(&error) => {
                    debug!(controller = super::NAME, claim = %key, volume = %volume_name, "volume for claim already exists, reusing");
                    saved = Ok(());
                    break;
                }
                Err(error) => {
                    debug!(controller = super::NAME, claim = %key, volume = %volume_name, error = %message(&error), "failed to save volume for claim");
                    saved = Err(message(&error));
                    if attempt + 1 < CREATE_PROVISIONED_PV_RETRIES {
                        tokio::time::sleep(CREATE_PROVISIONED_PV_INTERVAL).await;
                    }
                }
            }
        }
        match saved {
            Ok(()) => {
                info!(controller = super::NAME, claim = %key, volume = %volume_name, "Volume provisioned for claim");
                self.recorder.event(
                    claim.as_ref(),
                    NORMAL,
                    "ProvisioningSucceeded",
                    format!("Successfully provisioned volume {volume_name} using {plugin_name}"),
                );
            }
            Err(error) => {
                failed(format!("Error creating provisioned PV object for claim {key}: {error}. Deleting the volume."));
                let path = volume
                    .spec
                    .as_ref()
                    .and_then(|s| s.host_path.as_ref())
                    .map(|h| h.path.clone())
                    .unwrap_or_default();
                let mut cleanup = Err(String::new());
                for attempt in 0..CREATE_PROVISIONED_PV_RETRIES {
                    cleanup = match host_path_deletable(&path) {
                        Ok(()) => remove_all(&path).await.map_err(|e| e.to_string()),
                        Err(error) => Err(error),
                    };
                    if cleanup.is_ok() {
                        break;
                    }
                    if attempt + 1 < CREATE_PROVISIONED_PV_RETRIES {
                        tokio::time::sleep(CREATE_PROVISIONED_PV_INTERVAL).await;
                    }
                }
                if let Err(error) = cleanup {
                    self.recorder.event(
                        claim.as_ref(),
                        WARNING,
                        "ProvisioningCleanupFailed",
                        format!("Error cleaning provisioned volume for claim {key}: {error}. Please delete manually."),
                    );
                }
            }
        }
        Ok(())
    }

    /// The host-path provisioner: a directory under `/tmp/hostpath_pv` on this host.
    async fn provision_host_path(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        volume_name: &str,
    ) -> Result<PersistentVolume, String> {
        let block = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) == Some("Block");
        if block {
            return Err(format!(
                "{} does not support block volume provisioning",
                plugins::HOST_PATH
            ));
        }
        let path = format!("/tmp/hostpath_pv/{}", new_uuid());
        let mut builder = tokio::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            builder.mode(0o750);
        }
        builder.create(&path).await.map_err(|e| e.to_string())?;
        Ok(host_path_volume(claim, class, volume_name, &path))
    }

    /// `rescheduleProvisioning`: a failed provisioning for the node the scheduler chose
    /// gives the choice back (the selected-node annotation removed).
    async fn reschedule_provisioning(&self, claim: &Arc<PersistentVolumeClaim>) {
        if !has_annotation(&claim.metadata, ANN_SELECTED_NODE) {
            return;
        }
        let mut updated = claim.as_ref().clone();
        if let Some(annotations) = updated.metadata.annotations.as_mut() {
            annotations.remove(ANN_SELECTED_NODE);
        }
        if let Err(error) = self.save_claim(&updated).await {
            debug!(controller = super::NAME, claim = %claim_key(claim), error = %error, "failed to delete the selected-node annotation");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::helpers::fixtures::pvc;
    use super::*;
    use serde_json::json;

    fn class(provisioner: &str) -> StorageClass {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "provisioner": provisioner}))
            .unwrap()
    }

    #[test]
    fn who_provisions() {
        let cases = [
            (
                "example.com/none",
                Ok(Provisioner::External("example.com/none".into())),
            ),
            (
                "csi.sim.rkcm.io",
                Ok(Provisioner::External("csi.sim.rkcm.io".into())),
            ),
            (
                "kubernetes.io/gce-pd",
                Ok(Provisioner::External("pd.csi.storage.gke.io".into())),
            ),
            (
                "kubernetes.io/host-path",
                Ok(Provisioner::InTree(Plugin::HostPath)),
            ),
            ("kubernetes.io/rbd", Ok(Provisioner::InTree(Plugin::Rbd))),
            (
                "kubernetes.io/no-provisioner",
                Err("no volume plugin matched name: kubernetes.io/no-provisioner".to_string()),
            ),
            (
                "kubernetes.io/nfs",
                Err("no provisionable volume plugin matched".to_string()),
            ),
        ];
        for (provisioner, want) in cases {
            assert_eq!(find_provisioner(&class(provisioner)), want, "{provisioner}");
        }
    }

    #[test]
    fn provisioner_annotations() {
        let claim = pvc("c", "1Gi", json!({}));
        let named = claim_with_provisioner(&claim, "example.com/none").unwrap();
        assert_eq!(
            annotation(&named.metadata, ANN_STORAGE_PROVISIONER),
            Some("example.com/none")
        );
        assert_eq!(
            annotation(&named.metadata, ANN_BETA_STORAGE_PROVISIONER),
            Some("example.com/none")
        );
        assert!(!has_annotation(&named.metadata, ANN_MIGRATED_TO));
        assert!(claim_with_provisioner(&named, "example.com/none").is_none());
        assert_eq!(
            external_provisioning_message("example.com/none"),
            "Waiting for a volume to be created either by the external provisioner 'example.com/none' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
        );
    }

    #[test]
    fn migration_annotations() {
        let annotations = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let mut claim = annotations(&[(ANN_BETA_STORAGE_PROVISIONER, "kubernetes.io/aws-ebs")]);
        assert!(update_migration_annotations(&mut claim, true));
        assert_eq!(claim.as_ref().unwrap()[ANN_MIGRATED_TO], "ebs.csi.aws.com");
        assert!(!update_migration_annotations(&mut claim, true));
        let mut stale = annotations(&[
            (ANN_STORAGE_PROVISIONER, "ebs.csi.aws.com"),
            (ANN_MIGRATED_TO, "x"),
        ]);
        assert!(update_migration_annotations(&mut stale, true));
        assert!(!stale.unwrap().contains_key(ANN_MIGRATED_TO));
        let mut volume = annotations(&[(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/cinder")]);
        assert!(update_migration_annotations(&mut volume, false));
        assert_eq!(volume.unwrap()[ANN_MIGRATED_TO], "cinder.csi.openstack.org");
        let mut none = None;
        assert!(!update_migration_annotations(&mut none, true));
    }

    #[test]
    fn host_path_volumes() {
        let claim = pvc(
            "c",
            "3Gi",
            json!({"spec": {"storageClassName": "hp", "accessModes": []}}),
        );
        let class: StorageClass = serde_json::from_value(json!({"metadata": {"name": "hp"}, "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Retain"})).unwrap();
        let volume = host_path_volume(&claim, &class, "pvc-uid-c", "/tmp/hostpath_pv/x");
        let spec = volume.spec.unwrap();
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
        assert_eq!(spec.capacity.unwrap()["storage"].0, "3Gi");
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Retain")
        );
        assert_eq!(spec.storage_class_name.as_deref(), Some("hp"));
        assert_eq!(spec.claim_ref.unwrap().uid.as_deref(), Some("uid-c"));
        let annotations = volume.metadata.annotations.unwrap();
        assert_eq!(
            annotations[ANN_DYNAMICALLY_PROVISIONED],
            "kubernetes.io/host-path"
        );
        assert_eq!(annotations[ANN_BOUND_BY_CONTROLLER], "yes");
        assert_eq!(annotations[ANN_CREATED_BY], "hostpath-dynamic-provisioner");
        let uuid = new_uuid();
        assert_eq!(uuid.len(), 36);
        assert_eq!(&uuid[14..15], "4");
    }
}

//! The pod's volumes as the simulated kubelet's volume manager sees them: the ConfigMaps and
//! Secrets its volumes need ([`required_mount_sources`]), and why one of its claims cannot be
//! used yet ([`claim_problem`], [`volume_problem`]), with kubelet's wording.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret};
use kube::api::Api;
use kube::ResourceExt;

use super::Millis;

/// How often a pod whose volumes cannot be set up is looked at again.
pub(super) const MOUNT_RETRY: Duration = Duration::from_secs(2);
/// A FailedMount event with an unchanged message is posted again after this long.
pub(super) const MOUNT_EVENT_REPEAT: Millis = 30_000;

/// The kind of object a volume takes its files from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountKind {
    ConfigMap,
    Secret,
}

/// An object a pod's volume needs before its containers can start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountSource {
    pub volume: String,
    pub kind: MountKind,
    pub name: String,
}

impl MountSource {
    /// kubelet's message when the object is missing.
    pub fn not_found_message(&self) -> String {
        let kind = match self.kind {
            MountKind::ConfigMap => "configmap",
            MountKind::Secret => "secret",
        };
        format!(
            "MountVolume.SetUp failed for volume \"{}\" : {kind} \"{}\" not found",
            self.volume, self.name
        )
    }
}

/// The ConfigMaps and Secrets the pod's volumes need (directly or as projected sources),
/// leaving out those marked `optional: true`.
pub fn required_mount_sources(pod: &Pod) -> Vec<MountSource> {
    let mut sources = Vec::new();
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for volume in volumes {
        let mut need = |kind: MountKind, name: Option<&str>, optional: Option<bool>| {
            if optional != Some(true) {
                sources.push(MountSource {
                    volume: volume.name.clone(),
                    kind,
                    name: name.unwrap_or_default().to_string(),
                });
            }
        };
        if let Some(cm) = &volume.config_map {
            need(MountKind::ConfigMap, Some(cm.name.as_str()), cm.optional);
        }
        if let Some(secret) = &volume.secret {
            need(
                MountKind::Secret,
                secret.secret_name.as_deref(),
                secret.optional,
            );
        }
        let projected = volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten());
        for source in projected {
            if let Some(cm) = &source.config_map {
                need(MountKind::ConfigMap, Some(cm.name.as_str()), cm.optional);
            }
            if let Some(secret) = &source.secret {
                need(
                    MountKind::Secret,
                    Some(secret.name.as_str()),
                    secret.optional,
                );
            }
        }
    }
    sources
}

/// The first of the pod's required volume sources that does not exist, as kubelet words it.
pub(super) async fn first_mount_failure(
    client: &kube::Client,
    namespace: &str,
    sources: &[MountSource],
) -> Result<Option<String>, kube::Error> {
    for source in sources {
        let found = match source.kind {
            MountKind::ConfigMap => Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_metadata_opt(&source.name)
                .await?
                .is_some(),
            MountKind::Secret => Api::<Secret>::namespaced(client.clone(), namespace)
                .get_metadata_opt(&source.name)
                .await?
                .is_some(),
        };
        if !found {
            return Ok(Some(source.not_found_message()));
        }
    }
    Ok(None)
}

/// Why kubelet's volume manager cannot take one of the pod's claims yet (`None`: it
/// can), given the claim as the API server has it; `Ok` carries the claim's volume name.
pub fn claim_problem(
    pod: &Pod,
    claim_name: &str,
    ephemeral: bool,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<String, String> {
    let ns = pod.namespace().unwrap_or_default();
    let processing = |error: &str| format!("error processing PVC {ns}/{claim_name}: {error}");
    let Some(claim) = claim else {
        return Err(processing(&format!(
            "failed to fetch PVC from API server: persistentvolumeclaims \"{claim_name}\" not found"
        )));
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(processing("PVC is being deleted"));
    }
    if claim.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
        return Err(processing("PVC is not bound"));
    }
    let volume = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    if volume.is_empty() {
        return Err(processing("PVC has empty pvc.Spec.VolumeName"));
    }
    if ephemeral {
        if let Some(error) = crate::nodesim::volume_binding::ephemeral_owner_error(pod, claim) {
            return Err(error);
        }
    }
    Ok(volume)
}

/// Why kubelet cannot take the volume a bound claim names (`getPVSpec`).
pub fn volume_problem(
    pod: &Pod,
    claim_name: &str,
    claim_uid: Option<&str>,
    volume_name: &str,
    volume: Option<&PersistentVolume>,
) -> Option<String> {
    let ns = pod.namespace().unwrap_or_default();
    let error = match volume {
        None => format!("failed to fetch PV {volume_name} from API server: persistentvolumes \"{volume_name}\" not found"),
        Some(volume) => {
            let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
            match claim_ref {
                None => format!("found PV object {volume_name} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"),
                Some(r) if r.uid.as_deref() != claim_uid => format!(
                    "found PV object {volume_name} but its pv.Spec.ClaimRef.UID {} does not point to claim.UID {}",
                    r.uid.as_deref().unwrap_or_default(),
                    claim_uid.unwrap_or_default()
                ),
                Some(_) => return None,
            }
        }
    };
    Some(format!("error processing PVC {ns}/{claim_name}: {error}"))
}

/// The first reason one of the pod's claims keeps its containers from starting.
pub(super) async fn first_claim_problem(
    client: &kube::Client,
    pod: &Pod,
) -> Result<Option<String>, kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    for (name, ephemeral) in crate::nodesim::volume_binding::pod_claims(pod) {
        let claim = claims.get_opt(&name).await?;
        let volume_name = match claim_problem(pod, &name, ephemeral, claim.as_ref()) {
            Ok(volume) => volume,
            Err(problem) => return Ok(Some(problem)),
        };
        let volume = volumes.get_opt(&volume_name).await?;
        let uid = claim.as_ref().and_then(|c| c.metadata.uid.as_deref());
        if let Some(problem) = volume_problem(pod, &name, uid, &volume_name, volume.as_ref()) {
            return Ok(Some(problem));
        }
    }
    Ok(None)
}

//! The controller's syncs: a pod's (`syncPod`) and a claim's (`syncClaim`); API calls here,
//! decisions in [`super::decide`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::{debug, error};

use super::decide::{
    claim_from_template, claim_name, find_generated, is_for_pod, is_pod_done, is_pod_reservation,
    keep_reservation, owning_pod, scheduled_claim_work, ClaimName, ScheduledClaim,
};
use super::types::{
    ClaimPod, ConsumerReference, PodResourceClaim, PodSchedulingContext, PodSchedulingContextSpec,
    ResourceClaim, TypeMeta,
};
use super::{Controller, FIELD_MANAGER, NAME};
use crate::api_errors;
use crate::meta::ResourceNames;

/// `FailedResourceClaimCreation`, the Warning on a pod whose claim could not be made.
const FAILED_CREATION: &str = "FailedResourceClaimCreation";

impl Controller {
    /// `podNeedsWork`: whether a pod's sync has something to do (and why).
    pub(super) fn pod_needs_work(&self, pod: &ClaimPod) -> (bool, String) {
        if pod.metadata.deletion_timestamp.is_some() {
            return (false, "pod is deleted".into());
        }
        let namespace = pod.namespace_str();
        let pod_name = pod.name_str();
        for pod_claim in &pod.spec.resource_claims {
            let (name, check_owner) = match claim_name(pod, pod_claim) {
                ClaimName::Named { name, check_owner } => (name, check_owner),
                ClaimName::NotNeeded => return (false, "claim is not needed".into()),
                ClaimName::NotCreatedYet(reason) | ClaimName::Unsupported(reason) => {
                    return (true, reason)
                }
            };
            let Some(claim) = self.claims.get_in(namespace, &name) else {
                if pod_claim.source.resource_claim_template_name.is_some() {
                    return (true, "must create ResourceClaim from template".into());
                }
                return (false, "claim is missing and must be created by user".into());
            };
            if check_owner && is_for_pod(pod, &claim).is_err() {
                return (
                    false,
                    "conflicting claim needs to be removed by user".into(),
                );
            }
            if pod.spec.node_name.is_empty() {
                continue;
            }
            match scheduled_claim_work(pod, &claim) {
                ScheduledClaim::EnsureSchedulingContext => {
                    match self.scheduling.get_in(namespace, pod_name) {
                        None => {
                            return (
                                true,
                                "need to create PodSchedulingContext for scheduled pod".into(),
                            )
                        }
                        Some(context) if context.spec.selected_node != pod.spec.node_name => {
                            return (
                                true,
                                "need to updated PodSchedulingContext for scheduled pod".into(),
                            )
                        }
                        Some(_) => {}
                    }
                }
                ScheduledClaim::Reserve => return (true, "need to reserve claim for pod".into()),
                ScheduledClaim::Nothing => {}
            }
        }
        (false, "nothing to do".into())
    }

    pub(super) async fn sync_pod(&self, namespace: &str, name: &str) -> anyhow::Result<()> {
        let Some(pod) = self.pods.get_in(namespace, name) else {
            debug!(
                controller = NAME,
                namespace, name, "nothing to do for pod, it is gone"
            );
            return Ok(());
        };
        if pod.metadata.deletion_timestamp.is_some() {
            debug!(
                controller = NAME,
                namespace, name, "nothing to do for pod, it is marked for deletion"
            );
            return Ok(());
        }
        let mut new_statuses = BTreeMap::new();
        for pod_claim in &pod.spec.resource_claims {
            if let Err(error) = self.handle_claim(&pod, pod_claim, &mut new_statuses).await {
                self.recorder.event(
                    &*pod,
                    "Warning",
                    FAILED_CREATION,
                    format!("PodResourceClaim {}: {error}", pod_claim.name),
                );
                anyhow::bail!(
                    "pod {namespace}/{name}, PodResourceClaim {}: {error}",
                    pod_claim.name
                );
            }
        }
        if !new_statuses.is_empty() {
            self.apply_claim_statuses(namespace, name, &new_statuses)
                .await
                .map_err(|error| {
                    anyhow::anyhow!(
                        "update pod {namespace}/{name} ResourceClaimStatuses: {}",
                        api_errors::message(&error)
                    )
                })?;
        }
        if pod.spec.node_name.is_empty() {
            debug!(
                controller = NAME,
                namespace, name, "nothing to do for pod, scheduler will deal with it"
            );
            return Ok(());
        }
        for pod_claim in &pod.spec.resource_claims {
            let (claim_name, check_owner) = match claim_name(&pod, pod_claim) {
                ClaimName::Named { name, check_owner } => (name, check_owner),
                ClaimName::NotNeeded => continue,
                ClaimName::NotCreatedYet(error) | ClaimName::Unsupported(error) => {
                    anyhow::bail!(error)
                }
            };
            let Some(claim) = self.claims.get_in(namespace, &claim_name) else {
                return Ok(());
            };
            if check_owner {
                is_for_pod(&pod, &claim).map_err(anyhow::Error::msg)?;
            }
            match scheduled_claim_work(&pod, &claim) {
                ScheduledClaim::EnsureSchedulingContext => {
                    debug!(controller = NAME, claim = %claim_name, "create PodSchedulingContext because claim needs to be allocated");
                    return self.ensure_scheduling_context(&pod).await;
                }
                ScheduledClaim::Reserve => {
                    debug!(controller = NAME, claim = %claim_name, "reserve claim for pod");
                    self.reserve_for_pod(&pod, &claim).await?;
                }
                ScheduledClaim::Nothing => {}
            }
        }
        Ok(())
    }

    /// Makes the claim of one pod claim from its template when there is none; records
    /// a claim made or found in `new_statuses` (pod claim name → claim name). The error
    /// is the sentence the event carries.
    async fn handle_claim(
        &self,
        pod: &ClaimPod,
        pod_claim: &PodResourceClaim,
        new_statuses: &mut BTreeMap<String, String>,
    ) -> Result<(), String> {
        let namespace = pod.namespace_str();
        match claim_name(pod, pod_claim) {
            ClaimName::NotCreatedYet(_) => {}
            ClaimName::Unsupported(error) => {
                return Err(format!("checking for claim before creating it: {error}"))
            }
            ClaimName::NotNeeded => return Ok(()),
            ClaimName::Named { name, check_owner } => {
                if let Some(claim) = self.claims.get_in(namespace, &name) {
                    let owned = if check_owner {
                        is_for_pod(pod, &claim)
                    } else {
                        Ok(())
                    };
                    match owned {
                        Ok(()) => {
                            debug!(controller = NAME, pod_claim = %pod_claim.name, claim = %name, "claim already created");
                            return Ok(());
                        }
                        Err(error) => error!(
                            controller = NAME,
                            pod_claim = %pod_claim.name,
                            claim = %name,
                            "claim that was created for the pod is no longer owned by the pod, creating a new one: {error}"
                        ),
                    }
                }
            }
        }
        let Some(template_name) = &pod_claim.source.resource_claim_template_name else {
            return Ok(());
        };
        let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let owned = self.claims_of_pod(namespace, pod_uid);
        let claim_name = match find_generated(pod, &pod_claim.name, &owned) {
            Some(existing) => existing.name_str().to_string(),
            None => {
                self.create_claim(pod, &pod_claim.name, template_name)
                    .await?
            }
        };
        new_statuses.insert(pod_claim.name.clone(), claim_name);
        Ok(())
    }

    /// Creates a pod's claim from the template; the created claim's name.
    async fn create_claim(
        &self,
        pod: &ClaimPod,
        pod_claim: &str,
        template_name: &str,
    ) -> Result<String, String> {
        let namespace = pod.namespace_str();
        let template = self
            .templates
            .get_in(namespace, template_name)
            .ok_or_else(|| {
                format!(
                    "resource claim template {template_name:?}: resourceclaimtemplate.resource.k8s.io \"{template_name}\" not found"
                )
            })?;
        let claim = claim_from_template(pod, pod_claim, &template);
        self.metrics.create_attempts.inc();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &claim).await {
            Ok(created) => {
                let name = created.name_str().to_string();
                debug!(controller = NAME, pod_claim, claim = %name, "created the claim");
                self.remember_created(pod.metadata.uid.as_deref().unwrap_or_default(), created);
                Ok(name)
            }
            Err(error) => {
                self.metrics.create_failures.inc();
                // Upstream names the claim by its name before creation: empty, as it
                // has only a generateName.
                Err(format!(
                    "create ResourceClaim : {}",
                    api_errors::message(&error)
                ))
            }
        }
    }

    /// Server-side apply of `status.resourceClaimStatuses`, forced, as upstream's
    /// `ApplyStatus` with its field manager.
    async fn apply_claim_statuses(
        &self,
        namespace: &str,
        name: &str,
        statuses: &BTreeMap<String, String>,
    ) -> Result<(), kube::Error> {
        let statuses: Vec<_> = statuses
            .iter()
            .map(|(pod_claim, claim)| json!({"name": pod_claim, "resourceClaimName": claim}))
            .collect();
        let apply = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"resourceClaimStatuses": statuses},
        });
        let api: Api<ClaimPod> = Api::namespaced(self.client.clone(), namespace);
        api.patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&apply),
        )
        .await?;
        Ok(())
    }

    /// Makes sure the pod's PodSchedulingContext exists and selects its node.
    async fn ensure_scheduling_context(&self, pod: &ClaimPod) -> anyhow::Result<()> {
        let namespace = pod.namespace_str();
        let name = pod.name_str();
        let api: Api<PodSchedulingContext> = Api::namespaced(self.client.clone(), namespace);
        match self.scheduling.get_in(namespace, name) {
            None => {
                let context = PodSchedulingContext {
                    api_version: String::new(),
                    kind: String::new(),
                    metadata: ObjectMeta {
                        name: Some(name.into()),
                        namespace: Some(namespace.into()),
                        owner_references: Some(vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Pod".into(),
                            name: name.into(),
                            uid: pod.metadata.uid.clone().unwrap_or_default(),
                            controller: Some(true),
                            block_owner_deletion: None,
                        }]),
                        ..Default::default()
                    },
                    spec: PodSchedulingContextSpec {
                        selected_node: pod.spec.node_name.clone(),
                        ..Default::default()
                    },
                    status: None,
                }
                .with_type_meta();
                api.create(&PostParams::default(), &context)
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!("create PodSchedulingContext: {}", api_errors::message(&e))
                    })?;
            }
            Some(existing) if existing.spec.selected_node != pod.spec.node_name => {
                let mut context = (*existing).clone().with_type_meta();
                context.spec.selected_node = pod.spec.node_name.clone();
                api.replace(name, &PostParams::default(), &context)
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "update spec.selectedNode in PodSchedulingContext: {}",
                            api_errors::message(&e)
                        )
                    })?;
            }
            Some(_) => {}
        }
        Ok(())
    }

    async fn reserve_for_pod(&self, pod: &ClaimPod, claim: &ResourceClaim) -> anyhow::Result<()> {
        let mut claim = claim.clone();
        claim.status.reserved_for.push(ConsumerReference {
            api_group: String::new(),
            resource: "pods".into(),
            name: pod.name_str().to_string(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        });
        self.update_claim_status(&claim)
            .await
            .map_err(|e| anyhow::anyhow!("reserve claim for pod: {}", api_errors::message(&e)))
    }

    async fn update_claim_status(&self, claim: &ResourceClaim) -> Result<(), kube::Error> {
        let namespace = claim.namespace_str();
        let name = claim.name_str();
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
        let claim = claim.clone().with_type_meta();
        api.replace_status(name, &PostParams::default(), &claim)
            .await?;
        Ok(())
    }

    /// Whether a pod reservation of the claim in `namespace` still holds: the informer's
    /// pod, or when the informer has none, the API server's.
    async fn reservation_holds(
        &self,
        namespace: &str,
        entry: &ConsumerReference,
    ) -> anyhow::Result<bool> {
        if self.deleted_pods().has(&entry.uid) {
            return Ok(keep_reservation(entry, true, None));
        }
        if let Some(pod) = self.pods.get_in(namespace, &entry.name) {
            return Ok(keep_reservation(entry, false, Some(&pod)));
        }
        // The informer may lag a pod just created: ask the server before dropping it.
        let api: Api<ClaimPod> = Api::namespaced(self.client.clone(), namespace);
        let live = api.get_opt(&entry.name).await?;
        Ok(live.is_some_and(|pod| pod.metadata.uid.as_deref() == Some(entry.uid.as_str())))
    }

    pub(super) async fn sync_claim(&self, namespace: &str, name: &str) -> anyhow::Result<()> {
        let Some(claim) = self.claims.get_in(namespace, name) else {
            debug!(
                controller = NAME,
                namespace, name, "nothing to do for claim, it is gone"
            );
            return Ok(());
        };
        let mut valid = Vec::with_capacity(claim.status.reserved_for.len());
        for entry in &claim.status.reserved_for {
            if !is_pod_reservation(entry) {
                anyhow::bail!("unsupported ReservedFor entry: {entry:?}");
            }
            if self.reservation_holds(namespace, entry).await? {
                valid.push(entry.clone());
            } else {
                debug!(controller = NAME, namespace, claim = name, pod = %entry.name, "remove reservation: the pod is gone, replaced or done");
            }
        }
        if valid.len() < claim.status.reserved_for.len() {
            let mut updated = (*claim).clone();
            updated.status.reserved_for = valid.clone();
            if valid.is_empty() && updated.spec.waits_for_first_consumer() {
                updated.status.deallocation_requested = true;
            }
            self.update_claim_status(&updated)
                .await
                .map_err(|e| anyhow::anyhow!("{}", api_errors::message(&e)))?;
        }
        if !valid.is_empty() {
            return Ok(());
        }
        let Some((pod_name, pod_uid)) = owning_pod(&claim) else {
            debug!(
                controller = NAME,
                namespace, name, "claim not generated for a pod"
            );
            return Ok(());
        };
        let Some(pod) = self.pods.get_in(namespace, pod_name) else {
            debug!(
                controller = NAME,
                namespace,
                name,
                pod = pod_name,
                "pod for claim not found"
            );
            return Ok(());
        };
        if pod.metadata.uid.as_deref().unwrap_or_default() != pod_uid || is_pod_done(&pod) {
            debug!(
                controller = NAME,
                namespace, name, "deleting unused generated claim"
            );
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if api_errors::is_not_found(&e) => {}
                Err(e) => anyhow::bail!("delete claim: {}", api_errors::message(&e)),
            }
        }
        Ok(())
    }
}

//! The StatefulSet's writes to pods and claims (upstream `stateful_pod_control.go`):
//! claims are created before their pod, a pod's identity and storage are repaired in
//! place, claims get the ownerReferences the retention policy asks for, and every write
//! is reported on the set with upstream's events (`SuccessfulCreate` "create Pod web-0
//! in StatefulSet web successful", `FailedCreate`, `SuccessfulDelete`, `SuccessfulUpdate`,
//! and the claim events "create Claim data-web-0 Pod web-0 in StatefulSet web success").
//! Claims are read from the worker's store; only writes go to the API server.

use std::future::Future;
use std::time::Duration;

use anyhow::anyhow;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use tracing::debug;

use super::utils::{
    claim_owner_matches_set_and_pod, claims_for, has_stale_owner_ref, identity_matches, ordinal,
    retention_policy, storage_matches, update_claim_owner_refs, update_identity, update_storage,
    Owner,
};
use crate::api_errors::{is_already_exists, is_conflict, message as api_error_text};
use crate::meta::ResourceNames;
use crate::recorder::{Recorder, NORMAL, WARNING};
use crate::store::Store;

/// An error as Go prints it: the chain joined with ": ", API errors as their message.
pub(super) fn go_text(error: &anyhow::Error) -> String {
    let mut parts = Vec::new();
    for cause in error.chain() {
        if let Some(api) = cause.downcast_ref::<kube::Error>() {
            // Its source (the Status) says the same again.
            parts.push(api_error_text(api));
            break;
        }
        parts.push(cause.to_string());
    }
    parts.join(": ")
}

/// Several errors as one, as apimachinery's aggregate prints them (`[a, b]`); a single
/// error is kept as it is.
pub(super) fn aggregate(mut errors: Vec<anyhow::Error>) -> Option<anyhow::Error> {
    match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => {
            let mut texts: Vec<String> = Vec::new();
            for error in &errors {
                let text = go_text(error);
                if !texts.contains(&text) {
                    texts.push(text);
                }
            }
            Some(if texts.len() == 1 {
                errors.swap_remove(0)
            } else {
                anyhow!("[{}]", texts.join(", "))
            })
        }
    }
}

fn title(verb: &str) -> String {
    let mut chars = verb.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn pod_name(pod: &Pod) -> &str {
    pod.name_str()
}

#[derive(Clone)]
pub(super) struct StatefulPodControl {
    client: kube::Client,
    recorder: Recorder,
    claims: Store<PersistentVolumeClaim>,
}

impl StatefulPodControl {
    pub(super) fn new(
        client: kube::Client,
        recorder: Recorder,
        claims: Store<PersistentVolumeClaim>,
    ) -> Self {
        StatefulPodControl {
            client,
            recorder,
            claims,
        }
    }

    fn pods(&self, set: &StatefulSet) -> Api<Pod> {
        Api::namespaced(self.client.clone(), set.namespace_str())
    }

    fn claims_api(&self, set: &StatefulSet) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), set.namespace_str())
    }

    fn record_pod_event(&self, verb: &str, set: &StatefulSet, pod: &Pod, error: Option<&str>) {
        let (pod, name) = (pod_name(pod), set.name_str());
        match error {
            None => self.recorder.event(
                set,
                NORMAL,
                &format!("Successful{}", title(verb)),
                format!("{verb} Pod {pod} in StatefulSet {name} successful"),
            ),
            Some(error) => self.recorder.event(
                set,
                WARNING,
                &format!("Failed{}", title(verb)),
                format!("{verb} Pod {pod} in StatefulSet {name} failed error: {error}"),
            ),
        }
    }

    fn record_claim_event(
        &self,
        verb: &str,
        set: &StatefulSet,
        pod: &Pod,
        claim: &str,
        error: Option<&str>,
    ) {
        let (pod, name) = (pod_name(pod), set.name_str());
        match error {
            None => self.recorder.event(
                set,
                NORMAL,
                &format!("Successful{}", title(verb)),
                format!("{verb} Claim {claim} Pod {pod} in StatefulSet {name} success"),
            ),
            Some(error) => self.recorder.event(
                set,
                WARNING,
                &format!("Failed{}", title(verb)),
                format!("{verb} Claim {claim} for Pod {pod} in StatefulSet {name} failed error: {error}"),
            ),
        }
    }

    /// Creates the pod's claims, then the pod, then gives the claims their retention
    /// ownerReferences. A pod that already exists is an error without an event (the
    /// cache was behind).
    pub(super) async fn create_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> anyhow::Result<()> {
        if let Err(error) = self.create_persistent_volume_claims(set, pod).await {
            self.record_pod_event("create", set, pod, Some(&go_text(&error)));
            return Err(error);
        }
        let created = self.pods(set).create(&PostParams::default(), pod).await;
        if let Err(error) = &created {
            if is_already_exists(error) {
                return created.map(|_| ()).map_err(anyhow::Error::new);
            }
        }
        if let Err(error) = self.update_pod_claim_for_retention_policy(set, pod).await {
            self.record_pod_event("update", set, pod, Some(&go_text(&error)));
            return Err(error);
        }
        match created {
            Ok(_) => {
                debug!(
                    statefulset = set.name_str(),
                    pod = pod_name(pod),
                    "created pod"
                );
                self.record_pod_event("create", set, pod, None);
                Ok(())
            }
            Err(error) => {
                self.record_pod_event("create", set, pod, Some(&api_error_text(&error)));
                Err(error.into())
            }
        }
    }

    /// Repairs the pod's identity (name, namespace, pod-name and pod-index labels), its
    /// claim volumes (creating missing claims) and its claims' ownerReferences, then
    /// writes it, re-reading it after a conflict.
    pub(super) async fn update_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> anyhow::Result<()> {
        let api = self.pods(set);
        let mut pod = pod.clone();
        if !(identity_matches(set, &pod)
            && storage_matches(set, &pod)
            && self.claims_match_retention_policy(set, &pod))
        {
            // The store holds projected pods (the fields the controller reads): the update
            // starts from the whole object, or it would erase the rest.
            pod = api.get(pod_name(&pod)).await.map_err(|error| {
                anyhow::Error::new(error).context(format!(
                    "error getting updated Pod {}/{}",
                    set.namespace_str(),
                    pod_name(&pod)
                ))
            })?;
        }
        let mut attempted = false;
        let mut delay = Duration::from_millis(10);
        let mut attempts_left = 4;
        let result: anyhow::Result<()> = loop {
            let mut consistent = true;
            if !identity_matches(set, &pod) {
                update_identity(set, &mut pod);
                consistent = false;
            }
            if !storage_matches(set, &pod) {
                update_storage(set, &mut pod);
                consistent = false;
                if let Err(error) = self.create_persistent_volume_claims(set, &pod).await {
                    self.record_pod_event("update", set, &pod, Some(&go_text(&error)));
                    break Err(error);
                }
            }
            if !self.claims_match_retention_policy(set, &pod) {
                if let Err(error) = self.update_pod_claim_for_retention_policy(set, &pod).await {
                    self.record_pod_event("update", set, &pod, Some(&go_text(&error)));
                    break Err(error);
                }
                consistent = false;
            }
            if consistent {
                break Ok(());
            }
            attempted = true;
            let name = pod_name(&pod).to_string();
            match api.replace(&name, &PostParams::default(), &pod).await {
                Ok(_) => break Ok(()),
                Err(error) => {
                    attempts_left -= 1;
                    if !is_conflict(&error) || attempts_left == 0 {
                        break Err(error.into());
                    }
                    tokio::time::sleep(delay).await;
                    delay *= 5;
                    match api.get(&name).await {
                        Ok(fresh) => pod = fresh,
                        Err(get_error) => {
                            break Err(anyhow::Error::new(get_error).context(format!(
                                "error getting updated Pod {}/{name}",
                                set.namespace_str()
                            )))
                        }
                    }
                }
            }
        };
        if attempted {
            let text = result.as_ref().err().map(go_text);
            self.record_pod_event("update", set, &pod, text.as_deref());
        }
        result
    }

    pub(super) async fn delete_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> Result<(), kube::Error> {
        let result = self
            .pods(set)
            .delete(pod_name(pod), &DeleteParams::default())
            .await
            .map(|_| ());
        let text = result.as_ref().err().map(api_error_text);
        self.record_pod_event("delete", set, pod, text.as_deref());
        result
    }

    /// Do the pod's claims (those that exist) carry the ownerReferences the set's
    /// retention policy asks for?
    pub(super) fn claims_match_retention_policy(&self, set: &StatefulSet, pod: &Pod) -> bool {
        claims_for(set, ordinal(pod)).iter().all(|(_, claim)| {
            let name = claim.name_str();
            match self.claims.get_in(set.namespace_str(), name) {
                // Missing: it is picked up at a later sync.
                None => true,
                Some(existing) => claim_owner_matches_set_and_pod(&existing, set, pod),
            }
        })
    }

    /// Gives the pod's existing claims the ownerReferences the retention policy asks for.
    pub(super) async fn update_pod_claim_for_retention_policy(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> anyhow::Result<()> {
        let api = self.claims_api(set);
        for (_, claim) in claims_for(set, ordinal(pod)) {
            let name = claim.name_str().to_string();
            let Some(existing) = self.claims.get_in(set.namespace_str(), &name) else {
                continue;
            };
            if claim_owner_matches_set_and_pod(&existing, set, pod) {
                continue;
            }
            let mut updated = existing.as_ref().clone();
            if update_claim_owner_refs(&mut updated, set, pod) {
                api.replace(&name, &PostParams::default(), &updated)
                    .await
                    .map_err(|error| {
                        anyhow::Error::new(error).context(format!(
                            "Could not update claim {name} for delete policy ownerRefs"
                        ))
                    })?;
            }
        }
        Ok(())
    }

    /// Is a claim of this pod still owned by an earlier pod of its ordinal (scale-down
    /// deletion pending)? Then the pod must wait for the claim to go.
    pub(super) fn pod_claim_is_stale(&self, set: &StatefulSet, pod: &Pod) -> bool {
        if !retention_policy(set).delete_when_scaled {
            // Claims are kept for reuse, so none is stale.
            return false;
        }
        claims_for(set, ordinal(pod)).iter().any(|(_, claim)| {
            let name = claim.name_str();
            self.claims
                .get_in(set.namespace_str(), name)
                .is_some_and(|existing| has_stale_owner_ref(&existing.metadata, &Owner::pod(pod)))
        })
    }

    /// Creates the claims a pending pod is missing and fixes their ownerReferences.
    pub(super) async fn create_missing_persistent_volume_claims(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> anyhow::Result<()> {
        self.create_persistent_volume_claims(set, pod).await?;
        if let Err(error) = self.update_pod_claim_for_retention_policy(set, pod).await {
            self.record_pod_event("update", set, pod, Some(&go_text(&error)));
            return Err(error);
        }
        Ok(())
    }

    /// Creates every claim of the pod the store does not hold; a claim being deleted is
    /// an error (the pod must not start on it).
    pub(super) async fn create_persistent_volume_claims(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> anyhow::Result<()> {
        let api = self.claims_api(set);
        let mut errors = Vec::new();
        for (_, mut claim) in claims_for(set, ordinal(pod)) {
            let name = claim.name_str().to_string();
            match self.claims.get_in(set.namespace_str(), &name) {
                None => {
                    // The API server ignores a status on create; the template's is noise.
                    claim.status = None;
                    match api.create(&PostParams::default(), &claim).await {
                        Ok(_) => self.record_claim_event("create", set, pod, &name, None),
                        Err(error) => {
                            if !is_already_exists(&error) {
                                self.record_claim_event(
                                    "create",
                                    set,
                                    pod,
                                    &name,
                                    Some(&api_error_text(&error)),
                                );
                            }
                            errors.push(
                                anyhow::Error::new(error)
                                    .context(format!("failed to create PVC {name}")),
                            );
                        }
                    }
                }
                Some(existing) if existing.metadata.deletion_timestamp.is_some() => {
                    errors.push(anyhow!("pvc {name} is being deleted"));
                }
                Some(_) => {}
            }
        }
        match aggregate(errors) {
            None => Ok(()),
            Some(error) => Err(error),
        }
    }
}

/// The writes a StatefulSet pass makes to its pods and claims (upstream
/// `StatefulPodControlObjectManager` behind `StatefulPodControl`): the pass takes any
/// implementation, [`StatefulPodControl`] against the API server, or the in-memory
/// `FakeStatefulPodControl` in table tests.
pub(super) trait StatefulPodControlInterface: Sync {
    /// Creates the pod's claims, then the pod.
    fn create_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Repairs the pod's identity, storage and claims' ownerReferences in place.
    fn update_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Deletes the pod.
    fn delete_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// Do the pod's existing claims carry the ownerReferences the retention policy asks
    /// for?
    fn claims_match_retention_policy(&self, set: &StatefulSet, pod: &Pod) -> bool;

    /// Gives the pod's claims the ownerReferences the retention policy asks for.
    fn update_pod_claim_for_retention_policy(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Is a claim of the pod still owned by an earlier pod of its ordinal?
    fn pod_claim_is_stale(&self, set: &StatefulSet, pod: &Pod) -> bool;

    /// Creates the claims a pending pod lacks.
    fn create_missing_persistent_volume_claims(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;
}

impl StatefulPodControlInterface for StatefulPodControl {
    fn create_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        StatefulPodControl::create_stateful_pod(self, set, pod)
    }

    fn update_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        StatefulPodControl::update_stateful_pod(self, set, pod)
    }

    fn delete_stateful_pod(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send {
        StatefulPodControl::delete_stateful_pod(self, set, pod)
    }

    fn claims_match_retention_policy(&self, set: &StatefulSet, pod: &Pod) -> bool {
        StatefulPodControl::claims_match_retention_policy(self, set, pod)
    }

    fn update_pod_claim_for_retention_policy(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        StatefulPodControl::update_pod_claim_for_retention_policy(self, set, pod)
    }

    fn pod_claim_is_stale(&self, set: &StatefulSet, pod: &Pod) -> bool {
        StatefulPodControl::pod_claim_is_stale(self, set, pod)
    }

    fn create_missing_persistent_volume_claims(
        &self,
        set: &StatefulSet,
        pod: &Pod,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        StatefulPodControl::create_missing_persistent_volume_claims(self, set, pod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn errors_read_as_go_prints_them() {
        let invalid = anyhow::Error::new(api_error(
            422,
            "Invalid",
            "PersistentVolumeClaim \"data-web-0\" is invalid: spec.accessModes: Required value",
        ))
        .context("failed to create PVC data-web-0");
        assert_eq!(
            go_text(&invalid),
            "failed to create PVC data-web-0: PersistentVolumeClaim \"data-web-0\" is invalid: spec.accessModes: Required value"
        );
        let combined = aggregate(vec![anyhow!("a"), anyhow!("b"), anyhow!("a")]).unwrap();
        assert_eq!(go_text(&combined), "[a, b]");
        let single = aggregate(vec![invalid]).unwrap();
        assert!(single
            .chain()
            .any(|c| c.downcast_ref::<kube::Error>().is_some()));
        assert!(aggregate(Vec::new()).is_none());
        assert!(is_already_exists(&api_error(
            409,
            "AlreadyExists",
            "exists"
        )));
        assert!(!is_already_exists(&api_error(409, "Conflict", "changed")));
        assert_eq!(title("create"), "Create");
    }
}

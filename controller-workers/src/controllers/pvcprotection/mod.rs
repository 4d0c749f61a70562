//! persistentvolumeclaim-protection-controller: a PersistentVolumeClaim keeps the
//! `kubernetes.io/pvc-protection` finalizer while a pod may still use it, so that deleting
//! a claim in use leaves it Terminating until its pods are gone (upstream
//! `pkg/controller/volume/pvcprotection/`).
//!
//! Keys are claims (`ns/name`, queue `pvcprotection`, one worker). A claim is queued when
//! it lacks the finalizer and is not being deleted (the API server's
//! StorageObjectInUseProtection admission adds it at create; this covers claims made
//! before that), or is being deleted with it. A pod queues the claims it names when it is
//! deleted, terminated, or not scheduled yet, since only then can it stop holding one.
//!
//! The sync puts the finalizer back on a claim that lacks it, and takes it off a deleted
//! claim no pod uses. "In use" is asked of the pod cache first (its claim index), and
//! when the cache says no, of a live list of the namespace's pods, since a pod using the
//! claim may not have reached the cache yet. A pod uses a claim once it is scheduled
//! (the kubelet refuses to start a pod whose claim is being deleted) and until it is
//! gone: in 1.29 a terminated pod that still exists keeps its claims. Only the claim of a
//! generic ephemeral volume is let go earlier, when its pod has been shut down (deleted
//! with no grace period left), and only if the pod owns it.

use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, PostParams};
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::store::{key_of, split_key, Store};
use crate::volume_util::{
    add_pvc_index, ephemeral_claim_is_for_pod, ephemeral_claim_name, is_deletion_candidate,
    is_pod_terminated, need_to_add_finalizer, pod_pvc_keys, PVC_INDEX, PVC_PROTECTION_FINALIZER,
};

pub const NAME: &str = "persistentvolumeclaim-protection-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the claims a scheduled pod uses and whether it is shut down.
pub const FIELDS: crate::projection::FieldList =
    &[("v1/pods", &["spec.nodeName", "spec.volumes", "status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/persistentvolumeclaims", "v1/pods"];
const QUEUE: &str = "pvcprotection";
/// Upstream runs one worker, not configurable.
const WORKERS: usize = 1;

/// Whether a claim's change puts it on the queue: it lacks the finalizer, or it is being
/// deleted and still holds it.
fn claim_needs_sync(claim: &PersistentVolumeClaim) -> bool {
    need_to_add_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER)
        || is_deletion_candidate(&claim.metadata, PVC_PROTECTION_FINALIZER)
}

/// The claims (`ns/name`) to look at again after a pod event. A pod that still exists,
/// is scheduled and is not terminated cannot free a claim, so it queues none.
fn claims_to_requeue(pod: &Pod, deleted: bool) -> Vec<String> {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .is_some_and(|node| !node.is_empty());
    if !deleted && !is_pod_terminated(pod) && scheduled {
        return Vec::new();
    }
    pod_pvc_keys(pod)
}

/// Whether the kubelet is done with a pod (deleted with a zero grace period, or forced):
/// it no longer holds the claim of its ephemeral volume, which also breaks a cycle where
/// a pod's finalizer waits for the claim and the claim for the pod.
fn pod_is_shut_down(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        && pod.metadata.deletion_grace_period_seconds == Some(0)
}

/// `podUsesPVC`: a scheduled pod names the claim in a `persistentVolumeClaim` volume, or
/// (while not shut down) has the generic ephemeral volume whose claim this is and owns it.
fn pod_uses_claim(pod: &Pod, claim: &PersistentVolumeClaim) -> bool {
    let Some(spec) = &pod.spec else {
        return false;
    };
    if spec.node_name.as_deref().unwrap_or_default().is_empty() {
        return false;
    }
    let claim_name = claim.name_str();
    spec.volumes.iter().flatten().any(|volume| {
        let named = volume
            .persistent_volume_claim
            .as_ref()
            .is_some_and(|source| source.claim_name == claim_name);
        let ephemeral = !pod_is_shut_down(pod)
            && volume.ephemeral.is_some()
            && ephemeral_claim_name(pod, volume) == claim_name
            && ephemeral_claim_is_for_pod(pod, claim).is_ok();
        named || ephemeral
    })
}

/// What a sync does to a claim.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    /// Being deleted with the finalizer: find out whether a pod uses it, and take the
    /// finalizer off if none does.
    ReleaseIfUnused,
    /// Not being deleted and without the finalizer: put it on.
    AddFinalizer,
    Nothing,
}

fn action_for(claim: &PersistentVolumeClaim) -> Action {
    if is_deletion_candidate(&claim.metadata, PVC_PROTECTION_FINALIZER) {
        Action::ReleaseIfUnused
    } else if need_to_add_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER) {
        Action::AddFinalizer
    } else {
        Action::Nothing
    }
}

pub(crate) struct Controller {
    client: kube::Client,
    claims: Store<PersistentVolumeClaim>,
    pods: Store<Pod>,
    queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let queue = context.queue(QUEUE);
    let claims = context.informers.get::<PersistentVolumeClaim>();
    let pods = context.informers.get::<Pod>();
    add_pvc_index(pods.store());
    let controller = Arc::new(Controller {
        client,
        claims: claims.store().clone(),
        pods: pods.store().clone(),
        queue: queue.clone(),
    });
    claims.handle(&controller, Controller::on_claim);
    pods.handle(&controller, Controller::on_pod);
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
        // A deleted claim needs nothing more.
        if let Some(claim) = change.live() {
            if claim_needs_sync(claim) {
                self.queue.add(key_of(&claim.metadata));
            }
        }
    }

    fn on_pod(&self, change: &Change<Pod>) {
        let keys = match change {
            Change::Added(pod) => claims_to_requeue(pod, false),
            Change::Updated { old, new } => {
                let mut keys = claims_to_requeue(new, false);
                // An update may hide the deletion of one pod and the creation of another
                // of the same name: the old one's claims may be free now.
                if old.metadata.uid != new.metadata.uid {
                    keys.extend(claims_to_requeue(old, true));
                }
                keys
            }
            Change::Deleted(deleted) => claims_to_requeue(deleted.object(), true),
        };
        for key in keys {
            self.queue.add(key);
        }
    }

    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(claim) = self.claims.get_in(namespace, name) else {
            debug!(controller = NAME, key, "claim not found, ignoring");
            return Ok(());
        };
        match action_for(&claim) {
            Action::ReleaseIfUnused => {
                if self.is_being_used(&claim).await? {
                    debug!(controller = NAME, key, "keeping the claim: a pod uses it");
                    return Ok(());
                }
                self.write_finalizers(&claim, |finalizers| {
                    finalizers.retain(|f| f != PVC_PROTECTION_FINALIZER)
                })
                .await
                .with_context(|| format!("removing the protection finalizer of claim {key}"))?;
                debug!(
                    controller = NAME,
                    key, "removed the protection finalizer: no pod uses the claim"
                );
            }
            Action::AddFinalizer => {
                self.write_finalizers(&claim, |finalizers| {
                    finalizers.push(PVC_PROTECTION_FINALIZER.to_string())
                })
                .await
                .with_context(|| format!("adding the protection finalizer to claim {key}"))?;
                debug!(controller = NAME, key, "added the protection finalizer");
            }
            Action::Nothing => {}
        }
        Ok(())
    }

    /// A PUT of the cached claim with its finalizers changed: a cache behind the server
    /// gets a conflict, and the key is tried again.
    async fn write_finalizers(
        &self,
        claim: &PersistentVolumeClaim,
        change: impl FnOnce(&mut Vec<String>),
    ) -> Result<(), kube::Error> {
        let mut updated = claim.clone();
        change(updated.metadata.finalizers.get_or_insert_with(Vec::new));
        let namespace = claim.namespace_str();
        let name = claim.name_str();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        api.replace(name, &PostParams::default(), &updated).await?;
        Ok(())
    }

    async fn is_being_used(&self, claim: &PersistentVolumeClaim) -> anyhow::Result<bool> {
        let key = key_of(&claim.metadata);
        let cached = self.pods.by_index(PVC_INDEX, &key);
        if cached.iter().any(|pod| pod_uses_claim(pod, claim)) {
            return Ok(true);
        }
        // The cache may not have the pod yet: only the server can say no for sure.
        let namespace = claim.namespace_str();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let live = api
            .list(&ListParams::default())
            .await
            .with_context(|| format!("live list of pods in namespace {namespace} failed"))?;
        let used = live.items.iter().any(|pod| pod_uses_claim(pod, claim));
        if !used {
            debug!(controller = NAME, key = %key, "the claim is unused");
        }
        Ok(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    fn claim(name: &str, value: Value) -> PersistentVolumeClaim {
        let mut object = json!({"metadata": {"name": name, "namespace": "ns"}});
        if let (Some(target), Some(extra)) = (object["metadata"].as_object_mut(), value.as_object())
        {
            target.extend(extra.clone());
        }
        serde_json::from_value(object).unwrap()
    }

    const DELETING: &str = "2024-01-01T00:00:00Z";

    /// A pod with a claim volume `data` -> `c1` and an ephemeral volume `scratch`.
    fn pod_with(node: Option<&str>, phase: &str, metadata: Value) -> Pod {
        let mut meta = json!({"name": "p", "namespace": "ns", "uid": "pod-uid"});
        if let (Some(target), Some(extra)) = (meta.as_object_mut(), metadata.as_object()) {
            target.extend(extra.clone());
        }
        let mut spec = json!({"containers": [{"name": "c", "image": "i"}], "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "c1"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "config", "configMap": {"name": "x"}},
        ]});
        if let Some(node) = node {
            spec["nodeName"] = json!(node);
        }
        pod(json!({"metadata": meta, "spec": spec, "status": {"phase": phase}}))
    }

    #[test]
    fn claims_are_queued_when_the_finalizer_is_missing_or_due_to_go() {
        let cases = [
            (json!({}), true),
            (json!({"finalizers": ["other"]}), true),
            (json!({"finalizers": [PVC_PROTECTION_FINALIZER]}), false),
            (
                json!({"finalizers": [PVC_PROTECTION_FINALIZER], "deletionTimestamp": DELETING}),
                true,
            ),
            (
                json!({"finalizers": ["other"], "deletionTimestamp": DELETING}),
                false,
            ),
        ];
        for (metadata, want) in cases {
            assert_eq!(
                claim_needs_sync(&claim("c", metadata.clone())),
                want,
                "{metadata}"
            );
        }
    }

    #[test]
    fn the_sync_adds_or_releases_the_finalizer() {
        let cases = [
            (json!({}), Action::AddFinalizer),
            (
                json!({"finalizers": [PVC_PROTECTION_FINALIZER]}),
                Action::Nothing,
            ),
            (
                json!({"finalizers": [PVC_PROTECTION_FINALIZER], "deletionTimestamp": DELETING}),
                Action::ReleaseIfUnused,
            ),
            // Being deleted without it: nothing to add back (the server would refuse).
            (
                json!({"finalizers": ["x"], "deletionTimestamp": DELETING}),
                Action::Nothing,
            ),
        ];
        for (metadata, want) in cases {
            assert_eq!(
                action_for(&claim("c", metadata.clone())),
                want,
                "{metadata}"
            );
        }
    }

    #[test]
    fn only_pods_that_may_free_a_claim_requeue_it() {
        let both = vec!["ns/c1".to_string(), "ns/p-scratch".to_string()];
        let running = pod_with(Some("n1"), "Running", json!({}));
        assert!(claims_to_requeue(&running, false).is_empty());
        assert_eq!(claims_to_requeue(&running, true), both, "deleted");
        let unscheduled = pod_with(None, "Pending", json!({}));
        assert_eq!(
            claims_to_requeue(&unscheduled, false),
            both,
            "not scheduled"
        );
        let finished = pod_with(Some("n1"), "Succeeded", json!({}));
        assert_eq!(claims_to_requeue(&finished, false), both, "terminated");
        let terminating = pod_with(
            Some("n1"),
            "Running",
            json!({"deletionTimestamp": DELETING}),
        );
        assert_eq!(
            claims_to_requeue(&terminating, false),
            both,
            "being deleted, no container running"
        );
    }

    fn owned_claim(owner_uid: &str) -> PersistentVolumeClaim {
        claim(
            "p-scratch",
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                        "uid": owner_uid, "controller": true}]}),
        )
    }

    #[test]
    fn who_uses_a_claim() {
        let named = claim("c1", json!({}));
        let other = claim("c2", json!({}));
        let running = pod_with(Some("n1"), "Running", json!({}));
        assert!(pod_uses_claim(&running, &named));
        assert!(!pod_uses_claim(&running, &other));
        // Not scheduled: the kubelet has not seen it, and will refuse a deleted claim.
        assert!(!pod_uses_claim(
            &pod_with(None, "Pending", json!({})),
            &named
        ));
        // 1.29: a terminated pod that still exists keeps its claims.
        assert!(pod_uses_claim(
            &pod_with(Some("n1"), "Succeeded", json!({})),
            &named
        ));
        assert!(pod_uses_claim(
            &pod_with(Some("n1"), "Failed", json!({})),
            &named
        ));
        // Shut down pods keep a named claim too: only ephemeral claims are let go.
        let shut_down = pod_with(
            Some("n1"),
            "Running",
            json!({"deletionTimestamp": DELETING, "deletionGracePeriodSeconds": 0}),
        );
        assert!(pod_uses_claim(&shut_down, &named));

        // Ephemeral: the pod's own claim only, until the pod is shut down.
        assert!(pod_uses_claim(&running, &owned_claim("pod-uid")));
        assert!(!pod_uses_claim(&running, &owned_claim("someone-else")));
        assert!(!pod_uses_claim(&running, &claim("p-scratch", json!({}))));
        assert!(!pod_uses_claim(&shut_down, &owned_claim("pod-uid")));
        let graceful = pod_with(
            Some("n1"),
            "Running",
            json!({"deletionTimestamp": DELETING, "deletionGracePeriodSeconds": 30}),
        );
        assert!(pod_uses_claim(&graceful, &owned_claim("pod-uid")));
        assert!(!pod_uses_claim(
            &pod_with(None, "Pending", json!({})),
            &owned_claim("pod-uid")
        ));
    }
}

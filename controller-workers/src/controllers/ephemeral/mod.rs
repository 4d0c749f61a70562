//! ephemeral-volume-controller: every generic ephemeral volume of a pod
//! (`volumes[].ephemeral`) gets its PersistentVolumeClaim `<pod>-<volume>`, made from the
//! volume's claim template and controlled by the pod, so the claim goes with the pod
//! through the garbage collector (upstream `pkg/controller/volume/ephemeral/`).
//!
//! Keys are pods (`ns/name`, queue `ephemeral_volume`,
//! `--concurrent-ephemeralvolume-syncs` workers). A pod is queued when it is added with an
//! ephemeral volume and not being deleted (its spec cannot change afterwards, and its
//! deletion takes the claims with it), and again when a claim one of its volumes names is
//! deleted, so the claim is made anew. A claim of that name that the pod does not control
//! is someone else's: the pod gets a Warning `FailedBinding` event, and the key is retried
//! with backoff, as any failed creation is.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};
use prometheus_client::metrics::counter::Counter;
use tracing::debug;

use crate::api_errors;
use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::Recorder;
use crate::store::{key_of, split_key, Store};
use crate::volume_util::{
    add_pvc_index, ephemeral_claim_is_for_pod, ephemeral_claim_name, PVC_INDEX,
};

pub const NAME: &str = "ephemeral-volume-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the pod's volumes (its generic ephemeral ones).
pub const FIELDS: crate::projection::FieldList = &[("v1/pods", &["spec.volumes"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &["v1/persistentvolumeclaims", "v1/pods"];
const QUEUE: &str = "ephemeral_volume";
/// The component of its events.
const EVENT_SOURCE: &str = "ephemeral_volume";
/// `events.FailedBinding`.
const FAILED_BINDING: &str = "FailedBinding";

/// The controller's flags (KCM's names and defaults), flattened into the worker's and the
/// launcher's command lines.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of ephemeral volume syncing operations that will be done concurrently.
    /// Larger number = faster ephemeral volume updating, but more CPU (and network) load
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub concurrent_ephemeralvolume_syncs: i32,
}

impl Options {
    /// KCM's check of the flag (made at start whichever controllers run).
    pub fn validate(&self) -> Result<(), String> {
        let syncs = self.concurrent_ephemeralvolume_syncs;
        if syncs < 1 {
            return Err(format!(
                "concurrent-ephemeralvolume-syncs must be greater than 0, but got {syncs}"
            ));
        }
        Ok(())
    }
}

/// Whether a pod needs its claims looked at: not being deleted, with an ephemeral volume.
fn pod_needs_claims(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .spec
            .iter()
            .flat_map(|spec| spec.volumes.iter().flatten())
            .any(|volume| volume.ephemeral.is_some())
}

/// The claim an ephemeral volume of `pod` gets: the template's labels, annotations and
/// spec, named `<pod>-<volume>`, controlled by the pod.
fn claim_for(pod: &Pod, volume: &Volume) -> Result<PersistentVolumeClaim, String> {
    let template = volume
        .ephemeral
        .as_ref()
        .and_then(|ephemeral| ephemeral.volume_claim_template.as_ref())
        .ok_or("the volume has no volumeClaimTemplate")?;
    let template_meta = template.metadata.clone().unwrap_or_default();
    Ok(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(ephemeral_claim_name(pod, volume)),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.name_str().to_string(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            annotations: template_meta.annotations,
            labels: template_meta.labels,
            ..Default::default()
        },
        spec: Some(template.spec.clone()),
        status: None,
    })
}

struct Metrics {
    /// Claim creations tried, successful or not.
    creates: Counter,
    /// Claim creations that failed.
    create_failures: Counter,
}

impl Metrics {
    fn register(metrics: &crate::metrics::Metrics) -> Metrics {
        let m = Metrics {
            creates: Counter::default(),
            create_failures: Counter::default(),
        };
        // The encoder adds the `_total` suffix of counters; the help is upstream's, typo
        // and all.
        metrics.register(
            "ephemeral_volume_controller_create",
            "Number of PersistenVolumeClaims creation requests",
            m.creates.clone(),
        );
        metrics.register(
            "ephemeral_volume_controller_create_failures",
            "Number of PersistenVolumeClaims creation requests",
            m.create_failures.clone(),
        );
        m
    }
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    pods: Store<Pod>,
    claims: Store<PersistentVolumeClaim>,
    queue: Arc<WorkQueue<String>>,
    metrics: Metrics,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    options.validate().map_err(crate::worker::UsageError)?;
    let workers = usize::try_from(options.concurrent_ephemeralvolume_syncs)?;
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let queue = context.queue(QUEUE);
    let pods = context.informers.get::<Pod>();
    let claims = context.informers.get::<PersistentVolumeClaim>();
    add_pvc_index(pods.store());
    let controller = Arc::new(Controller {
        client,
        recorder,
        pods: pods.store().clone(),
        claims: claims.store().clone(),
        queue: queue.clone(),
        metrics: Metrics::register(&context.metrics),
    });
    pods.handle(&controller, Controller::on_pod);
    claims.handle(&controller, Controller::on_claim);
    Ok(Runnable::new(
        NAME,
        queue,
        workers,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

impl Controller {
    /// Additions only: a pod's spec does not change, and its deletion takes its claims
    /// with it through their owner reference.
    fn on_pod(&self, change: &Change<Pod>) {
        if let Change::Added(pod) = change {
            self.enqueue(pod);
        }
    }

    /// A deleted claim is made again for the pods that still name it.
    fn on_claim(&self, change: &Change<PersistentVolumeClaim>) {
        if let Change::Deleted(deleted) = change {
            let key = key_of(&deleted.object().metadata);
            for pod in self.pods.by_index(PVC_INDEX, &key) {
                self.enqueue(&pod);
            }
        }
    }

    fn enqueue(&self, pod: &Pod) {
        if pod_needs_claims(pod) {
            self.queue.add(key_of(&pod.metadata));
        }
    }

    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(pod) = self.pods.get_in(namespace, name) else {
            debug!(controller = NAME, key, "nothing to do: the pod is gone");
            return Ok(());
        };
        if pod.metadata.deletion_timestamp.is_some() {
            debug!(
                controller = NAME,
                key, "nothing to do: the pod is being deleted"
            );
            return Ok(());
        }
        for volume in pod
            .spec
            .iter()
            .flat_map(|spec| spec.volumes.iter().flatten())
        {
            if let Err(error) = self.handle_volume(&pod, volume).await {
                self.recorder.event(
                    &*pod,
                    "Warning",
                    FAILED_BINDING,
                    format!("ephemeral volume {}: {error}", volume.name),
                );
                anyhow::bail!("pod {key}, ephemeral volume {}: {error}", volume.name);
            }
        }
        Ok(())
    }

    /// Makes sure the claim of one volume exists and belongs to the pod; the error is the
    /// sentence the event carries.
    async fn handle_volume(&self, pod: &Pod, volume: &Volume) -> Result<(), String> {
        if volume.ephemeral.is_none() {
            return Ok(());
        }
        let claim_name = ephemeral_claim_name(pod, volume);
        let namespace = pod.namespace_str();
        if let Some(existing) = self.claims.get_in(namespace, &claim_name) {
            ephemeral_claim_is_for_pod(pod, &existing)?;
            debug!(controller = NAME, volume = %volume.name, claim = %claim_name, "claim already created");
            return Ok(());
        }
        let claim = claim_for(pod, volume)?;
        self.metrics.creates.inc();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &claim).await {
            Ok(_) => {
                debug!(controller = NAME, volume = %volume.name, claim = %claim_name, "created the claim");
                Ok(())
            }
            Err(error) => {
                self.metrics.create_failures.inc();
                Err(format!(
                    "create PVC {claim_name}: {}",
                    api_errors::message(&error)
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(volumes: serde_json::Value, deleting: bool) -> Pod {
        let mut metadata = json!({"name": "p", "namespace": "ns", "uid": "u1"});
        if deleting {
            metadata["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({
            "metadata": metadata,
            "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": volumes},
        }))
        .unwrap()
    }

    fn scratch() -> serde_json::Value {
        json!({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
            "metadata": {"labels": {"app": "a"}, "annotations": {"note": "n"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                     "resources": {"requests": {"storage": "1Gi"}}},
        }}})
    }

    #[test]
    fn pods_with_ephemeral_volumes_are_queued_unless_deleting() {
        let claim = json!({"name": "d", "persistentVolumeClaim": {"claimName": "c"}});
        assert!(pod_needs_claims(&pod(
            json!([claim.clone(), scratch()]),
            false
        )));
        assert!(!pod_needs_claims(&pod(json!([scratch()]), true)));
        assert!(!pod_needs_claims(&pod(json!([claim]), false)));
        assert!(!pod_needs_claims(&pod(json!(null), false)));
    }

    #[test]
    fn the_claim_comes_from_the_template_and_is_controlled_by_the_pod() {
        let pod = pod(json!([scratch()]), false);
        let volume = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        let claim = serde_json::to_value(claim_for(&pod, volume).unwrap()).unwrap();
        assert_eq!(
            claim,
            json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": "p-scratch",
                    "labels": {"app": "a"},
                    "annotations": {"note": "n"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1",
                                         "controller": true, "blockOwnerDeletion": true}],
                },
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                         "resources": {"requests": {"storage": "1Gi"}}},
            })
        );
        // The claim it makes is one the pod accepts as its own.
        let mut created: PersistentVolumeClaim = serde_json::from_value(claim).unwrap();
        created.metadata.namespace = Some("ns".into());
        assert_eq!(ephemeral_claim_is_for_pod(&pod, &created), Ok(()));
    }

    #[test]
    fn a_volume_without_a_template_is_an_error_not_a_panic() {
        let pod = pod(json!([{"name": "scratch", "ephemeral": {}}]), false);
        let volume = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        assert_eq!(
            claim_for(&pod, volume).unwrap_err(),
            "the volume has no volumeClaimTemplate"
        );
    }

    #[test]
    fn the_flag_is_checked_as_kcm_does() {
        let options = |syncs| Options {
            concurrent_ephemeralvolume_syncs: syncs,
        };
        assert_eq!(options(5).validate(), Ok(()));
        assert_eq!(options(1).validate(), Ok(()));
        assert_eq!(
            options(0).validate(),
            Err("concurrent-ephemeralvolume-syncs must be greater than 0, but got 0".into())
        );
        assert_eq!(
            options(-3).validate(),
            Err("concurrent-ephemeralvolume-syncs must be greater than 0, but got -3".into())
        );
    }
}

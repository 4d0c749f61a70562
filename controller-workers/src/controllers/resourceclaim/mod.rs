//! resourceclaim-controller (feature gate `DynamicResourceAllocation`): a pod's claims
//! made from its `ResourceClaimTemplate`s (`resource.k8s.io/v1alpha2`), recorded in the
//! pod's `status.resourceClaimStatuses`; the claims of a scheduled pod reserved for it
//! (or, when still unallocated and delayed, its PodSchedulingContext made to select its
//! node); reservations of pods that are gone or done removed, a delayed claim left with
//! none asked to be deallocated, and a generated claim whose pod is done deleted
//! (upstream `pkg/controller/resourceclaim/`).
//!
//! One queue (`resource_claim`) of keys `pod:<ns>/<name>` and `claim:<ns>/<name>`, ten
//! workers as KCM (no flag). Pods are read in 1.29's shape (`types::ClaimPod`).

mod decide;
mod sync;
mod types;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::queue::WorkQueue;
use crate::recorder::Recorder;
use crate::store::{Store, CONTROLLER_UID_INDEX};

use decide::{claim_name, pod_needs_claims, ClaimName};
use types::{ClaimPod, PodSchedulingContext, ResourceClaim, ResourceClaimTemplate};

pub const NAME: &str = "resourceclaim-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// the pod's claims, its node and `status` (phase, resourceClaimStatuses).
pub const FIELDS: crate::projection::FieldList = &[(
    "v1/pods",
    &["spec.nodeName", "spec.resourceClaims", "status"],
)];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &[
    "resource.k8s.io/v1alpha2/podschedulingcontexts",
    "resource.k8s.io/v1alpha2/resourceclaims",
    "resource.k8s.io/v1alpha2/resourceclaimtemplates",
    "v1/pods",
];
const QUEUE: &str = "resource_claim";
/// The component of its events.
const EVENT_SOURCE: &str = "resource_claim";
/// `defaultResourceClaimControllerWorkers`.
const WORKERS: usize = 10;
/// The field manager of its pod status applies.
const FIELD_MANAGER: &str = "ResourceClaimController";
const CLAIM_PREFIX: &str = "claim:";
const POD_PREFIX: &str = "pod:";
/// Pods indexed by the claims they name (`<ns>/<claim>`).
const POD_CLAIM_INDEX: &str = "pod-resource-claim-index";
/// How many deleted pod UIDs are remembered.
const MAX_UID_CACHE_ENTRIES: usize = 500;
/// How long a claim this controller created is trusted before the informer shows it.
const CREATED_TTL: Duration = Duration::from_secs(3600);

struct Metrics {
    create_attempts: Counter,
    create_failures: Counter,
}

impl Metrics {
    fn register(metrics: &crate::metrics::Metrics) -> Metrics {
        let m = Metrics {
            create_attempts: Counter::default(),
            create_failures: Counter::default(),
        };
        // The encoder adds the `_total` suffix of counters.
        metrics.register(
            "resourceclaim_controller_create_attempts",
            "Number of ResourceClaims creation requests",
            m.create_attempts.clone(),
        );
        metrics.register(
            "resourceclaim_controller_create_failures",
            "Number of ResourceClaims creation request failures",
            m.create_failures.clone(),
        );
        m
    }
}

/// UIDs of pods seen deleted, the most recent [`MAX_UID_CACHE_ENTRIES`].
#[derive(Default)]
struct DeletedPods {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl DeletedPods {
    fn add(&mut self, uid: &str) {
        if uid.is_empty() || !self.set.insert(uid.to_string()) {
            return;
        }
        self.order.push_back(uid.to_string());
        if self.order.len() > MAX_UID_CACHE_ENTRIES {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
            }
        }
    }

    fn has(&self, uid: &str) -> bool {
        self.set.contains(uid)
    }
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    pods: Store<ClaimPod>,
    claims: Store<ResourceClaim>,
    templates: Store<ResourceClaimTemplate>,
    scheduling: Store<PodSchedulingContext>,
    queue: Arc<WorkQueue<String>>,
    metrics: Metrics,
    deleted_pods: Mutex<DeletedPods>,
    /// Claims created but perhaps not in the informer yet, by their pod's UID (upstream's
    /// mutation cache), so a quick second sync does not create another.
    created: Mutex<HashMap<String, Vec<(Instant, ResourceClaim)>>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let queue = context.queue(QUEUE);
    let pods = context.informers.get::<ClaimPod>();
    let claims = context.informers.get::<ResourceClaim>();
    let templates = context.informers.get::<ResourceClaimTemplate>();
    let scheduling = context.informers.get::<PodSchedulingContext>();
    pods.store().add_index(
        POD_CLAIM_INDEX,
        Arc::new(|pod: &ClaimPod| pod_claim_keys(pod)),
    );
    let controller = Arc::new(Controller {
        client,
        recorder,
        pods: pods.store().clone(),
        claims: claims.store().clone(),
        templates: templates.store().clone(),
        scheduling: scheduling.store().clone(),
        queue: queue.clone(),
        metrics: Metrics::register(&context.metrics),
        deleted_pods: Mutex::new(DeletedPods::default()),
        created: Mutex::new(HashMap::new()),
    });
    pods.handle(&controller, Controller::on_pod);
    claims.handle(&controller, Controller::on_claim);
    Ok(Runnable::new(
        NAME,
        queue,
        WORKERS,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

/// The `<ns>/<claim>` keys of the claims a pod names (`podResourceClaimIndexFunc`).
fn pod_claim_keys(pod: &ClaimPod) -> Vec<String> {
    let namespace = pod.namespace_str();
    pod.spec
        .resource_claims
        .iter()
        .filter_map(|claim| match claim_name(pod, claim) {
            ClaimName::Named { name, .. } => Some(format!("{namespace}/{name}")),
            _ => None,
        })
        .collect()
}

impl Controller {
    fn on_pod(&self, change: &Change<ClaimPod>) {
        match change {
            Change::Added(pod) | Change::Updated { new: pod, .. } => self.enqueue_pod(pod, false),
            Change::Deleted(deleted) => self.enqueue_pod(deleted.object(), true),
        }
    }

    fn enqueue_pod(&self, pod: &ClaimPod, deleted: bool) {
        if pod.spec.resource_claims.is_empty() {
            return;
        }
        let namespace = pod.namespace_str();
        if deleted {
            if let Some(uid) = &pod.metadata.uid {
                self.deleted_pods().add(uid);
            }
        }
        let (needs_claims, reason) = pod_needs_claims(pod, deleted);
        if !needs_claims {
            // Its claims may have reservations to drop, or be generated ones to delete.
            for claim in &pod.spec.resource_claims {
                if let ClaimName::Named { name, .. } = claim_name(pod, claim) {
                    debug!(controller = NAME, claim = %name, reason, "process claim");
                    self.queue.add(format!("{CLAIM_PREFIX}{namespace}/{name}"));
                }
            }
        }
        let (needs_work, reason) = self.pod_needs_work(pod);
        debug!(controller = NAME, pod = ?pod.metadata.name, needs_work, reason, "pod changed");
        if needs_work {
            let name = pod.name_str();
            self.queue.add(format!("{POD_PREFIX}{namespace}/{name}"));
        }
    }

    fn on_claim(&self, change: &Change<ResourceClaim>) {
        let claim = change.latest();
        let namespace = claim.namespace_str();
        let name = claim.name_str();
        if change.live().is_some() {
            self.queue.add(format!("{CLAIM_PREFIX}{namespace}/{name}"));
        }
        for pod in self
            .pods
            .by_index(POD_CLAIM_INDEX, &format!("{namespace}/{name}"))
        {
            self.enqueue_pod(&pod, false);
        }
    }

    fn deleted_pods(&self) -> std::sync::MutexGuard<'_, DeletedPods> {
        self.deleted_pods
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn created(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<(Instant, ResourceClaim)>>> {
        self.created
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Remembers a claim just created for the pod of `pod_uid`.
    fn remember_created(&self, pod_uid: &str, claim: ResourceClaim) {
        let mut created = self.created();
        created.retain(|_, claims| {
            claims.retain(|(at, _)| at.elapsed() < CREATED_TTL);
            !claims.is_empty()
        });
        created
            .entry(pod_uid.to_string())
            .or_default()
            .push((Instant::now(), claim));
    }

    /// The claims the pod of `pod_uid` controls: the informer's, and those created since
    /// that the informer does not show yet.
    fn claims_of_pod(&self, namespace: &str, pod_uid: &str) -> Vec<ResourceClaim> {
        let mut claims: Vec<ResourceClaim> = self
            .claims
            .by_index(CONTROLLER_UID_INDEX, pod_uid)
            .into_iter()
            .filter(|claim| {
                claim.metadata.namespace.as_deref() == Some(namespace)
                    && decide::owning_pod(claim).is_some()
            })
            .map(|claim| (*claim).clone())
            .collect();
        if let Some(created) = self.created().get(pod_uid) {
            for (at, claim) in created {
                let known = claims
                    .iter()
                    .any(|c| c.metadata.name == claim.metadata.name);
                if !known && at.elapsed() < CREATED_TTL {
                    claims.push(claim.clone());
                }
            }
        }
        claims
    }

    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let (prefix, object) = if let Some(object) = key.strip_prefix(POD_PREFIX) {
            (POD_PREFIX, object)
        } else if let Some(object) = key.strip_prefix(CLAIM_PREFIX) {
            (CLAIM_PREFIX, object)
        } else {
            anyhow::bail!("unexpected key: {key}");
        };
        let Some((namespace, name)) = object.split_once('/') else {
            anyhow::bail!("unexpected key format: {object:?}");
        };
        if prefix == POD_PREFIX {
            self.sync_pod(namespace, name).await
        } else {
            self.sync_claim(namespace, name).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deleted_pods_keep_the_latest_uids() {
        let mut deleted = DeletedPods::default();
        deleted.add("");
        assert!(!deleted.has(""));
        for i in 0..=MAX_UID_CACHE_ENTRIES {
            deleted.add(&format!("uid-{i}"));
        }
        deleted.add("uid-3");
        assert!(!deleted.has("uid-0"), "the oldest is forgotten");
        assert!(deleted.has("uid-1"));
        assert!(deleted.has(&format!("uid-{MAX_UID_CACHE_ENTRIES}")));
        assert_eq!(deleted.order.len(), MAX_UID_CACHE_ENTRIES);
    }

    #[test]
    fn pods_are_indexed_by_the_claims_they_name() {
        let pod: ClaimPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"resourceClaims": [
                {"name": "a", "source": {"resourceClaimName": "shared"}},
                {"name": "b", "source": {"resourceClaimTemplateName": "t"}},
                {"name": "c", "source": {"resourceClaimTemplateName": "t"}},
                {"name": "d", "source": {}},
            ]},
            "status": {"resourceClaimStatuses": [
                {"name": "b", "resourceClaimName": "p-b-x1z2q"},
                {"name": "c"},
            ]},
        }))
        .unwrap();
        assert_eq!(pod_claim_keys(&pod), vec!["ns/shared", "ns/p-b-x1z2q"]);
    }
}

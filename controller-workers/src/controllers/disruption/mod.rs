//! disruption-controller: keeps each PodDisruptionBudget's status current, so the
//! eviction API (`kubectl drain`) knows how many pods may go (upstream
//! `pkg/controller/disruption/`).
//!
//! For a PDB, the pods its selector matches in its namespace are counted: healthy ones
//! (Ready, not being deleted, not evicted moments ago), the expected count (with
//! `maxUnavailable` or a percentage `minAvailable`: the sum of the scales of the pods'
//! controllers — Deployment, ReplicaSet, ReplicationController, StatefulSet — counted once
//! each; with an integer `minAvailable`: the number of pods), the desired healthy count,
//! and `disruptionsAllowed`, with the `DisruptionAllowed` condition (SufficientPods,
//! InsufficientPods, or SyncFailed with the error when the count cannot be made).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::informer::Change;
use crate::meta::ResourceNames;
use crate::pods::is_pod_ready;
use crate::queue::WorkQueue;
use crate::recorder::{Recorder, NORMAL, WARNING};
use crate::selector::Selector;
use crate::store::{controller_of, key_of, split_key, Store};

pub const NAME: &str = "disruption-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// metadata and `status` (readiness, DisruptionTarget conditions).
pub const FIELDS: crate::projection::FieldList = &[("v1/pods", &["status"])];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &[
    "v1/pods",
    "policy/v1/poddisruptionbudgets",
    "apps/v1/replicasets",
    "apps/v1/deployments",
    "v1/replicationcontrollers",
    "apps/v1/statefulsets",
];
/// An evicted pod still present is not counted as healthy for this long.
const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

struct Controller {
    client: kube::Client,
    recorder: Recorder,
    budgets: Store<PodDisruptionBudget>,
    pods: Store<Pod>,
    replica_sets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    replication_controllers: Store<ReplicationController>,
    stateful_sets: Store<StatefulSet>,
    queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext) -> anyhow::Result<Runnable> {
    let (client, recorder) = context.client_and_recorder(NAME)?;
    let queue = context.queue("disruption");
    let budgets = context.informers.get::<PodDisruptionBudget>();
    let pods = context.informers.get::<Pod>();
    let controller = Arc::new(Controller {
        client,
        recorder,
        budgets: budgets.store().clone(),
        pods: pods.store().clone(),
        replica_sets: context.informers.get::<ReplicaSet>().store().clone(),
        deployments: context.informers.get::<Deployment>().store().clone(),
        replication_controllers: context
            .informers
            .get::<ReplicationController>()
            .store()
            .clone(),
        stateful_sets: context.informers.get::<StatefulSet>().store().clone(),
        queue: queue.clone(),
    });
    budgets.enqueue_changes(&queue);
    {
        let controller = controller.clone();
        pods.add_handler(Arc::new(move |change: &Change<Pod>| {
            if let Some(key) = controller.budget_for(change.latest()) {
                controller.queue.add(key);
            }
        }));
    }
    Ok(Runnable::new(
        NAME,
        queue,
        1,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    ))
}

fn selector_of(budget: &PodDisruptionBudget) -> Option<Selector> {
    Selector::from_label_selector(budget.spec.as_ref().and_then(|s| s.selector.as_ref())).ok()
}

/// `value` of `total`, a count or a percentage, rounded up (upstream's roundUp=true).
fn scaled(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(text) => {
            let percent: i64 = text
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {text:?}"))?;
            Ok(((percent * i64::from(total) + 99) / 100) as i32)
        }
    }
}

/// The counts that make a PDB's status.
#[derive(Debug, PartialEq)]
struct Counts {
    expected: i32,
    desired_healthy: i32,
    current_healthy: i32,
}

/// `disruptionsAllowed` and the DisruptionAllowed condition for the counts.
fn status_for(
    budget: &PodDisruptionBudget,
    counts: &Counts,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut allowed = (counts.current_healthy - counts.desired_healthy).max(0);
    if counts.expected <= 0 {
        allowed = 0;
    }
    let mut status = budget.status.clone().unwrap_or_default();
    status.current_healthy = counts.current_healthy;
    status.desired_healthy = counts.desired_healthy;
    status.expected_pods = counts.expected;
    status.disruptions_allowed = allowed;
    status.observed_generation = budget.metadata.generation;
    let (condition_status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    set_condition(&mut status, condition_status, reason, "", now);
    status
}

fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    value: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions
        .iter_mut()
        .find(|c| c.type_ == "DisruptionAllowed")
    {
        Some(existing)
            if existing.status == value
                && existing.reason == reason
                && existing.message == message => {}
        Some(existing) => {
            if existing.status != value {
                existing.last_transition_time = Time(now);
            }
            existing.status = value.into();
            existing.reason = reason.into();
            existing.message = message.into();
        }
        None => conditions.push(Condition {
            type_: "DisruptionAllowed".into(),
            status: value.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(now),
            observed_generation: None,
        }),
    }
}

impl Controller {
    /// The PDB covering `pod` (the first by name when several do, as upstream warns).
    fn budget_for(&self, pod: &Pod) -> Option<String> {
        let namespace = pod.namespace_str();
        let mut matching: Vec<Arc<PodDisruptionBudget>> = self
            .budgets
            .list_namespace(namespace)
            .into_iter()
            .filter(|b| selector_of(b).is_some_and(|s| s.matches(pod.metadata.labels.as_ref())))
            .collect();
        matching.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if matching.len() > 1 {
            self.recorder.event(
                pod,
                WARNING,
                "MultiplePodDisruptionBudgets",
                "Pod belongs to multiple PodDisruptionBudgets. Only one PodDisruptionBudget is allowed per pod".to_string(),
            );
        }
        matching.first().map(|b| key_of(&b.metadata))
    }

    /// The scale of a pod's controller: (controller UID, replicas).
    fn controller_scale(
        &self,
        namespace: &str,
        pod: &Pod,
    ) -> Result<Option<(String, i32)>, String> {
        let Some(reference) = controller_of(&pod.metadata) else {
            return Ok(None);
        };
        let replicas = |replicas: Option<i32>| replicas.unwrap_or(1);
        let found = match reference.kind.as_str() {
            "ReplicaSet" => self
                .replica_sets
                .referenced(namespace, reference)
                .and_then(|rs| {
                    // A ReplicaSet of a Deployment counts as the Deployment.
                    match controller_of(&rs.metadata).filter(|owner| owner.kind == "Deployment") {
                        Some(owner) => self.deployments.referenced(namespace, owner).map(|d| {
                            (
                                owner.uid.clone(),
                                replicas(d.spec.as_ref().and_then(|s| s.replicas)),
                            )
                        }),
                        None => Some((
                            reference.uid.clone(),
                            replicas(rs.spec.as_ref().and_then(|s| s.replicas)),
                        )),
                    }
                }),
            "ReplicationController" => self
                .replication_controllers
                .referenced(namespace, reference)
                .map(|rc| {
                    (
                        reference.uid.clone(),
                        replicas(rc.spec.as_ref().and_then(|s| s.replicas)),
                    )
                }),
            "StatefulSet" => self
                .stateful_sets
                .referenced(namespace, reference)
                .map(|s| {
                    (
                        reference.uid.clone(),
                        replicas(s.spec.as_ref().and_then(|s| s.replicas)),
                    )
                }),
            _ => None,
        };
        found
            .map(Some)
            .ok_or_else(|| format!("found no controllers for pod {:?}", pod.name_str()))
    }

    fn counts(
        &self,
        budget: &PodDisruptionBudget,
        pods: &[Arc<Pod>],
        now: Timestamp,
    ) -> Result<(Counts, Vec<String>), String> {
        let namespace = budget.namespace_str();
        let spec = budget.spec.clone().unwrap_or_default();
        let mut unmanaged = Vec::new();
        let mut expected_scale = || -> Result<i32, String> {
            let mut controllers: BTreeMap<String, i32> = BTreeMap::new();
            for pod in pods {
                match self.controller_scale(namespace, pod)? {
                    Some((uid, replicas)) => {
                        controllers.insert(uid, replicas);
                    }
                    None => unmanaged.push(pod.name_str().to_string()),
                }
            }
            Ok(controllers.values().sum())
        };
        let (expected, desired_healthy) = if let Some(max_unavailable) = &spec.max_unavailable {
            let expected = expected_scale()?;
            let max = scaled(max_unavailable, expected)?;
            (expected, (expected - max).max(0))
        } else if let Some(min_available) = &spec.min_available {
            match min_available {
                IntOrString::Int(n) => (pods.len() as i32, *n),
                percent => {
                    let expected = expected_scale()?;
                    (expected, scaled(percent, expected)?)
                }
            }
        } else {
            (pods.len() as i32, 0)
        };
        let disrupted = budget
            .status
            .as_ref()
            .and_then(|s| s.disrupted_pods.clone())
            .unwrap_or_default();
        let current_healthy = pods
            .iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter(|pod| {
                // Evicted a moment ago and not deleted yet: not healthy.
                let name = pod.name_str().to_string();
                disrupted
                    .get(&name)
                    .is_none_or(|at| at.0 + DELETION_TIMEOUT <= now)
            })
            .filter(|pod| is_pod_ready(pod))
            .count() as i32;
        Ok((
            Counts {
                expected,
                desired_healthy,
                current_healthy,
            },
            unmanaged,
        ))
    }

    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(budget) = self.budgets.get_in(namespace, name) else {
            return Ok(());
        };
        let now = Timestamp::now();
        let selector = selector_of(&budget).unwrap_or_else(Selector::nothing);
        let mut seen = HashSet::new();
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_namespace_labelled(namespace, |labels| selector.matches(labels))
            .into_iter()
            .filter(|pod| seen.insert(pod.metadata.uid.clone()))
            .collect();
        if pods.is_empty() {
            self.recorder
                .event(budget.as_ref(), NORMAL, "NoPods", "No matching pods found");
        }
        let status = match self.counts(&budget, &pods, now) {
            Ok((counts, unmanaged)) => {
                if !unmanaged.is_empty() {
                    debug!(pdb = key, ?unmanaged, "pods without a controller");
                    self.recorder.event(
                        budget.as_ref(),
                        WARNING,
                        "CalculateExpectedPodCountFailed",
                        format!(
                            "Pods selected by this PodDisruptionBudget (selector: {:?}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.",
                            budget.spec.as_ref().and_then(|s| s.selector.as_ref())
                        ),
                    );
                }
                status_for(&budget, &counts, now)
            }
            Err(error) => {
                // Fail safe: no disruption while the count cannot be made.
                self.recorder.event(
                    budget.as_ref(),
                    WARNING,
                    "CalculateExpectedPodCountFailed",
                    format!("Failed to calculate the number of expected pods: {error}"),
                );
                let mut status = budget.status.clone().unwrap_or_default();
                status.disruptions_allowed = 0;
                status.observed_generation = budget.metadata.generation;
                set_condition(&mut status, "False", "SyncFailed", &error, now);
                status
            }
        };
        // Forget evictions the API server has carried out, or that time out.
        let mut status = status;
        if let Some(disrupted) = status.disrupted_pods.as_mut() {
            let present: HashSet<String> = pods
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            disrupted.retain(|name, at| present.contains(name) && at.0 + DELETION_TIMEOUT > now);
            if let Some(next) = disrupted.values().map(|at| at.0 + DELETION_TIMEOUT).min() {
                let wait = next.as_nanosecond() - now.as_nanosecond();
                self.queue.add_after(
                    key.to_string(),
                    std::time::Duration::from_nanos(wait.max(0) as u64),
                );
            }
            if disrupted.is_empty() {
                status.disrupted_pods = None;
            }
        }
        if budget.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), namespace);
        let mut updated = budget.as_ref().clone();
        updated.status = Some(status);
        api.replace_status(name, &PostParams::default(), &updated)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up_and_allowed_disruptions_never_go_negative() {
        assert_eq!(scaled(&IntOrString::String("50%".into()), 3), Ok(2));
        assert_eq!(scaled(&IntOrString::String("10%".into()), 10), Ok(1));
        assert_eq!(scaled(&IntOrString::Int(2), 10), Ok(2));
        assert!(scaled(&IntOrString::String("half".into()), 10).is_err());
        let budget = PodDisruptionBudget::default();
        let now = Timestamp::from_second(1_000).unwrap();
        let status = status_for(
            &budget,
            &Counts {
                expected: 3,
                desired_healthy: 2,
                current_healthy: 3,
            },
            now,
        );
        assert_eq!(status.disruptions_allowed, 1);
        let condition = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "SufficientPods")
        );
        let status = status_for(
            &budget,
            &Counts {
                expected: 3,
                desired_healthy: 3,
                current_healthy: 2,
            },
            now,
        );
        assert_eq!(status.disruptions_allowed, 0);
        assert_eq!(
            status.conditions.as_ref().unwrap()[0].reason,
            "InsufficientPods"
        );
        let none_expected = status_for(
            &budget,
            &Counts {
                expected: 0,
                desired_healthy: 0,
                current_healthy: 2,
            },
            now,
        );
        assert_eq!(none_expected.disruptions_allowed, 0);
    }
}

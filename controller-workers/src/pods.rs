//! Pod predicates and the deletion ranking controllers share (upstream
//! `controller_utils.go` and `podutil`): which pods count as active, ready and available,
//! and which to delete first when scaling down.

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

/// Not Succeeded, not Failed, not being deleted.
pub fn is_pod_active(pod: &Pod) -> bool {
    let phase = phase(pod);
    phase != "Succeeded" && phase != "Failed" && pod.metadata.deletion_timestamp.is_none()
}

/// Being deleted and not finished yet (upstream `IsPodTerminating`).
pub fn is_pod_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !matches!(phase(pod), "Succeeded" | "Failed")
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        .unwrap_or_default()
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == "Ready")
}

pub fn is_pod_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|condition| condition.status == "True")
}

/// Ready for at least `min_ready_seconds` at `now`.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    let Some(condition) = ready_condition(pod).filter(|c| c.status == "True") else {
        return false;
    };
    if min_ready_seconds <= 0 {
        return true;
    }
    match &condition.last_transition_time {
        Some(since) => since.0 + SignedDuration::from_secs(i64::from(min_ready_seconds)) < now,
        None => false,
    }
}

fn ready_since(pod: &Pod) -> Option<Timestamp> {
    ready_condition(pod)
        .filter(|condition| condition.status == "True")
        .and_then(|condition| condition.last_transition_time.as_ref())
        .map(|time| time.0)
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .unwrap_or_default()
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.annotations()
        .get("controller.kubernetes.io/pod-deletion-cost")
        .and_then(|cost| cost.parse().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|status| status.container_statuses.as_ref())
        .map(|statuses| statuses.iter().map(|s| s.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

/// `a` after `b`, where a missing time counts as after every time.
fn after_or_missing(a: Option<Timestamp>, b: Option<Timestamp>) -> bool {
    match (a, b) {
        (None, _) => true,
        (_, None) => false,
        (Some(a), Some(b)) => a > b,
    }
}

/// Upstream's `ActivePodsWithRanks.Less`: the pod to delete first sorts first. `rank` is
/// the number of other ready pods of the same owner on the pod's node (doubled-up pods go
/// first). Pod deletion cost is honoured (the feature is on by default since 1.22);
/// logarithmic scale-down (default on since 1.22 too) compares ready and creation times
/// in powers of two of their age, ties broken by UID.
pub fn compare_for_deletion(a: (&Pod, usize), b: (&Pod, usize), now: Timestamp) -> Ordering {
    let less = |a: (&Pod, usize), b: (&Pod, usize)| -> bool {
        let (pa, ra) = a;
        let (pb, rb) = b;
        let (na, nb) = (node_name(pa), node_name(pb));
        if na != nb && (na.is_empty() || nb.is_empty()) {
            return na.is_empty();
        }
        if phase_ordinal(pa) != phase_ordinal(pb) {
            return phase_ordinal(pa) < phase_ordinal(pb);
        }
        if is_pod_ready(pa) != is_pod_ready(pb) {
            return !is_pod_ready(pa);
        }
        if deletion_cost(pa) != deletion_cost(pb) {
            return deletion_cost(pa) < deletion_cost(pb);
        }
        if ra != rb {
            return ra > rb;
        }
        let uid = |pod: &Pod| pod.metadata.uid.clone().unwrap_or_default();
        if is_pod_ready(pa) && is_pod_ready(pb) {
            let (ta, tb) = (ready_since(pa), ready_since(pb));
            if ta != tb {
                return match (ta, tb) {
                    (Some(ta), Some(tb)) => match log_rank(ta, now).cmp(&log_rank(tb, now)) {
                        Ordering::Equal => uid(pa) < uid(pb),
                        order => order == Ordering::Less,
                    },
                    _ => after_or_missing(ta, tb),
                };
            }
        }
        if max_restarts(pa) != max_restarts(pb) {
            return max_restarts(pa) > max_restarts(pb);
        }
        let created = |pod: &Pod| pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let (ca, cb) = (created(pa), created(pb));
        if ca != cb {
            return match (ca, cb) {
                (Some(ca), Some(cb)) => match log_rank(ca, now).cmp(&log_rank(cb, now)) {
                    Ordering::Equal => uid(pa) < uid(pb),
                    order => order == Ordering::Less,
                },
                _ => after_or_missing(ca, cb),
            };
        }
        false
    };
    if less(a, b) {
        Ordering::Less
    } else if less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// floor(log2(age in nanoseconds)), -1 for a time not in the past.
fn log_rank(time: Timestamp, now: Timestamp) -> i64 {
    let age = now.as_nanosecond() - time.as_nanosecond();
    if age <= 0 {
        -1
    } else {
        (age as f64).log2() as i64
    }
}

/// The pod store index by `spec.nodeName` (controllers that follow nodes to their pods).
pub(crate) const BY_NODE: &str = "spec.nodeName";

/// Adds the [`BY_NODE`] index to a pod store (controllers sharing the store may each ask;
/// the index is built once).
pub(crate) fn index_by_node(pods: &crate::store::Store<Pod>) {
    pods.add_index(
        BY_NODE,
        std::sync::Arc::new(|pod: &Pod| {
            pod.spec
                .as_ref()
                .and_then(|spec| spec.node_name.clone())
                .filter(|name| !name.is_empty())
                .into_iter()
                .collect()
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn pod(name: &str, node: &str, phase: &str, ready: Option<i64>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.uid = Some(name.into());
        pod.spec = Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.into()),
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            phase: Some(phase.into()),
            conditions: ready.map(|secs| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(Timestamp::from_second(secs).unwrap())),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        pod
    }

    #[test]
    fn deletion_order_prefers_unassigned_pending_unready_then_newest_ready() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let mut pods = [
            (pod("old-ready", "n1", "Running", Some(1_000)), 0),
            (pod("running-unready", "n1", "Running", None), 0),
            (pod("pending", "n1", "Pending", None), 0),
            (pod("unassigned", "", "Pending", None), 0),
            (pod("new-ready", "n1", "Running", Some(999_990)), 0),
        ];
        pods.sort_by(|a, b| compare_for_deletion((&a.0, a.1), (&b.0, b.1), now));
        let names: Vec<_> = pods
            .iter()
            .map(|(p, _)| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "unassigned",
                "pending",
                "running-unready",
                "new-ready",
                "old-ready"
            ]
        );
    }

    #[test]
    fn doubled_up_pods_go_first_and_cost_wins_over_rank() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let a = pod("a", "n1", "Running", Some(5));
        let b = pod("b", "n2", "Running", Some(5));
        assert_eq!(compare_for_deletion((&a, 2), (&b, 0), now), Ordering::Less);
        let mut expensive = a.clone();
        expensive.metadata.annotations = Some(
            [(
                "controller.kubernetes.io/pod-deletion-cost".to_string(),
                "100".to_string(),
            )]
            .into(),
        );
        assert_eq!(
            compare_for_deletion((&expensive, 2), (&b, 0), now),
            Ordering::Greater
        );
    }

    #[test]
    fn availability_needs_min_ready_seconds() {
        let now = Timestamp::from_second(1_000).unwrap();
        let p = pod("p", "n", "Running", Some(995));
        assert!(is_pod_available(&p, 0, now));
        assert!(is_pod_available(&p, 4, now));
        assert!(!is_pod_available(&p, 10, now));
        assert!(!is_pod_available(&pod("q", "n", "Running", None), 0, now));
    }
}

//! The order in which the job controller removes active pods (upstream's plain
//! `controller.ActivePods` sort, without the ranks and logarithmic buckets the ReplicaSet
//! controller uses): the pod sorted first is removed first, and among pods of one
//! completion index the one sorted last is kept.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::pods::{is_pod_ready, phase};

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .unwrap_or_default()
}

/// Pending before Unknown before Running; any other phase ranks with Pending, as a
/// missing entry of upstream's ordinal map does.
fn phase_rank(pod: &Pod) -> u8 {
    match phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// When the pod became ready (`None`, the zero time, when not ready or not recorded).
fn ready_time(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|status| status.container_statuses.as_ref())
        .and_then(|statuses| statuses.iter().map(|s| s.restart_count).max())
        .unwrap_or(0)
        .max(0)
}

fn created(pod: &Pod) -> Option<Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// `a` sorts before `b` by time: a zero time first, then the later time.
fn later_or_zero(a: Option<Timestamp>, b: Option<Timestamp>) -> bool {
    match (a, b) {
        (None, _) => true,
        (_, None) => false,
        (Some(a), Some(b)) => a > b,
    }
}

/// Whether `a` is removed before `b`: unscheduled before scheduled, by phase, not ready
/// before ready, ready more recently first, more container restarts first, created more
/// recently first.
fn removed_before(a: &Pod, b: &Pod) -> bool {
    let (node_a, node_b) = (node_name(a), node_name(b));
    if node_a != node_b && (node_a.is_empty() || node_b.is_empty()) {
        return node_a.is_empty();
    }
    if phase_rank(a) != phase_rank(b) {
        return phase_rank(a) < phase_rank(b);
    }
    if is_pod_ready(a) != is_pod_ready(b) {
        return !is_pod_ready(a);
    }
    if is_pod_ready(a) && is_pod_ready(b) {
        let (ready_a, ready_b) = (ready_time(a), ready_time(b));
        if ready_a != ready_b {
            return later_or_zero(ready_a, ready_b);
        }
    }
    if max_restarts(a) != max_restarts(b) {
        return max_restarts(a) > max_restarts(b);
    }
    let (created_a, created_b) = (created(a), created(b));
    if created_a != created_b {
        return later_or_zero(created_a, created_b);
    }
    false
}

fn compare(a: &Pod, b: &Pod) -> Ordering {
    if removed_before(a, b) {
        Ordering::Less
    } else if removed_before(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// Sorts `pods` so that the first to remove comes first (ties keep their order).
pub(super) fn sort_for_removal(pods: &mut [Arc<Pod>]) {
    pods.sort_by(|a, b| compare(a, b));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::fixtures::{now, pod};
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::SignedDuration;

    fn ago(seconds: i64) -> Option<Time> {
        Some(Time(now() - SignedDuration::from_secs(seconds)))
    }

    fn ready_since(mut pod: Pod, seconds: i64) -> Pod {
        let status = pod.status.get_or_insert_with(PodStatus::default);
        status.conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: ago(seconds),
            ..PodCondition::default()
        }]);
        pod
    }

    fn restarted(mut pod: Pod, count: i32) -> Pod {
        let status = pod.status.get_or_insert_with(PodStatus::default);
        status.container_statuses = Some(vec![ContainerStatus {
            name: "main".into(),
            restart_count: count,
            ..ContainerStatus::default()
        }]);
        pod
    }

    fn created_ago(mut pod: Pod, seconds: i64) -> Pod {
        pod.metadata.creation_timestamp = ago(seconds);
        pod
    }

    fn plain(name: &str, phase: &str) -> Pod {
        Arc::unwrap_or_clone(pod(name, phase).on_node().build())
    }

    /// Each case: two pods, the first of which upstream's ActivePods removes first.
    #[test]
    fn the_pod_removed_first_sorts_first() {
        let cases: Vec<(&str, Pod, Pod)> = vec![
            (
                "unscheduled before scheduled, whatever the phase",
                Arc::unwrap_or_clone(pod("a", "Running").build()),
                plain("b", "Pending"),
            ),
            (
                "pending before unknown",
                plain("a", "Pending"),
                plain("b", "Unknown"),
            ),
            (
                "unknown before running",
                plain("a", "Unknown"),
                plain("b", "Running"),
            ),
            (
                "not ready before ready",
                plain("a", "Running"),
                ready_since(plain("b", "Running"), 10),
            ),
            (
                "ready more recently first",
                ready_since(plain("a", "Running"), 5),
                ready_since(plain("b", "Running"), 50),
            ),
            (
                "more restarts first",
                restarted(plain("a", "Running"), 3),
                restarted(plain("b", "Running"), 1),
            ),
            (
                "no creation time first",
                plain("a", "Running"),
                created_ago(plain("b", "Running"), 5),
            ),
            (
                "created more recently first",
                created_ago(plain("a", "Running"), 5),
                created_ago(plain("b", "Running"), 50),
            ),
            (
                "the phase before readiness",
                ready_since(plain("a", "Pending"), 5),
                plain("b", "Running"),
            ),
        ];
        for (name, first, second) in cases {
            assert_eq!(compare(&first, &second), Ordering::Less, "{name}");
            assert_eq!(compare(&second, &first), Ordering::Greater, "{name}");
            let mut pods = vec![Arc::new(second), Arc::new(first)];
            sort_for_removal(&mut pods);
            assert_eq!(pods[0].metadata.name.as_deref(), Some("a"), "{name}");
        }
        assert_eq!(
            compare(&plain("a", "Running"), &plain("b", "Running")),
            Ordering::Equal,
            "alike pods tie (no ranking by name or UID)"
        );
    }
}

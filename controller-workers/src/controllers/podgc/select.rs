//! Which pods each step of a pass force-deletes, as plain functions of the pods and nodes
//! the stores hold (upstream's `gcTerminated`, `gcTerminating`, `gcOrphaned` and
//! `gcUnscheduledTerminating` filters, and their `byEvictionAndCreationTimestamp` order).

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::meta::ResourceNames;
use crate::pods::phase;

/// The taint that says the node is shut down for good (`v1.TaintNodeOutOfService`).
pub(super) const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// Not Pending, Running or Unknown (so a pod without a phase counts, as upstream's).
pub(super) fn is_terminated(pod: &Pod) -> bool {
    !matches!(phase(pod), "Pending" | "Running" | "Unknown")
}

/// It has a deletionTimestamp, whatever its phase.
fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Failed with reason `Evicted`, as the kubelet's eviction manager leaves a pod.
pub(super) fn is_evicted(pod: &Pod) -> bool {
    phase(pod) == "Failed"
        && pod
            .status
            .as_ref()
            .and_then(|status| status.reason.as_deref())
            == Some("Evicted")
}

pub(super) fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .unwrap_or_default()
}

/// The order pods are deleted in: evicted pods first (so that pods finished on their own,
/// often kept by their controllers, go last), then the oldest, then by name.
pub(super) fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    let created = |pod: &Pod| pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let name = |pod: &Pod| pod.name_str().to_string();
    let namespace = |pod: &Pod| pod.namespace_str().to_string();
    is_evicted(b)
        .cmp(&is_evicted(a))
        .then_with(|| created(a).cmp(&created(b)))
        .then_with(|| name(a).cmp(&name(b)))
        // Upstream leaves pods of one name and age in two namespaces unordered.
        .then_with(|| namespace(a).cmp(&namespace(b)))
}

/// Step 1: the terminated pods beyond `threshold`, in deletion order; none when the
/// threshold is 0 or less (that step is off).
pub(super) fn terminated_beyond(pods: &[Arc<Pod>], threshold: i32) -> Vec<Arc<Pod>> {
    let Ok(threshold) = usize::try_from(threshold) else {
        return Vec::new();
    };
    if threshold == 0 {
        return Vec::new();
    }
    let mut terminated: Vec<Arc<Pod>> = pods
        .iter()
        .filter(|pod| is_terminated(pod))
        .cloned()
        .collect();
    let excess = terminated.len().saturating_sub(threshold);
    if excess == 0 {
        return Vec::new();
    }
    terminated.sort_by(|a, b| deletion_order(a, b));
    terminated.truncate(excess);
    terminated
}

/// `Ready` is `True` (upstream's `nodeutil.IsNodeReady`).
pub(super) fn is_node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|condition| condition.type_ == "Ready" && condition.status == "True")
}

fn is_out_of_service(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .into_iter()
        .flatten()
        .any(|taint| taint.key == OUT_OF_SERVICE_TAINT)
}

/// Step 2: pods being deleted on a node the cache holds that is not Ready and carries the
/// out-of-service taint (any effect), in deletion order. `node` looks a node up in the
/// cache; a pod whose node it does not find is left alone.
pub(super) fn terminating_out_of_service(
    pods: &[Arc<Pod>],
    node: impl Fn(&str) -> Option<Arc<Node>>,
) -> Vec<Arc<Pod>> {
    let mut doomed: Vec<Arc<Pod>> = pods
        .iter()
        .filter(|pod| is_terminating(pod))
        .filter(|pod| {
            node(node_name(pod))
                .is_some_and(|node| !is_node_ready(&node) && is_out_of_service(&node))
        })
        .cloned()
        .collect();
    doomed.sort_by(|a, b| deletion_order(a, b));
    doomed
}

/// Step 3, first half: the nodes pods are bound to that the cache does not hold (each
/// waits out the quarantine before a live check).
pub(super) fn missing_nodes(pods: &[Arc<Pod>], existing: &HashSet<&str>) -> BTreeSet<String> {
    pods.iter()
        .map(|pod| node_name(pod))
        .filter(|node| !node.is_empty() && !existing.contains(node))
        .map(str::to_string)
        .collect()
}

/// Step 3, second half: the pods bound to a node found deleted.
pub(super) fn bound_to(pods: &[Arc<Pod>], deleted: &HashSet<String>) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|pod| deleted.contains(node_name(pod)))
        .cloned()
        .collect()
}

/// Step 4: pods being deleted that were never bound to a node.
pub(super) fn unscheduled_terminating(pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|pod| is_terminating(pod) && node_name(pod).is_empty())
        .cloned()
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    /// A pod from its name, phase, creation second and node (`""`: unbound).
    pub(crate) fn pod(name: &str, phase: &str, created: i64, node: &str) -> Arc<Pod> {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": phase},
        }))
        .unwrap();
        pod.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        if !node.is_empty() {
            pod.spec.as_mut().unwrap().node_name = Some(node.into());
        }
        Arc::new(pod)
    }

    pub(crate) fn evicted(pod: Arc<Pod>) -> Arc<Pod> {
        let mut pod = (*pod).clone();
        pod.status.as_mut().unwrap().reason = Some("Evicted".into());
        Arc::new(pod)
    }

    pub(crate) fn terminating(pod: Arc<Pod>) -> Arc<Pod> {
        let mut pod = (*pod).clone();
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(1_000).unwrap()));
        Arc::new(pod)
    }

    /// A node with its Ready status and taint keys.
    pub(crate) fn node(name: &str, ready: &str, taints: &[&str]) -> Arc<Node> {
        let taints: Vec<_> = taints
            .iter()
            .map(|key| serde_json::json!({"key": key, "effect": "NoExecute"}))
            .collect();
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"taints": taints},
                "status": {"conditions": [{"type": "Ready", "status": ready}]},
            }))
            .unwrap(),
        )
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter().map(|pod| pod.name_str()).collect()
    }

    #[test]
    fn terminated_means_not_pending_running_or_unknown() {
        for (phase, terminated) in [
            ("Pending", false),
            ("Running", false),
            ("Unknown", false),
            ("Succeeded", true),
            ("Failed", true),
            ("", true),
        ] {
            assert_eq!(
                is_terminated(&pod("p", phase, 0, "n")),
                terminated,
                "{phase:?}"
            );
        }
    }

    #[test]
    fn evicted_first_then_oldest_then_by_name() {
        let mut pods = vec![
            pod("young", "Succeeded", 30, "n"),
            pod("b-same-age", "Failed", 20, "n"),
            pod("a-same-age", "Succeeded", 20, "n"),
            evicted(pod("evicted-young", "Failed", 40, "n")),
            pod("old", "Failed", 10, "n"),
            evicted(pod("evicted-old", "Failed", 5, "n")),
        ];
        // `Evicted` on a pod that did not fail is no eviction.
        let mut not_failed = (*pod("running-evicted", "Succeeded", 1, "n")).clone();
        not_failed.status.as_mut().unwrap().reason = Some("Evicted".into());
        pods.push(Arc::new(not_failed));
        pods.sort_by(|a, b| deletion_order(a, b));
        assert_eq!(
            names(&pods),
            [
                "evicted-old",
                "evicted-young",
                "running-evicted",
                "old",
                "a-same-age",
                "b-same-age",
                "young"
            ]
        );
    }

    #[test]
    fn terminated_pods_beyond_the_threshold() {
        let pods = vec![
            pod("running", "Running", 1, "n"),
            pod("p3", "Succeeded", 30, "n"),
            pod("p1", "Succeeded", 10, "n"),
            evicted(pod("evicted", "Failed", 50, "n")),
            pod("p2", "Failed", 20, "n"),
            pod("pending", "Pending", 2, "n"),
        ];
        type Case = (i32, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            (4, vec![]),
            (5, vec![]),
            (3, vec!["evicted"]),
            (2, vec!["evicted", "p1"]),
            (1, vec!["evicted", "p1", "p2"]),
            // 0 or less turns the step off.
            (0, vec![]),
            (-1, vec![]),
        ];
        for (threshold, want) in cases {
            assert_eq!(
                names(&terminated_beyond(&pods, threshold)),
                want,
                "threshold {threshold}"
            );
        }
    }

    #[test]
    fn out_of_service_needs_a_terminating_pod_a_not_ready_node_and_the_taint() {
        let nodes = [
            node("down-tainted", "False", &[OUT_OF_SERVICE_TAINT]),
            node(
                "unknown-tainted",
                "Unknown",
                &["other", OUT_OF_SERVICE_TAINT],
            ),
            node("ready-tainted", "True", &[OUT_OF_SERVICE_TAINT]),
            node(
                "down-untainted",
                "False",
                &["node.kubernetes.io/unreachable"],
            ),
        ];
        let lookup = |name: &str| {
            nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(name))
                .cloned()
        };
        let pods = vec![
            terminating(pod("b", "Running", 20, "down-tainted")),
            terminating(pod("a", "Running", 10, "unknown-tainted")),
            pod("not-terminating", "Running", 1, "down-tainted"),
            terminating(pod("on-ready", "Running", 1, "ready-tainted")),
            terminating(pod("untainted", "Running", 1, "down-untainted")),
            terminating(pod("node-not-cached", "Running", 1, "gone")),
            terminating(pod("unbound", "Pending", 1, "")),
        ];
        assert_eq!(
            names(&terminating_out_of_service(&pods, lookup)),
            ["a", "b"]
        );
    }

    #[test]
    fn orphans_are_the_pods_of_nodes_the_cache_does_not_hold() {
        let pods = vec![
            pod("on-live", "Running", 1, "live"),
            pod("on-ghost", "Running", 1, "ghost"),
            pod("done-on-ghost", "Succeeded", 1, "ghost"),
            pod("on-other", "Running", 1, "other-ghost"),
            pod("unbound", "Pending", 1, ""),
        ];
        let existing = HashSet::from(["live"]);
        assert_eq!(
            missing_nodes(&pods, &existing)
                .into_iter()
                .collect::<Vec<_>>(),
            ["ghost", "other-ghost"]
        );
        let deleted = HashSet::from(["ghost".to_string()]);
        assert_eq!(
            names(&bound_to(&pods, &deleted)),
            ["on-ghost", "done-on-ghost"]
        );
    }

    #[test]
    fn unscheduled_terminating_pods() {
        let pods = vec![
            terminating(pod("deleted-unbound", "Pending", 1, "")),
            pod("unbound", "Pending", 1, ""),
            terminating(pod("deleted-bound", "Running", 1, "n")),
        ];
        assert_eq!(names(&unscheduled_terminating(&pods)), ["deleted-unbound"]);
    }
}

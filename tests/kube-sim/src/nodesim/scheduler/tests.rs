use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::*;

fn node(name: &str, extra: serde_json::Value) -> Node {
    let mut n = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": "a"}},
        "spec": {},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "3"}}});
    json_patch::merge(&mut n, &extra);
    serde_json::from_value(n).unwrap()
}

fn pod(extra: serde_json::Value) -> Pod {
    let mut p = json!({"metadata": {"name": "p", "namespace": "d", "uid": "u1"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}});
    json_patch::merge(&mut p, &extra);
    serde_json::from_value(p).unwrap()
}

fn run(p: &Pod, nodes: &[Node], usage: &[(&str, NodeUsage)]) -> Result<String, String> {
    let refs: Vec<&Node> = nodes.iter().collect();
    let usage = usage
        .iter()
        .map(|(n, u)| (n.to_string(), u.clone()))
        .collect();
    schedule(p, &refs, &usage)
}

#[test]
fn spreads_to_the_least_requested_node() {
    let nodes = [node("n1", json!({})), node("n2", json!({}))];
    let mut busy = NodeUsage::default();
    busy.add(&pod_requests(&pod(json!({}))));
    assert_eq!(
        run(&pod(json!({})), &nodes, &[("n1", busy)]),
        Ok("n2".into())
    );
    assert_eq!(
        run(&pod(json!({})), &nodes, &[]),
        Ok("n1".into()),
        "ties go by name"
    );
}

#[test]
fn requests_beyond_allocatable_do_not_fit() {
    let nodes = [node("n1", json!({}))];
    let big = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "3"}}}]}}),
    );
    assert_eq!(
        run(&big, &nodes, &[]),
        Err("0/1 nodes are available: 1 Insufficient cpu.".into())
    );
    let mut full = NodeUsage::default();
    for _ in 0..3 {
        full.add(&Resources::new());
    }
    assert_eq!(
        run(&pod(json!({})), &nodes, &[("n1", full)]),
        Err("0/1 nodes are available: 1 Too many pods.".into())
    );
    let gpu = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"example.com/gpu": "1"}}}]}}),
    );
    assert_eq!(
        run(&gpu, &nodes, &[]),
        Err("0/1 nodes are available: 1 Insufficient example.com/gpu.".into())
    );
}

#[test]
fn init_containers_and_sidecars_count_as_upstream_counts_them() {
    let p = pod(json!({"spec": {
        "initContainers": [
            {"name": "side", "image": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "init", "image": "i", "resources": {"requests": {"cpu": "2"}}}],
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m"}}}],
        "overhead": {"cpu": "10m"}}}));
    assert_eq!(pod_requests(&p).get("cpu"), Some(&2110));
}

#[test]
fn node_selector_and_required_affinity() {
    let nodes = [
        node("n1", json!({})),
        node(
            "n2",
            json!({"metadata": {"labels": {"disk": "ssd", "gen": "5"}}}),
        ),
    ];
    let sel = pod(json!({"spec": {"nodeSelector": {"disk": "ssd"}}}));
    assert_eq!(run(&sel, &nodes, &[]), Ok("n2".into()));
    let none = pod(json!({"spec": {"nodeSelector": {"disk": "floppy"}}}));
    assert_eq!(
        run(&none, &nodes, &[]),
        Err("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.".into())
    );
    let gt = pod(
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}]}}}}}),
    );
    assert_eq!(run(&gt, &nodes, &[]), Ok("n2".into()));
    let not_in = pod(
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}]}}}}}),
    );
    assert_eq!(run(&not_in, &nodes, &[]), Ok("n1".into()));
    let empty_term = pod(
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{}]}}}}}),
    );
    assert!(
        run(&empty_term, &nodes, &[]).is_err(),
        "an empty term selects nothing"
    );
}

#[test]
fn daemonset_pods_name_their_node_with_match_fields() {
    let nodes = [node("n1", json!({})), node("n2", json!({}))];
    let ds = pod(
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}}}),
    );
    assert_eq!(run(&ds, &nodes, &[]), Ok("n2".into()));
    let other_field = pod(
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n2"]}]}]}}}}}),
    );
    assert!(run(&other_field, &nodes, &[]).is_err());
}

#[test]
fn taints_need_tolerations_and_cordoned_nodes_are_skipped() {
    let tainted = node(
        "n1",
        json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}}),
    );
    let noexec = node(
        "n2",
        json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}}),
    );
    let soft = node(
        "n3",
        json!({"spec": {"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}}),
    );
    let cordoned = node("n4", json!({"spec": {"unschedulable": true}}));
    let all = [tainted.clone(), noexec.clone(), cordoned.clone()];
    assert_eq!(
        run(&pod(json!({})), &all, &[]),
        Err("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable.".into())
    );
    assert_eq!(
        run(&pod(json!({})), &[soft], &[]),
        Ok("n3".into()),
        "PreferNoSchedule does not filter"
    );
    let tolerant = pod(
        json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}}),
    );
    assert_eq!(
        run(&tolerant, std::slice::from_ref(&tainted), &[]),
        Ok("n1".into())
    );
    let wrong_value = pod(json!({"spec": {"tolerations": [{"key": "dedicated", "value": "cpu"}]}}));
    assert!(run(&wrong_value, std::slice::from_ref(&tainted), &[]).is_err());
    let everything = pod(json!({"spec": {"tolerations": [{"operator": "Exists"}]}}));
    assert_eq!(
        run(&everything, &[cordoned], &[]),
        Ok("n4".into()),
        "tolerating everything includes the cordon"
    );
    assert_eq!(run(&everything, &[noexec], &[]), Ok("n2".into()));
}

#[test]
fn no_nodes_and_what_is_pending() {
    assert_eq!(
        run(&pod(json!({})), &[], &[]),
        Err("no nodes available to schedule pods".into())
    );
    assert!(is_pending(&pod(json!({}))));
    assert!(!is_pending(&pod(json!({"spec": {"nodeName": "n1"}}))));
    assert!(!is_pending(&pod(
        json!({"spec": {"schedulerName": "other"}})
    )));
    assert!(!is_pending(&pod(
        json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})
    )));
    assert!(!is_pending(&pod(json!({"status": {"phase": "Failed"}}))));
}

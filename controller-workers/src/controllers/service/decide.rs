//! service-lb's decisions: which Services want a balancer or its cleanup, which changes of
//! a Service need a sync (with the event upstream records for some), which Nodes go into
//! a balancer's set, and which Node changes resync the balancers.

use crate::meta::ResourceNames;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service, ServiceSpec};

/// The finalizer that keeps a Service until its balancer is deleted.
pub(super) const LB_CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// Nodes with this label are left out of every balancer.
pub(super) const EXCLUDE_BALANCERS_LABEL: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";
/// The cluster autoscaler's taint on a node it is about to delete.
pub(super) const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

fn spec(service: &Service) -> ServiceSpec {
    service.spec.clone().unwrap_or_default()
}

/// A `type: LoadBalancer` Service without a `loadBalancerClass` (a class says another
/// implementation serves it).
pub(super) fn wants_load_balancer(service: &Service) -> bool {
    service.spec.as_ref().is_some_and(|spec| {
        spec.type_.as_deref() == Some("LoadBalancer") && spec.load_balancer_class.is_none()
    })
}

pub(super) fn has_lb_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == LB_CLEANUP_FINALIZER))
}

/// The Service holds the finalizer and is being deleted or no longer of type LoadBalancer.
pub(super) fn needs_cleanup(service: &Service) -> bool {
    if !has_lb_finalizer(service) {
        return false;
    }
    service.metadata.deletion_timestamp.is_some()
        || service.spec.as_ref().and_then(|s| s.type_.as_deref()) != Some("LoadBalancer")
}

/// Whether a Service update needs a sync, and the Normal event upstream records for it.
#[derive(Debug, PartialEq)]
pub(super) enum Update {
    No,
    Yes,
    WithEvent(&'static str, String),
}

fn opt(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or_default()
}

fn go_list(values: &Option<Vec<String>>) -> String {
    format!("[{}]", values.as_deref().unwrap_or_default().join(" "))
}

/// upstream's `needsUpdate`, in its order.
pub(super) fn needs_update(old: &Service, new: &Service) -> Update {
    let (wants_old, wants_new) = (wants_load_balancer(old), wants_load_balancer(new));
    if !wants_old && !wants_new {
        return Update::No;
    }
    let (o, n) = (spec(old), spec(new));
    if wants_old != wants_new {
        return Update::WithEvent("Type", format!("{} -> {}", opt(&o.type_), opt(&n.type_)));
    }
    let ranges = |s: &ServiceSpec| {
        s.load_balancer_source_ranges
            .clone()
            .filter(|r| !r.is_empty())
    };
    if ranges(&o) != ranges(&n) {
        return Update::WithEvent(
            "LoadBalancerSourceRanges",
            format!(
                "{} -> {}",
                go_list(&o.load_balancer_source_ranges),
                go_list(&n.load_balancer_source_ranges)
            ),
        );
    }
    if !ports_equal_for_lb(&o, &n) || o.session_affinity != n.session_affinity {
        return Update::Yes;
    }
    if o.session_affinity_config != n.session_affinity_config {
        return Update::Yes;
    }
    if o.load_balancer_ip != n.load_balancer_ip {
        return Update::WithEvent(
            "LoadbalancerIP",
            format!(
                "{} -> {}",
                opt(&o.load_balancer_ip),
                opt(&n.load_balancer_ip)
            ),
        );
    }
    let (old_ips, new_ips) = (
        o.external_ips.clone().unwrap_or_default(),
        n.external_ips.clone().unwrap_or_default(),
    );
    if old_ips.len() != new_ips.len() {
        return Update::WithEvent(
            "ExternalIP",
            format!("Count: {} -> {}", old_ips.len(), new_ips.len()),
        );
    }
    if let Some((_, added)) = old_ips.iter().zip(&new_ips).find(|(a, b)| a != b) {
        return Update::WithEvent("ExternalIP", format!("Added: {added}"));
    }
    let annotations = |s: &Service| s.metadata.annotations.clone().filter(|a| !a.is_empty());
    if annotations(old) != annotations(new) {
        return Update::Yes;
    }
    if old.metadata.uid != new.metadata.uid {
        return Update::WithEvent(
            "UID",
            format!("{} -> {}", opt(&old.metadata.uid), opt(&new.metadata.uid)),
        );
    }
    if o.external_traffic_policy != n.external_traffic_policy {
        return Update::WithEvent(
            "ExternalTrafficPolicy",
            format!(
                "{} -> {}",
                opt(&o.external_traffic_policy),
                opt(&n.external_traffic_policy)
            ),
        );
    }
    if o.health_check_node_port != n.health_check_node_port {
        return Update::WithEvent(
            "HealthCheckNodePort",
            format!(
                "{} -> {}",
                o.health_check_node_port.unwrap_or(0),
                n.health_check_node_port.unwrap_or(0)
            ),
        );
    }
    let families = |s: &ServiceSpec| s.ip_families.as_ref().map_or(0, Vec::len);
    if families(&o) != families(&n) {
        return Update::WithEvent(
            "IPFamilies",
            format!("Count: {} -> {}", families(&o), families(&n)),
        );
    }
    Update::No
}

/// Name, protocol, port, nodePort, targetPort and appProtocol of each port, in order.
fn ports_equal_for_lb(o: &ServiceSpec, n: &ServiceSpec) -> bool {
    let (x, y) = (
        o.ports.as_deref().unwrap_or_default(),
        n.ports.as_deref().unwrap_or_default(),
    );
    x.len() == y.len()
        && x.iter().zip(y).all(|(a, b)| {
            a.name.as_deref().unwrap_or_default() == b.name.as_deref().unwrap_or_default()
                && a.protocol.as_deref().unwrap_or("TCP") == b.protocol.as_deref().unwrap_or("TCP")
                && a.port == b.port
                && a.node_port.unwrap_or(0) == b.node_port.unwrap_or(0)
                && a.target_port == b.target_port
                && a.app_protocol == b.app_protocol
        })
}

fn included(node: &Node) -> bool {
    !node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(EXCLUDE_BALANCERS_LABEL))
}

fn untainted(node: &Node) -> bool {
    !node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .is_some_and(|taints| taints.iter().any(|t| t.key == TO_BE_DELETED_TAINT))
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn not_deleted(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
}

/// Whether `node` belongs in a balancer's set. With `StableLoadBalancerNodeSet` (on in
/// 1.29): not being deleted, not excluded by label, not tainted for deletion by the
/// cluster autoscaler; without it readiness counts instead of deletion.
pub(super) fn node_in_set(node: &Node, stable_node_set: bool) -> bool {
    if stable_node_set {
        not_deleted(node) && included(node) && untainted(node)
    } else {
        included(node) && untainted(node) && ready(node)
    }
}

/// The nodes of `nodes` that go into a balancer's set, sorted by name.
pub(super) fn nodes_for_balancer(nodes: &[Arc<Node>], stable_node_set: bool) -> Vec<Arc<Node>> {
    let mut set: Vec<Arc<Node>> = nodes
        .iter()
        .filter(|node| node_in_set(node, stable_node_set))
        .cloned()
        .collect();
    set.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    set
}

fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|spec| spec.provider_id.as_deref())
        .unwrap_or_default()
}

/// Whether a Node update changes any balancer: its exclusion label or providerID changed,
/// or (without `StableLoadBalancerNodeSet`) its membership.
pub(super) fn should_sync_updated_node(old: &Node, new: &Node, stable_node_set: bool) -> bool {
    if included(old) != included(new) || provider_id(old) != provider_id(new) {
        return true;
    }
    !stable_node_set
        && (included(old) && untainted(old) && ready(old))
            != (included(new) && untainted(new) && ready(new))
}

/// Two node sets that a balancer sees alike: the same names with the same providerIDs.
pub(super) fn nodes_sufficiently_equal(old: &[Arc<Node>], new: &[Arc<Node>]) -> bool {
    let distill = |nodes: &[Arc<Node>]| -> BTreeMap<String, String> {
        nodes
            .iter()
            .map(|n| (n.name_str().to_string(), provider_id(n).to_string()))
            .collect()
    };
    old.len() == new.len() && distill(old) == distill(new)
}

/// Node names for a log line or event: at most 20, then `<N more>`.
pub(super) fn loggable_node_names(nodes: &[Arc<Node>]) -> String {
    const MAX: usize = 20;
    let mut names: Vec<String> = nodes
        .iter()
        .take(MAX)
        .map(|n| n.name_str().to_string())
        .collect();
    names.sort();
    if nodes.len() > MAX {
        names.push(format!("<{} more>", nodes.len() - MAX));
    }
    format!("[{}]", names.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn service(value: Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    fn lb(extra: Value) -> Service {
        let mut base = json!({"metadata": {"name": "s", "namespace": "ns", "uid": "u1"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]}});
        merge(&mut base, extra);
        service(base)
    }

    fn merge(base: &mut Value, extra: Value) {
        match (base, extra) {
            (Value::Object(b), Value::Object(e)) => {
                for (k, v) in e {
                    merge(b.entry(k).or_insert(Value::Null), v);
                }
            }
            (b, e) => *b = e,
        }
    }

    fn node(value: Value) -> Arc<Node> {
        Arc::new(serde_json::from_value(value).unwrap())
    }

    #[test]
    fn wants_and_cleanup() {
        assert!(wants_load_balancer(&lb(json!({}))));
        assert!(!wants_load_balancer(&lb(
            json!({"spec": {"loadBalancerClass": "x"}})
        )));
        assert!(!wants_load_balancer(&lb(
            json!({"spec": {"type": "ClusterIP"}})
        )));
        let fin = json!({"metadata": {"finalizers": [LB_CLEANUP_FINALIZER]}});
        assert!(!needs_cleanup(&lb(fin.clone())));
        assert!(!needs_cleanup(&lb(json!({"spec": {"type": "ClusterIP"}}))));
        let mut clusterip = fin.clone();
        merge(&mut clusterip, json!({"spec": {"type": "ClusterIP"}}));
        assert!(needs_cleanup(&lb(clusterip)));
        let mut deleting = fin;
        merge(
            &mut deleting,
            json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
        );
        assert!(needs_cleanup(&lb(deleting)));
    }

    #[test]
    fn update_table() {
        let base = lb(json!({}));
        let cases: Vec<(Value, Update)> = vec![
            (json!({}), Update::No),
            (
                json!({"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
                Update::No,
            ),
            (
                json!({"spec": {"type": "NodePort"}}),
                Update::WithEvent("Type", "LoadBalancer -> NodePort".into()),
            ),
            (
                json!({"spec": {"loadBalancerSourceRanges": ["10.0.0.0/8"]}}),
                Update::WithEvent("LoadBalancerSourceRanges", "[] -> [10.0.0.0/8]".into()),
            ),
            (
                json!({"spec": {"ports": [{"port": 81, "protocol": "TCP"}]}}),
                Update::Yes,
            ),
            (
                json!({"spec": {"sessionAffinity": "ClientIP"}}),
                Update::Yes,
            ),
            (
                json!({"spec": {"loadBalancerIP": "5.6.7.8"}}),
                Update::WithEvent("LoadbalancerIP", " -> 5.6.7.8".into()),
            ),
            (
                json!({"spec": {"externalIPs": ["1.1.1.1"]}}),
                Update::WithEvent("ExternalIP", "Count: 0 -> 1".into()),
            ),
            (
                json!({"metadata": {"annotations": {"a": "b"}}}),
                Update::Yes,
            ),
            (
                json!({"metadata": {"uid": "u2"}}),
                Update::WithEvent("UID", "u1 -> u2".into()),
            ),
            (
                json!({"spec": {"externalTrafficPolicy": "Local"}}),
                Update::WithEvent("ExternalTrafficPolicy", " -> Local".into()),
            ),
            (
                json!({"spec": {"healthCheckNodePort": 30000}}),
                Update::WithEvent("HealthCheckNodePort", "0 -> 30000".into()),
            ),
            (
                json!({"spec": {"ipFamilies": ["IPv4"]}}),
                Update::WithEvent("IPFamilies", "Count: 0 -> 1".into()),
            ),
        ];
        for (change, expected) in cases {
            assert_eq!(
                needs_update(&base, &lb(change.clone())),
                expected,
                "{change}"
            );
        }
        let a = lb(json!({"spec": {"externalIPs": ["1.1.1.1"]}}));
        let b = lb(json!({"spec": {"externalIPs": ["2.2.2.2"]}}));
        assert_eq!(
            needs_update(&a, &b),
            Update::WithEvent("ExternalIP", "Added: 2.2.2.2".into())
        );
        let plain = lb(json!({"spec": {"type": "ClusterIP"}}));
        assert_eq!(needs_update(&plain, &plain), Update::No);
    }

    #[test]
    fn balancer_node_set() {
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let mut nodes = vec![];
        for (name, extra) in [
            ("a", json!({})),
            (
                "b",
                json!({"metadata": {"labels": {EXCLUDE_BALANCERS_LABEL: ""}}}),
            ),
            (
                "c",
                json!({"spec": {"taints": [{"key": TO_BE_DELETED_TAINT, "effect": "NoSchedule"}]}}),
            ),
            (
                "d",
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
            ),
            ("e", ready.clone()),
        ] {
            let mut value = json!({"metadata": {"name": name}});
            merge(&mut value, extra);
            nodes.push(node(value));
        }
        let names = |set: Vec<Arc<Node>>| -> Vec<String> {
            set.iter()
                .map(|n| n.metadata.name.clone().unwrap())
                .collect()
        };
        assert_eq!(names(nodes_for_balancer(&nodes, true)), vec!["a", "e"]);
        assert_eq!(names(nodes_for_balancer(&nodes, false)), vec!["e"]);
    }

    #[test]
    fn node_updates_that_resync() {
        let a = node(json!({"metadata": {"name": "a"}, "spec": {"providerID": "x://a"}}));
        let relabelled = node(
            json!({"metadata": {"name": "a", "labels": {EXCLUDE_BALANCERS_LABEL: ""}}, "spec": {"providerID": "x://a"}}),
        );
        let moved = node(json!({"metadata": {"name": "a"}, "spec": {"providerID": "x://b"}}));
        let ready = node(
            json!({"metadata": {"name": "a"}, "spec": {"providerID": "x://a"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        assert!(should_sync_updated_node(&a, &relabelled, true));
        assert!(should_sync_updated_node(&a, &moved, true));
        assert!(!should_sync_updated_node(&a, &ready, true));
        assert!(should_sync_updated_node(&a, &ready, false));
        assert!(nodes_sufficiently_equal(std::slice::from_ref(&a), &[ready]));
        assert!(!nodes_sufficiently_equal(
            std::slice::from_ref(&a),
            &[moved]
        ));
        assert!(!nodes_sufficiently_equal(&[a], &[]));
    }
}

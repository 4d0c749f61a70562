//! The route controller's diff: which cloud routes to delete, which to create for the
//! nodes' pod CIDRs, and what each node's NetworkUnavailable condition becomes.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::cloud::Route;
use crate::meta::ResourceNames;

pub(super) use crate::controllers::nodeipam::cidr::{cluster_cidrs, Cidr};

/// Whether a route is the controller's: its first or last address is in a cluster CIDR.
pub(super) fn is_responsible_for(route: &Route, cluster: &[Cidr]) -> bool {
    let Ok(cidr) = Cidr::parse(&route.destination_cidr) else {
        return false;
    };
    cluster.iter().any(|c| {
        c.contains(cidr.is_ipv6(), cidr.value()) || c.contains(cidr.is_ipv6(), cidr.last())
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    Keep,
    Add,
    Update,
}

/// What one pass does.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Plan {
    /// Routes to delete (unparsable ones are never the controller's).
    pub(super) delete: Vec<Route>,
    /// Routes to create, with the node's UID as the name hint.
    pub(super) create: Vec<(String, Route)>,
    /// Per node with routes or pod CIDRs: the action for each of its pod CIDRs.
    pub(super) actions: BTreeMap<String, BTreeMap<String, Action>>,
}

fn pod_cidrs(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.pod_cidrs.clone())
        .unwrap_or_default()
}

fn addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|status| status.addresses.clone())
        .unwrap_or_default()
}

fn same_addresses(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

fn route_action(routes: &[&Route], cidr: &str, addrs: &[NodeAddress]) -> Action {
    match routes.iter().find(|r| r.destination_cidr == cidr) {
        Some(route)
            if !route.enable_node_addresses
                || same_addresses(addrs, &route.target_node_addresses) =>
        {
            Action::Keep
        }
        Some(_) => Action::Update,
        None => Action::Add,
    }
}

/// upstream's `reconcile`, up to the calls: routes of nodes (by target) against the nodes'
/// pod CIDRs.
pub(super) fn plan(nodes: &[Arc<Node>], routes: &[Route], cluster: &[Cidr]) -> Plan {
    let mut by_node: BTreeMap<&str, Vec<&Route>> = BTreeMap::new();
    let mut plan = Plan::default();
    for route in routes.iter().filter(|r| !r.target_node.is_empty()) {
        by_node.entry(&route.target_node).or_default().push(route);
        plan.actions.entry(route.target_node.clone()).or_default();
    }
    for node in nodes {
        let cidrs = pod_cidrs(node);
        if cidrs.is_empty() {
            continue;
        }
        let name = node.name_str().to_string();
        let own = by_node.get(name.as_str()).cloned().unwrap_or_default();
        let addrs = addresses(node);
        let actions = plan.actions.entry(name.clone()).or_default();
        for cidr in cidrs {
            let action = route_action(&own, &cidr, &addrs);
            actions.insert(cidr.clone(), action);
            if matches!(action, Action::Add | Action::Update) {
                plan.create.push((
                    node.metadata.uid.clone().unwrap_or_default(),
                    Route {
                        target_node: name.clone(),
                        target_node_addresses: addrs.clone(),
                        destination_cidr: cidr,
                        ..Default::default()
                    },
                ));
            }
        }
    }
    for route in routes {
        if !is_responsible_for(route, cluster) {
            continue;
        }
        let wanted = plan
            .actions
            .get(&route.target_node)
            .and_then(|actions| actions.get(&route.destination_cidr));
        if route.blackhole || matches!(wanted, None | Some(Action::Update)) {
            plan.delete.push(route.clone());
        }
    }
    plan
}

/// The NetworkUnavailable each node gets after the pass: `Some(true)` when all its routes
/// exist ("routes created"), `Some(false)` when one is missing or it has no route at
/// all, `None` when the controller has nothing to say (no pod CIDR, no route).
pub(super) fn routes_created(actions: Option<&BTreeMap<String, Action>>) -> Option<bool> {
    let actions = actions?;
    if actions.is_empty() {
        return Some(false);
    }
    Some(
        !actions
            .values()
            .any(|a| matches!(a, Action::Add | Action::Update)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cidrs: &[&str]) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name, "uid": format!("uid-{name}")},
                "spec": {"podCIDRs": cidrs}}),
            )
            .unwrap(),
        )
    }

    fn route(node: &str, cidr: &str) -> Route {
        Route {
            name: format!("r-{node}-{cidr}"),
            target_node: node.into(),
            destination_cidr: cidr.into(),
            ..Default::default()
        }
    }

    #[test]
    fn cidr_parsing_and_cluster_checks() {
        assert!(cluster_cidrs("10.244.0.0/16").is_ok());
        assert!(cluster_cidrs("10.244.0.0/16,fd00::/48").is_ok());
        assert_eq!(
            cluster_cidrs("10.0.0.0/8,11.0.0.0/8").unwrap_err(),
            "len of ClusterCIDRs==2 and they are not configured as dual stack (at least one from each IPFamily"
        );
        assert_eq!(
            cluster_cidrs("").unwrap_err(),
            "invalid CIDR[0]: <nil> (invalid CIDR address: )"
        );
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        let cluster = cluster_cidrs("10.244.0.0/16").unwrap();
        assert!(is_responsible_for(&route("a", "10.244.3.0/24"), &cluster));
        assert!(
            is_responsible_for(&route("a", "10.244.0.0/15"), &cluster),
            "starts inside"
        );
        assert!(
            !is_responsible_for(&route("a", "10.0.0.0/8"), &cluster),
            "neither end inside, as upstream"
        );
        assert!(!is_responsible_for(&route("a", "192.168.0.0/24"), &cluster));
        assert!(!is_responsible_for(&route("a", "nonsense"), &cluster));
    }

    #[test]
    fn routes_follow_pod_cidrs() {
        let cluster = cluster_cidrs("10.244.0.0/16").unwrap();
        let nodes = vec![
            node("a", &["10.244.0.0/24"]),
            node("b", &["10.244.1.0/24"]),
            node("c", &[]),
        ];
        let routes = vec![
            route("a", "10.244.0.0/24"),
            route("gone", "10.244.9.0/24"),
            route("b", "10.244.7.0/24"),
            route("x", "192.168.0.0/24"),
            Route {
                blackhole: true,
                ..route("a", "10.244.0.0/24")
            },
        ];
        let plan = plan(&nodes, &routes, &cluster);
        let deleted: Vec<&str> = plan
            .delete
            .iter()
            .map(|r| r.destination_cidr.as_str())
            .collect();
        assert_eq!(
            deleted,
            vec!["10.244.9.0/24", "10.244.7.0/24", "10.244.0.0/24"]
        );
        assert_eq!(plan.create.len(), 1);
        assert_eq!(plan.create[0].0, "uid-b");
        assert_eq!(plan.create[0].1.destination_cidr, "10.244.1.0/24");
        assert_eq!(routes_created(plan.actions.get("a")), Some(true));
        assert_eq!(routes_created(plan.actions.get("b")), Some(false));
        assert_eq!(routes_created(plan.actions.get("gone")), Some(false));
        assert_eq!(routes_created(plan.actions.get("c")), None);
    }

    #[test]
    fn changed_addresses_recreate_a_tracked_route() {
        let cluster = cluster_cidrs("10.244.0.0/16").unwrap();
        let old = NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.1".into(),
        };
        let tracked = Route {
            enable_node_addresses: true,
            target_node_addresses: vec![old],
            ..route("a", "10.244.0.0/24")
        };
        let plan = plan(&[node("a", &["10.244.0.0/24"])], &[tracked], &cluster);
        assert_eq!(plan.delete.len(), 1);
        assert_eq!(plan.create.len(), 1);
    }
}

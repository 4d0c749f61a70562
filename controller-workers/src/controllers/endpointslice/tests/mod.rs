//! Table tests of the reconciler's decisions ([`packing`]: packing, reuse, recycling,
//! the placeholder; [`endpoints`]: endpoints from pods, families, ports, labels, hints) and
//! of the flags, with the fixtures they share.

mod endpoints;
mod packing;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::packing::{Plan, Planner};
use super::topologycache::TopologyCache;
use super::utils::ZONE_LABEL;
use super::{Options, CONTROLLER_NAME};
use crate::store::Store;

fn service(value: serde_json::Value) -> Service {
    let mut base = json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"app": "web"}},
        "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ipFamilies": ["IPv4"],
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]},
    });
    merge(&mut base, value);
    serde_json::from_value(base).unwrap()
}

fn merge(base: &mut serde_json::Value, patch: serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(base), serde_json::Value::Object(patch)) => {
            for (key, value) in patch {
                merge(base.entry(key).or_insert(serde_json::Value::Null), value);
            }
        }
        (base, patch) => *base = patch,
    }
}

/// A running, ready pod on `node` with `ips`.
fn pod(name: &str, ips: &[&str], node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x",
                 "ports": [{"name": "http", "containerPort": 8080}]}]},
        "status": {"phase": "Running", "podIP": ips[0],
                   "podIPs": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap()
}

fn pods(count: usize) -> Vec<Arc<Pod>> {
    (0..count)
        .map(|i| {
            Arc::new(pod(
                &format!("p{i:03}"),
                &[&format!("10.0.{}.{}", i / 250, i % 250 + 1)],
                &format!("node-{}", i % 3),
            ))
        })
        .collect()
}

fn nodes() -> Store<Node> {
    let store = Store::new();
    for (i, zone) in ["zone-a", "zone-b", "zone-c"].iter().enumerate() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": format!("node-{i}"), "labels": {ZONE_LABEL: zone}},
            "status": {"allocatable": {"cpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap();
        store.apply(format!("node-{i}"), Arc::new(node));
    }
    store
}

fn planner<'a>(
    nodes: &'a Store<Node>,
    max: usize,
    topology: Option<&'a TopologyCache>,
) -> Planner<'a> {
    Planner {
        nodes,
        max_endpoints_per_slice: max,
        topology,
        controller_name: CONTROLLER_NAME,
    }
}

/// The slices as the API server would hold them after the plan: created ones named
/// `web-<n>`, with generation 1.
fn apply(existing: &[Arc<EndpointSlice>], plan: &Plan) -> Vec<Arc<EndpointSlice>> {
    let mut by_name: BTreeMap<String, EndpointSlice> = existing
        .iter()
        .map(|s| (s.metadata.name.clone().unwrap(), s.as_ref().clone()))
        .collect();
    for slice in &plan.to_delete {
        by_name.remove(slice.metadata.name.as_deref().unwrap());
    }
    for slice in &plan.to_update {
        by_name.insert(slice.metadata.name.clone().unwrap(), slice.clone());
    }
    let mut next = by_name.len();
    for slice in &plan.to_create {
        let mut slice = slice.clone();
        while by_name.contains_key(&format!("web-{next}")) {
            next += 1;
        }
        slice.metadata.name = Some(format!("web-{next}"));
        by_name.insert(format!("web-{next}"), slice);
    }
    by_name.into_values().map(Arc::new).collect()
}

fn addresses(slices: &[Arc<EndpointSlice>]) -> Vec<String> {
    let mut all: Vec<String> = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
        .collect();
    all.sort();
    all
}

fn sizes(slices: &[Arc<EndpointSlice>]) -> Vec<usize> {
    slices.iter().map(|s| s.endpoints.len()).collect()
}

fn options(syncs: i32, max: i32) -> Options {
    Options {
        concurrent_service_endpoint_syncs: syncs,
        max_endpoints_per_slice: max,
        endpointslice_updates_batch_period: Duration::ZERO,
    }
}

#[test]
fn flags_are_checked_with_kcms_messages() {
    assert_eq!(options(5, 100).validate(), Ok(()));
    assert_eq!(options(1, 1).validate(), Ok(()));
    assert_eq!(options(50, 1000).validate(), Ok(()));
    assert_eq!(
        options(5, 1001).validate(),
        Err("max-endpoints-per-slice must not be more than 1000, but got 1001".into())
    );
    assert_eq!(
        options(5, 0).validate(),
        Err("max-endpoints-per-slice must not be less than 1, but got 0".into())
    );
    assert_eq!(
        options(51, 100).validate(),
        Err("concurrent-service-endpoint-syncs must not be more than 50, but got 51".into())
    );
    assert_eq!(
        options(0, -3).validate(),
        Err("[concurrent-service-endpoint-syncs must not be less than 1, but got 0, max-endpoints-per-slice must not be less than 1, but got -3]".into())
    );
}

#[test]
fn flags_have_kcms_defaults() {
    let defaults = crate::registry::ControllerOptions::default().endpointslice;
    assert_eq!(defaults.concurrent_service_endpoint_syncs, 5);
    assert_eq!(defaults.max_endpoints_per_slice, 100);
    assert_eq!(defaults.endpointslice_updates_batch_period, Duration::ZERO);
}

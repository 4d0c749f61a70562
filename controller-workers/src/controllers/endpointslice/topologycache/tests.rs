//! Table tests of hint allocation: zones' CPU shares from Nodes, allocations, giving
//! hints and moving them between zones, overloaded Services.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use serde_json::json;

use super::utils::{giving_and_receiving_zones, service_overloaded};
use super::*;

fn node(name: &str, zone: Option<&str>, cpu: Option<&str>, ready: bool) -> Arc<Node> {
    let mut labels = serde_json::Map::new();
    if let Some(zone) = zone {
        labels.insert(ZONE_LABEL.into(), json!(zone));
    }
    let allocatable = cpu.map_or(json!({}), |cpu| json!({"cpu": cpu}));
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap(),
    )
}

fn three_zones(cpus: [&str; 3]) -> Vec<Arc<Node>> {
    ["zone-a", "zone-b", "zone-c"]
        .iter()
        .zip(cpus)
        .map(|(zone, cpu)| node(&format!("n-{zone}"), Some(zone), Some(cpu), true))
        .collect()
}

fn endpoint(ip: &str, zone: &str, ready: bool) -> Endpoint {
    serde_json::from_value(json!({
        "addresses": [ip], "zone": zone, "conditions": {"ready": ready},
    }))
    .unwrap()
}

fn slice(name: &str, endpoints: Vec<Endpoint>) -> EndpointSlice {
    EndpointSlice {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints,
        ports: None,
    }
}

fn info(to_create: Vec<EndpointSlice>, unchanged: Vec<EndpointSlice>) -> SliceInfo {
    SliceInfo {
        service_key: "ns/web".into(),
        address_type: "IPv4".into(),
        to_create,
        to_update: Vec::new(),
        unchanged,
    }
}

fn hints(slices: &[EndpointSlice]) -> Vec<(String, Option<String>)> {
    slices
        .iter()
        .flat_map(|s| &s.endpoints)
        .map(|e| {
            (
                e.zone.clone().unwrap_or_default(),
                e.hints
                    .as_ref()
                    .and_then(|h| h.for_zones.as_ref())
                    .map(|zones| zones[0].name.clone()),
            )
        })
        .collect()
}

#[test]
fn allocations_follow_each_zones_cpu_share() {
    let cache = TopologyCache::new();
    assert_eq!(
        cache.allocations(3).unwrap_err().message,
        NODES_READY_IN_ONE_ZONE_ONLY,
        "before any Node"
    );
    cache.set_nodes(&three_zones(["8", "8", "8"]));
    let allocations = cache.allocations(3).unwrap();
    for allocation in allocations.values() {
        assert_eq!((allocation.minimum, allocation.maximum), (1, 1));
        assert!((allocation.desired - 1.0).abs() < 1e-9);
    }
    let event = cache.allocations(2).unwrap_err();
    assert_eq!(
        (event.event_type, event.reason),
        ("Warning", "TopologyAwareHintsDisabled")
    );
    assert_eq!(
        event.message,
        "Insufficient number of endpoints (2 endpoints, 3 zones)"
    );

    // 2:1:1 CPU, 12 endpoints: desired 6/3/3, minimum ceil(desired / 1.2).
    cache.set_nodes(&three_zones(["16", "8", "8000m"]));
    let allocations = cache.allocations(12).unwrap();
    let a = allocations["zone-a"];
    assert_eq!((a.minimum, a.maximum), (5, 6));
    let b = allocations["zone-b"];
    assert_eq!((b.minimum, b.maximum), (3, 4));

    // A zone whose minimum cannot be met.
    cache.set_nodes(&three_zones(["1", "1", "100"]));
    assert_eq!(
        cache.allocations(3).unwrap_err().message,
        "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold (3 endpoints, 3 zones)"
    );
}

#[test]
fn nodes_without_zone_or_cpu_leave_no_shares() {
    let cache = TopologyCache::new();
    let mut nodes = three_zones(["8", "8", "8"]);
    nodes.push(node("no-zone", None, Some("8"), true));
    cache.set_nodes(&nodes);
    assert_eq!(
        cache.allocations(10).unwrap_err().message,
        INSUFFICIENT_NODE_INFO
    );

    let mut nodes = three_zones(["8", "8", "8"]);
    nodes.push(node("no-cpu", Some("zone-a"), None, true));
    cache.set_nodes(&nodes);
    assert_eq!(
        cache.allocations(10).unwrap_err().message,
        INSUFFICIENT_NODE_INFO
    );

    // Unready and control-plane Nodes do not count; one zone left is not enough.
    let mut nodes = vec![node("a", Some("zone-a"), Some("8"), true)];
    nodes.push(node("b", Some("zone-b"), None, false));
    let mut control_plane = (*node("cp", Some("zone-c"), None, true)).clone();
    control_plane
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(
            "node-role.kubernetes.io/control-plane".into(),
            String::new(),
        );
    nodes.push(Arc::new(control_plane));
    cache.set_nodes(&nodes);
    assert_eq!(
        cache.allocations(10).unwrap_err().message,
        INSUFFICIENT_NODE_INFO
    );
    nodes.push(node("c", Some("zone-c"), Some("8"), true));
    cache.set_nodes(&nodes);
    assert!(cache.allocations(10).is_ok());
}

#[test]
fn hints_go_to_the_own_zone_then_move_to_zones_short_of_their_share() {
    let cache = TopologyCache::new();
    cache.set_nodes(&three_zones(["8", "8", "8"]));
    // Six ready endpoints: four in zone-a, one each in b and c; one unready in c.
    let endpoints = vec![
        endpoint("10.0.0.1", "zone-a", true),
        endpoint("10.0.0.2", "zone-a", true),
        endpoint("10.0.0.3", "zone-a", true),
        endpoint("10.0.0.4", "zone-a", true),
        endpoint("10.0.0.5", "zone-b", true),
        endpoint("10.0.0.6", "zone-c", true),
        endpoint("10.0.0.7", "zone-c", false),
    ];
    let mut slices = info(vec![slice("", endpoints)], Vec::new());
    let events = cache.add_hints(&mut slices);
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].message,
        "Topology Aware Hints has been enabled, addressType: IPv4"
    );
    let given = hints(&slices.to_create);
    let count = |zone: &str| {
        given
            .iter()
            .filter(|(_, hint)| hint.as_deref() == Some(zone))
            .count()
    };
    assert_eq!(
        (count("zone-a"), count("zone-b"), count("zone-c")),
        (2, 2, 2)
    );
    assert_eq!(
        given[6],
        ("zone-c".into(), None),
        "the unready endpoint gets none"
    );
    assert!(!cache.overloaded_services().contains(&"ns/web".to_string()));

    // Given again: no new event.
    let mut again = info(vec![], slices.to_create.clone());
    assert!(cache.add_hints(&mut again).is_empty());
    assert!(again.to_update.is_empty(), "the hints still fit: unchanged");

    // Zone-c's Node goes: its share vanishes and the Service is overloaded (zone-c still
    // receives hints), so a Node change queues it.
    cache.set_nodes(&three_zones(["8", "8", "8"])[..2]);
    assert_eq!(cache.overloaded_services(), vec!["ns/web".to_string()]);
    let mut after = info(vec![], slices.to_create.clone());
    cache.add_hints(&mut after);
    assert_eq!(
        after.to_update.len(),
        1,
        "hints for a zone without allocation are redone"
    );
    let given = hints(&after.to_update);
    let count = |zone: &str| {
        given
            .iter()
            .filter(|(_, hint)| hint.as_deref() == Some(zone))
            .count()
    };
    // Each endpoint starts with its own zone (zone-c's too, as upstream does); zone-a's
    // surplus goes to zone-b.
    assert_eq!(
        (count("zone-a"), count("zone-b"), count("zone-c")),
        (3, 2, 1)
    );
}

#[test]
fn a_zoneless_endpoint_removes_all_hints() {
    let cache = TopologyCache::new();
    cache.set_nodes(&three_zones(["8", "8", "8"]));
    let hinted = {
        let mut s = info(
            vec![slice(
                "",
                ["zone-a", "zone-a", "zone-b", "zone-b", "zone-c", "zone-c"]
                    .iter()
                    .enumerate()
                    .map(|(i, zone)| endpoint(&format!("10.0.0.{i}"), zone, true))
                    .collect(),
            )],
            vec![],
        );
        cache.add_hints(&mut s);
        let mut hinted = s.to_create.remove(0);
        hinted.metadata.name = Some("web-1".into());
        hinted
    };
    let mut zoneless = endpoint("10.0.0.9", "", true);
    zoneless.zone = None;
    let mut slices = info(vec![slice("", vec![zoneless])], vec![hinted]);
    let events = cache.add_hints(&mut slices);
    assert_eq!(
        events[0].message,
        "One or more endpoints do not have a zone specified, addressType: IPv4"
    );
    assert!(
        slices.unchanged.is_empty(),
        "the hinted slice is updated to drop its hints"
    );
    assert!(hints(&slices.to_update)
        .iter()
        .all(|(_, hint)| hint.is_none()));
    assert!(!cache.has_populated_hints("ns/web"));
}

#[test]
fn zones_give_and_receive_whole_endpoints() {
    let allocation = |desired: f64| Allocation {
        minimum: 0,
        maximum: 100,
        desired,
    };
    let allocations: BTreeMap<String, Allocation> = [
        ("zone-a".to_string(), allocation(2.0)),
        ("zone-b".to_string(), allocation(2.0)),
        ("zone-c".to_string(), allocation(2.0)),
    ]
    .into();
    let allocated: EndpointZoneInfo = [
        ("zone-a".to_string(), 4),
        ("zone-b".to_string(), 1),
        ("zone-c".to_string(), 1),
    ]
    .into();
    let (giving, receiving) = giving_and_receiving_zones(&allocations, &allocated);
    assert_eq!(giving, BTreeMap::from([("zone-a".to_string(), 2)]));
    assert_eq!(
        receiving,
        BTreeMap::from([("zone-b".to_string(), 1), ("zone-c".to_string(), 1)])
    );
    // Less than half an endpoint apart: nothing moves.
    let allocations: BTreeMap<String, Allocation> = [
        ("zone-a".to_string(), allocation(1.4)),
        ("zone-b".to_string(), allocation(1.6)),
    ]
    .into();
    let allocated: EndpointZoneInfo = [("zone-a".to_string(), 1), ("zone-b".to_string(), 2)].into();
    let (giving, receiving) = giving_and_receiving_zones(&allocations, &allocated);
    assert!(giving.is_empty() && receiving.is_empty());
}

#[test]
fn overload_needs_each_zone_near_its_share() {
    let ratios: BTreeMap<String, f64> =
        [("zone-a".to_string(), 0.5), ("zone-b".to_string(), 0.5)].into();
    let zones = |a: i64, b: i64| -> EndpointZoneInfo {
        [("zone-a".to_string(), a), ("zone-b".to_string(), b)].into()
    };
    assert!(!service_overloaded(&zones(5, 5), &ratios));
    assert!(!service_overloaded(&zones(6, 5), &ratios), "within 20%");
    assert!(service_overloaded(&zones(8, 2), &ratios));
    assert!(
        service_overloaded(&[("zone-a".to_string(), 3)].into(), &ratios),
        "a zone without hints"
    );
    assert!(!service_overloaded(&EndpointZoneInfo::new(), &ratios));
    assert!(
        service_overloaded(&zones(1, 1), &BTreeMap::new()),
        "no shares at all"
    );
}

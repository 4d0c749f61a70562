//! The endpoints pods give: conditions, addresses per family, ports, labels, ownership,
//! topology hints; and the small helpers.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::super::topologycache::TopologyCache;
use super::super::utils::*;
use super::super::CONTROLLER_NAME;
use super::*;
use crate::endpointutil::{HEADLESS_LABEL, MANAGED_BY_LABEL, SERVICE_NAME_LABEL};

#[test]
fn a_service_gets_one_slice_with_each_pods_endpoint() {
    let nodes = nodes();
    let svc = service(json!({}));
    let plan = planner(&nodes, 100, None).plan_address_type(&svc, &pods(3), &[], "IPv4");
    assert!(plan.errors.is_empty() && plan.to_update.is_empty() && plan.to_delete.is_empty());
    assert_eq!(plan.to_create.len(), 1);
    assert_eq!(plan.added, 3);
    let slice = &plan.to_create[0];
    assert_eq!(slice.metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(slice.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(slice.address_type, "IPv4");
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        ("v1", "Service", "web", "svc-uid")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    let labels = slice.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        labels.get(SERVICE_NAME_LABEL).map(String::as_str),
        Some("web")
    );
    assert_eq!(
        labels.get(MANAGED_BY_LABEL).map(String::as_str),
        Some(CONTROLLER_NAME)
    );
    assert!(!labels.contains_key(HEADLESS_LABEL));
    let port = &slice.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port, port.protocol.as_deref()),
        (Some("http"), Some(8080), Some("TCP"))
    );
    let endpoint = &slice.endpoints[0];
    assert_eq!(endpoint.addresses, vec!["10.0.0.1"]);
    let conditions = endpoint.conditions.clone().unwrap();
    assert_eq!(
        (conditions.ready, conditions.serving, conditions.terminating),
        (Some(true), Some(true), Some(false))
    );
    assert_eq!(endpoint.node_name.as_deref(), Some("node-0"));
    assert_eq!(endpoint.zone.as_deref(), Some("zone-a"));
    let target = endpoint.target_ref.clone().unwrap();
    assert_eq!(
        (
            target.kind.as_deref(),
            target.name.as_deref(),
            target.uid.as_deref()
        ),
        (Some("Pod"), Some("p000"), Some("uid-p000"))
    );
    assert_eq!(endpoint.hostname, None);
    assert_eq!(endpoint.hints, None);
}

#[test]
fn dual_stack_services_get_a_slice_set_per_family() {
    let nodes = nodes();
    let svc = service(json!({"spec": {"ipFamilies": ["IPv4", "IPv6"]}}));
    assert_eq!(
        address_types_for_service(&svc)
            .into_iter()
            .collect::<Vec<_>>(),
        vec!["IPv4", "IPv6"]
    );
    let both = vec![Arc::new(pod("a", &["10.0.0.1", "fd00::1"], "node-0"))];
    let p = planner(&nodes, 100, None);
    let v4 = p.plan_address_type(&svc, &both, &[], "IPv4");
    let v6 = p.plan_address_type(&svc, &both, &[], "IPv6");
    assert_eq!(v4.to_create[0].endpoints[0].addresses, vec!["10.0.0.1"]);
    assert_eq!(v6.to_create[0].address_type, "IPv6");
    assert_eq!(v6.to_create[0].endpoints[0].addresses, vec!["fd00::1"]);
    // A pod without an address of the family is no endpoint of it.
    let only_v4 = vec![Arc::new(pod("b", &["10.0.0.2"], "node-0"))];
    let plan = p.plan_address_type(&svc, &only_v4, &[], "IPv6");
    assert!(plan.to_create[0].endpoints.is_empty(), "a placeholder");

    // Families from the cluster IP, or both for a headless Service, when ipFamilies is
    // missing.
    let old = service(json!({"spec": {"ipFamilies": null, "clusterIP": "fd00::10"}}));
    assert_eq!(
        address_types_for_service(&old)
            .into_iter()
            .collect::<Vec<_>>(),
        vec!["IPv6"]
    );
    let headless = service(json!({"spec": {"ipFamilies": null, "clusterIP": "None"}}));
    assert_eq!(address_types_for_service(&headless).len(), 2);
}

#[test]
fn terminating_unready_and_nodeless_pods() {
    let nodes = nodes();
    let svc = service(json!({}));
    let mut deleting = pod("deleting", &["10.0.0.1"], "node-1");
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
    );
    let mut unready = pod("unready", &["10.0.0.2"], "node-2");
    unready
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .status = "False".into();
    let lost = pod("lost", &["10.0.0.3"], "node-gone");
    let mut finished = pod("finished", &["10.0.0.4"], "node-0");
    finished.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let all: Vec<Arc<Pod>> = [deleting, unready, lost, finished]
        .into_iter()
        .map(Arc::new)
        .collect();

    let plan = planner(&nodes, 100, None).plan_address_type(&svc, &all, &[], "IPv4");
    assert_eq!(
        plan.errors,
        vec!["skipping Pod lost for Service ns/web: Node node-gone Not Found".to_string()]
    );
    let endpoints = &plan.to_create[0].endpoints;
    let conditions: Vec<_> = endpoints
        .iter()
        .map(|e| {
            let c = e.conditions.clone().unwrap();
            (e.addresses[0].as_str(), c.ready, c.serving, c.terminating)
        })
        .collect();
    assert_eq!(
        conditions,
        vec![
            ("10.0.0.1", Some(false), Some(true), Some(true)),
            ("10.0.0.2", Some(false), Some(false), Some(false)),
        ]
    );

    // publishNotReadyAddresses: all ready, and the nodeless pod is kept without a zone.
    let publishing = service(json!({"spec": {"publishNotReadyAddresses": true}}));
    let plan = planner(&nodes, 100, None).plan_address_type(&publishing, &all, &[], "IPv4");
    assert!(plan.errors.is_empty());
    let endpoints = &plan.to_create[0].endpoints;
    assert_eq!(endpoints.len(), 3);
    assert!(endpoints
        .iter()
        .all(|e| e.conditions.clone().unwrap().ready == Some(true)));
    let lost = endpoints
        .iter()
        .find(|e| e.addresses[0] == "10.0.0.3")
        .unwrap();
    assert_eq!(
        (lost.node_name.as_deref(), lost.zone.as_deref()),
        (Some("node-gone"), None)
    );
}

#[test]
fn pods_resolving_ports_differently_get_separate_slices() {
    let nodes = nodes();
    let svc = service(
        json!({"spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}}),
    );
    let mut other = pod("other", &["10.0.0.9"], "node-1");
    other.spec.as_mut().unwrap().containers[0]
        .ports
        .as_mut()
        .unwrap()[0]
        .container_port = 9090;
    let mut none = pod("none", &["10.0.0.8"], "node-1");
    none.spec.as_mut().unwrap().containers[0].ports = None;
    let mut all = pods(2);
    all.push(Arc::new(other));
    all.push(Arc::new(none));
    let plan = planner(&nodes, 100, None).plan_address_type(&svc, &all, &[], "IPv4");
    let mut by_port: Vec<(Vec<i32>, usize)> = plan
        .to_create
        .iter()
        .map(|s| {
            let ports = s.ports.iter().flatten().filter_map(|p| p.port).collect();
            (ports, s.endpoints.len())
        })
        .collect();
    by_port.sort();
    assert_eq!(by_port, vec![(vec![], 1), (vec![8080], 2), (vec![9090], 1)]);
}

#[test]
fn labels_follow_the_service_and_foreign_slices_are_replaced() {
    let nodes = nodes();
    let p = planner(&nodes, 100, None);
    let svc = service(json!({}));
    let existing = apply(&[], &p.plan_address_type(&svc, &pods(2), &[], "IPv4"));

    // A label change alone updates the slice.
    let relabelled = service(
        json!({"metadata": {"labels": {"app": "web", "tier": "front",
        SERVICE_NAME_LABEL: "forged", MANAGED_BY_LABEL: "forged"}}}),
    );
    let plan = p.plan_address_type(&relabelled, &pods(2), &existing, "IPv4");
    assert!(plan.to_create.is_empty() && plan.to_delete.is_empty());
    let labels = plan.to_update[0].metadata.labels.clone().unwrap();
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
    assert_eq!(
        labels.get(SERVICE_NAME_LABEL).map(String::as_str),
        Some("web"),
        "reserved labels are not copied"
    );
    assert_eq!(
        labels.get(MANAGED_BY_LABEL).map(String::as_str),
        Some(CONTROLLER_NAME)
    );

    // Headless.
    let headless = service(json!({"spec": {"clusterIP": "None"}}));
    let (labels, _) = endpoint_slice_labels(None, &headless, CONTROLLER_NAME);
    assert_eq!(labels.get(HEADLESS_LABEL).map(String::as_str), Some(""));

    // Slices of an older Service of the same name are deleted, new ones made.
    let recreated = service(json!({"metadata": {"uid": "other-uid"}}));
    let plan = p.plan_address_type(&recreated, &pods(2), &existing, "IPv4");
    assert_eq!(
        (
            plan.to_create.len(),
            plan.to_delete.len(),
            plan.to_update.len()
        ),
        (1, 1, 0)
    );
}

#[test]
fn small_pieces_behave_as_upstreams() {
    assert_eq!(endpoint_slice_prefix("web"), "web-");
    assert_eq!(endpoint_slice_prefix(&"a".repeat(253)), "a".repeat(253));
    assert_eq!(slice_to_fill(&[10, 50, 95], 30, 100), Some(1));
    assert_eq!(
        slice_to_fill(&[10, 70, 70], 30, 100),
        Some(1),
        "an exact fit, first of equals"
    );
    assert_eq!(slice_to_fill(&[95, 80], 30, 100), None);
    let annotations = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    assert!(hints_enabled(Some(&annotations(&[(
        TOPOLOGY_MODE_ANNOTATION,
        "Auto"
    )]))));
    assert!(hints_enabled(Some(&annotations(&[(
        DEPRECATED_TOPOLOGY_HINTS_ANNOTATION,
        "auto"
    )]))));
    assert!(
        !hints_enabled(Some(&annotations(&[
            (DEPRECATED_TOPOLOGY_HINTS_ANNOTATION, "Disabled"),
            (TOPOLOGY_MODE_ANNOTATION, "Auto")
        ]))),
        "the deprecated annotation wins"
    );
    assert!(!hints_enabled(None));
    let time: Timestamp = "2024-03-01T10:20:30Z".parse().unwrap();
    assert_eq!(format_rfc3339_nano(time), "2024-03-01T10:20:30Z");
    let time: Timestamp = "2024-03-01T10:20:30.120Z".parse().unwrap();
    assert_eq!(format_rfc3339_nano(time), "2024-03-01T10:20:30.12Z");
    let mut slice = EndpointSlice::default();
    add_trigger_time_annotation(&mut slice, Some(time));
    assert_eq!(
        slice.metadata.annotations.as_ref().unwrap()
            ["endpoints.kubernetes.io/last-change-trigger-time"],
        "2024-03-01T10:20:30.12Z"
    );
    add_trigger_time_annotation(&mut slice, None);
    assert!(slice.metadata.annotations.as_ref().unwrap().is_empty());
    slice.metadata.namespace = Some("ns".into());
    assert_eq!(
        service_controller_key(&slice),
        Err("EndpointSlice missing kubernetes.io/service-name label".into())
    );
    slice.metadata.labels = Some(annotations(&[(SERVICE_NAME_LABEL, "web")]));
    assert_eq!(service_controller_key(&slice), Ok("ns/web".into()));
}

#[test]
fn hints_are_given_with_topology_mode_auto_and_removed_without() {
    let nodes = nodes();
    let topology = TopologyCache::new();
    topology.set_nodes(&nodes.list());
    let auto = service(json!({"metadata": {"annotations": {TOPOLOGY_MODE_ANNOTATION: "Auto"}}}));
    let p = planner(&nodes, 100, Some(&topology));
    let plan = p.plan_address_type(&auto, &pods(3), &[], "IPv4");
    assert_eq!(plan.events.len(), 1);
    assert_eq!(plan.events[0].reason, "TopologyAwareHintsEnabled");
    assert_eq!(
        plan.events[0].message,
        "Topology Aware Hints has been enabled, addressType: IPv4"
    );
    for endpoint in &plan.to_create[0].endpoints {
        let hint = &endpoint.hints.as_ref().unwrap().for_zones.as_ref().unwrap()[0].name;
        assert_eq!(
            Some(hint),
            endpoint.zone.as_ref(),
            "each endpoint hinted to its own zone"
        );
    }
    let existing = apply(&[], &plan);
    let again = p.plan_address_type(&auto, &pods(3), &existing, "IPv4");
    assert!(again.events.is_empty() && again.to_update.is_empty() && again.to_create.is_empty());

    // Two endpoints for three zones.
    let plan = p.plan_address_type(&auto, &pods(2), &existing, "IPv4");
    assert_eq!(plan.events[0].event_type, "Warning");
    assert_eq!(
        plan.events[0].message,
        "Insufficient number of endpoints (2 endpoints, 3 zones), addressType: IPv4"
    );
    assert!(plan.to_update[0]
        .endpoints
        .iter()
        .all(|e| e.hints.is_none()));

    // The annotation removed: hints removed, with a warning once.
    let existing = apply(&[], &p.plan_address_type(&auto, &pods(3), &[], "IPv4"));
    let plain = service(json!({}));
    let plan = p.plan_address_type(&plain, &pods(3), &existing, "IPv4");
    assert_eq!(
        plan.events[0].message,
        "Topology Aware Hints has been disabled, addressType: IPv4"
    );
    assert_eq!(plan.to_update.len(), 1);
    assert!(plan.to_update[0]
        .endpoints
        .iter()
        .all(|e| e.hints.is_none()));
    let existing = apply(&existing, &plan);
    let plan = p.plan_address_type(&plain, &pods(3), &existing, "IPv4");
    assert!(plan.events.is_empty() && plan.to_update.is_empty());
}

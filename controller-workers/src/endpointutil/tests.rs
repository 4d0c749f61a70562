use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort as CorePort, EndpointSubset, ObjectReference, Pod, Service,
    ServicePort,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::*;

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

fn service(value: serde_json::Value) -> Service {
    serde_json::from_value(value).unwrap()
}

fn address(ip: &str, uid: Option<&str>) -> EndpointAddress {
    EndpointAddress {
        ip: ip.into(),
        target_ref: uid.map(|uid| ObjectReference {
            kind: Some("Pod".into()),
            uid: Some(uid.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn port(name: &str, number: i32) -> CorePort {
    CorePort {
        name: Some(name.into()),
        port: number,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

fn ips(addresses: &Option<Vec<EndpointAddress>>) -> Vec<&str> {
    addresses.iter().flatten().map(|a| a.ip.as_str()).collect()
}

#[test]
fn repacking_groups_ports_by_the_addresses_they_reach() {
    // Three subsets as a naive builder makes them: one per (pod, port).
    let subsets = vec![
        EndpointSubset {
            addresses: Some(vec![address("10.0.0.2", Some("b"))]),
            ports: Some(vec![port("http", 80)]),
            ..Default::default()
        },
        EndpointSubset {
            addresses: Some(vec![address("10.0.0.1", Some("a"))]),
            ports: Some(vec![port("http", 80)]),
            ..Default::default()
        },
        EndpointSubset {
            addresses: Some(vec![address("10.0.0.1", Some("a"))]),
            ports: Some(vec![port("metrics", 9090)]),
            ..Default::default()
        },
    ];
    let repacked = repack_subsets(&subsets);
    assert_eq!(repacked.len(), 2, "{repacked:?}");
    let http = repacked
        .iter()
        .find(|s| s.ports.as_ref().unwrap()[0].port == 80)
        .unwrap();
    assert_eq!(ips(&http.addresses), ["10.0.0.1", "10.0.0.2"]);
    let metrics = repacked
        .iter()
        .find(|s| s.ports.as_ref().unwrap()[0].port == 9090)
        .unwrap();
    assert_eq!(ips(&metrics.addresses), ["10.0.0.1"]);
    // The same subsets in another order repack to the same thing.
    let mut reversed = subsets.clone();
    reversed.reverse();
    assert_eq!(repack_subsets(&reversed), repacked);
    assert!(subsets_equal(&reversed, &subsets));
}

#[test]
fn repacking_merges_ports_with_equal_address_sets_and_not_ready_wins() {
    let subsets = vec![
        EndpointSubset {
            addresses: Some(vec![address("10.0.0.1", Some("a"))]),
            ports: Some(vec![port("a", 1)]),
            ..Default::default()
        },
        EndpointSubset {
            addresses: Some(vec![address("10.0.0.1", Some("a"))]),
            not_ready_addresses: Some(vec![address("10.0.0.1", Some("a"))]),
            ports: Some(vec![port("b", 2)]),
        },
        EndpointSubset {
            addresses: Some(vec![address("10.0.0.1", Some("a"))]),
            ports: Some(vec![port("c", 3)]),
            ..Default::default()
        },
    ];
    let repacked = repack_subsets(&subsets);
    assert_eq!(repacked.len(), 2, "{repacked:?}");
    let merged = repacked.iter().find(|s| s.addresses.is_some()).unwrap();
    let names: Vec<_> = merged
        .ports
        .iter()
        .flatten()
        .map(|p| p.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "c"]);
    let not_ready = repacked.iter().find(|s| s.addresses.is_none()).unwrap();
    assert_eq!(ips(&not_ready.not_ready_addresses), ["10.0.0.1"]);
}

#[test]
fn repacking_keeps_addresses_without_ports_and_drops_nothing_else() {
    let subsets = vec![EndpointSubset {
        addresses: Some(vec![address("10.0.0.3", None), address("10.0.0.2", None)]),
        ..Default::default()
    }];
    let repacked = repack_subsets(&subsets);
    assert_eq!(repacked.len(), 1);
    assert_eq!(repacked[0].ports, None);
    assert_eq!(ips(&repacked[0].addresses), ["10.0.0.2", "10.0.0.3"]);
    assert!(repack_subsets(&[]).is_empty());
}

#[test]
fn subsets_compare_without_target_resource_versions() {
    let mut with_version = address("10.0.0.1", Some("a"));
    with_version.target_ref.as_mut().unwrap().resource_version = Some("7".into());
    let a = vec![EndpointSubset {
        addresses: Some(vec![with_version]),
        ports: Some(vec![port("http", 80)]),
        ..Default::default()
    }];
    let b = vec![EndpointSubset {
        addresses: Some(vec![address("10.0.0.1", Some("a"))]),
        ports: Some(vec![port("http", 80)]),
        ..Default::default()
    }];
    assert!(subsets_equal(&a, &b));
    let c = vec![EndpointSubset {
        not_ready_addresses: Some(vec![address("10.0.0.1", Some("a"))]),
        ports: Some(vec![port("http", 80)]),
        ..Default::default()
    }];
    assert!(!subsets_equal(&a, &c));
}

#[test]
fn address_order_is_by_ip_then_targetless_first_then_uid() {
    let a = address("10.0.0.1", Some("b"));
    let b = address("10.0.0.1", Some("a"));
    let none = address("10.0.0.1", None);
    assert!(less_endpoint_address(&b, &a));
    assert!(less_endpoint_address(&none, &a));
    assert!(!less_endpoint_address(&a, &none));
    assert!(less_endpoint_address(
        &address("10.0.0.10", None),
        &address("10.0.0.2", None)
    ));
}

fn web_pod() -> Pod {
    pod(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "1", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
        "status": {"phase": "Running", "podIP": "10.244.0.2", "podIPs": [{"ip": "10.244.0.2"}],
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
}

#[test]
fn ports_resolve_by_number_or_by_name_and_protocol() {
    let pod = web_pod();
    let by = |target: Option<IntOrString>, protocol: &str| {
        find_port(
            &pod,
            &ServicePort {
                port: 80,
                protocol: Some(protocol.into()),
                target_port: target,
                ..Default::default()
            },
        )
    };
    let cases = [
        (Some(IntOrString::Int(9000)), "TCP", Ok(9000)),
        (None, "TCP", Ok(80)),
        (Some(IntOrString::String("http".into())), "TCP", Ok(8080)),
        (Some(IntOrString::String("dns".into())), "UDP", Ok(53)),
        (
            Some(IntOrString::String("dns".into())),
            "TCP",
            Err("no suitable port for manifest: u1".to_string()),
        ),
        (
            Some(IntOrString::String("nope".into())),
            "TCP",
            Err("no suitable port for manifest: u1".to_string()),
        ),
    ];
    for (target, protocol, want) in cases {
        assert_eq!(by(target.clone(), protocol), want, "{target:?} {protocol}");
    }
}

#[test]
fn which_pods_are_endpoints() {
    let running = web_pod();
    assert!(should_pod_be_in_endpoints(&running, false));
    let mut no_ip = running.clone();
    no_ip.status.as_mut().unwrap().pod_ip = None;
    no_ip.status.as_mut().unwrap().pod_ips = None;
    assert!(!should_pod_be_in_endpoints(&no_ip, true));
    let mut done = running.clone();
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert!(!should_pod_be_in_endpoints(&done, true));
    let mut deleting = running.clone();
    deleting.metadata.deletion_timestamp = running
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()[0]
        .last_transition_time
        .clone();
    assert!(!should_pod_be_in_endpoints(&deleting, false));
    assert!(should_pod_be_in_endpoints(&deleting, true));
}

#[test]
fn hostname_only_for_the_pods_subdomain_service() {
    let svc = service(json!({"metadata": {"name": "hs", "namespace": "ns"}}));
    let mut p = web_pod();
    assert!(!should_set_hostname(&p, &svc));
    p.spec.as_mut().unwrap().hostname = Some("web-0".into());
    p.spec.as_mut().unwrap().subdomain = Some("hs".into());
    assert!(should_set_hostname(&p, &svc));
    p.metadata.namespace = Some("other".into());
    assert!(!should_set_hostname(&p, &svc));
}

fn services_store() -> Store<Service> {
    let store = Store::new();
    for (name, selector) in [
        ("web", json!({"app": "web"})),
        ("api", json!({"app": "api"})),
        ("all-ns", json!({})),
    ] {
        let svc = service(
            json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"selector": selector}}),
        );
        store.apply(key_of(&svc.metadata), std::sync::Arc::new(svc));
    }
    let selectorless =
        service(json!({"metadata": {"name": "manual", "namespace": "ns"}, "spec": {}}));
    store.apply(
        key_of(&selectorless.metadata),
        std::sync::Arc::new(selectorless),
    );
    store
}

#[test]
fn pod_changes_reach_the_services_they_matter_to() {
    let services = services_store();
    let old = web_pod();
    let set = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(pod_service_memberships(&services, &old), set(&["ns/web"]));

    // A resync (same resourceVersion) and a change no endpoint shows: nothing.
    assert!(services_to_update_on_pod_change(&services, &old, &old).is_empty());
    let mut annotated = old.clone();
    annotated.metadata.resource_version = Some("2".into());
    annotated.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
    assert!(services_to_update_on_pod_change(&services, &old, &annotated).is_empty());

    // Readiness changed: the Services selecting it.
    let mut unready = annotated.clone();
    unready
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .status = "False".into();
    assert_eq!(
        services_to_update_on_pod_change(&services, &old, &unready),
        set(&["ns/web"])
    );

    // Labels moved it from web to api: both (the difference).
    let mut moved = annotated.clone();
    moved.metadata.labels = Some([("app".to_string(), "api".to_string())].into());
    assert_eq!(
        services_to_update_on_pod_change(&services, &old, &moved),
        set(&["ns/api", "ns/web"])
    );
    // Labels changed without changing membership, nothing else: nothing.
    let mut relabelled = annotated.clone();
    relabelled.metadata.labels = Some(
        [
            ("app".to_string(), "web".to_string()),
            ("x".to_string(), "y".to_string()),
        ]
        .into(),
    );
    assert!(services_to_update_on_pod_change(&services, &old, &relabelled).is_empty());
    // Labels and IP changed: the union.
    let mut both = moved.clone();
    both.status.as_mut().unwrap().pod_ips = Some(vec![k8s_openapi::api::core::v1::PodIP {
        ip: "10.244.0.9".into(),
    }]);
    assert_eq!(
        services_to_update_on_pod_change(&services, &old, &both),
        set(&["ns/api", "ns/web"])
    );
}

#[test]
fn trigger_time_is_creation_first_then_the_earliest_new_ready_transition() {
    let tracker = TriggerTimeTracker::new();
    let svc = service(
        json!({"metadata": {"name": "web", "namespace": "ns", "creationTimestamp": "2025-12-31T00:00:00Z"}}),
    );
    let p = web_pod();
    let first = tracker.compute(&svc, &[&p]);
    assert_eq!(first.unwrap().to_string(), "2025-12-31T00:00:00Z");
    // Nothing new since: none.
    assert_eq!(tracker.compute(&svc, &[&p]), None);
    // A newer Ready transition: that one.
    let mut later = p.clone();
    later.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time =
        Some(serde_json::from_value(json!("2026-01-02T00:00:00Z")).unwrap());
    assert_eq!(
        tracker.compute(&svc, &[&later]).unwrap().to_string(),
        "2026-01-02T00:00:00Z"
    );
    // A forgotten Service starts over.
    tracker.delete_service("ns", "web");
    assert_eq!(
        tracker.compute(&svc, &[&later]).unwrap().to_string(),
        "2025-12-31T00:00:00Z"
    );
}

fn slice(uid: &str, generation: i64) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid, "generation": generation,
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "endpoints": []
    }))
    .unwrap()
}

#[test]
fn the_slice_tracker_tells_own_writes_from_others_and_stale_caches() {
    let tracker = EndpointSliceTracker::new();
    let a1 = slice("a", 1);
    assert!(
        tracker.should_sync(&a1),
        "unknown slices are someone else's"
    );
    tracker.update(&a1);
    assert!(tracker.has(&a1));
    assert!(!tracker.should_sync(&a1), "its own write's echo");
    assert!(
        tracker.should_sync(&slice("a", 2)),
        "edited by someone else"
    );
    assert!(!tracker.stale_slices("ns", "web", &[&a1]));
    assert!(
        tracker.stale_slices("ns", "web", &[]),
        "a written slice is missing"
    );
    tracker.update(&slice("a", 3));
    assert!(
        tracker.stale_slices("ns", "web", &[&a1]),
        "an older generation in the cache"
    );
    tracker.expect_deletion(&a1);
    assert!(
        tracker.stale_slices("ns", "web", &[&a1]),
        "a deleted slice is still cached"
    );
    assert!(!tracker.stale_slices("ns", "web", &[]));
    assert!(tracker.handle_deletion(&a1), "an expected deletion");
    let b = slice("b", 1);
    tracker.update(&b);
    assert!(!tracker.handle_deletion(&b), "someone else deleted it");
    tracker.update(&b);
    tracker.delete_service("ns", "web");
    assert!(!tracker.has(&b));
}

#[test]
fn endpoint_keys_ignore_address_order_and_compare_the_rest_beyond() {
    let e = |addresses: &[&str], node: &str| -> Endpoint {
        serde_json::from_value(json!({"addresses": addresses, "nodeName": node,
            "targetRef": {"kind": "Pod", "namespace": "ns", "name": "p", "resourceVersion": node}}))
        .unwrap()
    };
    let a = e(&["10.0.0.2", "fd00::2"], "n1");
    let b = e(&["fd00::2", "10.0.0.2"], "n1");
    assert_eq!(EndpointKey::of(&a), EndpointKey::of(&b));
    assert!(endpoints_equal_beyond_key(&a, &b));
    let moved = e(&["10.0.0.2", "fd00::2"], "n2");
    assert!(!endpoints_equal_beyond_key(&a, &moved));
    let set = endpoint_set([a.clone(), b, moved]);
    assert_eq!(set.len(), 1);
    let p = |name: &str, n: i32| EndpointPort {
        name: Some(name.into()),
        port: Some(n),
        protocol: Some("TCP".into()),
        ..Default::default()
    };
    assert_eq!(
        PortMapKey::of(&[p("a", 1), p("b", 2)]),
        PortMapKey::of(&[p("b", 2), p("a", 1)])
    );
}

#[test]
fn selectors_headless_and_external_name() {
    let svc =
        service(json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "None", "selector": {}}}));
    assert!(is_headless(&svc));
    assert_eq!(
        service_selector(&svc),
        None,
        "an empty selector is no selector"
    );
    let normal = service(
        json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.10", "type": "ExternalName"}}),
    );
    assert!(!is_headless(&normal));
    assert!(is_external_name(&normal));
}

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointSubset, Endpoints, Pod, Service};
use serde_json::{json, Value};

use super::*;

fn pod(name: &str, ip: &str, ready: bool) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "resourceVersion": "11", "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x",
                 "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                                   "lastTransitionTime": "2024-05-01T10:00:00Z"}]},
    })
}

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn service(spec: Value) -> Service {
    let mut value = json!({
        "metadata": {"name": "web", "namespace": "ns", "labels": {"team": "a"},
                     "creationTimestamp": "2024-05-01T09:00:00Z"},
        "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ipFamilies": ["IPv4"],
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]},
    });
    for (key, field) in spec.as_object().unwrap() {
        value["spec"][key] = field.clone();
    }
    typed(value)
}

fn ips(addresses: &Option<Vec<EndpointAddress>>) -> Vec<&str> {
    addresses.iter().flatten().map(|a| a.ip.as_str()).collect()
}

/// (ready IPs, not-ready IPs, port numbers) per subset.
fn shape(subsets: &[EndpointSubset]) -> Vec<(Vec<&str>, Vec<&str>, Vec<i32>)> {
    subsets
        .iter()
        .map(|s| {
            (
                ips(&s.addresses),
                ips(&s.not_ready_addresses),
                s.ports.iter().flatten().map(|p| p.port).collect(),
            )
        })
        .collect()
}

#[test]
fn ipv6_is_read_as_go_reads_it() {
    for (text, v6) in [
        ("10.0.0.1", false),
        ("fd00::1", true),
        ("::ffff:10.0.0.1", false),
        ("not an address", false),
        ("", false),
        ("fe80::1%eth0", false),
    ] {
        assert_eq!(is_ipv6(text), v6, "{text}");
    }
}

#[test]
fn the_address_is_the_pods_ip_of_the_services_family() {
    let mut dual = pod("p", "10.244.1.5", true);
    dual["status"]["podIPs"] = json!([{"ip": "10.244.1.5"}, {"ip": "fd00:10:244:1::5"}]);
    let dual: Pod = typed(dual);
    let cases = [
        (json!({"ipFamilies": ["IPv4", "IPv6"]}), Some("10.244.1.5")),
        (
            json!({"ipFamilies": ["IPv6", "IPv4"]}),
            Some("fd00:10:244:1::5"),
        ),
        // No families from an old API server: the cluster IP's, or the pod IP's when
        // headless.
        (
            json!({"ipFamilies": null, "clusterIP": "fd00::a"}),
            Some("fd00:10:244:1::5"),
        ),
        (
            json!({"ipFamilies": null, "clusterIP": "None"}),
            Some("10.244.1.5"),
        ),
    ];
    for (spec, expected) in cases {
        let address = endpoint_address(&service(spec.clone()), &dual).ok();
        assert_eq!(address.as_ref().map(|a| a.ip.as_str()), expected, "{spec}");
    }
    let single: Pod = typed(pod("p", "10.244.1.5", true));
    assert_eq!(
        endpoint_address(&service(json!({"ipFamilies": ["IPv6"]})), &single),
        Err("failed to find a matching endpoint for service web".to_string())
    );
    let address = endpoint_address(&service(json!({})), &single).unwrap();
    assert_eq!(address.node_name.as_deref(), Some("node-1"));
    assert_eq!(address.hostname, None);
    let target = address.target_ref.unwrap();
    assert_eq!(
        (
            target.kind.as_deref(),
            target.namespace.as_deref(),
            target.name.as_deref(),
            target.uid.as_deref(),
            target.resource_version.as_deref()
        ),
        (Some("Pod"), Some("ns"), Some("p"), Some("uid-p"), None)
    );
}

#[test]
fn ready_pods_are_addresses_and_the_others_not_ready_ones() {
    let mut failed = pod("failed", "10.0.0.4", false);
    failed["status"]["phase"] = json!("Failed");
    let mut no_ip = pod("pending", "", false);
    no_ip["status"]["podIPs"] = json!(null);
    let mut deleting = pod("deleting", "10.0.0.6", true);
    deleting["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:00:00Z");
    let pods: Vec<Pod> = [
        pod("b", "10.0.0.2", true),
        pod("a", "10.0.0.1", true),
        pod("c", "10.0.0.3", false),
        failed,
        no_ip,
        deleting,
    ]
    .into_iter()
    .map(typed)
    .collect();
    let pods: Vec<&Pod> = pods.iter().collect();
    let desired = desired_subsets(&service(json!({})), &pods);
    assert_eq!(
        shape(&desired.subsets),
        vec![(vec!["10.0.0.1", "10.0.0.2"], vec!["10.0.0.3"], vec![8080])]
    );
    assert_eq!((desired.ready, desired.not_ready), (2, 1));
    let port = &desired.subsets[0].ports.as_ref().unwrap()[0];
    assert_eq!(port.name.as_deref(), Some("http"));
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(port.app_protocol, None);

    // publishNotReadyAddresses: every pod with an IP that has not finished is an
    // address, the one being deleted included.
    let desired = desired_subsets(&service(json!({"publishNotReadyAddresses": true})), &pods);
    assert_eq!(
        shape(&desired.subsets),
        vec![(
            vec!["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.6"],
            vec![],
            vec![8080]
        )]
    );
}

#[test]
fn a_pod_without_a_named_port_is_left_out_of_that_port_only() {
    let mut other = pod("other", "10.0.0.2", true);
    other["spec"]["containers"][0]["ports"] = json!([{"containerPort": 9000}]);
    let pods: Vec<Pod> = vec![typed(pod("a", "10.0.0.1", true)), typed(other)];
    let pods: Vec<&Pod> = pods.iter().collect();
    let svc = service(json!({"ports": [
        {"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"},
        {"name": "raw", "port": 81, "targetPort": 9000, "protocol": "TCP", "appProtocol": "h2c"},
    ]}));
    let desired = desired_subsets(&svc, &pods);
    let mut subsets = shape(&desired.subsets);
    subsets.sort();
    assert_eq!(
        subsets,
        vec![
            (vec!["10.0.0.1"], vec![], vec![8080]),
            (vec!["10.0.0.1", "10.0.0.2"], vec![], vec![9000]),
        ]
    );
    let raw = desired
        .subsets
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .find(|p| p.port == 9000)
        .unwrap();
    assert_eq!(raw.name.as_deref(), Some("raw"));
    assert_eq!(raw.app_protocol.as_deref(), Some("h2c"));

    // No pod has the port: no subsets at all, and nothing panics.
    let svc = service(json!({"ports": [{"port": 80, "targetPort": "nope"}]}));
    assert!(desired_subsets(&svc, &pods).subsets.is_empty());
}

#[test]
fn headless_services_without_ports_get_bare_addresses_with_hostnames() {
    let mut named = pod("web-0", "10.0.0.1", true);
    named["spec"]["hostname"] = json!("web-0");
    named["spec"]["subdomain"] = json!("web");
    let mut elsewhere = pod("web-1", "10.0.0.2", false);
    elsewhere["spec"]["hostname"] = json!("web-1");
    elsewhere["spec"]["subdomain"] = json!("other");
    let pods: Vec<Pod> = vec![typed(named), typed(elsewhere)];
    let pods: Vec<&Pod> = pods.iter().collect();
    let desired = desired_subsets(&service(json!({"clusterIP": "None", "ports": []})), &pods);
    assert_eq!(
        shape(&desired.subsets),
        vec![(vec!["10.0.0.1"], vec!["10.0.0.2"], vec![])]
    );
    let subset = &desired.subsets[0];
    assert_eq!(subset.ports, None);
    assert_eq!(
        subset.addresses.as_ref().unwrap()[0].hostname.as_deref(),
        Some("web-0")
    );
    assert_eq!(
        subset.not_ready_addresses.as_ref().unwrap()[0].hostname,
        None
    );
    // A Service with a cluster IP and no ports has no endpoints.
    assert!(desired_subsets(&service(json!({"ports": []})), &pods)
        .subsets
        .is_empty());
}

fn counted_subsets(ready: &[usize], not_ready: &[usize]) -> Vec<EndpointSubset> {
    let list = |n: usize| Some(vec![EndpointAddress::default(); n]).filter(|l| !l.is_empty());
    ready
        .iter()
        .zip(not_ready)
        .map(|(&r, &n)| EndpointSubset {
            addresses: list(r),
            not_ready_addresses: list(n),
            ports: None,
        })
        .collect()
}

#[test]
fn truncation_keeps_ready_addresses_first_in_proportion() {
    // Upstream's table: per subset ready and not-ready counts, before and after.
    type Counts = &'static [usize];
    let cases: [(&str, Counts, Counts, Counts, Counts, bool); 5] = [
        ("empty", &[], &[], &[], &[], false),
        (
            "under capacity",
            &[50, 100, 100, 100, 100],
            &[50, 100, 100, 100, 100],
            &[50, 100, 100, 100, 100],
            &[50, 100, 100, 100, 100],
            false,
        ),
        (
            "at capacity",
            &[100, 100, 100, 100, 100],
            &[100, 100, 100, 100, 100],
            &[100, 100, 100, 100, 100],
            &[100, 100, 100, 100, 100],
            false,
        ),
        (
            "ready under capacity, all over",
            &[90, 110, 50, 10, 20],
            &[101, 200, 200, 201, 298],
            &[90, 110, 50, 10, 20],
            &[73, 144, 144, 145, 214],
            true,
        ),
        (
            "ready over capacity",
            &[205, 400, 402, 400, 693],
            &[100, 200, 200, 200, 300],
            &[98, 191, 192, 191, 328],
            &[0, 0, 0, 0, 0],
            true,
        ),
    ];
    for (name, ready, not_ready, want_ready, want_not_ready, cut) in cases {
        let mut subsets = counted_subsets(ready, not_ready);
        assert_eq!(truncate(&mut subsets), cut, "{name}");
        let got_ready: Vec<usize> = subsets.iter().map(|s| count(&s.addresses)).collect();
        let got_not_ready: Vec<usize> = subsets
            .iter()
            .map(|s| count(&s.not_ready_addresses))
            .collect();
        assert_eq!(got_ready, want_ready, "{name}: ready");
        assert_eq!(got_not_ready, want_not_ready, "{name}: not ready");
        assert!(
            subsets
                .iter()
                .all(|s| s.not_ready_addresses.as_ref().is_none_or(|l| !l.is_empty())),
            "{name}: an emptied list is left out"
        );
    }
}

#[test]
fn trigger_times_are_formatted_as_go_formats_rfc3339_nano() {
    for (time, text) in [
        ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z"),
        ("2024-05-01T10:00:00.5Z", "2024-05-01T10:00:00.5Z"),
        ("2024-05-01T10:00:00.100Z", "2024-05-01T10:00:00.1Z"),
        (
            "2024-05-01T10:00:00.123456789Z",
            "2024-05-01T10:00:00.123456789Z",
        ),
        (
            "2024-05-01T10:00:00.000000001Z",
            "2024-05-01T10:00:00.000000001Z",
        ),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T10:00:00Z"),
        ("1969-12-31T23:59:59.25Z", "1969-12-31T23:59:59.25Z"),
    ] {
        let parsed: Timestamp = time.parse().unwrap();
        assert_eq!(rfc3339_nano(parsed), text, "{time}");
    }
}

fn ready_pods(count: usize) -> Vec<Pod> {
    (0..count)
        .map(|i| {
            typed(pod(
                &format!("p{i}"),
                &format!("10.0.{}.{}", i / 250, i % 250 + 1),
                true,
            ))
        })
        .collect()
}

/// The Endpoints the API server would hold after `write`.
fn stored(write: &Write, version: &str) -> Endpoints {
    let mut endpoints = write.endpoints.clone();
    endpoints.metadata.namespace = Some("ns".into());
    endpoints.metadata.resource_version = Some(version.into());
    endpoints
}

fn trigger() -> Option<Timestamp> {
    "2024-05-01T09:00:00Z".parse().ok()
}

#[test]
fn a_new_service_gets_its_endpoints_created_with_labels_and_trigger_time() {
    let pods = ready_pods(2);
    let pods: Vec<&Pod> = pods.iter().collect();
    let svc = service(json!({}));
    let subsets = desired_subsets(&svc, &pods).subsets;
    let write = endpoints_to_write(&svc, None, subsets, trigger()).expect("created");
    assert!(write.create);
    let meta = &write.endpoints.metadata;
    assert_eq!(meta.name.as_deref(), Some("web"));
    assert_eq!(meta.namespace, None, "the request path names it");
    assert_eq!(
        meta.labels,
        Some(BTreeMap::from([("team".to_string(), "a".to_string())]))
    );
    assert_eq!(
        meta.annotations,
        Some(BTreeMap::from([(
            LAST_CHANGE_TRIGGER_TIME.to_string(),
            "2024-05-01T09:00:00Z".to_string()
        )]))
    );
    assert_eq!(
        shape(write.endpoints.subsets.as_deref().unwrap()),
        vec![(vec!["10.0.0.1", "10.0.0.2"], vec![], vec![8080])]
    );

    // Headless: labelled so; no pods: no subsets; no trigger: no annotation.
    let headless = service(json!({"clusterIP": "None"}));
    let write = endpoints_to_write(&headless, None, Vec::new(), None).unwrap();
    assert_eq!(write.endpoints.subsets, None);
    assert_eq!(
        write.endpoints.metadata.labels.unwrap().get(HEADLESS_LABEL),
        Some(&String::new())
    );
    assert_eq!(write.endpoints.metadata.annotations, Some(BTreeMap::new()));
}

#[test]
fn endpoints_already_right_are_not_written_whatever_their_trigger_time() {
    let pods = ready_pods(3);
    let pods: Vec<&Pod> = pods.iter().collect();
    let svc = service(json!({"clusterIP": "None"}));
    let subsets = desired_subsets(&svc, &pods).subsets;
    let first = endpoints_to_write(&svc, None, subsets.clone(), trigger()).unwrap();
    let mut current = stored(&first, "5");
    // Someone else's annotation, and pods' resourceVersions that moved on.
    current
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert("note".into(), "kept".into());
    let mut moved = subsets.clone();
    for address in moved[0].addresses.iter_mut().flatten() {
        if let Some(target) = address.target_ref.as_mut() {
            target.resource_version = Some("99".into());
        }
    }
    let later: Option<Timestamp> = "2024-05-01T10:00:00Z".parse().ok();
    assert!(endpoints_to_write(&svc, Some(&current), moved, later).is_none());
    // The subsets in another order are the same subsets.
    let mut reordered = current.clone();
    if let Some(addresses) = reordered.subsets.as_mut().unwrap()[0].addresses.as_mut() {
        addresses.reverse();
    }
    assert!(endpoints_to_write(&svc, Some(&reordered), subsets.clone(), None).is_none());

    // A pod fewer: replaced, others' annotations kept, the trigger time as given.
    let write = endpoints_to_write(&svc, Some(&current), subsets[..0].to_vec(), later).unwrap();
    assert!(!write.create);
    assert_eq!(
        write.endpoints.metadata.resource_version.as_deref(),
        Some("5")
    );
    assert_eq!(write.endpoints.subsets, None);
    let annotations = write.endpoints.metadata.annotations.unwrap();
    assert_eq!(annotations["note"], "kept");
    assert_eq!(
        annotations[LAST_CHANGE_TRIGGER_TIME],
        "2024-05-01T10:00:00Z"
    );
    // Without a new trigger time the annotation goes.
    let write = endpoints_to_write(&svc, Some(&current), Vec::new(), None).unwrap();
    assert!(!write
        .endpoints
        .metadata
        .annotations
        .unwrap()
        .contains_key(LAST_CHANGE_TRIGGER_TIME));
}

#[test]
fn labels_follow_the_service() {
    let svc = service(json!({}));
    let first = endpoints_to_write(&svc, None, Vec::new(), None).unwrap();
    let mut current = stored(&first, "5");
    let labels = current.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert("extra".into(), "x".into());
    // A headless label the Service cannot justify is not compared (upstream ignores it)...
    let mut only_headless = stored(&first, "5");
    only_headless
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(HEADLESS_LABEL.into(), String::new());
    assert!(endpoints_to_write(&svc, Some(&only_headless), Vec::new(), None).is_none());
    // ...but any other difference rewrites the labels as the Service's.
    let write = endpoints_to_write(&svc, Some(&current), Vec::new(), None).unwrap();
    assert_eq!(
        write.endpoints.metadata.labels,
        Some(BTreeMap::from([("team".to_string(), "a".to_string())]))
    );
    // An object without a resourceVersion was never stored: it is created.
    let mut unstored = current.clone();
    unstored.metadata.resource_version = None;
    assert!(
        endpoints_to_write(&svc, Some(&unstored), Vec::new(), None)
            .unwrap()
            .create
    );
}

#[test]
fn over_capacity_endpoints_are_truncated_and_annotated_until_back_under() {
    let svc = service(json!({}));
    let many = ready_pods(MAX_CAPACITY + 1);
    let many: Vec<&Pod> = many.iter().collect();
    let subsets = desired_subsets(&svc, &many).subsets;
    let write = endpoints_to_write(&svc, None, subsets.clone(), None).unwrap();
    let kept: usize = write
        .endpoints
        .subsets
        .iter()
        .flatten()
        .map(|s| count(&s.addresses))
        .sum();
    assert_eq!(kept, MAX_CAPACITY);
    let annotations = write.endpoints.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations[OVER_CAPACITY], TRUNCATED);
    // Still over: the truncated object differs from the full subsets, so upstream writes
    // again (a no-op for the API server).
    let current = stored(&write, "5");
    assert!(endpoints_to_write(&svc, Some(&current), subsets, None).is_some());

    // Back to 1000: written without the annotation, then left alone.
    let at_capacity = &many[..MAX_CAPACITY];
    let subsets = desired_subsets(&svc, at_capacity).subsets;
    let write = endpoints_to_write(&svc, Some(&current), subsets.clone(), None).unwrap();
    assert!(!write
        .endpoints
        .metadata
        .annotations
        .as_ref()
        .unwrap()
        .contains_key(OVER_CAPACITY));
    let current = stored(&write, "6");
    assert!(endpoints_to_write(&svc, Some(&current), subsets.clone(), None).is_none());

    // Any value of the annotation within capacity is removed (an old "warning").
    let mut warned = current.clone();
    warned
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(OVER_CAPACITY.into(), "warning".into());
    let write = endpoints_to_write(&svc, Some(&warned), subsets, None).unwrap();
    assert!(!write
        .endpoints
        .metadata
        .annotations
        .unwrap()
        .contains_key(OVER_CAPACITY));
}

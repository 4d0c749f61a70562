//! Table tests of the mirroring decisions: what is mirrored at all, the slices a sync
//! plans for an Endpoints and its existing slices, the events and counts it reports, the
//! flags' checks, and which changes the handlers queue.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use serde_json::{json, Value};

use super::helpers::{
    endpoint_slice_prefix, recycle_slices, should_mirror, SlicesByAction, TotalsByAction,
};
use super::reconciler::{
    plan, total_changes, Plan, INVALID_IP_ADDRESS, TOO_MANY_ADDRESSES_TO_MIRROR,
};
use super::*;
use crate::endpointutil::endpoint_set;
use crate::informer::{Change, DeletedObject};
use crate::meta::ResourceNames;

fn endpoints(value: Value) -> Endpoints {
    let mut object = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "ext", "namespace": "ns", "uid": "ep-uid"},
    });
    merge(&mut object, value);
    serde_json::from_value(object).unwrap()
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(&key);
                } else {
                    merge(target.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        (target, patch) => *target = patch,
    }
}

fn slice(value: Value) -> Arc<EndpointSlice> {
    let mut object = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "ns", "generation": 1, "labels": {
            "kubernetes.io/service-name": "ext",
            "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
        }},
        "addressType": "IPv4", "endpoints": [],
    });
    merge(&mut object, value);
    Arc::new(serde_json::from_value(object).unwrap())
}

fn address(ip: &str) -> Value {
    json!({"ip": ip})
}

fn port(name: &str, number: i32) -> Value {
    json!({"name": name, "port": number, "protocol": "TCP"})
}

fn slice_port(name: &str, number: i32) -> Value {
    json!({"name": name, "port": number, "protocol": "TCP"})
}

/// The slice's endpoints as (address, ready).
fn endpoints_of(slice: &EndpointSlice) -> Vec<(String, bool)> {
    slice
        .endpoints
        .iter()
        .map(|endpoint| {
            (
                endpoint.addresses.join(","),
                endpoint
                    .conditions
                    .as_ref()
                    .and_then(|c| c.ready)
                    .unwrap_or_default(),
            )
        })
        .collect()
}

fn names(slices: &[Arc<EndpointSlice>]) -> Vec<&str> {
    slices.iter().map(|s| s.name_str()).collect()
}

fn counts(plan: &Plan) -> (usize, usize, usize) {
    (
        plan.slices.to_create.len(),
        plan.slices.to_update.len(),
        plan.slices.to_delete.len(),
    )
}

#[test]
fn only_endpoints_without_skip_mirror_or_leader_lock_are_mirrored() {
    for (labels, annotations, mirrored) in [
        (json!({}), json!({}), true),
        (
            json!({"endpointslice.kubernetes.io/skip-mirror": "true"}),
            json!({}),
            false,
        ),
        (
            json!({"endpointslice.kubernetes.io/skip-mirror": "false"}),
            json!({}),
            true,
        ),
        (
            json!({"endpointslice.kubernetes.io/skip-mirror": "True"}),
            json!({}),
            true,
        ),
        (
            json!({}),
            json!({"control-plane.alpha.kubernetes.io/leader": ""}),
            false,
        ),
    ] {
        let object = endpoints(json!({"metadata": {"labels": labels, "annotations": annotations}}));
        assert_eq!(should_mirror(&object), mirrored, "{:?}", object.metadata);
    }
}

#[test]
fn a_new_endpoints_gets_one_slice_with_its_labels_annotations_and_owner() {
    let object = endpoints(json!({
        "metadata": {
            "labels": {"x": "y"},
            "annotations": {
                "a": "b",
                "endpoints.kubernetes.io/last-change-trigger-time": "2024-01-01T00:00:00Z",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
        },
        "subsets": [{
            "addresses": [
                {"ip": "10.0.0.2", "hostname": "b", "nodeName": "n2",
                 "targetRef": {"kind": "Pod", "namespace": "ns", "name": "pb", "uid": "ub"}},
                {"ip": "10.0.0.1", "nodeName": "n1"},
            ],
            "notReadyAddresses": [address("10.0.0.3")],
            "ports": [port("http", 80)],
        }],
    }));
    let plan = plan(&object, &[], 1000);
    assert_eq!(counts(&plan), (1, 0, 0));
    let created = &plan.slices.to_create[0];
    assert_eq!(created.metadata.generate_name.as_deref(), Some("ext-"));
    assert_eq!(created.metadata.name, None);
    assert_eq!(created.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(created.address_type, "IPv4");
    assert_eq!(
        created.metadata.labels,
        Some(BTreeMap::from([
            ("x".to_string(), "y".to_string()),
            ("kubernetes.io/service-name".to_string(), "ext".to_string()),
            (
                "endpointslice.kubernetes.io/managed-by".to_string(),
                MANAGED_BY.to_string()
            ),
        ]))
    );
    assert_eq!(
        created.metadata.annotations,
        Some(BTreeMap::from([("a".to_string(), "b".to_string())])),
        "the trigger time and kubectl's record are not mirrored"
    );
    let owners = created
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (
            owners[0].api_version.as_str(),
            owners[0].kind.as_str(),
            owners[0].name.as_str(),
            owners[0].uid.as_str(),
            owners[0].controller,
            owners[0].block_owner_deletion
        ),
        ("v1", "Endpoints", "ext", "ep-uid", Some(true), Some(true))
    );
    let ports = created.ports.clone().unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(
        (
            ports[0].name.as_deref(),
            ports[0].port,
            ports[0].protocol.as_deref()
        ),
        (Some("http"), Some(80), Some("TCP"))
    );
    assert_eq!(
        endpoints_of(created),
        vec![
            ("10.0.0.1".to_string(), true),
            ("10.0.0.2".to_string(), true),
            ("10.0.0.3".to_string(), false)
        ]
    );
    let second = &created.endpoints[1];
    assert_eq!(second.hostname.as_deref(), Some("b"));
    assert_eq!(second.node_name.as_deref(), Some("n2"));
    assert_eq!(
        second.target_ref.as_ref().and_then(|t| t.name.as_deref()),
        Some("pb")
    );
    let conditions = second.conditions.clone().unwrap_or_default();
    assert_eq!(
        (conditions.ready, conditions.serving, conditions.terminating),
        (Some(true), None, None),
        "only the ready condition is mirrored"
    );
    assert_eq!(created.endpoints[0].hostname, None);
    assert_eq!(
        plan.totals,
        TotalsByAction {
            added: 3,
            updated: 0,
            removed: 0
        }
    );
    assert!(plan.events(1000).is_empty());
    assert_eq!(plan.addresses_skipped, 0);
}

/// A slice as (address type, ports, endpoints).
type Made = (String, Vec<i32>, Vec<(String, bool)>);

#[test]
fn each_port_set_and_address_family_gets_its_own_slice() {
    let object = endpoints(json!({"subsets": [
        {"addresses": [address("10.0.0.1"), address("2001:db8::1")], "ports": [port("http", 80)]},
        {"addresses": [address("10.0.0.2")], "ports": [port("http", 80), port("https", 443)]},
        {"addresses": [address("2001:db8::2"), address("2001:db8::3")]},
    ]}));
    let plan = plan(&object, &[], 1000);
    let mut made: Vec<Made> = plan
        .slices
        .to_create
        .iter()
        .map(|s| {
            (
                s.address_type.clone(),
                s.ports.iter().flatten().filter_map(|p| p.port).collect(),
                endpoints_of(s),
            )
        })
        .collect();
    made.sort();
    let ready = |ip: &str| (ip.to_string(), true);
    assert_eq!(
        made,
        vec![
            // Repacked: port 80 reaches both IPv4 addresses, 443 only the second.
            (
                "IPv4".into(),
                vec![80],
                vec![ready("10.0.0.1"), ready("10.0.0.2")]
            ),
            ("IPv4".into(), vec![443], vec![ready("10.0.0.2")]),
            (
                "IPv6".into(),
                vec![],
                vec![ready("2001:db8::2"), ready("2001:db8::3")]
            ),
            ("IPv6".into(), vec![80], vec![ready("2001:db8::1")]),
        ]
    );
    // Groups of a subset's other family stay empty and make no slice.
    assert_eq!(plan.efficiency.len(), 6);
    assert_eq!(
        plan.efficiency.values().map(|i| i.endpoints).sum::<usize>(),
        6
    );
    assert_eq!(plan.efficiency.values().map(|i| i.slices).sum::<usize>(), 4);
}

#[test]
fn ipv6_endpoints_are_mirrored_into_ipv6_slices() {
    let object = endpoints(json!({"subsets": [{
        "addresses": [address("fd00::10")],
        "notReadyAddresses": [address("fd00::11")],
        "ports": [port("", 53)],
    }]}));
    let plan = plan(&object, &[], 1000);
    assert_eq!(counts(&plan), (1, 0, 0));
    let created = &plan.slices.to_create[0];
    assert_eq!(created.address_type, "IPv6");
    assert_eq!(
        endpoints_of(created),
        vec![
            ("fd00::10".to_string(), true),
            ("fd00::11".to_string(), false)
        ]
    );
    let ports = created.ports.clone().unwrap_or_default();
    assert_eq!(
        ports[0].name.as_deref(),
        Some(""),
        "an unnamed port is named \"\""
    );
}

#[test]
fn a_subset_mirrors_at_most_the_maximum_ready_addresses_first() {
    let object = endpoints(json!({"subsets": [{
        "addresses": [address("10.0.0.9")],
        "notReadyAddresses": [address("10.0.0.1"), address("10.0.0.2")],
        "ports": [port("http", 80)],
    }]}));
    let plan = plan(&object, &[], 2);
    assert_eq!(
        endpoints_of(&plan.slices.to_create[0]),
        vec![
            ("10.0.0.1".to_string(), false),
            ("10.0.0.9".to_string(), true)
        ],
        "the ready address first, then the first not-ready one"
    );
    assert_eq!(plan.addresses_skipped, 1);
    assert_eq!(
        plan.events(2),
        vec![(
            TOO_MANY_ADDRESSES_TO_MIRROR,
            "A max of 2 addresses can be mirrored to EndpointSlices per Endpoints subset. 1 addresses were skipped".to_string()
        )]
    );
    // The maximum is per subset: two subsets of two all fit.
    let two = endpoints(json!({"subsets": [
        {"addresses": [address("10.0.0.1"), address("10.0.0.2")], "ports": [port("a", 1)]},
        {"addresses": [address("10.0.0.3"), address("10.0.0.4")], "ports": [port("b", 2)]},
    ]}));
    let plan = super::reconciler::plan(&two, &[], 2);
    assert_eq!(plan.addresses_skipped, 0);
    assert_eq!(counts(&plan), (2, 0, 0));
}

#[test]
fn addresses_that_are_not_ips_are_skipped_and_reported() {
    let object = endpoints(json!({"subsets": [{
        "addresses": [address("10.0.0.1"), address("not-an-ip"), address("10.0.0.300")],
        "ports": [port("http", 80)],
    }]}));
    let plan = plan(&object, &[], 1000);
    assert_eq!(
        endpoints_of(&plan.slices.to_create[0]),
        vec![("10.0.0.1".to_string(), true)]
    );
    assert_eq!(plan.invalid_addresses.len(), 2);
    assert_eq!(plan.addresses_skipped, 2);
    assert_eq!(
        plan.events(1000),
        vec![(
            INVALID_IP_ADDRESS,
            "Skipped 2 invalid IP addresses when mirroring to EndpointSlices".to_string()
        )]
    );
    // Invalid and over the maximum: both events, the second counting every skipped one.
    let plan = super::reconciler::plan(
        &endpoints(json!({"subsets": [{
            // Repacking sorts by IP text: "0bad" is looked at first.
            "addresses": [address("0bad"), address("10.0.0.1"), address("10.0.0.2")],
        }]})),
        &[],
        1,
    );
    assert_eq!(plan.addresses_skipped, 2);
    let reasons: Vec<(&str, String)> = plan.events(1);
    assert_eq!(reasons.len(), 2);
    assert_eq!(reasons[0].0, INVALID_IP_ADDRESS);
    assert_eq!(
        reasons[1].1,
        "A max of 1 addresses can be mirrored to EndpointSlices per Endpoints subset. 2 addresses were skipped"
    );
    // Past the maximum, addresses are not looked at: "bad" counts as over the maximum.
    let plan = super::reconciler::plan(
        &endpoints(json!({"subsets": [{
            "addresses": [address("bad"), address("10.0.0.1"), address("10.0.0.2")],
        }]})),
        &[],
        1,
    );
    assert!(plan.invalid_addresses.is_empty());
    assert_eq!(
        plan.events(1),
        vec![(
            TOO_MANY_ADDRESSES_TO_MIRROR,
            "A max of 1 addresses can be mirrored to EndpointSlices per Endpoints subset. 2 addresses were skipped".to_string()
        )]
    );
    // Only invalid addresses: no slice, nothing over the maximum.
    let plan = super::reconciler::plan(
        &endpoints(json!({"subsets": [{"addresses": [address("x")]}]})),
        &[],
        1000,
    );
    assert_eq!(counts(&plan), (0, 0, 0));
    assert_eq!(plan.events(1000).len(), 1);
}

/// A slice as the controller would have written it for `object`, named `name`.
fn mirrored(object: &Endpoints, name: &str) -> Arc<EndpointSlice> {
    let plan = plan(object, &[], 1000);
    let mut written = plan.slices.to_create[0].clone();
    written.metadata.name = Some(name.to_string());
    written.metadata.generate_name = None;
    written.metadata.uid = Some(format!("uid-{name}"));
    Arc::new(written)
}

#[test]
fn an_up_to_date_slice_is_left_alone_and_label_or_annotation_changes_are_propagated() {
    let base = json!({
        "metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}},
        "subsets": [{"addresses": [address("10.0.0.1")], "ports": [port("http", 80)]}],
    });
    let object = endpoints(base.clone());
    let existing = mirrored(&object, "ext-abcde");
    let unchanged = plan(&object, std::slice::from_ref(&existing), 1000);
    assert_eq!(counts(&unchanged), (0, 0, 0));
    assert_eq!(unchanged.totals, TotalsByAction::default());

    // A new trigger time alone changes nothing.
    let mut with_trigger = base.clone();
    merge(
        &mut with_trigger,
        json!({"metadata": {"annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "t"}}}),
    );
    assert_eq!(
        counts(&plan(
            &endpoints(with_trigger),
            std::slice::from_ref(&existing),
            1000
        )),
        (0, 0, 0)
    );

    for (what, patch) in [
        ("a new label", json!({"metadata": {"labels": {"z": "w"}}})),
        (
            "a changed label",
            json!({"metadata": {"labels": {"x": "other"}}}),
        ),
        (
            "a new annotation",
            json!({"metadata": {"annotations": {"c": "d"}}}),
        ),
        (
            "a removed annotation",
            json!({"metadata": {"annotations": {"a": null}}}),
        ),
    ] {
        let mut changed = base.clone();
        merge(&mut changed, patch);
        let changed = endpoints(changed);
        let plan = plan(&changed, std::slice::from_ref(&existing), 1000);
        assert_eq!(counts(&plan), (0, 1, 0), "{what}");
        let updated = &plan.slices.to_update[0];
        assert_eq!(
            updated.metadata.name.as_deref(),
            Some("ext-abcde"),
            "{what}"
        );
        let mut labels = changed.labels().clone();
        labels.insert("kubernetes.io/service-name".into(), "ext".into());
        labels.insert(
            "endpointslice.kubernetes.io/managed-by".into(),
            MANAGED_BY.into(),
        );
        assert_eq!(updated.metadata.labels, Some(labels), "{what}");
        assert_eq!(
            updated.metadata.annotations,
            Some(changed.annotations().clone()),
            "{what}"
        );
        assert_eq!(plan.totals, TotalsByAction::default(), "{what}");
    }
}

#[test]
fn changed_addresses_update_the_first_slice_and_extra_slices_go() {
    let before = endpoints(json!({"subsets": [{
        "addresses": [address("10.0.0.1"), address("10.0.0.2")],
        "ports": [port("http", 80)],
    }]}));
    let first = mirrored(&before, "ext-aaaaa");
    let extra = mirrored(&before, "ext-bbbbb");
    let after = endpoints(json!({"subsets": [{
        "addresses": [address("10.0.0.2"), address("10.0.0.3")],
        "notReadyAddresses": [address("10.0.0.1")],
        "ports": [port("http", 80)],
    }]}));
    let plan = plan(&after, &[extra.clone(), first.clone()], 1000);
    assert_eq!(counts(&plan), (0, 1, 1));
    assert_eq!(
        plan.slices.to_update[0].metadata.name.as_deref(),
        Some("ext-aaaaa"),
        "the first slice by name is kept"
    );
    assert_eq!(names(&plan.slices.to_delete), vec!["ext-bbbbb"]);
    assert_eq!(
        endpoints_of(&plan.slices.to_update[0]),
        vec![
            ("10.0.0.1".to_string(), false),
            ("10.0.0.2".to_string(), true),
            ("10.0.0.3".to_string(), true)
        ]
    );
    assert_eq!(
        plan.totals,
        TotalsByAction {
            added: 1,
            updated: 1,
            removed: 0
        }
    );
}

#[test]
fn a_changed_port_set_recycles_the_old_slice() {
    let before = endpoints(json!({"subsets": [{
        "addresses": [address("10.0.0.1")], "ports": [port("http", 80)],
    }]}));
    let old = mirrored(&before, "ext-aaaaa");
    let after = endpoints(json!({"subsets": [{
        "addresses": [address("10.0.0.1")], "ports": [port("http", 8080)],
    }]}));
    let mut plan = plan(&after, &[old], 1000);
    assert_eq!(counts(&plan), (1, 0, 1));
    recycle_slices(&mut plan.slices);
    assert_eq!(
        (
            plan.slices.to_create.len(),
            plan.slices.to_update.len(),
            plan.slices.to_delete.len()
        ),
        (0, 1, 0)
    );
    let recycled = &plan.slices.to_update[0];
    assert_eq!(recycled.metadata.name.as_deref(), Some("ext-aaaaa"));
    assert_eq!(
        recycled
            .ports
            .iter()
            .flatten()
            .filter_map(|p| p.port)
            .collect::<Vec<_>>(),
        vec![8080]
    );
}

#[test]
fn recycling_pairs_slices_of_the_same_address_type() {
    let created = |family: &str| -> EndpointSlice {
        (*slice(json!({"addressType": family, "metadata": {"labels": {}}}))).clone()
    };
    let mut slices = SlicesByAction {
        to_create: vec![created("IPv6"), created("IPv4"), created("IPv4")],
        to_update: Vec::new(),
        to_delete: vec![
            slice(json!({"metadata": {"name": "v4-old"}, "addressType": "IPv4"})),
            slice(json!({"metadata": {"name": "v6-old"}, "addressType": "IPv6"})),
            slice(json!({"metadata": {"name": "fqdn"}, "addressType": "FQDN"})),
        ],
    };
    recycle_slices(&mut slices);
    let mut updated: Vec<(String, String)> = slices
        .to_update
        .iter()
        .map(|s| (s.address_type.clone(), s.name_str().to_string()))
        .collect();
    updated.sort();
    assert_eq!(
        updated,
        vec![
            ("IPv4".to_string(), "v4-old".to_string()),
            ("IPv6".to_string(), "v6-old".to_string())
        ]
    );
    assert_eq!(slices.to_create.len(), 1);
    assert_eq!(slices.to_create[0].address_type, "IPv4");
    assert_eq!(names(&slices.to_delete), vec!["fqdn"]);
}

#[test]
fn endpoints_without_addresses_lose_their_slices() {
    let before = endpoints(json!({"subsets": [{
        "addresses": [address("10.0.0.1"), address("10.0.0.2")], "ports": [port("http", 80)],
    }]}));
    let existing = mirrored(&before, "ext-aaaaa");
    for (what, after) in [
        ("no subsets", endpoints(json!({}))),
        (
            "only invalid addresses",
            endpoints(
                json!({"subsets": [{"addresses": [address("x")], "ports": [port("http", 80)]}]}),
            ),
        ),
    ] {
        let plan = plan(&after, std::slice::from_ref(&existing), 1000);
        assert_eq!(counts(&plan), (0, 0, 1), "{what}");
        assert_eq!(names(&plan.slices.to_delete), vec!["ext-aaaaa"], "{what}");
    }
    let plan = plan(
        &endpoints(
            json!({"subsets": [{"addresses": [address("x")], "ports": [port("http", 80)]}]}),
        ),
        &[existing],
        1000,
    );
    assert_eq!(plan.totals.removed, 2);
}

#[test]
fn totals_compare_endpoints_by_identity_then_content() {
    let existing = slice(json!({"endpoints": [
        {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
        {"addresses": ["10.0.0.2"], "conditions": {"ready": true}, "nodeName": "n1"},
        {"addresses": ["10.0.0.3"], "conditions": {"ready": true}},
    ]}));
    let desired = endpoint_set(
        serde_json::from_value::<Vec<k8s_openapi::api::discovery::v1::Endpoint>>(json!([
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": true}, "nodeName": "n2"},
            {"addresses": ["10.0.0.4"], "conditions": {"ready": false}},
            {"addresses": ["10.0.0.5"], "conditions": {"ready": false}},
        ]))
        .unwrap(),
    );
    assert_eq!(
        total_changes(&existing, &desired),
        TotalsByAction {
            added: 2,
            updated: 1,
            removed: 1
        }
    );
}

#[test]
fn slices_of_other_groups_are_deleted() {
    let object = endpoints(json!({"subsets": [{
        "addresses": [address("10.0.0.1")], "ports": [port("http", 80)],
    }]}));
    let kept = mirrored(&object, "ext-aaaaa");
    let stray = slice(json!({
        "metadata": {"name": "ext-fqdn"}, "addressType": "FQDN",
        "ports": [slice_port("http", 80)],
        "endpoints": [{"addresses": ["example.com"]}],
    }));
    let plan = plan(&object, &[kept, stray], 1000);
    assert_eq!(counts(&plan), (0, 0, 1));
    assert_eq!(names(&plan.slices.to_delete), vec!["ext-fqdn"]);
}

#[test]
fn generated_names_are_the_name_and_a_dash_when_that_is_valid() {
    assert_eq!(endpoint_slice_prefix("ext"), "ext-");
    assert_eq!(endpoint_slice_prefix("a.b"), "a.b-");
    let long = "a".repeat(253);
    assert_eq!(endpoint_slice_prefix(&long), long);
}

fn options(flags: &[&str]) -> Result<Options, clap::Error> {
    use clap::{Args as _, FromArgMatches as _};
    let matches = Options::augment_args(clap::Command::new("options"))
        .no_binary_name(true)
        .try_get_matches_from(flags)?;
    Options::from_arg_matches(&matches)
}

#[test]
fn flags_have_kcms_defaults_and_checks() {
    let defaults = options(&[]).unwrap();
    assert_eq!(defaults.mirroring_concurrent_service_endpoint_syncs, 5);
    assert_eq!(defaults.mirroring_max_endpoints_per_subset, 1000);
    assert_eq!(
        defaults.mirroring_endpointslice_updates_batch_period,
        Duration::ZERO
    );
    assert_eq!(defaults.validate(), Ok(()));
    let given = options(&[
        "--mirroring-concurrent-service-endpoint-syncs=50",
        "--mirroring-max-endpoints-per-subset=1",
        "--mirroring-endpointslice-updates-batch-period=1m30s",
    ])
    .unwrap();
    assert_eq!(given.validate(), Ok(()));
    assert_eq!(
        given.mirroring_endpointslice_updates_batch_period,
        Duration::from_secs(90)
    );
    for (flags, message) in [
        (
            vec!["--mirroring-max-endpoints-per-subset=1001"],
            "mirroring-max-endpoints-per-subset must not be more than 1000, but got 1001",
        ),
        (
            vec!["--mirroring-max-endpoints-per-subset=0"],
            "mirroring-max-endpoints-per-subset must not be less than 1, but got 0",
        ),
        (
            vec!["--mirroring-concurrent-service-endpoint-syncs=51"],
            "mirroring-concurrent-service-endpoint-syncs must not be more than 50, but got 51",
        ),
        (
            vec!["--mirroring-concurrent-service-endpoint-syncs=-1"],
            "mirroring-concurrent-service-endpoint-syncs must not be less than 1, but got -1",
        ),
        (
            vec![
                "--mirroring-concurrent-service-endpoint-syncs=0",
                "--mirroring-max-endpoints-per-subset=2000",
            ],
            "[mirroring-concurrent-service-endpoint-syncs must not be less than 1, but got 0, mirroring-max-endpoints-per-subset must not be more than 1000, but got 2000]",
        ),
    ] {
        assert_eq!(
            options(&flags).unwrap().validate(),
            Err(message.to_string()),
            "{flags:?}"
        );
    }
    assert!(options(&["--mirroring-endpointslice-updates-batch-period=5"]).is_err());
}

/// A controller on empty stores whose client points nowhere (handlers only queue keys).
fn controller() -> Controller {
    let client =
        kube::Client::try_from(kube::Config::new("https://127.0.0.1:1".parse().unwrap())).unwrap();
    let metrics = MirroringMetrics::unregistered();
    let tracker = Arc::new(EndpointSliceTracker::new());
    Controller {
        endpoints: Store::new(),
        endpoint_slices: Store::new(),
        services: Store::new(),
        tracker: tracker.clone(),
        reconciler: Reconciler {
            client: client.clone(),
            tracker,
            recorder: Recorder::new(client, EVENT_SOURCE),
            max_endpoints_per_subset: 1000,
            metrics: metrics.clone(),
            cache: MetricsCache::new(1000, metrics.clone()),
        },
        queue: WorkQueue::new(QUEUE, None),
        batch_period: Duration::ZERO,
        metrics,
    }
}

fn service(selector: Option<Value>) -> Arc<Service> {
    let mut object = json!({"metadata": {"name": "ext", "namespace": "ns"}, "spec": {}});
    if let Some(selector) = selector {
        object["spec"]["selector"] = selector;
    }
    Arc::new(serde_json::from_value(object).unwrap())
}

#[tokio::test]
async fn handlers_queue_what_upstream_queues() {
    let c = controller();
    let drain = |c: &Controller| {
        let queued = c.queue.len();
        c.queue.shut_down();
        queued
    };

    // Endpoints: mirrorable before or after.
    let plain = Arc::new(endpoints(json!({})));
    let skipped = Arc::new(endpoints(
        json!({"metadata": {"labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}}),
    ));
    let cases: Vec<(&str, Change<Endpoints>, bool)> = vec![
        ("added", Change::Added(plain.clone()), true),
        ("added, skip-mirror", Change::Added(skipped.clone()), false),
        (
            "labelled skip-mirror",
            Change::Updated {
                old: plain.clone(),
                new: skipped.clone(),
            },
            true,
        ),
        (
            "skip-mirror both times",
            Change::Updated {
                old: skipped.clone(),
                new: skipped.clone(),
            },
            false,
        ),
        (
            "deleted",
            Change::Deleted(DeletedObject::Final(plain.clone())),
            true,
        ),
        (
            "deleted, skip-mirror",
            Change::Deleted(DeletedObject::Final(skipped.clone())),
            false,
        ),
    ];
    for (what, change, queued) in cases {
        let c = controller();
        c.on_endpoints(&change);
        assert_eq!(drain(&c), usize::from(queued), "Endpoints {what}");
    }

    // Services: without a selector, or when the selector comes or goes.
    let selectorless = service(None);
    let empty_selector = service(Some(json!({})));
    let selecting = service(Some(json!({"app": "x"})));
    let other_selector = service(Some(json!({"app": "y"})));
    let cases: Vec<(&str, Change<Service>, bool)> = vec![
        (
            "added without selector",
            Change::Added(selectorless.clone()),
            true,
        ),
        (
            "added with an empty selector",
            Change::Added(empty_selector.clone()),
            true,
        ),
        (
            "added with a selector",
            Change::Added(selecting.clone()),
            false,
        ),
        (
            "selector added",
            Change::Updated {
                old: selectorless.clone(),
                new: selecting.clone(),
            },
            true,
        ),
        (
            "selector removed",
            Change::Updated {
                old: selecting.clone(),
                new: selectorless.clone(),
            },
            true,
        ),
        (
            "selector changed",
            Change::Updated {
                old: selecting.clone(),
                new: other_selector.clone(),
            },
            false,
        ),
        (
            "resync without selector",
            Change::Updated {
                old: selectorless.clone(),
                new: selectorless.clone(),
            },
            false,
        ),
        (
            "deleted without selector",
            Change::Deleted(DeletedObject::Final(selectorless.clone())),
            true,
        ),
        (
            "deleted with a selector",
            Change::Deleted(DeletedObject::Final(selecting.clone())),
            false,
        ),
    ];
    for (what, change, queued) in cases {
        let c = controller();
        c.on_service(&change);
        assert_eq!(drain(&c), usize::from(queued), "Service {what}");
    }

    // Slices: this controller's, unknown to the tracker or changed by someone else.
    let ours = slice(json!({"metadata": {"name": "ext-1", "uid": "u1"}}));
    let theirs = slice(json!({"metadata": {"name": "ext-2", "uid": "u2",
        "labels": {"endpointslice.kubernetes.io/managed-by": "someone-else"}}}));
    c.on_endpoint_slice(&Change::Added(ours.clone()));
    assert_eq!(
        c.queue.len(),
        1,
        "a slice of ours the tracker does not know"
    );
    let c = controller();
    c.tracker.update(&ours);
    c.on_endpoint_slice(&Change::Added(ours.clone()));
    c.on_endpoint_slice(&Change::Added(theirs.clone()));
    assert_eq!(c.queue.len(), 0, "our own write, and someone else's slice");
    let mut newer = (*ours).clone();
    newer.metadata.generation = Some(2);
    let newer = Arc::new(newer);
    c.on_endpoint_slice(&Change::Updated {
        old: ours.clone(),
        new: newer.clone(),
    });
    assert_eq!(
        c.queue.len(),
        0,
        "upstream asks the tracker about the previous state"
    );
    c.on_endpoint_slice(&Change::Updated {
        old: ours.clone(),
        new: theirs.clone(),
    });
    assert_eq!(c.queue.len(), 1, "handed over to another manager");
    let c = controller();
    let mut renamed = (*ours).clone();
    renamed
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("kubernetes.io/service-name".into(), "other".into());
    c.on_endpoint_slice(&Change::Updated {
        old: ours.clone(),
        new: Arc::new(renamed),
    });
    assert_eq!(c.queue.len(), 2, "both Endpoints of a renamed slice");

    // Deletions: someone else's deletion of a slice we wrote is undone.
    let c = controller();
    c.tracker.update(&ours);
    c.on_endpoint_slice(&Change::Deleted(DeletedObject::Final(ours.clone())));
    assert_eq!(c.queue.len(), 1, "an unexpected deletion");
    let c = controller();
    c.tracker.expect_deletion(&ours);
    c.on_endpoint_slice(&Change::Deleted(DeletedObject::Final(ours.clone())));
    assert_eq!(c.queue.len(), 0, "our own deletion");
    c.on_endpoint_slice(&Change::Deleted(DeletedObject::Final(ours.clone())));
    assert_eq!(c.queue.len(), 0, "a slice the tracker does not know");
}

#[tokio::test]
async fn a_sync_deletes_what_may_no_longer_be_mirrored_and_refuses_a_stale_cache() {
    // Without a Service, the controller only deletes, and there is nothing to delete:
    // no API call is made.
    let c = controller();
    c.endpoints
        .apply("ns/ext".into(), Arc::new(endpoints(json!({}))));
    c.sync("ns/ext").await.unwrap();
    c.sync("ns/missing").await.unwrap();

    // The tracker wrote a newer generation than the store shows: refused.
    c.services.apply("ns/ext".into(), service(None));
    let cached = slice(json!({"metadata": {"name": "ext-1", "uid": "u1"}}));
    c.endpoint_slices.apply("ns/ext-1".into(), cached.clone());
    let mut written = (*cached).clone();
    written.metadata.generation = Some(2);
    c.tracker.update(&written);
    let error = c.sync("ns/ext").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "EndpointSlice informer cache is out of date"
    );
}

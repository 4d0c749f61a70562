//! End-to-end tests of the endpointslice-mirroring controller in `rkcm worker` (started by `rkcm launcher`): the test
//! cluster (kube-sim, or RKCM_TEST_KUBECONFIG's real cluster), the real `rkcm
//! launcher` with its informer-server and worker as separate processes, every object made with
//! kubectl and every check read back with kube-rs.
//!
//! A Service without a selector and the Endpoints someone wrote for it by hand get
//! mirrored EndpointSlices (labels, annotations, owner, endpoints as upstream writes
//! them); edits of the Endpoints follow; the skip-mirror label, a selector, or the
//! Endpoints or Service going away remove the slices. A subset over
//! `--mirroring-max-endpoints-per-subset` is cut with a `TooManyAddressesToMirror` event;
//! the API server's own `default/kubernetes` Endpoints (labelled skip-mirror) is never
//! mirrored; a flag KCM refuses keeps the worker from starting.

mod common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::api::core::v1::{Endpoints, Event};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use rkcm_conformance::TestCluster;
use serde_json::json;

const MANAGED_BY: &str = "endpointslicemirroring-controller.k8s.io";
const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";

/// A namespace of its own (no pods are made, so no ServiceAccount is waited for).
async fn namespace(stack: &LauncherStack) -> String {
    let name = format!("mirror-{}", kube_sim::api::random_suffix(5));
    stack.kubectl(&["create", "namespace", &name]).await;
    name
}

fn slices(stack: &LauncherStack, ns: &str) -> Api<EndpointSlice> {
    Api::namespaced(stack.cluster.client.clone(), ns)
}

/// The slices mirrored for `name`, by name.
async fn mirrored(api: &Api<EndpointSlice>, name: &str) -> anyhow::Result<Vec<EndpointSlice>> {
    let selector = format!("{SERVICE_NAME}={name},{MANAGED_BY_LABEL}={MANAGED_BY}");
    let mut items = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(items)
}

/// A slice's endpoints as (address, ready), ordered by address; `None` when an endpoint
/// carries a condition other than `ready` (mirroring writes none).
fn endpoints_of(slice: &EndpointSlice) -> Option<Vec<(String, bool)>> {
    let mut out = Vec::new();
    for endpoint in &slice.endpoints {
        let conditions = endpoint.conditions.clone().unwrap_or_default();
        if conditions.serving.is_some() || conditions.terminating.is_some() {
            return None;
        }
        out.push((
            endpoint.addresses.join(","),
            conditions.ready.unwrap_or_default(),
        ));
    }
    out.sort();
    Some(out)
}

fn ready(ip: &str, ready: bool) -> (String, bool) {
    (ip.to_string(), ready)
}

/// Waits until exactly one slice is mirrored for `name` and `check` accepts it.
async fn wait_one(
    stack: &LauncherStack,
    api: &Api<EndpointSlice>,
    name: &str,
    what: &str,
    check: impl Fn(&EndpointSlice) -> bool,
) -> EndpointSlice {
    stack
        .wait(what, || {
            let found = mirrored(api, name);
            let check = &check;
            async move {
                let mut found = found.await?;
                Ok((found.len() == 1 && check(&found[0])).then(|| found.remove(0)))
            }
        })
        .await
}

async fn wait_none(stack: &LauncherStack, api: &Api<EndpointSlice>, name: &str, what: &str) {
    stack
        .wait(what, || {
            let found = mirrored(api, name);
            async move { Ok(found.await?.is_empty().then_some(())) }
        })
        .await
}

fn labels(slice: &EndpointSlice) -> BTreeMap<String, String> {
    slice.metadata.labels.clone().unwrap_or_default()
}

fn annotations(slice: &EndpointSlice) -> BTreeMap<String, String> {
    slice.metadata.annotations.clone().unwrap_or_default()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_made_endpoints_of_a_selectorless_service_are_mirrored_and_followed() {
    // With the endpoints controller, as in a cluster: it leaves the Endpoints of a
    // selectorless Service alone, and empties them while the Service selects nothing.
    let stack = LauncherStack::start(&[
        "--controllers",
        "endpointslicemirroring,garbagecollector,endpoint",
    ])
    .await;
    let ns = namespace(&stack).await;
    let api = slices(&stack, &ns);
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "ext", "namespace": ns},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    });
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "ext", "namespace": ns, "labels": {"x": "y"}, "annotations": {"a": "b"}},
        "subsets": [{
            "addresses": [{"ip": "10.0.0.1", "hostname": "one"}, {"ip": "10.0.0.2"}],
            "notReadyAddresses": [{"ip": "10.0.0.3"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        }],
    });
    // `apply` adds kubectl's last-applied annotation, which is not mirrored.
    stack.apply(&service).await;
    stack.apply(&endpoints).await;
    let live: Endpoints = Api::namespaced(stack.cluster.client.clone(), &ns)
        .get("ext")
        .await
        .unwrap_or_else(|e| stack.fail(format!("reading Endpoints ext: {e}")));
    let uid = live.metadata.uid.clone().unwrap_or_default();

    let wanted = vec![
        ready("10.0.0.1", true),
        ready("10.0.0.2", true),
        ready("10.0.0.3", false),
    ];
    let slice = wait_one(
        &stack,
        &api,
        "ext",
        "a slice mirroring Endpoints ext",
        |s| endpoints_of(s).as_ref() == Some(&wanted),
    )
    .await;
    let name = slice.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("ext-"), "generated name: {name}");
    assert_eq!(
        labels(&slice),
        map(&[
            ("x", "y"),
            (SERVICE_NAME, "ext"),
            (MANAGED_BY_LABEL, MANAGED_BY)
        ])
    );
    assert_eq!(annotations(&slice), map(&[("a", "b")]));
    let owners: Vec<_> = slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| {
            (
                o.api_version.as_str(),
                o.kind.as_str(),
                o.name.as_str(),
                o.uid.as_str(),
                o.controller,
            )
        })
        .collect();
    assert_eq!(
        owners,
        vec![("v1", "Endpoints", "ext", uid.as_str(), Some(true))]
    );
    assert_eq!(slice.address_type, "IPv4");
    let ports: Vec<_> = slice
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone(), p.port, p.protocol.clone()))
        .collect();
    assert_eq!(
        ports,
        vec![(
            Some("http".to_string()),
            Some(8080),
            Some("TCP".to_string())
        )]
    );
    let hostnames: Vec<_> = slice
        .endpoints
        .iter()
        .filter_map(|e| e.hostname.clone())
        .collect();
    assert_eq!(hostnames, vec!["one".to_string()]);

    // Address and label edits follow, into the same slice.
    stack
        .merge_patch("endpoints", Some(&ns), "ext", &json!({"metadata":{"labels":{"x":"z"}},"subsets":[{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.4"}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}]}))
        .await;
    let wanted = vec![ready("10.0.0.1", true), ready("10.0.0.4", true)];
    let edited = wait_one(&stack, &api, "ext", "the edited Endpoints mirrored", |s| {
        endpoints_of(s).as_ref() == Some(&wanted)
            && labels(s).get("x").map(String::as_str) == Some("z")
    })
    .await;
    assert_eq!(edited.metadata.name.as_deref(), Some(name.as_str()));

    // Counted once the write's answer is back, which may come after the test sees it.
    let families = [
        "endpoint_slice_mirroring_controller_changes{operation=\"create\"} ",
        "endpoint_slice_mirroring_controller_changes{operation=\"update\"} ",
        "endpoint_slice_mirroring_controller_endpoints_sync_duration_count ",
        "endpoint_slice_mirroring_controller_endpoints_added_per_sync_count ",
        "endpoint_slice_mirroring_controller_addresses_skipped_per_sync_bucket{",
        "endpoint_slice_mirroring_controller_endpoints_desired ",
        "endpoint_slice_mirroring_controller_num_endpoint_slices ",
        "endpoint_slice_mirroring_controller_desired_endpoint_slices ",
        "workqueue_adds_total{name=\"endpoint_slice_mirroring\"} ",
    ];
    stack
        .wait(
            "the mirroring metrics on the launcher's /metrics",
            || async {
                let text = stack.launcher.metrics().await?;
                let missing: Vec<&str> = families
                    .iter()
                    .copied()
                    .filter(|family| !has_sample(&text, family))
                    .collect();
                if missing.is_empty() {
                    Ok(Some(()))
                } else {
                    anyhow::bail!("missing {missing:?}")
                }
            },
        )
        .await;

    // skip-mirror: the slice goes, and comes back without it.
    let label = "endpointslice.kubernetes.io/skip-mirror";
    stack
        .kubectl(&[
            "label",
            "endpoints",
            "ext",
            "-n",
            &ns,
            &format!("{label}=true"),
        ])
        .await;
    wait_none(&stack, &api, "ext", "no slice for skip-mirror Endpoints").await;
    stack
        .kubectl(&["label", "endpoints", "ext", "-n", &ns, &format!("{label}-")])
        .await;
    wait_one(
        &stack,
        &api,
        "ext",
        "the slice back without skip-mirror",
        |_| true,
    )
    .await;

    // A selector: the endpoints controller's business, not mirrored.
    stack
        .merge_patch(
            "service",
            Some(&ns),
            "ext",
            &json!({"spec":{"selector":{"app":"nothing"}}}),
        )
        .await;
    wait_none(&stack, &api, "ext", "no slice once the Service selects").await;
    stack
        .merge_patch(
            "service",
            Some(&ns),
            "ext",
            &json!({"spec":{"selector":null}}),
        )
        .await;
    // Whatever the endpoints controller wrote meanwhile, the hand-made content again.
    stack.apply(&endpoints).await;
    wait_one(
        &stack,
        &api,
        "ext",
        "the slice back without a selector",
        |s| endpoints_of(s).is_some_and(|e| e.len() == 3),
    )
    .await;

    // The Endpoints deleted, then the Service: the slices go each time.
    stack
        .kubectl(&["delete", "endpoints", "ext", "-n", &ns])
        .await;
    wait_none(&stack, &api, "ext", "no slice once the Endpoints is gone").await;
    stack.apply(&endpoints).await;
    wait_one(
        &stack,
        &api,
        "ext",
        "a slice for the Endpoints made again",
        |_| true,
    )
    .await;
    stack
        .kubectl(&["delete", "service", "ext", "-n", &ns])
        .await;
    wait_none(&stack, &api, "ext", "no slice once the Service is gone").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subset_over_the_maximum_is_cut_and_reported() {
    let stack = LauncherStack::start(&[
        "--controllers",
        "endpointslicemirroring",
        "--mirroring-max-endpoints-per-subset=2",
    ])
    .await;
    let ns = namespace(&stack).await;
    let api = slices(&stack, &ns);
    let objects = [
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "cap", "namespace": ns},
               "spec": {"ports": [{"port": 80}]}}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "cap", "namespace": ns},
               "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}],
                            "ports": [{"port": 80, "protocol": "TCP"}]}]}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dual", "namespace": ns},
               "spec": {"ports": [{"port": 53, "protocol": "UDP"}]}}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "dual", "namespace": ns},
               "subsets": [{"addresses": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}],
                            "ports": [{"port": 53, "protocol": "UDP"}]}]}),
    ];
    // One stream of JSON documents, as kubectl reads them.
    let stream = objects
        .iter()
        .map(|object| object.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    stack.kubectl_stdin(&["create", "-f", "-"], &stream).await;

    let wanted = vec![ready("10.0.0.1", true), ready("10.0.0.2", true)];
    wait_one(&stack, &api, "cap", "2 of 3 addresses mirrored", |s| {
        endpoints_of(s).as_ref() == Some(&wanted)
    })
    .await;
    let events: Api<Event> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let event = stack
        .wait("a TooManyAddressesToMirror event on Endpoints cap", || {
            let events = events.clone();
            async move {
                Ok(events
                    .list(&ListParams::default())
                    .await?
                    .items
                    .into_iter()
                    .find(|e| {
                        e.reason.as_deref() == Some("TooManyAddressesToMirror")
                            && e.involved_object.name.as_deref() == Some("cap")
                    }))
            }
        })
        .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Endpoints"));
    assert_eq!(
        event.message.as_deref(),
        Some("A max of 2 addresses can be mirrored to EndpointSlices per Endpoints subset. 1 addresses were skipped")
    );
    assert_eq!(
        event.source.and_then(|s| s.component).as_deref(),
        Some("endpoint-slice-mirroring-controller")
    );

    // One slice per address family.
    let families = stack
        .wait("an IPv4 and an IPv6 slice for Endpoints dual", || {
            let found = mirrored(&api, "dual");
            async move {
                let mut families: Vec<(String, Vec<(String, bool)>)> = found
                    .await?
                    .iter()
                    .map(|s| (s.address_type.clone(), endpoints_of(s).unwrap_or_default()))
                    .collect();
                families.sort();
                Ok((families.len() == 2).then_some(families))
            }
        })
        .await;
    assert_eq!(
        families,
        vec![
            ("IPv4".to_string(), vec![ready("10.0.0.5", true)]),
            ("IPv6".to_string(), vec![ready("fd00::5", true)]),
        ]
    );

    // The API server's own Endpoints is labelled skip-mirror: its slices are its own.
    let defaults: Api<Endpoints> = Api::namespaced(stack.cluster.client.clone(), "default");
    match defaults.get_opt("kubernetes").await {
        Ok(Some(kubernetes)) => {
            let skip = kubernetes
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("endpointslice.kubernetes.io/skip-mirror"))
                .cloned();
            assert_eq!(skip.as_deref(), Some("true"), "default/kubernetes is labelled skip-mirror");
            // Everything created above is mirrored already, and the worker queued its
            // existing Endpoints at start, before them.
            let copies = mirrored(&slices(&stack, "default"), "kubernetes")
                .await
                .unwrap_or_else(|e| stack.fail(format!("listing slices in default: {e}")));
            assert!(
                copies.is_empty(),
                "no mirrored copy of default/kubernetes: {copies:?}"
            );
        }
        Ok(None) => println!(
            "skipped the default/kubernetes check: this cluster has no default/kubernetes Endpoints (kube-sim without D7)"
        ),
        Err(error) => stack.fail(format!("reading default/kubernetes Endpoints: {error}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flag_kcm_refuses_keeps_the_worker_from_starting() {
    let cluster = TestCluster::start().await.unwrap();
    for (flag, message) in [
        (
            "--mirroring-max-endpoints-per-subset=1001",
            "mirroring-max-endpoints-per-subset must not be more than 1000, but got 1001",
        ),
        (
            "--mirroring-concurrent-service-endpoint-syncs=0",
            "mirroring-concurrent-service-endpoint-syncs must not be less than 1, but got 0",
        ),
    ] {
        let kubeconfig = cluster.kubeconfig.display().to_string();
        assert_usage_error(
            [
                "worker",
                "--kubeconfig",
                &kubeconfig,
                "--informer",
                "unix:///nonexistent/informer.sock",
                "--controllers",
                "endpointslicemirroring",
                flag,
            ],
            message,
        )
        .await;
        // The launcher, as the static pod runs it, refuses it before starting anything.
        let runtime = tempfile::tempdir().unwrap();
        let runtime = format!("--runtime-dir={}", runtime.path().display());
        assert_usage_error(
            [
                "launcher",
                "--kubeconfig",
                &kubeconfig,
                &runtime,
                "--controllers",
                "endpointslicemirroring",
                flag,
            ],
            message,
        )
        .await;
    }
}

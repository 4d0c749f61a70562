//! End-to-end tests of the endpointslice controller in `rkcm worker` (started by `rkcm launcher`): the test cluster
//! (kube-sim with simulated nodes, or RKCM_TEST_KUBECONFIG's real cluster), the real
//! `rkcm launcher` (its informer-server and worker as separate processes), every change made with
//! kubectl or kube-rs and every check read back from the API server.
//!
//! The worker runs the endpointslice controller with what its pods need (deployment and
//! replicaset make them; serviceaccount and root-ca-cert-publisher let them start;
//! node-lifecycle lifts the nodes' startup taint; node-ipam stays idle without
//! `--allocate-node-cidrs`, as node-sim's nodes register with their podCIDRs) and the
//! garbage collector, which deletes a Service's slices after it. A
//! Service's slices hold its pods' endpoints (ready, serving, terminating, node, zone),
//! at most `--max-endpoints-per-slice` each; a deleted or edited slice is put back; hints
//! follow `service.kubernetes.io/topology-mode: Auto`.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Event, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rkcm_conformance::wait_for;
use serde_json::json;

const CONTROLLERS: &str = "nodeipam,nodelifecycle,endpointslice,deployment,replicaset,garbagecollector,serviceaccount,root-ca-cert-publisher";
const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const CONTROLLER: &str = "endpointslice-controller.k8s.io";
const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

suite_stack! {
    struct Stack(LauncherStack);
}

/// (ready, serving, terminating) of an endpoint.
fn conditions(endpoint: &Endpoint) -> (Option<bool>, Option<bool>, Option<bool>) {
    let c = endpoint.conditions.clone().unwrap_or_default();
    (c.ready, c.serving, c.terminating)
}

fn target_name(endpoint: &Endpoint) -> String {
    endpoint
        .target_ref
        .as_ref()
        .and_then(|t| t.name.clone())
        .unwrap_or_default()
}

fn label<'a>(slice: &'a EndpointSlice, key: &str) -> Option<&'a str> {
    slice.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn summary(slices: &[EndpointSlice]) -> String {
    slices
        .iter()
        .map(|s| {
            format!(
                "{} [{}]",
                s.metadata.name.as_deref().unwrap_or_default(),
                s.endpoints
                    .iter()
                    .map(|e| format!("{}{:?}", e.addresses.join(","), conditions(e)))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The pod IPs of the slices, each as often as it appears.
fn slice_ips(slices: &[EndpointSlice]) -> BTreeMap<String, usize> {
    let mut ips = BTreeMap::new();
    for ip in slices
        .iter()
        .flat_map(|s| &s.endpoints)
        .flat_map(|e| &e.addresses)
    {
        *ips.entry(ip.clone()).or_insert(0) += 1;
    }
    ips
}

impl Stack {
    async fn start(extra: &[&str]) -> Stack {
        let mut args = vec!["--controllers", CONTROLLERS];
        args.extend_from_slice(extra);
        Stack(LauncherStack::start(&args).await)
    }

    fn slices_api(&self, ns: &str) -> Api<EndpointSlice> {
        Api::namespaced(self.cluster.client.clone(), ns)
    }

    /// The slices this controller manages for Service `service`.
    async fn slices(&self, ns: &str, service: &str) -> anyhow::Result<Vec<EndpointSlice>> {
        let selector = format!("{SERVICE_NAME}={service},{MANAGED_BY}={CONTROLLER}");
        Ok(self
            .slices_api(ns)
            .list(&ListParams::default().labels(&selector))
            .await?
            .items)
    }

    /// Waits until `check` accepts the Service's managed slices (it says what is wrong
    /// otherwise, for the failure message).
    async fn wait_slices(
        &self,
        ns: &str,
        service: &str,
        what: &str,
        check: impl Fn(&[EndpointSlice]) -> Result<(), String>,
    ) -> Vec<EndpointSlice> {
        self.wait_slices_within(ns, service, what, STACK_WAIT, check)
            .await
    }

    async fn wait_slices_within(
        &self,
        ns: &str,
        service: &str,
        what: &str,
        deadline: Duration,
        check: impl Fn(&[EndpointSlice]) -> Result<(), String>,
    ) -> Vec<EndpointSlice> {
        let check = &check;
        let waited = wait_for(
            &format!("slices of {service}: {what}"),
            deadline,
            || async move {
                let slices = self.slices(ns, service).await?;
                match check(&slices) {
                    Ok(()) => Ok(Some(slices)),
                    Err(why) => anyhow::bail!("{why}; seen {}", summary(&slices)),
                }
            },
        )
        .await;
        waited.unwrap_or_else(|e| self.fail(format!("{e:#}")))
    }

    /// The running pods with `selector`, once `count` of them are ready with IPs.
    async fn wait_ready_pods(&self, ns: &str, selector: &str, count: usize) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.cluster.client.clone(), ns);
        self.wait(&format!("{count} ready pods {selector}"), || {
            let api = api.clone();
            async move {
                let pods: Vec<Pod> = api
                    .list(&ListParams::default().labels(selector))
                    .await?
                    .items
                    .into_iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter(|p| {
                        p.status.as_ref().is_some_and(|s| {
                            s.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
                                && s.conditions
                                    .iter()
                                    .flatten()
                                    .any(|c| c.type_ == "Ready" && c.status == "True")
                        })
                    })
                    .collect();
                Ok((pods.len() == count).then_some(pods))
            }
        })
        .await
    }

    /// The Service's events from this controller: (type, reason, message).
    async fn events(
        &self,
        ns: &str,
        service: &str,
    ) -> anyhow::Result<Vec<(String, String, String)>> {
        let api: Api<Event> = Api::namespaced(self.cluster.client.clone(), ns);
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(service))
            .filter(|e| {
                e.source.as_ref().and_then(|s| s.component.as_deref())
                    == Some("endpoint-slice-controller")
            })
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect())
    }

    async fn create_web(&self, ns: &str, replicas: usize) {
        self.create_deployment(ns, replicas).await;
        self.expose_web(ns).await;
    }

    async fn create_deployment(&self, ns: &str, replicas: usize) {
        self.kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=x",
            &format!("--replicas={replicas}"),
            "--port=8080",
            "-n",
            ns,
        ])
        .await;
    }

    async fn expose_web(&self, ns: &str) {
        self.kubectl(&[
            "expose",
            "deployment",
            "web",
            "--port=80",
            "--target-port=8080",
            "-n",
            ns,
        ])
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_follow_pods_are_restored_and_go_with_their_service() {
    let stack = Stack::start(&[]).await;
    let ns = stack.namespace("eps").await;
    // Exposed once its pods are ready, so the slice's last-change-trigger-time comes from
    // the Service's creation: a pod seen unready and ready within one second of its Ready
    // transition is no change to the trigger tracker (upstream's comparison), and such a
    // write would carry no annotation.
    stack.create_deployment(&ns, 3).await;
    let pods = stack.wait_ready_pods(&ns, "app=web", 3).await;
    stack.expose_web(&ns).await;
    let service: Service = Api::namespaced(stack.cluster.client.clone(), &ns)
        .get("web")
        .await
        .unwrap_or_else(|e| stack.fail(format!("reading Service web: {e}")));

    // Check 2: one slice web-*, managed, owned by the Service, IPv4, three ready endpoints
    // with node and zone, port 8080/TCP.
    let names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let slices = stack
        .wait_slices(&ns, "web", "one slice with the 3 ready pods", |slices| {
            let [slice] = slices else {
                return Err(format!("{} slices", slices.len()));
            };
            let mut targets: Vec<String> = slice.endpoints.iter().map(target_name).collect();
            targets.sort();
            let mut expected = names.clone();
            expected.sort();
            let all_ready = slice
                .endpoints
                .iter()
                .all(|e| conditions(e) == (Some(true), Some(true), Some(false)));
            (targets == expected && all_ready)
                .then_some(())
                .ok_or_else(|| format!("expected {expected:?} ready"))
        })
        .await;
    let slice = &slices[0];
    let name = slice.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("web-"), "{name}");
    assert_eq!(label(slice, MANAGED_BY), Some(CONTROLLER));
    assert_eq!(label(slice, "app"), Some("web"), "the Service's labels");
    assert_eq!(slice.address_type, "IPv4");
    let owners = slice.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (
            owners[0].api_version.as_str(),
            owners[0].kind.as_str(),
            owners[0].name.as_str(),
            Some(owners[0].uid.as_str()),
            owners[0].controller,
            owners[0].block_owner_deletion
        ),
        (
            "v1",
            "Service",
            "web",
            service.metadata.uid.as_deref(),
            Some(true),
            Some(true)
        )
    );
    let ports: Vec<_> = slice
        .ports
        .iter()
        .flatten()
        .map(|p| (p.port, p.protocol.clone()))
        .collect();
    assert_eq!(ports, vec![(Some(8080), Some("TCP".to_string()))]);
    for endpoint in &slice.endpoints {
        let pod = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(target_name(endpoint).as_str()))
            .unwrap_or_else(|| stack.fail("an endpoint of no pod"));
        let status = pod.status.clone().unwrap_or_default();
        assert_eq!(endpoint.addresses, vec![status.pod_ip.unwrap_or_default()]);
        assert_eq!(
            endpoint.node_name,
            pod.spec.as_ref().and_then(|s| s.node_name.clone())
        );
        if stack.cluster.sim.is_some() {
            let zone = endpoint.zone.as_deref().unwrap_or_default();
            assert!(ZONES.contains(&zone), "zone {zone:?}");
        }
    }
    assert!(
        slice
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(TRIGGER_TIME)),
        "{TRIGGER_TIME} on {:?}",
        slice.metadata.annotations
    );

    // Check 4: a pod being deleted stays as a terminating endpoint, serving while it
    // is ready, until it is gone.
    let victim = names[0].clone();
    stack
        .kubectl(&[
            "delete",
            "pod",
            &victim,
            "--grace-period=4",
            "--wait=false",
            "-n",
            &ns,
        ])
        .await;
    stack
        .wait_slices(&ns, "web", "the deleted pod terminating", |slices| {
            slices
                .iter()
                .flat_map(|s| &s.endpoints)
                .any(|e| {
                    target_name(e) == victim
                        && conditions(e) == (Some(false), Some(true), Some(true))
                })
                .then_some(())
                .ok_or_else(|| {
                    format!("expected {victim} ready:false serving:true terminating:true")
                })
        })
        .await;
    let slices = stack
        .wait_slices(
            &ns,
            "web",
            "the deleted pod gone, its replacement ready",
            |slices| {
                let endpoints: Vec<&Endpoint> = slices.iter().flat_map(|s| &s.endpoints).collect();
                let gone = endpoints.iter().all(|e| target_name(e) != victim);
                let ready = endpoints
                    .iter()
                    .filter(|e| conditions(e) == (Some(true), Some(true), Some(false)))
                    .count();
                (slices.len() == 1 && gone && ready == 3 && endpoints.len() == 3)
                    .then_some(())
                    .ok_or_else(|| format!("expected {victim} gone and 3 ready"))
            },
        )
        .await;

    // Check 10: a deleted slice is replaced at once.
    let deleted = slices[0].metadata.name.clone().unwrap_or_default();
    let deleted_uid = slices[0].metadata.uid.clone();
    let started = Instant::now();
    stack
        .kubectl(&["delete", "endpointslice", &deleted, "-n", &ns])
        .await;
    let slices = stack
        .wait_slices_within(
            &ns,
            "web",
            "a replacement",
            Duration::from_secs(3),
            |slices| {
                (slices.len() == 1
                    && slices[0].metadata.uid != deleted_uid
                    && slices[0].endpoints.len() == 3)
                    .then_some(())
                    .ok_or_else(|| "expected one new slice with 3 endpoints".into())
            },
        )
        .await;
    println!("deleted slice replaced after {:?}", started.elapsed());

    // A hand edit (an endpoint removed) is undone.
    let edited = slices[0].metadata.name.clone().unwrap_or_default();
    stack
        .kubectl(&[
            "patch",
            "endpointslice",
            &edited,
            "-n",
            &ns,
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/endpoints/0"}]"#,
        ])
        .await;
    let started = Instant::now();
    stack
        .wait_slices(&ns, "web", "the edited slice restored", |slices| {
            (slices.len() == 1
                && slices[0].metadata.name.as_deref() == Some(edited.as_str())
                && slices[0].endpoints.len() == 3
                && slices[0].metadata.generation.unwrap_or_default() >= 3)
                .then_some(())
                .ok_or_else(|| "expected the slice back at 3 endpoints".into())
        })
        .await;
    println!("edited slice restored after {:?}", started.elapsed());

    // Syncs are counted as upstream counts them.
    let metrics = stack.metrics().await;
    for family in [
        "endpoint_slice_controller_syncs{result=\"success\"}",
        "endpoint_slice_controller_changes{operation=\"create\"}",
        "endpoint_slice_controller_endpoints_desired",
        "workqueue_adds_total{name=\"endpoint_slice\"}",
    ] {
        assert!(
            has_sample(&metrics, family),
            "{family} in /metrics:\n{metrics}"
        );
    }

    // Check 8: a Service without a selector gets no slice from this controller (checked
    // once a Service created after it has its slice).
    stack
        .apply_in(
            &ns,
            json!({"kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "manual"},
                 "spec": {"ports": [{"port": 80}]}},
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "probe"},
                 "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
            ]}),
        )
        .await;
    stack
        .wait_slices(&ns, "probe", "a slice", |slices| {
            (slices.len() == 1 && slices[0].endpoints.len() == 3)
                .then_some(())
                .ok_or_else(|| "expected one slice".into())
        })
        .await;
    let manual = stack
        .slices(&ns, "manual")
        .await
        .unwrap_or_else(|e| stack.fail(format!("{e:#}")));
    assert!(
        manual.is_empty(),
        "no slice for a selectorless Service: {}",
        summary(&manual)
    );

    // Check 8: the Service and its Deployment deleted, the garbage collector takes the
    // slices.
    let started = Instant::now();
    stack
        .kubectl(&["delete", "deployment", "web", "--wait=false", "-n", &ns])
        .await;
    stack
        .kubectl(&["delete", "service", "web", "--wait=false", "-n", &ns])
        .await;
    stack
        .wait_slices_within(
            &ns,
            "web",
            "gone with the Service",
            Duration::from_secs(10),
            |slices| {
                slices
                    .is_empty()
                    .then_some(())
                    .ok_or_else(|| "expected no slice".into())
            },
        )
        .await;
    println!(
        "slices collected {:?} after the Service's deletion",
        started.elapsed()
    );
    stack.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_hold_at_most_max_endpoints_per_slice() {
    let mut stack = Stack::start(&[]).await;
    let ns = stack.namespace("eps-max").await;
    let started = Instant::now();
    stack.create_web(&ns, 250).await;
    let pods = stack.wait_ready_pods(&ns, "app=web", 250).await;
    let pod_ips: Vec<String> = pods
        .iter()
        .filter_map(|p| p.status.as_ref().and_then(|s| s.pod_ip.clone()))
        .collect();
    let each_once = |slices: &[EndpointSlice], max: usize| -> Result<(), String> {
        let ips = slice_ips(slices);
        if let Some(big) = slices.iter().find(|s| s.endpoints.len() > max) {
            return Err(format!(
                "{} has {} endpoints",
                big.metadata.name.as_deref().unwrap_or_default(),
                big.endpoints.len()
            ));
        }
        let total: usize = slices.iter().map(|s| s.endpoints.len()).sum();
        let missing = pod_ips.iter().filter(|ip| ips.get(*ip) != Some(&1)).count();
        (total == 250 && missing == 0)
            .then_some(())
            .ok_or_else(|| format!("{total} endpoints, {missing} pod IPs not exactly once"))
    };
    // Check 6: at most 100 per slice, each pod once.
    let slices = stack
        .wait_slices(&ns, "web", "250 endpoints, at most 100 per slice", |s| {
            each_once(s, 100)
        })
        .await;
    println!(
        "250 pods ready and in {} slices ({:?}) after {:?}",
        slices.len(),
        slices.iter().map(|s| s.endpoints.len()).collect::<Vec<_>>(),
        started.elapsed()
    );

    // The launcher restarted with --max-endpoints-per-slice=20: a new Service's slices
    // hold at most 20 (existing ones are never rebalanced, as upstream).
    stack
        .0
        .restart_with(&["--controllers", CONTROLLERS, "--max-endpoints-per-slice=20"])
        .await;
    let started = Instant::now();
    stack
        .apply_in(
            &ns,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "small"},
                     "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
        )
        .await;
    let slices = stack
        .wait_slices(&ns, "small", "250 endpoints, at most 20 per slice", |s| {
            each_once(s, 20)
        })
        .await;
    println!(
        "{} slices of at most 20 after {:?}",
        slices.len(),
        started.elapsed()
    );
    assert_eq!(slices.len(), 13);
    stack.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_hints_follow_the_zones_of_ready_endpoints() {
    let stack = Stack::start(&[]).await;
    if stack
        .cluster
        .sim_only("pods pinned to node-sim's three zones")
        .is_none()
    {
        return;
    }
    let ns = stack.namespace("eps-hints").await;
    let pods: Api<Pod> = Api::namespaced(stack.cluster.client.clone(), &ns);
    for zone in ZONES {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("hints-{zone}"), "labels": {"app": "hints"}},
            "spec": {"nodeSelector": {"topology.kubernetes.io/zone": zone},
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 8080}]}]},
        }))
        .unwrap_or_else(|e| stack.fail(e));
        pods.create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| stack.fail(format!("creating a pod in {zone}: {e}")));
    }
    stack
        .apply_in(
            &ns,
            json!({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": "hints", "annotations": {"service.kubernetes.io/topology-mode": "Auto"}},
                     "spec": {"selector": {"app": "hints"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
        )
        .await;
    stack.wait_ready_pods(&ns, "app=hints", 3).await;

    // Check 9: three ready endpoints over three zones, each hinted to its own zone.
    stack
        .wait_slices(&ns, "hints", "each endpoint hinted to its zone", |slices| {
            let endpoints: Vec<&Endpoint> = slices.iter().flat_map(|s| &s.endpoints).collect();
            let hinted = endpoints.iter().all(|e| {
                let hint = e
                    .hints
                    .as_ref()
                    .and_then(|h| h.for_zones.as_ref())
                    .and_then(|zones| zones.first())
                    .map(|zone| zone.name.clone());
                e.zone.is_some() && hint == e.zone
            });
            (endpoints.len() == 3 && hinted)
                .then_some(())
                .ok_or_else(|| {
                    let hints: Vec<_> = endpoints
                        .iter()
                        .map(|e| (e.zone.clone(), e.hints.clone()))
                        .collect();
                    format!("expected 3 endpoints hinted to their zones: {hints:?}")
                })
        })
        .await;
    stack
        .wait("the TopologyAwareHintsEnabled event", || async {
            let events = stack.events(&ns, "hints").await?;
            Ok(events
                .iter()
                .any(|(kind, reason, message)| {
                    kind == "Normal"
                        && reason == "TopologyAwareHintsEnabled"
                        && message == "Topology Aware Hints has been enabled, addressType: IPv4"
                })
                .then_some(()))
        })
        .await;

    // Two endpoints for three zones: no hints, and a warning saying so.
    pods.delete("hints-zone-c", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| stack.fail(format!("deleting a pod: {e}")));
    stack
        .wait_slices(&ns, "hints", "2 endpoints without hints", |slices| {
            let endpoints: Vec<&Endpoint> = slices.iter().flat_map(|s| &s.endpoints).collect();
            (endpoints.len() == 2 && endpoints.iter().all(|e| e.hints.is_none()))
                .then_some(())
                .ok_or_else(|| "expected 2 endpoints without hints".into())
        })
        .await;
    stack
        .wait("the insufficient-endpoints warning", || async {
            let events = stack.events(&ns, "hints").await?;
            Ok(events
                .iter()
                .any(|(kind, reason, message)| {
                    kind == "Warning"
                        && reason == "TopologyAwareHintsDisabled"
                        && message == "Insufficient number of endpoints (2 endpoints, 3 zones), addressType: IPv4"
                })
                .then_some(()))
        })
        .await;
    stack.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_flags_exit_2_with_kcms_message() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().display().to_string();
    for (flag, expected) in [
        (
            "--max-endpoints-per-slice=1001",
            "max-endpoints-per-slice must not be more than 1000, but got 1001",
        ),
        (
            "--concurrent-service-endpoint-syncs=0",
            "concurrent-service-endpoint-syncs must not be less than 1, but got 0",
        ),
    ] {
        for command in [
            vec![
                "launcher",
                "--runtime-dir",
                runtime.as_str(),
                "--secure-port",
                "0",
            ],
            vec!["worker", "--informer", "unix:///nonexistent/informer.sock"],
        ] {
            assert_usage_error(command.into_iter().chain([flag]), expected).await;
        }
    }
}

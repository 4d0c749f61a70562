//! End-to-end tests of the endpoints controller in `rkcm worker` (started by `rkcm launcher`): the test cluster
//! (kube-sim with simulated nodes, or RKCM_TEST_KUBECONFIG's real cluster), the real
//! `rkcm launcher` (its informer-server and worker as separate processes), every change made with
//! kubectl or kube-rs and every check read back from the API server.
//!
//! The worker runs the endpoints controller with what its pods need (the deployment,
//! replicaset and statefulset controllers make them; serviceaccount and
//! root-ca-cert-publisher let them start; node-lifecycle lifts the nodes' startup taint
//! so they are scheduled; node-ipam gives CIDRs to nodes registered without one). The Endpoints of a Service list its pods' IPs, nodes and names, ready or
//! not, with the Service's labels and the trigger-time annotation; a headless Service's
//! carry the headless label and the pods' hostnames; hand-made Endpoints of a Service
//! without a selector are left alone until the Service goes; more than 1000 addresses
//! are cut to 1000 and annotated.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints, Event, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rkcm_conformance::wait_for;
use serde_json::json;

const CONTROLLERS: &str = "nodeipam,endpoint,deployment,replicaset,statefulset,serviceaccount,root-ca-cert-publisher,nodelifecycle";
const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
const HEADLESS: &str = "service.kubernetes.io/headless";
const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
const LEADER: &str = "control-plane.alpha.kubernetes.io/leader";

suite_stack! {
    struct Stack(LauncherStack);
}

/// One address as the checks compare them: (ip, nodeName, target kind, target
/// namespace, target name, target uid, hostname).
type Address = (
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
);

fn address(a: &EndpointAddress) -> Address {
    let target = a.target_ref.clone().unwrap_or_default();
    (
        a.ip.clone(),
        a.node_name.clone().unwrap_or_default(),
        target.kind.unwrap_or_default(),
        target.namespace.unwrap_or_default(),
        target.name.unwrap_or_default(),
        target.uid.unwrap_or_default(),
        a.hostname.clone(),
    )
}

/// Every (ready) address of the object, and every not-ready one.
fn addresses(endpoints: &Endpoints) -> (BTreeSet<Address>, BTreeSet<Address>) {
    let subsets = endpoints.subsets.iter().flatten();
    let ready = subsets
        .clone()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(address)
        .collect();
    let not_ready = subsets
        .flat_map(|s| s.not_ready_addresses.iter().flatten())
        .map(address)
        .collect();
    (ready, not_ready)
}

/// (name, port, protocol) of every port of every subset.
fn ports(endpoints: &Endpoints) -> Vec<(Option<String>, i32, Option<String>)> {
    endpoints
        .subsets
        .iter()
        .flatten()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| (p.name.clone(), p.port, p.protocol.clone()))
        .collect()
}

fn annotation<'a>(endpoints: &'a Endpoints, key: &str) -> Option<&'a str> {
    endpoints
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn summary(endpoints: &Endpoints) -> String {
    let (ready, not_ready) = addresses(endpoints);
    format!(
        "ready {:?}, not ready {:?}, ports {:?}, labels {:?}, annotations {:?}",
        ready.iter().map(|a| &a.0).collect::<Vec<_>>(),
        not_ready.iter().map(|a| &a.0).collect::<Vec<_>>(),
        ports(endpoints),
        endpoints.metadata.labels,
        endpoints.metadata.annotations
    )
}

/// The address a ready or not-ready pod should have.
fn pod_address(pod: &Pod, hostname: Option<&str>) -> Address {
    (
        pod.status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default(),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        "Pod".into(),
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
        pod.metadata.uid.clone().unwrap_or_default(),
        hostname.map(str::to_string),
    )
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Stack {
    async fn start(extra: &[&str]) -> Stack {
        let mut args = vec!["--controllers", CONTROLLERS];
        args.extend_from_slice(extra);
        Stack(LauncherStack::start(&args).await)
    }

    fn endpoints(&self, ns: &str) -> Api<Endpoints> {
        Api::namespaced(self.cluster.client.clone(), ns)
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.cluster.client.clone(), ns)
    }

    /// Waits until the Endpoints `name` exist and `check` accepts them (it says what is
    /// wrong otherwise, for the failure message).
    async fn wait_endpoints(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        check: impl Fn(&Endpoints) -> Result<(), String>,
    ) -> Endpoints {
        let api = self.endpoints(ns);
        let check = &check;
        self.wait(&format!("Endpoints {name}: {what}"), || {
            let api = api.clone();
            async move {
                let Some(endpoints) = api.get_opt(name).await? else {
                    anyhow::bail!("no Endpoints {name} yet");
                };
                match check(&endpoints) {
                    Ok(()) => Ok(Some(endpoints)),
                    Err(why) => anyhow::bail!("{why}; seen {}", summary(&endpoints)),
                }
            }
        })
        .await
    }

    /// The running pods with `selector`, once `count` of them have IPs and as many are
    /// ready as `ready` says (polled every quarter second, for at most [`STACK_WAIT`]).
    async fn wait_pods(&self, ns: &str, selector: &str, count: usize, ready: bool) -> Vec<Pod> {
        self.wait_pods_every(
            ns,
            selector,
            count,
            ready,
            Duration::from_millis(250),
            STACK_WAIT,
        )
        .await
    }

    /// [`Stack::wait_pods`] with its own polling period and deadline (a list of a
    /// thousand pods is work for the API server: not every 50 ms).
    async fn wait_pods_every(
        &self,
        ns: &str,
        selector: &str,
        count: usize,
        ready: bool,
        every: Duration,
        timeout: Duration,
    ) -> Vec<Pod> {
        let api = self.pods(ns);
        let deadline = Instant::now() + timeout;
        loop {
            let listed = api.list(&ListParams::default().labels(selector)).await;
            let seen = match listed {
                Ok(list) => {
                    let pods: Vec<Pod> = list
                        .items
                        .into_iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none())
                        .filter(|p| {
                            p.status
                                .as_ref()
                                .and_then(|s| s.pod_ip.as_deref())
                                .is_some_and(|ip| !ip.is_empty())
                        })
                        .filter(|p| is_ready(p) == ready)
                        .collect();
                    if pods.len() == count {
                        return pods;
                    }
                    format!("{} such pods", pods.len())
                }
                Err(error) => format!("listing pods: {error}"),
            };
            if Instant::now() >= deadline {
                self.fail(format!(
                    "timed out after {timeout:?} waiting for {count} pods {selector} with IPs (ready: {ready}); last seen {seen}"
                ));
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Fails unless `check` keeps holding for `period` (polled until the period ends).
    async fn stays<F, Fut>(&self, what: &str, period: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<Option<String>>>,
    {
        let end = Instant::now() + period;
        while Instant::now() < end {
            match check().await {
                Ok(None) => {}
                Ok(Some(why)) => self.fail(format!("{what}: {why}")),
                Err(error) => self.fail(format!("{what}: {error:#}")),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_list_the_selected_pods_as_they_get_ready_and_go() {
    let stack = Stack::start(&[]).await;
    let ns = stack.namespace("ep").await;

    // A pod that turns ready only after 10 s, behind its Service: a not-ready address first.
    stack
        .apply_in(
            &ns,
            json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "slow", "labels": {"app": "slow"}},
                 "spec": {"containers": [{"name": "c", "image": "x",
                   "ports": [{"containerPort": 8080}],
                   "readinessProbe": {"tcpSocket": {"port": 8080}, "initialDelaySeconds": 10}}]}},
                {"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": "slow"},
                 "spec": {"selector": {"app": "slow"}, "ports": [{"port": 80, "targetPort": 8080}]}},
            ]}),
        )
        .await;

    stack
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=x",
            "--replicas=3",
            "--port=8080",
            "-n",
            &ns,
        ])
        .await;
    let slow = stack.wait_pods(&ns, "app=slow", 1, false).await;
    let slow_address = pod_address(&slow[0], None);
    stack
        .wait_endpoints(&ns, "slow", "the unready pod in notReadyAddresses", |e| {
            let (ready, not_ready) = addresses(e);
            (ready.is_empty() && not_ready == BTreeSet::from([slow_address.clone()]))
                .then_some(())
                .ok_or_else(|| format!("expected only {slow_address:?} not ready"))
        })
        .await;

    // Check 1: three addresses with IP, node and pod, port 8080/TCP, the trigger time.
    // The Service comes once its pods are ready, so the Endpoints are written once, with
    // the Service's creation as their trigger time. (A pod seen not ready and then ready
    // within the same second of its Ready condition's lastTransitionTime is no change to
    // the tracker, upstream's as rkcm's: a write for it carries no trigger time.)
    let pods = stack.wait_pods(&ns, "app=web", 3, true).await;
    stack
        .kubectl(&[
            "expose",
            "deployment",
            "web",
            "--port=80",
            "--target-port=8080",
            "-n",
            &ns,
        ])
        .await;
    let expected: BTreeSet<Address> = pods.iter().map(|p| pod_address(p, None)).collect();
    let web = stack
        .wait_endpoints(&ns, "web", "the 3 ready pods", |e| {
            let (ready, not_ready) = addresses(e);
            (ready == expected && not_ready.is_empty())
                .then_some(())
                .ok_or_else(|| format!("expected {expected:?}"))
        })
        .await;
    assert_eq!(ports(&web), vec![(None, 8080, Some("TCP".into()))]);
    let trigger = annotation(&web, TRIGGER_TIME)
        .unwrap_or_else(|| stack.fail(format!("no {TRIGGER_TIME}: {}", summary(&web))));
    trigger
        .parse::<Timestamp>()
        .unwrap_or_else(|e| stack.fail(format!("{TRIGGER_TIME} {trigger:?}: {e}")));
    assert!(
        trigger.ends_with('Z'),
        "{TRIGGER_TIME} is in UTC: {trigger}"
    );
    let labels = web.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("app").map(String::as_str),
        Some("web"),
        "{labels:?}"
    );
    assert!(!labels.contains_key(HEADLESS), "{labels:?}");

    // Check 3: the slow pod moves to addresses once ready.
    stack
        .wait_endpoints(&ns, "slow", "the pod ready after its probe's delay", |e| {
            let (ready, not_ready) = addresses(e);
            (not_ready.is_empty() && ready.iter().map(|a| &a.5).eq([&slow_address.5]))
                .then_some(())
                .ok_or_else(|| "expected the slow pod ready".into())
        })
        .await;

    // A target port no container names: that port is left out, the others kept; with
    // only such ports, the Endpoints exist without subsets.
    stack
        .apply_in(
            &ns,
            json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "mixed"},
                 "spec": {"selector": {"app": "web"}, "ports": [
                     {"name": "ok", "port": 80, "targetPort": 8080},
                     {"name": "bad", "port": 81, "targetPort": "nope"}]}},
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "unresolved"},
                 "spec": {"selector": {"app": "web"}, "ports": [
                     {"name": "bad", "port": 81, "targetPort": "nope"}]}},
            ]}),
        )
        .await;
    let mixed = stack
        .wait_endpoints(&ns, "mixed", "the web pods on port ok only", |e| {
            (addresses(e).0.len() == 3)
                .then_some(())
                .ok_or_else(|| "expected 3 addresses".into())
        })
        .await;
    assert_eq!(
        ports(&mixed),
        vec![(Some("ok".into()), 8080, Some("TCP".into()))]
    );
    stack
        .wait_endpoints(&ns, "unresolved", "created, without subsets", |e| {
            e.subsets
                .as_ref()
                .is_none_or(Vec::is_empty)
                .then_some(())
                .ok_or_else(|| "expected no subsets".into())
        })
        .await;

    // Check 4: a pod being deleted leaves at once (it has a 30 s grace period).
    let victim = &pods[0];
    let victim_uid = victim.metadata.uid.clone().unwrap_or_default();
    let victim_name = victim.metadata.name.clone().unwrap_or_default();
    let started = Instant::now();
    stack
        .kubectl(&["delete", "pod", &victim_name, "--wait=false", "-n", &ns])
        .await;
    let endpoints = stack.endpoints(&ns);
    wait_for(
        "the deleted pod gone from the Endpoints",
        Duration::from_secs(5),
        || {
            let endpoints = endpoints.clone();
            let victim_uid = victim_uid.clone();
            async move {
                let web = endpoints.get("web").await?;
                let (ready, not_ready) = addresses(&web);
                if ready.iter().chain(&not_ready).any(|a| a.5 == victim_uid) {
                    anyhow::bail!("still listed: {}", summary(&web));
                }
                Ok(Some(()))
            }
        },
    )
    .await
    .unwrap_or_else(|e| stack.fail(format!("{e:#}")));
    println!(
        "deleted pod out of the Endpoints after {:?}",
        started.elapsed()
    );

    // The queue is not stuck on the unresolvable port: later changes still land, in
    // every Service selecting the pods.
    stack
        .kubectl(&["scale", "deployment", "web", "--replicas=4", "-n", &ns])
        .await;
    let pods = stack.wait_pods(&ns, "app=web", 4, true).await;
    let expected: BTreeSet<Address> = pods.iter().map(|p| pod_address(p, None)).collect();
    for name in ["web", "mixed"] {
        stack
            .wait_endpoints(&ns, name, "the 4 ready pods after scaling", |e| {
                let (ready, not_ready) = addresses(e);
                (ready == expected && not_ready.is_empty())
                    .then_some(())
                    .ok_or_else(|| format!("expected {expected:?}"))
            })
            .await;
    }

    // Counted in upstream's queue metrics.
    let metrics = stack.metrics().await;
    let adds = metric_sum(&metrics, "workqueue_adds_total", &[("name", "endpoint")])
        .unwrap_or_else(|| {
            stack.fail(format!(
                "no workqueue_adds_total{{name=\"endpoint\"}} in /metrics:\n{metrics}"
            ))
        });
    assert!(adds >= 4.0, "workqueue_adds_total for endpoint: {adds}");

    // Managed Endpoints deleted by hand come back.
    let endpoints = stack.endpoints(&ns);
    let before = endpoints.get("web").await.unwrap().metadata.uid;
    endpoints
        .delete("web", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| stack.fail(format!("deleting Endpoints web: {e}")));
    stack
        .wait_endpoints(&ns, "web", "made again after a deletion", |e| {
            (e.metadata.uid != before && addresses(e).0.len() == 4)
                .then_some(())
                .ok_or_else(|| "expected new Endpoints with the 4 pods".into())
        })
        .await;

    // In a terminating namespace they cannot be: the create is refused and dropped,
    // without an event. (kube-sim only: there the namespace stays terminating, with no
    // namespace controller in this worker.)
    if stack
        .cluster
        .sim_only("a namespace that stays terminating")
        .is_some()
    {
        stack
            .kubectl(&["delete", "namespace", &ns, "--wait=false"])
            .await;
        endpoints
            .delete("web", &DeleteParams::default())
            .await
            .unwrap_or_else(|e| stack.fail(format!("deleting Endpoints web: {e}")));
        let events: Api<Event> = Api::namespaced(stack.cluster.client.clone(), "default");
        stack
            .stays(
                "no Endpoints and no event in a terminating namespace",
                Duration::from_secs(3),
                || async {
                    if endpoints.get_opt("web").await?.is_some() {
                        return Ok(Some("Endpoints web made again".into()));
                    }
                    let failed = events
                        .list(&ListParams::default())
                        .await?
                        .items
                        .into_iter()
                        .find(|e| e.reason.as_deref() == Some("FailedToCreateEndpoint"));
                    Ok(failed.map(|e| format!("event {:?}", e.message)))
                },
            )
            .await;
    }
    stack.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_selectorless_and_leftover_endpoints() {
    let stack = Stack::start(&[]).await;
    let ns = stack.namespace("ep-hs").await;

    // Check 5: a StatefulSet behind its headless Service.
    stack
        .apply_in(
            &ns,
            json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": "hs", "labels": {"tier": "db"}},
                 "spec": {"clusterIP": "None", "selector": {"app": "hs"},
                          "ports": [{"name": "web", "port": 80}]}},
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hs-bare"},
                 "spec": {"clusterIP": "None", "selector": {"app": "hs"}}},
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "hs"},
                 "spec": {"serviceName": "hs", "replicas": 2,
                          "selector": {"matchLabels": {"app": "hs"}},
                          "template": {"metadata": {"labels": {"app": "hs"}},
                                       "spec": {"containers": [{"name": "c", "image": "x",
                                                "ports": [{"name": "web", "containerPort": 80}]}]}}}},
            ]}),
        )
        .await;
    let pods = stack.wait_pods(&ns, "app=hs", 2, true).await;
    let named: BTreeSet<Address> = pods
        .iter()
        .map(|p| pod_address(p, p.metadata.name.as_deref()))
        .collect();
    let hs = stack
        .wait_endpoints(&ns, "hs", "the pods with their hostnames", |e| {
            let (ready, _) = addresses(e);
            (ready == named)
                .then_some(())
                .ok_or_else(|| format!("expected {named:?}"))
        })
        .await;
    let labels = hs.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(HEADLESS).map(String::as_str),
        Some(""),
        "{labels:?}"
    );
    assert_eq!(
        labels.get("tier").map(String::as_str),
        Some("db"),
        "{labels:?}"
    );
    assert_eq!(
        ports(&hs),
        vec![(Some("web".into()), 80, Some("TCP".into()))]
    );
    // Headless without ports: bare addresses, and no hostnames (another subdomain).
    let bare: BTreeSet<Address> = pods.iter().map(|p| pod_address(p, None)).collect();
    let hs_bare = stack
        .wait_endpoints(&ns, "hs-bare", "the pods without ports", |e| {
            (addresses(e).0 == bare)
                .then_some(())
                .ok_or_else(|| format!("expected {bare:?}"))
        })
        .await;
    assert!(ports(&hs_bare).is_empty(), "{}", summary(&hs_bare));

    // Check 8: a Service without a selector and its hand-made Endpoints; an ExternalName
    // Service with a selector; an Endpoints object without a Service, and a leader lock.
    stack
        .apply_in(
            &ns,
            json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "external"},
                 "spec": {"ports": [{"port": 80}]}},
                {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "external"},
                 "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 80}]}]},
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "alias"},
                 "spec": {"type": "ExternalName", "externalName": "example.com",
                          "selector": {"app": "hs"}}},
                {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "orphan"},
                 "subsets": [{"addresses": [{"ip": "192.0.2.11"}], "ports": [{"port": 80}]}]},
                {"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": "lock", "annotations": {LEADER: "{\"holderIdentity\":\"old\"}"}}},
            ]}),
        )
        .await;
    let endpoints = stack.endpoints(&ns);
    let version = |name: &'static str| {
        let endpoints = endpoints.clone();
        async move {
            Ok::<_, anyhow::Error>(
                endpoints
                    .get_opt(name)
                    .await?
                    .and_then(|e| e.metadata.resource_version),
            )
        }
    };
    let external = version("external").await.expect("reading external");
    // The controller is at work meanwhile: a Service created now gets its Endpoints.
    stack
        .apply_in(
            &ns,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "marker"},
                   "spec": {"selector": {"app": "hs"}, "ports": [{"port": 80}]}}),
        )
        .await;
    stack
        .wait_endpoints(&ns, "marker", "made after the others", |e| {
            (addresses(e).0.len() == 2)
                .then_some(())
                .ok_or_else(|| "expected 2 addresses".into())
        })
        .await;
    stack
        .stays(
            "hand-made Endpoints untouched, none for ExternalName",
            Duration::from_secs(5),
            || async {
                if version("external").await? != external {
                    return Ok(Some("external changed or went".into()));
                }
                if version("alias").await?.is_some() {
                    return Ok(Some("Endpoints made for an ExternalName Service".into()));
                }
                if version("orphan").await?.is_none() {
                    return Ok(Some(
                        "orphan deleted while running (upstream leaves it to the next start)"
                            .into(),
                    ));
                }
                Ok(None)
            },
        )
        .await;
    stack
        .kubectl(&["delete", "service", "external", "-n", &ns])
        .await;
    stack
        .wait("the Endpoints of the deleted Service deleted", || async {
            Ok(version("external").await?.is_none().then_some(()))
        })
        .await;

    // At start, every Endpoints object without a Service is deleted, but leader locks;
    // Endpoints already right are not rewritten.
    let hs_version = version("hs").await.expect("reading hs");
    stack.kill_workers().await;
    stack
        .wait("the orphan Endpoints deleted at start", || async {
            Ok(version("orphan").await?.is_none().then_some(()))
        })
        .await;
    stack
        .stays("after a restart", Duration::from_secs(2), || async {
            if version("lock").await?.is_none() {
                return Ok(Some("the leader lock was deleted".into()));
            }
            if version("hs").await? != hs_version {
                return Ok(Some("hs was rewritten".into()));
            }
            Ok(None)
        })
        .await;
    stack.cluster.cleanup().await;
}

/// Check 7: 1001 ready pods. The pods are bound straight to five nodes of their own
/// (253 pod IPs each; node-ipam gives them CIDRs) before their Service exists, so the
/// controller does one sync for 1001 pods, then one for 999.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_thousand_addresses_are_truncated() {
    let stack = Stack::start(&[
        "--allocate-node-cidrs",
        "--cluster-cidr=10.244.0.0/16",
        "--endpoint-updates-batch-period=200ms",
    ])
    .await;
    if stack
        .cluster
        .sim_only("1001 pods on nodes of the test's own")
        .is_none()
    {
        return;
    }
    let started = Instant::now();
    const NODES: usize = 5;
    const PODS: usize = 1001;
    let _big_nodes = simulated_nodes_with(
        &stack.cluster,
        kube_sim::nodesim::NodeSimConfig {
            nodes: NODES,
            name_prefix: "big-node-".into(),
            scheduler: false,
            start_delay: Duration::from_millis(50),
            events: false,
            assign_pod_cidrs: false,
            pod_concurrency: 32,
            ..Default::default()
        },
    )
    .await
    .expect("node-sim on kube-sim");
    let ns = stack.namespace("ep-big").await;
    let pods = stack.pods(&ns);
    let created = futures::stream::iter(0..PODS)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("big-{i}"), "labels": {"app": "big"}},
                    "spec": {"nodeName": format!("big-node-{}", i % NODES),
                             "automountServiceAccountToken": false,
                             "containers": [{"name": "c", "image": "x",
                                             "ports": [{"containerPort": 8080}]}]},
                }))?;
                pods.create(&PostParams::default(), &pod).await?;
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    if let Some(Err(error)) = created.into_iter().find(Result::is_err) {
        stack.fail(format!("creating the pods: {error:#}"));
    }
    println!("{PODS} pods created after {:?}", started.elapsed());
    let all = stack
        .wait_pods_every(
            &ns,
            "app=big",
            PODS,
            true,
            Duration::from_secs(1),
            Duration::from_secs(240),
        )
        .await;
    println!("{PODS} pods ready after {:?}", started.elapsed());
    stack
        .apply_in(
            &ns,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "big"},
                   "spec": {"selector": {"app": "big"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
        )
        .await;
    let ips: BTreeSet<String> = all.iter().map(|p| pod_address(p, None).0).collect();
    assert_eq!(ips.len(), PODS, "every pod its own IP");
    let big = stack
        .wait_endpoints(&ns, "big", "1000 addresses, truncated", |e| {
            let (ready, not_ready) = addresses(e);
            (ready.len() == 1000 && not_ready.is_empty() && annotation(e, OVER_CAPACITY) == Some("truncated"))
                .then_some(())
                .ok_or_else(|| format!("expected 1000 ready addresses and {OVER_CAPACITY}: truncated (ready {}, not ready {})", ready.len(), not_ready.len()))
        })
        .await;
    assert!(addresses(&big).0.iter().all(|a| ips.contains(&a.0)));
    println!("truncated Endpoints after {:?}", started.elapsed());

    // A sync while over capacity always writes (the truncated object differs from the
    // full subsets). The first one after creation drops the trigger time (nothing changed
    // since); the next rewrites the object unchanged, and the API server keeps its
    // resourceVersion. That version must not then be taken for a stale cache, or the
    // Endpoints would never change again (kubernetes/kubernetes#127417).
    stack
        .kubectl(&["annotate", "service", "big", "touched=1", "-n", &ns])
        .await;
    let big = stack
        .wait_endpoints(&ns, "big", "rewritten without a trigger time", |e| {
            annotation(e, TRIGGER_TIME)
                .is_none()
                .then_some(())
                .ok_or_else(|| format!("expected no {TRIGGER_TIME}"))
        })
        .await;
    let version = big.metadata.resource_version.clone();
    stack
        .kubectl(&[
            "annotate",
            "service",
            "big",
            "touched=2",
            "--overwrite",
            "-n",
            &ns,
        ])
        .await;
    let endpoints = stack.endpoints(&ns);
    stack
        .stays(
            "the truncated Endpoints unchanged by a second Service edit",
            Duration::from_secs(1),
            || async {
                let now = endpoints.get("big").await?;
                Ok((now.metadata.resource_version != version).then(|| {
                    format!(
                        "subsets equal: {}; metadata before: {}; after: {}",
                        now.subsets == big.subsets,
                        serde_json::to_string(&big.metadata).unwrap_or_default(),
                        serde_json::to_string(&now.metadata).unwrap_or_default()
                    )
                }))
            },
        )
        .await;
    for name in ["big-0", "big-1"] {
        pods.delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| stack.fail(format!("deleting {name}: {e}")));
    }
    stack
        .wait_endpoints(&ns, "big", "999 addresses, no longer truncated", |e| {
            let (ready, _) = addresses(e);
            (ready.len() == 999 && annotation(e, OVER_CAPACITY).is_none())
                .then_some(())
                .ok_or_else(|| format!("expected 999 addresses, no {OVER_CAPACITY}"))
        })
        .await;
    println!("over-capacity test took {:?}", started.elapsed());
    stack.cluster.cleanup().await;
}

//! Benchmark of `rkcm worker`'s endpoints and endpointslice controllers (release builds,
//! informer-server and worker each their own process) on kube-sim with simulated nodes,
//! against a baseline measured in the same run.
//!
//! 100 Services select 10 pods each. The 1,000 pods run but are held unready by a
//! readiness gate; once every Endpoints and EndpointSlice lists them as not ready, the
//! benchmark sets the gate's condition on all 1,000 (the kubelet then reports them Ready)
//! and measures the time until every Endpoints object lists 10 ready addresses and every
//! Service's EndpointSlices 10 ready endpoints.
//!
//! Baseline, same cluster, same run: the same 1,000 gate writes, the kubelet's 1,000
//! status writes that make the pods Ready, then a plain client writing the 200 objects
//! the controllers end with (100 Endpoints and 100 EndpointSlices of 10 ready endpoints
//! each), `common::IN_FLIGHT` writes in flight: what the API server needs for the work
//! itself. Also how long after the last pod was seen Ready the endpoints showed it, and the
//! peak RSS of both processes.
//!
//! `cargo bench -p rkcm --bench endpoints`

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const NODES: usize = 30;
const SERVICES: usize = 100;
const PODS_PER_SERVICE: usize = 10;
const GATE: &str = "bench.rkcm.io/ready";
const IMAGE: &str = "registry.k8s.io/pause:3.9";

fn service(i: usize) -> anyhow::Result<Service> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": format!("svc-{i}")},
        "spec": {"selector": {"svc": format!("s{i}")},
                 "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}
    }))?)
}

fn pod(i: usize) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": format!("p-{i}"), "labels": {"svc": format!("s{}", i % SERVICES)}},
        "spec": {"readinessGates": [{"conditionType": GATE}],
                 "containers": [{"name": "c", "image": IMAGE, "ports": [{"containerPort": 8080}]}]}
    }))?)
}

/// What a Service's Endpoints and controller-made EndpointSlices show.
#[derive(Debug, Default)]
struct Shown {
    ready: usize,
    not_ready: usize,
    slice_ready: usize,
    slice_all: usize,
}

/// Per Service: what its Endpoints and slices show.
async fn shown(client: &kube::Client, ns: &str) -> anyhow::Result<BTreeMap<String, Shown>> {
    let mut seen: BTreeMap<String, Shown> = BTreeMap::new();
    for endpoints in Api::<Endpoints>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
    {
        let name = endpoints.metadata.name.clone().unwrap_or_default();
        let entry = seen.entry(name).or_default();
        for subset in endpoints.subsets.iter().flatten() {
            entry.ready += subset.addresses.as_ref().map_or(0, Vec::len);
            entry.not_ready += subset.not_ready_addresses.as_ref().map_or(0, Vec::len);
        }
    }
    let managed = ListParams::default()
        .labels("endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io");
    for slice in Api::<EndpointSlice>::namespaced(client.clone(), ns)
        .list(&managed)
        .await?
        .items
    {
        let Some(name) = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/service-name"))
            .cloned()
        else {
            continue;
        };
        let entry = seen.entry(name).or_default();
        for endpoint in &slice.endpoints {
            entry.slice_all += 1;
            if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(true) {
                entry.slice_ready += 1;
            }
        }
    }
    Ok(seen)
}

/// Polls until every Service shows `ready` ready addresses and endpoints of
/// [`PODS_PER_SERVICE`], at most 10 minutes.
async fn until_shown(
    client: &kube::Client,
    ns: &str,
    start: Instant,
    ready: usize,
) -> anyhow::Result<Duration> {
    let deadline = start + Duration::from_secs(600);
    loop {
        let seen = shown(client, ns).await?;
        let done = seen.len() == SERVICES
            && seen.values().all(|s| {
                s.ready == ready
                    && s.ready + s.not_ready == PODS_PER_SERVICE
                    && s.slice_ready == ready
                    && s.slice_all == PODS_PER_SERVICE
            });
        if done {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ns}: endpoints not shown after 10 minutes: {:?}",
            seen.iter()
                .find(|(_, s)| s.ready != ready || s.slice_ready != ready)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates the Services and the pods, and waits until every pod runs.
async fn workload(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    common::namespace(client, ns, true).await?;
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    common::create_all(SERVICES, |i| {
        let services = services.clone();
        async move {
            services
                .create(&PostParams::default(), &service(i)?)
                .await?;
            Ok(())
        }
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    common::create_all(SERVICES * PODS_PER_SERVICE, |i| {
        let pods = pods.clone();
        async move {
            pods.create(&PostParams::default(), &pod(i)?).await?;
            Ok(())
        }
    })
    .await?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let running = pods
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .is_some_and(|s| s.phase.as_deref() == Some("Running") && s.pod_ip.is_some())
            })
            .count();
        if running == SERVICES * PODS_PER_SERVICE {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ns}: pods not running after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many of the namespace's pods are Ready.
async fn ready_pods(client: &kube::Client, ns: &str) -> anyhow::Result<usize> {
    Ok(Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count())
}

/// Polls until every pod of the namespace is Ready, at most 10 minutes.
async fn until_ready(client: &kube::Client, ns: &str, start: Instant) -> anyhow::Result<Duration> {
    let deadline = start + Duration::from_secs(600);
    while ready_pods(client, ns).await? < SERVICES * PODS_PER_SERVICE {
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ns}: pods not Ready after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(start.elapsed())
}

/// Sets the readiness gate's condition on every pod.
async fn open_gates(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    common::create_all(SERVICES * PODS_PER_SERVICE, |i| {
        let pods = pods.clone();
        async move {
            let patch = json!({"status": {"conditions": [
                {"type": GATE, "status": "True", "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()}]}});
            pods.patch_status(&format!("p-{i}"), &PatchParams::default(), &Patch::Strategic(patch))
                .await?;
            Ok(())
        }
    })
    .await
}

/// The baseline: the gate writes, then the 200 final objects written by a plain client.
/// The baseline's times from the first gate write: every pod Ready (the gate writes and
/// the kubelet's status writes), then the 200 objects written.
async fn baseline(client: &kube::Client) -> anyhow::Result<(Duration, Duration)> {
    let ns = "endpoints-baseline";
    workload(client, ns).await?;
    let start = Instant::now();
    open_gates(client, ns).await?;
    let ready = until_ready(client, ns, start).await?;
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), ns);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    common::create_all(SERVICES * 2, |i| {
        let (endpoints, slices) = (endpoints.clone(), slices.clone());
        async move {
            let service = i / 2;
            let addresses: Vec<_> = (0..PODS_PER_SERVICE)
                .map(|k| format!("10.0.{}.{}", service % 250, k + 1))
                .collect();
            if i % 2 == 0 {
                let object: Endpoints = serde_json::from_value(json!({
                    "metadata": {"name": format!("base-{service}")},
                    "subsets": [{"addresses": addresses.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
                                 "ports": [{"port": 8080, "protocol": "TCP"}]}]}))?;
                endpoints.create(&PostParams::default(), &object).await?;
            } else {
                let object: EndpointSlice = serde_json::from_value(json!({
                    "metadata": {"name": format!("base-{service}")},
                    "addressType": "IPv4",
                    "endpoints": addresses.iter().map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>(),
                    "ports": [{"port": 8080, "protocol": "TCP"}]}))?;
                slices.create(&PostParams::default(), &object).await?;
            }
            Ok(())
        }
    })
    .await?;
    Ok((ready, start.elapsed()))
}

async fn run() -> anyhow::Result<()> {
    let cluster = common::BenchCluster::start(NODES).await?;
    let (client, kubeconfig) = (&cluster.client, &cluster.kubeconfig);
    println!(
        "endpoints benchmark (release; kube-sim and node-sim in the bench process, {NODES} simulated nodes, {SERVICES} Services x {PODS_PER_SERVICE} pods)"
    );
    // Pods need node-lifecycle (the startup taint) and the root-ca publisher, baseline or not.
    let infrastructure = common::Rkcm::start(kubeconfig, "", "0", "30").await?;
    let (base_ready, base) = baseline(client).await?;
    drop(infrastructure);
    println!(
        "baseline: {} readiness-gate writes, every pod Ready after {:.2} s, then {} Endpoints and EndpointSlices by a plain client ({:.2} s): {:.2} s in all",
        SERVICES * PODS_PER_SERVICE,
        base_ready.as_secs_f64(),
        SERVICES * 2,
        (base - base_ready).as_secs_f64(),
        base.as_secs_f64()
    );
    for (label, name, qps, burst) in [
        (
            "KCM's client limits (qps 20, burst 30)",
            "default",
            "20",
            "30",
        ),
        ("client limits lifted (qps 0)", "unlimited", "0", "30"),
    ] {
        let rkcm = common::Rkcm::start(kubeconfig, "endpoint,endpointslice", qps, burst).await?;
        let ns = format!("endpoints-{name}");
        workload(client, &ns).await?;
        let unready = Instant::now();
        until_shown(client, &ns, unready, 0).await?;
        let listed = unready.elapsed();
        let start = Instant::now();
        open_gates(client, &ns).await?;
        let ready = until_ready(client, &ns, start).await?;
        let shown = until_shown(client, &ns, start, PODS_PER_SERVICE).await?;
        let (informer_rss, worker_rss) = rkcm.peak_rss();
        println!(
            "rkcm, {label}: {} pods Ready behind {SERVICES} Services (all Ready after {:.2} s) shown in every Endpoints and EndpointSlice after {:.2} s = {:.2}x baseline, {:.2} s after the last pod was seen Ready (baseline's writes: {:.2} s) (unready ones listed {:.2} s after they ran); peak RSS informer-server {:.1} MiB, worker {:.1} MiB",
            SERVICES * PODS_PER_SERVICE,
            ready.as_secs_f64(),
            shown.as_secs_f64(),
            shown.as_secs_f64() / base.as_secs_f64(),
            shown.saturating_sub(ready).as_secs_f64(),
            (base - base_ready).as_secs_f64(),
            listed.as_secs_f64(),
            informer_rss as f64 / 1048576.0,
            worker_rss as f64 / 1048576.0,
        );
    }
    Ok(())
}

fn main() {
    common::main(run());
}

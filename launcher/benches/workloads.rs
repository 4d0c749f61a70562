//! Benchmark of `rkcm worker`'s daemonset and statefulset controllers (release builds,
//! informer-server and worker each their own process) on kube-sim with 100 simulated
//! nodes, each against a baseline measured in the same run by a plain client doing the
//! same work directly:
//!
//! - a DaemonSet until its pod runs on all 100 nodes; baseline: 100 pods pinned to the
//!   nodes the same way (required `metadata.name` affinity), `common::IN_FLIGHT` creations
//!   in flight;
//! - an OrderedReady StatefulSet of 20 replicas until all are Ready (one at a time by
//!   design); baseline: 20 pods created one after another, each once the previous one
//!   is Ready;
//!
//! with KCM's default client limits (qps 20, burst 30 per controller) and with them lifted,
//! plus the peak RSS of the informer-server and the worker.
//!
//! `cargo bench -p rkcm --bench workloads`

mod common;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const NODES: usize = 100;
const SET_REPLICAS: usize = 20;
const IMAGE: &str = "registry.k8s.io/pause:3.9";

/// Pods of the namespace that are Running, and those that are Ready.
async fn counts(client: &kube::Client, ns: &str) -> anyhow::Result<(usize, usize)> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    let running = pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count();
    let ready = pods
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    Ok((running, ready))
}

/// Polls until `done(running, ready)`, at most 10 minutes.
async fn until(
    client: &kube::Client,
    ns: &str,
    start: Instant,
    done: impl Fn(usize, usize) -> bool,
) -> anyhow::Result<Duration> {
    let deadline = start + Duration::from_secs(600);
    loop {
        let (running, ready) = counts(client, ns).await?;
        if done(running, ready) {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(Instant::now() < deadline, "{ns}: not done after 10 minutes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pinned_pod(name: &str, node: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
            "containers": [{"name": "c", "image": IMAGE}]
        }
    }))?)
}

async fn daemon_baseline(client: &kube::Client, nodes: &[String]) -> anyhow::Result<Duration> {
    let ns = "ds-baseline";
    common::namespace(client, ns, true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    common::create_all(nodes.len(), |i| {
        let pods = pods.clone();
        async move {
            pods.create(
                &PostParams::default(),
                &pinned_pod(&format!("p-{i}"), &nodes[i])?,
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    until(client, ns, start, |running, _| running >= nodes.len()).await
}

async fn ordered_baseline(client: &kube::Client) -> anyhow::Result<Duration> {
    let ns = "sts-baseline";
    common::namespace(client, ns, true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    for i in 0..SET_REPLICAS {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("p-{i}")},
            "spec": {"containers": [{"name": "c", "image": IMAGE}]}}))?;
        pods.create(&PostParams::default(), &pod).await?;
        until(client, ns, start, |_, ready| ready > i).await?;
    }
    Ok(start.elapsed())
}

struct Run {
    daemon_set: Duration,
    stateful_set: Duration,
    informer_rss: u64,
    worker_rss: u64,
}

async fn with_rkcm(
    client: &kube::Client,
    kubeconfig: &std::path::Path,
    label: &str,
    qps: &str,
    burst: &str,
) -> anyhow::Result<Run> {
    let rkcm = common::Rkcm::start(kubeconfig, "daemonset,statefulset", qps, burst).await?;
    let ds_ns = format!("ds-{label}");
    common::namespace(client, &ds_ns, true).await?;
    let daemon_set: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": IMAGE}]}}}}))?;
    let start = Instant::now();
    Api::<DaemonSet>::namespaced(client.clone(), &ds_ns)
        .create(&PostParams::default(), &daemon_set)
        .await?;
    let daemon_set = until(client, &ds_ns, start, |running, _| running >= NODES).await?;

    let sts_ns = format!("sts-{label}");
    common::namespace(client, &sts_ns, true).await?;
    let stateful_set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"replicas": SET_REPLICAS, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "c", "image": IMAGE}]}}}}))?;
    let start = Instant::now();
    Api::<StatefulSet>::namespaced(client.clone(), &sts_ns)
        .create(&PostParams::default(), &stateful_set)
        .await?;
    let stateful_set = until(client, &sts_ns, start, |_, ready| ready >= SET_REPLICAS).await?;
    let (informer_rss, worker_rss) = rkcm.peak_rss();
    Ok(Run {
        daemon_set,
        stateful_set,
        informer_rss,
        worker_rss,
    })
}

async fn run() -> anyhow::Result<()> {
    let cluster = common::BenchCluster::start(NODES).await?;
    let (client, kubeconfig) = (&cluster.client, &cluster.kubeconfig);
    let nodes = cluster.node_names().await?;
    println!("workloads benchmark (release; kube-sim and node-sim in the bench process, {NODES} simulated nodes)");
    // Pods need node-lifecycle (the startup taint) and the root-ca publisher, baseline or not.
    let infrastructure = common::Rkcm::start(kubeconfig, "", "0", "30").await?;
    let ds_base = daemon_baseline(client, &nodes).await?;
    let sts_base = ordered_baseline(client).await?;
    drop(infrastructure);
    println!(
        "baseline: {NODES} pinned pods by a plain client: {:.2} s; {SET_REPLICAS} pods one after another, each once the last is Ready: {:.2} s",
        ds_base.as_secs_f64(),
        sts_base.as_secs_f64()
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
        let run = with_rkcm(client, kubeconfig, name, qps, burst).await?;
        println!(
            "rkcm, {label}: DaemonSet on {NODES} nodes {:.2} s = {:.2}x baseline; OrderedReady StatefulSet of {SET_REPLICAS} {:.2} s = {:.2}x baseline; peak RSS informer-server {:.1} MiB, worker {:.1} MiB",
            run.daemon_set.as_secs_f64(),
            run.daemon_set.as_secs_f64() / ds_base.as_secs_f64(),
            run.stateful_set.as_secs_f64(),
            run.stateful_set.as_secs_f64() / sts_base.as_secs_f64(),
            run.informer_rss as f64 / 1048576.0,
            run.worker_rss as f64 / 1048576.0,
        );
    }
    Ok(())
}

fn main() {
    common::main(run());
}

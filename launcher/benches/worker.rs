//! Benchmark of `rkcm worker` with the deployment and replicaset controllers (release
//! builds, informer-server and worker each their own process) on kube-sim with simulated
//! nodes, against a baseline measured in the same run: a plain client creating the same
//! 1000 pods directly (the API server's and the nodes' pace, with no controller).
//!
//! - 100 Deployments x 10 replicas until 1000 pods are Running, with KCM's default
//!   client limits (--kube-api-qps 20, --kube-api-burst 30, per controller) and with the
//!   limits lifted (--kube-api-qps 0), so the controllers' own cost shows;
//! - peak RSS (VmHWM) of the informer-server and of the worker in each run.
//!
//! `cargo bench -p rkcm --bench worker`

mod common;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const DEPLOYMENTS: usize = 100;
const REPLICAS: usize = 10;
const PODS: usize = DEPLOYMENTS * REPLICAS;

async fn running(client: &kube::Client, ns: &str) -> anyhow::Result<usize> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    Ok(pods
        .list_metadata(&ListParams::default().fields("status.phase=Running"))
        .await?
        .items
        .len())
}

async fn until_running(
    client: &kube::Client,
    ns: &str,
    start: Instant,
) -> anyhow::Result<Duration> {
    let deadline = start + Duration::from_secs(600);
    loop {
        if running(client, ns).await? >= PODS {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ns}: not all {PODS} pods Running after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn baseline(client: &kube::Client) -> anyhow::Result<Duration> {
    let ns = "baseline";
    common::namespace(client, ns, true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    common::create_all(PODS, |i| {
        let pods = pods.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("p-{i}"), "labels": {"app": format!("d{}", i / REPLICAS)}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))?;
            pods.create(&PostParams::default(), &pod).await?;
            Ok(())
        }
    })
    .await?;
    until_running(client, ns, start).await
}

struct Run {
    elapsed: Duration,
    informer_rss: u64,
    worker_rss: u64,
}

async fn with_rkcm(
    client: &kube::Client,
    kubeconfig: &std::path::Path,
    ns: &str,
    qps: &str,
    burst: &str,
) -> anyhow::Result<Run> {
    let rkcm = common::Rkcm::start(
        kubeconfig,
        "deployment,replicaset,serviceaccount",
        qps,
        burst,
    )
    .await?;
    common::namespace(client, ns, false).await?;
    // The serviceaccount controller makes the namespace usable.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    while accounts.get_opt("default").await?.is_none() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the worker did not create {ns}'s default ServiceAccount"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    common::create_all(DEPLOYMENTS, |i| {
        let deployments = deployments.clone();
        async move {
            let deployment: Deployment = serde_json::from_value(json!({
                "metadata": {"name": format!("d{i}")},
                "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": format!("d{i}")}},
                    "template": {"metadata": {"labels": {"app": format!("d{i}")}},
                        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}}))?;
            deployments.create(&PostParams::default(), &deployment).await?;
            Ok(())
        }
    })
    .await?;
    let elapsed = until_running(client, ns, start).await?;
    let (informer_rss, worker_rss) = rkcm.peak_rss();
    Ok(Run {
        elapsed,
        informer_rss,
        worker_rss,
    })
}

async fn run() -> anyhow::Result<()> {
    // 110 pods per node: room for the three runs' 3000 pods.
    let cluster = common::BenchCluster::start(32).await?;
    let (client, kubeconfig) = (&cluster.client, &cluster.kubeconfig);
    println!("worker benchmark (release; kube-sim and node-sim in the bench process, 32 simulated nodes)");
    println!(
        "{DEPLOYMENTS} Deployments x {REPLICAS} replicas until {PODS} pods Running; {} creations in flight",
        common::IN_FLIGHT
    );
    // Pods need node-lifecycle (the startup taint) and the root-ca publisher, baseline or not.
    let infrastructure = common::Rkcm::start(kubeconfig, "", "0", "30").await?;
    let base = baseline(client).await?;
    drop(infrastructure);
    println!(
        "baseline: a plain client creating {PODS} pods directly: {:.2} s",
        base.as_secs_f64()
    );
    for (label, ns, qps, burst) in [
        (
            "KCM's client limits (qps 20, burst 30)",
            "rkcm-default",
            "20",
            "30",
        ),
        ("client limits lifted (qps 0)", "rkcm-unlimited", "0", "30"),
    ] {
        let run = with_rkcm(client, kubeconfig, ns, qps, burst).await?;
        println!(
            "rkcm, {label}: {:.2} s = {:.2}x baseline; peak RSS informer-server {:.1} MiB, worker {:.1} MiB",
            run.elapsed.as_secs_f64(),
            run.elapsed.as_secs_f64() / base.as_secs_f64(),
            run.informer_rss as f64 / 1048576.0,
            run.worker_rss as f64 / 1048576.0,
        );
    }
    println!(
        "peak RSS of the bench process (kube-sim + node-sim + clients): {:.1} MiB",
        common::proc_status_bytes(std::process::id(), "VmHWM:") as f64 / 1048576.0
    );
    Ok(())
}

fn main() {
    common::main(run());
}

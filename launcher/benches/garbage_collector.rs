//! Benchmark of the garbage collector in its own worker process (release builds; the
//! informer-server and the worker each their own process, kube-sim in the bench process):
//!
//! - memory: the collector's RSS once its graph holds 10,000 pods (metadata-only
//!   streams), against the informer-server's full-object cache of those pods
//!   (`rkcm_informer_cached_bytes`) and its RSS, in the same run;
//! - collection: the time from deleting 100 ReplicaSets to their 1,000 pods being gone,
//!   with KCM's client limits (20 qps, burst 30) and with them lifted, against a plain
//!   client deleting the same number of pods directly (16 in flight) in the same run.
//!
//! `cargo bench -p rkcm --bench garbage_collector`

use std::time::{Duration, Instant};

mod common;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// 100 ReplicaSets (replicas 0: nothing recreates pods) owning `per_set` pods each.
async fn owned_pods(
    client: &kube::Client,
    ns: &str,
    sets: usize,
    per_set: usize,
) -> anyhow::Result<()> {
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for i in 0..sets {
        let rs: ReplicaSet = serde_json::from_value(
            json!({"metadata": {"name": format!("rs{i}")},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"rs": format!("rs{i}")}},
                "template": {"metadata": {"labels": {"rs": format!("rs{i}")}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}}),
        )?;
        let rs = rs_api.create(&PostParams::default(), &rs).await?;
        let uid = rs.metadata.uid.unwrap_or_default();
        common::create_all(per_set, |j| {
            let pods = pods.clone();
            let uid = uid.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("rs{i}-p{j}"), "labels": {"rs": format!("rs{i}")},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs{i}"), "uid": uid,
                        "controller": true, "blockOwnerDeletion": true}]},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))?;
                pods.create(&PostParams::default(), &pod).await?;
                Ok(())
            }
        })
        .await?;
    }
    Ok(())
}

async fn until_no_pods(
    client: &kube::Client,
    ns: &str,
    start: Instant,
) -> anyhow::Result<Duration> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    loop {
        if pods
            .list_metadata(&ListParams::default().limit(1))
            .await?
            .items
            .is_empty()
        {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(600),
            "{ns}: pods left after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Processes {
    informer: common::InformerServer,
    worker: tokio::process::Child,
    worker_health: String,
    _dir: tempfile::TempDir,
}

async fn start(kubeconfig: &std::path::Path, qps: &str) -> anyhow::Result<Processes> {
    let dir = tempfile::tempdir()?;
    let informer = common::InformerServer::start(kubeconfig, dir.path()).await?;
    let worker_health = common::free_address()?;
    let worker = tokio::process::Command::new(env!("CARGO_BIN_EXE_rkcm"))
        .args([
            "worker",
            "--group",
            "garbage-collector",
            "--controllers",
            "garbagecollector",
            "--informer",
            &informer.address(),
        ])
        .args([
            "--health-bind-address",
            &worker_health,
            "--kube-api-qps",
            qps,
            "--kube-api-burst",
            "30",
        ])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("RKCM_LOG", "warn")
        .kill_on_drop(true)
        .spawn()?;
    Ok(Processes {
        informer,
        worker,
        worker_health,
        _dir: dir,
    })
}

async fn wait_graph(p: &Processes, at_least: f64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let metrics = common::http_get(&p.worker_health, "/metrics").await;
        let nodes = metric(&metrics, "rkcm_garbage_collector_graph_nodes").unwrap_or(0.0);
        let synced = metric(&metrics, "rkcm_garbage_collector_monitors_synced").unwrap_or(0.0);
        if nodes >= at_least && synced == 1.0 {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the collector's graph did not reach {at_least} nodes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn run() -> anyhow::Result<()> {
    let cluster = common::BenchCluster::without_nodes().await?;
    let (client, kubeconfig) = (cluster.client.clone(), cluster.kubeconfig.clone());
    println!("garbage-collector benchmark (release; kube-sim in the bench process; informer-server and collector their own processes)");

    // Memory with 10,000 pods.
    common::namespace(&client, "memory", true).await?;
    owned_pods(&client, "memory", 100, 100).await?;
    let p = start(&kubeconfig, "0").await?;
    wait_graph(&p, 10_100.0).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let metrics = common::http_get(&p.informer.metrics, "/metrics").await;
    let cached =
        metric(&metrics, "rkcm_informer_cached_bytes{resource=\"v1/pods\"}").unwrap_or(0.0);
    let gc_rss = common::proc_status_bytes(p.worker.id().unwrap_or(0), "VmRSS:") as f64;
    let informer_rss = common::proc_status_bytes(p.informer.pid(), "VmRSS:") as f64;
    println!(
        "memory, 10,000 pods + 100 ReplicaSets: collector RSS {:.1} MiB ({:.0} B/pod) vs the informer-server's full-object pod cache {:.1} MiB ({:.0} B/pod) = {:.2}x; informer-server RSS {:.1} MiB",
        gc_rss / 1048576.0,
        gc_rss / 10_000.0,
        cached / 1048576.0,
        cached / 10_000.0,
        gc_rss / cached.max(1.0),
        informer_rss / 1048576.0
    );
    drop(p);

    // Baseline: a plain client deleting 1,000 pods.
    common::namespace(&client, "baseline", true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "baseline");
    common::create_all(1000, |i| {
        let pods = pods.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p{i}")},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))?;
            pods.create(&PostParams::default(), &pod).await?;
            Ok(())
        }
    })
    .await?;
    let start_base = Instant::now();
    common::create_all(1000, |i| {
        let pods = pods.clone();
        async move {
            pods.delete(&format!("p{i}"), &DeleteParams::default())
                .await?;
            Ok(())
        }
    })
    .await?;
    let base = until_no_pods(&client, "baseline", start_base).await?;
    println!(
        "baseline: a plain client deleting 1,000 pods directly: {:.2} s",
        base.as_secs_f64()
    );

    for (label, ns, qps) in [
        (
            "KCM's client limits (qps 20, burst 30)",
            "collect-default",
            "20",
        ),
        ("client limits lifted (qps 0)", "collect-unlimited", "0"),
    ] {
        common::namespace(&client, ns, true).await?;
        owned_pods(&client, ns, 100, 10).await?;
        let p = start(&kubeconfig, qps).await?;
        wait_graph(&p, 11_100.0).await?;
        let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
        let started = Instant::now();
        common::create_all(100, |i| {
            let sets = sets.clone();
            async move {
                sets.delete(&format!("rs{i}"), &DeleteParams::default())
                    .await?;
                Ok(())
            }
        })
        .await?;
        let took = until_no_pods(&client, ns, started).await?;
        println!(
            "collector, {label}: 1,000 pods of 100 deleted ReplicaSets gone in {:.2} s = {:.2}x baseline; collector peak RSS {:.1} MiB",
            took.as_secs_f64(),
            took.as_secs_f64() / base.as_secs_f64(),
            common::proc_status_bytes(p.worker.id().unwrap_or(0), "VmHWM:") as f64 / 1048576.0
        );
        drop(p);
    }
    Ok(())
}

fn main() {
    common::main(run());
}

//! Benchmark of `rkcm worker`'s resourcequota controller (release builds, informer-server
//! and worker each their own process) on kube-sim, against a baseline measured in the same
//! run.
//!
//! One namespace holds 10,000 pods (requests cpu 10m, limits memory 32Mi; no scheduler
//! takes them, so nothing else writes them) and 100 quotas on pods, `count/pods`,
//! `requests.cpu` and `limits.memory`, made after the pods (so admission charges nothing).
//! Each quota sums all 10,000 pods: the worst case, 1,000,000 pod evaluations per full
//! pass, as upstream's controller does them.
//!
//! - cold: from the worker's start (its informer lists the 10,000 pods from the
//!   informer-server) until the 100 quotas show `pods: 10000`;
//! - warm: every quota's `spec.hard` patched, until the 100 show the new hard with the
//!   same usage (a full recompute and 100 status writes);
//!
//! Baseline, same cluster, same run: one plain client LIST of the 10,000 pods. Also the
//! peak RSS of both processes. Run once with KCM's client limits and once without.
//!
//! `cargo bench -p rkcm --bench resource_quota`

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use rkcm_gocompat::Quantity;
use serde_json::json;

const PODS: usize = 10_000;
const QUOTAS: usize = 100;
const NS: &str = "quota-bench";

fn pod(i: usize) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": format!("p-{i}")},
        "spec": {"schedulerName": "none", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
            "resources": {"requests": {"cpu": "10m"}, "limits": {"memory": "32Mi"}}}]}
    }))?)
}

fn hard(pods: usize) -> serde_json::Value {
    json!({"pods": pods.to_string(), "count/pods": "20000", "requests.cpu": "1k",
           "limits.memory": "1Ti"})
}

type ApiList = BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;

/// The list's `pods` is `value` (by value: `10k` is 10000).
fn pods_are(list: Option<&ApiList>, value: usize) -> bool {
    list.and_then(|l| l.get("pods"))
        .and_then(|q| Quantity::from_api(&q.0).ok())
        .is_some_and(|q| q.cmp_int(value as i64).is_eq())
}

/// Waits (at most 10 minutes) until every quota shows `pods_hard` and the usage of all
/// the pods.
async fn until_computed(client: &kube::Client, pods_hard: usize) -> anyhow::Result<()> {
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let list = quotas.list(&ListParams::default()).await?.items;
        let done = list.len() == QUOTAS
            && list.iter().all(|q| {
                let status = q.status.as_ref();
                pods_are(status.and_then(|s| s.hard.as_ref()), pods_hard)
                    && pods_are(status.and_then(|s| s.used.as_ref()), PODS)
            });
        if done {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "quotas not computed after 10 minutes: {:?}",
            list.first().and_then(|q| q.status.clone())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run() -> anyhow::Result<()> {
    let cluster = common::BenchCluster::start(0).await?;
    let (client, kubeconfig) = (&cluster.client, &cluster.kubeconfig);
    println!(
        "resource quota benchmark (release; kube-sim in the bench process, {QUOTAS} quotas over {PODS} pods in one namespace)"
    );
    common::namespace(client, NS, true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let made = Instant::now();
    common::create_all(PODS, |i| {
        let pods = pods.clone();
        async move {
            pods.create(&PostParams::default(), &pod(i)?).await?;
            Ok(())
        }
    })
    .await?;
    println!(
        "{PODS} pods created in {:.2} s",
        made.elapsed().as_secs_f64()
    );
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), NS);
    common::create_all(QUOTAS, |i| {
        let quotas = quotas.clone();
        async move {
            let quota = serde_json::from_value(json!({
                "metadata": {"name": format!("q-{i}")}, "spec": {"hard": hard(20_000)}}))?;
            quotas.create(&PostParams::default(), &quota).await?;
            Ok(())
        }
    })
    .await?;

    let start = Instant::now();
    let listed = pods.list(&ListParams::default()).await?.items.len();
    let baseline = start.elapsed();
    anyhow::ensure!(listed == PODS, "listed {listed} pods");
    println!(
        "baseline: a plain client LIST of the {PODS} pods: {:.3} s",
        baseline.as_secs_f64()
    );

    let mut pods_hard = 20_000;
    for (label, qps, burst) in [
        ("KCM's client limits (qps 20, burst 30)", "20", "30"),
        ("client limits lifted (qps 0)", "0", "30"),
    ] {
        pods_hard += 1;
        // The first computation is cold (a new worker); with the same hard as the last
        // run's the quotas would already hold it, so each run sets its own first.
        common::create_all(QUOTAS, |i| {
            let quotas = quotas.clone();
            async move {
                let patch = json!({"spec": {"hard": hard(pods_hard)}});
                quotas
                    .patch(
                        &format!("q-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await?;
                Ok(())
            }
        })
        .await?;
        let started = Instant::now();
        let rkcm = common::Rkcm::start(kubeconfig, "resourcequota", qps, burst).await?;
        until_computed(client, pods_hard).await?;
        let cold = started.elapsed();

        pods_hard += 1;
        let patched = Instant::now();
        common::create_all(QUOTAS, |i| {
            let quotas = quotas.clone();
            async move {
                let patch = json!({"spec": {"hard": hard(pods_hard)}});
                quotas
                    .patch(
                        &format!("q-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await?;
                Ok(())
            }
        })
        .await?;
        until_computed(client, pods_hard).await?;
        let warm = patched.elapsed();
        let (informer_rss, worker_rss) = rkcm.peak_rss();
        println!(
            "rkcm, {label}: {QUOTAS} quotas over {PODS} pods computed cold (worker start, its informers' lists included) in {:.2} s = {:.1}x baseline; recomputed after a spec change in {:.2} s = {:.1}x baseline; peak RSS informer-server {:.1} MiB, worker {:.1} MiB",
            cold.as_secs_f64(),
            cold.as_secs_f64() / baseline.as_secs_f64(),
            warm.as_secs_f64(),
            warm.as_secs_f64() / baseline.as_secs_f64(),
            informer_rss as f64 / 1048576.0,
            worker_rss as f64 / 1048576.0,
        );
    }
    Ok(())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Err(error) = runtime.block_on(run()) {
        eprintln!("benchmark failed: {error:#}");
        std::process::exit(1);
    }
}

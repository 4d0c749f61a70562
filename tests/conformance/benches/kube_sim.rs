//! Benchmark of the development cluster, so later benchmarks can show it is not their
//! bottleneck: creates/s, the latency of listing 10k pods, and watch fan-out to 100
//! watchers. Each figure is also given as a ratio against a baseline measured in the same
//! run (GET /version round trips through the same client), because these machines are noisy.
//!
//! Run: `cargo bench -p rkcm-conformance --bench kube_sim` (env BENCH_PODS, BENCH_WATCHERS).

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use rkcm_conformance::TestCluster;
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let pods_n = env_usize("BENCH_PODS", 10_000);
    let watchers = env_usize("BENCH_WATCHERS", 100);
    let concurrency = 16;
    let c = TestCluster::start().await?;
    let ns = c.namespace("bench").await?;
    let client = c.client.clone();

    // Baseline: the cheapest authenticated round trip through the same client and server.
    let base_n = 5_000;
    let t = Instant::now();
    futures::stream::iter(0..base_n)
        .map(|_| {
            let client = client.clone();
            async move { client.apiserver_version().await }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let baseline_rps = base_n as f64 / t.elapsed().as_secs_f64();

    // Creates.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let t = Instant::now();
    futures::stream::iter(0..pods_n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let p: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p-{i:06}"), "labels": {"app": "bench"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1", "resources": {"requests": {"cpu": "10m"}}}]}}))
                .expect("static pod");
                pods.create(&PostParams::default(), &p).await
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let creates_per_s = pods_n as f64 / t.elapsed().as_secs_f64();

    // List latency at N pods (median of 5, full objects).
    let mut lat = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let l = pods.list(&ListParams::default()).await?;
        lat.push(t.elapsed());
        assert_eq!(l.items.len(), pods_n);
    }
    lat.sort();
    let list_median = lat[lat.len() / 2];

    // Watch fan-out: W watchers on configmaps, E writes, time until every watcher saw all.
    let events = 500;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let rv = cms
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut handles = Vec::new();
    for _ in 0..watchers {
        let cms = cms.clone();
        let rv = rv.clone();
        let mut stream = cms
            .watch(&WatchParams::default().timeout(120), &rv)
            .await?
            .boxed();
        handles.push(tokio::spawn(async move {
            let mut n = 0;
            while n < events {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(_))) => n += 1,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(anyhow::anyhow!("watch failed: {e}")),
                    None => return Err(anyhow::anyhow!("watch ended after {n} events")),
                }
            }
            Ok(Instant::now())
        }));
    }
    let t = Instant::now();
    futures::stream::iter(0..events)
        .map(|i| {
            let cms = cms.clone();
            async move {
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:05}")}}))
                        .expect("static");
                cms.create(&PostParams::default(), &cm).await
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let mut last = t;
    for h in handles {
        let done = tokio::time::timeout(Duration::from_secs(120), h).await???;
        last = last.max(done);
    }
    let fanout = last.duration_since(t);
    let delivered_per_s = (events * watchers) as f64 / fanout.as_secs_f64();

    println!("kube-sim benchmark ({pods_n} pods, {watchers} watchers, concurrency {concurrency})");
    println!("  baseline GET /version:        {baseline_rps:10.0} req/s");
    println!(
        "  pod creates:                  {creates_per_s:10.0} /s    ({:.3} x baseline)",
        creates_per_s / baseline_rps
    );
    println!(
        "  list {pods_n} pods (median):    {:10.1} ms   ({:.1} baseline round trips)",
        list_median.as_secs_f64() * 1e3,
        list_median.as_secs_f64() * baseline_rps
    );
    println!("  watch fan-out {events} writes x {watchers}: {:8.1} ms   ({delivered_per_s:.0} events delivered/s, {:.2} x baseline)", fanout.as_secs_f64() * 1e3, delivered_per_s / baseline_rps);
    Ok(())
}

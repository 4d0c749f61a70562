//! Benchmark of node-sim at scale, so later benchmarks can show it is not their bottleneck:
//! the CPU node-sim spends registering N nodes, scheduling and starting P pods, and then
//! idling (heartbeats) with them running. node-sim runs in-process on its own tokio runtime
//! whose threads are named `node-sim`, so its CPU time is read per thread from
//! `/proc/self/task`; the baseline is the CPU of the kube-sim serving it, in the same run.
//!
//! Run: `cargo bench -p rkcm-conformance --bench node_sim` (env BENCH_NODES, BENCH_PODS,
//! BENCH_IDLE_SECS).

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube_sim::nodesim::{self, NodeSim, NodeSimConfig};
use rkcm_conformance::TestCluster;
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) of this process's threads, split by whether the thread's
/// name starts with `node-sim`.
fn cpu_seconds() -> (f64, f64) {
    let mut node_sim = 0u64;
    let mut other = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (0.0, 0.0);
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        // After the name: state is field 3, utime 14, stime 15 (1-based, man 5 proc).
        let ticks: u64 = fields
            .get(11..13)
            .map(|f| f.iter().filter_map(|x| x.parse::<u64>().ok()).sum())
            .unwrap_or(0);
        if comm.starts_with("node-sim") {
            node_sim += ticks;
        } else {
            other += ticks;
        }
    }
    // Linux reports in USER_HZ, 100 on every architecture Rust targets here.
    (node_sim as f64 / 100.0, other as f64 / 100.0)
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run())
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn run() -> anyhow::Result<()> {
    let nodes_n = env_usize("BENCH_NODES", 100);
    let pods_n = env_usize("BENCH_PODS", 10_000);
    let idle_secs = env_usize("BENCH_IDLE_SECS", 30);
    let c = TestCluster::start().await?;
    let ns = c.namespace("bench").await?;
    let yaml = std::fs::read_to_string(&c.kubeconfig)?;

    // node-sim on its own runtime, so its threads (and CPU) are its own.
    let sim_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("node-sim")
        .enable_all()
        .build()?;
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let node_sim: NodeSim = sim_rt
        .spawn(async move {
            let client = nodesim::client_from_kubeconfig(&yaml).await?;
            Ok::<_, anyhow::Error>(NodeSim::start(
                client,
                NodeSimConfig {
                    nodes: nodes_n,
                    // Measured without pod events, as the figures in the README were.
                    events: false,
                    ..Default::default()
                },
            ))
        })
        .await??;
    // Keep the runtime alive on a thread of its own (it cannot be dropped inside this one).
    std::thread::spawn(move || sim_rt.block_on(futures::future::pending::<()>()));

    let nodes: Api<Node> = Api::all(c.client.clone());
    wait_until("all nodes Ready", Duration::from_secs(120), || async {
        let list = nodes.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                    && n.spec
                        .as_ref()
                        .and_then(|s| s.taints.as_ref())
                        .is_none_or(|t| t.is_empty())
            })
            .count();
        Ok(ready == nodes_n)
    })
    .await?;
    let register = t.elapsed();
    let cpu1 = cpu_seconds();

    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    let t = Instant::now();
    futures::stream::iter(0..pods_n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let p: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p-{i:06}")},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}))
                .expect("static pod");
                pods.create(&PostParams::default(), &p).await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    let created = t.elapsed();
    wait_until(
        "all pods Running and Ready",
        Duration::from_secs(600),
        || async {
            let list = pods
                .list(&ListParams::default().fields("status.phase=Running"))
                .await?;
            let ready = list
                .items
                .iter()
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        })
                })
                .count();
            Ok(ready == pods_n)
        },
    )
    .await?;
    let running = t.elapsed();
    let cpu2 = cpu_seconds();

    tokio::time::sleep(Duration::from_secs(idle_secs as u64)).await;
    let cpu3 = cpu_seconds();
    node_sim.stop();

    let pct = |cpu: f64, wall: Duration| 100.0 * cpu / wall.as_secs_f64();
    println!("node-sim benchmark: {nodes_n} nodes, {pods_n} pods (baseline: the in-process kube-sim's CPU in the same phase)");
    println!(
        "  register {nodes_n} nodes until Ready: {:.2}s wall; node-sim {:.2} CPU-s, kube-sim {:.2} CPU-s",
        register.as_secs_f64(),
        cpu1.0 - cpu0.0,
        cpu1.1 - cpu0.1
    );
    println!(
        "  {pods_n} pods created in {:.1}s, all Running+Ready after {:.1}s ({:.0} pods/s); node-sim {:.2} CPU-s ({:.0}% of a core), kube-sim + client {:.2} CPU-s ({:.0}%)",
        created.as_secs_f64(),
        running.as_secs_f64(),
        pods_n as f64 / running.as_secs_f64(),
        cpu2.0 - cpu1.0,
        pct(cpu2.0 - cpu1.0, running),
        cpu2.1 - cpu1.1,
        pct(cpu2.1 - cpu1.1, running)
    );
    println!(
        "  steady state over {idle_secs}s with {pods_n} pods running: node-sim {:.1}% of a core, kube-sim {:.1}%",
        pct(cpu3.0 - cpu2.0, Duration::from_secs(idle_secs as u64)),
        pct(cpu3.1 - cpu2.1, Duration::from_secs(idle_secs as u64))
    );
    std::process::exit(0)
}

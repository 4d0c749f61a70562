//! Benchmark of the garbage collector sharded two ways against the unsharded collector,
//! for the same cluster and in the same run (release builds; kube-sim in the bench
//! process, one informer-server and the collector workers each their own process):
//!
//! - memory: each process's RSS (`VmRSS`, peak `VmHWM`) and PSS (`Pss` of
//!   `/proc/PID/smaps_rollup`, which splits the pages the shards share, such as the
//!   binary's) once its graph holds the whole cluster, 2,000 pods of 200 ReplicaSets in
//!   20 namespaces; the ratio of each shard to the unsharded worker. A shard holds the
//!   whole graph (an owner may live in another shard's namespace or be cluster-scoped),
//!   so sharding splits the work, not the graph's memory;
//! - collection: with the two shards running, the time from deleting the 200
//!   ReplicaSets to their 2,000 pods being gone, and the pod DELETE requests by answer
//!   code (2,000 answered 200 and none 404 or 409 when no two shards acted on one pod).
//!
//! `cargo bench -p rkcm --bench gc_sharding`

use std::time::{Duration, Instant};

mod common;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

const NAMESPACES: usize = 20;
const SETS_PER_NAMESPACE: usize = 10;
const PODS_PER_SET: usize = 10;
const PODS: usize = NAMESPACES * SETS_PER_NAMESPACE * PODS_PER_SET;
const SETS: usize = NAMESPACES * SETS_PER_NAMESPACE;

fn namespace_name(i: usize) -> String {
    format!("gc-shard-{i}")
}

/// The sum of a metric's samples whose line starts with `prefix`.
fn metric_sum(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `Pss:` of `/proc/PID/smaps_rollup` in bytes; 0 if unreadable.
fn pss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

/// Per namespace, [`SETS_PER_NAMESPACE`] ReplicaSets (replicas 0: nothing recreates their
/// pods) owning [`PODS_PER_SET`] pods each.
async fn fill(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for i in 0..SETS_PER_NAMESPACE {
        let set: ReplicaSet = serde_json::from_value(
            json!({"metadata": {"name": format!("rs{i}")},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"rs": format!("rs{i}")}},
                "template": {"metadata": {"labels": {"rs": format!("rs{i}")}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}}),
        )?;
        let uid = sets
            .create(&PostParams::default(), &set)
            .await?
            .metadata
            .uid
            .unwrap_or_default();
        common::create_all(PODS_PER_SET, |j| {
            let pods = pods.clone();
            let uid = uid.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("rs{i}-p{j}"),
                    "labels": {"rs": format!("rs{i}")},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs{i}"),
                        "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))?;
                pods.create(&PostParams::default(), &pod).await?;
                Ok(())
            }
        })
        .await?;
    }
    Ok(())
}

/// One collector worker (`--shard` when given) and the address of its /metrics.
struct Collector {
    label: String,
    child: tokio::process::Child,
    health: String,
}

impl Collector {
    fn start(
        kubeconfig: &std::path::Path,
        informer: &common::InformerServer,
        shard: Option<&str>,
    ) -> anyhow::Result<Collector> {
        let health = common::free_address()?;
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_rkcm"));
        command
            .args(["worker", "--group", "garbage-collector"])
            .args(["--controllers", "garbagecollector"])
            .arg("--informer")
            .arg(informer.address())
            .args(["--health-bind-address", &health])
            .args(["--kube-api-qps", "0"])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .env("RKCM_LOG", "warn")
            .kill_on_drop(true);
        if let Some(shard) = shard {
            command.args(["--shard", shard]);
        }
        Ok(Collector {
            label: shard.map_or("unsharded".into(), |s| format!("shard {s}")),
            child: command.spawn()?,
            health,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    async fn metrics(&self) -> String {
        common::http_get(&self.health, "/metrics").await
    }

    /// Waits until its monitors have synced a graph of at least `nodes` objects.
    async fn wait_graph(&self, nodes: f64) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let metrics = self.metrics().await;
            let size = metric_sum(&metrics, "rkcm_garbage_collector_graph_nodes");
            let synced = metric_sum(&metrics, "rkcm_garbage_collector_monitors_synced");
            if size >= nodes && synced == 1.0 {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{}: the graph did not reach {nodes} objects",
                self.label
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// (RSS, peak RSS, PSS) in bytes.
    fn memory(&self) -> (u64, u64, u64) {
        let pid = self.pid();
        (
            common::proc_status_bytes(pid, "VmRSS:"),
            common::proc_status_bytes(pid, "VmHWM:"),
            pss_bytes(pid),
        )
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

async fn pods_left(client: &kube::Client) -> anyhow::Result<usize> {
    Ok(Api::<Pod>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await?
        .items
        .len())
}

async fn run() -> anyhow::Result<()> {
    let cluster = common::BenchCluster::without_nodes().await?;
    let (client, kubeconfig) = (cluster.client.clone(), cluster.kubeconfig.clone());
    println!(
        "garbage collector sharded 2 ways vs unsharded (release; kube-sim in the bench process; informer-server and collectors their own processes)"
    );
    let made = Instant::now();
    for i in 0..NAMESPACES {
        common::namespace(&client, &namespace_name(i), true).await?;
        fill(&client, &namespace_name(i)).await?;
    }
    println!(
        "cluster: {PODS} pods of {SETS} ReplicaSets in {NAMESPACES} namespaces, made in {:.1} s",
        made.elapsed().as_secs_f64()
    );

    let informer = common::InformerServer::start(&kubeconfig, cluster.dir()).await?;
    // Every object of the cluster is in each graph (namespaces, service accounts and the
    // rest besides the pods and ReplicaSets).
    let graph = (PODS + SETS) as f64;

    let unsharded = Collector::start(&kubeconfig, &informer, None)?;
    unsharded.wait_graph(graph).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (base_rss, base_peak, base_pss) = unsharded.memory();
    println!(
        "unsharded collector: RSS {:.1} MiB (peak {:.1} MiB), PSS {:.1} MiB",
        mib(base_rss),
        mib(base_peak),
        mib(base_pss)
    );
    drop(unsharded);

    let shards = [
        Collector::start(&kubeconfig, &informer, Some("0/2"))?,
        Collector::start(&kubeconfig, &informer, Some("1/2"))?,
    ];
    for shard in &shards {
        shard.wait_graph(graph).await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut total_rss = 0;
    let mut total_pss = 0;
    for shard in &shards {
        let (rss, peak, pss) = shard.memory();
        total_rss += rss;
        total_pss += pss;
        println!(
            "collector {}: RSS {:.1} MiB (peak {:.1} MiB) = {:.2}x unsharded, PSS {:.1} MiB = {:.2}x unsharded",
            shard.label,
            mib(rss),
            mib(peak),
            rss as f64 / base_rss.max(1) as f64,
            mib(pss),
            pss as f64 / base_pss.max(1) as f64
        );
    }
    println!(
        "both shards: RSS {:.1} MiB = {:.2}x unsharded, PSS {:.1} MiB = {:.2}x unsharded; informer-server RSS {:.1} MiB",
        mib(total_rss),
        total_rss as f64 / base_rss.max(1) as f64,
        mib(total_pss),
        total_pss as f64 / base_pss.max(1) as f64,
        mib(common::proc_status_bytes(informer.pid(), "VmRSS:"))
    );

    // Collection by the two shards: every ReplicaSet deleted in the background.
    let started = Instant::now();
    common::create_all(SETS, |k| {
        let sets: Api<ReplicaSet> =
            Api::namespaced(client.clone(), &namespace_name(k / SETS_PER_NAMESPACE));
        async move {
            sets.delete(
                &format!("rs{}", k % SETS_PER_NAMESPACE),
                &DeleteParams::default(),
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    loop {
        if pods_left(&client).await? == 0 {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(300),
            "pods left 5 minutes after their ReplicaSets were deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed();
    // Only the collectors delete pods: as many successful DELETEs as pods, and none
    // answered 404 or 409, when no two shards acted on one pod.
    let mut by_code: std::collections::BTreeMap<u16, u64> = Default::default();
    for record in cluster.sim.requests_by_user() {
        if record.verb == "delete" && record.resource == "pods" && record.subresource.is_empty() {
            *by_code.entry(record.code).or_default() += record.count;
        }
    }
    println!(
        "collection by 2 shards: {PODS} pods of {SETS} deleted ReplicaSets gone in {:.2} s; pod DELETE requests by code: {by_code:?}",
        took.as_secs_f64(),
    );
    drop(shards);
    drop(informer);
    Ok(())
}

fn main() {
    common::main(run());
}

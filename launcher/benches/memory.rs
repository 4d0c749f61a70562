//! Memory benchmark: what rkcm's processes hold for 10,000 pods in 1,000 ReplicaSets,
//! against a plain kube-rs reflector holding the same pods, measured in the same run
//! (release builds; kube-sim in the bench process, no nodes: the pods stay Pending).
//!
//! - rkcm as the launcher splits it, each its own process: the informer-server, the
//!   `default` worker (every default-enabled controller but the garbage collector, with
//!   the client limits lifted) and the `garbage-collector` worker;
//! - the baseline: this bench binary re-run as a child process holding a kube-rs
//!   `reflector` of every pod (a plain controller's cache: full objects, as listed);
//! - each process's RSS and PSS (`/proc/PID/smaps_rollup`) with 0 pods and with 10,000,
//!   and the growth per cached pod between the two; ratio lines against the baseline;
//! - the informer-server's memory per cached object against the objects' JSON size.
//!
//! `cargo bench -p rkcm --bench memory`

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const SETS: usize = 1_000;
const PER_SET: usize = 10;
const PODS: usize = SETS * PER_SET;
const NAMESPACE: &str = "memory";
/// Set in the baseline child's environment to the kubeconfig it reads.
const REFLECTOR_ENV: &str = "RKCM_MEMORY_BENCH_REFLECTOR";
const MIB: f64 = 1_048_576.0;

/// RSS and PSS of a process in bytes, from `/proc/PID/smaps_rollup`; 0 if unreadable.
#[derive(Clone, Copy, Default)]
struct Memory {
    rss: u64,
    pss: u64,
}

fn memory_of(pid: u32) -> Memory {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Memory {
        rss: field("Rss:"),
        pss: field("Pss:"),
    }
}

/// The sum of every sample of the metric family `name` (all label sets).
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The sample of `name` with exactly the label set `labels` (e.g. `{resource="v1/pods"}`).
fn metric(text: &str, name: &str, labels: &str) -> f64 {
    let prefix = format!("{name}{labels} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix)?.trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// rkcm's three processes, each killed when this is dropped.
struct Rkcm {
    informer: common::InformerServer,
    default: tokio::process::Child,
    collector: tokio::process::Child,
    collector_health: String,
    _dir: tempfile::TempDir,
}

fn worker(
    kubeconfig: &std::path::Path,
    informer: &common::InformerServer,
    group: &str,
    controllers: &str,
    health: &str,
) -> anyhow::Result<tokio::process::Child> {
    Ok(tokio::process::Command::new(env!("CARGO_BIN_EXE_rkcm"))
        .args(["worker", "--group", group, "--controllers", controllers])
        .arg("--informer")
        .arg(informer.address())
        .args(["--health-bind-address", health])
        .args(["--kube-api-qps", "0", "--kube-api-burst", "2000"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        // 10,000 creations in seconds overflow the event recorder's queue, which says so
        // once per dropped event: a known consequence here, not news.
        .env("RKCM_LOG", "warn,rkcm_controller_workers::recorder=error")
        .kill_on_drop(true)
        .spawn()?)
}

impl Rkcm {
    async fn start(kubeconfig: &std::path::Path) -> anyhow::Result<Rkcm> {
        let dir = tempfile::tempdir()?;
        let informer = common::InformerServer::start(kubeconfig, dir.path()).await?;
        let default = worker(
            kubeconfig,
            &informer,
            "default",
            "*,-garbagecollector",
            &common::free_address()?,
        )?;
        let collector_health = common::free_address()?;
        let collector = worker(
            kubeconfig,
            &informer,
            "garbage-collector",
            "garbagecollector",
            &collector_health,
        )?;
        Ok(Rkcm {
            informer,
            default,
            collector,
            collector_health,
            _dir: dir,
        })
    }

    fn memory(&self) -> [Memory; 3] {
        [
            self.informer.pid(),
            self.default.id().unwrap_or(0),
            self.collector.id().unwrap_or(0),
        ]
        .map(memory_of)
    }
}

/// The baseline: this binary re-run with [`REFLECTOR_ENV`], reporting its store's size.
struct Reflector {
    child: tokio::process::Child,
    cached: Arc<AtomicUsize>,
}

impl Reflector {
    fn start(kubeconfig: &std::path::Path) -> anyhow::Result<Reflector> {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .env(REFLECTOR_ENV, kubeconfig)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("the reflector's stdout is not piped"))?;
        let cached = Arc::new(AtomicUsize::new(0));
        let count = cached.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(n) = line.strip_prefix("pods ").and_then(|n| n.parse().ok()) {
                    count.store(n, Ordering::Relaxed);
                }
            }
        });
        Ok(Reflector { child, cached })
    }
}

/// The child's whole life: a reflector of every pod, its size printed every 200 ms.
fn reflector_child(kubeconfig: String) -> anyhow::Result<()> {
    use futures::StreamExt;
    use kube::runtime::{reflector, watcher, WatchStreamExt};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig)?,
            &Default::default(),
        )
        .await?;
        let client = kube::Client::try_from(config)?;
        let (reader, writer) = reflector::store::<Pod>();
        let stream = reflector(
            writer,
            watcher(Api::all(client), watcher::Config::default()),
        )
        .applied_objects();
        tokio::spawn(stream.for_each(|_| futures::future::ready(())));
        loop {
            println!("pods {}", reader.state().len());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Polls `done` every 200 ms until it holds, failing after `limit`.
async fn until<F, Fut>(what: &str, limit: Duration, mut done: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if done().await? {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{what}: not after {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the collector's graph is synced with at least `nodes` nodes, the
/// informer-server caches `pods` pods, and the reflector holds `pods` pods.
async fn until_cached(
    rkcm: &Rkcm,
    reflector: &Reflector,
    pods: usize,
    nodes: f64,
) -> anyhow::Result<()> {
    until("caches", Duration::from_secs(600), || async {
        let gc = common::http_get(&rkcm.collector_health, "/metrics").await;
        let informer = common::http_get(&rkcm.informer.metrics, "/metrics").await;
        Ok(
            metric_sum(&gc, "rkcm_garbage_collector_monitors_synced") == 1.0
                && metric_sum(&gc, "rkcm_garbage_collector_graph_nodes") >= nodes
                && metric(
                    &informer,
                    "rkcm_informer_cached_objects",
                    "{resource=\"v1/pods\"}",
                ) as usize
                    == pods
                && reflector.cached.load(Ordering::Relaxed) == pods,
        )
    })
    .await
}

/// Waits until the informer-server has received no event for `quiet`.
async fn until_quiet(rkcm: &Rkcm, quiet: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    let (mut last, mut since) = (-1.0, Instant::now());
    loop {
        let received = metric_sum(
            &common::http_get(&rkcm.informer.metrics, "/metrics").await,
            "rkcm_informer_events_received_total",
        );
        if received != last {
            (last, since) = (received, Instant::now());
        } else if since.elapsed() >= quiet {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the informer-server kept receiving events for 5 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates the ReplicaSets and waits until each has its pods and has said so in status.
async fn replicasets(client: &kube::Client) -> anyhow::Result<Duration> {
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), NAMESPACE);
    let start = Instant::now();
    common::create_all(SETS, |i| {
        let sets = sets.clone();
        async move {
            let set: ReplicaSet = serde_json::from_value(json!({
                "metadata": {"name": format!("rs{i}")},
                "spec": {"replicas": PER_SET, "selector": {"matchLabels": {"rs": format!("rs{i}")}},
                    "template": {"metadata": {"labels": {"rs": format!("rs{i}")}},
                        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}}))?;
            sets.create(&PostParams::default(), &set).await?;
            Ok(())
        }
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    until("pods created", Duration::from_secs(600), || async {
        Ok(pods
            .list_metadata(&ListParams::default())
            .await?
            .items
            .len()
            >= PODS)
    })
    .await?;
    let took = start.elapsed();
    until("ReplicaSet status", Duration::from_secs(300), || async {
        let listed = sets.list(&ListParams::default()).await?;
        Ok(listed.items.len() == SETS
            && listed.items.iter().all(|set| {
                set.status
                    .as_ref()
                    .is_some_and(|s| s.replicas as usize == PER_SET)
            }))
    })
    .await?;
    Ok(took)
}

/// The mean JSON size of the namespace's pods as the informer-server caches them
/// (managedFields stripped), and as listed (with them).
async fn pod_json_sizes(client: &kube::Client) -> anyhow::Result<(f64, f64)> {
    let resource = kube::api::ApiResource::erase::<Pod>(&());
    let pods: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let listed = pods.list(&ListParams::default()).await?.items;
    let (mut stripped, mut full) = (0usize, 0usize);
    for mut pod in listed.iter().cloned() {
        full += serde_json::to_vec(&pod)?.len();
        pod.metadata.managed_fields = None;
        stripped += serde_json::to_vec(&pod)?.len();
    }
    let n = listed.len().max(1) as f64;
    Ok((stripped as f64 / n, full as f64 / n))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB
}

/// Growth per pod in bytes between two readings (negative when memory was returned).
fn per_pod(before: u64, after: u64) -> f64 {
    (after as f64 - before as f64) / PODS as f64
}

fn print_rows(names: &[&str], before: &[Memory], after: &[Memory]) {
    println!(
        "{:<28} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "process", "RSS 0", "PSS 0", "RSS 10k", "PSS 10k", "RSS B/pod", "PSS B/pod"
    );
    for ((name, b), a) in names.iter().zip(before).zip(after) {
        println!(
            "{:<28} {:>8.1}Mi {:>8.1}Mi {:>10.1}Mi {:>10.1}Mi {:>12.0} {:>12.0}",
            name,
            mib(b.rss),
            mib(b.pss),
            mib(a.rss),
            mib(a.pss),
            per_pod(b.rss, a.rss),
            per_pod(b.pss, a.pss),
        );
    }
}

async fn run() -> anyhow::Result<()> {
    let cluster = common::BenchCluster::without_nodes().await?;
    let (client, kubeconfig) = (cluster.client.clone(), cluster.kubeconfig.clone());
    println!(
        "memory benchmark (release; kube-sim in the bench process, no nodes: pods stay Pending)"
    );
    println!(
        "{PODS} pods in {SETS} ReplicaSets x {PER_SET}; rkcm: informer-server, worker `default` (every default controller but the GC, qps lifted), worker `garbage-collector`; baseline: a kube-rs reflector of every pod in one process"
    );

    let rkcm = Rkcm::start(&kubeconfig).await?;
    let reflector = Reflector::start(&kubeconfig)?;
    common::namespace(&client, NAMESPACE, false).await?;
    // The serviceaccount controller (default worker) makes the namespace usable.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    until(
        "the namespace's default ServiceAccount",
        Duration::from_secs(60),
        || async { Ok(accounts.get_opt("default").await?.is_some()) },
    )
    .await?;
    until_cached(&rkcm, &reflector, 0, 1.0).await?;
    until_quiet(&rkcm, Duration::from_secs(3)).await?;
    let informer_objects_before = metric_sum(
        &common::http_get(&rkcm.informer.metrics, "/metrics").await,
        "rkcm_informer_cached_objects",
    );
    let rkcm_before = rkcm.memory();
    let reflector_before = memory_of(reflector.child.id().unwrap_or(0));

    let took = replicasets(&client).await?;
    println!(
        "{PODS} pods created by the replicaset controller in {:.2} s",
        took.as_secs_f64()
    );
    until_cached(&rkcm, &reflector, PODS, (PODS + SETS) as f64).await?;
    until_quiet(&rkcm, Duration::from_secs(3)).await?;
    let informer_text = common::http_get(&rkcm.informer.metrics, "/metrics").await;
    let informer_objects_after = metric_sum(&informer_text, "rkcm_informer_cached_objects");
    let informer_cached_bytes = metric_sum(&informer_text, "rkcm_informer_cached_bytes");
    let informer_history_bytes = metric_sum(&informer_text, "rkcm_informer_history_bytes");
    let per_resource = |name: &str| {
        ["v1/pods", "apps/v1/replicasets"]
            .map(|r| metric(&informer_text, name, &format!("{{resource=\"{r}\"}}")))
    };
    let (received, cached_by_resource) = (
        per_resource("rkcm_informer_events_received_total"),
        per_resource("rkcm_informer_cached_objects"),
    );
    let rkcm_after = rkcm.memory();
    let reflector_after = memory_of(reflector.child.id().unwrap_or(0));

    let total = |m: &[Memory; 3]| Memory {
        rss: m.iter().map(|m| m.rss).sum(),
        pss: m.iter().map(|m| m.pss).sum(),
    };
    let (sum_before, sum_after) = (total(&rkcm_before), total(&rkcm_after));
    print_rows(
        &[
            "rkcm informer-server",
            "rkcm worker default",
            "rkcm worker garbage-collector",
            "rkcm, all three",
            "baseline kube-rs reflector",
        ],
        &[
            rkcm_before[0],
            rkcm_before[1],
            rkcm_before[2],
            sum_before,
            reflector_before,
        ],
        &[
            rkcm_after[0],
            rkcm_after[1],
            rkcm_after[2],
            sum_after,
            reflector_after,
        ],
    );
    let rkcm_growth = per_pod(sum_before.pss, sum_after.pss);
    let base_growth = per_pod(reflector_before.pss, reflector_after.pss);
    println!(
        "ratio, PSS growth per pod, rkcm (all three) / reflector: {:.0} B / {:.0} B = {:.2}x",
        rkcm_growth,
        base_growth,
        rkcm_growth / base_growth
    );
    println!(
        "ratio, PSS at {PODS} pods, rkcm (all three) / reflector: {:.1} MiB / {:.1} MiB = {:.2}x",
        mib(sum_after.pss),
        mib(reflector_after.pss),
        sum_after.pss as f64 / reflector_after.pss.max(1) as f64
    );

    let goal = |met: bool| if met { "met" } else { "not met" };
    println!(
        "goal, rkcm PSS growth per pod <= 5 KB (5120 B): {rkcm_growth:.0} B, {}; goal, rkcm PSS at {PODS} pods < 80 MB: {:.1} MB, {}",
        goal(rkcm_growth <= 5120.0),
        sum_after.pss as f64 / 1e6,
        goal(sum_after.pss < 80_000_000),
    );

    let (json_stripped, json_full) = pod_json_sizes(&client).await?;
    let objects = (informer_objects_after - informer_objects_before).max(1.0);
    let informer_per_object = (rkcm_after[0].pss as f64 - rkcm_before[0].pss as f64) / objects;
    println!(
        "informer-server: PSS growth {:.0} B per cached object ({objects:.0} objects more: pods, ReplicaSets, events...) vs a pod's JSON {:.0} B without managedFields ({:.0} B with) = {:.2}x; its own count of cached bytes (rkcm_informer_cached_bytes) {:.0} B per object over all {:.0}",
        informer_per_object,
        json_stripped,
        json_full,
        informer_per_object / json_stripped.max(1.0),
        informer_cached_bytes / informer_objects_after.max(1.0),
        informer_objects_after,
    );
    println!(
        "informer-server: events received / objects cached: pods {:.0} / {:.0}, replicasets {:.0} / {:.0}; superseded and deleted versions kept for resuming subscribers (rkcm_informer_history_bytes, --watch-history 10000 changes per resource) {:.0} B per cached object",
        received[0],
        cached_by_resource[0],
        received[1],
        cached_by_resource[1],
        informer_history_bytes / informer_objects_after.max(1.0),
    );
    println!(
        "goal, informer-server memory per cached object <= 1.5x its JSON: {:.2}x, {}",
        informer_per_object / json_stripped.max(1.0),
        goal(informer_per_object <= 1.5 * json_stripped),
    );
    Ok(())
}

fn main() {
    if let Ok(kubeconfig) = std::env::var(REFLECTOR_ENV) {
        if let Err(error) = reflector_child(kubeconfig) {
            eprintln!("reflector failed: {error:#}");
            std::process::exit(1);
        }
        return;
    }
    common::main(run());
}

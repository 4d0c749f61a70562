//! Converge benchmark (issue #30): 100 Deployments x 50 replicas created at once, time
//! until all 5,000 pods exist (created; no nodes, nothing runs), with rkcm's
//! informer-server and a worker running `deployment,replicaset` as separate release
//! processes on kube-sim (in the bench process), KCM's default concurrency
//! (`--concurrent-deployment-syncs 5`, `--concurrent-replicaset-syncs 5`) and the issue's
//! client limits (`--kube-api-qps 1000 --kube-api-burst 2000`).
//!
//! Baseline, same run, same server: a plain client creating the same 5,000 pods with 16
//! requests in flight (before and after the rkcm run), measured the same way (a watch of
//! the namespace sees the last pod).
//!
//! Printed: the ratio; where the time goes (workqueue waits and work per controller from
//! the worker's `/metrics`, its REST client's request latency by verb and rate-limiter
//! wait, the informer-server's queue-to-stream latency, a wall-clock timeline and the
//! slow-start batches seen by the watch); the API requests of the converge by verb and
//! resource from kube-sim's `kube_sim_requests_by_user_total` (rkcm's processes have
//! their own identities), against the minimum and what upstream's controllers make.
//!
//! `cargo bench -p rkcm --bench converge` (`RKCM_BENCH_WORKER_ARGS` adds flags to the
//! worker's command line, for a comparison run).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::prom::{self, Scrape};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PartialObjectMeta, PostParams};
use kube::runtime::watcher;
use serde_json::json;

const DEPLOYMENTS: usize = 100;
const REPLICAS: usize = 50;
const PODS: usize = DEPLOYMENTS * REPLICAS;
const WORKER_USER: &str = "rkcm-converge-worker";
const INFORMER_USER: &str = "rkcm-converge-informer";
const DEADLINE: Duration = Duration::from_secs(600);

/// When a watch first saw each object (by uid), and its controller's uid.
type Seen = Arc<Mutex<HashMap<String, (Instant, Option<String>)>>>;

/// A metadata watch of one kind in one namespace, recording first sightings.
struct Watch {
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watch {
    /// Starts watching and returns once the initial list is done.
    async fn start<K>(client: &kube::Client, ns: &str) -> anyhow::Result<Watch>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + Send
            + 'static,
        K::DynamicType: Default,
    {
        let api = Api::<PartialObjectMeta<K>>::namespaced(client.clone(), ns);
        let seen: Seen = Arc::default();
        let (ready_tx, mut ready) = tokio::sync::watch::channel(false);
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                let object = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                    Ok(watcher::Event::InitDone) => {
                        let _ = ready_tx.send(true);
                        continue;
                    }
                    _ => continue,
                };
                let Some(uid) = object.metadata.uid.clone() else {
                    continue;
                };
                let owner = object
                    .metadata
                    .owner_references
                    .unwrap_or_default()
                    .into_iter()
                    .find(|o| o.controller == Some(true))
                    .map(|o| o.uid);
                let mut seen = record.lock().unwrap_or_else(|p| p.into_inner());
                seen.entry(uid).or_insert((Instant::now(), owner));
            }
        });
        tokio::time::timeout(Duration::from_secs(60), ready.wait_for(|r| *r))
            .await
            .map_err(|_| anyhow::anyhow!("the bench's watch did not sync"))??;
        Ok(Watch { seen, task })
    }

    fn count(&self) -> usize {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn snapshot(&self) -> Vec<(Instant, Option<String>, String)> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(uid, (at, owner))| (*at, owner.clone(), uid.clone()))
            .collect()
    }

    /// Waits until `n` objects were seen; the instant the watch saw the last of them.
    async fn until(&self, n: usize, start: Instant) -> anyhow::Result<Instant> {
        loop {
            if self.count() >= n {
                let mut times: Vec<Instant> = self.snapshot().into_iter().map(|s| s.0).collect();
                times.sort();
                return Ok(times[n - 1]);
            }
            anyhow::ensure!(
                start.elapsed() < DEADLINE,
                "only {} of {n} objects after {DEADLINE:?}",
                self.count()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn pod_spec(app: &str) -> serde_json::Value {
    json!({"metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}})
}

/// A plain client creating the 5,000 pods, 16 in flight; until the watch saw the last.
async fn baseline(client: &kube::Client, ns: &str) -> anyhow::Result<(Duration, Duration)> {
    common::namespace(client, ns, true).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let watch = Watch::start::<Pod>(client, ns).await?;
    let start = Instant::now();
    common::create_all(PODS, |i| {
        let pods = pods.clone();
        async move {
            let mut pod = pod_spec(&format!("d{}", i / REPLICAS));
            pod["metadata"]["name"] = json!(format!("p-{i}"));
            pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
                .await?;
            Ok(())
        }
    })
    .await?;
    let created = start.elapsed();
    let last = watch.until(PODS, start).await?;
    Ok((created, last - start))
}

/// The informer-server and the worker, each its own release process, each its own identity.
struct Rkcm {
    informer: common::InformerServer,
    worker: tokio::process::Child,
    informer_metrics: String,
    worker_metrics: String,
    /// The worker's log (its warnings: events the recorder dropped).
    worker_log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Rkcm {
    async fn start(sim: &kube_sim::KubeSim) -> anyhow::Result<Rkcm> {
        let dir = tempfile::tempdir()?;
        let kubeconfig = |user: &str| -> anyhow::Result<std::path::PathBuf> {
            let path = dir.path().join(user);
            std::fs::write(&path, sim.kubeconfig_for(user, &["system:masters"])?)?;
            Ok(path)
        };
        let informer =
            common::InformerServer::start(&kubeconfig(INFORMER_USER)?, dir.path()).await?;
        let worker_metrics = common::free_address()?;
        let start = Instant::now();
        let worker_log = dir.path().join("worker.log");
        let log = std::fs::File::create(&worker_log)?;
        let worker = tokio::process::Command::new(env!("CARGO_BIN_EXE_rkcm"))
            .args(["worker", "--controllers", "deployment,replicaset"])
            .arg("--informer")
            .arg(informer.address())
            .arg("--kubeconfig")
            .arg(kubeconfig(WORKER_USER)?)
            .args([
                "--concurrent-deployment-syncs",
                "5",
                "--concurrent-replicaset-syncs",
                "5",
            ])
            .args(["--kube-api-qps", "1000", "--kube-api-burst", "2000"])
            .args(["--health-bind-address", &worker_metrics])
            // More worker flags for a comparison run, e.g. `--informer-compact-stores=`.
            .args(
                std::env::var("RKCM_BENCH_WORKER_ARGS")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .env("RKCM_LOG", "warn")
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        while !prom::ok(&worker_metrics, "/readyz").await {
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(60),
                "the worker did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Rkcm {
            informer_metrics: informer.metrics.clone(),
            informer,
            worker,
            worker_metrics,
            worker_log,
            _dir: dir,
        })
    }

    /// CPU seconds used so far by the worker, the informer-server and the bench process
    /// (kube-sim, the bench's clients and watches).
    fn cpu(&self) -> [f64; 3] {
        [
            cpu_seconds(self.worker.id().unwrap_or(0)),
            cpu_seconds(self.informer.pid()),
            cpu_seconds(std::process::id()),
        ]
    }

    /// Events the worker's recorder dropped (its buffer of 1,000 full), from its log.
    fn dropped_events(&self) -> usize {
        std::fs::read_to_string(&self.worker_log)
            .map(|log| log.lines().filter(|l| l.contains("event dropped")).count())
            .unwrap_or(0)
    }

    async fn scrape(&self) -> anyhow::Result<(Scrape, Scrape)> {
        Ok((
            prom::scrape(&self.worker_metrics).await?,
            prom::scrape(&self.informer_metrics).await?,
        ))
    }
}

/// User plus system CPU time of a process, in seconds (`/proc/PID/stat`, USER_HZ = 100 on
/// Linux); 0 if unreadable.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The fields after the command name: state is field 3, utime 14, stime 15.
    let Some((_, fields)) = stat.rsplit_once(") ") else {
        return 0.0;
    };
    let fields: Vec<&str> = fields.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// Requests per (user, verb, resource, subresource) and how many of them failed.
type Requests = BTreeMap<(String, String, String, String), (u64, u64)>;

fn requests(sim: &kube_sim::KubeSim) -> Requests {
    let mut by_kind = Requests::new();
    for r in sim.requests_by_user() {
        if r.user != WORKER_USER && r.user != INFORMER_USER {
            continue;
        }
        let slot = by_kind
            .entry((r.user, r.verb, r.resource, r.subresource))
            .or_default();
        slot.0 += r.count;
        if r.code >= 400 {
            slot.1 += r.count;
        }
    }
    by_kind
}

fn requests_since(after: &Requests, before: &Requests) -> Requests {
    after
        .iter()
        .map(|(k, (n, failed))| {
            let (n0, f0) = before.get(k).copied().unwrap_or_default();
            (k.clone(), (n - n0, failed - f0))
        })
        .filter(|(_, (n, _))| *n > 0)
        .collect()
}

/// Waits until the controllers' writes stop: every Deployment reports its 50 replicas and
/// the worker's request count held still for a second.
async fn settle(sim: &kube_sim::KubeSim, client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let total = |r: &Requests| r.values().map(|v| v.0).sum::<u64>();
    let mut last = (total(&requests(sim)), Instant::now());
    loop {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(120),
            "the controllers did not settle"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = total(&requests(sim));
        if now != last.0 {
            last = (now, Instant::now());
            continue;
        }
        if last.1.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let done = deployments
            .list(&Default::default())
            .await?
            .items
            .iter()
            .all(|d| d.status.as_ref().and_then(|s| s.replicas) == Some(REPLICAS as i32));
        if done {
            return Ok(());
        }
    }
}

/// One converge: times, the watches' sightings, and what the processes recorded.
struct Converge {
    deployments_created: Duration,
    pods: Vec<(Instant, Option<String>, String)>,
    replicasets: Vec<(Instant, Option<String>, String)>,
    start: Instant,
    last_pod: Duration,
    requests: Requests,
    worker: (Scrape, Scrape),
    informer: (Scrape, Scrape),
    /// CPU seconds of the worker, the informer-server and the bench process during the
    /// converge.
    cpu: [f64; 3],
    dropped_events: usize,
}

async fn converge(
    sim: &kube_sim::KubeSim,
    client: &kube::Client,
    ns: &str,
) -> anyhow::Result<Converge> {
    let rkcm = Rkcm::start(sim).await?;
    common::namespace(client, ns, true).await?;
    let pod_watch = Watch::start::<Pod>(client, ns).await?;
    let rs_watch = Watch::start::<ReplicaSet>(client, ns).await?;
    let requests_before = requests(sim);
    let (worker_before, informer_before) = rkcm.scrape().await?;
    let cpu_before = rkcm.cpu();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    common::create_all(DEPLOYMENTS, |i| {
        let deployments = deployments.clone();
        async move {
            let app = format!("d{i}");
            let deployment: Deployment = serde_json::from_value(json!({
                "metadata": {"name": app},
                "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": app}},
                    "template": pod_spec(&app)}}))?;
            deployments
                .create(&PostParams::default(), &deployment)
                .await?;
            Ok(())
        }
    })
    .await?;
    let deployments_created = start.elapsed();
    let last_pod = pod_watch.until(PODS, start).await? - start;
    settle(sim, client, ns).await?;
    let (worker_after, informer_after) = rkcm.scrape().await?;
    let cpu_after = rkcm.cpu();
    Ok(Converge {
        deployments_created,
        pods: pod_watch.snapshot(),
        replicasets: rs_watch.snapshot(),
        start,
        last_pod,
        requests: requests_since(&requests(sim), &requests_before),
        worker: (worker_before, worker_after),
        informer: (informer_before, informer_after),
        cpu: [0, 1, 2].map(|i| cpu_after[i] - cpu_before[i]),
        dropped_events: rkcm.dropped_events(),
    })
}

#[path = "converge/report.rs"]
mod report;

async fn run() -> anyhow::Result<()> {
    let sim = kube_sim::KubeSim::start(kube_sim::Config::default()).await?;
    let client = sim.client().await?;
    println!("converge benchmark (release; kube-sim in the bench process, no nodes: pods are created, not run)");
    println!(
        "{DEPLOYMENTS} Deployments x {REPLICAS} replicas created at once ({} in flight), until all {PODS} pods exist; \
         rkcm: informer-server + worker (deployment,replicaset; concurrent syncs 5 and 5; --kube-api-qps 1000 --kube-api-burst 2000)",
        common::IN_FLIGHT
    );
    let first = baseline(&client, "baseline-before").await?;
    let run = converge(&sim, &client, "converge").await?;
    let second = baseline(&client, "baseline-after").await?;
    report::print(&run, first, second);
    Ok(())
}

fn main() {
    common::main(run());
}

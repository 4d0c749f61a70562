//! Pieces the benchmarks share: reading a process's memory from /proc, making a
//! namespace on the test cluster, starting rkcm's processes and reading their metrics.

#![allow(dead_code)]

pub(crate) mod prom;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;

/// A `/proc/PID/status` size field (`VmRSS:`, `VmHWM:`) in bytes; 0 if unreadable.
pub(crate) fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
        })
        .unwrap_or(0)
        * 1024
}

/// Creates the namespace `name`, and its `default` ServiceAccount when pods will run in
/// it without rkcm's serviceaccount controller.
pub(crate) async fn namespace(
    client: &kube::Client,
    name: &str,
    with_account: bool,
) -> anyhow::Result<()> {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}}))?,
        )
        .await?;
    if with_account {
        Api::<ServiceAccount>::namespaced(client.clone(), name)
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "default"}}))?,
            )
            .await?;
    }
    Ok(())
}

/// A free loopback address (`127.0.0.1:PORT`) for a child's health or metrics endpoint.
pub(crate) fn free_address() -> anyhow::Result<String> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .to_string())
}

/// A plain HTTP/1.0 GET on a local health or metrics endpoint: the whole answer, head
/// included; empty when unreachable.
pub(crate) async fn http_get(address: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out).await;
    out
}

/// An `rkcm informer-server` (the release binary, its own process, killed when this is
/// dropped) with its client limits lifted, serving on a Unix socket.
pub(crate) struct InformerServer {
    pub child: tokio::process::Child,
    /// Its socket (`informer.sock` in the directory given to [`InformerServer::start`]).
    pub socket: std::path::PathBuf,
    /// Its `/metrics` address (HOST:PORT).
    pub metrics: String,
}

impl InformerServer {
    /// Starts it against `kubeconfig`, its socket in `dir`, and waits up to 30 s for the
    /// socket to accept connections.
    pub(crate) async fn start(
        kubeconfig: &std::path::Path,
        dir: &std::path::Path,
    ) -> anyhow::Result<InformerServer> {
        use std::time::{Duration, Instant};
        let socket = dir.join("informer.sock");
        let metrics = free_address()?;
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rkcm"))
            .arg("informer-server")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--listen")
            .arg(format!("unix://{}", socket.display()))
            .args(["--metrics-bind-address", &metrics, "--kube-api-qps", "0"])
            .env("RKCM_LOG", "warn")
            .kill_on_drop(true)
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::UnixStream::connect(&socket).await.is_err() {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the informer-server did not start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(InformerServer {
            child,
            socket,
            metrics,
        })
    }

    /// The address its clients dial (`unix://PATH`).
    pub(crate) fn address(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Its process id (0 once it has exited).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }
}

/// An `rkcm informer-server` and an `rkcm worker` (release binaries, their own
/// processes) against `kubeconfig`; both are killed when this is dropped.
pub(crate) struct Rkcm {
    pub informer: tokio::process::Child,
    pub worker: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl Rkcm {
    /// Starts both and waits for the informer-server's socket; `qps`/`burst` are the
    /// worker's per-controller client limits. `controllers` may be empty: the worker then
    /// runs only what every pod needs (node-lifecycle, which lifts the startup taint, and
    /// the root-ca publisher), as a baseline's cluster needs them too.
    pub(crate) async fn start(
        kubeconfig: &std::path::Path,
        controllers: &str,
        qps: &str,
        burst: &str,
    ) -> anyhow::Result<Rkcm> {
        let dir = tempfile::tempdir()?;
        let informer = InformerServer::start(kubeconfig, dir.path()).await?;
        let worker = tokio::process::Command::new(env!("CARGO_BIN_EXE_rkcm"))
            .arg("worker")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--informer")
            .arg(informer.address())
            // node-sim leaves the API server's startup taint to the node-lifecycle
            // controller, as kubelet does: without it no pod would ever be scheduled; and
            // a pod's kube-api-access volume waits for the root-ca publisher's ConfigMap.
            .args([
                "--controllers",
                &[controllers, "nodelifecycle,root-ca-cert-publisher"]
                    .iter()
                    .filter(|part| !part.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(","),
            ])
            .args(["--kube-api-qps", qps, "--kube-api-burst", burst])
            .env("RKCM_LOG", "warn")
            .kill_on_drop(true)
            .spawn()?;
        Ok(Rkcm {
            informer: informer.child,
            worker,
            _dir: dir,
        })
    }

    /// Peak RSS (VmHWM) of the informer-server and of the worker, in bytes.
    pub(crate) fn peak_rss(&self) -> (u64, u64) {
        (
            proc_status_bytes(self.informer.id().unwrap_or(0), "VmHWM:"),
            proc_status_bytes(self.worker.id().unwrap_or(0), "VmHWM:"),
        )
    }
}

/// Creations the benchmarks keep in flight at once.
pub(crate) const IN_FLIGHT: usize = 16;

/// Runs `count` creations, [`IN_FLIGHT`] at a time; the first error fails it.
pub(crate) async fn create_all<F, Fut>(count: usize, create: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    use futures::StreamExt;
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..count)
        .map(create)
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    results.into_iter().collect()
}

/// kube-sim (and node-sim, unless started [`BenchCluster::without_nodes`]) in the bench
/// process: the cluster the rkcm processes run against, its kubeconfig on disk, and an
/// admin client.
pub(crate) struct BenchCluster {
    pub sim: kube_sim::KubeSim,
    pub kubeconfig: std::path::PathBuf,
    pub client: kube::Client,
    _nodes: Option<kube_sim::nodesim::NodeSim>,
    dir: tempfile::TempDir,
}

impl BenchCluster {
    /// Starts kube-sim alone: no nodes, no scheduler (pods stay Pending).
    pub(crate) async fn without_nodes() -> anyhow::Result<BenchCluster> {
        let sim = kube_sim::KubeSim::start(kube_sim::Config::default()).await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig)?;
        let client = sim.client().await?;
        Ok(BenchCluster {
            sim,
            kubeconfig,
            client,
            _nodes: None,
            dir,
        })
    }

    /// Starts kube-sim and `nodes` simulated nodes (100 ms start delay, no pod events:
    /// the controllers' cost alone) and waits for the nodes to register.
    pub(crate) async fn start(nodes: usize) -> anyhow::Result<BenchCluster> {
        use std::time::{Duration, Instant};
        let mut cluster = Self::without_nodes().await?;
        cluster._nodes = Some(kube_sim::nodesim::NodeSim::start(
            kube_sim::nodesim::client_from_kubeconfig(cluster.sim.kubeconfig()).await?,
            kube_sim::nodesim::NodeSimConfig {
                nodes,
                start_delay: Duration::from_millis(100),
                events: false,
                ..Default::default()
            },
        ));
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
        let deadline = Instant::now() + Duration::from_secs(60);
        while api.list_metadata(&Default::default()).await?.items.len() < nodes {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the simulated nodes did not register"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(cluster)
    }

    /// A directory for the bench's files, removed with the cluster.
    pub(crate) fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The names of the cluster's nodes.
    pub(crate) async fn node_names(&self) -> anyhow::Result<Vec<String>> {
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        Ok(api
            .list_metadata(&Default::default())
            .await?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect())
    }
}

/// Runs a benchmark's `run` on a multi-threaded runtime; a failure is printed and exits 1.
pub(crate) fn main(run: impl std::future::Future<Output = anyhow::Result<()>>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Err(error) = runtime.block_on(run) {
        eprintln!("benchmark failed: {error:#}");
        std::process::exit(1);
    }
}

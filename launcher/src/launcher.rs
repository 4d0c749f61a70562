//! `rkcm launcher`: what the static pod runs. It checks its configuration (exit 2 on a
//! bad one), starts the informer-server at once (warming every resource its groups
//! need, so a new leader's workers start on a synced cache), serves the secure port,
//! and campaigns for the Lease; while it leads it runs one worker process per group (and
//! shard). Losing the Lease stops the workers at once; SIGTERM stops them gracefully,
//! releases the Lease and stops the informer-server.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rkcm_controller_workers::registry;
use rkcm_controller_workers::worker::UsageError;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

use crate::flags::LauncherArgs;
use crate::groups::{self, Group};
use crate::leader::{self, ElectionConfig, Elector};
use crate::serve;
use crate::supervisor::{ChildSpec, Supervised};

pub(crate) const USER_AGENT: &str = concat!("rkcm-launcher/", env!("CARGO_PKG_VERSION"));
/// KCM's leader healthz adaptor allows this much beyond the lease duration.
const LEADER_HEALTH_TIMEOUT: Duration = Duration::from_secs(20);

type Labels = Vec<(String, String)>;

/// What the secure port reports.
pub(crate) struct State {
    pub leader_elect: bool,
    pub leading: AtomicBool,
    /// When the leader last renewed the Lease.
    pub last_renew: Arc<Mutex<Option<Instant>>>,
    pub lease_duration: Duration,
    pub informer: Arc<Supervised>,
    pub workers: tokio::sync::Mutex<Vec<Arc<Supervised>>>,
    pub registry: Mutex<Registry>,
    pub lease_name: String,
}

async fn get(address: &str, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        let status = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Some((status, body))
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
}

impl State {
    pub(crate) fn health_checks(&self) -> Vec<(String, Result<(), String>)> {
        let mut checks = vec![("ping".to_string(), Ok(()))];
        if self.leader_elect {
            let result = match *self.last_renew.lock().unwrap_or_else(|p| p.into_inner()) {
                Some(renewed)
                    if self.leading.load(Ordering::Relaxed)
                        && renewed.elapsed() > self.lease_duration + LEADER_HEALTH_TIMEOUT =>
                {
                    Err(format!(
                        "failed election to renew leadership on lease {}",
                        self.lease_name
                    ))
                }
                _ => Ok(()),
            };
            checks.push(("leaderElection".to_string(), result));
        }
        checks
    }

    pub(crate) async fn ready_checks(&self) -> Vec<(String, Result<(), String>)> {
        let mut children = vec![self.informer.clone()];
        if self.leading.load(Ordering::Relaxed) {
            children.extend(self.workers.lock().await.iter().cloned());
        }
        let mut checks = Vec::new();
        for child in children {
            let result = if !child.pid_running() {
                Err("not running".to_string())
            } else {
                let path = if child.spec.name == "informer-server" {
                    "/healthz"
                } else {
                    "/readyz"
                };
                match child.http_address() {
                    Some(address) => match get(&address, path).await {
                        Some((200, _)) => Ok(()),
                        Some((code, body)) => {
                            Err(format!("{path} answered {code}: {}", body.trim()))
                        }
                        None => Err(format!("{path} does not answer")),
                    },
                    None => Ok(()),
                }
            };
            checks.push((child.spec.name.clone(), result));
        }
        checks
    }

    pub(crate) async fn metrics_text(&self) -> String {
        let mut own = String::new();
        {
            let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
            let _ = prometheus_client::encoding::text::encode(&mut own, &registry);
        }
        let mut sources = vec![(None, own)];
        let mut children = vec![self.informer.clone()];
        children.extend(self.workers.lock().await.iter().cloned());
        let mut restarts = String::from("# HELP rkcm_child_restarts Times the launcher restarted a child process.\n# TYPE rkcm_child_restarts counter\n");
        for child in &children {
            restarts.push_str(&format!(
                "rkcm_child_restarts_total{{rkcm_child=\"{}\"}} {}\n",
                child.spec.name,
                child.restarts.load(Ordering::Relaxed)
            ));
        }
        sources.push((None, restarts));
        for child in children {
            if let Some(address) = child.http_address() {
                if let Some((200, body)) = get(&address, "/metrics").await {
                    sources.push((Some(child.spec.name.clone()), body));
                }
            }
        }
        serve::merge_metrics(&sources, "rkcm_child")
    }
}

/// The children's kubeconfig: the launcher's, with --master as the server when given.
fn children_kubeconfig(args: &LauncherArgs, runtime_dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    let Some(master) = &args.master else {
        return Ok(args.kubeconfig.clone());
    };
    let mut kubeconfig = match &args.kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path)
            .map_err(|e| UsageError(format!("--kubeconfig {}: {e}", path.display())))?,
        None => kube::config::Kubeconfig::read().unwrap_or_default(),
    };
    if kubeconfig.clusters.is_empty() {
        return Err(UsageError(format!(
            "--master {master}: no cluster in the kubeconfig to point at it"
        ))
        .into());
    }
    for cluster in &mut kubeconfig.clusters {
        if let Some(cluster) = cluster.cluster.as_mut() {
            cluster.server = Some(master.clone());
        }
    }
    let path = runtime_dir.join("kubeconfig");
    let yaml = serde_yaml::to_string(&kubeconfig).context("writing the children's kubeconfig")?;
    write_private(&path, yaml.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(path))
}

/// Writes a file only its owner can read (it holds credentials).
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(data)
}

/// Runs the launcher; `controller_flags` are the controller flags given to it, passed on
/// to every worker.
pub(crate) async fn run(args: LauncherArgs, controller_flags: Vec<String>) -> anyhow::Result<()> {
    let (election, groups) = check_args(&args)?;
    // The kubeconfig must load (an unreachable server is retried later, a bad file is not).
    rkcm_client::kube_config(args.kubeconfig.as_deref())
        .await
        .map_err(|e| UsageError(format!("{e:#}")))?;
    std::fs::create_dir_all(&args.runtime_dir)
        .with_context(|| format!("creating --runtime-dir {}", args.runtime_dir.display()))?;
    // Children get absolute paths (a unix:// address must be absolute).
    let runtime_dir = std::fs::canonicalize(&args.runtime_dir)
        .with_context(|| format!("resolving --runtime-dir {}", args.runtime_dir.display()))?;
    let kubeconfig = children_kubeconfig(&args, &runtime_dir)?;
    let client = {
        let mut config = rkcm_client::kube_config(kubeconfig.as_deref()).await?;
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(USER_AGENT),
        ));
        kube::Client::try_from(config).context("building the API client")?
    };

    // The secure port is bound before any child starts, so no child's port can be it.
    let secure = bind_secure(&args).await?;

    let children = Children {
        args: &args,
        informer_address: format!("unix://{}", runtime_dir.join("informer.sock").display()),
        kubeconfig_args: kubeconfig
            .iter()
            .flat_map(|path| ["--kubeconfig".to_string(), path.display().to_string()])
            .collect(),
        envs: vec![(
            "RKCM_LOG".to_string(),
            std::env::var("RKCM_LOG").unwrap_or_else(|_| args.log_filter().to_string()),
        )],
    };
    let informer = Supervised::start(children.informer_spec(&warm_resources(&groups)));
    let worker_specs = children.worker_specs(&groups, &controller_flags);

    let mut elector = Elector::new(client, election.clone());
    let leadership = Leadership::new(&args, &election, elector.renewed.clone(), informer.clone());
    if let Some(secure) = secure {
        info!(address = %secure.listener.local_addr()?, "serving securely");
        tokio::spawn(serve::serve(
            secure.listener,
            secure.tls,
            leadership.state.clone(),
            Arc::new(secure.auth),
        ));
    }

    leadership
        .run(&args, &election, &mut elector, &groups, &worker_specs)
        .await?;
    info!("stopping the informer-server");
    informer.stop(args.shutdown_grace_period).await;
    info!("launcher stopped");
    Ok(())
}

/// Checks the flags that need no API server (an error is a usage error: exit 2) and
/// returns the election's configuration and the worker groups to run.
fn check_args(args: &LauncherArgs) -> anyhow::Result<(ElectionConfig, Vec<Group>)> {
    let election = ElectionConfig {
        namespace: args.leader_elect_resource_namespace.clone(),
        name: args.leader_elect_resource_name.clone(),
        identity: leader::identity(),
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    };
    if args.leader_elect {
        election.validate().map_err(UsageError)?;
    }
    let global = registry::select(&args.controllers).map_err(|e| UsageError(e.to_string()))?;
    let split = registry::runnable(&global, &args.controller_options);
    for (controller, reason) in &split.skipped {
        info!(controller, "{reason}");
    }
    let global = split.run;
    args.controller_options.validate(&global)?;
    for warning in args.controller_options.generic.gates().warnings() {
        warn!("{warning}");
    }
    let groups: Vec<Group> = match &args.process_groups {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| UsageError(format!("--process-groups {}: {e}", path.display())))?;
            groups::parse(&path.display().to_string(), &text, &global)
                .map_err(|e| UsageError(e.to_string()))?
        }
        None => groups::defaults(&global),
    };
    for flag in args.not_acted_on() {
        warn!(flag, "accepted for compatibility with kube-controller-manager, but not acted on by this version");
    }
    Ok((election, groups))
}

/// The bound secure port, with what serving it needs.
struct Secure {
    listener: tokio::net::TcpListener,
    tls: rustls::ServerConfig,
    auth: serve::Auth,
}

/// Binds the secure port (`None` with `--secure-port 0`).
async fn bind_secure(args: &LauncherArgs) -> anyhow::Result<Option<Secure>> {
    if args.secure_port == 0 {
        return Ok(None);
    }
    let tls = serve::tls_config(
        args.tls_cert_file.as_deref(),
        args.tls_private_key_file.as_deref(),
    )
    .map_err(|e| UsageError(format!("{e:#}")))?;
    let address = serve::bind_addr(args.bind_address, args.secure_port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding the secure port {address}"))?;
    let auth = serve::Auth {
        authentication: delegated_client(args.authentication_kubeconfig.as_deref()).await?,
        authorization: delegated_client(args.authorization_kubeconfig.as_deref()).await?,
        always_allow: args.authorization_always_allow_paths.clone(),
    };
    Ok(Some(Secure {
        listener,
        tls,
        auth,
    }))
}

/// The resources the informer-server warms: every one a selected controller reads,
/// sorted, once each.
fn warm_resources(groups: &[Group]) -> Vec<&'static str> {
    let mut warm: Vec<&'static str> = groups
        .iter()
        .flat_map(|g| g.selected.iter())
        .filter_map(|c| registry::lookup(c).map(|d| &d.implementation))
        .flat_map(|implementation| implementation.resources.iter().copied())
        .collect();
    warm.sort();
    warm.dedup();
    warm
}

/// What every child's command line shares.
struct Children<'a> {
    args: &'a LauncherArgs,
    /// The informer-server's `unix://` address.
    informer_address: String,
    /// `--kubeconfig PATH`, or nothing (in-cluster).
    kubeconfig_args: Vec<String>,
    envs: Vec<(String, String)>,
}

impl Children<'_> {
    /// The informer-server, warming `warm`.
    fn informer_spec(&self, warm: &[&str]) -> ChildSpec {
        let args = self.args;
        let mut informer_args = vec![
            "informer-server".to_string(),
            "--listen".into(),
            self.informer_address.clone(),
            "--kube-api-qps".into(),
            args.kube_api_qps.to_string(),
            "--kube-api-burst".into(),
            args.kube_api_burst.to_string(),
        ];
        informer_args.extend(self.kubeconfig_args.iter().cloned());
        if !warm.is_empty() {
            informer_args.push("--warm".into());
            informer_args.push(warm.join(","));
        }
        ChildSpec {
            name: "informer-server".into(),
            args: informer_args,
            http_flag: Some("--metrics-bind-address"),
            envs: self.envs.clone(),
        }
    }

    /// One worker per group, or per shard of a sharded group.
    fn worker_specs(&self, groups: &[Group], controller_flags: &[String]) -> Vec<ChildSpec> {
        let mut specs = Vec::new();
        for group in groups {
            for shard in 0..group.shards {
                specs.push(self.worker_spec(group, shard, controller_flags));
            }
        }
        specs
    }

    fn worker_spec(&self, group: &Group, shard: u32, controller_flags: &[String]) -> ChildSpec {
        let args = self.args;
        let name = if group.shards > 1 {
            format!("worker-{}-{shard}", group.name)
        } else {
            format!("worker-{}", group.name)
        };
        let mut worker_args = vec![
            "worker".to_string(),
            "--group".into(),
            group.name.clone(),
            "--controllers".into(),
            group.selected.join(","),
            "--informer".into(),
            self.informer_address.clone(),
            "--kube-api-qps".into(),
            args.kube_api_qps.to_string(),
            "--kube-api-burst".into(),
            args.kube_api_burst.to_string(),
            format!(
                "--use-service-account-credentials={}",
                args.use_service_account_credentials
            ),
            "--min-resync-period".into(),
            format!("{}s", args.min_resync_period.as_secs()),
            "--shutdown-timeout".into(),
            format!("{}s", args.shutdown_grace_period.as_secs()),
        ];
        worker_args.extend(controller_flags.iter().cloned());
        if group.shards > 1 {
            worker_args.push("--shard".into());
            worker_args.push(format!("{shard}/{}", group.shards));
        }
        worker_args.extend(self.kubeconfig_args.iter().cloned());
        ChildSpec {
            name,
            args: worker_args,
            http_flag: Some("--health-bind-address"),
            envs: self.envs.clone(),
        }
    }
}

/// What the leader loop updates: the secure port's state and the
/// `leader_election_master_status` gauge.
struct Leadership {
    state: Arc<State>,
    master_status: Family<Labels, Gauge>,
    lease_label: Labels,
}

impl Leadership {
    fn new(
        args: &LauncherArgs,
        election: &ElectionConfig,
        last_renew: Arc<Mutex<Option<Instant>>>,
        informer: Arc<Supervised>,
    ) -> Self {
        let mut registry = Registry::default();
        let master_status = Family::<Labels, Gauge>::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
            master_status.clone(),
        );
        let lease_label = vec![("name".to_string(), args.leader_elect_resource_name.clone())];
        master_status.get_or_create(&lease_label).set(0);
        let state = Arc::new(State {
            leader_elect: args.leader_elect,
            leading: AtomicBool::new(false),
            last_renew,
            lease_duration: args.leader_elect_lease_duration,
            informer,
            workers: tokio::sync::Mutex::new(Vec::new()),
            registry: Mutex::new(registry),
            lease_name: format!("{}/{}", election.namespace, election.name),
        });
        Leadership {
            state,
            master_status,
            lease_label,
        }
    }

    fn set_leading(&self, leading: bool) {
        self.state.leading.store(leading, Ordering::Relaxed);
        self.master_status
            .get_or_create(&self.lease_label)
            .set(i64::from(leading));
    }

    /// Campaigns for the Lease and runs the workers while leading, until SIGTERM or
    /// SIGINT (then the workers stop gracefully and the Lease is released); losing the
    /// Lease stops the workers at once and campaigns again.
    async fn run(
        &self,
        args: &LauncherArgs,
        election: &ElectionConfig,
        elector: &mut Elector,
        groups: &[Group],
        worker_specs: &[ChildSpec],
    ) -> anyhow::Result<()> {
        let mut terminate =
            signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
        let mut interrupt =
            signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
        info!(identity = %election.identity, groups = ?groups.iter().map(|g| &g.name).collect::<Vec<_>>(), "launcher started");
        loop {
            if args.leader_elect {
                info!(
                    "attempting to acquire leader lease {}/{}...",
                    election.namespace, election.name
                );
                tokio::select! {
                    _ = elector.acquire() => {}
                    _ = terminate.recv() => break,
                    _ = interrupt.recv() => break,
                }
            }
            let acquired = Instant::now();
            self.set_leading(true);
            let workers: Vec<Arc<Supervised>> = worker_specs
                .iter()
                .cloned()
                .map(Supervised::start)
                .collect();
            *self.state.workers.lock().await = workers.clone();
            tokio::spawn(report_first_reconcile(workers.clone(), acquired));
            let lost = tokio::select! {
                _ = hold(elector, args.leader_elect) => true,
                _ = terminate.recv() => false,
                _ = interrupt.recv() => false,
            };
            self.set_leading(false);
            let grace = if lost {
                Duration::ZERO
            } else {
                args.shutdown_grace_period
            };
            if lost {
                warn!("leaderelection lost: stopping the workers at once");
            } else {
                info!("stopping the workers");
            }
            futures::future::join_all(workers.iter().map(|w| w.stop(grace))).await;
            self.state.workers.lock().await.clear();
            if !lost {
                if args.leader_elect {
                    elector.release().await;
                }
                break;
            }
        }
        Ok(())
    }
}

async fn hold(elector: &mut Elector, leader_elect: bool) {
    if leader_elect {
        elector.hold().await
    } else {
        std::future::pending().await
    }
}

async fn delegated_client(path: Option<&Path>) -> anyhow::Result<Option<kube::Client>> {
    let Some(path) = path else { return Ok(None) };
    let mut config = rkcm_client::kube_config(Some(path))
        .await
        .map_err(|e| UsageError(format!("{e:#}")))?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(Some(kube::Client::try_from(config)?))
}

/// Logs how long after the lease was acquired the first reconcile finished, read from
/// the workers' workqueue metrics.
async fn report_first_reconcile(workers: Vec<Arc<Supervised>>, acquired: Instant) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if acquired.elapsed() > Duration::from_secs(3600) {
            return;
        }
        for worker in &workers {
            let Some(address) = worker.http_address() else {
                continue;
            };
            let Some((200, metrics)) = get(&address, "/metrics").await else {
                continue;
            };
            let reconciled = metrics.lines().any(|line| {
                line.starts_with("workqueue_work_duration_seconds_count")
                    && line
                        .rsplit(' ')
                        .next()
                        .and_then(|v| v.parse::<f64>().ok())
                        .unwrap_or(0.0)
                        > 0.0
            });
            if reconciled {
                info!(
                    worker = %worker.spec.name,
                    elapsed_ms = acquired.elapsed().as_millis() as u64,
                    "first reconcile after acquiring the lease"
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LauncherArgs,
    }

    fn args(flags: &[&str]) -> LauncherArgs {
        match Cli::try_parse_from(std::iter::once("launcher").chain(flags.iter().copied())) {
            Ok(cli) => cli.args,
            Err(error) => panic!("{error}"),
        }
    }

    fn group(name: &str, selected: &[&'static str], shards: u32) -> Group {
        Group {
            name: name.into(),
            controllers: selected.iter().map(|c| c.to_string()).collect(),
            selected: selected.to_vec(),
            shards,
        }
    }

    fn children(args: &LauncherArgs) -> Children<'_> {
        Children {
            args,
            informer_address: "unix:///run/rkcm/informer.sock".into(),
            kubeconfig_args: vec!["--kubeconfig".into(), "/etc/kubeconfig".into()],
            envs: vec![("RKCM_LOG".into(), "info".into())],
        }
    }

    #[test]
    fn a_worker_per_group_and_per_shard_with_the_launchers_flags() {
        let args = args(&["--kube-api-qps=30", "--kube-api-burst=40"]);
        let groups = [
            group("default", &["deployment", "replicaset"], 1),
            group("garbage-collector", &["garbagecollector"], 2),
        ];
        let flags = vec!["--concurrent-deployment-syncs=7".to_string()];
        let specs = children(&args).worker_specs(&groups, &flags);
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "worker-default",
                "worker-garbage-collector-0",
                "worker-garbage-collector-1"
            ]
        );
        let first = specs[0].args.join(" ");
        assert!(
            first.starts_with(
                "worker --group default --controllers deployment,replicaset \
                 --informer unix:///run/rkcm/informer.sock --kube-api-qps 30 --kube-api-burst 40 \
                 --use-service-account-credentials=false"
            ),
            "{first}"
        );
        assert!(
            first.ends_with("--concurrent-deployment-syncs=7 --kubeconfig /etc/kubeconfig"),
            "{first}"
        );
        assert!(!first.contains("--shard"), "{first}");
        let shard = specs[2].args.join(" ");
        assert!(
            shard.ends_with("--shard 1/2 --kubeconfig /etc/kubeconfig"),
            "{shard}"
        );
        assert!(specs
            .iter()
            .all(|s| s.http_flag == Some("--health-bind-address") && s.envs[0].1 == "info"));
    }

    #[test]
    fn the_informer_server_warms_what_the_groups_read() {
        let args = args(&[]);
        let children = children(&args);
        let spec = children.informer_spec(&["apps/v1/replicasets", "v1/pods"]);
        assert_eq!(spec.name, "informer-server");
        assert_eq!(spec.http_flag, Some("--metrics-bind-address"));
        assert_eq!(
            spec.args.join(" "),
            "informer-server --listen unix:///run/rkcm/informer.sock --kube-api-qps 20 \
             --kube-api-burst 30 --kubeconfig /etc/kubeconfig --warm apps/v1/replicasets,v1/pods"
        );
        let bare = children.informer_spec(&[]);
        assert!(!bare.args.iter().any(|a| a == "--warm"));
    }

    #[test]
    fn warmed_resources_are_sorted_once_each() {
        let groups = [
            group("a", &["replicaset", "deployment"], 1),
            group("b", &["deployment"], 1),
        ];
        let warm = warm_resources(&groups);
        let mut sorted = warm.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(warm, sorted);
        assert!(!warm.is_empty());
    }
}

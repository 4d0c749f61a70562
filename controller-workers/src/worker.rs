//! `rkcm worker`: one controller-worker process. It connects to the informer-server,
//! builds the controllers its `--controllers` list selects (each takes the informers it
//! needs and registers its handlers), starts one stream per resource, waits for the
//! first snapshots, and runs the controllers' workers until SIGTERM, when it stops
//! taking new keys and lets in-flight syncs finish.
//!
//! It serves `/healthz` (the process is up), `/readyz` (every store has its first
//! snapshot) and `/metrics` on `--health-bind-address` (a free localhost port by
//! default, logged at start).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rkcm_client::informer::{self as client, ClientTls};
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::client::{ClientFactory, USER_AGENT_PREFIX};
use crate::controller::{shut_down, ControllerContext};
use crate::factory::Informers;
use crate::flags::parse_go_duration;
use crate::metrics::Metrics;
use crate::registry::{self, ControllerOptions};

/// Flags of `rkcm worker` (KCM's names where KCM has the flag).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The group this process runs (shown by `ps`, in logs, and in the informer-server's
    /// subscriber names).
    #[arg(long, default_value = "default")]
    pub group: String,
    /// Controllers to run, as KCM's --controllers: `*` (every default-enabled controller
    /// rkcm implements), `name` (canonical `deployment-controller` or alias
    /// `deployment`), `-name` to exclude.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// The informer-server: unix:///path/to/informer.sock, or tcp://HOST:PORT with
    /// --informer-cert, --informer-key and --informer-ca (mutual TLS).
    #[arg(long, default_value = "unix:///var/run/rkcm/informer.sock")]
    pub informer: String,
    /// Client certificate (PEM) for a tcp:// informer-server.
    #[arg(long)]
    pub informer_cert: Option<PathBuf>,
    /// Key of the client certificate (PEM).
    #[arg(long)]
    pub informer_key: Option<PathBuf>,
    /// CA (PEM) the informer-server's certificate must chain to.
    #[arg(long)]
    pub informer_ca: Option<PathBuf>,
    /// Path to a kubeconfig (for writes to the API server); without it, the in-cluster
    /// config or $KUBECONFIG.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Use individual service account credentials for each controller (KCM's flag): each
    /// controller authenticates as its ServiceAccount in kube-system, with a token from the
    /// TokenRequest API asked for with the kubeconfig's identity.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub use_service_account_credentials: bool,
    /// Queries per second to the API server, per controller client (as KCM).
    #[arg(long, default_value_t = 20.0)]
    pub kube_api_qps: f32,
    /// Burst of queries to the API server, per controller client.
    #[arg(long, default_value_t = 30)]
    pub kube_api_burst: u32,
    /// Stores are resynced every period to 2x period (Go duration: 12h, 30m, 90s).
    #[arg(long, default_value = "12h", value_parser = parse_go_duration)]
    pub min_resync_period: Duration,
    /// Every controller's own flags (concurrency, periods), KCM's names and defaults.
    #[command(flatten)]
    pub options: ControllerOptions,
    /// Where to serve /healthz, /readyz and /metrics (HOST:PORT; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub health_bind_address: SocketAddr,
    /// Handle only the objects of one namespace-hash shard, INDEX/COUNT (e.g. 0/2), for a
    /// group split over several processes: the informer-server's shard filter for the
    /// streams a controller splits by namespace, its whole streams for the rest (Nodes, and
    /// every stream of a controller that picks its own keys, such as the garbage collector).
    #[arg(long, value_parser = parse_shard)]
    pub shard: Option<(u32, u32)>,
    /// Stream only the fields the controllers declare they read (the union of their
    /// declarations per resource, plus what each kind needs to decode); `false` streams
    /// whole objects, for debugging a controller that reads a field it did not declare.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub informer_projection: bool,
    /// Resources whose local stores keep each object as the JSON the stream delivered and
    /// decode it when it is read (`v1/pods` form, comma-separated; empty for none): a typed
    /// Pod costs over 10 KB whatever it holds, its projected JSON about 1 KB.
    #[arg(long, value_delimiter = ',', default_value = "v1/pods")]
    pub informer_compact_stores: Vec<String>,
    /// How long SIGTERM waits for in-flight syncs (Go duration).
    #[arg(long, default_value = "30s", value_parser = parse_go_duration)]
    pub shutdown_timeout: Duration,
}

fn parse_shard(text: &str) -> Result<(u32, u32), String> {
    let invalid =
        || format!("invalid shard {text:?}: expected INDEX/COUNT with INDEX < COUNT, e.g. 0/2");
    let (index, count) = text.split_once('/').ok_or_else(invalid)?;
    let index: u32 = index.parse().map_err(|_| invalid())?;
    let count: u32 = count.parse().map_err(|_| invalid())?;
    if count == 0 || index >= count {
        return Err(invalid());
    }
    Ok((index, count))
}

/// A bad command line: the binary exits 2, as for unknown flags.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn read(path: &Option<PathBuf>, flag: &str) -> anyhow::Result<Option<Vec<u8>>> {
    path.as_ref()
        .map(|path| {
            std::fs::read(path).with_context(|| format!("reading {flag} {}", path.display()))
        })
        .transpose()
}

/// The controllers `--controllers` selects that can run with these options (the others are
/// logged with the reason), with the options checked for them.
fn selected_controllers(args: &Args) -> anyhow::Result<Vec<&'static str>> {
    let selected = registry::select(&args.controllers).map_err(|e| UsageError(e.to_string()))?;
    if selected.is_empty() {
        return Err(UsageError(format!(
            "--controllers {:?} selects no controller this version implements",
            args.controllers.join(",")
        ))
        .into());
    }
    let split = registry::runnable(&selected, &args.options);
    for (controller, reason) in &split.skipped {
        info!(controller, "{reason}");
    }
    let selected = split.run;
    args.options.validate(&selected)?;
    for warning in args.options.generic.gates().warnings() {
        warn!("{warning}");
    }
    if args.shard.is_some() {
        if let Some(refusal) = registry::sharding_refusal(&selected) {
            return Err(UsageError(format!("--shard: {refusal}")).into());
        }
    }
    Ok(selected)
}

/// The client certificate for a TCP informer-server (mutual TLS): all three files or none.
fn informer_tls(args: &Args) -> anyhow::Result<Option<ClientTls>> {
    match (
        read(&args.informer_cert, "--informer-cert")?,
        read(&args.informer_key, "--informer-key")?,
        read(&args.informer_ca, "--informer-ca")?,
    ) {
        (Some(cert), Some(key), Some(ca)) => Ok(Some(ClientTls {
            cert,
            key,
            ca,
            domain: None,
        })),
        (None, None, None) => Ok(None),
        _ => Err(UsageError(
            "--informer-cert, --informer-key and --informer-ca go together".into(),
        )
        .into()),
    }
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let selected = selected_controllers(&args)?;
    let informer_client = client::connect(&args.informer, informer_tls(&args)?)
        .map_err(|e| UsageError(format!("--informer: {e}")))?;
    let metrics = Metrics::new();
    let clients = ClientFactory::new(
        args.kubeconfig.as_deref(),
        args.kube_api_qps,
        args.kube_api_burst,
        args.use_service_account_credentials
            .then_some(registry::service_account_of as fn(&str) -> Option<&'static str>),
    )
    .await?
    .with_metrics(metrics.rest_client.clone());
    let informers = Arc::new(
        Informers::new(
            informer_client,
            format!("{USER_AGENT_PREFIX} group={}", args.group),
            args.min_resync_period,
        )
        .with_shard(args.shard, &registry::whole_resources(&selected))
        .with_compact(&args.informer_compact_stores)
        .with_fields(if args.informer_projection {
            registry::projections(&selected)
        } else {
            Default::default()
        }),
    );
    let context = ControllerContext {
        informers: informers.clone(),
        clients,
        metrics: metrics.clone(),
        ready_checks: Default::default(),
    };
    let mut runnables = Vec::new();
    for name in &selected {
        if *name == "garbage-collector-controller"
            && !args.options.garbage_collector.enable_garbage_collector
        {
            info!("garbage collector disabled (--enable-garbage-collector=false)");
            continue;
        }
        let Some(implementation) = registry::lookup(name).map(|d| &d.implementation) else {
            return Err(UsageError(format!(
                "{name} is not a kube-controller-manager controller"
            ))
            .into());
        };
        let built = (implementation.build)(&context, &args.options)
            .map_err(|error| error.context(format!("starting {name}")))?;
        runnables.extend(built);
    }

    let listener = TcpListener::bind(args.health_bind_address)
        .await
        .with_context(|| format!("binding --health-bind-address {}", args.health_bind_address))?;
    let health = listener.local_addr()?;
    tokio::spawn(serve_health(
        listener,
        informers.clone(),
        context.ready_checks.clone(),
        context.clients.clone(),
        metrics.clone(),
    ));
    info!(group = %args.group, controllers = ?selected, health = %health, informer = %args.informer, "worker starting");

    informers.start();
    // The snapshots and bursts the streams decode leave freed pages in the allocator.
    tokio::spawn(rkcm_client::memory::trim_after_bursts(
        rkcm_client::memory::decoded,
    ));
    let mut terminate = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = signal(tokio::signal::unix::SignalKind::interrupt())?;
    tokio::select! {
        _ = informers.wait_for_sync() => {}
        _ = terminate.recv() => return Ok(()),
        _ = interrupt.recv() => return Ok(()),
    }
    info!(group = %args.group, resources = ?informers.resources(), "worker ready: stores synced");
    for resource in informers.resources() {
        if let Some(fields) = informers.fields_of(&resource).filter(|f| !f.is_empty()) {
            info!(%resource, ?fields, "stream projected: the store holds these fields");
        }
    }

    let queues: Vec<_> = runnables.iter().map(|r| r.queue.clone()).collect();
    // A controller whose credentials are not there yet starts once they are; the others
    // do not wait for it.
    let running: Vec<_> = runnables
        .into_iter()
        .map(|runnable| {
            let clients = context.clients.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                clients.ready(runnable.name).await;
                runnable.run(metrics).await
            })
        })
        .collect();
    tokio::select! {
        _ = terminate.recv() => info!("SIGTERM: finishing in-flight work"),
        _ = interrupt.recv() => info!("SIGINT: finishing in-flight work"),
    }
    futures::future::join_all(
        queues
            .iter()
            .map(|queue| shut_down(queue, args.shutdown_timeout)),
    )
    .await;
    for handle in running {
        if tokio::time::timeout(Duration::from_secs(1), handle)
            .await
            .is_err()
        {
            warn!("a controller did not stop in time");
        }
    }
    info!(group = %args.group, "worker stopped");
    Ok(())
}

fn signal(kind: tokio::signal::unix::SignalKind) -> anyhow::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind).context("installing a signal handler")
}

async fn serve_health(
    listener: TcpListener,
    informers: Arc<Informers>,
    checks: Arc<std::sync::Mutex<Vec<crate::controller::ReadyCheck>>>,
    clients: ClientFactory,
    metrics: Metrics,
) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "health listener accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let informers = informers.clone();
        let metrics = metrics.clone();
        let checks = checks.clone();
        let clients = clients.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let informers = informers.clone();
                let metrics = metrics.clone();
                let checks = checks.clone();
                let clients = clients.clone();
                async move {
                    let mut failing: Vec<String> = checks
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .iter()
                        .filter(|(_, ready)| !ready())
                        .map(|(name, _)| name.clone())
                        .collect();
                    failing.extend(clients.not_ready());
                    Ok::<_, Infallible>(respond(&request, &informers, &failing, &metrics))
                }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn respond(
    request: &Request<Incoming>,
    informers: &Informers,
    failing: &[String],
    metrics: &Metrics,
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match request.uri().path() {
        "/healthz" | "/livez" => (200, "text/plain; charset=utf-8", "ok".to_string()),
        "/readyz" => {
            let mut unsynced = informers.unsynced();
            unsynced.extend(failing.iter().cloned());
            if unsynced.is_empty() {
                (200, "text/plain; charset=utf-8", "ok".to_string())
            } else {
                (
                    500,
                    "text/plain; charset=utf-8",
                    format!("not ready: {}\n", unsynced.join(", ")),
                )
            }
        }
        "/metrics" => (
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        _ => (
            404,
            "text/plain; charset=utf-8",
            "404 page not found\n".to_string(),
        ),
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

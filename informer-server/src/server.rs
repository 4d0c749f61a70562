//! `rkcm informer-server`: flags, the API client, and the gRPC server on a Unix socket
//! (mode 0600, the default: the cache holds Secrets) or on TCP with mutual TLS only,
//! with health, reflection (v1 and v1alpha, for grpcurl) and the metrics endpoint.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use futures::TryStreamExt;
use rkcm_proto::server::informer_server::InformerServer;
use rkcm_proto::v1::GroupVersionResource;
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tracing::{info, warn};

use crate::informers::Informers;
use crate::reflector::ReflectorContext;
use crate::service::InformerService;
use rkcm_client::rate_limit::TokenBucket;

pub const USER_AGENT: &str = concat!("rkcm-informer-server/", env!("CARGO_PKG_VERSION"));

/// Flags of `rkcm informer-server`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Path to a kubeconfig; without it, the in-cluster config or $KUBECONFIG.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Where to serve: unix:///path/to/socket (created with mode 0600) or tcp://HOST:PORT
    /// (only with --tls-cert, --tls-key and --client-ca: mutual TLS).
    #[arg(long, default_value = "unix:///var/run/rkcm/informer.sock")]
    pub listen: String,
    /// Serving certificate (PEM) for a tcp:// listen.
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// Key of the serving certificate (PEM).
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// CA (PEM) that client certificates must chain to.
    #[arg(long)]
    pub client_ca: Option<PathBuf>,
    /// Where to serve Prometheus metrics (HOST:PORT; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:10261")]
    pub metrics_bind_address: String,
    /// Queries per second to the API server.
    #[arg(long, default_value_t = 20.0)]
    pub kube_api_qps: f32,
    /// Burst of queries to the API server.
    #[arg(long, default_value_t = 30)]
    pub kube_api_burst: u32,
    /// Resources to start at once, with no subscriber (comma-separated; `pods`,
    /// `deployments.apps` or `apps/v1/deployments`).
    #[arg(long, value_delimiter = ',')]
    pub warm: Vec<String>,
    /// Changes kept per resource for subscribers that resume after a disconnect.
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,
    /// Seconds a resource with no subscriber stays cached before its reflector stops.
    #[arg(long, default_value_t = 300)]
    pub idle_resource_timeout: u64,
    /// Page size of the initial lists.
    #[arg(long, default_value_t = 500)]
    pub list_page_size: u32,
}

pub enum Listen {
    Unix(PathBuf),
    Tcp(String),
}

pub fn parse_listen(listen: &str) -> anyhow::Result<Listen> {
    if let Some(path) = listen.strip_prefix("unix://") {
        if path.is_empty() || !path.starts_with('/') {
            bail!("--listen {listen:?}: a unix socket needs an absolute path, as unix:///var/run/rkcm/informer.sock");
        }
        Ok(Listen::Unix(PathBuf::from(path)))
    } else if let Some(addr) = listen.strip_prefix("tcp://") {
        Ok(Listen::Tcp(addr.to_string()))
    } else {
        bail!("--listen {listen:?}: expected unix:///PATH or tcp://HOST:PORT")
    }
}

/// `pods`, `deployments.apps`, `v1/pods`, `apps/v1/deployments`.
pub fn parse_resource(spec: &str) -> anyhow::Result<GroupVersionResource> {
    let parts: Vec<&str> = spec.split('/').collect();
    let gvr = match parts.as_slice() {
        [resource] => {
            let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
            GroupVersionResource {
                group: group.into(),
                version: String::new(),
                resource: resource.into(),
            }
        }
        [version, resource] => GroupVersionResource {
            group: String::new(),
            version: (*version).into(),
            resource: (*resource).into(),
        },
        [group, version, resource] => GroupVersionResource {
            group: (*group).into(),
            version: (*version).into(),
            resource: (*resource).into(),
        },
        _ => bail!("resource {spec:?}: expected RESOURCE[.GROUP] or [GROUP/]VERSION/RESOURCE"),
    };
    if gvr.resource.is_empty() {
        bail!("resource {spec:?}: the resource name is empty");
    }
    Ok(gvr)
}

/// A kube client for `kubeconfig` (or the inferred config), sending `user_agent`.
pub async fn kube_client(
    kubeconfig: Option<&Path>,
    user_agent: &str,
) -> anyhow::Result<kube::Client> {
    let mut config = rkcm_client::kube_config(kubeconfig).await?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(user_agent)?,
    ));
    kube::Client::try_from(config).context("building the API client")
}

/// Binds a Unix socket that is never reachable with wider permissions than 0600: bound
/// under a temporary name, restricted, then renamed into place.
pub fn bind_unix(path: &Path) -> anyhow::Result<UnixListener> {
    if let Some(parent) = path.parent() {
        if !parent.exists() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!(
                "{} is in use by a running server; stop it or pick another --listen",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("removing the stale socket {}", path.display()))?;
    }
    let staging = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&staging);
    let listener =
        UnixListener::bind(&staging).with_context(|| format!("binding {}", staging.display()))?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&staging, path)
        .with_context(|| format!("moving the socket to {}", path.display()))?;
    Ok(listener)
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    info!("shutting down");
}

/// Runs the informer-server until SIGTERM or SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let listen = parse_listen(&args.listen)?;
    if let Listen::Tcp(addr) = &listen {
        if args.tls_cert.is_none() || args.tls_key.is_none() || args.client_ca.is_none() {
            bail!(
                "refusing to listen on tcp://{addr} without mutual TLS: the informer-server caches Secrets; \
                 give --tls-cert, --tls-key and --client-ca, or listen on a unix:// socket"
            );
        }
    }
    let warm = args
        .warm
        .iter()
        .filter(|w| !w.is_empty())
        .map(|w| parse_resource(w))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let metrics_addr =
        crate::metrics::bind_addr(&args.metrics_bind_address).map_err(anyhow::Error::msg)?;
    let client = kube_client(args.kubeconfig.as_deref(), USER_AGENT).await?;

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<InformerServer<InformerService>>()
        .await;
    let informers = Arc::new(Informers::new(
        ReflectorContext {
            client,
            limiter: Arc::new(TokenBucket::new(args.kube_api_qps, args.kube_api_burst)),
            health,
            page_size: args.list_page_size.max(1),
        },
        args.watch_history,
        Duration::from_secs(args.idle_resource_timeout),
    ));
    for gvr in warm {
        let informers = informers.clone();
        tokio::spawn(async move {
            // Discovery may be down at start: keep trying, as the reflectors do.
            let mut delay = Duration::from_millis(800);
            loop {
                match informers.start(&gvr, true).await {
                    Ok(_) => break,
                    Err(error) => {
                        warn!(resource = %gvr.path(), %error, "cannot warm resource yet");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(30));
                    }
                }
            }
        });
    }
    {
        let informers = informers.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            loop {
                tick.tick().await;
                informers.reap();
            }
        });
    }
    tokio::spawn(crate::trim::run(informers.clone()));

    let metrics_listener = TcpListener::bind(metrics_addr)
        .await
        .with_context(|| format!("binding --metrics-bind-address {metrics_addr}"))?;
    let metrics_local = metrics_listener.local_addr()?;
    let registry = Arc::new(crate::metrics::registry(informers.clone()));
    tokio::spawn(crate::metrics::serve(metrics_listener, registry));

    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(rkcm_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(rkcm_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let service = InformerServer::new(InformerService {
        informers,
        bookmark_interval: Duration::from_secs(1),
    })
    .max_encoding_message_size(usize::MAX);

    let mut builder = Server::builder().http2_keepalive_interval(Some(Duration::from_secs(30)));
    if let Listen::Tcp(_) = &listen {
        let read = |p: &Option<PathBuf>, what: &str| -> anyhow::Result<Vec<u8>> {
            let p = p.as_ref().with_context(|| format!("{what} is required"))?;
            std::fs::read(p).with_context(|| format!("reading {what} {}", p.display()))
        };
        let tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(
                read(&args.tls_cert, "--tls-cert")?,
                read(&args.tls_key, "--tls-key")?,
            ))
            .client_ca_root(Certificate::from_pem(read(&args.client_ca, "--client-ca")?));
        builder = builder.tls_config(tls).context("configuring TLS")?;
    }
    let router = builder
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(service);
    match listen {
        Listen::Unix(path) => {
            let listener = bind_unix(&path)?;
            info!(socket = %path.display(), metrics = %metrics_local, "informer-server ready");
            let result = router
                .serve_with_incoming_shutdown(
                    UnixListenerStream::new(listener)
                        .map_ok(crate::unix_authority::AuthorityShim::new),
                    shutdown_signal(),
                )
                .await;
            let _ = std::fs::remove_file(&path);
            result?;
        }
        Listen::Tcp(addr) => {
            let listener = TcpListener::bind(&addr)
                .await
                .with_context(|| format!("binding tcp://{addr}"))?;
            info!(address = %listener.local_addr()?, metrics = %metrics_local, "informer-server ready (mutual TLS)");
            router
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown_signal())
                .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert!(
            matches!(parse_listen("unix:///run/x.sock"), Ok(Listen::Unix(p)) if p == Path::new("/run/x.sock"))
        );
        assert!(
            matches!(parse_listen("tcp://0.0.0.0:9000"), Ok(Listen::Tcp(a)) if a == "0.0.0.0:9000")
        );
        assert!(parse_listen("unix://relative.sock").is_err());
        assert!(parse_listen("/run/x.sock").is_err());
    }

    #[test]
    fn resource_specs() {
        let g = parse_resource("deployments.apps").unwrap();
        assert_eq!(
            (g.group.as_str(), g.version.as_str(), g.resource.as_str()),
            ("apps", "", "deployments")
        );
        let g = parse_resource("apps/v1/deployments").unwrap();
        assert_eq!(g.path(), "apps/v1/deployments");
        assert_eq!(parse_resource("v1/pods").unwrap().path(), "v1/pods");
        assert!(parse_resource("a/b/c/d").is_err());
    }

    #[tokio::test]
    async fn the_socket_is_private_and_its_directory_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/rkcm/informer.sock");
        let listener = bind_unix(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(bind_unix(&path).unwrap_err().to_string().contains("in use"));
        drop(listener);
        // A stale socket from a dead server is replaced.
        bind_unix(&path).unwrap();
    }
}

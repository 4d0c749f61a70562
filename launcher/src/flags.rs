//! `rkcm launcher`'s flags: kube-controller-manager's names and defaults for what rkcm
//! does, plus rkcm's own (`--process-groups`, `--runtime-dir`). KCM flags that belong to
//! controllers or features rkcm does not have yet are accepted, so kubeadm's manifest
//! starts unchanged, and each one given is named in a startup warning. A flag KCM does
//! not have is an error (exit 2), as clap reports it.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::ArgAction;
use rkcm_controller_workers::flags::parse_go_duration;
use rkcm_controller_workers::registry::ControllerOptions;

fn duration(text: &str) -> Result<Duration, String> {
    parse_go_duration(text)
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LauncherArgs {
    /// Path to a kubeconfig file with authorization and master location information.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The address of the Kubernetes API server (overrides any value in kubeconfig).
    #[arg(long)]
    pub master: Option<String>,
    /// A list of controllers to enable. '*' enables all on-by-default controllers, 'foo'
    /// enables the controller named 'foo', '-foo' disables the controller named 'foo'.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// Every controller's own flags (concurrency, periods), KCM's names and defaults; the
    /// ones given are passed on to the workers.
    #[command(flatten)]
    pub controller_options: ControllerOptions,
    /// QPS to use while talking with kubernetes apiserver.
    #[arg(long, default_value_t = 20.0)]
    pub kube_api_qps: f32,
    /// Burst to use while talking with kubernetes apiserver.
    #[arg(long, default_value_t = 30)]
    pub kube_api_burst: u32,
    /// The resync period in reflectors will be random between MinResyncPeriod and
    /// 2*MinResyncPeriod.
    #[arg(long, default_value = "12h", value_parser = duration)]
    pub min_resync_period: Duration,
    /// Start a leader election client and gain leadership before executing the main loop.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// The duration that non-leader candidates will wait after observing a leadership
    /// renewal until attempting to acquire leadership.
    #[arg(long, default_value = "15s", value_parser = duration)]
    pub leader_elect_lease_duration: Duration,
    /// The interval between attempts by the acting master to renew a leadership slot
    /// before it stops leading.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub leader_elect_renew_deadline: Duration,
    /// The duration the clients should wait between attempting acquisition and renewal
    /// of a leadership.
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub leader_elect_retry_period: Duration,
    /// The type of resource object that is used for locking during leader election
    /// (only `leases`, KCM's default).
    #[arg(long, default_value = "leases", value_parser = ["leases"])]
    pub leader_elect_resource_lock: String,
    /// The name of resource object that is used for locking during leader election.
    #[arg(long, default_value = "kube-controller-manager")]
    pub leader_elect_resource_name: String,
    /// The namespace of resource object that is used for locking during leader election.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
    /// The IP address on which to listen for the --secure-port port.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// The port on which to serve HTTPS with authentication and authorization. If 0,
    /// don't serve HTTPS at all.
    #[arg(long, default_value_t = 10257)]
    pub secure_port: u16,
    /// File containing the default x509 Certificate for HTTPS (a self-signed one is made
    /// in memory without it).
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to
    /// create tokenreviews.authentication.k8s.io.
    #[arg(long)]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to
    /// create subjectaccessreviews.authorization.k8s.io.
    #[arg(long)]
    pub authorization_kubeconfig: Option<PathBuf>,
    /// A list of HTTP paths to skip during authorization.
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    pub authorization_always_allow_paths: Vec<String>,
    /// If true, use individual service account credentials for each controller.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub use_service_account_credentials: bool,
    /// Number for the log level verbosity (0-10; 4 and above log debug detail).
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,

    /// rkcm: the controller groups, one worker process each (YAML; see README).
    #[arg(long)]
    pub process_groups: Option<PathBuf>,
    /// rkcm: where the informer-server's socket and per-instance files live.
    #[arg(long, default_value = "/var/run/rkcm")]
    pub runtime_dir: PathBuf,
    /// rkcm: how long SIGTERM waits for children to finish in-flight work.
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub shutdown_grace_period: Duration,

    // KCM flags accepted for compatibility (kubeadm passes several); rkcm does not act on
    // them yet, and names each one given in a warning at start.
    /// Not acted on yet: client-certificate authentication of the secure port.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Not acted on yet: front-proxy authentication of the secure port.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Not acted on yet: profiling endpoints.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub profiling: Option<bool>,
}

impl LauncherArgs {
    /// The KCM flags given that this version accepts but does not act on.
    pub(crate) fn not_acted_on(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        macro_rules! check {
            ($($field:ident => $flag:literal),* $(,)?) => {
                $( if self.$field.is_some() { given.push($flag); } )*
            };
        }
        check!(
            client_ca_file => "--client-ca-file",
            requestheader_client_ca_file => "--requestheader-client-ca-file",
            profiling => "--profiling",
        );
        given
    }

    /// The controller flags given on the command line (`--concurrent-gc-syncs=50`, ...),
    /// as the workers take them: their defaults are the same, so only these are passed on.
    pub(crate) fn given_controller_flags(matches: &clap::ArgMatches) -> Vec<String> {
        use clap::Args as _;
        ControllerOptions::augment_args(clap::Command::new("options"))
            .get_arguments()
            .filter(|arg| {
                matches.value_source(arg.get_id().as_str())
                    == Some(clap::parser::ValueSource::CommandLine)
            })
            .flat_map(|arg| {
                let long = arg.get_long().unwrap_or_default().to_string();
                matches
                    .get_raw(arg.get_id().as_str())
                    .into_iter()
                    .flatten()
                    .map(move |value| format!("--{long}={}", value.to_string_lossy()))
            })
            .collect()
    }

    /// `RKCM_LOG` for this `-v`: info below 4, debug from 4, trace from 6 (klog's
    /// verbosity levels, roughly).
    pub(crate) fn log_filter(&self) -> &'static str {
        match self.verbosity {
            0..=3 => "info",
            4 | 5 => "debug",
            _ => "trace",
        }
    }
}

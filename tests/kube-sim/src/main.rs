//! `kube-sim`: run the development cluster as a process.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "kube-sim",
    version,
    about = "rkcm's development cluster: an in-memory Kubernetes API server"
)]
struct Args {
    /// Address to serve on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where to write the admin kubeconfig.
    #[arg(long = "kubeconfig-out")]
    kubeconfig_out: PathBuf,
    /// Writes kept for watches; an older resourceVersion gets 410 Gone.
    #[arg(long, default_value_t = 10_000)]
    history: usize,
    /// Serve plain HTTP with a bearer token instead of HTTPS (debugging only).
    #[arg(long = "plain-http")]
    plain_http: bool,
    /// CIDR that Service cluster IPs are allocated from.
    #[arg(long = "service-cluster-ip-range", default_value = "10.96.0.0/12")]
    service_cluster_ip_range: String,
    /// Port range that NodePort and LoadBalancer Services' node ports are allocated from
    /// (`LOW-HIGH`, `LOW+OFFSET` or one port).
    #[arg(long = "service-node-port-range", default_value = "30000-32767")]
    service_node_port_range: String,
    /// The address the `default/kubernetes` Endpoints advertise (default: the listen
    /// address, or 172.18.0.2 when that is loopback or unspecified).
    #[arg(long = "advertise-address")]
    advertise_address: Option<std::net::IpAddr>,
    /// Write the cluster's keys into DIR as kubeadm's /etc/kubernetes/pki holds them:
    /// ca.crt and ca.key (the cluster CA), sa.key and sa.pub (the ServiceAccount token
    /// signing key pair), for kube-controller-manager's --root-ca-file,
    /// --service-account-private-key-file and --cluster-signing-{cert,key}-file.
    #[arg(long = "pki-dir")]
    pki_dir: Option<PathBuf>,
    /// The ServiceAccount token key pair, a PKCS#8 PEM private key (RSA as kubeadm's
    /// sa.key, or ECDSA P-256); default: a fresh P-256 key.
    #[arg(long = "service-account-signing-key-file")]
    service_account_signing_key_file: Option<PathBuf>,
    /// kube-apiserver's `--runtime-config`: kube-sim honours
    /// `networking.k8s.io/v1alpha1=true` (ServiceCIDR, IPAddress) and
    /// `internal.apiserver.k8s.io/v1alpha1=true` (StorageVersion) and
    /// `resource.k8s.io/v1alpha2=true` (dynamic resource allocation) and
    /// `admissionregistration.k8s.io/v1beta1=true` (ValidatingAdmissionPolicy and its
    /// bindings); any other key is refused.
    #[arg(long = "runtime-config", default_value = "")]
    runtime_config: String,
    /// kube-apiserver's `--feature-gates`: kube-sim honours `MultiCIDRServiceAllocator`,
    /// `StorageVersionAPI`, `APIServerIdentity`, `DynamicResourceAllocation` and
    /// `ValidatingAdmissionPolicy`
    /// (`Name=true|false`, comma-separated);
    /// any other gate is refused.
    #[arg(long = "feature-gates", default_value = "")]
    feature_gates: String,
    /// Also simulate N nodes (kubelets and a scheduler) against this cluster, as node-sim does.
    #[arg(long, default_value_t = 0)]
    nodes: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KUBE_SIM_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let service_account_signing_key = match &args.service_account_signing_key_file {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read --service-account-signing-key-file {}: {e}",
                path.display()
            )
        })?),
        None => None,
    };
    let sim = kube_sim::KubeSim::start(kube_sim::Config {
        listen: args.listen,
        history: args.history,
        plain_http: args.plain_http,
        service_cluster_ip_range: args.service_cluster_ip_range,
        service_node_port_range: args.service_node_port_range,
        advertise_address: args.advertise_address,
        pki_dir: args.pki_dir,
        service_account_signing_key,
        runtime_config: args.runtime_config,
        feature_gates: args.feature_gates,
    })
    .await?;
    sim.write_kubeconfig(&args.kubeconfig_out).map_err(|e| {
        anyhow::anyhow!(
            "cannot write kubeconfig {}: {e}",
            args.kubeconfig_out.display()
        )
    })?;
    let _nodes = if args.nodes > 0 {
        let client = kube_sim::nodesim::client_from_kubeconfig(sim.kubeconfig()).await?;
        Some(kube_sim::nodesim::NodeSim::start(
            client,
            kube_sim::nodesim::NodeSimConfig {
                nodes: args.nodes as usize,
                ..Default::default()
            },
        ))
    } else {
        None
    };
    println!("kube-sim ready on {}", sim.url());
    tokio::signal::ctrl_c().await?;
    Ok(())
}

//! `node-sim`: simulated nodes, kubelets and scheduler for any cluster, as a process.
//!
//! `node-sim --kubeconfig PATH --nodes N [--name-prefix sim-node-]`

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kube_sim::nodesim::{self, NodeSim, NodeSimConfig};

#[derive(Parser, Debug)]
#[command(
    name = "node-sim",
    version,
    about = "Simulated nodes, kubelets and a scheduler for a Kubernetes API server (kube-sim or real)"
)]
struct Args {
    /// The kubeconfig of the cluster to simulate nodes for.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// How many nodes to simulate.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    nodes: u32,
    /// Node names are `PREFIX0` … `PREFIX<N-1>`; give each node-sim sharing a cluster its own.
    #[arg(long = "name-prefix", default_value = "sim-node-")]
    name_prefix: String,
    /// Only run the pods of this namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// Leave binding to another scheduler (e.g. a real kube-scheduler).
    #[arg(long = "no-scheduler")]
    no_scheduler: bool,
    /// From a pod's admission to its containers running (e.g. 500ms, 2s).
    #[arg(long = "start-delay", default_value = "500ms", value_parser = parse_duration)]
    start_delay: Duration,
    /// Lease renewal interval (kubelet: 10s).
    #[arg(long = "lease-renew-interval", default_value = "10s", value_parser = parse_duration)]
    lease_renew_interval: Duration,
    /// Post no pod events (Scheduled, Pulled, Created, Started, Killing).
    #[arg(long = "no-events")]
    no_events: bool,
    /// How often node status is computed (kubelet's --node-status-update-frequency).
    #[arg(long = "node-status-update-frequency", default_value = "10s", value_parser = parse_duration)]
    node_status_update_frequency: Duration,
    /// Register the nodes without a podCIDR: pods wait for the node-ipam controller
    /// (`--allocate-node-cidrs`) to set `spec.podCIDR` and take their IPs from it.
    #[arg(long = "no-pod-cidr")]
    no_pod_cidr: bool,
    /// Do not run csi-sim, the simulated CSI drivers (`csi.sim.rkcm.io`,
    /// `noattach.csi.sim.rkcm.io`: their CSIDriver and CSINode objects, provisioner,
    /// resizer and attacher).
    #[arg(long = "no-csi")]
    no_csi: bool,
    /// Do not report the NetworkUnavailable node condition (leave it to a cloud
    /// provider's route controller).
    #[arg(long = "no-network-condition")]
    no_network_condition: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    nodesim::quantity::duration(s)
        .ok_or_else(|| format!("{s:?} is not a duration (e.g. 500ms, 10s, 1m)"))
}

fn valid_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 240
        && p.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && p.starts_with(|c: char| c.is_ascii_alphanumeric())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NODE_SIM_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if !valid_prefix(&args.name_prefix) {
        anyhow::bail!(
            "--name-prefix {:?}: node names must be lowercase DNS names (a-z, 0-9, '-', '.'), starting with a letter or digit",
            args.name_prefix
        );
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let yaml = std::fs::read_to_string(&args.kubeconfig)
        .with_context(|| format!("reading --kubeconfig {}", args.kubeconfig.display()))?;
    let client = nodesim::client_from_kubeconfig(&yaml)
        .await
        .with_context(|| format!("using --kubeconfig {}", args.kubeconfig.display()))?;
    client.apiserver_version().await.with_context(|| {
        format!(
            "cannot reach the API server of {}",
            args.kubeconfig.display()
        )
    })?;
    let sim = NodeSim::start(
        client,
        NodeSimConfig {
            nodes: args.nodes as usize,
            name_prefix: args.name_prefix.clone(),
            namespace: args.namespace,
            scheduler: !args.no_scheduler,
            start_delay: args.start_delay,
            lease_renew_interval: args.lease_renew_interval,
            node_status_update_frequency: args.node_status_update_frequency,
            events: !args.no_events,
            assign_pod_cidrs: !args.no_pod_cidr,
            csi: !args.no_csi,
            network_condition: !args.no_network_condition,
            ..Default::default()
        },
    );
    println!(
        "node-sim running {} nodes ({}0 … {}{})",
        args.nodes,
        args.name_prefix,
        args.name_prefix,
        args.nodes - 1
    );
    tokio::signal::ctrl_c().await?;
    sim.stop();
    Ok(())
}

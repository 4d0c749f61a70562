//! Simulated nodes for a test (node-sim on kube-sim; on a real cluster only when it has
//! no schedulable node of its own) and the kube-sim-only test cluster.

use std::path::PathBuf;
use std::time::Duration;

use rkcm_conformance::TestCluster;

/// Simulated nodes of a test: node-sim's handle (it derefs to it) and, on a real cluster,
/// the Nodes it registered, deleted with kubectl when the test ends (after node-sim has
/// stopped: fields drop in order).
pub(crate) struct SimNodes {
    sim: kube_sim::nodesim::NodeSim,
    _cleanup: Option<DeleteNodes>,
}

impl SimNodes {
    /// Stops node-sim (and deletes the Nodes it registered on a real cluster).
    pub(crate) fn stop(self) {
        self.sim.stop();
    }
}

impl std::ops::Deref for SimNodes {
    type Target = kube_sim::nodesim::NodeSim;
    fn deref(&self) -> &kube_sim::nodesim::NodeSim {
        &self.sim
    }
}

/// Deletes a node-sim's Nodes (by its pool label) from a real cluster when dropped.
struct DeleteNodes {
    kubeconfig: PathBuf,
    selector: String,
}

impl Drop for DeleteNodes {
    fn drop(&mut self) {
        rkcm_conformance::delete_nodes_now(&self.kubeconfig, &self.selector);
    }
}

/// Simulated nodes for a test cluster: always on kube-sim; on a real cluster only when it
/// has no schedulable Ready node of its own (a bare control plane), then under a name
/// prefix of the test's own and deleted when the test ends. `None`: the cluster's own
/// nodes run the pods.
pub(crate) async fn simulated_nodes(cluster: &TestCluster, nodes: usize) -> Option<SimNodes> {
    simulated_nodes_with(
        cluster,
        kube_sim::nodesim::NodeSimConfig {
            nodes,
            start_delay: Duration::from_millis(100),
            ..Default::default()
        },
    )
    .await
}

/// [`simulated_nodes`] with a node-sim configuration of the test's own.
pub(crate) async fn simulated_nodes_with(
    cluster: &TestCluster,
    mut config: kube_sim::nodesim::NodeSimConfig,
) -> Option<SimNodes> {
    let yaml = std::fs::read_to_string(&cluster.kubeconfig).ok()?;
    let client = kube_sim::nodesim::client_from_kubeconfig(&yaml)
        .await
        .ok()?;
    let mut cleanup = None;
    if cluster.sim.is_none() {
        if has_schedulable_nodes(&cluster.client).await {
            return None;
        }
        config.name_prefix = format!("rkcm-e2e-{}-", kube_sim::api::random_suffix(5));
        // A real cluster's kube-scheduler binds the pods (it holds its Lease); node-sim's
        // scheduler stands in only where none runs.
        config.scheduler = !scheduler_leads(&cluster.client).await;
        println!(
            "the cluster has no schedulable nodes: simulating {} as {}N (scheduler: {})",
            config.nodes,
            config.name_prefix,
            if config.scheduler {
                "node-sim's"
            } else {
                "the cluster's"
            }
        );
        cleanup = Some(DeleteNodes {
            kubeconfig: cluster.kubeconfig.clone(),
            selector: format!(
                "{}={}",
                kube_sim::nodesim::nodes::POOL_LABEL,
                kube_sim::nodesim::nodes::pool(&config.name_prefix)
            ),
        });
    }
    Some(SimNodes {
        sim: kube_sim::nodesim::NodeSim::start(client, config),
        _cleanup: cleanup,
    })
}

/// Whether some Node is Ready, schedulable and without a NoSchedule or NoExecute taint.
async fn has_schedulable_nodes(client: &kube::Client) -> bool {
    use k8s_openapi::api::core::v1::Node;
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let Ok(list) = nodes.list(&Default::default()).await else {
        return false;
    };
    list.items.iter().any(|node| {
        let spec = node.spec.clone().unwrap_or_default();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let repels = spec
            .taints
            .iter()
            .flatten()
            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute");
        ready && spec.unschedulable != Some(true) && !repels
    })
}

/// Whether kube-scheduler holds its leader Lease (renewed within its lease duration).
async fn scheduler_leads(client: &kube::Client) -> bool {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "kube-system");
    let Ok(Some(lease)) = leases.get_opt("kube-scheduler").await else {
        return false;
    };
    let Some(spec) = lease.spec else {
        return false;
    };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    spec.renew_time.is_some_and(|renewed| {
        k8s_openapi::jiff::Timestamp::now()
            .duration_since(renewed.0)
            .as_secs()
            <= duration
    })
}

/// `count` simulated nodes, started 100 ms apart, renewing their Lease and posting their
/// status every second: for the suites that watch nodes go silent (node-lifecycle's short
/// grace periods).
pub(crate) fn fast_heartbeat_nodes(count: usize) -> kube_sim::nodesim::NodeSimConfig {
    kube_sim::nodesim::NodeSimConfig {
        nodes: count,
        start_delay: Duration::from_millis(100),
        lease_renew_interval: Duration::from_secs(1),
        node_status_update_frequency: Duration::from_secs(1),
        ..Default::default()
    }
}

/// A test cluster on kube-sim; on a real cluster `None`, after printing `skipped: {why}`
/// (for the tests that need node-sim's or kube-sim's knobs).
pub(crate) async fn sim_cluster(why: &str) -> Option<TestCluster> {
    let cluster = TestCluster::start().await.unwrap();
    if cluster.sim.is_none() {
        println!("skipped: {why}");
        return None;
    }
    Some(cluster)
}

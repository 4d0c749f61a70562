//! The boundary between the cloud controllers and a cloud: the `CloudProvider` trait with
//! its optional capabilities (load balancers, routes, instances), the errors upstream's
//! `k8s.io/cloud-provider` interface signals with sentinels, and the construction of the
//! provider named by `--cloud-provider` / `--cloud-config` with KCM 1.29's outcomes.
//!
//! rkcm has no built-in providers. A real provider plugs in by implementing
//! [`CloudProvider`] (and the capabilities it has) in a crate and adding one entry to
//! [`PROVIDERS`] with the name `--cloud-provider` selects it by. The one provider shipped
//! is [`sim`] (`--cloud-provider=sim`, an rkcm extension KCM does not know), which the
//! development cluster and the tests use to exercise the three cloud controllers.

pub mod sim;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};
use tracing::info;

use crate::generic_options::{GenericOptions, EXTERNAL_CLOUD_PROVIDER};

/// What a cloud call can fail with; the first three are upstream's sentinel errors (with
/// their messages), which the controllers treat specially.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CloudError {
    /// The provider does not implement this call.
    #[error("unimplemented")]
    NotImplemented,
    /// Something else (another controller) does this work: service-lb skips it silently.
    #[error("implemented by alternate to cloud provider")]
    ImplementedElsewhere,
    /// The instance does not exist.
    #[error("instance not found")]
    InstanceNotFound,
    /// Any other failure, with the provider's message.
    #[error("{0}")]
    Other(String),
}

pub type CloudResult<T> = Result<T, CloudError>;

/// How long the controllers wait for one cloud call before giving up on it and retrying
/// later, so that a provider that hangs holds up only the key it was called for.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs one cloud call with [`CALL_TIMEOUT`].
pub async fn call<T>(future: impl Future<Output = CloudResult<T>>) -> CloudResult<T> {
    call_within(CALL_TIMEOUT, future).await
}

/// Runs one cloud call, failing it with [`CloudError::Other`] after `limit`.
pub async fn call_within<T>(
    limit: Duration,
    future: impl Future<Output = CloudResult<T>>,
) -> CloudResult<T> {
    match tokio::time::timeout(limit, future).await {
        Ok(result) => result,
        Err(_) => Err(CloudError::Other(format!(
            "the cloud provider did not answer within {}s",
            limit.as_secs()
        ))),
    }
}

/// A cloud provider: its name and the capabilities it has (`None`: not supported).
pub trait CloudProvider: Send + Sync {
    fn name(&self) -> &str;
    /// Whether the cluster's instances carry a cluster ID (KCM refuses to start without
    /// one unless `--allow-untagged-cloud`).
    fn has_cluster_id(&self) -> bool;
    fn load_balancer(&self) -> Option<&dyn LoadBalancer>;
    fn routes(&self) -> Option<&dyn Routes>;
    fn instances_v2(&self) -> Option<&dyn InstancesV2>;
}

/// Upstream's `LoadBalancer` interface: the cloud load balancer of a `type: LoadBalancer`
/// Service, pointed at a set of nodes.
pub trait LoadBalancer: Send + Sync {
    /// The balancer's status and whether it exists.
    fn get_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
    ) -> BoxFuture<'a, CloudResult<Option<LoadBalancerStatus>>>;
    /// The name the provider gives the balancer of `service`.
    fn get_load_balancer_name(&self, cluster: &str, service: &Service) -> String;
    /// Creates or updates the balancer; returns its status (ingress points).
    fn ensure_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
        nodes: &'a [Arc<Node>],
    ) -> BoxFuture<'a, CloudResult<LoadBalancerStatus>>;
    /// Points an existing balancer at `nodes`.
    fn update_load_balancer<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
        nodes: &'a [Arc<Node>],
    ) -> BoxFuture<'a, CloudResult<()>>;
    /// Deletes the balancer if it exists.
    fn ensure_load_balancer_deleted<'a>(
        &'a self,
        cluster: &'a str,
        service: &'a Service,
    ) -> BoxFuture<'a, CloudResult<()>>;
}

/// A route of the cloud's network: traffic to `destination_cidr` goes to `target_node`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Route {
    pub name: String,
    pub target_node: String,
    pub target_node_addresses: Vec<NodeAddress>,
    pub destination_cidr: String,
    /// A route whose target no longer exists; the route controller deletes it.
    pub blackhole: bool,
    /// Whether the provider tracks `target_node_addresses` (a change then recreates it).
    pub enable_node_addresses: bool,
}

/// Upstream's `Routes` interface.
pub trait Routes: Send + Sync {
    fn list_routes<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, CloudResult<Vec<Route>>>;
    /// Creates `route`; `name_hint` is the node's UID.
    fn create_route<'a>(
        &'a self,
        cluster: &'a str,
        name_hint: &'a str,
        route: &'a Route,
    ) -> BoxFuture<'a, CloudResult<()>>;
    fn delete_route<'a>(
        &'a self,
        cluster: &'a str,
        route: &'a Route,
    ) -> BoxFuture<'a, CloudResult<()>>;
}

/// What the cloud knows of a node's instance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceMetadata {
    pub provider_id: String,
    pub instance_type: String,
    pub node_addresses: Vec<NodeAddress>,
    pub zone: String,
    pub region: String,
}

/// Upstream's `InstancesV2` interface (the legacy `Instances` is left out).
pub trait InstancesV2: Send + Sync {
    fn instance_exists<'a>(&'a self, node: &'a Node) -> BoxFuture<'a, CloudResult<bool>>;
    fn instance_shutdown<'a>(&'a self, node: &'a Node) -> BoxFuture<'a, CloudResult<bool>>;
    fn instance_metadata<'a>(
        &'a self,
        node: &'a Node,
    ) -> BoxFuture<'a, CloudResult<InstanceMetadata>>;
}

/// Builds a provider from the contents of `--cloud-config` (`None` when not given).
pub type Factory = fn(config: Option<&str>) -> anyhow::Result<Arc<dyn CloudProvider>>;

/// The providers `--cloud-provider` can name (rkcm has no built-in cloud; `sim` is its
/// simulated one).
pub const PROVIDERS: &[(&str, Factory)] = &[(sim::NAME, sim::factory)];

/// KCM's in-tree providers, which rkcm does not have.
const LEGACY_IN_TREE: &[&str] = &["aws", "azure", "gce", "vsphere", "openstack"];

/// One provider per process, built once: the route table of `sim` lives in it, and every
/// controller of the process sees the same cloud.
static PROVIDER: OnceLock<Option<Arc<dyn CloudProvider>>> = OnceLock::new();

/// The provider `--cloud-provider` names, built once per process (KCM's
/// `createCloudProvider`): `None` for none (`""`) and for `external`; an error, which stops
/// the process with exit 1, for a name rkcm does not have, an unreadable `--cloud-config`
/// or a cloud without a cluster ID (unless `--allow-untagged-cloud`).
pub fn provider(options: &GenericOptions) -> anyhow::Result<Option<Arc<dyn CloudProvider>>> {
    if let Some(built) = PROVIDER.get() {
        return Ok(built.clone());
    }
    let built = init(options)?;
    Ok(PROVIDER.get_or_init(|| built).clone())
}

fn init(options: &GenericOptions) -> anyhow::Result<Option<Arc<dyn CloudProvider>>> {
    let name = options.cloud_provider.as_str();
    if name == EXTERNAL_CLOUD_PROVIDER {
        return Ok(None);
    }
    if name.is_empty() {
        info!("No cloud provider specified.");
        return Ok(None);
    }
    let cloud = init_named(name, &options.cloud_config)
        .map_err(|error| anyhow::anyhow!("cloud provider could not be initialized: {error}"))?;
    if !cloud.has_cluster_id() {
        if options.allow_untagged_cloud {
            info!("Warning: detected a cluster without a ClusterID.  A ClusterID will be required in the future.  Please tag your cluster to avoid any future issues");
        } else {
            anyhow::bail!("no ClusterID Found.  A ClusterID is required for the cloud provider to function properly.  This check can be bypassed by setting the allow-untagged-cloud option");
        }
    }
    Ok(Some(cloud))
}

/// `InitCloudProvider`: the named factory with the configuration file's contents.
fn init_named(name: &str, config_path: &str) -> Result<Arc<dyn CloudProvider>, String> {
    let Some((_, factory)) = PROVIDERS.iter().find(|(known, _)| *known == name) else {
        if LEGACY_IN_TREE.contains(&name) {
            return Err(format!(
                "could not init cloud provider {name:?}: rkcm has no built-in cloud providers; run the provider's cloud-controller-manager with --cloud-provider=external"
            ));
        }
        return Err(format!("unknown cloud provider {name:?}"));
    };
    let config = if config_path.is_empty() {
        None
    } else {
        Some(std::fs::read_to_string(config_path).map_err(|error| {
            format!("couldn't open cloud provider configuration {config_path}: {error}")
        })?)
    };
    factory(config.as_deref())
        .map_err(|error| format!("could not init cloud provider {name:?}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args as _, FromArgMatches as _};

    fn options(args: &[&str]) -> GenericOptions {
        let matches = GenericOptions::augment_args(clap::Command::new("t"))
            .no_binary_name(true)
            .try_get_matches_from(args)
            .unwrap();
        GenericOptions::from_arg_matches(&matches).unwrap()
    }

    fn outcome(args: &[&str]) -> Result<Option<String>, String> {
        init(&options(args))
            .map(|cloud| cloud.map(|c| c.name().to_string()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn cloud_provider_flag_outcomes() {
        assert_eq!(outcome(&[]), Ok(None));
        assert_eq!(outcome(&["--cloud-provider=external"]), Ok(None));
        assert_eq!(outcome(&["--cloud-provider=sim"]), Ok(Some("sim".into())));
        assert_eq!(
            outcome(&["--cloud-provider=nope"]),
            Err("cloud provider could not be initialized: unknown cloud provider \"nope\"".into())
        );
        let gce = outcome(&[
            "--cloud-provider=gce",
            "--feature-gates=DisableCloudProviders=false",
        ])
        .unwrap_err();
        assert!(
            gce.contains("rkcm has no built-in cloud providers"),
            "{gce}"
        );
        let missing = outcome(&[
            "--cloud-provider=sim",
            "--cloud-config=/nonexistent/cloud.conf",
        ])
        .unwrap_err();
        assert!(
            missing.contains("couldn't open cloud provider configuration"),
            "{missing}"
        );
    }

    #[tokio::test]
    async fn a_hung_call_times_out() {
        let hung = futures::future::pending::<CloudResult<()>>();
        let result = call_within(Duration::from_millis(10), hung).await;
        assert!(matches!(result, Err(CloudError::Other(_))));
    }
}

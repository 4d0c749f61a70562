//! node-route-controller: cloud routes for the nodes' pod CIDRs (upstream
//! `staging/src/k8s.io/cloud-provider/controllers/route/route_controller.go`), through the
//! [`Routes`](crate::cloud::Routes) capability of the cloud provider.
//!
//! Only with `--allocate-node-cidrs` and `--configure-cloud-routes` and a cloud that has
//! routes; `--cluster-cidr` is required. Every `--route-reconciliation-period` (10 s) one
//! pass lists the cloud's routes and the Nodes: routes inside the cluster CIDRs whose node
//! or pod CIDR is gone (or blackholes) are deleted, a route is created for each pod CIDR
//! without one (Warning `FailedToCreateRoute` on the Node when that fails), and each Node's
//! `NetworkUnavailable` condition says whether its routes exist (`RouteCreated` /
//! `NoRouteCreated`). At most 200 cloud calls run at once, each with a timeout.

mod reconcile;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tracing::{debug, error, info};

use crate::cloud::{self, CloudProvider, Route};
use crate::controller::{ControllerContext, Runnable};
use crate::controllers::nodeipam;
use crate::generic_options::GenericOptions;
use crate::meta::ResourceNames;
use crate::recorder::{Recorder, WARNING};
use crate::store::Store;

use reconcile::{plan, routes_created, Action, Cidr};

pub const NAME: &str = "node-route-controller";
/// The resources its informers read.
pub const RESOURCES: &[&str] = &["v1/nodes"];
/// Upstream's event source.
const COMPONENT: &str = "route_controller";
/// Upstream's bound on cloud calls in flight.
const MAX_CONCURRENT_ROUTE_OPERATIONS: usize = 200;

#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The period for reconciling routes created for Nodes by cloud provider.
    #[arg(long, default_value = "10s", value_parser = crate::flags::parse_go_duration)]
    pub route_reconciliation_period: Duration,
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    cloud: Arc<dyn CloudProvider>,
    cluster_name: String,
    cluster_cidrs: Vec<Cidr>,
    nodes: Store<Node>,
}

pub fn build(
    context: &ControllerContext,
    options: &Options,
    node_ipam: &nodeipam::Options,
    generic: &GenericOptions,
) -> anyhow::Result<Vec<Runnable>> {
    if !node_ipam.allocate_node_cidrs || !generic.configure_cloud_routes {
        info!(
            CIDRs = node_ipam.allocate_node_cidrs,
            routes = generic.configure_cloud_routes,
            "Will not configure cloud provider routes for allocate-node-cidrs"
        );
        return Ok(vec![]);
    }
    let Some(cloud) = cloud::provider(generic)? else {
        info!("Warning: configure-cloud-routes is set, but no cloud provider specified. Will not configure cloud provider routes.");
        return Ok(vec![]);
    };
    if cloud.routes().is_none() {
        info!("Warning: configure-cloud-routes is set, but cloud provider does not support routes. Will not configure cloud provider routes.");
        return Ok(vec![]);
    }
    let cluster_cidrs = reconcile::cluster_cidrs(&node_ipam.cluster_cidr)
        .map_err(|error| anyhow::anyhow!("error starting {NAME}: {error}"))?;
    cloud::sim::register_route_metric(cloud.as_ref(), &context.metrics);
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), COMPONENT);
    let nodes = context.informers.get::<Node>();
    let controller = Arc::new(Controller {
        client,
        recorder,
        cloud,
        cluster_name: generic.cluster_name.clone(),
        cluster_cidrs,
        nodes: nodes.store().clone(),
    });
    info!("Starting route controller");
    Ok(vec![Runnable::periodic(
        NAME,
        options.route_reconciliation_period,
        controller,
        |controller| async move {
            if let Err(error) = controller.reconcile_node_routes().await {
                error!(controller = NAME, "Couldn't reconcile node routes: {error}");
            }
        },
    )])
}

impl Controller {
    async fn reconcile_node_routes(&self) -> anyhow::Result<()> {
        let Some(routes) = self.cloud.routes() else {
            return Ok(());
        };
        let cluster = self.cluster_name.as_str();
        let listed = cloud::call(routes.list_routes(cluster))
            .await
            .map_err(|e| anyhow::anyhow!("error listing routes: {e}"))?;
        let nodes = self.nodes.list();
        let mut plan = plan(&nodes, &listed, &self.cluster_cidrs);
        for (node, actions) in &plan.actions {
            for (cidr, action) in actions {
                info!(
                    controller = NAME,
                    "action for Node {node:?} with CIDR {cidr:?}: {action:?}"
                );
            }
        }
        futures::stream::iter(std::mem::take(&mut plan.delete))
            .for_each_concurrent(MAX_CONCURRENT_ROUTE_OPERATIONS, |route| async move {
                self.delete(&route).await;
            })
            .await;
        let created: Vec<(String, String)> =
            futures::stream::iter(std::mem::take(&mut plan.create))
                .map(|(hint, route)| async move {
                    self.create(&hint, &route)
                        .await
                        .then_some((route.target_node, route.destination_cidr))
                })
                .buffer_unordered(MAX_CONCURRENT_ROUTE_OPERATIONS)
                .filter_map(|done| async move { done })
                .collect()
                .await;
        for (node, cidr) in created {
            if let Some(actions) = plan.actions.get_mut(&node) {
                actions.insert(cidr, Action::Keep);
            }
        }
        let conditions: Vec<(Arc<Node>, bool)> = nodes
            .into_iter()
            .filter_map(|node| {
                let name = node.name_str();
                routes_created(plan.actions.get(name)).map(|created| (node, created))
            })
            .collect();
        futures::stream::iter(conditions)
            .for_each_concurrent(
                MAX_CONCURRENT_ROUTE_OPERATIONS,
                |(node, created)| async move {
                    if let Err(e) = self.update_networking_condition(&node, created).await {
                        let name = node.name_str();
                        error!(controller = NAME, node = %name, "Error updating node: {e}");
                    }
                },
            )
            .await;
        Ok(())
    }

    async fn delete(&self, route: &Route) {
        let Some(routes) = self.cloud.routes() else {
            return;
        };
        let started = Instant::now();
        info!(
            controller = NAME,
            "Deleting route {} {}", route.name, route.destination_cidr
        );
        match cloud::call(routes.delete_route(&self.cluster_name, route)).await {
            Ok(()) => info!(
                controller = NAME,
                "Deleted route {} {} after {:?}",
                route.name,
                route.destination_cidr,
                started.elapsed()
            ),
            Err(e) => error!(
                controller = NAME,
                "Could not delete route {} {} after {:?}: {e}",
                route.name,
                route.destination_cidr,
                started.elapsed()
            ),
        }
    }

    /// Creates one route; false (with the event) when the cloud refused it.
    async fn create(&self, hint: &str, route: &Route) -> bool {
        let Some(routes) = self.cloud.routes() else {
            return false;
        };
        let started = Instant::now();
        info!(
            controller = NAME,
            "Creating route for node {} {} with hint {hint}",
            route.target_node,
            route.destination_cidr
        );
        match cloud::call(routes.create_route(&self.cluster_name, hint, route)).await {
            Ok(()) => {
                info!(
                    controller = NAME,
                    "Created route for node {} {} with hint {hint} after {:?}",
                    route.target_node,
                    route.destination_cidr,
                    started.elapsed()
                );
                true
            }
            Err(e) => {
                let message = format!(
                    "Could not create route {hint} {} for node {} after {:?}: {e}",
                    route.destination_cidr,
                    route.target_node,
                    started.elapsed()
                );
                self.recorder.event_for(
                    ObjectReference {
                        kind: Some("Node".into()),
                        name: Some(route.target_node.clone()),
                        uid: Some(route.target_node.clone()),
                        ..Default::default()
                    },
                    WARNING,
                    "FailedToCreateRoute",
                    message.clone(),
                );
                error!(controller = NAME, "{message}");
                false
            }
        }
    }

    /// Sets NetworkUnavailable unless it already says the same (a strategic-merge patch of
    /// that one condition through `nodes/status`, as upstream's `SetNodeCondition`).
    async fn update_networking_condition(&self, node: &Node, created: bool) -> anyhow::Result<()> {
        let name = node.name_str().to_string();
        let current = node
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .and_then(|conditions| conditions.iter().find(|c| c.type_ == "NetworkUnavailable"));
        let wanted_status = if created { "False" } else { "True" };
        if current.is_some_and(|c| c.status == wanted_status) {
            debug!(controller = NAME, node = %name, "set NodeNetworkUnavailable={} was canceled because it is already set", !created);
            return Ok(());
        }
        info!(
            controller = NAME,
            "Patching node status {name} with {created} previous condition was:{current:?}"
        );
        let (reason, message) = if created {
            ("RouteCreated", "RouteController created a route")
        } else {
            ("NoRouteCreated", "RouteController failed to create a route")
        };
        let now = Time(Timestamp::now());
        let patch = json!({"status": {"conditions": [{
            "type": "NetworkUnavailable",
            "status": wanted_status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
            "lastHeartbeatTime": now,
        }]}});
        let api: Api<Node> = Api::all(self.client.clone());
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if crate::api_errors::is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

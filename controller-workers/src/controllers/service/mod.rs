//! service-lb-controller: a cloud load balancer for every `type: LoadBalancer` Service
//! (upstream `staging/src/k8s.io/cloud-provider/controllers/service/controller.go`), through
//! the [`LoadBalancer`](crate::cloud::LoadBalancer) capability of the cloud provider.
//!
//! Queue `service` (`--concurrent-service-syncs` workers, retries 5 s doubling to 300 s):
//! a Service that wants a balancer gets the finalizer
//! `service.kubernetes.io/load-balancer-cleanup`, then its balancer is ensured with the
//! Service's node set and the balancer's status written to `status.loadBalancer`; one that
//! no longer wants it, or is being deleted, has its balancer deleted and the finalizer
//! removed. Queue `node` (one worker): a node added, deleted, or changed in what a
//! balancer sees of it re-points every balancer whose node set changed; a failure there
//! sends the Service back to the service queue. Every cloud call has a timeout, so a
//! provider that hangs holds up one key, never the others or another controller.

mod decide;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use kube::api::{Api, Patch, PatchParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use serde_json::json;
use tracing::{debug, error, info, warn};

use crate::cloud::{self, CloudError, CloudProvider};
use crate::controller::{ControllerContext, Runnable};
use crate::generic_options::GenericOptions;
use crate::informer::Change;
use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::metrics::Metrics;
use crate::queue::WorkQueue;
use crate::rate_limiter::ItemExponentialFailure;
use crate::recorder::{Recorder, NORMAL, WARNING};
use crate::store::{key_of, Store};

use decide::{
    has_lb_finalizer, loggable_node_names, needs_cleanup, needs_update, nodes_for_balancer,
    nodes_sufficiently_equal, should_sync_updated_node, wants_load_balancer, Update,
    LB_CLEANUP_FINALIZER,
};

pub const NAME: &str = "service-lb-controller";
/// The resources its informers read.
pub const RESOURCES: &[&str] = &["v1/services", "v1/nodes"];
/// Upstream's event source.
const COMPONENT: &str = "service-controller";
const SERVICE_QUEUE: &str = "service";
const NODE_QUEUE: &str = "node";
/// The node queue's one key: every node change resyncs every balancer's node set.
const NODES_KEY: &str = "nodes";
const MIN_RETRY_DELAY: Duration = Duration::from_secs(5);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of services that are allowed to sync concurrently. Larger number = more
    /// responsive service management, but more CPU (and network) load
    #[arg(long, default_value_t = 1)]
    pub concurrent_service_syncs: i32,
}

#[derive(Clone)]
struct ServiceMetrics {
    loadbalancer_sync: Counter,
    nodesync_error: Counter,
    nodesync_latency: Histogram,
    update_host_latency: Histogram,
}

impl ServiceMetrics {
    fn register(metrics: &Metrics) -> ServiceMetrics {
        let m = ServiceMetrics {
            loadbalancer_sync: Counter::default(),
            nodesync_error: Counter::default(),
            nodesync_latency: Histogram::new(exponential_buckets(1.0, 2.0, 15)),
            update_host_latency: Histogram::new(exponential_buckets(1.0, 2.0, 15)),
        };
        metrics.register(
            "service_controller_loadbalancer_sync",
            "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
            m.loadbalancer_sync.clone(),
        );
        metrics.register(
            "service_controller_nodesync_error",
            "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
            m.nodesync_error.clone(),
        );
        metrics.register(
            "service_controller_nodesync_latency_seconds",
            "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.",
            m.nodesync_latency.clone(),
        );
        metrics.register(
            "service_controller_update_loadbalancer_host_latency_seconds",
            "A metric measuring the latency for updating each load balancer hosts.",
            m.update_host_latency.clone(),
        );
        m
    }
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    cloud: Arc<dyn CloudProvider>,
    cluster_name: String,
    stable_node_set: bool,
    workers: usize,
    services: Store<Service>,
    nodes: Store<Node>,
    /// The last state of each Service synced (upstream's serviceCache), for the deletion
    /// of a balancer whose Service went without the finalizer.
    cache: Mutex<HashMap<String, Arc<Service>>>,
    /// The node set each balancer was last pointed at.
    last_synced_nodes: Mutex<HashMap<String, Vec<Arc<Node>>>>,
    service_queue: Arc<WorkQueue<String>>,
    node_queue: Arc<WorkQueue<String>>,
    metrics: ServiceMetrics,
}

fn queue(context: &ControllerContext, name: &str) -> Arc<WorkQueue<String>> {
    WorkQueue::with_rate_limiter(
        name,
        Box::new(ItemExponentialFailure::<String>::new(
            MIN_RETRY_DELAY,
            MAX_RETRY_DELAY,
        )),
        Some(context.metrics.workqueue.for_queue(name)),
    )
}

pub fn build(
    context: &ControllerContext,
    options: &Options,
    generic: &GenericOptions,
) -> anyhow::Result<Vec<Runnable>> {
    let Some(cloud) = cloud::provider(generic)? else {
        error!(
            error = "WARNING: no cloud provider provided, services of type LoadBalancer will fail",
            "Failed to start service controller"
        );
        return Ok(vec![]);
    };
    if cloud.load_balancer().is_none() {
        error!(
            error = "the cloud provider does not support external load balancers",
            "Failed to start service controller"
        );
        return Ok(vec![]);
    }
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), COMPONENT);
    let services = context.informers.get::<Service>();
    let nodes = context.informers.get::<Node>();
    let service_queue = queue(context, SERVICE_QUEUE);
    let node_queue = queue(context, NODE_QUEUE);
    let workers = usize::try_from(options.concurrent_service_syncs.max(1)).unwrap_or(1);
    let controller = Arc::new(Controller {
        client,
        recorder,
        cloud,
        cluster_name: generic.cluster_name.clone(),
        stable_node_set: generic.gates().enabled("StableLoadBalancerNodeSet"),
        workers,
        services: services.store().clone(),
        nodes: nodes.store().clone(),
        cache: Mutex::new(HashMap::new()),
        last_synced_nodes: Mutex::new(HashMap::new()),
        service_queue: service_queue.clone(),
        node_queue: node_queue.clone(),
        metrics: ServiceMetrics::register(&context.metrics),
    });
    services.handle(&controller, Controller::on_service);
    nodes.handle(&controller, Controller::on_node);
    info!("Starting service controller");
    Ok(vec![
        Runnable::new(
            NAME,
            service_queue,
            workers,
            controller.clone(),
            |c, key| async move { c.sync_service(&key).await },
        ),
        Runnable::new(NAME, node_queue, 1, controller, |c, _key| async move {
            c.sync_nodes().await;
            Ok(())
        }),
    ])
}

impl Controller {
    fn on_service(&self, change: &Change<Service>) {
        let wanted = match change {
            Change::Added(service) => wants_load_balancer(service) || needs_cleanup(service),
            Change::Updated { old, new } => {
                let update = needs_update(old, new);
                if let Update::WithEvent(reason, message) = &update {
                    self.recorder.event(&**new, NORMAL, reason, message.clone());
                }
                update != Update::No || needs_cleanup(new)
            }
            // The deletion timestamp came as an update; a Service that went without the
            // finalizer is cleaned up from the cache by its key.
            Change::Deleted(_) => true,
        };
        if wanted {
            self.service_queue.add(key_of(&change.latest().metadata));
        }
    }

    fn on_node(&self, change: &Change<Node>) {
        let sync = match change {
            Change::Added(_) | Change::Deleted(_) => true,
            Change::Updated { old, new } => {
                should_sync_updated_node(old, new, self.stable_node_set)
            }
        };
        if sync {
            self.node_queue.add(NODES_KEY.to_string());
        }
    }

    async fn sync_service(&self, key: &str) -> anyhow::Result<()> {
        let started = Instant::now();
        let result = match self.services.get(key) {
            None => self.process_service_deletion(key).await,
            Some(service) => self.process_create_or_update(service, key).await,
        };
        debug!(controller = NAME, key, elapsed = ?started.elapsed(), "Finished syncing service");
        result
    }

    async fn process_create_or_update(
        &self,
        service: Arc<Service>,
        key: &str,
    ) -> anyhow::Result<()> {
        let previous = lock(&self.cache).get(key).cloned();
        if let Some(previous) = previous {
            if previous.metadata.uid != service.metadata.uid {
                // Deleted and re-created without the finalizer in between.
                self.process_load_balancer_delete(&previous).await?;
            }
        }
        lock(&self.cache).insert(key.to_string(), service.clone());
        match self.sync_load_balancer_if_needed(&service, key).await {
            Ok(Operation::Delete) => {
                lock(&self.cache).remove(key);
                Ok(())
            }
            Ok(Operation::Ensure) => Ok(()),
            Err(error) => {
                self.recorder.event(
                    &*service,
                    WARNING,
                    "SyncLoadBalancerFailed",
                    format!("Error syncing load balancer: {error}"),
                );
                Err(error)
            }
        }
    }

    async fn sync_load_balancer_if_needed(
        &self,
        service: &Arc<Service>,
        key: &str,
    ) -> anyhow::Result<Operation> {
        let Some(balancer) = self.cloud.load_balancer() else {
            anyhow::bail!("the cloud provider does not support external load balancers");
        };
        let previous = current_status(service);
        let cluster = self.cluster_name.as_str();
        if !wants_load_balancer(service) || needs_cleanup(service) {
            let exists = cloud::call(balancer.get_load_balancer(cluster, service))
                .await
                .map_err(|e| {
                    anyhow::anyhow!("failed to check if load balancer exists before cleanup: {e}")
                })?;
            if exists.is_some() {
                info!(
                    controller = NAME,
                    service = key,
                    "Deleting existing load balancer for service"
                );
                self.recorder.event(
                    &**service,
                    NORMAL,
                    "DeletingLoadBalancer",
                    "Deleting load balancer",
                );
                match cloud::call(balancer.ensure_load_balancer_deleted(cluster, service)).await {
                    Ok(()) | Err(CloudError::ImplementedElsewhere) => {}
                    Err(e) => anyhow::bail!("failed to delete load balancer: {e}"),
                }
            }
            self.patch_finalizer(service, false)
                .await
                .map_err(|e| e.context("failed to remove load balancer cleanup finalizer"))?;
            self.recorder.event(
                &**service,
                NORMAL,
                "DeletedLoadBalancer",
                "Deleted load balancer",
            );
            self.patch_status(service, &previous, &LoadBalancerStatus::default())
                .await?;
            return Ok(Operation::Delete);
        }
        info!(
            controller = NAME,
            service = key,
            "Ensuring load balancer for service"
        );
        self.recorder.event(
            &**service,
            NORMAL,
            "EnsuringLoadBalancer",
            "Ensuring load balancer",
        );
        self.patch_finalizer(service, true)
            .await
            .map_err(|e| e.context("failed to add load balancer cleanup finalizer"))?;
        let nodes = nodes_for_balancer(&self.nodes.list(), self.stable_node_set);
        if nodes.is_empty() {
            self.recorder.event(
                &**service,
                WARNING,
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            );
        }
        lock(&self.last_synced_nodes).insert(key.to_string(), nodes.clone());
        let status =
            match cloud::call(balancer.ensure_load_balancer(cluster, service, &nodes)).await {
                Ok(status) => status,
                Err(CloudError::ImplementedElsewhere) => return Ok(Operation::Ensure),
                Err(e) => anyhow::bail!("failed to ensure load balancer: {e}"),
            };
        self.recorder.event(
            &**service,
            NORMAL,
            "EnsuredLoadBalancer",
            "Ensured load balancer",
        );
        self.patch_status(service, &previous, &status).await?;
        Ok(Operation::Ensure)
    }

    async fn process_service_deletion(&self, key: &str) -> anyhow::Result<()> {
        let Some(cached) = lock(&self.cache).get(key).cloned() else {
            return Ok(());
        };
        info!(
            controller = NAME,
            service = key,
            "Service has been deleted. Attempting to cleanup load balancer resources"
        );
        self.process_load_balancer_delete(&cached).await?;
        lock(&self.cache).remove(key);
        lock(&self.last_synced_nodes).remove(key);
        Ok(())
    }

    async fn process_load_balancer_delete(&self, service: &Arc<Service>) -> anyhow::Result<()> {
        if !wants_load_balancer(service) {
            return Ok(());
        }
        let Some(balancer) = self.cloud.load_balancer() else {
            return Ok(());
        };
        self.recorder.event(
            &**service,
            NORMAL,
            "DeletingLoadBalancer",
            "Deleting load balancer",
        );
        if let Err(e) =
            cloud::call(balancer.ensure_load_balancer_deleted(&self.cluster_name, service)).await
        {
            self.recorder.event(
                &**service,
                WARNING,
                "DeleteLoadBalancerFailed",
                format!("Error deleting load balancer: {e}"),
            );
            return Err(e.into());
        }
        self.recorder.event(
            &**service,
            NORMAL,
            "DeletedLoadBalancer",
            "Deleted load balancer",
        );
        Ok(())
    }

    /// Adds or removes the cleanup finalizer, by a strategic-merge patch through
    /// `services/status` as upstream's `PatchService`.
    async fn patch_finalizer(&self, service: &Service, add: bool) -> anyhow::Result<()> {
        if has_lb_finalizer(service) == add {
            return Ok(());
        }
        let patch = if add {
            json!({"metadata": {"finalizers": [LB_CLEANUP_FINALIZER]}})
        } else {
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [LB_CLEANUP_FINALIZER]}})
        };
        debug!(controller = NAME, service = %key_of(&service.metadata), add, "Patching the load balancer cleanup finalizer");
        self.api(service)
            .patch_status(
                service.name_str(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await?;
        Ok(())
    }

    async fn patch_status(
        &self,
        service: &Service,
        previous: &LoadBalancerStatus,
        wanted: &LoadBalancerStatus,
    ) -> anyhow::Result<()> {
        if ingress_of(previous) == ingress_of(wanted) {
            return Ok(());
        }
        debug!(controller = NAME, service = %key_of(&service.metadata), "Patching status for service");
        let patch = json!({"status": {"loadBalancer": {"ingress": wanted.ingress}}});
        match self
            .api(service)
            .patch_status(
                service.name_str(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            // The Service went right after its finalizer did.
            Err(e) if crate::api_errors::is_not_found(&e) => Ok(()),
            Err(e) => Err(anyhow::Error::new(e).context("failed to update load balancer status")),
        }
    }

    fn api(&self, service: &Service) -> Api<Service> {
        Api::namespaced(self.client.clone(), service.namespace_str())
    }

    /// Re-points every balancer whose node set changed; the ones that failed go back to
    /// the service queue.
    async fn sync_nodes(&self) {
        let started = Instant::now();
        info!(controller = NAME, "Syncing backends for all LB services.");
        let services: Vec<Arc<Service>> = lock(&self.cache).values().cloned().collect();
        let total = services.len();
        let retry: Vec<String> = futures::stream::iter(services)
            .map(|service| async move {
                self.node_sync_service(&service)
                    .await
                    .then(|| key_of(&service.metadata))
            })
            .buffer_unordered(self.workers)
            .filter_map(|key| async move { key })
            .collect()
            .await;
        info!(
            controller = NAME,
            "Successfully updated {} out of {} load balancers to direct traffic to the updated set of nodes",
            total - retry.len(),
            total
        );
        for key in retry {
            self.service_queue.add(key);
        }
        self.metrics
            .nodesync_latency
            .observe(started.elapsed().as_secs_f64());
    }

    /// Whether the balancer of `service` must be retried.
    async fn node_sync_service(&self, service: &Arc<Service>) -> bool {
        if !wants_load_balancer(service) {
            return false;
        }
        let key = key_of(&service.metadata);
        let new_nodes = nodes_for_balancer(&self.nodes.list(), self.stable_node_set);
        let old_nodes = lock(&self.last_synced_nodes)
            .insert(key.clone(), new_nodes.clone())
            .unwrap_or_default();
        let old_nodes = nodes_for_balancer(&old_nodes, self.stable_node_set);
        if nodes_sufficiently_equal(&old_nodes, &new_nodes) {
            return false;
        }
        if let Err(error) = self.update_load_balancer_hosts(service, &new_nodes).await {
            warn!(controller = NAME, service = %key, error = %error, "failed to update load balancer hosts");
            self.metrics.nodesync_error.inc();
            return true;
        }
        false
    }

    async fn update_load_balancer_hosts(
        &self,
        service: &Arc<Service>,
        hosts: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        let Some(balancer) = self.cloud.load_balancer() else {
            return Ok(());
        };
        let started = Instant::now();
        self.metrics.loadbalancer_sync.inc();
        info!(
            controller = NAME,
            service = %key_of(&service.metadata),
            "Updating backends for load balancer with {} nodes: {}",
            hosts.len(),
            loggable_node_names(hosts)
        );
        let cluster = self.cluster_name.as_str();
        let result = cloud::call(balancer.update_load_balancer(cluster, service, hosts)).await;
        self.metrics
            .update_host_latency
            .observe(started.elapsed().as_secs_f64());
        let error = match result {
            Ok(()) => {
                if hosts.is_empty() {
                    self.recorder.event(
                        &**service,
                        WARNING,
                        "UnAvailableLoadBalancer",
                        "There are no available nodes for LoadBalancer",
                    );
                } else {
                    self.recorder.event(
                        &**service,
                        NORMAL,
                        "UpdatedLoadBalancer",
                        "Updated load balancer with new hosts",
                    );
                }
                return Ok(());
            }
            Err(CloudError::ImplementedElsewhere) => return Ok(()),
            Err(error) => error,
        };
        // Only an error while the balancer still exists.
        match cloud::call(balancer.get_load_balancer(cluster, service)).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) => {}
            Err(e) => {
                warn!(controller = NAME, service = %key_of(&service.metadata), error = %e, "failed to check if load balancer exists")
            }
        }
        self.recorder.event(
            &**service,
            WARNING,
            "UpdateLoadBalancerFailed",
            format!(
                "Error updating load balancer with new hosts {} [node names limited, total number of nodes: {}], error: {error}",
                loggable_node_names(hosts),
                hosts.len()
            ),
        );
        Err(error)
    }
}

#[derive(Debug, PartialEq)]
enum Operation {
    Delete,
    Ensure,
}

fn current_status(service: &Service) -> LoadBalancerStatus {
    service
        .status
        .as_ref()
        .and_then(|status| status.load_balancer.clone())
        .unwrap_or_default()
}

/// The ingress points, an empty list being none.
fn ingress_of(status: &LoadBalancerStatus) -> Vec<k8s_openapi::api::core::v1::LoadBalancerIngress> {
    status.ingress.clone().unwrap_or_default()
}

//! endpointslice-controller: the `discovery.k8s.io/v1` EndpointSlices of every Service
//! with a selector (upstream `pkg/controller/endpointslice/endpointslice_controller.go`
//! and `staging/src/k8s.io/endpointslice`).
//!
//! Keys are Services (`namespace/name`). Service changes queue their key; pod changes
//! queue the Services that select the pod, after `--endpointslice-updates-batch-period`;
//! changes to slices this controller manages that it did not make itself (a generation
//! newer than the one it wrote, an unexpected deletion) queue their Service after at least
//! a second; Node changes matter only to topology hints ([`handlers`]).
//!
//! A sync ([`Controller::sync_service`]) lists the Service's pods and managed slices from
//! the stores and refuses to work from a slice cache older than its own writes; the
//! reconciler ([`reconciler`], packing rules in [`packing`]) works out, per address
//! family, the endpoints each pod gives ([`utils`]), packs them into slices of at most
//! `--max-endpoints-per-slice` reusing what exists, adds topology hints when the Service
//! asks for them ([`topologycache`]), then creates, updates and deletes slices. A deleted
//! Service's slices are left to the garbage collector (they carry its ownerReference).

mod handlers;
mod metrics;
mod packing;
mod reconciler;
mod topologycache;
mod utils;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::endpointutil::{
    is_external_name, selects, service_selector, EndpointSliceTracker, TriggerTimeTracker,
    MANAGED_BY_LABEL, SERVICE_NAME_LABEL,
};
use crate::queue::WorkQueue;
use crate::rate_limiter::{Bucket, ItemExponentialFailure, MaxOf};
use crate::recorder::{Recorder, WARNING};
use crate::store::{split_key, Store};

use self::metrics::{PortCache, SliceMetrics};
use self::topologycache::TopologyCache;

pub const NAME: &str = "endpointslice-controller";
/// The fields it reads of the objects it streams (the rest are read whole): of pods,
/// what an endpoint needs: node, hostname and subdomain, named container ports; `status` (IPs, readiness).
pub const FIELDS: crate::projection::FieldList = &[(
    "v1/pods",
    &[
        "spec.nodeName",
        "spec.hostname",
        "spec.subdomain",
        "spec.containers.ports",
        "status",
    ],
)];
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &[
    "discovery.k8s.io/v1/endpointslices",
    "v1/nodes",
    "v1/pods",
    "v1/services",
];
/// The value of the managed-by label on the slices it owns.
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// The component its events come from.
const EVENT_SOURCE: &str = "endpoint-slice-controller";
/// The queue's name (the `name` label of the workqueue metrics).
const QUEUE: &str = "endpoint_slice";
/// A Service is dropped from the queue after this many failed syncs in a row.
const MAX_RETRIES: u32 = 15;
/// Per-Service backoff: 1 s doubling to 1000 s (the usual 5 ms would hammer the API
/// server with slice writes).
const SYNC_BACKOFF: Duration = Duration::from_secs(1);
const MAX_SYNC_BACKOFF: Duration = Duration::from_secs(1000);
/// The least delay before a slice change syncs its Service, so changes to several slices
/// are handled together.
const SLICE_CHANGE_MIN_SYNC_DELAY: Duration = Duration::from_secs(1);

const MIN_CONCURRENT_SERVICE_ENDPOINT_SYNCS: i32 = 1;
const MAX_CONCURRENT_SERVICE_ENDPOINT_SYNCS: i32 = 50;
const MIN_MAX_ENDPOINTS_PER_SLICE: i32 = 1;
const MAX_MAX_ENDPOINTS_PER_SLICE: i32 = 1000;

/// The controller's flags (KCM's names, defaults and help).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// The number of service endpoint syncing operations that will be done concurrently.
    /// Larger number = faster endpoint slice updating, but more CPU (and network) load.
    /// Defaults to 5.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub concurrent_service_endpoint_syncs: i32,
    /// The maximum number of endpoints that will be added to an EndpointSlice. More
    /// endpoints per slice will result in less endpoint slices, but larger resources.
    /// Defaults to 100.
    #[arg(long, default_value_t = 100, allow_negative_numbers = true)]
    pub max_endpoints_per_slice: i32,
    /// The length of endpoint slice updates batching period. Processing of pod changes
    /// will be delayed by this duration to join them with potential upcoming updates and
    /// reduce the overall number of endpoints updates. Larger number = higher endpoint
    /// programming latency, but lower number of endpoints revision generated
    #[arg(long, default_value = "0s", value_parser = crate::flags::parse_go_duration)]
    pub endpointslice_updates_batch_period: Duration,
}

impl Options {
    /// KCM's checks of these flags, with its messages (several joined as KCM joins
    /// them). KCM checks them whichever controllers run; the worker and the launcher
    /// refuse to start (exit 2) on an error.
    pub fn validate(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        let syncs = self.concurrent_service_endpoint_syncs;
        if syncs < MIN_CONCURRENT_SERVICE_ENDPOINT_SYNCS {
            errors.push(format!(
                "concurrent-service-endpoint-syncs must not be less than {MIN_CONCURRENT_SERVICE_ENDPOINT_SYNCS}, but got {syncs}"
            ));
        } else if syncs > MAX_CONCURRENT_SERVICE_ENDPOINT_SYNCS {
            errors.push(format!(
                "concurrent-service-endpoint-syncs must not be more than {MAX_CONCURRENT_SERVICE_ENDPOINT_SYNCS}, but got {syncs}"
            ));
        }
        let max = self.max_endpoints_per_slice;
        if max < MIN_MAX_ENDPOINTS_PER_SLICE {
            errors.push(format!(
                "max-endpoints-per-slice must not be less than {MIN_MAX_ENDPOINTS_PER_SLICE}, but got {max}"
            ));
        } else if max > MAX_MAX_ENDPOINTS_PER_SLICE {
            errors.push(format!(
                "max-endpoints-per-slice must not be more than {MAX_MAX_ENDPOINTS_PER_SLICE}, but got {max}"
            ));
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

pub(crate) struct Controller {
    client: kube::Client,
    recorder: Recorder,
    services: Store<Service>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    slices: Store<EndpointSlice>,
    /// The slice generations this controller wrote, per Service.
    tracker: EndpointSliceTracker,
    trigger_times: TriggerTimeTracker,
    /// Zones' shares of the cluster's CPU and the hints given, per Service. Always there:
    /// the TopologyAwareHints gate is on by default in 1.29 and rkcm has no way to turn
    /// it off.
    topology: Option<TopologyCache>,
    metrics: SliceMetrics,
    port_cache: PortCache,
    max_endpoints_per_slice: usize,
    batch_period: Duration,
    queue: Arc<WorkQueue<String>>,
}

pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    options.validate().map_err(anyhow::Error::msg)?;
    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    let queue: Arc<WorkQueue<String>> = WorkQueue::with_rate_limiter(
        QUEUE,
        Box::new(MaxOf::new(vec![
            Box::new(ItemExponentialFailure::new(SYNC_BACKOFF, MAX_SYNC_BACKOFF)),
            Box::new(Bucket::new(10.0, 100)),
        ])),
        Some(context.metrics.workqueue.for_queue(QUEUE)),
    );
    let services = context.informers.get::<Service>();
    let pods = context.informers.get::<Pod>();
    let nodes = context.informers.get::<Node>();
    let slices = context.informers.get::<EndpointSlice>();
    let max_endpoints_per_slice = usize::try_from(options.max_endpoints_per_slice).unwrap_or(1);
    let metrics = SliceMetrics::register(&context.metrics);
    let controller = Arc::new(Controller {
        client,
        recorder,
        services: services.store().clone(),
        pods: pods.store().clone(),
        nodes: nodes.store().clone(),
        slices: slices.store().clone(),
        tracker: EndpointSliceTracker::new(),
        trigger_times: TriggerTimeTracker::new(),
        topology: Some(TopologyCache::new()),
        port_cache: PortCache::new(max_endpoints_per_slice, metrics.clone()),
        metrics,
        max_endpoints_per_slice,
        batch_period: options.endpointslice_updates_batch_period,
        queue: queue.clone(),
    });
    services.enqueue_changes(&queue);
    pods.handle(&controller, Controller::on_pod);
    slices.handle(&controller, Controller::on_endpoint_slice);
    if controller.topology.is_some() {
        nodes.handle(&controller, Controller::on_node);
    }
    let workers = usize::try_from(options.concurrent_service_endpoint_syncs).unwrap_or(1);
    Ok(Runnable::new(
        NAME,
        queue,
        workers,
        controller,
        |controller, key| async move {
            let result = controller.sync_service(&key).await;
            controller.metrics.track_sync(&result);
            result
        },
    )
    .with_max_retries(MAX_RETRIES))
}

impl Controller {
    /// Brings the slices of one Service in line with its pods.
    pub(crate) async fn sync_service(&self, key: &str) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let result = self.sync_service_inner(key).await;
        debug!(controller = NAME, key, elapsed = ?started.elapsed(), "finished syncing service endpoint slices");
        result
    }

    async fn sync_service_inner(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(service) = self.services.get(key) else {
            // Deleted: its slices go with it through their ownerReference.
            self.trigger_times.delete_service(namespace, name);
            self.port_cache.delete_service(namespace, name);
            self.tracker.delete_service(namespace, name);
            return Ok(());
        };
        if is_external_name(&service) {
            // An ExternalName Service has no endpoints.
            return Ok(());
        }
        let Some(selector) = service_selector(&service) else {
            // Without a selector, its slices are made by hand.
            return Ok(());
        };
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_namespace_labelled(namespace, |labels| selects(selector, labels));
        let slices: Vec<Arc<EndpointSlice>> = self
            .slices
            .list_namespace(namespace)
            .into_iter()
            .filter(|slice| is_managed_slice_of(slice, name))
            // One being deleted could never be updated: leave it to go.
            .filter(|slice| slice.metadata.deletion_timestamp.is_none())
            .collect();
        let slice_refs: Vec<&EndpointSlice> = slices.iter().map(|slice| slice.as_ref()).collect();
        if self.tracker.stale_slices(namespace, name, &slice_refs) {
            return Err(
                StaleInformerCache::new("EndpointSlice informer cache is out of date").into(),
            );
        }
        // Computed on every sync, so the tracker's view stays current even when nothing
        // is written.
        let pod_refs: Vec<&Pod> = pods.iter().map(|pod| pod.as_ref()).collect();
        let trigger_time = self.trigger_times.compute(&service, &pod_refs);
        if let Err(error) = self.reconcile(&service, &pods, slices, trigger_time).await {
            self.recorder.event(
                service.as_ref(),
                WARNING,
                "FailedToUpdateEndpointSlices",
                format!("Error updating Endpoint Slices for Service {namespace}/{name}: {error}"),
            );
            return Err(error);
        }
        Ok(())
    }
}

/// A sync found the slice store older than this controller's own writes (upstream
/// `StaleInformerCache`): retried, and counted as `syncs{result="stale"}`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct StaleInformerCache(&'static str);

impl StaleInformerCache {
    fn new(message: &'static str) -> Self {
        StaleInformerCache(message)
    }
}

/// Whether the slice is one this controller manages for the Service `service`.
fn is_managed_slice_of(slice: &EndpointSlice, service: &str) -> bool {
    let labels = slice.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(SERVICE_NAME_LABEL))
        .map(String::as_str)
        == Some(service)
        && labels
            .and_then(|l| l.get(MANAGED_BY_LABEL))
            .map(String::as_str)
            == Some(CONTROLLER_NAME)
}

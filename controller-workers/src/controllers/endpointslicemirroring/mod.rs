//! endpointslice-mirroring-controller (upstream `pkg/controller/endpointslicemirroring/`):
//! the Endpoints of a Service without a selector, which someone other than the endpoints
//! controller writes, are mirrored into EndpointSlices, so consumers of slices (kube-proxy,
//! DNS) see them too.
//!
//! Keys are Endpoints keys (`namespace/name`, the Service's name too). A sync mirrors only
//! when the Endpoints exists without the `endpointslice.kubernetes.io/skip-mirror: "true"`
//! label or the leader-election annotation, and its Service exists without a selector;
//! otherwise it deletes every slice it mirrored for that name. The slices are those
//! labelled `kubernetes.io/service-name=<name>` and managed by
//! `endpointslicemirroring-controller.k8s.io`, owned by the Endpoints (so the garbage
//! collector removes them too). What to write is decided in [`reconciler`]; the handlers
//! that queue keys are in [`handlers`].

mod handlers;
mod helpers;
mod metrics;
mod reconciler;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tracing::debug;

use crate::controller::{ControllerContext, Runnable};
use crate::endpointutil::{
    service_selector, EndpointSliceTracker, MANAGED_BY_LABEL, SERVICE_NAME_LABEL,
};
use crate::queue::WorkQueue;
use crate::rate_limiter::{Bucket, ItemExponentialFailure, MaxOf};
use crate::recorder::Recorder;
use crate::store::{split_key, Store};
use crate::worker::UsageError;

use self::helpers::should_mirror;
use self::metrics::{MetricsCache, MirroringMetrics};
use self::reconciler::Reconciler;

pub const NAME: &str = "endpointslice-mirroring-controller";
/// The resources its informers read (the launcher warms them on a standby).
pub const RESOURCES: &[&str] = &[
    "discovery.k8s.io/v1/endpointslices",
    "v1/endpoints",
    "v1/services",
];
/// The `endpointslice.kubernetes.io/managed-by` value of the slices it writes.
pub const MANAGED_BY: &str = "endpointslicemirroring-controller.k8s.io";
/// The event source upstream's recorder reports as.
const EVENT_SOURCE: &str = "endpoint-slice-mirroring-controller";
/// Upstream's queue name (the `name` label of the workqueue metrics).
const QUEUE: &str = "endpoint_slice_mirroring";
/// Upstream's maxRetries: a key failing this many times in a row is dropped until its
/// next event.
const MAX_RETRIES: u32 = 15;

const MIN_CONCURRENT_SYNCS: i32 = 1;
const MAX_CONCURRENT_SYNCS: i32 = 50;
const MIN_MAX_ENDPOINTS_PER_SUBSET: i32 = 1;
const MAX_MAX_ENDPOINTS_PER_SUBSET: i32 = 1000;

/// The controller's flags (KCM's names, defaults and help texts, the latter's "Defaults
/// to 100" included).
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    #[arg(
        long,
        default_value_t = 5,
        allow_negative_numbers = true,
        help = "The number of service endpoint syncing operations that will be done concurrently by the endpointslice-mirroring-controller. Larger number = faster endpoint slice updating, but more CPU (and network) load. Defaults to 5."
    )]
    pub mirroring_concurrent_service_endpoint_syncs: i32,
    #[arg(
        long,
        default_value_t = 1000,
        allow_negative_numbers = true,
        help = "The maximum number of endpoints that will be added to an EndpointSlice by the endpointslice-mirroring-controller. More endpoints per slice will result in less endpoint slices, but larger resources. Defaults to 100."
    )]
    pub mirroring_max_endpoints_per_subset: i32,
    #[arg(
        long,
        default_value = "0",
        value_parser = crate::flags::parse_go_duration,
        help = "The length of EndpointSlice updates batching period for endpointslice-mirroring-controller. Processing of EndpointSlice changes will be delayed by this duration to join them with potential upcoming updates and reduce the overall number of EndpointSlice updates. Larger number = higher endpoint programming latency, but lower number of endpoints revision generated"
    )]
    pub mirroring_endpointslice_updates_batch_period: Duration,
}

impl Options {
    /// KCM's checks of these flags, with its messages (several are reported together, in
    /// brackets, as KCM aggregates them).
    pub fn validate(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        let syncs = self.mirroring_concurrent_service_endpoint_syncs;
        if syncs < MIN_CONCURRENT_SYNCS {
            errors.push(format!("mirroring-concurrent-service-endpoint-syncs must not be less than {MIN_CONCURRENT_SYNCS}, but got {syncs}"));
        } else if syncs > MAX_CONCURRENT_SYNCS {
            errors.push(format!("mirroring-concurrent-service-endpoint-syncs must not be more than {MAX_CONCURRENT_SYNCS}, but got {syncs}"));
        }
        let max = self.mirroring_max_endpoints_per_subset;
        if max < MIN_MAX_ENDPOINTS_PER_SUBSET {
            errors.push(format!("mirroring-max-endpoints-per-subset must not be less than {MIN_MAX_ENDPOINTS_PER_SUBSET}, but got {max}"));
        } else if max > MAX_MAX_ENDPOINTS_PER_SUBSET {
            errors.push(format!("mirroring-max-endpoints-per-subset must not be more than {MAX_MAX_ENDPOINTS_PER_SUBSET}, but got {max}"));
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

pub(crate) struct Controller {
    endpoints: Store<Endpoints>,
    endpoint_slices: Store<EndpointSlice>,
    services: Store<Service>,
    tracker: Arc<EndpointSliceTracker>,
    reconciler: Reconciler,
    queue: Arc<WorkQueue<String>>,
    /// The delay of syncs queued by slice changes.
    batch_period: Duration,
    metrics: MirroringMetrics,
}

/// The controller; flags KCM refuses make the worker refuse to start (exit 2).
pub fn build(context: &ControllerContext, options: &Options) -> anyhow::Result<Runnable> {
    // Taken before the flags are looked at, so what the controller reads is what it
    // declares whether it starts or not.
    let endpoints = context.informers.get::<Endpoints>();
    let endpoint_slices = context.informers.get::<EndpointSlice>();
    let services = context.informers.get::<Service>();
    options.validate().map_err(UsageError)?;
    let workers = usize::try_from(options.mirroring_concurrent_service_endpoint_syncs)?;
    let max_endpoints_per_subset = usize::try_from(options.mirroring_max_endpoints_per_subset)?;

    let client = context.clients.client(NAME)?;
    let recorder = Recorder::new(client.clone(), EVENT_SOURCE);
    // As the default controller limiter, but backing off from 1 s to 100 s: a sync may
    // rewrite many slices, so failures are retried more gently.
    let queue: Arc<WorkQueue<String>> = WorkQueue::with_rate_limiter(
        QUEUE,
        Box::new(MaxOf::new(vec![
            Box::new(ItemExponentialFailure::new(
                Duration::from_secs(1),
                Duration::from_secs(100),
            )),
            Box::new(Bucket::new(10.0, 100)),
        ])),
        Some(context.metrics.workqueue.for_queue(QUEUE)),
    );
    let metrics = MirroringMetrics::register(&context.metrics);
    let tracker = Arc::new(EndpointSliceTracker::new());
    let controller = Arc::new(Controller {
        endpoints: endpoints.store().clone(),
        endpoint_slices: endpoint_slices.store().clone(),
        services: services.store().clone(),
        tracker: tracker.clone(),
        reconciler: Reconciler {
            client,
            tracker,
            recorder,
            max_endpoints_per_subset,
            metrics: metrics.clone(),
            cache: MetricsCache::new(max_endpoints_per_subset, metrics.clone()),
        },
        queue: queue.clone(),
        batch_period: options.mirroring_endpointslice_updates_batch_period,
        metrics,
    });
    endpoints.handle(&controller, Controller::on_endpoints);
    endpoint_slices.handle(&controller, Controller::on_endpoint_slice);
    services.handle(&controller, Controller::on_service);
    Ok(Runnable::new(
        NAME,
        queue,
        workers,
        controller,
        |controller, key| async move { controller.sync(&key).await },
    )
    .with_max_retries(MAX_RETRIES))
}

impl Controller {
    /// One sync, timed into `endpoints_sync_duration` whatever its outcome.
    async fn sync(&self, key: &str) -> anyhow::Result<()> {
        let started = Instant::now();
        let result = self.sync_endpoints(key).await;
        // Upstream measures whole milliseconds.
        let elapsed = started.elapsed();
        self.metrics
            .endpoints_sync_duration
            .observe(elapsed.as_millis() as f64 / 1000.0);
        debug!(
            controller = NAME,
            key,
            ?elapsed,
            "finished syncing EndpointSlices for Endpoints"
        );
        result
    }

    async fn sync_endpoints(&self, key: &str) -> anyhow::Result<()> {
        let (namespace, name) = split_key(key);
        let Some(endpoints) = self.endpoints.get_in(namespace, name) else {
            debug!(
                controller = NAME,
                key, "Endpoints not found; cleaning up any mirrored EndpointSlices"
            );
            return self.delete_mirrored_slices(namespace, name).await;
        };
        if !should_mirror(&endpoints) {
            debug!(
                controller = NAME,
                key, "Endpoints should not be mirrored; cleaning up any mirrored EndpointSlices"
            );
            return self.delete_mirrored_slices(namespace, name).await;
        }
        let Some(service) = self.services.get_in(namespace, name) else {
            debug!(
                controller = NAME,
                key, "Service not found; cleaning up any mirrored EndpointSlices"
            );
            return self.delete_mirrored_slices(namespace, name).await;
        };
        if service_selector(&service).is_some() {
            debug!(
                controller = NAME,
                key, "Service has a selector; cleaning up any mirrored EndpointSlices"
            );
            return self.delete_mirrored_slices(namespace, name).await;
        }
        let slices = self.mirrored_slices(namespace, name);
        let cached: Vec<&EndpointSlice> = slices.iter().map(|slice| &**slice).collect();
        if self.tracker.stale_slices(namespace, name, &cached) {
            anyhow::bail!("EndpointSlice informer cache is out of date");
        }
        self.reconciler.reconcile(&endpoints, &slices).await
    }

    /// The slices this controller mirrored for `namespace/name`, as the store has them.
    fn mirrored_slices(&self, namespace: &str, name: &str) -> Vec<Arc<EndpointSlice>> {
        self.endpoint_slices
            .list_namespace(namespace)
            .into_iter()
            .filter(|slice| {
                let labels = slice.metadata.labels.as_ref();
                let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
                label(SERVICE_NAME_LABEL) == Some(name)
                    && label(MANAGED_BY_LABEL) == Some(MANAGED_BY)
            })
            .collect()
    }

    /// Deletes every slice mirrored for `namespace/name` and forgets what was written.
    async fn delete_mirrored_slices(&self, namespace: &str, name: &str) -> anyhow::Result<()> {
        self.tracker.delete_service(namespace, name);
        let slices = self.mirrored_slices(namespace, name);
        self.reconciler
            .delete_endpoints(namespace, name, &slices)
            .await
    }
}

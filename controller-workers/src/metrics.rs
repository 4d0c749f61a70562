//! The worker's Prometheus metrics, with upstream's names so existing KCM dashboards work:
//! client-go's workqueue metrics (labelled `name`, one queue per controller) and
//! `running_managed_controllers{name,manager}`.

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

pub type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // client-go: ExponentialBuckets(10e-9, 10, 10), from 10 ns to 100 s.
    Histogram::new(exponential_buckets(10e-9, 10.0, 10))
}

/// One set of families shared by every queue of the process.
#[derive(Clone)]
pub struct WorkqueueMetrics {
    pub depth: Family<Labels, Gauge>,
    pub adds: Family<Labels, Counter>,
    pub queue_duration: HistogramFamily,
    pub work_duration: HistogramFamily,
    pub unfinished_work: Family<Labels, Gauge<f64, AtomicU64>>,
    pub longest_running: Family<Labels, Gauge<f64, AtomicU64>>,
    pub retries: Family<Labels, Counter>,
}

/// The handles of one queue.
#[derive(Clone)]
pub struct QueueMetrics {
    pub depth: Gauge,
    pub adds: Counter,
    pub queue_duration: Histogram,
    pub work_duration: Histogram,
    pub unfinished_work: Gauge<f64, AtomicU64>,
    pub longest_running: Gauge<f64, AtomicU64>,
    pub retries: Counter,
}

impl WorkqueueMetrics {
    pub fn for_queue(&self, name: &str) -> QueueMetrics {
        let labels = vec![("name".to_string(), name.to_string())];
        QueueMetrics {
            depth: self.depth.get_or_create(&labels).clone(),
            adds: self.adds.get_or_create(&labels).clone(),
            queue_duration: self.queue_duration.get_or_create(&labels).clone(),
            work_duration: self.work_duration.get_or_create(&labels).clone(),
            unfinished_work: self.unfinished_work.get_or_create(&labels).clone(),
            longest_running: self.longest_running.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
        }
    }
}

/// The process's registry and the families its parts record into.
#[derive(Clone)]
pub struct Metrics {
    pub registry: Arc<Mutex<Registry>>,
    pub workqueue: WorkqueueMetrics,
    pub running_controllers: Family<Labels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let workqueue = WorkqueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            workqueue.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            workqueue.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            workqueue.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            workqueue.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            workqueue.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            workqueue.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            workqueue.retries.clone(),
        );
        let running_controllers = Family::<Labels, Gauge>::default();
        registry.register(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            running_controllers.clone(),
        );
        Metrics {
            registry: Arc::new(Mutex::new(registry)),
            workqueue,
            running_controllers,
        }
    }

    /// Sets `running_managed_controllers{name, manager="rkcm"}`.
    /// Registers a controller's metric under its upstream name.
    pub fn register(
        &self,
        name: &str,
        help: &str,
        metric: impl prometheus_client::registry::Metric,
    ) {
        crate::locks::lock(&self.registry).register(name, help, metric);
    }

    pub fn controller_running(&self, name: &str, running: bool) {
        let labels = vec![
            ("manager".to_string(), "rkcm".to_string()),
            ("name".to_string(), name.to_string()),
        ];
        self.running_controllers
            .get_or_create(&labels)
            .set(i64::from(running));
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self
            .registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

/// A counter exposed under its own name: component-base's counters that upstream named
/// without the `_total` suffix prometheus-client's `Counter` would add
/// (`volume_operation_total_errors`, `endpoint_slice_controller_changes`, ...).
#[derive(Clone, Debug, Default)]
pub(crate) struct PlainCounter(std::sync::Arc<AtomicU64>);

impl PlainCounter {
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    #[cfg(test)]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl prometheus_client::metrics::TypedMetric for PlainCounter {
    const TYPE: prometheus_client::metrics::MetricType =
        prometheus_client::metrics::MetricType::Counter;
}

impl prometheus_client::encoding::EncodeMetric for PlainCounter {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        // The gauge encoding writes the sample under the family's name as it is.
        encoder.encode_gauge(&self.0.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Counter
    }
}

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

/// client-go's REST client metrics, shared by every controller's client of the process:
/// `rest_client_requests_total{code,method,host}`,
/// `rest_client_request_duration_seconds{verb,host}` (from sending to the response's
/// headers, the client-side rate limiter's wait excluded, as client-go measures) and
/// `rest_client_rate_limiter_duration_seconds{verb,host}` (that wait). kube's client hands
/// requests to the limiter one at a time, so the wait recorded is the one at the head of the
/// client's queue: requests queued behind it while the bucket is empty wait too, uncounted,
/// where client-go, whose callers each wait for their own token, counts every one.
#[derive(Clone)]
pub struct RestClientMetrics {
    pub requests: Family<Labels, Counter>,
    pub request_duration: HistogramFamily,
    pub rate_limiter_duration: HistogramFamily,
}

fn rest_latency_histogram() -> Histogram {
    // client-go's buckets for both latency histograms, 5 ms to 60 s.
    Histogram::new([
        0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
    ])
}

impl RestClientMetrics {
    fn new() -> Self {
        RestClientMetrics {
            requests: Family::default(),
            request_duration: Family::new_with_constructor(rest_latency_histogram),
            rate_limiter_duration: Family::new_with_constructor(rest_latency_histogram),
        }
    }

    /// Records one answered request (`code` is the HTTP status; client-go's `<error>` when
    /// no answer came).
    pub(crate) fn request(&self, method: &str, host: &str, code: &str, seconds: f64) {
        let (method, host) = (method.to_string(), host.to_string());
        self.requests
            .get_or_create(&vec![
                ("code".to_string(), code.to_string()),
                ("method".to_string(), method.clone()),
                ("host".to_string(), host.clone()),
            ])
            .inc();
        self.request_duration
            .get_or_create(&vec![
                ("verb".to_string(), method),
                ("host".to_string(), host),
            ])
            .observe(seconds);
    }

    /// Records how long a request waited for the client-side rate limiter.
    pub(crate) fn rate_limited(&self, method: &str, host: &str, seconds: f64) {
        self.rate_limiter_duration
            .get_or_create(&vec![
                ("verb".to_string(), method.to_string()),
                ("host".to_string(), host.to_string()),
            ])
            .observe(seconds);
    }
}

/// The process's registry and the families its parts record into.
#[derive(Clone)]
pub struct Metrics {
    pub registry: Arc<Mutex<Registry>>,
    pub workqueue: WorkqueueMetrics,
    pub running_controllers: Family<Labels, Gauge>,
    pub rest_client: RestClientMetrics,
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
        let rest_client = RestClientMetrics::new();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            rest_client.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            rest_client.request_duration.clone(),
        );
        registry.register(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            rest_client.rate_limiter_duration.clone(),
        );
        Metrics {
            registry: Arc::new(Mutex::new(registry)),
            workqueue,
            running_controllers,
            rest_client,
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

#[cfg(test)]
mod tests {
    use super::Metrics;

    #[test]
    fn rest_client_requests_are_recorded_under_client_go_names_and_labels() {
        let metrics = Metrics::new();
        metrics
            .rest_client
            .request("POST", "127.0.0.1:6443", "201", 0.012);
        metrics
            .rest_client
            .rate_limited("POST", "127.0.0.1:6443", 0.0);
        let text = metrics.encode();
        assert!(
            text.contains(
                "rest_client_requests_total{code=\"201\",method=\"POST\",host=\"127.0.0.1:6443\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains(
            "rest_client_request_duration_seconds_count{verb=\"POST\",host=\"127.0.0.1:6443\"} 1"
        ));
        assert!(text.contains(
            "rest_client_request_duration_seconds_bucket{le=\"0.025\",verb=\"POST\",host=\"127.0.0.1:6443\"} 1"
        ) || text.contains(
            "rest_client_request_duration_seconds_bucket{verb=\"POST\",host=\"127.0.0.1:6443\",le=\"0.025\"} 1"
        ));
        assert!(text.contains(
            "rest_client_rate_limiter_duration_seconds_count{verb=\"POST\",host=\"127.0.0.1:6443\"} 1"
        ));
    }
}

//! The job controller's metrics, named and labelled as upstream's `job_controller_*`
//! (pkg/controller/job/metrics).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::metrics::{Labels, Metrics};

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

fn sync_duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.004, 2.0, 15))
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[derive(Clone)]
pub(super) struct JobMetrics {
    sync_duration: HistogramFamily,
    syncs: Family<Labels, Counter>,
    finished: Family<Labels, Counter>,
    pods_finished: Family<Labels, Counter>,
    failures_by_policy: Family<Labels, Counter>,
    finished_indexes: Family<Labels, Counter>,
    pods_created: Family<Labels, Counter>,
}

impl JobMetrics {
    /// Registers the families in the worker's registry.
    pub(super) fn register(metrics: &Metrics) -> JobMetrics {
        let m = JobMetrics {
            sync_duration: Family::new_with_constructor(sync_duration_histogram),
            syncs: Family::default(),
            finished: Family::default(),
            pods_finished: Family::default(),
            failures_by_policy: Family::default(),
            finished_indexes: Family::default(),
            pods_created: Family::default(),
        };
        let mut registry = metrics.registry.lock().unwrap_or_else(|p| p.into_inner());
        registry.register(
            "job_controller_job_sync_duration_seconds",
            "The time it took to sync a job",
            m.sync_duration.clone(),
        );
        // Counters get their `_total` suffix from the encoder.
        registry.register(
            "job_controller_job_syncs",
            "The number of job syncs",
            m.syncs.clone(),
        );
        registry.register(
            "job_controller_jobs_finished",
            "The number of finished jobs",
            m.finished.clone(),
        );
        registry.register(
            "job_controller_job_pods_finished",
            "The number of finished Pods that are fully tracked",
            m.pods_finished.clone(),
        );
        registry.register(
            "job_controller_pod_failures_handled_by_failure_policy",
            "The number of failed Pods handled by failure policy with respect to the failure policy action applied based on the matched rule",
            m.failures_by_policy.clone(),
        );
        registry.register(
            "job_controller_job_finished_indexes",
            "The number of finished indexes",
            m.finished_indexes.clone(),
        );
        registry.register(
            "job_controller_job_pods_creation",
            "The number of Pods created by the Job controller labelled with a reason for the Pod creation",
            m.pods_created.clone(),
        );
        drop(registry);
        m
    }

    /// One sync: `action` is reconciling, tracking, pods_created or pods_deleted.
    pub(super) fn sync(&self, mode: &str, ok: bool, action: &str, seconds: f64) {
        let result = if ok { "success" } else { "error" };
        let l = labels(&[
            ("completion_mode", mode),
            ("result", result),
            ("action", action),
        ]);
        self.sync_duration.get_or_create(&l).observe(seconds);
        self.syncs.get_or_create(&l).inc();
    }

    pub(super) fn job_finished(&self, mode: &str, succeeded: bool, reason: &str) {
        let result = if succeeded { "succeeded" } else { "failed" };
        self.finished
            .get_or_create(&labels(&[
                ("completion_mode", mode),
                ("result", result),
                ("reason", reason),
            ]))
            .inc();
    }

    pub(super) fn pods_finished(&self, mode: &str, succeeded: u64, failed: u64) {
        for (result, count) in [("succeeded", succeeded), ("failed", failed)] {
            if count > 0 {
                self.pods_finished
                    .get_or_create(&labels(&[("completion_mode", mode), ("result", result)]))
                    .inc_by(count);
            }
        }
    }

    pub(super) fn failure_handled_by_policy(&self, action: &str) {
        self.failures_by_policy
            .get_or_create(&labels(&[("action", action)]))
            .inc();
    }

    pub(super) fn indexes_finished(&self, per_index: bool, succeeded: u64, failed: u64) {
        let limit = if per_index { "perIndex" } else { "global" };
        for (status, count) in [("succeeded", succeeded), ("failed", failed)] {
            if count > 0 {
                self.finished_indexes
                    .get_or_create(&labels(&[("status", status), ("backoffLimit", limit)]))
                    .inc_by(count);
            }
        }
    }

    /// Pod creations: `reason` is new, recreate_terminating_or_failed or recreate_failed.
    pub(super) fn pods_created(&self, reason: &str, succeeded: u64, failed: u64) {
        for (status, count) in [("succeeded", succeeded), ("failed", failed)] {
            if count > 0 {
                self.pods_created
                    .get_or_create(&labels(&[("reason", reason), ("status", status)]))
                    .inc_by(count);
            }
        }
    }
}

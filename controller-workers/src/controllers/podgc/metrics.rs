//! The pod garbage collector's metrics, named and labelled as upstream's
//! `pod_gc_collector_*` (pkg/controller/podgc/metrics): every forced deletion, and every one
//! that failed, by the pod's namespace and the step that chose it.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::metrics::{Labels, Metrics};

/// Why a pod was force-deleted: the `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reason {
    /// Finished (Succeeded or Failed) beyond `--terminated-pod-gc-threshold`.
    Terminated,
    /// Being deleted on a NotReady node tainted `node.kubernetes.io/out-of-service`.
    OutOfService,
    /// Bound to a node that no longer exists.
    Orphaned,
    /// Being deleted and never bound to a node.
    Unscheduled,
}

impl Reason {
    pub(super) fn label(self) -> &'static str {
        match self {
            Reason::Terminated => "terminated",
            Reason::OutOfService => "out-of-service",
            Reason::Orphaned => "orphaned",
            Reason::Unscheduled => "unscheduled",
        }
    }
}

#[derive(Clone)]
pub(super) struct PodGcMetrics {
    deletions: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
}

fn labels(namespace: &str, reason: Reason) -> Labels {
    vec![
        ("namespace".to_string(), namespace.to_string()),
        ("reason".to_string(), reason.label().to_string()),
    ]
}

impl PodGcMetrics {
    /// Registers the families in the worker's registry.
    pub(super) fn register(metrics: &Metrics) -> PodGcMetrics {
        let m = PodGcMetrics::unregistered();
        // Counters get their `_total` suffix from the encoder.
        metrics.register(
            "pod_gc_collector_force_delete_pods",
            "Number of pods that are being forcefully deleted since the Pod GC Controller started.",
            m.deletions.clone(),
        );
        metrics.register(
            "pod_gc_collector_force_delete_pod_errors",
            "Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.",
            m.errors.clone(),
        );
        m
    }

    /// Families recorded into but exported nowhere (tests).
    pub(super) fn unregistered() -> PodGcMetrics {
        PodGcMetrics {
            deletions: Family::default(),
            errors: Family::default(),
        }
    }

    pub(super) fn deletion(&self, namespace: &str, reason: Reason) {
        self.deletions
            .get_or_create(&labels(namespace, reason))
            .inc();
    }

    pub(super) fn error(&self, namespace: &str, reason: Reason) {
        self.errors.get_or_create(&labels(namespace, reason)).inc();
    }

    #[cfg(test)]
    pub(super) fn deletions(&self, namespace: &str, reason: Reason) -> u64 {
        self.deletions
            .get_or_create(&labels(namespace, reason))
            .get()
    }

    #[cfg(test)]
    pub(super) fn errors(&self, namespace: &str, reason: Reason) -> u64 {
        self.errors.get_or_create(&labels(namespace, reason)).get()
    }
}

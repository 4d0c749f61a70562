//! The HPA controller's metrics, named, labelled and bucketed as upstream's
//! `horizontal_pod_autoscaler_controller_*` (pkg/controller/podautoscaler/monitor): every
//! reconciliation and every metric computation, by the action it led to and the kind of
//! error it met.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::metrics::{Labels, Metrics};

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// The `action` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    ScaleUp,
    ScaleDown,
    None,
}

impl Action {
    fn label(self) -> &'static str {
        match self {
            Action::ScaleUp => "scale_up",
            Action::ScaleDown => "scale_down",
            Action::None => "none",
        }
    }

    /// The direction from `from` to `to`.
    pub(super) fn of(from: i32, to: i32) -> Action {
        match to.cmp(&from) {
            std::cmp::Ordering::Greater => Action::ScaleUp,
            std::cmp::Ordering::Less => Action::ScaleDown,
            std::cmp::Ordering::Equal => Action::None,
        }
    }
}

/// The `error` label: a problem of the HPA's spec, anything else, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ErrorKind {
    Spec,
    Internal,
    None,
}

impl ErrorKind {
    fn label(self) -> &'static str {
        match self {
            ErrorKind::Spec => "spec",
            ErrorKind::Internal => "internal",
            ErrorKind::None => "none",
        }
    }
}

const RECONCILIATION_HELP: &str = "The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.";

#[derive(Clone)]
pub(super) struct Monitor {
    reconciliations: Family<Labels, Counter>,
    reconciliation_duration: HistogramFamily,
    computations: Family<Labels, Counter>,
    computation_duration: HistogramFamily,
}

impl Monitor {
    /// Registers the families in the worker's registry.
    pub(super) fn register(metrics: &Metrics) -> Monitor {
        let m = Monitor {
            reconciliations: Family::default(),
            reconciliation_duration: Family::new_with_constructor(duration_histogram),
            computations: Family::default(),
            computation_duration: Family::new_with_constructor(duration_histogram),
        };
        // Counters get their `_total` suffix from the encoder.
        metrics.register(
            "horizontal_pod_autoscaler_controller_reconciliations",
            &format!("Number of reconciliations of HPA controller. {RECONCILIATION_HELP}"),
            m.reconciliations.clone(),
        );
        metrics.register(
            "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds",
            &format!("The time(seconds) that the HPA controller takes to reconcile once. {RECONCILIATION_HELP}"),
            m.reconciliation_duration.clone(),
        );
        metrics.register(
            "horizontal_pod_autoscaler_controller_metric_computation",
            "Number of metric computations. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type",
            m.computations.clone(),
        );
        metrics.register(
            "horizontal_pod_autoscaler_controller_metric_computation_duration_seconds",
            "The time(seconds) that the HPA controller takes to calculate one metric. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. The label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type",
            m.computation_duration.clone(),
        );
        m
    }

    pub(super) fn reconciliation(&self, action: Action, error: ErrorKind, took: Duration) {
        let labels: Labels = vec![
            ("action".into(), action.label().into()),
            ("error".into(), error.label().into()),
        ];
        self.reconciliations.get_or_create(&labels).inc();
        self.reconciliation_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    pub(super) fn computation(
        &self,
        action: Action,
        error: ErrorKind,
        took: Duration,
        metric_type: &str,
    ) {
        let labels: Labels = vec![
            ("action".into(), action.label().into()),
            ("error".into(), error.label().into()),
            ("metric_type".into(), metric_type.into()),
        ];
        self.computations.get_or_create(&labels).inc();
        self.computation_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }
}

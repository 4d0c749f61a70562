//! The controller's metrics with upstream's names: `storage_operation_duration_seconds`
//! (`pkg/volume/util/metrics.go`, per attach, detach and verification), the forced-detach
//! counter `attach_detach_controller_attachdetach_controller_forced_detaches{reason}` (its
//! subsystem and name both say "attach detach", as upstream registers it), and, counted at
//! scrape time from the two states and the pods, `attachdetach_controller_total_volumes`
//! and `storage_count_attachable_volumes_in_use`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;

use crate::locks::lock;
use crate::metrics::{Labels, Metrics, PlainCounter};

use super::actual::ActualState;
use super::desired::DesiredState;

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Why a detach did not wait for the node to unmount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ForceReason {
    Timeout,
    OutOfService,
}

impl ForceReason {
    pub(super) fn label(self) -> &'static str {
        match self {
            ForceReason::Timeout => "timeout",
            ForceReason::OutOfService => "out-of-service",
        }
    }
}

/// The counts the collector reports, refreshed by the populator's passes' callers.
pub(super) type InUseCounts = BTreeMap<(String, String), i64>;

#[derive(Clone)]
pub(super) struct AttachDetachMetrics {
    operations: HistogramFamily,
    forced_detaches: Family<Labels, PlainCounter>,
}

impl AttachDetachMetrics {
    pub(super) fn unregistered() -> AttachDetachMetrics {
        AttachDetachMetrics {
            operations: Family::new_with_constructor(crate::volume_util::operation_histogram),
            forced_detaches: Family::default(),
        }
    }

    pub(super) fn register(
        metrics: &Metrics,
        desired: Arc<Mutex<DesiredState>>,
        actual: Arc<Mutex<ActualState>>,
        in_use: Arc<dyn Fn() -> InUseCounts + Send + Sync>,
    ) -> AttachDetachMetrics {
        let m = AttachDetachMetrics::unregistered();
        let mut registry = lock(&metrics.registry);
        registry.register(
            "storage_operation_duration_seconds",
            "Storage operation duration",
            m.operations.clone(),
        );
        registry.register(
            "attach_detach_controller_attachdetach_controller_forced_detaches",
            "Number of times the A/D Controller performed a forced detach",
            m.forced_detaches.clone(),
        );
        registry.register_collector(Box::new(StateCollector {
            desired,
            actual,
            in_use,
        }));
        m
    }

    /// `OperationCompleteHook`: the operation's duration by plugin, name and outcome.
    pub(super) fn operation(&self, plugin: &str, operation: &str, success: bool, seconds: f64) {
        let labels = vec![
            ("volume_plugin".to_string(), plugin.to_string()),
            ("operation_name".to_string(), operation.to_string()),
            (
                "status".to_string(),
                if success { "success" } else { "fail-unknown" }.to_string(),
            ),
            ("migrated".to_string(), "false".to_string()),
        ];
        self.operations.get_or_create(&labels).observe(seconds);
    }

    pub(super) fn forced_detach(&self, reason: ForceReason) {
        let labels = vec![("reason".to_string(), reason.label().to_string())];
        self.forced_detaches.get_or_create(&labels).inc();
    }
}

struct StateCollector {
    desired: Arc<Mutex<DesiredState>>,
    actual: Arc<Mutex<ActualState>>,
    in_use: Arc<dyn Fn() -> InUseCounts + Send + Sync>,
}

impl fmt::Debug for StateCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StateCollector")
    }
}

/// `getTotalVolumesCount`: by (plugin, state); volumes known without a spec (seen only in
/// node status) are left out, as upstream finds no plugin for them.
pub(super) fn total_volumes(desired: &DesiredState, actual: &ActualState) -> InUseCounts {
    let mut counts = InUseCounts::new();
    for volume in desired.volumes_to_attach() {
        *counts
            .entry((volume.spec.plugin_label(), "desired_state_of_world".into()))
            .or_default() += 1;
    }
    for spec in actual.specs().into_iter().flatten() {
        *counts
            .entry((spec.plugin_label(), "actual_state_of_world".into()))
            .or_default() += 1;
    }
    counts
}

impl Collector for StateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let in_use = (self.in_use)();
        let mut family = encoder.encode_descriptor(
            "storage_count_attachable_volumes_in_use",
            "Measure number of volumes in use",
            None,
            MetricType::Gauge,
        )?;
        for ((node, plugin), value) in &in_use {
            let labels = [("node", node.as_str()), ("volume_plugin", plugin.as_str())];
            ConstGauge::new(*value).encode(family.encode_family(&labels)?)?;
        }
        let totals = {
            let desired = lock(&self.desired);
            let actual = lock(&self.actual);
            total_volumes(&desired, &actual)
        };
        let mut family = encoder.encode_descriptor(
            "attachdetach_controller_total_volumes",
            "Number of volumes in A/D Controller",
            None,
            MetricType::Gauge,
        )?;
        for ((plugin, state), value) in &totals {
            let labels = [("plugin_name", plugin.as_str()), ("state", state.as_str())];
            ConstGauge::new(*value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::attachdetach::volumes::VolumeSpec;
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn metrics_are_written_with_upstreams_names() {
        let metrics = Metrics::new();
        let desired = Arc::new(Mutex::new(DesiredState::default()));
        let actual = Arc::new(Mutex::new(ActualState::default()));
        let spec = VolumeSpec {
            name: "pv".into(),
            driver: "d".into(),
            handle: "h".into(),
            multi_attach: false,
        };
        {
            let mut dsw = lock(&desired);
            dsw.add_node("n1", false);
            dsw.add_pod("p", Arc::new(Pod::default()), &spec, "n1")
                .unwrap();
            let mut asw = lock(&actual);
            asw.mark_attached(&spec.unique_name(), Some(spec.clone()), "n1");
            asw.mark_attached("kubernetes.io/csi/d^seen", None, "n1");
        }
        let in_use: Arc<dyn Fn() -> InUseCounts + Send + Sync> = Arc::new(|| {
            InUseCounts::from([(("n1".to_string(), "kubernetes.io/csi:d".to_string()), 1)])
        });
        let m = AttachDetachMetrics::register(&metrics, desired, actual, in_use);
        m.operation("kubernetes.io/csi:d", "volume_attach", true, 0.2);
        m.forced_detach(ForceReason::OutOfService);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &lock(&metrics.registry)).unwrap();
        for want in [
            r#"storage_operation_duration_seconds_count{volume_plugin="kubernetes.io/csi:d",operation_name="volume_attach",status="success",migrated="false"} 1"#,
            r#"attach_detach_controller_attachdetach_controller_forced_detaches{reason="out-of-service"} 1"#,
            r#"attachdetach_controller_total_volumes{plugin_name="kubernetes.io/csi:d",state="desired_state_of_world"} 1"#,
            r#"attachdetach_controller_total_volumes{plugin_name="kubernetes.io/csi:d",state="actual_state_of_world"} 1"#,
            r#"storage_count_attachable_volumes_in_use{node="n1",volume_plugin="kubernetes.io/csi:d"} 1"#,
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
    }
}

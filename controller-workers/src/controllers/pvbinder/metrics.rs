//! The binder's metrics with upstream's names (`persistentvolume/metrics` and
//! `volume/util/metrics.go`): the `pv_collector_*` gauges counted from the controller's
//! own volume and claim caches at scrape time, `volume_operation_total_seconds` and
//! `volume_operation_total_errors` for provision and delete operations (measured from the
//! operation's first start to the bound claim or the deleted volume, kept in
//! [`OperationTimestamps`]), and the retroactive default-class counters.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;

use crate::locks::lock;
use crate::meta::ResourceNames;
use crate::metrics::{Labels, Metrics, PlainCounter};
use crate::store::Store;

use super::helpers::{claim_phase, volume_phase, CLAIM_BOUND, FILESYSTEM, VOLUME_BOUND};
use super::plugins::metric_plugin_name;

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

#[derive(Clone)]
pub(super) struct BinderMetrics {
    operation_seconds: HistogramFamily,
    operation_errors: Family<Labels, PlainCounter>,
    retroactive: Counter,
    retroactive_errors: Counter,
}

impl BinderMetrics {
    pub(super) fn unregistered() -> BinderMetrics {
        BinderMetrics {
            operation_seconds: Family::new_with_constructor(
                crate::volume_util::operation_histogram,
            ),
            operation_errors: Family::default(),
            retroactive: Counter::default(),
            retroactive_errors: Counter::default(),
        }
    }

    /// Registers the families, and the collector of the cache gauges, in the worker's
    /// registry.
    pub(super) fn register(
        metrics: &Metrics,
        volumes: Store<PersistentVolume>,
        claims: Store<PersistentVolumeClaim>,
    ) -> BinderMetrics {
        let m = BinderMetrics::unregistered();
        let mut registry = lock(&metrics.registry);
        registry.register(
            "volume_operation_total_seconds",
            "Storage operation end to end duration in seconds",
            m.operation_seconds.clone(),
        );
        registry.register(
            "volume_operation_total_errors",
            "Total volume operation errors",
            m.operation_errors.clone(),
        );
        // Counters get their `_total` suffix from the encoder.
        registry.register(
            "retroactive_storageclass",
            "Total number of retroactive StorageClass assignments to persistent volume claim",
            m.retroactive.clone(),
        );
        registry.register(
            "retroactive_storageclass_errors",
            "Total number of failed retroactive StorageClass assignments to persistent volume claim",
            m.retroactive_errors.clone(),
        );
        registry.register_collector(Box::new(CountCollector { volumes, claims }));
        m
    }

    /// `RecordRetroactiveStorageClassMetric`: a failure counts in both counters.
    pub(super) fn retroactive_storage_class(&self, success: bool) {
        self.retroactive.inc();
        if !success {
            self.retroactive_errors.inc();
        }
    }

    /// `RecordVolumeOperationErrorMetric`.
    fn operation_error(&self, plugin: &str, operation: &str) {
        let plugin = if plugin.is_empty() { "N/A" } else { plugin };
        self.operation_errors
            .get_or_create(&labels(plugin, operation))
            .inc();
    }

    fn operation_latency(&self, plugin: &str, operation: &str, seconds: f64) {
        self.operation_seconds
            .get_or_create(&labels(plugin, operation))
            .observe(seconds);
    }
}

fn labels(plugin: &str, operation: &str) -> Labels {
    vec![
        ("plugin_name".to_string(), plugin.to_string()),
        ("operation_name".to_string(), operation.to_string()),
    ]
}

/// The start of an operation (provision, keyed by claim; delete, keyed by volume name).
struct Started {
    plugin: String,
    operation: &'static str,
    at: Instant,
}

/// `OperationStartTimeCache`.
#[derive(Default)]
pub(super) struct OperationTimestamps {
    started: Mutex<HashMap<String, Started>>,
}

impl OperationTimestamps {
    /// Notes the start of `operation` for `key` unless one is noted already.
    pub(super) fn add_if_not_exist(&self, key: &str, plugin: &str, operation: &'static str) {
        lock(&self.started)
            .entry(key.to_string())
            .or_insert_with(|| Started {
                plugin: plugin.to_string(),
                operation,
                at: Instant::now(),
            });
    }

    pub(super) fn delete(&self, key: &str) {
        lock(&self.started).remove(key);
    }

    /// `RecordMetric`: a failure counts an error and keeps the start; a success records the
    /// latency since the start and forgets it. Nothing without a noted start.
    pub(super) fn record(&self, key: &str, failed: bool, metrics: &BinderMetrics) {
        let mut started = lock(&self.started);
        let Some(start) = started.get(key) else {
            return;
        };
        if failed {
            metrics.operation_error(&start.plugin, start.operation);
        } else {
            metrics.operation_latency(
                &start.plugin,
                start.operation,
                start.at.elapsed().as_secs_f64(),
            );
            started.remove(key);
        }
    }
}

/// The `pv_collector_*` gauges, counted from the caches when scraped.
struct CountCollector {
    volumes: Store<PersistentVolume>,
    claims: Store<PersistentVolumeClaim>,
}

impl fmt::Debug for CountCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("pv_collector")
    }
}

/// What the collector reports, by label value.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    /// (plugin_name, volume_mode) → volumes
    total: BTreeMap<(String, String), i64>,
    bound_volumes: BTreeMap<String, i64>,
    unbound_volumes: BTreeMap<String, i64>,
    bound_claims: BTreeMap<String, i64>,
    unbound_claims: BTreeMap<String, i64>,
}

fn count(volumes: &[Arc<PersistentVolume>], claims: &[Arc<PersistentVolumeClaim>]) -> Counts {
    let mut counts = Counts::default();
    for volume in volumes {
        let spec = volume.spec.as_ref();
        let mode = spec
            .and_then(|s| s.volume_mode.clone())
            .unwrap_or_else(|| FILESYSTEM.to_string());
        *counts
            .total
            .entry((metric_plugin_name(volume), mode))
            .or_default() += 1;
        // The field, not the beta annotation, as upstream counts.
        let class = spec
            .and_then(|s| s.storage_class_name.clone())
            .unwrap_or_default();
        let by_class = if volume_phase(volume) == VOLUME_BOUND {
            &mut counts.bound_volumes
        } else {
            &mut counts.unbound_volumes
        };
        *by_class.entry(class).or_default() += 1;
    }
    for claim in claims {
        let by_namespace = if claim_phase(claim) == CLAIM_BOUND {
            &mut counts.bound_claims
        } else {
            &mut counts.unbound_claims
        };
        *by_namespace
            .entry(claim.namespace_str().to_string())
            .or_default() += 1;
    }
    counts
}

impl Collector for CountCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let counts = count(&self.volumes.list(), &self.claims.list());
        let mut family = encoder.encode_descriptor(
            "pv_collector_total_pv_count",
            "Gauge measuring total number of persistent volumes",
            None,
            MetricType::Gauge,
        )?;
        for ((plugin, mode), value) in &counts.total {
            let labels = [
                ("plugin_name", plugin.as_str()),
                ("volume_mode", mode.as_str()),
            ];
            ConstGauge::new(*value).encode(family.encode_family(&labels)?)?;
        }
        let by_label: [(&str, &str, &str, &BTreeMap<String, i64>); 4] = [
            (
                "pv_collector_bound_pv_count",
                "Gauge measuring number of persistent volume currently bound",
                "storage_class",
                &counts.bound_volumes,
            ),
            (
                "pv_collector_unbound_pv_count",
                "Gauge measuring number of persistent volume currently unbound",
                "storage_class",
                &counts.unbound_volumes,
            ),
            (
                "pv_collector_bound_pvc_count",
                "Gauge measuring number of persistent volume claim currently bound",
                "namespace",
                &counts.bound_claims,
            ),
            (
                "pv_collector_unbound_pvc_count",
                "Gauge measuring number of persistent volume claim currently unbound",
                "namespace",
                &counts.unbound_claims,
            ),
        ];
        for (name, help, label, values) in by_label {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (value_label, value) in values {
                let labels = [(label, value_label.as_str())];
                ConstGauge::new(*value).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::helpers::fixtures::{pv, pvc};
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_by_plugin_class_and_namespace() {
        let volumes = [
            pv("a", "1Gi", json!({"status": {"phase": "Bound"}, "spec": {"storageClassName": "fast"}})),
            pv("b", "1Gi", json!({})),
            pv("c", "1Gi", json!({"spec": {"hostPath": null, "csi": {"driver": "d", "volumeHandle": "h"}, "volumeMode": "Block"}})),
        ]
        .map(Arc::new);
        let claims = [
            pvc("x", "1Gi", json!({"status": {"phase": "Bound"}})),
            pvc("y", "1Gi", json!({"metadata": {"namespace": "other"}})),
        ]
        .map(Arc::new);
        let counts = count(&volumes, &claims);
        assert_eq!(
            counts.total,
            BTreeMap::from([
                (("kubernetes.io/csi:d".into(), "Block".into()), 1),
                (("kubernetes.io/host-path".into(), "Filesystem".into()), 2),
            ])
        );
        assert_eq!(counts.bound_volumes, BTreeMap::from([("fast".into(), 1)]));
        assert_eq!(counts.unbound_volumes, BTreeMap::from([("".into(), 2)]));
        assert_eq!(counts.bound_claims, BTreeMap::from([("ns".into(), 1)]));
        assert_eq!(counts.unbound_claims, BTreeMap::from([("other".into(), 1)]));
    }

    #[test]
    fn exposition_keeps_upstream_names() {
        let metrics = Metrics::new();
        let volumes = Store::new();
        let claims = Store::new();
        let volume = Arc::new(pv("a", "1Gi", json!({})));
        volumes.apply("a".into(), volume);
        let binder = BinderMetrics::register(&metrics, volumes, claims);
        binder.retroactive_storage_class(true);
        binder.retroactive_storage_class(false);
        let timestamps = OperationTimestamps::default();
        timestamps.add_if_not_exist("ns/c", "example.com/p", "provision");
        timestamps.record("ns/c", true, &binder);
        timestamps.record("ns/c", false, &binder);
        timestamps.record("ns/c", false, &binder);
        let text = metrics.encode();
        for expected in [
            "retroactive_storageclass_total 2",
            "retroactive_storageclass_errors_total 1",
            "volume_operation_total_errors{plugin_name=\"example.com/p\",operation_name=\"provision\"} 1",
            "volume_operation_total_seconds_count{plugin_name=\"example.com/p\",operation_name=\"provision\"} 1",
            "pv_collector_total_pv_count{plugin_name=\"kubernetes.io/host-path\",volume_mode=\"Filesystem\"} 1",
            "pv_collector_unbound_pv_count{storage_class=\"\"} 1",
        ] {
            assert!(text.contains(expected), "{expected} in\n{text}");
        }
    }
}

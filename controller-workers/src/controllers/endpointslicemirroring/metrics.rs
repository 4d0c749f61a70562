//! The mirroring controller's metrics, named, bucketed and described as upstream's
//! `endpoint_slice_mirroring_controller_*` (pkg/controller/endpointslicemirroring/metrics),
//! plus upstream's cache of desired endpoints and slices per Endpoints that keeps the
//! three gauges.
//!
//! Upstream's `changes` counter has no `_total` suffix. The OpenMetrics encoder gives
//! every counter one, so it is exposed untyped under its exact name, which is what
//! dashboards query.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;

use crate::locks::lock;
use crate::metrics::Metrics;

use super::helpers::AddrTypePortMapKey;

const PREFIX: &str = "endpoint_slice_mirroring_controller";

fn per_sync_histogram() -> Histogram {
    Histogram::new(exponential_buckets(2.0, 2.0, 15))
}

/// A counter by `operation`, exposed under its name as given (no `_total`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Changes(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Changes {
    pub(super) fn inc(&self, operation: &'static str) {
        *lock(&self.0).entry(operation).or_default() += 1;
    }

    #[cfg(test)]
    pub(super) fn get(&self, operation: &str) -> u64 {
        lock(&self.0).get(operation).copied().unwrap_or_default()
    }
}

impl EncodeMetric for Changes {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (operation, count) in lock(&self.0).iter() {
            let labels = [("operation", *operation)];
            encoder.encode_family(&labels)?.encode_gauge(count)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Unknown
    }
}

#[derive(Clone)]
pub(crate) struct MirroringMetrics {
    pub(super) endpoints_added_per_sync: Histogram,
    pub(super) endpoints_updated_per_sync: Histogram,
    pub(super) endpoints_removed_per_sync: Histogram,
    pub(super) addresses_skipped_per_sync: Histogram,
    pub(super) endpoints_sync_duration: Histogram,
    pub(super) endpoints_desired: Gauge,
    pub(super) num_endpoint_slices: Gauge,
    pub(super) desired_endpoint_slices: Gauge,
    pub(super) changes: Changes,
}

impl MirroringMetrics {
    /// Metrics kept but exposed nowhere (unit tests).
    pub(super) fn unregistered() -> MirroringMetrics {
        MirroringMetrics {
            endpoints_added_per_sync: per_sync_histogram(),
            endpoints_updated_per_sync: per_sync_histogram(),
            endpoints_removed_per_sync: per_sync_histogram(),
            addresses_skipped_per_sync: per_sync_histogram(),
            endpoints_sync_duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            endpoints_desired: Gauge::default(),
            num_endpoint_slices: Gauge::default(),
            desired_endpoint_slices: Gauge::default(),
            changes: Changes::default(),
        }
    }

    /// Registers the metrics in the worker's registry.
    pub(super) fn register(metrics: &Metrics) -> MirroringMetrics {
        let m = MirroringMetrics::unregistered();
        let name = |suffix: &str| format!("{PREFIX}_{suffix}");
        let mut registry = lock(&metrics.registry);
        registry.register(
            name("endpoints_added_per_sync"),
            "Number of endpoints added on each Endpoints sync",
            m.endpoints_added_per_sync.clone(),
        );
        registry.register(
            name("endpoints_updated_per_sync"),
            "Number of endpoints updated on each Endpoints sync",
            m.endpoints_updated_per_sync.clone(),
        );
        registry.register(
            name("endpoints_removed_per_sync"),
            "Number of endpoints removed on each Endpoints sync",
            m.endpoints_removed_per_sync.clone(),
        );
        registry.register(
            name("addresses_skipped_per_sync"),
            "Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset",
            m.addresses_skipped_per_sync.clone(),
        );
        registry.register(
            name("endpoints_sync_duration"),
            "Duration of syncEndpoints() in seconds",
            m.endpoints_sync_duration.clone(),
        );
        registry.register(
            name("endpoints_desired"),
            "Number of endpoints desired",
            m.endpoints_desired.clone(),
        );
        registry.register(
            name("num_endpoint_slices"),
            "Number of EndpointSlices",
            m.num_endpoint_slices.clone(),
        );
        registry.register(
            name("desired_endpoint_slices"),
            "Number of EndpointSlices that would exist with perfect endpoint allocation",
            m.desired_endpoint_slices.clone(),
        );
        registry.register(
            name("changes"),
            "Number of EndpointSlice changes",
            m.changes.clone(),
        );
        drop(registry);
        m
    }
}

/// One group's desired endpoints and the slices it has after the sync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EfficiencyInfo {
    pub(super) endpoints: usize,
    pub(super) slices: usize,
}

/// An Endpoints' groups.
pub(crate) type EndpointPortCache = BTreeMap<AddrTypePortMapKey, EfficiencyInfo>;

fn num_endpoints(cache: &EndpointPortCache) -> usize {
    cache.values().map(|info| info.endpoints).sum()
}

#[derive(Default)]
struct CacheState {
    num_endpoints: usize,
    by_endpoints: HashMap<(String, String), EndpointPortCache>,
}

/// Every mirrored Endpoints' groups, from which the gauges are set: desired endpoints,
/// slices, and the slices a perfect packing would need.
pub(crate) struct MetricsCache {
    max_endpoints_per_slice: usize,
    metrics: MirroringMetrics,
    state: Mutex<CacheState>,
}

impl MetricsCache {
    pub(super) fn new(max_endpoints_per_slice: usize, metrics: MirroringMetrics) -> Self {
        MetricsCache {
            max_endpoints_per_slice: max_endpoints_per_slice.max(1),
            metrics,
            state: Mutex::new(CacheState::default()),
        }
    }

    /// Replaces the groups of the Endpoints `namespace/name`.
    pub(super) fn update_endpoint_port_cache(
        &self,
        namespace: &str,
        name: &str,
        cache: EndpointPortCache,
    ) {
        let mut state = lock(&self.state);
        let key = (namespace.to_string(), name.to_string());
        let previous = state.by_endpoints.get(&key).map(num_endpoints).unwrap_or(0);
        state.num_endpoints =
            (state.num_endpoints + num_endpoints(&cache)).saturating_sub(previous);
        state.by_endpoints.insert(key, cache);
        self.update_metrics(&state);
    }

    /// Forgets the Endpoints `namespace/name`.
    pub(super) fn delete_endpoints(&self, namespace: &str, name: &str) {
        let mut state = lock(&self.state);
        let key = (namespace.to_string(), name.to_string());
        if let Some(cache) = state.by_endpoints.remove(&key) {
            state.num_endpoints = state.num_endpoints.saturating_sub(num_endpoints(&cache));
            self.update_metrics(&state);
        }
    }

    /// (desired, actual) slices over every Endpoints.
    fn desired_and_actual_slices(&self, state: &CacheState) -> (usize, usize) {
        let mut desired = 0;
        let mut actual = 0;
        for cache in state.by_endpoints.values() {
            for info in cache.values() {
                actual += info.slices;
                desired += info.endpoints.div_ceil(self.max_endpoints_per_slice);
            }
        }
        (desired, actual)
    }

    fn update_metrics(&self, state: &CacheState) {
        let (desired, actual) = self.desired_and_actual_slices(state);
        let gauge = |value: usize| i64::try_from(value).unwrap_or(i64::MAX);
        self.metrics.num_endpoint_slices.set(gauge(actual));
        self.metrics.desired_endpoint_slices.set(gauge(desired));
        self.metrics
            .endpoints_desired
            .set(gauge(state.num_endpoints));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::EndpointPort;

    fn key(port: i32, family: &str) -> AddrTypePortMapKey {
        AddrTypePortMapKey::new(
            &[EndpointPort {
                port: Some(port),
                ..Default::default()
            }],
            family,
        )
    }

    fn info(endpoints: usize, slices: usize) -> EfficiencyInfo {
        EfficiencyInfo { endpoints, slices }
    }

    fn gauges(metrics: &MirroringMetrics) -> (i64, i64, i64) {
        (
            metrics.endpoints_desired.get(),
            metrics.num_endpoint_slices.get(),
            metrics.desired_endpoint_slices.get(),
        )
    }

    #[test]
    fn gauges_follow_the_cache() {
        let metrics = MirroringMetrics::unregistered();
        let cache = MetricsCache::new(100, metrics.clone());
        cache.update_endpoint_port_cache(
            "ns",
            "a",
            BTreeMap::from([
                (key(80, "IPv4"), info(150, 3)),
                (key(80, "IPv6"), info(0, 0)),
            ]),
        );
        // 150 endpoints would fit in 2 slices of 100; 3 exist.
        assert_eq!(gauges(&metrics), (150, 3, 2));
        cache.update_endpoint_port_cache(
            "ns",
            "b",
            BTreeMap::from([(key(443, "IPv4"), info(5, 1))]),
        );
        assert_eq!(gauges(&metrics), (155, 4, 3));
        // Replacing an Endpoints' groups replaces its counts.
        cache.update_endpoint_port_cache(
            "ns",
            "a",
            BTreeMap::from([(key(80, "IPv4"), info(10, 1))]),
        );
        assert_eq!(gauges(&metrics), (15, 2, 2));
        cache.delete_endpoints("ns", "a");
        assert_eq!(gauges(&metrics), (5, 1, 1));
        cache.delete_endpoints("ns", "unknown");
        assert_eq!(gauges(&metrics), (5, 1, 1));
    }

    #[test]
    fn changes_are_exposed_under_upstreams_name() {
        let mut registry = prometheus_client::registry::Registry::default();
        let changes = Changes::default();
        registry.register(
            "endpoint_slice_mirroring_controller_changes",
            "Number of EndpointSlice changes",
            changes.clone(),
        );
        changes.inc("create");
        changes.inc("create");
        changes.inc("delete");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("endpoint_slice_mirroring_controller_changes{operation=\"create\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("endpoint_slice_mirroring_controller_changes{operation=\"delete\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("_total"), "{text}");
        assert_eq!(changes.get("create"), 2);
    }
}

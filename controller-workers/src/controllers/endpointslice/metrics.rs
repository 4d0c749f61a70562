//! The controller's metrics, with upstream's `endpoint_slice_controller_*` names, labels
//! and buckets (`staging/src/k8s.io/endpointslice/metrics/metrics.go`), and the cache that
//! keeps the cluster-wide gauges (`metrics/cache.go`): per Service and port set, how many
//! endpoints it has and in how many slices, against how many slices a perfect packing
//! would need.
//!
//! Upstream's counters here are named without `_total` (`endpoint_slice_controller_syncs`,
//! `endpoint_slice_controller_changes`), which prometheus-client's own counter would add;
//! [`PlainCounter`] keeps the names as they are.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::endpointutil::PortMapKey;
use crate::locks::lock;
use crate::metrics::{Labels, Metrics, PlainCounter};

use super::StaleInformerCache;

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

fn endpoints_histogram() -> Histogram {
    Histogram::new(exponential_buckets(2.0, 2.0, 15))
}

fn default_histogram() -> Histogram {
    // client_golang's DefBuckets.
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

fn label(name: &str, value: &str) -> Labels {
    vec![(name.to_string(), value.to_string())]
}

#[derive(Clone)]
pub(super) struct SliceMetrics {
    endpoints_added_per_sync: Histogram,
    endpoints_removed_per_sync: Histogram,
    endpoints_desired: Gauge,
    num_endpoint_slices: Gauge,
    desired_endpoint_slices: Gauge,
    changes: Family<Labels, PlainCounter>,
    endpointslices_changed_per_sync: HistogramFamily,
    syncs: Family<Labels, PlainCounter>,
}

impl SliceMetrics {
    /// Metrics kept but exposed nowhere (unit tests).
    pub(super) fn unregistered() -> SliceMetrics {
        SliceMetrics {
            endpoints_added_per_sync: endpoints_histogram(),
            endpoints_removed_per_sync: endpoints_histogram(),
            endpoints_desired: Gauge::default(),
            num_endpoint_slices: Gauge::default(),
            desired_endpoint_slices: Gauge::default(),
            changes: Family::default(),
            endpointslices_changed_per_sync: Family::new_with_constructor(default_histogram),
            syncs: Family::default(),
        }
    }

    /// Registers the families in the worker's registry.
    pub(super) fn register(metrics: &Metrics) -> SliceMetrics {
        let m = SliceMetrics::unregistered();
        let mut registry = lock(&metrics.registry);
        registry.register(
            "endpoint_slice_controller_endpoints_added_per_sync",
            "Number of endpoints added on each Service sync",
            m.endpoints_added_per_sync.clone(),
        );
        registry.register(
            "endpoint_slice_controller_endpoints_removed_per_sync",
            "Number of endpoints removed on each Service sync",
            m.endpoints_removed_per_sync.clone(),
        );
        registry.register(
            "endpoint_slice_controller_endpoints_desired",
            "Number of endpoints desired",
            m.endpoints_desired.clone(),
        );
        registry.register(
            "endpoint_slice_controller_num_endpoint_slices",
            "Number of EndpointSlices",
            m.num_endpoint_slices.clone(),
        );
        registry.register(
            "endpoint_slice_controller_desired_endpoint_slices",
            "Number of EndpointSlices that would exist with perfect endpoint allocation",
            m.desired_endpoint_slices.clone(),
        );
        registry.register(
            "endpoint_slice_controller_changes",
            "Number of EndpointSlice changes",
            m.changes.clone(),
        );
        registry.register(
            "endpoint_slice_controller_endpointslices_changed_per_sync",
            "Number of EndpointSlices changed on each Service sync",
            m.endpointslices_changed_per_sync.clone(),
        );
        registry.register(
            "endpoint_slice_controller_syncs",
            "Number of EndpointSlice syncs",
            m.syncs.clone(),
        );
        drop(registry);
        m
    }

    /// Counts a sync by its outcome: `success`, `stale` (the slice cache was behind) or
    /// `error`.
    pub(super) fn track_sync(&self, result: &anyhow::Result<()>) {
        let outcome = match result {
            Ok(()) => "success",
            Err(error) if error.downcast_ref::<StaleInformerCache>().is_some() => "stale",
            Err(_) => "error",
        };
        self.syncs.get_or_create(&label("result", outcome)).inc();
    }

    /// Counts one slice written: `create`, `update` or `delete`.
    pub(super) fn change(&self, operation: &str) {
        self.changes
            .get_or_create(&label("operation", operation))
            .inc();
    }

    pub(super) fn endpoints_added_and_removed(&self, added: usize, removed: usize) {
        self.endpoints_added_per_sync.observe(added as f64);
        self.endpoints_removed_per_sync.observe(removed as f64);
    }

    /// The slices one sync wrote, labelled `Auto` when topology hints were on for the
    /// Service, else `Disabled`.
    pub(super) fn slices_changed(&self, topology: &str, changed: usize) {
        self.endpointslices_changed_per_sync
            .get_or_create(&label("topology", topology))
            .observe(changed as f64);
    }

    #[cfg(test)]
    pub(super) fn syncs(&self, outcome: &str) -> u64 {
        self.syncs.get_or_create(&label("result", outcome)).get()
    }

    #[cfg(test)]
    pub(super) fn gauges(&self) -> (i64, i64, i64) {
        (
            self.endpoints_desired.get(),
            self.num_endpoint_slices.get(),
            self.desired_endpoint_slices.get(),
        )
    }
}

/// The endpoints of one port set of a Service and the slices holding them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct EfficiencyInfo {
    pub(super) endpoints: usize,
    pub(super) slices: usize,
}

/// A Service's [`EfficiencyInfo`] by port set.
#[derive(Clone, Debug, Default)]
pub(super) struct ServicePortCache {
    items: BTreeMap<PortMapKey, EfficiencyInfo>,
}

impl ServicePortCache {
    pub(super) fn set(&mut self, key: PortMapKey, info: EfficiencyInfo) {
        self.items.insert(key, info);
    }

    /// (actual slices, desired slices, endpoints); a Service always has at least its
    /// placeholder slice.
    fn totals(&self, max_endpoints_per_slice: usize) -> (i64, i64, i64) {
        let (mut actual, mut desired, mut endpoints) = (0usize, 0usize, 0usize);
        for info in self.items.values() {
            endpoints += info.endpoints;
            actual += info.slices;
            desired += desired_slices(info.endpoints, max_endpoints_per_slice);
        }
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        (as_i64(actual), as_i64(desired.max(1)), as_i64(endpoints))
    }
}

/// The slices `endpoints` would take, packed perfectly.
fn desired_slices(endpoints: usize, max_endpoints_per_slice: usize) -> usize {
    endpoints.div_ceil(max_endpoints_per_slice.max(1))
}

#[derive(Default)]
struct Totals {
    endpoints: i64,
    actual_slices: i64,
    desired_slices: i64,
    services: HashMap<(String, String), ServicePortCache>,
}

/// The cluster-wide totals behind the `endpoints_desired`, `num_endpoint_slices` and
/// `desired_endpoint_slices` gauges, kept per Service so a sync replaces its Service's
/// share.
pub(super) struct PortCache {
    max_endpoints_per_slice: usize,
    totals: Mutex<Totals>,
    metrics: SliceMetrics,
}

impl PortCache {
    pub(super) fn new(max_endpoints_per_slice: usize, metrics: SliceMetrics) -> Self {
        PortCache {
            max_endpoints_per_slice,
            totals: Mutex::new(Totals::default()),
            metrics,
        }
    }

    /// Replaces the Service's share with `cache`.
    pub(super) fn update_service(&self, namespace: &str, name: &str, cache: ServicePortCache) {
        let mut totals = lock(&self.totals);
        let key = (namespace.to_string(), name.to_string());
        let (old_actual, old_desired, old_endpoints) = totals
            .services
            .get(&key)
            .map(|previous| previous.totals(self.max_endpoints_per_slice))
            .unwrap_or_default();
        let (actual, desired, endpoints) = cache.totals(self.max_endpoints_per_slice);
        totals.endpoints += endpoints - old_endpoints;
        totals.desired_slices += desired - old_desired;
        totals.actual_slices += actual - old_actual;
        totals.services.insert(key, cache);
        self.publish(&totals);
    }

    /// Drops a deleted Service's share.
    pub(super) fn delete_service(&self, namespace: &str, name: &str) {
        let mut totals = lock(&self.totals);
        let key = (namespace.to_string(), name.to_string());
        if let Some(cache) = totals.services.remove(&key) {
            let (actual, desired, endpoints) = cache.totals(self.max_endpoints_per_slice);
            totals.endpoints -= endpoints;
            totals.desired_slices -= desired;
            totals.actual_slices -= actual;
            self.publish(&totals);
        }
    }

    fn publish(&self, totals: &Totals) {
        self.metrics.num_endpoint_slices.set(totals.actual_slices);
        self.metrics
            .desired_endpoint_slices
            .set(totals.desired_slices);
        self.metrics.endpoints_desired.set(totals.endpoints);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::EndpointPort;

    fn key(port: i32) -> PortMapKey {
        PortMapKey::of(&[EndpointPort {
            port: Some(port),
            ..Default::default()
        }])
    }

    fn info(endpoints: usize, slices: usize) -> EfficiencyInfo {
        EfficiencyInfo { endpoints, slices }
    }

    #[test]
    fn gauges_follow_each_services_latest_share() {
        let metrics = SliceMetrics::unregistered();
        let cache = PortCache::new(100, metrics.clone());
        let mut web = ServicePortCache::default();
        web.set(key(80), info(250, 4));
        web.set(key(443), info(10, 1));
        cache.update_service("ns", "web", web);
        assert_eq!(metrics.gauges(), (260, 5, 4));

        let mut empty = ServicePortCache::default();
        empty.set(PortMapKey::of(&[]), info(0, 1));
        cache.update_service("ns", "empty", empty);
        assert_eq!(
            metrics.gauges(),
            (260, 6, 5),
            "a placeholder is desired too"
        );

        let mut web = ServicePortCache::default();
        web.set(key(80), info(100, 1));
        cache.update_service("ns", "web", web);
        assert_eq!(metrics.gauges(), (100, 2, 2));

        cache.delete_service("ns", "web");
        cache.delete_service("ns", "unknown");
        assert_eq!(metrics.gauges(), (0, 1, 1));
    }

    #[test]
    fn syncs_are_counted_by_outcome_and_encoded_without_a_suffix() {
        let registry = Metrics::new();
        let metrics = SliceMetrics::register(&registry);
        metrics.track_sync(&Ok(()));
        metrics.track_sync(&Err(StaleInformerCache::new("stale").into()));
        metrics.track_sync(&Err(anyhow::anyhow!("boom")));
        metrics.track_sync(&Ok(()));
        metrics.change("create");
        assert_eq!(metrics.syncs("success"), 2);
        assert_eq!(metrics.syncs("stale"), 1);
        assert_eq!(metrics.syncs("error"), 1);
        let text = registry.encode();
        for line in [
            "# TYPE endpoint_slice_controller_syncs counter",
            "endpoint_slice_controller_syncs{result=\"success\"} 2",
            "endpoint_slice_controller_changes{operation=\"create\"} 1",
            "endpoint_slice_controller_endpoints_desired 0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}

//! The node-lifecycle controller's metrics, with upstream's `node_collector_*` names and
//! buckets, labelled by zone key, registered in the worker's registry.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::metrics::{Labels, Metrics};

type ZoneGauge = Family<Labels, Gauge<f64, AtomicU64>>;

#[derive(Clone)]
pub(super) struct NodeMetrics {
    zone_health: ZoneGauge,
    zone_size: ZoneGauge,
    unhealthy_nodes: ZoneGauge,
    evictions: Family<Labels, Counter>,
    pub update_node_health: Histogram,
    pub update_all_nodes_health: Histogram,
}

fn zone(zone: &str) -> Labels {
    vec![("zone".to_string(), zone.to_string())]
}

impl NodeMetrics {
    pub(super) fn register(metrics: &Metrics) -> NodeMetrics {
        let m = NodeMetrics {
            zone_health: Family::default(),
            zone_size: Family::default(),
            unhealthy_nodes: Family::default(),
            evictions: Family::default(),
            update_node_health: Histogram::new(exponential_buckets(0.001, 4.0, 8)),
            update_all_nodes_health: Histogram::new(exponential_buckets(0.01, 4.0, 8)),
        };
        let mut registry = metrics.registry.lock().unwrap_or_else(|p| p.into_inner());
        registry.register(
            "node_collector_zone_health",
            "Gauge measuring percentage of healthy nodes per zone.",
            m.zone_health.clone(),
        );
        registry.register(
            "node_collector_zone_size",
            "Gauge measuring number of registered Nodes per zones.",
            m.zone_size.clone(),
        );
        registry.register(
            "node_collector_unhealthy_nodes_in_zone",
            "Gauge measuring number of not Ready Nodes per zones.",
            m.unhealthy_nodes.clone(),
        );
        // The encoder adds the `_total` suffix of counters.
        registry.register(
            "node_collector_evictions",
            "Number of Node evictions that happened since current instance of NodeController started.",
            m.evictions.clone(),
        );
        registry.register(
            "node_collector_update_node_health_duration_seconds",
            "Duration in seconds for NodeController to update the health of a single node.",
            m.update_node_health.clone(),
        );
        registry.register(
            "node_collector_update_all_nodes_health_duration_seconds",
            "Duration in seconds for NodeController to update the health of all nodes.",
            m.update_all_nodes_health.clone(),
        );
        m
    }

    pub(super) fn set_zone(&self, key: &str, size: usize, unhealthy: usize) {
        let labels = zone(key);
        self.zone_size.get_or_create(&labels).set(size as f64);
        let health = if size == 0 {
            100.0
        } else {
            100.0 * (size - unhealthy) as f64 / size as f64
        };
        self.zone_health.get_or_create(&labels).set(health);
        self.unhealthy_nodes
            .get_or_create(&labels)
            .set(unhealthy as f64);
    }

    pub(super) fn eviction(&self, key: &str) {
        self.evictions.get_or_create(&zone(key)).inc();
    }

    /// Makes the zone's eviction counter appear at 0.
    pub(super) fn init_zone(&self, key: &str) {
        let _ = self.evictions.get_or_create(&zone(key));
    }
}

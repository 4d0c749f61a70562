//! The CIDR sets' metrics, with upstream's `node_ipam_controller_cidrset_*` names (the
//! misspelt `cirdset_max_cidrs` included, for existing dashboards) and buckets, labelled
//! by `clusterCIDR`.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::metrics::{Labels, Metrics};

fn tries_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 5.0, 5))
}

#[derive(Clone)]
pub(crate) struct CidrSetMetrics {
    allocations: Family<Labels, Counter>,
    releases: Family<Labels, Counter>,
    max_cidrs: Family<Labels, Gauge>,
    usage: Family<Labels, Gauge<f64, AtomicU64>>,
    tries: Family<Labels, Histogram, fn() -> Histogram>,
}

fn cluster_cidr(label: &str) -> Labels {
    vec![("clusterCIDR".to_string(), label.to_string())]
}

impl CidrSetMetrics {
    /// Metrics kept but exposed nowhere (unit tests).
    pub(crate) fn unregistered() -> CidrSetMetrics {
        CidrSetMetrics {
            allocations: Family::default(),
            releases: Family::default(),
            max_cidrs: Family::default(),
            usage: Family::default(),
            tries: Family::new_with_constructor(tries_histogram),
        }
    }

    pub(crate) fn register(metrics: &Metrics) -> CidrSetMetrics {
        let m = CidrSetMetrics::unregistered();
        let mut registry = metrics.registry.lock().unwrap_or_else(|p| p.into_inner());
        // The encoder adds the `_total` suffix of counters.
        registry.register(
            "node_ipam_controller_cidrset_cidrs_allocations",
            "Counter measuring total number of CIDR allocations.",
            m.allocations.clone(),
        );
        registry.register(
            "node_ipam_controller_cidrset_cidrs_releases",
            "Counter measuring total number of CIDR releases.",
            m.releases.clone(),
        );
        registry.register(
            "node_ipam_controller_cirdset_max_cidrs",
            "Maximum number of CIDRs that can be allocated.",
            m.max_cidrs.clone(),
        );
        registry.register(
            "node_ipam_controller_cidrset_usage_cidrs",
            "Gauge measuring percentage of allocated CIDRs.",
            m.usage.clone(),
        );
        registry.register(
            "node_ipam_controller_cidrset_allocation_tries_per_request",
            "Number of used CIDRs skipped before a free one was found, per allocation.",
            m.tries.clone(),
        );
        m
    }

    pub(super) fn set_max(&self, label: &str, max: u64) {
        self.max_cidrs
            .get_or_create(&cluster_cidr(label))
            .set(i64::try_from(max).unwrap_or(i64::MAX));
    }

    pub(super) fn allocated(&self, label: &str, tries: u64) {
        self.allocations.get_or_create(&cluster_cidr(label)).inc();
        self.tries
            .get_or_create(&cluster_cidr(label))
            .observe(tries as f64);
    }

    pub(super) fn occupied(&self, label: &str, count: u64) {
        self.allocations
            .get_or_create(&cluster_cidr(label))
            .inc_by(count);
    }

    pub(super) fn released(&self, label: &str, count: u64) {
        self.releases
            .get_or_create(&cluster_cidr(label))
            .inc_by(count);
    }

    pub(super) fn set_usage(&self, label: &str, allocated: u64, max: u64) {
        self.usage
            .get_or_create(&cluster_cidr(label))
            .set(allocated as f64 / max as f64);
    }
}

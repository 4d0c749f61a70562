//! The publisher's metrics, named and labelled as upstream's `root_ca_cert_publisher_*`
//! (pkg/controller/certificates/rootcacertpublisher/metrics.go): one observation per
//! namespace sync, labelled with the HTTP code of its outcome.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::metrics::{Labels, Metrics};

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

fn sync_duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

#[derive(Clone)]
pub(super) struct PublisherMetrics {
    syncs: Family<Labels, Counter>,
    sync_duration: HistogramFamily,
}

impl PublisherMetrics {
    /// Registers the families in the worker's registry.
    pub(super) fn register(metrics: &Metrics) -> PublisherMetrics {
        let m = PublisherMetrics {
            syncs: Family::default(),
            sync_duration: Family::new_with_constructor(sync_duration_histogram),
        };
        let mut registry = metrics.registry.lock().unwrap_or_else(|p| p.into_inner());
        // Counters get their `_total` suffix from the encoder.
        registry.register(
            "root_ca_cert_publisher_sync",
            "Number of namespace syncs happened in root ca cert publisher.",
            m.syncs.clone(),
        );
        registry.register(
            "root_ca_cert_publisher_sync_duration_seconds",
            "Number of namespace syncs happened in root ca cert publisher.",
            m.sync_duration.clone(),
        );
        drop(registry);
        m
    }

    pub(super) fn record(&self, code: u16, seconds: f64) {
        let labels = vec![("code".to_string(), code.to_string())];
        self.sync_duration.get_or_create(&labels).observe(seconds);
        self.syncs.get_or_create(&labels).inc();
    }
}

/// The code a sync is counted under: 200 when it succeeded, the API's code when the API
/// refused, 500 otherwise.
pub(super) fn code_of(result: &anyhow::Result<()>) -> u16 {
    let Err(error) = result else {
        return 200;
    };
    error
        .chain()
        .find_map(|cause| match cause.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(status)) if status.code != 0 => Some(status.code),
            _ => None,
        })
        .unwrap_or(500)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_are_counted_by_their_outcome() {
        assert_eq!(code_of(&Ok(())), 200);
        assert_eq!(code_of(&Err(anyhow::anyhow!("no connection"))), 500);
        let forbidden = kube::Error::Api(Box::new(
            kube::core::Status::failure("configmaps is forbidden", "Forbidden").with_code(403),
        ));
        assert_eq!(
            code_of(&Err(anyhow::Error::new(forbidden).context("creating"))),
            403
        );
    }
}

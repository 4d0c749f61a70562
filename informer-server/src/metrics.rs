//! Prometheus metrics at `--metrics-bind-address` (`/metrics`; `/healthz` answers ok while
//! the process serves). Values are read from the caches' and queues' counters at scrape
//! time, so the event path pays for no metric bookkeeping beyond its own atomics.

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::informers::Informers;

#[derive(Debug)]
struct InformerCollector {
    informers: Arc<Informers>,
}

impl fmt::Debug for Informers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Informers")
    }
}

/// A metric's name, help, and how to read it from a row.
type Described<T> = (&'static str, &'static str, fn(&Row) -> T);

struct Row {
    resource: String,
    watches: i64,
    objects: i64,
    received: u64,
    delivered: u64,
    coalesced: u64,
    relists: u64,
    bytes_sent: u64,
    cached_bytes: i64,
    history_bytes: i64,
    queues: Vec<(String, i64)>,
}

impl Collector for InformerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let rows: Vec<Row> = self
            .informers
            .running()
            .iter()
            .map(|running| {
                let cache = &running.cache;
                let subscribers = cache.subscribers();
                let c = &cache.counters;
                let totals = cache.delivery_totals();
                Row {
                    resource: cache.info.gvr.path(),
                    watches: subscribers.len() as i64,
                    objects: cache.len() as i64,
                    received: c.events_received.load(Ordering::Relaxed),
                    delivered: totals.delivered,
                    coalesced: totals.coalesced,
                    relists: c.relists.load(Ordering::Relaxed),
                    bytes_sent: totals.bytes_sent,
                    cached_bytes: cache.cached_bytes() as i64,
                    history_bytes: cache.history_bytes() as i64,
                    queues: subscribers
                        .iter()
                        .map(|s| {
                            (
                                s.subscriber.clone(),
                                s.counters.depth.load(Ordering::Relaxed) as i64,
                            )
                        })
                        .collect(),
                }
            })
            .collect();
        let gauges: [Described<i64>; 4] = [
            (
                "rkcm_informer_watches",
                "Open Watch streams per resource.",
                |r| r.watches,
            ),
            (
                "rkcm_informer_cached_objects",
                "Objects in the cache per resource.",
                |r| r.objects,
            ),
            (
                "rkcm_informer_cached_bytes",
                "Bytes held by the cached objects per resource.",
                |r| r.cached_bytes,
            ),
            (
                "rkcm_informer_history_bytes",
                "Bytes of the object versions kept only for resuming subscribers (superseded and deleted states) per resource.",
                |r| r.history_bytes,
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for row in &rows {
                let labels = [("resource", row.resource.as_str())];
                ConstGauge::new(value(row)).encode(family.encode_family(&labels)?)?;
            }
        }
        let counters: [Described<u64>; 5] = [
            (
                "rkcm_informer_events_received",
                "Watch events received from the API server.",
                |r| r.received,
            ),
            (
                "rkcm_informer_events_delivered",
                "Events delivered to subscribers.",
                |r| r.delivered,
            ),
            (
                "rkcm_informer_events_coalesced",
                "Events merged into a pending event of the same object in a subscriber's queue.",
                |r| r.coalesced,
            ),
            (
                "rkcm_informer_relists",
                "Relists after the API server's watch history expired.",
                |r| r.relists,
            ),
            (
                "rkcm_informer_sent_bytes",
                "Bytes of Watch events sent to subscribers.",
                |r| r.bytes_sent,
            ),
        ];
        for (name, help, value) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for row in &rows {
                let labels = [("resource", row.resource.as_str())];
                ConstCounter::new(value(row)).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "rkcm_informer_subscriber_queue_depth",
            "Events waiting in a subscriber's queue (at most one per object).",
            None,
            MetricType::Gauge,
        )?;
        for row in &rows {
            for (subscriber, depth) in &row.queues {
                let labels = [
                    ("resource", row.resource.as_str()),
                    ("subscriber", subscriber.as_str()),
                ];
                ConstGauge::new(*depth).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// How long changes wait in subscribers' queues: from a watch event's change being offered
/// to a queue to the subscriber's stream taking it (one process-wide histogram; a
/// coalesced change counts once, from its oldest pending state).
fn delivery_latency() -> &'static Histogram {
    static DELIVERY: OnceLock<Histogram> = OnceLock::new();
    // 10 µs to ~42 s, doubling.
    DELIVERY.get_or_init(|| Histogram::new(exponential_buckets(1e-5, 2.0, 23)))
}

/// Records one object event leaving a subscriber's queue after `waited`.
pub fn observe_delivery(waited: Duration) {
    delivery_latency().observe(waited.as_secs_f64());
}

pub fn registry(informers: Arc<Informers>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(InformerCollector { informers }));
    registry.register(
        "rkcm_informer_delivery_latency_seconds",
        "Seconds an object's change waits in a subscriber's queue, from the watch event being offered to the stream taking it.",
        delivery_latency().clone(),
    );
    registry
}

/// Serves `/metrics` and `/healthz` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, registry: Arc<Registry>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "metrics listener accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let registry = registry.clone();
                async move { Ok::<_, Infallible>(respond(&request, &registry)) }
            });
            if let Err(error) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, %error, "metrics connection ended");
            }
        });
    }
}

fn respond(request: &Request<Incoming>, registry: &Registry) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match request.uri().path() {
        "/metrics" => {
            let mut text = String::new();
            match prometheus_client::encoding::text::encode(&mut text, registry) {
                Ok(()) => (
                    200,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    text,
                ),
                Err(_) => (500, "text/plain", "metrics encoding failed\n".to_string()),
            }
        }
        "/healthz" | "/livez" | "/readyz" => (200, "text/plain", "ok".to_string()),
        _ => (404, "text/plain", "404 page not found\n".to_string()),
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

pub fn bind_addr(addr: &str) -> Result<SocketAddr, String> {
    addr.parse()
        .map_err(|e| format!("--metrics-bind-address {addr:?} is not HOST:PORT: {e}"))
}

//! What the converge benchmark prints: times and ratio, where the time goes, and the API
//! requests against the minimum and upstream's.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::common::prom::{Histogram, Scrape};
use super::{Converge, DEPLOYMENTS, INFORMER_USER, PODS, REPLICAS, WORKER_USER};

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.1} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

/// `histogram` of the later scrape minus the earlier.
fn delta(scrapes: &(Scrape, Scrape), base: &str, filter: &[(&str, &str)]) -> Histogram {
    scrapes
        .1
        .histogram(base, filter)
        .since(&scrapes.0.histogram(base, filter))
}

/// A counter's growth between the scrapes (with or without the `_total` suffix).
fn grew(scrapes: &(Scrape, Scrape), name: &str, filter: &[(&str, &str)]) -> f64 {
    let total = format!("{name}_total");
    let value = |s: &Scrape| s.sum(name, filter) + s.sum(&total, filter);
    value(&scrapes.1) - value(&scrapes.0)
}

fn histogram_line(label: &str, h: &Histogram) -> String {
    format!(
        "  {label:<34} n={:<6} sum {:>9}  mean {:>9}  p50 {:>9}  p99 {:>9}",
        h.count,
        secs(h.sum),
        secs(h.mean()),
        secs(h.quantile(0.5)),
        secs(h.quantile(0.99))
    )
}

pub(super) fn print(run: &Converge, first: (Duration, Duration), second: (Duration, Duration)) {
    let base = (first.1 + second.1) / 2;
    println!();
    println!(
        "baseline, a plain client creating {PODS} pods: {} before the rkcm run (creates answered in {}), \
         {} after (answered in {}); mean {}",
        ms(first.1),
        ms(first.0),
        ms(second.1),
        ms(second.0),
        ms(base)
    );
    println!(
        "rkcm: all {PODS} pods exist {} after the first Deployment create = {:.2}x the baseline (goal <= 1.3x)",
        ms(run.last_pod),
        run.last_pod.as_secs_f64() / base.as_secs_f64()
    );
    timeline(run);
    slow_start(run);
    breakdown(run);
    requests(run);
}

fn timeline(run: &Converge) {
    let offsets = |seen: &[(Instant, Option<String>, String)]| {
        let mut at: Vec<Duration> = seen
            .iter()
            .map(|(t, _, _)| t.saturating_duration_since(run.start))
            .collect();
        at.sort();
        at
    };
    let (rs, pods) = (offsets(&run.replicasets), offsets(&run.pods));
    let nth = |v: &[Duration], i: usize| v.get(i).copied().map(ms).unwrap_or_else(|| "-".into());
    println!();
    println!("timeline (from the first Deployment create, as the bench's watches saw it):");
    println!(
        "  all {DEPLOYMENTS} Deployment creates answered  {}",
        ms(run.deployments_created)
    );
    println!(
        "  ReplicaSets: first {}, last {} ({} seen)",
        nth(&rs, 0),
        nth(&rs, rs.len().saturating_sub(1)),
        rs.len()
    );
    println!(
        "  pods: first {}, 50% {}, 90% {}, last {}",
        nth(&pods, 0),
        nth(&pods, pods.len() / 2),
        nth(&pods, pods.len() * 9 / 10),
        nth(&pods, pods.len().saturating_sub(1))
    );
}

/// The batch sizes of upstream's slowStartBatch for `n` creations: 1, 2, 4, ... capped by
/// what remains.
fn batch_sizes(mut n: usize) -> Vec<usize> {
    let (mut sizes, mut size) = (Vec::new(), 1);
    while n > 0 {
        let this = size.min(n);
        sizes.push(this);
        n -= this;
        size *= 2;
    }
    sizes
}

fn slow_start(run: &Converge) {
    let rs_seen: HashMap<&str, Instant> = run
        .replicasets
        .iter()
        .map(|(t, _, uid)| (uid.as_str(), *t))
        .collect();
    let mut pods_of: HashMap<&str, Vec<Instant>> = HashMap::new();
    for (t, owner, _) in &run.pods {
        if let Some(owner) = owner {
            pods_of.entry(owner.as_str()).or_default().push(*t);
        }
    }
    let sizes = batch_sizes(REPLICAS);
    let mut per_batch: Vec<Vec<Duration>> = vec![Vec::new(); sizes.len()];
    let mut whole: Vec<Duration> = Vec::new();
    for (rs, pods) in &mut pods_of {
        let Some(seen) = rs_seen.get(rs) else {
            continue;
        };
        if pods.len() != REPLICAS {
            continue;
        }
        pods.sort();
        let (mut previous, mut end) = (*seen, 0);
        for (k, size) in sizes.iter().enumerate() {
            end += size;
            let last = pods[end - 1];
            per_batch[k].push(last.saturating_duration_since(previous));
            previous = last;
        }
        whole.push(previous.saturating_duration_since(*seen));
    }
    println!();
    println!(
        "slow start, per ReplicaSet (upstream's slowStartBatch: batches of {sizes:?}; each batch's \
         time from the previous batch's last pod, the first from the ReplicaSet being seen; {} ReplicaSets):",
        whole.len()
    );
    let stats = |v: &[Duration]| {
        let mean = v
            .iter()
            .sum::<Duration>()
            .checked_div(v.len() as u32)
            .unwrap_or_default();
        let max = v.iter().max().copied().unwrap_or_default();
        (mean, max)
    };
    for (k, durations) in per_batch.iter().enumerate() {
        let (mean, max) = stats(durations);
        println!(
            "  batch {k} ({:>2} pods): mean {:>7}, max {:>7}",
            sizes[k],
            ms(mean),
            ms(max)
        );
    }
    let (mean, max) = stats(&whole);
    println!(
        "  ReplicaSet seen -> its last pod: mean {}, max {}",
        ms(mean),
        ms(max)
    );
}

fn breakdown(run: &Converge) {
    println!();
    println!(
        "CPU during the converge (until the writes settled): worker {:.2} s, informer-server {:.2} s, \
         bench process (kube-sim, the bench's watches) {:.2} s",
        run.cpu[0], run.cpu[1], run.cpu[2]
    );
    println!();
    println!(
        "where the time goes (worker and informer-server /metrics, converge only; the workqueue \
         histograms have client-go's decade buckets, so their quantiles are coarse):"
    );
    for queue in run
        .worker
        .1
        .label_values("workqueue_queue_duration_seconds_count", "name")
    {
        let filter = [("name", queue.as_str())];
        println!(
            "  queue {queue}: {} adds, {} retries",
            grew(&run.worker, "workqueue_adds", &filter),
            grew(&run.worker, "workqueue_retries", &filter)
        );
        println!(
            "{}",
            histogram_line(
                "  queue wait",
                &delta(&run.worker, "workqueue_queue_duration_seconds", &filter)
            )
        );
        println!(
            "{}",
            histogram_line(
                "  work (sync)",
                &delta(&run.worker, "workqueue_work_duration_seconds", &filter)
            )
        );
    }
    for verb in run
        .worker
        .1
        .label_values("rest_client_request_duration_seconds_count", "verb")
    {
        let filter = [("verb", verb.as_str())];
        let requests = delta(&run.worker, "rest_client_request_duration_seconds", &filter);
        if requests.count == 0.0 {
            continue;
        }
        println!(
            "{}",
            histogram_line(&format!("request latency {verb}"), &requests)
        );
        let limiter = delta(
            &run.worker,
            "rest_client_rate_limiter_duration_seconds",
            &filter,
        );
        println!(
            "{}",
            histogram_line(&format!("  client rate limiter {verb}"), &limiter)
        );
    }
    let hop = delta(&run.informer, "rkcm_informer_delivery_latency_seconds", &[]);
    println!(
        "{}",
        histogram_line("informer-server queue -> stream", &hop)
    );
    let mut resources = run
        .informer
        .1
        .label_values("rkcm_informer_events_received_total", "resource");
    resources.extend(
        run.informer
            .1
            .label_values("rkcm_informer_events_received", "resource"),
    );
    resources.sort();
    resources.dedup();
    for resource in resources {
        let filter = [("resource", resource.as_str())];
        let received = grew(&run.informer, "rkcm_informer_events_received", &filter);
        if received == 0.0 {
            continue;
        }
        println!(
            "  informer {resource}: {received} events received, {} delivered, {} coalesced",
            grew(&run.informer, "rkcm_informer_events_delivered", &filter),
            grew(&run.informer, "rkcm_informer_events_coalesced", &filter)
        );
    }
}

/// The minimum and upstream 1.29's count for a request kind in this scenario (see the
/// README's converge section for how the upstream figures were read off its controllers).
fn expected(verb: &str, resource: &str, subresource: &str) -> (String, String) {
    let d = DEPLOYMENTS;
    match (verb, resource, subresource) {
        ("create", "replicasets", "") => (d.to_string(), d.to_string()),
        ("create", "pods", "") => (PODS.to_string(), PODS.to_string()),
        ("update", "deployments", "status") => (
            format!("{}", 3 * d),
            format!("{}..{}", 3 * d, d * (2 + REPLICAS)),
        ),
        ("update", "replicasets", "status") => (
            format!("{}", 2 * d),
            format!("{}..{}", 2 * d, d * (REPLICAS + 1)),
        ),
        ("create", "events", "") => ("0".into(), format!("{}", d * (10 + 1))),
        ("patch", "events", "") => ("0".into(), format!("{}", d * 15)),
        ("list" | "watch", _, _) => ("-".into(), "-".into()),
        _ => ("0".into(), "0".into()),
    }
}

fn requests(run: &Converge) {
    println!();
    println!("API requests during the converge (kube-sim's kube_sim_requests_by_user_total):");
    println!(
        "  (events the worker's recorder dropped, its queue of 1,000 full as client-go's broadcaster's: {})",
        run.dropped_events
    );
    println!(
        "  {:<9} {:<8} {:<13} {:<12} {:>7} {:>7} {:>9} {:>14}",
        "process", "verb", "resource", "subresource", "rkcm", "failed", "minimum", "upstream 1.29"
    );
    for ((user, verb, resource, subresource), (count, failed)) in &run.requests {
        let process = match user.as_str() {
            WORKER_USER => "worker",
            INFORMER_USER => "informer",
            other => other,
        };
        let (minimum, upstream) = expected(verb, resource, subresource);
        println!(
            "  {process:<9} {verb:<8} {resource:<13} {subresource:<12} {count:>7} {failed:>7} {minimum:>9} {upstream:>14}"
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn slow_start_batches_of_fifty() {
        assert_eq!(super::batch_sizes(50), vec![1, 2, 4, 8, 16, 19]);
        assert_eq!(super::batch_sizes(1), vec![1]);
        assert!(super::batch_sizes(0).is_empty());
    }
}

//! Zones, their disruption state and their rate-limited NoExecute tainters (upstream's
//! `ComputeZoneState`, `GetZoneKey` and `scheduler.RateLimitedTimedQueue`).
//!
//! Each zone has a queue of nodes waiting for their NoExecute taint, drained by the
//! tainting pass under a token bucket of burst 1, so a zone loses at most
//! `--node-eviction-rate` nodes a second to evictions; the health monitor slows or stops
//! that bucket when a large part of the zone, or of the whole cluster, is down — then the
//! fault is more likely the control plane's view than the nodes.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeCondition};

/// Nodes with this label do not count in their zone's state.
pub(super) const EXCLUDE_DISRUPTION_LABEL: &str = "node.kubernetes.io/exclude-disruption";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ZoneState {
    Initial,
    Normal,
    PartialDisruption,
    FullDisruption,
}

/// `region:\0:zone` from the topology labels (or their deprecated beta names); empty
/// for a node in neither.
pub(super) fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let label = |stable: &str, beta: &str| {
        labels
            .and_then(|l| l.get(stable).or_else(|| l.get(beta)))
            .cloned()
            .unwrap_or_default()
    };
    let region = label(
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    );
    let zone = label(
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    );
    if region.is_empty() && zone.is_empty() {
        String::new()
    } else {
        format!("{region}:\x00:{zone}")
    }
}

pub(super) fn excluded_from_disruption(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(EXCLUDE_DISRUPTION_LABEL))
}

/// (not-Ready nodes, state) of a zone from its nodes' Ready conditions (`None` for a
/// node that never posted one, which counts as not Ready).
pub(super) fn zone_state(
    ready: &[Option<NodeCondition>],
    unhealthy_threshold: f32,
) -> (usize, ZoneState) {
    let ready_nodes = ready
        .iter()
        .filter(|c| c.as_ref().is_some_and(|c| c.status == "True"))
        .count();
    let not_ready = ready.len() - ready_nodes;
    let state = if ready_nodes == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && (not_ready as f32) / (ready.len() as f32) >= unhealthy_threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    };
    (not_ready, state)
}

/// The eviction rate a zone of `size` nodes gets in `state`.
pub(super) fn zone_rate(
    state: ZoneState,
    size: usize,
    eviction_rate: f32,
    secondary_rate: f32,
    large_cluster: i32,
) -> f32 {
    match state {
        ZoneState::PartialDisruption if (size as i64) > i64::from(large_cluster) => secondary_rate,
        ZoneState::PartialDisruption => 0.0,
        ZoneState::Normal | ZoneState::FullDisruption | ZoneState::Initial => eviction_rate,
    }
}

/// A token bucket of burst 1 that is asked, never waited on; a rate of 0 or less
/// refuses everything.
#[derive(Debug)]
pub(super) struct Limiter {
    qps: f32,
    tokens: f64,
    last: Instant,
}

impl Limiter {
    pub(super) fn new(qps: f32, now: Instant) -> Limiter {
        Limiter {
            qps,
            tokens: 1.0,
            last: now,
        }
    }

    pub(super) fn qps(&self) -> f32 {
        self.qps
    }

    pub(super) fn try_accept(&mut self, now: Instant) -> bool {
        if self.qps <= 0.0 {
            return false;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * f64::from(self.qps)).min(1.0);
        self.last = now.max(self.last);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Queued {
    pub node: String,
    pub process_at: Instant,
}

/// One zone's nodes waiting for a NoExecute taint, in order of when they may be
/// processed. A node stays known after being processed, so it is not queued again until
/// [`Tainter::remove`] forgets it (when it is healthy again).
#[derive(Debug)]
pub(super) struct Tainter {
    queue: Vec<Queued>,
    known: HashSet<String>,
    limiter: Limiter,
}

impl Tainter {
    pub(super) fn new(qps: f32, now: Instant) -> Tainter {
        Tainter {
            queue: Vec::new(),
            known: HashSet::new(),
            limiter: Limiter::new(qps, now),
        }
    }

    /// Queues the node unless it is already known; says whether it was queued.
    pub(super) fn add(&mut self, node: &str, now: Instant) -> bool {
        if !self.known.insert(node.to_string()) {
            return false;
        }
        self.queue.push(Queued {
            node: node.to_string(),
            process_at: now,
        });
        self.sort();
        true
    }

    /// Forgets the node; says whether it was known.
    pub(super) fn remove(&mut self, node: &str) -> bool {
        self.queue.retain(|q| q.node != node);
        self.known.remove(node)
    }

    fn sort(&mut self) {
        self.queue.sort_by_key(|q| q.process_at);
    }

    /// The head of the queue if it is due and the limiter lets one more through. As
    /// upstream, a token is spent on a head that is not due yet.
    pub(super) fn next_due(&mut self, now: Instant) -> Option<Queued> {
        let head = self.queue.first()?.clone();
        if !self.limiter.try_accept(now) || now < head.process_at {
            return None;
        }
        Some(head)
    }

    /// Records the outcome for a node [`Tainter::next_due`] gave out: done, or retried
    /// after `retry_after`.
    pub(super) fn finish(&mut self, node: &str, done: bool, retry_after: Duration, now: Instant) {
        if done {
            self.queue.retain(|q| q.node != node);
        } else if let Some(entry) = self.queue.iter_mut().find(|q| q.node == node) {
            entry.process_at = now + retry_after + Duration::from_nanos(1);
            self.sort();
        }
    }

    /// A new rate; a bucket that was empty starts empty, so a swap never grants an
    /// extra eviction.
    pub(super) fn swap_limiter(&mut self, qps: f32, now: Instant) {
        if self.limiter.qps() == qps {
            return;
        }
        let mut limiter = Limiter::new(qps, now);
        if qps > 0.0 && !self.limiter.try_accept(now) {
            limiter.try_accept(now);
        }
        self.limiter = limiter;
    }

    #[cfg(test)]
    pub(super) fn queued(&self) -> Vec<String> {
        self.queue.iter().map(|q| q.node.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ready(status: &str) -> Option<NodeCondition> {
        Some(NodeCondition {
            type_: "Ready".into(),
            status: status.into(),
            ..Default::default()
        })
    }

    #[test]
    fn zone_states() {
        use ZoneState::*;
        type Case = (Vec<Option<NodeCondition>>, (usize, ZoneState));
        let cases: Vec<Case> = vec![
            (vec![ready("True"), ready("True")], (0, Normal)),
            (vec![ready("False"), ready("Unknown")], (2, FullDisruption)),
            (vec![None], (1, FullDisruption)),
            (
                vec![ready("True"), ready("False"), ready("Unknown")],
                (2, Normal),
            ),
            (
                vec![ready("True"), ready("False"), ready("Unknown"), None],
                (3, PartialDisruption),
            ),
            (
                vec![
                    ready("True"),
                    ready("True"),
                    ready("True"),
                    ready("False"),
                    ready("False"),
                    ready("False"),
                ],
                (3, Normal),
            ),
            (vec![], (0, Normal)),
        ];
        for (conditions, want) in cases {
            assert_eq!(zone_state(&conditions, 0.55), want, "{conditions:?}");
        }
    }

    #[test]
    fn zone_rates() {
        use ZoneState::*;
        assert_eq!(zone_rate(Normal, 3, 0.1, 0.01, 50), 0.1);
        assert_eq!(zone_rate(FullDisruption, 3, 0.1, 0.01, 50), 0.1);
        assert_eq!(zone_rate(PartialDisruption, 50, 0.1, 0.01, 50), 0.0);
        assert_eq!(zone_rate(PartialDisruption, 51, 0.1, 0.01, 50), 0.01);
    }

    #[test]
    fn zone_keys() {
        let node = |labels: serde_json::Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).unwrap()
        };
        assert_eq!(
            zone_key(&node(
                json!({"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "a"})
            )),
            "r:\x00:a"
        );
        assert_eq!(
            zone_key(&node(
                json!({"failure-domain.beta.kubernetes.io/zone": "b"})
            )),
            ":\x00:b"
        );
        assert_eq!(zone_key(&node(json!({}))), "");
    }

    #[test]
    fn the_tainter_lets_one_node_through_per_token() {
        let t0 = Instant::now();
        let mut tainter = Tainter::new(0.1, t0);
        assert!(tainter.add("a", t0));
        assert!(tainter.add("b", t0));
        assert!(!tainter.add("a", t0), "a known node is not queued twice");
        let first = tainter.next_due(t0).unwrap();
        assert_eq!(first.node, "a");
        tainter.finish("a", true, Duration::ZERO, t0);
        assert_eq!(tainter.next_due(t0 + Duration::from_secs(5)), None);
        let second = tainter.next_due(t0 + Duration::from_secs(10)).unwrap();
        assert_eq!(second.node, "b");
        tainter.finish("b", true, Duration::ZERO, t0);
        assert!(!tainter.add("a", t0), "processed nodes stay known");
        assert!(tainter.remove("a"));
        assert!(tainter.add("a", t0));
    }

    #[test]
    fn a_failed_node_is_retried_later_and_a_zero_rate_stops_everything() {
        let t0 = Instant::now();
        let mut tainter = Tainter::new(100.0, t0);
        tainter.add("a", t0);
        let head = tainter.next_due(t0).unwrap();
        tainter.finish(&head.node, false, Duration::from_millis(50), t0);
        assert_eq!(tainter.next_due(t0 + Duration::from_millis(20)), None);
        assert!(tainter.next_due(t0 + Duration::from_millis(100)).is_some());
        tainter.swap_limiter(0.0, t0);
        assert_eq!(tainter.next_due(t0 + Duration::from_secs(100)), None);
        assert_eq!(tainter.queued(), vec!["a".to_string()]);
        tainter.swap_limiter(0.1, t0 + Duration::from_secs(100));
        assert_eq!(
            tainter.next_due(t0 + Duration::from_secs(100)),
            None,
            "leaving a stopped rate starts with an empty bucket"
        );
        assert!(tainter.next_due(t0 + Duration::from_secs(110)).is_some());
    }
}

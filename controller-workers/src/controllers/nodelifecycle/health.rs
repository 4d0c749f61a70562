//! A node's health as the monitor judges it (upstream's `nodeHealthData` and
//! `tryUpdateNodeHealth`), as a pure function of the node, what was remembered about it
//! and its Lease's renewTime.
//!
//! A node is alive while its Ready condition's `lastHeartbeatTime` moves or its Lease in
//! `kube-node-lease` is renewed; the probe time records when either was last seen
//! moving, on this controller's clock. Past the grace period (`--node-startup-grace-period`
//! for a node that never posted Ready, `--node-monitor-grace-period` otherwise) its
//! kubelet-owned conditions become Unknown, and the caller writes the status back.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The conditions a silent kubelet leaves stale; NetworkUnavailable is the network
/// plugin's, not the kubelet's, so it is left alone.
pub(super) const KUBELET_CONDITIONS: [&str; 4] =
    ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

pub(super) const REASON_NEVER_UPDATED: &str = "NodeStatusNeverUpdated";
pub(super) const MESSAGE_NEVER_UPDATED: &str = "Kubelet never posted node status.";
pub(super) const REASON_UNKNOWN: &str = "NodeStatusUnknown";
pub(super) const MESSAGE_UNKNOWN: &str = "Kubelet stopped posting node status.";

/// What the monitor remembers about a node between passes.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct NodeHealth {
    pub probe: Timestamp,
    pub ready_transition: Timestamp,
    pub status: NodeStatus,
    /// The renewTime of the Lease last seen moving; `None` for none yet.
    pub lease_renew: Option<Timestamp>,
}

/// The outcome of one look at a node.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Assessment {
    /// The Ready condition as the node had it (a made-up Unknown one, dated at the
    /// node's creation, when it never posted one).
    pub observed_ready: NodeCondition,
    /// The Ready condition after this assessment (`None` while a never-posted node is
    /// within its startup grace).
    pub current_ready: Option<NodeCondition>,
    /// The status to write back (`PUT nodes/status`) when the conditions were turned Unknown.
    pub new_status: Option<NodeStatus>,
    /// What to remember if nothing is written (the caller remembers `new_status` with a
    /// fresh ready transition when the write succeeds).
    pub health: NodeHealth,
}

pub(super) fn condition<'a>(status: &'a NodeStatus, type_: &str) -> Option<&'a NodeCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|condition| condition.type_ == type_)
}

fn created(node: &Node) -> Option<Time> {
    node.metadata.creation_timestamp.clone()
}

/// Judges `node` at `now`, given what was remembered (`saved`) and its Lease's renewTime.
pub(super) fn assess(
    node: &Node,
    saved: Option<&NodeHealth>,
    lease_renew: Option<Timestamp>,
    now: Timestamp,
    monitor_grace: Duration,
    startup_grace: Duration,
) -> Assessment {
    let status = node.status.clone().unwrap_or_default();
    let current = condition(&status, "Ready").cloned();
    let creation = created(node).map(|t| t.0).unwrap_or(now);
    let (observed_ready, grace) = match &current {
        Some(ready) => (ready.clone(), monitor_grace),
        None => (
            NodeCondition {
                type_: "Ready".into(),
                status: "Unknown".into(),
                last_heartbeat_time: created(node),
                last_transition_time: created(node),
                ..Default::default()
            },
            startup_grace,
        ),
    };
    let fresh = |transition: Timestamp| NodeHealth {
        probe: now,
        ready_transition: transition,
        status: status.clone(),
        lease_renew: None,
    };
    let saved_ready = saved.and_then(|s| condition(&s.status, "Ready"));
    let saved_lease = saved.and_then(|s| s.lease_renew);
    let mut health = match (saved, saved_ready, &current) {
        // A never-posted node counts its grace from its creation.
        (None, _, None) => NodeHealth {
            probe: creation,
            ready_transition: creation,
            status: status.clone(),
            lease_renew: None,
        },
        (Some(saved), None, None) => NodeHealth {
            status: status.clone(),
            ..saved.clone()
        },
        (None, _, Some(_)) | (Some(_), None, Some(_)) | (Some(_), Some(_), None) => fresh(now),
        (Some(saved), Some(before), Some(ready)) => {
            if before.last_heartbeat_time != ready.last_heartbeat_time {
                let transition = if before.last_transition_time != ready.last_transition_time {
                    now
                } else {
                    saved.ready_transition
                };
                fresh(transition)
            } else {
                saved.clone()
            }
        }
    };
    if let Some(renewed) = lease_renew {
        if saved_lease.is_none_or(|before| before < renewed) {
            health.lease_renew = Some(renewed);
            health.probe = now;
        }
    }
    let deadline = health
        .probe
        .checked_add(SignedDuration::try_from(grace).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX);
    if now <= deadline {
        return Assessment {
            observed_ready,
            current_ready: current,
            new_status: None,
            health,
        };
    }
    let mut updated = status.clone();
    let conditions = updated.conditions.get_or_insert_with(Vec::new);
    for type_ in KUBELET_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => conditions.push(NodeCondition {
                type_: type_.into(),
                status: "Unknown".into(),
                reason: Some(REASON_NEVER_UPDATED.into()),
                message: Some(MESSAGE_NEVER_UPDATED.into()),
                last_heartbeat_time: created(node),
                last_transition_time: Some(Time(now)),
            }),
            Some(existing) if existing.status != "Unknown" => {
                existing.status = "Unknown".into();
                existing.reason = Some(REASON_UNKNOWN.into());
                existing.message = Some(MESSAGE_UNKNOWN.into());
                existing.last_transition_time = Some(Time(now));
            }
            Some(_) => {}
        }
    }
    let after = condition(&updated, "Ready").cloned();
    let changed = after.as_ref() != Some(&observed_ready);
    Assessment {
        observed_ready,
        current_ready: after,
        new_status: changed.then_some(updated),
        health,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GRACE: Duration = Duration::from_secs(40);
    const STARTUP: Duration = Duration::from_secs(60);

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn node(ready: Option<(&str, i64)>) -> Node {
        let conditions: Vec<serde_json::Value> = ready
            .into_iter()
            .map(|(status, heartbeat)| {
                json!({"type": "Ready", "status": status,
                       "lastHeartbeatTime": Time(t(heartbeat)), "lastTransitionTime": Time(t(0))})
            })
            .chain(std::iter::once(
                json!({"type": "MemoryPressure", "status": "False"}),
            ))
            .collect();
        let mut value = json!({"metadata": {"name": "n", "creationTimestamp": Time(t(0))}});
        if ready.is_some() {
            value["status"] = json!({"conditions": conditions});
        }
        serde_json::from_value(value).unwrap()
    }

    fn status_of<'a>(a: &'a Assessment, type_: &str) -> &'a NodeCondition {
        condition(a.new_status.as_ref().unwrap(), type_).unwrap()
    }

    #[test]
    fn a_never_posted_node_gets_its_startup_grace_then_never_updated() {
        let n = node(None);
        let within = assess(&n, None, None, t(59), GRACE, STARTUP);
        assert_eq!(within.current_ready, None);
        assert_eq!(within.new_status, None);
        assert_eq!(within.observed_ready.status, "Unknown");
        let past = assess(&n, Some(&within.health), None, t(61), GRACE, STARTUP);
        for type_ in KUBELET_CONDITIONS {
            let c = status_of(&past, type_);
            assert_eq!(c.status, "Unknown", "{type_}");
            assert_eq!(c.reason.as_deref(), Some(REASON_NEVER_UPDATED));
            assert_eq!(c.message.as_deref(), Some(MESSAGE_NEVER_UPDATED));
            assert_eq!(c.last_heartbeat_time, Some(Time(t(0))));
        }
        assert_eq!(past.current_ready.unwrap().status, "Unknown");
    }

    #[test]
    fn a_silent_node_turns_unknown_after_the_grace_and_only_once() {
        let n = node(Some(("True", 10)));
        let first = assess(&n, None, None, t(10), GRACE, STARTUP);
        assert_eq!(first.health.probe, t(10));
        let quiet = assess(&n, Some(&first.health), None, t(50), GRACE, STARTUP);
        assert_eq!(quiet.new_status, None, "exactly at the grace is still fine");
        let late = assess(&n, Some(&first.health), None, t(51), GRACE, STARTUP);
        let ready = status_of(&late, "Ready");
        assert_eq!(ready.status, "Unknown");
        assert_eq!(ready.reason.as_deref(), Some(REASON_UNKNOWN));
        assert_eq!(ready.message.as_deref(), Some(MESSAGE_UNKNOWN));
        assert_eq!(ready.last_transition_time, Some(Time(t(51))));
        assert_eq!(status_of(&late, "MemoryPressure").status, "Unknown");
        assert_eq!(
            status_of(&late, "DiskPressure").reason.as_deref(),
            Some(REASON_NEVER_UPDATED),
            "a condition the node never posted is added"
        );
        assert_eq!(late.observed_ready.status, "True");
        // Once written, the next look changes nothing.
        let mut written = n.clone();
        written.status = late.new_status.clone();
        let again = assess(&written, Some(&late.health), None, t(60), GRACE, STARTUP);
        assert_eq!(again.new_status, None);
        assert_eq!(again.observed_ready.status, "Unknown");
    }

    #[test]
    fn a_renewed_lease_or_a_new_heartbeat_keeps_the_node_alive() {
        let n = node(Some(("True", 10)));
        let first = assess(&n, None, Some(t(10)), t(10), GRACE, STARTUP);
        let renewed = assess(&n, Some(&first.health), Some(t(45)), t(45), GRACE, STARTUP);
        assert_eq!(renewed.health.probe, t(45));
        let later = assess(
            &n,
            Some(&renewed.health),
            Some(t(45)),
            t(80),
            GRACE,
            STARTUP,
        );
        assert_eq!(later.new_status, None, "40 s since the lease moved");
        let stale = assess(
            &n,
            Some(&renewed.health),
            Some(t(45)),
            t(86),
            GRACE,
            STARTUP,
        );
        assert!(stale.new_status.is_some());
        let heartbeat = node(Some(("True", 70)));
        let posted = assess(
            &heartbeat,
            Some(&renewed.health),
            None,
            t(86),
            GRACE,
            STARTUP,
        );
        assert_eq!(posted.new_status, None);
        assert_eq!(posted.health.probe, t(86));
    }

    #[test]
    fn a_lease_going_back_in_time_is_not_a_sign_of_life() {
        let n = node(Some(("True", 10)));
        let first = assess(&n, None, Some(t(30)), t(10), GRACE, STARTUP);
        let back = assess(&n, Some(&first.health), Some(t(20)), t(60), GRACE, STARTUP);
        assert!(back.new_status.is_some());
    }
}

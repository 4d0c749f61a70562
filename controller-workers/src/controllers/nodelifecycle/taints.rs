//! The taints the node-lifecycle controller owns (upstream's taint templates, the
//! condition-to-taint table and `pkg/util/taints`), the pure decisions about them, and the
//! one API edge that writes a node's taint list.
//!
//! Which NoSchedule taints a node should carry follows from its conditions and
//! `spec.unschedulable` alone ([`no_schedule_changes`]); the NoExecute `not-ready` /
//! `unreachable` pair is decided by the health monitor and written through
//! [`swap_taints`], which adds and removes in one patch so a node never shows both or
//! neither while they are swapped.

use crate::meta::ResourceNames;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};

pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub(super) const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub(super) const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub(super) const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub(super) const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub(super) const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

pub(super) const NO_SCHEDULE: &str = "NoSchedule";
pub(super) const NO_EXECUTE: &str = "NoExecute";

/// A taint with only its key and effect, as upstream's templates.
pub(super) fn template(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_string(),
        effect: effect.to_string(),
        ..Default::default()
    }
}

/// The taint key a condition at a status calls for, if any.
pub(super) fn condition_taint_key(condition_type: &str, status: &str) -> Option<&'static str> {
    match (condition_type, status) {
        ("Ready", "False") => Some(NOT_READY),
        ("Ready", "Unknown") => Some(UNREACHABLE),
        ("MemoryPressure", "True") => Some(MEMORY_PRESSURE),
        ("DiskPressure", "True") => Some(DISK_PRESSURE),
        ("NetworkUnavailable", "True") => Some(NETWORK_UNAVAILABLE),
        ("PIDPressure", "True") => Some(PID_PRESSURE),
        _ => None,
    }
}

fn is_condition_taint_key(key: &str) -> bool {
    matches!(
        key,
        NOT_READY
            | UNREACHABLE
            | MEMORY_PRESSURE
            | DISK_PRESSURE
            | PID_PRESSURE
            | NETWORK_UNAVAILABLE
    )
}

/// Same key and effect (`Taint.MatchTaint`): values and times do not tell taints apart.
pub(super) fn matches(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

pub(super) fn taints_of(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default()
}

pub(super) fn has_taint(node: &Node, wanted: &Taint) -> bool {
    taints_of(node).iter().any(|taint| matches(taint, wanted))
}

pub(super) fn conditions_of(node: &Node) -> &[NodeCondition] {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_deref())
        .unwrap_or_default()
}

/// The NoSchedule taints this controller manages that `node` should have, from its
/// conditions and `spec.unschedulable`.
pub(super) fn wanted_no_schedule_taints(node: &Node) -> Vec<Taint> {
    let mut wanted: Vec<Taint> = conditions_of(node)
        .iter()
        .filter_map(|condition| condition_taint_key(&condition.type_, &condition.status))
        .map(|key| template(key, NO_SCHEDULE))
        .collect();
    if node.spec.as_ref().and_then(|spec| spec.unschedulable) == Some(true) {
        wanted.push(template(UNSCHEDULABLE, NO_SCHEDULE));
    }
    wanted
}

/// (to add, to remove): the difference between the managed NoSchedule taints `node`
/// should have and those it has; other taints are never looked at.
pub(super) fn no_schedule_changes(node: &Node) -> (Vec<Taint>, Vec<Taint>) {
    let wanted = wanted_no_schedule_taints(node);
    let present: Vec<&Taint> = taints_of(node)
        .iter()
        .filter(|taint| {
            taint.effect == NO_SCHEDULE
                && (taint.key == UNSCHEDULABLE || is_condition_taint_key(&taint.key))
        })
        .collect();
    let add = wanted
        .iter()
        .filter(|w| !present.iter().any(|p| matches(p, w)))
        .cloned()
        .collect();
    let remove = present
        .iter()
        .filter(|p| !wanted.iter().any(|w| matches(p, w)))
        .map(|p| (*p).clone())
        .collect();
    (add, remove)
}

/// `taints` with `add` added (each stamped `timeAdded = now`, replacing a taint of the
/// same key and effect) and `remove` taken out; `None` when nothing would change.
pub(super) fn apply(
    taints: &[Taint],
    add: &[Taint],
    remove: &[Taint],
    now: Timestamp,
) -> Option<Vec<Taint>> {
    let mut result: Vec<Taint> = taints.to_vec();
    let mut changed = false;
    for wanted in add {
        let stamped = Taint {
            time_added: Some(Time(now)),
            ..wanted.clone()
        };
        match result.iter_mut().find(|t| matches(t, &stamped)) {
            Some(existing) if *existing == stamped => {}
            Some(existing) => {
                *existing = stamped;
                changed = true;
            }
            None => {
                result.push(stamped);
                changed = true;
            }
        }
    }
    let before = result.len();
    result.retain(|t| !remove.iter().any(|r| matches(t, r)));
    changed |= result.len() != before;
    changed.then_some(result)
}

/// Adds `add` and removes `remove` on the node in one patch, guarded by the
/// resourceVersion it was computed from; a conflict reads the node again and recomputes
/// (`SwapNodeControllerTaint`, with its retry budget). Returns whether anything was
/// written; a node that is gone is nothing to do.
pub(super) async fn swap_taints(
    client: &kube::Client,
    node: &Node,
    add: &[Taint],
    remove: &[Taint],
) -> anyhow::Result<bool> {
    let name = node.name_str().to_string();
    let api: Api<Node> = Api::all(client.clone());
    let mut current = node.clone();
    let mut delay = Duration::from_millis(100);
    for attempt in 0..5 {
        let Some(taints) = apply(taints_of(&current), add, remove, Timestamp::now()) else {
            return Ok(false);
        };
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"taints": if taints.is_empty() { serde_json::Value::Null } else { serde_json::to_value(&taints)? }},
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 4 => {
                tokio::time::sleep(delay).await;
                delay *= 2;
                match api.get_opt(&name).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(false),
                }
            }
            Err(error) => {
                return Err(anyhow::Error::new(error)
                    .context(format!("updating the taints of node {name}")))
            }
        }
    }
    anyhow::bail!("updating the taints of node {name}: it kept changing under us")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).unwrap()
    }

    fn keys(taints: &[Taint]) -> Vec<String> {
        taints
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    }

    #[test]
    fn conditions_give_their_no_schedule_taints() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("Ready", "True", None),
            ("Ready", "False", Some(NOT_READY)),
            ("Ready", "Unknown", Some(UNREACHABLE)),
            ("MemoryPressure", "True", Some(MEMORY_PRESSURE)),
            ("MemoryPressure", "False", None),
            ("MemoryPressure", "Unknown", None),
            ("DiskPressure", "True", Some(DISK_PRESSURE)),
            ("PIDPressure", "True", Some(PID_PRESSURE)),
            ("NetworkUnavailable", "True", Some(NETWORK_UNAVAILABLE)),
            ("NetworkUnavailable", "False", None),
            ("KernelDeadlock", "True", None),
        ];
        for (condition, status, want) in cases {
            assert_eq!(
                condition_taint_key(condition, status),
                *want,
                "{condition}={status}"
            );
        }
    }

    #[test]
    fn the_startup_taint_goes_once_ready_and_cordon_adds_unschedulable() {
        let n = node(json!({
            "metadata": {"name": "n"},
            "spec": {"unschedulable": true, "taints": [
                {"key": NOT_READY, "effect": "NoSchedule"},
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                {"key": NOT_READY, "effect": "NoExecute"},
            ]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "True"},
            ]},
        }));
        let (add, remove) = no_schedule_changes(&n);
        assert_eq!(
            keys(&add),
            vec![
                format!("{MEMORY_PRESSURE}:NoSchedule"),
                format!("{UNSCHEDULABLE}:NoSchedule")
            ]
        );
        assert_eq!(
            keys(&remove),
            vec![format!("{NOT_READY}:NoSchedule")],
            "foreign taints and NoExecute taints are not this pass's business"
        );
    }

    #[test]
    fn a_node_without_conditions_wants_nothing() {
        let n = node(json!({"metadata": {"name": "n"}}));
        assert_eq!(no_schedule_changes(&n), (vec![], vec![]));
    }

    #[test]
    fn apply_swaps_in_one_list_and_stamps_time_added() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let taints = vec![
            template(UNREACHABLE, NO_EXECUTE),
            template("dedicated", NO_SCHEDULE),
        ];
        let swapped = apply(
            &taints,
            &[template(NOT_READY, NO_EXECUTE)],
            &[template(UNREACHABLE, NO_EXECUTE)],
            now,
        )
        .unwrap();
        assert_eq!(
            keys(&swapped),
            vec![
                "dedicated:NoSchedule".to_string(),
                format!("{NOT_READY}:NoExecute")
            ]
        );
        assert_eq!(swapped[1].time_added, Some(Time(now)));
        assert_eq!(
            apply(&taints, &[], &[template(NOT_READY, NO_EXECUTE)], now),
            None,
            "removing an absent taint changes nothing"
        );
        assert_eq!(apply(&swapped, &[swapped[1].clone()], &[], now), None);
    }
}

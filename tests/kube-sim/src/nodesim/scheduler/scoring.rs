//! Scoring the nodes that pass the filters (least allocated, for spreading) and picking one,
//! or saying why none fits with upstream's message.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};

use super::{fits, pod_requests, NodeUsage, Resources};
use crate::nodesim::quantity;

/// Lower is better: the larger of the cpu and memory fractions the node would have requested.
fn score(requests: &Resources, node: &Node, usage: &NodeUsage) -> f64 {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let mut worst: f64 = 0.0;
    for name in ["cpu", "memory", "pods"] {
        let cap = allocatable
            .and_then(|a| a.get(name))
            .and_then(|q| quantity::milli(&q.0))
            .unwrap_or(0);
        if cap <= 0 {
            continue;
        }
        let used = if name == "pods" {
            (usage.pods + 1) as i128 * 1000
        } else {
            usage.requested.get(name).copied().unwrap_or(0)
                + requests.get(name).copied().unwrap_or(0)
        };
        worst = worst.max(used as f64 / cap as f64);
    }
    worst
}

/// Pick the node for `pod`, or say why none fits with upstream's message
/// (`0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.`).
pub fn schedule(
    pod: &Pod,
    nodes: &[&Node],
    usage: &HashMap<String, NodeUsage>,
) -> Result<String, String> {
    schedule_with(pod, nodes, usage, &|_| Ok(()))
}

/// [`schedule`] with one more filter after the built-in ones (VolumeBinding's), which may
/// give a node several reasons.
pub fn schedule_with(
    pod: &Pod,
    nodes: &[&Node],
    usage: &HashMap<String, NodeUsage>,
    extra: &dyn Fn(&Node) -> Result<(), Vec<String>>,
) -> Result<String, String> {
    if nodes.is_empty() {
        return Err("no nodes available to schedule pods".into());
    }
    let requests = pod_requests(pod);
    let empty = NodeUsage::default();
    let mut misfits: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(f64, &str)> = None;
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let u = usage.get(name).unwrap_or(&empty);
        match fits(pod, &requests, node, u)
            .map_err(|m| vec![m.to_string()])
            .and_then(|()| extra(node))
        {
            Ok(()) => {
                let s = score(&requests, node, u);
                if best.is_none_or(|(b, n)| s < b || (s == b && name < n)) {
                    best = Some((s, name));
                }
            }
            Err(reasons) => {
                for reason in reasons {
                    *misfits.entry(reason).or_default() += 1;
                }
            }
        }
    }
    if let Some((_, name)) = best {
        return Ok(name.to_string());
    }
    let mut reasons: Vec<String> = misfits.iter().map(|(r, n)| format!("{n} {r}")).collect();
    reasons.sort();
    Err(format!(
        "0/{} nodes are available: {}.",
        nodes.len(),
        reasons.join(", ")
    ))
}

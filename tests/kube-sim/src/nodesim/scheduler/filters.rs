//! The filters of upstream's default profile that matter to controllers: NodeUnschedulable,
//! TaintToleration, NodeAffinity (with `matchFields` `metadata.name`) and NodeResourcesFit.

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use super::{NodeUsage, Resources};
use crate::nodesim::quantity;

/// Why one node does not fit, worded as upstream's filter plugins word it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Misfit {
    Unschedulable,
    UntoleratedTaint(String),
    NodeAffinity,
    Insufficient(String),
    TooManyPods,
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misfit::Unschedulable => write!(f, "node(s) were unschedulable"),
            Misfit::UntoleratedTaint(t) => write!(f, "node(s) had untolerated taint {{{t}}}"),
            Misfit::NodeAffinity => write!(f, "node(s) didn't match Pod's node affinity/selector"),
            Misfit::Insufficient(r) => write!(f, "Insufficient {r}"),
            Misfit::TooManyPods => write!(f, "Too many pods"),
        }
    }
}

fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let key_ok =
            t.key.as_deref().is_none_or(|k| k.is_empty()) || t.key.as_deref() == Some(&taint.key);
        let value_ok = match t.operator.as_deref() {
            Some("Exists") => true,
            // Equal is the default operator; an empty key only goes with Exists.
            _ => {
                t.key.as_deref().is_some_and(|k| !k.is_empty())
                    && t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
            }
        };
        effect_ok && key_ok && value_ok
    })
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(v), [bound]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            if op == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

pub(crate) fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    // An empty term selects nothing, as upstream's nodeaffinity helper has it.
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields.iter().all(|r| {
            // metadata.name is the only field a node selector can name.
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && requirement_matches(r, node.metadata.name.as_deref())
        })
}

/// Does the node satisfy the pod's nodeSelector and required node affinity?
pub fn matches_node_affinity(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = &pod.spec else { return true };
    let labels = node.metadata.labels.as_ref();
    if let Some(sel) = &spec.node_selector {
        if !sel
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        Some(ns) => ns.node_selector_terms.iter().any(|t| term_matches(t, node)),
        None => true,
    }
}

/// Every filter, in upstream's order; the first that rejects the node says why.
pub fn fits(pod: &Pod, requests: &Resources, node: &Node, usage: &NodeUsage) -> Result<(), Misfit> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    let node_spec = node.spec.as_ref();
    if node_spec.and_then(|s| s.unschedulable) == Some(true) {
        let cordon = Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        if !tolerates(tolerations, &cordon) {
            return Err(Misfit::Unschedulable);
        }
    }
    for taint in node_spec.and_then(|s| s.taints.as_deref()).unwrap_or(&[]) {
        if matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerates(tolerations, taint)
        {
            return Err(Misfit::UntoleratedTaint(format!(
                "{}: {}",
                taint.key,
                taint.value.as_deref().unwrap_or("")
            )));
        }
    }
    if !matches_node_affinity(pod, node) {
        return Err(Misfit::NodeAffinity);
    }
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let alloc = |name: &str| -> i128 {
        allocatable
            .and_then(|a| a.get(name))
            .and_then(|q| quantity::milli(&q.0))
            .unwrap_or(0)
    };
    if (usage.pods + 1) as i128 * 1000 > alloc("pods") {
        return Err(Misfit::TooManyPods);
    }
    for (name, want) in requests {
        if *want == 0 {
            continue;
        }
        let used = usage.requested.get(name).copied().unwrap_or(0);
        if used + want > alloc(name) {
            return Err(Misfit::Insufficient(name.clone()));
        }
    }
    Ok(())
}

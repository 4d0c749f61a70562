//! Scheduling predicates controllers evaluate themselves (upstream `v1helper` and the
//! scheduler's `nodeaffinity` helper): taints against tolerations, and a pod's
//! nodeSelector and required node affinity against a node. The DaemonSet controller
//! decides with them which nodes should run a daemon pod.

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

/// The field selector key DaemonSet pods are pinned to their node with.
pub const OBJECT_NAME_FIELD: &str = "metadata.name";

/// Does `toleration` tolerate `taint` (`Toleration.ToleratesTaint`)? An empty effect
/// matches every effect; an empty key with `Exists` matches every key.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "Exists" => true,
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// The first taint `filter` selects that no toleration tolerates
/// (`FindMatchingUntoleratedTaint`).
pub fn find_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|taint| filter(taint))
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// Adds `toleration`, or replaces the one with the same key, operator, value and effect
/// (`AddOrUpdateTolerationInPodSpec`).
pub fn add_or_update_toleration(spec: &mut PodSpec, toleration: Toleration) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let field = |v: &Option<String>| v.clone().unwrap_or_default();
    let same = |t: &Toleration| {
        field(&t.key) == field(&toleration.key)
            && field(&t.operator) == field(&toleration.operator)
            && field(&t.value) == field(&toleration.value)
            && field(&t.effect) == field(&toleration.effect)
    };
    match tolerations.iter_mut().find(|t| same(t)) {
        Some(existing) => *existing = toleration,
        None => tolerations.push(toleration),
    }
}

fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value, values) else {
                return false;
            };
            match (v.parse::<i64>(), bound.parse::<i64>()) {
                (Ok(v), Ok(bound)) if requirement.operator == "Gt" => v > bound,
                (Ok(v), Ok(bound)) => v < bound,
                _ => false,
            }
        }
        _ => false,
    }
}

/// Does `node` satisfy one node selector term? Label expressions and `metadata.name`
/// field expressions must all hold; a term with neither selects nothing.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    let name = node.metadata.name.as_deref();
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields.iter().all(|r| {
            r.key == OBJECT_NAME_FIELD
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && requirement_matches(r, name)
        })
}

/// Does `node` fit the pod's nodeSelector and required node affinity (any term)?
pub fn matches_required_node_affinity(spec: &PodSpec, node: &Node) -> bool {
    if let Some(selector) = &spec.node_selector {
        let labels = node.metadata.labels.as_ref();
        if !selector
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        {
            return false;
        }
    }
    match spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }) {
        Some(required) => required
            .node_selector_terms
            .iter()
            .any(|term| term_matches(term, node)),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(key: &str, operator: &str, value: Option<&str>, effect: &str) -> Toleration {
        Toleration {
            key: (!key.is_empty()).then(|| key.into()),
            operator: (!operator.is_empty()).then(|| operator.into()),
            value: value.map(Into::into),
            effect: (!effect.is_empty()).then(|| effect.into()),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_rules() {
        let t = taint("dedicated", Some("gpu"), "NoSchedule");
        assert!(tolerates(
            &toleration("dedicated", "Equal", Some("gpu"), "NoSchedule"),
            &t
        ));
        assert!(tolerates(&toleration("dedicated", "", Some("gpu"), ""), &t));
        assert!(!tolerates(
            &toleration("dedicated", "Equal", Some("cpu"), ""),
            &t
        ));
        assert!(tolerates(&toleration("dedicated", "Exists", None, ""), &t));
        assert!(
            tolerates(&toleration("", "Exists", None, ""), &t),
            "tolerate everything"
        );
        assert!(!tolerates(
            &toleration("dedicated", "Exists", None, "NoExecute"),
            &t
        ));
        let taints = [t.clone(), taint("other", None, "PreferNoSchedule")];
        assert_eq!(
            find_untolerated_taint(&taints, &[], |t| t.effect != "PreferNoSchedule")
                .map(|t| &t.key),
            Some(&"dedicated".to_string())
        );
        assert!(find_untolerated_taint(
            &taints,
            &[toleration("dedicated", "Exists", None, "")],
            |t| t.effect != "PreferNoSchedule"
        )
        .is_none());
    }

    #[test]
    fn node_affinity_and_selector() {
        let n = node("n1", &[("zone", "a"), ("cores", "8")]);
        let mut spec = PodSpec::default();
        assert!(matches_required_node_affinity(&spec, &n));
        spec.node_selector = Some([("zone".to_string(), "b".to_string())].into());
        assert!(!matches_required_node_affinity(&spec, &n));
        spec.node_selector = Some([("zone".to_string(), "a".to_string())].into());
        let req = |key: &str, op: &str, values: &[&str]| NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        };
        let with_terms = |spec: &PodSpec, terms: Vec<NodeSelectorTerm>| PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            ..spec.clone()
        };
        let by_name = |name: &str| NodeSelectorTerm {
            match_fields: Some(vec![req(OBJECT_NAME_FIELD, "In", &[name])]),
            match_expressions: None,
        };
        assert!(matches_required_node_affinity(
            &with_terms(&spec, vec![by_name("n1")]),
            &n
        ));
        assert!(!matches_required_node_affinity(
            &with_terms(&spec, vec![by_name("n2")]),
            &n
        ));
        let gt = NodeSelectorTerm {
            match_expressions: Some(vec![
                req("cores", "Gt", &["4"]),
                req("gpu", "DoesNotExist", &[]),
            ]),
            match_fields: None,
        };
        assert!(matches_required_node_affinity(
            &with_terms(&spec, vec![by_name("n2"), gt]),
            &n
        ));
        assert!(
            !matches_required_node_affinity(
                &with_terms(&spec, vec![NodeSelectorTerm::default()]),
                &n
            ),
            "an empty term selects nothing"
        );
    }

    #[test]
    fn tolerations_are_added_once() {
        let mut spec = PodSpec::default();
        let t = toleration("node.kubernetes.io/not-ready", "Exists", None, "NoExecute");
        add_or_update_toleration(&mut spec, t.clone());
        add_or_update_toleration(&mut spec, t);
        assert_eq!(spec.tolerations.unwrap().len(), 1);
    }
}

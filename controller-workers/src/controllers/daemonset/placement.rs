//! Which nodes run a DaemonSet's pod, and how a daemon pod is made and recognised
//! (upstream `daemon_controller.go` predicates and `daemon/util`).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeCondition, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, Pod, PodSpec, PodTemplateSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::controllers::deployment::util::get_scaled_value_from_int_or_percent;
use crate::history::POD_REVISION_LABEL;
use crate::meta::ResourceNames;
use crate::scheduling::{
    add_or_update_toleration, find_untolerated_taint, matches_required_node_affinity,
    OBJECT_NAME_FIELD,
};

/// The pod label naming the template generation a pod was made from (old DaemonSets).
pub(super) const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// The annotation the API server keeps the template generation in.
pub(super) const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

fn template_spec(ds: &DaemonSet) -> PodSpec {
    ds.spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .unwrap_or_default()
}

/// Adds the tolerations every daemon pod gets, so nodes that are not ready, unreachable,
/// under pressure or cordoned still run (or keep) their daemons.
pub(super) fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut add = |key: &str, effect: &str| {
        add_or_update_toleration(
            spec,
            Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Toleration::default()
            },
        )
    };
    add("node.kubernetes.io/not-ready", "NoExecute");
    add("node.kubernetes.io/unreachable", "NoExecute");
    add("node.kubernetes.io/disk-pressure", "NoSchedule");
    add("node.kubernetes.io/memory-pressure", "NoSchedule");
    add("node.kubernetes.io/pid-pressure", "NoSchedule");
    add("node.kubernetes.io/unschedulable", "NoSchedule");
    if spec.host_network == Some(true) {
        add_or_update_toleration(
            spec,
            Toleration {
                key: Some("node.kubernetes.io/network-unavailable".into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Toleration::default()
            },
        );
    }
}

/// (should run, should continue running) a daemon pod on `node`
/// (`NodeShouldRunDaemonPod`): a node that fits but has an untolerated NoSchedule taint
/// keeps a pod it runs; an untolerated NoExecute taint evicts it.
pub fn node_should_run_daemon_pod(node: &Node, ds: &DaemonSet) -> (bool, bool) {
    let node_name = node.name_str();
    let mut spec = template_spec(ds);
    let wanted = spec.node_name.as_deref().unwrap_or_default();
    if !wanted.is_empty() && wanted != node_name {
        return (false, false);
    }
    spec.node_name = Some(node_name.to_string());
    add_daemon_tolerations(&mut spec);
    if !matches_required_node_affinity(&spec, node) {
        return (false, false);
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let fits_taints = find_untolerated_taint(taints, tolerations, |t| {
        t.effect == "NoExecute" || t.effect == "NoSchedule"
    })
    .is_none();
    if fits_taints {
        return (true, true);
    }
    let evicted =
        find_untolerated_taint(taints, tolerations, |t| t.effect == "NoExecute").is_some();
    (false, !evicted)
}

/// The template generation the API server recorded, if any (an unparsable one counts as
/// none).
pub(super) fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

/// The template daemon pods are made from: the DaemonSet's, with the daemon
/// tolerations and the generation and revision-hash labels (`CreatePodTemplate`).
pub(super) fn create_pod_template(
    ds: &DaemonSet,
    generation: Option<i64>,
    hash: &str,
) -> PodTemplateSpec {
    let mut template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    add_daemon_tolerations(template.spec.get_or_insert_with(Default::default));
    let labels = template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    if let Some(generation) = generation {
        labels.insert(TEMPLATE_GENERATION_LABEL.into(), generation.to_string());
    }
    if !hash.is_empty() {
        labels.insert(POD_REVISION_LABEL.into(), hash.into());
    }
    template
}

/// Pins a pod to `node_name` with a required node affinity on `metadata.name`, replacing
/// any required node selector terms it had (`ReplaceDaemonSetPodNodeNameNodeAffinity`).
pub(super) fn pin_to_node(spec: &mut PodSpec, node_name: &str) {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: OBJECT_NAME_FIELD.into(),
            operator: "In".into(),
            values: Some(vec![node_name.into()]),
        }]),
        match_expressions: None,
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    match &mut node_affinity.required_during_scheduling_ignored_during_execution {
        Some(required) => required.node_selector_terms = vec![term],
        None => {
            node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
                node_selector_terms: vec![term],
            })
        }
    }
}

/// The node a daemon pod is for: its nodeName, or the `metadata.name` its required
/// node affinity pins it to (`GetTargetNodeName`).
pub(super) fn target_node_name(pod: &Pod) -> Result<String, String> {
    let name = || format!("{}/{}", pod.namespace_str(), pod.name_str());
    let spec = pod.spec.as_ref();
    if let Some(node) = spec
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
    {
        return Ok(node.to_string());
    }
    let terms = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .ok_or_else(|| {
            format!(
                "no spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution for pod {}",
                name()
            )
        })?;
    if terms.is_empty() {
        return Err(format!(
            "no nodeSelectorTerms in requiredDuringSchedulingIgnoredDuringExecution of pod {}",
            name()
        ));
    }
    for term in terms {
        for requirement in term.match_fields.as_deref().unwrap_or_default() {
            if requirement.key == OBJECT_NAME_FIELD && requirement.operator == "In" {
                return match requirement.values.as_deref().unwrap_or_default() {
                    [one] => Ok(one.clone()),
                    _ => Err(format!(
                        "the matchFields value of '{OBJECT_NAME_FIELD}' is not unique for pod {}",
                        name()
                    )),
                };
            }
        }
    }
    Err(format!("no node name found for pod {}", name()))
}

/// Was the pod made from the current template: same revision hash, or same template
/// generation (`IsPodUpdated`)?
pub(super) fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let label = |key: &str| pod.labels().get(key).map(String::as_str);
    let generation_matches = generation
        .is_some_and(|g| label(TEMPLATE_GENERATION_LABEL) == Some(g.to_string().as_str()));
    let hash_matches = !hash.is_empty() && label(POD_REVISION_LABEL) == Some(hash);
    hash_matches || generation_matches
}

fn rolling_update_value(
    ds: &DaemonSet,
    pick: impl Fn(&k8s_openapi::api::apps::v1::RollingUpdateDaemonSet) -> Option<&IntOrString>,
    desired: i32,
) -> Result<i32, String> {
    let Some(strategy) = ds.spec.as_ref().and_then(|s| s.update_strategy.as_ref()) else {
        return Ok(0);
    };
    if strategy.type_.as_deref() != Some("RollingUpdate") {
        return Ok(0);
    }
    match strategy.rolling_update.as_ref().and_then(pick) {
        Some(value) => get_scaled_value_from_int_or_percent(value, desired, true),
        None => Ok(0),
    }
}

/// maxSurge of a RollingUpdate, scaled to `desired` nodes (rounded up).
pub(super) fn surge_count(ds: &DaemonSet, desired: i32) -> Result<i32, String> {
    rolling_update_value(ds, |r| r.max_surge.as_ref(), desired)
}

/// maxUnavailable of a RollingUpdate, scaled to `desired` nodes (rounded up).
pub(super) fn unavailable_count(ds: &DaemonSet, desired: i32) -> Result<i32, String> {
    rolling_update_value(ds, |r| r.max_unavailable.as_ref(), desired)
}

pub(super) fn allows_surge(ds: &DaemonSet) -> bool {
    surge_count(ds, 1).is_ok_and(|surge| surge > 0)
}

/// Scheduled pods first, then oldest, then by name (`podByCreationTimestampAndPhase`).
pub(super) fn compare_daemon_pods(a: &Pod, b: &Pod) -> Ordering {
    let scheduled = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    scheduled(b)
        .cmp(&scheduled(a))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a).cmp(&created(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Do the two condition lists have the same set of True conditions?
fn same_true_conditions(old: &[NodeCondition], new: &[NodeCondition]) -> bool {
    let trues = |conditions: &[NodeCondition]| {
        conditions
            .iter()
            .filter(|c| c.status == "True")
            .map(|c| c.type_.clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    trues(old) == trues(new)
}

/// A node update that changes nothing a DaemonSet looks at: same True conditions and,
/// apart from resourceVersion, managedFields and conditions (heartbeats), the same node
/// (`shouldIgnoreNodeUpdate`).
pub(super) fn should_ignore_node_update(old: &Node, new: &Node) -> bool {
    let conditions = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
    };
    if !same_true_conditions(&conditions(old), &conditions(new)) {
        return false;
    }
    let strip = |n: &Node| {
        let mut n = n.clone();
        n.metadata.resource_version = None;
        n.metadata.managed_fields = None;
        if let Some(status) = n.status.as_mut() {
            status.conditions = None;
        }
        n
    };
    strip(old) == strip(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
    };
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, taints: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(key, effect)| Taint {
                            key: key.to_string(),
                            effect: effect.to_string(),
                            ..Taint::default()
                        })
                        .collect(),
                ),
                ..NodeSpec::default()
            }),
            ..Node::default()
        }
    }

    fn daemon_set(spec: PodSpec) -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                name: Some("ds".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            spec: Some(DaemonSetSpec {
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(spec),
                },
                ..DaemonSetSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn taints_decide_run_and_keep_running() {
        let ds = daemon_set(PodSpec::default());
        assert_eq!(
            node_should_run_daemon_pod(&node("n", &[]), &ds),
            (true, true)
        );
        assert_eq!(
            node_should_run_daemon_pod(&node("n", &[("dedicated", "NoSchedule")]), &ds),
            (false, true),
            "NoSchedule keeps what runs"
        );
        assert_eq!(
            node_should_run_daemon_pod(&node("n", &[("dedicated", "NoExecute")]), &ds),
            (false, false)
        );
        assert_eq!(
            node_should_run_daemon_pod(&node("n", &[("dedicated", "PreferNoSchedule")]), &ds),
            (true, true)
        );
        // The automatic tolerations: a cordoned, not-ready node still runs daemons.
        assert_eq!(
            node_should_run_daemon_pod(
                &node(
                    "n",
                    &[
                        ("node.kubernetes.io/unschedulable", "NoSchedule"),
                        ("node.kubernetes.io/not-ready", "NoExecute")
                    ]
                ),
                &ds
            ),
            (true, true)
        );
        // network-unavailable is tolerated only by host-network pods.
        let tainted = node(
            "n",
            &[("node.kubernetes.io/network-unavailable", "NoSchedule")],
        );
        assert_eq!(node_should_run_daemon_pod(&tainted, &ds), (false, true));
        let host = daemon_set(PodSpec {
            host_network: Some(true),
            ..PodSpec::default()
        });
        assert_eq!(node_should_run_daemon_pod(&tainted, &host), (true, true));
    }

    #[test]
    fn node_name_and_selector_exclude_nodes() {
        let pinned = daemon_set(PodSpec {
            node_name: Some("other".into()),
            ..PodSpec::default()
        });
        assert_eq!(
            node_should_run_daemon_pod(&node("n", &[]), &pinned),
            (false, false)
        );
        let selecting = daemon_set(PodSpec {
            node_selector: Some([("kubernetes.io/hostname".to_string(), "n".to_string())].into()),
            ..PodSpec::default()
        });
        assert_eq!(
            node_should_run_daemon_pod(&node("n", &[]), &selecting),
            (true, true)
        );
        assert_eq!(
            node_should_run_daemon_pod(&node("m", &[]), &selecting),
            (false, false)
        );
    }

    #[test]
    fn pods_are_pinned_and_their_node_is_read_back() {
        let mut spec = PodSpec::default();
        pin_to_node(&mut spec, "n1");
        pin_to_node(&mut spec, "n2");
        let pod = Pod {
            spec: Some(spec),
            ..Pod::default()
        };
        assert_eq!(target_node_name(&pod), Ok("n2".to_string()));
        assert!(target_node_name(&Pod::default()).is_err());
    }

    #[test]
    fn templates_get_tolerations_and_labels() {
        let ds = daemon_set(PodSpec::default());
        let template = create_pod_template(&ds, Some(3), "abc");
        let labels = template.metadata.unwrap().labels.unwrap();
        assert_eq!(labels[TEMPLATE_GENERATION_LABEL], "3");
        assert_eq!(labels[POD_REVISION_LABEL], "abc");
        assert_eq!(template.spec.unwrap().tolerations.unwrap().len(), 6);
        let pod = Pod {
            metadata: ObjectMeta {
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        assert!(is_pod_updated(&pod, "abc", None));
        assert!(is_pod_updated(&pod, "xyz", Some(3)));
        assert!(!is_pod_updated(&pod, "xyz", Some(4)));
    }

    #[test]
    fn surge_and_unavailable_scale_with_nodes() {
        let mut ds = daemon_set(PodSpec::default());
        ds.spec.as_mut().unwrap().update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_surge: Some(IntOrString::String("10%".into())),
                max_unavailable: Some(IntOrString::Int(0)),
            }),
        });
        assert_eq!(surge_count(&ds, 15), Ok(2));
        assert_eq!(unavailable_count(&ds, 15), Ok(0));
        assert!(allows_surge(&ds));
        ds.spec
            .as_mut()
            .unwrap()
            .update_strategy
            .as_mut()
            .unwrap()
            .type_ = Some("OnDelete".into());
        assert_eq!(surge_count(&ds, 15), Ok(0));
        assert!(!allows_surge(&ds));
    }

    #[test]
    fn heartbeats_are_ignored_but_taints_are_not() {
        let old = node("n", &[]);
        let mut new = old.clone();
        new.metadata.resource_version = Some("2".into());
        assert!(should_ignore_node_update(&old, &new));
        new.spec.as_mut().unwrap().taints = Some(vec![Taint {
            key: "k".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }]);
        assert!(!should_ignore_node_update(&old, &new));
    }
}

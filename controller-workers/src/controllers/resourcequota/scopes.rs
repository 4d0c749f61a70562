//! Quota scopes (`spec.scopes` and `spec.scopeSelector`) and what a pod must be to fall
//! under one (upstream's `podMatchesScopeFunc`): `Terminating`/`NotTerminating` (an
//! `activeDeadlineSeconds` of zero or more), `BestEffort`/`NotBestEffort` (its QoS class),
//! `PriorityClass` (a selector on `priorityClassName`), `CrossNamespacePodAffinity` (an
//! affinity term naming other namespaces). Only pods have scopes: every other kind
//! matches none, so a scoped quota counts nothing else.
//!
//! Shared by the controller and the development cluster's quota admission (which compiles
//! this file too).

use k8s_openapi::api::core::v1::{
    Pod, PodAffinityTerm, ResourceQuota, ScopedResourceSelectorRequirement,
};

use std::collections::BTreeMap;

use rkcm_gocompat::labels::LabelSelector;
use rkcm_gocompat::quantity::Quantity;

pub const TERMINATING: &str = "Terminating";
pub const NOT_TERMINATING: &str = "NotTerminating";
pub const BEST_EFFORT: &str = "BestEffort";
pub const NOT_BEST_EFFORT: &str = "NotBestEffort";
pub const PRIORITY_CLASS: &str = "PriorityClass";
pub const CROSS_NAMESPACE_POD_AFFINITY: &str = "CrossNamespacePodAffinity";

/// A scope as a selector requirement (`spec.scopes` entries are `Exists`).
pub fn exists(scope: &str) -> ScopedResourceSelectorRequirement {
    ScopedResourceSelectorRequirement {
        scope_name: scope.to_string(),
        operator: "Exists".to_string(),
        values: None,
    }
}

/// Every scope requirement of a quota: its `spec.scopes`, then its selector's
/// expressions (upstream's `getScopeSelectorsFromQuota`); all of them must match.
pub fn of_quota(quota: &ResourceQuota) -> Vec<ScopedResourceSelectorRequirement> {
    let spec = quota.spec.as_ref();
    let mut selectors: Vec<ScopedResourceSelectorRequirement> = spec
        .and_then(|spec| spec.scopes.as_ref())
        .into_iter()
        .flatten()
        .map(|scope| exists(scope))
        .collect();
    selectors.extend(
        spec.and_then(|spec| spec.scope_selector.as_ref())
            .and_then(|selector| selector.match_expressions.clone())
            .unwrap_or_default(),
    );
    selectors
}

/// Whether a pod falls under a scope requirement; an error for a requirement that is not
/// a valid selector.
pub fn pod_matches(
    requirement: &ScopedResourceSelectorRequirement,
    pod: &Pod,
) -> Result<bool, String> {
    Ok(match requirement.scope_name.as_str() {
        TERMINATING => is_terminating(pod),
        NOT_TERMINATING => !is_terminating(pod),
        BEST_EFFORT => is_best_effort(pod),
        NOT_BEST_EFFORT => !is_best_effort(pod),
        PRIORITY_CLASS => {
            let class = pod
                .spec
                .as_ref()
                .and_then(|spec| spec.priority_class_name.as_deref())
                .unwrap_or_default();
            if requirement.operator == "Exists" {
                !class.is_empty()
            } else {
                priority_class_matches(requirement, class)
                    .map_err(|e| format!("failed to parse and convert selector: {e}"))?
            }
        }
        CROSS_NAMESPACE_POD_AFFINITY => uses_cross_namespace_pod_affinity(pod),
        _ => false,
    })
}

/// The pod has an `activeDeadlineSeconds` of zero or more.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.active_deadline_seconds)
        .is_some_and(|seconds| seconds >= 0)
}

/// The pod's QoS class is BestEffort (its recorded `status.qosClass`, else computed).
pub fn is_best_effort(pod: &Pod) -> bool {
    qos_class(pod) == "BestEffort"
}

/// Upstream's `GetPodQOS`: the recorded class, else `ComputePodQOS` over the cpu and
/// memory of the containers and init containers.
pub fn qos_class(pod: &Pod) -> String {
    if let Some(class) = pod
        .status
        .as_ref()
        .and_then(|status| status.qos_class.as_deref())
        .filter(|class| !class.is_empty())
    {
        return class.to_string();
    }
    compute_qos_class(pod).to_string()
}

fn compute_qos_class(pod: &Pod) -> &'static str {
    let mut requests: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    let spec = pod.spec.as_ref();
    let containers = spec
        .map(|spec| spec.containers.iter())
        .into_iter()
        .flatten()
        .chain(
            spec.and_then(|spec| spec.init_containers.as_ref())
                .into_iter()
                .flatten(),
        );
    // Positive cpu and memory amounts of one list.
    let positive = |list: Option<
        &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        list.into_iter()
            .flatten()
            .filter_map(|(name, value)| {
                let name = match name.as_str() {
                    "cpu" => "cpu",
                    "memory" => "memory",
                    _ => return None,
                };
                let quantity = Quantity::from_api(&value.0).ok()?;
                quantity.sign().is_positive().then_some((name, quantity))
            })
            .collect::<Vec<_>>()
    };
    for container in containers {
        let resources = container.resources.as_ref();
        for (name, quantity) in positive(resources.and_then(|r| r.requests.as_ref())) {
            requests
                .entry(name)
                .and_modify(|sum| sum.add(&quantity))
                .or_insert(quantity);
        }
        let container_limits = positive(resources.and_then(|r| r.limits.as_ref()));
        let has = |wanted: &str| container_limits.iter().any(|(name, _)| *name == wanted);
        if !(has("cpu") && has("memory")) {
            guaranteed = false;
        }
        for (name, quantity) in container_limits {
            limits
                .entry(name)
                .and_modify(|sum| sum.add(&quantity))
                .or_insert(quantity);
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed
        && requests
            .iter()
            .all(|(name, request)| limits.get(name).is_some_and(|limit| limit == request))
        && requests.len() == limits.len()
    {
        return "Guaranteed";
    }
    "Burstable"
}

/// A `PriorityClass` requirement with `In`, `NotIn` or `DoesNotExist` (upstream
/// `podMatchesSelector`): converted to a label selector requirement on the key
/// `PriorityClass` (upstream `ScopedResourceSelectorRequirementsAsSelector`), matched
/// against `{PriorityClass: <class>}`, a pod without a class having no label.
fn priority_class_matches(
    requirement: &ScopedResourceSelectorRequirement,
    class: &str,
) -> Result<bool, String> {
    let selector = scope_requirement_as_selector(requirement)?;
    let mut labels = BTreeMap::new();
    if !class.is_empty() {
        labels.insert(requirement.scope_name.clone(), class.to_string());
    }
    Ok(selector.matches(&labels))
}

/// Upstream `ScopedResourceSelectorRequirementsAsSelector` for one requirement: the
/// scope selector's own operators (anything else is refused with the scope wording),
/// then the label selector layer's validation of the key and values.
fn scope_requirement_as_selector(
    requirement: &ScopedResourceSelectorRequirement,
) -> Result<LabelSelector, String> {
    let operator = requirement.operator.as_str();
    if !matches!(operator, "In" | "NotIn" | "Exists" | "DoesNotExist") {
        return Err(format!(
            "{} is not a valid scope selector operator",
            rkcm_gocompat::gofmt::quote(operator)
        ));
    }
    let values: &[String] = requirement.values.as_deref().unwrap_or_default();
    let expression = (requirement.scope_name.as_str(), operator, values);
    LabelSelector::from_match([], [expression])
}

fn names_other_namespaces(term: &PodAffinityTerm) -> bool {
    term.namespaces.as_ref().is_some_and(|n| !n.is_empty()) || term.namespace_selector.is_some()
}

/// Some pod affinity or anti-affinity term, required or preferred, names namespaces or a
/// namespace selector.
pub fn uses_cross_namespace_pod_affinity(pod: &Pod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|spec| spec.affinity.as_ref()) else {
        return false;
    };
    let affinity_terms = affinity.pod_affinity.as_ref().map(|a| {
        (
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )
    });
    let anti_affinity_terms = affinity.pod_anti_affinity.as_ref().map(|a| {
        (
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )
    });
    [affinity_terms, anti_affinity_terms]
        .into_iter()
        .flatten()
        .any(|(required, preferred)| {
            required.into_iter().flatten().any(names_other_namespaces)
                || preferred
                    .into_iter()
                    .flatten()
                    .any(|weighted| names_other_namespaces(&weighted.pod_affinity_term))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a pod")
    }

    fn requirement(
        scope: &str,
        operator: &str,
        values: &[&str],
    ) -> ScopedResourceSelectorRequirement {
        ScopedResourceSelectorRequirement {
            scope_name: scope.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn scopes_as_upstream_matches_them() {
        let best_effort = pod(json!({"containers": [{"name": "c"}]}));
        let burstable = pod(json!({"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "100m"}}}]}));
        let guaranteed = pod(json!({"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                          "limits": {"cpu": "1000m", "memory": "1Gi"}}}]}));
        let zero_requests = pod(json!({"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "0"}}}]}));
        let terminating = pod(json!({"activeDeadlineSeconds": 0, "containers": [{"name": "c"}]}));
        let high = pod(json!({"priorityClassName": "high", "containers": [{"name": "c"}]}));
        let cross = pod(
            json!({"containers": [{"name": "c"}], "affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                "podAffinityTerm": {"topologyKey": "zone", "namespaceSelector": {}}}]}}}),
        );
        let same_namespace = pod(
            json!({"containers": [{"name": "c"}], "affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone", "namespaces": []}]}}}),
        );
        assert_eq!(qos_class(&best_effort), "BestEffort");
        assert_eq!(qos_class(&burstable), "Burstable");
        assert_eq!(qos_class(&guaranteed), "Guaranteed");
        assert_eq!(
            qos_class(&zero_requests),
            "BestEffort",
            "zero amounts do not count"
        );
        let mut recorded = burstable.clone();
        recorded.status = Some(k8s_openapi::api::core::v1::PodStatus {
            qos_class: Some("BestEffort".into()),
            ..Default::default()
        });
        assert!(is_best_effort(&recorded), "the recorded class wins");

        for (scope, operator, values, pod, expected) in [
            (BEST_EFFORT, "Exists", &[][..], &best_effort, Ok(true)),
            (BEST_EFFORT, "Exists", &[], &burstable, Ok(false)),
            (NOT_BEST_EFFORT, "Exists", &[], &burstable, Ok(true)),
            (TERMINATING, "Exists", &[], &terminating, Ok(true)),
            (TERMINATING, "Exists", &[], &best_effort, Ok(false)),
            (NOT_TERMINATING, "Exists", &[], &best_effort, Ok(true)),
            (PRIORITY_CLASS, "In", &["high"], &high, Ok(true)),
            (PRIORITY_CLASS, "In", &["high"], &best_effort, Ok(false)),
            (PRIORITY_CLASS, "NotIn", &["high"], &best_effort, Ok(true)),
            (PRIORITY_CLASS, "NotIn", &["high", "low"], &high, Ok(false)),
            (PRIORITY_CLASS, "Exists", &[], &high, Ok(true)),
            (PRIORITY_CLASS, "DoesNotExist", &[], &high, Ok(false)),
            (PRIORITY_CLASS, "DoesNotExist", &[], &best_effort, Ok(true)),
            (
                CROSS_NAMESPACE_POD_AFFINITY,
                "Exists",
                &[],
                &cross,
                Ok(true),
            ),
            (
                CROSS_NAMESPACE_POD_AFFINITY,
                "Exists",
                &[],
                &same_namespace,
                Ok(false),
            ),
            ("Unknown", "Exists", &[], &best_effort, Ok(false)),
        ] {
            assert_eq!(
                pod_matches(&requirement(scope, operator, values), pod),
                expected,
                "{scope} {operator} {values:?}"
            );
        }
        // Invalid selectors are errors, never panics.
        for (operator, values) in [
            ("In", &[][..]),
            ("DoesNotExist", &["x"]),
            ("Near", &["x"]),
            ("In", &["-bad-"]),
        ] {
            assert!(
                pod_matches(&requirement(PRIORITY_CLASS, operator, values), &high).is_err(),
                "{operator} {values:?}"
            );
        }
    }

    #[test]
    fn a_quotas_scopes_and_selector_are_one_list() {
        let quota: ResourceQuota = serde_json::from_value(json!({
            "metadata": {"name": "q"},
            "spec": {"scopes": ["BestEffort"], "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}
        }))
        .expect("a quota");
        let selectors = of_quota(&quota);
        assert_eq!(selectors.len(), 2);
        assert_eq!(selectors[0], exists(BEST_EFFORT));
        assert_eq!(selectors[1].operator, "In");
    }

    #[test]
    fn priority_class_requirements_go_through_the_label_selector_layer() {
        let label_message = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        let bad_value =
            format!("values[1][PriorityClass]: Invalid value: \"-bad-\": {label_message}");
        type Case<'a> = (&'a str, &'a [&'a str], &'a str, Result<bool, String>);
        let cases: [Case; 13] = [
            ("In", &["high", "low"], "low", Ok(true)),
            ("In", &["high"], "low", Ok(false)),
            ("In", &["high"], "", Ok(false)),
            ("NotIn", &["high"], "low", Ok(true)),
            ("NotIn", &["high"], "high", Ok(false)),
            ("NotIn", &["high"], "", Ok(true)),
            ("DoesNotExist", &[], "", Ok(true)),
            ("DoesNotExist", &[], "high", Ok(false)),
            (
                "In",
                &[],
                "high",
                Err("values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty".into()),
            ),
            (
                "DoesNotExist",
                &["x"],
                "",
                Err("values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist".into()),
            ),
            ("NotIn", &["ok", "-bad-"], "", Err(bad_value)),
            (
                "Near",
                &["x"],
                "",
                Err("\"Near\" is not a valid scope selector operator".into()),
            ),
            (
                "in",
                &["x"],
                "x",
                Err("\"in\" is not a valid scope selector operator".into()),
            ),
        ];
        for (operator, values, class, expected) in cases {
            let requirement = requirement(PRIORITY_CLASS, operator, values);
            assert_eq!(
                priority_class_matches(&requirement, class),
                expected,
                "{operator} {values:?} against {class:?}"
            );
        }
    }
}

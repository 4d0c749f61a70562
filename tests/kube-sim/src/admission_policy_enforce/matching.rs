//! Whether a request is in a policy's `matchConstraints` or a binding's `matchResources`
//! (`validatingadmissionpolicy/matching` with the webhook predicates: rules, namespace and
//! object selectors, excluded rules, resource names).
//!
//! `matchPolicy: Equivalent` is treated as `Exact`: kube-sim cannot convert a request's
//! object to another version of its resource (other than for the few built-ins that have
//! one), so rules naming only another version never match.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Attrs;

/// The labels of a namespace by name (`Err`: the error of looking it up).
pub(super) type NamespaceLabels<'a> = dyn Fn(&str) -> Result<BTreeMap<String, String>, String> + 'a;

/// A parsed `LabelSelector` (`metav1.LabelSelectorAsSelector`): `None` selects nothing
/// (a missing selector), an empty list everything.
#[derive(Debug, PartialEq)]
pub(super) struct Selector(Option<Vec<Requirement>>);

#[derive(Debug, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

#[derive(Debug, PartialEq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selector {
    pub(super) fn parse(selector: Option<&Value>) -> Result<Selector, String> {
        let Some(sel) = selector.filter(|s| !s.is_null()) else {
            return Ok(Selector(None));
        };
        let mut reqs = Vec::new();
        if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                reqs.push(Requirement {
                    key: k.clone(),
                    op: Op::In,
                    values: vec![v.as_str().unwrap_or("").to_string()],
                });
            }
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let operator = e.get("operator").and_then(Value::as_str).unwrap_or("");
            let op = match operator {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            let values = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect();
            reqs.push(Requirement {
                key: e.get("key").and_then(Value::as_str).unwrap_or("").into(),
                op,
                values,
            });
        }
        Ok(Selector(Some(reqs)))
    }

    /// Whether it selects everything (`labels.Selector.Empty()`).
    pub(super) fn is_everything(&self) -> bool {
        self.0.as_ref().is_some_and(Vec::is_empty)
    }

    pub(super) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let Some(reqs) = &self.0 else { return false };
        reqs.iter().all(|r| {
            let have = labels.get(&r.key);
            match r.op {
                Op::In => have.is_some_and(|h| r.values.contains(h)),
                Op::NotIn => have.is_none_or(|h| !r.values.contains(h)),
                Op::Exists => have.is_some(),
                Op::DoesNotExist => have.is_none(),
            }
        })
    }
}

/// An object's `metadata.labels`.
pub(super) fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn exact_or_wildcard(items: &Value, requested: &str) -> bool {
    items
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|i| i == "*" || i == requested)
}

/// One `RuleWithOperations` (`predicates/rules.Matcher`).
pub(super) fn rule_matches(rule: &Value, a: &Attrs) -> bool {
    let is_namespace = a.group.is_empty() && a.version == "v1" && a.resource == "namespaces";
    let scope = match rule.get("scope").and_then(Value::as_str) {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespace && !a.namespace.is_empty(),
        Some("Cluster") => is_namespace || a.namespace.is_empty(),
        Some(_) => false,
    };
    let operation = rule["operations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|o| o == "*" || o == a.operation);
    let resource = rule["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == a.resource) && (sub == "*" || sub == a.subresource)
        });
    scope
        && operation
        && exact_or_wildcard(&rule["apiGroups"], a.group)
        && exact_or_wildcard(&rule["apiVersions"], a.version)
        && resource
}

/// `matchesResourceRules` for the request's own resource (Exact).
fn matches_rules(rules: &Value, a: &Attrs) -> bool {
    rules
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| rule_matches(r, a))
        .any(|r| {
            let names = r["resourceNames"].as_array().map_or(&[][..], Vec::as_slice);
            names.is_empty() || names.iter().any(|n| n.as_str() == Some(a.name))
        })
}

/// The namespace selector's verdict (`MatchNamespaceSelector`): the labels of the
/// namespace a request is in, or of the Namespace object itself on its create and update.
fn namespace_matches(
    criteria: &Value,
    a: &Attrs,
    namespace_labels: &NamespaceLabels,
) -> Result<bool, String> {
    let is_namespaces = a.resource == "namespaces";
    if a.namespace.is_empty() && !is_namespaces {
        return Ok(true);
    }
    let selector = Selector::parse(criteria.get("namespaceSelector"))
        .map_err(|e| format!("Internal error occurred: {e}"))?;
    if selector.is_everything() {
        return Ok(true);
    }
    let labels = if is_namespaces
        && a.subresource.is_empty()
        && matches!(a.operation, "CREATE" | "UPDATE")
    {
        a.object.map(labels_of).unwrap_or_default()
    } else {
        namespace_labels(a.namespace)?
    };
    Ok(selector.matches(&labels))
}

/// The object selector's verdict: the new or the old object's labels.
fn object_matches(criteria: &Value, a: &Attrs) -> Result<bool, String> {
    let selector = Selector::parse(criteria.get("objectSelector"))
        .map_err(|e| format!("Internal error occurred: {e}"))?;
    if selector.is_everything() {
        return Ok(true);
    }
    let m = |o: Option<&Value>| o.is_some_and(|o| selector.matches(&labels_of(o)));
    Ok(m(a.object) || m(a.old_object))
}

/// `Matcher.Matches`: `Err` is a configuration error (its message).
pub(super) fn matches(
    criteria: &Value,
    a: &Attrs,
    namespace_labels: &NamespaceLabels,
) -> Result<bool, String> {
    let ns = namespace_matches(criteria, a, namespace_labels);
    if matches!(ns, Ok(false)) {
        return Ok(false);
    }
    let obj = object_matches(criteria, a);
    if matches!(obj, Ok(false)) {
        return Ok(false);
    }
    if matches_rules(&criteria["excludeResourceRules"], a) {
        return Ok(false);
    }
    let rules = &criteria["resourceRules"];
    let listed = rules.as_array().is_some_and(|r| !r.is_empty());
    if listed && !matches_rules(rules, a) {
        return Ok(false);
    }
    ns?;
    obj?;
    Ok(true)
}

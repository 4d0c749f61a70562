//! Label selectors as controllers evaluate them (apimachinery's LabelSelectorAsSelector):
//! `matchLabels` and `matchExpressions` (In, NotIn, Exists, DoesNotExist), all ANDed. An
//! empty selector matches everything; a missing one matches nothing.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl Selector {
    pub fn nothing() -> Self {
        Selector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Converts an API selector, rejecting an operator it does not know or values where
    /// the operator takes none (the errors the API server's validation would give).
    pub fn from_label_selector(selector: Option<&LabelSelector>) -> Result<Self, String> {
        let Some(selector) = selector else {
            return Ok(Self::nothing());
        };
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::In(key.clone(), vec![value.clone()]));
        }
        for expression in selector.match_expressions.iter().flatten() {
            let values = expression.values.clone().unwrap_or_default();
            let key = expression.key.clone();
            requirements.push(match expression.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(format!(
                        "{key}: operator {} needs at least one value",
                        expression.operator
                    ))
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(format!(
                        "{key}: operator {} takes no values",
                        expression.operator
                    ))
                }
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(format!(
                        "{key}: {other:?} is not a valid label selector operator"
                    ))
                }
            });
        }
        Ok(Selector {
            requirements,
            nothing: false,
        })
    }

    /// True for a selector with no requirement (it selects every object).
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        if self.nothing {
            return false;
        }
        let get = |key: &str| labels.and_then(|labels| labels.get(key));
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::In(key, values) => {
                    get(key).is_some_and(|value| values.contains(value))
                }
                Requirement::NotIn(key, values) => {
                    get(key).is_none_or(|value| !values.contains(value))
                }
                Requirement::Exists(key) => get(key).is_some(),
                Requirement::DoesNotExist(key) => get(key).is_none(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn match_labels_and_expressions() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "web")]).into_iter().collect()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["a".into(), "b".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        let selector = Selector::from_label_selector(Some(&selector)).unwrap();
        assert!(selector.matches(Some(&labels(&[("app", "web"), ("tier", "a")]))));
        assert!(!selector.matches(Some(&labels(&[("app", "web"), ("tier", "c")]))));
        assert!(!selector.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("canary", "1")
        ]))));
        assert!(!selector.matches(None));
    }

    #[test]
    fn empty_matches_all_and_missing_matches_nothing() {
        let empty = Selector::from_label_selector(Some(&LabelSelector::default())).unwrap();
        assert!(empty.is_empty());
        assert!(empty.matches(None));
        let missing = Selector::from_label_selector(None).unwrap();
        assert!(!missing.matches(Some(&labels(&[("a", "b")]))));
        assert!(!missing.is_empty());
    }

    #[test]
    fn invalid_operators_are_errors() {
        let selector = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(Selector::from_label_selector(Some(&selector)).is_err());
    }
}

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

    /// Parses a selector in its string form (apimachinery's `labels.Parse`, as a Scale's
    /// `status.selector` carries it): comma-separated `k=v`, `k==v`, `k!=v`,
    /// `k in (a,b)`, `k notin (a,b)`, `k` and `!k`. The empty string selects everything.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for term in split_terms(text)? {
            let term = term.trim();
            if term.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(format!(
                    "unable to parse requirement: empty term in {text:?}"
                ));
            }
            requirements.push(parse_term(term)?);
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

/// Splits on the commas outside parentheses.
fn split_terms(text: &str) -> Result<Vec<&str>, String> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced parentheses in selector {text:?}"))?
            }
            ',' if depth == 0 => {
                terms.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced parentheses in selector {text:?}"));
    }
    terms.push(&text[start..]);
    Ok(terms)
}

fn valid_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

fn parse_term(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(valid_key(key.trim())?));
    }
    for (operator, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = term.split_once(operator) {
            let (key, value) = (valid_key(key.trim())?, value.trim().to_string());
            return Ok(if negated {
                Requirement::NotIn(key, vec![value])
            } else {
                Requirement::In(key, vec![value])
            });
        }
    }
    if let Some(open) = term.find('(') {
        let values_text = term[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| format!("unable to parse requirement {term:?}"))?;
        let values: Vec<String> = values_text
            .split(',')
            .map(|v| v.trim().to_string())
            .collect();
        let mut words = term[..open].split_whitespace();
        let (Some(key), Some(operator), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("unable to parse requirement {term:?}"));
        };
        let key = valid_key(key)?;
        return match operator {
            "in" => Ok(Requirement::In(key, values)),
            "notin" => Ok(Requirement::NotIn(key, values)),
            other => Err(format!(
                "unknown operator {other:?} in requirement {term:?}"
            )),
        };
    }
    if term.contains(char::is_whitespace) || term.contains(['<', '>']) {
        return Err(format!("unable to parse requirement {term:?}"));
    }
    Ok(Requirement::Exists(valid_key(term)?))
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
    fn parses_the_string_form() {
        let selector = Selector::parse("app=web, tier in (a, b),!canary,env!=prod,track").unwrap();
        assert!(selector.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "b"),
            ("track", "x")
        ]))));
        assert!(!selector.matches(Some(&labels(&[("app", "web"), ("tier", "b")]))));
        assert!(!selector.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("track", "x"),
            ("env", "prod")
        ]))));
        assert!(Selector::parse("").unwrap().is_empty());
        assert!(Selector::parse("app==web")
            .unwrap()
            .matches(Some(&labels(&[("app", "web")]))));
        assert!(Selector::parse("x notin (a)").unwrap().matches(None));
        for bad in ["a in (b", "a,,b", "a b", "x>1", "=v", "k near (a)"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
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

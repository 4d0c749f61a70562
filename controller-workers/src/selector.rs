//! Label selectors as controllers evaluate them: the typed `metav1.LabelSelector` of an
//! object (apimachinery's `LabelSelectorAsSelector`) and the string form a Scale's
//! `status.selector` carries (`labels.Parse`). The grammar, validation, messages and
//! matching are the one Go-compatibility copy, [`rkcm_gocompat::labels`]; this module only
//! adapts the k8s-openapi types. An empty selector matches everything; a missing one
//! matches nothing.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use rkcm_gocompat::labels::LabelSelector as Parsed;

/// The labels of an object without any.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

#[derive(Clone, Debug, PartialEq)]
pub struct Selector(Parsed);

impl Selector {
    /// The selector of a missing `metav1.LabelSelector`: it selects nothing.
    pub fn nothing() -> Self {
        Selector(Parsed::nothing())
    }

    /// Converts an API selector with upstream's errors (an unknown operator, values where
    /// the operator takes none or none where it needs some, an invalid key or value).
    pub fn from_label_selector(selector: Option<&LabelSelector>) -> Result<Self, String> {
        let Some(selector) = selector else {
            return Ok(Self::nothing());
        };
        let labels = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(key, value)| (key.as_str(), value.as_str()));
        let expressions = selector.match_expressions.iter().flatten().map(|e| {
            (
                e.key.as_str(),
                e.operator.as_str(),
                e.values.as_deref().unwrap_or_default(),
            )
        });
        Parsed::from_match(labels, expressions).map(Selector)
    }

    /// Parses a selector in its string form (`labels.Parse`, as a Scale's `status.selector`
    /// carries it), with upstream's errors. The empty string selects everything.
    pub fn parse(text: &str) -> Result<Self, String> {
        Parsed::parse(text).map(Selector)
    }

    /// True for a selector with no requirement (it selects every object).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.0.matches(labels.unwrap_or(&NO_LABELS))
    }
}

/// The canonical string form (upstream `String()`): requirements sorted by key.
impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
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

    fn expression(key: &str, operator: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: values.map(|values| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn match_labels_and_expressions() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "web")]).into_iter().collect()),
            match_expressions: Some(vec![
                expression("tier", "In", Some(&["a", "b"])),
                expression("canary", "DoesNotExist", None),
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
        assert_eq!(selector.to_string(), "app=web,!canary,tier in (a,b)");
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
        // Upstream's integer comparisons.
        assert!(Selector::parse("x>1")
            .unwrap()
            .matches(Some(&labels(&[("x", "2")]))));
        for bad in ["a in (b", "a,,b", "a b", "=v", "k near (a)"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }

    /// The conversion's errors are upstream's `LabelSelectorAsSelector` messages.
    #[test]
    fn conversion_errors_are_upstreams() {
        let with = |expressions: Vec<LabelSelectorRequirement>| {
            let selector = LabelSelector {
                match_expressions: Some(expressions),
                ..Default::default()
            };
            Selector::from_label_selector(Some(&selector)).unwrap_err()
        };
        assert_eq!(
            with(vec![expression("k", "Near", None)]),
            "\"Near\" is not a valid label selector operator"
        );
        assert_eq!(
            with(vec![expression("k", "In", None)]),
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            with(vec![expression("k", "Exists", Some(&["v"]))]),
            "values: Invalid value: []string{\"v\"}: values set must be empty for exists and does not exist"
        );
    }
}

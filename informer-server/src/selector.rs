//! What a List or Watch asks for: namespace, label selector, field selector and shard,
//! parsed once per request and matched against each cached object.
//!
//! Label selectors follow the API server's grammar (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x)`, `a`, `!a`); field selectors take `f=v`, `f==v`, `f!=v` on
//! metadata.name, metadata.namespace and the fields the API server lets one select on for
//! that resource.

use std::collections::BTreeMap;

use rkcm_proto::v1::Shard;

use crate::object::CachedObject;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SelectorError {
    #[error("invalid label selector {selector:?}: {reason}")]
    Label { selector: String, reason: String },
    #[error("invalid field selector {selector:?}: {reason}")]
    Field { selector: String, reason: String },
    #[error("field label not supported: {field:?} is not a known field selector for {resource}: only {known}")]
    UnknownField {
        field: String,
        resource: String,
        known: String,
    },
    #[error("invalid shard: index {index} is not below count {count}")]
    Shard { index: u32, count: u32 },
}

/// The fields beyond metadata.name and metadata.namespace that the API server (v1.29)
/// accepts in field selectors, per resource.
pub fn selectable_fields(group: &str, resource: &str) -> &'static [&'static str] {
    match (group, resource) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "namespaces") => &["status.phase"],
        ("", "replicationcontrollers") | ("apps", "replicasets") => &["status.replicas"],
        ("batch", "jobs") => &["status.successful"],
        ("certificates.k8s.io", "certificatesigningrequests") => &["spec.signerName"],
        _ => &[],
    }
}

#[derive(Debug, Clone, PartialEq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl LabelRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            LabelRequirement::Equals(k, v) => labels.get(k) == Some(v),
            LabelRequirement::NotEquals(k, v) => labels.get(k) != Some(v),
            LabelRequirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelRequirement::NotIn(k, vs) => !labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelRequirement::Exists(k) => labels.contains_key(k),
            LabelRequirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelRequirement>);

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let err = |reason: &str| SelectorError::Label {
            selector: selector.to_string(),
            reason: reason.to_string(),
        };
        let mut requirements = Vec::new();
        for term in split_top_level(selector).map_err(|r| err(&r))? {
            let term = term.trim();
            if term.is_empty() {
                if selector.trim().is_empty() {
                    continue;
                }
                return Err(err("empty requirement"));
            }
            requirements.push(parse_label_term(term).map_err(|r| err(&r))?);
        }
        Ok(LabelSelector(requirements))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Splits on commas that are not inside a `( )` value set.
fn split_top_level(selector: &str) -> Result<Vec<&str>, String> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced ')'".into());
                }
            }
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    terms.push(&selector[start..]);
    Ok(terms)
}

fn parse_label_term(term: &str) -> Result<LabelRequirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(LabelRequirement::DoesNotExist(valid_key(key.trim())?));
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(LabelRequirement::NotEquals(
            valid_key(key.trim())?,
            valid_value(value.trim())?,
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(LabelRequirement::Equals(
            valid_key(key.trim())?,
            valid_value(value.trim())?,
        ));
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = valid_key(words[0])?;
        let rest = words[1].trim();
        let (op, set) = if let Some(set) = rest.strip_prefix("notin") {
            ("notin", set)
        } else if let Some(set) = rest.strip_prefix("in") {
            ("in", set)
        } else {
            return Err(format!("unknown operator in {term:?}"));
        };
        let set = set.trim();
        let inner = set
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| format!("{op} needs a parenthesised set of values, found {set:?}"))?;
        let values = inner
            .split(',')
            .map(|v| valid_value(v.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        if op == "in" && values.iter().all(String::is_empty) {
            return Err(format!("{op} needs at least one value"));
        }
        return Ok(if op == "in" {
            LabelRequirement::In(key, values)
        } else {
            LabelRequirement::NotIn(key, values)
        });
    }
    Ok(LabelRequirement::Exists(valid_key(term)?))
}

fn valid_key(key: &str) -> Result<String, String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty()
            || prefix.len() > 253
            || !prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        {
            return Err(format!(
                "key {key:?} has an invalid prefix (a DNS subdomain is required)"
            ));
        }
    }
    if name.is_empty() || name.len() > 63 || !valid_label_chars(name) {
        return Err(format!(
            "key {key:?}: a name must be 63 characters or less, start and end with an alphanumeric character, with '-', '_' or '.' between"
        ));
    }
    Ok(key.to_string())
}

fn valid_value(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Ok(String::new());
    }
    if value.len() > 63 || !valid_label_chars(value) {
        return Err(format!(
            "value {value:?}: must be 63 characters or less, start and end with an alphanumeric character, with '-', '_' or '.' between"
        ));
    }
    Ok(value.to_string())
}

fn valid_label_chars(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// An rkcm extension to field selectors: objects with an owner reference to this uid
/// (served from the cache's owner index; the API server has no such field).
pub const OWNER_UID_FIELD: &str = "metadata.ownerReferences.uid";

#[derive(Debug, Clone, PartialEq)]
struct FieldRequirement {
    field: String,
    value: String,
    equal: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<FieldRequirement>);

impl FieldSelector {
    pub fn parse(selector: &str, group: &str, resource: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for term in selector.split(',') {
            let term = term.trim();
            if term.is_empty() {
                if selector.trim().is_empty() {
                    continue;
                }
                return Err(SelectorError::Field {
                    selector: selector.into(),
                    reason: "empty requirement".into(),
                });
            }
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, v, true)
            } else {
                return Err(SelectorError::Field {
                    selector: selector.into(),
                    reason: format!("{term:?} is not of the form field=value or field!=value"),
                });
            };
            let field = field.trim();
            let extra = selectable_fields(group, resource);
            if !matches!(
                field,
                "metadata.name" | "metadata.namespace" | OWNER_UID_FIELD
            ) && !extra.contains(&field)
            {
                let mut known = vec![
                    "\"metadata.name\"".to_string(),
                    "\"metadata.namespace\"".to_string(),
                ];
                known.extend(extra.iter().map(|f| format!("{f:?}")));
                return Err(SelectorError::UnknownField {
                    field: field.into(),
                    resource: if group.is_empty() {
                        resource.to_string()
                    } else {
                        format!("{resource}.{group}")
                    },
                    known: known.join(", "),
                });
            }
            requirements.push(FieldRequirement {
                field: field.to_string(),
                value: value.trim().to_string(),
                equal,
            });
        }
        Ok(FieldSelector(requirements))
    }

    pub fn matches(&self, object: &CachedObject) -> bool {
        self.0.iter().all(|r| {
            let actual = match r.field.as_str() {
                "metadata.name" => object.name.as_str(),
                "metadata.namespace" => object.namespace.as_str(),
                OWNER_UID_FIELD => {
                    return object.owner_uids.contains(&r.value) == r.equal;
                }
                field => object
                    .fields
                    .iter()
                    .find(|(f, _)| *f == field)
                    .map_or("", |(_, v)| v.as_str()),
            };
            (actual == r.value) == r.equal
        })
    }

    /// The value the selector requires for `field` by equality, if it does.
    pub fn required(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|r| r.equal && r.field == field)
            .map(|r| r.value.as_str())
    }
}

/// Which objects one List or Watch wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// (index, count)
    pub shard: Option<(u32, u32)>,
}

impl Filter {
    pub fn new(
        group: &str,
        resource: &str,
        namespace: &str,
        label_selector: &str,
        field_selector: &str,
        shard: Option<(u32, u32)>,
    ) -> Result<Self, SelectorError> {
        if let Some((index, count)) = shard {
            if count > 0 && index >= count {
                return Err(SelectorError::Shard { index, count });
            }
        }
        Ok(Filter {
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            labels: LabelSelector::parse(label_selector)?,
            fields: FieldSelector::parse(field_selector, group, resource)?,
            shard: shard.filter(|(_, count)| *count > 1),
        })
    }

    pub fn matches(&self, object: &CachedObject) -> bool {
        if let Some(ns) = &self.namespace {
            if &object.namespace != ns {
                return false;
            }
        }
        if let Some((index, count)) = self.shard {
            if !(Shard { index, count }).holds(&object.namespace, &object.name) {
                return false;
            }
        }
        self.labels.matches(&object.labels) && self.fields.matches(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_grammar() {
        let s = LabelSelector::parse("app=web, tier in (fe,be),!canary,env!=prod,team").unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe"), ("team", "x")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "fe"),
            ("team", "x"),
            ("canary", "1")
        ])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        let notin = LabelSelector::parse("env notin (prod, staging)").unwrap();
        assert!(notin.matches(&labels(&[])));
        assert!(!notin.matches(&labels(&[("env", "prod")])));
        assert!(LabelSelector::parse("").unwrap().is_empty());
        assert!(LabelSelector::parse("app==web")
            .unwrap()
            .matches(&labels(&[("app", "web")])));
        assert!(LabelSelector::parse("example.com/app=web").is_ok());
    }

    #[test]
    fn label_selector_errors_say_what_is_wrong() {
        for bad in ["app in (a", "a,,b", "-bad=x", "app=", "x in ()", "a b c"] {
            let result = LabelSelector::parse(bad);
            if bad == "app=" {
                // An empty value is allowed, as by the API server.
                assert!(result.is_ok());
                continue;
            }
            let err = result.expect_err(bad).to_string();
            assert!(err.contains("invalid label selector"), "{bad}: {err}");
        }
    }

    #[test]
    fn field_selectors_know_the_resource_fields() {
        assert!(FieldSelector::parse("spec.nodeName=n1", "", "pods").is_ok());
        let err = FieldSelector::parse("spec.nodeName=n1", "apps", "deployments").unwrap_err();
        assert!(
            err.to_string()
                .contains("not a known field selector for deployments.apps"),
            "{err}"
        );
        assert!(FieldSelector::parse("metadata.name", "", "pods").is_err());
        let s = FieldSelector::parse("metadata.name!=a,spec.nodeName=", "", "pods").unwrap();
        assert_eq!(s.required("spec.nodeName"), Some(""));
    }

    #[test]
    fn shards_split_everything_exactly_once() {
        use rkcm_proto::shard_of;
        let count = 4;
        let mut seen = [0; 4];
        for i in 0..1000 {
            seen[shard_of(&format!("ns-{i}"), count) as usize] += 1;
        }
        assert_eq!(seen.iter().sum::<i32>(), 1000);
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
        assert_eq!(shard_of("kube-system", 1), 0);
        assert!(Filter::new("", "pods", "", "", "", Some((4, 4))).is_err());
    }
}

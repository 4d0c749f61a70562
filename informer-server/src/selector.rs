//! What a List or Watch asks for: namespace, label selector, field selector and shard,
//! parsed once per request and matched against each cached object.
//!
//! Label selectors are the API server's (`rkcm_gocompat::labels`: `a=b`, `a==b`, `a!=b`,
//! `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, with its validation); field selectors
//! are its grammar too (`f=v`, `f==v`, `f!=v`, `\` escapes: `rkcm_gocompat::fields`), on
//! the field labels the API server (v1.29) accepts for that resource, with its aliases,
//! plus rkcm's owner-uid field.

use std::collections::BTreeMap;

use rkcm_gocompat::fields::resource_fields_of;
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

/// A label selector in the API server's grammar, validation and messages (the one
/// Go-compatibility copy, [`rkcm_gocompat::labels`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(rkcm_gocompat::LabelSelector);

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        rkcm_gocompat::LabelSelector::parse(selector)
            .map(LabelSelector)
            .map_err(|reason| SelectorError::Label {
                selector: selector.to_string(),
                reason,
            })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.matches(labels)
    }

    /// Whether the object's labels satisfy the selector (an empty selector selects
    /// everything without reading them).
    pub fn matches_object(&self, object: &CachedObject) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels = object
            .labels()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.matches(&labels)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An rkcm extension to field selectors: objects with an owner reference to this uid
/// (served from the cache's owner index; the API server has no such field).
pub const OWNER_UID_FIELD: &str = "metadata.ownerReferences.uid";

#[derive(Debug, Clone, PartialEq)]
struct FieldRequirement {
    /// The canonical field label (an alias already rewritten).
    field: String,
    value: String,
    equal: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<FieldRequirement>);

impl FieldSelector {
    pub fn parse(selector: &str, group: &str, resource: &str) -> Result<Self, SelectorError> {
        let parsed = rkcm_gocompat::FieldSelector::parse(selector).map_err(|reason| {
            SelectorError::Field {
                selector: selector.into(),
                reason,
            }
        })?;
        let supported = resource_fields_of(group, resource);
        let mut requirements = Vec::new();
        for (field, value, not_equal) in parsed.terms() {
            let field = if field == OWNER_UID_FIELD {
                OWNER_UID_FIELD
            } else {
                supported.canonical(field).ok_or_else(|| {
                    let mut known = vec![
                        "\"metadata.name\"".to_string(),
                        "\"metadata.namespace\"".to_string(),
                    ];
                    known.extend(supported.selectable_labels().map(|f| format!("{f:?}")));
                    SelectorError::UnknownField {
                        field: field.into(),
                        resource: if group.is_empty() {
                            resource.to_string()
                        } else {
                            format!("{resource}.{group}")
                        },
                        known: known.join(", "),
                    }
                })?
            };
            requirements.push(FieldRequirement {
                field: field.to_string(),
                value: value.to_string(),
                equal: !not_equal,
            });
        }
        Ok(FieldSelector(requirements))
    }

    pub fn matches(&self, object: &CachedObject) -> bool {
        self.0.iter().all(|r| {
            let actual = match r.field.as_str() {
                "metadata.name" => object.name(),
                "metadata.namespace" => object.namespace(),
                OWNER_UID_FIELD => {
                    return object.owner_uids().any(|uid| uid == r.value) == r.equal;
                }
                field => object.field(field).unwrap_or_default(),
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
            if object.namespace() != ns {
                return false;
            }
        }
        if let Some((index, count)) = self.shard {
            if !(Shard { index, count }).holds(object.namespace(), object.name()) {
                return false;
            }
        }
        self.labels.matches_object(object) && self.fields.matches(object)
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
        // Upstream reads `()` as the one empty value.
        let empty_value = LabelSelector::parse("x in ()").unwrap();
        assert!(empty_value.matches(&labels(&[("x", "")])));
        assert!(!empty_value.matches(&labels(&[])));
        for bad in ["app in (a", "a,,b", "-bad=x", "app=", "x notin", "a b c"] {
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

    fn cached(group: &str, resource: &str, object: serde_json::Value) -> CachedObject {
        let gvr = std::sync::Arc::new(rkcm_proto::v1::GroupVersionResource {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
        });
        CachedObject::from_value(&gvr, object).unwrap()
    }

    /// The labels read what the API server's registries read: jobs' `status.successful` is
    /// `status.succeeded`, a missing bool is "false", pods' `spec.host` is `spec.nodeName`.
    #[test]
    fn field_labels_read_what_the_registries_read() {
        let meta = |name: &str| serde_json::json!({"name": name, "namespace": "ns", "resourceVersion": "1"});
        let job = cached(
            "batch",
            "jobs",
            serde_json::json!({"metadata": meta("j"), "status": {"succeeded": 2}}),
        );
        assert!(FieldSelector::parse("status.successful=2", "batch", "jobs")
            .unwrap()
            .matches(&job));
        let pod = cached(
            "",
            "pods",
            serde_json::json!({"metadata": meta("p"), "spec": {"nodeName": "n1"}}),
        );
        let by_host = FieldSelector::parse("spec.host=n1", "", "pods").unwrap();
        assert_eq!(by_host.required("spec.nodeName"), Some("n1"));
        assert!(by_host.matches(&pod));
        assert!(FieldSelector::parse("spec.hostNetwork=false", "", "pods")
            .unwrap()
            .matches(&pod));
        // Upstream's escapes.
        let escaped = FieldSelector::parse(r"metadata.name=a\,b", "", "pods").unwrap();
        assert_eq!(escaped.required("metadata.name"), Some("a,b"));
        assert!(FieldSelector::parse("status.replicas=1", "apps", "replicasets").is_err());
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

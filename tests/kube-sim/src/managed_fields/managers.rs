//! Managers: the entries of `metadata.managedFields`, decoded and encoded as kube-apiserver
//! writes them.

use super::field_set::{FieldSet, Pe};
use serde_json::{json, Map, Value};

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: String,
    pub set: FieldSet,
}

impl Entry {
    pub(super) fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    /// How a conflict message names this manager.
    pub(super) fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {:?}", self.subresource);
        }
        if self.operation == "Update" {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }

    fn encode(&self) -> Value {
        let mut m = Map::new();
        if !self.manager.is_empty() {
            m.insert("manager".into(), json!(self.manager));
        }
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn decode(v: &Value) -> Result<Entry, String> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        if s("fieldsType") != "FieldsV1" {
            return Err(format!("unknown fieldsType {:?}", s("fieldsType")));
        }
        let operation = s("operation");
        if operation != "Apply" && operation != "Update" {
            return Err(format!("unknown operation {operation:?}"));
        }
        Ok(Entry {
            manager: s("manager"),
            operation,
            api_version: s("apiVersion"),
            time: v.get("time").and_then(Value::as_str).map(String::from),
            subresource: s("subresource"),
            set: FieldSet::from_fields_v1(v.get("fieldsV1").unwrap_or(&json!({})))?,
        })
    }
}

/// The entries of an object, or an error when they cannot be read.
pub fn decode(obj: &Value) -> Result<Vec<Entry>, String> {
    match obj.get("metadata").and_then(|m| m.get("managedFields")) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a.iter().map(Entry::decode).collect(),
        Some(other) => Err(format!("managedFields is not a list: {other}")),
    }
}

/// Writes the entries into the object, sorted as kube-apiserver sorts them.
pub fn encode(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|a, b| {
        (
            &a.operation,
            a.time.as_deref().unwrap_or(""),
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                b.time.as_deref().unwrap_or(""),
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        m.shift_remove("managedFields");
    } else {
        m.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::encode).collect()),
        );
    }
}

/// Fields no manager owns: identity and server-set metadata.
pub(super) fn strip(set: &FieldSet) -> FieldSet {
    let mut s = FieldSet::default();
    for p in [&["apiVersion"][..], &["kind"], &["metadata"]] {
        s.insert(
            &p.iter()
                .map(|f| Pe::Field(f.to_string()))
                .collect::<Vec<_>>(),
        );
    }
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[Pe::Field("metadata".into()), Pe::Field(f.into())]);
    }
    set.difference(&s)
}

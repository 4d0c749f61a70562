//! Paths and sets: path elements, field sets and their `FieldsV1` encoding.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One step of a field path. The variant order is the order kube-apiserver sorts them in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pe {
    /// A struct field or map key: `f:name`.
    Field(String),
    /// A keyed list element: the key fields, sorted by name, values as JSON: `k:{...}`.
    Key(Vec<(String, String)>),
    /// An element of a set: its JSON value: `v:...`.
    Value(String),
    /// A list element by position: `i:N`.
    Index(usize),
}

impl Pe {
    /// The key of this element in a `fieldsV1` object.
    pub fn encode(&self) -> String {
        match self {
            Pe::Field(f) => format!("f:{f}"),
            Pe::Key(kv) => {
                let mut m = Map::new();
                for (k, v) in kv {
                    m.insert(k.clone(), serde_json::from_str(v).unwrap_or(Value::Null));
                }
                format!("k:{}", Value::Object(m))
            }
            Pe::Value(v) => format!("v:{v}"),
            Pe::Index(i) => format!("i:{i}"),
        }
    }

    /// Reads a `fieldsV1` key back.
    pub fn decode(s: &str) -> Result<Pe, String> {
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("unknown path element {s:?}"))?;
        match kind {
            "f" => Ok(Pe::Field(rest.to_string())),
            "k" => {
                let v: Value =
                    serde_json::from_str(rest).map_err(|e| format!("invalid key {rest:?}: {e}"))?;
                let m = v
                    .as_object()
                    .ok_or_else(|| format!("invalid key {rest:?}: not an object"))?;
                let mut kv: Vec<(String, String)> =
                    m.iter().map(|(k, v)| (k.clone(), v.to_string())).collect();
                kv.sort();
                Ok(Pe::Key(kv))
            }
            "v" => {
                let v: Value = serde_json::from_str(rest)
                    .map_err(|e| format!("invalid value {rest:?}: {e}"))?;
                Ok(Pe::Value(v.to_string()))
            }
            "i" => rest
                .parse()
                .map(Pe::Index)
                .map_err(|e| format!("invalid index {rest:?}: {e}")),
            _ => Err(format!("unknown path element {s:?}")),
        }
    }

    /// How kube-apiserver prints it in a conflict: `.name`, `[name="c"]`, `[="x"]`, `[0]`.
    pub fn display(&self) -> String {
        match self {
            Pe::Field(f) => format!(".{f}"),
            Pe::Key(kv) => {
                let parts: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            Pe::Value(v) => format!("[={v}]"),
            Pe::Index(i) => format!("[{i}]"),
        }
    }
}

/// A path as kube-apiserver prints it: `.spec.containers[name="c"].image`.
pub fn display_path(p: &[Pe]) -> String {
    p.iter().map(Pe::display).collect()
}

/// A set of field paths, as a tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<Pe, FieldSet>,
}

impl FieldSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, path: &[Pe]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub fn has(&self, path: &[Pe]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// No path at all.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    fn pruned(mut self) -> Self {
        self.children = std::mem::take(&mut self.children)
            .into_iter()
            .map(|(k, v)| (k, v.pruned()))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        self
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (k, v) in &other.children {
            let merged = match out.children.get(k) {
                Some(mine) => mine.union(v),
                None => v.clone(),
            };
            out.children.insert(k.clone(), merged);
        }
        out
    }

    /// The paths of `self` that are not in `other` (children of a removed path stay).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let d = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            out.children.insert(k.clone(), d);
        }
        out.pruned()
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            if let Some(o) = other.children.get(k) {
                out.children.insert(k.clone(), v.intersection(o));
            }
        }
        out.pruned()
    }

    /// Keeps only the paths under the top-level field `name` (or drops them, `keep` false).
    pub fn filter_top(&self, name: &str, keep: bool) -> FieldSet {
        let pe = Pe::Field(name.to_string());
        let mut out = FieldSet::default();
        for (k, v) in &self.children {
            if (k == &pe) == keep {
                out.children.insert(k.clone(), v.clone());
            }
        }
        out.pruned()
    }

    /// Every path in the set, in order.
    pub fn paths(&self) -> Vec<Vec<Pe>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<Pe>, out: &mut Vec<Vec<Pe>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (k, v) in &self.children {
            prefix.push(k.clone());
            v.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` form.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (k, v) in &self.children {
            if v.is_empty() {
                continue;
            }
            m.insert(k.encode(), v.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Reads a `fieldsV1` value; the root itself is never a member.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        let mut s = Self::from_node(v)?;
        s.member = false;
        Ok(s)
    }

    fn from_node(v: &Value) -> Result<FieldSet, String> {
        let m = v
            .as_object()
            .ok_or_else(|| format!("expected an object in fieldsV1, got {v}"))?;
        let mut s = FieldSet {
            member: m.is_empty(),
            children: BTreeMap::new(),
        };
        for (k, child) in m {
            if k == "." {
                s.member = true;
                continue;
            }
            s.children.insert(Pe::decode(k)?, Self::from_node(child)?);
        }
        Ok(s)
    }
}

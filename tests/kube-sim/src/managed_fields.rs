//! Field ownership: `metadata.managedFields`, as kube-apiserver keeps it.
//!
//! Every write names a manager (the `fieldManager` parameter, else the client's user agent up
//! to its first `/`). An update's manager takes the fields the write added or changed, compared
//! with the object before it (for a create: the empty object of the kind, as Go serialises it,
//! so struct fields Go always writes are not "added"); other managers lose what the write
//! changed or removed. A server-side apply's manager owns exactly the fields of its
//! configuration, and a change to a field another manager owns is a conflict (HTTP 409) unless
//! forced. The comparison is made after defaulting and before admission and the strategy, so
//! defaults count as the writer's and admission's additions (service account volume, pod
//! priority, tolerations) do not.
//!
//! Sets are trees of path elements (`f:name`, `k:{"name":"c"}`, `v:"x"`, `i:0`); a node that is
//! itself in the set and has children carries `.`. How a list or map is walked depends on the
//! field's type: lists keyed by fields (containers by name, ports by port and protocol), sets
//! of scalars (finalizers), and atomic values (label selectors, tolerations, a Service's
//! selector) that are owned as one leaf. The OpenAPI definitions of the built-in types say
//! which (see [`schema`]); a custom resource is a map of what it holds.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

mod schema;

// ---------------------------------------------------------------------------------------------
// Paths and sets
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/// How a field's value is walked (read from the OpenAPI definitions, see [`schema`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    /// A struct, by definition name (`Some`), or a value without a definition of its own
    /// (`None`: a scalar, or anything below it): a `null` there is nothing to own.
    Obj(Option<&'static str>),
    /// A map, or a value with no schema: keys are entries, lists below are atomic.
    Deduced,
    /// Owned as one leaf, whatever its shape.
    Atomic,
    /// A list keyed by these fields; elements of the given type.
    Keyed(&'static [&'static str], ElemTy),
    /// A list of scalars treated as a set.
    Set,
}

/// The element type of a keyed list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ElemTy {
    Obj(Option<&'static str>),
    Atomic,
}

const TYPE: &[&str] = &["type"];
const CONDITIONS: Ty = Ty::Keyed(TYPE, ElemTy::Obj(None));

/// The root type of a kind's objects: its OpenAPI definition (see [`schema`]). Custom
/// resources are maps of what they hold; a kind of a `*.k8s.io` group without a definition (a
/// custom resource there) is an object with metadata and a status whose conditions are keyed
/// by type.
fn root(group: &str, kind: &str) -> Ty {
    if group.contains('.') && !group.ends_with(".k8s.io") {
        return Ty::Deduced;
    }
    Ty::Obj(Some(schema::root(group, kind).unwrap_or(OBJECT)))
}

/// The stand-in for objects without a definition, and its status.
const OBJECT: &str = "meta.Object";
const STATUS: &str = "meta.Status";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The type of field `name` of struct `t`; `None` for a field `t` does not have.
fn field(t: &str, name: &str) -> Option<Ty> {
    match (t, name) {
        (OBJECT, "metadata") => Some(Ty::Obj(Some(OBJECT_META))),
        (OBJECT, "status") => Some(Ty::Obj(Some(STATUS))),
        (STATUS, "conditions") => Some(CONDITIONS),
        (OBJECT | STATUS, _) => None,
        _ => schema::field(t, name),
    }
}

/// The type of `key` below a value of type `ty`.
fn child(ty: Ty, key: &str) -> Ty {
    match ty {
        Ty::Obj(Some(t)) => field(t, key).unwrap_or(Ty::Obj(None)),
        Ty::Obj(None) => Ty::Obj(None),
        _ => Ty::Deduced,
    }
}

fn elem(ty: Ty) -> Ty {
    match ty {
        Ty::Keyed(_, ElemTy::Obj(t)) => Ty::Obj(t),
        Ty::Keyed(_, ElemTy::Atomic) => Ty::Atomic,
        _ => Ty::Deduced,
    }
}

/// The empty object of a kind as Go serialises it: the "before" of a create. Only what a new
/// object can also hold matters; fields a kind lacks are harmless here.
pub fn zero_object(group: &str, version: &str, kind: &str) -> Value {
    let meta = json!({"creationTimestamp": null});
    let template = json!({"metadata": meta, "spec": {"containers": null}});
    let job_spec = json!({"template": template});
    let (spec, extra) = match (group, kind) {
        ("", "Pod") => (json!({"containers": null}), json!({})),
        ("", "PodTemplate") => (Value::Null, json!({"template": template})),
        ("", "ConfigMap" | "Secret" | "ServiceAccount" | "Endpoints") => (Value::Null, json!({})),
        ("", "Event") => (
            Value::Null,
            json!({"involvedObject": {}, "source": {}, "firstTimestamp": null,
                   "lastTimestamp": null, "eventTime": null, "reportingComponent": "",
                   "reportingInstance": ""}),
        ),
        ("", "PersistentVolumeClaim") => (json!({"resources": {}}), json!({})),
        ("", "LimitRange") => (json!({"limits": null}), json!({})),
        ("apps", "Deployment") => (
            json!({"selector": null, "template": template, "strategy": {}}),
            json!({}),
        ),
        ("apps", "ReplicaSet") => (json!({"selector": null, "template": template}), json!({})),
        ("apps", "StatefulSet") => (
            json!({"selector": null, "template": template, "serviceName": "",
                   "updateStrategy": {}}),
            json!({}),
        ),
        ("apps", "DaemonSet") => (
            json!({"selector": null, "template": template, "updateStrategy": {}}),
            json!({}),
        ),
        ("apps", "ControllerRevision") => (Value::Null, json!({"data": null, "revision": 0})),
        ("batch", "Job") => (job_spec.clone(), json!({})),
        ("batch", "CronJob") => (
            json!({"schedule": "", "jobTemplate": {"metadata": meta, "spec": job_spec}}),
            json!({}),
        ),
        ("autoscaling", "HorizontalPodAutoscaler") => (
            json!({"scaleTargetRef": {"kind": "", "name": ""}, "maxReplicas": 0}),
            json!({}),
        ),
        ("discovery.k8s.io", "EndpointSlice") => (
            Value::Null,
            json!({"addressType": "", "endpoints": null, "ports": null}),
        ),
        ("events.k8s.io", "Event") => (
            Value::Null,
            json!({"eventTime": null, "deprecatedSource": {}, "deprecatedFirstTimestamp": null,
                   "deprecatedLastTimestamp": null}),
        ),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            (json!({"request": null, "signerName": ""}), json!({}))
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (
            json!({"group": "", "names": {"plural": "", "kind": ""}, "scope": "",
                   "versions": null}),
            json!({}),
        ),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            (Value::Null, json!({"rules": null}))
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => (
            Value::Null,
            json!({"roleRef": {"apiGroup": "", "kind": "", "name": ""}}),
        ),
        ("scheduling.k8s.io", "PriorityClass") => (Value::Null, json!({"value": 0})),
        ("storage.k8s.io", "StorageClass") => (Value::Null, json!({"provisioner": ""})),
        ("networking.k8s.io", "NetworkPolicy") => (json!({"podSelector": {}}), json!({})),
        ("coordination.k8s.io", "Lease") => (json!({}), json!({})),
        (g, _) if g.contains('.') && !g.ends_with(".k8s.io") => {
            // A custom resource starts from nothing at all.
            return json!({"apiVersion": format!("{g}/{version}"), "kind": kind});
        }
        _ => (json!({}), json!({"status": {}})),
    };
    let mut obj = json!({"metadata": meta});
    if !spec.is_null() {
        obj["spec"] = spec;
    }
    if let (Some(o), Some(e)) = (obj.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    obj
}

/// What kube-apiserver's conversion to its internal types and back leaves on an object before
/// field ownership is worked out: a DaemonSet always carries its template generation
/// annotation (0 until the strategy sets it), so its writer owns that annotation.
pub fn as_converted(group: &str, kind: &str, obj: &Value) -> Option<Value> {
    const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
    if group != "apps"
        || kind != "DaemonSet"
        || !obj["metadata"]["annotations"][TEMPLATE_GENERATION].is_null()
    {
        return None;
    }
    let mut obj = obj.clone();
    let m = obj.get_mut("metadata")?.as_object_mut()?;
    let ann = m.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    ann[TEMPLATE_GENERATION] = json!("0");
    Some(obj)
}

// ---------------------------------------------------------------------------------------------
// Walking values
// ---------------------------------------------------------------------------------------------

/// The path element of a list item, or None when the list is atomic for this item (a keyed
/// element without its keys, a set element that is not a scalar).
fn item_pe(ty: Ty, item: &Value) -> Option<Pe> {
    match ty {
        Ty::Keyed(keys, _) => {
            let o = item.as_object()?;
            let mut kv = Vec::new();
            for k in keys {
                if let Some(v) = o.get(*k) {
                    kv.push((k.to_string(), v.to_string()));
                }
            }
            if kv.is_empty() {
                return None;
            }
            kv.sort();
            Some(Pe::Key(kv))
        }
        Ty::Set => match item {
            Value::Object(_) | Value::Array(_) => None,
            v => Some(Pe::Value(v.to_string())),
        },
        _ => None,
    }
}

/// The items of a keyed list or set by path element, or None when it must be taken whole.
fn items(ty: Ty, list: Option<&Value>) -> Option<Vec<(Pe, &Value)>> {
    let Some(list) = list else {
        return Some(Vec::new());
    };
    let arr = match list {
        Value::Null => return Some(Vec::new()),
        Value::Array(a) => a,
        _ => return None,
    };
    let mut out: Vec<(Pe, &Value)> = Vec::new();
    for item in arr {
        let pe = item_pe(ty, item)?;
        if !out.iter().any(|(p, _)| *p == pe) {
            out.push((pe, item));
        }
    }
    Some(out)
}

enum Shape {
    Leaf,
    Map,
    List,
}

fn shape(ty: Ty, v: Option<&Value>) -> Shape {
    if ty == Ty::Atomic {
        return Shape::Leaf;
    }
    match (ty, v) {
        (Ty::Keyed(..) | Ty::Set, _) => Shape::List,
        (_, Some(Value::Object(_))) => Shape::Map,
        (Ty::Obj(_), Some(Value::Null)) => Shape::Map,
        _ => Shape::Leaf,
    }
}

/// What a write did, field by field.
#[derive(Debug, Default)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

/// Compares two objects of a type, as kube-apiserver's field manager does.
pub fn compare(old: &Value, new: &Value, ty: Ty) -> Comparison {
    let mut c = Comparison::default();
    walk_compare(&mut Vec::new(), Some(old), Some(new), ty, &mut c);
    c
}

fn leaf(path: &[Pe], l: Option<&Value>, r: Option<&Value>, c: &mut Comparison) {
    match (l, r) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        (Some(a), Some(b)) if a != b => c.modified.insert(path),
        _ => {}
    }
}

fn walk_compare(
    path: &mut Vec<Pe>,
    l: Option<&Value>,
    r: Option<&Value>,
    ty: Ty,
    c: &mut Comparison,
) {
    match shape(ty, r.or(l)) {
        Shape::Leaf => return leaf(path, l, r, c),
        Shape::Map => {
            let lm = l.and_then(Value::as_object);
            let rm = r.and_then(Value::as_object);
            let empty = |m: Option<&Map<String, Value>>| m.is_none_or(|m| m.is_empty());
            if (l.is_some_and(|v| !v.is_object() && !v.is_null()))
                || (r.is_some_and(|v| !v.is_object() && !v.is_null()))
                || (empty(lm) && empty(rm))
            {
                return leaf(path, l, r, c);
            }
            let mut keys: Vec<&String> = lm.map(|m| m.keys().collect()).unwrap_or_default();
            for k in rm.map(|m| m.keys()).into_iter().flatten() {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            for k in keys {
                if k == "managedFields" && path.as_slice() == [Pe::Field("metadata".into())] {
                    // The ownership records are not fields anyone owns.
                    continue;
                }
                path.push(Pe::Field(k.clone()));
                walk_compare(
                    path,
                    lm.and_then(|m| m.get(k)),
                    rm.and_then(|m| m.get(k)),
                    child(ty, k),
                    c,
                );
                path.pop();
            }
        }
        Shape::List => {
            let (Some(li), Some(ri)) = (items(ty, l), items(ty, r)) else {
                return leaf(path, l, r, c);
            };
            if li.is_empty() && ri.is_empty() {
                return leaf(path, l, r, c);
            }
            let mut pes: Vec<&Pe> = li.iter().map(|(p, _)| p).collect();
            for (p, _) in &ri {
                if !pes.contains(&p) {
                    pes.push(p);
                }
            }
            let et = elem(ty);
            for pe in pes {
                let lv = li.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                let rv = ri.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                path.push(pe.clone());
                walk_compare(path, lv, rv, et, c);
                path.pop();
            }
        }
    }
    if l.is_none() {
        c.added.insert(path);
    } else if r.is_none() {
        c.removed.insert(path);
    }
}

/// The fields an applied configuration sets: what its applier owns.
pub fn to_field_set(v: &Value, ty: Ty) -> FieldSet {
    let mut s = FieldSet::default();
    walk_set(&mut Vec::new(), v, ty, &mut s);
    s
}

fn walk_set(path: &mut Vec<Pe>, v: &Value, ty: Ty, s: &mut FieldSet) {
    match shape(ty, Some(v)) {
        Shape::Leaf => s.insert(path),
        Shape::Map => {
            let Some(m) = v.as_object() else { return };
            let is_struct = matches!(ty, Ty::Obj(_));
            for (k, cv) in m {
                path.push(Pe::Field(k.clone()));
                walk_set(path, cv, child(ty, k), s);
                let empty = cv.is_null() || cv.as_object().is_some_and(|o| o.is_empty());
                if empty || !is_struct {
                    s.insert(path);
                }
                path.pop();
            }
        }
        Shape::List => match items(ty, Some(v)) {
            None => s.insert(path),
            Some(list) => {
                for (pe, item) in list {
                    path.push(pe);
                    walk_set(path, item, elem(ty), s);
                    s.insert(path);
                    path.pop();
                }
            }
        },
    }
}

/// Removes `path` from `obj`; true when something was removed.
pub fn remove_path(obj: &mut Value, path: &[Pe]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    match (first, obj) {
        (Pe::Field(f), Value::Object(m)) => {
            if rest.is_empty() {
                return m.shift_remove(f).is_some();
            }
            m.get_mut(f).is_some_and(|c| remove_path(c, rest))
        }
        (pe, Value::Array(a)) => {
            let pos = a.iter().position(|item| match pe {
                Pe::Key(kv) => kv
                    .iter()
                    .all(|(k, v)| item.get(k).map(Value::to_string) == Some(v.clone())),
                Pe::Value(v) => serde_json::from_str::<Value>(v).ok().as_ref() == Some(item),
                Pe::Index(_) | Pe::Field(_) => false,
            });
            match pos {
                Some(i) if rest.is_empty() => {
                    a.remove(i);
                    true
                }
                Some(i) => remove_path(&mut a[i], rest),
                None => false,
            }
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Managers
// ---------------------------------------------------------------------------------------------

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
    fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    /// How a conflict message names this manager.
    fn describe(&self) -> String {
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
fn strip(set: &FieldSet) -> FieldSet {
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

/// What a write is, for field ownership.
#[derive(Debug, Clone)]
pub struct Operation {
    pub manager: String,
    /// "" for the main resource, else the subresource written through.
    pub subresource: String,
    pub api_version: String,
    pub group: String,
    pub kind: String,
    /// The object has a status subresource: the main resource does not own status, and the
    /// status subresource owns nothing else.
    pub has_status: bool,
    pub now: String,
    /// Server-side apply: the configuration's fields, and whether conflicts are overridden.
    pub apply: Option<(FieldSet, bool)>,
}

/// A server-side apply changed fields other managers own.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflicts(pub Vec<(String, String)>);

impl Conflicts {
    /// kube-apiserver's message for them.
    pub fn message(&self) -> String {
        if let [(m, p)] = self.0.as_slice() {
            return format!("Apply failed with 1 conflict: conflict with {m}: {p}");
        }
        let mut by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (m, p) in &self.0 {
            by.entry(m).or_default().push(p);
        }
        let mut lines = Vec::new();
        for (m, ps) in by {
            lines.push(format!("conflicts with {m}:"));
            for p in ps {
                lines.push(format!("- {p}"));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }
}

impl Operation {
    pub fn ty(&self) -> Ty {
        root(&self.group, &self.kind)
    }

    /// The part of a set this operation may own.
    fn owned(&self, set: &FieldSet) -> FieldSet {
        let set = strip(set);
        match self.subresource.as_str() {
            "" if self.has_status => set.filter_top("status", false),
            "status" => set.filter_top("status", true),
            _ => set,
        }
    }

    fn entry(&self, set: FieldSet) -> Entry {
        Entry {
            manager: self.manager.clone(),
            operation: if self.apply.is_some() {
                "Apply"
            } else {
                "Update"
            }
            .into(),
            api_version: self.api_version.clone(),
            time: Some(self.now.clone()),
            subresource: self.subresource.clone(),
            set,
        }
    }

    /// The managed fields after this write turned `old` into `new` (`old` None: a create).
    /// `new` carries the entries a client sent with it; those replace the stored ones when
    /// they can be read (how a client resets ownership), else the stored ones stay.
    pub fn run(&self, old: Option<&Value>, new: &mut Value) -> Result<(), Conflicts> {
        let sent = if self.subresource.is_empty() {
            decode(new).ok().filter(|e| !e.is_empty())
        } else {
            None
        };
        let mut entries = match (sent, old) {
            (Some(e), _) => e,
            (None, Some(old)) => decode(old).unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        let zero;
        let before = match old {
            Some(o) => o,
            None => {
                zero = zero_object(
                    &self.group,
                    self.api_version.rsplit('/').next().unwrap_or(""),
                    &self.kind,
                );
                &zero
            }
        };
        let converted = as_converted(&self.group, &self.kind, new);
        let c = compare(before, converted.as_ref().unwrap_or(new), self.ty());
        let changed = self.owned(&c.added.union(&c.modified));
        let removed = self.owned(&c.removed);
        let me = self.entry(FieldSet::default());
        if let Some((_, force)) = &self.apply {
            let mut conflicts = Vec::new();
            for e in entries.iter().filter(|e| !e.same_manager(&me)) {
                for p in e.set.intersection(&changed).paths() {
                    conflicts.push((e.describe(), display_path(&p)));
                }
            }
            if !conflicts.is_empty() && !force {
                return Err(Conflicts(conflicts));
            }
        }
        // Everyone else loses what this write changed or removed.
        for e in entries.iter_mut().filter(|e| !e.same_manager(&me)) {
            e.set = e.set.difference(&changed).difference(&removed);
        }
        match &self.apply {
            Some((config, _)) => {
                let config = self.owned(config);
                match entries.iter_mut().find(|e| e.same_manager(&me)) {
                    Some(e) => {
                        let object_changed =
                            !c.added.is_empty() || !c.modified.is_empty() || !c.removed.is_empty();
                        e.set = config;
                        e.api_version = self.api_version.clone();
                        if object_changed {
                            e.time = Some(self.now.clone());
                        }
                    }
                    None => entries.push(self.entry(config)),
                }
            }
            None if !changed.is_empty() => match entries.iter_mut().find(|e| e.same_manager(&me)) {
                Some(e) => {
                    e.set = e.set.difference(&removed).union(&changed);
                    e.time = Some(self.now.clone());
                }
                None => entries.push(self.entry(changed)),
            },
            None => {
                if let Some(e) = entries.iter_mut().find(|e| e.same_manager(&me)) {
                    e.set = e.set.difference(&removed);
                }
            }
        }
        encode(new, entries);
        Ok(())
    }

    /// Server-side apply's pruning: fields this applier owned and its new configuration leaves
    /// out go from `merged`, unless another manager owns them or something below them.
    pub fn prune_unapplied(&self, current: &Value, merged: &mut Value) {
        let Some((config, _)) = &self.apply else {
            return;
        };
        let Ok(entries) = decode(current) else {
            return;
        };
        let me = self.entry(FieldSet::default());
        let Some(mine) = entries.iter().find(|e| e.same_manager(&me)) else {
            return;
        };
        let others: Vec<Vec<Pe>> = entries
            .iter()
            .filter(|e| !e.same_manager(&me))
            .fold(FieldSet::new(), |acc, e| acc.union(&e.set))
            .paths();
        let mut gone = mine.set.difference(config).paths();
        // Deepest first, so a parent goes after what it held.
        gone.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in gone {
            if !others.iter().any(|o| o.starts_with(&p)) {
                remove_path(merged, &p);
            }
        }
    }

    /// A write through `/scale` that changed the replicas at `replicas` (a path of field names
    /// in the parent object): the writer owns them there, under subresource `scale` and without
    /// a time, and nobody else does.
    pub fn run_scale(&self, new: &mut Value, replicas: &[&str]) {
        let mut entries = decode(new).unwrap_or_default();
        let path: Vec<Pe> = replicas.iter().map(|f| Pe::Field(f.to_string())).collect();
        let mut set = FieldSet::default();
        set.insert(&path);
        let me = Entry {
            time: None,
            subresource: "scale".into(),
            ..self.entry(set.clone())
        };
        for e in entries.iter_mut().filter(|e| !e.same_manager(&me)) {
            e.set = e.set.difference(&set);
        }
        match entries.iter_mut().find(|e| e.same_manager(&me)) {
            Some(e) => e.set = e.set.union(&set),
            None => entries.push(me),
        }
        encode(new, entries);
    }
}

/// The manager a request writes as: its `fieldManager`, else its user agent up to the first `/`.
pub fn manager_name(field_manager: Option<&str>, user_agent: &str) -> String {
    match field_manager.filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => user_agent.split('/').next().unwrap_or("").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: &str, group: &str, apply: Option<(FieldSet, bool)>) -> Operation {
        Operation {
            manager: "m".into(),
            subresource: String::new(),
            api_version: if group.is_empty() {
                "v1".into()
            } else {
                format!("{group}/v1")
            },
            group: group.into(),
            kind: kind.into(),
            has_status: true,
            now: "2026-01-01T00:00:00Z".into(),
            apply,
        }
    }

    #[test]
    fn create_owns_what_go_does_not_always_write() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
                "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "i", "resources": {},
                        "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}},
            "status": {}});
        op("Deployment", "apps", None).run(None, &mut d).unwrap();
        let mf = &d["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "m");
        assert_eq!(mf["operation"], "Update");
        assert_eq!(
            mf["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                "f:spec": {"f:replicas": {}, "f:selector": {},
                    "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}}, "f:type": {}},
                    "f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {},
                            "f:name": {}, "f:resources": {},
                            "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                ".": {}, "f:containerPort": {}, "f:protocol": {}}}}}}}}})
        );
    }

    #[test]
    fn updates_move_ownership_and_apply_conflicts() {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"k": "v"}});
        let config = to_field_set(&cm, root("", "ConfigMap"));
        let mut o = op("ConfigMap", "", Some((config, false)));
        o.manager = "me".into();
        o.has_status = false;
        o.run(None, &mut cm).unwrap();
        assert_eq!(
            cm["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:k": {}}})
        );
        assert_eq!(cm["metadata"]["managedFields"][0]["operation"], "Apply");
        // Another applier setting the same field to another value conflicts.
        let mut next = cm.clone();
        next["data"]["k"] = json!("w");
        let config = to_field_set(&json!({"data": {"k": "w"}}), root("", "ConfigMap"));
        let mut other = op("ConfigMap", "", Some((config.clone(), false)));
        other.manager = "other".into();
        other.has_status = false;
        let err = other.run(Some(&cm), &mut next.clone()).unwrap_err();
        assert_eq!(
            err.message(),
            "Apply failed with 1 conflict: conflict with \"me\": .data.k"
        );
        // Forced, it takes the field.
        other.apply = Some((config, true));
        other.run(Some(&cm), &mut next).unwrap();
        let mf = next["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 1);
        assert_eq!(mf[0]["manager"], "other");
        // An update by a third manager takes it again, without a conflict.
        let mut third = next.clone();
        third["data"]["k"] = json!("x");
        let mut u = op("ConfigMap", "", None);
        u.has_status = false;
        u.run(Some(&next), &mut third).unwrap();
        let mf = third["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 1);
        assert_eq!(mf[0]["manager"], "m");
        assert_eq!(mf[0]["operation"], "Update");
    }

    #[test]
    fn fields_v1_round_trips_and_paths_print() {
        let v = json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a/b\"": {}}},
            "f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}}}});
        let s = FieldSet::from_fields_v1(&v).unwrap();
        assert_eq!(s.to_fields_v1(), v);
        let paths: Vec<String> = s.paths().iter().map(|p| display_path(p)).collect();
        assert!(paths.contains(&".spec.ports[port=80,protocol=\"TCP\"].port".to_string()));
        assert!(paths.contains(&".metadata.finalizers[=\"a/b\"]".to_string()));
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
    }

    #[test]
    fn status_and_scale_entries() {
        let old = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}, "status": {}});
        let mut new = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1},
            "status": {"replicas": 1}});
        let mut s = op("Deployment", "apps", None);
        s.subresource = "status".into();
        s.run(Some(&old), &mut new).unwrap();
        let mf = &new["metadata"]["managedFields"][0];
        assert_eq!(mf["subresource"], "status");
        assert_eq!(mf["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
        s.run_scale(&mut new, &["spec", "replicas"]);
        let mf = new["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf[0]["subresource"], "scale");
        assert!(mf[0].get("time").is_none());
    }

    #[test]
    fn removing_paths() {
        let mut v = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "TCP"}]},
            "metadata": {"finalizers": ["a", "b"]}});
        assert!(remove_path(
            &mut v,
            &[
                Pe::Field("spec".into()),
                Pe::Field("ports".into()),
                Pe::Key(vec![
                    ("port".into(), "81".into()),
                    ("protocol".into(), "\"TCP\"".into())
                ])
            ]
        ));
        assert!(remove_path(
            &mut v,
            &[
                Pe::Field("metadata".into()),
                Pe::Field("finalizers".into()),
                Pe::Value("\"a\"".into())
            ]
        ));
        assert_eq!(
            v,
            json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}]}, "metadata": {"finalizers": ["b"]}})
        );
    }
}

//! Go's `omitempty`: the zero values kube-apiserver does not return.
//!
//! The real server decodes a request into Go structs and encodes the stored object from them,
//! so a field tagged `omitempty` whose value is the zero value of a non-pointer string,
//! number, bool, slice or map disappears (a client sending `paused: false` or
//! `minReadySeconds: 0` reads neither back), while a pointer keeps its zero (`replicas: 0`)
//! and loses only `null`, and a field without `omitempty` keeps whatever it holds. kube-sim
//! keeps objects as JSON, so it applies the same rule on the way in (before defaulting: Go's
//! defaulters cannot tell an empty string from an absent one either) and once more before it
//! stores what the strategy produced.
//!
//! The rules come from the recorded OpenAPI definitions ([`rkcm_openapi::builtin`]), walked
//! from each served kind's definition: a `required` property has no `omitempty` and keeps its
//! value; a property holding an object definition is a value struct (never dropped) when its
//! schema has `"default": {}` and a pointer (dropped when null) otherwise; optional lists, maps
//! and scalars drop their zero value. Two things the schemas cannot say are written by hand in
//! `go_fields`, per definition: the optional fields that are Go pointers to a scalar or to a
//! custom-typed value (`*int32`, `*bool`, `*string`, `*metav1.Time`, `*intstr.IntOrString`,
//! ...: these keep a zero and lose only null), and the optional fields whose json tag lacks
//! `omitempty` (kept as they are). A property holding a custom-typed value that is not a
//! pointer (`metav1.Time`, `intstr.IntOrString`, `resource.Quantity`) is kept: Go never drops a
//! struct. Custom resources, the gated kinds (not in the record) and the kinds of `EXCLUDED`
//! are left alone.

use rkcm_openapi::Definitions;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Definition name prefixes whose kinds are left as sent: CustomResourceDefinitions and
/// APIServices (their nested JSON schemas and pointers are not written down here) and the
/// review kinds (answered, never stored).
const EXCLUDED: &[&str] = &[
    "io.k8s.apiextensions-apiserver.",
    "io.k8s.kube-aggregator.",
    "io.k8s.api.authentication.",
    "io.k8s.api.authorization.",
];

mod go_fields;

use go_fields::{NOT_OMITEMPTY, POINTERS};

/// What happens to a field's value when it is empty.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Drop {
    /// `omitempty` on a non-pointer string, number, bool, slice or map: the zero value goes.
    Zero,
    /// `omitempty` on a pointer: only null goes.
    Null,
    /// No `omitempty` (or a struct value): kept.
    Keep,
}

/// Where a field's value holds another definition's objects.
#[derive(Debug, Clone, PartialEq)]
enum Holds {
    Nothing,
    /// The value is an object of this definition, or a list of them.
    Objects(String),
    /// The value is a map whose values are objects of this definition.
    MapOf(String),
}

#[derive(Debug)]
struct FieldRule {
    name: String,
    drop: Drop,
    holds: Holds,
}

/// The rules, per definition name, for every definition reachable from a served kind.
fn rules() -> &'static HashMap<String, Vec<FieldRule>> {
    static TABLE: OnceLock<HashMap<String, Vec<FieldRule>>> = OnceLock::new();
    TABLE.get_or_init(|| rules_of(rkcm_openapi::builtin()))
}

fn rules_of(defs: &Definitions) -> HashMap<String, Vec<FieldRule>> {
    let mut table = HashMap::new();
    let mut roots: Vec<&str> = defs
        .gvks()
        .map(|(_, _, _, name)| name)
        .filter(|name| served(defs, name))
        .collect();
    roots.dedup();
    for root in roots {
        visit(defs, root, &mut table);
    }
    table
}

/// A stored kind of a group whose rules apply: it has metadata and is not a list.
fn served(defs: &Definitions, name: &str) -> bool {
    !EXCLUDED.iter().any(|p| name.starts_with(p))
        && !name.ends_with("List")
        && defs
            .get(name)
            .and_then(|s| s.get("properties"))
            .is_some_and(|p| p.get("metadata").is_some())
}

fn listed(table: &[(&str, &[&str])], definition: &str, field: &str) -> bool {
    table
        .iter()
        .any(|(d, fields)| *d == definition && fields.contains(&field))
}

/// Whether a definition is a struct with fields (not a custom-typed value such as
/// `metav1.Time`, `intstr.IntOrString`, `resource.Quantity` or raw JSON).
fn is_struct(defs: &Definitions, name: &str) -> bool {
    defs.get(name)
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .is_some()
}

fn visit(defs: &Definitions, name: &str, table: &mut HashMap<String, Vec<FieldRule>>) {
    if table.contains_key(name) {
        return;
    }
    table.insert(name.to_string(), Vec::new());
    let Some(schema) = defs.get(name) else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let mut fields = Vec::new();
    for (field, prop) in properties {
        let rule = field_rule(defs, name, field, prop, required.contains(&field.as_str()));
        match &rule.holds {
            Holds::Objects(held) | Holds::MapOf(held) => visit(defs, held, table),
            Holds::Nothing => {}
        }
        if rule.drop != Drop::Keep || rule.holds != Holds::Nothing {
            fields.push(rule);
        }
    }
    table.insert(name.to_string(), fields);
}

/// The rule of one property of definition `owner`.
fn field_rule(
    defs: &Definitions,
    owner: &str,
    field: &str,
    prop: &Value,
    required: bool,
) -> FieldRule {
    let struct_ref = |schema: &Value| {
        rkcm_openapi::referenced_name(schema)
            .filter(|r| is_struct(defs, r))
            .map(str::to_string)
    };
    let pointer = listed(POINTERS, owner, field);
    let omitempty = !required && !listed(NOT_OMITEMPTY, owner, field);
    let (drop, holds) = if rkcm_openapi::referenced_name(prop).is_some() {
        let held = struct_ref(prop);
        let drop = if !omitempty {
            Drop::Keep
        } else if held.is_some() {
            // A struct: a value when its schema defaults to `{}`, a pointer otherwise.
            if prop.get("default").is_some() {
                Drop::Keep
            } else {
                Drop::Null
            }
        } else if pointer {
            Drop::Null
        } else {
            // A custom-typed value (`metav1.Time`, `intstr.IntOrString`): Go never drops it.
            Drop::Keep
        };
        (drop, held.map_or(Holds::Nothing, Holds::Objects))
    } else {
        let holds = match prop.get("type").and_then(Value::as_str) {
            Some("array") => prop
                .get("items")
                .and_then(struct_ref)
                .map_or(Holds::Nothing, Holds::Objects),
            Some("object") => prop
                .get("additionalProperties")
                .and_then(struct_ref)
                .map_or(Holds::Nothing, Holds::MapOf),
            _ => Holds::Nothing,
        };
        let drop = match (omitempty, pointer) {
            (false, _) => Drop::Keep,
            (true, true) => Drop::Null,
            (true, false) => Drop::Zero,
        };
        (drop, holds)
    };
    FieldRule {
        name: field.to_string(),
        drop,
        holds,
    }
}

/// Drops the fields Go's encoding would drop from an object of this kind; objects of kinds
/// without rules (custom resources, gated and excluded kinds) are unchanged.
pub(crate) fn prune(group: &str, version: &str, kind: &str, obj: &mut Value) {
    if let Some(name) = root(group, version, kind) {
        prune_type(name, obj, Stage::Encode);
    }
}

/// Drops what decoding into the Go type loses: scalar zero values of `omitempty` fields and
/// nulls. An empty list or map survives decoding (Go keeps it apart from nil, and validation
/// prints `[]string{}` where a nil slice prints `[]string(nil)`); only encoding drops it.
pub(crate) fn prune_decoded(group: &str, version: &str, kind: &str, obj: &mut Value) {
    if let Some(name) = root(group, version, kind) {
        prune_type(name, obj, Stage::Decode);
    }
}

/// The definition of a served kind the rules cover.
fn root(group: &str, version: &str, kind: &str) -> Option<&'static str> {
    rkcm_openapi::builtin()
        .name_for_gvk(group, version, kind)
        .filter(|name| rules().contains_key(*name))
}

#[derive(Clone, Copy, PartialEq)]
enum Stage {
    Decode,
    Encode,
}

/// As `prune`, in the version the object now names (after a conversion to the storage version).
pub(crate) fn prune_stored(group: &str, kind: &str, obj: &mut Value) {
    let version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|a| a.rsplit('/').next())
        .unwrap_or_default()
        .to_string();
    prune(group, &version, kind, obj);
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

fn prune_type(ty: &str, value: &mut Value, stage: Stage) {
    let Some(fields) = rules().get(ty) else {
        return;
    };
    let Some(map) = value.as_object_mut() else {
        return;
    };
    for rule in fields {
        let Some(v) = map.get_mut(&rule.name) else {
            continue;
        };
        let dropped = match rule.drop {
            Drop::Zero => {
                is_zero(v) && (stage == Stage::Encode || !(v.is_array() || v.is_object()))
            }
            Drop::Null => v.is_null(),
            Drop::Keep => false,
        };
        if dropped {
            map.remove(&rule.name);
            continue;
        }
        match (&rule.holds, v) {
            (Holds::Objects(held), Value::Array(items)) => {
                items.iter_mut().for_each(|i| prune_type(held, i, stage))
            }
            (Holds::Objects(held), other) => prune_type(held, other, stage),
            (Holds::MapOf(held), Value::Object(entries)) => entries
                .values_mut()
                .for_each(|e| prune_type(held, e, stage)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;

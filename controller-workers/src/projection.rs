//! Field projections of a worker's streams: each controller declares, per resource, the
//! fields it reads (its registry descriptor's `fields`); a worker asks the informer-server
//! for the union of its controllers' fields, so its stores hold only those (`metadata`,
//! `apiVersion` and `kind` always come whole).
//!
//! The stores hold typed objects (k8s-openapi), whose decode needs the fields the OpenAPI
//! definitions mark `required` (a Pod's `spec.containers[].name`, a condition's `type`
//! and `status`): `with_required` adds, for every declared path, the required fields of
//! each object along it, derived from the recorded server's definitions
//! ([`rkcm_openapi::load_all`], loaded while the informers are made and then released),
//! so a projected object always decodes.

use std::collections::{BTreeMap, BTreeSet};

use rkcm_openapi::{referenced_name, Definitions};
use serde_json::Value;

/// The fields a controller reads, per resource (`("v1/pods", &["spec.nodeName",
/// "status.phase"])`): dot-separated paths from the object's root, through every element
/// of a list on the way, a path keeping the whole subtree it names. A resource the
/// controller reads but does not list here is read whole.
pub type FieldList = &'static [(&'static str, &'static [&'static str])];

/// How deep required fields are followed (definitions such as JSONSchemaProps refer to
/// themselves).
const MAX_DEPTH: usize = 12;

/// Per resource, the fields a group of controllers reads: the union of their
/// declarations, or `None` when one of them reads the resource whole.
pub(crate) fn union<'a>(
    readers: impl IntoIterator<Item = (&'a [&'static str], FieldList)>,
) -> BTreeMap<&'static str, Option<BTreeSet<&'static str>>> {
    let mut union: BTreeMap<&'static str, Option<BTreeSet<&'static str>>> = BTreeMap::new();
    for (resources, fields) in readers {
        for &resource in resources {
            let declared = fields
                .iter()
                .find(|(declared, _)| *declared == resource)
                .map(|(_, paths)| *paths);
            let entry = union
                .entry(resource)
                .or_insert_with(|| Some(BTreeSet::new()));
            match (entry.as_mut(), declared) {
                (Some(kept), Some(paths)) => kept.extend(paths.iter().copied()),
                (Some(_), None) => *entry = None,
                (None, _) => {}
            }
        }
    }
    union
}

/// `paths` (the fields to keep of `group/version, Kind=kind`) with the fields each object
/// along them requires to decode, sorted and without duplicates; `None` when the kind has
/// no recorded definition (the object is then streamed whole).
pub(crate) fn with_required(
    definitions: &Definitions,
    group: &str,
    version: &str,
    kind: &str,
    paths: &[String],
) -> Option<Vec<String>> {
    let root = definitions.get(definitions.name_for_gvk(group, version, kind)?)?;
    let mut out: BTreeSet<String> = paths.iter().cloned().collect();
    for path in paths {
        let mut schema = root;
        let mut prefix = String::new();
        let mut segments = path.split('.').peekable();
        while let Some(segment) = segments.next() {
            let schema_here = element(definitions, schema);
            required_of(definitions, schema_here, &prefix, 0, &mut out);
            if segments.peek().is_none() {
                break;
            }
            let Some(child) = child(definitions, schema_here, segment) else {
                break;
            };
            schema = child;
            prefix = join(&prefix, segment);
        }
    }
    Some(out.into_iter().collect())
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The schema a reference points to, or the schema itself.
fn deref<'a>(definitions: &'a Definitions, schema: &'a Value) -> &'a Value {
    referenced_name(schema)
        .and_then(|name| definitions.get(name))
        .unwrap_or(schema)
}

/// The schema of what a path segment goes into: an array's element, a map's value, or
/// the object itself.
fn element<'a>(definitions: &'a Definitions, schema: &'a Value) -> &'a Value {
    let schema = deref(definitions, schema);
    match schema.get("items") {
        Some(items) => deref(definitions, items),
        None => schema,
    }
}

/// The schema of field `name` of an object (or of a map's values).
fn child<'a>(definitions: &'a Definitions, schema: &'a Value, name: &str) -> Option<&'a Value> {
    if let Some(property) = schema.get("properties").and_then(|p| p.get(name)) {
        return Some(deref(definitions, property));
    }
    match schema.get("additionalProperties") {
        Some(values @ Value::Object(_)) => Some(element(definitions, values)),
        _ => None,
    }
}

/// Adds the required fields of the object `schema` at `prefix`: an object (or list of
/// objects) with required fields of its own only by those, anything else whole.
fn required_of(
    definitions: &Definitions,
    schema: &Value,
    prefix: &str,
    depth: usize,
    out: &mut BTreeSet<String>,
) {
    let Some(required) = schema.get("required").and_then(Value::as_array) else {
        return;
    };
    for name in required.iter().filter_map(Value::as_str) {
        let path = join(prefix, name);
        let inner = child(definitions, schema, name).map(|c| element(definitions, c));
        let nested = inner
            .and_then(|inner| inner.get("required"))
            .and_then(Value::as_array)
            .is_some_and(|r| !r.is_empty());
        match inner {
            Some(inner) if nested && depth < MAX_DEPTH => {
                required_of(definitions, inner, &path, depth + 1, out)
            }
            _ => {
                out.insert(path);
            }
        }
    }
}

#[cfg(test)]
mod tests;

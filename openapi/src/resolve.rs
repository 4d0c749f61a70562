//! Inlining references (upstream's `resolver.PopulateRefs`).

use std::collections::HashSet;
use std::fmt;

use serde_json::{json, Map, Value};

use crate::Definitions;

/// Where references into `components.schemas` point.
const REF_PREFIX: &str = "#/components/schemas/";

/// Why a group/version/kind has no schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// No definition lists the kind, or a reference names a definition that does not exist
    /// (upstream wraps `ErrSchemaNotFound` in both cases).
    NotFound(String),
    /// A definition is malformed (a `$ref` that is not a string).
    Invalid(String),
}

impl ResolveError {
    /// True for [`ResolveError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, ResolveError::NotFound(_))
    }
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::NotFound(m) | ResolveError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ResolveError {}

/// The definition `root` with its references inlined; `root` counts as being inlined, so a
/// reference back to it is a recursion.
pub(crate) fn populate_root(defs: &Definitions, root: &str) -> Result<Value, ResolveError> {
    let Some(schema) = defs.get(root) else {
        return Err(ResolveError::NotFound(format!(
            "internal error: cannot resolve Ref for root schema {}: schema not found",
            rkcm_gocompat::gofmt::quote(root)
        )));
    };
    let mut visiting = HashSet::new();
    visiting.insert(root.to_string());
    populate(defs, &mut visiting, schema)
}

fn populate(
    defs: &Definitions,
    visiting: &mut HashSet<String>,
    schema: &Value,
) -> Result<Value, ResolveError> {
    let Some(obj) = schema.as_object() else {
        // `additionalProperties: true` and the like: nothing to inline.
        return Ok(schema.clone());
    };
    let Some(reference) = ref_of(obj)? else {
        return populate_children(defs, visiting, obj.clone());
    };
    let name = reference.strip_prefix(REF_PREFIX).unwrap_or(reference);
    if visiting.contains(name) {
        // A recursive reference: an empty object stands in for it.
        return Ok(json!({"type": "object"}));
    }
    let Some(resolved) = defs.get(name).and_then(Value::as_object) else {
        return Err(ResolveError::NotFound(format!(
            "internal error: cannot resolve Ref {}: schema not found",
            rkcm_gocompat::gofmt::quote(reference)
        )));
    };
    visiting.insert(name.to_string());
    // The referred schema replaces the whole schema, siblings of the reference included.
    let out = populate_children(defs, visiting, resolved.clone());
    visiting.remove(name);
    out
}

/// Inlines below a schema: its properties, `additionalProperties` and (single-schema) `items`.
fn populate_children(
    defs: &Definitions,
    visiting: &mut HashSet<String>,
    mut obj: Map<String, Value>,
) -> Result<Value, ResolveError> {
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for prop in props.values_mut() {
            *prop = populate(defs, visiting, prop)?;
        }
    }
    for key in ["additionalProperties", "items"] {
        if let Some(child @ Value::Object(_)) = obj.get_mut(key) {
            *child = populate(defs, visiting, child)?;
        }
    }
    Ok(Value::Object(obj))
}

/// The schema's reference: its `$ref`, else the first reference found in its `allOf` (which
/// kube-openapi uses only to wrap a reference next to a description or default).
fn ref_of(obj: &Map<String, Value>) -> Result<Option<&str>, ResolveError> {
    if let Some(r) = obj.get("$ref") {
        return match r.as_str() {
            Some(s) => Ok(Some(s)),
            None => Err(ResolveError::Invalid(format!(
                "invalid $ref {}: not a string",
                r
            ))),
        };
    }
    if let Some(Value::Array(all)) = obj.get("allOf") {
        for member in all.iter().filter_map(Value::as_object) {
            if let Some(r) = ref_of(member)? {
                return Ok(Some(r));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;

    fn defs(schemas: Value) -> Definitions {
        Definitions::from_documents([&json!({"components": {"schemas": schemas}})])
    }

    #[test]
    fn deployment_resolves_with_object_meta_inlined() {
        let d = builtin();
        let dep = match d.resolve("apps", "v1", "Deployment") {
            Ok(v) => v,
            Err(e) => panic!("{}", e),
        };
        let text = dep.to_string();
        assert!(!text.contains("$ref"), "references left: {}", text);
        let meta = &dep["properties"]["metadata"];
        assert_eq!(meta["type"], json!("object"));
        assert_eq!(meta["properties"]["name"]["type"], json!("string"));
        // The wrapper's sibling `default: {}` went with the reference, as upstream.
        assert!(meta.get("default").is_none() && meta.get("allOf").is_none());
        // Deep inside: the pod template's containers, with their patch metadata.
        let containers = &dep["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
            ["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], json!("name"));
        assert_eq!(
            containers["items"]["properties"]["ports"]["items"]["properties"]["containerPort"]
                ["type"],
            json!("integer")
        );
        // Maps of references: a ResourceList's Quantity.
        let limits = &containers["items"]["properties"]["resources"]["properties"]["limits"];
        assert_eq!(
            limits["additionalProperties"]["oneOf"],
            json!([{"type": "string"}, {"type": "number"}])
        );
        assert_eq!(
            dep["x-kubernetes-group-version-kind"][0]["kind"],
            json!("Deployment")
        );
    }

    #[test]
    fn all_of_and_siblings() {
        let d = defs(json!({
            "x.Root": {"type": "object", "properties": {
                "wrapped": {"default": {"a": 1}, "allOf": [{"$ref": "#/components/schemas/x.Leaf"}]},
                "direct": {"$ref": "#/components/schemas/x.Leaf"},
                "nested": {"allOf": [{"allOf": [{"$ref": "#/components/schemas/x.Leaf"}]}]},
                "plain": {"allOf": [{"type": "string"}], "default": "x"},
                "list": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/x.Leaf"}]}},
                "map": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/x.Leaf"}},
                "open": {"type": "object", "additionalProperties": true},
            }, "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "Root"}]},
            "x.Leaf": {"type": "object", "properties": {"v": {"type": "integer"}}},
        }));
        let r = match d.resolve("g", "v1", "Root") {
            Ok(v) => v,
            Err(e) => panic!("{}", e),
        };
        let leaf = json!({"type": "object", "properties": {"v": {"type": "integer"}}});
        let p = &r["properties"];
        assert_eq!(p["wrapped"], leaf);
        assert_eq!(p["direct"], leaf);
        assert_eq!(p["nested"], leaf);
        // allOf without a reference is kept as it is.
        assert_eq!(
            p["plain"],
            json!({"allOf": [{"type": "string"}], "default": "x"})
        );
        assert_eq!(p["list"]["items"], leaf);
        assert_eq!(p["map"]["additionalProperties"], leaf);
        assert_eq!(p["open"]["additionalProperties"], json!(true));
    }

    #[test]
    fn recursion_becomes_an_empty_object() {
        let d = defs(json!({
            "x.Node": {"type": "object", "properties": {
                "next": {"$ref": "#/components/schemas/x.Node"},
                "other": {"$ref": "#/components/schemas/x.Other"},
                "other2": {"$ref": "#/components/schemas/x.Other"},
            }, "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "Node"}]},
            "x.Other": {"type": "object", "properties": {
                "back": {"$ref": "#/components/schemas/x.Node"},
                "self": {"items": {"$ref": "#/components/schemas/x.Other"}, "type": "array"},
            }},
        }));
        let r = match d.resolve("g", "v1", "Node") {
            Ok(v) => v,
            Err(e) => panic!("{}", e),
        };
        let placeholder = json!({"type": "object"});
        assert_eq!(r["properties"]["next"], placeholder);
        // A definition is inlined again in a sibling (only the path down counts).
        for f in ["other", "other2"] {
            let o = &r["properties"][f]["properties"];
            assert_eq!(o["back"], placeholder);
            assert_eq!(o["self"]["items"], placeholder);
        }

        // The real recursive one: a CRD's openAPIV3Schema.
        let crd = match builtin().resolve("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
        {
            Ok(v) => v,
            Err(e) => panic!("{}", e),
        };
        let versions = &crd["properties"]["spec"]["properties"]["versions"]["items"];
        let props =
            &versions["properties"]["schema"]["properties"]["openAPIV3Schema"]["properties"];
        assert_eq!(props["not"], placeholder);
        assert_eq!(props["properties"]["additionalProperties"], placeholder);
        assert_eq!(props["allOf"]["items"], placeholder);
        assert_eq!(props["type"], json!({"type": "string"}));
    }

    #[test]
    fn errors_say_what_is_missing() {
        let e = builtin().resolve("apps", "v1", "Nope");
        assert_eq!(
            e,
            Err(ResolveError::NotFound(
                "cannot resolve apps/v1, Kind=Nope: schema not found".into()
            ))
        );
        assert!(builtin()
            .resolve("", "v2", "Pod")
            .is_err_and(|e| e.is_not_found()));
        let d = defs(json!({
            "x.A": {"properties": {"b": {"$ref": "#/components/schemas/x.Missing"}},
                    "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "A"}]},
            "x.B": {"properties": {"b": {"$ref": 3}},
                    "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "B"}]},
        }));
        let e = d.resolve("", "v1", "A");
        assert_eq!(
            e,
            Err(ResolveError::NotFound(
                "internal error: cannot resolve Ref \"#/components/schemas/x.Missing\": schema not found"
                    .into()
            ))
        );
        let e = d.resolve("", "v1", "B");
        assert!(matches!(e, Err(ResolveError::Invalid(_))), "{:?}", e);
    }
}

//! The Swagger 2.0 document kube-apiserver serves at `/openapi/v2`, converted from the v3
//! documents as upstream's v2 output differs from its v3 output: references under
//! `#/definitions/`, a reference with siblings written as the bare `$ref` (no `allOf`), no
//! `nullable`, `oneOf` types (IntOrString, Quantity) as strings, request bodies as `body`
//! parameters. kubectl's client-side validation reads it (in protobuf, see `proto`) for a
//! `kind: List` and whenever server-side field validation is unavailable.
//!
//! Custom resources are left out of this document: upstream publishes them in v2 only in a
//! reduced form (`ToStructuralOpenAPIV2`), and a kind missing here is one kubectl does not
//! validate on the client, which is what the full server does for schemas v2 cannot express.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::catalog::{Catalog, GroupVersion, V3_REF};
use super::v3;

const V2_REF: &str = "#/definitions/";

/// One schema in v2's form.
pub(crate) fn schema(v3: &Value) -> Value {
    let Value::Object(m) = v3 else {
        return v3.clone();
    };
    let mut out = Map::new();
    // A lone allOf of one reference is how v3 gives a reference siblings; v2 puts the
    // reference itself beside them.
    if let Some(Value::Array(all)) = m.get("allOf") {
        if let [single] = all.as_slice() {
            if let Some(Value::String(r)) = single.get("$ref") {
                out.insert("$ref".into(), json!(rewrite_ref(r)));
            }
        }
    }
    for (k, v) in m {
        match k.as_str() {
            "allOf" if out.contains_key("$ref") => {}
            "nullable" => {}
            "oneOf" | "anyOf" => {
                if !m.contains_key("type") {
                    out.insert("type".into(), json!("string"));
                }
            }
            "$ref" => {
                if let Value::String(r) = v {
                    out.insert("$ref".into(), json!(rewrite_ref(r)));
                }
            }
            "properties" => {
                let props: Map<String, Value> = v
                    .as_object()
                    .map(|p| p.iter().map(|(n, s)| (n.clone(), schema(s))).collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" | "not" => {
                out.insert(k.clone(), schema(v));
            }
            "allOf" => {
                let parts = v
                    .as_array()
                    .map(|a| a.iter().map(schema).collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Array(parts));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn rewrite_ref(r: &str) -> String {
    match r.strip_prefix(V3_REF) {
        Some(name) => format!("{V2_REF}{name}"),
        None => r.to_string(),
    }
}

/// A v3 parameter in v2's form (its schema's type inline).
fn parameter(p: &Value) -> Value {
    let mut out = Map::new();
    for (k, v) in p.as_object().into_iter().flatten() {
        if k == "schema" {
            for (sk, sv) in v.as_object().into_iter().flatten() {
                out.insert(sk.clone(), sv.clone());
            }
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// The first media type's schema of a v3 `content`.
fn content_schema(content: &Value) -> Option<Value> {
    let m = content.as_object()?;
    let first = m.get("application/json").or_else(|| m.values().next())?;
    first.get("schema").map(schema)
}

fn operation(op: &Value) -> Value {
    let mut out = Map::new();
    for (k, v) in op.as_object().into_iter().flatten() {
        match k.as_str() {
            "parameters" => {
                let mut ps: Vec<Value> = v
                    .as_array()
                    .map(|a| a.iter().map(parameter).collect())
                    .unwrap_or_default();
                if let Some(body) = op
                    .get("requestBody")
                    .and_then(|b| content_schema(&b["content"]))
                {
                    ps.insert(
                        0,
                        json!({"name": "body", "in": "body", "required": true, "schema": body}),
                    );
                }
                out.insert(k.clone(), Value::Array(ps));
            }
            "requestBody" => {
                let types: Vec<&String> = v["content"]
                    .as_object()
                    .map(|c| c.keys().collect())
                    .unwrap_or_default();
                out.insert("consumes".into(), json!(types));
            }
            "responses" => {
                let mut rs = Map::new();
                for (code, r) in v.as_object().into_iter().flatten() {
                    let mut e = Map::new();
                    e.insert(
                        "description".into(),
                        r.get("description").cloned().unwrap_or(json!("")),
                    );
                    if let Some(s) = r.get("content").and_then(content_schema) {
                        e.insert("schema".into(), s);
                    }
                    rs.insert(code.clone(), Value::Object(e));
                }
                out.insert(k.clone(), Value::Object(rs));
                let produces: Vec<&String> = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(_, r)| r.get("content").and_then(Value::as_object))
                    .flat_map(|c| c.keys())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if !produces.is_empty() {
                    out.insert("produces".into(), json!(produces));
                }
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if out.contains_key("consumes") && !out.contains_key("parameters") {
        if let Some(body) = op
            .get("requestBody")
            .and_then(|b| content_schema(&b["content"]))
        {
            out.insert(
                "parameters".into(),
                json!([{"name": "body", "in": "body", "required": true, "schema": body}]),
            );
        }
    }
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

fn path_item(item: &Value) -> Value {
    let mut out = Map::new();
    for (k, v) in item.as_object().into_iter().flatten() {
        if k == "parameters" {
            let ps: Vec<Value> = v
                .as_array()
                .map(|a| a.iter().map(parameter).collect())
                .unwrap_or_default();
            out.insert(k.clone(), Value::Array(ps));
        } else {
            out.insert(k.clone(), operation(v));
        }
    }
    Value::Object(out)
}

/// The `/openapi/v2` document of the catalog's built-in kinds.
pub(crate) fn document(catalog: &Catalog) -> Value {
    let mut definitions: BTreeMap<String, Value> = BTreeMap::new();
    let mut paths_out = Map::new();
    for doc in v3::documents(&builtin_only(catalog)).into_values() {
        for (name, s) in doc["components"]["schemas"]
            .as_object()
            .into_iter()
            .flatten()
        {
            definitions.entry(name.clone()).or_insert_with(|| schema(s));
        }
        for (p, item) in doc["paths"].as_object().into_iter().flatten() {
            paths_out.insert(p.clone(), path_item(item));
        }
    }
    let definitions: Map<String, Value> = definitions.into_iter().collect();
    json!({
        "swagger": "2.0",
        "info": v3::info(),
        "paths": paths_out,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization",
            "in": "header", "description": "Bearer Token authentication"}},
        "security": [{"BearerToken": []}],
    })
}

/// The catalog without its custom resources.
fn builtin_only(catalog: &Catalog) -> Catalog {
    let group_versions = catalog
        .group_versions
        .iter()
        .filter_map(|gv| {
            let resources: Vec<_> = gv
                .resources
                .iter()
                .filter(|r| r.def.custom.is_none())
                .cloned()
                .collect();
            (!resources.is_empty()).then(|| GroupVersion {
                group: gv.group.clone(),
                version: gv.version.clone(),
                resources,
                custom: BTreeMap::new(),
            })
        })
        .collect();
    Catalog {
        group_versions,
        builtin_groups: catalog.builtin_groups.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_take_v2s_form() {
        let v3 = json!({"type": "object", "properties": {
            "metadata": {"allOf": [{"$ref": "#/components/schemas/x.ObjectMeta"}], "default": {}},
            "port": {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]},
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/x.Item"}},
            "note": {"type": "string", "nullable": true},
            "labels": {"type": "object", "additionalProperties": {"allOf": [{"$ref": "#/components/schemas/x.V"}]}},
        }});
        assert_eq!(
            schema(&v3),
            json!({"type": "object", "properties": {
                "metadata": {"$ref": "#/definitions/x.ObjectMeta", "default": {}},
                "port": {"type": "string", "format": "int-or-string"},
                "items": {"type": "array", "items": {"$ref": "#/definitions/x.Item"}},
                "note": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"$ref": "#/definitions/x.V"}},
            }})
        );
    }

    #[test]
    fn operations_take_body_parameters_and_inline_types() {
        let op = json!({"operationId": "patchX", "parameters": [
                {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}],
            "requestBody": {"content": {"application/merge-patch+json": {"schema": {"$ref": "#/components/schemas/P"}}}, "required": true},
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/X"}}}},
                          "401": {"description": "Unauthorized"}}});
        let v2 = operation(&op);
        assert_eq!(
            v2["parameters"],
            json!([{"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/P"}},
                   {"name": "force", "in": "query", "type": "boolean", "uniqueItems": true}])
        );
        assert_eq!(v2["consumes"], json!(["application/merge-patch+json"]));
        assert_eq!(v2["produces"], json!(["application/json"]));
        assert_eq!(
            v2["responses"]["200"],
            json!({"description": "OK", "schema": {"$ref": "#/definitions/X"}})
        );
    }
}

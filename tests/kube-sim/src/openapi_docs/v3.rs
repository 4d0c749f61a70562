//! The OpenAPI v3 documents kube-apiserver serves under `/openapi/v3/<path>`: one per group
//! version (its paths and every schema they reach) and the small ones of `/api`, `/apis`,
//! `/apis/<group>` and `/version`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::catalog::{builtin_definitions, Catalog, GroupVersion, V3_REF};
use super::paths::{self, API_RESOURCE_LIST, DELETE_OPTIONS, PATCH, STATUS, WATCH_EVENT};

/// What `info` says (the recorded v1.29.6 server's).
pub(crate) fn info() -> Value {
    json!({"title": "Kubernetes", "version": "v1.29.6"})
}

fn security_schemes() -> Value {
    json!({"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication",
                            "name": "authorization", "in": "header"}})
}

/// The named schemas `$ref`s anywhere in `v` point at.
fn refs_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                match (k.as_str(), child) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(V3_REF) {
                            out.push(name.to_string());
                        }
                    }
                    // Property names are names, whatever they look like (JSONSchemaProps has
                    // `default`, `enum` and `x-kubernetes-validations`).
                    ("properties", Value::Object(props)) => {
                        props.values().for_each(|p| refs_in(p, out));
                    }
                    // Extensions and defaults are data, not schemas.
                    (k, _) if k.starts_with("x-") || k == "default" || k == "enum" => {}
                    _ => refs_in(child, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| refs_in(c, out)),
        _ => {}
    }
}

/// The schemas named by `seeds` and everything they reference, found by `lookup`. A name
/// `lookup` does not know is left out (the caller only seeds known names).
pub(crate) fn closure<'a>(
    seeds: impl IntoIterator<Item = String>,
    lookup: impl Fn(&str) -> Option<&'a Value>,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<String> = seeds.into_iter().collect();
    let mut seen = BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(schema) = lookup(&name) else {
            continue;
        };
        let mut refs = Vec::new();
        refs_in(schema, &mut refs);
        todo.extend(refs);
        out.insert(name, schema.clone());
    }
    out
}

/// Every schema a group version's document carries: its paths' kinds and what they reach.
pub(crate) fn group_version_schemas(gv: &GroupVersion) -> BTreeMap<String, Value> {
    let mut seeds: Vec<String> = vec![API_RESOURCE_LIST.into()];
    for r in &gv.resources {
        seeds.push(r.kind.clone());
        seeds.extend(r.list.iter().cloned());
        seeds.extend(r.subresources.iter().map(|(_, s)| s.clone()));
        let d = &r.def;
        if d.has_verb("delete") || d.has_verb("deletecollection") {
            seeds.push(DELETE_OPTIONS.into());
            seeds.push(STATUS.into());
        }
        if d.has_verb("patch") {
            seeds.push(PATCH.into());
        }
        if d.has_verb("watch") {
            seeds.push(WATCH_EVENT.into());
        }
    }
    closure(seeds, |n| gv.schema(n))
}

fn document(paths: Value, schemas: BTreeMap<String, Value>) -> Value {
    let schemas: Map<String, Value> = schemas.into_iter().collect();
    json!({"openapi": "3.0.0", "info": info(), "paths": paths,
           "components": {"schemas": schemas, "securitySchemes": security_schemes()}})
}

/// The document of one group version.
pub(crate) fn group_version_document(gv: &GroupVersion) -> Value {
    document(
        Value::Object(paths::group_version_paths(gv)),
        group_version_schemas(gv),
    )
}

/// The document at `/openapi/v3/<key>` for `key` `api`, `apis`, `apis/<group>` or `version`.
fn discovery_document(key: &str) -> Option<Value> {
    let (paths, schema) = paths::discovery_path(key)?;
    let defs = builtin_definitions();
    builtin_definitions().get(schema)?;
    Some(document(
        paths,
        closure([schema.to_string()], |n| defs.get(n)),
    ))
}

/// Every document of the catalog by its index key, in key order.
pub(crate) fn documents(catalog: &Catalog) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut keys = vec!["api".to_string(), "apis".to_string(), "version".to_string()];
    keys.extend(catalog.builtin_groups.iter().map(|g| format!("apis/{g}")));
    for key in keys {
        if let Some(doc) = discovery_document(&key) {
            out.insert(key, doc);
        }
    }
    for gv in &catalog.group_versions {
        out.insert(gv.path(), group_version_document(gv));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    pub(crate) fn builtin_catalog() -> Catalog {
        Catalog::build(&Registry::builtin(), |_| None)
    }

    #[test]
    fn every_reference_of_every_document_resolves_inside_it() {
        let docs = documents(&builtin_catalog());
        assert!(docs.contains_key("apis/apps/v1") && docs.contains_key("api/v1"));
        for (key, doc) in &docs {
            let schemas = doc["components"]["schemas"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let mut refs = Vec::new();
            refs_in(doc, &mut refs);
            for r in refs {
                assert!(
                    schemas.contains_key(&r),
                    "{key}: {r} is not in the document"
                );
            }
        }
        let apps = &docs["apis/apps/v1"];
        assert_eq!(
            apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
                ["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        let patch =
            &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert!(patch["parameters"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == "fieldValidation")));
    }

    /// Recorded schemas of kinds kube-sim does not serve, by document.
    const UNSERVED: &[(&str, &[&str])] = &[(
        "api/v1",
        &[
            "io.k8s.api.core.v1.ComponentCondition",
            "io.k8s.api.core.v1.ComponentStatus",
            "io.k8s.api.core.v1.ComponentStatusList",
        ],
    )];

    /// The recorded server's documents name the same schemas as ours (with
    /// `RKCM_APISERVER_REFERENCE` set).
    #[test]
    fn schema_names_match_the_record() {
        let Ok(dir) = std::env::var("RKCM_APISERVER_REFERENCE") else {
            eprintln!("RKCM_APISERVER_REFERENCE unset: not comparing with the record");
            return;
        };
        let docs = documents(&builtin_catalog());
        let names = |d: &Value| -> Vec<String> {
            d["components"]["schemas"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        };
        let mut compared = 0;
        let mut failures = Vec::new();
        for (key, doc) in &docs {
            let file = format!("{dir}/openapi-v3/{}.json", key.replace('/', "_"));
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let recorded: Value = serde_json::from_str(&text).unwrap_or_default();
            let ours = names(doc);
            let theirs = names(&recorded);
            let extra: Vec<&String> = ours.iter().filter(|n| !theirs.contains(n)).collect();
            assert!(extra.is_empty(), "{key}: not in the record: {extra:?}");
            let missing: Vec<&String> = theirs.iter().filter(|n| !ours.contains(n)).collect();
            // Only what the kinds kube-sim does not serve need.
            let allowed = UNSERVED
                .iter()
                .find(|(k, _)| *k == key.as_str())
                .map(|(_, m)| *m);
            let missing: Vec<&String> = missing
                .into_iter()
                .filter(|n| !allowed.is_some_and(|a| a.contains(&n.as_str())))
                .collect();
            if !missing.is_empty() {
                failures.push(format!("{key}: missing {missing:?}"));
            }
            assert_eq!(doc["info"], recorded["info"], "{key}");
            compared += 1;
        }
        assert!(failures.is_empty(), "{failures:#?}");
        assert!(compared >= 40, "only {compared} documents compared");
    }
}

//! Discovery documents, built from the registry: the legacy ones (`/api`, `/apis`,
//! `/api/v1`, `/apis/GROUP[/VERSION]`) and the aggregated `APIGroupDiscoveryList` that
//! kubectl asks for first, plus the OpenAPI v3 documents kubectl reads before `apply`.

use serde_json::{json, Value};

use crate::resources::{Registry, ResourceDef};

pub fn api_versions(server_addr: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_addr}]})
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(json!({}))})
}

pub fn api_group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|g| !g.name.is_empty())
        .map(|g| group_json(&g.name, &g.versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let g = reg
        .groups()
        .into_iter()
        .find(|g| g.name == group && !g.name.is_empty())?;
    let mut v = group_json(&g.name, &g.versions);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

pub fn api_resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if !reg.group_version_exists(group, version) {
        return None;
    }
    let mut resources = Vec::new();
    for r in reg.resources_in(group, version) {
        let mut e = json!({"name": r.resource, "singularName": r.singular, "namespaced": r.namespaced,
                           "kind": r.kind, "verbs": r.verbs});
        if !r.short_names.is_empty() {
            e["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            e["categories"] = json!(r.categories);
        }
        if !r.storage_version_hash.is_empty() {
            e["storageVersionHash"] = json!(r.storage_version_hash);
        }
        resources.push(e);
        for s in &r.subresources {
            let mut e = json!({"name": format!("{}/{}", r.resource, s.name), "singularName": "",
                               "namespaced": r.namespaced, "kind": s.kind, "verbs": s.verbs});
            if !s.group.is_empty() {
                e["group"] = json!(s.group);
                e["version"] = json!(s.version);
            }
            resources.push(e);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    // The core group's document carries no apiVersion; the others do (as kube-apiserver answers).
    let mut doc = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources});
    if group.is_empty() {
        if let Some(m) = doc.as_object_mut() {
            m.remove("apiVersion");
        }
    }
    Some(doc)
}

fn aggregated_resource(r: &ResourceDef) -> Value {
    let mut e = json!({"resource": r.resource, "responseKind": {"group": "", "version": "", "kind": r.kind},
                       "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                       "singularResource": r.singular, "verbs": r.verbs});
    if !r.short_names.is_empty() {
        e["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        e["categories"] = json!(r.categories);
    }
    if !r.subresources.is_empty() {
        e["subresources"] = json!(r
            .subresources
            .iter()
            .map(|s| json!({"subresource": s.name,
                            "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                            "verbs": s.verbs}))
            .collect::<Vec<_>>());
    }
    e
}

/// `APIGroupDiscoveryList` for `/api` (legacy = true) or `/apis`.
pub fn aggregated(reg: &Registry, legacy: bool, api_version: &str) -> Value {
    let mut items = Vec::new();
    for g in reg.groups() {
        if g.name.is_empty() != legacy {
            continue;
        }
        let versions: Vec<Value> = g
            .versions
            .iter()
            .map(|v| {
                let rs: Vec<Value> = reg
                    .resources_in(&g.name, v)
                    .iter()
                    .map(|r| aggregated_resource(r))
                    .collect();
                json!({"version": v, "resources": rs, "freshness": "Current"})
            })
            .collect();
        let mut md = json!({"creationTimestamp": null});
        if !legacy {
            md["name"] = json!(g.name);
        }
        items.push(json!({"metadata": md, "versions": versions}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items})
}

/// The aggregated discovery version the client accepts, if any (kube-apiserver 1.29 serves v2beta1).
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let p = part.replace(' ', "");
        if p.contains("as=APIGroupDiscoveryList") && p.contains("g=apidiscovery.k8s.io") {
            if p.contains("v=v2beta1") {
                return Some("apidiscovery.k8s.io/v2beta1");
            }
            if p.contains("v=v2;") || p.ends_with("v=v2") {
                return Some("apidiscovery.k8s.io/v2");
            }
        }
    }
    None
}

// ----- OpenAPI v3 -----

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn hash(s: &str) -> String {
    // A content hash for the index's cache-busting URLs (any stable digest will do).
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016X}")
}

pub fn openapi_index(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for g in reg.groups() {
        for v in &g.versions {
            let p = gv_path(&g.name, v);
            let doc = openapi_doc(reg, &g.name, v)
                .map(|d| d.to_string())
                .unwrap_or_default();
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(&doc))}),
            );
        }
    }
    json!({"paths": paths})
}

/// The OpenAPI v3 document of one group-version: its paths with the operations, the
/// `x-kubernetes-group-version-kind` of each and the query parameters they take (kubectl
/// checks there that PATCH accepts `fieldValidation` before it relies on server-side
/// validation). Schemas are not described, so clients fall back to their own type knowledge.
pub fn openapi_doc(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if !reg.group_version_exists(group, version) {
        return None;
    }
    let mut paths = serde_json::Map::new();
    let q = |n: &str| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    for r in reg.resources_in(group, version) {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let base = if r.namespaced {
            format!(
                "/{}/namespaces/{{namespace}}/{}",
                gv_path(group, version),
                r.resource
            )
        } else {
            format!("/{}/{}", gv_path(group, version), r.resource)
        };
        let op = |verb: &str, params: Vec<Value>| {
            json!({"operationId": format!("{verb}{}", r.kind), "x-kubernetes-action": verb,
                   "x-kubernetes-group-version-kind": gvk, "parameters": params,
                   "responses": {"200": {"description": "OK"}}})
        };
        let mut collection = serde_json::Map::new();
        if r.has_verb("list") {
            collection.insert(
                "get".into(),
                op(
                    "list",
                    vec![
                        q("labelSelector"),
                        q("fieldSelector"),
                        q("limit"),
                        q("continue"),
                        q("resourceVersion"),
                        q("watch"),
                    ],
                ),
            );
        }
        if r.has_verb("create") {
            collection.insert(
                "post".into(),
                op(
                    "post",
                    vec![q("dryRun"), q("fieldManager"), q("fieldValidation")],
                ),
            );
        }
        if r.has_verb("deletecollection") {
            collection.insert(
                "delete".into(),
                op(
                    "deletecollection",
                    vec![q("labelSelector"), q("fieldSelector")],
                ),
            );
        }
        paths.insert(base.clone(), Value::Object(collection));
        let mut item = serde_json::Map::new();
        if r.has_verb("get") {
            item.insert("get".into(), op("get", vec![]));
        }
        if r.has_verb("update") {
            item.insert(
                "put".into(),
                op(
                    "put",
                    vec![q("dryRun"), q("fieldManager"), q("fieldValidation")],
                ),
            );
        }
        if r.has_verb("patch") {
            item.insert(
                "patch".into(),
                op(
                    "patch",
                    vec![
                        q("dryRun"),
                        q("fieldManager"),
                        q("fieldValidation"),
                        q("force"),
                    ],
                ),
            );
        }
        if r.has_verb("delete") {
            item.insert(
                "delete".into(),
                op(
                    "delete",
                    vec![q("gracePeriodSeconds"), q("propagationPolicy"), q("dryRun")],
                ),
            );
        }
        if !item.is_empty() {
            paths.insert(format!("{base}/{{name}}"), Value::Object(item));
        }
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.29.6"},
                "paths": paths, "components": {"schemas": {}}}),
    )
}

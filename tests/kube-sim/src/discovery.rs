//! Discovery documents, built from the registry: the legacy ones (`/api`, `/apis`,
//! `/api/v1`, `/apis/GROUP[/VERSION]`) and the aggregated `APIGroupDiscoveryList` that
//! kubectl asks for first. The OpenAPI documents are `openapi_docs`'.

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

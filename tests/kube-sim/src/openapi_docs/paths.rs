//! The `paths` of a group version's OpenAPI v3 document: for each served resource its
//! collection, item and subresource paths with the operations its verbs allow, each carrying
//! `x-kubernetes-action`, `x-kubernetes-group-version-kind`, the query parameters kube-apiserver
//! documents for it and references to the request and response kinds. kubectl reads the PATCH
//! operations' `fieldValidation` parameter to decide on server-side field validation.
//! Watch paths (`/watch/...`, deprecated upstream) are left out.

use serde_json::{json, Map, Value};

use super::catalog::{GroupVersion, Resource, V3_REF};

pub(crate) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(crate) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub(crate) const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
pub(crate) const API_RESOURCE_LIST: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList";

const RESPONSE_TYPES: [&str; 3] = [
    "application/json",
    "application/vnd.kubernetes.protobuf",
    "application/yaml",
];
const PATCH_TYPES: [&str; 4] = [
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

fn query(name: &str, ty: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": ty, "uniqueItems": true}})
}

fn path_param(name: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}})
}

/// The query parameters of an action, as kube-apiserver lists them.
fn parameters(action: &str) -> Vec<Value> {
    let list = [
        ("allowWatchBookmarks", "boolean"),
        ("continue", "string"),
        ("fieldSelector", "string"),
        ("labelSelector", "string"),
        ("limit", "integer"),
        ("resourceVersion", "string"),
        ("resourceVersionMatch", "string"),
        ("sendInitialEvents", "boolean"),
        ("timeoutSeconds", "integer"),
        ("watch", "boolean"),
    ];
    let write = [
        ("dryRun", "string"),
        ("fieldManager", "string"),
        ("fieldValidation", "string"),
    ];
    let delete = [
        ("dryRun", "string"),
        ("gracePeriodSeconds", "integer"),
        ("orphanDependents", "boolean"),
        ("propagationPolicy", "string"),
    ];
    let params: Vec<(&str, &str)> = match action {
        "list" => list.to_vec(),
        "post" | "put" => write.to_vec(),
        "patch" => write
            .iter()
            .copied()
            .chain([("force", "boolean")])
            .collect(),
        "delete" => delete.to_vec(),
        "deletecollection" => {
            let mut p: Vec<(&str, &str)> = list
                .iter()
                .copied()
                .filter(|(n, _)| !matches!(*n, "allowWatchBookmarks" | "watch"))
                .chain(delete)
                .collect();
            p.sort();
            p
        }
        _ => Vec::new(),
    };
    params.into_iter().map(|(n, t)| query(n, t)).collect()
}

fn content(types: &[&str], schema: &str) -> Value {
    let mut m = Map::new();
    for t in types {
        m.insert(
            (*t).to_string(),
            json!({"schema": {"$ref": format!("{V3_REF}{schema}")}}),
        );
    }
    Value::Object(m)
}

fn responses(codes: &[(&str, &str)], schema: &str) -> Value {
    let mut m = Map::new();
    for (code, text) in codes {
        m.insert(
            (*code).to_string(),
            json!({"description": text, "content": content(&RESPONSE_TYPES, schema)}),
        );
    }
    m.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(m)
}

/// The operation-id word of a group version (`AppsV1`, `CoreV1`, `RbacAuthorizationV1`).
fn gv_word(group: &str, version: &str) -> String {
    let group = if group.is_empty() {
        "core"
    } else {
        group.strip_suffix(".k8s.io").unwrap_or(group)
    };
    let mut out = String::new();
    for part in group.split('.').chain([version]) {
        let mut chars = part.chars();
        if let Some(c) = chars.next() {
            out.extend(c.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

struct Ops<'a> {
    gv: &'a GroupVersion,
    r: &'a Resource,
}

impl Ops<'_> {
    /// An operation `{verb}{GroupVersion}{infix}{scope}{kind}` (upstream's operation ids).
    fn op(
        &self,
        verb: &str,
        infix: &str,
        action: &str,
        kind: &str,
        scope: &str,
    ) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(
            "tags".into(),
            json!([tag(&self.gv.group, &self.gv.version)]),
        );
        m.insert(
            "operationId".into(),
            json!(format!(
                "{verb}{}{infix}{scope}{kind}",
                gv_word(&self.gv.group, &self.gv.version)
            )),
        );
        let params = parameters(action);
        if !params.is_empty() {
            m.insert("parameters".into(), Value::Array(params));
        }
        m.insert("x-kubernetes-action".into(), json!(action));
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!({"group": self.r.def.group, "version": self.r.def.version, "kind": self.r.def.kind}),
        );
        m
    }

    fn with(mut m: Map<String, Value>, body: Option<Value>, responses: Value) -> Value {
        if let Some(b) = body {
            m.insert("requestBody".into(), b);
        }
        m.insert("responses".into(), responses);
        Value::Object(m)
    }

    fn body(schema: &str) -> Value {
        json!({"content": content(&["*/*"], schema), "required": true})
    }

    fn patch_body() -> Value {
        json!({"content": content(&PATCH_TYPES, PATCH), "required": true})
    }
}

/// The tag of a group version's operations (`core_v1`, `rbacAuthorization_v1`), or of a
/// group's (`rbacAuthorization`) when `version` is empty.
fn tag(group: &str, version: &str) -> String {
    let word = gv_word(group, "");
    let mut chars = word.chars();
    let lower: String = match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    if version.is_empty() {
        lower
    } else {
        format!("{lower}_{version}")
    }
}

/// Every path of a group version's document.
pub(crate) fn group_version_paths(gv: &GroupVersion) -> Map<String, Value> {
    let mut paths = Map::new();
    let prefix = format!("/{}", gv.path());
    paths.insert(
        format!("{prefix}/"),
        json!({"get": {"tags": [tag(&gv.group, &gv.version)],
            "operationId": format!("get{}APIResources", gv_word(&gv.group, &gv.version)),
            "responses": responses(&[("200", "OK")], API_RESOURCE_LIST)}}),
    );
    for r in &gv.resources {
        resource_paths(gv, r, &prefix, &mut paths);
    }
    paths
}

fn resource_paths(gv: &GroupVersion, r: &Resource, prefix: &str, paths: &mut Map<String, Value>) {
    let ops = Ops { gv, r };
    let d = &r.def;
    let kind = d.kind.as_str();
    let scope = if d.namespaced { "Namespaced" } else { "" };
    let base = if d.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", d.resource)
    } else {
        format!("{prefix}/{}", d.resource)
    };
    let scope_params = |named: bool| {
        let mut p = Vec::new();
        if named {
            p.push(path_param("name"));
        }
        if d.namespaced {
            p.push(path_param("namespace"));
        }
        p.push(query("pretty", "string"));
        Value::Array(p)
    };
    let mut collection = Map::new();
    if let (true, Some(list)) = (d.has_verb("list"), &r.list) {
        let m = ops.op("list", "", "list", kind, scope);
        collection.insert(
            "get".into(),
            Ops::with(m, None, responses(&[("200", "OK")], list)),
        );
        if d.namespaced {
            let m = ops.op("list", "", "list", &format!("{kind}ForAllNamespaces"), "");
            let mut all = Map::new();
            all.insert(
                "get".into(),
                Ops::with(m, None, responses(&[("200", "OK")], list)),
            );
            all.insert("parameters".into(), json!([query("pretty", "string")]));
            paths.insert(format!("{prefix}/{}", d.resource), Value::Object(all));
        }
    }
    if d.has_verb("create") {
        let m = ops.op("create", "", "post", kind, scope);
        let codes = [("200", "OK"), ("201", "Created"), ("202", "Accepted")];
        let resp = responses(&codes, &r.kind);
        collection.insert("post".into(), Ops::with(m, Some(Ops::body(&r.kind)), resp));
    }
    if d.has_verb("deletecollection") {
        let m = ops.op("delete", "Collection", "deletecollection", kind, scope);
        let body = json!({"content": content(&["*/*"], DELETE_OPTIONS)});
        collection.insert(
            "delete".into(),
            Ops::with(m, Some(body), responses(&[("200", "OK")], STATUS)),
        );
    }
    if !collection.is_empty() {
        collection.insert("parameters".into(), scope_params(false));
        paths.insert(base.clone(), Value::Object(collection));
    }
    let item = item_operations(&ops, &r.kind, kind, scope, d.has_verb("delete"));
    if !item.is_empty() {
        let mut item = item;
        item.insert("parameters".into(), scope_params(true));
        paths.insert(format!("{base}/{{name}}"), Value::Object(item));
    }
    for (sub, schema) in &r.subresources {
        let Some(s) = d.subresource(sub) else {
            continue;
        };
        let has = |verb: &str| s.verbs.iter().any(|v| v == verb);
        let suffix = format!("{kind}{}", capitalized(sub));
        let mut m = item_operations(&ops, schema, &suffix, scope, false);
        m.retain(|verb, _| match verb.as_str() {
            "get" => has("get"),
            "put" => has("update"),
            "patch" => has("patch"),
            _ => false,
        });
        if has("create") {
            let op = ops.op("create", "", "post", &suffix, scope);
            let codes = [("200", "OK"), ("201", "Created"), ("202", "Accepted")];
            let resp = responses(&codes, schema);
            m.insert("post".into(), Ops::with(op, Some(Ops::body(schema)), resp));
        }
        // A subresource's operations name the subresource's kind (Scale, Eviction, ...).
        let (g, v) = if s.group.is_empty() && s.version.is_empty() {
            (d.group.as_str(), d.version.as_str())
        } else {
            (s.group.as_str(), s.version.as_str())
        };
        for op in m.values_mut() {
            op["x-kubernetes-group-version-kind"] =
                json!({"group": g, "version": v, "kind": s.kind});
        }
        if !m.is_empty() {
            m.insert("parameters".into(), scope_params(true));
            paths.insert(format!("{base}/{{name}}/{sub}"), Value::Object(m));
        }
    }
}

/// get/put/patch (and delete) on one named object (or a subresource of it) whose body
/// is `schema`.
fn item_operations(
    ops: &Ops<'_>,
    schema: &str,
    kind: &str,
    scope: &str,
    delete: bool,
) -> Map<String, Value> {
    let d = &ops.r.def;
    let mut item = Map::new();
    if d.has_verb("get") {
        let m = ops.op("read", "", "get", kind, scope);
        item.insert(
            "get".into(),
            Ops::with(m, None, responses(&[("200", "OK")], schema)),
        );
    }
    if d.has_verb("update") {
        let m = ops.op("replace", "", "put", kind, scope);
        let resp = responses(&[("200", "OK"), ("201", "Created")], schema);
        item.insert("put".into(), Ops::with(m, Some(Ops::body(schema)), resp));
    }
    if d.has_verb("patch") {
        let m = ops.op("patch", "", "patch", kind, scope);
        let resp = responses(&[("200", "OK"), ("201", "Created")], schema);
        item.insert("patch".into(), Ops::with(m, Some(Ops::patch_body()), resp));
    }
    if delete {
        let m = ops.op("delete", "", "delete", kind, scope);
        let body = json!({"content": content(&["*/*"], DELETE_OPTIONS)});
        let resp = responses(&[("200", "OK"), ("202", "Accepted")], STATUS);
        item.insert("delete".into(), Ops::with(m, Some(body), resp));
    }
    item
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The single-path documents of `/api`, `/apis`, `/apis/<group>` and `/version`.
pub(crate) fn discovery_path(key: &str) -> Option<(Value, &'static str)> {
    let (path, tag, id, schema) = match key {
        "api" => (
            "/api/".to_string(),
            "core".to_string(),
            "getCoreAPIVersions".to_string(),
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
        ),
        "apis" => (
            "/apis/".to_string(),
            "apis".to_string(),
            "getAPIVersions".to_string(),
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
        ),
        "version" => (
            "/version/".to_string(),
            "version".to_string(),
            "getCodeVersion".to_string(),
            "io.k8s.apimachinery.pkg.version.Info",
        ),
        _ => {
            let group = key.strip_prefix("apis/")?;
            let word = gv_word(group, "");
            (
                format!("/apis/{group}/"),
                tag(group, ""),
                format!("get{word}APIGroup"),
                "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup",
            )
        }
    };
    let resp = if key == "version" {
        let mut r = Map::new();
        r.insert(
            "200".into(),
            json!({"description": "OK", "content": content(&["application/json"], schema)}),
        );
        r.insert("401".into(), json!({"description": "Unauthorized"}));
        Value::Object(r)
    } else {
        responses(&[("200", "OK")], schema)
    };
    let mut paths = Map::new();
    paths.insert(
        path,
        json!({"get": {"tags": [tag], "operationId": id, "responses": resp}}),
    );
    Some((Value::Object(paths), schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_words_and_tags_follow_upstream() {
        for (g, v, word, t) in [
            ("", "v1", "CoreV1", "core_v1"),
            ("apps", "v1", "AppsV1", "apps_v1"),
            (
                "rbac.authorization.k8s.io",
                "v1",
                "RbacAuthorizationV1",
                "rbacAuthorization_v1",
            ),
            (
                "flowcontrol.apiserver.k8s.io",
                "v1beta3",
                "FlowcontrolApiserverV1beta3",
                "flowcontrolApiserver_v1beta3",
            ),
        ] {
            assert_eq!(gv_word(g, v), word);
            assert_eq!(tag(g, v), t);
        }
        assert_eq!(gv_word("apps", ""), "Apps");
        assert_eq!(tag("rbac.authorization.k8s.io", ""), "rbacAuthorization");
    }

    #[test]
    fn patch_takes_field_validation_and_force() {
        let names: Vec<String> = parameters("patch")
            .iter()
            .filter_map(|p| p["name"].as_str().map(String::from))
            .collect();
        assert_eq!(
            names,
            ["dryRun", "fieldManager", "fieldValidation", "force"]
        );
        let dc: Vec<String> = parameters("deletecollection")
            .iter()
            .filter_map(|p| p["name"].as_str().map(String::from))
            .collect();
        assert!(dc.contains(&"gracePeriodSeconds".to_string()) && !dc.contains(&"watch".into()));
    }
}

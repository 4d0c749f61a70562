//! What the OpenAPI documents describe: a snapshot of the registry's group versions, each
//! resource with the definition names of its kinds, and the definitions custom resources add
//! (built from their CRDs as apiextensions-apiserver's OpenAPI builder does).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::resources::{Registry, ResourceDef};

/// The prefix of a reference to a named schema in an OpenAPI v3 document.
pub(crate) const V3_REF: &str = "#/components/schemas/";

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// Every built-in definition kube-sim can serve: the recorded ones and the gated group
/// versions' (served only when the registry serves those group versions).
pub(crate) fn builtin_definitions() -> &'static rkcm_openapi::Definitions {
    rkcm_openapi::all()
}

/// One served resource and the definition names its operations refer to.
#[derive(Debug, Clone)]
pub(crate) struct Resource {
    pub(crate) def: Arc<ResourceDef>,
    /// The kind's definition.
    pub(crate) kind: String,
    /// The list kind's definition, when there is one.
    pub(crate) list: Option<String>,
    /// (subresource name, definition of its kind) for the subresources with a definition.
    pub(crate) subresources: Vec<(String, String)>,
}

/// One served group version.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupVersion {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) resources: Vec<Resource>,
    /// Definitions built from CRDs for this group version (kind and list).
    pub(crate) custom: BTreeMap<String, Value>,
}

impl GroupVersion {
    /// The index key and path under `/openapi/v3/` (`api/v1`, `apis/apps/v1`).
    pub(crate) fn path(&self) -> String {
        if self.group.is_empty() {
            format!("api/{}", self.version)
        } else {
            format!("apis/{}/{}", self.group, self.version)
        }
    }

    /// A definition by name: this group version's custom ones first, then the built-in ones.
    pub(crate) fn schema(&self, name: &str) -> Option<&Value> {
        self.custom
            .get(name)
            .or_else(|| builtin_definitions().get(name))
    }
}

/// The served group versions, in discovery order, and the groups with a built-in version.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub(crate) group_versions: Vec<GroupVersion>,
    pub(crate) builtin_groups: Vec<String>,
}

impl Catalog {
    /// A snapshot of what `registry` serves, with `crd` finding a CRD by name. A group
    /// version is described when at least one of its resources has a definition (the add-on
    /// metrics APIs have none: their own servers would publish them).
    pub(crate) fn build(registry: &Registry, crd: impl Fn(&str) -> Option<Arc<Value>>) -> Catalog {
        let mut catalog = Catalog::default();
        for group in registry.groups() {
            let mut builtin_group = false;
            for version in &group.versions {
                let mut gv = GroupVersion {
                    group: group.name.clone(),
                    version: version.clone(),
                    ..GroupVersion::default()
                };
                for def in registry.resources_in(&group.name, version) {
                    if def.custom.is_some() {
                        if let Some(c) = crd(&format!("{}.{}", def.resource, def.group)) {
                            add_custom(&mut gv, def, &c);
                        }
                    } else if let Some(r) = builtin_resource(def) {
                        builtin_group = true;
                        gv.resources.push(r);
                    }
                }
                if !gv.resources.is_empty() {
                    catalog.group_versions.push(gv);
                }
            }
            if builtin_group && !group.name.is_empty() {
                catalog.builtin_groups.push(group.name.clone());
            }
        }
        catalog
    }

    /// What the documents depend on, as text: equal fingerprints, equal documents.
    pub(crate) fn fingerprint(&self) -> String {
        let gvs: Vec<Value> = self
            .group_versions
            .iter()
            .map(|gv| {
                let resources: Vec<Value> = gv
                    .resources
                    .iter()
                    .map(|r| {
                        let d = &r.def;
                        let subs: Vec<Value> = d
                            .subresources
                            .iter()
                            .map(|s| json!([s.name, s.group, s.version, s.kind, s.verbs]))
                            .collect();
                        json!([
                            d.resource,
                            d.kind,
                            d.namespaced,
                            d.verbs,
                            subs,
                            r.kind,
                            r.list
                        ])
                    })
                    .collect();
                json!([gv.group, gv.version, resources, gv.custom])
            })
            .collect();
        json!([gvs, self.builtin_groups]).to_string()
    }
}

/// A built-in resource whose kind has a recorded (or gated) definition.
pub(crate) fn builtin_resource(def: Arc<ResourceDef>) -> Option<Resource> {
    let defs = builtin_definitions();
    let kind = defs
        .name_for_gvk(&def.group, &def.version, &def.kind)?
        .to_string();
    let list = defs
        .name_for_gvk(&def.group, &def.version, &format!("{}List", def.kind))
        .map(String::from);
    let subresources = def
        .subresources
        .iter()
        .filter_map(|s| {
            let (g, v) = if s.group.is_empty() && s.version.is_empty() {
                (def.group.as_str(), def.version.as_str())
            } else {
                (s.group.as_str(), s.version.as_str())
            };
            Some((
                s.name.clone(),
                defs.name_for_gvk(g, v, &s.kind)?.to_string(),
            ))
        })
        .collect();
    Some(Resource {
        def,
        kind,
        list,
        subresources,
    })
}

/// Adds a custom resource and its definitions (kind and list) to its group version.
fn add_custom(gv: &mut GroupVersion, def: Arc<ResourceDef>, crd: &Value) {
    let kind_name = definition_name(&def.group, &def.version, &def.kind);
    let list_name = format!("{kind_name}List");
    let schema = crd_version_schema(crd, &def.version);
    gv.custom.insert(
        kind_name.clone(),
        custom_kind_schema(schema, &def.group, &def.version, &def.kind),
    );
    gv.custom.insert(
        list_name.clone(),
        custom_list_schema(&kind_name, &def.group, &def.version, &def.kind),
    );
    let subresources = def
        .subresources
        .iter()
        .filter_map(|s| match s.name.as_str() {
            "status" => Some((s.name.clone(), kind_name.clone())),
            "scale" => builtin_definitions()
                .name_for_gvk("autoscaling", "v1", "Scale")
                .map(|n| (s.name.clone(), n.to_string())),
            _ => None,
        })
        .collect();
    gv.resources.push(Resource {
        def,
        kind: kind_name,
        list: Some(list_name),
        subresources,
    });
}

/// Upstream's REST-friendly definition name of a custom kind: the group's DNS labels
/// reversed, then version and kind (`com.example.stable.v1.CronTab`).
pub(crate) fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), version, kind)
}

/// The `openAPIV3Schema` of one version of a CRD (per-version schema, or the deprecated
/// top-level `spec.validation`).
fn crd_version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    let versions = crd["spec"]["versions"].as_array()?;
    let v = versions.iter().find(|v| v["name"] == json!(version))?;
    v["schema"]["openAPIV3Schema"]
        .as_object()
        .map(|_| &v["schema"]["openAPIV3Schema"])
}

fn gvk_extension(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

/// The kind's definition as apiextensions-apiserver builds it for OpenAPI v3: the CRD's
/// schema with `metadata` a reference to ObjectMeta and `apiVersion`/`kind` strings; a CRD
/// without a usable (structural, object-typed) schema publishes a bare object.
pub(crate) fn custom_kind_schema(
    schema: Option<&Value>,
    group: &str,
    version: &str,
    kind: &str,
) -> Value {
    let mut out = match schema.and_then(Value::as_object) {
        Some(s) if s.get("type") == Some(&json!("object")) => {
            let mut s = s.clone();
            let props = s
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(props) = props.as_object_mut() {
                props.insert(
                    "metadata".into(),
                    json!({"$ref": format!("{V3_REF}{OBJECT_META}")}),
                );
                props.insert("apiVersion".into(), json!({"type": "string"}));
                props.insert("kind".into(), json!({"type": "string"}));
            }
            s
        }
        _ => {
            let mut m = Map::new();
            m.insert("type".into(), json!("object"));
            m
        }
    };
    out.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk_extension(group, version, kind),
    );
    Value::Object(out)
}

/// The list kind's definition: `items` of the kind, `metadata` ListMeta.
fn custom_list_schema(kind_name: &str, group: &str, version: &str, kind: &str) -> Value {
    json!({
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": format!("{V3_REF}{kind_name}")}},
            "kind": {"type": "string"},
            "metadata": {"allOf": [{"$ref": format!("{V3_REF}{LIST_META}")}], "default": {}},
        },
        "x-kubernetes-group-version-kind": gvk_extension(group, version, &format!("{kind}List")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_definition_names_reverse_the_group() {
        for (g, v, k, want) in [
            (
                "stable.example.com",
                "v1",
                "CronTab",
                "com.example.stable.v1.CronTab",
            ),
            ("example", "v1beta1", "Widget", "example.v1beta1.Widget"),
        ] {
            assert_eq!(definition_name(g, v, k), want);
        }
    }

    #[test]
    fn custom_kind_schema_wraps_a_structural_schema_and_falls_back_to_an_object() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"replicas": {"type": "integer"}}}}});
        let s = custom_kind_schema(Some(&schema), "g.io", "v1", "W");
        assert_eq!(
            s["properties"]["metadata"]["$ref"],
            json!(format!("{V3_REF}{OBJECT_META}"))
        );
        assert_eq!(s["properties"]["kind"], json!({"type": "string"}));
        assert_eq!(
            s["properties"]["spec"]["properties"]["replicas"],
            json!({"type": "integer"})
        );
        assert_eq!(
            s["x-kubernetes-group-version-kind"],
            json!([{"group": "g.io", "kind": "W", "version": "v1"}])
        );
        for missing in [
            None,
            Some(&json!({"x-kubernetes-preserve-unknown-fields": true})),
        ] {
            let s = custom_kind_schema(missing, "g.io", "v1", "W");
            assert_eq!(s["type"], json!("object"));
            assert!(s.get("properties").is_none());
        }
    }
}

//! OpenAPI v3 definitions of kube-apiserver 1.29's built-in kinds, and a resolver from a
//! group/version/kind to its schema with every reference inlined.
//!
//! [`builtin`] holds every `components.schemas` entry a v1.29.6 API server served under
//! `/openapi/v3` (descriptions dropped), generated from the recorded documents by the test
//! `generated_definitions_match_the_record` (run it with `RKCM_APISERVER_REFERENCE` set, and
//! `RKCM_REGENERATE=1` to rewrite `src/definitions.json`). It plays the part of upstream's
//! compiled-in definitions (`resolver.NewDefinitionsSchemaResolver`);
//! [`Definitions::from_documents`] plays the part of the discovery-based resolver for kinds
//! only a live server knows (custom resources).

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use serde_json::Value;

mod resolve;

#[cfg(test)]
mod generate;

pub use resolve::ResolveError;

/// The extension listing the group/version/kinds a definition is served as.
const GVK_EXTENSION: &str = "x-kubernetes-group-version-kind";

/// The generated definitions: one `"name": schema` per line, sorted by name.
const BUILTIN_TEXT: &str = include_str!("definitions.json");

/// The gated group-versions' definitions, written by hand (see [`gated`]): one
/// `"name": schema` per line, sorted by name.
const GATED_TEXT: &str = include_str!("gated_definitions.json");

/// Named OpenAPI schemas (`components.schemas`) and the index of their group/version/kinds.
#[derive(Debug, Clone, Default)]
pub struct Definitions {
    schemas: BTreeMap<String, Value>,
    by_gvk: HashMap<(String, String, String), String>,
}

/// The definition a property's schema refers to, by name: its `$ref`, or the one its
/// `allOf` wraps (upstream's v3 form of a reference with a sibling `default`).
pub fn referenced_name(schema: &Value) -> Option<&str> {
    let r = schema.get("$ref").and_then(Value::as_str).or_else(|| {
        schema
            .get("allOf")?
            .as_array()?
            .iter()
            .find_map(|m| m.get("$ref")?.as_str())
    })?;
    Some(r.strip_prefix("#/components/schemas/").unwrap_or(r))
}

/// The built-in definitions of kube-apiserver v1.29.6 (generated; see the test).
pub fn builtin() -> &'static Definitions {
    static BUILTIN: OnceLock<Definitions> = OnceLock::new();
    BUILTIN.get_or_init(|| Definitions::from_schemas(parse_schemas(BUILTIN_TEXT)))
}

/// Every built-in definition: [`builtin`]'s and [`gated`]'s together, merged once (what
/// upstream's compiled-in definitions hold, served or not).
pub fn all() -> &'static Definitions {
    static ALL: OnceLock<Definitions> = OnceLock::new();
    ALL.get_or_init(|| builtin().merged(gated()))
}

/// [`all`]'s definitions, parsed afresh and owned: for a one-off use (a worker deriving
/// its projections at start) whose few MB should be given back afterwards, not held for
/// the process's life as the `static` ones are.
pub fn load_all() -> Definitions {
    let gated = Definitions::from_schemas(parse_schemas(GATED_TEXT));
    merge_into(parse_schemas(BUILTIN_TEXT), &gated)
}

/// One of the compiled-in `"name": schema` texts, parsed.
fn parse_schemas(text: &str) -> BTreeMap<String, Value> {
    serde_json::from_str(text).unwrap_or_default()
}

/// `schemas` and `other`'s definitions (a name both define keeps `schemas`' one).
fn merge_into(mut schemas: BTreeMap<String, Value>, other: &Definitions) -> Definitions {
    for (name, schema) in &other.schemas {
        schemas
            .entry(name.clone())
            .or_insert_with(|| schema.clone());
    }
    Definitions::from_schemas(schemas)
}

/// The definitions kube-apiserver 1.29 adds when its gated group-versions are enabled
/// (`--runtime-config`), for the kinds kube-sim serves there: admissionregistration.k8s.io/v1beta1
/// ValidatingAdmissionPolicy(Binding), internal.apiserver.k8s.io/v1alpha1 StorageVersion,
/// networking.k8s.io/v1alpha1 ServiceCIDR and IPAddress, resource.k8s.io/v1alpha2
/// ResourceClaim, ResourceClaimTemplate, ResourceClass and PodSchedulingContext (and their
/// lists).
///
/// Written by hand from the Go types' tags; the record has none of these groups (a default
/// server does not serve them). Each definition keeps only what kube-sim and the type checker
/// read: `type`, `properties`, `items`, `$ref`, `format`, `required` (a field whose JSON tag
/// lacks `omitempty` and that is not `+optional`), the group/version/kind of the kinds, and the
/// list, map and patch extensions the tags give (`+listType`, `+listMapKey`, `+structType`,
/// `patchStrategy`, `patchMergeKey`). No descriptions and no defaults. Shared types
/// (ObjectMeta, ListMeta, LabelSelector, Condition, Time, NodeSelector) are references to
/// [`builtin`]'s definitions, so use these merged into [`builtin`].
pub fn gated() -> &'static Definitions {
    static GATED: OnceLock<Definitions> = OnceLock::new();
    GATED.get_or_init(|| Definitions::from_schemas(parse_schemas(GATED_TEXT)))
}

impl Definitions {
    /// These definitions and `other`'s (a name both define keeps this one's definition).
    pub fn merged(&self, other: &Definitions) -> Definitions {
        merge_into(self.schemas.clone(), other)
    }

    /// From OpenAPI v3 documents as a server serves them at `/openapi/v3/<path>` (for custom
    /// resources, as upstream's ClientDiscoveryResolver): their components.schemas. When two
    /// documents define the same name, the first one's definition is kept.
    pub fn from_documents<'a>(docs: impl IntoIterator<Item = &'a Value>) -> Definitions {
        let mut defs = Definitions::default();
        defs.add_documents(docs);
        defs
    }

    /// Adds the `components.schemas` of more documents; names already defined keep their
    /// definition.
    pub fn add_documents<'a>(&mut self, docs: impl IntoIterator<Item = &'a Value>) {
        for doc in docs {
            let Some(schemas) = doc
                .get("components")
                .and_then(|c| c.get("schemas"))
                .and_then(Value::as_object)
            else {
                continue;
            };
            for (name, schema) in schemas {
                self.schemas
                    .entry(name.clone())
                    .or_insert_with(|| schema.clone());
            }
        }
        self.reindex();
    }

    fn from_schemas(schemas: BTreeMap<String, Value>) -> Definitions {
        let mut defs = Definitions {
            schemas,
            by_gvk: HashMap::new(),
        };
        defs.reindex();
        defs
    }

    /// Rebuilds the group/version/kind index. A kind listed by several definitions (it should
    /// not be) maps to the first by name.
    fn reindex(&mut self) {
        self.by_gvk.clear();
        for (name, schema) in &self.schemas {
            for (g, v, k) in gvks_of(schema) {
                self.by_gvk
                    .entry((g.to_string(), v.to_string(), k.to_string()))
                    .or_insert_with(|| name.clone());
            }
        }
    }

    /// The schema named `name` (e.g. `io.k8s.api.apps.v1.Deployment`), as served (references
    /// not inlined).
    pub fn get(&self, name: &str) -> Option<&serde_json::Value> {
        self.schemas.get(name)
    }

    /// How many definitions there are.
    pub fn len(&self) -> usize {
        self.schemas.len()
    }

    /// True when there are no definitions.
    pub fn is_empty(&self) -> bool {
        self.schemas.is_empty()
    }

    /// Every definition, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.schemas.iter().map(|(n, s)| (n.as_str(), s))
    }

    /// Every (group, version, kind, definition name) the definitions list in their
    /// `x-kubernetes-group-version-kind`, by definition name.
    pub fn gvks(&self) -> impl Iterator<Item = (&str, &str, &str, &str)> {
        self.schemas
            .iter()
            .flat_map(|(name, s)| gvks_of(s).map(move |(g, v, k)| (g, v, k, name.as_str())))
    }

    /// The definition name whose `x-kubernetes-group-version-kind` lists (group, version, kind).
    pub fn name_for_gvk(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.by_gvk
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
            .map(String::as_str)
    }

    /// The schema of (group, version, kind) with every `$ref` inlined as upstream's populateRefs
    /// does: a reference (direct, or the first one found in `allOf`) is replaced by the whole
    /// referenced schema, so siblings such as `default` go with it; properties,
    /// `additionalProperties` and `items` are inlined in turn; a reference to a definition
    /// already being inlined on the way down (recursion, e.g. JSONSchemaProps) becomes
    /// `{"type": "object"}`.
    pub fn resolve(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<serde_json::Value, ResolveError> {
        let Some(name) = self.name_for_gvk(group, version, kind) else {
            return Err(ResolveError::NotFound(format!(
                "cannot resolve {}/{}, Kind={}: schema not found",
                group, version, kind
            )));
        };
        resolve::populate_root(self, name)
    }
}

/// The (group, version, kind) entries of a schema's `x-kubernetes-group-version-kind`; a
/// malformed list yields none (as upstream's extensionsToGVKs).
fn gvks_of(schema: &Value) -> impl Iterator<Item = (&str, &str, &str)> {
    let list = schema
        .get(GVK_EXTENSION)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let parsed: Option<Vec<(&str, &str, &str)>> = list
        .iter()
        .map(|e| {
            Some((
                e.get("group")?.as_str()?,
                e.get("version")?.as_str()?,
                e.get("kind")?.as_str()?,
            ))
        })
        .collect();
    parsed.unwrap_or_default().into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_parses_and_indexes_kinds() {
        let defs = builtin();
        assert!(defs.len() > 400, "only {} definitions", defs.len());
        assert_eq!(
            defs.name_for_gvk("apps", "v1", "Deployment"),
            Some("io.k8s.api.apps.v1.Deployment")
        );
        assert_eq!(
            defs.name_for_gvk("", "v1", "Pod"),
            Some("io.k8s.api.core.v1.Pod")
        );
        assert_eq!(
            defs.name_for_gvk("events.k8s.io", "v1", "Event"),
            Some("io.k8s.api.events.v1.Event")
        );
        assert_eq!(
            defs.name_for_gvk("autoscaling", "v2", "HorizontalPodAutoscaler"),
            Some("io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler")
        );
        assert_eq!(defs.name_for_gvk("apps", "v1beta1", "Deployment"), None);
        assert_eq!(
            defs.name_for_gvk("networking.k8s.io", "v1alpha1", "ServiceCIDR"),
            None
        );
        let all = defs.merged(gated());
        for (g, v, k) in [
            ("networking.k8s.io", "v1alpha1", "ServiceCIDR"),
            ("networking.k8s.io", "v1alpha1", "IPAddress"),
            ("internal.apiserver.k8s.io", "v1alpha1", "StorageVersion"),
            ("resource.k8s.io", "v1alpha2", "ResourceClaim"),
            (
                "admissionregistration.k8s.io",
                "v1beta1",
                "ValidatingAdmissionPolicy",
            ),
        ] {
            assert!(all.resolve(g, v, k).is_ok(), "{}/{} {}", g, v, k);
        }
        // Descriptions are gone, everything else is kept.
        let text = serde_json::to_string(
            defs.get("io.k8s.api.core.v1.PodSpec")
                .unwrap_or(&json!(null)),
        )
        .unwrap_or_default();
        assert!(
            !text.contains("\"description\":\"") && text.contains("x-kubernetes-patch-merge-key")
        );
        // JSONSchemaProps keeps its property called "description".
        let props = &defs
            .get("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps")
            .unwrap_or(&Value::Null)["properties"];
        assert_eq!(props["description"], json!({"type": "string"}));
    }

    /// Every `$ref` anywhere in `v`.
    fn refs_in<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    match (k.as_str(), child) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => refs_in(child, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|c| refs_in(c, out)),
            _ => {}
        }
    }

    #[test]
    fn hand_written_gated_definitions_parse_refer_to_known_names_and_resolve() {
        let parsed: BTreeMap<String, Value> = match serde_json::from_str(GATED_TEXT) {
            Ok(p) => p,
            Err(e) => panic!("src/gated_definitions.json does not parse: {}", e),
        };
        assert_eq!(parsed.len(), gated().len());
        let all = all();
        for (name, schema) in gated().iter() {
            // A name builtin() has would be shadowed by its definition when merged.
            assert!(
                builtin().get(name).is_none(),
                "{} is already built in",
                name
            );
            assert_eq!(schema["type"], json!("object"), "{}", name);
            let text = schema.to_string();
            assert!(
                !text.contains("\"description\"") && !text.contains("\"default\""),
                "{} has a description or default",
                name
            );
            let mut refs = Vec::new();
            refs_in(schema, &mut refs);
            for r in refs {
                let target = r.strip_prefix("#/components/schemas/");
                assert!(
                    target.is_some_and(|t| all.get(t).is_some()),
                    "{} refers to {}, which is not defined",
                    name,
                    r
                );
            }
        }
        let mut kinds: Vec<(&str, &str, &str)> =
            gated().gvks().map(|(g, v, k, _)| (g, v, k)).collect();
        kinds.sort();
        let mut expected = Vec::new();
        for (g, v, k) in [
            (
                "admissionregistration.k8s.io",
                "v1beta1",
                "ValidatingAdmissionPolicy",
            ),
            (
                "admissionregistration.k8s.io",
                "v1beta1",
                "ValidatingAdmissionPolicyBinding",
            ),
            ("internal.apiserver.k8s.io", "v1alpha1", "StorageVersion"),
            ("networking.k8s.io", "v1alpha1", "IPAddress"),
            ("networking.k8s.io", "v1alpha1", "ServiceCIDR"),
            ("resource.k8s.io", "v1alpha2", "PodSchedulingContext"),
            ("resource.k8s.io", "v1alpha2", "ResourceClaim"),
            ("resource.k8s.io", "v1alpha2", "ResourceClaimTemplate"),
            ("resource.k8s.io", "v1alpha2", "ResourceClass"),
        ] {
            expected.push((g, v, k.to_string()));
            expected.push((g, v, format!("{}List", k)));
        }
        expected.sort();
        let expected: Vec<(&str, &str, &str)> = expected
            .iter()
            .map(|(g, v, k)| (*g, *v, k.as_str()))
            .collect();
        assert_eq!(kinds, expected);
        for (g, v, k) in kinds {
            if let Err(e) = all.resolve(g, v, k) {
                panic!("{}/{} {}: {}", g, v, k, e);
            }
        }
        // The tags come through: a merge list keyed by name, an atomic struct, a set.
        let spec = all
            .get("io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicySpec")
            .unwrap_or(&Value::Null);
        let variables = &spec["properties"]["variables"];
        assert_eq!(variables["x-kubernetes-patch-strategy"], json!("merge"));
        assert_eq!(variables["x-kubernetes-patch-merge-key"], json!("name"));
        assert_eq!(variables["x-kubernetes-list-map-keys"], json!(["name"]));
        let claim = all
            .resolve("resource.k8s.io", "v1alpha2", "ResourceClaim")
            .unwrap_or_default();
        let reserved = &claim["properties"]["status"]["properties"]["reservedFor"];
        assert_eq!(reserved["x-kubernetes-list-type"], json!("map"));
        assert_eq!(
            reserved["items"]["required"],
            json!(["resource", "name", "uid"])
        );
    }

    #[test]
    fn from_documents_keeps_the_first_definition_and_reads_gvks() {
        let a = json!({"components": {"schemas": {
            "x.A": {"type": "object", "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "A"}]},
        }}});
        let b = json!({"components": {"schemas": {
            "x.A": {"type": "string"},
            "x.B": {"type": "object", "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1"}]},
        }}});
        let defs = Definitions::from_documents([&a, &b, &json!({"paths": {}})]);
        assert_eq!(defs.len(), 2);
        assert_eq!(defs.get("x.A").map(|s| &s["type"]), Some(&json!("object")));
        assert_eq!(defs.name_for_gvk("g", "v1", "A"), Some("x.A"));
        // A malformed GVK list names nothing.
        assert_eq!(defs.gvks().count(), 1);
    }
}

//! `schema_decl_type` tests: hand-written schemas and the real apps/v1 Deployment schema.

use serde_json::{json, Value};

use crate::schema::{escape, schema_decl_type};
use crate::{compile, Env, Type};

fn field<'a>(t: &'a Type, name: &str) -> &'a Type {
    match t {
        Type::Object(o) => o
            .field(name)
            .unwrap_or_else(|| panic!("no field {name} in {}", o.name())),
        other => panic!("{other} is not an object"),
    }
}

#[test]
fn scalars_and_formats() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"type": "string"}), "string"),
        (json!({"type": "string", "format": "byte"}), "bytes"),
        (json!({"type": "string", "format": "duration"}), "duration"),
        (json!({"type": "string", "format": "date"}), "timestamp"),
        (
            json!({"type": "string", "format": "date-time"}),
            "timestamp",
        ),
        (json!({"type": "string", "format": "int-or-string"}), "dyn"),
        (
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
            "dyn",
        ),
        (json!({"type": "boolean"}), "bool"),
        (json!({"type": "number"}), "double"),
        (json!({"type": "integer", "format": "int64"}), "int"),
        (json!({"type": ["integer"]}), "int"),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            "list(string)",
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            "map(string, int)",
        ),
        (json!({"type": "object"}), "T"),
    ];
    for (schema, want) in cases {
        let t = schema_decl_type(&schema, false, "T").unwrap_or_else(|| panic!("{schema}"));
        assert_eq!(t.to_string(), want, "{schema}");
    }
    for schema in [
        json!({}),
        json!({"oneOf": [{"type": "string"}, {"type": "number"}]}),
        json!({"type": "array"}),
        json!({"type": "array", "items": {}}),
        json!({"type": "object", "additionalProperties": {}}),
        json!({"type": "object", "additionalProperties": true}),
        json!("not a schema"),
    ] {
        assert_eq!(schema_decl_type(&schema, false, "T"), None, "{schema}");
    }
}

#[test]
fn nested_names_and_escaping() {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
                "byName": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}},
            }},
            "x-dashed.dotted/slashed": {"type": "string"},
            "double__underscore": {"type": "string"},
            "namespace": {"type": "string"},
            "1starts-with-digit": {"type": "string"},
            "has space": {"type": "string"},
            "untyped": {},
        }
    });
    let t = schema_decl_type(&schema, false, "Thing123").unwrap();
    assert_eq!(t.to_string(), "Thing123");
    let spec = field(&t, "spec");
    assert_eq!(spec.to_string(), "Thing123.spec");
    assert_eq!(
        field(spec, "items").to_string(),
        "list(Thing123.spec.items.@idx)"
    );
    assert_eq!(
        field(spec, "byName").to_string(),
        "map(string, Thing123.spec.byName.@elem)"
    );
    let Type::Object(o) = &t else { panic!() };
    let names: Vec<&str> = o.fields().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        vec![
            "__namespace__",
            "double__underscores__underscore",
            "spec",
            "x__dash__dashed__dot__dotted__slash__slashed"
        ]
    );
    // The names work in expressions.
    let env = Env::kubernetes_base().with_variable("object", t);
    let ok = |s: &str| {
        compile(&env, s)
            .map(|c| c.output_type().to_string())
            .map_err(|e| e.to_string())
    };
    assert_eq!(ok("object.spec.items[0].n").as_deref(), Ok("int"));
    assert_eq!(ok("object.spec.byName['a'].v").as_deref(), Ok("string"));
    assert_eq!(ok("object.__namespace__").as_deref(), Ok("string"));
    assert_eq!(
        ok("object.x__dash__dashed__dot__dotted__slash__slashed").as_deref(),
        Ok("string")
    );
}

#[test]
fn escape_as_kubernetes() {
    let cases: &[(&str, Option<&str>)] = &[
        ("name", Some("name")),
        ("in", Some("__in__")),
        ("namespace", Some("__namespace__")),
        ("a-b", Some("a__dash__b")),
        ("a.b", Some("a__dot__b")),
        ("a/b", Some("a__slash__b")),
        ("a__b", Some("a__underscores__b")),
        ("a___b", Some("a__underscores___b")),
        ("_a", Some("_a")),
        ("", None),
        ("1a", None),
        ("a b", None),
        ("a$", None),
        ("é", None),
    ];
    for (ident, want) in cases {
        assert_eq!(escape(ident).as_deref(), *want, "{ident}");
    }
}

#[test]
fn resource_roots_get_type_and_object_meta() {
    // Missing apiVersion/kind/metadata are added; an incomplete metadata is replaced.
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "spec": {"type": "object", "properties": {"embedded": {"type": "object", "x-kubernetes-embedded-resource": true}}},
    }});
    let t = schema_decl_type(&schema, true, "R").unwrap();
    assert_eq!(field(&t, "apiVersion"), &Type::String);
    assert_eq!(field(&t, "kind"), &Type::String);
    let meta = field(&t, "metadata");
    let Type::Object(m) = meta else { panic!() };
    let names: Vec<&str> = m.fields().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["generateName", "name"]);
    let embedded = field(field(&t, "spec"), "embedded");
    assert_eq!(field(embedded, "kind"), &Type::String);
    // Not a root: nothing added.
    let t = schema_decl_type(&schema, false, "R").unwrap();
    let Type::Object(o) = &t else { panic!() };
    assert!(o.field("kind").is_none());
}

/// Inlines `$ref`s and unwraps single-element `allOf`s (what the caller does upstream).
fn inline(schema: &Value, all: &serde_json::Map<String, Value>, depth: usize) -> Value {
    assert!(depth < 64, "reference cycle");
    match schema {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                let name = r.trim_start_matches("#/components/schemas/");
                return inline(&all[name], all, depth + 1);
            }
            let mut out = serde_json::Map::new();
            for (k, v) in o {
                out.insert(k.clone(), inline(v, all, depth + 1));
            }
            if let Some(Value::Array(items)) = out.get("allOf").cloned() {
                if let [Value::Object(inner)] = items.as_slice() {
                    out.remove("allOf");
                    for (k, v) in inner {
                        out.entry(k.clone()).or_insert(v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|v| inline(v, all, depth + 1)).collect()),
        other => other.clone(),
    }
}

#[test]
fn real_deployment_schema() {
    let Ok(dir) = std::env::var("RKCM_APISERVER_REFERENCE") else {
        eprintln!("skipped: RKCM_APISERVER_REFERENCE is not set (the recorded OpenAPI documents are needed)");
        return;
    };
    let path = format!("{dir}/openapi-v3/apis_apps_v1.json");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read apps/v1 OpenAPI"))
            .unwrap();
    let all = doc["components"]["schemas"].as_object().unwrap();
    let schema = inline(&all["io.k8s.api.apps.v1.Deployment"], all, 0);
    let t = schema_decl_type(&schema, true, "Deployment42").unwrap();
    let env = Env::admission(Some(t), None, false, true);
    let cases: &[(&str, &str)] = &[
        ("object", "Deployment42"),
        ("object.spec", "Deployment42.spec"),
        ("object.spec.replicas", "int"),
        ("object.metadata.name", "string"),
        ("object.metadata.labels", "map(string, string)"),
        ("object.metadata.creationTimestamp", "timestamp"),
        ("object.spec.selector.matchLabels", "map(string, string)"),
        ("object.spec.strategy.rollingUpdate.maxSurge", "dyn"),
        (
            "object.spec.template.spec.containers",
            "list(Deployment42.spec.template.spec.containers.@idx)",
        ),
        ("object.spec.template.spec.containers[0].image", "string"),
        (
            "object.spec.template.spec.containers[0].ports[0].containerPort",
            "int",
        ),
        ("object.status.conditions[0].lastUpdateTime", "timestamp"),
        (
            "object.spec.template.metadata.annotations",
            "map(string, string)",
        ),
        (
            "object.metadata.managedFields[0].fieldsV1",
            "Deployment42.metadata.managedFields.@idx.fieldsV1",
        ),
    ];
    for (src, want) in cases {
        match compile(&env, src) {
            Ok(c) => assert_eq!(c.output_type().to_string(), *want, "{src}"),
            Err(e) => panic!("{src}: {e}"),
        }
    }
    let err = |s: &str| {
        compile(&env, s)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert_eq!(
        err("object.spec.replicass > 1"),
        "ERROR: <input>:1:12: undefined field 'replicass'\n | object.spec.replicass > 1\n | ...........^"
    );
    // Quantity's schema is a oneOf without a type: resource limits have no CEL type upstream.
    assert_eq!(
        err("object.spec.template.spec.containers[0].resources.limits"),
        "ERROR: <input>:1:50: undefined field 'limits'\n | object.spec.template.spec.containers[0].resources.limits\n | .................................................^"
    );
    assert_eq!(
        err("object.spec.replicas == 'three'"),
        "ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'\n | object.spec.replicas == 'three'\n | .....................^"
    );
}

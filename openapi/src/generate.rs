//! The generator of `definitions.json`: every `components.schemas` entry of the recorded
//! OpenAPI v3 documents, descriptions removed, keys sorted, one definition per line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value};

/// The schema without its `description`s (only where `description` is a schema keyword: a
/// property called `description` stays).
fn strip_descriptions(schema: &Value) -> Value {
    let Some(obj) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in obj {
        let v = match (k.as_str(), v) {
            ("description", _) => continue,
            ("properties", Value::Object(props)) => Value::Object(
                props
                    .iter()
                    .map(|(name, p)| (name.clone(), strip_descriptions(p)))
                    .collect(),
            ),
            ("items" | "additionalProperties" | "not", _) => strip_descriptions(v),
            ("allOf" | "anyOf" | "oneOf", Value::Array(list)) => {
                Value::Array(list.iter().map(strip_descriptions).collect())
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

/// Compact JSON with every object's keys sorted (whatever order the parser kept).
fn write_sorted(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, &Value> = m.iter().collect();
            out.push('{');
            for (i, (k, child)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                write_sorted(child, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, child) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(child, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The file's content for these documents (`(file name, document)`), or every name two
/// documents define differently.
pub(crate) fn render(docs: &[(String, Value)]) -> Result<String, Vec<String>> {
    let mut defs: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut conflicts = Vec::new();
    for (file, doc) in docs {
        let Some(schemas) = doc
            .get("components")
            .and_then(|c| c.get("schemas"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (name, schema) in schemas {
            let mut text = String::new();
            write_sorted(&strip_descriptions(schema), &mut text);
            match defs.get(name) {
                Some((first, seen)) if *seen != text => conflicts.push(format!(
                    "{} is defined differently in {} and {}",
                    name, first, file
                )),
                Some(_) => {}
                None => {
                    defs.insert(name.clone(), (file.clone(), text));
                }
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }
    let mut out = String::from("{\n");
    let last = defs.len().saturating_sub(1);
    for (i, (name, (_, text))) in defs.iter().enumerate() {
        let sep = if i == last { "" } else { "," };
        let _ = writeln!(
            out,
            "{}:{}{}",
            serde_json::to_string(name).unwrap_or_default(),
            text,
            sep
        );
    }
    out.push_str("}\n");
    Ok(out)
}

/// The recorded documents under `<reference>/openapi-v3`, by file name.
fn read_documents(reference: &Path) -> Vec<(String, Value)> {
    let dir = reference.join("openapi-v3");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) => panic!("reading {}: {}", dir.display(), e),
    };
    let mut docs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => panic!("reading {}: {}", path.display(), e),
        };
        let doc: Value = match serde_json::from_str(&text) {
            Ok(d) => d,
            Err(e) => panic!("parsing {}: {}", path.display(), e),
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        docs.push((name, doc));
    }
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    docs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generated_definitions_match_the_record() {
        let Some(reference) = std::env::var_os("RKCM_APISERVER_REFERENCE") else {
            eprintln!(
                "skipped: set RKCM_APISERVER_REFERENCE to the recorded apiserver answers to check \
                 src/definitions.json against them"
            );
            return;
        };
        let docs = read_documents(Path::new(&reference));
        assert!(
            docs.len() > 40,
            "only {} documents under {:?}/openapi-v3",
            docs.len(),
            reference
        );
        let content = match render(&docs) {
            Ok(c) => c,
            Err(conflicts) => panic!(
                "the recorded documents disagree on these definitions:\n{}",
                conflicts.join("\n")
            ),
        };
        check_or_write("definitions.json", &content, super::super::BUILTIN_TEXT);
    }

    /// Writes `src/<name>` with `RKCM_REGENERATE=1`, else fails unless it holds `content`.
    fn check_or_write(name: &str, content: &str, compiled: &str) {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(name);
        if std::env::var_os("RKCM_REGENERATE").is_some_and(|v| v == "1") {
            if let Err(e) = std::fs::write(&file, content) {
                panic!("writing {}: {}", file.display(), e);
            }
            eprintln!("rewrote {}", file.display());
            return;
        }
        let committed = std::fs::read_to_string(&file).unwrap_or_default();
        if committed != content {
            let first_diff = committed
                .lines()
                .zip(content.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(committed.lines().count().min(content.lines().count()));
            panic!(
                "src/{} differs from the documents it is generated from (first at line {}); \
                 run with RKCM_REGENERATE=1 to rewrite",
                name,
                first_diff + 1
            );
        }
        assert_eq!(committed, compiled);
    }

    #[test]
    fn rendering_strips_descriptions_sorts_and_reports_conflicts() {
        let a = json!({"components": {"schemas": {
            "b.Two": {"type": "object", "description": "d", "properties": {
                "description": {"type": "string", "description": "x"},
                "z": {"allOf": [{"$ref": "#/components/schemas/a.One"}], "description": "y", "default": {}},
                "a": {"type": "array", "items": {"description": "i", "type": "string"}},
            }},
            "a.One": {"type": "object", "x-kubernetes-map-type": "atomic",
                      "enum": [{"description": "kept"}]},
        }}});
        let out = render(&[("a.json".into(), a.clone())]);
        assert_eq!(
            out,
            Ok(concat!(
                "{\n",
                "\"a.One\":{\"enum\":[{\"description\":\"kept\"}],\"type\":\"object\",\"x-kubernetes-map-type\":\"atomic\"},\n",
                "\"b.Two\":{\"properties\":{\"a\":{\"items\":{\"type\":\"string\"},\"type\":\"array\"},",
                "\"description\":{\"type\":\"string\"},",
                "\"z\":{\"allOf\":[{\"$ref\":\"#/components/schemas/a.One\"}],\"default\":{}}},\"type\":\"object\"}\n",
                "}\n"
            )
            .to_string())
        );
        // The same definition in two documents is fine; a different one is reported.
        let same = json!({"components": {"schemas": {"a.One": a["components"]["schemas"]["a.One"].clone()}}});
        assert!(render(&[("a.json".into(), a.clone()), ("b.json".into(), same)]).is_ok());
        let other = json!({"components": {"schemas": {"a.One": {"type": "string"}}}});
        assert_eq!(
            render(&[("a.json".into(), a), ("c.json".into(), other)]),
            Err(vec![
                "a.One is defined differently in a.json and c.json".to_string()
            ])
        );
    }
}

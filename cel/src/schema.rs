//! OpenAPI v3 schemas to CEL types, as Kubernetes' `common.SchemaDeclType` followed by
//! `DeclType.MaybeAssignTypeName` (`k8s.io/apiserver/pkg/cel/common/schemas.go`,
//! `.../cel/types.go`), with property names escaped as `.../cel/escaping.go` does.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::types::{ObjectType, Type};

/// Kubernetes' intermediate declaration: objects are all named `object` until named.
#[derive(Clone, Debug)]
enum Decl {
    Simple(Type),
    List(Box<Decl>),
    Map(Box<Decl>),
    Object(String, BTreeMap<String, Decl>),
}

/// An OpenAPI v3 schema (JSON, `$ref`s already inlined and `allOf: [x]` already unwrapped by
/// the caller) as a CEL type.
///
/// As upstream: `x-kubernetes-int-or-string` (or format `int-or-string`) is `dyn`; strings
/// with format `byte` are `bytes`, `duration` is `duration`, `date`/`date-time` are
/// `timestamp`; `additionalProperties` makes `map(string, T)`; `number` is `double`,
/// `integer` is `int`; properties whose names cannot be escaped, and properties whose schema
/// has no CEL type, are left out; a schema with no usable type gives `None`. With
/// `is_resource_root` (and for `x-kubernetes-embedded-resource` schemas), `apiVersion`, `kind`
/// and `metadata.name`/`metadata.generateName` are always present. The root object is named
/// `type_name`, nested objects `type_name.field`, list items `....@idx`, map values
/// `....@elem`.
pub fn schema_decl_type(schema: &Value, is_resource_root: bool, type_name: &str) -> Option<Type> {
    let decl = decl(schema, is_resource_root)?;
    let named = assign_name(decl, type_name);
    Some(to_type(&named))
}

fn schema_type(s: &Value) -> &str {
    match s.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or(""),
        _ => "",
    }
}

fn type_contains(s: Option<&Value>, want: &str) -> bool {
    match s.and_then(|s| s.get("type")) {
        Some(Value::String(t)) => t == want,
        Some(Value::Array(ts)) => ts.iter().any(|t| t.as_str() == Some(want)),
        _ => false,
    }
}

fn ext_true(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn is_int_or_string(s: &Value) -> bool {
    s.get("format").and_then(Value::as_str) == Some("int-or-string")
        || ext_true(s, "x-kubernetes-int-or-string")
}

fn is_embedded(s: &Value) -> bool {
    ext_true(s, "x-kubernetes-embedded-resource")
}

/// `WithTypeAndObjectMeta`: makes sure `kind`, `apiVersion` and `metadata` (with `name` and
/// `generateName`) are there, replacing `metadata` when it lacks them.
fn with_type_and_object_meta(s: &Value) -> Value {
    let props = s.get("properties");
    let meta = props.and_then(|p| p.get("metadata"));
    let meta_props = meta.and_then(|m| m.get("properties"));
    let complete = props.is_some_and(Value::is_object)
        && type_contains(props.and_then(|p| p.get("kind")), "string")
        && type_contains(props.and_then(|p| p.get("apiVersion")), "string")
        && type_contains(meta, "object")
        && meta_props.is_some_and(Value::is_object)
        && type_contains(meta_props.and_then(|p| p.get("name")), "string")
        && type_contains(meta_props.and_then(|p| p.get("generateName")), "string");
    if complete {
        return s.clone();
    }
    let mut out = s.clone();
    let string = serde_json::json!({"type": "string"});
    let mut new_props = props
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    new_props.insert("kind".into(), string.clone());
    new_props.insert("apiVersion".into(), string.clone());
    new_props.insert(
        "metadata".into(),
        serde_json::json!({"type": ["object"], "properties": {"name": string, "generateName": string}}),
    );
    if let Some(o) = out.as_object_mut() {
        o.insert("properties".into(), Value::Object(new_props));
    }
    out
}

fn decl(schema: &Value, is_resource_root: bool) -> Option<Decl> {
    if !schema.is_object() {
        return None;
    }
    if is_int_or_string(schema) {
        return Some(Decl::Simple(Type::Dyn));
    }
    let owned;
    let s = if is_resource_root {
        owned = with_type_and_object_meta(schema);
        &owned
    } else {
        schema
    };
    match schema_type(s) {
        "array" => {
            let items = s.get("items").filter(|i| i.is_object())?;
            let item = decl(items, is_embedded(items))?;
            Some(Decl::List(Box::new(item)))
        }
        "object" => {
            if let Some(ap) = s.get("additionalProperties") {
                // A schema gives a map; `true`/`false` are not schemas (upstream cannot type them).
                let elem = ap
                    .is_object()
                    .then(|| decl(ap, is_embedded(ap)))
                    .flatten()?;
                return Some(Decl::Map(Box::new(elem)));
            }
            let mut fields = BTreeMap::new();
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (name, prop) in props {
                    if let Some(ft) = decl(prop, is_embedded(prop)) {
                        if let Some(escaped) = escape(name) {
                            fields.insert(escaped, ft);
                        }
                    }
                }
            }
            Some(Decl::Object("object".into(), fields))
        }
        "string" => Some(Decl::Simple(
            match s.get("format").and_then(Value::as_str) {
                Some("byte") => Type::Bytes,
                Some("duration") => Type::Duration,
                Some("date" | "date-time") => Type::Timestamp,
                _ => Type::String,
            },
        )),
        "boolean" => Some(Decl::Simple(Type::Bool)),
        "number" => Some(Decl::Simple(Type::Double)),
        "integer" => Some(Decl::Simple(Type::Int)),
        _ => None,
    }
}

/// `MaybeAssignTypeName`: names unnamed objects after their path from the root.
fn assign_name(d: Decl, name: &str) -> Decl {
    match d {
        Decl::Object(own, fields) => {
            let base = if own != "object" {
                own
            } else {
                name.to_string()
            };
            let fields = fields.into_iter().map(|(f, t)| {
                let n = format!("{base}.{f}");
                (f, assign_name(t, &n))
            });
            Decl::Object(base.clone(), fields.collect())
        }
        Decl::Map(elem) => Decl::Map(Box::new(assign_name(*elem, &format!("{name}.@elem")))),
        Decl::List(elem) => Decl::List(Box::new(assign_name(*elem, &format!("{name}.@idx")))),
        simple => simple,
    }
}

fn to_type(d: &Decl) -> Type {
    match d {
        Decl::Simple(t) => t.clone(),
        Decl::List(e) => Type::list(to_type(e)),
        Decl::Map(e) => Type::map(Type::String, to_type(e)),
        Decl::Object(name, fields) => Type::object(ObjectType::new(
            name.clone(),
            fields.iter().map(|(k, v)| (k.clone(), to_type(v))),
        )),
    }
}

pub(crate) const RESERVED_SYMBOLS: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Whether `name` is a CEL identifier that is no reserved word (`[_a-zA-Z][_a-zA-Z0-9]*`), as
/// Kubernetes requires of a ValidatingAdmissionPolicy's variable names.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED_SYMBOLS.contains(&name)
}

/// Kubernetes' `Escape`: a property name as a CEL identifier, or `None` when it cannot be one.
pub(crate) fn escape(ident: &str) -> Option<String> {
    if ident.is_empty() || ident.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if RESERVED_SYMBOLS.contains(&ident) {
        return Some(format!("__{ident}__"));
    }
    if !ident
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    let mut out = String::with_capacity(ident.len());
    let mut chars = ident.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
    }
    Some(out)
}

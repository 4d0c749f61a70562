//! The `/openapi/v2` document in protobuf (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`,
//! gnostic's `openapi.v2.Document`), the form client-go's `OpenAPISchema` asks for and the
//! only one it decodes: kubectl's client-side validation of a `kind: List` reads it.
//!
//! Encoded by hand with the field numbers of gnostic's `OpenAPIv2.proto`; a value gnostic
//! keeps as `Any` (defaults, enum values, extensions) carries its JSON text in `yaml`, which
//! is valid YAML. The document's `info` and `definitions` are encoded: what kube-openapi's
//! `proto.NewOpenAPIData` (kubectl's validation and `explain` over v2) reads. Paths are left
//! out of the protobuf form (kubectl reads operations from the v3 documents).

use serde_json::{Map, Value};

/// A protobuf message being written (proto3: default values are not written).
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    /// A sub-message (always written: its presence is meaningful).
    fn message(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }

    fn bool(&mut self, field: u32, b: bool) {
        if b {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn double(&mut self, field: u32, d: f64) {
        if d != 0.0 {
            self.key(field, 1);
            self.0.extend_from_slice(&d.to_le_bytes());
        }
    }

    fn int64(&mut self, field: u32, i: i64) {
        if i != 0 {
            self.key(field, 0);
            self.varint(i as u64);
        }
    }
}

/// gnostic's `Any`: the value's text in `yaml` (field 2).
fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(2, &v.to_string());
    m
}

/// `NamedAny` (name 1, value 2).
fn named_any(name: &str, v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(1, name);
    m.message(2, any(v));
    m
}

/// gnostic's `Schema`.
fn schema(s: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(o) = s.as_object() else {
        return m;
    };
    let str_of = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("");
    let f64_of = |k: &str| o.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let i64_of = |k: &str| o.get(k).and_then(Value::as_i64).unwrap_or(0);
    let bool_of = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    m.string(1, str_of("$ref"));
    m.string(2, str_of("format"));
    m.string(3, str_of("title"));
    m.string(4, str_of("description"));
    if let Some(d) = o.get("default") {
        m.message(5, any(d));
    }
    m.double(6, f64_of("multipleOf"));
    m.double(7, f64_of("maximum"));
    m.bool(8, bool_of("exclusiveMaximum"));
    m.double(9, f64_of("minimum"));
    m.bool(10, bool_of("exclusiveMinimum"));
    m.int64(11, i64_of("maxLength"));
    m.int64(12, i64_of("minLength"));
    m.string(13, str_of("pattern"));
    m.int64(14, i64_of("maxItems"));
    m.int64(15, i64_of("minItems"));
    m.bool(16, bool_of("uniqueItems"));
    m.int64(17, i64_of("maxProperties"));
    m.int64(18, i64_of("minProperties"));
    for r in o
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(r) = r.as_str() {
            m.bytes(19, r.as_bytes());
        }
    }
    for e in o
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, any(e));
    }
    match o.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut a = Msg::default();
            a.key(2, 0);
            a.varint(u64::from(*b));
            m.message(21, a);
        }
        Some(v @ Value::Object(_)) => {
            let mut a = Msg::default();
            a.message(1, schema(v));
            m.message(21, a);
        }
        _ => {}
    }
    let types: Vec<&str> = match o.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let mut t = Msg::default();
        for ty in types {
            t.bytes(1, ty.as_bytes());
        }
        m.message(22, t);
    }
    match o.get("items") {
        Some(v @ Value::Object(_)) => {
            let mut i = Msg::default();
            i.message(1, schema(v));
            m.message(23, i);
        }
        Some(Value::Array(vs)) => {
            let mut i = Msg::default();
            for v in vs {
                i.message(1, schema(v));
            }
            m.message(23, i);
        }
        _ => {}
    }
    for a in o
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, schema(a));
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        m.message(25, named_schemas(props));
    }
    if let Some(Value::String(d)) = o.get("discriminator") {
        m.string(26, d);
    }
    m.bool(27, bool_of("readOnly"));
    if let Some(e) = o.get("example") {
        m.message(30, any(e));
    }
    for (k, v) in o {
        if k.starts_with("x-") {
            m.message(31, named_any(k, v));
        }
    }
    m
}

/// `Properties` / `Definitions`: repeated `NamedSchema` (name 1, value 2) in field 1.
fn named_schemas(schemas: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    for (name, s) in schemas {
        let mut ns = Msg::default();
        ns.string(1, name);
        ns.message(2, schema(s));
        m.message(1, ns);
    }
    m
}

/// The v2 document (JSON form) as gnostic's `openapi.v2.Document`.
pub(crate) fn document(doc: &Value) -> Vec<u8> {
    let mut m = Msg::default();
    m.string(1, doc["swagger"].as_str().unwrap_or("2.0"));
    let mut info = Msg::default();
    info.string(1, doc["info"]["title"].as_str().unwrap_or(""));
    info.string(2, doc["info"]["version"].as_str().unwrap_or(""));
    m.message(2, info);
    m.message(8, Msg::default());
    if let Some(defs) = doc["definitions"].as_object() {
        m.message(9, named_schemas(defs));
    }
    m.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn varints_and_keys_are_protobufs() {
        let mut m = Msg::default();
        m.varint(300);
        assert_eq!(m.0, vec![0xac, 0x02]);
        let mut m = Msg::default();
        m.string(1, "2.0");
        assert_eq!(m.0, vec![0x0a, 3, b'2', b'.', b'0']);
        let mut m = Msg::default();
        m.string(1, "");
        m.bool(8, false);
        assert!(m.0.is_empty());
    }

    #[test]
    fn a_schema_encodes_its_ref_type_properties_and_extensions() {
        let s = json!({"type": "object", "required": ["a"],
            "properties": {"a": {"$ref": "#/definitions/X"}},
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "K", "version": "v1"}]});
        let bytes = schema(&s).0;
        // required "a" (field 19, wire 2 → key 0x9a 0x01).
        assert!(bytes.windows(4).any(|w| w == [0x9a, 0x01, 1, b'a']));
        // type "object" inside TypeItem (field 22 → 0xb2 0x01).
        assert!(bytes.windows(2).any(|w| w == [0xb2, 0x01]));
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("#/definitions/X"));
        assert!(text.contains("x-kubernetes-group-version-kind"));
        assert!(text.contains("\"kind\":\"K\""));
    }
}

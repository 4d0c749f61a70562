use serde_json::{json, Value};
#[derive(Clone, Copy, PartialEq, Eq, Debug)] pub enum IncludeObject { None, Metadata, Object }
#[allow(clippy::too_many_arguments)]
pub fn to_table(_g: &str, _k: &str, items: &[Value], _h: bool, _i: IncludeObject, rv: &str, _c: Option<&str>, _n: chrono::DateTime<chrono::Utc>) -> Value {
  json!({"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":rv},"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"","priority":0}],"rows": items.iter().map(|o| json!({"cells":[o["metadata"]["name"]],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":o["metadata"]}})).collect::<Vec<_>>()})
}
#[allow(clippy::too_many_arguments)]
pub fn to_table_custom(_p: &Value, items: &[Value], h: bool, i: IncludeObject, rv: &str, c: Option<&str>, n: chrono::DateTime<chrono::Utc>) -> Value { to_table("", "", items, h, i, rv, c, n) }

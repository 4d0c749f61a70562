use serde_json::Value;
#[derive(Debug, Clone, PartialEq)]
pub struct FieldCause { pub reason: &'static str, pub message: String, pub field: String }
pub fn validate(_g: &str, _v: &str, _k: &str, _o: &Value, _old: Option<&Value>) -> Vec<FieldCause> { vec![] }
pub fn validate_name(_k: &str, _n: &str) -> Option<FieldCause> { None }
pub fn invalid_message(group: &str, kind: &str, name: &str, causes: &[FieldCause]) -> String { format!("{kind}.{group} \"{name}\" is invalid: {}", causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>().join(", ")) }

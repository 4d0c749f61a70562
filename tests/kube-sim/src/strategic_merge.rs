use serde_json::Value;
#[derive(Debug)] pub struct PatchError(pub String);
pub fn apply(_k: &str, o: &Value, p: &Value) -> Result<Value, PatchError> { let mut d = o.clone(); json_patch::merge(&mut d, p); Ok(d) }
pub fn merge_keys_known(_k: &str) -> bool { true }

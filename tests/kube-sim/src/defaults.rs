use serde_json::Value;
pub fn apply_defaults(_g: &str, _v: &str, _k: &str, _o: &mut Value) {}
pub fn admit_pod_service_account(_p: &mut Value, _s: &str) {}
pub fn job_selector_and_labels(_j: &mut Value, _u: &str) {}

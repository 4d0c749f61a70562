use serde_json::Value;
use std::collections::BTreeMap;
pub struct LabelSelector(Vec<(String,String)>);
impl LabelSelector {
  pub fn parse(s: &str) -> Result<Self, String> { Ok(Self(s.split(',').filter_map(|p| p.split_once('=').map(|(a,b)| (a.to_string(), b.to_string()))).collect())) }
  pub fn matches(&self, l: &BTreeMap<String, String>) -> bool { self.0.iter().all(|(k,v)| l.get(k) == Some(v)) }
  pub fn from_label_selector_json(sel: &Value) -> Result<Self, String> { Ok(Self(sel["matchLabels"].as_object().map(|m| m.iter().map(|(k,v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect()).unwrap_or_default())) }
  pub fn is_empty(&self) -> bool { self.0.is_empty() }
}
pub struct FieldSelector(Vec<(String,String)>);
impl FieldSelector {
  pub fn parse(s: &str) -> Result<Self, String> { Ok(Self(s.split(',').filter_map(|p| p.split_once('=').map(|(a,b)| (a.to_string(), b.to_string()))).collect())) }
  pub fn matches(&self, f: &dyn Fn(&str) -> Option<String>) -> bool { self.0.iter().all(|(k,v)| f(k).as_deref() == Some(v)) }
  pub fn field_names(&self) -> Vec<String> { self.0.iter().map(|x| x.0.clone()).collect() }
}
pub fn field_value(_r: &str, obj: &Value, field: &str) -> Option<String> { match field { "metadata.name" => obj["metadata"]["name"].as_str().map(String::from), "metadata.namespace" => obj["metadata"]["namespace"].as_str().map(String::from), _ => None } }
pub fn supported_field(_r: &str, _f: &str) -> bool { true }

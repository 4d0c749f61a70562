//! One cached object: its JSON (managedFields removed) encoded once into the envelope that
//! every Watch subscriber receives, plus the few fields the cache indexes and the selectors
//! read, extracted when the object arrives from the API server.
//!
//! The object's JSON text is a slice of the encoded envelope, so the cache holds each
//! object's bytes once, whatever the number of subscribers.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use rkcm_gocompat::fields::resource_fields_of;
use rkcm_proto::v1::GroupVersionResource;
use rkcm_proto::SharedWatchEvent;
use serde_json::Value;

/// `namespace/name`, or `name` for cluster-scoped objects: the key of the cache and of the
/// subscriber queues, as client-go's MetaNamespaceKeyFunc.
pub type ObjectKey = Arc<str>;

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("object is not a JSON object")]
    NotAnObject,
    #[error("object has no metadata.name")]
    NoName,
    #[error("object {0} has no metadata.resourceVersion")]
    NoResourceVersion(String),
}

#[derive(Debug)]
pub struct CachedObject {
    pub key: ObjectKey,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    /// resourceVersion as a number when it is one (it is on etcd-backed API servers);
    /// 0 otherwise, which disables resume for the resource.
    pub rv: u64,
    pub labels: BTreeMap<String, String>,
    pub owner_uids: Vec<String>,
    /// Values of the fields a field selector may name for this resource.
    pub fields: Vec<(&'static str, String)>,
    /// fields 2..=7 of the WatchEvent envelope, object included.
    full_body: Bytes,
    /// Where the object's JSON starts inside `full_body`.
    json_offset: usize,
    metadata_body: OnceLock<(Bytes, usize)>,
    gvr: Arc<GroupVersionResource>,
}

impl CachedObject {
    /// Builds the cached form of an object received from the API server.
    pub fn from_value(
        gvr: &Arc<GroupVersionResource>,
        mut value: Value,
    ) -> Result<Self, ObjectError> {
        let map = value.as_object_mut().ok_or(ObjectError::NotAnObject)?;
        let metadata = map
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or(ObjectError::NoName)?;
        metadata.remove("managedFields");
        let text = |m: &serde_json::Map<String, Value>, k: &str| {
            m.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let name = text(metadata, "name");
        if name.is_empty() {
            return Err(ObjectError::NoName);
        }
        let namespace = text(metadata, "namespace");
        let uid = text(metadata, "uid");
        let resource_version = text(metadata, "resourceVersion");
        if resource_version.is_empty() {
            return Err(ObjectError::NoResourceVersion(name));
        }
        let labels = metadata
            .get("labels")
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let owner_uids = metadata
            .get("ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let selectable = resource_fields_of(&gvr.group, &gvr.resource);
        let fields = selectable
            .selectable_labels()
            .map(|label| (label, selectable.value(&value, label).unwrap_or_default()))
            .collect();
        let json = serde_json::to_vec(&value).map_err(|_| ObjectError::NotAnObject)?;
        let key: ObjectKey = object_key(&namespace, &name).into();
        let rv = resource_version.parse().unwrap_or(0);
        let (full_body, json_offset) =
            encode_envelope(gvr, &namespace, &name, &uid, &resource_version, &json);
        Ok(CachedObject {
            key,
            namespace,
            name,
            uid,
            resource_version,
            rv,
            labels,
            owner_uids,
            fields,
            full_body,
            json_offset,
            metadata_body: OnceLock::new(),
            gvr: gvr.clone(),
        })
    }

    /// The object's JSON text.
    pub fn json(&self) -> Bytes {
        self.full_body.slice(self.json_offset..)
    }

    /// The object as a meta.k8s.io/v1 PartialObjectMetadata, built on first use.
    pub fn metadata_json(&self) -> Bytes {
        let (body, offset) = self.metadata_envelope();
        body.slice(*offset..)
    }

    /// The encoded envelope (every WatchEvent field but the type) for a projection.
    pub fn body(&self, metadata_only: bool) -> Bytes {
        if metadata_only {
            self.metadata_envelope().0.clone()
        } else {
            self.full_body.clone()
        }
    }

    pub fn event(
        &self,
        event_type: rkcm_proto::v1::EventType,
        metadata_only: bool,
    ) -> SharedWatchEvent {
        SharedWatchEvent::new(event_type, self.body(metadata_only))
    }

    /// Bytes this object holds (for the memory figures).
    pub fn heap_bytes(&self) -> usize {
        self.full_body.len()
            + self.metadata_body.get().map_or(0, |(b, _)| b.len())
            + self.key.len()
            + self.namespace.len()
            + self.name.len()
            + self.uid.len()
            + self.resource_version.len()
            + self
                .labels
                .iter()
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>()
            + self.owner_uids.iter().map(|u| u.len() + 24).sum::<usize>()
            + self.fields.iter().map(|(_, v)| v.len() + 40).sum::<usize>()
            + std::mem::size_of::<Self>()
    }

    fn metadata_envelope(&self) -> &(Bytes, usize) {
        self.metadata_body.get_or_init(|| {
            let metadata = serde_json::from_slice::<Value>(&self.json())
                .ok()
                .and_then(|mut v| v.get_mut("metadata").map(Value::take))
                .unwrap_or(Value::Null);
            let partial = serde_json::json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
            });
            let json = serde_json::to_vec(&partial).unwrap_or_default();
            encode_envelope(
                &self.gvr,
                &self.namespace,
                &self.name,
                &self.uid,
                &self.resource_version,
                &json,
            )
        })
    }
}

pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Encodes the envelope and returns where the JSON starts in it (the JSON is the last
/// field, so it is the tail).
fn encode_envelope(
    gvr: &GroupVersionResource,
    namespace: &str,
    name: &str,
    uid: &str,
    resource_version: &str,
    json: &[u8],
) -> (Bytes, usize) {
    let body = SharedWatchEvent::encode_body(gvr, namespace, name, uid, resource_version, json);
    let offset = body.len() - json.len();
    (body, offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> Arc<GroupVersionResource> {
        Arc::new(GroupVersionResource {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
        })
    }

    #[test]
    fn strips_managed_fields_and_indexes_what_selectors_need() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "12",
                "labels": {"app": "web"},
                "ownerReferences": [{"uid": "rs-1", "kind": "ReplicaSet", "name": "rs", "apiVersion": "apps/v1"}],
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "node-1"},
            "status": {"phase": "Running"}
        });
        let object = CachedObject::from_value(&pods(), pod).unwrap();
        assert_eq!(&*object.key, "ns/p");
        assert_eq!(object.rv, 12);
        assert_eq!(object.owner_uids, vec!["rs-1"]);
        assert_eq!(object.labels.get("app").map(String::as_str), Some("web"));
        let json: Value = serde_json::from_slice(&object.json()).unwrap();
        assert!(json["metadata"].get("managedFields").is_none());
        assert_eq!(json["spec"]["nodeName"], "node-1");
        assert!(object
            .fields
            .contains(&("spec.nodeName", "node-1".to_string())));
        assert!(object
            .fields
            .contains(&("status.phase", "Running".to_string())));
        let meta: Value = serde_json::from_slice(&object.metadata_json()).unwrap();
        assert_eq!(meta["kind"], "PartialObjectMetadata");
        assert_eq!(meta["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(meta["metadata"]["uid"], "u1");
        assert!(meta.get("spec").is_none());
    }

    #[test]
    fn rejects_objects_without_name_or_resource_version() {
        assert!(CachedObject::from_value(&pods(), json!({"metadata": {}})).is_err());
        assert!(CachedObject::from_value(&pods(), json!({"metadata": {"name": "x"}})).is_err());
        assert!(CachedObject::from_value(&pods(), json!([1])).is_err());
    }
}

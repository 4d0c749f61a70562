//! One cached object, held compactly: the envelope every Watch subscriber receives (its
//! JSON, managedFields removed, encoded once), plus what the cache's indexes and the
//! selectors read, extracted when the object arrives from the API server.
//!
//! The object's bytes live once, in the envelope: its namespace, name, uid and
//! resourceVersion are fields of it and are read back from it as slices, and the JSON is
//! its tail. Labels, owner uids and the values of the resource's selectable fields are
//! packed into one string with their boundaries beside it (two allocations, whatever the
//! number of labels). The metadata-only form (a `PartialObjectMetadata`) is not kept: the
//! span of `metadata` inside the JSON is recorded, and the envelope of the metadata form
//! is assembled from the full one's head and that span when a METADATA subscriber is sent
//! the object (copies, no JSON parsing).

use std::ops::Range;
use std::sync::Arc;

use bytes::{BufMut, Bytes};
use prost::encoding::{self, WireType};
use rkcm_gocompat::fields::{resource_fields_of, ResourceFields};
use rkcm_proto::v1::GroupVersionResource;
use rkcm_proto::SharedWatchEvent;
use serde_json::{Map, Value};

use crate::projection::FieldPaths;

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
    #[error("object is too large to cache ({0} bytes)")]
    TooLarge(usize),
}

/// The JSON that precedes an object's `metadata` in its metadata-only form.
const PARTIAL_HEAD: &[u8] =
    br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;

/// Envelope field numbers (see `WatchEvent` in informer.proto).
const NAMESPACE_FIELD: u32 = 3;
const NAME_FIELD: u32 = 4;
const UID_FIELD: u32 = 5;
const RESOURCE_VERSION_FIELD: u32 = 6;
const OBJECT_FIELD: u32 = 7;

/// A byte range of the envelope, as u32s (an object is far below 4 GiB: the API server
/// refuses requests above 3 MiB).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn of(range: Range<usize>) -> Result<Span, ObjectError> {
        let too_large = |_| ObjectError::TooLarge(range.end);
        Ok(Span {
            start: u32::try_from(range.start).map_err(too_large)?,
            end: u32::try_from(range.end).map_err(too_large)?,
        })
    }

    fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

pub struct CachedObject {
    pub key: ObjectKey,
    /// resourceVersion as a number when it is one (it is on etcd-backed API servers);
    /// 0 otherwise, which disables resume for the resource.
    pub rv: u64,
    /// Fields 2..=7 of the WatchEvent envelope, object included.
    envelope: Bytes,
    namespace: Span,
    name: Span,
    uid: Span,
    resource_version: Span,
    /// Where field 7 (the object) starts: everything before it is the head shared by
    /// both forms of the envelope.
    head_len: u32,
    /// The JSON text (the envelope's tail).
    json: Span,
    /// `metadata`'s value, inside the JSON (envelope offsets).
    metadata: Span,
    /// Label keys and values (alternating), then owner uids, then the values of the
    /// resource's selectable fields in `selectable`'s order, end to end.
    packed: Box<str>,
    /// Where each string of `packed` ends.
    ends: Box<[u32]>,
    label_count: u32,
    owner_count: u32,
    selectable: &'static ResourceFields,
}

impl CachedObject {
    /// Builds the cached form of an object received from the API server.
    pub fn from_value(
        gvr: &Arc<GroupVersionResource>,
        mut value: Value,
    ) -> Result<Self, ObjectError> {
        value
            .as_object_mut()
            .ok_or(ObjectError::NotAnObject)?
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or(ObjectError::NoName)?
            .remove("managedFields");
        let map = value.as_object().ok_or(ObjectError::NotAnObject)?;
        let metadata = map
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or(ObjectError::NoName)?;
        let text = |k: &str| metadata.get(k).and_then(Value::as_str).unwrap_or_default();
        let (name, namespace) = (text("name"), text("namespace"));
        let (uid, resource_version) = (text("uid"), text("resourceVersion"));
        if name.is_empty() {
            return Err(ObjectError::NoName);
        }
        if resource_version.is_empty() {
            return Err(ObjectError::NoResourceVersion(name.to_string()));
        }
        let selectable = resource_fields_of(&gvr.group, &gvr.resource);
        let mut packer = Packer::default();
        let mut label_count = 0;
        if let Some(labels) = metadata.get("labels").and_then(Value::as_object) {
            for (k, v) in labels {
                packer.push(k);
                packer.push(v.as_str().unwrap_or_default());
                label_count += 1;
            }
        }
        let mut owner_count = 0;
        let owners = metadata.get("ownerReferences").and_then(Value::as_array);
        for uid in owners.into_iter().flatten().filter_map(|r| r.get("uid")) {
            if let Some(uid) = uid.as_str() {
                packer.push(uid);
                owner_count += 1;
            }
        }
        let key: ObjectKey = object_key(namespace, name).into();
        let rv = resource_version.parse().unwrap_or(0);
        let (json, metadata_range) = to_json(map)?;
        let body =
            SharedWatchEvent::encode_body(gvr, namespace, name, uid, resource_version, &json);
        drop(json);
        for label in selectable.selectable_labels() {
            packer.push(&selectable.value(&value, label).unwrap_or_default());
        }
        let fields = envelope_fields(&body);
        let span = |tag: u32| fields.iter().find(|f| f.0 == tag).map(|f| f.2);
        let (head_len, json) = match fields.iter().find(|f| f.0 == OBJECT_FIELD) {
            Some(&(_, key_start, span)) => (key_start, span),
            None => (Span::of(body.len()..body.len())?.start, Span::default()),
        };
        let metadata = Span::of(
            json.start as usize + metadata_range.start..json.start as usize + metadata_range.end,
        )?;
        let (packed, ends) = packer.finish()?;
        Ok(CachedObject {
            key,
            rv,
            namespace: span(NAMESPACE_FIELD).unwrap_or_default(),
            name: span(NAME_FIELD).unwrap_or_default(),
            uid: span(UID_FIELD).unwrap_or_default(),
            resource_version: span(RESOURCE_VERSION_FIELD).unwrap_or_default(),
            head_len,
            json,
            metadata,
            envelope: body,
            packed,
            ends,
            label_count,
            owner_count,
            selectable,
        })
    }

    fn text(&self, span: Span) -> &str {
        std::str::from_utf8(&self.envelope[span.range()]).unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.text(self.namespace)
    }

    pub fn name(&self) -> &str {
        self.text(self.name)
    }

    pub fn uid(&self) -> &str {
        self.text(self.uid)
    }

    pub fn resource_version(&self) -> &str {
        self.text(self.resource_version)
    }

    /// The `i`th packed string.
    fn packed(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p] as usize);
        self.packed
            .get(start..self.ends[i] as usize)
            .unwrap_or_default()
    }

    /// The labels, in the object's order.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        (0..self.label_count as usize).map(|i| (self.packed(2 * i), self.packed(2 * i + 1)))
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The uids of the object's owner references.
    pub fn owner_uids(&self) -> impl Iterator<Item = &str> + '_ {
        let first = 2 * self.label_count as usize;
        (first..first + self.owner_count as usize).map(|i| self.packed(i))
    }

    /// The value of a selectable field label of the resource (canonical label; `None` for
    /// a label the resource does not select on).
    pub fn field(&self, label: &str) -> Option<&str> {
        let first = 2 * self.label_count as usize + self.owner_count as usize;
        let position = self
            .selectable
            .selectable_labels()
            .position(|l| l == label)?;
        Some(self.packed(first + position))
    }

    /// The object's JSON text.
    pub fn json(&self) -> Bytes {
        self.envelope.slice(self.json.range())
    }

    /// The object as a meta.k8s.io/v1 PartialObjectMetadata.
    pub fn metadata_json(&self) -> Bytes {
        let metadata = &self.envelope[self.metadata.range()];
        let mut json = Vec::with_capacity(PARTIAL_HEAD.len() + metadata.len() + 1);
        json.extend_from_slice(PARTIAL_HEAD);
        json.extend_from_slice(metadata);
        json.push(b'}');
        Bytes::from(json)
    }

    /// The object's JSON with only the fields `paths` keeps.
    pub fn projected_json(&self, paths: &FieldPaths) -> Bytes {
        let Ok(mut value) = serde_json::from_slice::<Value>(&self.envelope[self.json.range()])
        else {
            return self.json();
        };
        paths.apply(&mut value);
        serde_json::to_vec(&value).map_or_else(|_| self.json(), Bytes::from)
    }

    /// The envelope of the object with only the fields `paths` keeps.
    pub fn projected_body(&self, paths: &FieldPaths) -> Bytes {
        self.body_with(&[&self.projected_json(paths)])
    }

    /// The encoded envelope (every WatchEvent field but the type) for a projection: the
    /// shared one, or the metadata-only one assembled for this send.
    pub fn body(&self, metadata_only: bool) -> Bytes {
        if !metadata_only {
            return self.envelope.clone();
        }
        let metadata = &self.envelope[self.metadata.range()];
        self.body_with(&[PARTIAL_HEAD, metadata, b"}"])
    }

    /// This object's envelope head (resource, namespace, name, uid, resourceVersion) with
    /// `json`, given in parts, as the object.
    fn body_with(&self, json: &[&[u8]]) -> Bytes {
        let head = &self.envelope[..self.head_len as usize];
        let json_len: usize = json.iter().map(|part| part.len()).sum();
        let mut body = Vec::with_capacity(head.len() + 16 + json_len);
        body.extend_from_slice(head);
        encoding::encode_key(OBJECT_FIELD, WireType::LengthDelimited, &mut body);
        encoding::encode_varint(json_len as u64, &mut body);
        for part in json {
            body.put_slice(part);
        }
        Bytes::from(body)
    }

    pub fn event(
        &self,
        event_type: rkcm_proto::v1::EventType,
        metadata_only: bool,
    ) -> SharedWatchEvent {
        SharedWatchEvent::new(event_type, self.body(metadata_only))
    }

    /// Bytes this object holds (for the memory figures): its struct inside the `Arc`, the
    /// key, the envelope (and the `Bytes` header shared by its clones), the packed strings.
    pub fn heap_bytes(&self) -> usize {
        const ARC_COUNTS: usize = 2 * std::mem::size_of::<usize>();
        const BYTES_SHARED: usize = 3 * std::mem::size_of::<usize>();
        ARC_COUNTS
            + std::mem::size_of::<Self>()
            + ARC_COUNTS
            + self.key.len()
            + self.envelope.len()
            + BYTES_SHARED
            + self.packed.len()
            + std::mem::size_of_val(&*self.ends)
    }
}

impl std::fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedObject")
            .field("key", &self.key)
            .field("uid", &self.uid())
            .field("resource_version", &self.resource_version())
            .field("bytes", &self.envelope.len())
            .finish_non_exhaustive()
    }
}

pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Strings end to end, with where each ends.
#[derive(Default)]
struct Packer {
    text: String,
    ends: Vec<usize>,
}

impl Packer {
    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    fn finish(self) -> Result<(Box<str>, Box<[u32]>), ObjectError> {
        let ends = self
            .ends
            .iter()
            .map(|&e| u32::try_from(e).map_err(|_| ObjectError::TooLarge(e)))
            .collect::<Result<_, _>>()?;
        Ok((self.text.into_boxed_str(), ends))
    }
}

/// The object's JSON as `serde_json::to_vec` writes it, and where `metadata`'s value
/// lies in it.
fn to_json(map: &Map<String, Value>) -> Result<(Vec<u8>, Range<usize>), ObjectError> {
    let mut out = Vec::with_capacity(1024);
    let mut metadata = 0..0;
    out.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, key).map_err(|_| ObjectError::NotAnObject)?;
        out.push(b':');
        let start = out.len();
        serde_json::to_writer(&mut out, value).map_err(|_| ObjectError::NotAnObject)?;
        if key == "metadata" {
            metadata = start..out.len();
        }
    }
    out.push(b'}');
    Ok((out, metadata))
}

/// The length-delimited fields of an encoded envelope: (field number, where its key
/// starts, where its value lies). Stops at anything else (the envelope has nothing else).
fn envelope_fields(body: &[u8]) -> Vec<(u32, u32, Span)> {
    let mut fields = Vec::with_capacity(6);
    let mut rest = body;
    while !rest.is_empty() {
        let key_start = body.len() - rest.len();
        let Ok((tag, WireType::LengthDelimited)) = encoding::decode_key(&mut rest) else {
            break;
        };
        let Ok(len) = encoding::decode_varint(&mut rest) else {
            break;
        };
        let start = body.len() - rest.len();
        let Some(end) = usize::try_from(len).ok().and_then(|l| start.checked_add(l)) else {
            break;
        };
        if end > body.len() {
            break;
        }
        let (Ok(key_start), Ok(span)) = (u32::try_from(key_start), Span::of(start..end)) else {
            break;
        };
        fields.push((tag, key_start, span));
        rest = &body[end..];
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use rkcm_proto::v1::{EventType, WatchEvent};
    use serde_json::json;

    fn pods() -> Arc<GroupVersionResource> {
        Arc::new(GroupVersionResource {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
        })
    }

    fn pod() -> Value {
        json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "12",
                "labels": {"app": "web", "tier": "", "é": "ü"},
                "ownerReferences": [{"uid": "rs-1", "kind": "ReplicaSet", "name": "rs", "apiVersion": "apps/v1"},
                    {"uid": "rs-2", "kind": "ReplicaSet", "name": "rs2", "apiVersion": "apps/v1"}],
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x \"q\" <>&"}]},
            "status": {"phase": "Running"}
        })
    }

    #[test]
    fn strips_managed_fields_and_indexes_what_selectors_need() {
        let object = CachedObject::from_value(&pods(), pod()).unwrap();
        assert_eq!(&*object.key, "ns/p");
        assert_eq!(
            (
                object.namespace(),
                object.name(),
                object.uid(),
                object.resource_version()
            ),
            ("ns", "p", "u1", "12")
        );
        assert_eq!(object.rv, 12);
        assert_eq!(
            object.owner_uids().collect::<Vec<_>>(),
            vec!["rs-1", "rs-2"]
        );
        assert_eq!(
            object.labels().collect::<Vec<_>>(),
            vec![("app", "web"), ("tier", ""), ("é", "ü")]
        );
        assert_eq!(object.label("tier"), Some(""));
        assert_eq!(object.label("x"), None);
        let json: Value = serde_json::from_slice(&object.json()).unwrap();
        assert!(json["metadata"].get("managedFields").is_none());
        assert_eq!(json["spec"]["nodeName"], "node-1");
        assert_eq!(object.field("spec.nodeName"), Some("node-1"));
        assert_eq!(object.field("status.phase"), Some("Running"));
        assert_eq!(object.field("spec.hostNetwork"), Some("false"));
        assert_eq!(object.field("spec.nope"), None);
        let meta: Value = serde_json::from_slice(&object.metadata_json()).unwrap();
        assert_eq!(meta["kind"], "PartialObjectMetadata");
        assert_eq!(meta["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(meta["metadata"]["uid"], "u1");
        assert!(meta.get("spec").is_none());
    }

    /// The JSON is byte for byte what serde_json writes, and both envelopes decode as the
    /// WatchEvent a client reads, the metadata one as the PartialObjectMetadata the
    /// API server would answer (the object's metadata, managedFields removed).
    #[test]
    fn both_envelopes_decode_as_watch_events() {
        let object = CachedObject::from_value(&pods(), pod()).unwrap();
        let mut stripped = pod();
        stripped["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(
            &object.json()[..],
            &serde_json::to_vec(&stripped).unwrap()[..]
        );
        let decode = |metadata_only: bool| {
            let event = object.event(EventType::Modified, metadata_only);
            WatchEvent::decode(&event.encode_to_vec()[..]).unwrap()
        };
        let full = decode(false);
        assert_eq!(full.r#type(), EventType::Modified);
        assert_eq!(full.resource, Some((*pods()).clone()));
        assert_eq!(
            (
                &*full.namespace,
                &*full.name,
                &*full.uid,
                &*full.resource_version
            ),
            ("ns", "p", "u1", "12")
        );
        assert_eq!(full.object.as_bytes(), &object.json()[..]);
        let meta = decode(true);
        assert_eq!(
            (
                meta.resource,
                meta.namespace,
                meta.name,
                meta.uid,
                meta.resource_version
            ),
            (
                full.resource,
                full.namespace,
                full.name,
                full.uid,
                full.resource_version
            )
        );
        let expected = json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": stripped["metadata"],
        });
        assert_eq!(
            meta.object.as_bytes(),
            &serde_json::to_vec(&expected).unwrap()[..]
        );
        assert_eq!(meta.object.as_bytes(), &object.metadata_json()[..]);
    }

    /// Cluster-scoped, no uid, labels or owners, a resource with no selectable fields,
    /// and a metadata-form envelope past 127 bytes (a two-byte length).
    #[test]
    fn sparse_and_large_objects() {
        let nodes = Arc::new(GroupVersionResource {
            group: String::new(),
            version: "v1".into(),
            resource: "configmaps".into(),
        });
        let long = "x".repeat(300);
        let object = CachedObject::from_value(
            &nodes,
            json!({"metadata": {"name": "n", "resourceVersion": "abc", "annotations": {"a": long}}}),
        )
        .unwrap();
        assert_eq!(&*object.key, "n");
        assert_eq!((object.namespace(), object.uid(), object.rv), ("", "", 0));
        assert_eq!(object.resource_version(), "abc");
        assert_eq!(object.labels().count() + object.owner_uids().count(), 0);
        let meta =
            WatchEvent::decode(&object.event(EventType::Added, true).encode_to_vec()[..]).unwrap();
        let meta: Value = serde_json::from_str(&meta.object).unwrap();
        assert_eq!(meta["metadata"]["annotations"]["a"], json!(long));
        assert!(object.heap_bytes() > object.json().len());
    }

    #[test]
    fn rejects_objects_without_name_or_resource_version() {
        assert!(CachedObject::from_value(&pods(), json!({"metadata": {}})).is_err());
        assert!(CachedObject::from_value(&pods(), json!({"metadata": {"name": "x"}})).is_err());
        assert!(CachedObject::from_value(&pods(), json!([1])).is_err());
    }
}

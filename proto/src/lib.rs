//! rkcm's wire contract: the `rkcm.informer.v1` gRPC service that the informer-server
//! serves and controller workers (and grpcurl) consume.
//!
//! `v1` holds the messages and the client; `server` holds the server trait, whose `Watch`
//! yields [`SharedWatchEvent`]: the same bytes on the wire as `v1::WatchEvent`, but built
//! from an envelope encoded once per event and shared by every subscriber, so a fan-out to
//! fifty subscribers serialises each object once, not fifty times.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::encoding::{self, DecodeContext, WireType};

/// Messages and the client of `rkcm.informer.v1`.
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/types/rkcm.informer.v1.rs"));
}

/// The server trait of `rkcm.informer.v1.Informer`.
pub mod server {
    include!(concat!(env!("OUT_DIR"), "/server/rkcm.informer.v1.rs"));
}

/// The encoded `FileDescriptorSet` of informer.proto, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/informer_descriptor.bin"));

/// A `WatchEvent` as the server sends it: the event type, plus the rest of the message
/// (resource, namespace, name, uid, resource_version, object) already encoded.
///
/// Encoding only: clients decode the same bytes as [`v1::WatchEvent`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharedWatchEvent {
    pub event_type: v1::EventType,
    /// Fields 2..=7 of `WatchEvent`, encoded (see [`SharedWatchEvent::encode_body`]).
    pub body: Bytes,
}

impl SharedWatchEvent {
    pub fn new(event_type: v1::EventType, body: Bytes) -> Self {
        SharedWatchEvent { event_type, body }
    }

    /// Encodes every field of a `WatchEvent` but its type; `object` is the JSON text.
    pub fn encode_body(
        resource: &v1::GroupVersionResource,
        namespace: &str,
        name: &str,
        uid: &str,
        resource_version: &str,
        object: &[u8],
    ) -> Bytes {
        // Exactly the encoded length: the cache keeps these bytes for the object's life.
        let field_len = |tag: u32, len: usize| {
            encoding::key_len(tag) + encoding::encoded_len_varint(len as u64) + len
        };
        let strings = [namespace, name, uid, resource_version]
            .iter()
            .zip(3..)
            .filter(|(value, _)| !value.is_empty())
            .map(|(value, tag)| field_len(tag, value.len()))
            .sum::<usize>();
        let capacity = encoding::message::encoded_len(2, resource)
            + strings
            + if object.is_empty() {
                0
            } else {
                field_len(7, object.len())
            };
        let mut buf = BytesMut::with_capacity(capacity);
        encoding::message::encode(2, resource, &mut buf);
        for (tag, value) in [(3, namespace), (4, name), (5, uid), (6, resource_version)] {
            if !value.is_empty() {
                encode_str(tag, value.as_bytes(), &mut buf);
            }
        }
        if !object.is_empty() {
            encode_str(7, object, &mut buf);
        }
        debug_assert_eq!(buf.len(), capacity);
        buf.freeze()
    }
}

/// A `string` field: the same wire form as `bytes` (length-delimited); the caller
/// guarantees UTF-8.
fn encode_str(tag: u32, value: &[u8], buf: &mut impl BufMut) {
    encoding::encode_key(tag, WireType::LengthDelimited, buf);
    encoding::encode_varint(value.len() as u64, buf);
    buf.put_slice(value);
}

impl prost::Message for SharedWatchEvent {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        let event_type = self.event_type as i32;
        if event_type != 0 {
            encoding::int32::encode(1, &event_type, buf);
        }
        buf.put_slice(&self.body);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        if tag == 1 {
            let mut value = 0i32;
            encoding::int32::merge(wire_type, &mut value, buf, ctx)?;
            self.event_type = v1::EventType::try_from(value).unwrap_or_default();
            Ok(())
        } else {
            // Never decoded by rkcm (clients read `v1::WatchEvent`); keep the field anyway
            // by re-encoding what was read.
            let mut field = Vec::new();
            match wire_type {
                WireType::LengthDelimited => {
                    let mut value = Vec::<u8>::new();
                    encoding::bytes::merge(wire_type, &mut value, buf, ctx)?;
                    encode_str(tag, &value, &mut field);
                }
                _ => encoding::skip_field(wire_type, tag, buf, ctx)?,
            }
            let mut body = BytesMut::from(&self.body[..]);
            body.extend_from_slice(&field);
            self.body = body.freeze();
            Ok(())
        }
    }

    fn encoded_len(&self) -> usize {
        let event_type = self.event_type as i32;
        let type_len = if event_type != 0 {
            encoding::int32::encoded_len(1, &event_type)
        } else {
            0
        };
        type_len + self.body.len()
    }

    fn clear(&mut self) {
        *self = SharedWatchEvent::default();
    }
}

impl v1::GroupVersionResource {
    /// `apps/v1/deployments`, or `v1/pods` for the core group.
    pub fn path(&self) -> String {
        if self.group.is_empty() {
            format!("{}/{}", self.version, self.resource)
        } else {
            format!("{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

/// The shard, of `count`, that holds `key` (see [`v1::Shard`]): FNV-1a (64-bit) of the
/// key modulo `count`, stable across processes and versions, so the informer-server's
/// filter and every worker compute the same split.
pub fn shard_of(key: &str, count: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(count.max(1))) as u32
}

/// An object's shard key: its namespace, or its name when it is cluster-scoped (so a
/// Namespace falls in the same shard as its content).
pub fn shard_key<'a>(namespace: &'a str, name: &'a str) -> &'a str {
    if namespace.is_empty() {
        name
    } else {
        namespace
    }
}

impl v1::Shard {
    /// Whether the object `namespace/name` (`namespace` empty when cluster-scoped) falls
    /// in this shard; every object does when `count` is 0 or 1 (no sharding).
    pub fn holds(&self, namespace: &str, name: &str) -> bool {
        self.count <= 1 || shard_of(shard_key(namespace, name), self.count) == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn every_object_falls_in_exactly_one_shard() {
        for count in [2, 3] {
            for (namespace, name) in [("ns-1", "a"), ("ns-2", "a"), ("", "ns-1"), ("", "pv-9")] {
                let holders = (0..count)
                    .filter(|&index| v1::Shard { index, count }.holds(namespace, name))
                    .count();
                assert_eq!(holders, 1, "{namespace}/{name} in {count} shards");
            }
        }
        // A Namespace goes with its content; no sharding holds everything.
        let shard = v1::Shard { index: 1, count: 2 };
        assert_eq!(shard.holds("", "ns-1"), shard.holds("ns-1", "anything"));
        assert!(v1::Shard { index: 0, count: 0 }.holds("ns-1", "a"));
        assert!(v1::Shard { index: 0, count: 1 }.holds("", "a"));
        assert_eq!(shard_of("kube-system", 1), 0);
    }

    #[test]
    fn a_shared_event_decodes_as_the_generated_message() {
        let gvr = v1::GroupVersionResource {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
        };
        let object = br#"{"kind":"Deployment","metadata":{"name":"web"}}"#;
        let body = SharedWatchEvent::encode_body(&gvr, "default", "web", "u-1", "42", object);
        for event_type in [v1::EventType::Added, v1::EventType::Deleted] {
            let shared = SharedWatchEvent::new(event_type, body.clone());
            let bytes = shared.encode_to_vec();
            assert_eq!(bytes.len(), shared.encoded_len());
            let decoded = v1::WatchEvent::decode(&bytes[..]).expect("decodes");
            assert_eq!(decoded.r#type(), event_type);
            assert_eq!(decoded.resource.as_ref(), Some(&gvr));
            assert_eq!(decoded.namespace, "default");
            assert_eq!(decoded.name, "web");
            assert_eq!(decoded.uid, "u-1");
            assert_eq!(decoded.resource_version, "42");
            assert_eq!(decoded.object.as_bytes(), object);
        }
    }

    #[test]
    fn empty_fields_are_left_out_as_proto3_does() {
        let gvr = v1::GroupVersionResource {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
        };
        let body = SharedWatchEvent::encode_body(&gvr, "", "", "", "7", b"");
        let shared = SharedWatchEvent::new(v1::EventType::Bookmark, body);
        let generated = v1::WatchEvent {
            r#type: v1::EventType::Bookmark as i32,
            resource: Some(gvr.clone()),
            resource_version: "7".into(),
            ..Default::default()
        };
        assert_eq!(shared.encode_to_vec(), generated.encode_to_vec());
        assert_eq!(gvr.path(), "v1/pods");
    }
}

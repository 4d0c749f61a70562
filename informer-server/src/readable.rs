//! The readable rendering of objects (`readable: true` in a List, Get or Watch request):
//! each object as a `google.protobuf.Struct`, which grpcurl prints as nested JSON, in
//! place of the JSON text a program reads.
//!
//! Rendered per request and per event, only for the requests that ask: the cache and the
//! encoded envelope every other subscriber shares stay as they are.

use prost::Message;
use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value as ProtoValue};
use rkcm_proto::v1::WatchEvent;
use rkcm_proto::SharedWatchEvent;
use serde_json::Value;

/// A JSON value as a protobuf `Value` (numbers become doubles, as in proto3 JSON).
fn proto_value(value: Value) -> ProtoValue {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(items) => Kind::ListValue(ListValue {
            values: items.into_iter().map(proto_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(proto_struct(map)),
    };
    ProtoValue { kind: Some(kind) }
}

fn proto_struct(map: serde_json::Map<String, Value>) -> Struct {
    Struct {
        fields: map.into_iter().map(|(k, v)| (k, proto_value(v))).collect(),
    }
}

/// The object whose JSON text is `json` as a `Struct`; None when the text is not a JSON
/// object (the cache holds only objects, so never in practice).
pub fn object_struct(json: &[u8]) -> Option<Struct> {
    match serde_json::from_slice::<Value>(json).ok()? {
        Value::Object(map) => Some(proto_struct(map)),
        _ => None,
    }
}

/// `event` with its object moved from the JSON text (`object`) to `readable_object`.
/// Events without an object (SYNCED, RESET, BOOKMARK) come back unchanged.
pub fn readable_event(event: SharedWatchEvent) -> SharedWatchEvent {
    // The body is fields 2..=7 of a WatchEvent: it decodes as one, with no type.
    let Ok(mut decoded) = WatchEvent::decode(&event.body[..]) else {
        return event;
    };
    if decoded.object.is_empty() {
        return event;
    }
    let Some(object) = object_struct(decoded.object.as_bytes()) else {
        return event;
    };
    decoded.object.clear();
    decoded.readable_object = Some(object);
    SharedWatchEvent::new(event.event_type, decoded.encode_to_vec().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rkcm_proto::v1::{EventType, GroupVersionResource};

    fn string(s: &str) -> ProtoValue {
        ProtoValue {
            kind: Some(Kind::StringValue(s.into())),
        }
    }

    #[test]
    fn json_maps_onto_struct_values() {
        let object = object_struct(
            br#"{"kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}},"spec":{"replicas":3,"paused":false,"x":null,"ports":[80,"http"]}}"#,
        )
        .expect("an object");
        assert_eq!(object.fields["kind"], string("Pod"));
        let Some(Kind::StructValue(metadata)) = &object.fields["metadata"].kind else {
            panic!("metadata is a struct: {object:?}");
        };
        assert_eq!(metadata.fields["name"], string("p"));
        let Some(Kind::StructValue(spec)) = &object.fields["spec"].kind else {
            panic!("spec is a struct");
        };
        assert_eq!(spec.fields["replicas"].kind, Some(Kind::NumberValue(3.0)));
        assert_eq!(spec.fields["paused"].kind, Some(Kind::BoolValue(false)));
        assert_eq!(spec.fields["x"].kind, Some(Kind::NullValue(0)));
        assert_eq!(
            spec.fields["ports"].kind,
            Some(Kind::ListValue(ListValue {
                values: vec![
                    ProtoValue {
                        kind: Some(Kind::NumberValue(80.0))
                    },
                    string("http")
                ]
            }))
        );
    }

    #[test]
    fn only_json_objects_render() {
        for text in [&b"[1]"[..], b"\"text\"", b"not json", b""] {
            assert_eq!(object_struct(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_readable_event_carries_the_object_as_a_struct_alone() {
        let gvr = GroupVersionResource {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
        };
        let json = br#"{"kind":"Pod","metadata":{"name":"web"}}"#;
        let body = SharedWatchEvent::encode_body(&gvr, "default", "web", "u-1", "42", json);
        let shared = SharedWatchEvent::new(EventType::Modified, body);
        let decoded = WatchEvent::decode(&readable_event(shared).encode_to_vec()[..])
            .expect("decodes as a WatchEvent");
        assert_eq!(decoded.r#type(), EventType::Modified);
        assert_eq!(decoded.resource, Some(gvr.clone()));
        assert_eq!(
            (
                decoded.namespace.as_str(),
                decoded.name.as_str(),
                decoded.uid.as_str(),
                decoded.resource_version.as_str()
            ),
            ("default", "web", "u-1", "42")
        );
        assert_eq!(decoded.object, "");
        assert_eq!(decoded.readable_object, object_struct(json));

        // Markers carry no object and pass through as they are.
        let marker = SharedWatchEvent::new(
            EventType::Synced,
            SharedWatchEvent::encode_body(&gvr, "", "", "", "42", b""),
        );
        assert_eq!(readable_event(marker.clone()), marker);
    }
}

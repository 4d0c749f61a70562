//! Tests of field ownership.

use super::types::root;
use super::*;
use serde_json::json;

fn op(kind: &str, group: &str, apply: Option<(FieldSet, bool)>) -> Operation {
    Operation {
        manager: "m".into(),
        subresource: String::new(),
        api_version: if group.is_empty() {
            "v1".into()
        } else {
            format!("{group}/v1")
        },
        group: group.into(),
        kind: kind.into(),
        has_status: true,
        now: "2026-01-01T00:00:00Z".into(),
        apply,
    }
}

#[test]
fn create_owns_what_go_does_not_always_write() {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "labels": {"a": "b"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
            "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {},
                    "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}},
        "status": {}});
    op("Deployment", "apps", None).run(None, &mut d).unwrap();
    let mf = &d["metadata"]["managedFields"][0];
    assert_eq!(mf["manager"], "m");
    assert_eq!(mf["operation"], "Update");
    assert_eq!(
        mf["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {},
                "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}}, "f:type": {}},
                "f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {},
                        "f:name": {}, "f:resources": {},
                        "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}, "f:protocol": {}}}}}}}}})
    );
}

#[test]
fn updates_move_ownership_and_apply_conflicts() {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
        "data": {"k": "v"}});
    let config = to_field_set(&cm, root("", "ConfigMap"));
    let mut o = op("ConfigMap", "", Some((config, false)));
    o.manager = "me".into();
    o.has_status = false;
    o.run(None, &mut cm).unwrap();
    assert_eq!(
        cm["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:k": {}}})
    );
    assert_eq!(cm["metadata"]["managedFields"][0]["operation"], "Apply");
    // Another applier setting the same field to another value conflicts.
    let mut next = cm.clone();
    next["data"]["k"] = json!("w");
    let config = to_field_set(&json!({"data": {"k": "w"}}), root("", "ConfigMap"));
    let mut other = op("ConfigMap", "", Some((config.clone(), false)));
    other.manager = "other".into();
    other.has_status = false;
    let err = other.run(Some(&cm), &mut next.clone()).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"me\": .data.k"
    );
    // Forced, it takes the field.
    other.apply = Some((config, true));
    other.run(Some(&cm), &mut next).unwrap();
    let mf = next["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0]["manager"], "other");
    // An update by a third manager takes it again, without a conflict.
    let mut third = next.clone();
    third["data"]["k"] = json!("x");
    let mut u = op("ConfigMap", "", None);
    u.has_status = false;
    u.run(Some(&next), &mut third).unwrap();
    let mf = third["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0]["manager"], "m");
    assert_eq!(mf[0]["operation"], "Update");
}

#[test]
fn fields_v1_round_trips_and_paths_print() {
    let v = json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a/b\"": {}}},
        "f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}}}});
    let s = FieldSet::from_fields_v1(&v).unwrap();
    assert_eq!(s.to_fields_v1(), v);
    let paths: Vec<String> = s.paths().iter().map(|p| display_path(p)).collect();
    assert!(paths.contains(&".spec.ports[port=80,protocol=\"TCP\"].port".to_string()));
    assert!(paths.contains(&".metadata.finalizers[=\"a/b\"]".to_string()));
    assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
}

#[test]
fn status_and_scale_entries() {
    let old = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}, "status": {}});
    let mut new = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1},
        "status": {"replicas": 1}});
    let mut s = op("Deployment", "apps", None);
    s.subresource = "status".into();
    s.run(Some(&old), &mut new).unwrap();
    let mf = &new["metadata"]["managedFields"][0];
    assert_eq!(mf["subresource"], "status");
    assert_eq!(mf["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
    s.run_scale(&mut new, &["spec", "replicas"]);
    let mf = new["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf[0]["subresource"], "scale");
    assert!(mf[0].get("time").is_none());
}

#[test]
fn removing_paths() {
    let mut v = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "TCP"}]},
        "metadata": {"finalizers": ["a", "b"]}});
    assert!(remove_path(
        &mut v,
        &[
            Pe::Field("spec".into()),
            Pe::Field("ports".into()),
            Pe::Key(vec![
                ("port".into(), "81".into()),
                ("protocol".into(), "\"TCP\"".into())
            ])
        ]
    ));
    assert!(remove_path(
        &mut v,
        &[
            Pe::Field("metadata".into()),
            Pe::Field("finalizers".into()),
            Pe::Value("\"a\"".into())
        ]
    ));
    assert_eq!(
        v,
        json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}]}, "metadata": {"finalizers": ["b"]}})
    );
}

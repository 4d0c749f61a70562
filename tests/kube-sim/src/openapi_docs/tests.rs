use super::*;
use crate::api::Sim;
use crate::resources::Registry;

fn rendered_builtin() -> Rendered {
    Rendered::new(Catalog::build(&Registry::builtin(), |_| None))
}

fn header<'a>(r: &'a ApiResponse, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn body(r: &ApiResponse) -> Bytes {
    match &r.body {
        Body::Raw(b, _) => b.clone(),
        _ => Bytes::new(),
    }
}

#[test]
fn the_etag_is_upper_case_sha512() {
    assert_eq!(
        etag_of(b""),
        "CF83E1357EEFB8BDF1542850D66D8007D620E4050B5715DC83F4A921D36CE9CE47D0D13C5D85F2B0FF8318D2877EEC2F63B931BD47417A81A538327AF927DA3E"
    );
}

#[test]
fn accept_clauses_sort_by_q_then_specificity() {
    assert_eq!(
        accept_clauses("*/*;q=0.5, application/json, application/*"),
        vec![
            ("application".to_string(), "json".to_string()),
            ("application".into(), "*".into()),
            ("*".into(), "*".into())
        ]
    );
    assert_eq!(accept_clauses(""), vec![("*".to_string(), "*".to_string())]);
    assert!(accept_clauses("application/json;q=0").is_empty());
}

#[test]
fn negotiation_picks_the_first_served_format() {
    let v2 = [
        ("json", Format::Json),
        (V2_PROTOBUF_DEPRECATED, Format::Protobuf),
        (V2_PROTOBUF, Format::Protobuf),
    ];
    for (accept, want) in [
        ("", Some(Format::Json)),
        ("application/json", Some(Format::Json)),
        (
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
            Some(Format::Protobuf),
        ),
        (
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json",
            Some(Format::Protobuf),
        ),
        ("text/html", None),
        ("application/yaml", None),
    ] {
        assert_eq!(negotiate(accept, &v2), want, "{accept}");
    }
    let v3 = [("json", Format::Json)];
    assert_eq!(
        negotiate(
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
            &v3
        ),
        None
    );
    assert_eq!(
        negotiate(
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf, application/json",
            &v3
        ),
        Some(Format::Json)
    );
}

#[test]
fn the_index_lists_every_document_with_its_hash() {
    let r = rendered_builtin();
    let index: Value = serde_json::from_slice(&r.index).unwrap_or_default();
    for key in [
        "api",
        "api/v1",
        "apis",
        "apis/apps",
        "apis/apps/v1",
        "version",
    ] {
        let url = index["paths"][key]["serverRelativeURL"]
            .as_str()
            .unwrap_or_default();
        let etag = r.v3.get(key).map(|d| d.etag.clone()).unwrap_or_default();
        assert_eq!(url, format!("/openapi/v3/{key}?hash={etag}"), "{key}");
        assert_eq!(etag.len(), 128);
    }
    assert!(index["paths"].get("logs").is_none());
}

#[test]
fn documents_redirect_a_stale_hash_and_cache_a_current_one() {
    let r = rendered_builtin();
    let etag = r.v3["apis/apps/v1"].etag.clone();
    let stale = serve_v3(&r, "apis/apps/v1", Some("ABC"), "application/json", "");
    assert_eq!(stale.code, 301);
    assert_eq!(
        header(&stale, "Location"),
        Some(format!("/openapi/v3/apis/apps/v1?hash={etag}").as_str())
    );
    assert!(body(&stale).is_empty());
    let current = serve_v3(&r, "apis/apps/v1", Some(&etag), "", "");
    assert_eq!(current.code, 200);
    assert_eq!(header(&current, "Cache-Control"), Some("public, immutable"));
    assert_eq!(
        header(&current, "ETag"),
        Some(format!("\"{etag}\"").as_str())
    );
    let doc: Value = serde_json::from_slice(&body(&current)).unwrap_or_default();
    assert!(doc["components"]["schemas"]
        .get("io.k8s.api.apps.v1.Deployment")
        .is_some());
    let plain = serve_v3(&r, "apis/apps/v1", None, "application/json", "");
    assert_eq!(plain.code, 200);
    assert_eq!(header(&plain, "Cache-Control"), None);
    let again = serve_v3(&r, "apis/apps/v1", None, "", &format!("\"{etag}\""));
    assert_eq!(again.code, 304);
    assert!(body(&again).is_empty());
    assert_eq!(serve_v3(&r, "apis/nope/v1", None, "", "").code, 404);
    let pb_only = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
    assert_eq!(serve_v3(&r, "apis/apps/v1", None, pb_only, "").code, 406);
}

#[test]
fn the_v2_document_has_every_served_kind_and_refers_only_to_its_definitions() {
    let r = rendered_builtin();
    let (doc, pb) = r.v2();
    let v: Value = serde_json::from_slice(&doc.json).unwrap_or_default();
    assert_eq!(v["swagger"], json!("2.0"));
    let defs = v["definitions"].as_object().cloned().unwrap_or_default();
    for name in [
        "io.k8s.api.core.v1.ConfigMap",
        "io.k8s.api.apps.v1.Deployment",
        "io.k8s.api.core.v1.ConfigMapList",
    ] {
        assert!(defs.contains_key(name), "{name}");
    }
    let text = String::from_utf8_lossy(&doc.json).to_string();
    assert!(!text.contains("#/components/schemas/"));
    let mut refs = Vec::new();
    collect_refs(&v, &mut refs);
    for r in refs {
        let name = r.strip_prefix("#/definitions/").unwrap_or(&r);
        assert!(defs.contains_key(name), "{r} is not defined");
    }
    // Every array says what it holds (kube-openapi's v2 parser requires items).
    for (name, s) in &defs {
        assert_arrays_have_items(s, name);
    }
    assert!(pb.len() > 10_000);
    assert_eq!(&pb[..5], &[0x0a, 3, b'2', b'.', b'0']);
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                match (k.as_str(), c) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    ("properties", Value::Object(props)) => {
                        props.values().for_each(|p| collect_refs(p, out));
                    }
                    (k, _) if k.starts_with("x-") || k == "default" || k == "enum" => {}
                    _ => collect_refs(c, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_refs(c, out)),
        _ => {}
    }
}

/// Also: no `allOf`, no `nullable` (v2 has neither in upstream's output).
fn assert_arrays_have_items(s: &Value, at: &str) {
    let Value::Object(m) = s else { return };
    assert!(
        !m.contains_key("allOf") && !m.contains_key("nullable"),
        "{at}"
    );
    if m.get("type") == Some(&json!("array")) {
        assert!(m.contains_key("items"), "{at}: an array without items");
    }
    for (k, c) in m {
        match k.as_str() {
            "properties" => {
                for (p, ps) in c.as_object().into_iter().flatten() {
                    assert_arrays_have_items(ps, &format!("{at}.{p}"));
                }
            }
            "items" | "additionalProperties" => assert_arrays_have_items(c, at),
            _ => {}
        }
    }
}

#[test]
fn gated_group_versions_are_described_when_served() {
    let sim = Sim::new(100, "10.96.0.0/12");
    let none = Rendered::new(Catalog::build(&sim.registry, |_| None));
    assert!(!none.v3.contains_key("apis/networking.k8s.io/v1alpha1"));
    let keys = "networking.k8s.io/v1alpha1=true,internal.apiserver.k8s.io/v1alpha1=true,\
                resource.k8s.io/v1alpha2=true,admissionregistration.k8s.io/v1beta1=true";
    let apis = crate::gated_apis::GatedApis::parse(keys, "").unwrap_or_default();
    crate::gated_apis::register(&sim, &apis);
    let r = Rendered::new(Catalog::build(&sim.registry, |_| None));
    for (key, kind) in [
        (
            "apis/networking.k8s.io/v1alpha1",
            "io.k8s.api.networking.v1alpha1.ServiceCIDR",
        ),
        (
            "apis/admissionregistration.k8s.io/v1beta1",
            "io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicy",
        ),
        (
            "apis/resource.k8s.io/v1alpha2",
            "io.k8s.api.resource.v1alpha2.ResourceClaim",
        ),
        (
            "apis/internal.apiserver.k8s.io/v1alpha1",
            "io.k8s.api.apiserverinternal.v1alpha1.StorageVersion",
        ),
    ] {
        let doc: Value =
            r.v3.get(key)
                .map(|d| serde_json::from_slice(&d.json).unwrap_or_default())
                .unwrap_or_default();
        let schemas = doc["components"]["schemas"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(schemas.contains_key(kind), "{key}: no {kind}");
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        for r in refs {
            let name = r.strip_prefix("#/components/schemas/").unwrap_or(&r);
            assert!(
                schemas.contains_key(name),
                "{key}: {r} is not in the document"
            );
        }
    }
}

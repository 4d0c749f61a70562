//! The server's OpenAPI documents: what kubectl needs from `/openapi/v2` and `/openapi/v3`
//! (client-side validation of a `kind: List`, `kubectl explain`), the v3 index and its
//! per-group-version documents with their `?hash=` handling, and a CRD's schema published
//! under its group version.

use std::time::Duration;

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::{json, Value};

/// GET `path` with `accept` (and `If-None-Match` when given): status, headers, body.
async fn get(
    c: &TestCluster,
    path: &str,
    accept: &str,
    if_none_match: Option<&str>,
) -> (u16, http::HeaderMap, Vec<u8>) {
    let mut req = http::Request::get(path).header("accept", accept);
    if let Some(tag) = if_none_match {
        req = req.header("if-none-match", tag);
    }
    let req = req.body(kube::client::Body::empty()).unwrap();
    let resp = c.client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, headers, bytes.to_vec())
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

fn list_of_config_maps(ns: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: first\n    namespace: {ns}\n  data: {{a: \"1\"}}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: second\n    namespace: {ns}\n  data: {{b: \"2\"}}\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_a_list_validated_on_the_client_and_explains_fields() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("oapi").await.unwrap();
    let out = c
        .kubectl_stdin(&["apply", "-f", "-"], &list_of_config_maps(&ns, ""))
        .await
        .unwrap();
    assert!(
        out.contains("configmap/first created") && out.contains("configmap/second created"),
        "{out}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let second = cms.get("second").await.unwrap();
    assert_eq!(
        second.data.unwrap_or_default().get("b").map(String::as_str),
        Some("2")
    );

    // A List's items are validated on the client from /openapi/v2: an unknown field is refused
    // before anything is sent.
    let bad = format!(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: third\n    namespace: {ns}\n  bogus: 1\n"
    );
    let err = c
        .kubectl_stdin(&["apply", "-f", "-"], &bad)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field \"bogus\""), "{err}");
    assert!(cms.get_opt("third").await.unwrap().is_none());

    let out = c
        .kubectl_ok(&["explain", "deployment.spec.replicas"])
        .await
        .unwrap();
    assert!(
        out.contains("KIND:") && out.contains("Deployment") && out.contains("replicas"),
        "{out}"
    );
    assert!(out.contains("<integer>"), "{out}");
    let out = c
        .kubectl_ok(&["explain", "configmap", "--recursive"])
        .await
        .unwrap();
    assert!(
        out.contains("binaryData") && out.contains("immutable"),
        "{out}"
    );
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v3_index_points_at_hashed_documents_and_stale_hashes_redirect() {
    let c = TestCluster::start().await.unwrap();
    let (code, _, body) = get(&c, "/openapi/v3", "application/json", None).await;
    assert_eq!(code, 200);
    let index = json_of(&body);
    for key in [
        "api/v1",
        "apis/apps/v1",
        "apis/batch/v1",
        "api",
        "apis",
        "version",
    ] {
        assert!(
            index["paths"][key]["serverRelativeURL"].is_string(),
            "{key}: {index}"
        );
    }
    let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let hash = url.split("hash=").nth(1).unwrap().to_string();
    assert_eq!(hash.len(), 128, "{url}");

    let (code, headers, body) = get(&c, &url, "application/json", None).await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["etag"], format!("\"{hash}\"").as_str());
    assert_eq!(headers["cache-control"], "public, immutable");
    let doc = json_of(&body);
    assert_eq!(doc["openapi"], "3.0.0");
    let deployment = &doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    let spec = &doc["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"];
    assert_eq!(spec["properties"]["replicas"]["type"], "integer");
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert!(
        patch["parameters"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["name"] == "fieldValidation")),
        "{patch}"
    );

    // A hash that is not the document's: 301 to the current one.
    let (code, headers, _) = get(
        &c,
        "/openapi/v3/apis/apps/v1?hash=0123",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 301);
    assert_eq!(headers["location"], url.as_str());
    // The same ETag again: 304, nothing sent.
    let tag = format!("\"{hash}\"");
    let (code, _, body) = get(
        &c,
        "/openapi/v3/apis/apps/v1",
        "application/json",
        Some(&tag),
    )
    .await;
    assert_eq!(code, 304);
    assert!(body.is_empty());
    // No hash: the document without the long cache headers.
    let (code, headers, _) = get(&c, "/openapi/v3/apis/apps/v1", "*/*", None).await;
    assert_eq!(code, 200);
    assert_ne!(
        headers.get("cache-control").map(|v| v.as_bytes()),
        Some(&b"public, immutable"[..])
    );
    // A group version nobody serves.
    let (code, _, _) = get(
        &c,
        "/openapi/v3/apis/nothing.example.com/v1",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 404);
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v2_document_serves_json_and_protobuf() {
    let c = TestCluster::start().await.unwrap();
    let (code, headers, body) = get(&c, "/openapi/v2", "application/json", None).await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "application/json");
    let doc = json_of(&body);
    assert_eq!(doc["swagger"], "2.0");
    let cm = &doc["definitions"]["io.k8s.api.core.v1.ConfigMap"];
    assert_eq!(
        cm["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
    );
    assert_eq!(
        cm["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    let etag = headers["etag"].to_str().unwrap().to_string();
    let (code, headers, body) = get(
        &c,
        "/openapi/v2",
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    // Field 1 of openapi.v2.Document: swagger "2.0".
    assert_eq!(&body[..5], &[0x0a, 3, b'2', b'.', b'0']);
    let (code, _, _) = get(&c, "/openapi/v2", "application/json", Some(&etag)).await;
    assert_eq!(code, 304);
    let (code, _, _) = get(&c, "/openapi/v2", "text/html", None).await;
    assert_eq!(code, 406);
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crds_schema_is_published_under_its_group_version() {
    let c = TestCluster::start().await.unwrap();
    let group = format!("{}.openapi.rkcm.dev", kube_sim::api::random_suffix(6));
    let crds: Api<CustomResourceDefinition> = Api::all(c.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("gizmos.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"}, "colour": {"type": "string"}}}}}}}]}}))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let key = format!("apis/{group}/v1");
    let reversed: Vec<&str> = group.split('.').rev().collect();
    let definition = format!("{}.v1.Gizmo", reversed.join("."));
    let doc = wait_for(
        "the CRD's OpenAPI document",
        Duration::from_secs(60),
        || {
            let c = &c;
            let key = key.clone();
            let definition = definition.clone();
            async move {
                let (_, _, body) = get(c, "/openapi/v3", "application/json", None).await;
                let Some(url) = json_of(&body)["paths"][&key]["serverRelativeURL"]
                    .as_str()
                    .map(String::from)
                else {
                    return Ok(None);
                };
                let (code, _, body) = get(c, &url, "application/json", None).await;
                let doc = json_of(&body);
                let found = code == 200 && doc["components"]["schemas"].get(&definition).is_some();
                Ok(found.then_some(doc))
            }
        },
    )
    .await
    .unwrap();
    let gizmo = &doc["components"]["schemas"][&definition];
    assert_eq!(
        gizmo["properties"]["spec"]["properties"]["size"]["type"],
        "integer"
    );
    assert_eq!(
        gizmo["properties"]["metadata"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(
        gizmo["x-kubernetes-group-version-kind"],
        json!([{"group": group, "kind": "Gizmo", "version": "v1"}])
    );
    assert!(doc["components"]["schemas"]
        .get("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        .is_some());
    let out = c
        .kubectl_ok(&["explain", &format!("gizmos.{group}.spec.size")])
        .await
        .unwrap();
    assert!(out.contains("<integer>"), "{out}");
    crds.delete(&format!("gizmos.{group}"), &Default::default())
        .await
        .unwrap();
    c.cleanup().await;
}

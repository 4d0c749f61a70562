//! The options a request carries in its query string, as the API server reads and refuses
//! them on each verb: a value that does not decode (an integer that is not one) is a 400
//! BadRequest with the decoder's words; decoded options that break a rule are a 422 naming
//! `<Kind>Options.meta.k8s.io` and the field; a boolean is true for any value but `0` and
//! `false`. Written against the answers of kube-apiserver v1.29.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use rkcm_conformance::TestCluster;
use serde_json::{json, Value};

/// Sends `method path` with a JSON body (or none) and returns the status code, reason and
/// message of the answer (`(200..., "", "")` for a success).
async fn send(
    c: &TestCluster,
    method: http::Method,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> (u16, String, String) {
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body)
        .unwrap();
    match c.client.request_text(req).await {
        Ok(_) => (200, String::new(), String::new()),
        Err(kube::Error::Api(e)) => (e.code, e.reason, e.message),
        Err(other) => panic!("{path}: {other}"),
    }
}

/// An answer: status code, reason and message.
type Answer = (u16, String, String);
/// A request (method, path, content type, body) and the answer it gets.
type Case<'a> = (http::Method, String, &'a str, Option<Value>, Answer);

fn refused(code: u16, reason: &str, message: &str) -> (u16, String, String) {
    (code, reason.to_string(), message.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_watch_options_are_decoded_then_validated() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("list-opts").await.unwrap();
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let get = |query: &str| {
        let path = format!("{base}?{query}");
        let c = &c;
        async move { send(c, http::Method::GET, &path, "application/json", None).await }
    };
    let invalid = |detail: &str| {
        refused(
            422,
            "Invalid",
            &format!("ListOptions.meta.k8s.io \"\" is invalid: {detail}"),
        )
    };
    let cases = [
        ("limit=ten", refused(400, "BadRequest", "strconv.ParseInt: parsing \"ten\": invalid syntax")),
        ("limit=", refused(400, "BadRequest", "strconv.ParseInt: parsing \"\": invalid syntax")),
        ("timeoutSeconds=1.5&limit=x", refused(400, "BadRequest", "strconv.ParseInt: parsing \"1.5\": invalid syntax")),
        ("resourceVersionMatch=NotOlderThan", invalid("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")),
        ("resourceVersion=0&resourceVersionMatch=Exact", invalid("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")),
        ("resourceVersion=1&resourceVersionMatch=Latest", invalid("resourceVersionMatch: Unsupported value: \"Latest\": supported values: \"Exact\", \"NotOlderThan\", \"\"")),
        ("sendInitialEvents=true", invalid("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")),
        ("watch=true&resourceVersion=0&resourceVersionMatch=NotOlderThan", invalid("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")),
        // Decoding fails before validation; the field selector's fields are looked at last.
        ("limit=x&resourceVersionMatch=Exact", refused(400, "BadRequest", "strconv.ParseInt: parsing \"x\": invalid syntax")),
        ("fieldSelector=spec.bogus%3Dx&resourceVersionMatch=Exact", invalid("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")),
        ("limit=1&continue=abc%3D", refused(400, "BadRequest", "invalid continue token: continue key is not valid: illegal base64 data at input byte 3")),
        // {"v":"meta.k8s.io/v2","rv":1,"start":"x"}
        ("limit=1&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjIiLCJydiI6MSwic3RhcnQiOiJ4In0", refused(400, "BadRequest", "invalid continue token: continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2")),
        // {"v":"meta.k8s.io/v1","rv":1,"start":"x"}
        ("limit=1&resourceVersion=5&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ4In0", refused(400, "BadRequest", "specifying resource version is not allowed when using continue")),
        ("limit=-1", (200, String::new(), String::new())),
        ("watch=false&limit=2", (200, String::new(), String::new())),
    ];
    for (query, want) in cases {
        assert_eq!(get(query).await, want, "{query}");
    }
    // `watch=yes` (any value but 0/false) is a watch: a zero-length one here.
    let started = Instant::now();
    let (code, _, _) = get("watch=yes&timeoutSeconds=1").await;
    assert_eq!(code, 200);
    assert!(started.elapsed() < Duration::from_secs(20));
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_and_patch_options_are_validated_before_the_body() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("write-opts").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cm"}, "data": {"k": "v"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm2"}});
    let long = "m".repeat(129);
    let json = "application/json";
    let merge = "application/merge-patch+json";
    let apply = "application/apply-patch+yaml";
    let cases: Vec<Case> = vec![
        (http::Method::POST, format!("{base}?dryRun=true"), json, Some(body.clone()),
         refused(422, "Invalid", "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"true\"}: supported values: \"All\"")),
        (http::Method::POST, format!("{base}?fieldValidation=strict"), json, Some(body.clone()),
         refused(422, "Invalid", "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"")),
        (http::Method::POST, format!("{base}?fieldManager={long}"), json, Some(body.clone()),
         refused(422, "Invalid", "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: must have at most 128 bytes")),
        // The options are looked at before the body is.
        (http::Method::POST, format!("{base}?dryRun=yes"), json, Some(json!("not an object")),
         refused(422, "Invalid", "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"yes\"}: supported values: \"All\"")),
        (http::Method::PUT, format!("{base}/cm?fieldManager=a%09b"), json, Some(body.clone()),
         refused(422, "Invalid", "UpdateOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid value: \"a\\tb\": invalid character U+0009 (at position 1)")),
        (http::Method::PATCH, format!("{base}/cm?force=true"), merge, Some(json!({})),
         refused(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch")),
        (http::Method::PATCH, format!("{base}/cm"), apply, Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})),
         refused(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")),
        (http::Method::PATCH, format!("{base}/missing?dryRun=None"), merge, Some(json!({})),
         refused(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"None\"}: supported values: \"All\"")),
        (http::Method::PATCH, format!("{base}/cm?dryRun=All&fieldManager=me&fieldValidation=Ignore"), merge, Some(json!({"data": {"k": "w"}})),
         (200, String::new(), String::new())),
    ];
    for (method, path, content_type, body, want) in cases {
        let got = send(&c, method.clone(), &path, content_type, body).await;
        assert_eq!(got, want, "{method} {path}");
    }
    let kept = api.get("cm").await.unwrap();
    assert_eq!(
        kept.data.unwrap_or_default().get("k").map(String::as_str),
        Some("v"),
        "the dry run wrote nothing"
    );
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_options_come_from_the_body_or_else_the_query() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("delete-opts").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for name in ["a", "b"] {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let json = "application/json";
    let invalid = |detail: &str| {
        refused(
            422,
            "Invalid",
            &format!("DeleteOptions.meta.k8s.io \"\" is invalid: {detail}"),
        )
    };
    let cases: Vec<(String, Option<Value>, Answer)> = vec![
        (format!("{base}/a?gracePeriodSeconds=soon"), None,
         refused(400, "BadRequest", "strconv.ParseInt: parsing \"soon\": invalid syntax")),
        (format!("{base}/a?propagationPolicy=Everything"), None,
         invalid("propagationPolicy: Unsupported value: \"Everything\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"")),
        (format!("{base}/a?propagationPolicy=Orphan&orphanDependents=true"), None,
         invalid("propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set")),
        (format!("{base}/a?dryRun=1"), None,
         invalid("dryRun: Unsupported value: []string{\"1\"}: supported values: \"All\"")),
        (format!("{base}?dryRun=true"), None,
         invalid("dryRun: Unsupported value: []string{\"true\"}: supported values: \"All\"")),
        (format!("{base}/a"), Some(json!({"dryRun": ["Some"]})),
         invalid("dryRun: Unsupported value: []string{\"Some\"}: supported values: \"All\"")),
        // With a body, the query is not read: this is a dry run of nothing wrong.
        (format!("{base}/a?propagationPolicy=Everything"), Some(json!({"dryRun": ["All"]})),
         (200, String::new(), String::new())),
        // A negative grace period is taken as 1 s; a ConfigMap goes at once anyway.
        (format!("{base}/b?gracePeriodSeconds=-1"), None, (200, String::new(), String::new())),
    ];
    for (path, body, want) in cases {
        let got = send(&c, http::Method::DELETE, &path, json, body).await;
        assert_eq!(got, want, "DELETE {path}");
    }
    assert!(
        api.get_opt("a").await.unwrap().is_some(),
        "a: every delete refused or dry"
    );
    assert!(api.get_opt("b").await.unwrap().is_none(), "b deleted");
    c.cleanup().await;
}

/// What the server fills in or refuses in a subresource's own request: a TokenRequest
/// without `expirationSeconds` asks for an hour and gets the server's audiences, one for
/// less than ten minutes is refused; an eviction names its pod, and the request's dryRun
/// reaches the eviction's DeleteOptions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subresource_requests_are_defaulted_and_validated() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("sub-reqs").await.unwrap();
    let json = "application/json";
    let token_path = format!("/api/v1/namespaces/{ns}/serviceaccounts/default/token");
    let request = |spec: Value| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let req = http::Request::post(&token_path)
        .header("content-type", json)
        .body(request(json!({})).to_string().into_bytes())
        .unwrap();
    let issued: Value = c.client.request(req).await.unwrap();
    assert_eq!(issued["spec"]["expirationSeconds"], 3600, "{issued}");
    let audiences = issued["spec"]["audiences"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!audiences.is_empty(), "the server's audiences: {issued}");
    assert!(issued["status"]["token"]
        .as_str()
        .is_some_and(|t| !t.is_empty()));
    let short = send(
        &c,
        http::Method::POST,
        &token_path,
        json,
        Some(request(json!({"expirationSeconds": 60}))),
    )
    .await;
    assert_eq!(
        short,
        refused(422, "Invalid", "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes")
    );

    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.client.clone(), &ns);
    let pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let eviction = |name: &str, delete_options: Value| {
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name},
               "deleteOptions": delete_options})
    };
    let evict_path = format!("/api/v1/namespaces/{ns}/pods/p/eviction");
    let cases = [
        (
            evict_path.clone(),
            eviction("q", json!({})),
            refused(
                400,
                "BadRequest",
                "name in URL does not match name in Eviction object",
            ),
        ),
        (
            format!("{evict_path}?dryRun=All"),
            eviction("p", json!({})),
            (200, String::new(), String::new()),
        ),
        (
            evict_path.clone(),
            eviction("p", json!({"dryRun": ["All"]})),
            (200, String::new(), String::new()),
        ),
    ];
    for (path, body, want) in cases {
        assert_eq!(
            send(&c, http::Method::POST, &path, json, Some(body)).await,
            want,
            "{path}"
        );
    }
    assert!(
        pods.get_opt("p")
            .await
            .unwrap()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
        "dry-run evictions leave the pod"
    );
    c.cleanup().await;
}

/// A validation message that names a struct prints it as Go's `%#v` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_struct_in_a_validation_message_is_printed_as_go_prints_it() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("go-structs").await.unwrap();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}]}});
    let got = send(
        &c,
        http::Method::POST,
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        "application/json",
        Some(body),
    )
    .await;
    assert_eq!(
        got,
        refused(422, "Invalid", "ConfigMap \"owned\" is invalid: metadata.ownerReferences: Invalid value: v1.OwnerReference{APIVersion:\"v1\", Kind:\"Event\", Name:\"e\", UID:\"u\", Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}: /v1, Kind=Event is disallowed from being an owner")
    );
    c.cleanup().await;
}

//! What the integration tests of kube-sim share: a fresh kube-sim with an admin client,
//! and one raw request whose refusal comes back as (code, message).

#![allow(dead_code)]

use kube_sim::{Config, KubeSim};
use serde_json::Value;

/// A fresh kube-sim and an admin client for it.
pub(crate) async fn start() -> (KubeSim, kube::Client) {
    let sim = KubeSim::start(Config::default())
        .await
        .expect("kube-sim starts");
    let client = sim.client().await.expect("client");
    (sim, client)
}

/// One request with a JSON body; the answer's body, or the error Status (code, message).
pub(crate) async fn call(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<Value, (u16, String)> {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .unwrap();
    client.request::<Value>(req).await.map_err(|e| match e {
        kube::Error::Api(s) => (s.code, s.message.clone()),
        other => (0, other.to_string()),
    })
}

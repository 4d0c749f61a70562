//! What only the development cluster has: request accounting per client, and fault
//! injection over HTTP (admin only). Skipped, with one line, on a real cluster.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchParams};
use rkcm_conformance::{api_code, wait_for, TestCluster};
use std::time::Duration;

async fn raw(client: &kube::Client, method: &str, path: &str) -> Result<String, kube::Error> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .body(Vec::new())
        .unwrap();
    client.request_text(req).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_and_watches_per_client() {
    let c = TestCluster::start().await.unwrap();
    let Some(_) = c.sim_only("kube_sim_watches") else {
        return;
    };
    let ns = c.namespace("metrics").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.list(&ListParams::default()).await.unwrap();
    let _w1 = api
        .watch(&WatchParams::default().timeout(60), "0")
        .await
        .unwrap();
    let _w2 = api
        .watch(&WatchParams::default().timeout(60), "0")
        .await
        .unwrap();
    let text = wait_for(
        "two open configmap watches",
        Duration::from_secs(10),
        || async {
            let t = raw(&c.client, "GET", "/metrics").await?;
            Ok(t.lines()
                .any(|l| {
                    l.starts_with("kube_sim_watches{resource=\"configmaps\"") && l.ends_with(" 2")
                })
                .then_some(t))
        },
    )
    .await
    .unwrap();
    assert!(
        text.contains("apiserver_request_total{code=\"200\""),
        "{text}"
    );
    assert!(text.contains("verb=\"LIST\""));
    assert!(text
        .lines()
        .any(|l| l.starts_with("apiserver_longrunning_requests{")
            && l.contains("resource=\"configmaps\"")
            && l.contains("verb=\"WATCH\"")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_injection_endpoints_are_admin_only_and_work() {
    let c = TestCluster::start().await.unwrap();
    let Some(sim) = c.sim_only("fault injection") else {
        return;
    };
    let ns = c.namespace("faults").await.unwrap();
    let plain = c.client_without_retries().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(plain.clone(), &ns);
    raw(&c.client, "POST", "/kube-sim/faults/fail-429?count=2")
        .await
        .unwrap();
    assert_eq!(api_code(&api.list(&ListParams::default()).await), Some(429));
    assert_eq!(api_code(&api.list(&ListParams::default()).await), Some(429));
    api.list(&ListParams::default()).await.unwrap();
    raw(&c.client, "POST", "/kube-sim/faults/fail-500?count=1")
        .await
        .unwrap();
    assert_eq!(api_code(&api.list(&ListParams::default()).await), Some(500));
    // kube-rs retries 429 by default: the default client rides through an injected burst.
    raw(&c.client, "POST", "/kube-sim/faults/fail-429?count=3")
        .await
        .unwrap();
    let retried: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    retried.list(&ListParams::default()).await.unwrap();

    // A non-admin user may not inject faults.
    let kc = sim.kubeconfig_for("jane", &["developers"]).unwrap();
    let jane = kube_sim::client_from_kubeconfig(&kc).await.unwrap();
    let denied = raw(&jane, "POST", "/kube-sim/faults/compact").await;
    assert_eq!(api_code(&denied), Some(403));
    let o = retried
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "x"}})).unwrap(),
        )
        .await
        .unwrap();
    retried
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "y"}})).unwrap(),
        )
        .await
        .unwrap();
    raw(&c.client, "POST", "/kube-sim/faults/compact")
        .await
        .unwrap();
    let exact = ListParams::default()
        .at(&o.metadata.resource_version.unwrap())
        .matching(kube::api::VersionMatch::Exact);
    let Err(kube::Error::Api(e)) = api.list(&exact).await else {
        panic!("a compacted resourceVersion was listed")
    };
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_is_lifted_over_http() {
    let c = TestCluster::start().await.unwrap();
    let Some(_) = c.sim_only("pausing the API server") else {
        return;
    };
    let ns = c.namespace("pause").await.unwrap();
    raw(&c.client, "POST", "/kube-sim/faults/pause")
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let waiting = tokio::spawn(async move { api.list(&ListParams::default()).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "a request was served while paused");
    // The fault API itself is not paused, or nothing could resume serving.
    tokio::time::timeout(
        Duration::from_secs(5),
        raw(&c.client, "POST", "/kube-sim/faults/resume"),
    )
    .await
    .expect("the resume request waited for the pause")
    .unwrap();
    tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the paused request was not released")
        .unwrap()
        .unwrap();
}

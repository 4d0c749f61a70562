//! The metrics APIs kube-sim serves in place of metrics-server and a custom-metrics adapter,
//! checked with the real kubectl (`kubectl top`, `kubectl get --raw`) and kube-rs: pod and
//! node usage from the `sim.rkcm.io/cpu-usage` / `memory-usage` annotations, custom metrics
//! from `sim.rkcm.io/metric.<name>`, external ones from the Namespace annotation
//! `sim.rkcm.io/external-metric.<name>`, the 404s for absent metrics, discovery, and the
//! horizontal-pod-autoscaler's bootstrap RBAC on them.

mod common;

use std::path::{Path, PathBuf};

use common::{call, start};
use serde_json::{json, Value};

const NS: &str = "/api/v1/namespaces/default";

/// kubectl with `kubeconfig`, off the runtime's threads (the server runs on them).
async fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new("kubectl")
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .expect("kubectl task")
}

async fn kubectl_json(kubeconfig: &Path, args: &[&str]) -> Value {
    let (ok, out, err) = kubectl(kubeconfig, args).await;
    assert!(ok, "kubectl {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?}: not JSON ({e}): {out}"))
}

/// A pod on `node` with the given annotations and containers, made Running with every
/// container started (as a kubelet would report it).
async fn running_pod(
    client: &kube::Client,
    name: &str,
    node: &str,
    labels: Value,
    annotations: Value,
    containers: &[&str],
) {
    let specs: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "pause"}))
        .collect();
    let created = call(
        client,
        "POST",
        &format!("{NS}/pods"),
        Some(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "labels": labels, "annotations": annotations},
                    "spec": {"nodeName": node, "containers": specs}})),
    )
    .await
    .unwrap_or_else(|e| panic!("pod {name} created: {e:?}"));
    let mut pod = created;
    let statuses: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "pause", "imageID": "", "ready": true, "restartCount": 0,
                        "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}))
        .collect();
    pod["status"] = json!({"phase": "Running", "containerStatuses": statuses,
                           "conditions": [{"type": "Ready", "status": "True"}]});
    call(
        client,
        "PUT",
        &format!("{NS}/pods/{name}/status"),
        Some(pod),
    )
    .await
    .unwrap_or_else(|e| panic!("pod {name} status: {e:?}"));
}

/// The default ServiceAccount pods need (its controller's job on a cluster).
async fn default_service_account(client: &kube::Client) {
    call(
        client,
        "POST",
        &format!("{NS}/serviceaccounts"),
        Some(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        ),
    )
    .await
    .expect("default service account");
}

async fn node(client: &kube::Client, name: &str) {
    call(
        client,
        "POST",
        "/api/v1/nodes",
        Some(json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("node {name} created: {e:?}"));
}

fn write_kubeconfig(dir: &tempfile::TempDir, name: &str, yaml: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, yaml).expect("kubeconfig written");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_top_and_raw_pod_and_node_metrics() {
    let (sim, client) = start().await;
    default_service_account(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = write_kubeconfig(&dir, "admin", sim.kubeconfig());
    node(&client, "node-a").await;
    node(&client, "node-b").await;
    let web = json!({"app": "web"});
    let usage = json!({"sim.rkcm.io/cpu-usage": "100m", "sim.rkcm.io/memory-usage": "64Mi"});
    running_pod(
        &client,
        "web-1",
        "node-a",
        web.clone(),
        usage.clone(),
        &["app"],
    )
    .await;
    running_pod(&client, "web-2", "node-b", web.clone(), usage, &["app"]).await;
    running_pod(
        &client,
        "two",
        "node-a",
        json!({"app": "two"}),
        json!({"sim.rkcm.io/cpu-usage": "300m", "sim.rkcm.io/cpu-usage.sidecar": "10m"}),
        &["app", "sidecar"],
    )
    .await;
    // Pending, so metrics-server would have nothing for it.
    call(
        &client,
        "POST",
        &format!("{NS}/pods"),
        Some(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "pending", "labels": {"app": "web"},
                                 "annotations": {"sim.rkcm.io/cpu-usage": "1"}},
                    "spec": {"containers": [{"name": "app", "image": "pause"}]}})),
    )
    .await
    .expect("pending pod");

    // kubectl top pods: 100m and 64Mi per web pod; nothing for the pending one.
    let (ok, out, err) = kubectl(&kc, &["top", "pods", "-l", "app=web", "--no-headers"]).await;
    assert!(ok, "kubectl top pods failed: {err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        vec![vec!["web-1", "100m", "64Mi"], vec!["web-2", "100m", "64Mi"]],
        "kubectl top pods -l app=web:\n{out}"
    );
    let (ok, out, err) = kubectl(&kc, &["top", "pod", "two", "--containers", "--no-headers"]).await;
    assert!(ok, "kubectl top pod --containers failed: {err}");
    assert!(
        out.contains("app") && out.contains("300m") && out.contains("sidecar") && out.contains("10m"),
        "per-container usage (the pod total on the one unannotated container, the override on the other):\n{out}"
    );

    // The raw list, as the HPA controller reads it.
    let list = kubectl_json(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb",
        ],
    )
    .await;
    assert_eq!(list["kind"], "PodMetricsList");
    assert_eq!(list["apiVersion"], "metrics.k8s.io/v1beta1");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "{list}");
    for item in items {
        assert_eq!(item["window"], "15s");
        assert!(
            item["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{item}"
        );
        assert_eq!(item["metadata"]["labels"]["app"], "web");
        assert_eq!(item["containers"][0]["usage"]["cpu"], "100m");
        assert_eq!(item["containers"][0]["usage"]["memory"], "64Mi");
    }
    let one = kubectl_json(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1",
        ],
    )
    .await;
    assert_eq!(one["kind"], "PodMetrics");
    assert_eq!(one["metadata"]["name"], "web-1");

    // A pod with no metrics is a 404 with a Status.
    let missing = call(
        &client,
        "GET",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/pending",
        None,
    )
    .await;
    assert_eq!(
        missing,
        Err((
            404,
            "podmetrics.metrics.k8s.io \"default/pending\" not found".into()
        ))
    );
    let bad = call(
        &client,
        "GET",
        "/apis/metrics.k8s.io/v1beta1/pods?labelSelector=app%3D%3D%3D",
        None,
    )
    .await;
    assert!(matches!(bad, Err((400, _))), "bad selector: {bad:?}");
    let write = call(
        &client,
        "POST",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
        Some(json!({})),
    )
    .await;
    assert!(
        matches!(write, Err((405, _))),
        "metrics are read-only: {write:?}"
    );

    // Node usage is the sum over the node's pods: node-a has web-1 (100m) and two (310m).
    let (ok, out, err) = kubectl(&kc, &["top", "nodes", "--no-headers"]).await;
    assert!(ok, "kubectl top nodes failed: {err}");
    let node_a: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("node-a"))
        .unwrap_or_else(|| panic!("node-a in kubectl top nodes:\n{out}"))
        .split_whitespace()
        .collect();
    assert_eq!(node_a[1], "410m", "{out}");
    let node = kubectl_json(
        &kc,
        &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/node-b"],
    )
    .await;
    assert_eq!(node["kind"], "NodeMetrics");
    assert_eq!(node["usage"]["cpu"], "100m");
    assert_eq!(node["usage"]["memory"], "64Mi");

    // Load changes as the tests change it: by annotating the pods.
    let (ok, _, err) = kubectl(
        &kc,
        &[
            "annotate",
            "pods",
            "-l",
            "app=web",
            "sim.rkcm.io/cpu-usage=90m",
            "--overwrite",
        ],
    )
    .await;
    assert!(ok, "kubectl annotate failed: {err}");
    let one = kubectl_json(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-2",
        ],
    )
    .await;
    assert_eq!(one["containers"][0]["usage"]["cpu"], "90m");

    // Discovery: legacy and aggregated, as kubectl reads them.
    let (ok, out, err) = kubectl(
        &kc,
        &[
            "api-resources",
            "--api-group=metrics.k8s.io",
            "--no-headers",
        ],
    )
    .await;
    assert!(ok, "kubectl api-resources failed: {err}");
    assert!(
        out.contains("PodMetrics") && out.contains("NodeMetrics"),
        "api-resources:\n{out}"
    );
    let versions = kubectl_json(&kc, &["get", "--raw", "/apis"]).await;
    for group in [
        "metrics.k8s.io",
        "custom.metrics.k8s.io",
        "external.metrics.k8s.io",
    ] {
        assert!(
            versions["groups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g["name"] == group)),
            "{group} in /apis"
        );
    }
    let custom = kubectl_json(&kc, &["get", "--raw", "/apis/custom.metrics.k8s.io"]).await;
    assert_eq!(
        custom["preferredVersion"]["groupVersion"],
        "custom.metrics.k8s.io/v1beta2"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_and_external_metrics_from_annotations() {
    let (sim, client) = start().await;
    default_service_account(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = write_kubeconfig(&dir, "admin", sim.kubeconfig());
    node(&client, "node-a").await;
    for (name, rps) in [("web-1", "10"), ("web-2", "30")] {
        running_pod(
            &client,
            name,
            "node-a",
            json!({"app": "web"}),
            json!({"sim.rkcm.io/metric.rps": rps}),
            &["app"],
        )
        .await;
    }
    running_pod(
        &client,
        "other",
        "node-a",
        json!({"app": "other"}),
        json!({}),
        &["app"],
    )
    .await;

    // Pods metric, by selector: one item per pod that has it.
    let list = kubectl_json(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps?labelSelector=app%3Dweb",
        ],
    )
    .await;
    assert_eq!(list["kind"], "MetricValueList");
    assert_eq!(list["apiVersion"], "custom.metrics.k8s.io/v1beta2");
    let items = list["items"].as_array().expect("items");
    let values: Vec<(&str, &str)> = items
        .iter()
        .map(|i| {
            (
                i["describedObject"]["name"].as_str().unwrap_or(""),
                i["value"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(values, vec![("web-1", "10"), ("web-2", "30")]);
    assert_eq!(items[0]["metric"]["name"], "rps");
    assert_eq!(items[0]["describedObject"]["kind"], "Pod");
    assert_eq!(items[0]["describedObject"]["namespace"], "default");
    // v1beta1 names the metric the older way.
    let old = kubectl_json(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/web-1/rps",
        ],
    )
    .await;
    assert_eq!(old["items"][0]["metricName"], "rps");
    assert_eq!(old["items"][0]["value"], "10");

    // An Object metric on a Deployment, by its group-qualified resource.
    call(
        &client,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "web", "annotations": {"sim.rkcm.io/metric.queue": "1500m"}},
                    "spec": {"selector": {"matchLabels": {"app": "web"}},
                             "template": {"metadata": {"labels": {"app": "web"}},
                                          "spec": {"containers": [{"name": "app", "image": "pause"}]}}}})),
    )
    .await
    .expect("deployment");
    let object = kubectl_json(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/queue",
        ],
    )
    .await;
    assert_eq!(object["items"][0]["value"], "1500m");
    assert_eq!(
        object["items"][0]["describedObject"]["apiVersion"],
        "apps/v1"
    );

    // The namespace's own metric, and an external one, from Namespace annotations.
    let (ok, _, err) = kubectl(
        &kc,
        &[
            "annotate",
            "namespace",
            "default",
            "sim.rkcm.io/metric.sessions=7",
            "sim.rkcm.io/external-metric.queue_depth=30",
        ],
    )
    .await;
    assert!(ok, "annotate namespace: {err}");
    let ns_metric = kubectl_json(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/sessions",
        ],
    )
    .await;
    assert_eq!(ns_metric["items"][0]["value"], "7");
    assert_eq!(
        ns_metric["items"][0]["describedObject"]["kind"],
        "Namespace"
    );
    let external = kubectl_json(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
        ],
    )
    .await;
    assert_eq!(external["kind"], "ExternalMetricValueList");
    assert_eq!(external["items"][0]["metricName"], "queue_depth");
    assert_eq!(external["items"][0]["value"], "30");

    // Discovery lists the metrics that exist.
    let resources = kubectl_json(
        &kc,
        &["get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2"],
    )
    .await;
    let names: Vec<&str> = resources["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for want in ["pods/rps", "deployments.apps/queue", "namespaces/sessions"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let external_resources = kubectl_json(
        &kc,
        &["get", "--raw", "/apis/external.metrics.k8s.io/v1beta1"],
    )
    .await;
    assert_eq!(external_resources["resources"][0]["name"], "queue_depth");

    // Absent metrics: 404 with a Status, as an adapter answers.
    for (path, message) in [
        (
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps?labelSelector=app%3Dother",
            "the server could not find the metric rps for pods",
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/other/rps",
            "the server could not find the metric rps for pods other",
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps?metricLabelSelector=verb%3DGET",
            "the server could not find the metric rps for pods",
        ),
        (
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/missing",
            "the server could not find the metric missing for namespaces default",
        ),
    ] {
        assert_eq!(
            call(&client, "GET", path, None).await,
            Err((404, message.to_string())),
            "{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hpa_controller_may_read_the_metrics_apis() {
    let (sim, client) = start().await;
    default_service_account(&client).await;
    node(&client, "node-a").await;
    running_pod(
        &client,
        "web-1",
        "node-a",
        json!({"app": "web"}),
        json!({"sim.rkcm.io/cpu-usage": "100m", "sim.rkcm.io/metric.rps": "5"}),
        &["app"],
    )
    .await;
    let hpa = kube_sim::client_from_kubeconfig(
        &sim.kubeconfig_for(
            "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
            ],
        )
        .expect("kubeconfig"),
    )
    .await
    .expect("client");
    let list = call(
        &hpa,
        "GET",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb",
        None,
    )
    .await
    .expect("the HPA controller lists pod metrics");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    call(
        &hpa,
        "GET",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps?labelSelector=app%3Dweb",
        None,
    )
    .await
    .expect("the HPA controller reads custom metrics");
    // Node metrics are not in its role, as on a real cluster.
    let nodes = call(&hpa, "GET", "/apis/metrics.k8s.io/v1beta1/nodes", None).await;
    assert!(matches!(nodes, Err((403, _))), "{nodes:?}");
}

//! One HorizontalPodAutoscaler served as both `autoscaling/v1` and `autoscaling/v2`, as
//! kube-apiserver serves it: a v1 object is in the v2 list and watch, status written through
//! v2 reads back through v1 (`currentCPUUtilizationPercentage` and the
//! `autoscaling.alpha.kubernetes.io/*` annotations), and what v1 cannot hold survives a v1
//! update. Checked with kube-rs's typed v2 API and the real kubectl.

mod common;

use std::path::Path;

use common::{call, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, WatchEvent, WatchParams};
use serde_json::{json, Value};

const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";

async fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.map(str::to_string);
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = std::process::Command::new("kubectl")
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
            input.write_all(text.as_bytes()).expect("kubectl stdin");
        }
        let out = child.wait_with_output().expect("kubectl finishes");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .expect("kubectl task");
    assert!(ok, "kubectl failed: {err}");
    out
}

fn annotation(obj: &Value, key: &str) -> Value {
    let text = obj["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_else(|| panic!("annotation {key} on {obj}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("annotation {key} is JSON: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v1_hpa_is_one_object_in_both_versions() {
    let (sim, client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, sim.kubeconfig()).unwrap();
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), "default");
    let mut watch = hpas
        .watch(&WatchParams::default(), "0")
        .await
        .expect("v2 watch")
        .boxed();

    // Created as v1 (an old manifest), with kubectl.
    kubectl(
        &kc,
        &["apply", "-f", "-"],
        Some(
            "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\n\
             spec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: web\n\
             \x20 minReplicas: 1\n  maxReplicas: 10\n  targetCPUUtilizationPercentage: 50\n",
        ),
    )
    .await;

    // The v2 watch and list see it, as v2.
    let added = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(ev) = watch.try_next().await.expect("watch event") {
            if let WatchEvent::Added(h) = ev {
                return h;
            }
        }
        panic!("the watch ended before an ADDED event");
    })
    .await
    .expect("ADDED within 10s on the v2 watch");
    let metrics = added
        .spec
        .as_ref()
        .and_then(|s| s.metrics.clone())
        .unwrap_or_default();
    assert_eq!(metrics.len(), 1, "{added:?}");
    let cpu = metrics[0].resource.as_ref().expect("a Resource metric");
    assert_eq!(cpu.name, "cpu");
    assert_eq!(cpu.target.type_, "Utilization");
    assert_eq!(cpu.target.average_utilization, Some(50));
    let listed = hpas.list(&Default::default()).await.expect("v2 list");
    assert_eq!(listed.items.len(), 1);
    let v2 = call(&client, "GET", &format!("{V2}/web"), None)
        .await
        .expect("v2 get");
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert!(
        v2["spec"].get("targetCPUUtilizationPercentage").is_none(),
        "{v2}"
    );

    // The controller writes status through v2; v1 readers see it.
    let mut with_status = v2.clone();
    with_status["status"] = json!({
        "currentReplicas": 2, "desiredReplicas": 4, "lastScaleTime": "2026-01-01T00:00:00Z",
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                            "current": {"averageValue": "100m", "averageUtilization": 100}}}],
        "conditions": [
            {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
             "reason": "SucceededRescale", "message": "the HPA controller was able to update the target scale to 4"},
            {"type": "ScalingActive", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
             "reason": "ValidMetricFound",
             "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"}]});
    call(
        &client,
        "PUT",
        &format!("{V2}/web/status"),
        Some(with_status),
    )
    .await
    .expect("v2 status update");
    // The full resource name: kubectl 1.29 drops the version when it expands a short
    // name, so `hpa.v1.autoscaling` asks for the preferred v2 (on a real cluster too).
    let v1: Value = serde_json::from_str(
        &kubectl(
            &kc,
            &[
                "get",
                "horizontalpodautoscalers.v1.autoscaling",
                "web",
                "-o",
                "json",
            ],
            None,
        )
        .await,
    )
    .expect("kubectl -o json");
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 100);
    assert_eq!(v1["status"]["currentReplicas"], 2);
    assert_eq!(v1["status"]["desiredReplicas"], 4);
    let conditions = annotation(&v1, "autoscaling.alpha.kubernetes.io/conditions");
    assert_eq!(conditions[0]["reason"], "SucceededRescale");
    assert_eq!(conditions[1]["type"], "ScalingActive");
    let current = annotation(&v1, "autoscaling.alpha.kubernetes.io/current-metrics");
    assert_eq!(
        current,
        json!([{"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 100, "currentAverageValue": "100m"}}])
    );
    // No other metrics and no behavior: nothing more to carry.
    assert!(v1["metadata"]["annotations"]
        .get("autoscaling.alpha.kubernetes.io/metrics")
        .is_none());
    let yaml = kubectl(
        &kc,
        &[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-o",
            "yaml",
        ],
        None,
    )
    .await;
    assert!(
        yaml.contains("currentCPUUtilizationPercentage: 100"),
        "kubectl get horizontalpodautoscalers.v1.autoscaling -o yaml:\n{yaml}"
    );

    // Status written through v1 lands in v2.
    let mut v1_status = v1.clone();
    v1_status["status"]["currentCPUUtilizationPercentage"] = json!(60);
    if let Some(a) = v1_status["metadata"]["annotations"].as_object_mut() {
        a.remove("autoscaling.alpha.kubernetes.io/current-metrics");
    }
    call(&client, "PUT", &format!("{V1}/web/status"), Some(v1_status))
        .await
        .expect("v1 status update");
    let v2 = call(&client, "GET", &format!("{V2}/web"), None)
        .await
        .expect("v2 get");
    assert_eq!(
        v2["status"]["currentMetrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 60}}}])
    );
    assert_eq!(v2["status"]["conditions"][0]["reason"], "SucceededRescale");
    assert!(v2["metadata"].get("annotations").is_none_or(|a| a
        .as_object()
        .is_some_and(|a| !a.keys().any(|k| k.starts_with("autoscaling.alpha")))));
}

#[tokio::test(flavor = "multi_thread")]
async fn what_v1_cannot_hold_survives_a_v1_update() {
    let (sim, client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, sim.kubeconfig()).unwrap();
    let created = call(
        &client,
        "POST",
        V2,
        Some(json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "rps"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 8,
                     "metrics": [{"type": "Pods", "pods": {"metric": {"name": "rps"},
                                  "target": {"type": "AverageValue", "averageValue": "10"}}}],
                     "behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
                                  "scaleDown": {"selectPolicy": "Disabled"}}}})),
    )
    .await
    .expect("v2 create");
    // Behavior is defaulted as upstream's SetDefaults_HorizontalPodAutoscalerBehavior does.
    assert_eq!(
        created["spec"]["behavior"],
        json!({"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                           "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
               "scaleDown": {"selectPolicy": "Disabled",
                             "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}})
    );

    let v1 = call(&client, "GET", &format!("{V1}/rps"), None)
        .await
        .expect("v1 get");
    assert!(
        v1["spec"].get("targetCPUUtilizationPercentage").is_none(),
        "{v1}"
    );
    assert_eq!(v1["spec"]["minReplicas"], 2);
    assert_eq!(
        annotation(&v1, "autoscaling.alpha.kubernetes.io/metrics"),
        json!([{"type": "Pods", "pods": {"metricName": "rps", "targetAverageValue": "10"}}])
    );
    let behavior = annotation(&v1, "autoscaling.alpha.kubernetes.io/behavior");
    assert_eq!(behavior["ScaleDown"]["SelectPolicy"], "Disabled");
    assert_eq!(
        behavior["ScaleDown"]["StabilizationWindowSeconds"],
        Value::Null
    );

    // A v1 client edits it (kubectl label through v1 is a read-modify-write of the v1 form).
    kubectl(
        &kc,
        &[
            "label",
            "horizontalpodautoscalers.v1.autoscaling",
            "rps",
            "team=a",
        ],
        None,
    )
    .await;
    let mut edited = call(&client, "GET", &format!("{V1}/rps"), None)
        .await
        .expect("v1 get");
    edited["spec"]["maxReplicas"] = json!(9);
    call(&client, "PUT", &format!("{V1}/rps"), Some(edited))
        .await
        .expect("v1 update");

    let v2 = call(&client, "GET", &format!("{V2}/rps"), None)
        .await
        .expect("v2 get");
    assert_eq!(v2["metadata"]["labels"]["team"], "a");
    assert_eq!(v2["spec"]["maxReplicas"], 9);
    assert_eq!(v2["spec"]["metrics"], created["spec"]["metrics"]);
    assert_eq!(v2["spec"]["behavior"], created["spec"]["behavior"]);
    assert!(
        v2["metadata"]["annotations"].is_null(),
        "the round-trip annotations are not stored: {v2}"
    );

    // The v1 list shows both versions' objects in v1 form.
    call(
        &client,
        "POST",
        V1,
        Some(
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "plain"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}}),
        ),
    )
    .await
    .expect("v1 create");
    let list = call(&client, "GET", V1, None).await.expect("v1 list");
    assert_eq!(list["apiVersion"], "autoscaling/v1");
    let plain = list["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["metadata"]["name"] == "plain"))
        .expect("plain in the v1 list");
    // v1 with no target at all gets upstream's 80 %.
    assert_eq!(plain["spec"]["targetCPUUtilizationPercentage"], 80);
    assert_eq!(
        plain["status"],
        json!({"currentReplicas": 0, "desiredReplicas": 0})
    );
    let table = kubectl(
        &kc,
        &["get", "horizontalpodautoscalers.v1.autoscaling"],
        None,
    )
    .await;
    assert!(table.contains("rps") && table.contains("plain"), "{table}");
    // Rows are printed from the whole object, as kube-apiserver prints from its internal
    // version: the Pods target v1 keeps in an annotation shows.
    let rps_row = table
        .lines()
        .find(|l| l.starts_with("rps"))
        .unwrap_or_else(|| panic!("rps row in:\n{table}"));
    assert!(rps_row.contains("<unknown>/10"), "{rps_row}");
}

//! Tests of the autoscaling conversions.

use super::*;

fn v1(spec: Value, status: Value, annotations: Value) -> Value {
    json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
           "spec": spec, "status": status})
}

#[test]
fn cpu_target_becomes_a_resource_metric_and_back() {
    let o = v1(
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
               "minReplicas": 1, "maxReplicas": 10, "targetCPUUtilizationPercentage": 50}),
        json!({"currentReplicas": 2, "desiredReplicas": 2}),
        json!({"team": "a"}),
    );
    let v2 = v1_to_v2(&o);
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert_eq!(v2["metadata"]["annotations"], json!({"team": "a"}));
    let back = v2_to_v1(&v2);
    assert_eq!(back["spec"], o["spec"]);
    assert_eq!(
        back["status"],
        json!({"currentReplicas": 2, "desiredReplicas": 2})
    );
    assert_eq!(back["metadata"]["annotations"], json!({"team": "a"}));
}

#[test]
fn no_metrics_at_all_defaults_to_80_percent_cpu() {
    let o = v1(
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}),
        json!({}),
        json!(null),
    );
    let v2 = v1_to_v2(&o);
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    assert!(v2["metadata"]["annotations"].is_null());
}

#[test]
fn v2_status_reads_back_through_v1_with_annotations() {
    let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                 "minReplicas": 1, "maxReplicas": 10,
                 "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                    {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}],
                 "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                          "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}},
        "status": {"currentReplicas": 4, "desiredReplicas": 4,
                   "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "100m", "averageUtilization": 100}}}],
                   "conditions": [{"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
                                   "reason": "SucceededRescale", "message": "the HPA controller was able to update the target scale to 4"}]}});
    let o = v2_to_v1(&v2);
    assert_eq!(o["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(o["status"]["currentCPUUtilizationPercentage"], 100);
    let a = &o["metadata"]["annotations"];
    assert_eq!(
        a[METRICS_ANNOTATION],
        r#"[{"type":"Pods","pods":{"metricName":"rps","targetAverageValue":"10"}}]"#
    );
    assert_eq!(
        a[CURRENT_METRICS_ANNOTATION],
        r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":100,"currentAverageValue":"100m"}}]"#
    );
    assert_eq!(
        a[BEHAVIOR_ANNOTATION],
        r#"{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":1,"PeriodSeconds":60}]},"ScaleDown":null}"#
    );
    assert!(a[CONDITIONS_ANNOTATION]
        .as_str()
        .is_some_and(|c| c.contains("SucceededRescale")));
    // And the v1 object, written back, is the same v2 object.
    let again = v1_to_v2(&o);
    assert_eq!(again["spec"]["metrics"][0], v2["spec"]["metrics"][1]);
    assert_eq!(again["spec"]["metrics"][1], v2["spec"]["metrics"][0]);
    assert_eq!(again["spec"]["behavior"], v2["spec"]["behavior"]);
    assert_eq!(again["status"]["conditions"], v2["status"]["conditions"]);
    assert_eq!(
        again["status"]["currentMetrics"],
        v2["status"]["currentMetrics"]
    );
    assert!(again["metadata"].get("annotations").is_none());
}

#[test]
fn other_metric_kinds_round_trip() {
    let metrics = json!([
        {"type": "Object", "object": {"describedObject": {"kind": "Ingress", "name": "main", "apiVersion": "networking.k8s.io/v1"},
                                      "target": {"type": "Value", "value": "2k"}, "metric": {"name": "hits"}}},
        {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
                                          "target": {"type": "AverageValue", "averageValue": "30"}}},
        {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app",
                                          "target": {"type": "AverageValue", "averageValue": "64Mi"}}}
    ]);
    let v2 = json!({"metadata": {"name": "x"},
                    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5, "metrics": metrics},
                    "status": {"desiredReplicas": 0, "currentMetrics": null}});
    let o = v2_to_v1(&v2);
    assert!(o["spec"].get("targetCPUUtilizationPercentage").is_none());
    let back = v1_to_v2(&o);
    assert_eq!(back["spec"]["metrics"], metrics);
    assert_eq!(back["status"]["currentMetrics"], Value::Null);
}

#[test]
fn undecodable_annotations_are_ignored_and_dropped() {
    let o = v1(
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
               "targetCPUUtilizationPercentage": 60}),
        json!({}),
        json!({METRICS_ANNOTATION: "not json", CONDITIONS_ANNOTATION: "{}", BEHAVIOR_ANNOTATION: "{}"}),
    );
    let v2 = v1_to_v2(&o);
    assert_eq!(v2["spec"]["metrics"].as_array().map(Vec::len), Some(1));
    assert!(v2["spec"].get("behavior").is_none());
    assert!(v2["status"].get("conditions").is_none());
    assert!(v2["metadata"].get("annotations").is_none());
}

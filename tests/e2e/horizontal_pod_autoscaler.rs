//! End-to-end tests of the horizontal-pod-autoscaler-controller run by `rkcm launcher`
//! (work order WO-H, checks 2-10): the test cluster (kube-sim with simulated nodes and its
//! metrics APIs, or RKCM_TEST_KUBECONFIG's real cluster with metrics-server), the real
//! `rkcm launcher` as a separate process, every change made with kubectl and every check
//! read back from the API server.
//!
//! rkcm runs with `--horizontal-pod-autoscaler-sync-period=5s` and
//! `--horizontal-pod-autoscaler-downscale-stabilization=30s`; the CPU initialization
//! period and initial readiness delay keep KCM's defaults (5m, 30s), so a pod's CPU sample
//! counts once it has been Ready longer than the sample's window (15 s on kube-sim): the
//! tests wait for that before they create an HPA. On kube-sim a pod's CPU usage is its
//! annotation `sim.rkcm.io/cpu-usage`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use serde_json::{json, Value};

const CONTROLLERS: &str = "--controllers=horizontalpodautoscaling,deployment,replicaset,serviceaccount,root-ca-cert-publisher,nodelifecycle,garbagecollector";
const FLAGS: &[&str] = &[
    CONTROLLERS,
    "--horizontal-pod-autoscaler-sync-period=5s",
    "--horizontal-pod-autoscaler-downscale-stabilization=30s",
];

/// How long a CPU sample's window reaches back on kube-sim, plus a margin.
const READY_FOR: Duration = Duration::from_secs(17);

async fn start() -> LauncherStack {
    LauncherStack::start(FLAGS).await
}

fn deployment(name: &str, replicas: i32, cpu_request: Option<&str>, usage: &str) -> Value {
    let resources = match cpu_request {
        Some(cpu) => json!({"requests": {"cpu": cpu}}),
        None => json!({}),
    };
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"sim.rkcm.io/cpu-usage": usage}},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9", "resources": resources}]},
            },
        },
    })
}

fn cpu_hpa(name: &str, target: &str, behavior: Option<Value>) -> Value {
    let mut hpa = json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
        },
    });
    if let Some(behavior) = behavior {
        hpa["spec"]["behavior"] = behavior;
    }
    hpa
}

/// Waits until the app's `count` pods run, have been Ready for [`READY_FOR`], and the
/// resource metrics API reports each of them.
async fn wait_for_samples(stack: &LauncherStack, ns: &str, app: &str, count: usize) {
    let pods: Api<Pod> = Api::namespaced(stack.cluster.client.clone(), ns);
    let what = format!("{count} pods of {app} Ready for {READY_FOR:?} with CPU samples");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let listed = pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let settled = listed
            .iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter(|pod| {
                pod.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c.type_ == "Ready"
                            && c.status == "True"
                            && c.last_transition_time.as_ref().is_some_and(|t| {
                                now - t.0.as_millisecond() >= READY_FOR.as_millis() as i64
                            })
                    })
            })
            .count();
        let path =
            format!("/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods?labelSelector=app%3D{app}");
        let samples = match stack.cluster.kubectl_ok(&["get", "--raw", &path]).await {
            Ok(text) => serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["items"].as_array().map(|items| items.len()))
                .unwrap_or(0),
            Err(_) => 0,
        };
        if settled == count && samples == count && listed.len() == count {
            return;
        }
        if Instant::now() > deadline {
            stack.fail(format!(
                "{what}: {settled} settled of {} listed, {samples} samples",
                listed.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn hpa(
    stack: &LauncherStack,
    ns: &str,
    name: &str,
) -> anyhow::Result<HorizontalPodAutoscaler> {
    Ok(
        Api::<HorizontalPodAutoscaler>::namespaced(stack.cluster.client.clone(), ns)
            .get(name)
            .await?,
    )
}

/// The (status, reason) of the HPA's condition `type_`.
fn condition(hpa: &HorizontalPodAutoscaler, type_: &str) -> Option<(String, String)> {
    hpa.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn has_condition(hpa: &HorizontalPodAutoscaler, type_: &str, status: &str, reason: &str) -> bool {
    condition(hpa, type_) == Some((status.to_string(), reason.to_string()))
}

async fn wait_condition(
    stack: &LauncherStack,
    ns: &str,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> HorizontalPodAutoscaler {
    stack
        .wait(
            &format!("HPA {name}: {type_} {status}/{reason}"),
            || async move {
                let hpa = hpa(stack, ns, name).await?;
                Ok(has_condition(&hpa, type_, status, reason).then_some(hpa))
            },
        )
        .await
}

/// The messages of the events of `reason` on the HPA `name`, oldest first.
async fn events(stack: &LauncherStack, ns: &str, name: &str, reason: &str) -> Vec<String> {
    let listed = Api::<Event>::namespaced(stack.cluster.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut found: Vec<_> = listed
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("HorizontalPodAutoscaler")
                && e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .collect();
    found.sort_by_key(|e| e.first_timestamp.as_ref().map(|t| t.0));
    found.into_iter().filter_map(|e| e.message).collect()
}

async fn deployment_replicas(stack: &LauncherStack, ns: &str, name: &str) -> i64 {
    let text = stack
        .kubectl(&[
            "get",
            "deployment",
            name,
            "-n",
            ns,
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .await;
    text.trim().parse().unwrap_or(-1)
}

/// Checks that `check` holds at every poll for `period` (a "nothing happens" check).
async fn holds<F, Fut>(stack: &LauncherStack, what: &str, period: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<String>>,
{
    let end = Instant::now() + period;
    while Instant::now() < end {
        if let Some(broken) = check().await {
            stack.fail(format!("{what}: {broken}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Checks 2-5, 7 and 9: the first scale-up, reaching max, tolerance, the stabilized
/// scale-down, the bounds, and the controller's metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_utilization_scales_within_bounds_and_stabilizes() {
    let started = Instant::now();
    let stack = start().await;
    if stack.cluster.sim.is_none() {
        eprintln!("skipped: CPU usage is set through kube-sim's sim.rkcm.io/cpu-usage");
        return;
    }
    let ns = stack.namespace("hpa").await;
    stack
        .apply_in(&ns, &deployment("web", 2, Some("100m"), "100m"))
        .await;
    wait_for_samples(&stack, &ns, "web", 2).await;
    stack.apply_in(&ns, &cpu_hpa("web", "web", None)).await;

    // 2. The first scale-up: 100 % of the request against 50 % gives 4.
    let first = stack
        .wait("the first SuccessfulRescale", || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                let found = events(stack, &ns, "web", "SuccessfulRescale").await;
                let hpa = hpa(stack, &ns, "web").await?;
                Ok(found.first().cloned().map(|message| (message, hpa)))
            }
        })
        .await;
    assert_eq!(
        first.0,
        "New size: 4; reason: cpu resource utilization (percentage of request) above target"
    );
    let hpa_now = stack
        .wait("status after the first rescale", || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                let hpa = hpa(stack, &ns, "web").await?;
                let current = hpa
                    .status
                    .as_ref()
                    .and_then(|s| s.current_metrics.as_ref())
                    .and_then(|m| m.first())
                    .and_then(|m| m.resource.as_ref())
                    .map(|r| r.current.clone());
                Ok(current.is_some().then_some(hpa))
            }
        })
        .await;
    let current = hpa_now
        .status
        .as_ref()
        .unwrap()
        .current_metrics
        .as_ref()
        .unwrap()[0]
        .resource
        .as_ref()
        .unwrap()
        .current
        .clone();
    assert_eq!(current.average_utilization, Some(100), "{current:?}");
    assert_eq!(
        current.average_value.as_ref().map(|q| q.0.as_str()),
        Some("100m")
    );
    assert!(
        has_condition(&hpa_now, "ScalingActive", "True", "ValidMetricFound"),
        "{:?}",
        hpa_now.status
    );
    // AbleToScale says SucceededRescale after each rescale (the next sync without one
    // says ReadyForNewScale).
    let able = condition(&hpa_now, "AbleToScale").unwrap();
    assert_eq!(able.0, "True");
    assert!(
        ["SucceededRescale", "ReadyForNewScale"].contains(&able.1.as_str()),
        "{able:?}"
    );

    // 3. Up to max, never more than doubling per step.
    wait_condition(
        &stack,
        &ns,
        "web",
        "ScalingLimited",
        "True",
        "TooManyReplicas",
    )
    .await;
    stack
        .wait("the deployment at 10 replicas", || {
            let ns = ns.clone();
            let stack = &stack;
            async move { Ok((deployment_replicas(stack, &ns, "web").await == 10).then_some(())) }
        })
        .await;
    let rescales = events(&stack, &ns, "web", "SuccessfulRescale").await;
    let mut previous = 2;
    for message in &rescales {
        let size: i32 = message
            .strip_prefix("New size: ")
            .and_then(|rest| rest.split(';').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| stack.fail(format!("unexpected rescale message {message:?}")));
        assert!(size <= (2 * previous).max(4), "{rescales:?}");
        previous = size;
    }
    assert_eq!(previous, 10, "{rescales:?}");
    // 4. Tolerance: 53 % of the request against 50 % is a ratio of 1.06: no rescale.
    wait_for_samples(&stack, &ns, "web", 10).await;
    stack
        .kubectl(&[
            "annotate",
            "pods",
            "-n",
            &ns,
            "-l",
            "app=web",
            "sim.rkcm.io/cpu-usage=53m",
            "--overwrite",
        ])
        .await;
    let count = events(&stack, &ns, "web", "SuccessfulRescale").await.len();
    holds(
        &stack,
        "no rescale within tolerance",
        Duration::from_secs(30),
        || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                let now = events(stack, &ns, "web", "SuccessfulRescale").await;
                let replicas = deployment_replicas(stack, &ns, "web").await;
                (now.len() != count || replicas != 10)
                    .then(|| format!("{replicas} replicas, rescales {now:?}"))
            }
        },
    )
    .await;

    // 5. Scale-down: held about 30 s by the stabilization window, then all the way.
    stack
        .kubectl(&[
            "annotate",
            "pods",
            "-n",
            &ns,
            "-l",
            "app=web",
            "sim.rkcm.io/cpu-usage=10m",
            "--overwrite",
        ])
        .await;
    let annotated = Instant::now();
    wait_condition(
        &stack,
        &ns,
        "web",
        "AbleToScale",
        "True",
        "ScaleDownStabilized",
    )
    .await;
    assert_eq!(deployment_replicas(&stack, &ns, "web").await, 10);
    let down = stack
        .wait("the scale-down after the stabilization window", || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                let found = events(stack, &ns, "web", "SuccessfulRescale").await;
                Ok(found
                    .into_iter()
                    .find(|m| m.contains("All metrics below target")))
            }
        })
        .await;
    assert!(
        annotated.elapsed() >= Duration::from_secs(20),
        "scaled down after {:?}, inside the 30 s window",
        annotated.elapsed()
    );
    assert_eq!(down, "New size: 2; reason: All metrics below target");

    // 7. Bounds: above max goes back to max; zero disables scaling.
    stack
        .kubectl(&["scale", "deployment", "web", "-n", &ns, "--replicas=20"])
        .await;
    let bound = stack
        .wait("the rescale to max", || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                let found = events(stack, &ns, "web", "SuccessfulRescale").await;
                Ok(found
                    .into_iter()
                    .find(|m| m.contains("above Spec.MaxReplicas")))
            }
        })
        .await;
    assert_eq!(
        bound,
        "New size: 10; reason: Current number of replicas above Spec.MaxReplicas"
    );
    stack
        .wait("the deployment back at 10 replicas", || {
            let ns = ns.clone();
            let stack = &stack;
            async move { Ok((deployment_replicas(stack, &ns, "web").await == 10).then_some(())) }
        })
        .await;
    stack
        .kubectl(&["scale", "deployment", "web", "-n", &ns, "--replicas=0"])
        .await;
    wait_condition(
        &stack,
        &ns,
        "web",
        "ScalingActive",
        "False",
        "ScalingDisabled",
    )
    .await;
    assert_eq!(deployment_replicas(&stack, &ns, "web").await, 0);

    // 9. The controller's metrics.
    let metrics = stack.metrics().await;
    let scale_ups = metric_sum(
        &metrics,
        "horizontal_pod_autoscaler_controller_reconciliations_total",
        &[("action", "scale_up"), ("error", "none")],
    );
    assert!(scale_ups.is_some_and(|n| n >= 1.0), "{scale_ups:?}");
    let computations = metric_sum(
        &metrics,
        "horizontal_pod_autoscaler_controller_metric_computation_total",
        &[("metric_type", "Resource")],
    );
    assert!(computations.is_some_and(|n| n > 0.0), "{computations:?}");
    assert!(has_sample(
        &metrics,
        "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds_bucket{le=\"0.001\"}"
    ));
    eprintln!(
        "cpu_utilization_scales_within_bounds_and_stabilizes took {:?}",
        started.elapsed()
    );
}

/// Checks 6 and 8: behavior policies, and the errors an HPA reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behavior_policies_and_errors() {
    let started = Instant::now();
    let stack = start().await;
    let ns = stack.namespace("hpa-b").await;
    stack
        .apply_in(&ns, &deployment("slow", 2, Some("100m"), "100m"))
        .await;
    stack
        .apply_in(&ns, &deployment("noreq", 1, None, "100m"))
        .await;
    wait_for_samples(&stack, &ns, "slow", 2).await;

    // 6. (kube-sim: CPU usage from the pods' annotation)
    if stack.cluster.sim.is_none() {
        eprintln!(
            "skipped the behavior part: CPU usage is set through kube-sim's sim.rkcm.io/cpu-usage"
        );
    } else {
        // 6. +1 pod per 60 s; scale-down disabled.
        let behavior = json!({
            "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
            "scaleDown": {"selectPolicy": "Disabled"},
        });
        stack
            .apply_in(&ns, &cpu_hpa("slow", "slow", Some(behavior)))
            .await;
        let limited = wait_condition(
            &stack,
            &ns,
            "slow",
            "ScalingLimited",
            "True",
            "ScaleUpLimit",
        )
        .await;
        let first = stack
            .wait("the first rescale of slow", || {
                let ns = ns.clone();
                let stack = &stack;
                async move {
                    Ok(events(stack, &ns, "slow", "SuccessfulRescale")
                        .await
                        .first()
                        .cloned())
                }
            })
            .await;
        assert!(
            first.starts_with("New size: 3; "),
            "{first} {:?}",
            limited.status
        );
        holds(
            &stack,
            "at most +1 per 60 s",
            Duration::from_secs(25),
            || {
                let ns = ns.clone();
                let stack = &stack;
                async move {
                    let replicas = deployment_replicas(stack, &ns, "slow").await;
                    (replicas != 3).then(|| format!("{replicas} replicas"))
                }
            },
        )
        .await;
        stack
            .kubectl(&[
                "annotate",
                "pods",
                "-n",
                &ns,
                "-l",
                "app=slow",
                "sim.rkcm.io/cpu-usage=1m",
                "--overwrite",
            ])
            .await;
        holds(
            &stack,
            "scale-down disabled",
            Duration::from_secs(20),
            || {
                let ns = ns.clone();
                let stack = &stack;
                async move {
                    let replicas = deployment_replicas(stack, &ns, "slow").await;
                    (replicas < 3).then(|| format!("{replicas} replicas"))
                }
            },
        )
        .await;
    }

    // 8a. A target without cpu requests.
    stack.apply_in(&ns, &cpu_hpa("noreq", "noreq", None)).await;
    let failing = wait_condition(
        &stack,
        &ns,
        "noreq",
        "ScalingActive",
        "False",
        "FailedGetResourceMetric",
    )
    .await;
    let message = failing
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "ScalingActive")
                .and_then(|c| c.message.clone())
        });
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("missing request for cpu")),
        "{message:?}"
    );
    for reason in ["FailedGetResourceMetric", "FailedComputeMetricsReplicas"] {
        let found = stack
            .wait(&format!("a {reason} event"), || {
                let ns = ns.clone();
                let stack = &stack;
                async move { Ok(events(stack, &ns, "noreq", reason).await.first().cloned()) }
            })
            .await;
        assert!(
            found.contains("missing request for cpu"),
            "{reason}: {found}"
        );
    }

    // 8b. A missing target.
    stack.apply_in(&ns, &cpu_hpa("ghost", "ghost", None)).await;
    wait_condition(
        &stack,
        &ns,
        "ghost",
        "AbleToScale",
        "False",
        "FailedGetScale",
    )
    .await;

    // 8c. Two HPAs on the same pods.
    stack
        .apply_in(&ns, &cpu_hpa("slow-twin", "slow", None))
        .await;
    wait_condition(
        &stack,
        &ns,
        "slow-twin",
        "ScalingActive",
        "False",
        "AmbiguousSelector",
    )
    .await;
    let ambiguous = events(&stack, &ns, "slow-twin", "AmbiguousSelector").await;
    assert!(
        ambiguous
            .first()
            .is_some_and(|m| m.contains("are controlled by multiple HPAs")),
        "{ambiguous:?}"
    );
    eprintln!("behavior_policies_and_errors took {:?}", started.elapsed());
}

/// Check 10: an HPA written as `autoscaling/v1` scales the same way, and its status reads
/// back through v1 (asked as `horizontalpodautoscalers.v1.autoscaling`: kubectl 1.29 drops
/// the version of `hpa.v1.autoscaling` when it expands the short name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscaling_v1_hpa_scales_and_reports_through_v1() {
    let started = Instant::now();
    let stack = start().await;
    if stack.cluster.sim.is_none() {
        eprintln!("skipped: CPU usage is set through kube-sim's sim.rkcm.io/cpu-usage");
        return;
    }
    let ns = stack.namespace("hpa-v1").await;
    stack
        .apply_in(&ns, &deployment("web", 2, Some("100m"), "100m"))
        .await;
    wait_for_samples(&stack, &ns, "web", 2).await;
    let v1 = json!({
        "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 10, "targetCPUUtilizationPercentage": 50},
    });
    stack.apply_in(&ns, &v1).await;
    let first = stack
        .wait("the first rescale of the v1 HPA", || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                Ok(events(stack, &ns, "web", "SuccessfulRescale")
                    .await
                    .first()
                    .cloned())
            }
        })
        .await;
    assert_eq!(
        first,
        "New size: 4; reason: cpu resource utilization (percentage of request) above target"
    );
    let yaml = stack
        .wait("currentCPUUtilizationPercentage through v1", || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                let text = stack
                    .kubectl(&[
                        "get",
                        "horizontalpodautoscalers.v1.autoscaling",
                        "web",
                        "-n",
                        &ns,
                        "-o",
                        "json",
                    ])
                    .await;
                let value: Value = serde_json::from_str(&text)?;
                Ok(value["status"]["currentCPUUtilizationPercentage"]
                    .as_i64()
                    .map(|_| value))
            }
        })
        .await;
    assert_eq!(yaml["apiVersion"], "autoscaling/v1");
    eprintln!(
        "autoscaling_v1_hpa_scales_and_reports_through_v1 took {:?}",
        started.elapsed()
    );
}

/// Check 10's option: a Pods metric from the custom metrics API with an AverageValue
/// target (on kube-sim the pods' annotation `sim.rkcm.io/metric.rps`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_custom_metric_scales_on_average_value() {
    let started = Instant::now();
    let stack = start().await;
    if stack.cluster.sim.is_none() {
        eprintln!("skipped: the rps metric comes from kube-sim's custom metrics API");
        return;
    }
    let ns = stack.namespace("hpa-rps").await;
    let mut api = deployment("api", 2, Some("100m"), "10m");
    api["spec"]["template"]["metadata"]["annotations"]["sim.rkcm.io/metric.rps"] = json!("20");
    stack.apply_in(&ns, &api).await;
    wait_for_samples(&stack, &ns, "api", 2).await;
    let hpa_manifest = json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}],
        },
    });
    stack.apply_in(&ns, &hpa_manifest).await;
    let first = stack
        .wait("the first rescale on rps", || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                Ok(events(stack, &ns, "api", "SuccessfulRescale")
                    .await
                    .first()
                    .cloned())
            }
        })
        .await;
    assert_eq!(first, "New size: 4; reason: pods metric rps above target");
    let average = stack
        .wait("status.currentMetrics[0].pods.current.averageValue", || {
            let ns = ns.clone();
            let stack = &stack;
            async move {
                let hpa = hpa(stack, &ns, "api").await?;
                Ok(hpa
                    .status
                    .and_then(|s| s.current_metrics)
                    .and_then(|m| m.into_iter().next())
                    .and_then(|m| m.pods)
                    .and_then(|p| p.current.average_value)
                    .map(|q| q.0))
            }
        })
        .await;
    assert_eq!(average, "20");
    eprintln!(
        "pods_custom_metric_scales_on_average_value took {:?}",
        started.elapsed()
    );
}

//! End-to-end tests of resourceclaim-controller (feature gate `DynamicResourceAllocation`,
//! issue 27) run by `rkcm launcher`: kube-sim serving `resource.k8s.io/v1alpha2` with the
//! gate on (`--runtime-config`, `--feature-gates`, as a kube-apiserver is started for it),
//! node-sim's scheduler and kubelet, the real launcher with its informer-server and worker;
//! every change made with kubectl, every check read back from the API server.
//!
//! No resource driver runs: the test plays it, allocating a claim through the status
//! subresource. On a real cluster (`RKCM_TEST_KUBECONFIG`) the tests are skipped when the
//! server does not serve `resource.k8s.io/v1alpha2` (discovery), and the check that needs a
//! pod to run on its claim (so a driver) is skipped there, saying so.

mod common;

use common::*;
use serde_json::{json, Value};

const GATE: &str = "--feature-gates=DynamicResourceAllocation=true";
const CONTROLLERS: &str =
    "resourceclaim-controller,garbagecollector,serviceaccount,root-ca-cert-publisher,nodelifecycle";
const ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

async fn cluster() -> rkcm_conformance::TestCluster {
    rkcm_conformance::TestCluster::start_with_config(kube_sim::Config {
        runtime_config: "resource.k8s.io/v1alpha2=true".into(),
        feature_gates: "DynamicResourceAllocation=true".into(),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// Whether the cluster serves the group version (a real one may not).
async fn serves_dra(cluster: &rkcm_conformance::TestCluster) -> bool {
    cluster
        .kubectl_ok(&["api-versions"])
        .await
        .is_ok_and(|out| out.lines().any(|l| l.trim() == "resource.k8s.io/v1alpha2"))
}

async fn get_json<S: ControllerStack>(stack: &S, args: &[&str]) -> Option<Value> {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "json", "--ignore-not-found"]);
    let out = stack.kubectl(&full).await;
    if out.trim().is_empty() {
        return None;
    }
    serde_json::from_str(&out).ok()
}

fn template(ns: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "gpu-template", "namespace": ns},
           "spec": {"metadata": {"labels": {"app": "e2e"}},
                    "spec": {"resourceClassName": "sim-gpu"}}})
}

fn pod(ns: &str, name: &str, source: Value, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "annotations": annotations},
           "spec": {"restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpu", "source": source}],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"claims": [{"name": "gpu"}]}}]}})
}

/// The claim name the pod's status records for its claim `gpu`.
fn recorded_claim(pod: &Value) -> Option<String> {
    pod.pointer("/status/resourceClaimStatuses")?
        .as_array()?
        .iter()
        .find(|s| s["name"] == "gpu")?
        .get("resourceClaimName")?
        .as_str()
        .map(String::from)
}

fn reserved_uids(claim: &Value) -> Vec<String> {
    claim
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(String::from))
        .collect()
}

/// Plays the resource driver: the claim is allocated (status subresource).
async fn allocate<S: ControllerStack>(stack: &S, ns: &str, claim: &str, reserved_for: Value) {
    stack
        .patch_status(
            "resourceclaim",
            Some(ns),
            claim,
            &json!({"status": {"driverName": "gpu.sim.rkcm.io", "allocation": {},
                               "reservedFor": reserved_for}}),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pod_gets_its_claim_which_goes_with_it() {
    let cluster = cluster().await;
    if !serves_dra(&cluster).await {
        eprintln!("skipped: the cluster does not serve resource.k8s.io/v1alpha2");
        return;
    }
    let stack = LauncherStack::start_on(cluster, &["--controllers", CONTROLLERS, GATE]).await;
    let ns = stack.namespace("claims").await;
    stack.apply(template(&ns)).await;
    stack
        .apply(pod(
            &ns,
            "app",
            json!({"resourceClaimTemplateName": "gpu-template"}),
            json!({}),
        ))
        .await;

    // Check 1: the claim is made from the template and recorded in the pod's status.
    let pod = stack
        .wait("the pod's status to record its claim", || {
            let stack = &stack;
            let ns = ns.clone();
            async move {
                let pod = get_json(stack, &["pod", "app", "-n", &ns]).await;
                Ok(pod.filter(|p| recorded_claim(p).is_some()))
            }
        })
        .await;
    let name = recorded_claim(&pod).unwrap_or_default();
    assert!(
        name.starts_with("app-gpu-") && name.len() == "app-gpu-".len() + 5,
        "{name}"
    );
    let Some(claim) = get_json(&stack, &["resourceclaim", &name, "-n", &ns]).await else {
        stack.fail(format!("claim {name} recorded but not found"));
    };
    assert_eq!(
        claim.pointer(&format!(
            "/metadata/annotations/{}",
            ANNOTATION.replace('/', "~1")
        )),
        Some(&json!("gpu"))
    );
    assert_eq!(claim.pointer("/metadata/labels/app"), Some(&json!("e2e")));
    assert_eq!(
        claim.pointer("/spec/resourceClassName"),
        Some(&json!("sim-gpu"))
    );
    assert_eq!(
        claim.pointer("/metadata/ownerReferences"),
        Some(&json!([{"apiVersion": "v1", "kind": "Pod", "name": "app",
                      "uid": pod["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]))
    );
    let metrics = stack.metrics().await;
    assert_eq!(
        metric_sum(
            &metrics,
            "resourceclaim_controller_create_attempts_total",
            &[]
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        metric_sum(
            &metrics,
            "resourceclaim_controller_create_failures_total",
            &[]
        ),
        Some(0.0)
    );

    // Check 2: the claim goes with its pod (the garbage collector).
    stack
        .kubectl(&[
            "delete",
            "pod",
            "app",
            "-n",
            &ns,
            "--wait=false",
            "--grace-period=0",
            "--force",
        ])
        .await;
    stack
        .wait("the pod's claim to be garbage-collected", || {
            let stack = &stack;
            let (ns, name) = (ns.clone(), name.clone());
            async move {
                let claim = get_json(stack, &["resourceclaim", &name, "-n", &ns]).await;
                Ok(claim.is_none().then_some(()))
            }
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reservations_of_pods_gone_or_finished_are_dropped() {
    let cluster = cluster().await;
    if !serves_dra(&cluster).await {
        eprintln!("skipped: the cluster does not serve resource.k8s.io/v1alpha2");
        return;
    }
    let on_sim = cluster.sim.is_some();
    let stack = LauncherStack::start_on(cluster, &["--controllers", CONTROLLERS, GATE]).await;
    let ns = stack.namespace("reserved").await;

    // Check 3a: a pod that is gone loses its reservation, and a delayed claim left
    // without one is to be deallocated.
    let claim = json!({"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClaim",
                       "metadata": {"name": "shared", "namespace": ns},
                       "spec": {"resourceClassName": "sim-gpu"}});
    stack.apply(claim).await;
    stack
        .apply(pod(
            &ns,
            "gone",
            json!({"resourceClaimName": "shared"}),
            json!({}),
        ))
        .await;
    let gone = get_json(&stack, &["pod", "gone", "-n", &ns])
        .await
        .unwrap_or_default();
    let uid = gone["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    allocate(
        &stack,
        &ns,
        "shared",
        json!([{"resource": "pods", "name": "gone", "uid": uid}]),
    )
    .await;
    stack
        .kubectl(&[
            "delete",
            "pod",
            "gone",
            "-n",
            &ns,
            "--grace-period=0",
            "--force",
        ])
        .await;
    let claim = stack
        .wait("the gone pod's reservation to be dropped", || {
            let stack = &stack;
            let ns = ns.clone();
            async move {
                let claim = get_json(stack, &["resourceclaim", "shared", "-n", &ns]).await;
                Ok(claim.filter(|c| reserved_uids(c).is_empty()))
            }
        })
        .await;
    assert_eq!(
        claim.pointer("/status/deallocationRequested"),
        Some(&json!(true)),
        "{claim}"
    );

    // Check 3b: a pod that ran on its claim and finished loses its reservation. It needs a
    // node that runs pods with claims, so a resource driver: node-sim's stands in.
    if !on_sim {
        eprintln!("skipped check 3b: it needs a resource driver on the cluster's nodes");
        return;
    }
    let immediate = json!({"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClaim",
                           "metadata": {"name": "immediate", "namespace": ns},
                           "spec": {"resourceClassName": "sim-gpu", "allocationMode": "Immediate"}});
    stack.apply(immediate).await;
    allocate(&stack, &ns, "immediate", json!(null)).await;
    stack
        .apply(pod(
            &ns,
            "job",
            json!({"resourceClaimName": "immediate"}),
            json!({"sim.rkcm.io/exit-after": "2s"}),
        ))
        .await;
    let pod_uid = stack
        .wait("the scheduler to reserve the claim for the pod", || {
            let stack = &stack;
            let ns = ns.clone();
            async move {
                let pod = get_json(stack, &["pod", "job", "-n", &ns]).await;
                let claim = get_json(stack, &["resourceclaim", "immediate", "-n", &ns]).await;
                let uid = pod.and_then(|p| p["metadata"]["uid"].as_str().map(String::from));
                Ok(uid.filter(|uid| claim.is_some_and(|c| reserved_uids(&c).contains(uid))))
            }
        })
        .await;
    let claim = stack
        .wait("the finished pod's reservation to be dropped", || {
            let stack = &stack;
            let ns = ns.clone();
            async move {
                let pod = get_json(stack, &["pod", "job", "-n", &ns]).await;
                if pod.as_ref().and_then(|p| p["status"]["phase"].as_str()) != Some("Succeeded") {
                    return Ok(None);
                }
                let claim = get_json(stack, &["resourceclaim", "immediate", "-n", &ns]).await;
                Ok(claim.filter(|c| reserved_uids(c).is_empty()))
            }
        })
        .await;
    assert!(!pod_uid.is_empty());
    // Immediate claims stay allocated.
    assert_eq!(
        claim.pointer("/status/deallocationRequested"),
        None,
        "{claim}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_gate_off_the_controller_does_not_run() {
    let cluster = cluster().await;
    if !serves_dra(&cluster).await {
        eprintln!("skipped: the cluster does not serve resource.k8s.io/v1alpha2");
        return;
    }
    let stack = LauncherStack::start_on(cluster, &["--controllers", CONTROLLERS]).await;
    let ns = stack.namespace("gate-off").await;
    stack.apply(template(&ns)).await;
    stack
        .apply(pod(
            &ns,
            "app",
            json!({"resourceClaimTemplateName": "gpu-template"}),
            json!({}),
        ))
        .await;
    // The scheduler has looked at the pod: its claim is not created yet.
    let pod = stack
        .wait("the scheduler to report the pod unschedulable", || {
            let stack = &stack;
            let ns = ns.clone();
            async move {
                let pod = get_json(stack, &["pod", "app", "-n", &ns]).await;
                Ok(pod.filter(|p| {
                    p.pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .is_some_and(|cs| {
                            cs.iter()
                                .any(|c| c["type"] == "PodScheduled" && c["status"] == "False")
                        })
                }))
            }
        })
        .await;
    assert_eq!(recorded_claim(&pod), None, "{pod}");
    let claims = stack
        .kubectl(&["get", "resourceclaims", "-n", &ns, "-o", "name"])
        .await;
    assert_eq!(claims.trim(), "", "no claim is made with the gate off");
    let log = stack.log();
    assert!(
        log.contains("Controller is disabled by a feature gate"),
        "the launcher says why it skips the controller"
    );
}

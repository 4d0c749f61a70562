//! End-to-end: how long a namespace takes to go (issue 29). A namespace holding a
//! 2-replica Deployment whose pods have a 30 s grace period, and ten ConfigMaps, is deleted;
//! the namespace controller removes its content and, while pods are terminating, looks again
//! after half the estimate (their longest grace period) and a second, as upstream does.
//!
//! - Pods that stop a few seconds after SIGTERM (as most do): the namespace is gone at the
//!   second look, ~16 s after its deletion; waiting for the whole estimate between looks
//!   (rkcm before issue 29) held it for the whole 30 s.
//! - Pods that run until killed at the end of their grace period: gone at the look after
//!   that, ~32 s.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

const CONTROLLERS: &str = "namespace,deployment,replicaset,garbagecollector,serviceaccount,nodelifecycle,root-ca-cert-publisher";
/// The pods' grace period.
const GRACE_SECONDS: i64 = 30;
/// Pods killed at the end of their grace period: upstream's timing gives ~31-35 s.
const GONE_WITHIN: Duration = Duration::from_secs(45);
/// Pods that stop 3 s after SIGTERM: upstream's second look, after 16 s, finds them gone;
/// waiting for the whole estimate took 30 s.
const SOON_GONE_WITHIN: Duration = Duration::from_secs(25);

/// Creates the namespace's content with pods made by `containers` (annotated with
/// `annotations` for node-sim), deletes the namespace and returns how long it took to go.
async fn deletion_time(
    stack: &LauncherStack,
    annotations: serde_json::Value,
    containers: serde_json::Value,
) -> Duration {
    let client = stack.cluster.client.clone();
    let ns = stack.namespace("ns-deletion").await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}, "annotations": annotations},
                              "spec": {"terminationGracePeriodSeconds": GRACE_SECONDS,
                                       "containers": containers}}}});
    let mut manifests = vec![deployment];
    for i in 0..10 {
        manifests.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": ns}, "data": {"k": "v"}}));
    }
    let stream: Vec<String> = manifests.iter().map(|m| m.to_string()).collect();
    stack
        .kubectl_stdin(&["apply", "-f", "-"], &stream.join("\n"))
        .await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    stack
        .wait("the Deployment's 2 pods to be available", || {
            let deployments = deployments.clone();
            async move {
                let status = deployments.get("web").await?.status.unwrap_or_default();
                Ok((status.available_replicas == Some(2)).then_some(()))
            }
        })
        .await;
    let running = pods.list(&ListParams::default()).await;
    let running = running.unwrap_or_else(|e| stack.fail(format!("listing pods: {e}")));
    assert_eq!(running.items.len(), 2, "two pods run before the deletion");
    assert!(
        running.items.iter().all(|p| p
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            == Some(GRACE_SECONDS)),
        "the pods carry the 30 s grace period"
    );

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let started = Instant::now();
    if let Err(error) = namespaces.delete(&ns, &DeleteParams::default()).await {
        stack.fail(format!("deleting namespace {ns}: {error}"));
    }
    stack
        .wait_within("the namespace to be gone", Duration::from_secs(90), || {
            let namespaces = namespaces.clone();
            let ns = ns.clone();
            async move { Ok(namespaces.get_opt(&ns).await?.is_none().then_some(())) }
        })
        .await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_whose_pods_stop_soon_after_sigterm_goes_before_their_grace_period_ends() {
    let stack = LauncherStack::start(&["--controllers", CONTROLLERS]).await;
    // node-sim: containers stop 3 s after the deletion; a real cluster: a shell that exits
    // 3 s after SIGTERM.
    let took = deletion_time(
        &stack,
        json!({"sim.rkcm.io/stop-after": "3s"}),
        json!([{"name": "sleeper", "image": "busybox:1.36",
                "command": ["sh", "-c", "trap 'sleep 3; exit 0' TERM; while true; do sleep 1; done"]}]),
    )
    .await;
    println!(
        "namespace with a 2-replica Deployment (pods stopping 3 s after SIGTERM, {GRACE_SECONDS} s grace) and 10 ConfigMaps was gone {:.1} s after its deletion",
        took.as_secs_f64()
    );
    assert!(
        took <= SOON_GONE_WITHIN,
        "the namespace took {took:?}, more than {SOON_GONE_WITHIN:?} (held for the whole grace period?)\n{}",
        stack.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_whose_pods_take_30s_to_stop_is_gone_within_45s() {
    let stack = LauncherStack::start(&["--controllers", CONTROLLERS]).await;
    // Containers that run until killed: a shell ignoring SIGTERM on a real cluster; on
    // kube-sim, no stop annotation, so node-sim holds a deleted pod for its grace period.
    let took = deletion_time(
        &stack,
        json!({}),
        json!([{"name": "sleeper", "image": "busybox:1.36",
                "command": ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]}]),
    )
    .await;
    println!(
        "namespace with a 2-replica Deployment (pods killed after {GRACE_SECONDS} s of grace) and 10 ConfigMaps was gone {:.1} s after its deletion",
        took.as_secs_f64()
    );
    // The deletion timestamp is in whole seconds: the grace period may end up to 1 s early.
    assert!(
        took >= Duration::from_secs(GRACE_SECONDS as u64 - 2),
        "the pods ran out their grace period ({took:?})"
    );
    assert!(
        took <= GONE_WITHIN,
        "the namespace took {took:?}, more than {GONE_WITHIN:?}\n{}",
        stack.log()
    );
}

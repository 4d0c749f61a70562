//! End-to-end tests of the cloud controllers (service-lb-controller, node-route-controller,
//! cloud-node-lifecycle-controller) run by `rkcm launcher --cloud-provider=sim` against
//! rkcm's simulated cloud, and of KCM's `--cloud-provider` outcomes (WO-S2 check 10):
//! every change made with kubectl, every check read back from the API server or the
//! launcher's `/metrics` and log.
//!
//! The route and cloud-node-lifecycle checks need node-sim's nodes and knobs (a node
//! told to report NotReady, a node registered without a podCIDR): on a real cluster
//! (`RKCM_TEST_KUBECONFIG`) they are skipped, since the simulated cloud would otherwise
//! set conditions on, taint or delete the cluster's own Nodes.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::{Api, ListParams};
use serde_json::Value;

const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";

fn lb_service(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  type: LoadBalancer\n  selector:\n    app: web\n  ports:\n  - port: 80\n    targetPort: 8080\n"
    )
}

/// The events of `reason` about the object `name` of `kind` in `ns`: (message, count).
async fn events(
    stack: &LauncherStack,
    ns: &str,
    kind: &str,
    name: &str,
    reason: &str,
) -> Vec<(String, i32)> {
    Api::<Event>::namespaced(stack.cluster.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some(kind)
                && e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| (e.message.unwrap_or_default(), e.count.unwrap_or(1)))
        .collect()
}

async fn service(stack: &LauncherStack, ns: &str) -> Option<Service> {
    Api::<Service>::namespaced(stack.cluster.client.clone(), ns)
        .get_opt("web")
        .await
        .ok()
        .flatten()
}

fn ingress_ip(service: &Service) -> Option<String> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

fn has_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

#[tokio::test]
async fn a_load_balancer_service_gets_its_balancer_errors_are_retried_and_deletion_cleans_up() {
    let stack = LauncherStack::start(&[
        "--controllers=service-lb-controller,serviceaccount",
        "--cloud-provider=sim",
    ])
    .await;
    let ns = stack.namespace("cloud-lb").await;
    stack
        .kubectl_stdin(&["apply", "-f", "-"], &lb_service(&ns))
        .await;
    let ip = stack
        .wait("the Service's finalizer and ingress IP", || async {
            Ok(service(&stack, &ns)
                .await
                .filter(has_finalizer)
                .and_then(|s| ingress_ip(&s)))
        })
        .await;
    assert!(ip.starts_with("198.51.100."), "{ip}");
    let shown = stack
        .kubectl(&[
            "get",
            "service",
            "web",
            "-n",
            &ns,
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ])
        .await;
    assert_eq!(shown.trim(), ip);
    stack
        .wait("the EnsuredLoadBalancer event", || async {
            let ensured = events(&stack, &ns, "Service", "web", "EnsuredLoadBalancer").await;
            Ok((!ensured.is_empty()).then_some(()))
        })
        .await;

    // A failing cloud: SyncLoadBalancerFailed, then recovery once the error is gone.
    stack
        .kubectl(&[
            "annotate",
            "service",
            "web",
            "-n",
            &ns,
            "sim.rkcm.io/lb-error=boom",
        ])
        .await;
    let failed = stack
        .wait("SyncLoadBalancerFailed", || async {
            Ok(
                events(&stack, &ns, "Service", "web", "SyncLoadBalancerFailed")
                    .await
                    .into_iter()
                    .next(),
            )
        })
        .await;
    assert_eq!(
        failed.0,
        "Error syncing load balancer: failed to ensure load balancer: boom"
    );
    stack
        .kubectl(&[
            "annotate",
            "service",
            "web",
            "-n",
            &ns,
            "sim.rkcm.io/lb-error-",
        ])
        .await;
    stack
        .wait(
            "a second EnsuredLoadBalancer after the error is gone",
            || async {
                let ensured = events(&stack, &ns, "Service", "web", "EnsuredLoadBalancer").await;
                Ok((ensured.iter().map(|(_, count)| count).sum::<i32>() >= 2).then_some(()))
            },
        )
        .await;

    // Deletion: the balancer goes, then the finalizer, then the Service.
    stack
        .kubectl(&["delete", "service", "web", "-n", &ns, "--wait=false"])
        .await;
    stack
        .wait("the Service to be gone", || async {
            Ok(service(&stack, &ns).await.is_none().then_some(()))
        })
        .await;
    for reason in ["DeletingLoadBalancer", "DeletedLoadBalancer"] {
        stack
            .wait(&format!("the {reason} event"), || async {
                let found = events(&stack, &ns, "Service", "web", reason).await;
                Ok((!found.is_empty()).then_some(()))
            })
            .await;
    }
    let metrics = stack.metrics().await;
    assert!(
        metric_sum(&metrics, "service_controller_loadbalancer_sync_total", &[]).is_some(),
        "service_controller_loadbalancer_sync_total is exposed"
    );
    assert!(
        metric_sum(&metrics, "workqueue_adds_total", &[("name", "service")]).unwrap_or(0.0) >= 3.0,
        "the service queue took the creation, the error and its removal"
    );
}

/// A kube-sim cluster whose node-sim nodes register without a podCIDR and report no
/// NetworkUnavailable of their own, posting their status every second.
async fn sim_cluster_stack(args: &[&str], nodes: usize) -> Option<LauncherStack> {
    let cluster = sim_cluster("needs node-sim's nodes and knobs (on a real cluster the simulated cloud would act on its own Nodes)").await?;
    let config = kube_sim::nodesim::NodeSimConfig {
        node_status_report_frequency: Duration::from_secs(1),
        assign_pod_cidrs: false,
        network_condition: false,
        ..fast_heartbeat_nodes(nodes)
    };
    Some(LauncherStack::start_with_nodes(cluster, args, Some(config)).await)
}

fn condition(node: &Node, type_: &str) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test]
async fn routes_follow_the_nodes_pod_cidrs() {
    let Some(stack) = sim_cluster_stack(
        &[
            "--controllers=node-route-controller,node-ipam-controller,serviceaccount",
            "--cloud-provider=sim",
            "--allocate-node-cidrs",
            "--cluster-cidr=10.244.0.0/16",
            "--configure-cloud-routes",
            "--route-reconciliation-period=1s",
        ],
        3,
    )
    .await
    else {
        return;
    };
    let nodes: Api<Node> = Api::all(stack.cluster.client.clone());
    stack
        .wait(
            "NetworkUnavailable=False RouteCreated on every node",
            || async {
                let listed = nodes.list(&ListParams::default()).await?.items;
                let done = listed.len() == 3
                    && listed.iter().all(|n| {
                        condition(n, "NetworkUnavailable")
                            == Some(("False".into(), "RouteCreated".into()))
                    });
                Ok(done.then_some(()))
            },
        )
        .await;
    let metrics = stack.metrics().await;
    println!(
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("rkcm_sim"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for node in ["sim-node-0", "sim-node-1", "sim-node-2"] {
        assert_eq!(
            metric_sum(&metrics, "rkcm_sim_cloud_route", &[("node", node)]),
            Some(1.0),
            "one route for {node}"
        );
    }
    // node-sim keeps posting its conditions (every second); the route controller's stays.
    let before = stack
        .kubectl(&[
            "get",
            "node",
            "sim-node-1",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].lastHeartbeatTime}",
        ])
        .await;
    stack
        .wait("a later node-sim status post", || async {
            let now = stack
                .kubectl(&[
                    "get",
                    "node",
                    "sim-node-1",
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].lastHeartbeatTime}",
                ])
                .await;
            Ok((now != before).then_some(()))
        })
        .await;
    let reason = stack
        .kubectl(&[
            "get",
            "node",
            "sim-node-1",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"NetworkUnavailable\")].reason}",
        ])
        .await;
    assert_eq!(reason.trim(), "RouteCreated");

    // A node that goes (killed first, so node-sim does not register it again) loses its route.
    stack
        .kubectl(&["annotate", "node", "sim-node-2", "sim.rkcm.io/killed=true"])
        .await;
    stack.kubectl(&["delete", "node", "sim-node-2"]).await;
    stack
        .wait("sim-node-2's route to be deleted", || async {
            let metrics = stack.metrics().await;
            let gone = metric_sum(&metrics, "rkcm_sim_cloud_route", &[("node", "sim-node-2")])
                .unwrap_or(0.0)
                == 0.0;
            let others = metric_sum(&metrics, "rkcm_sim_cloud_route", &[("node", "sim-node-1")]);
            Ok((gone && others == Some(1.0)).then_some(()))
        })
        .await;
    assert!(
        stack.log().contains("Deleted route"),
        "the deletion is logged"
    );
}

fn taints(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| {
            t.iter()
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn nodes_gone_from_the_cloud_are_deleted_and_stopped_ones_tainted() {
    let Some(stack) = sim_cluster_stack(
        &[
            "--controllers=cloud-node-lifecycle-controller,serviceaccount",
            "--cloud-provider=sim",
            "--node-monitor-period=1s",
        ],
        3,
    )
    .await
    else {
        return;
    };
    let nodes: Api<Node> = Api::all(stack.cluster.client.clone());
    // Stopped: NotReady and shut down in the cloud → the shutdown taint; Ready again → gone.
    stack
        .kubectl(&[
            "annotate",
            "node",
            "sim-node-1",
            "sim.rkcm.io/condition.Ready=False",
            "sim.rkcm.io/instance=stopped",
        ])
        .await;
    stack
        .wait("the shutdown taint on sim-node-1", || async {
            let node = nodes.get("sim-node-1").await?;
            Ok(taints(&node)
                .contains(&format!("{SHUTDOWN_TAINT}:NoSchedule"))
                .then_some(()))
        })
        .await;
    stack
        .kubectl(&[
            "annotate",
            "node",
            "sim-node-1",
            "--overwrite",
            "sim.rkcm.io/condition.Ready=True",
        ])
        .await;
    stack
        .wait(
            "the shutdown taint to go once sim-node-1 is Ready",
            || async {
                let node = nodes.get("sim-node-1").await?;
                Ok((!taints(&node).iter().any(|t| t.starts_with(SHUTDOWN_TAINT))).then_some(()))
            },
        )
        .await;

    // Terminated: NotReady, then killed (no more posts) and gone from the cloud → deleted.
    stack
        .kubectl(&[
            "annotate",
            "node",
            "sim-node-2",
            "sim.rkcm.io/condition.Ready=False",
        ])
        .await;
    stack
        .wait("sim-node-2 NotReady", || async {
            let node = nodes.get("sim-node-2").await?;
            Ok((condition(&node, "Ready").map(|c| c.0) == Some("False".into())).then_some(()))
        })
        .await;
    stack
        .kubectl(&[
            "annotate",
            "node",
            "sim-node-2",
            "sim.rkcm.io/killed=true",
            "sim.rkcm.io/instance=terminated",
        ])
        .await;
    stack
        .wait("sim-node-2 to be deleted", || async {
            Ok(nodes.get_opt("sim-node-2").await?.is_none().then_some(()))
        })
        .await;
    let deleting = events(&stack, "default", "Node", "sim-node-2", "DeletingNode").await;
    assert_eq!(
        deleting.first().map(|e| e.0.as_str()),
        Some("Deleting node sim-node-2 because it does not exist in the cloud provider")
    );
    assert!(
        nodes.get_opt("sim-node-0").await.unwrap().is_some(),
        "healthy nodes stay"
    );
}

/// WO-S2 check 10: `external` skips the three, an in-tree provider exits 1, none warns and
/// leaves LoadBalancer Services alone.
#[tokio::test]
async fn cloud_provider_flag_semantics() {
    // An in-tree provider, refused while DisableCloudProviders is on (its 1.29 default).
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("run");
    let out = tokio::process::Command::new(RKCM)
        .arg("launcher")
        .args([
            "--runtime-dir",
            runtime.to_str().unwrap(),
            "--secure-port",
            "0",
        ])
        .arg("--cloud-provider=gce")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cloud provider \"gce\" was specified, but built-in cloud providers are disabled. Please set --cloud-provider=external and migrate to an external cloud provider"),
        "{stderr}"
    );
    // A name nobody knows.
    let out = tokio::process::Command::new(RKCM)
        .arg("launcher")
        .args([
            "--runtime-dir",
            runtime.to_str().unwrap(),
            "--secure-port",
            "0",
        ])
        .arg("--cloud-provider=nope")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cloud provider could not be initialized: unknown cloud provider \"nope\""),
        "{stderr}"
    );

    // external: the three cloud controllers are skipped.
    let external = LauncherStack::start(&["--cloud-provider=external"]).await;
    external
        .wait("three cloud controllers skipped", || async {
            let log = external.log();
            let skipped = [
                "service-lb-controller",
                "node-route-controller",
                "cloud-node-lifecycle-controller",
            ]
            .iter()
            .all(|name| {
                log.lines()
                    .any(|l| l.contains("Skipping a cloud provider controller") && l.contains(name))
            });
            Ok(skipped.then_some(()))
        })
        .await;
    drop(external);

    // None: service-lb says LoadBalancer Services will fail and leaves them alone.
    let stack = LauncherStack::start(&["--controllers=service-lb-controller,serviceaccount"]).await;
    stack
        .wait("the no-cloud warning", || async {
            Ok(stack
                .log()
                .contains(
                    "WARNING: no cloud provider provided, services of type LoadBalancer will fail",
                )
                .then_some(()))
        })
        .await;
    let ns = stack.namespace("cloud-none").await;
    stack
        .kubectl_stdin(&["apply", "-f", "-"], &lb_service(&ns))
        .await;
    // With the sim cloud the finalizer comes within a second; here none in 10 s.
    let finalized = rkcm_conformance::wait_for("a finalizer", Duration::from_secs(10), || async {
        Ok(service(&stack, &ns).await.filter(has_finalizer).map(|_| ()))
    })
    .await;
    assert!(
        finalized.is_err(),
        "a LoadBalancer Service got the finalizer without a cloud"
    );
    let svc: Value = serde_json::from_str(
        &stack
            .kubectl(&["get", "service", "web", "-n", &ns, "-o", "json"])
            .await,
    )
    .unwrap();
    assert!(svc["metadata"]["finalizers"].is_null(), "{svc}");
    assert!(svc["status"]["loadBalancer"]["ingress"].is_null(), "{svc}");
}

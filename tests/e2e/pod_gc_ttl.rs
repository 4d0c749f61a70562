//! End-to-end tests of the pod garbage collector and the TTL controller: kube-sim (or the
//! cluster `RKCM_TEST_KUBECONFIG` names), the launcher with its informer-server and worker as
//! separate processes, and node-sim nodes. Covers an orphaned pod (marked Failed with
//! DisruptionTarget after the 40 s quarantine), an unscheduled pod deleted while a
//! finalizer holds it, the terminated-pod threshold (`--terminated-pod-gc-threshold=3`),
//! a pod stuck Terminating on a partitioned, out-of-service node (kube-sim only), and the
//! `node.alpha.kubernetes.io/ttl` annotation, including the step past 100 nodes (kube-sim
//! only: a second node-sim brings 100 more).

mod common;

use std::time::{Duration, Instant};

use common::{
    fast_heartbeat_nodes, metric_sum, simulated_nodes_with, ControllerStack, LauncherStack,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use rkcm_conformance::{wait_for, TestCluster};

const TTL: &str = "node.alpha.kubernetes.io/ttl";
/// Holds a pod after its deletion, so the test sees what the collector did to it.
const HOLD: &str = "example.com/hold";
/// A pass every 20 s: what a step may take, with room for a loaded machine.
const PASS_WAIT: Duration = Duration::from_secs(30);

struct Stack {
    inner: LauncherStack,
}

impl std::ops::Deref for Stack {
    type Target = LauncherStack;
    fn deref(&self) -> &LauncherStack {
        &self.inner
    }
}

impl Stack {
    /// The cluster and a launcher with `args` (plus `sim_args` on kube-sim: node-lifecycle
    /// with a grace period only node-sim's fast heartbeats meet), and (kube-sim only)
    /// node-sim with `nodes`, when given.
    async fn start(
        args: &[&str],
        sim_args: &[&str],
        nodes: Option<kube_sim::nodesim::NodeSimConfig>,
    ) -> Stack {
        let cluster = TestCluster::start().await.unwrap();
        let mut args = args.to_vec();
        if cluster.sim.is_some() {
            args.extend_from_slice(sim_args);
        }
        Stack {
            inner: LauncherStack::start_with_nodes(cluster, &args, nodes).await,
        }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.cluster.client.clone(), namespace)
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.cluster.client.clone())
    }

    async fn create_pod(&self, namespace: &str, manifest: serde_json::Value) {
        let pod: Pod = serde_json::from_value(manifest).unwrap_or_else(|e| self.fail(e));
        if let Err(error) = self
            .pods(namespace)
            .create(&PostParams::default(), &pod)
            .await
        {
            self.fail(format!("creating pod {:?}: {error}", pod.metadata.name));
        }
    }

    async fn release(&self, namespace: &str, name: &str) {
        self.kubectl(&[
            "patch",
            "pod",
            name,
            "-n",
            namespace,
            "--type=json",
            "-p",
            r#"[{"op": "remove", "path": "/metadata/finalizers"}]"#,
        ])
        .await;
        let pods = self.pods(namespace);
        self.wait(
            &format!("pod {namespace}/{name} gone once released"),
            || {
                let pods = pods.clone();
                async move { Ok(pods.get_opt(name).await?.is_none().then_some(())) }
            },
        )
        .await;
    }

    /// The worker's `pod_gc_collector_force_delete_pods_total{namespace, reason}`.
    async fn force_deletions(&self, namespace: &str, reason: &str) -> anyhow::Result<f64> {
        self.counter(
            "pod_gc_collector_force_delete_pods_total",
            namespace,
            reason,
        )
        .await
    }

    /// The value of a counter of the worker, by namespace and reason (0 when absent).
    async fn counter(&self, metric: &str, namespace: &str, reason: &str) -> anyhow::Result<f64> {
        let text = self.inner.launcher.metrics().await?;
        Ok(metric_sum(
            &text,
            metric,
            &[("namespace", namespace), ("reason", reason)],
        )
        .unwrap_or(0.0))
    }

    async fn wait_force_deletions(&self, namespace: &str, reason: &str) {
        self.wait(
            &format!("pod_gc_collector_force_delete_pods_total{{reason=\"{reason}\"}} >= 1"),
            || async move { Ok((self.force_deletions(namespace, reason).await? >= 1.0).then_some(())) },
        )
        .await;
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn ttl(node: &Node) -> Option<String> {
    node.metadata.annotations.as_ref()?.get(TTL).cloned()
}

fn name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// node-lifecycle on kube-sim: it lifts the API server's startup taint (so pods schedule)
/// and marks a partitioned node NotReady within seconds.
const FAST_NODE_LIFECYCLE: &[&str] = &[
    "--controllers",
    "nodelifecycle",
    "--node-monitor-period=1s",
    "--node-monitor-grace-period=4s",
    "--node-startup-grace-period=3s",
];

/// Three nodes with fast heartbeats (for node-lifecycle's short grace period).
fn fast_nodes() -> kube_sim::nodesim::NodeSimConfig {
    fast_heartbeat_nodes(3)
}

/// A pod that runs nothing of its own: no API token, one container.
fn pod(name: &str, spec: serde_json::Value, finalizers: &[&str]) -> serde_json::Value {
    let mut spec = spec;
    spec["automountServiceAccountToken"] = serde_json::json!(false);
    spec["terminationGracePeriodSeconds"] = serde_json::json!(30);
    if spec.get("containers").is_none() {
        spec["containers"] =
            serde_json::json!([{"name": "c", "image": "registry.k8s.io/pause:3.9"}]);
    }
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "finalizers": finalizers}, "spec": spec})
}

/// WO-Q 6: a pod bound to a node that does not exist is marked Failed with
/// DisruptionTarget once the node has been missing for the 40 s quarantine, then deleted.
#[tokio::test]
async fn an_orphaned_pod_is_marked_failed_then_deleted() {
    let s = Stack::start(&["--controllers", "podgc"], &[], None).await;
    let ns = s.namespace_with_account("orphan").await;
    let started = Instant::now();
    s.create_pod(
        &ns,
        pod("orphan", serde_json::json!({"nodeName": "ghost"}), &[HOLD]),
    )
    .await;
    let pods = s.pods(&ns);
    let orphan = s
        .wait(
            "the orphan Failed, with DisruptionTarget and a deletionTimestamp",
            || {
                let pods = pods.clone();
                async move {
                    let pod = pods.get("orphan").await?;
                    Ok(
                        (phase(&pod) == "Failed" && pod.metadata.deletion_timestamp.is_some())
                            .then_some(pod),
                    )
                }
            },
        )
        .await;
    println!(
        "the orphan was force-deleted {:?} after its creation",
        started.elapsed()
    );
    let condition = orphan
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionTarget"))
        .cloned()
        .unwrap_or_else(|| s.fail(format!("no DisruptionTarget: {:?}", orphan.status)));
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason.as_deref(), Some("DeletionByPodGC"));
    assert_eq!(
        condition.message.as_deref(),
        Some("PodGC: node no longer exists")
    );
    assert!(condition.last_transition_time.is_some());
    s.wait_force_deletions(&ns, "orphaned").await;
    s.release(&ns, "orphan").await;
    s.cluster.cleanup().await;
}

/// WO-Q 7: an unscheduled pod deleted while a finalizer holds it turns Failed; of six
/// finished pods only the three newest remain (the threshold counts terminated pods
/// across the whole cluster: on a real one, start from a clean cluster).
#[tokio::test]
async fn unscheduled_and_terminated_pods() {
    let s = Stack::start(
        &["--controllers", "podgc", "--terminated-pod-gc-threshold=3"],
        FAST_NODE_LIFECYCLE,
        Some(fast_nodes()),
    )
    .await;
    if s.nodes.is_none() {
        println!("note: the terminated-pod threshold counts every finished pod of this cluster");
    }
    let ns = s.namespace_with_account("podgc").await;
    let pods = s.pods(&ns);

    s.create_pod(
        &ns,
        pod(
            "unschedulable",
            serde_json::json!({"nodeSelector": {"example.com/no-such-node": "true"}}),
            &[HOLD],
        ),
    )
    .await;
    s.kubectl(&["delete", "pod", "unschedulable", "-n", &ns, "--wait=false"])
        .await;
    let deleted = Instant::now();
    s.wait_within(
        "the unscheduled pod being deleted Failed",
        PASS_WAIT,
        || {
            let pods = pods.clone();
            async move {
                let pod = pods.get("unschedulable").await?;
                Ok(
                    (phase(&pod) == "Failed" && pod.metadata.deletion_timestamp.is_some())
                        .then_some(()),
                )
            }
        },
    )
    .await;
    println!(
        "the unscheduled pod was Failed {:?} after its deletion",
        deleted.elapsed()
    );
    s.wait_force_deletions(&ns, "unscheduled").await;
    s.release(&ns, "unschedulable").await;

    // Six pods that finish at once (node-sim's exit-after; `true` on a real kubelet),
    // created in name order, so the oldest are done-1..3.
    for i in 1..=6 {
        s.create_pod(
            &ns,
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("done-{i}"),
                    "annotations": {"sim.rkcm.io/exit-after": "1s"}},
                "spec": {"restartPolicy": "Never", "automountServiceAccountToken": false,
                    "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}]}}),
        )
        .await;
    }
    let created = Instant::now();
    let remaining = s
        .wait("only the 3 newest finished pods left", || {
            let pods = pods.clone();
            async move {
                let list = pods.list(&ListParams::default()).await?;
                let mut left: Vec<(String, String)> = list
                    .items
                    .iter()
                    .map(|p| {
                        (
                            p.metadata.name.clone().unwrap_or_default(),
                            phase(p).to_string(),
                        )
                    })
                    .collect();
                left.sort();
                let want = ["done-4", "done-5", "done-6"];
                if left.len() == 3
                    && left
                        .iter()
                        .zip(want)
                        .all(|((name, phase), want)| name == want && phase == "Succeeded")
                {
                    return Ok(Some(left));
                }
                anyhow::bail!("pods left: {left:?}")
            }
        })
        .await;
    println!(
        "terminated pods down to {remaining:?} {:?} after their creation",
        created.elapsed()
    );
    assert!(
        s.force_deletions(&ns, "terminated").await.unwrap_or(0.0) >= 3.0,
        "three terminated pods counted"
    );
    s.cluster.cleanup().await;
}

/// WO-Q 8: a pod stuck Terminating on a partitioned node is force-deleted once the node
/// (NotReady for node-lifecycle) carries the out-of-service taint: marked Failed, then
/// deleted with no grace. A finalizer holds it so the test sees both. kube-sim only: it
/// needs node-sim's partition fault.
#[tokio::test]
async fn a_pod_terminating_on_an_out_of_service_node_is_force_deleted() {
    let s = Stack::start(
        &["--controllers", "podgc"],
        FAST_NODE_LIFECYCLE,
        Some(fast_nodes()),
    )
    .await;
    let Some(sim) = s.nodes.as_ref() else {
        println!("skipped on a real cluster: the partition fault needs kube-sim's node-sim");
        return;
    };
    let ns = s.namespace_with_account("oos").await;
    let pods = s.pods(&ns);
    s.create_pod(
        &ns,
        pod(
            "stuck",
            serde_json::json!({"nodeName": "sim-node-2"}),
            &[HOLD],
        ),
    )
    .await;
    s.wait("the pod running on sim-node-2", || {
        let pods = pods.clone();
        async move { Ok((phase(&pods.get("stuck").await?) == "Running").then_some(())) }
    })
    .await;
    s.kubectl(&[
        "annotate",
        "node",
        "sim-node-2",
        "sim.rkcm.io/heartbeat=partitioned",
    ])
    .await;
    s.wait("node-sim partitioning sim-node-2", || async move {
        Ok(sim.faults("sim-node-2").partitioned.then_some(()))
    })
    .await;
    s.kubectl(&["delete", "pod", "stuck", "-n", &ns, "--wait=false"])
        .await;
    let nodes = s.nodes();
    s.wait("the partitioned node no longer Ready", || {
        let nodes = nodes.clone();
        async move {
            let node = nodes.get("sim-node-2").await?;
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.status.clone());
            Ok((ready.as_deref() != Some("True")).then_some(()))
        }
    })
    .await;
    let stuck = pods.get("stuck").await.unwrap_or_else(|e| s.fail(e));
    assert!(
        stuck.metadata.deletion_timestamp.is_some() && phase(&stuck) == "Running",
        "the pod is stuck Terminating: {:?} {:?}",
        stuck.metadata.deletion_timestamp,
        phase(&stuck)
    );
    s.kubectl(&[
        "taint",
        "node",
        "sim-node-2",
        "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
    ])
    .await;
    let tainted = Instant::now();
    s.wait_within(
        "the pod on the out-of-service node force-deleted (Failed, counted)",
        PASS_WAIT,
        || {
            let pods = pods.clone();
            let ns = ns.clone();
            let s = &s;
            async move {
                let failed = phase(&pods.get("stuck").await?) == "Failed";
                let counted = s.force_deletions(&ns, "out-of-service").await? >= 1.0;
                Ok((failed && counted).then_some(()))
            }
        },
    )
    .await;
    println!(
        "the pod was force-deleted {:?} after the taint",
        tainted.elapsed()
    );
    let errors = s
        .counter(
            "pod_gc_collector_force_delete_pod_errors_total",
            &ns,
            "out-of-service",
        )
        .await
        .unwrap_or_else(|e| s.fail(e));
    assert_eq!(errors, 0.0, "no failed forced deletion");
    s.release(&ns, "stuck").await;
}

/// WO-Q 9: every node carries `node.alpha.kubernetes.io/ttl: "0"` while there are at most
/// 100, an overwritten value is put back, and (kube-sim only) past 100 nodes new and
/// updated nodes carry `"15"`, and below 90 an update brings `"0"` back.
#[tokio::test]
async fn nodes_carry_the_ttl_of_the_cluster_size() {
    let s = Stack::start(
        &["--controllers", "ttl"],
        &[],
        Some(kube_sim::nodesim::NodeSimConfig {
            nodes: 3,
            start_delay: Duration::from_millis(100),
            ..Default::default()
        }),
    )
    .await;
    let nodes = s.nodes();
    let first = s
        .wait("every node with ttl 0", || {
            let nodes = nodes.clone();
            let expected = if s.nodes.is_some() { 3 } else { 1 };
            async move {
                let list = nodes.list(&ListParams::default()).await?;
                Ok((list.items.len() >= expected
                    && list.items.iter().all(|n| ttl(n).as_deref() == Some("0")))
                .then(|| name(&list.items[0])))
            }
        })
        .await;
    let wait_ttl = |node: String, want: &'static str, within: Duration| {
        let nodes = nodes.clone();
        let s = &s;
        async move {
            s.wait_within(&format!("ttl {want} on node {node}"), within, || {
                let nodes = nodes.clone();
                let node = node.clone();
                async move { Ok((ttl(&nodes.get(&node).await?).as_deref() == Some(want)).then_some(())) }
            })
            .await
        }
    };

    if s.cluster.sim.is_some() {
        // node-sim registers its nodes with the annotation, as the test must not rely on:
        // a bare Node shows the controller setting it.
        let bare = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ttl-bare"}}"#;
        if let Err(error) = s.cluster.kubectl_stdin(&["create", "-f", "-"], bare).await {
            s.fail(format!("{error:#}"));
        }
        wait_ttl("ttl-bare".into(), "0", Duration::from_secs(5)).await;
        s.kubectl(&["delete", "node", "ttl-bare"]).await;
    }

    for value in ["99", "x"] {
        s.kubectl(&[
            "annotate",
            "node",
            &first,
            &format!("{TTL}={value}"),
            "--overwrite",
        ])
        .await;
        let overwritten = Instant::now();
        wait_ttl(first.clone(), "0", Duration::from_secs(2)).await;
        println!("{value:?} put back to 0 in {:?}", overwritten.elapsed());
    }

    let Some(_) = s.cluster.sim_only("100 more nodes from a second node-sim") else {
        return;
    };
    let started = Instant::now();
    let extras = simulated_nodes_with(
        &s.cluster,
        kube_sim::nodesim::NodeSimConfig {
            nodes: 100,
            name_prefix: "extra-".into(),
            scheduler: false,
            events: false,
            // Registered once; no status updates to speak of during the test.
            lease_renew_interval: Duration::from_secs(60),
            node_status_update_frequency: Duration::from_secs(60),
            ..Default::default()
        },
    )
    .await
    .expect("node-sim on kube-sim");
    let fifteen = s
        .wait("103 nodes, the newest with ttl 15", || {
            let nodes = nodes.clone();
            async move {
                let list = nodes.list(&ListParams::default()).await?;
                let fifteen = list
                    .items
                    .iter()
                    .filter(|n| ttl(n).as_deref() == Some("15"))
                    .count();
                Ok((list.items.len() == 103 && fifteen >= 3).then_some(fifteen))
            }
        })
        .await;
    println!(
        "103 nodes, {fifteen} with ttl 15, {:?} after the extras started",
        started.elapsed()
    );
    s.kubectl(&["annotate", "node", &first, "touch=1"]).await;
    wait_ttl(first.clone(), "15", Duration::from_secs(5)).await;

    // The extras go: node-sim stopped first (it would register them again), then deleted.
    extras.stop();
    s.kubectl(&["delete", "nodes", "-l", "sim.rkcm.io/node-sim=extra"])
        .await;
    s.wait("3 nodes again", || {
        let nodes = nodes.clone();
        async move { Ok((nodes.list(&ListParams::default()).await?.items.len() == 3).then_some(())) }
    })
    .await;
    // The worker's node stream may lag the API server by a moment: an update it handles
    // before it has counted the deletions still gets 15, so touch until one comes after.
    let mut touch = 1;
    s.wait("ttl 0 on an update below 90 nodes", || {
        touch += 1;
        let touch = format!("touch={touch}");
        let nodes = nodes.clone();
        let first = first.clone();
        let s = &s;
        async move {
            s.kubectl(&["annotate", "node", &first, &touch, "--overwrite"])
                .await;
            // Time for the update to reach the worker and its patch to come back.
            let back =
                wait_for("ttl 0 after the touch", Duration::from_secs(1), || {
                    let nodes = nodes.clone();
                    let first = first.clone();
                    async move {
                        Ok((ttl(&nodes.get(&first).await?).as_deref() == Some("0")).then_some(()))
                    }
                })
                .await;
            Ok(back.ok())
        }
    })
    .await;
    println!("ttl 0 again after {} touch(es)", touch - 1);
    println!("the ttl step up and down took {:?}", started.elapsed());
}

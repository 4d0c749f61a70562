//! End-to-end tests of the node-lifecycle and taint-eviction controllers: kube-sim, the
//! launcher with its informer-server and worker as separate processes, and node-sim nodes
//! that only report (they never touch taints): the startup taint, cordon and pressure
//! taints, a never-posted node, a partition with its evictions and recovery, the split
//! controller, the per-zone eviction rate limit and the all-nodes-down mode. Short flags (grace 4 s, monitor period 1 s, node-sim
//! heartbeats every second) keep each test to seconds.

mod common;

use std::time::Duration;

use common::{fast_heartbeat_nodes, metric_sum, sim_cluster, ControllerStack, LauncherStack};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};

const FAST: &[&str] = &[
    "--node-monitor-period=1s",
    "--node-monitor-grace-period=4s",
    "--node-startup-grace-period=3s",
];

/// The stack and how many nodes it has.
struct Stack(LauncherStack, usize);

impl std::ops::Deref for Stack {
    type Target = LauncherStack;
    fn deref(&self) -> &LauncherStack {
        &self.0
    }
}

impl Stack {
    /// A kube-sim cluster with three fast-heartbeating nodes and the launcher running
    /// `controllers`; `None` on a real cluster (the tests partition nodes with node-sim's
    /// faults).
    async fn start(controllers: &str) -> Option<Stack> {
        Self::start_nodes(controllers, 3).await
    }

    /// [`Stack::start`] with `count` nodes (zones a, b, c round robin).
    async fn start_nodes(controllers: &str, count: usize) -> Option<Stack> {
        let cluster = sim_cluster("node-sim faults need kube-sim").await?;
        // The pods' kube-api-access volume needs the root-ca publisher's ConfigMap.
        let controllers = format!("{controllers},root-ca-cert-publisher");
        let mut args = vec!["--controllers", controllers.as_str()];
        args.extend_from_slice(FAST);
        let nodes = fast_heartbeat_nodes(count);
        Some(Stack(
            LauncherStack::start_with_nodes(cluster, &args, Some(nodes)).await,
            count,
        ))
    }

    /// Checks `check` keeps holding for `period` (polled every 200 ms).
    async fn holds_for<F, Fut>(&self, what: &str, period: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<Option<String>>>,
    {
        let deadline = tokio::time::Instant::now() + period;
        while tokio::time::Instant::now() < deadline {
            match check().await {
                Ok(None) => {}
                Ok(Some(broken)) => self.fail(format!("{what}: {broken}")),
                Err(error) => self.fail(format!("{what}: {error:#}")),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.cluster.client.clone())
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.cluster.client.clone(), namespace)
    }

    /// A pause pod bound to `node`, tolerating `unreachable` and `not-ready` NoExecute
    /// for `seconds` (`None`: for ever).
    async fn pod_on(&self, namespace: &str, name: &str, node: &str, seconds: Option<i64>) {
        let seconds = seconds
            .map(|s| format!(", \"tolerationSeconds\": {s}"))
            .unwrap_or_default();
        let manifest = format!(
            r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "{namespace}"}},
  "spec": {{"nodeName": "{node}", "containers": [{{"name": "c", "image": "registry.k8s.io/pause:3.9"}}],
    "tolerations": [
      {{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"{seconds}}},
      {{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"{seconds}}}]}}}}"#
        );
        if let Err(error) = self
            .cluster
            .kubectl_stdin(&["create", "-f", "-"], &manifest)
            .await
        {
            self.fail(format!("{error:#}"));
        }
        let pods = self.pods(namespace);
        let key = format!("{namespace}/{name}");
        self.wait(&format!("pod {key} running and ready"), || {
            let pods = pods.clone();
            let name = name.to_string();
            async move { Ok(pods.get_opt(&name).await?.filter(is_ready).map(|_| ())) }
        })
        .await;
    }

    async fn all_nodes_untainted(&self) {
        let nodes = self.nodes();
        let count = self.1;
        self.wait(
            "every node Ready without taints (the startup taint lifted)",
            || {
                let nodes = nodes.clone();
                async move {
                    let list = nodes.list(&ListParams::default()).await?;
                    Ok((list.items.len() == count
                        && list.items.iter().all(|n| {
                            ready_status(n).as_deref() == Some("True") && taints(n).is_empty()
                        }))
                    .then_some(()))
                }
            },
        )
        .await;
    }

    async fn events(&self, namespace: &str, object: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.cluster.client.clone(), namespace);
        events
            .list(&ListParams::default().fields(&format!("involvedObject.name={object}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    async fn wait_event(&self, namespace: &str, object: &str, reason: &str, message: &str) {
        self.wait(
            &format!("a {reason} event on {object}: {message}"),
            || async move {
                Ok(self
                    .events(namespace, object)
                    .await
                    .into_iter()
                    .any(|e| {
                        e.reason.as_deref() == Some(reason)
                            && e.message.as_deref().is_some_and(|m| m.contains(message))
                    })
                    .then_some(()))
            },
        )
        .await;
    }
}

fn taints(node: &Node) -> Vec<String> {
    let mut taints: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    taints.sort();
    taints
}

fn condition(node: &Node, type_: &str) -> Option<k8s_openapi::api::core::v1::NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

fn ready_status(node: &Node) -> Option<String> {
    condition(node, "Ready").map(|c| c.status)
}

fn is_ready(pod: &Pod) -> bool {
    pod_condition(pod, "Ready").as_deref() == Some("True")
}

fn pod_condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

fn evicted(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

#[tokio::test]
async fn startup_cordon_pressure_labels_and_a_never_posted_node() {
    let Some(s) = Stack::start("nodelifecycle").await else {
        return;
    };
    s.all_nodes_untainted().await;
    let nodes = s.nodes();

    s.kubectl(&[
        "label",
        "node",
        "sim-node-0",
        "beta.kubernetes.io/arch=arm64",
        "--overwrite",
    ])
    .await;
    s.wait("beta.kubernetes.io/arch set back to amd64", || {
        let nodes = nodes.clone();
        async move {
            let node = nodes.get("sim-node-0").await?;
            Ok((node
                .metadata
                .labels
                .unwrap_or_default()
                .get("beta.kubernetes.io/arch")
                == Some(&"amd64".to_string()))
            .then_some(()))
        }
    })
    .await;

    s.kubectl(&["cordon", "sim-node-1"]).await;
    let want_taints = |name: &'static str, want: Vec<&'static str>| {
        let nodes = nodes.clone();
        move || {
            let nodes = nodes.clone();
            let want = want.clone();
            async move { Ok((taints(&nodes.get(name).await?) == want).then_some(())) }
        }
    };
    s.wait(
        "the unschedulable taint on a cordoned node",
        want_taints(
            "sim-node-1",
            vec!["node.kubernetes.io/unschedulable:NoSchedule"],
        ),
    )
    .await;
    s.kubectl(&["uncordon", "sim-node-1"]).await;
    s.wait(
        "no taint once uncordoned",
        want_taints("sim-node-1", vec![]),
    )
    .await;

    s.kubectl(&[
        "annotate",
        "node",
        "sim-node-1",
        "sim.rkcm.io/condition.MemoryPressure=True",
    ])
    .await;
    s.wait(
        "only the memory-pressure taint under memory pressure",
        want_taints(
            "sim-node-1",
            vec!["node.kubernetes.io/memory-pressure:NoSchedule"],
        ),
    )
    .await;
    s.kubectl(&[
        "annotate",
        "node",
        "sim-node-1",
        "sim.rkcm.io/condition.MemoryPressure=False",
        "--overwrite",
    ])
    .await;
    s.wait(
        "the memory-pressure taint gone",
        want_taints("sim-node-1", vec![]),
    )
    .await;

    // A Node no kubelet runs: nothing ever posts its status or renews a Lease.
    let ghost = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ghost-0",
        "labels": {"topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/region": "sim-region"}}}"#;
    if let Err(error) = s.cluster.kubectl_stdin(&["create", "-f", "-"], ghost).await {
        s.fail(format!("{error:#}"));
    }
    let node = s
        .wait(
            "the never-posted node Unknown with both unreachable taints",
            || {
                let nodes = nodes.clone();
                async move {
                    let node = nodes.get("ghost-0").await?;
                    Ok((taints(&node)
                        == vec![
                            "node.kubernetes.io/unreachable:NoExecute",
                            "node.kubernetes.io/unreachable:NoSchedule",
                        ])
                    .then_some(node))
                }
            },
        )
        .await;
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let c = condition(&node, type_).unwrap_or_else(|| s.fail(format!("no {type_} condition")));
        assert_eq!(c.status, "Unknown", "{type_}");
        assert_eq!(
            c.reason.as_deref(),
            Some("NodeStatusNeverUpdated"),
            "{type_}"
        );
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet never posted node status.")
        );
    }
    assert!(
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .all(|t| t.time_added.is_some()),
        "the controller's taints carry timeAdded: {:?}",
        node.spec
    );
    s.wait_event(
        "default",
        "ghost-0",
        "RegisteredNode",
        "Registered Node ghost-0 in Controller",
    )
    .await;
}

#[tokio::test]
async fn a_partition_marks_pods_evicts_in_order_and_recovery_cancels() {
    let Some(s) = Stack::start("nodelifecycle,taint-eviction-controller").await else {
        return;
    };
    s.all_nodes_untainted().await;
    let ns = s.namespace_with_account("partition").await;
    s.pod_on(&ns, "now", "sim-node-2", Some(0)).await;
    s.pod_on(&ns, "after-5s", "sim-node-2", Some(5)).await;
    s.pod_on(&ns, "for-ever", "sim-node-2", None).await;
    s.pod_on(&ns, "after-120s", "sim-node-2", Some(120)).await;
    s.pod_on(&ns, "elsewhere", "sim-node-0", Some(0)).await;

    s.kubectl(&[
        "annotate",
        "node",
        "sim-node-2",
        "sim.rkcm.io/heartbeat=partitioned",
    ])
    .await;
    let nodes = s.nodes();
    let node = s
        .wait(
            "the partitioned node Unknown with both unreachable taints",
            || {
                let nodes = nodes.clone();
                async move {
                    let node = nodes.get("sim-node-2").await?;
                    Ok((taints(&node)
                        == vec![
                            "node.kubernetes.io/unreachable:NoExecute",
                            "node.kubernetes.io/unreachable:NoSchedule",
                        ])
                    .then_some(node))
                }
            },
        )
        .await;
    let ready = condition(&node, "Ready").unwrap_or_else(|| s.fail("no Ready condition"));
    assert_eq!(ready.status, "Unknown");
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(
        ready.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    s.wait_event(
        "default",
        "sim-node-2",
        "NodeNotReady",
        "status is now: NodeNotReady",
    )
    .await;

    let pods = s.pods(&ns);
    let now = s
        .wait("the pod tolerating 0 s evicted", || {
            let pods = pods.clone();
            async move { Ok(pods.get_opt("now").await?.filter(evicted)) }
        })
        .await;
    let later = s
        .wait("the pod tolerating 5 s evicted", || {
            let pods = pods.clone();
            async move { Ok(pods.get_opt("after-5s").await?.filter(evicted)) }
        })
        .await;
    assert!(
        later.metadata.deletion_timestamp > now.metadata.deletion_timestamp,
        "the pod tolerating 5 s goes after the one tolerating 0 s: {:?} vs {:?}",
        later.metadata.deletion_timestamp,
        now.metadata.deletion_timestamp
    );
    let disruption = later
        .status
        .as_ref()
        .and_then(|st| st.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
        .cloned()
        .unwrap_or_else(|| s.fail("no DisruptionTarget condition"));
    assert_eq!(disruption.status, "True");
    assert_eq!(disruption.reason.as_deref(), Some("DeletionByTaintManager"));
    s.wait_event(
        &ns,
        "after-5s",
        "TaintManagerEviction",
        &format!("Marking for deletion Pod {ns}/after-5s"),
    )
    .await;
    for name in ["for-ever", "after-120s"] {
        let pod = pods
            .get(name)
            .await
            .unwrap_or_else(|e| s.fail(format!("{e}")));
        assert!(!evicted(&pod), "{name} tolerates the taint longer");
        assert_eq!(
            pod_condition(&pod, "Ready").as_deref(),
            Some("False"),
            "{name}: the pods of a node that is not Ready are not Ready"
        );
    }
    s.wait_event(&ns, "for-ever", "NodeNotReady", "Node is not ready")
        .await;
    let elsewhere = pods
        .get("elsewhere")
        .await
        .unwrap_or_else(|e| s.fail(format!("{e}")));
    assert!(
        !evicted(&elsewhere) && is_ready(&elsewhere),
        "pods on healthy nodes are left alone"
    );

    s.kubectl(&["annotate", "node", "sim-node-2", "sim.rkcm.io/heartbeat-"])
        .await;
    s.wait("the node Ready again without taints", || {
        let nodes = nodes.clone();
        async move {
            let node = nodes.get("sim-node-2").await?;
            Ok(
                (ready_status(&node).as_deref() == Some("True") && taints(&node).is_empty())
                    .then_some(()),
            )
        }
    })
    .await;
    s.wait_event(
        &ns,
        "after-120s",
        "TaintManagerEviction",
        &format!("Cancelling deletion of Pod {ns}/after-120s"),
    )
    .await;
    s.wait(
        "the surviving pods Ready again (node-sim's full report)",
        || {
            let pods = pods.clone();
            async move {
                let a = pods.get("for-ever").await?;
                let b = pods.get("after-120s").await?;
                Ok((is_ready(&a) && is_ready(&b) && !evicted(&b)).then_some(()))
            }
        },
    )
    .await;
}

#[tokio::test]
async fn without_the_taint_eviction_controller_nodes_are_tainted_but_nothing_is_evicted() {
    let Some(s) = Stack::start("*,-taint-eviction-controller").await else {
        return;
    };
    s.all_nodes_untainted().await;
    let ns = s.namespace_with_account("split").await;
    s.pod_on(&ns, "now", "sim-node-2", Some(0)).await;
    s.kubectl(&[
        "annotate",
        "node",
        "sim-node-2",
        "sim.rkcm.io/heartbeat=partitioned",
    ])
    .await;
    let nodes = s.nodes();
    s.wait("the unreachable NoExecute taint", || {
        let nodes = nodes.clone();
        async move {
            Ok(taints(&nodes.get("sim-node-2").await?)
                .contains(&"node.kubernetes.io/unreachable:NoExecute".to_string())
                .then_some(()))
        }
    })
    .await;
    let pods = s.pods(&ns);
    s.holds_for("the pod is not evicted", Duration::from_secs(5), || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("now").await?;
            Ok(evicted(&pod).then(|| "it has a deletionTimestamp".to_string()))
        }
    })
    .await;
}

#[tokio::test]
async fn when_every_node_is_down_no_node_keeps_a_no_execute_taint() {
    let Some(s) = Stack::start("nodelifecycle,taint-eviction-controller").await else {
        return;
    };
    s.all_nodes_untainted().await;
    let ns = s.namespace_with_account("disruption").await;
    s.pod_on(&ns, "tolerates-60s", "sim-node-1", Some(60)).await;
    s.kubectl(&[
        "annotate",
        "nodes",
        "--all",
        "sim.rkcm.io/heartbeat=partitioned",
    ])
    .await;
    let nodes = s.nodes();
    let no_execute = |list: &[Node]| {
        list.iter()
            .flat_map(taints)
            .filter(|t| t.ends_with(":NoExecute"))
            .collect::<Vec<_>>()
    };
    s.wait("every node Unknown and none with a NoExecute taint", || {
        let nodes = nodes.clone();
        async move {
            let list = nodes.list(&ListParams::default()).await?.items;
            let all_unknown = list
                .iter()
                .all(|n| ready_status(n).as_deref() == Some("Unknown"));
            Ok((all_unknown && no_execute(&list).is_empty()).then_some(()))
        }
    })
    .await;
    let pods = s.pods(&ns);
    s.holds_for(
        "no NoExecute taint and no eviction while every node is down",
        Duration::from_secs(6),
        || {
            let nodes = nodes.clone();
            let pods = pods.clone();
            async move {
                let list = nodes.list(&ListParams::default()).await?.items;
                let tainted = no_execute(&list);
                if !tainted.is_empty() {
                    return Ok(Some(format!("NoExecute taints {tainted:?}")));
                }
                let pod = pods.get("tolerates-60s").await?;
                Ok(evicted(&pod).then(|| "the pod was evicted".to_string()))
            }
        },
    )
    .await;
}

/// WO-N check 7: two partitioned nodes of one zone are tainted NoExecute one eviction
/// period apart (`--node-eviction-rate` 0.1: one node per 10 s per zone), and the zone's
/// `node_collector_evictions_total` counts both.
#[tokio::test]
async fn evictions_in_a_zone_are_rate_limited() {
    let Some(s) = Stack::start_nodes("nodelifecycle,taint-eviction-controller", 6).await else {
        return;
    };
    s.all_nodes_untainted().await;
    // sim-node-0 and sim-node-3 are zone-a's only nodes.
    for node in ["sim-node-0", "sim-node-3"] {
        s.kubectl(&[
            "annotate",
            "node",
            node,
            "sim.rkcm.io/heartbeat=partitioned",
        ])
        .await;
    }
    let nodes = s.nodes();
    let added = s
        .wait("both zone-a nodes tainted unreachable:NoExecute", || {
            let nodes = nodes.clone();
            async move {
                let mut added = Vec::new();
                for name in ["sim-node-0", "sim-node-3"] {
                    let node = nodes.get(name).await?;
                    let taint = node
                        .spec
                        .and_then(|spec| spec.taints)
                        .unwrap_or_default()
                        .into_iter()
                        .find(|t| {
                            t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute"
                        });
                    match taint.and_then(|t| t.time_added) {
                        Some(time) => added.push(time.0),
                        None => return Ok(None),
                    }
                }
                Ok(Some(added))
            }
        })
        .await;
    let apart = added[0].duration_since(added[1]).as_secs().abs();
    assert!(
        apart >= 9,
        "the two NoExecute taints were added {apart} s apart (timeAdded {added:?}), not one eviction period"
    );
    let metrics = s.metrics().await;
    let zone_a = "sim-region:\u{0}:zone-a";
    assert_eq!(
        metric_sum(
            &metrics,
            "node_collector_evictions_total",
            &[("zone", zone_a)]
        ),
        Some(2.0),
        "zone-a's evictions in:\n{}",
        metrics
            .lines()
            .filter(|l| l.starts_with("node_collector_evictions"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

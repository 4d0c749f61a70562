//! node-sim against a cluster: simulated nodes register and heartbeat, the simulated scheduler
//! binds or reports Unschedulable, and the simulated kubelet runs pods through their
//! lifecycle (ready, exits, graceful deletion). Each test starts its own node-sim with a
//! unique node-name prefix, watching only its own namespace, so the tests also run in
//! parallel against one real cluster (RKCM_TEST_KUBECONFIG).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube_sim::nodesim::{self, kubelet, nodes, ConditionType, NodeSim, NodeSimConfig};
use rkcm_conformance::{api_code, wait_for, TestCluster};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

struct Sim {
    c: TestCluster,
    ns: String,
    node_sim: NodeSim,
    prefix: String,
}

async fn start(nodes: usize, tune: impl FnOnce(&mut NodeSimConfig)) -> Sim {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("nodesim").await.unwrap();
    let prefix = format!("sim-{}-", kube_sim::api::random_suffix(5));
    let mut cfg = NodeSimConfig {
        nodes,
        name_prefix: prefix.clone(),
        namespace: Some(ns.clone()),
        start_delay: Duration::from_millis(200),
        ..Default::default()
    };
    tune(&mut cfg);
    publish_root_ca(&c, &ns).await;
    let yaml = std::fs::read_to_string(&c.kubeconfig).unwrap();
    let client = nodesim::client_from_kubeconfig(&yaml).await.unwrap();
    let node_sim = NodeSim::start(client, cfg);
    Sim {
        c,
        ns,
        node_sim,
        prefix,
    }
}

impl Drop for Sim {
    /// On a real cluster, the Nodes this node-sim registered go with the test (node-sim
    /// stopped first, so that it does not register them again).
    fn drop(&mut self) {
        if self.c.sim.is_some() {
            return;
        }
        self.node_sim.halt();
        let selector = format!("{}={}", nodes::POOL_LABEL, nodes::pool(&self.prefix));
        rkcm_conformance::delete_nodes_now(&self.c.kubeconfig, &selector);
    }
}

/// No controller manager runs in these tests, so nothing publishes `kube-root-ca.crt`,
/// which every pod's `kube-api-access-*` volume mounts: the test does it, as one on a
/// cluster without KCM would (on a real cluster KCM has done it already).
async fn publish_root_ca(c: &TestCluster, ns: &str) {
    let config_maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), ns);
    let ca = serde_json::from_value(json!({
        "metadata": {"name": "kube-root-ca.crt"},
        "data": {"ca.crt": "test CA"},
    }))
    .unwrap();
    let created = config_maps.create(&PostParams::default(), &ca).await;
    if api_code(&created) != Some(409) {
        created.unwrap_or_else(|e| panic!("creating kube-root-ca.crt in {ns}: {e}"));
    }
}

impl Sim {
    /// A pod with one container; on a real cluster it is pinned to this node-sim's nodes so
    /// the real scheduler cannot place it on a real node. No controller manager runs in
    /// these tests, so nothing lifts the API server's startup `not-ready:NoSchedule` taint
    /// from the simulated nodes (node-sim never touches taints): the pods tolerate it.
    fn pod(&self, name: &str, extra: serde_json::Value) -> Pod {
        let mut p = json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "nginx:1"}],
                     "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]}});
        if self.c.sim.is_none() {
            p["spec"]["nodeSelector"] = json!({nodes::POOL_LABEL: nodes::pool(&self.prefix)});
        }
        merge(&mut p, extra);
        serde_json::from_value(p).unwrap()
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.c.client.clone(), &self.ns)
    }

    /// Waits for events (reason, source component, message) about pod `name`.
    async fn wait_events(&self, name: &str, wanted: &[(&str, &str, String)]) {
        let events: Api<Event> = Api::namespaced(self.c.client.clone(), &self.ns);
        wait_for(
            &format!("events {wanted:?} of pod {name}"),
            WAIT,
            || async {
                let seen: Vec<(String, String, String)> = events
                    .list(&Default::default())
                    .await?
                    .items
                    .into_iter()
                    .filter(|e| e.involved_object.name.as_deref() == Some(name))
                    .map(|e| {
                        (
                            e.reason.unwrap_or_default(),
                            e.source.and_then(|s| s.component).unwrap_or_default(),
                            e.message.unwrap_or_default(),
                        )
                    })
                    .collect();
                Ok(wanted
                    .iter()
                    .all(|(r, c, m)| {
                        seen.iter()
                            .any(|(sr, sc, sm)| sr == r && sc == c && sm == m)
                    })
                    .then_some(()))
            },
        )
        .await
        .unwrap();
    }

    async fn wait_pod(&self, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
        let pods = self.pods();
        wait_for(&format!("pod {name} {what}"), WAIT, || {
            let pods = pods.clone();
            let check = &check;
            async move {
                let p = pods.get(name).await?;
                Ok(check(&p).then_some(p))
            }
        })
        .await
        .unwrap()
    }
}

fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn condition(p: &Pod, t: &str) -> Option<(String, Option<String>, Option<String>)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn is_ready(p: &Pod) -> bool {
    phase(p) == "Running" && condition(p, "Ready").is_some_and(|c| c.0 == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_simulated_nodes_show_ready_in_kubectl() {
    let s = start(3, |_| {}).await;
    let names = s.node_sim.node_names();
    assert_eq!(names.len(), 3);
    let out = wait_for("3 Ready nodes in kubectl get nodes", WAIT, || async {
        let out = s.c.kubectl_ok(&["get", "nodes", "--no-headers"]).await?;
        let ready = out
            .lines()
            .filter(|l| l.starts_with(&s.prefix))
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count();
        Ok((ready == 3).then_some(out))
    })
    .await
    .unwrap();
    for n in &names {
        assert!(out.contains(n.as_str()), "{n} missing from:\n{out}");
    }
    // Each node has its Lease in kube-node-lease, held by itself for 40 s.
    let leases: Api<Lease> = Api::namespaced(s.c.client.clone(), nodes::LEASE_NAMESPACE);
    for n in &names {
        let l = wait_for(&format!("lease of {n}"), WAIT, || async {
            Ok(Some(leases.get(n).await?))
        })
        .await
        .unwrap();
        let spec = l.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some(n.as_str()));
        assert_eq!(spec.lease_duration_seconds, Some(40));
    }
    let zones =
        s.c.kubectl_ok(&[
            "get",
            "nodes",
            "-l",
            &format!("{}={}", nodes::POOL_LABEL, nodes::pool(&s.prefix)),
            "-o",
            "jsonpath={.items[*].metadata.labels.topology\\.kubernetes\\.io/zone}",
        ])
        .await
        .unwrap();
    let mut zones: Vec<&str> = zones.split_whitespace().collect();
    zones.sort();
    assert_eq!(zones, ["zone-a", "zone-b", "zone-c"]);
    // Ready, yet still tainted as the API server registered them: lifting the startup
    // taint is the node-lifecycle controller's job, and none runs here (a real cluster's
    // own controller manager does lift it).
    let nodes_api: Api<Node> = Api::all(s.c.client.clone());
    for n in names.iter().filter(|_| s.c.sim.is_some()) {
        let node = nodes_api.get(n).await.unwrap();
        let taints = node.spec.and_then(|spec| spec.taints).unwrap_or_default();
        assert!(
            taints
                .iter()
                .any(|t| t.key == "node.kubernetes.io/not-ready" && t.effect == "NoSchedule"),
            "{n} keeps the startup taint without a controller manager: {taints:?}"
        );
    }
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_waits_in_container_creating_until_its_configmap_exists() {
    let s = start(1, |_| {}).await;
    let extra = json!({"spec": {
    "containers": [{"name": "app", "image": "nginx:1",
                    "volumeMounts": [{"name": "settings", "mountPath": "/etc/app"}]}],
    "volumes": [
        {"name": "settings", "configMap": {"name": "app-settings"}},
        {"name": "maybe", "secret": {"secretName": "absent", "optional": true}}
    ]}});
    s.pods()
        .create(&PostParams::default(), &s.pod("waits", extra))
        .await
        .unwrap();
    let message =
        "MountVolume.SetUp failed for volume \"settings\" : configmap \"app-settings\" not found";
    s.wait_events("waits", &[("FailedMount", "kubelet", message.into())])
        .await;
    let p = s.pods().get("waits").await.unwrap();
    assert_eq!(phase(&p), "Pending");
    let cs = &p
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    let waiting = cs.state.as_ref().and_then(|st| st.waiting.as_ref());
    assert_eq!(
        waiting.and_then(|w| w.reason.as_deref()),
        Some("ContainerCreating"),
        "{cs:?}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(s.c.client.clone(), &s.ns);
    let settings = serde_json::from_value(json!({"metadata": {"name": "app-settings"}})).unwrap();
    config_maps
        .create(&PostParams::default(), &settings)
        .await
        .unwrap();
    s.wait_pod("waits", "Running and Ready", is_ready).await;
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_pod_becomes_running_and_ready_on_a_node() {
    let s = start(2, |_| {}).await;
    s.pods()
        .create(&PostParams::default(), &s.pod("web", json!({})))
        .await
        .unwrap();
    let p = s.wait_pod("web", "Running and Ready", is_ready).await;
    let spec = p.spec.as_ref().unwrap();
    let node = spec.node_name.clone().unwrap_or_default();
    assert!(s.node_sim.node_names().contains(&node), "bound to {node:?}");
    let st = p.status.as_ref().unwrap();
    for t in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(
            condition(&p, t).map(|c| c.0),
            Some("True".into()),
            "{t} in {st:?}"
        );
    }
    assert!(
        st.pod_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10.24")),
        "podIP {:?}",
        st.pod_ip
    );
    assert!(
        st.host_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("172.16.")),
        "hostIP {:?}",
        st.host_ip
    );
    assert!(st.start_time.is_some());
    let cs = &st.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        (cs.name.as_str(), cs.ready, cs.started),
        ("app", true, Some(true))
    );
    assert!(cs.state.as_ref().unwrap().running.is_some());
    // The events a scheduler and a kubelet post, as kubectl describe shows them.
    let wanted = [
        (
            "Scheduled",
            "default-scheduler",
            format!("Successfully assigned {}/web to {node}", s.ns),
        ),
        (
            "Pulled",
            "kubelet",
            "Container image \"nginx:1\" already present on machine".into(),
        ),
        ("Created", "kubelet", "Created container app".into()),
        ("Started", "kubelet", "Started container app".into()),
    ];
    s.wait_events("web", &wanted).await;
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_node_matches_stays_pending_as_unschedulable_with_an_event() {
    let s = start(3, |_| {}).await;
    let mut p = s.pod("nowhere", json!({}));
    p.spec.as_mut().unwrap().node_selector =
        Some([("disk".to_string(), "floppy".to_string())].into());
    s.pods().create(&PostParams::default(), &p).await.unwrap();
    let p = s
        .wait_pod("nowhere", "PodScheduled=False/Unschedulable", |p| {
            condition(p, "PodScheduled")
                .is_some_and(|c| c.0 == "False" && c.1.as_deref() == Some("Unschedulable"))
        })
        .await;
    let (_, _, message) = condition(&p, "PodScheduled").unwrap();
    let message = message.unwrap_or_default();
    assert!(
        message.contains("didn't match Pod's node affinity/selector"),
        "{message}"
    );
    assert_eq!(phase(&p), "Pending");
    assert!(p.spec.unwrap().node_name.is_none());
    let events: Api<Event> = Api::namespaced(s.c.client.clone(), &s.ns);
    wait_for("a FailedScheduling event", WAIT, || async {
        let list = events.list(&Default::default()).await?;
        Ok(list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.involved_object.name.as_deref() == Some("nowhere")
        }))
    })
    .await
    .unwrap();
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_heartbeat_leaves_the_lease_stale_until_resumed() {
    let s = start(2, |cfg| {
        cfg.lease_renew_interval = Duration::from_millis(300)
    })
    .await;
    let names = s.node_sim.node_names();
    let (steady, silent) = (names[0].clone(), names[1].clone());
    let leases: Api<Lease> = Api::namespaced(s.c.client.clone(), nodes::LEASE_NAMESPACE);
    let renew = |name: String| {
        let leases = leases.clone();
        async move {
            let l = leases.get(&name).await?;
            Ok::<_, anyhow::Error>(l.spec.and_then(|s| s.renew_time).map(|t| t.0))
        }
    };
    // Wait until `name`'s lease has moved on from `from`.
    let moved = |name: String, from| {
        let renew = &renew;
        async move {
            wait_for(&format!("lease {name} renewed"), WAIT, || {
                let name = name.clone();
                async move {
                    let now = renew(name).await?;
                    Ok(now.filter(|t| Some(*t) != from))
                }
            })
            .await
            .unwrap()
        }
    };
    let first = moved(silent.clone(), None).await;
    moved(silent.clone(), Some(first)).await;

    s.node_sim.stop_heartbeat(&silent).unwrap();
    // Let any renewal already in flight land, then take the silent node's last renewTime.
    let mut t = moved(steady.clone(), None).await;
    t = moved(steady.clone(), Some(t)).await;
    let last = renew(silent.clone()).await.unwrap();
    for _ in 0..3 {
        t = moved(steady.clone(), Some(t)).await;
    }
    assert_eq!(
        renew(silent.clone()).await.unwrap(),
        last,
        "the silent node's lease kept moving"
    );

    s.node_sim.resume_heartbeat(&silent).unwrap();
    moved(silent.clone(), last).await;
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_set_by_annotating_the_node_with_kubectl() {
    let s = start(2, |cfg| {
        cfg.lease_renew_interval = Duration::from_millis(300);
        cfg.node_status_update_frequency = Duration::from_millis(300);
    })
    .await;
    let names = s.node_sim.node_names();
    let (pressed, silent) = (names[0].clone(), names[1].clone());
    let annotate = |node: String, annotation: String| {
        let c = &s.c;
        async move {
            c.kubectl_ok(&["annotate", "node", &node, &annotation, "--overwrite"])
                .await
                .unwrap();
        }
    };
    // A pressure condition, reported at the next status update.
    annotate(
        pressed.clone(),
        format!("{}MemoryPressure=True", nodesim::FAULT_CONDITION_PREFIX),
    )
    .await;
    let nodes_api: Api<Node> = Api::all(s.c.client.clone());
    wait_for("MemoryPressure=True on the node", WAIT, || async {
        let node = nodes_api.get(&pressed).await?;
        Ok(node
            .status
            .and_then(|st| st.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "MemoryPressure" && c.status == "True")
            .then_some(()))
    })
    .await
    .unwrap();
    assert!(s
        .node_sim
        .faults(&pressed)
        .conditions
        .contains_key(&ConditionType::MemoryPressure));
    // A stopped heartbeat, then a resumed one.
    annotate(
        silent.clone(),
        format!("{}=stopped", nodesim::FAULT_HEARTBEAT),
    )
    .await;
    wait_for("the annotation to stop the heartbeat", WAIT, || async {
        Ok(s.node_sim.faults(&silent).heartbeat_stopped.then_some(()))
    })
    .await
    .unwrap();
    annotate(
        silent.clone(),
        format!("{}=running", nodesim::FAULT_HEARTBEAT),
    )
    .await;
    wait_for("the annotation to resume the heartbeat", WAIT, || async {
        Ok((!s.node_sim.faults(&silent).heartbeat_stopped).then_some(()))
    })
    .await
    .unwrap();
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_errors_dropped_watches_and_an_outage_are_ridden_out() {
    let s = start(2, |_| {}).await;
    let Some(sim) = s.c.sim_only("injecting API server faults") else {
        return;
    };
    s.pods()
        .create(&PostParams::default(), &s.pod("before", json!({})))
        .await
        .unwrap();
    s.wait_pod("before", "Running and Ready", is_ready).await;

    // Every watch drops; node-sim's next requests (binding, status, leases) fail with
    // 429, then with 500. (The pods are created first: the test's own client would get
    // the errors too.)
    sim.faults().drop_watches();
    s.pods()
        .create(&PostParams::default(), &s.pod("during-429", json!({})))
        .await
        .unwrap();
    sim.faults()
        .fail_next(6, kube_sim::faults::Failure::TooManyRequests);
    s.wait_pod("during-429", "Running and Ready", is_ready)
        .await;
    s.pods()
        .create(&PostParams::default(), &s.pod("during-500", json!({})))
        .await
        .unwrap();
    sim.faults()
        .fail_next(6, kube_sim::faults::Failure::Internal);
    s.wait_pod("during-500", "Running and Ready", is_ready)
        .await;

    // The API server stops answering; a pod appears meanwhile (written straight into
    // the store); once it answers again node-sim catches up and runs it.
    sim.faults().pause();
    let mut pod = serde_json::to_value(s.pod("after-outage", json!({}))).unwrap();
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    pod["metadata"]["namespace"] = json!(s.ns);
    sim.create(pod).unwrap();
    sim.faults().resume();
    s.wait_pod("after-outage", "Running and Ready", is_ready)
        .await;
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sim_registers_again_after_the_api_server_restarts_empty() {
    let mut s = start(2, |cfg| {
        cfg.lease_renew_interval = Duration::from_millis(300);
        cfg.node_status_update_frequency = Duration::from_millis(300);
    })
    .await;
    if s.c.sim_only("restarting the API server").is_none() {
        return;
    }
    let names = s.node_sim.node_names();
    let nodes_api: Api<Node> = Api::all(s.c.client.clone());
    let ready = |name: String| {
        let nodes_api = nodes_api.clone();
        async move {
            wait_for(&format!("node {name} Ready"), WAIT, || async {
                let Some(node) = nodes_api.get_opt(&name).await? else {
                    return Ok(None);
                };
                Ok(node
                    .status
                    .and_then(|st| st.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
                    .then_some(()))
            })
            .await
            .unwrap()
        }
    };
    for name in &names {
        ready(name.clone()).await;
    }
    // Same address and certificates, nothing stored: the Nodes are gone.
    s.c.sim.as_mut().unwrap().restart().await.unwrap();
    for name in &names {
        ready(name.clone()).await;
    }
    // And pods run again once their namespace is back.
    s.c.kubectl_ok(&["create", "namespace", &s.ns])
        .await
        .unwrap();
    s.c.kubectl_ok(&["create", "serviceaccount", "default", "-n", &s.ns])
        .await
        .unwrap();
    publish_root_ca(&s.c, &s.ns).await;
    s.pods()
        .create(&PostParams::default(), &s.pod("reborn", json!({})))
        .await
        .unwrap();
    s.wait_pod("reborn", "Running and Ready", is_ready).await;
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_annotations_end_pods_failed_or_succeeded_with_restart_policy_never() {
    let s = start(2, |_| {}).await;
    for (name, code) in [("fails", "1"), ("succeeds", "0")] {
        let p = s.pod(name, json!({"metadata": {"annotations": {kubelet::EXIT_AFTER: "1s", kubelet::EXIT_CODE: code}},
            "spec": {"restartPolicy": "Never"}}));
        s.pods().create(&PostParams::default(), &p).await.unwrap();
    }
    for (name, want, code) in [("fails", "Failed", 1), ("succeeds", "Succeeded", 0)] {
        let p = s
            .wait_pod(name, want, |p| matches!(phase(p), "Failed" | "Succeeded"))
            .await;
        assert_eq!(phase(&p), want, "{name}");
        let cs = &p
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        let term = cs
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .expect("terminated");
        assert_eq!(term.exit_code, code, "{name}");
        assert_eq!(cs.restart_count, 0);
        assert_eq!(
            condition(&p, "Ready").map(|c| c.1),
            Some(Some("PodCompleted".into()))
        );
    }
    s.c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_running_pod_removes_it_after_its_grace_period() {
    let s = start(1, |_| {}).await;
    let p = s.pod(
        "doomed",
        json!({"spec": {"terminationGracePeriodSeconds": 2}}),
    );
    s.pods().create(&PostParams::default(), &p).await.unwrap();
    s.wait_pod("doomed", "Running and Ready", is_ready).await;
    let t = Instant::now();
    let marked = s
        .pods()
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("a running pod is deleted gracefully");
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(2));
    let still = s.pods().get("doomed").await.unwrap();
    assert!(
        still.metadata.deletion_timestamp.is_some(),
        "kept during its grace period"
    );
    s.wait_events(
        "doomed",
        &[("Killing", "kubelet", "Stopping container app".into())],
    )
    .await;
    let pods = s.pods();
    wait_for("pod doomed removed", WAIT, || async {
        Ok((api_code(&pods.get("doomed").await) == Some(404)).then_some(()))
    })
    .await
    .unwrap();
    // deletionTimestamp has whole seconds, so the grace period may end up to 1 s early.
    assert!(
        t.elapsed() >= Duration::from_secs(1),
        "removed after {:?}",
        t.elapsed()
    );
    s.c.cleanup().await;
}

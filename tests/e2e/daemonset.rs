//! End-to-end tests of KCM's daemonset controller in `rkcm worker`: the test cluster
//! (kube-sim with simulated nodes, or RKCM_TEST_KUBECONFIG's real cluster and its
//! nodes), the real `rkcm launcher` with its informer-server and worker as separate processes, and
//! every check made with kubectl or kube-rs.
//!
//! The DaemonSets select nodes by a label the test puts on them, so on a real cluster
//! the tests touch only the nodes they label (and take the labels and taints off again).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use kube_sim::nodesim::{NodeSim, NodeSimConfig};

/// Nodes with this label (value: the test's namespace) run the test's DaemonSet.
const NODE_LABEL: &str = "rkcm.io/e2e-daemonset";
const SKIP_TAINT: &str = "rkcm.io/e2e-skip";

suite_stack! {
    /// The worker stack with the daemonset and serviceaccount controllers.
    struct Stack(LauncherStack);
}

impl Stack {
    async fn start() -> Stack {
        Stack(
            LauncherStack::start(&[
                "--controllers",
                "daemonset,serviceaccount,nodelifecycle,root-ca-cert-publisher",
            ])
            .await,
        )
    }

    /// The first `count` nodes by name (every node of a kube-sim test cluster).
    async fn nodes(&self, count: usize) -> Vec<String> {
        let mut names: Vec<String> = Api::<Node>::all(self.cluster.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        names.sort();
        assert!(
            names.len() >= 2,
            "the daemonset tests need at least two nodes, found {names:?}"
        );
        names.truncate(count);
        names
    }

    async fn label(&self, node: &str, ns: &str) {
        self.kubectl(&[
            "label",
            "node",
            node,
            &format!("{NODE_LABEL}={ns}"),
            "--overwrite",
        ])
        .await;
    }

    async fn unlabel(&self, node: &str) {
        self.kubectl(&["label", "node", node, &format!("{NODE_LABEL}-")])
            .await;
    }

    async fn taint(&self, node: &str, ns: &str, effect: &str) {
        self.kubectl(&[
            "taint",
            "node",
            node,
            &format!("{SKIP_TAINT}={ns}:{effect}"),
            "--overwrite",
        ])
        .await;
    }

    async fn untaint(&self, node: &str) {
        self.kubectl(&["taint", "node", node, &format!("{SKIP_TAINT}-")])
            .await;
    }

    /// Takes the test's labels and taints off the nodes (real clusters keep them).
    async fn restore(&self, nodes: &[String]) {
        for node in nodes {
            let _ = self
                .cluster
                .kubectl(&["label", "node", node, &format!("{NODE_LABEL}-")])
                .await;
            let _ = self
                .cluster
                .kubectl(&["taint", "node", node, &format!("{SKIP_TAINT}-")])
                .await;
        }
    }

    async fn create(&self, ns: &str, name: &str, strategy: serde_json::Value) {
        let daemon_set = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "updateStrategy": strategy,
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "nodeSelector": {NODE_LABEL: ns},
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "pause", "image": IMAGE_1}]
                    }
                }
            }
        });
        self.apply(&daemon_set).await;
    }

    /// Live (not terminating) pods by the node they are for.
    async fn pods_by_node(&self, ns: &str) -> BTreeMap<String, Vec<Pod>> {
        let mut by_node: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
        for pod in Api::<Pod>::namespaced(self.cluster.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
        {
            if pod.metadata.deletion_timestamp.is_none() {
                by_node.entry(target_node(&pod)).or_default().push(pod);
            }
        }
        by_node
    }

    /// Waits until exactly `nodes` have one running daemon pod each, with `image`.
    async fn wait_pods_on(&self, ns: &str, nodes: &[&str], image: &str) {
        let want: BTreeSet<String> = nodes.iter().map(|n| n.to_string()).collect();
        let what = format!("one running {image} pod on each of {want:?} and no other");
        self.wait(&what, || async {
            let by_node = self.pods_by_node(ns).await;
            let placed: BTreeSet<String> = by_node.keys().cloned().collect();
            let all_good = by_node.values().all(|pods| {
                pods.len() == 1
                    && pods[0]
                        .spec
                        .as_ref()
                        .is_some_and(|s| s.containers[0].image.as_deref() == Some(image))
                    && pods[0].status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            });
            Ok((placed == want && all_good).then_some(()))
        })
        .await;
    }

    async fn status(&self, ns: &str, name: &str) -> k8s_openapi::api::apps::v1::DaemonSetStatus {
        Api::<DaemonSet>::namespaced(self.cluster.client.clone(), ns)
            .get(name)
            .await
            .unwrap()
            .status
            .unwrap_or_default()
    }

    /// Waits until the status reports (desired, ready, misscheduled) for the current
    /// generation.
    async fn wait_status(&self, ns: &str, name: &str, desired: i32, misscheduled: i32) {
        let what = format!("status desired={desired} ready={desired} misscheduled={misscheduled}");
        let api: Api<DaemonSet> = Api::namespaced(self.cluster.client.clone(), ns);
        self.wait(&what, || async {
            let ds = api.get(name).await?;
            let status = ds.status.unwrap_or_default();
            Ok((status.desired_number_scheduled == desired
                && status.current_number_scheduled == desired
                && status.number_ready == desired
                // numberAvailable is `omitempty`: a real server leaves a zero out.
                && status.number_available.unwrap_or(0) == desired
                && status.number_misscheduled == misscheduled
                && status.observed_generation == ds.metadata.generation)
                .then_some(()))
        })
        .await;
    }

    async fn revisions(&self, ns: &str) -> Vec<ControllerRevision> {
        let mut list = Api::<ControllerRevision>::namespaced(self.cluster.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        list.sort_by_key(|r| r.revision);
        list
    }
}

/// The node a daemon pod is for: its nodeName, or the node its required affinity pins.
fn target_node(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    if let Some(node) = spec.and_then(|s| s.node_name.clone()) {
        return node;
    }
    spec.and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .and_then(|r| r.node_selector_terms.first())
        .and_then(|t| t.match_fields.as_ref())
        .and_then(|f| f.first())
        .and_then(|r| r.values.as_ref())
        .and_then(|v| v.first().cloned())
        .unwrap_or_default()
}

fn revision_image(revision: &ControllerRevision) -> String {
    revision
        .data
        .as_ref()
        .and_then(|d| d.0.pointer("/spec/template/spec/containers/0/image"))
        .and_then(|i| i.as_str())
        .unwrap_or_default()
        .to_string()
}

/// Records, from a watch of the namespace's pods, the most live pods each node had at
/// once: 2 means a new pod started before the old one went (surge).
struct MaxPerNode {
    max: Arc<Mutex<BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MaxPerNode {
    fn start(client: kube::Client, ns: &str) -> MaxPerNode {
        let max = Arc::new(Mutex::new(BTreeMap::new()));
        let api: Api<Pod> = Api::namespaced(client, ns);
        let recorded = max.clone();
        let task = tokio::spawn(async move {
            let mut live: BTreeMap<String, (String, bool)> = BTreeMap::new();
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                match event {
                    watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                        let alive = pod.metadata.deletion_timestamp.is_none()
                            && !matches!(
                                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                                Some("Succeeded" | "Failed")
                            );
                        live.insert(
                            pod.metadata.name.clone().unwrap_or_default(),
                            (target_node(&pod), alive),
                        );
                    }
                    watcher::Event::Delete(pod) => {
                        live.remove(pod.metadata.name.as_deref().unwrap_or_default());
                    }
                    _ => {}
                }
                let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
                for (node, alive) in live.values() {
                    if *alive {
                        *counts.entry(node).or_default() += 1;
                    }
                }
                let mut max = recorded.lock().unwrap();
                for (node, count) in counts {
                    let entry = max.entry(node.clone()).or_insert(0);
                    *entry = (*entry).max(count);
                }
            }
        });
        MaxPerNode { max, task }
    }

    fn stop(self) -> BTreeMap<String, usize> {
        self.task.abort();
        self.max.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_set_follows_labels_taints_and_new_nodes_then_rolls_forward_and_back() {
    let s = Stack::start().await;
    let ns = s.namespace("ds").await;
    let nodes = s.nodes(3).await;
    let (a, rest) = nodes.split_first().unwrap();
    let tainted = rest.last().unwrap();
    let middle: Vec<&str> = rest[..rest.len() - 1].iter().map(String::as_str).collect();
    for node in &nodes {
        s.label(node, &ns).await;
    }
    s.taint(tainted, &ns, "NoSchedule").await;
    s.create(
        &ns,
        "daemon",
        serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
    )
    .await;

    // Every labelled node but the tainted one gets a pod.
    s.rollout_status(&ns, "daemonset/daemon").await;
    let mut expected: Vec<&str> = std::iter::once(a.as_str())
        .chain(middle.iter().copied())
        .collect();
    s.wait_pods_on(&ns, &expected, IMAGE_1).await;
    s.wait_status(&ns, "daemon", expected.len() as i32, 0).await;
    let pods = s.pods_by_node(&ns).await;
    let pod = &pods[a.as_str()][0];
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("pod-template-generation").map(String::as_str),
        Some("1")
    );
    let revisions = s.revisions(&ns).await;
    assert_eq!(revisions.len(), 1, "one revision: {revisions:?}");
    assert_eq!(
        labels.get("controller-revision-hash"),
        revisions[0]
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get("controller-revision-hash"),
        "pods carry their revision's hash"
    );
    assert_eq!(revisions[0].revision, 1);
    let spec = pod.spec.clone().unwrap();
    let pinned = spec
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|a| a.required_during_scheduling_ignored_during_execution)
        .unwrap();
    let field = &pinned.node_selector_terms[0].match_fields.as_ref().unwrap()[0];
    assert_eq!(
        (
            field.key.as_str(),
            field.operator.as_str(),
            field.values.clone().unwrap()
        ),
        ("metadata.name", "In", vec![a.clone()])
    );
    let tolerations: BTreeSet<(String, String)> = spec
        .tolerations
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key.unwrap_or_default(), t.effect.unwrap_or_default()))
        .collect();
    for (key, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ] {
        assert!(
            tolerations.contains(&(key.to_string(), effect.to_string())),
            "daemon pods tolerate {key}:{effect}: {tolerations:?}"
        );
    }

    // The taint lifted, the node gets its pod.
    s.untaint(tainted).await;
    expected.push(tainted.as_str());
    s.wait_pods_on(&ns, &expected, IMAGE_1).await;

    // A node that joins later gets one too (kube-sim: a second simulator's node).
    let mut late_sim = None;
    let late_node = "late-node-0".to_string();
    if s.cluster.sim.is_some() {
        let yaml = std::fs::read_to_string(&s.cluster.kubeconfig).unwrap();
        let client = kube_sim::nodesim::client_from_kubeconfig(&yaml)
            .await
            .unwrap();
        late_sim = Some(NodeSim::start(
            client,
            NodeSimConfig {
                nodes: 1,
                name_prefix: "late-node-".into(),
                start_delay: Duration::from_millis(100),
                ..Default::default()
            },
        ));
        let nodes_api: Api<Node> = Api::all(s.cluster.client.clone());
        s.wait("the late node to register", || async {
            Ok(nodes_api.get_opt(&late_node).await?.map(|_| ()))
        })
        .await;
        s.label(&late_node, &ns).await;
        expected.push(late_node.as_str());
        s.wait_pods_on(&ns, &expected, IMAGE_1).await;
    }
    s.wait_status(&ns, "daemon", expected.len() as i32, 0).await;

    // A NoSchedule taint keeps the pod a node runs (misscheduled); a node that stops
    // matching the selector loses its pod.
    s.taint(a, &ns, "NoSchedule").await;
    s.unlabel(tainted).await;
    expected.retain(|n| *n != tainted.as_str());
    s.wait_pods_on(&ns, &expected, IMAGE_1).await;
    s.wait_status(&ns, "daemon", expected.len() as i32 - 1, 1)
        .await;
    s.untaint(a).await;
    s.wait_status(&ns, "daemon", expected.len() as i32, 0).await;

    // A rolling update with maxUnavailable 1: never two pods on a node.
    let recorder = MaxPerNode::start(s.cluster.client.clone(), &ns);
    s.kubectl(&[
        "set",
        "image",
        "daemonset/daemon",
        &format!("pause={IMAGE_2}"),
        "-n",
        &ns,
    ])
    .await;
    s.rollout_status(&ns, "daemonset/daemon").await;
    s.wait_pods_on(&ns, &expected, IMAGE_2).await;
    let max = recorder.stop();
    assert!(
        max.values().all(|m| *m == 1),
        "maxUnavailable replaces in place: {max:?}"
    );
    let status = s.status(&ns, "daemon").await;
    assert_eq!(status.updated_number_scheduled, Some(expected.len() as i32));
    let revisions = s.revisions(&ns).await;
    assert_eq!(
        revisions
            .iter()
            .map(|r| (r.revision, revision_image(r)))
            .collect::<Vec<_>>(),
        vec![(1, IMAGE_1.to_string()), (2, IMAGE_2.to_string())]
    );

    // kubectl rollout undo restores the first template; its revision is renumbered,
    // no new revision appears.
    s.kubectl(&["rollout", "undo", "daemonset/daemon", "-n", &ns])
        .await;
    s.rollout_status(&ns, "daemonset/daemon").await;
    s.wait_pods_on(&ns, &expected, IMAGE_1).await;
    let revisions = s.revisions(&ns).await;
    assert_eq!(
        revisions
            .iter()
            .map(|r| (r.revision, revision_image(r)))
            .collect::<Vec<_>>(),
        vec![(2, IMAGE_2.to_string()), (3, IMAGE_1.to_string())]
    );
    let events = s
        .kubectl(&[
            "get",
            "events",
            "-n",
            &ns,
            "-o",
            "custom-columns=REASON:.reason,SOURCE:.source.component",
        ])
        .await;
    for expected in [
        "SuccessfulCreate daemonset-controller",
        "SuccessfulDelete daemonset-controller",
    ] {
        assert!(
            events
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == expected),
            "no {expected:?} event in:\n{events}"
        );
    }
    drop(late_sim);
    s.restore(&nodes).await;
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surging_update_starts_the_new_pod_before_the_old_one_goes() {
    let s = Stack::start().await;
    let ns = s.namespace("dss").await;
    let nodes = s.nodes(3).await;
    for node in &nodes {
        s.label(node, &ns).await;
    }
    s.create(
        &ns,
        "surge",
        serde_json::json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
    )
    .await;
    s.rollout_status(&ns, "daemonset/surge").await;
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    s.wait_pods_on(&ns, &names, IMAGE_1).await;

    let recorder = MaxPerNode::start(s.cluster.client.clone(), &ns);
    s.kubectl(&[
        "set",
        "image",
        "daemonset/surge",
        &format!("pause={IMAGE_2}"),
        "-n",
        &ns,
    ])
    .await;
    s.rollout_status(&ns, "daemonset/surge").await;
    s.wait_pods_on(&ns, &names, IMAGE_2).await;
    let max = recorder.stop();
    assert_eq!(
        max.keys().cloned().collect::<Vec<_>>(),
        nodes,
        "every node was watched: {max:?}"
    );
    assert!(
        max.values().all(|m| *m == 2),
        "with maxSurge the new pod runs beside the old one: {max:?}"
    );
    // A DaemonSet that fits no node: no pods, a status that says so.
    let nowhere = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "nowhere", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"nodeSelector": {NODE_LABEL: "nowhere"},
                    "containers": [{"name": "pause", "image": IMAGE_1}]}}}
    });
    s.cluster
        .kubectl_stdin(&["apply", "-f", "-"], &nowhere.to_string())
        .await
        .unwrap();
    s.wait_status(&ns, "nowhere", 0, 0).await;
    assert!(s.pods_by_node(&ns).await.values().flatten().all(|p| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map(String::as_str)
            == Some("surge")
    }));
    s.restore(&nodes).await;
    s.cluster.cleanup().await;
}

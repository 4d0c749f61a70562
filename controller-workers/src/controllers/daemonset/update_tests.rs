//! Rolling-update table tests in the manner of upstream's `update_test.go`: a DaemonSet
//! over five nodes whose template changes, driven pass after pass through
//! [`plan_rolling_update`] and [`sync_nodes_with`] against the in-memory
//! [`FakePodControl`]. The pods the fake "created" join the simulated cluster, the ones
//! it "deleted" leave it, and readiness is set by the test, so each pass sees what the
//! previous one did. Between passes the test stands in for `manage` only where it is
//! trivial: a node left without a pod gets one.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, PodCondition, PodSpec, PodStatus, PodTemplateSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use super::placement::target_node_name;
use super::sync::{sync_nodes_with, NodePods};
use super::update::{desired_node_counts, plan_rolling_update};
use crate::expectations::ControllerExpectations;
use crate::pod_control::fake::FakePodControl;
use crate::store::key_of;

const NODES: usize = 5;

fn node(i: usize, taint: bool) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(format!("node-{i}")),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: taint.then(|| {
                vec![Taint {
                    key: "dedicated".into(),
                    value: Some("other".into()),
                    effect: "NoSchedule".into(),
                    ..Taint::default()
                }]
            }),
            ..NodeSpec::default()
        }),
        ..Node::default()
    })
}

/// The update strategies the tests use.
#[derive(Clone, Copy)]
enum Strategy {
    OnDelete,
    MaxUnavailable(i32),
    MaxSurge(i32),
}

fn daemon_set(image: &str, strategy: Strategy, min_ready_seconds: i32) -> Arc<DaemonSet> {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "foo".to_string())].into();
    let update_strategy = match strategy {
        Strategy::OnDelete => DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        },
        Strategy::MaxUnavailable(n) => DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_unavailable: Some(IntOrString::Int(n)),
                max_surge: Some(IntOrString::Int(0)),
            }),
        },
        Strategy::MaxSurge(n) => DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_unavailable: Some(IntOrString::Int(0)),
                max_surge: Some(IntOrString::Int(n)),
            }),
        },
    };
    Arc::new(DaemonSet {
        metadata: ObjectMeta {
            name: Some("foo".into()),
            namespace: Some("default".into()),
            uid: Some("ds-uid".into()),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "foo".into(),
                        image: Some(image.into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            update_strategy: Some(update_strategy),
            min_ready_seconds: Some(min_ready_seconds),
            ..DaemonSetSpec::default()
        }),
        status: None,
    })
}

/// The simulated cluster: nodes, the DaemonSet's pods by node, and the fake's calls.
struct Cluster {
    nodes: Vec<Arc<Node>>,
    pods: NodePods,
    fake: FakePodControl,
    expectations: ControllerExpectations,
    now: Timestamp,
}

impl Cluster {
    fn new(nodes: Vec<Arc<Node>>) -> Self {
        Cluster {
            nodes,
            pods: NodePods::new(),
            fake: FakePodControl::default(),
            expectations: ControllerExpectations::new(),
            now: Timestamp::from_second(1_000_000).unwrap_or(Timestamp::UNIX_EPOCH),
        }
    }

    /// Moves what the fake recorded into the cluster and returns the counts
    /// (created, deleted).
    fn apply(&mut self) -> (usize, usize) {
        let created = self.fake.created();
        let deleted = self.fake.deleted();
        for record in &created {
            let node = target_node_name(&record.pod).unwrap_or_default();
            self.pods
                .entry(node)
                .or_default()
                .push(Arc::new(record.pod.clone()));
        }
        for pods in self.pods.values_mut() {
            pods.retain(|pod| {
                !deleted.contains(pod.metadata.name.as_ref().unwrap_or(&String::new()))
            });
        }
        self.pods.retain(|_, pods| !pods.is_empty());
        self.fake.clear();
        (created.len(), deleted.len())
    }

    /// `manage`'s trivial part: every node without a pod gets one.
    async fn fill_empty_nodes(&mut self, ds: &Arc<DaemonSet>, hash: &str) -> (usize, usize) {
        let empty: Vec<String> = self
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .filter(|name| !self.pods.contains_key(name))
            .collect();
        let result = sync_nodes_with(&self.fake, &self.expectations, ds, &[], &empty, hash).await;
        assert!(result.is_ok(), "creating pods: {result:?}");
        self.apply()
    }

    /// One rolling-update pass; returns (created, deleted).
    async fn rolling_update(&mut self, ds: &Arc<DaemonSet>, hash: &str) -> (usize, usize) {
        let mut node_pods = self.pods.clone();
        let counts = match desired_node_counts(ds, &self.nodes, &mut node_pods) {
            Ok(counts) => counts,
            Err(error) => panic!("desired counts: {error:#}"),
        };
        let nodes = self.nodes.clone();
        let all: Vec<String> = self
            .pods
            .values()
            .flatten()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let plan = match plan_rolling_update(
            ds,
            &node_pods,
            counts,
            |name| {
                nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(name))
                    .cloned()
            },
            |pod| all.iter().any(|name| name == pod),
            hash,
            self.now,
        ) {
            Ok(plan) => plan,
            Err(error) => panic!("plan: {error:#}"),
        };
        let result = sync_nodes_with(
            &self.fake,
            &self.expectations,
            ds,
            &plan.to_delete,
            &plan.new_nodes,
            hash,
        )
        .await;
        assert!(result.is_ok(), "syncing nodes: {result:?}");
        self.apply()
    }

    /// Every pod Running and Ready since `now` (upstream `markPodsReady`), then time
    /// moves on by `elapse` seconds.
    fn mark_ready(&mut self, elapse: i64) {
        let since = self.now;
        for pods in self.pods.values_mut() {
            for pod in pods.iter_mut() {
                let mut updated = pod.as_ref().clone();
                let already = updated
                    .status
                    .as_ref()
                    .is_some_and(|s| s.phase.as_deref() == Some("Running"));
                if !already {
                    updated.status = Some(PodStatus {
                        phase: Some("Running".into()),
                        conditions: Some(vec![PodCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            last_transition_time: Some(Time(since)),
                            ..PodCondition::default()
                        }]),
                        ..PodStatus::default()
                    });
                }
                *pod = Arc::new(updated);
            }
        }
        self.now += SignedDuration::from_secs(elapse);
    }

    fn images(&self) -> Vec<String> {
        self.pods
            .values()
            .flatten()
            .filter_map(|pod| pod.spec.as_ref()?.containers.first()?.image.clone())
            .collect()
    }
}

/// Five ready pods of `old` image "v1", then the template moves to image "v2" with
/// `strategy`.
async fn rolled_out(
    strategy: Strategy,
    min_ready: i32,
    old_ready: bool,
) -> (Cluster, Arc<DaemonSet>) {
    let mut cluster = Cluster::new((0..NODES).map(|i| node(i, false)).collect());
    let v1 = daemon_set("foo/bar", strategy, min_ready);
    assert_eq!(cluster.fill_empty_nodes(&v1, "v1").await, (NODES, 0));
    if old_ready {
        cluster.mark_ready(100);
    }
    (cluster, daemon_set("foo2/bar2", strategy, min_ready))
}

/// A pass: either a rolling-update pass (`Update`) or `manage` refilling empty nodes
/// (`Fill`), with the (created, deleted) counts it must make; `Ready` marks every pod
/// ready.
#[derive(Clone, Copy, Debug)]
enum Step {
    Update(usize, usize),
    Fill(usize),
    Ready,
}

async fn run(cluster: &mut Cluster, ds: &Arc<DaemonSet>, steps: &[Step]) {
    for (i, step) in steps.iter().enumerate() {
        match *step {
            Step::Update(created, deleted) => {
                let got = cluster.rolling_update(ds, "v2").await;
                assert_eq!(got, (created, deleted), "step {i}: {step:?}");
            }
            Step::Fill(created) => {
                let got = cluster.fill_empty_nodes(ds, "v2").await;
                assert_eq!(got, (created, 0), "step {i}: {step:?}");
            }
            Step::Ready => cluster.mark_ready(100),
        }
    }
}

#[tokio::test]
async fn rolling_update_table() {
    use Step::*;
    struct Case {
        name: &'static str,
        strategy: Strategy,
        old_ready: bool,
        steps: Vec<Step>,
        all_updated: bool,
    }
    let cases = [
        Case {
            // TestDaemonSetUpdatesPods: two at a time, then the last one.
            name: "maxUnavailable 2 replaces two nodes per round",
            strategy: Strategy::MaxUnavailable(2),
            old_ready: true,
            steps: vec![
                Update(0, 2),
                Fill(2),
                Update(0, 0),
                Ready,
                Update(0, 2),
                Fill(2),
                Ready,
                Update(0, 1),
                Fill(1),
                Ready,
                Update(0, 0),
            ],
            all_updated: true,
        },
        Case {
            // TestDaemonSetUpdatesWhenNewPodIsNotReady.
            name: "new pods that never get ready stop the rollout at maxUnavailable",
            strategy: Strategy::MaxUnavailable(3),
            old_ready: true,
            steps: vec![Update(0, 3), Fill(3), Update(0, 0), Update(0, 0)],
            all_updated: false,
        },
        Case {
            // TestDaemonSetUpdatesAllOldPodsNotReady.
            name: "old pods that are not available are all replaced at once",
            strategy: Strategy::MaxUnavailable(3),
            old_ready: false,
            steps: vec![Update(0, 5), Fill(5), Update(0, 0)],
            all_updated: true,
        },
        Case {
            // TestDaemonSetUpdatesPodsWithMaxSurge: new pods start beside the old ones,
            // maxSurge nodes at a time, and each old pod goes once its replacement is
            // available.
            name: "maxSurge 2 surges two nodes per round",
            strategy: Strategy::MaxSurge(2),
            old_ready: true,
            steps: vec![
                Update(2, 0),
                Update(0, 0),
                Ready,
                Update(2, 2),
                Update(0, 0),
                Ready,
                Update(1, 2),
                Update(0, 0),
                Ready,
                Update(0, 1),
                Update(0, 0),
            ],
            all_updated: true,
        },
        Case {
            // TestDaemonSetUpdatesAllOldPodsNotReadyMaxSurge: nothing to lose, every
            // node surges at once; the old pods go when the new ones are available.
            name: "maxSurge with no old pod available surges every node",
            strategy: Strategy::MaxSurge(3),
            old_ready: false,
            steps: vec![
                Update(5, 0),
                Update(0, 0),
                Ready,
                Update(0, 5),
                Update(0, 0),
            ],
            all_updated: true,
        },
        Case {
            name: "maxSurge with new pods that never get ready holds the old pods",
            strategy: Strategy::MaxSurge(1),
            old_ready: true,
            steps: vec![Update(1, 0), Update(0, 0), Update(0, 0)],
            all_updated: false,
        },
        Case {
            // maxUnavailable and maxSurge both 0 default to one unavailable node.
            name: "no budget at all defaults to one unavailable node",
            strategy: Strategy::MaxUnavailable(0),
            old_ready: true,
            steps: vec![
                Update(0, 1),
                Fill(1),
                Update(0, 0),
                Ready,
                Update(0, 1),
                Fill(1),
            ],
            all_updated: false,
        },
    ];
    for case in cases {
        let (mut cluster, ds) = rolled_out(case.strategy, 0, case.old_ready).await;
        run(&mut cluster, &ds, &case.steps).await;
        let images = cluster.images();
        assert_eq!(
            cluster.pods.len(),
            NODES,
            "{}: every node runs a pod",
            case.name
        );
        assert_eq!(
            images.iter().all(|image| image == "foo2/bar2"),
            case.all_updated,
            "{}: {images:?}",
            case.name
        );
    }
}

#[tokio::test]
async fn unchanged_template_makes_no_writes_and_min_ready_seconds_holds_the_surge() {
    // TestDaemonSetUpdatesNoTemplateChanged: the pods already run the current revision.
    let (mut cluster, _) = rolled_out(Strategy::MaxUnavailable(3), 0, true).await;
    let same = daemon_set("foo/bar", Strategy::MaxUnavailable(3), 0);
    assert_eq!(cluster.rolling_update(&same, "v1").await, (0, 0));

    // minReadySeconds: a new pod counts as available only after it.
    let (mut cluster, ds) = rolled_out(Strategy::MaxSurge(1), 30, true).await;
    run(&mut cluster, &ds, &[Step::Update(1, 0)]).await;
    cluster.mark_ready(10);
    run(&mut cluster, &ds, &[Step::Update(0, 0)]).await;
    cluster.mark_ready(100);
    run(&mut cluster, &ds, &[Step::Update(1, 1)]).await;
}

#[tokio::test]
async fn surge_deletes_pods_on_nodes_that_should_not_run_them_only_beyond_desired() {
    // TestDaemonSetUpdatesPodsNotMatchTainstWithMaxSurge: a node gains a NoSchedule
    // taint the pod does not tolerate; its old pod keeps running while it is needed.
    let (mut cluster, ds) = rolled_out(Strategy::MaxSurge(1), 0, true).await;
    cluster.nodes[0] = node(0, true);
    // Four nodes should run the pod; five old pods are available: the one on the
    // tainted node goes, and one other node surges.
    let got = cluster.rolling_update(&ds, "v2").await;
    assert_eq!(got, (1, 1));
    assert!(!cluster.pods.contains_key("node-0"));
}

#[tokio::test]
async fn sync_nodes_creates_in_slow_start_batches_and_counts_expectations() {
    struct Case {
        name: &'static str,
        needing: usize,
        to_delete: usize,
        create_limit: Option<usize>,
        created: usize,
        deleted: usize,
        failed: bool,
        satisfied_after_observing: bool,
    }
    let cases = [
        Case {
            name: "all nodes get a pod",
            needing: 5,
            to_delete: 0,
            create_limit: None,
            created: 5,
            deleted: 0,
            failed: false,
            satisfied_after_observing: true,
        },
        Case {
            name: "creations and deletions in one call",
            needing: 2,
            to_delete: 3,
            create_limit: None,
            created: 2,
            deleted: 3,
            failed: false,
            satisfied_after_observing: true,
        },
        Case {
            // Batches 1, 2, 4: the third fails past the limit and the rest is skipped;
            // expectations are lowered for the failures and the skipped ones.
            name: "a failing batch stops the slow start",
            needing: 10,
            to_delete: 0,
            create_limit: Some(3),
            created: 3,
            deleted: 0,
            failed: true,
            satisfied_after_observing: true,
        },
        Case {
            name: "at most BURST_REPLICAS creations per sync",
            needing: super::BURST_REPLICAS + 10,
            to_delete: 0,
            create_limit: None,
            created: super::BURST_REPLICAS,
            deleted: 0,
            failed: false,
            satisfied_after_observing: true,
        },
    ];
    for case in cases {
        let ds = daemon_set("foo/bar", Strategy::OnDelete, 0);
        let fake = FakePodControl::with_create_limit(case.create_limit);
        let expectations = ControllerExpectations::new();
        let needing: Vec<String> = (0..case.needing).map(|i| format!("node-{i}")).collect();
        let to_delete: Vec<String> = (0..case.to_delete).map(|i| format!("pod-{i}")).collect();
        let result = sync_nodes_with(&fake, &expectations, &ds, &to_delete, &needing, "v1").await;
        assert_eq!(result.is_err(), case.failed, "{}: {result:?}", case.name);
        let created = fake.created();
        assert_eq!(created.len(), case.created, "{}", case.name);
        assert_eq!(fake.deleted().len(), case.deleted, "{}", case.name);
        // Each pod is pinned to its node and carries the revision hash and the
        // controllerRef.
        for (record, node) in created.iter().zip(&needing) {
            assert_eq!(
                target_node_name(&record.pod).as_ref(),
                Ok(node),
                "{}",
                case.name
            );
            assert_eq!(record.controller_ref.uid, "ds-uid");
            assert_eq!(
                (record.namespace.as_str(), record.owner.as_str()),
                ("default", "foo")
            );
            let labels = record.pod.labels().clone();
            assert_eq!(
                labels.get("controller-revision-hash").map(String::as_str),
                Some("v1")
            );
        }
        let key = key_of(&ds.metadata);
        for _ in 0..case.created {
            expectations.creation_observed(&key);
        }
        for _ in 0..case.deleted {
            expectations.deletion_observed(&key);
        }
        assert_eq!(
            expectations.satisfied(&key),
            case.satisfied_after_observing,
            "{}",
            case.name
        );
    }
}

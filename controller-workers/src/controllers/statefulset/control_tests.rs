//! Table tests of a StatefulSet pass (after upstream's `stateful_set_control_test.go`:
//! `TestStatefulSetControlRollingUpdate`, the partition and OnDelete cases), run pass
//! after pass through [`update_pods`] against [`FakeStatefulPodControl`]. Between
//! passes the test plays the kubelet (pods become Running and Ready) and the status
//! write (the computed status becomes the set's, a finished rolling update moving the
//! current revision forward).

use k8s_openapi::api::apps::v1::{
    ControllerRevision, RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetSpec,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::jiff::Timestamp;

use super::control::update_pods;
use super::fake_pod_control::{FakeStatefulPodControl, Write};
use super::status::complete_rolling_update;
use super::utils::new_revision;
use crate::meta::ResourceNames;

/// How the set is updated.
#[derive(Clone, Copy, Debug)]
enum Strategy {
    /// RollingUpdate, with this partition if any.
    Rolling(Option<i32>),
    OnDelete,
}

fn stateful_set(replicas: i32, image: &str, strategy: Strategy, parallel: bool) -> StatefulSet {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "web".to_string())].into();
    let update_strategy = match strategy {
        Strategy::Rolling(partition) => StatefulSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: partition.map(|partition| RollingUpdateStatefulSetStrategy {
                partition: Some(partition),
                max_unavailable: None,
            }),
        },
        Strategy::OnDelete => StatefulSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        },
    };
    StatefulSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("set-uid".into()),
            generation: Some(1),
            ..ObjectMeta::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            service_name: Some("web".into()),
            pod_management_policy: Some(if parallel { "Parallel" } else { "OrderedReady" }.into()),
            update_strategy: Some(update_strategy),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: Some(image.into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..StatefulSetSpec::default()
        }),
        status: None,
    }
}

/// The set, its revisions and its pods, moved along pass by pass.
struct Cluster {
    set: StatefulSet,
    revisions: Vec<ControllerRevision>,
    fake: FakeStatefulPodControl,
    now: Timestamp,
}

impl Cluster {
    fn new(set: StatefulSet) -> Self {
        let revision = new_revision(&set, 1, 0);
        Cluster {
            set,
            revisions: vec![revision],
            fake: FakeStatefulPodControl::default(),
            now: Timestamp::from_second(1_000_000).unwrap_or(Timestamp::UNIX_EPOCH),
        }
    }

    /// The set's template changes: a new revision becomes the update revision.
    fn change_template(&mut self, image: &str) {
        if let Some(container) = self
            .set
            .spec
            .as_mut()
            .and_then(|s| s.template.spec.as_mut())
            .and_then(|s| s.containers.first_mut())
        {
            container.image = Some(image.into());
        }
        let number = self.revisions.len() as i64 + 1;
        self.revisions.push(new_revision(&self.set, number, 0));
    }

    fn update_revision(&self) -> &ControllerRevision {
        &self.revisions[self.revisions.len() - 1]
    }

    /// The revision status.currentRevision names, else the update revision.
    fn current_revision(&self) -> &ControllerRevision {
        let named = self
            .set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.as_deref());
        self.revisions
            .iter()
            .find(|r| r.metadata.name.as_deref() == named)
            .unwrap_or_else(|| self.update_revision())
    }

    /// One pass; returns its writes.
    async fn pass(&mut self) -> Vec<Write> {
        let current = self.current_revision().clone();
        let update = self.update_revision().clone();
        let pods = self.fake.pods();
        let (status, error) = update_pods(&self.fake, &self.set, &current, &update, 0, &pods).await;
        assert!(error.is_none(), "pass failed: {error:?}");
        let Some(mut status) = status else {
            panic!("no status computed");
        };
        complete_rolling_update(&self.set, &mut status);
        self.set.status = Some(status.to_api());
        self.fake.take_writes()
    }

    /// Passes, the kubelet making every pod ready after each, until a pass writes
    /// nothing; returns every pass's writes.
    async fn settle(&mut self) -> Vec<Vec<Write>> {
        let mut passes = Vec::new();
        for _ in 0..50 {
            let writes = self.pass().await;
            self.fake.mark_all_ready(self.now);
            if writes.is_empty() {
                return passes;
            }
            passes.push(writes);
        }
        panic!("no steady state after 50 passes: {passes:?}");
    }

    /// Ordinals at the update revision.
    fn updated(&self) -> Vec<i32> {
        let update = self.update_revision().name_str().to_string();
        self.fake
            .revisions()
            .into_iter()
            .filter(|(_, revision)| *revision == update)
            .map(|(ordinal, _)| ordinal)
            .collect()
    }
}

fn create(name: &str) -> Write {
    Write::Create(name.into())
}

fn delete(name: &str) -> Write {
    Write::Delete(name.into())
}

/// A set of `replicas` whose pods all run revision 1, ready.
async fn running(replicas: i32, strategy: Strategy, parallel: bool) -> Cluster {
    let mut cluster = Cluster::new(stateful_set(replicas, "nginx:1", strategy, parallel));
    cluster.settle().await;
    assert_eq!(cluster.fake.pods().len(), replicas as usize);
    cluster
}

#[tokio::test]
async fn creation_is_ordered_or_parallel() {
    // OrderedReady: one pod per pass, each waiting for the one before to be ready.
    let mut cluster = Cluster::new(stateful_set(3, "nginx:1", Strategy::Rolling(None), false));
    let passes = cluster.settle().await;
    assert_eq!(
        passes,
        vec![
            vec![create("web-0")],
            vec![create("web-1")],
            vec![create("web-2")]
        ]
    );
    // Parallel: every pod in one pass.
    let mut cluster = Cluster::new(stateful_set(3, "nginx:1", Strategy::Rolling(None), true));
    let first = cluster.pass().await;
    assert_eq!(first.len(), 3, "{first:?}");
    assert!(first.iter().all(|w| matches!(w, Write::Create(_))));
}

#[tokio::test]
async fn rolling_update_table() {
    struct Case {
        name: &'static str,
        replicas: i32,
        strategy: Strategy,
        parallel: bool,
        /// The writes of each pass, the kubelet readying pods in between.
        passes: Vec<Vec<Write>>,
        /// Ordinals at the update revision at the end.
        updated: Vec<i32>,
        /// Whether status.currentRevision reached the update revision.
        complete: bool,
    }
    let cases = [
        Case {
            name: "rolling update replaces pods from the highest ordinal, one at a time",
            replicas: 3,
            strategy: Strategy::Rolling(None),
            parallel: false,
            passes: vec![
                vec![delete("web-2")],
                vec![create("web-2")],
                vec![delete("web-1")],
                vec![create("web-1")],
                vec![delete("web-0")],
                vec![create("web-0")],
            ],
            updated: vec![0, 1, 2],
            complete: true,
        },
        Case {
            name: "Parallel management still rolls one pod at a time",
            replicas: 3,
            strategy: Strategy::Rolling(None),
            parallel: true,
            passes: vec![
                vec![delete("web-2")],
                vec![create("web-2")],
                vec![delete("web-1")],
                vec![create("web-1")],
                vec![delete("web-0")],
                vec![create("web-0")],
            ],
            updated: vec![0, 1, 2],
            complete: true,
        },
        Case {
            name: "a partition keeps the ordinals below it at the current revision",
            replicas: 5,
            strategy: Strategy::Rolling(Some(3)),
            parallel: false,
            passes: vec![
                vec![delete("web-4")],
                vec![create("web-4")],
                vec![delete("web-3")],
                vec![create("web-3")],
            ],
            updated: vec![3, 4],
            complete: false,
        },
        Case {
            name: "a partition at or beyond replicas updates nothing",
            replicas: 3,
            strategy: Strategy::Rolling(Some(3)),
            parallel: false,
            passes: vec![],
            updated: vec![],
            complete: false,
        },
        Case {
            name: "OnDelete leaves the pods to the user",
            replicas: 3,
            strategy: Strategy::OnDelete,
            parallel: false,
            passes: vec![],
            updated: vec![],
            complete: false,
        },
    ];
    for case in cases {
        let mut cluster = running(case.replicas, case.strategy, case.parallel).await;
        cluster.change_template("nginx:2");
        let passes = cluster.settle().await;
        assert_eq!(passes, case.passes, "{}", case.name);
        assert_eq!(cluster.updated(), case.updated, "{}", case.name);
        let status = cluster.set.status.clone().unwrap_or_default();
        let update = cluster.update_revision().name_str().to_string();
        assert_eq!(
            status.current_revision.as_deref() == Some(update.as_str()),
            case.complete,
            "{}: {status:?}",
            case.name
        );
        assert_eq!(
            status.update_revision.as_deref(),
            Some(update.as_str()),
            "{}",
            case.name
        );
        assert_eq!(
            status.updated_replicas.unwrap_or(0),
            case.updated.len() as i32,
            "{}",
            case.name
        );
    }
}

#[tokio::test]
async fn an_unready_updated_pod_holds_the_rollout() {
    let mut cluster = running(3, Strategy::Rolling(None), false).await;
    cluster.change_template("nginx:2");
    assert_eq!(cluster.pass().await, vec![delete("web-2")]);
    assert_eq!(cluster.pass().await, vec![create("web-2")]);
    // web-2 is Pending: nothing more until the kubelet makes it ready.
    assert_eq!(cluster.pass().await, vec![]);
    assert_eq!(cluster.pass().await, vec![]);
    cluster.fake.mark_all_ready(cluster.now);
    assert_eq!(cluster.pass().await, vec![delete("web-1")]);
}

#[tokio::test]
async fn lowering_the_partition_continues_the_rollout() {
    let mut cluster = running(4, Strategy::Rolling(Some(2)), false).await;
    cluster.change_template("nginx:2");
    cluster.settle().await;
    assert_eq!(cluster.updated(), vec![2, 3]);
    if let Some(strategy) = cluster
        .set
        .spec
        .as_mut()
        .and_then(|s| s.update_strategy.as_mut())
    {
        strategy.rolling_update = Some(RollingUpdateStatefulSetStrategy {
            partition: Some(0),
            max_unavailable: None,
        });
    }
    let passes = cluster.settle().await;
    assert_eq!(
        passes,
        vec![
            vec![delete("web-1")],
            vec![create("web-1")],
            vec![delete("web-0")],
            vec![create("web-0")],
        ]
    );
    assert_eq!(cluster.updated(), vec![0, 1, 2, 3]);
}

#[tokio::test]
async fn on_delete_recreates_deleted_pods_at_the_update_revision() {
    let mut cluster = running(3, Strategy::OnDelete, false).await;
    cluster.change_template("nginx:2");
    assert_eq!(cluster.settle().await, Vec::<Vec<Write>>::new());
    cluster.fake.user_delete("web-1");
    assert_eq!(cluster.settle().await, vec![vec![create("web-1")]]);
    assert_eq!(cluster.updated(), vec![1]);
}

#[tokio::test]
async fn failed_pods_are_replaced_and_scale_down_goes_from_the_highest_ordinal() {
    let mut cluster = running(3, Strategy::Rolling(None), false).await;
    cluster.fake.set_phase("web-1", "Failed");
    assert_eq!(
        cluster.settle().await,
        vec![vec![delete("web-1")], vec![create("web-1")]]
    );
    if let Some(spec) = cluster.set.spec.as_mut() {
        spec.replicas = Some(1);
    }
    assert_eq!(
        cluster.settle().await,
        vec![vec![delete("web-2")], vec![delete("web-1")]]
    );
    assert_eq!(cluster.fake.pods().len(), 1);
}

//! End-to-end tests of `rkcm worker` with KCM's deployment, replicaset and serviceaccount
//! controllers: the test cluster (kube-sim with simulated nodes in this process, or
//! RKCM_TEST_KUBECONFIG's real cluster and its nodes), the real `rkcm informer-server`
//! and `rkcm worker` as separate processes, and every check made with the real kubectl
//! or kube-rs, as a user would.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams};
use rkcm_conformance::wait_for;

const WAIT: Duration = Duration::from_secs(90);

suite_stack! {
    /// The worker stack, by default with deployment, replicaset, replicationcontroller,
    /// serviceaccount and disruption.
    struct Stack(WorkerStack);
}

impl std::ops::DerefMut for Stack {
    fn deref_mut(&mut self) -> &mut WorkerStack {
        &mut self.0
    }
}

impl Stack {
    async fn start() -> Stack {
        Self::start_with(&[
            "--controllers",
            "deployment,replicaset,replicationcontroller,serviceaccount,disruption,nodelifecycle,root-ca-cert-publisher",
        ])
        .await
    }

    async fn start_with(worker_args: &[&str]) -> Stack {
        Stack(WorkerStack::start(worker_args).await)
    }

    /// `kubectl create deployment NAME --image IMAGE_1 --replicas N`.
    async fn create_deployment(&self, ns: &str, name: &str, replicas: u32) {
        let replicas = replicas.to_string();
        self.kubectl(&[
            "create",
            "deployment",
            name,
            "--image",
            IMAGE_1,
            "--replicas",
            &replicas,
            "-n",
            ns,
        ])
        .await;
    }

    async fn set_image(&self, ns: &str, deployment: &str, image: &str) {
        let target = format!("deployment/{deployment}");
        self.kubectl(&["set", "image", &target, &format!("pause={image}"), "-n", ns])
            .await;
    }

    /// Each of `expected` ("REASON SOURCE") is among the namespace's events.
    async fn expect_events(&self, ns: &str, expected: &[&str]) {
        let what = format!("events {expected:?}");
        self.wait(&what, || async {
            let events = self
                .cluster
                .kubectl_ok(&[
                    "get",
                    "events",
                    "-n",
                    ns,
                    "-o",
                    "custom-columns=REASON:.reason,SOURCE:.source.component",
                ])
                .await?;
            let seen = |expected: &&str| {
                events
                    .lines()
                    .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == **expected)
            };
            Ok(expected.iter().all(seen).then_some(()))
        })
        .await;
    }

    async fn replica_sets(&self, ns: &str) -> Vec<ReplicaSet> {
        Api::<ReplicaSet>::namespaced(self.cluster.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    /// Pods that are not being deleted.
    async fn live_pods(&self, ns: &str) -> Vec<Pod> {
        Api::<Pod>::namespaced(self.cluster.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .collect()
    }

    async fn wait_live_pods(&self, ns: &str, count: usize) {
        let what = format!("{count} live pods");
        wait_for(&what, WAIT, || async {
            Ok((self.live_pods(ns).await.len() == count).then_some(()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\nworker log:\n{}", self.worker.log()));
    }
}

fn annotation(rs: &ReplicaSet, key: &str) -> Option<String> {
    rs.metadata.annotations.as_ref()?.get(key).cloned()
}

fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

/// ReplicaSet revision -> (spec.replicas, image).
fn by_revision(list: &[ReplicaSet]) -> BTreeMap<String, (i32, String)> {
    list.iter()
        .map(|rs| {
            let image = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref())
                .map(|s| s.containers[0].image.clone().unwrap_or_default())
                .unwrap_or_default();
            (
                annotation(rs, "deployment.kubernetes.io/revision").unwrap_or_default(),
                (replicas(rs), image),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_rollout_set_image_undo_history_and_scale() {
    let s = Stack::start().await;
    let ns = s.namespace("deploy").await;
    s.create_deployment(&ns, "web", 3).await;
    s.rollout_status(&ns, "deployment/web").await;
    let deployments: Api<Deployment> = Api::namespaced(s.cluster.client.clone(), &ns);
    let web = deployments.get("web").await.unwrap();
    let status = web.status.clone().unwrap();
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.available_replicas,
            status.updated_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3))
    );
    assert_eq!(status.observed_generation, web.metadata.generation);
    let conditions: BTreeMap<_, _> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, (c.status, c.reason.unwrap_or_default())))
        .collect();
    assert_eq!(
        conditions["Available"],
        ("True".into(), "MinimumReplicasAvailable".into())
    );
    assert_eq!(
        conditions["Progressing"],
        ("True".into(), "NewReplicaSetAvailable".into())
    );
    assert_eq!(
        web.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "1"
    );
    let first = s.replica_sets(&ns).await;
    assert_eq!(first.len(), 1);
    let hash = first[0].metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(
        first[0].metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    assert_eq!(
        annotation(&first[0], "deployment.kubernetes.io/desired-replicas").as_deref(),
        Some("3")
    );
    assert_eq!(
        annotation(&first[0], "deployment.kubernetes.io/max-replicas").as_deref(),
        Some("4")
    );

    // a new template rolls a new ReplicaSet in and the old one out
    s.set_image(&ns, "web", IMAGE_2).await;
    s.rollout_status(&ns, "deployment/web").await;
    let rolled = by_revision(&s.replica_sets(&ns).await);
    assert_eq!(
        rolled,
        BTreeMap::from([
            ("1".to_string(), (0, IMAGE_1.to_string())),
            ("2".to_string(), (3, IMAGE_2.to_string())),
        ])
    );
    let history = s
        .kubectl(&["rollout", "history", "deployment/web", "-n", &ns])
        .await;
    let revisions: Vec<&str> = history
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| word.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");

    // undo brings revision 1's template back as revision 3
    s.kubectl(&["rollout", "undo", "deployment/web", "-n", &ns])
        .await;
    s.rollout_status(&ns, "deployment/web").await;
    let undone = by_revision(&s.replica_sets(&ns).await);
    assert_eq!(
        undone,
        BTreeMap::from([
            ("2".to_string(), (0, IMAGE_2.to_string())),
            ("3".to_string(), (3, IMAGE_1.to_string())),
        ])
    );
    let restored = s
        .replica_sets(&ns)
        .await
        .into_iter()
        .find(|rs| replicas(rs) == 3)
        .unwrap();
    assert_eq!(
        annotation(&restored, "deployment.kubernetes.io/revision-history").as_deref(),
        Some("1")
    );
    let history = s
        .kubectl(&["rollout", "history", "deployment/web", "-n", &ns])
        .await;
    assert!(
        history.contains("\n2 ") && history.contains("\n3 "),
        "{history}"
    );

    // scale out and in
    s.kubectl(&["scale", "deployment/web", "--replicas", "6", "-n", &ns])
        .await;
    s.rollout_status(&ns, "deployment/web").await;
    s.wait_live_pods(&ns, 6).await;
    s.kubectl(&["scale", "deployment/web", "--replicas", "2", "-n", &ns])
        .await;
    s.rollout_status(&ns, "deployment/web").await;
    s.wait_live_pods(&ns, 2).await;

    // a deleted pod is replaced
    let victim = s.live_pods(&ns).await[0].metadata.name.clone().unwrap();
    s.kubectl(&["delete", "pod", &victim, "-n", &ns, "--wait=false"])
        .await;
    wait_for("a replacement pod", WAIT, || async {
        let pods = s.live_pods(&ns).await;
        Ok((pods.len() == 2
            && pods
                .iter()
                .all(|p| p.metadata.name.as_deref() != Some(&victim)))
        .then_some(()))
    })
    .await
    .unwrap();

    // what kubectl describe shows
    s.expect_events(
        &ns,
        &[
            "ScalingReplicaSet deployment-controller",
            "SuccessfulCreate replicaset-controller",
            "SuccessfulDelete replicaset-controller",
        ],
    )
    .await;
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_worker_mid_rollout_ends_with_exactly_the_desired_pods() {
    let mut s = Stack::start().await;
    let ns = s.namespace("kill").await;
    s.create_deployment(&ns, "web", 10).await;
    s.rollout_status(&ns, "deployment/web").await;
    s.set_image(&ns, "web", IMAGE_2).await;
    // Kill it once the new ReplicaSet has started growing.
    wait_for("the new ReplicaSet to grow", WAIT, || async {
        Ok(s.replica_sets(&ns)
            .await
            .iter()
            .any(|rs| {
                annotation(rs, "deployment.kubernetes.io/revision").as_deref() == Some("2")
                    && replicas(rs) > 0
            })
            .then_some(()))
    })
    .await
    .unwrap();
    s.worker.kill().await.unwrap();
    s.worker.restart().await.unwrap();
    s.rollout_status(&ns, "deployment/web").await;
    s.wait_live_pods(&ns, 10).await;
    let sets = s.replica_sets(&ns).await;
    let pods = s.live_pods(&ns).await;
    for rs in &sets {
        let uid = rs.metadata.uid.clone().unwrap();
        let owned = pods
            .iter()
            .filter(|pod| {
                pod.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.uid == uid)
            })
            .count();
        assert_eq!(
            owned as i32,
            replicas(rs),
            "ReplicaSet {:?} owns {owned} live pods",
            rs.metadata.name
        );
    }
    assert_eq!(
        by_revision(&sets).get("2").map(|(n, _)| *n),
        Some(10),
        "{:?}",
        by_revision(&sets)
    );
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_default_service_account_is_recreated() {
    let s = Stack::start().await;
    let ns = s.namespace("sa").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(s.cluster.client.clone(), &ns);
    let before = accounts.get("default").await.unwrap().metadata.uid;
    accounts
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("a new default ServiceAccount", WAIT, || async {
        Ok(accounts
            .get_opt("default")
            .await?
            .filter(|sa| sa.metadata.uid != before)
            .map(|_| ()))
    })
    .await
    .unwrap();
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_workqueue_metrics() {
    let s = Stack::start().await;
    let (code, body) = http_get(&s.worker.health, "/readyz").await.unwrap();
    assert_eq!((code, body.as_str()), (200, "ok"));
    let ns = s.namespace("metrics").await;
    s.create_deployment(&ns, "m", 1).await;
    s.rollout_status(&ns, "deployment/m").await;
    let (_, metrics) = http_get(&s.worker.health, "/metrics").await.unwrap();
    for name in ["deployment", "replicaset", "serviceaccount"] {
        assert!(
            metrics.contains(&format!("workqueue_adds_total{{name=\"{name}\"}}")),
            "no adds for {name}:\n{metrics}"
        );
    }
    for family in [
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_work_duration_seconds_bucket",
        "workqueue_retries_total",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
    ] {
        assert!(metrics.contains(family), "no {family}:\n{metrics}");
    }
    assert!(
        metrics.contains(
            "running_managed_controllers{manager=\"rkcm\",name=\"deployment-controller\"} 1"
        ),
        "{metrics}"
    );
    let _ = &s.informer;
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_controller_lists_exit_2_with_the_reason() {
    for (list, expected) in [
        ("frobnicator", "is not a kube-controller-manager controller"),
        (
            "deployment-controller,-",
            "is not a kube-controller-manager controller",
        ),
    ] {
        assert_usage_error(
            [
                "worker",
                "--controllers",
                list,
                "--informer",
                "unix:///nonexistent.sock",
            ],
            expected,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_template_the_api_server_rejects_is_reported_then_recovers_without_duplicates() {
    let s = Stack::start().await;
    let ns = s.namespace("reject").await;
    // Pods naming a ServiceAccount that does not exist are refused by admission.
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"serviceAccountName": "builder",
                    "containers": [{"name": "c", "image": IMAGE_1}]}}}}))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(s.cluster.client.clone(), &ns);
    deployments
        .create(&Default::default(), &deployment)
        .await
        .unwrap();
    let sets: Api<ReplicaSet> = Api::namespaced(s.cluster.client.clone(), &ns);
    let failure = wait_for("the ReplicaFailure condition", WAIT, || async {
        let list = sets.list(&ListParams::default()).await?;
        Ok(list.items.iter().find_map(|rs| {
            rs.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
                .cloned()
        }))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nworker log:\n{}", s.worker.log()));
    assert_eq!(failure.reason.as_deref(), Some("FailedCreate"));
    assert!(
        failure
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("builder"),
        "{failure:?}"
    );
    wait_for(
        "the Deployment's ReplicaFailure condition",
        WAIT,
        || async {
            let d = deployments.get("web").await?;
            Ok(d.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "ReplicaFailure" && c.reason.as_deref() == Some("FailedCreate"))
                .then_some(()))
        },
    )
    .await
    .unwrap();
    let events = s
        .kubectl(&[
            "get",
            "events",
            "-n",
            &ns,
            "--field-selector",
            "reason=FailedCreate",
            "-o",
            "name",
        ])
        .await;
    assert!(!events.trim().is_empty(), "no FailedCreate event");

    // Once the account exists the backoff retries succeed: exactly 3 pods, and the
    // failure condition is gone.
    s.kubectl(&["create", "serviceaccount", "builder", "-n", &ns])
        .await;
    s.rollout_status(&ns, "deployment/web").await;
    s.wait_live_pods(&ns, 3).await;
    wait_for("the ReplicaFailure condition to clear", WAIT, || async {
        let list = sets.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .all(|rs| {
                rs.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_none_or(|c| c.iter().all(|c| c.type_ != "ReplicaFailure"))
            })
            .then_some(()))
    })
    .await
    .unwrap();
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_errors_and_dropped_streams_mid_scale_end_with_exactly_the_desired_pods() {
    let s = Stack::start().await;
    let Some(sim) = s
        .cluster
        .sim_only("fault injection (500s, dropped watches)")
    else {
        return;
    };
    let ns = s.namespace("faults").await;
    s.create_deployment(&ns, "web", 2).await;
    s.rollout_status(&ns, "deployment/web").await;
    s.kubectl(&["scale", "deployment/web", "--replicas", "12", "-n", &ns])
        .await;
    sim.faults()
        .fail_next(25, kube_sim::faults::Failure::Internal);
    sim.faults().drop_watches();
    let pods: Api<Pod> = Api::namespaced(s.cluster.client.clone(), &ns);
    wait_for("12 Running pods", WAIT, || async {
        let list = pods.list(&ListParams::default()).await?;
        let live: Vec<_> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let running = live
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        Ok((live.len() == 12 && running == 12).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nworker log:\n{}", s.worker.log()));
    s.rollout_status(&ns, "deployment/web").await;
    // Give a duplicate every chance to show: the stores resync nothing new, so the
    // count stays.
    sim.faults().drop_watches();
    s.kubectl(&["annotate", "deployment/web", "touched=1", "-n", &ns])
        .await;
    s.rollout_status(&ns, "deployment/web").await;
    assert_eq!(s.live_pods(&ns).await.len(), 12);
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_controller_keeps_its_pods_as_a_replica_set_does() {
    let s = Stack::start().await;
    let ns = s.namespace("rc").await;
    let rc = serde_json::json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "legacy", "namespace": ns},
        "spec": {"replicas": 3, "selector": {"app": "legacy"},
            "template": {"metadata": {"labels": {"app": "legacy"}},
                "spec": {"containers": [{"name": "pause", "image": IMAGE_1}]}}}});
    s.cluster
        .kubectl_stdin(&["apply", "-f", "-"], &rc.to_string())
        .await
        .unwrap();
    s.wait_live_pods(&ns, 3).await;
    let controllers: Api<k8s_openapi::api::core::v1::ReplicationController> =
        Api::namespaced(s.cluster.client.clone(), &ns);
    wait_for("the RC's readyReplicas", WAIT, || async {
        let rc = controllers.get("legacy").await?;
        let status = rc.status.unwrap_or_default();
        Ok((status.ready_replicas == Some(3)
            && status.observed_generation == rc.metadata.generation)
            .then_some(()))
    })
    .await
    .unwrap();
    let pods = s.live_pods(&ns).await;
    let owner = pods[0]
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default();
    assert_eq!(
        (
            owner[0].api_version.as_str(),
            owner[0].kind.as_str(),
            owner[0].controller
        ),
        ("v1", "ReplicationController", Some(true))
    );
    s.kubectl(&["scale", "rc/legacy", "--replicas", "1", "-n", &ns])
        .await;
    s.wait_live_pods(&ns, 1).await;
    s.expect_events(
        &ns,
        &[
            "SuccessfulCreate replication-controller",
            "SuccessfulDelete replication-controller",
        ],
    )
    .await;
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_follows_pods_becoming_ready_and_blocks_an_eviction_with_429() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let s = Stack::start().await;
    let ns = s.namespace("evict").await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(s.cluster.client.clone(), &ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "slow"}}}
    }))
    .unwrap();
    budgets.create(&Default::default(), &pdb).await.unwrap();
    // Pods that turn Ready only 3 s after they start.
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "slow", "namespace": ns},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "slow"}},
            "template": {"metadata": {"labels": {"app": "slow"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "pause", "image": IMAGE_1,
                    "readinessProbe": {"initialDelaySeconds": 3,
                        "exec": {"command": ["true"]}}}]}}}
    });
    s.apply(&deployment).await;
    // Before the pods are ready: 3 expected, fewer than 2 healthy, nothing allowed.
    let early = s
        .wait("the budget to count 3 pods not yet healthy", || async {
            let status = budgets.get("guard").await?.status.unwrap_or_default();
            Ok((status.expected_pods == 3 && status.current_healthy < 2).then_some(status))
        })
        .await;
    assert_eq!(early.disruptions_allowed, 0, "{early:?}");
    let condition = &early.conditions.unwrap_or_default()[0];
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "InsufficientPods")
    );
    // Once they are ready: one disruption allowed.
    s.wait("the budget to allow one disruption", || async {
        let status = budgets.get("guard").await?.status.unwrap_or_default();
        Ok((status.current_healthy == 3 && status.disruptions_allowed == 1).then_some(()))
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(s.cluster.client.clone(), &ns);
    let names: Vec<String> = pods
        .list(&ListParams::default().labels("app=slow"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let evict = kube::api::EvictParams::default();
    pods.evict(&names[0], &evict).await.unwrap();
    // The budget is spent: the next eviction is refused with 429 until the controller
    // sees the replacement ready again.
    // (A client without the test client's retries: it would retry the 429.)
    let once: Api<Pod> = Api::namespaced(s.cluster.client_without_retries().await.unwrap(), &ns);
    match once.evict(&names[1], &evict).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 429, "{status:?}");
            assert_eq!(
                status.message,
                "Cannot evict pod as it would violate the pod's disruption budget."
            );
        }
        other => panic!("a second eviction went through: {other:?}"),
    }
    let status = budgets
        .get("guard")
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    assert!(
        status
            .disrupted_pods
            .unwrap_or_default()
            .contains_key(&names[0]),
        "the evicted pod is listed in disruptedPods"
    );
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_disruption_budgets_get_their_status() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let s = Stack::start().await;
    let ns = s.namespace("pdb").await;
    s.create_deployment(&ns, "web", 3).await;
    s.rollout_status(&ns, "deployment/web").await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(s.cluster.client.clone(), &ns);
    for (name, rule) in [
        ("min", serde_json::json!({"minAvailable": 2})),
        ("max", serde_json::json!({"maxUnavailable": "34%"})),
    ] {
        let mut spec = rule;
        spec["selector"] = serde_json::json!({"matchLabels": {"app": "web"}});
        let pdb: PodDisruptionBudget =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
                .unwrap();
        budgets.create(&Default::default(), &pdb).await.unwrap();
    }
    for (name, expected) in [("min", (3, 2, 3, 1)), ("max", (3, 1, 3, 2))] {
        // max: 34% of 3 rounds up to 2 unavailable, so 1 must stay healthy
        let what = format!("the status of PDB {name}");
        let status = wait_for(&what, WAIT, || async {
            let status = budgets.get(name).await?.status.unwrap_or_default();
            let counts = (
                status.expected_pods,
                status.desired_healthy,
                status.current_healthy,
                status.disruptions_allowed,
            );
            Ok((counts == expected).then_some(status))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\nworker log:\n{}", s.worker.log()));
        let condition = &status.conditions.unwrap()[0];
        assert_eq!(
            (
                condition.type_.as_str(),
                condition.status.as_str(),
                condition.reason.as_str()
            ),
            ("DisruptionAllowed", "True", "SufficientPods")
        );
    }
    let table = s
        .kubectl(&["get", "pdb", "min", "-n", &ns, "--no-headers"])
        .await;
    assert_eq!(
        table.split_whitespace().nth(3),
        Some("1"),
        "ALLOWED DISRUPTIONS: {table}"
    );
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_to_completion_fail_at_their_backoff_limit_and_index_their_pods() {
    use k8s_openapi::api::batch::v1::Job;
    let s = Stack::start_with(&[
        "--controllers",
        "job,serviceaccount,nodelifecycle,root-ca-cert-publisher",
    ])
    .await;
    let ns = s.namespace("job").await;
    let jobs: Api<Job> = Api::namespaced(s.cluster.client.clone(), &ns);
    let job = |name: &str, spec: serde_json::Value, exit_code: &str| -> Job {
        let mut spec = spec;
        spec["template"] = serde_json::json!({
            "metadata": {"annotations": {"sim.rkcm.io/exit-after": "300ms", "sim.rkcm.io/exit-code": exit_code}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": IMAGE_1}]}});
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
            .unwrap()
    };
    let pp = Default::default();
    jobs.create(
        &pp,
        &job(
            "plain",
            serde_json::json!({"completions": 3, "parallelism": 2}),
            "0",
        ),
    )
    .await
    .unwrap();
    jobs.create(
        &pp,
        &job(
            "indexed",
            serde_json::json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
            "0",
        ),
    )
    .await
    .unwrap();
    jobs.create(
        &pp,
        &job("failing", serde_json::json!({"backoffLimit": 0}), "1"),
    )
    .await
    .unwrap();
    let condition = |job: &Job, type_: &str| {
        job.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == type_ && c.status == "True")
                    .cloned()
            })
    };
    for name in ["plain", "indexed"] {
        let what = format!("Job {name} to complete");
        let done = wait_for(&what, WAIT, || async {
            let job = jobs.get(name).await?;
            Ok(condition(&job, "Complete").map(|_| job))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\nworker log:\n{}", s.worker.log()));
        let status = done.status.unwrap();
        assert_eq!(
            (status.succeeded, status.failed.unwrap_or(0)),
            (Some(3), 0),
            "{name}"
        );
        assert!(status.completion_time.is_some() && status.start_time.is_some());
        // Once every pod is released the counts stay as they were.
        let released = wait_for("the Job's pods released", WAIT, || async {
            let job = jobs.get(name).await?;
            let pods: Api<Pod> = Api::namespaced(s.cluster.client.clone(), &ns);
            let selector = format!("batch.kubernetes.io/job-name={name}");
            let held = pods
                .list(&ListParams::default().labels(&selector))
                .await?
                .items
                .iter()
                .any(|p| {
                    p.metadata
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f == "batch.kubernetes.io/job-tracking")
                });
            Ok((!held).then_some(job.status.unwrap_or_default()))
        })
        .await
        .unwrap();
        assert_eq!(
            (released.succeeded, released.failed.unwrap_or(0)),
            (Some(3), 0),
            "{name}, after release"
        );
        if name == "indexed" {
            assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));
        }
    }
    let failed = wait_for("Job failing to fail", WAIT, || async {
        let job = jobs.get("failing").await?;
        Ok(condition(&job, "Failed"))
    })
    .await
    .unwrap();
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    // Every pod is counted and released: no tracking finalizer is left.
    let pods: Api<Pod> = Api::namespaced(s.cluster.client.clone(), &ns);
    wait_for(
        "the job-tracking finalizers to be removed",
        WAIT,
        || async {
            let list = pods.list(&ListParams::default()).await?;
            Ok(list
                .items
                .iter()
                .all(|p| {
                    !p.metadata
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f == "batch.kubernetes.io/job-tracking")
                })
                .then_some(()))
        },
    )
    .await
    .unwrap();
    let indexed_pods = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=indexed"))
        .await
        .unwrap();
    let mut seen: Vec<String> = indexed_pods
        .items
        .iter()
        .filter_map(|p| {
            p.metadata
                .annotations
                .as_ref()?
                .get("batch.kubernetes.io/job-completion-index")
                .cloned()
        })
        .collect();
    seen.sort();
    assert_eq!(seen, ["0", "1", "2"]);
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_failure_policy_fails_the_job_on_a_fatal_exit_code_and_ignores_another() {
    use k8s_openapi::api::batch::v1::Job;
    let s = Stack::start_with(&[
        "--controllers",
        "job,serviceaccount,nodelifecycle,root-ca-cert-publisher",
    ])
    .await;
    let ns = s.namespace("pfp").await;
    let jobs: Api<Job> = Api::namespaced(s.cluster.client.clone(), &ns);
    let job = |name: &str, action: &str, code: i32| -> Job {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {
                "backoffLimit": 0,
                "podFailurePolicy": {"rules": [
                    {"action": action, "onExitCodes": {"operator": "In", "values": [code]}}
                ]},
                "template": {
                    "metadata": {"annotations": {"sim.rkcm.io/exit-after": "300ms",
                        "sim.rkcm.io/exit-code": code.to_string()}},
                    "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": IMAGE_1}]}
                }
            }
        }))
        .unwrap()
    };
    let pp = Default::default();
    jobs.create(&pp, &job("fatal", "FailJob", 42))
        .await
        .unwrap();
    jobs.create(&pp, &job("ignored", "Ignore", 3))
        .await
        .unwrap();

    s.kubectl(&[
        "wait",
        "--for=condition=failed",
        "job/fatal",
        "-n",
        &ns,
        "--timeout=90s",
    ])
    .await;
    let fatal = jobs.get("fatal").await.unwrap();
    let status = fatal.status.clone().unwrap();
    let conditions: Vec<(String, String, String)> = status
        .conditions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status, c.reason.unwrap_or_default()))
        .collect();
    for type_ in ["FailureTarget", "Failed"] {
        assert!(
            conditions.contains(&(type_.into(), "True".into(), "PodFailurePolicy".into())),
            "{type_} with reason PodFailurePolicy: {conditions:?}"
        );
    }
    let message = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .and_then(|c| c.message)
        .unwrap_or_default();
    assert!(
        message.starts_with(&format!("Container c for pod {ns}/fatal-"))
            && message.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        "{message}"
    );
    assert_eq!((status.failed, status.terminating), (Some(1), Some(0)));
    let (_, metrics) = http_get(&s.worker.health, "/metrics").await.unwrap();
    for series in [
        "job_controller_jobs_finished_total{completion_mode=\"NonIndexed\",result=\"failed\",reason=\"PodFailurePolicy\"} 1",
        "job_controller_pod_failures_handled_by_failure_policy_total{action=\"FailJob\"} 1",
        "job_controller_job_pods_finished_total{completion_mode=\"NonIndexed\",result=\"failed\"} 1",
        "job_controller_job_syncs_total{completion_mode=\"NonIndexed\",result=\"success\",action=\"pods_created\"}",
        "job_controller_job_sync_duration_seconds_bucket{",
    ] {
        assert!(metrics.contains(series), "no {series} in:\n{metrics}");
    }

    // Exit code 3 is ignored: with backoffLimit 0 the Job still replaces the pod (after
    // the failure backoff) and counts no failure.
    let pods: Api<Pod> = Api::namespaced(s.cluster.client.clone(), &ns);
    wait_for("a second pod of the ignoring Job", WAIT, || async {
        let failed = pods
            .list(&ListParams::default().labels("batch.kubernetes.io/job-name=ignored"))
            .await?
            .items
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
            .count();
        Ok((failed >= 2).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nworker log:\n{}", s.worker.log()));
    let ignored = jobs
        .get("ignored")
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    assert_eq!(ignored.failed.unwrap_or(0), 0, "{ignored:?}");
    assert!(
        !ignored
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.status == "True" && (c.type_ == "Failed" || c.type_ == "FailureTarget")),
        "the ignoring Job has not failed"
    );
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_job_retries_a_failing_index_within_its_per_index_backoff_limit() {
    use k8s_openapi::api::batch::v1::Job;
    let s = Stack::start_with(&[
        "--controllers",
        "job,serviceaccount,nodelifecycle,root-ca-cert-publisher",
    ])
    .await;
    let ns = s.namespace("bpi").await;
    let jobs: Api<Job> = Api::namespaced(s.cluster.client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(s.cluster.client.clone(), &ns);
    let job = |name: &str, limit: i32| -> Job {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {
                "completions": 3, "parallelism": 3, "completionMode": "Indexed",
                "backoffLimitPerIndex": limit,
                "template": {
                    "metadata": {"annotations": {"sim.rkcm.io/exit-after": "2s",
                        "sim.rkcm.io/exit-code": "0"}},
                    "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": IMAGE_1}]}
                }
            }
        }))
        .unwrap()
    };
    // The first pod of index 1 is told to exit 1 (node-sim reads the annotation when
    // the container exits); its replacement runs the template and succeeds.
    let fail_first_of_index_1 = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let selector = format!(
                "batch.kubernetes.io/job-name={name},batch.kubernetes.io/job-completion-index=1"
            );
            let first = wait_for("the first pod of index 1", WAIT, || async {
                Ok(pods
                    .list(&ListParams::default().labels(&selector))
                    .await?
                    .items
                    .into_iter()
                    .next())
            })
            .await
            .unwrap();
            let patch =
                serde_json::json!({"metadata": {"annotations": {"sim.rkcm.io/exit-code": "1"}}});
            pods.patch(
                first.metadata.name.as_deref().unwrap(),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap();
            first
        }
    };
    let pp = Default::default();
    jobs.create(&pp, &job("retried", 1)).await.unwrap();
    let first = fail_first_of_index_1("retried").await;
    jobs.create(&pp, &job("given-up", 0)).await.unwrap();
    fail_first_of_index_1("given-up").await;

    s.kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/retried",
        "-n",
        &ns,
        "--timeout=90s",
    ])
    .await;
    let status = jobs.get("retried").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.succeeded,
            status.failed,
            status.completed_indexes.as_deref(),
            status.failed_indexes.as_deref()
        ),
        (Some(3), Some(1), Some("0-2"), Some(""))
    );
    let index_1: Vec<Pod> = pods
        .list(&ListParams::default().labels(
            "batch.kubernetes.io/job-name=retried,batch.kubernetes.io/job-completion-index=1",
        ))
        .await
        .unwrap()
        .items;
    let counts: BTreeMap<String, String> = index_1
        .iter()
        .map(|p| {
            let annotations = p.metadata.annotations.clone().unwrap_or_default();
            (
                p.metadata.name.clone().unwrap_or_default(),
                annotations
                    .get("batch.kubernetes.io/job-index-failure-count")
                    .cloned()
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(counts.len(), 2, "index 1 ran twice: {counts:?}");
    assert_eq!(counts[first.metadata.name.as_deref().unwrap()], "0");
    assert!(
        counts.values().any(|c| c == "1"),
        "the retry carries the failure: {counts:?}"
    );
    let env = index_1[0].spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default();
    assert!(
        env.iter().any(|e| e.name == "JOB_COMPLETION_INDEX"),
        "indexed pods get JOB_COMPLETION_INDEX: {env:?}"
    );

    s.kubectl(&[
        "wait",
        "--for=condition=failed",
        "job/given-up",
        "-n",
        &ns,
        "--timeout=90s",
    ])
    .await;
    let status = jobs.get("given-up").await.unwrap().status.unwrap();
    let failed = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(failed.reason.as_deref(), Some("FailedIndexes"));
    assert_eq!(
        (
            status.failed_indexes.as_deref(),
            status.completed_indexes.as_deref(),
            status.failed
        ),
        (Some("1"), Some("0,2"), Some(1))
    );
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_pods_are_refused_reports_it_and_runs_once_they_are_accepted() {
    use k8s_openapi::api::batch::v1::Job;
    let s = Stack::start_with(&[
        "--controllers",
        "job,serviceaccount,nodelifecycle,root-ca-cert-publisher",
    ])
    .await;
    let ns = s.namespace("refused").await;
    let jobs: Api<Job> = Api::namespaced(s.cluster.client.clone(), &ns);
    // The pods name a ServiceAccount that does not exist yet: the API server refuses
    // them.
    let job: Job = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "needs-sa"},
        "spec": {"template": {
            "metadata": {"annotations": {"sim.rkcm.io/exit-after": "200ms"}},
            "spec": {"restartPolicy": "Never", "serviceAccountName": "late",
                "containers": [{"name": "c", "image": IMAGE_1}]}}}
    }))
    .unwrap();
    jobs.create(&Default::default(), &job).await.unwrap();
    s.expect_events(&ns, &["FailedCreate job-controller"]).await;
    let status = jobs
        .get("needs-sa")
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    assert!(
        !status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True"),
        "a refused pod does not fail the Job"
    );
    s.kubectl(&["create", "serviceaccount", "late", "-n", &ns])
        .await;
    s.kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/needs-sa",
        "-n",
        &ns,
        "--timeout=90s",
    ])
    .await;
    let pods: Api<Pod> = Api::namespaced(s.cluster.client.clone(), &ns);
    let made = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=needs-sa"))
        .await
        .unwrap()
        .items;
    assert_eq!(made.len(), 1, "exactly one pod once accepted: {made:?}");
    let status = jobs.get("needs-sa").await.unwrap().status.unwrap();
    assert_eq!((status.succeeded, status.failed.unwrap_or(0)), (Some(1), 0));
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cronjob_starts_its_job_at_the_next_minute() {
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    let s = Stack::start_with(&[
        "--controllers",
        "job,cronjob,serviceaccount,nodelifecycle,root-ca-cert-publisher",
    ])
    .await;
    let ns = s.namespace("cron").await;
    let cronjobs: Api<CronJob> = Api::namespaced(s.cluster.client.clone(), &ns);
    let cronjob: CronJob = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "tick"},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"template": {
                "metadata": {"annotations": {"sim.rkcm.io/exit-after": "200ms"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": IMAGE_1}]}}}}}}))
    .unwrap();
    cronjobs
        .create(&Default::default(), &cronjob)
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(s.cluster.client.clone(), &ns);
    // A Job made by hand from the CronJob runs (its owner is the CronJob) and is
    // reported, not taken into the active list.
    s.kubectl(&["create", "job", "manual", "--from=cronjob/tick", "-n", &ns])
        .await;
    s.kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/manual",
        "-n",
        &ns,
        "--timeout=60s",
    ])
    .await;
    let manual = jobs.get("manual").await.unwrap();
    assert_eq!(
        manual.metadata.annotations.as_ref().unwrap()["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    s.expect_events(&ns, &["UnexpectedJob cronjob-controller"])
        .await;
    // The first run is at the next whole minute: up to 60 s away.
    let job = wait_for(
        "the CronJob's first Job",
        Duration::from_secs(120),
        || async {
            Ok(jobs
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .find(|j| j.metadata.name.as_deref() != Some("manual")))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nworker log:\n{}", s.worker.log()));
    let scheduled = job.metadata.annotations.as_ref().unwrap()
        ["batch.kubernetes.io/cronjob-scheduled-timestamp"]
        .clone();
    let at: k8s_openapi::jiff::Timestamp = scheduled.parse().unwrap();
    assert_eq!(
        at.as_second() % 60,
        0,
        "scheduled on a whole minute: {scheduled}"
    );
    assert_eq!(
        job.metadata.name.clone().unwrap(),
        format!("tick-{}", at.as_second() / 60)
    );
    let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("CronJob", Some(true))
    );
    wait_for("lastScheduleTime and lastSuccessfulTime", WAIT, || async {
        let status = cronjobs.get("tick").await?.status.unwrap_or_default();
        Ok((status.last_schedule_time.as_ref().map(|t| t.0) == Some(at)
            && status.last_successful_time.is_some()
            && status.active.unwrap_or_default().is_empty())
        .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nworker log:\n{}", s.worker.log()));
    s.expect_events(
        &ns,
        &[
            "SuccessfulCreate cronjob-controller",
            "SawCompletedJob cronjob-controller",
        ],
    )
    .await;
    s.cluster.cleanup().await;
}

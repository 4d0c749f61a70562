//! End-to-end tests of the garbage collector (in its own worker process, the launcher's
//! default `garbage-collector` group) and of the namespace controller: the real
//! `rkcm launcher` with its children against the test cluster, checked with kubectl and
//! kube-rs.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);
/// ReplicaSets listed before the ones under test (see the orphan test below).
const FILLER_REPLICA_SETS: usize = 2000;

struct Stack {
    cluster: TestCluster,
    launcher: Launcher,
    _nodes: Option<common::SimNodes>,
    _serial: Option<tokio::sync::MutexGuard<'static, ()>>,
}

impl Stack {
    async fn start() -> Stack {
        let cluster = TestCluster::start().await.unwrap();
        let serial = serial_on_real_cluster(&cluster).await;
        let lease = format!("rkcm-test-{}", kube_sim::api::random_suffix(6));
        let launcher = Launcher::start(
            &cluster,
            &lease,
            &["--garbage-collector-discovery-period=1s"],
        )
        .await
        .unwrap();
        let nodes = simulated_nodes(&cluster, 3).await;
        Stack {
            cluster,
            launcher,
            _nodes: nodes,
            _serial: serial,
        }
    }

    async fn kubectl(&self, args: &[&str]) -> String {
        self.cluster
            .kubectl_ok(args)
            .await
            .unwrap_or_else(|e| panic!("{e:#}\nlauncher log:\n{}", self.launcher.log()))
    }

    /// A Deployment whose pods stop at once when deleted (grace period 0).
    async fn deployment(&self, ns: &str, name: &str, replicas: i32) {
        let manifest = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}});
        self.cluster
            .kubectl_stdin(&["apply", "-f", "-"], &manifest.to_string())
            .await
            .unwrap();
    }

    async fn rollout(&self, ns: &str, name: &str) {
        self.kubectl(&[
            "rollout",
            "status",
            &format!("deployment/{name}"),
            "-n",
            ns,
            "--timeout=90s",
        ])
        .await;
    }

    async fn count<K>(&self, ns: &str, labels: &str) -> usize
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        Api::<K>::namespaced(self.cluster.client.clone(), ns)
            .list(&ListParams::default().labels(labels))
            .await
            .map(|l| l.items.len())
            .unwrap_or(usize::MAX)
    }

    async fn wait(&self, what: &str, check: impl AsyncFn() -> bool) {
        wait_for(what, WAIT, || async { Ok(check().await.then_some(())) })
            .await
            .unwrap_or_else(|e| {
                let gc = self.launcher.log();
                panic!(
                    "{e:#}\nlauncher log (tail):\n{}",
                    gc.lines()
                        .rev()
                        .take(60)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_cascades_background_foreground_and_orphan() {
    let s = Stack::start().await;
    let ns = s.cluster.namespace("cascade").await.unwrap();
    assert_eq!(
        s.launcher.children("--group garbage-collector").len(),
        1,
        "the collector runs in its own process"
    );
    for name in ["bg", "fg", "or"] {
        s.deployment(&ns, name, 2).await;
    }
    for name in ["bg", "fg", "or"] {
        s.rollout(&ns, name).await;
    }

    s.kubectl(&["delete", "deployment", "bg", "-n", &ns]).await;
    s.wait("bg's ReplicaSet and pods to go", || async {
        s.count::<ReplicaSet>(&ns, "app=bg").await == 0 && s.count::<Pod>(&ns, "app=bg").await == 0
    })
    .await;

    s.kubectl(&[
        "delete",
        "deployment",
        "fg",
        "-n",
        &ns,
        "--cascade=foreground",
        "--wait=false",
    ])
    .await;
    let deployments: Api<Deployment> = Api::namespaced(s.cluster.client.clone(), &ns);
    let fg = deployments.get("fg").await.unwrap();
    assert!(fg
        .metadata
        .finalizers
        .unwrap_or_default()
        .contains(&"foregroundDeletion".to_string()));
    s.wait("fg to go after its dependents", || async {
        let gone = deployments.get_opt("fg").await.ok().flatten().is_none();
        if !gone {
            return false;
        }
        // The Deployment went last: nothing of it is left.
        s.count::<ReplicaSet>(&ns, "app=fg").await == 0 && s.count::<Pod>(&ns, "app=fg").await == 0
    })
    .await;

    s.kubectl(&["delete", "deployment", "or", "-n", &ns, "--cascade=orphan"])
        .await;
    let sets: Api<ReplicaSet> = Api::namespaced(s.cluster.client.clone(), &ns);
    s.wait("or's ReplicaSet to lose its ownerReference", || async {
        let list = sets
            .list(&ListParams::default().labels("app=or"))
            .await
            .unwrap();
        list.items.len() == 1
            && list.items[0]
                .metadata
                .owner_references
                .as_ref()
                .is_none_or(|o| o.is_empty())
    })
    .await;
    assert_eq!(
        s.count::<Pod>(&ns, "app=or").await,
        2,
        "orphaned pods keep running"
    );
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_owned_by_custom_resources_are_collected_for_a_crd_made_after_start() {
    let s = Stack::start().await;
    let group = format!("gc{}.example.com", kube_sim::api::random_suffix(5));
    let crds: Api<CustomResourceDefinition> = Api::all(s.cluster.client.clone());
    for kind in ["Parent", "Child"] {
        let plural = format!("{}s", kind.to_lowercase());
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
        .unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let ns = s.cluster.namespace("crd").await.unwrap();
    let resource = |kind: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&group, "v1", kind),
            &format!("{}s", kind.to_lowercase()),
        )
    };
    let parents: Api<DynamicObject> =
        Api::namespaced_with(s.cluster.client.clone(), &ns, &resource("Parent"));
    let children: Api<DynamicObject> =
        Api::namespaced_with(s.cluster.client.clone(), &ns, &resource("Child"));
    let parent = wait_for("the Parent CRD to be served", WAIT, || async {
        let parent: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": "Parent", "metadata": {"name": "p"}}))?;
        Ok(parents.create(&PostParams::default(), &parent).await.ok())
    })
    .await
    .unwrap();
    let child: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Child",
        "metadata": {"name": "c", "ownerReferences": [{"apiVersion": format!("{group}/v1"), "kind": "Parent",
            "name": "p", "uid": parent.metadata.uid.clone().unwrap()}]}}))
    .unwrap();
    children
        .create(&PostParams::default(), &child)
        .await
        .unwrap();
    // The collector must be watching Child (a resource made after it started) before the
    // deletion means anything: a kept child proves the owner is seen as present.
    tokio::task::yield_now().await;
    parents.delete("p", &Default::default()).await.unwrap();
    s.wait("the Child to be collected", || async {
        children.get_opt("c").await.ok().flatten().is_none()
    })
    .await;
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_wrong_kind_and_cross_scope_owner_references_are_handled_as_upstream() {
    let s = Stack::start().await;
    let ns = s.cluster.namespace("refs").await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(s.cluster.client.clone(), &ns);
    let make = |name: &str, owner: serde_json::Value| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [owner]}}))
            .unwrap()
    };
    let owner: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = configmaps
        .create(&PostParams::default(), &owner)
        .await
        .unwrap();
    let owner_uid = owner.metadata.uid.clone().unwrap();
    // An unknown kind: the collector cannot tell, so it keeps the object.
    configmaps
        .create(&PostParams::default(), &make("unknown-kind", json!({"apiVersion": "frobs.example.com/v1", "kind": "Frob", "name": "f", "uid": "0a0a0a0a-0000-0000-0000-000000000001"})))
        .await
        .unwrap();
    // A live owner: kept.
    configmaps
        .create(
            &PostParams::default(),
            &make(
                "owned",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}),
            ),
        )
        .await
        .unwrap();
    // A UID that never existed: collected.
    configmaps
        .create(&PostParams::default(), &make("dangling", json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "0a0a0a0a-0000-0000-0000-000000000002"})))
        .await
        .unwrap();
    s.wait("the dangling ConfigMap to be collected", || async {
        configmaps
            .get_opt("dangling")
            .await
            .ok()
            .flatten()
            .is_none()
    })
    .await;
    assert!(
        configmaps.get_opt("owned").await.unwrap().is_some(),
        "an owned object is never deleted"
    );
    assert!(
        configmaps.get_opt("unknown-kind").await.unwrap().is_some(),
        "an owner of unknown kind keeps its dependent"
    );
    // A cluster-scoped dependent naming a namespaced owner: invalid, collected, with an event.
    let namespaces: Api<Namespace> = Api::all(s.cluster.client.clone());
    let cross = format!("cross-{}", kube_sim::api::random_suffix(5));
    let cluster_scoped: Namespace = serde_json::from_value(json!({"metadata": {"name": cross,
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}]}}))
    .unwrap();
    namespaces
        .create(&PostParams::default(), &cluster_scoped)
        .await
        .unwrap();
    s.wait("the OwnerRefInvalidNamespace event", || async {
        let events = s
            .cluster
            .kubectl_ok(&[
                "get",
                "events",
                "-n",
                "default",
                "--field-selector",
                "reason=OwnerRefInvalidNamespace",
                "-o",
                "name",
            ])
            .await
            .unwrap_or_default();
        !events.trim().is_empty()
    })
    .await;
    s.cluster.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_namespace_with_500_objects_of_10_kinds() {
    let s = Stack::start().await;
    let ns = s.cluster.namespace("bulk").await.unwrap();
    let kinds: [(&str, &str, serde_json::Value); 10] = [
        ("v1", "ConfigMap", json!({"data": {"k": "v"}})),
        ("v1", "Secret", json!({"stringData": {"k": "v"}})),
        ("v1", "ServiceAccount", json!({})),
        ("v1", "Service", json!({"spec": {"ports": [{"port": 80}]}})),
        ("v1", "Endpoints", json!({})),
        (
            "v1",
            "LimitRange",
            json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}}),
        ),
        ("rbac.authorization.k8s.io/v1", "Role", json!({"rules": []})),
        (
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": []}),
        ),
        ("coordination.k8s.io/v1", "Lease", json!({"spec": {}})),
        (
            "policy/v1",
            "PodDisruptionBudget",
            json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}),
        ),
    ];
    let mut manifests = Vec::new();
    for (api_version, kind, body) in &kinds {
        for i in 0..50 {
            let mut object = body.clone();
            object["apiVersion"] = json!(api_version);
            object["kind"] = json!(kind);
            object["metadata"] =
                json!({"name": format!("{}-{i}", kind.to_lowercase()), "namespace": ns});
            manifests.push(object);
        }
    }
    let stream: Vec<String> = manifests.iter().map(|m| m.to_string()).collect();
    s.cluster
        .kubectl_stdin(&["create", "-f", "-"], &stream.join("\n"))
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(s.cluster.client.clone(), &ns);
    assert!(
        configmaps
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            >= 50
    );
    s.kubectl(&["delete", "namespace", &ns, "--timeout=110s"])
        .await;
    let namespaces: Api<Namespace> = Api::all(s.cluster.client.clone());
    s.wait("the namespace to disappear", || async {
        namespaces.get_opt(&ns).await.ok().flatten().is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_collector_mid_cascade_orphans_nothing_and_deletes_nothing_owned() {
    let s = Stack::start().await;
    let ns = s.cluster.namespace("gckill").await.unwrap();
    for i in 0..10 {
        s.deployment(&ns, &format!("d{i}"), 2).await;
    }
    s.deployment(&ns, "keep", 2).await;
    for i in 0..10 {
        s.rollout(&ns, &format!("d{i}")).await;
    }
    s.rollout(&ns, "keep").await;
    let collector = s.launcher.children("--group garbage-collector");
    assert_eq!(collector.len(), 1);
    for i in 0..10 {
        s.kubectl(&[
            "delete",
            "deployment",
            &format!("d{i}"),
            "-n",
            &ns,
            "--wait=false",
        ])
        .await;
    }
    // SAFETY: kill(2) on a test-owned process.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(collector[0] as i32, libc::SIGKILL);
    }
    s.wait("a restarted collector", || async {
        let now = s.launcher.children("--group garbage-collector");
        now.len() == 1 && now != collector
    })
    .await;
    s.wait(
        "every ReplicaSet and pod of the deleted Deployments to go",
        || async {
            let sets: Api<ReplicaSet> = Api::namespaced(s.cluster.client.clone(), &ns);
            let pods: Api<Pod> = Api::namespaced(s.cluster.client.clone(), &ns);
            let (Ok(sets), Ok(pods)) = (
                sets.list(&ListParams::default()).await,
                pods.list(&ListParams::default()).await,
            ) else {
                return false;
            };
            let by_app = |labels: Option<&BTreeMap<String, String>>| {
                labels
                    .and_then(|l| l.get("app"))
                    .cloned()
                    .unwrap_or_default()
            };
            sets.items
                .iter()
                .all(|rs| by_app(rs.metadata.labels.as_ref()) == "keep")
                && pods
                    .items
                    .iter()
                    .all(|p| by_app(p.metadata.labels.as_ref()) == "keep")
        },
    )
    .await;
    assert_eq!(
        s.count::<ReplicaSet>(&ns, "app=keep").await,
        1,
        "nothing owned is deleted"
    );
    assert_eq!(s.count::<Pod>(&ns, "app=keep").await, 2);
    s.cluster.cleanup().await;
}

/// ttl-after-finished deletes a finished Job after its TTL: the job controller runs it
/// to completion on the simulated nodes, and the collector finishes the foreground
/// deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_is_deleted_after_its_ttl() {
    use k8s_openapi::api::batch::v1::Job;
    let s = Stack::start().await;
    let ns = s.cluster.namespace("ttl").await.unwrap();
    let jobs: Api<Job> = Api::namespaced(s.cluster.client.clone(), &ns);
    for (name, ttl) in [("short", 1), ("long", 3600)] {
        let job: Job = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"ttlSecondsAfterFinished": ttl,
                "template": {"metadata": {"annotations": {"sim.rkcm.io/exit-after": "200ms"}},
                    "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}}))
        .unwrap();
        jobs.create(&PostParams::default(), &job).await.unwrap();
    }
    s.wait("the long-lived Job to complete", || async {
        jobs.get("long")
            .await
            .ok()
            .and_then(|j| j.status?.conditions)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            })
    })
    .await;
    s.wait("the short-lived Job to be deleted", || async {
        jobs.get_opt("short").await.ok().flatten().is_none()
    })
    .await;
    assert!(
        jobs.get_opt("long").await.unwrap().is_some(),
        "a Job within its TTL stays"
    );
    s.cluster.cleanup().await;
}

/// Issue 31: a Deployment deleted with propagationPolicy=Orphan while the collector is
/// down. The restarted collector sees the Deployment waiting on its `orphan` finalizer
/// before (or after) its ReplicaSet, whatever its monitors list first; the ReplicaSet
/// must be released, with its pods, before the Deployment goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_deletion_made_while_the_collector_is_down_keeps_replicasets_and_pods() {
    let mut stack = WorkerStack::start(&[
        "--controllers",
        "deployment,replicaset,nodelifecycle,root-ca-cert-publisher",
    ])
    .await;
    let mut collector = Worker::start(
        &stack.cluster,
        &stack.informer,
        &[
            "--controllers",
            "garbagecollector",
            "--garbage-collector-discovery-period=1s",
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("starting the collector: {e:#}"));
    let ns = stack.cluster.namespace("orphan-kill").await.unwrap();
    let names = ["a", "b", "c"];
    for name in names {
        let manifest = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}});
        stack.apply(&manifest).await;
    }
    let deployments: Api<Deployment> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let sets: Api<ReplicaSet> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let owned_by = |meta: &kube::api::ObjectMeta, uid: &str| {
        meta.owner_references.iter().flatten().any(|o| o.uid == uid)
    };
    // Per Deployment: its UID, its ReplicaSet's UID, and its pods' UIDs.
    let mut before: BTreeMap<&str, (String, String, Vec<String>)> = BTreeMap::new();
    for name in names {
        let selector = format!("app={name}");
        let found = stack
            .wait(&format!("{name}'s ReplicaSet and its 2 pods"), || async {
                let deployment = deployments.get(name).await?;
                let uid = deployment.metadata.uid.clone().unwrap_or_default();
                let rs = sets.list(&ListParams::default().labels(&selector)).await?;
                let [rs] = rs.items.as_slice() else {
                    return Ok(None);
                };
                let rs_uid = rs.metadata.uid.clone().unwrap_or_default();
                let owned: Vec<String> = pods
                    .list(&ListParams::default().labels(&selector))
                    .await?
                    .items
                    .iter()
                    .filter(|p| owned_by(&p.metadata, &rs_uid))
                    .filter_map(|p| p.metadata.uid.clone())
                    .collect();
                Ok((owned_by(&rs.metadata, &uid) && owned.len() == 2)
                    .then_some((uid, rs_uid, owned)))
            })
            .await;
        before.insert(name, found);
    }
    // Nothing needs the controllers any more (what follows is the collector's alone).
    // Then ReplicaSets that the restarted collector lists before ours (its lists come in
    // namespace order): the window in which, before the fix, the Deployments were seen
    // and orphaned before their ReplicaSets were in the graph.
    stack
        .worker
        .kill()
        .await
        .unwrap_or_else(|e| panic!("stopping the controllers: {e:#}"));
    let filler_ns = stack.cluster.namespace("aaa-filler").await.unwrap();
    assert!(filler_ns < ns);
    let filler: Api<ReplicaSet> = Api::namespaced(stack.cluster.client.clone(), &filler_ns);
    let made: Vec<Result<ReplicaSet, kube::Error>> =
        futures::stream::iter(0..FILLER_REPLICA_SETS)
            .map(|i| {
                let filler = filler.clone();
                async move {
                    let rs: ReplicaSet = serde_json::from_value(json!({
                        "metadata": {"name": format!("filler-{i:05}")},
                        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "filler"}},
                            "template": {"metadata": {"labels": {"app": "filler"}},
                                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}}))
                    .expect("a valid ReplicaSet");
                    filler.create(&PostParams::default(), &rs).await
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
    assert!(
        made.iter().all(Result::is_ok),
        "filler ReplicaSets: {:?}",
        made.iter().find(|r| r.is_err())
    );

    collector
        .kill()
        .await
        .unwrap_or_else(|e| panic!("killing the collector: {e:#}"));
    for name in names {
        deployments
            .delete(name, &DeleteParams::orphan())
            .await
            .unwrap();
    }
    for name in names {
        let waiting = deployments.get(name).await.unwrap().metadata;
        assert!(
            waiting.deletion_timestamp.is_some()
                && waiting
                    .finalizers
                    .unwrap_or_default()
                    .contains(&"orphan".to_string()),
            "{name} waits for the collector with its orphan finalizer"
        );
    }
    collector
        .restart()
        .await
        .unwrap_or_else(|e| panic!("restarting the collector: {e:#}"));

    let log = || collector.log();
    for name in names {
        match wait_for(&format!("{name} to go"), WAIT, || async {
            Ok(deployments.get_opt(name).await?.is_none().then_some(()))
        })
        .await
        {
            Ok(()) => {}
            Err(e) => panic!("{e:#}\ncollector log:\n{}", log()),
        }
    }
    for name in names {
        let (uid, rs_uid, pod_uids) = &before[name];
        let selector = format!("app={name}");
        let left = sets
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items;
        assert!(
            matches!(left.as_slice(), [rs] if rs.metadata.uid.as_ref() == Some(rs_uid)),
            "{name}'s ReplicaSet is kept: {left:?}\ncollector log:\n{}",
            log()
        );
        assert!(
            !owned_by(&left[0].metadata, uid),
            "{name}'s ReplicaSet no longer names the Deployment (else it would be collected): {:?}\ncollector log:\n{}",
            left[0].metadata.owner_references,
            log()
        );
        let mut kept: Vec<String> = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| owned_by(&p.metadata, rs_uid))
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        kept.sort();
        let mut expected = pod_uids.clone();
        expected.sort();
        assert_eq!(
            kept, expected,
            "{name}'s pods are kept, owned by the ReplicaSet"
        );
    }
    stack.cluster.cleanup().await;
}

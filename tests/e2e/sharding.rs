//! End-to-end: controller groups split over several processes (`shards: N` in the
//! launcher's groups file). A shard handles the namespaces that hash to it, and still sees
//! whole what its controllers must see whole: a DaemonSet sharded two or three ways runs
//! on every node, a sharded deployment/replicaset group makes exactly the pods asked for,
//! and a garbage collector sharded two ways cascades across namespaces and from
//! cluster-scoped owners, each object acted on by one shard.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ListParams};
use rkcm_conformance::{wait_for, TestCluster};

const WAIT: Duration = Duration::from_secs(120);
const NODES: usize = 6;

fn lease_name() -> String {
    format!("rkcm-test-{}", kube_sim::api::random_suffix(6))
}

/// A launcher on `cluster` with this groups file.
async fn launch(cluster: &TestCluster, dir: &std::path::Path, groups: &str) -> Launcher {
    let path = dir.join("groups.yaml");
    std::fs::write(&path, groups).unwrap();
    Launcher::start(
        cluster,
        &lease_name(),
        &["--process-groups", path.to_str().unwrap()],
    )
    .await
    .unwrap()
}

async fn running_pods(client: &kube::Client, ns: &str) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_sharded_two_and_three_ways_runs_on_every_node() {
    for shards in [2, 3] {
        let cluster = TestCluster::start().await.unwrap();
        let _serial = serial_on_real_cluster(&cluster).await;
        let Some(_nodes) = simulated_nodes(&cluster, NODES).await else {
            println!("skipped on a real cluster: the test needs {NODES} simulated nodes");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let launcher = launch(
            &cluster,
            dir.path(),
            &format!(
                "groups:\n- name: ds\n  controllers: [daemonset]\n  shards: {shards}\n- name: rest\n  controllers: ['*', -daemonset]\n"
            ),
        )
        .await;
        let mut namespaces = Vec::new();
        for i in 0..4 {
            let ns = cluster.namespace(&format!("shard{i}")).await.unwrap();
            cluster
                .kubectl_stdin(
                    &["apply", "-n", &ns, "-f", "-"],
                    "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      containers: [{name: c, image: registry.k8s.io/pause:3.9}]\n",
                )
                .await
                .unwrap();
            namespaces.push(ns);
        }
        for ns in &namespaces {
            let daemonsets: Api<DaemonSet> = Api::namespaced(cluster.client.clone(), ns);
            let what = format!("the DaemonSet of {ns} ({shards} shards) on all {NODES} nodes");
            wait_for(&what, WAIT, || async {
                let status = daemonsets.get("agent").await?.status.unwrap_or_default();
                let pods = running_pods(&cluster.client, ns).await?;
                let per_node: BTreeMap<String, usize> =
                    pods.iter().fold(BTreeMap::new(), |mut counts, pod| {
                        let node = pod
                            .spec
                            .as_ref()
                            .and_then(|s| s.node_name.clone())
                            .unwrap_or_default();
                        *counts.entry(node).or_default() += 1;
                        counts
                    });
                Ok((status.desired_number_scheduled == NODES as i32
                    && status.number_ready == NODES as i32
                    && per_node.len() == NODES
                    && per_node.values().all(|n| *n == 1))
                .then_some(()))
            })
            .await
            .unwrap_or_else(|e| panic!("{e:#}\n{}", launcher.log()));
        }
        assert_eq!(
            launcher.children("--shard").len(),
            shards,
            "one worker process per shard"
        );
        cluster.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_deployment_group_makes_exactly_the_pods_asked_for() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let _nodes = simulated_nodes(&cluster, 3).await;
    let dir = tempfile::tempdir().unwrap();
    let launcher = launch(
        &cluster,
        dir.path(),
        "groups:\n- name: apps\n  controllers: [deployment, replicaset]\n  shards: 2\n- name: rest\n  controllers: ['*', -deployment, -replicaset]\n",
    )
    .await;
    let mut namespaces = Vec::new();
    for i in 0..6 {
        let ns = cluster.namespace(&format!("apps{i}")).await.unwrap();
        cluster
            .kubectl_ok(&[
                "create",
                "deployment",
                "web",
                "--image=registry.k8s.io/pause:3.9",
                "--replicas=3",
                "-n",
                &ns,
            ])
            .await
            .unwrap();
        namespaces.push(ns);
    }
    for ns in &namespaces {
        let replicasets: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), ns);
        wait_for(
            &format!("3 pods of one ReplicaSet in {ns}"),
            WAIT,
            || async {
                let sets = replicasets.list(&ListParams::default()).await?.items;
                let pods = running_pods(&cluster.client, ns).await?;
                let owners: BTreeSet<String> = pods
                    .iter()
                    .flat_map(|p| p.metadata.owner_references.iter().flatten())
                    .map(|r| r.uid.clone())
                    .collect();
                Ok((sets.len() == 1 && pods.len() == 3 && owners.len() == 1).then_some(()))
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", launcher.log()));
    }
    // Each namespace was handled by one shard only: no pod beyond the 3 asked for was ever
    // made (the SuccessfulCreate events counted, once the recorder has written them all).
    for ns in &namespaces {
        let created = || async {
            let events = cluster
                .kubectl_ok(&[
                    "get",
                    "events",
                    "-n",
                    ns,
                    "--field-selector",
                    "reason=SuccessfulCreate",
                    "-o",
                    "jsonpath={range .items[*]}{.count}{\"\\n\"}{end}",
                ])
                .await?;
            Ok::<u32, anyhow::Error>(
                events
                    .lines()
                    .filter_map(|l| l.trim().parse::<u32>().ok())
                    .sum(),
            )
        };
        let seen = wait_for(
            &format!("the pod creations in {ns} recorded"),
            WAIT,
            || async {
                let seen = created().await?;
                Ok((seen >= 3).then_some(seen))
            },
        )
        .await
        .unwrap();
        assert_eq!(seen, 3, "3 pods created in {ns}, by one shard");
    }
    cluster.cleanup().await;
}

/// The collector's decisions in a launcher log: (worker, UID of the object acted on).
fn collector_actions(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter(|line| line.contains("garbagecollector"))
        .filter_map(|line| {
            let worker = line.strip_prefix('[')?.split(']').next()?;
            let identity = line.split("object=").nth(1)?;
            let uid = identity.split('(').nth(1)?.split(')').next()?;
            Some((worker.to_string(), uid.to_string()))
        })
        .collect()
}

fn fail(launcher: &Launcher, error: impl std::fmt::Display) -> ! {
    panic!("{error:#}\nlauncher log:\n{}", launcher.log())
}

/// A Deployment whose pods stop at once when deleted.
fn deployment(name: &str) -> String {
    serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_collector_sharded_two_ways_cascades_across_namespaces_and_cluster_scope() {
    let cluster = TestCluster::start().await.unwrap();
    let _serial = serial_on_real_cluster(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let launcher = launch(
        &cluster,
        dir.path(),
        "groups:\n- name: gc\n  controllers: [garbagecollector]\n  shards: 2\n- name: rest\n  controllers: ['*', -garbagecollector]\n",
    )
    .await;

    // Namespaces until each shard has two (the same hash as the informer-server's).
    let mut namespaces: Vec<String> = Vec::new();
    let mut per_shard = [0; 2];
    while per_shard.iter().any(|n| *n < 2) {
        assert!(
            namespaces.len() < 24,
            "namespaces always land in both shards"
        );
        let ns = cluster.namespace("gcshard").await.unwrap();
        per_shard[rkcm_proto::shard_of(&ns, 2) as usize] += 1;
        namespaces.push(ns);
    }

    // A cluster-scoped owner of one ConfigMap in each namespace, and one that stays.
    let suffix = kube_sim::api::random_suffix(6);
    let (owner, keeper) = (
        format!("rkcm-gc-owner-{suffix}"),
        format!("rkcm-gc-keeper-{suffix}"),
    );
    let mut role_uids = Vec::new();
    for name in [&owner, &keeper] {
        cluster
            .kubectl_ok(&[
                "create",
                "clusterrole",
                name,
                "--verb=get",
                "--resource=pods",
            ])
            .await
            .unwrap_or_else(|e| fail(&launcher, e));
        let roles: Api<ClusterRole> = Api::all(cluster.client.clone());
        role_uids.push(
            roles
                .get(name)
                .await
                .unwrap()
                .metadata
                .uid
                .unwrap_or_default(),
        );
    }
    for ns in &namespaces {
        for name in ["bg", "fg", "or"] {
            cluster
                .kubectl_stdin(&["apply", "-n", ns, "-f", "-"], &deployment(name))
                .await
                .unwrap_or_else(|e| fail(&launcher, e));
        }
        for (config, (role, uid)) in ["owned", "kept"]
            .iter()
            .zip([&owner, &keeper].iter().zip(&role_uids))
        {
            let manifest = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": config, "ownerReferences": [{
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "name": role, "uid": uid}]}});
            cluster
                .kubectl_stdin(&["apply", "-n", ns, "-f", "-"], &manifest.to_string())
                .await
                .unwrap_or_else(|e| fail(&launcher, e));
        }
    }
    let count = |ns: String, kind: &'static str, label: &'static str| {
        let client = cluster.client.clone();
        async move {
            let params = ListParams::default().labels(label);
            Ok::<usize, anyhow::Error>(match kind {
                "pods" => Api::<Pod>::namespaced(client, &ns)
                    .list(&params)
                    .await?
                    .items
                    .len(),
                _ => Api::<ReplicaSet>::namespaced(client, &ns)
                    .list(&params)
                    .await?
                    .items
                    .len(),
            })
        }
    };
    for ns in &namespaces {
        for label in ["app=bg", "app=fg", "app=or"] {
            wait_for(
                &format!("{label} with its ReplicaSet and 2 pods in {ns}"),
                WAIT,
                || async {
                    Ok((count(ns.clone(), "replicasets", label).await? == 1
                        && count(ns.clone(), "pods", label).await? == 2)
                        .then_some(()))
                },
            )
            .await
            .unwrap_or_else(|e| fail(&launcher, e));
        }
    }

    for ns in &namespaces {
        for (name, cascade) in [("bg", "background"), ("fg", "foreground"), ("or", "orphan")] {
            cluster
                .kubectl_ok(&[
                    "delete",
                    "deployment",
                    name,
                    "-n",
                    ns,
                    &format!("--cascade={cascade}"),
                    "--wait=false",
                ])
                .await
                .unwrap_or_else(|e| fail(&launcher, e));
        }
    }
    cluster
        .kubectl_ok(&["delete", "clusterrole", &owner])
        .await
        .unwrap_or_else(|e| fail(&launcher, e));

    for ns in &namespaces {
        let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), ns);
        let configs: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
        let sets: Api<ReplicaSet> = Api::namespaced(cluster.client.clone(), ns);
        wait_for(&format!("the cascades in {ns}"), WAIT, || async {
            let left = deployments.list(&ListParams::default()).await?.items.len();
            let owned_gone = configs.get_opt("owned").await?.is_none();
            let orphans = sets
                .list(&ListParams::default().labels("app=or"))
                .await?
                .items;
            let orphaned = orphans.len() == 1
                && orphans[0]
                    .metadata
                    .owner_references
                    .as_ref()
                    .is_none_or(|o| o.is_empty());
            let gone = count(ns.clone(), "replicasets", "app in (bg,fg)").await? == 0
                && count(ns.clone(), "pods", "app in (bg,fg)").await? == 0;
            Ok((left == 0 && owned_gone && orphaned && gone).then_some(()))
        })
        .await
        .unwrap_or_else(|e| fail(&launcher, e));
        assert_eq!(
            count(ns.clone(), "pods", "app=or").await.unwrap(),
            2,
            "the orphaned ReplicaSet keeps its pods in {ns}"
        );
        assert!(
            configs.get_opt("kept").await.unwrap().is_some(),
            "a ConfigMap whose cluster-scoped owner stays is kept in {ns}"
        );
    }

    assert_eq!(
        launcher.children("--shard").len(),
        2,
        "two collector shards"
    );
    // Every object was acted on by one shard only, and both shards acted.
    let actions = collector_actions(&launcher.log());
    let mut by_object: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (worker, uid) in &actions {
        by_object
            .entry(uid.clone())
            .or_default()
            .insert(worker.clone());
    }
    let twice: Vec<_> = by_object.iter().filter(|(_, w)| w.len() > 1).collect();
    assert!(twice.is_empty(), "acted on by two shards: {twice:?}");
    let workers: BTreeMap<&String, usize> =
        actions
            .iter()
            .fold(BTreeMap::new(), |mut counts, (worker, _)| {
                *counts.entry(worker).or_default() += 1;
                counts
            });
    println!("collector decisions by shard: {workers:?}");
    assert_eq!(
        workers.len(),
        2,
        "both shards collected their share: {workers:?}\n{}",
        launcher.log()
    );
    // On kube-sim, its record of requests: no delete of a pod, ReplicaSet or ConfigMap
    // found it gone or changed (404, 409), as a second shard's delete would.
    if let Some(sim) = cluster.sim.as_ref() {
        let repeated: Vec<_> = sim
            .requests_by_user()
            .into_iter()
            .filter(|r| r.verb == "delete" && (r.code == 404 || r.code == 409))
            .filter(|r| ["pods", "replicasets", "configmaps"].contains(&r.resource.as_str()))
            .collect();
        assert!(
            repeated.is_empty(),
            "deletes that found their object gone: {repeated:?}"
        );
    }
    cluster
        .kubectl_ok(&["delete", "clusterrole", &keeper])
        .await
        .unwrap();
    cluster.cleanup().await;
}

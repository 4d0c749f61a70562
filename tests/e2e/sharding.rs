//! End-to-end: controller groups split over several processes (`shards: N` in the
//! launcher's groups file). A shard handles the namespaces that hash to it, and still sees
//! whole what its controllers must see whole: a DaemonSet sharded two or three ways runs
//! on every node, a sharded deployment/replicaset group makes exactly the pods asked for,
//! and a controller that cannot be split (the garbage collector) is refused at start.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_garbage_collector_is_refused_at_start() {
    let cluster = TestCluster::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let groups = dir.path().join("groups.yaml");
    std::fs::write(
        &groups,
        "groups:\n- name: gc\n  controllers: [garbagecollector]\n  shards: 2\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(RKCM)
        .args(["launcher", "--kubeconfig"])
        .arg(&cluster.kubeconfig)
        .args(["--process-groups", groups.to_str().unwrap()])
        .arg(format!(
            "--runtime-dir={}",
            dir.path().join("run").display()
        ))
        .args(["--secure-port", "0"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("groups.yaml:4")
            && stderr.contains("garbage-collector-controller cannot be sharded"),
        "{stderr}"
    );
}

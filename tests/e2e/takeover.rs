//! End-to-end: rkcm takes over what kube-controller-manager made. rkcm names new
//! ReplicaSets by a stable hash of the template's JSON, not by KCM's hash of its Go struct
//! dump, so the names differ; but it matches existing ReplicaSets by content, so a
//! Deployment KCM rolled out is adopted as it is: no new ReplicaSet, no pod replaced, the
//! revision kept.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
/// The pod-template-hash KCM gave this template (any value rkcm would not compute).
const KCM_HASH: &str = "5d9c7b8f4d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_kcm_rolled_out_is_adopted_without_a_new_replicaset() {
    let cluster = TestCluster::start().await.unwrap();
    if cluster
        .sim_only("writing objects as KCM wrote them before any controller runs")
        .is_none()
    {
        return;
    }
    let ns = cluster.namespace("takeover").await.unwrap();
    let client = cluster.client.clone();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pp = PostParams::default();

    // What KCM leaves behind after rolling out `web` with 2 replicas.
    let container = json!({"name": "pause", "image": "registry.k8s.io/pause:3.9"});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"app": "web"},
                     "annotations": {"deployment.kubernetes.io/revision": "1"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [container]}}}}))
    .unwrap();
    let deployment = deployments.create(&pp, &deployment).await.unwrap();
    let owner = |kind: &str, name: &str, uid: &str| {
        json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true}])
    };
    let rs_name = format!("web-{KCM_HASH}");
    let replicaset: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": rs_name,
                     "labels": {"app": "web", "pod-template-hash": KCM_HASH},
                     "annotations": {"deployment.kubernetes.io/revision": "1",
                                     "deployment.kubernetes.io/desired-replicas": "2",
                                     "deployment.kubernetes.io/max-replicas": "3"},
                     "ownerReferences": owner("Deployment", "web", deployment.metadata.uid.as_deref().unwrap())},
        "spec": {"replicas": 2,
                 "selector": {"matchLabels": {"app": "web", "pod-template-hash": KCM_HASH}},
                 "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": KCM_HASH}},
                              "spec": {"containers": [container]}}}}))
    .unwrap();
    let replicaset = replicasets.create(&pp, &replicaset).await.unwrap();
    let mut kcm_pods = BTreeSet::new();
    for i in 0..2 {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{rs_name}-kcm{i}"),
                         "labels": {"app": "web", "pod-template-hash": KCM_HASH},
                         "ownerReferences": owner("ReplicaSet", &rs_name, replicaset.metadata.uid.as_deref().unwrap())},
            "spec": {"containers": [container]}}))
        .unwrap();
        let pod = pods.create(&pp, &pod).await.unwrap();
        kcm_pods.insert(pod.metadata.uid.unwrap());
    }

    // rkcm in KCM's place.
    let _nodes = simulated_nodes(&cluster, 2).await;
    let informer = InformerServer::start(&cluster, &[]).await.unwrap();
    let worker = Worker::start(
        &cluster,
        &informer,
        &[
            "--controllers",
            "deployment,replicaset,nodelifecycle,root-ca-cert-publisher",
        ],
    )
    .await
    .unwrap();
    wait_for(
        "the adopted Deployment to report 2 available replicas",
        WAIT,
        || async {
            let status = deployments.get("web").await?.status.unwrap_or_default();
            Ok((status.available_replicas == Some(2)
                && status.updated_replicas == Some(2)
                && status.observed_generation == Some(1))
            .then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", worker.log()));

    let sets = replicasets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let names: Vec<_> = sets
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        std::slice::from_ref(&rs_name),
        "KCM's ReplicaSet kept, no new one"
    );
    let running: BTreeSet<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.uid)
        .collect();
    assert_eq!(running, kcm_pods, "KCM's pods kept, none replaced");
    let revision = deployments
        .get("web")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default()
        .get("deployment.kubernetes.io/revision")
        .cloned();
    assert_eq!(revision.as_deref(), Some("1"), "the revision is KCM's");
}

//! Custom resources: creating a CRD serves its resource (discovery, CRUD, list, watch,
//! status and scale subresources), and deleting it takes its objects along.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::discovery::Discovery;
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_create_serves_its_resource_for_create_list_watch_status_and_scale() {
    let c = TestCluster::start().await.unwrap();
    let group = format!("{}.conformance.rkcm.dev", kube_sim::api::random_suffix(6));
    let crds: Api<CustomResourceDefinition> = Api::all(c.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wdg"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}}]}}))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let name = format!("widgets.{group}");
    wait_for("CRD Established", Duration::from_secs(30), || async {
        let c = crds.get(&name).await?;
        let established = c
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        Ok(established.then_some(()))
    })
    .await
    .unwrap();
    let discovery = wait_for("widgets in discovery", Duration::from_secs(30), || async {
        let d = Discovery::new(c.client.clone()).run().await?;
        let found = d.groups().any(|g| g.name() == group);
        Ok(found.then_some(()))
    })
    .await;
    discovery.unwrap();

    let ns = c.namespace("crd").await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    let w: DynamicObject = serde_json::from_value(
        json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"replicas": 2, "colour": "blue"}}),
    )
    .unwrap();
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let rv = created.metadata.resource_version.clone().unwrap();
    let list = api.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].data["spec"]["colour"], "blue");

    let mut watch = api
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    api.patch_status(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 2}})),
    )
    .await
    .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(20), watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let WatchEvent::Modified(o) = ev else {
        panic!("expected MODIFIED, got {ev:?}")
    };
    assert_eq!(o.data["status"]["replicas"], 2);
    assert_eq!(
        o.metadata.generation,
        Some(1),
        "a status change keeps generation"
    );

    let scale = api.get_scale("w1").await.unwrap();
    assert_eq!(
        (scale.spec.unwrap().replicas, scale.status.unwrap().replicas),
        (Some(2), 2)
    );
    api.patch_scale(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    let w = api.get("w1").await.unwrap();
    assert_eq!(
        (w.data["spec"]["replicas"].as_i64(), w.metadata.generation),
        (Some(5), Some(2))
    );

    // kubectl sees it too, by plural and short name.
    // (kubectl's discovery may need a moment to see the new resource.)
    let out = wait_for("kubectl get wdg", Duration::from_secs(20), || async {
        Ok(c.kubectl_ok(&["-n", &ns, "get", "wdg", "-o", "name"])
            .await
            .ok())
    })
    .await
    .unwrap();
    assert!(out.contains("widget"), "{out}");

    crds.delete(&name, &Default::default()).await.unwrap();
    wait_for("the CRD's resource to go", Duration::from_secs(60), || async {
        Ok(matches!(api.list(&Default::default()).await, Err(kube::Error::Api(e)) if e.code == 404).then_some(()))
    }).await.unwrap();
    c.cleanup().await;
}

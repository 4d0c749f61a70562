//! End-to-end test of the persistentvolume-expander controller in `rkcm launcher`'s worker
//! (WO-S1 check 10), on the test cluster (kube-sim with simulated nodes and csi-sim, or
//! RKCM_TEST_KUBECONFIG's real cluster), objects made with kubectl and checks read back
//! from the API server.
//!
//! The claims are bound by hand, as the binder would leave them (the volume's claimRef,
//! the claim's volumeName, bind-completed annotation and Bound status), so only the
//! expander runs. A grown claim on csi-sim's driver gets the Warning `ExternalExpanding`
//! from the expander, then its new size from csi-sim's resizer (kube-sim only); a grown
//! claim on a `gcePersistentDisk` volume gets the migrated driver as its resizer.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use kube::api::{Api, ListParams};
use serde_json::{json, Value};

const RESIZER: &str = "volume.kubernetes.io/storage-resizer";

/// The events about claim `name` in `ns`: (type, reason, message, source component).
/// Waits until the claim's events hold one `wanted` accepts (events are written after the
/// change they report, so one may lag what the test saw).
async fn wait_for_claim_event(
    stack: &LauncherStack,
    ns: &str,
    name: &str,
    what: &str,
    wanted: impl Fn(&[String; 4]) -> bool,
) {
    let wanted = &wanted;
    stack
        .wait(what, || async move {
            let events = claim_events(stack, ns, name).await?;
            Ok(events.into_iter().find(|e| wanted(e)))
        })
        .await;
}

async fn claim_events(
    stack: &LauncherStack,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<[String; 4]>> {
    let events: Api<Event> = Api::namespaced(stack.cluster.client.clone(), ns);
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("PersistentVolumeClaim"))
        .map(|e| {
            [
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
                e.source.and_then(|s| s.component).unwrap_or_default(),
            ]
        })
        .collect())
}

/// A volume and a claim of `class`, bound to each other as the binder binds them; the
/// volume's source is `source` (e.g. `{"csi": {...}}`).
async fn bound_pair(stack: &LauncherStack, ns: &str, name: &str, class: &str, source: Value) {
    stack
        .kubectl_stdin(
            &["apply", "-n", ns, "-f", "-"],
            &json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                         "volumeName": format!("{ns}-{name}"),
                         "resources": {"requests": {"storage": "1Gi"}}}})
            .to_string(),
        )
        .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(stack.cluster.client.clone(), ns);
    let uid = claims
        .get(name)
        .await
        .ok()
        .and_then(|c| c.metadata.uid)
        .unwrap_or_else(|| stack.fail(format!("claim {ns}/{name} was not created")));
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": class,
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns, "name": name, "uid": uid}});
    if let (Some(spec), Some(source)) = (spec.as_object_mut(), source.as_object()) {
        spec.extend(source.clone());
    }
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &json!({"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": format!("{ns}-{name}"),
                             "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
                "spec": spec})
            .to_string(),
        )
        .await;
    let status = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    stack.patch_status("pvc", Some(ns), name, &status).await;
    stack
        .patch_status(
            "pv",
            None,
            &format!("{ns}-{name}"),
            &json!({"status": {"phase": "Bound"}}),
        )
        .await;
}

async fn grow(stack: &LauncherStack, ns: &str, name: &str) {
    stack
        .merge_patch(
            "pvc",
            Some(ns),
            name,
            &json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grown_claims_wait_for_external_resizers() {
    let stack = LauncherStack::start(&["--controllers=persistentvolume-expander"]).await;
    let ns = format!("expand-{}", kube_sim::api::random_suffix(5));
    stack.kubectl(&["create", "namespace", &ns]).await;
    let class = format!("growable-{ns}");
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": class}, "provisioner": kube_sim::nodesim::csi::DRIVER,
                "allowVolumeExpansion": true})
            .to_string(),
        )
        .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(stack.cluster.client.clone(), &ns);

    // A csi-sim volume: the expander leaves it to the driver's external-resizer.
    let handle = format!("{ns}-csi");
    bound_pair(
        &stack,
        &ns,
        "csi",
        &class,
        json!({"csi": {"driver": kube_sim::nodesim::csi::DRIVER, "volumeHandle": handle, "fsType": "ext4"}}),
    )
    .await;
    grow(&stack, &ns, "csi").await;
    let event = stack
        .wait("the expander's ExternalExpanding event", || async {
            let events = claim_events(&stack, &ns, "csi").await?;
            Ok(events
                .into_iter()
                .find(|[_, reason, _, _]| reason == "ExternalExpanding"))
        })
        .await;
    assert_eq!(
        event,
        [
            "Warning".to_string(),
            "ExternalExpanding".into(),
            "waiting for an external controller to expand this PVC".into(),
            "volume_expand".into()
        ]
    );
    if stack.cluster.sim.is_some() {
        stack
            .wait("csi-sim's resizer to grow the claim", || async {
                let claim = claims.get("csi").await?;
                let capacity = claim
                    .status
                    .and_then(|s| s.capacity)
                    .and_then(|c| c.get("storage").cloned());
                Ok(capacity.filter(|q| q.0 == "2Gi"))
            })
            .await;
        wait_for_claim_event(
            &stack,
            &ns,
            "csi",
            "the VolumeResizeSuccessful event",
            |[kind, reason, message, _]| {
                kind == "Normal"
                    && reason == "VolumeResizeSuccessful"
                    && message == "Resize volume succeeded"
            },
        )
        .await;
    }

    // An in-tree gce-pd volume, which CSI migration hands to pd.csi.storage.gke.io.
    bound_pair(
        &stack,
        &ns,
        "gce",
        &class,
        json!({"gcePersistentDisk": {"pdName": format!("{ns}-disk"), "fsType": "ext4"}}),
    )
    .await;
    grow(&stack, &ns, "gce").await;
    stack
        .wait("the resizer annotation", || async {
            let claim = claims.get("gce").await?;
            Ok(claim
                .metadata
                .annotations
                .and_then(|a| a.get(RESIZER).cloned())
                .filter(|driver| driver == "pd.csi.storage.gke.io"))
        })
        .await;
    let expected = [
        "Normal".to_string(),
        "ExternalExpanding".into(),
        "CSI migration enabled for kubernetes.io/gce-pd; waiting for external resizer to expand the pvc".into(),
        "volume_expand".into(),
    ];
    wait_for_claim_event(
        &stack,
        &ns,
        "gce",
        "the CSI-migration ExternalExpanding event",
        |event| *event == expected,
    )
    .await;
    let gce = claims.get("gce").await.unwrap();
    assert_eq!(
        gce.status
            .and_then(|s| s.capacity)
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("1Gi".to_string()),
        "nothing grows a gce-pd volume here"
    );

    let metrics = stack.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("workqueue_adds_total{") && l.contains("name=\"volume_expand\"")),
        "no volume_expand queue in the metrics"
    );

    for (kind, name) in [
        ("pv", format!("{ns}-csi")),
        ("pv", format!("{ns}-gce")),
        ("storageclass", class.clone()),
    ] {
        let _ = stack
            .cluster
            .kubectl_ok(&["delete", kind, &name, "--wait=false"])
            .await;
    }
    let _ = stack
        .cluster
        .kubectl_ok(&["delete", "namespace", &ns, "--wait=false"])
        .await;
}

/// The whole dynamic path on the development cluster: the scheduler picks a node for a
/// WaitForFirstConsumer claim, the binder hands the claim to csi-sim, csi-sim provisions
/// in that node's zone, the binder binds, the pod runs; then the claim grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_provisioned_where_its_pod_runs_then_grown() {
    let stack = LauncherStack::start(&[
        "--controllers=persistentvolume-expander,persistentvolume-binder,serviceaccount,root-ca-cert-publisher,nodelifecycle,persistentvolume-attach-detach-controller",
    ])
    .await;
    if stack.cluster.sim.is_none() {
        println!("skipped: needs csi-sim, the development cluster's CSI driver");
        return;
    }
    let ns = stack.namespace("wffc").await;
    let class = format!("wffc-{ns}");
    stack
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": class}, "provisioner": kube_sim::nodesim::csi::DRIVER,
                "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true})
            .to_string(),
        )
        .await;
    stack
        .kubectl_stdin(
            &["apply", "-n", &ns, "-f", "-"],
            &json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                         "resources": {"requests": {"storage": "1Gi"}}}})
            .to_string(),
        )
        .await;
    stack
        .kubectl_stdin(
            &["apply", "-n", &ns, "-f", "-"],
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
                         "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})
            .to_string(),
        )
        .await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(stack.cluster.client.clone(), &ns);
    let node = stack
        .wait("the pod running", || async {
            let pod = pods.get("app").await?;
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            Ok(running
                .then(|| pod.spec.and_then(|s| s.node_name))
                .flatten())
        })
        .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(stack.cluster.client.clone(), &ns);
    let claim = claims.get("data").await.unwrap();
    let annotations = claim.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(kube_sim::nodesim::csi::ANN_SELECTED_NODE),
        Some(&node),
        "{annotations:?}"
    );
    assert_eq!(
        claim.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );
    let volume = format!("pvc-{}", claim.metadata.uid.clone().unwrap_or_default());
    assert_eq!(
        claim.spec.as_ref().and_then(|s| s.volume_name.clone()),
        Some(volume.clone())
    );
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(stack.cluster.client.clone());
    let zone = nodes
        .get(&node)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default()
        .get("topology.kubernetes.io/zone")
        .cloned();
    let pv = stack
        .kubectl(&["get", "pv", &volume, "-o", "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}"])
        .await;
    assert_eq!(Some(pv.trim().to_string()), zone);
    let provisioned = format!("Successfully provisioned volume {volume}");
    wait_for_claim_event(
        &stack,
        &ns,
        "data",
        "the ProvisioningSucceeded event",
        |[_, reason, message, _]| reason == "ProvisioningSucceeded" && *message == provisioned,
    )
    .await;

    grow(&stack, &ns, "data").await;
    stack
        .wait("the claim grown", || async {
            let claim = claims.get("data").await?;
            Ok(claim
                .status
                .and_then(|s| s.capacity)
                .and_then(|c| c.get("storage").cloned())
                .filter(|q| q.0 == "2Gi"))
        })
        .await;
    let _ = stack
        .cluster
        .kubectl_ok(&["delete", "namespace", &ns, "--wait=false"])
        .await;
    let _ = stack
        .cluster
        .kubectl_ok(&["delete", "storageclass", &class, "--wait=false"])
        .await;
}

//! node-sim's storage side against kube-sim: csi-sim (CSIDriver and CSINode objects,
//! provisioning, resizing, deleting, attaching) and the scheduler's VolumeBinding with the
//! kubelet waiting for bound claims. No controller runs here: where the binder would act,
//! the test writes what it would write, so each step of node-sim is seen on its own.

mod common;

use std::time::Duration;

use common::{call, start};
use kube_sim::nodesim::{csi, NodeSim, NodeSimConfig};
use serde_json::{json, Value};

/// Polls `get` until `check` accepts what it returns, or fails after 30 s with the last
/// value seen.
async fn wait_for<F, Fut>(what: &str, mut get: F, check: impl Fn(&Value) -> bool) -> Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Value, (u16, String)>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = get().await;
        if let Ok(value) = &got {
            if check(value) {
                return value.clone();
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; last seen: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create(client: &kube::Client, path: &str, body: Value) -> Value {
    call(client, "POST", path, Some(body.clone()))
        .await
        .unwrap_or_else(|e| panic!("POST {path} {body}: {e:?}"))
}

async fn patch(client: &kube::Client, path: &str, body: Value) -> Value {
    call(client, "PATCH", path, Some(body.clone()))
        .await
        .unwrap_or_else(|e| panic!("PATCH {path} {body}: {e:?}"))
}

async fn get(client: &kube::Client, path: impl AsRef<str>) -> Result<Value, (u16, String)> {
    call(client, "GET", path.as_ref(), None).await
}

/// The (type, reason, message) of the events about `name` in `ns`.
async fn events(client: &kube::Client, ns: &str, name: &str) -> Vec<(String, String, String)> {
    let list = get(client, format!("/api/v1/namespaces/{ns}/events"))
        .await
        .unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (s("type"), s("reason"), s("message"))
        })
        .collect()
}

async fn wait_event(client: &kube::Client, ns: &str, name: &str, reason: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let seen = events(client, ns, name).await;
        if let Some((_, _, message)) = seen.iter().find(|(_, r, _)| r == reason) {
            return message.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {reason} event about {ns}/{name}; seen: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn nodes(count: usize) -> NodeSimConfig {
    NodeSimConfig {
        nodes: count,
        start_delay: Duration::from_millis(100),
        ..Default::default()
    }
}

/// A namespace where pods can run without the controllers: its ServiceAccount and root CA
/// ConfigMap made by hand.
async fn namespace(client: &kube::Client, ns: &str) {
    create(
        client,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await;
    create(
        client,
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
    )
    .await;
    create(
        client,
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"},
               "data": {"ca.crt": "x"}}),
    )
    .await;
}

async fn class(client: &kube::Client, name: &str, provisioner: &str, mode: &str) {
    create(
        client,
        "/apis/storage.k8s.io/v1/storageclasses",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
               "provisioner": provisioner, "volumeBindingMode": mode, "allowVolumeExpansion": true}),
    )
    .await;
}

async fn claim(
    client: &kube::Client,
    ns: &str,
    name: &str,
    class: &str,
    annotations: Value,
) -> Value {
    create(
        client,
        &format!("/api/v1/namespaces/{ns}/persistentvolumeclaims"),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": name, "annotations": annotations},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                        "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await
}

/// What the binder writes when it binds `claim` to `volume`: the claim's volumeName and
/// bind-completed annotation, both objects' phase.
async fn bind_like_the_binder(client: &kube::Client, ns: &str, claim: &str, volume: &str) {
    let path = format!("/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}");
    patch(
        client,
        &path,
        json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
               "spec": {"volumeName": volume}}),
    )
    .await;
    patch(
        client,
        &format!("{path}/status"),
        json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}),
    )
    .await;
    patch(
        client,
        &format!("/api/v1/persistentvolumes/{volume}/status"),
        json!({"status": {"phase": "Bound"}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sim_registers_provisions_resizes_deletes_and_attaches() {
    let (_sim, client) = start().await;
    let _nodes = NodeSim::start(client.clone(), nodes(2));

    for (driver, attach) in csi::DRIVERS {
        wait_for(
            &format!("CSIDriver {driver}"),
            || {
                get(
                    &client,
                    format!("/apis/storage.k8s.io/v1/csidrivers/{driver}"),
                )
            },
            |d| d["spec"]["attachRequired"] == attach,
        )
        .await;
    }
    for node in ["sim-node-0", "sim-node-1"] {
        let csinode = wait_for(
            &format!("CSINode {node}"),
            || get(&client, format!("/apis/storage.k8s.io/v1/csinodes/{node}")),
            |_| true,
        )
        .await;
        let owner = get(&client, format!("/api/v1/nodes/{node}")).await.unwrap();
        assert_eq!(
            csinode["metadata"]["ownerReferences"][0]["uid"], owner["metadata"]["uid"],
            "{csinode}"
        );
        let drivers: Vec<&str> = csinode["spec"]["drivers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(drivers, [csi::DRIVER, csi::NOATTACH_DRIVER]);
        assert_eq!(csinode["spec"]["drivers"][0]["nodeID"], node);
    }

    namespace(&client, "t").await;
    class(&client, "wait", csi::DRIVER, "WaitForFirstConsumer").await;
    class(&client, "now", csi::DRIVER, "Immediate").await;
    let handed = json!({csi::ANN_STORAGE_PROVISIONER: csi::DRIVER});
    // The binder's annotation alone: a WaitForFirstConsumer claim waits for a node.
    let waiting = claim(&client, "t", "waiting", "wait", handed.clone()).await;
    let mut selected = handed.clone();
    selected[csi::ANN_SELECTED_NODE] = json!("sim-node-1");
    let c2 = claim(&client, "t", "c2", "wait", selected).await;
    let uid = c2["metadata"]["uid"].as_str().unwrap().to_string();
    let pv_name = format!("pvc-{uid}");
    let pv = wait_for(
        "the provisioned volume",
        || get(&client, format!("/api/v1/persistentvolumes/{pv_name}")),
        |_| true,
    )
    .await;
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
        csi::DRIVER
    );
    assert_eq!(pv["spec"]["csi"]["driver"], csi::DRIVER);
    assert_eq!(pv["spec"]["csi"]["volumeHandle"], uid.as_str());
    assert_eq!(pv["spec"]["csi"]["fsType"], "ext4");
    assert_eq!(pv["spec"]["claimRef"]["uid"], uid.as_str());
    assert_eq!(pv["spec"]["capacity"]["storage"], "1Gi");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(pv["spec"]["storageClassName"], "wait");
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
            ["values"],
        json!(["zone-b"]),
        "sim-node-1's zone"
    );
    assert_eq!(
        wait_event(&client, "t", "c2", "Provisioning").await,
        "External provisioner is provisioning volume for claim \"t/c2\""
    );
    assert_eq!(
        wait_event(&client, "t", "c2", "ProvisioningSucceeded").await,
        format!("Successfully provisioned volume {pv_name}")
    );
    let waiting_pv = format!("pvc-{}", waiting["metadata"]["uid"].as_str().unwrap());
    assert_eq!(
        get(&client, format!("/api/v1/persistentvolumes/{waiting_pv}"))
            .await
            .map_err(|e| e.0),
        Err(404),
        "a WaitForFirstConsumer claim without a selected node is not provisioned"
    );

    // Resizing a bound claim.
    bind_like_the_binder(&client, "t", "c2", &pv_name).await;
    patch(
        &client,
        "/api/v1/namespaces/t/persistentvolumeclaims/c2",
        json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
    )
    .await;
    let grown = wait_for(
        "the claim's new capacity",
        || get(&client, "/api/v1/namespaces/t/persistentvolumeclaims/c2"),
        |c| c["status"]["capacity"]["storage"] == "2Gi",
    )
    .await;
    assert!(
        grown["status"]["conditions"]
            .as_array()
            .is_none_or(|cs| cs.iter().all(|c| c["type"] != "Resizing")),
        "{grown}"
    );
    let pv = get(&client, format!("/api/v1/persistentvolumes/{pv_name}"))
        .await
        .unwrap();
    assert_eq!(pv["spec"]["capacity"]["storage"], "2Gi");
    assert_eq!(
        wait_event(&client, "t", "c2", "VolumeResizeSuccessful").await,
        "Resize volume succeeded"
    );

    // The error knob.
    let failing =
        json!({csi::ANN_STORAGE_PROVISIONER: csi::DRIVER, csi::PROVISION_ERROR: "out of disks"});
    claim(&client, "t", "broken", "now", failing).await;
    assert_eq!(
        wait_event(&client, "t", "broken", "ProvisioningFailed").await,
        "failed to provision volume with StorageClass \"now\": rpc error: code = Internal desc = out of disks"
    );

    // Attaching.
    create(
        &client,
        "/apis/storage.k8s.io/v1/volumeattachments",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "csi-test"},
               "spec": {"attacher": csi::DRIVER, "nodeName": "sim-node-0",
                        "source": {"persistentVolumeName": pv_name}}}),
    )
    .await;
    let va = wait_for(
        "the attachment",
        || {
            get(
                &client,
                "/apis/storage.k8s.io/v1/volumeattachments/csi-test",
            )
        },
        |va| va["status"]["attached"] == true,
    )
    .await;
    assert_eq!(
        va["metadata"]["finalizers"],
        json!([csi::ATTACHER_FINALIZER])
    );
    call(
        &client,
        "DELETE",
        "/apis/storage.k8s.io/v1/volumeattachments/csi-test",
        None,
    )
    .await
    .unwrap();
    wait_for(
        "the attachment to go",
        || async {
            match get(
                &client,
                "/apis/storage.k8s.io/v1/volumeattachments/csi-test",
            )
            .await
            {
                Err((404, _)) => Ok(json!("gone")),
                other => other,
            }
        },
        |v| v == "gone",
    )
    .await;

    // Released with policy Delete: csi-sim deletes the volume (pv-protection's finalizer,
    // with no controller here to lift it, keeps it Terminating).
    patch(
        &client,
        &format!("/api/v1/persistentvolumes/{pv_name}/status"),
        json!({"status": {"phase": "Released"}}),
    )
    .await;
    call(
        &client,
        "DELETE",
        "/api/v1/namespaces/t/persistentvolumeclaims/c2",
        None,
    )
    .await
    .unwrap();
    wait_for(
        "the released volume deleted",
        || get(&client, format!("/api/v1/persistentvolumes/{pv_name}")),
        |pv| !pv["metadata"]["deletionTimestamp"].is_null(),
    )
    .await;
}

fn pod(name: &str, claim: &str, extra: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx"}],
                 // No node-lifecycle controller here lifts the new nodes' not-ready taint.
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}});
    if let (Some(spec), Some(more)) = (pod["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in more {
            spec.insert(k.clone(), v.clone());
        }
    }
    pod
}

async fn scheduled_message(client: &kube::Client, name: &str) -> String {
    let pod = wait_for(
        &format!("pod {name} unschedulable"),
        || get(client, format!("/api/v1/namespaces/t/pods/{name}")),
        |p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            })
        },
    )
    .await;
    let condition = pod["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .unwrap()
        .clone();
    condition["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn running_on(client: &kube::Client, name: &str) -> String {
    let pod = wait_for(
        &format!("pod {name} running"),
        || get(client, format!("/api/v1/namespaces/t/pods/{name}")),
        |p| p["status"]["phase"] == "Running",
    )
    .await;
    pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_binds_volumes_first_and_the_kubelet_waits_for_bound_claims() {
    let (_sim, client) = start().await;
    let _nodes = NodeSim::start(client.clone(), nodes(3));
    namespace(&client, "t").await;
    class(&client, "now", csi::DRIVER, "Immediate").await;
    // The driver that needs no attaching: no attach/detach controller runs here, and the
    // kubelet waits for attachable volumes to be attached.
    class(
        &client,
        "wait",
        csi::NOATTACH_DRIVER,
        "WaitForFirstConsumer",
    )
    .await;
    class(
        &client,
        "local",
        "kubernetes.io/no-provisioner",
        "WaitForFirstConsumer",
    )
    .await;

    // PreFilter's messages.
    create(
        &client,
        "/api/v1/namespaces/t/pods",
        pod("no-claim", "nope", json!({})),
    )
    .await;
    assert_eq!(
        scheduled_message(&client, "no-claim").await,
        "0/3 nodes are available: persistentvolumeclaim \"nope\" not found."
    );
    assert_eq!(
        wait_event(&client, "t", "no-claim", "FailedScheduling").await,
        "0/3 nodes are available: persistentvolumeclaim \"nope\" not found."
    );
    claim(&client, "t", "imm", "now", json!({})).await;
    create(
        &client,
        "/api/v1/namespaces/t/pods",
        pod("immediate", "imm", json!({})),
    )
    .await;
    assert_eq!(
        scheduled_message(&client, "immediate").await,
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    );

    // A static volume only sim-node-2 reaches: the scheduler binds it to the claim and
    // waits for the binder before binding the pod.
    create(
        &client,
        "/api/v1/persistentvolumes",
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "local-2"},
               "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                        "storageClassName": "local", "local": {"path": "/mnt/disk"},
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["sim-node-2"]}]}]}}}}),
    )
    .await;
    patch(
        &client,
        "/api/v1/persistentvolumes/local-2/status",
        json!({"status": {"phase": "Available"}}),
    )
    .await;
    let lc = claim(&client, "t", "lc", "local", json!({})).await;
    create(
        &client,
        "/api/v1/namespaces/t/pods",
        pod("static", "lc", json!({})),
    )
    .await;
    let pv = wait_for(
        "the volume bound to the claim by the scheduler",
        || get(&client, "/api/v1/persistentvolumes/local-2"),
        |pv| pv["spec"]["claimRef"]["uid"] == lc["metadata"]["uid"],
    )
    .await;
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
        "yes"
    );
    let unbound = get(&client, "/api/v1/namespaces/t/pods/static")
        .await
        .unwrap();
    assert!(
        unbound["spec"]["nodeName"].is_null(),
        "bound before its claim: {unbound}"
    );
    bind_like_the_binder(&client, "t", "lc", "local-2").await;
    assert_eq!(running_on(&client, "static").await, "sim-node-2");

    // Bound elsewhere: the volume's node affinity rules the other nodes out.
    create(
        &client,
        "/api/v1/namespaces/t/pods",
        pod(
            "pinned",
            "lc",
            json!({"nodeSelector": {"kubernetes.io/hostname": "sim-node-0"}}),
        ),
    )
    .await;
    assert_eq!(
        scheduled_message(&client, "pinned").await,
        "0/3 nodes are available: 1 node(s) had volume node affinity conflict, 2 node(s) didn't match Pod's node affinity/selector."
    );

    // Dynamic: the claim gets the chosen node, csi-sim provisions, the binder binds.
    let dc = claim(&client, "t", "dc", "wait", json!({})).await;
    create(
        &client,
        "/api/v1/namespaces/t/pods",
        pod("dynamic", "dc", json!({})),
    )
    .await;
    let selected = wait_for(
        "the selected node",
        || get(&client, "/api/v1/namespaces/t/persistentvolumeclaims/dc"),
        |c| c["metadata"]["annotations"][csi::ANN_SELECTED_NODE].is_string(),
    )
    .await["metadata"]["annotations"][csi::ANN_SELECTED_NODE]
        .as_str()
        .unwrap()
        .to_string();
    patch(
        &client,
        "/api/v1/namespaces/t/persistentvolumeclaims/dc",
        json!({"metadata": {"annotations": {csi::ANN_STORAGE_PROVISIONER: csi::NOATTACH_DRIVER}}}),
    )
    .await;
    let pv_name = format!("pvc-{}", dc["metadata"]["uid"].as_str().unwrap());
    wait_for(
        "the provisioned volume",
        || get(&client, format!("/api/v1/persistentvolumes/{pv_name}")),
        |_| true,
    )
    .await;
    let unbound = get(&client, "/api/v1/namespaces/t/pods/dynamic")
        .await
        .unwrap();
    assert!(
        unbound["spec"]["nodeName"].is_null(),
        "bound before its claim: {unbound}"
    );
    bind_like_the_binder(&client, "t", "dc", &pv_name).await;
    assert_eq!(running_on(&client, "dynamic").await, selected);

    // The kubelet: a pod put on a node directly waits while its claim is not Bound.
    claim(&client, "t", "late", "", json!({})).await;
    create(
        &client,
        "/api/v1/namespaces/t/pods",
        pod("direct", "late", json!({"nodeName": "sim-node-0"})),
    )
    .await;
    let waiting = wait_for(
        "the pod's containers waiting",
        || get(&client, "/api/v1/namespaces/t/pods/direct"),
        |p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
        },
    )
    .await;
    assert_eq!(waiting["status"]["phase"], "Pending");
    create(
        &client,
        "/api/v1/persistentvolumes",
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "late-pv"},
               "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                        "storageClassName": "", "hostPath": {"path": "/tmp/late"}}}),
    )
    .await;
    let late = get(&client, "/api/v1/namespaces/t/persistentvolumeclaims/late")
        .await
        .unwrap();
    patch(
        &client,
        "/api/v1/persistentvolumes/late-pv",
        json!({"spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "namespace": "t", "name": "late", "uid": late["metadata"]["uid"]}}}),
    )
    .await;
    let still = get(&client, "/api/v1/namespaces/t/pods/direct")
        .await
        .unwrap();
    assert_eq!(
        still["status"]["phase"], "Pending",
        "running with an unbound claim"
    );
    bind_like_the_binder(&client, "t", "late", "late-pv").await;
    assert_eq!(running_on(&client, "direct").await, "sim-node-0");
}

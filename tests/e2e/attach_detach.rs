//! End-to-end tests of the persistentvolume-attach-detach controller in `rkcm launcher`'s
//! worker (WO-S2 checks 1-8), on the test cluster: kube-sim with node-sim's nodes (whose
//! kubelets wait for attachable volumes and report `volumesInUse`) and csi-sim (the
//! external-attacher of driver `csi.sim.rkcm.io`), or RKCM_TEST_KUBECONFIG's cluster with
//! node-sim's nodes and csi-sim started by the test.
//!
//! Claims are bound by hand to CSI volumes (as the binder would bind them), so the suite
//! needs no provisioner; pods are placed on a node by `spec.nodeName`.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};
use rkcm_conformance::wait_for;
use serde_json::{json, Value};

const DRIVER: &str = kube_sim::nodesim::csi::DRIVER;
const NOATTACH: &str = kube_sim::nodesim::csi::NOATTACH_DRIVER;
const CONTROLLERS: &str =
    "--controllers=persistentvolume-attach-detach-controller,serviceaccount,root-ca-cert-publisher";
const SYNC_PERIOD: &str = "--attach-detach-reconcile-sync-period=5s";

/// `csi-` + hex(sha256(handle + driver + node)).
fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{handle}{driver}{node}").as_bytes(),
    );
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

fn unique_name(driver: &str, handle: &str) -> String {
    format!("kubernetes.io/csi/{driver}^{handle}")
}

struct Stack {
    stack: LauncherStack,
    nodes: Vec<String>,
}

impl std::ops::Deref for Stack {
    type Target = LauncherStack;
    fn deref(&self) -> &LauncherStack {
        &self.stack
    }
}

impl Stack {
    /// `None` when the cluster has nodes of its own (the suite needs node-sim's kubelets
    /// and csi-sim's attacher).
    async fn start(extra: &[&str]) -> Option<Stack> {
        let mut args = vec![CONTROLLERS];
        args.extend_from_slice(extra);
        let stack = LauncherStack::start(&args).await;
        let Some(nodes) = stack.nodes.as_ref().map(|n| n.node_names()) else {
            println!("skipped: the cluster has schedulable nodes; the suite needs node-sim's kubelets and csi-sim");
            return None;
        };
        Some(Stack { stack, nodes })
    }

    fn client(&self) -> kube::Client {
        self.cluster.client.clone()
    }

    /// Claim `name` in `ns` bound to volume `<ns>-<name>` of `driver` (handle
    /// `h-<ns>-<name>`), with `modes` and the claim's csi-sim knobs.
    async fn bound_pair(
        &self,
        ns: &str,
        name: &str,
        driver: &str,
        modes: &[&str],
        knobs: Value,
    ) -> String {
        let volume = format!("{ns}-{name}");
        self.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "annotations": knobs},
            "spec": {"accessModes": modes, "storageClassName": "", "volumeName": volume,
                     "resources": {"requests": {"storage": "1Gi"}}}}))
            .await;
        let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            Api::namespaced(self.client(), ns);
        let uid = claims
            .get(name)
            .await
            .ok()
            .and_then(|c| c.metadata.uid)
            .unwrap_or_else(|| self.fail(format!("claim {ns}/{name} was not created")));
        self.apply(json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": modes, "storageClassName": "",
                     "persistentVolumeReclaimPolicy": "Retain",
                     "csi": {"driver": driver, "volumeHandle": format!("h-{volume}")},
                     "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                  "namespace": ns, "name": name, "uid": uid}}}))
            .await;
        let status = json!({"status": {"phase": "Bound", "accessModes": modes, "capacity": {"storage": "1Gi"}}});
        self.patch_status("pvc", Some(ns), name, &status).await;
        self.patch_status("pv", None, &volume, &json!({"status": {"phase": "Bound"}}))
            .await;
        volume
    }

    async fn pod_on(&self, ns: &str, name: &str, node: &str, claim: &str) {
        self.apply(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}))
            .await;
    }

    async fn pod_phase(&self, ns: &str, name: &str) -> Option<String> {
        let pods: Api<Pod> = Api::namespaced(self.client(), ns);
        pods.get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|p| p.status)
            .and_then(|s| s.phase)
    }

    async fn attachment(&self, name: &str) -> Option<VolumeAttachment> {
        let api: Api<VolumeAttachment> = Api::all(self.client());
        api.get_opt(name).await.ok().flatten()
    }

    async fn attached(&self, name: &str) -> bool {
        self.attachment(name)
            .await
            .and_then(|va| va.status)
            .is_some_and(|s| s.attached)
    }

    async fn node(&self, name: &str) -> Node {
        let api: Api<Node> = Api::all(self.client());
        api.get(name)
            .await
            .unwrap_or_else(|e| self.fail(format!("node {name}: {e}")))
    }

    async fn node_lists(&self, node: &str) -> (Vec<String>, Vec<String>) {
        let status = self.node(node).await.status.unwrap_or_default();
        let in_use = status.volumes_in_use.unwrap_or_default();
        let attached = status
            .volumes_attached
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.name)
            .collect();
        (in_use, attached)
    }

    /// (type, reason, message, source) of the events about pod `name`.
    async fn pod_events(&self, ns: &str, name: &str) -> Vec<[String; 4]> {
        let events: Api<Event> = Api::namespaced(self.client(), ns);
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        list.into_iter()
            .map(|e| {
                [
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                    e.source.and_then(|s| s.component).unwrap_or_default(),
                ]
            })
            .collect()
    }

    async fn wait_event(
        &self,
        ns: &str,
        pod: &str,
        kind: &str,
        reason: &str,
        message: &str,
        within: Duration,
    ) {
        self.wait_within(
            &format!("{kind} {reason} {message:?} on pod {pod}"),
            within,
            || async move {
                let events = self.pod_events(ns, pod).await;
                Ok(events
                    .iter()
                    .any(|[t, r, m, s]| {
                        t == kind && r == reason && m == message && s == "attachdetach-controller"
                    })
                    .then_some(()))
            },
        )
        .await;
    }

    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_sum(&self.metrics().await, name, labels).unwrap_or(0.0)
    }
}

/// Checks 1, 2, 8, 7 and 4: a pod's CSI volume is attached (VolumeAttachment, then its
/// status, then the node's volumesAttached, then the event) before the pod runs; a volume
/// of a driver that needs no attaching is left alone; a restarted worker keeps
/// everything; a deleted VolumeAttachment comes back at the next verification; a deleted
/// pod's volume leaves volumesInUse, then volumesAttached, then its VolumeAttachment goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_are_attached_before_pods_run_and_detached_after() {
    let Some(stack) = Stack::start(&[SYNC_PERIOD]).await else {
        return;
    };
    let ns = &*stack.namespace("attach").await;
    let node = stack.nodes[0].clone();
    let volume = stack
        .bound_pair(ns, "data", DRIVER, &["ReadWriteOnce"], json!({}))
        .await;
    let handle = format!("h-{volume}");
    let va_name = attachment_name(&handle, DRIVER, &node);
    let unique = unique_name(DRIVER, &handle);
    stack.pod_on(ns, "app", &node, "data").await;

    // Check 1, in order: VA, attached, node status, event; the pod runs only after.
    // First seen: VA, attached, in volumesAttached, Running.
    let seen: Mutex<[Option<Duration>; 4]> = Mutex::new([None; 4]);
    let started = Instant::now();
    stack
        .wait("the pod to run on its attached volume", || {
            let (va_name, unique, node, seen, stack) = (&va_name, &unique, &node, &seen, &stack);
            async move {
                let now = started.elapsed();
                let va = stack.attachment(va_name).await;
                let attached = va
                    .as_ref()
                    .and_then(|v| v.status.as_ref())
                    .is_some_and(|s| s.attached);
                let listed = stack.node_lists(node).await.1.contains(unique);
                let running = stack.pod_phase(ns, "app").await.as_deref() == Some("Running");
                let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                for (slot, now_true) in
                    seen.iter_mut()
                        .zip([va.is_some(), attached, listed, running])
                {
                    if now_true {
                        slot.get_or_insert(now);
                    }
                }
                Ok(seen[3].map(|_| ()))
            }
        })
        .await;
    let order = *seen.lock().unwrap_or_else(|p| p.into_inner());
    assert!(
        order.iter().all(Option::is_some) && order.windows(2).all(|w| w[0] <= w[1]),
        "VA, attached, volumesAttached, Running must come in that order: {order:?}"
    );
    let va = stack
        .attachment(&va_name)
        .await
        .unwrap_or_else(|| stack.fail("no VA"));
    assert_eq!(va.spec.attacher, DRIVER);
    assert_eq!(va.spec.node_name, node);
    assert_eq!(
        va.spec.source.persistent_volume_name.as_deref(),
        Some(volume.as_str())
    );
    stack
        .wait_event(
            ns,
            "app",
            "Normal",
            "SuccessfulAttachVolume",
            &format!("AttachVolume.Attach succeeded for volume \"{volume}\" "),
            STACK_WAIT,
        )
        .await;
    let (in_use, _) = stack.node_lists(&node).await;
    assert!(
        in_use.contains(&unique),
        "the kubelet reports the volume in use: {in_use:?}"
    );

    // Check 2: a driver whose CSIDriver says attachRequired: false.
    let plain = stack
        .bound_pair(ns, "plain", NOATTACH, &["ReadWriteOnce"], json!({}))
        .await;
    stack.pod_on(ns, "plain", &node, "plain").await;
    stack
        .wait("the noattach pod to run", || async {
            Ok((stack.pod_phase(ns, "plain").await.as_deref() == Some("Running")).then_some(()))
        })
        .await;
    let plain_handle = format!("h-{plain}");
    assert!(stack
        .attachment(&attachment_name(&plain_handle, NOATTACH, &node))
        .await
        .is_none());
    let (in_use, attached) = stack.node_lists(&node).await;
    let plain_unique = unique_name(NOATTACH, &plain_handle);
    assert!(
        !attached.contains(&plain_unique) && !in_use.contains(&plain_unique),
        "{attached:?} {in_use:?}"
    );

    // Check 8: a restarted worker deletes and duplicates nothing.
    let uid_before = va.metadata.uid.clone();
    let (_, attached_before) = stack.node_lists(&node).await;
    stack.kill_workers().await;
    stack
        .wait("a verification pass of the restarted worker", || async {
            let count = stack
                .metric(
                    "storage_operation_duration_seconds_count",
                    &[("operation_name", "verify_volumes_are_attached_per_node")],
                )
                .await;
            Ok((count >= 1.0).then_some(()))
        })
        .await;
    let after = stack
        .attachment(&va_name)
        .await
        .unwrap_or_else(|| stack.fail("the VA went with the restart"));
    assert_eq!(after.metadata.uid, uid_before, "the VA was re-created");
    let api: Api<VolumeAttachment> = Api::all(stack.client());
    let all = api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| stack.fail(e));
    let ours = all
        .items
        .iter()
        .filter(|v| v.spec.node_name == node)
        .count();
    assert_eq!(ours, 1, "one VolumeAttachment on {node}");
    assert_eq!(stack.node_lists(&node).await.1, attached_before);

    // Check 7: a deleted VA is re-created at the next verification (period 5s).
    stack
        .kubectl(&["delete", "volumeattachment", &va_name, "--wait=false"])
        .await;
    stack
        .wait_within(
            "the VA re-created, attached and in volumesAttached",
            Duration::from_secs(20),
            || async {
                let va = stack.attachment(&va_name).await;
                let recreated = va.as_ref().is_some_and(|v| v.metadata.uid != uid_before);
                let listed = stack.node_lists(&node).await.1.contains(&unique);
                Ok((recreated && listed && stack.attached(&va_name).await).then_some(()))
            },
        )
        .await;

    // Check 4: the pod goes; volumesInUse, then volumesAttached, then the VA.
    let detached_before = stack
        .metric(
            "storage_operation_duration_seconds_count",
            &[("operation_name", "volume_detach"), ("status", "success")],
        )
        .await;
    stack
        .kubectl(&["delete", "pod", "app", "-n", ns, "--wait=false"])
        .await;
    // First seen gone: from volumesInUse, from volumesAttached, the VA.
    let gone: Mutex<[Option<Duration>; 3]> = Mutex::new([None; 3]);
    let started = Instant::now();
    stack
        .wait("the volume detached", || {
            let (va_name, unique, node, gone, stack) = (&va_name, &unique, &node, &gone, &stack);
            async move {
                let now = started.elapsed();
                let (in_use, attached) = stack.node_lists(node).await;
                let va_gone = stack.attachment(va_name).await.is_none();
                let mut gone = gone.lock().unwrap_or_else(|p| p.into_inner());
                for (slot, now_true) in gone.iter_mut().zip([
                    !in_use.contains(unique),
                    !attached.contains(unique),
                    va_gone,
                ]) {
                    if now_true {
                        slot.get_or_insert(now);
                    }
                }
                Ok(gone[2].map(|_| ()))
            }
        })
        .await;
    let order = *gone.lock().unwrap_or_else(|p| p.into_inner());
    assert!(
        order.iter().all(Option::is_some) && order.windows(2).all(|w| w[0] <= w[1]),
        "volumesInUse, volumesAttached, VA must go in that order: {order:?}"
    );
    stack
        .wait("volume_detach success counted", || async {
            let now = stack
                .metric(
                    "storage_operation_duration_seconds_count",
                    &[("operation_name", "volume_detach"), ("status", "success")],
                )
                .await;
            Ok((now > detached_before).then_some(()))
        })
        .await;
}

/// Checks 3 (the driver's error), 5 and 6: the attacher's error reaches the pod; an
/// exclusive volume is not attached to a second node (Multi-Attach error) while a shared
/// one is; a killed node keeps its volume attached until it is tainted out-of-service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_exclusive_volumes_and_out_of_service_nodes() {
    let Some(stack) = Stack::start(&[SYNC_PERIOD]).await else {
        return;
    };
    let ns = &*stack.namespace("attach").await;
    let (n0, n1, n2) = (
        stack.nodes[0].clone(),
        stack.nodes[1].clone(),
        stack.nodes[2].clone(),
    );

    // Check 3: status.attachError's message.
    let broken = stack
        .bound_pair(
            ns,
            "broken",
            DRIVER,
            &["ReadWriteOnce"],
            json!({"sim.rkcm.io/attach-error": "boom"}),
        )
        .await;
    stack.pod_on(ns, "broken", &n0, "broken").await;
    stack
        .wait_event(
            ns,
            "broken",
            "Warning",
            "FailedAttachVolume",
            &format!("AttachVolume.Attach failed for volume \"{broken}\" : boom"),
            STACK_WAIT,
        )
        .await;
    assert_ne!(
        stack.pod_phase(ns, "broken").await.as_deref(),
        Some("Running")
    );

    // Check 5: an RWO volume stays on its node.
    let rwo = stack
        .bound_pair(ns, "rwo", DRIVER, &["ReadWriteOnce"], json!({}))
        .await;
    let rwo_handle = format!("h-{rwo}");
    stack.pod_on(ns, "p1", &n0, "rwo").await;
    stack
        .wait("p1 to run", || async {
            Ok((stack.pod_phase(ns, "p1").await.as_deref() == Some("Running")).then_some(()))
        })
        .await;
    stack.pod_on(ns, "p2", &n1, "rwo").await;
    stack
        .wait_event(
            ns,
            "p2",
            "Warning",
            "FailedAttachVolume",
            &format!("Multi-Attach error for volume \"{rwo}\" Volume is already used by pod(s) p1"),
            STACK_WAIT,
        )
        .await;
    assert!(stack
        .attachment(&attachment_name(&rwo_handle, DRIVER, &n1))
        .await
        .is_none());
    // An RWX volume goes to both nodes.
    let rwx = stack
        .bound_pair(ns, "rwx", DRIVER, &["ReadWriteMany"], json!({}))
        .await;
    let rwx_handle = format!("h-{rwx}");
    stack.pod_on(ns, "x0", &n0, "rwx").await;
    stack.pod_on(ns, "x1", &n1, "rwx").await;
    stack
        .wait("the RWX volume attached to both nodes", || async {
            let a = stack
                .attached(&attachment_name(&rwx_handle, DRIVER, &n0))
                .await;
            let b = stack
                .attached(&attachment_name(&rwx_handle, DRIVER, &n1))
                .await;
            Ok((a && b).then_some(()))
        })
        .await;

    // Check 6: a killed node's volume stays attached until the node is out of service.
    let lost = stack
        .bound_pair(ns, "lost", DRIVER, &["ReadWriteOnce"], json!({}))
        .await;
    let lost_va = attachment_name(&format!("h-{lost}"), DRIVER, &n2);
    stack.pod_on(ns, "lost", &n2, "lost").await;
    stack
        .wait("the pod on the doomed node to run", || async {
            Ok((stack.pod_phase(ns, "lost").await.as_deref() == Some("Running")).then_some(()))
        })
        .await;
    stack
        .kubectl(&["annotate", "node", &n2, "sim.rkcm.io/killed=true"])
        .await;
    stack
        .kubectl(&[
            "delete",
            "pod",
            "lost",
            "-n",
            ns,
            "--grace-period=0",
            "--force",
        ])
        .await;
    let kept = wait_for("the VA to stay 30s", Duration::from_secs(30), || async {
        Ok(stack.attachment(&lost_va).await.is_none().then_some(()))
    })
    .await;
    if kept.is_ok() {
        stack.fail("the killed node's volume was detached while the node still reports it in use");
    }
    stack
        .kubectl(&[
            "taint",
            "node",
            &n2,
            "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
        ])
        .await;
    stack
        .wait_within(
            "the VA deleted after the out-of-service taint",
            Duration::from_secs(5),
            || async { Ok(stack.attachment(&lost_va).await.is_none().then_some(())) },
        )
        .await;
    let forced = stack
        .metric(
            "attach_detach_controller_attachdetach_controller_forced_detaches",
            &[("reason", "out-of-service")],
        )
        .await;
    assert_eq!(forced, 1.0, "one forced detach");
}

/// Check 7's other half: with `--disable-attach-detach-reconcile-sync` a deleted
/// VolumeAttachment is not re-created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_reconcile_sync_a_deleted_attachment_stays_gone() {
    let Some(stack) = Stack::start(&[SYNC_PERIOD, "--disable-attach-detach-reconcile-sync"]).await
    else {
        return;
    };
    let ns = &*stack.namespace("attach").await;
    let node = stack.nodes[0].clone();
    let volume = stack
        .bound_pair(ns, "data", DRIVER, &["ReadWriteOnce"], json!({}))
        .await;
    let va_name = attachment_name(&format!("h-{volume}"), DRIVER, &node);
    stack.pod_on(ns, "app", &node, "data").await;
    stack
        .wait("the pod to run", || async {
            Ok((stack.pod_phase(ns, "app").await.as_deref() == Some("Running")).then_some(()))
        })
        .await;
    stack
        .kubectl(&["delete", "volumeattachment", &va_name])
        .await;
    let back = wait_for(
        "the VA to stay gone 30s",
        Duration::from_secs(30),
        || async { Ok(stack.attachment(&va_name).await.map(|_| ())) },
    )
    .await;
    if back.is_ok() {
        stack.fail("the VA was re-created though the reconcile sync is disabled");
    }
}

/// Check 3's timeout: a driver that never answers fails the attach after 2 minutes with
/// upstream's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attach_the_driver_never_answers_times_out() {
    let Some(stack) = Stack::start(&[SYNC_PERIOD]).await else {
        return;
    };
    let ns = &*stack.namespace("attach").await;
    let node = stack.nodes[0].clone();
    let volume = stack
        .bound_pair(
            ns,
            "slow",
            DRIVER,
            &["ReadWriteOnce"],
            json!({"sim.rkcm.io/attach-delay": "5m"}),
        )
        .await;
    stack.pod_on(ns, "slow", &node, "slow").await;
    stack
        .wait_event(ns, "slow", "Warning", "FailedAttachVolume",
            &format!("AttachVolume.Attach failed for volume \"{volume}\" : timed out waiting for external-attacher of {DRIVER} CSI driver to attach volume h-{volume}"),
            Duration::from_secs(150))
        .await;
}

//! End-to-end tests of the claim and volume protection controllers and the ephemeral
//! volume controller run by `rkcm launcher` (work order WO-S1, checks 8 and 9), and of the
//! API server's DefaultStorageClass admission: the test cluster (kube-sim with simulated
//! nodes, or RKCM_TEST_KUBECONFIG's real cluster), the real launcher with its
//! informer-server and worker as separate processes, every change made with kubectl and
//! every check read back from the API server.
//!
//! No binder runs: the test binds a claim and its volume itself, as a user pre-binding
//! them would (claimRef, volumeName, then both phases Bound through the status
//! subresource), so that a pod using the claim is scheduled on a real cluster too, and it
//! marks the volume Released once its claim is gone, as the binder would. The garbage
//! collector removes a pod's ephemeral claims; serviceaccount, root-ca-cert-publisher and
//! nodelifecycle let pods start.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::Api;
use rkcm_conformance::wait_for;
use serde_json::{json, Value};

const CONTROLLERS: &str = "pvc-protection,pv-protection,ephemeral-volume,garbagecollector,serviceaccount,root-ca-cert-publisher,nodelifecycle";
const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";
const PV_FINALIZER: &str = "kubernetes.io/pv-protection";
/// WO-S1 asks for a removed finalizer back within 2 s; the deadline leaves room for a
/// loaded machine, and the time taken is printed.
const READD_WAIT: Duration = Duration::from_secs(10);

suite_stack! {
    struct Stack(LauncherStack);
}

fn finalizers(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Vec<String> {
    meta.finalizers.clone().unwrap_or_default()
}

impl Stack {
    async fn start() -> Stack {
        Stack(LauncherStack::start(&["--controllers", CONTROLLERS]).await)
    }

    fn claims(&self, ns: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.cluster.client.clone(), ns)
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.cluster.client.clone())
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.cluster.client.clone(), ns)
    }

    async fn claim(&self, ns: &str, name: &str) -> Option<PersistentVolumeClaim> {
        match self.claims(ns).get_opt(name).await {
            Ok(claim) => claim,
            Err(error) => self.fail(format!("reading claim {ns}/{name}: {error}")),
        }
    }

    async fn volume(&self, name: &str) -> Option<PersistentVolume> {
        match self.volumes().get_opt(name).await {
            Ok(volume) => volume,
            Err(error) => self.fail(format!("reading volume {name}: {error}")),
        }
    }

    /// A hostPath volume and a claim bound to each other by hand, as the binder leaves
    /// them: the claim names the volume and carries `bind-completed`, the volume's claimRef
    /// has the claim's UID (kubelet checks it), both phases are Bound.
    async fn bound_pair(&self, ns: &str, claim: &str, volume: &str) {
        self.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": ns,
                         "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "volumeName": volume, "resources": {"requests": {"storage": "1Gi"}}}}))
            .await;
        let uid = self
            .claim(ns, claim)
            .await
            .and_then(|c| c.metadata.uid)
            .unwrap_or_else(|| self.fail(format!("claim {ns}/{claim} has no uid")));
        self.apply(json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": format!("/tmp/rkcm-e2e/{volume}"), "type": "DirectoryOrCreate"},
                     "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                  "namespace": ns, "name": claim, "uid": uid}}}))
            .await;
        self.set_volume_phase(volume, "Bound").await;
        let status = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                                       "capacity": {"storage": "1Gi"}}});
        self.patch_status("pvc", Some(ns), claim, &status).await;
    }

    async fn set_volume_phase(&self, volume: &str, phase: &str) {
        let status = json!({"status": {"phase": phase}});
        self.patch_status("pv", None, volume, &status).await;
    }

    /// How many keys the controller's queue has finished (its work-duration count).
    async fn synced(&self, queue: &str) -> f64 {
        metric_sum(
            &self.metrics().await,
            "workqueue_work_duration_seconds_count",
            &[("name", queue)],
        )
        .unwrap_or(0.0)
    }

    /// Waits until `queue` has finished keys since `before` and holds none: the controller
    /// has looked at what changed and has nothing left to do.
    async fn settled(&self, queue: &str, before: f64) {
        self.wait(
            &format!("the {queue} queue to sync and settle"),
            || async move {
                let metrics = self.metrics().await;
                let done = metric_sum(
                    &metrics,
                    "workqueue_work_duration_seconds_count",
                    &[("name", queue)],
                )
                .unwrap_or(0.0);
                let depth =
                    metric_sum(&metrics, "workqueue_depth", &[("name", queue)]).unwrap_or(0.0);
                Ok((done > before && depth == 0.0).then_some(()))
            },
        )
        .await;
    }

    async fn wait_claim_gone(&self, ns: &str, name: &str) {
        self.wait(&format!("claim {ns}/{name} to be gone"), || async move {
            Ok(self.claims(ns).get_opt(name).await?.is_none().then_some(()))
        })
        .await;
    }

    async fn pod_running(&self, ns: &str, name: &str) {
        self.wait(&format!("pod {ns}/{name} to run"), || async move {
            let pod = self.pods(ns).get_opt(name).await?;
            let phase = pod.and_then(|p| p.status).and_then(|s| s.phase);
            Ok((phase.as_deref() == Some("Running")).then_some(()))
        })
        .await;
    }

    /// Removes every finalizer of `kind/name` with kubectl and waits for `finalizer` to be
    /// back; returns how long that took.
    async fn remove_finalizers_and_wait(
        &self,
        kind: &str,
        ns: Option<&str>,
        name: &str,
        finalizer: &str,
    ) -> Duration {
        let mut args = vec![
            "patch",
            kind,
            name,
            "--type=json",
            "-p",
            r#"[{"op": "remove", "path": "/metadata/finalizers"}]"#,
        ];
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        self.kubectl(&args).await;
        let started = Instant::now();
        let mut get = vec!["get", kind, name, "-o", "jsonpath={.metadata.finalizers}"];
        if let Some(ns) = ns {
            get.extend(["-n", ns]);
        }
        let found = wait_for(
            &format!("{finalizer} back on {kind} {name}"),
            READD_WAIT,
            || {
                let get = get.clone();
                async move {
                    let out = self.cluster.kubectl_ok(&get).await?;
                    Ok(out.contains(finalizer).then_some(()))
                }
            },
        )
        .await;
        if let Err(error) = found {
            self.fail(format!("{error:#}"));
        }
        started.elapsed()
    }
}

/// WO-S1 check 8: a claim used by a running pod stays Terminating until the pod is gone; a
/// deleted Bound volume stays Terminating until it is no longer bound; a finalizer removed
/// by hand comes back.
#[tokio::test]
async fn claims_and_volumes_in_use_are_kept_until_released() {
    let stack = &Stack::start().await;
    let ns = &*stack.namespace("protect").await;
    let volume = format!("pv-{ns}");
    stack.bound_pair(ns, "data", &volume).await;
    let claim = stack
        .claim(ns, "data")
        .await
        .unwrap_or_else(|| stack.fail("claim data missing"));
    assert_eq!(
        finalizers(&claim.metadata),
        vec![PVC_FINALIZER],
        "admission adds the finalizer"
    );
    stack
        .apply(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "user", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}))
        .await;
    stack.pod_running(ns, "user").await;

    // The claim: deleted while the pod runs, it stays with its finalizer.
    let before = stack.synced("pvcprotection").await;
    stack
        .kubectl(&["delete", "pvc", "data", "-n", ns, "--wait=false"])
        .await;
    stack.settled("pvcprotection", before).await;
    let terminating = stack
        .claim(ns, "data")
        .await
        .unwrap_or_else(|| stack.fail("the claim went while a running pod uses it"));
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&terminating.metadata), vec![PVC_FINALIZER]);
    let shown = stack.kubectl(&["get", "pvc", "data", "-n", ns]).await;
    assert!(
        shown.contains("Terminating"),
        "kubectl shows it Terminating:\n{shown}"
    );

    // The volume: deleted while Bound, it stays too.
    let before = stack.synced("pvprotection").await;
    stack
        .kubectl(&["delete", "pv", &volume, "--wait=false"])
        .await;
    stack.settled("pvprotection", before).await;
    let kept = stack
        .volume(&volume)
        .await
        .unwrap_or_else(|| stack.fail("the bound volume went"));
    assert!(kept.metadata.deletion_timestamp.is_some());
    assert!(finalizers(&kept.metadata).contains(&PV_FINALIZER.to_string()));

    // The pod goes, then the claim, then (once Released) the volume.
    stack
        .kubectl(&["delete", "pod", "user", "-n", ns, "--wait=false"])
        .await;
    stack.wait_claim_gone(ns, "data").await;
    assert!(
        stack.volume(&volume).await.is_some(),
        "the volume waits for its phase"
    );
    stack.set_volume_phase(&volume, "Released").await;
    let volume = &*volume;
    stack
        .wait(
            &format!("volume {volume} to be gone once Released"),
            || async move {
                Ok(stack
                    .volumes()
                    .get_opt(volume)
                    .await?
                    .is_none()
                    .then_some(()))
            },
        )
        .await;

    // Finalizers removed by hand come back.
    let other = format!("pv2-{ns}");
    stack.bound_pair(ns, "other", &other).await;
    let claim_took = stack
        .remove_finalizers_and_wait("pvc", Some(ns), "other", PVC_FINALIZER)
        .await;
    let volume_took = stack
        .remove_finalizers_and_wait("pv", None, &other, PV_FINALIZER)
        .await;
    println!("finalizers re-added after {claim_took:?} (claim) and {volume_took:?} (volume)");
    stack
        .kubectl(&["delete", "pvc", "other", "-n", ns, "--wait=false"])
        .await;
    stack.wait_claim_gone(ns, "other").await;
    stack.set_volume_phase(&other, "Released").await;
    stack
        .kubectl(&["delete", "pv", &other, "--wait=false"])
        .await;
}

/// A pod's events from the ephemeral volume controller (type, reason, message).
async fn pod_events(
    stack: &Stack,
    ns: &str,
    pod: &str,
) -> anyhow::Result<Vec<(String, String, String)>> {
    let events: Api<Event> = Api::namespaced(stack.cluster.client.clone(), ns);
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(pod))
        .filter(|e| {
            e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("ephemeral_volume")
                || e.reporting_component.as_deref() == Some("ephemeral_volume")
        })
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect())
}

fn ephemeral_pod(ns: &str, name: &str, node_selector: Option<Value>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                 "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                     "metadata": {"labels": {"made-for": name}},
                     "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                              "resources": {"requests": {"storage": "1Gi"}}}}}}]}});
    if let Some(selector) = node_selector {
        pod["spec"]["nodeSelector"] = selector;
    }
    pod
}

/// WO-S1 check 9: a pod's generic ephemeral volume gets its claim `<pod>-<volume>`,
/// controlled by the pod and collected with it; a claim of that name the pod does not own
/// is reported on the pod; a deleted claim is made again; the controller counts its
/// creations.
#[tokio::test]
async fn ephemeral_volumes_get_claims_owned_by_their_pods() {
    let stack = &Stack::start().await;
    let ns = &*stack.namespace("ephemeral").await;
    stack.apply(ephemeral_pod(ns, "p", None)).await;
    let pod = stack
        .wait(
            "pod p",
            || async move { Ok(stack.pods(ns).get_opt("p").await?) },
        )
        .await;
    let claim = stack
        .wait("claim p-scratch", || async move {
            Ok(stack.claims(ns).get_opt("p-scratch").await?)
        })
        .await;
    let owner = claim
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|o| o.controller == Some(true))
        .unwrap_or_else(|| {
            stack.fail(format!(
                "claim p-scratch has no controller: {:?}",
                claim.metadata
            ))
        });
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str()
        ),
        ("v1", "Pod", "p")
    );
    assert_eq!(Some(owner.uid.as_str()), pod.metadata.uid.as_deref());
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert_eq!(
        claim
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get("made-for")
            .map(String::as_str),
        Some("p"),
        "the template's labels"
    );
    let shown = stack
        .kubectl(&[
            "get",
            "pvc",
            "p-scratch",
            "-n",
            ns,
            "-o",
            "jsonpath={.spec.accessModes}",
        ])
        .await;
    assert!(shown.contains("ReadWriteOnce"), "{shown}");

    // A squatter: the claim exists before the pod, owned by nobody.
    stack
        .apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "q-scratch", "namespace": ns},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "resources": {"requests": {"storage": "1Gi"}}}}))
        .await;
    stack.apply(ephemeral_pod(ns, "q", None)).await;
    let expected = format!("ephemeral volume scratch: PVC {ns}/q-scratch was not created for pod {ns}/q (pod is not owner)");
    let expected = &*expected;
    let events = stack
        .wait("a FailedBinding event on pod q", || async move {
            let events = pod_events(stack, ns, "q").await?;
            Ok(events
                .iter()
                .any(|(t, r, m)| t == "Warning" && r == "FailedBinding" && m == expected)
                .then_some(events))
        })
        .await;
    println!("events of pod q: {events:?}");

    // A claim deleted under a pod that is not scheduled (so nothing protects it) is made
    // again, as a new object.
    stack
        .apply(ephemeral_pod(
            ns,
            "r",
            Some(json!({"rkcm.example.com/no-such-node": "x"})),
        ))
        .await;
    let first = stack
        .wait("claim r-scratch", || async move {
            Ok(stack.claims(ns).get_opt("r-scratch").await?)
        })
        .await;
    stack
        .kubectl(&["delete", "pvc", "r-scratch", "-n", ns, "--wait=false"])
        .await;
    let first_uid = &first.metadata.uid;
    stack
        .wait("claim r-scratch made again", || async move {
            let claim = stack.claims(ns).get_opt("r-scratch").await?;
            Ok(claim.filter(|c| {
                &c.metadata.uid != first_uid && c.metadata.deletion_timestamp.is_none()
            }))
        })
        .await;

    // The pod's deletion takes its claim with it (garbage collector, then protection).
    stack
        .kubectl(&["delete", "pod", "p", "-n", ns, "--wait=false"])
        .await;
    stack.wait_claim_gone(ns, "p-scratch").await;

    let metrics = stack.metrics().await;
    let created =
        metric_sum(&metrics, "ephemeral_volume_controller_create_total", &[]).unwrap_or(0.0);
    assert!(
        created >= 2.0,
        "ephemeral_volume_controller_create_total = {created}"
    );
    assert!(
        has_sample(
            &metrics,
            "ephemeral_volume_controller_create_failures_total"
        ),
        "the failure counter is served"
    );
}

/// DefaultStorageClass admission: a claim created without a class gets the newest default
/// class; one asking for "" keeps it. The test's class is the newest default while it
/// exists, on a real cluster too; it is deleted at the end.
#[tokio::test]
async fn claims_without_a_class_get_the_default_one() {
    let cluster = rkcm_conformance::TestCluster::start()
        .await
        .expect("the test cluster");
    let ns = &*cluster.namespace("default-class").await.expect("namespace");
    let class = format!("rkcm-e2e-{ns}");
    let manifest = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class,
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "example.com/none", "volumeBindingMode": "WaitForFirstConsumer"});
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &manifest.to_string())
        .await
        .expect("the default class");
    let claim = |name: &str, class: Option<&str>| {
        let mut claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        if let Some(class) = class {
            claim["spec"]["storageClassName"] = json!(class);
        }
        claim.to_string()
    };
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &claim("defaulted", None))
        .await
        .expect("claim without a class");
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &claim("classless", Some("")))
        .await
        .expect("claim with class \"\"");
    let class_of = |name: &str| {
        let cluster = &cluster;
        let name = name.to_string();
        async move {
            cluster
                .kubectl_ok(&[
                    "get",
                    "pvc",
                    &name,
                    "-n",
                    ns,
                    "-o",
                    "jsonpath={.spec.storageClassName}",
                ])
                .await
                .expect("kubectl get pvc")
        }
    };
    assert_eq!(class_of("defaulted").await, class);
    assert_eq!(class_of("classless").await, "");
    cluster
        .kubectl_ok(&["delete", "storageclass", &class])
        .await
        .expect("class deleted");
    cluster.cleanup().await;
}

/// `--concurrent-ephemeralvolume-syncs` below 1 stops `rkcm worker` and `rkcm launcher`
/// at start with KCM's message (exit 2), whichever controllers run, as KCM checks it.
#[tokio::test]
async fn a_bad_ephemeral_volume_flag_stops_the_start() {
    let cluster = rkcm_conformance::TestCluster::start()
        .await
        .expect("the test cluster");
    let runtime = tempfile::tempdir().expect("a runtime dir");
    let flag = "--concurrent-ephemeralvolume-syncs=0";
    let message = "concurrent-ephemeralvolume-syncs must be greater than 0, but got 0";
    let worker = [
        "worker",
        "--informer",
        "unix:///nonexistent/informer.sock",
        "--controllers",
        "serviceaccount",
        flag,
    ];
    let runtime_dir = format!("--runtime-dir={}", runtime.path().display());
    let launcher = [
        "launcher",
        &runtime_dir,
        "--controllers",
        "serviceaccount",
        flag,
    ];
    for args in [&worker[..], &launcher[..]] {
        let kubeconfig = cluster.kubeconfig.display().to_string();
        let kubeconfig = ["--kubeconfig", kubeconfig.as_str()];
        assert_usage_error(args.iter().chain(&kubeconfig), message).await;
    }
}

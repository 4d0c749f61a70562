//! End-to-end tests of the persistentvolume-binder controller in `rkcm launcher`'s worker,
//! on the test cluster (kube-sim with simulated nodes, or RKCM_TEST_KUBECONFIG's real
//! cluster), every object made with kubectl and every check read back from the API
//! server (WO-S1 checks 1 to 7).
//!
//! The launcher runs the binder with the protection controllers (the API server puts
//! their finalizers on every claim and volume, so a deleted claim goes only once they
//! release it), and, for the recycler pod, what a pod needs to start (serviceaccount,
//! root-ca-cert-publisher, and node-lifecycle to lift the nodes' startup taint).
//!
//! Not covered here: the WaitForFirstConsumer half of check 4 and the CSI Delete half of
//! check 6, which need the simulated CSI driver (another part of the development
//! cluster); both are plain binder paths the unit tables cover (delay binding, an external
//! provisioner's Delete volume left to it).

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use rkcm_conformance::wait_for;
use serde_json::{json, Value};

const CONTROLLERS: &str = "persistentvolume-binder,pvc-protection,pv-protection,serviceaccount,root-ca-cert-publisher,nodelifecycle,persistentvolume-attach-detach-controller";
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const BETA_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// The recycler pod template the tests give the binder: upstream's default, which
/// node-sim ends after a second (a real node runs the scrub).
const RECYCLER_TEMPLATE: &str = r#"apiVersion: v1
kind: Pod
metadata:
  namespace: default
  annotations:
    sim.rkcm.io/exit-after: 1s
spec:
  restartPolicy: Never
  volumes:
  - name: vol
  containers:
  - name: pv-recycler
    image: registry.k8s.io/build-image/debian-base:bookworm-v1.0.3
    command: ["/bin/sh"]
    args: ["-c", "test -e /scrub && find /scrub -mindepth 1 -delete && test -z \"$(ls -A /scrub)\" || exit 1"]
    volumeMounts:
    - name: vol
      mountPath: /scrub
"#;

struct Stack {
    stack: LauncherStack,
    /// A suffix for the cluster-scoped names (volumes, classes), unique to the test.
    suffix: String,
    /// The cluster-scoped objects made, deleted at the end (a real cluster keeps them).
    made: std::sync::Mutex<Vec<(String, String)>>,
}

impl std::ops::Deref for Stack {
    type Target = LauncherStack;
    fn deref(&self) -> &LauncherStack {
        &self.stack
    }
}

impl Stack {
    async fn start(extra: &[&str]) -> Stack {
        let controllers = format!("--controllers={CONTROLLERS}");
        let mut args = vec![controllers.as_str()];
        args.extend_from_slice(extra);
        Stack {
            stack: LauncherStack::start(&args).await,
            suffix: kube_sim::api::random_suffix(5),
            made: Default::default(),
        }
    }

    /// A cluster-scoped name unique to the test.
    fn unique(&self, name: &str) -> String {
        format!("{name}-{}", self.suffix)
    }

    async fn apply(&self, namespace: Option<&str>, manifest: Value) {
        if namespace.is_none() {
            let kind = manifest["kind"].as_str().unwrap_or_default().to_string();
            let name = manifest["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            self.made.lock().unwrap().push((kind, name));
        }
        self.apply_objects(namespace, &manifest).await;
    }

    /// A volume `name` (made unique) of `size`, RWO, class "", hostPath under /tmp, with
    /// `spec` merged; its name.
    async fn volume(&self, name: &str, size: &str, spec: Value) -> String {
        let name = self.unique(name);
        let mut manifest = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "hostPath": {"path": format!("/tmp/{name}")},
            },
        });
        merge(&mut manifest["spec"], spec);
        self.apply(None, manifest).await;
        name
    }

    /// A claim `ns/name` for `size`, RWO, with `spec` merged (class "" unless it says).
    async fn claim(&self, namespace: &str, name: &str, size: &str, spec: Value) {
        let mut manifest = json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}},
                "storageClassName": "",
            },
        });
        merge(&mut manifest["spec"], spec);
        self.apply(Some(namespace), manifest).await;
    }

    fn claims(&self, namespace: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.cluster.client.clone(), namespace)
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.cluster.client.clone())
    }

    /// Waits until claim `ns/name` satisfies `check` (which says what is wrong otherwise).
    async fn wait_claim(
        &self,
        namespace: &str,
        name: &str,
        what: &str,
        check: impl Fn(&PersistentVolumeClaim) -> Result<(), String>,
    ) -> PersistentVolumeClaim {
        let claims = self.claims(namespace);
        let last = std::sync::Mutex::new(String::from("no such claim"));
        let found = wait_for(what, STACK_WAIT, || {
            let claims = claims.clone();
            let (check, last) = (&check, &last);
            async move {
                let Some(claim) = claims.get_opt(name).await? else {
                    return Ok(None);
                };
                match check(&claim) {
                    Ok(()) => Ok(Some(claim)),
                    Err(why) => {
                        *last.lock().unwrap() = why;
                        Ok(None)
                    }
                }
            }
        })
        .await;
        match found {
            Ok(claim) => claim,
            Err(error) => self.fail(format!("{error:#}; last seen: {}", last.lock().unwrap())),
        }
    }

    async fn wait_volume(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&PersistentVolume) -> Result<(), String>,
    ) -> PersistentVolume {
        let volumes = self.volumes();
        let last = std::sync::Mutex::new(String::from("no such volume"));
        let found = wait_for(what, STACK_WAIT, || {
            let volumes = volumes.clone();
            let (check, last) = (&check, &last);
            async move {
                let Some(volume) = volumes.get_opt(name).await? else {
                    return Ok(None);
                };
                match check(&volume) {
                    Ok(()) => Ok(Some(volume)),
                    Err(why) => {
                        *last.lock().unwrap() = why;
                        Ok(None)
                    }
                }
            }
        })
        .await;
        match found {
            Ok(volume) => volume,
            Err(error) => self.fail(format!("{error:#}; last seen: {}", last.lock().unwrap())),
        }
    }

    /// The events about `name` in `namespace` (cluster-scoped objects' are in `default`).
    async fn events(&self, namespace: &str, name: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.cluster.client.clone(), namespace);
        match events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
        {
            Ok(list) => list.items,
            Err(error) => self.fail(format!("listing the events of {name}: {error}")),
        }
    }

    /// Waits for an event about `name` with `reason` and `message` from the binder (at
    /// least `count` times); returns its count.
    async fn wait_event(
        &self,
        namespace: &str,
        name: &str,
        (event_type, reason, message): (&str, &str, &str),
        count: i32,
    ) -> i32 {
        let seen = std::sync::Mutex::new(Vec::<String>::new());
        let found = wait_for(
            &format!("{event_type} {reason} {message:?} on {name} (count >= {count})"),
            STACK_WAIT,
            || {
                let seen = &seen;
                async move {
                    let events = self.events(namespace, name).await;
                    *seen.lock().unwrap() = events
                        .iter()
                        .map(|e| {
                            format!(
                                "{} {} {:?} x{}",
                                e.type_.as_deref().unwrap_or_default(),
                                e.reason.as_deref().unwrap_or_default(),
                                e.message.as_deref().unwrap_or_default(),
                                e.count.unwrap_or(1)
                            )
                        })
                        .collect();
                    Ok(events
                        .iter()
                        .find(|e| {
                            e.type_.as_deref() == Some(event_type)
                                && e.reason.as_deref() == Some(reason)
                                && e.message.as_deref() == Some(message)
                                && e.source.as_ref().and_then(|s| s.component.as_deref())
                                    == Some("persistentvolume-controller")
                                && e.count.unwrap_or(1) >= count
                        })
                        .map(|e| e.count.unwrap_or(1)))
                }
            },
        )
        .await;
        match found {
            Ok(count) => count,
            Err(error) => self.fail(format!(
                "{error:#}; events seen: {:?}",
                seen.lock().unwrap()
            )),
        }
    }

    /// Deletes what the test made cluster-wide (claims go with their namespaces' cleanup).
    async fn clean_up(&self) {
        let made = std::mem::take(&mut *self.made.lock().unwrap());
        for (kind, name) in made.iter().rev() {
            let _ = self
                .cluster
                .kubectl(&["delete", kind, name, "--ignore-not-found", "--wait=false"])
                .await;
        }
    }
}

fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, overlay) => *base = overlay,
    }
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

fn claim_ref_uid(volume: &PersistentVolume) -> Option<&str> {
    volume.spec.as_ref()?.claim_ref.as_ref()?.uid.as_deref()
}

/// Checks 1, 2, 3 and 6 (Retain, local Delete): static binding, the access-mode order,
/// claims nothing fits, a too-small requested volume, and reclaiming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_binding_and_reclaim() {
    let stack = Stack::start(&[]).await;
    let ns = stack.namespace("binder").await;

    // 1. The smallest volume that fits, bound both ways with the annotations.
    let pv_a = stack.volume("pv-a", "10Gi", json!({})).await;
    let pv_b = stack.volume("pv-b", "2Gi", json!({})).await;
    let started = Instant::now();
    stack.claim(&ns, "c1", "1Gi", json!({})).await;
    let c1 = stack
        .wait_claim(&ns, "c1", "c1 Bound", |claim| {
            if claim_phase(claim) != "Bound" {
                return Err(format!("phase {:?}", claim_phase(claim)));
            }
            Ok(())
        })
        .await;
    let bound_in = started.elapsed();
    eprintln!("check 1: c1 Bound {bound_in:?} after its creation");
    assert!(
        bound_in < Duration::from_secs(10),
        "c1 took {bound_in:?} to bind"
    );
    assert_eq!(volume_name(&c1), pv_b, "the smallest volume that fits");
    let status = c1.status.clone().unwrap_or_default();
    assert_eq!(
        status
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.as_str()),
        Some("2Gi")
    );
    assert_eq!(annotation(&c1.metadata, BIND_COMPLETED), Some("yes"));
    assert_eq!(annotation(&c1.metadata, BOUND_BY_CONTROLLER), Some("yes"));
    let volume = stack
        .wait_volume(&pv_b, "pv-b Bound", |v| match volume_phase(v) {
            "Bound" => Ok(()),
            other => Err(format!("phase {other:?}")),
        })
        .await;
    assert_eq!(claim_ref_uid(&volume), c1.metadata.uid.as_deref());
    assert_eq!(
        annotation(&volume.metadata, BOUND_BY_CONTROLLER),
        Some("yes")
    );
    let untouched = stack.volumes().get(&pv_a).await.unwrap();
    assert!(untouched.spec.unwrap().claim_ref.is_none());

    // 2. The narrowest access-mode set first; an RWX claim and a claim whose selector
    // matches nothing stay Pending, saying why.
    let rwo = stack.volume("m-rwo", "1Gi", json!({})).await;
    let wide = stack
        .volume(
            "m-wide",
            "1Gi",
            json!({"accessModes": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"]}),
        )
        .await;
    stack.claim(&ns, "c-rwo", "1Gi", json!({})).await;
    let claim = stack
        .wait_claim(&ns, "c-rwo", "c-rwo Bound", |c| match claim_phase(c) {
            "Bound" => Ok(()),
            other => Err(format!("phase {other:?}")),
        })
        .await;
    assert_eq!(volume_name(&claim), rwo, "the RWO-only volume, not {wide}");
    // pv-a (10Gi, RWO) would fit the size: only its modes keep it from the RWX claim.
    stack
        .claim(
            &ns,
            "c-rwx",
            "2Gi",
            json!({"accessModes": ["ReadWriteMany"]}),
        )
        .await;
    stack
        .claim(
            &ns,
            "c-selector",
            "1Gi",
            json!({"selector": {"matchLabels": {"tier": "none"}}}),
        )
        .await;
    let no_volume = (
        "Normal",
        "FailedBinding",
        "no persistent volumes available for this claim and no storage class is set",
    );
    for name in ["c-rwx", "c-selector"] {
        stack.wait_event(&ns, name, no_volume, 1).await;
        let claim = stack.claims(&ns).get(name).await.unwrap();
        assert_eq!(claim_phase(&claim), "Pending", "{name}");
        assert_eq!(volume_name(&claim), "", "{name}");
    }

    // 3. A requested volume too small for the claim.
    let small = stack.volume("pv-small", "100Mi", json!({})).await;
    stack
        .claim(&ns, "c-small", "1Gi", json!({"volumeName": small}))
        .await;
    let message = format!("Cannot bind to requested volume {small:?}: requested PV is too small");
    stack
        .wait_event(&ns, "c-small", ("Warning", "VolumeMismatch", &message), 1)
        .await;
    let claim = stack.claims(&ns).get("c-small").await.unwrap();
    assert_eq!(claim_phase(&claim), "Pending");

    // 6. A deleted claim's Retain volume is Released, its claimRef kept.
    stack.kubectl(&["delete", "pvc", "c1", "-n", &ns]).await;
    let released = stack
        .wait_volume(&pv_b, "pv-b Released", |v| match volume_phase(v) {
            "Released" => Ok(()),
            other => Err(format!("phase {other:?}")),
        })
        .await;
    assert_eq!(claim_ref_uid(&released), c1.metadata.uid.as_deref());

    // 6. A manually bound local volume with policy Delete has no deleter: Failed.
    let local = stack
        .volume(
            "pv-l",
            "1Gi",
            json!({
                "hostPath": null,
                "local": {"path": "/mnt/disks/l"},
                "persistentVolumeReclaimPolicy": "Delete",
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["sim-node-0"]},
                ]}]}},
            }),
        )
        .await;
    stack
        .claim(&ns, "c-local", "1Gi", json!({"volumeName": local}))
        .await;
    stack
        .wait_claim(&ns, "c-local", "c-local Bound", |c| match claim_phase(c) {
            "Bound" => Ok(()),
            other => Err(format!("phase {other:?}")),
        })
        .await;
    stack
        .kubectl(&["delete", "pvc", "c-local", "-n", &ns])
        .await;
    let message = format!(
        "error getting deleter volume plugin for volume {local:?}: no deletable volume plugin matched"
    );
    let failed = stack
        .wait_volume(&local, "pv-l Failed", |v| match volume_phase(v) {
            "Failed" => Ok(()),
            other => Err(format!("phase {other:?}")),
        })
        .await;
    assert_eq!(
        failed.status.and_then(|s| s.message).as_deref(),
        Some(message.as_str())
    );
    stack
        .wait_event(
            "default",
            &local,
            ("Warning", "VolumeFailedDelete", &message),
            1,
        )
        .await;

    // The claim and volume counts, from the binder's caches.
    let metrics = stack.metrics().await;
    assert!(
        has_sample(&metrics, "pv_collector_total_pv_count{plugin_name=\"kubernetes.io/local-volume\",volume_mode=\"Filesystem\"}"),
        "pv_collector_total_pv_count for the local volume in\n{metrics}"
    );
    assert!(
        metric_sum(
            &metrics,
            "pv_collector_bound_pvc_count",
            &[("namespace", &ns)]
        ) >= Some(1.0),
        "pv_collector_bound_pvc_count{{namespace={ns:?}}} in\n{metrics}"
    );
    stack.clean_up().await;
}

/// Checks 4 (external provisioner), 5 (retroactive default class) and 7 (recycler).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_default_class_and_recycling() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("recycler-pod.yaml");
    std::fs::write(&template, RECYCLER_TEMPLATE).unwrap();
    let flag = format!(
        "--pv-recycler-pod-template-filepath-hostpath={}",
        template.display()
    );
    let stack = Stack::start(&[&flag]).await;
    let ns = stack.namespace("provision").await;

    // 4. An external provisioner: named on the claim, and waited for, event after event.
    let none = stack.unique("none");
    stack
        .apply(
            None,
            json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": none},
                "provisioner": "example.com/none",
                "volumeBindingMode": "Immediate",
            }),
        )
        .await;
    let started = Instant::now();
    stack
        .claim(&ns, "c-ext", "1Gi", json!({"storageClassName": none}))
        .await;
    let claim = stack
        .wait_claim(
            &ns,
            "c-ext",
            "both provisioner annotations on c-ext",
            |c| match (
                annotation(&c.metadata, PROVISIONER),
                annotation(&c.metadata, BETA_PROVISIONER),
            ) {
                (Some("example.com/none"), Some("example.com/none")) => Ok(()),
                other => Err(format!("annotations {other:?}")),
            },
        )
        .await;
    assert_eq!(claim_phase(&claim), "Pending");
    let waiting = "Waiting for a volume to be created either by the external provisioner 'example.com/none' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.";
    // Once when the claim comes, once when its annotations come back, then at every
    // resync (15 s).
    let count = stack
        .wait_event(&ns, "c-ext", ("Normal", "ExternalProvisioning", waiting), 3)
        .await;
    eprintln!(
        "check 4: ExternalProvisioning x{count} {:?} after the claim",
        started.elapsed()
    );

    // 4 and 6, with csi-sim: a WaitForFirstConsumer claim waits until a node is selected,
    // then csi-sim provisions `pvc-<uid>` and the binder binds it; deleting the claim
    // releases the volume, which csi-sim deletes (policy Delete).
    match stack
        .nodes
        .as_ref()
        .and_then(|n| n.node_names().into_iter().next())
    {
        None => eprintln!("checks 4 and 6, csi-sim half: skipped (no node-sim, so no csi-sim)"),
        Some(node) => {
            let csi = stack.unique("csi");
            stack
                .apply(
                    None,
                    json!({
                        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                        "metadata": {"name": csi},
                        "provisioner": "csi.sim.rkcm.io",
                        "volumeBindingMode": "WaitForFirstConsumer",
                        "reclaimPolicy": "Delete",
                    }),
                )
                .await;
            stack
                .claim(&ns, "c-wffc", "1Gi", json!({"storageClassName": csi}))
                .await;
            let waiting = (
                "Normal",
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            );
            stack.wait_event(&ns, "c-wffc", waiting, 1).await;
            let claim = stack.claims(&ns).get("c-wffc").await.unwrap();
            assert_eq!(claim_phase(&claim), "Pending");
            let selected = format!("volume.kubernetes.io/selected-node={node}");
            stack
                .kubectl(&["annotate", "pvc", "c-wffc", "-n", &ns, &selected])
                .await;
            let claim = stack
                .wait_claim(&ns, "c-wffc", "c-wffc Bound", |c| match claim_phase(c) {
                    "Bound" => Ok(()),
                    other => Err(format!("phase {other:?}")),
                })
                .await;
            let provisioned = format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default());
            assert_eq!(volume_name(&claim), provisioned);
            assert_eq!(
                annotation(&claim.metadata, PROVISIONER),
                Some("csi.sim.rkcm.io")
            );
            stack.kubectl(&["delete", "pvc", "c-wffc", "-n", &ns]).await;
            let volumes = stack.volumes();
            stack
                .wait("csi-sim to delete the released Delete volume", || {
                    let volumes = volumes.clone();
                    let provisioned = provisioned.clone();
                    async move { Ok(volumes.get_opt(&provisioned).await?.is_none().then_some(())) }
                })
                .await;
        }
    }

    // 5. A claim made while no class is default gets the default class made later.
    let classes: Api<StorageClass> = Api::all(stack.cluster.client.clone());
    let defaults = classes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| {
            annotation(&c.metadata, DEFAULT_CLASS) == Some("true")
                || annotation(
                    &c.metadata,
                    "storageclass.beta.kubernetes.io/is-default-class",
                ) == Some("true")
        })
        .count();
    if defaults > 0 {
        eprintln!("check 5 skipped: the cluster has a default StorageClass already");
    } else {
        stack
            .claim(&ns, "c-retro", "1Gi", json!({"storageClassName": null}))
            .await;
        let no_volume = (
            "Normal",
            "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set",
        );
        stack.wait_event(&ns, "c-retro", no_volume, 1).await;
        let default = stack.unique("retro-default");
        stack
            .apply(
                None,
                json!({
                    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": default, "annotations": {DEFAULT_CLASS: "true"}},
                    "provisioner": "example.com/none",
                }),
            )
            .await;
        let started = Instant::now();
        stack
            .wait_claim(&ns, "c-retro", "the default class on c-retro", |c| match c
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
            {
                Some(class) if class == default => Ok(()),
                other => Err(format!("storageClassName {other:?}")),
            })
            .await;
        let took = started.elapsed();
        eprintln!("check 5: default class assigned {took:?} after it was made");
        assert!(took < Duration::from_secs(30), "took {took:?}");
        stack
            .wait("retroactive_storageclass_total 1", || async {
                let metrics = stack.metrics().await;
                Ok(
                    (metric_sum(&metrics, "retroactive_storageclass_total", &[]) == Some(1.0))
                        .then_some(()),
                )
            })
            .await;
        // Removed at once: a default class would be given to other tests' claims.
        stack
            .kubectl(&["delete", "storageclass", &default, "--wait=false"])
            .await;
    }

    // 7. A Recycle hostPath volume: scrubbed by the recycler pod, then Available again.
    let recycled = stack
        .volume(
            "r1",
            "1Gi",
            json!({"persistentVolumeReclaimPolicy": "Recycle"}),
        )
        .await;
    stack
        .claim(&ns, "c-recycle", "1Gi", json!({"volumeName": recycled}))
        .await;
    stack
        .wait_claim(&ns, "c-recycle", "c-recycle Bound", |c| {
            match claim_phase(c) {
                "Bound" => Ok(()),
                other => Err(format!("phase {other:?}")),
            }
        })
        .await;
    let pod_name = format!("recycler-for-{recycled}");
    let pods: Api<Pod> = Api::namespaced(stack.cluster.client.clone(), "default");
    let mut watch = pods
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={pod_name}")),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    let seen = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(Ok(event)) = watch.next().await {
            match event {
                WatchEvent::Added(_) => seen.push("ADDED"),
                WatchEvent::Deleted(_) => {
                    seen.push("DELETED");
                    break;
                }
                _ => {}
            }
        }
        seen
    });
    stack
        .kubectl(&["delete", "pvc", "c-recycle", "-n", &ns])
        .await;
    stack
        .wait_event(
            "default",
            &recycled,
            ("Normal", "VolumeRecycled", "Volume recycled"),
            1,
        )
        .await;
    let volume = stack
        .wait_volume(&recycled, "the recycled volume Available", |v| {
            match (
                volume_phase(v),
                v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()),
            ) {
                ("Available", None) => Ok(()),
                (phase, claim_ref) => Err(format!("phase {phase:?}, claimRef {claim_ref:?}")),
            }
        })
        .await;
    assert!(annotation(&volume.metadata, BOUND_BY_CONTROLLER).is_none());
    let seen = match tokio::time::timeout(STACK_WAIT, seen).await {
        Ok(Ok(seen)) => seen,
        other => stack.fail(format!("watching the recycler pod: {other:?}")),
    };
    assert_eq!(
        seen,
        vec!["ADDED", "DELETED"],
        "the recycler pod ran and was deleted"
    );
    let mirrored = stack.events("default", &recycled).await;
    assert!(
        mirrored
            .iter()
            .any(|e| e.reason.as_deref() == Some("RecyclerPod")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Recycler pod: "))),
        "the recycler pod's events mirrored on the volume: {:?}",
        mirrored
            .iter()
            .map(|e| (e.reason.clone(), e.message.clone()))
            .collect::<Vec<_>>()
    );
    stack.clean_up().await;
}

/// A recycler pod template that cannot be used stops the launcher at start (KCM exits too),
/// saying which file and why; so does a zero sync period.
#[tokio::test]
async fn a_bad_recycler_template_stops_the_launcher() {
    let dir = tempfile::tempdir().unwrap();
    let no_volume = dir.path().join("no-volume.yaml");
    std::fs::write(
        &no_volume,
        "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    image: i\n",
    )
    .unwrap();
    let missing = dir.path().join("missing.yaml");
    let runtime = dir.path().join("run");
    let hostpath = format!(
        "--pv-recycler-pod-template-filepath-hostpath={}",
        no_volume.display()
    );
    let nfs = format!(
        "--pv-recycler-pod-template-filepath-nfs={}",
        missing.display()
    );
    for (flag, expected) in [
        (hostpath.as_str(), "does not contain any volume(s)"),
        (nfs.as_str(), "failed to read file path"),
        (
            "--pvclaimbinder-sync-period=0",
            "--pvclaimbinder-sync-period must be greater than 0",
        ),
    ] {
        let out = tokio::process::Command::new(RKCM)
            .arg("launcher")
            .arg("--runtime-dir")
            .arg(&runtime)
            .args([
                "--secure-port",
                "0",
                "--controllers=persistentvolume-binder",
                flag,
            ])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {stderr}");
        assert!(stderr.contains(expected), "{flag}: {stderr}");
    }
}

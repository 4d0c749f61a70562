//! End-to-end tests of `rkcm worker --controllers statefulset`: the test cluster (kube-sim
//! with simulated nodes in this process, or RKCM_TEST_KUBECONFIG's real cluster and its
//! nodes), the real `rkcm launcher` with its informer-server and worker as separate processes, every
//! change made with the real kubectl, and the order pods come and go read from a pod
//! watch opened before the change.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use tokio::sync::oneshot;

const REVISION_LABEL: &str = "controller-revision-hash";

suite_stack! {
    /// The worker stack with only the statefulset controller.
    struct Stack(LauncherStack);
}

impl Stack {
    async fn start() -> Stack {
        Stack(
            LauncherStack::start(&[
                "--controllers",
                "statefulset,nodelifecycle,root-ca-cert-publisher,persistentvolume-binder,persistentvolume-attach-detach-controller",
            ])
            .await,
        )
    }

    fn sets(&self, ns: &str) -> Api<StatefulSet> {
        Api::namespaced(self.cluster.client.clone(), ns)
    }

    async fn set(&self, ns: &str, name: &str) -> StatefulSet {
        self.sets(ns).get(name).await.unwrap()
    }

    async fn revisions(&self, ns: &str) -> Vec<ControllerRevision> {
        let mut list = Api::<ControllerRevision>::namespaced(self.cluster.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        list.sort_by_key(|r| r.revision);
        list
    }

    async fn pod(&self, ns: &str, name: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.cluster.client.clone(), ns)
            .get_opt(name)
            .await
            .unwrap()
    }

    async fn live_pod_names(&self, ns: &str) -> Vec<String> {
        let mut names: Vec<String> = Api::<Pod>::namespaced(self.cluster.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter_map(|pod| pod.metadata.name)
            .collect();
        names.sort();
        names
    }

    /// The events of `object` in `ns`: (reason, message, count).
    async fn events_of(&self, ns: &str, object: &str) -> Vec<(String, String, i32)> {
        Api::<Event>::namespaced(self.cluster.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(object))
            .map(|e| {
                (
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                    e.count.unwrap_or(1),
                )
            })
            .collect()
    }

    async fn expect_event(&self, ns: &str, object: &str, reason: &str, message: &str) {
        let what = format!("a {reason} event {message:?} on {object}");
        self.wait(&what, || async {
            Ok(self
                .events_of(ns, object)
                .await
                .iter()
                .any(|(r, m, _)| r == reason && m == message)
                .then_some(()))
        })
        .await
    }
}

/// One state of one pod, as the watch saw it.
#[derive(Clone, Debug)]
struct Seen {
    name: String,
    uid: String,
    ready: bool,
    deleting: bool,
    gone: bool,
}

/// Every pod change of a namespace, in the order the API server reports them.
struct PodLog {
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PodLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl PodLog {
    /// Starts watching and returns once the watch is established.
    async fn start(client: kube::Client, ns: &str) -> PodLog {
        let api: Api<Pod> = Api::namespaced(client, ns);
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (ready_tx, ready_rx) = oneshot::channel();
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut ready_tx = Some(ready_tx);
                let mut stream = watcher(api, watcher::Config::default()).boxed();
                while let Some(event) = stream.next().await {
                    let (pod, gone) = match event {
                        Ok(watcher::Event::Apply(pod)) | Ok(watcher::Event::InitApply(pod)) => {
                            (pod, false)
                        }
                        Ok(watcher::Event::Delete(pod)) => (pod, true),
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = ready_tx.take() {
                                let _ = tx.send(());
                            }
                            continue;
                        }
                        Ok(watcher::Event::Init) => continue,
                        Err(_) => {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    let entry = Seen {
                        name: pod.metadata.name.clone().unwrap_or_default(),
                        uid: pod.metadata.uid.clone().unwrap_or_default(),
                        ready: is_ready(&pod),
                        deleting: pod.metadata.deletion_timestamp.is_some(),
                        gone,
                    };
                    seen.lock().unwrap_or_else(|p| p.into_inner()).push(entry);
                }
            })
        };
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .expect("the pod watch did not start within 30 s")
            .expect("the pod watch ended");
        PodLog { seen, task }
    }

    fn snapshot(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn len(&self) -> usize {
        self.snapshot().len()
    }
}

/// Index of the first entry satisfying `pred`.
fn first(log: &[Seen], pred: impl Fn(&Seen) -> bool) -> Option<usize> {
    log.iter().position(pred)
}

/// The names of pods in the order their new UIDs (not among `old`) first appear.
fn creation_order(log: &[Seen], old: &HashSet<String>) -> Vec<String> {
    let mut seen_uids = HashSet::new();
    let mut order = Vec::new();
    for entry in log {
        if !entry.gone && !old.contains(&entry.uid) && seen_uids.insert(entry.uid.clone()) {
            order.push(entry.name.clone());
        }
    }
    order
}

/// The names of pods among `uids` in the order their deletion first shows.
fn deletion_order(log: &[Seen], uids: &HashSet<String>) -> Vec<String> {
    let mut done = HashSet::new();
    let mut order = Vec::new();
    for entry in log {
        if (entry.deleting || entry.gone)
            && uids.contains(&entry.uid)
            && done.insert(entry.uid.clone())
        {
            order.push(entry.name.clone());
        }
    }
    order
}

fn uids(log: &[Seen]) -> HashSet<String> {
    log.iter().map(|e| e.uid.clone()).collect()
}

fn status_of(set: &StatefulSet) -> k8s_openapi::api::apps::v1::StatefulSetStatus {
    set.status.clone().unwrap_or_default()
}

fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

fn labels_of(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.labels.clone().unwrap_or_default()
}

const WEB: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: nginx
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: pause
        image: registry.k8s.io/pause:3.9
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_rollout_update_undo_partition_and_scale_down() {
    let s = Stack::start().await;
    let ns = s.cluster.namespace("sts").await.unwrap();
    s.kubectl(&[
        "create",
        "service",
        "clusterip",
        "nginx",
        "--clusterip=None",
        "-n",
        &ns,
    ])
    .await;
    let log = PodLog::start(s.cluster.client.clone(), &ns).await;

    // --- Creation: web-0, then web-1 once web-0 is Ready, then web-2. ---
    s.kubectl_stdin(&["create", "-n", &ns, "-f", "-"], WEB)
        .await;
    s.rollout_status(&ns, "statefulset/web").await;
    let created = log.snapshot();
    assert_eq!(
        creation_order(&created, &HashSet::new()),
        ["web-0", "web-1", "web-2"],
        "pods created in ordinal order; log: {created:?}"
    );
    for (before, after) in [("web-0", "web-1"), ("web-1", "web-2")] {
        let ready = first(&created, |e| e.name == before && e.ready)
            .unwrap_or_else(|| panic!("{before} never Ready in {created:?}"));
        let born = first(&created, |e| e.name == after).unwrap_or(usize::MAX);
        assert!(
            born > ready,
            "{after} was created before {before} was Ready: {created:?}"
        );
    }
    let mut stamps = Vec::new();
    for name in ["web-0", "web-1", "web-2"] {
        let pod = s.pod(&ns, name).await.unwrap();
        stamps.push(pod.metadata.creation_timestamp.clone().unwrap().0);
    }
    assert!(
        stamps.windows(2).all(|w| w[0] <= w[1]),
        "creation timestamps {stamps:?}"
    );

    let web = s.set(&ns, "web").await;
    let status = status_of(&web);
    let first_revision = status.update_revision.clone().unwrap();
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.current_replicas,
            status.updated_replicas,
            status.available_replicas,
        ),
        (3, Some(3), Some(3), Some(3), Some(3))
    );
    assert_eq!(
        status.current_revision.as_deref(),
        Some(first_revision.as_str())
    );
    assert_eq!(status.observed_generation, web.metadata.generation);
    assert_eq!(status.collision_count, Some(0));
    let revisions = s.revisions(&ns).await;
    assert_eq!(revisions.len(), 1);
    assert_eq!(
        revisions[0].metadata.name.as_deref(),
        Some(first_revision.as_str())
    );
    assert_eq!(revisions[0].revision, 1);
    let owner = &revisions[0].metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("StatefulSet", "web", Some(true))
    );
    for (ordinal, name) in ["web-0", "web-1", "web-2"].iter().enumerate() {
        let pod = s.pod(&ns, name).await.unwrap();
        let labels = labels_of(&pod);
        assert_eq!(labels[REVISION_LABEL], first_revision);
        assert_eq!(labels["statefulset.kubernetes.io/pod-name"], *name);
        assert_eq!(labels["apps.kubernetes.io/pod-index"], ordinal.to_string());
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(*name));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("StatefulSet", web.metadata.uid.as_deref().unwrap())
        );
    }
    s.expect_event(
        &ns,
        "web",
        "SuccessfulCreate",
        "create Pod web-0 in StatefulSet web successful",
    )
    .await;

    // --- Image update: pods replaced from the highest ordinal down. ---
    let before = log.snapshot();
    let old_uids = uids(&before);
    let mark = before.len();
    s.kubectl(&[
        "set",
        "image",
        "statefulset/web",
        &format!("pause={IMAGE_2}"),
        "-n",
        &ns,
    ])
    .await;
    s.rollout_status(&ns, "statefulset/web").await;
    let after = log.snapshot();
    assert_eq!(
        creation_order(&after[mark..], &old_uids),
        ["web-2", "web-1", "web-0"],
        "pods recreated in reverse ordinal order; log: {:?}",
        &after[mark..]
    );
    assert_eq!(
        deletion_order(&after[mark..], &old_uids),
        ["web-2", "web-1", "web-0"],
        "old pods deleted in reverse ordinal order"
    );
    let status = status_of(&s.set(&ns, "web").await);
    let second_revision = status.update_revision.clone().unwrap();
    assert_ne!(second_revision, first_revision);
    assert_eq!(
        status.current_revision.as_deref(),
        Some(second_revision.as_str())
    );
    assert_eq!(
        (status.updated_replicas, status.current_replicas),
        (Some(3), Some(3))
    );
    let revisions = s.revisions(&ns).await;
    let numbers: Vec<(String, i64)> = revisions
        .iter()
        .map(|r| (r.metadata.name.clone().unwrap(), r.revision))
        .collect();
    assert_eq!(
        numbers,
        [(first_revision.clone(), 1), (second_revision.clone(), 2)]
    );
    for name in ["web-0", "web-1", "web-2"] {
        let pod = s.pod(&ns, name).await.unwrap();
        assert_eq!(
            (image_of(&pod), labels_of(&pod)[REVISION_LABEL].clone()),
            (IMAGE_2.to_string(), second_revision.clone())
        );
    }
    s.expect_event(
        &ns,
        "web",
        "SuccessfulDelete",
        "delete Pod web-2 in StatefulSet web successful",
    )
    .await;

    // --- Undo: back to the first revision, renumbered, no new revision. ---
    s.kubectl(&["rollout", "undo", "statefulset/web", "-n", &ns])
        .await;
    s.wait("the rollback to the first revision", || async {
        let status = status_of(&s.set(&ns, "web").await);
        Ok(
            (status.update_revision.as_deref() == Some(first_revision.as_str())
                && status.current_revision.as_deref() == Some(first_revision.as_str())
                && status.ready_replicas == Some(3))
            .then_some(()),
        )
    })
    .await;
    s.rollout_status(&ns, "statefulset/web").await;
    let numbers: Vec<(String, i64)> = s
        .revisions(&ns)
        .await
        .iter()
        .map(|r| (r.metadata.name.clone().unwrap(), r.revision))
        .collect();
    assert_eq!(
        numbers,
        [(second_revision.clone(), 2), (first_revision.clone(), 3)],
        "the old revision renumbered, no new one"
    );
    for name in ["web-0", "web-1", "web-2"] {
        assert_eq!(image_of(&s.pod(&ns, name).await.unwrap()), IMAGE_1);
    }

    // --- Partition 2: only web-2 moves to the new revision. ---
    s.kubectl(&[
        "patch",
        "statefulset",
        "web",
        "-n",
        &ns,
        "-p",
        r#"{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":2}}}}"#,
    ])
    .await;
    s.kubectl(&[
        "set",
        "image",
        "statefulset/web",
        &format!("pause={IMAGE_2}"),
        "-n",
        &ns,
    ])
    .await;
    let out = s.rollout_status(&ns, "statefulset/web").await;
    assert!(
        out.contains("partitioned roll out complete"),
        "rollout status said: {out}"
    );
    let set = s.set(&ns, "web").await;
    let status = status_of(&set);
    assert_eq!(
        status.update_revision.as_deref(),
        Some(second_revision.as_str())
    );
    assert_eq!(
        status.current_revision.as_deref(),
        Some(first_revision.as_str())
    );
    assert_eq!(
        (
            status.updated_replicas,
            status.current_replicas,
            status.ready_replicas
        ),
        (Some(1), Some(2), Some(3))
    );
    for (name, image, revision) in [
        ("web-0", IMAGE_1, &first_revision),
        ("web-1", IMAGE_1, &first_revision),
        ("web-2", IMAGE_2, &second_revision),
    ] {
        let pod = s.pod(&ns, name).await.unwrap();
        assert_eq!(
            (image_of(&pod), labels_of(&pod)[REVISION_LABEL].clone()),
            (image.to_string(), revision.clone()),
            "{name} after a partitioned update"
        );
    }
    assert_eq!(s.revisions(&ns).await.len(), 2);

    // --- Scale down to 1: web-2 goes, and only then web-1. ---
    let before = log.snapshot();
    let mark = before.len();
    s.kubectl(&["scale", "statefulset/web", "--replicas=1", "-n", &ns])
        .await;
    s.wait("only web-0 left", || async {
        Ok((s.live_pod_names(&ns).await == ["web-0"]).then_some(()))
    })
    .await;
    s.wait("web-1 gone", || async {
        Ok(s.pod(&ns, "web-1").await.is_none().then_some(()))
    })
    .await;
    let after = log.snapshot();
    let window = &after[mark..];
    assert_eq!(
        deletion_order(window, &uids(&before)),
        ["web-2", "web-1"],
        "scale-down from the highest ordinal; log: {window:?}"
    );
    let web_2_gone = first(window, |e| e.name == "web-2" && e.gone)
        .unwrap_or_else(|| panic!("web-2 never went: {window:?}"));
    let web_1_deleting =
        first(window, |e| e.name == "web-1" && (e.deleting || e.gone)).unwrap_or(0);
    assert!(
        web_1_deleting > web_2_gone,
        "web-1 was deleted before web-2 was gone: {window:?}"
    );
    s.wait("the scaled-down status", || async {
        let status = status_of(&s.set(&ns, "web").await);
        Ok((status.replicas == 1 && status.ready_replicas == Some(1)).then_some(()))
    })
    .await;
    assert!(log.len() > mark);
    s.cluster.cleanup().await;
}

const DB: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  podManagementPolicy: Parallel
  persistentVolumeClaimRetentionPolicy:
    whenDeleted: Delete
    whenScaled: Retain
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: pause
        image: registry.k8s.io/pause:3.9
        volumeMounts:
        - name: data
          mountPath: /data
  volumeClaimTemplates:
  - metadata:
      name: data
      labels:
        tier: storage
    spec:
      accessModes: ["ReadWriteOnce"]
      resources:
        requests:
          storage: 1Mi
"#;

/// A claim template the API server refuses (no accessModes): StatefulSet validation
/// does not look into claim templates, PersistentVolumeClaim validation does.
const BAD: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: bad
spec:
  serviceName: bad
  replicas: 1
  selector:
    matchLabels:
      app: bad
  template:
    metadata:
      labels:
        app: bad
    spec:
      containers:
      - name: pause
        image: registry.k8s.io/pause:3.9
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      resources:
        requests:
          storage: 1Mi
"#;

/// OnDelete, with ordinals from 5.
const OD: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: od
spec:
  serviceName: od
  replicas: 2
  ordinals:
    start: 5
  updateStrategy:
    type: OnDelete
  selector:
    matchLabels:
      app: od
  template:
    metadata:
      labels:
        app: od
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: pause
        image: registry.k8s.io/pause:3.9
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_claim_templates_a_refused_claim_and_on_delete() {
    let s = Stack::start().await;
    let ns = s.cluster.namespace("sts-pvc").await.unwrap();
    // With simulated nodes, the claims go through a WaitForFirstConsumer class of csi-sim's
    // driver: the scheduler picks the node, the binder hands the claim to the provisioner,
    // csi-sim makes the volume, the binder binds it, and only then the kubelet starts the
    // pod. On a real cluster with nodes of its own, its default class does.
    let db = if s.nodes.is_some() {
        let class = format!("{ns}-csi");
        s.kubectl_stdin(
            &["create", "-f", "-"],
            &format!(
                "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: {class}\n\
                 provisioner: csi.sim.rkcm.io\nvolumeBindingMode: WaitForFirstConsumer\n\
                 reclaimPolicy: Delete\n"
            ),
        )
        .await;
        DB.replace(
            "      accessModes: [\"ReadWriteOnce\"]",
            &format!("      storageClassName: {class}\n      accessModes: [\"ReadWriteOnce\"]"),
        )
    } else {
        DB.to_string()
    };
    s.kubectl_stdin(&["create", "-n", &ns, "-f", "-"], &db)
        .await;
    let db_uid = s.set(&ns, "db").await.metadata.uid.unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(s.cluster.client.clone(), &ns);

    // Parallel: both pods and both claims without waiting for readiness.
    for ordinal in 0..2 {
        let claim_name = format!("data-db-{ordinal}");
        let pod_name = format!("db-{ordinal}");
        let claim = s
            .wait(&format!("claim {claim_name} owned by the set"), || async {
                Ok(claims.get_opt(&claim_name).await?.filter(|c| {
                    c.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.uid == db_uid && r.kind == "StatefulSet")
                }))
            })
            .await;
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            (
                labels.get("tier").map(String::as_str),
                labels.get("app").map(String::as_str)
            ),
            (Some("storage"), Some("db")),
            "template labels plus the selector's"
        );
        let pod = s
            .wait(&format!("pod {pod_name}"), || async {
                Ok(s.pod(&ns, &pod_name).await)
            })
            .await;
        let volume = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.volumes.as_ref())
            .and_then(|volumes| volumes.iter().find(|v| v.name == "data"))
            .and_then(|v| v.persistent_volume_claim.clone())
            .unwrap_or_else(|| panic!("{pod_name} has no data claim volume: {pod:?}"));
        assert_eq!(volume.claim_name, claim_name);
        s.expect_event(
            &ns,
            "db",
            "SuccessfulCreate",
            &format!("create Claim {claim_name} Pod {pod_name} in StatefulSet db success"),
        )
        .await;
    }

    // Each claim Bound to a volume made for it, and both pods Running on it.
    for ordinal in 0..2 {
        let claim_name = format!("data-db-{ordinal}");
        let pod_name = format!("db-{ordinal}");
        let volume = s
            .wait(&format!("claim {claim_name} Bound"), || async {
                Ok(claims.get_opt(&claim_name).await?.filter(|c| {
                    c.status.as_ref().and_then(|st| st.phase.as_deref()) == Some("Bound")
                }))
            })
            .await
            .spec
            .and_then(|spec| spec.volume_name)
            .unwrap_or_default();
        assert!(!volume.is_empty(), "{claim_name} names its volume");
        s.wait(&format!("pod {pod_name} Running"), || async {
            Ok(s.pod(&ns, &pod_name).await.filter(|p| {
                p.status.as_ref().and_then(|st| st.phase.as_deref()) == Some("Running")
            }))
        })
        .await;
    }

    // A claim the API server refuses: warnings, retries with backoff, and no pod.
    s.kubectl_stdin(&["create", "-n", &ns, "-f", "-"], BAD)
        .await;
    let retried = s
        .wait("a repeated FailedCreate event for bad-0", || async {
            Ok(s.events_of(&ns, "bad").await.into_iter().find(|(reason, message, count)| {
                reason == "FailedCreate"
                    && message.starts_with(
                        "create Pod bad-0 in StatefulSet bad failed error: failed to create PVC data-bad-0: ",
                    )
                    && *count >= 2
            }))
        })
        .await;
    assert!(retried.1.contains("data-bad-0"), "{retried:?}");
    assert!(
        s.events_of(&ns, "bad")
            .await
            .iter()
            .any(|(reason, message, _)| reason == "FailedCreate"
                && message.starts_with(
                    "create Claim data-bad-0 for Pod bad-0 in StatefulSet bad failed error: "
                )),
        "no claim FailedCreate event"
    );
    assert!(
        s.pod(&ns, "bad-0").await.is_none(),
        "a pod was created without its claim"
    );
    assert!(claims.get_opt("data-bad-0").await.unwrap().is_none());
    assert_eq!(s.live_pod_names(&ns).await, ["db-0", "db-1"]);
    // The worker is still up and still reconciling: a scale-up of db still works.
    s.kubectl(&["scale", "statefulset/db", "--replicas=3", "-n", &ns])
        .await;
    s.wait("claim data-db-2", || async {
        Ok(claims.get_opt("data-db-2").await?)
    })
    .await;
    s.wait("pod db-2", || async { Ok(s.pod(&ns, "db-2").await) })
        .await;
    assert!(s.pod(&ns, "bad-0").await.is_none());

    // OnDelete from ordinal 5: a template change replaces nothing until a pod is deleted.
    s.kubectl_stdin(&["create", "-n", &ns, "-f", "-"], OD).await;
    let first_revision = s
        .wait("od-5 and od-6 ready", || async {
            let status = status_of(&s.set(&ns, "od").await);
            Ok((status.ready_replicas == Some(2)).then_some(status.update_revision))
        })
        .await
        .unwrap_or_default();
    let od_5 = s.pod(&ns, "od-5").await.unwrap();
    assert_eq!(labels_of(&od_5)["apps.kubernetes.io/pod-index"], "5");
    let od_5_uid = od_5.metadata.uid.clone();
    assert!(s.pod(&ns, "od-0").await.is_none());
    s.kubectl(&[
        "set",
        "image",
        "statefulset/od",
        &format!("pause={IMAGE_2}"),
        "-n",
        &ns,
    ])
    .await;
    let generation = s.set(&ns, "od").await.metadata.generation;
    // A RollingUpdate deletes its first pod in the same pass that records the new
    // generation; OnDelete must not.
    let status = s
        .wait("the new generation observed", || async {
            let set = s.set(&ns, "od").await;
            Ok(
                (set.status.as_ref().and_then(|st| st.observed_generation) == generation)
                    .then(|| status_of(&set)),
            )
        })
        .await;
    let second_revision = status.update_revision.clone().unwrap_or_default();
    assert_ne!(second_revision, first_revision);
    assert_eq!(
        status.current_revision.as_deref(),
        Some(first_revision.as_str())
    );
    assert_eq!(
        (status.current_replicas, status.updated_replicas),
        (Some(2), None)
    );
    for name in ["od-5", "od-6"] {
        let pod = s.pod(&ns, name).await.unwrap();
        assert!(
            pod.metadata.deletion_timestamp.is_none(),
            "OnDelete deleted {name}"
        );
        assert_eq!(image_of(&pod), IMAGE_1);
    }
    let old_uid = s.pod(&ns, "od-6").await.unwrap().metadata.uid;
    s.kubectl(&["delete", "pod", "od-6", "-n", &ns, "--wait=false"])
        .await;
    let replaced = s
        .wait("od-6 recreated at the update revision", || async {
            Ok(s.pod(&ns, "od-6")
                .await
                .filter(|pod| pod.metadata.uid != old_uid && is_ready(pod)))
        })
        .await;
    assert_eq!(
        (
            image_of(&replaced),
            labels_of(&replaced)[REVISION_LABEL].clone()
        ),
        (IMAGE_2.to_string(), second_revision.clone())
    );
    let od_5 = s.pod(&ns, "od-5").await.unwrap();
    assert_eq!(
        (od_5.metadata.uid.clone(), image_of(&od_5)),
        (od_5_uid.clone(), IMAGE_1.to_string()),
        "od-5 untouched"
    );
    // A pod that lost its identity label gets it back, in place.
    s.kubectl(&[
        "label",
        "pod",
        "od-5",
        "statefulset.kubernetes.io/pod-name-",
        "-n",
        &ns,
    ])
    .await;
    let repaired = s
        .wait("od-5's pod-name label restored", || async {
            Ok(s.pod(&ns, "od-5").await.filter(|pod| {
                labels_of(pod)
                    .get("statefulset.kubernetes.io/pod-name")
                    .map(String::as_str)
                    == Some("od-5")
            }))
        })
        .await;
    assert_eq!(repaired.metadata.uid, od_5_uid, "repaired, not replaced");
    s.expect_event(
        &ns,
        "od",
        "SuccessfulUpdate",
        "update Pod od-5 in StatefulSet od successful",
    )
    .await;
    s.wait("one pod at the update revision", || async {
        let status = status_of(&s.set(&ns, "od").await);
        Ok(
            (status.updated_replicas == Some(1) && status.current_replicas == Some(1))
                .then_some(()),
        )
    })
    .await;
    s.cluster.cleanup().await;
}

//! The collector's decisions driven against an in-memory API.

use std::collections::HashMap;
use std::sync::Mutex;

use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rkcm_proto::v1::ResourceInfo;
use serde_json::{json, Value};

use super::graph_builder::test_support::*;
use super::*;

/// An object stored (`Some`) or deleted (`None`) at a path.
type ConcurrentWrite = (String, Option<Value>);

/// An API server in memory: objects by path, merge patches with the
/// resourceVersion precondition, answers to fail on purpose, and a log of writes.
#[derive(Default)]
struct FakeApi {
    objects: Mutex<HashMap<String, Value>>,
    writes: Mutex<Vec<String>>,
    /// The next write to a path answers this code instead.
    failures: Mutex<HashMap<String, u16>>,
    /// Writes made by somebody else just before the next read of a path.
    before_read: Mutex<HashMap<String, Vec<ConcurrentWrite>>>,
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{reason} (fake)"), "reason": reason, "code": code})
}

/// JSON merge patch (RFC 7386).
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

impl FakeApi {
    fn put(&self, path: &str, object: Value) {
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_string(), object);
    }

    fn object(&self, path: &str) -> Option<Value> {
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
            .cloned()
    }

    fn writes(&self) -> Vec<String> {
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn before_read(&self, path: &str, changes: Vec<ConcurrentWrite>) {
        self.before_read
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_string(), changes);
    }

    fn fail_next(&self, path: &str, code: u16) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_string(), code);
    }

    fn answer(&self, method: &http::Method, path: &str, body: &[u8]) -> (u16, Value) {
        if path.ends_with("/events") {
            return (201, serde_json::from_slice(body).unwrap_or(Value::Null));
        }
        if *method == http::Method::GET {
            let concurrent = self
                .before_read
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(path)
                .unwrap_or_default();
            for (changed, object) in concurrent {
                let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
                match object {
                    Some(object) => objects.insert(changed, object),
                    None => objects.remove(&changed),
                };
            }
            return match self.object(path) {
                Some(object) => (200, object),
                None => (404, status(404, "NotFound")),
            };
        }
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{method} {path}"));
        if let Some(code) = self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(path)
        {
            let reason = if code == 409 {
                "Conflict"
            } else {
                "InternalError"
            };
            return (code, status(code, reason));
        }
        let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        let Some(object) = objects.get_mut(path) else {
            return (404, status(404, "NotFound"));
        };
        match *method {
            http::Method::PATCH => {
                let patch: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                let current = object["metadata"]["resourceVersion"].clone();
                let wanted = &patch["metadata"]["resourceVersion"];
                if !wanted.is_null() && *wanted != current {
                    return (409, status(409, "Conflict"));
                }
                merge(object, &patch);
                let next = current
                    .as_str()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
                    + 1;
                object["metadata"]["resourceVersion"] = json!(next.to_string());
                (200, object.clone())
            }
            http::Method::DELETE => {
                let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                let wanted = &options["preconditions"];
                let held = &object["metadata"];
                let differs =
                    |field: &str| !wanted[field].is_null() && wanted[field] != held[field];
                if differs("uid") || differs("resourceVersion") {
                    return (409, status(409, "Conflict"));
                }
                let object = object.clone();
                objects.remove(path);
                (200, object)
            }
            _ => (405, status(405, "MethodNotAllowed")),
        }
    }
}

fn client(api: Arc<FakeApi>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let api = api.clone();
        async move {
            let method = request.method().clone();
            let path = request.uri().path().to_string();
            let body = request.into_body().collect().await?.to_bytes();
            let (code, value) = api.answer(&method, &path, &body);
            http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    value.to_string(),
                )))
                .map_err(kube::Error::HttpError)
        }
    });
    kube::Client::new(service, "default")
}

const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/ns/deployments/d";
const REPLICA_SET: &str = "/apis/apps/v1/namespaces/ns/replicasets/rs";
const POD: &str = "/api/v1/namespaces/ns/pods/p";

fn owner_ref(kind: &str, api_version: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": name,
        "controller": true, "blockOwnerDeletion": true})
}

/// Deployment d deleted with propagationPolicy=Orphan, its ReplicaSet rs and rs's
/// Pod p, as the API server holds them.
fn cluster() -> Arc<FakeApi> {
    let api = Arc::new(FakeApi::default());
    api.put(
        DEPLOYMENT,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns", "uid": "d", "resourceVersion": "10",
            "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["orphan"]}}),
    );
    api.put(
        REPLICA_SET,
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "rs", "namespace": "ns", "uid": "rs", "resourceVersion": "11",
            "ownerReferences": [owner_ref("Deployment", "apps/v1", "d")]}}),
    );
    api.put(
        POD,
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "p", "resourceVersion": "12",
            "ownerReferences": [owner_ref("ReplicaSet", "apps/v1", "rs")]}}),
    );
    api
}

struct Setup {
    h: Harness,
    collector: Collector,
    api: Arc<FakeApi>,
    deployments: ResourceInfo,
    sets: ResourceInfo,
    pods: ResourceInfo,
}

fn setup() -> Setup {
    let h = Harness::new();
    let api = cluster();
    let client = client(api.clone());
    let deployments = resource("apps", "deployments", "Deployment");
    let sets = resource("apps", "replicasets", "ReplicaSet");
    let pods = resource("", "pods", "Pod");
    let collector = Collector {
        builder: h.builder.clone(),
        ops: Operations {
            client: client.clone(),
            kinds: Kinds::default(),
        },
        recorder: Recorder::new(client, NAME),
        attempt_to_delete: h.delete.clone(),
        shard: None,
    };
    collector
        .ops
        .kinds
        .replace(&[deployments.clone(), sets.clone(), pods.clone()]);
    Setup {
        h,
        collector,
        api,
        deployments,
        sets,
        pods,
    }
}

fn stored_meta(api: &FakeApi, path: &str) -> ObjectMeta {
    meta(api.object(path).expect("stored")["metadata"].clone())
}

/// The next key of a queue, as a worker takes it.
async fn take(queue: &crate::queue::WorkQueue<String>) -> String {
    let key = tokio::time::timeout(std::time::Duration::from_secs(5), queue.get())
        .await
        .expect("a key is queued")
        .expect("the queue runs");
    queue.done(&key);
    key
}

/// The failure of issue 31: a restarted collector saw the Deployment (deleted with
/// orphan) before its ReplicaSet was in the graph, and removed the finalizer with
/// `dependents=0`; the ReplicaSet, still owned, was then collected.
#[tokio::test]
async fn an_orphaning_owner_seen_before_its_dependents_keeps_its_finalizer_until_they_are_released()
{
    let Setup {
        mut h,
        collector,
        api,
        deployments,
        sets,
        pods,
    } = setup();
    let d_monitor = h.monitor(&deployments);
    let rs_monitor = h.monitor(&sets);
    let p_monitor = h.monitor(&pods);
    let d = stored_meta(&api, DEPLOYMENT);
    let rs = stored_meta(&api, REPLICA_SET);
    let p = stored_meta(&api, POD);

    // Deployments list first; the other monitors are still listing.
    h.list(&d_monitor, &deployments, &[&d]);
    let rs_list = rs_monitor.begin_list();
    assert_eq!(take(&h.orphan).await, "d");
    collector.attempt_to_orphan("d").await.expect("held");
    let rs_identity = graph_builder::test_support::identity(&sets, &rs);
    collector
        .attempt_to_delete("rs")
        .await
        .expect("not known yet");
    assert!(
        api.writes().is_empty(),
        "nothing is written before the graph is loaded: {:?}",
        api.writes()
    );
    assert_eq!(
        stored_meta(&api, DEPLOYMENT).finalizers,
        Some(vec!["orphan".to_string()])
    );

    // The ReplicaSet is in, and its owner is queued again for it, but its list has
    // not ended: still nothing.
    h.upsert(&sets, &rs);
    assert_eq!(take(&h.orphan).await, "d");
    collector.attempt_to_orphan("d").await.expect("held");
    collector.attempt_to_delete("rs").await.expect("held");
    assert!(collector.builder.hold_delete("rs", &rs_identity, false));
    assert!(api.writes().is_empty(), "{:?}", api.writes());
    h.end_list(rs_list, &sets, &[&rs]);
    assert_eq!(h.orphan.len(), 0, "pods are still listing");
    h.list(&p_monitor, &pods, &[&p]);

    // Every monitor has synced: the held owner is back, and now it orphans.
    assert_eq!(take(&h.orphan).await, "d");
    collector.attempt_to_orphan("d").await.expect("orphans");
    assert_eq!(
        api.writes(),
        [
            format!("PATCH {REPLICA_SET}"),
            format!("PATCH {DEPLOYMENT}")
        ],
        "the ReplicaSet is released before the finalizer goes"
    );
    assert_eq!(stored_meta(&api, REPLICA_SET).owner_references, None);
    assert_eq!(stored_meta(&api, DEPLOYMENT).finalizers, None);
    assert_eq!(
        stored_meta(&api, POD).owner_references.map(|o| o.len()),
        Some(1),
        "the pod keeps its ReplicaSet"
    );
}

#[tokio::test]
async fn a_relist_of_the_dependents_holds_orphaning_until_it_ends() {
    let Setup {
        mut h,
        collector,
        api,
        deployments,
        sets,
        pods,
    } = setup();
    let d_monitor = h.monitor(&deployments);
    let rs_monitor = h.monitor(&sets);
    let p_monitor = h.monitor(&pods);
    let rs = stored_meta(&api, REPLICA_SET);
    let p = stored_meta(&api, POD);
    let mut d = stored_meta(&api, DEPLOYMENT);
    d.deletion_timestamp = None;
    d.finalizers = None;
    h.list(&d_monitor, &deployments, &[&d]);
    h.list(&rs_monitor, &sets, &[]);
    h.list(&p_monitor, &pods, &[&p]);
    assert!(h.builder.is_synced());

    // The ReplicaSet was made while the stream was down; the stream comes back
    // with a RESET, and the Deployment's deletion arrives mid-relist.
    let relist = rs_monitor.begin_list();
    h.upsert(&deployments, &stored_meta(&api, DEPLOYMENT));
    assert_eq!(take(&h.orphan).await, "d");
    collector.attempt_to_orphan("d").await.expect("held");
    assert!(api.writes().is_empty(), "{:?}", api.writes());
    h.upsert(&sets, &rs);
    h.end_list(relist, &sets, &[&rs]);
    assert_eq!(take(&h.orphan).await, "d");
    collector.attempt_to_orphan("d").await.expect("orphans");
    assert_eq!(
        api.writes(),
        [
            format!("PATCH {REPLICA_SET}"),
            format!("PATCH {DEPLOYMENT}")
        ]
    );
}

#[tokio::test]
async fn a_failed_release_keeps_the_finalizer_and_a_conflict_is_read_again() {
    let Setup {
        mut h,
        collector,
        api,
        deployments,
        sets,
        pods,
    } = setup();
    let d_monitor = h.monitor(&deployments);
    let rs_monitor = h.monitor(&sets);
    let p_monitor = h.monitor(&pods);
    h.list(&d_monitor, &deployments, &[&stored_meta(&api, DEPLOYMENT)]);
    h.list(&rs_monitor, &sets, &[&stored_meta(&api, REPLICA_SET)]);
    h.list(&p_monitor, &pods, &[&stored_meta(&api, POD)]);

    api.fail_next(REPLICA_SET, 500);
    assert!(collector.attempt_to_orphan("d").await.is_err());
    assert_eq!(api.writes(), [format!("PATCH {REPLICA_SET}")]);
    assert_eq!(
        stored_meta(&api, DEPLOYMENT).finalizers,
        Some(vec!["orphan".to_string()])
    );

    api.fail_next(REPLICA_SET, 409);
    collector.attempt_to_orphan("d").await.expect("orphans");
    assert_eq!(
        api.writes(),
        [
            format!("PATCH {REPLICA_SET}"),
            format!("PATCH {REPLICA_SET}"),
            format!("PATCH {REPLICA_SET}"),
            format!("PATCH {DEPLOYMENT}")
        ]
    );
    assert_eq!(stored_meta(&api, REPLICA_SET).owner_references, None);
    assert_eq!(stored_meta(&api, DEPLOYMENT).finalizers, None);
}

/// The collector read the ReplicaSet naming its Deployment, then found the Deployment
/// gone: meanwhile the Deployment's orphaning had released the ReplicaSet. The delete
/// decided on the old read must not go through.
#[tokio::test]
async fn a_delete_decided_on_a_stale_read_does_not_go_through() {
    let Setup {
        mut h,
        collector,
        api,
        deployments,
        sets,
        pods,
    } = setup();
    let d_monitor = h.monitor(&deployments);
    let rs_monitor = h.monitor(&sets);
    let p_monitor = h.monitor(&pods);
    h.list(&d_monitor, &deployments, &[&stored_meta(&api, DEPLOYMENT)]);
    h.list(&rs_monitor, &sets, &[&stored_meta(&api, REPLICA_SET)]);
    h.list(&p_monitor, &pods, &[&stored_meta(&api, POD)]);

    let mut released = api.object(REPLICA_SET).expect("stored");
    released["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("ownerReferences");
    released["metadata"]["resourceVersion"] = json!("20");
    api.before_read(
        DEPLOYMENT,
        vec![
            (REPLICA_SET.to_string(), Some(released)),
            (DEPLOYMENT.to_string(), None),
        ],
    );
    let error = collector
        .attempt_to_delete("rs")
        .await
        .expect_err("the owners changed since the read");
    assert!(
        error.to_string().contains("changed its ownerReferences"),
        "{error:#}"
    );
    assert!(api.object(REPLICA_SET).is_some(), "the ReplicaSet is kept");
    collector
        .attempt_to_delete("rs")
        .await
        .expect("decided again");
    assert!(api.object(REPLICA_SET).is_some());
    assert_eq!(api.writes(), [format!("DELETE {REPLICA_SET}")]);
}

fn node(namespace: &str, name: &str, virtual_node: bool) -> graph::Node {
    graph::Node {
        identity: ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("{namespace}-{name}"),
        },
        owners: Vec::new(),
        dependents: HashSet::new(),
        virtual_node,
        being_deleted: false,
        deleting_dependents: false,
        orphaning: false,
    }
}

/// The shard of 2 that holds `key`, and the other one.
fn shards_of(key: &str) -> (Shard, Shard) {
    let index = rkcm_proto::shard_of(key, 2);
    (
        Shard { index, count: 2 },
        Shard {
            index: 1 - index,
            count: 2,
        },
    )
}

#[test]
fn each_object_is_acted_on_by_one_shard_and_virtual_owners_by_all() {
    let (holds_ns, other) = shards_of("ns");
    let (holds_pv, other_pv) = shards_of("pv-1");
    let cases = [
        ("unsharded", None, node("ns", "a", false), true),
        (
            "namespaced, its shard",
            Some(holds_ns),
            node("ns", "a", false),
            true,
        ),
        (
            "namespaced, another shard",
            Some(other),
            node("ns", "a", false),
            false,
        ),
        (
            "cluster-scoped, by its name",
            Some(holds_pv),
            node("", "pv-1", false),
            true,
        ),
        (
            "cluster-scoped, another shard",
            Some(other_pv),
            node("", "pv-1", false),
            false,
        ),
        ("virtual owner", Some(other), node("ns", "a", true), true),
        (
            "one shard only",
            Some(Shard { index: 0, count: 1 }),
            node("ns", "a", false),
            true,
        ),
    ];
    for (what, shard, node, acts) in cases {
        assert_eq!(acts_on(shard, &node), acts, "{what}");
    }
}

/// Two collectors sharing one graph, sharded two ways: only the Deployment's shard
/// orphans its ReplicaSet and removes its finalizer; once the ReplicaSet's owner is
/// gone, only the ReplicaSet's shard deletes it.
#[tokio::test]
async fn only_the_shard_of_an_object_acts_on_it() {
    let Setup {
        mut h,
        collector,
        api,
        deployments,
        sets,
        pods,
    } = setup();
    let d_monitor = h.monitor(&deployments);
    let rs_monitor = h.monitor(&sets);
    let p_monitor = h.monitor(&pods);
    h.list(&d_monitor, &deployments, &[&stored_meta(&api, DEPLOYMENT)]);
    h.list(&rs_monitor, &sets, &[&stored_meta(&api, REPLICA_SET)]);
    h.list(&p_monitor, &pods, &[&stored_meta(&api, POD)]);
    let (mine, theirs) = shards_of("ns");
    let sharded = |shard| Collector {
        builder: collector.builder.clone(),
        ops: Operations {
            client: collector.ops.client.clone(),
            kinds: Kinds::default(),
        },
        recorder: collector.recorder.clone(),
        attempt_to_delete: collector.attempt_to_delete.clone(),
        shard: Some(shard),
    };
    let (holder, other) = (sharded(mine), sharded(theirs));
    for c in [&holder, &other] {
        c.ops
            .kinds
            .replace(&[deployments.clone(), sets.clone(), pods.clone()]);
    }

    other.attempt_to_orphan("d").await.expect("not its owner");
    assert!(api.writes().is_empty(), "{:?}", api.writes());
    holder.attempt_to_orphan("d").await.expect("orphans");
    assert_eq!(
        api.writes(),
        [
            format!("PATCH {REPLICA_SET}"),
            format!("PATCH {DEPLOYMENT}")
        ]
    );

    // The pod's ReplicaSet goes: the pod is collected by its shard only.
    let rs = stored_meta(&api, REPLICA_SET);
    api.objects
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(REPLICA_SET);
    h.send(GraphChange::Delete(graph_builder::test_support::identity(
        &sets, &rs,
    )));
    other.attempt_to_delete("p").await.expect("not its pod");
    assert_eq!(api.writes().len(), 2, "{:?}", api.writes());
    holder.attempt_to_delete("p").await.expect("collects");
    assert_eq!(api.writes()[2], format!("DELETE {POD}"));
    assert!(api.object(POD).is_none());
}

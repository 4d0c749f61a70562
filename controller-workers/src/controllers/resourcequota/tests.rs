//! The controller's decisions against a fake API server: which queue a quota goes to,
//! what a sync writes (and when it writes nothing), replenishment, and what a sync does
//! with a resource it cannot count yet or an entry that is not a quantity.

use std::sync::Mutex;

use http_body_util::BodyExt;
use serde_json::{json, Value};

use super::*;

/// Records status writes; answers them with the object written (or a failure).
#[derive(Default)]
struct FakeApi {
    writes: Mutex<Vec<(String, Value)>>,
}

impl FakeApi {
    fn writes(&self) -> Vec<(String, Value)> {
        self.writes.lock().unwrap().clone()
    }
}

fn client(api: Arc<FakeApi>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let api = api.clone();
        async move {
            let path = format!("{} {}", request.method(), request.uri().path());
            let body = request.into_body().collect().await?.to_bytes();
            let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            api.writes.lock().unwrap().push((path, value.clone()));
            http::Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    value.to_string(),
                )))
                .map_err(kube::Error::HttpError)
        }
    });
    kube::Client::new(service, "default")
}

fn controller(api: Arc<FakeApi>) -> Controller {
    let informer =
        rkcm_client::informer::connect("unix:///nonexistent/informer.sock", None).unwrap();
    Controller {
        client: client(api),
        quotas: Store::new(),
        pods: Store::new(),
        services: Store::new(),
        claims: Store::new(),
        primary: WorkQueue::new(PRIMARY_QUEUE, None),
        priority: WorkQueue::new(PRIORITY_QUEUE, None),
        registry: RwLock::new(Evaluator::built_in()),
        pod_usage: RwLock::default(),
        monitors: Monitors::new(informer, "test".into(), None, Arc::new(|_, _, _| {})),
        worker_lock: Arc::new(tokio::sync::RwLock::new(())),
    }
}

fn quota(value: Value) -> Arc<ResourceQuota> {
    let mut value = value;
    value["metadata"]["namespace"] = json!("ns");
    value["metadata"]["resourceVersion"] = json!("7");
    Arc::new(serde_json::from_value(value).expect("a quota"))
}

fn put<K: kube::Resource + Send + Sync + 'static>(store: &Store<K>, object: Arc<K>) {
    store.apply(key_of(object.meta()), object);
}

fn pod(name: &str, cpu: &str, phase: &str) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase}
        }))
        .expect("a pod"),
    )
}

/// The queued keys of a queue, emptying it.
async fn drain(queue: &WorkQueue<String>) -> Vec<String> {
    let mut keys = Vec::new();
    while !queue.is_empty() {
        if let Some(key) = queue.get().await {
            queue.done(&key);
            keys.push(key);
        }
    }
    keys
}

#[tokio::test]
async fn a_quota_goes_to_priority_until_its_status_holds_its_intent() {
    let c = controller(Arc::default());
    // Never computed.
    c.add_quota(&quota(
        json!({"metadata": {"name": "new"}, "spec": {"hard": {"pods": "2"}}}),
    ));
    // Computed (the same hard by value), with every usage.
    c.add_quota(&quota(json!({"metadata": {"name": "done"},
        "spec": {"hard": {"cpu": "1"}},
        "status": {"hard": {"cpu": "1000m"}, "used": {"cpu": "0"}}})));
    // A hard name without usage that nothing measures yet: not a priority.
    let widgets = quota(json!({"metadata": {"name": "widgets"},
        "spec": {"hard": {"count/widgets.example.com": "3"}},
        "status": {"hard": {"count/widgets.example.com": "3"}}}));
    c.add_quota(&widgets);
    assert_eq!(drain(&c.priority).await, ["ns/new"]);
    assert_eq!(drain(&c.primary).await, ["ns/done", "ns/widgets"]);
    // Once discovery found the resource, its missing usage is a priority.
    c.add_evaluators(&[rkcm_proto::v1::ResourceInfo {
        group: "example.com".into(),
        version: "v1".into(),
        resource: "widgets".into(),
        kind: "Widget".into(),
        namespaced: true,
        verbs: vec![],
    }]);
    c.add_quota(&widgets);
    assert_eq!(drain(&c.priority).await, ["ns/widgets"]);

    // Updates count only when spec.hard changes.
    let old = quota(
        json!({"metadata": {"name": "done"}, "spec": {"hard": {"cpu": "1"}},
        "status": {"hard": {"cpu": "1"}, "used": {"cpu": "0"}}}),
    );
    let status_only = quota(
        json!({"metadata": {"name": "done"}, "spec": {"hard": {"cpu": "1"}},
        "status": {"hard": {"cpu": "1"}, "used": {"cpu": "5"}}}),
    );
    c.on_quota(&Change::Updated {
        old: old.clone(),
        new: status_only,
    });
    assert!(c.primary.is_empty() && c.priority.is_empty());
    let more = quota(
        json!({"metadata": {"name": "done"}, "spec": {"hard": {"cpu": "2"}},
        "status": {"hard": {"cpu": "1"}, "used": {"cpu": "0"}}}),
    );
    c.on_quota(&Change::Updated { old, new: more });
    assert_eq!(drain(&c.priority).await, ["ns/done"]);
}

#[tokio::test]
async fn a_sync_writes_hard_and_used_and_nothing_when_they_hold() {
    let api = Arc::new(FakeApi::default());
    let c = controller(api.clone());
    put(&c.pods, pod("a", "200m", "Running"));
    put(&c.pods, pod("b", "300m", "Running"));
    put(&c.pods, pod("done", "1", "Succeeded"));
    c.monitors
        .insert_synced("", "configmaps", "ns", &["root-ca", "app"]);
    let q = quota(json!({"metadata": {"name": "q"},
        "spec": {"hard": {"pods": "5", "requests.cpu": "2", "count/pods": "9", "configmaps": "4",
                          "nonsense": "1", "memory": "lots"}},
        "status": {"used": {"pods": "1", "gone": "3"}}}));
    c.sync_quota(&q).await.expect("synced");
    let writes = api.writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(
        writes[0].0,
        "PUT /api/v1/namespaces/ns/resourcequotas/q/status"
    );
    let status = &writes[0].1["status"];
    assert_eq!(
        status["hard"],
        json!({"pods": "5", "requests.cpu": "2", "count/pods": "9", "configmaps": "4", "nonsense": "1"}),
        "spec.hard, without what is not a quantity"
    );
    assert_eq!(
        status["used"],
        json!({"pods": "2", "requests.cpu": "500m", "count/pods": "3", "configmaps": "2"}),
        "a name nothing measures has no usage; one no longer hard is dropped"
    );
    assert_eq!(writes[0].1["metadata"]["resourceVersion"], "7");

    // Its own write read back: nothing to do.
    let mut written = (*q).clone();
    written.status = serde_json::from_value(status.clone()).expect("a status");
    c.sync_quota(&Arc::new(written)).await.expect("synced");
    assert_eq!(api.writes().len(), 1, "no second write");
}

#[tokio::test]
async fn a_resource_not_counted_yet_keeps_its_old_usage_and_fails_the_sync() {
    let api = Arc::new(FakeApi::default());
    let c = controller(api.clone());
    c.add_evaluators(&[rkcm_proto::v1::ResourceInfo {
        group: "apps".into(),
        version: "v1".into(),
        resource: "deployments".into(),
        kind: "Deployment".into(),
        namespaced: true,
        verbs: vec![],
    }]);
    let q = quota(json!({"metadata": {"name": "q"},
        "spec": {"hard": {"pods": "5", "count/deployments.apps": "2"}},
        "status": {"hard": {"pods": "5", "count/deployments.apps": "2"},
                   "used": {"pods": "3", "count/deployments.apps": "1"}}}));
    let error = c
        .sync_quota(&q)
        .await
        .expect_err("deployments are not monitored");
    assert!(
        error
            .to_string()
            .contains("failed to list content: deployments.apps not yet synced"),
        "{error}"
    );
    let writes = api.writes();
    assert_eq!(writes.len(), 1, "what could be measured is written");
    assert_eq!(
        writes[0].1["status"]["used"],
        json!({"pods": "0", "count/deployments.apps": "1"})
    );
}

#[tokio::test]
async fn deletions_and_finished_pods_replenish_the_quotas_that_count_them() {
    let c = controller(Arc::default());
    put(
        &c.quotas,
        quota(json!({"metadata": {"name": "pods"},
        "status": {"hard": {"requests.cpu": "1"}}})),
    );
    put(
        &c.quotas,
        quota(json!({"metadata": {"name": "services"},
        "status": {"hard": {"services.nodeports": "1"}}})),
    );
    put(
        &c.quotas,
        quota(json!({"metadata": {"name": "quotas"},
        "status": {"hard": {"count/resourcequotas": "9"}}})),
    );
    let running = pod("a", "1", "Running");
    let finished = pod("a", "1", "Succeeded");
    c.on_pod(&Change::Added(running.clone()));
    c.on_pod(&Change::Updated {
        old: running.clone(),
        new: running.clone(),
    });
    assert!(
        c.primary.is_empty(),
        "creations and other updates wait for admission or the period"
    );
    c.on_pod(&Change::Updated {
        old: running,
        new: finished.clone(),
    });
    assert_eq!(drain(&c.primary).await, ["ns/pods"]);
    c.on_pod(&Change::Deleted(crate::informer::DeletedObject::Final(
        finished,
    )));
    assert_eq!(drain(&c.primary).await, ["ns/pods"]);

    let service = |kind: &str| -> Arc<Service> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "s", "namespace": "ns"},
                "spec": {"type": kind}}))
            .expect("a service"),
        )
    };
    c.on_service(&Change::Updated {
        old: service("ClusterIP"),
        new: service("ClusterIP"),
    });
    assert!(c.primary.is_empty());
    c.on_service(&Change::Updated {
        old: service("NodePort"),
        new: service("ClusterIP"),
    });
    assert_eq!(drain(&c.primary).await, ["ns/services"]);

    // A deleted quota: itself, and the quotas counting quotas.
    let gone = quota(json!({"metadata": {"name": "old"}}));
    c.on_quota(&Change::Deleted(crate::informer::DeletedObject::Final(
        gone,
    )));
    let mut queued = drain(&c.primary).await;
    queued.sort();
    assert_eq!(queued, ["ns/old", "ns/quotas"]);
    // A monitored resource's deletion, in another namespace: nothing.
    c.replenish("", "configmaps", "elsewhere");
    assert!(c.primary.is_empty());
}

#[tokio::test]
async fn a_pods_usage_is_computed_once_per_resource_version() {
    let c = controller(Arc::default());
    let versioned = |cpu: &str, version: &str| {
        let mut pod = (*pod("a", cpu, "Running")).clone();
        pod.metadata.resource_version = Some(version.into());
        pod.metadata.uid = Some("uid-a".into());
        Arc::new(pod)
    };
    let names = vec!["requests.cpu".to_string(), "count/pods".to_string()];
    let pods_evaluator = &Evaluator::built_in()[0];
    let stats = |c: &Controller| {
        resources::pretty_print(&c.pod_stats(pods_evaluator, "ns", &names, &[], Timestamp::now()))
    };
    put(&c.pods, versioned("100m", "1"));
    assert_eq!(stats(&c), "count/pods=1,requests.cpu=100m");
    // The same version is not evaluated again (a changed spec always has a new one).
    put(&c.pods, versioned("900m", "1"));
    assert_eq!(stats(&c), "count/pods=1,requests.cpu=100m");
    put(&c.pods, versioned("200m", "2"));
    assert_eq!(stats(&c), "count/pods=1,requests.cpu=200m");
    c.on_pod(&Change::Deleted(crate::informer::DeletedObject::Final(
        versioned("200m", "2"),
    )));
    assert!(
        c.pod_usage.read().unwrap().is_empty(),
        "a deleted pod leaves the cache"
    );
}

//! API semantics every client relies on, checked through kube-rs only: optimistic
//! concurrency, paginated lists, deletion propagation finalizers, errors as Status objects,
//! generation and the status/scale subresources, namespace lifecycle and pod admission, and
//! field ownership (managedFields, server-side apply conflicts).

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::PropagationPolicy;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rkcm_conformance::{api_code, wait_for, TestCluster};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

fn rs(name: &str) -> ReplicaSet {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"replicas": 0,
        "selector": {"matchLabels": {"x": name}},
        "template": {"metadata": {"labels": {"x": name}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_racing_on_one_resource_version_get_exactly_one_conflict() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("race").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let base = api
        .create(&PostParams::default(), &cm("shared"))
        .await
        .unwrap();
    for round in 0..5 {
        let current = api.get("shared").await.unwrap();
        let mut a = current.clone();
        let mut b = current.clone();
        a.data = Some([("writer".to_string(), format!("a{round}"))].into());
        b.data = Some([("writer".to_string(), format!("b{round}"))].into());
        let pp = PostParams::default();
        let (ra, rb) = tokio::join!(
            api.replace("shared", &pp, &a),
            api.replace("shared", &pp, &b)
        );
        let conflicts = [api_code(&ra), api_code(&rb)]
            .iter()
            .filter(|c| **c == Some(409))
            .count();
        let wins = [ra.is_ok(), rb.is_ok()].iter().filter(|ok| **ok).count();
        assert_eq!((wins, conflicts), (1, 1), "round {round}: {ra:?} / {rb:?}");
    }
    let stale = api.replace("shared", &PostParams::default(), &base).await;
    let Err(kube::Error::Api(s)) = stale else {
        panic!("stale write accepted: {stale:?}")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message.contains("the object has been modified"),
        "{}",
        s.message
    );
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_over_2500_objects_returns_each_exactly_once() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("page").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let total = 2500;
    futures::future::try_join_all((0..total).collect::<Vec<_>>().chunks(100).map(|chunk| {
        let api = api.clone();
        let names: Vec<String> = chunk.iter().map(|i| format!("cm-{i:05}")).collect();
        async move {
            for n in names {
                api.create(&PostParams::default(), &cm(&n)).await?;
            }
            Ok::<_, kube::Error>(())
        }
    }))
    .await
    .unwrap();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().limit(97);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 97);
        for item in page.items {
            *seen.entry(item.metadata.name.unwrap()).or_default() += 1;
        }
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    assert_eq!(seen.len(), total, "distinct objects listed");
    assert!(seen.values().all(|n| *n == 1), "an object was listed twice");
    assert_eq!(pages, total.div_ceil(97));
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_propagation_policies_leave_the_finalizers_kube_apiserver_sets() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("prop").await.unwrap();
    let api: Api<ReplicaSet> = Api::namespaced(c.client.clone(), &ns);
    for name in ["fg", "orphan", "bg"] {
        api.create(&PostParams::default(), &rs(name)).await.unwrap();
    }
    let fg = api
        .delete("fg", &DeleteParams::foreground())
        .await
        .unwrap()
        .left()
        .expect("foreground keeps the object");
    assert_eq!(
        fg.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    assert!(fg.metadata.deletion_timestamp.is_some());
    assert_eq!(fg.metadata.generation, Some(2), "deletion bumps generation");
    let or = api
        .delete("orphan", &DeleteParams::orphan())
        .await
        .unwrap()
        .left()
        .expect("orphan keeps the object");
    assert_eq!(or.metadata.finalizers, Some(vec!["orphan".to_string()]));
    let bg = api.delete("bg", &DeleteParams::background()).await.unwrap();
    assert!(
        bg.is_right(),
        "background deletion of an object without finalizers is immediate"
    );
    assert_eq!(api_code(&api.get("bg").await), Some(404));

    // An object held by a finalizer stays until the finalizer is removed.
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let mut held = cm("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();
    let deleting = cms
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let add = cms
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}),
            ),
        )
        .await;
    assert_eq!(
        api_code(&add),
        Some(422),
        "no new finalizers while deleting: {add:?}"
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_code(&cms.get("held").await), Some(404));

    // DeleteOptions policy must be one of the three.
    let policy = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    let gone = api.delete("fg", &policy).await.unwrap();
    assert!(
        gone.is_left(),
        "a second foreground delete keeps the object until the GC acts"
    );
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_status_objects_with_upstream_reasons() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("err").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let Err(kube::Error::Api(e)) = api.get("nope").await else {
        panic!()
    };
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (404, "NotFound", "configmaps \"nope\" not found")
    );
    api.create(&PostParams::default(), &cm("one"))
        .await
        .unwrap();
    let Err(kube::Error::Api(e)) = api.create(&PostParams::default(), &cm("one")).await else {
        panic!()
    };
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    let Err(kube::Error::Api(e)) = api.create(&PostParams::default(), &cm("Bad_Name")).await else {
        panic!()
    };
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .contains("metadata.name: Invalid value: \"Bad_Name\""),
        "{}",
        e.message
    );
    let Err(kube::Error::Api(e)) = api.list(&ListParams::default().labels("a in (b")).await else {
        panic!()
    };
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    // Unknown fields: Strict rejects, the default warns and drops.
    let raw = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "strict"}, "bogus": 1});
    let dynapi: Api<kube::api::DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        &ns,
        &kube::discovery::ApiResource::erase::<ConfigMap>(&()),
    );
    let obj: kube::api::DynamicObject = serde_json::from_value(raw.clone()).unwrap();
    let req = http::Request::post(format!(
        "/api/v1/namespaces/{ns}/configmaps?fieldValidation=Strict"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&raw).unwrap())
    .unwrap();
    let Err(kube::Error::Api(e)) = c.client.request::<serde_json::Value>(req).await else {
        panic!()
    };
    assert_eq!(e.code, 400);
    assert!(
        e.message.contains("unknown field \"bogus\""),
        "{}",
        e.message
    );
    for (body, what) in [
        (b"{not json".to_vec(), "malformed JSON"),
        (br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}"#.to_vec(), "a Secret sent to configmaps"),
        (br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n","namespace":"elsewhere"}}"#.to_vec(), "another namespace in the body"),
    ] {
        let req = http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps"))
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let r = c.client.request::<serde_json::Value>(req).await;
        let Err(kube::Error::Api(e)) = r else { panic!("{what} accepted: {r:?}") };
        assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"), "{what}: {}", e.message);
    }
    let kept = dynapi.create(&PostParams::default(), &obj).await.unwrap();
    assert!(kept.data.get("bogus").is_none(), "unknown field dropped");
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_status_and_scale_subresources() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("gen").await.unwrap();
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), &ns);
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}))
    .unwrap();
    let d = api.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(spec.progress_deadline_seconds, Some(600));
    assert_eq!(
        spec.strategy.as_ref().unwrap().type_.as_deref(),
        Some("RollingUpdate")
    );
    let pp = PatchParams::default();
    let l = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        l.metadata.generation,
        Some(1),
        "a metadata change keeps generation"
    );
    let s = api.patch_status("web", &pp, &Patch::Merge(json!({"status": {"replicas": 1, "observedGeneration": 1}, "spec": {"replicas": 9}}))).await.unwrap();
    assert_eq!(
        (s.metadata.generation, s.spec.unwrap().replicas),
        (Some(1), Some(1)),
        "status ignores spec"
    );
    let m = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"status": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(
        m.status.unwrap().replicas,
        Some(1),
        "the main resource ignores status"
    );
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    api.patch_scale("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    let d = api.get("web").await.unwrap();
    assert_eq!(
        (d.metadata.generation, d.spec.unwrap().replicas),
        (Some(2), Some(3))
    );
    // A Deployment's annotations are copied to its ReplicaSets: changing them bumps
    // generation (labels do not, above); through /status they do not.
    let a = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"annotations": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        a.metadata.generation,
        Some(3),
        "an annotation change bumps generation"
    );
    let st = api
        .patch_status(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"annotations": {"x": "z"}}})),
        )
        .await
        .unwrap();
    assert_eq!(st.metadata.generation, Some(3), "not through /status");
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_lifecycle_and_pod_admission() {
    let c = TestCluster::start().await.unwrap();
    let nss: Api<Namespace> = Api::all(c.client.clone());
    let name = format!("life-{}", kube_sim::api::random_suffix(5));
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &name);
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})).unwrap();
    if c.sim.is_some() {
        // Without a serviceaccount controller, the namespace has no default ServiceAccount yet.
        let r = pods.create(&PostParams::default(), &pod).await;
        assert_eq!(api_code(&r), Some(403), "{r:?}");
    }
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(c.client.clone(), &name);
    let _ = sas
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap(),
        )
        .await;
    let p = wait_for("pod admission", Duration::from_secs(30), || async {
        Ok(pods.create(&PostParams::default(), &pod).await.ok())
    })
    .await
    .unwrap();
    let spec = p.spec.unwrap();
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    assert!(spec
        .volumes
        .unwrap_or_default()
        .iter()
        .any(|v| v.name.starts_with("kube-api-access-")));
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));

    let gone = nss
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(gone.status.unwrap().phase.as_deref(), Some("Terminating"));
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &name);
    let r = cms.create(&PostParams::default(), &cm("late")).await;
    let Err(kube::Error::Api(e)) = r else {
        panic!("created in a terminating namespace")
    };
    assert_eq!(e.code, 403);
    assert!(
        e.message.contains("because it is being terminated"),
        "{}",
        e.message
    );
    let r = nss.delete("default", &DeleteParams::default()).await;
    assert_eq!(
        api_code(&r),
        Some(403),
        "the default namespace may not be deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_binding_graceful_deletion_and_eviction() {
    let c = TestCluster::start().await.unwrap();
    let Some(_) = c.sim_only("binding pods to a made-up node") else {
        return;
    };
    let ns = c.namespace("pods").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    let pod = |n: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": n, "labels": {"app": "p"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})).unwrap()
    };
    pods.create(&PostParams::default(), &pod("p1"))
        .await
        .unwrap();
    let bind = |node: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"}, "target": {"kind": "Node", "name": node}});
    // 429 is the answer under test: no client-side retries.
    let raw_client = c.client_without_retries().await.unwrap();
    let post = |body: serde_json::Value, sub: &str, name: &str| {
        let req = http::Request::post(format!("/api/v1/namespaces/{ns}/pods/{name}/{sub}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        let client = raw_client.clone();
        async move { client.request::<serde_json::Value>(req).await }
    };
    post(bind("n1"), "binding", "p1").await.unwrap();
    let again = post(bind("n2"), "binding", "p1").await;
    assert_eq!(api_code(&again), Some(409));
    let p = pods.get("p1").await.unwrap();
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("n1"));
    // A bound pod is deleted gracefully: it stays with a deletionTimestamp for the kubelet.
    let d = pods
        .delete("p1", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(d.metadata.deletion_grace_period_seconds, Some(30));
    pods.delete(
        "p1",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(api_code(&pods.get("p1").await), Some(404));
    // An unbound pod goes at once.
    pods.create(&PostParams::default(), &pod("p2"))
        .await
        .unwrap();
    pods.delete("p2", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(&pods.get("p2").await), Some(404));
    // Eviction is refused while the PDB allows no disruption.
    pods.create(&PostParams::default(), &pod("p3"))
        .await
        .unwrap();
    pods.patch_status(
        "p3",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(c.client.clone(), &ns);
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "pdb"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "p"}}}}))
        .unwrap(),
    )
    .await
    .unwrap();
    pdbs.patch_status(
        "pdb",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"observedGeneration": 1,
        "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})),
    )
    .await
    .unwrap();
    let ev = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p3"}});
    let r = post(ev.clone(), "eviction", "p3").await;
    let Err(kube::Error::Api(e)) = r else {
        panic!("eviction allowed: {r:?}")
    };
    assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
    pdbs.patch_status(
        "pdb",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"disruptionsAllowed": 1}})),
    )
    .await
    .unwrap();
    post(ev, "eviction", "p3").await.unwrap();
    assert_eq!(api_code(&pods.get("p3").await), Some(404));
    assert_eq!(
        pdbs.get("pdb")
            .await
            .unwrap()
            .status
            .unwrap()
            .disruptions_allowed,
        0
    );
}

/// A status write to a built-in kind keeps the stored spec but takes the request's
/// metadata (kube-apiserver's status strategies reset only the spec, plus labels for
/// Deployments): the deployment controller records `deployment.kubernetes.io/revision`
/// through deployments/status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_keep_the_spec_and_take_annotations() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("status-meta").await.unwrap();
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), &ns);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d", "labels": {"app": "d"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}))
    .unwrap();
    let mut stored = api
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    stored
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("deployment.kubernetes.io/revision".into(), "1".into());
    stored.metadata.labels = Some([("app".to_string(), "changed".to_string())].into());
    stored.spec.as_mut().unwrap().replicas = Some(7);
    stored.status = Some(serde_json::from_value(json!({"observedGeneration": 1})).unwrap());
    let written = api
        .replace_status("d", &PostParams::default(), &stored)
        .await
        .unwrap();
    assert_eq!(
        written.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "1",
        "annotations come from the request"
    );
    assert_eq!(
        written.metadata.labels.unwrap()["app"],
        "d",
        "a Deployment's labels are kept"
    );
    assert_eq!(written.spec.unwrap().replicas, Some(0), "the spec is kept");
    assert_eq!(written.status.unwrap().observed_generation, Some(1));
    c.cleanup().await;
}

/// The entry of `manager` (and `subresource`) in an object's managedFields.
fn entry<'a>(
    meta: &'a kube::api::ObjectMeta,
    manager: &str,
    subresource: Option<&str>,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry> {
    meta.managed_fields
        .as_ref()?
        .iter()
        .find(|e| e.manager.as_deref() == Some(manager) && e.subresource.as_deref() == subresource)
}

fn fields(
    e: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry,
) -> serde_json::Value {
    e.fields_v1
        .as_ref()
        .map(|f| f.0.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_ownership_is_recorded_per_manager() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("managed").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), &ns);
    let pp = |m: &str| PostParams {
        field_manager: Some(m.into()),
        ..Default::default()
    };
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d", "labels": {"app": "d"}},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}))
    .unwrap();
    let created = deployments
        .create(&pp("creator"), &deployment)
        .await
        .unwrap();
    let e = entry(&created.metadata, "creator", None).expect("the creator's entry");
    assert_eq!(e.operation.as_deref(), Some("Update"));
    assert_eq!(e.api_version.as_deref(), Some("apps/v1"));
    assert!(e.time.is_some());
    let f = fields(e);
    // Defaults are the creator's; a selector is one atomic leaf; a container is keyed by name;
    // struct fields Go always writes (spec, template, strategy) have no "." of their own.
    assert_eq!(f["f:spec"]["f:replicas"], json!({}));
    assert_eq!(f["f:spec"]["f:revisionHistoryLimit"], json!({}));
    assert_eq!(f["f:spec"]["f:selector"], json!({}));
    assert_eq!(f["f:metadata"]["f:labels"], json!({".": {}, "f:app": {}}));
    assert!(f["f:spec"]["f:template"].get(".").is_none());
    assert!(f["f:spec"]["f:strategy"].get(".").is_none());
    assert_eq!(f["f:spec"]["f:strategy"]["f:rollingUpdate"]["."], json!({}));
    let container = &f["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
    assert_eq!(container["."], json!({}));
    assert_eq!(container["f:image"], json!({}));
    assert_eq!(container["f:imagePullPolicy"], json!({}));
    assert!(
        f.get("f:status").is_none(),
        "the main resource owns no status"
    );

    // A status write is its own entry, owning only status.
    let mut s = created.clone();
    s.metadata.managed_fields = None;
    s.status =
        Some(serde_json::from_value(json!({"observedGeneration": 1, "replicas": 2})).unwrap());
    let written = deployments
        .replace_status("d", &pp("status-writer"), &s)
        .await
        .unwrap();
    let e = entry(&written.metadata, "status-writer", Some("status")).expect("a status entry");
    assert_eq!(
        fields(e),
        json!({"f:status": {"f:observedGeneration": {}, "f:replicas": {}}})
    );

    // /scale: the scaler owns the replicas, without a time; the creator no longer does.
    let scaled = deployments
        .patch_scale(
            "d",
            &PatchParams {
                field_manager: Some("scaler".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(3));
    let d = deployments.get("d").await.unwrap();
    let e = entry(&d.metadata, "scaler", Some("scale")).expect("a scale entry");
    assert_eq!(fields(e), json!({"f:spec": {"f:replicas": {}}}));
    assert!(e.time.is_none());
    let creator = fields(entry(&d.metadata, "creator", None).unwrap());
    assert!(creator["f:spec"].get("f:replicas").is_none());

    // Server-side apply: the applier owns its configuration's fields; another applier
    // changing one of them conflicts; forcing takes it over.
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let apply = |m: &str, force: bool| {
        let p = PatchParams::apply(m);
        if force {
            p.force()
        } else {
            p
        }
    };
    let cfg = |data: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data}),
        )
    };
    let applied = cms
        .patch("ssa", &apply("a", false), &cfg(json!({"k": "v", "j": "1"})))
        .await
        .unwrap();
    let e = entry(&applied.metadata, "a", None).unwrap();
    assert_eq!(e.operation.as_deref(), Some("Apply"));
    assert_eq!(fields(e), json!({"f:data": {"f:j": {}, "f:k": {}}}));
    let r = cms
        .patch("ssa", &apply("b", false), &cfg(json!({"k": "w"})))
        .await;
    match r {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
            assert_eq!(
                s.message,
                "Apply failed with 1 conflict: conflict with \"a\": .data.k"
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // The same value is no conflict: both own it.
    let shared = cms
        .patch("ssa", &apply("b", false), &cfg(json!({"k": "v"})))
        .await
        .unwrap();
    assert_eq!(
        fields(entry(&shared.metadata, "b", None).unwrap()),
        json!({"f:data": {"f:k": {}}})
    );
    let forced = cms
        .patch("ssa", &apply("b", true), &cfg(json!({"k": "w"})))
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["k"], "w");
    assert_eq!(
        fields(entry(&forced.metadata, "a", None).unwrap()),
        json!({"f:data": {"f:j": {}}}),
        "a lost k to the forced apply"
    );
    // A field its applier stops setting, that nobody else owns, goes.
    let pruned = cms
        .patch("ssa", &apply("a", false), &cfg(json!({})))
        .await
        .unwrap();
    let data = pruned.data.clone().unwrap_or_default();
    assert!(!data.contains_key("j"), "j is pruned: {data:?}");
    assert_eq!(data["k"], "w", "k is b's and stays");
    // An update by a third manager takes the field it changes from the applier.
    let mut edited = pruned.clone();
    edited
        .data
        .get_or_insert_with(Default::default)
        .insert("k".into(), "x".into());
    let edited = cms.replace("ssa", &pp("editor"), &edited).await.unwrap();
    assert_eq!(
        fields(entry(&edited.metadata, "editor", None).unwrap()),
        json!({"f:data": {"f:k": {}}})
    );
    assert!(
        entry(&edited.metadata, "b", None).is_none(),
        "b owned nothing else"
    );
    c.cleanup().await;
}

/// A pod's grace period holds it, whatever updates say: an update that leaves a pod being
/// deleted without finalizers removes it only once no grace period runs (kube-apiserver's
/// ShouldDeleteDuringUpdate), and a second deletion may only shorten the period, counted
/// from the first request (BeforeDelete), zero included even while a finalizer holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_grace_period_holds_it_through_updates_and_only_shortens() {
    let c = TestCluster::start().await.unwrap();
    let Some(_) = c.sim_only("binding pods to a made-up node") else {
        return;
    };
    let ns = c.namespace("grace").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    let create_bound = |name: &'static str, finalizers: serde_json::Value| {
        let pods = pods.clone();
        let client = c.client.clone();
        let ns = ns.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "finalizers": finalizers},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                 "target": {"kind": "Node", "name": "ghost-node"}});
            let req = http::Request::post(format!("/api/v1/namespaces/{ns}/pods/{name}/binding"))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&binding).unwrap())
                .unwrap();
            client.request::<serde_json::Value>(req).await.unwrap();
        }
    };
    let delete = |name: &'static str, grace: Option<u32>| {
        let pods = pods.clone();
        async move {
            pods.delete(
                name,
                &DeleteParams {
                    grace_period_seconds: grace,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }
    };
    let marks = |pod: &Pod| {
        (
            pod.metadata.deletion_timestamp.as_ref().map(|t| t.0),
            pod.metadata.deletion_grace_period_seconds,
        )
    };

    // Without finalizers: a status update during the grace period leaves the pod.
    create_bound("plain", json!([])).await;
    delete("plain", None).await;
    pods.patch_status(
        "plain",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    assert_eq!(marks(&pods.get("plain").await.unwrap()).1, Some(30));
    delete("plain", Some(0)).await;
    assert_eq!(api_code(&pods.get("plain").await), Some(404));

    // With a finalizer: shortened to 10 s, counted from the first request; a longer period
    // changes nothing; removing the finalizer during the grace period leaves it.
    create_bound("held", json!(["example.com/hold"])).await;
    delete("held", None).await;
    let (first_at, _) = marks(&pods.get("held").await.unwrap());
    let first_at = first_at.expect("a deletionTimestamp");
    delete("held", Some(10)).await;
    let (at, grace) = marks(&pods.get("held").await.unwrap());
    assert_eq!(grace, Some(10));
    assert_eq!(
        at.map(|at| (first_at - at).get_seconds()),
        Some(20),
        "moved 20 s earlier"
    );
    delete("held", Some(20)).await;
    assert_eq!(marks(&pods.get("held").await.unwrap()).1, Some(10));
    // Cut to zero: it stays while the finalizer holds it, and goes with the finalizer.
    delete("held", Some(0)).await;
    assert_eq!(marks(&pods.get("held").await.unwrap()).1, Some(0));
    pods.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_code(&pods.get("held").await), Some(404));

    // A finalizer removed while the grace period runs: the pod stays until it is cut.
    create_bound("released", json!(["example.com/hold"])).await;
    delete("released", None).await;
    pods.patch(
        "released",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(marks(&pods.get("released").await.unwrap()).1, Some(30));
    delete("released", Some(0)).await;
    assert_eq!(api_code(&pods.get("released").await), Some(404));
}

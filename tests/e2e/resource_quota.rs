//! End-to-end test of the resourcequota controller run by `rkcm launcher` (work order WO-Q,
//! checks 1-5 and 10): the test cluster (kube-sim with simulated nodes, or
//! RKCM_TEST_KUBECONFIG's real cluster), the real `rkcm launcher` (with its informer-server and worker)
//! (`--resource-quota-sync-period=10s`) as separate processes, every change made with
//! kubectl and every check read back from the API server.
//!
//! The worker runs the quota controller with what its pods need: the deployment and
//! replicaset controllers make them, the garbage collector removes a scaled-down
//! ReplicaSet's pods' owners' leftovers, serviceaccount and root-ca-cert-publisher let them
//! start, node-lifecycle lifts the nodes' startup taint. A custom resource
//! (`widgets.example.com`) exists before the worker starts, so its monitor is there from
//! the first discovery. kube-sim charges creations at admission, as kube-apiserver does;
//! the controller computes what is there and replenishes after deletions, finished pods
//! and Service type changes.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::Api;
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::json;

const CONTROLLERS: &str =
    "resourcequota,deployment,replicaset,garbagecollector,serviceaccount,root-ca-cert-publisher,nodelifecycle";

const WIDGET_CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "widgets.example.com"},
 "spec": {"group": "example.com", "scope": "Namespaced",
  "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
  "versions": [{"name": "v1", "served": true, "storage": true,
   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;

suite_stack! {
    /// The cluster (with the CRD), its nodes and the launcher.
    struct Stack(LauncherStack);
}

type Status = (BTreeMap<String, String>, BTreeMap<String, String>);

impl Stack {
    async fn start() -> Stack {
        let cluster = TestCluster::start().await.expect("the test cluster");
        cluster
            .kubectl_stdin(&["apply", "-f", "-"], WIDGET_CRD)
            .await
            .expect("the Widget CRD");
        cluster
            .kubectl_ok(&[
                "wait",
                "--for=condition=Established",
                "crd/widgets.example.com",
                "--timeout=30s",
            ])
            .await
            .expect("the CRD established");
        Stack(
            LauncherStack::start_on(
                cluster,
                &[
                    "--controllers",
                    CONTROLLERS,
                    "--resource-quota-sync-period=10s",
                ],
            )
            .await,
        )
    }

    /// A quota's (status.hard, status.used) as strings.
    async fn status(&self, ns: &str, name: &str) -> anyhow::Result<Status> {
        let quota = Api::<ResourceQuota>::namespaced(self.cluster.client.clone(), ns)
            .get(name)
            .await?;
        let strings = |list: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| {
            list.into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect::<BTreeMap<_, _>>()
        };
        let status = quota.status.as_ref();
        Ok((
            strings(status.and_then(|s| s.hard.as_ref())),
            strings(status.and_then(|s| s.used.as_ref())),
        ))
    }

    /// Waits at most `within` until the quota's status passes `check` (which says what is
    /// wrong otherwise); prints how long it took.
    async fn wait_status(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        within: Duration,
        check: impl Fn(&Status) -> Result<(), String>,
    ) -> Status {
        let started = Instant::now();
        let check = &check;
        let result = wait_for(&format!("quota {name}: {what}"), within, || async move {
            let status = self.status(ns, name).await?;
            match check(&status) {
                Ok(()) => Ok(Some(status)),
                Err(why) => anyhow::bail!("{why}; hard {:?}, used {:?}", status.0, status.1),
            }
        })
        .await;
        match result {
            Ok(status) => {
                println!("quota {name}: {what} after {:?}", started.elapsed());
                status
            }
            Err(error) => self.fail(format!("{error:#}")),
        }
    }
}

/// `used[name] == value`.
fn used_is(status: &Status, wanted: &[(&str, &str)]) -> Result<(), String> {
    for (name, value) in wanted {
        match status.1.get(*name) {
            Some(v) if v == value => {}
            other => return Err(format!("used {name} is {other:?}, not {value}")),
        }
    }
    Ok(())
}

fn quota(name: &str, spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec})
}

fn pod(name: &str, spec: serde_json::Value) -> serde_json::Value {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "registry.k8s.io/pause:3.9",
        "resources": spec.get("resources").cloned().unwrap_or(json!({}))}]);
    if let Some(map) = spec.as_object_mut() {
        map.remove("resources");
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_quota_status_scopes_replenishment_and_admission() {
    let s = Stack::start().await;
    let started = Instant::now();

    // 1. A new quota: hard and a usage for every key within 2 s, counted by the
    // controller (a Widget made before the quota is there only for it to count).
    let ns = s.namespace_with_account("rq").await;
    s.apply_in(
        &ns,
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}}),
    )
    .await;
    let hard = json!({"pods": "10", "requests.cpu": "2", "limits.memory": "4Gi",
        "count/deployments.apps": "2", "services.nodeports": "2", "configmaps": "5",
        "count/widgets.example.com": "3"});
    s.apply_in(&ns, quota("q", json!({"hard": hard}))).await;
    s.wait_status(
        &ns,
        "q",
        "hard = spec.hard and every key used",
        Duration::from_secs(2),
        |status| {
            let wanted: BTreeMap<String, String> =
                serde_json::from_value(hard.clone()).unwrap_or_default();
            if status.0 != wanted {
                return Err("status.hard is not spec.hard".into());
            }
            if let Some(missing) = wanted.keys().find(|k| !status.1.contains_key(*k)) {
                return Err(format!("no usage for {missing}"));
            }
            used_is(
                status,
                &[
                    ("pods", "0"),
                    ("requests.cpu", "0"),
                    ("count/widgets.example.com", "1"),
                ],
            )
        },
    )
    .await;

    // 2. A Deployment's pods, then a scale-down.
    s.apply_in(
        &ns,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": "200m"}, "limits": {"memory": "256Mi"}}}]}}}}),
    )
    .await;
    s.wait_status(
        &ns,
        "q",
        "3 pods of 200m and 256Mi",
        Duration::from_secs(15),
        |status| {
            used_is(
                status,
                &[
                    ("pods", "3"),
                    ("requests.cpu", "600m"),
                    ("limits.memory", "768Mi"),
                    ("count/deployments.apps", "1"),
                ],
            )
        },
    )
    .await;
    // Another Widget is counted, and a deleted one no more.
    s.apply_in(
        &ns,
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}}),
    )
    .await;
    s.wait_status(&ns, "q", "two Widgets", Duration::from_secs(5), |status| {
        used_is(status, &[("count/widgets.example.com", "2")])
    })
    .await;
    s.kubectl(&["delete", "widgets.example.com", "w1", "-n", &ns])
        .await;
    s.wait_status(
        &ns,
        "q",
        "one Widget after a deletion",
        Duration::from_secs(5),
        |status| used_is(status, &[("count/widgets.example.com", "1")]),
    )
    .await;
    s.kubectl(&["scale", "deployment/web", "-n", &ns, "--replicas=1"])
        .await;
    s.wait_status(
        &ns,
        "q",
        "1 pod after the scale-down",
        Duration::from_secs(5),
        |status| {
            used_is(
                status,
                &[
                    ("pods", "1"),
                    ("requests.cpu", "200m"),
                    ("limits.memory", "256Mi"),
                ],
            )
        },
    )
    .await;

    // 5. A NodePort Service, then ClusterIP; a hard key removed.
    s.apply_in(
        &ns,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "np"},
            "spec": {"type": "NodePort", "selector": {"app": "web"},
                "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}}),
    )
    .await;
    s.wait_status(&ns, "q", "2 node ports", Duration::from_secs(5), |status| {
        used_is(status, &[("services.nodeports", "2")])
    })
    .await;
    s.merge_patch("service", Some(&ns), "np", &json!({"spec": {"type": "ClusterIP", "ports": [{"name": "a", "port": 80, "nodePort": null}, {"name": "b", "port": 81, "nodePort": null}]}}))
    .await;
    s.wait_status(
        &ns,
        "q",
        "no node port after the switch to ClusterIP",
        Duration::from_secs(3),
        |status| used_is(status, &[("services.nodeports", "0")]),
    )
    .await;
    s.kubectl(&[
        "patch",
        "resourcequota",
        "q",
        "-n",
        &ns,
        "--type=json",
        "-p",
        r#"[{"op": "remove", "path": "/spec/hard/configmaps"}]"#,
    ])
    .await;
    s.wait_status(
        &ns,
        "q",
        "configmaps gone from hard and used",
        Duration::from_secs(2),
        |status| {
            if status.0.contains_key("configmaps") || status.1.contains_key("configmaps") {
                Err("configmaps still there".into())
            } else {
                Ok(())
            }
        },
    )
    .await;

    // 3. A finished pod leaves pods and requests.cpu, not count/pods.
    let finish = s.namespace_with_account("rq-finish").await;
    s.apply_in(
        &finish,
        quota(
            "done",
            json!({"hard": {"pods": "5", "requests.cpu": "1", "count/pods": "5"}}),
        ),
    )
    .await;
    s.wait_status(
        &finish,
        "done",
        "computed",
        Duration::from_secs(5),
        |status| used_is(status, &[("pods", "0"), ("count/pods", "0")]),
    )
    .await;
    let mut finished = pod(
        "once",
        json!({"restartPolicy": "Never", "resources": {"requests": {"cpu": "100m"}}}),
    );
    finished["metadata"]["annotations"] = json!({"sim.rkcm.io/exit-after": "1s"});
    // A real kubelet runs `true`.
    finished["spec"]["containers"][0]["image"] = json!("busybox:1.36");
    finished["spec"]["containers"][0]["command"] = json!(["true"]);
    s.apply_in(&finish, finished).await;
    s.wait_status(
        &finish,
        "done",
        "the running pod charged",
        Duration::from_secs(5),
        |status| used_is(status, &[("count/pods", "1")]),
    )
    .await;
    s.wait_status(
        &finish,
        "done",
        "the Succeeded pod only in count/pods",
        Duration::from_secs(30),
        |status| {
            used_is(
                status,
                &[("pods", "0"), ("requests.cpu", "0"), ("count/pods", "1")],
            )
        },
    )
    .await;

    // 4. Scopes: best effort, not terminating, priority class high.
    let scoped = s.namespace_with_account("rq-scopes").await;
    s.apply(
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 1000}),
    )
    .await;
    // The pods first: what the quotas show is the controller's count, not admission's.
    let cpu = json!({"requests": {"cpu": "10m"}});
    s.apply_in(&scoped, pod("plain", json!({}))).await;
    s.apply_in(
        &scoped,
        pod(
            "deadline",
            json!({"activeDeadlineSeconds": 3600, "resources": cpu}),
        ),
    )
    .await;
    s.apply_in(
        &scoped,
        pod(
            "important",
            json!({"priorityClassName": "high", "resources": cpu}),
        ),
    )
    .await;
    s.apply_in(
        &scoped,
        quota(
            "best-effort",
            json!({"hard": {"pods": "10"}, "scopes": ["BestEffort"]}),
        ),
    )
    .await;
    s.apply_in(
        &scoped,
        quota(
            "not-terminating",
            json!({"hard": {"pods": "10"}, "scopes": ["NotTerminating"]}),
        ),
    )
    .await;
    s.apply_in(
        &scoped,
        quota(
            "high",
            json!({"hard": {"pods": "10"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
        ),
    )
    .await;
    for (name, count) in [
        ("best-effort", "1"),
        ("not-terminating", "2"),
        ("high", "1"),
    ] {
        s.wait_status(
            &scoped,
            name,
            "only its pods",
            Duration::from_secs(5),
            |status| used_is(status, &[("pods", count)]),
        )
        .await;
    }
    // A pod of the scope is charged at admission; one outside it is not.
    s.apply_in(&scoped, pod("plain-2", json!({}))).await;
    s.wait_status(
        &scoped,
        "best-effort",
        "another best-effort pod",
        Duration::from_secs(5),
        |status| used_is(status, &[("pods", "2")]),
    )
    .await;
    let (_, used) = match s.status(&scoped, "high").await {
        Ok(status) => status,
        Err(error) => s.fail(format!("{error:#}")),
    };
    if used.get("pods").map(String::as_str) != Some("1") {
        s.fail(format!(
            "the high quota counted a pod of another class: {used:?}"
        ));
    }

    // 10. Over quota: the API server refuses the 4th pod.
    let over = s.namespace_with_account("rq-over").await;
    s.apply_in(&over, quota("three", json!({"hard": {"pods": "3"}})))
        .await;
    s.wait_status(
        &over,
        "three",
        "computed",
        Duration::from_secs(5),
        |status| used_is(status, &[("pods", "0")]),
    )
    .await;
    for name in ["p1", "p2", "p3"] {
        s.apply_in(&over, pod(name, json!({}))).await;
    }
    let refused = s
        .cluster
        .kubectl_stdin(
            &["create", "-n", &over, "-f", "-"],
            &pod("p4", json!({})).to_string(),
        )
        .await;
    match refused {
        Ok(out) => s.fail(format!("the 4th pod was created: {out}")),
        Err(error) => {
            let message = format!("{error:#}");
            let wanted = "pods \"p4\" is forbidden: exceeded quota: three, requested: pods=1, used: pods=3, limited: pods=3";
            if !message.contains("Error from server (Forbidden)") || !message.contains(wanted) {
                s.fail(format!(
                    "expected a Forbidden refusal with {wanted:?}, got: {message}"
                ));
            }
            println!("the 4th pod was refused: {}", message.trim());
        }
    }
    s.wait_status(
        &over,
        "three",
        "3 pods",
        Duration::from_secs(15),
        |status| used_is(status, &[("pods", "3")]),
    )
    .await;

    println!("all checks passed in {:?}", started.elapsed());
    s.cluster.cleanup().await;
}

//! The real kubectl against the cluster: the commands the README lists as verified.
//! Each scenario checks what kubectl printed and what the server then holds.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, Patch, PatchParams, PostParams};
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::{json, Value};

fn deployment_yaml(ns: &str, replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: c\n        image: {image}\n        env:\n        - name: A\n          value: a\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_patch_scale_label_annotate_set_image_delete() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("kctl").await.unwrap();
    let out = c
        .kubectl_stdin(&["apply", "-f", "-"], &deployment_yaml(&ns, 2, "nginx:1"))
        .await
        .unwrap();
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let out = c
        .kubectl_stdin(&["apply", "-f", "-"], &deployment_yaml(&ns, 2, "nginx:1"))
        .await
        .unwrap();
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");
    let out = c
        .kubectl_stdin(&["apply", "-f", "-"], &deployment_yaml(&ns, 4, "nginx:2"))
        .await
        .unwrap();
    assert!(out.contains("deployment.apps/web configured"), "{out}");

    let get = |args: &'static [&'static str]| {
        let c = &c;
        let ns = ns.clone();
        async move {
            let mut a = vec!["-n", ns.as_str()];
            a.extend_from_slice(args);
            c.kubectl_ok(&a).await.unwrap()
        }
    };
    let d: Value =
        serde_json::from_str(&get(&["get", "deploy", "web", "-o", "json"]).await).unwrap();
    assert_eq!(d["spec"]["replicas"], 4);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    assert_eq!(d["metadata"]["generation"], 2);
    assert!(
        d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let table = get(&["get", "deploy"]).await;
    assert!(table.contains("NAME") && table.contains("web"), "{table}");

    assert!(get(&["scale", "deploy", "web", "--replicas=3"])
        .await
        .contains("scaled"));
    assert!(get(&["label", "deploy", "web", "tier=front"])
        .await
        .contains("labeled"));
    assert!(get(&["annotate", "deploy", "web", "note=hi"])
        .await
        .contains("annotated"));
    assert!(get(&["set", "image", "deploy/web", "c=nginx:3"])
        .await
        .contains("image updated"));
    assert!(get(&[
        "patch",
        "deploy",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"minReadySeconds":5}}"#
    ])
    .await
    .contains("patched"));
    assert!(get(&[
        "patch",
        "deploy",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/revisionHistoryLimit","value":3}]"#
    ])
    .await
    .contains("patched"));
    assert!(get(&["patch", "deploy", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"c","env":[{"name":"B","value":"b"}]}]}}}}"#]).await.contains("patched"));
    let d: Value =
        serde_json::from_str(&get(&["get", "deploy", "web", "-o", "json"]).await).unwrap();
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["labels"]["tier"], "front");
    assert_eq!(d["metadata"]["annotations"]["note"], "hi");
    assert_eq!(container["image"], "nginx:3");
    assert_eq!(d["spec"]["minReadySeconds"], 5);
    assert_eq!(d["spec"]["revisionHistoryLimit"], 3);
    let env: Vec<&str> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(env, vec!["B", "A"], "strategic merge merged env by name");

    let out = get(&[
        "delete",
        "deploy",
        "web",
        "--cascade=foreground",
        "--wait=false",
    ])
    .await;
    assert!(out.contains("deleted"), "{out}");
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), &ns);
    let held = api.get_opt("web").await.unwrap();
    if let Some(h) = held {
        assert!(h.metadata.deletion_timestamp.is_some());
    }
    let out = c.kubectl_ok(&["api-resources"]).await.unwrap();
    for r in [
        "deployments",
        "pods",
        "leases",
        "customresourcedefinitions",
        "endpointslices",
    ] {
        assert!(out.contains(r), "api-resources lacks {r}");
    }
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_wait_and_get_watch() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("kwait").await.unwrap();
    let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n  namespace: {ns}\ndata:\n  k: v\n");
    let out = c.kubectl_stdin(&["create", "-f", "-"], &cm).await.unwrap();
    assert!(out.contains("configmap/one created"), "{out}");
    let again = c.kubectl_stdin(&["create", "-f", "-"], &cm).await;
    assert!(again.unwrap_err().to_string().contains("AlreadyExists"));

    // kubectl get -w prints objects as they appear.
    let mut child = tokio::process::Command::new("kubectl")
        .args(["-n", &ns, "get", "configmaps", "-w", "-o", "name"])
        .env("KUBECONFIG", &c.kubeconfig)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.as_deref(), Some("configmap/one"));
    c.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "two",
        "--from-literal=a=b",
    ])
    .await
    .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.as_deref(), Some("configmap/two"));
    child.kill().await.unwrap();

    // kubectl wait: for a condition set later, and for deletion.
    let job = c
        .kubectl_ok(&["-n", &ns, "create", "job", "j", "--image=busybox"])
        .await
        .unwrap();
    assert!(job.contains("job.batch/j created"), "{job}");
    let waiter = c.kubectl_background(&[
        "-n",
        &ns,
        "wait",
        "--for=condition=complete",
        "job/j",
        "--timeout=30s",
    ]);
    {
        // No job controller need be running: complete the Job the way the controller would
        // (a finished Job's conditions are terminal, so a real controller agrees).
        let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(c.client.clone(), &ns);
        let now = "2026-01-01T00:00:00Z";
        jobs.patch_status("j", &PatchParams::default(), &Patch::Merge(json!({"status": {
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": now, "lastTransitionTime": now},
                           {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}],
            "succeeded": 1, "startTime": now, "completionTime": now}}))).await.unwrap();
    }
    let out = waiter.await.unwrap().unwrap();
    assert!(
        out.status.success(),
        "kubectl wait: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));
    c.kubectl_ok(&["-n", &ns, "delete", "configmap", "two", "--wait=false"])
        .await
        .unwrap();
    c.kubectl_ok(&[
        "-n",
        &ns,
        "wait",
        "--for=delete",
        "configmap/two",
        "--timeout=20s",
    ])
    .await
    .unwrap();
    c.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_status_history_undo_pause_resume() {
    let c = TestCluster::start().await.unwrap();
    let Some(_) = c.sim_only("playing the deployment controller's part by hand") else {
        return;
    };
    let ns = c.namespace("roll").await.unwrap();
    c.kubectl_stdin(&["apply", "-f", "-"], &deployment_yaml(&ns, 1, "nginx:2"))
        .await
        .unwrap();
    let deps: Api<Deployment> = Api::namespaced(c.client.clone(), &ns);
    let d = deps.get("web").await.unwrap();
    // The ReplicaSets a deployment controller would have made for revisions 1 and 2.
    let rss: Api<ReplicaSet> = Api::namespaced(c.client.clone(), &ns);
    for (rev, image) in [(1, "nginx:1"), (2, "nginx:2")] {
        let rs: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": format!("web-{rev}"),
            "labels": {"app": "web", "pod-template-hash": format!("h{rev}")},
            "annotations": {"deployment.kubernetes.io/revision": rev.to_string()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                "uid": d.metadata.uid.clone().unwrap(), "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web", "pod-template-hash": format!("h{rev}")}},
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": format!("h{rev}")}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}}})).unwrap();
        rss.create(&PostParams::default(), &rs).await.unwrap();
    }
    deps.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"deployment.kubernetes.io/revision": "2"}}}),
        ),
    )
    .await
    .unwrap();
    let history = c
        .kubectl_ok(&["-n", &ns, "rollout", "history", "deploy/web"])
        .await
        .unwrap();
    assert!(
        history.contains("REVISION") && history.contains('1') && history.contains('2'),
        "{history}"
    );

    let status = c.kubectl_background(&[
        "-n",
        &ns,
        "rollout",
        "status",
        "deploy/web",
        "--timeout=30s",
    ]);
    let generation = deps.get("web").await.unwrap().metadata.generation.unwrap();
    deps.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"observedGeneration": generation,
        "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}})),
    )
    .await
    .unwrap();
    let out = status.await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("successfully rolled out"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let out = c
        .kubectl_ok(&[
            "-n",
            &ns,
            "rollout",
            "undo",
            "deploy/web",
            "--to-revision=1",
        ])
        .await
        .unwrap();
    assert!(out.contains("rolled back"), "{out}");
    let d = deps.get("web").await.unwrap();
    assert_eq!(
        d.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:1")
    );
    assert!(c
        .kubectl_ok(&["-n", &ns, "rollout", "pause", "deploy/web"])
        .await
        .unwrap()
        .contains("paused"));
    assert_eq!(
        deps.get("web").await.unwrap().spec.unwrap().paused,
        Some(true)
    );
    assert!(c
        .kubectl_ok(&["-n", &ns, "rollout", "resume", "deploy/web"])
        .await
        .unwrap()
        .contains("resumed"));
    wait_for("resume", Duration::from_secs(5), || async {
        Ok((deps.get("web").await?.spec.unwrap().paused != Some(true)).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_owns_fields_and_reports_conflicts() {
    let c = TestCluster::start().await.unwrap();
    let ns = c.namespace("kssa").await.unwrap();
    let manifest = |image: &str| deployment_yaml(&ns, 2, image);
    let out = c
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], &manifest("nginx:1"))
        .await
        .unwrap();
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    let out = c
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], &manifest("nginx:1"))
        .await
        .unwrap();
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    let d: Value = serde_json::from_str(
        &c.kubectl_ok(&[
            "-n",
            &ns,
            "get",
            "deploy",
            "web",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await
        .unwrap(),
    )
    .unwrap();
    let kubectl = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kubectl" && e["operation"] == "Apply")
        .cloned()
        .expect("kubectl's apply entry");
    let container = &kubectl["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
        ["k:{\"name\":\"c\"}"];
    assert_eq!(container["f:image"], json!({}), "{kubectl}");
    assert_eq!(
        container["f:env"]["k:{\"name\":\"A\"}"]["f:value"],
        json!({})
    );
    assert!(
        kubectl["fieldsV1"]["f:spec"]
            .get("f:revisionHistoryLimit")
            .is_none(),
        "an applier owns only what it applied"
    );

    // Another manager applying a different image conflicts, and kubectl says with whom.
    let err = c
        .kubectl_stdin(
            &["apply", "--server-side", "--field-manager=other", "-f", "-"],
            &manifest("nginx:2"),
        )
        .await
        .expect_err("a conflicting apply fails");
    assert!(
        format!("{err:#}").contains(
            "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.template.spec.containers[name=\"c\"].image"
        ),
        "{err:#}"
    );
    let out = c
        .kubectl_stdin(
            &[
                "apply",
                "--server-side",
                "--field-manager=other",
                "--force-conflicts",
                "-f",
                "-",
            ],
            &manifest("nginx:2"),
        )
        .await
        .unwrap();
    assert!(out.contains("serverside-applied"), "{out}");
    let api: Api<Deployment> = Api::namespaced(c.client.clone(), &ns);
    let d = api.get("web").await.unwrap();
    let spec = d.spec.unwrap().template.spec.unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:2"));

    c.kubectl_ok(&["-n", &ns, "get", "events"]).await.unwrap();
    let out = c
        .kubectl_ok(&["delete", "ns", &ns, "--wait=false"])
        .await
        .unwrap();
    assert!(
        out.contains(&format!("namespace \"{ns}\" deleted")),
        "{out}"
    );
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.client.clone());
    if let Some(n) = nss.get_opt(&ns).await.unwrap() {
        assert!(
            n.metadata.deletion_timestamp.is_some(),
            "the namespace is terminating"
        );
    }
    c.cleanup().await;
}

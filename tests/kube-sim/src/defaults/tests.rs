use serde_json::{json, Value};

use super::*;
use std::path::PathBuf;

fn reference_dir() -> Option<PathBuf> {
    let Ok(dir) = std::env::var("RKCM_APISERVER_REFERENCE") else {
        println!("skipped: RKCM_APISERVER_REFERENCE is not set");
        return None;
    };
    let p = PathBuf::from(dir);
    if p.is_dir() {
        Some(p)
    } else {
        println!(
            "skipping: apiserver reference directory {} not found",
            p.display()
        );
        None
    }
}

fn strip_server_metadata(v: &mut Value) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
            "generateName",
        ] {
            meta.remove(k);
        }
    }
}

fn group_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

#[test]
fn reference_creates_match() {
    let Some(dir) = reference_dir() else { return };
    let mut checked = 0;
    for n in 24..=50 {
        let prefix = format!("{n:03}-");
        let Some(path) = std::fs::read_dir(&dir)
            .ok()
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|f| f.to_str())
                    .is_some_and(|f| f.starts_with(&prefix))
            })
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let rec: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let mut req = rec["request"]["body"].clone();
        let resp = rec["response"]["body"].clone();
        if resp["kind"] == "Status" || req.is_null() {
            continue;
        }
        let (g, v) = group_version(req["apiVersion"].as_str().unwrap_or(""));
        let kind = req["kind"].as_str().unwrap_or("").to_string();
        apply_defaults(&g, &v, &kind, &mut req);
        after_defaulting(&g, &kind, &mut req, true);
        prepare_for_create(&g, &v, &kind, &mut req, "");
        if kind == "Pod" {
            let vol = resp["spec"]["volumes"][0]["name"].as_str().unwrap_or("");
            let suffix = vol.trim_start_matches("kube-api-access-").to_string();
            admit_pod_service_account(&mut req, &suffix);
        }
        if kind == "Job" {
            let uid = resp["metadata"]["uid"].as_str().unwrap_or("").to_string();
            job_selector_and_labels(&mut req, &uid);
        }
        let mut got = req;
        let mut want = resp;
        strip_server_metadata(&mut got);
        strip_server_metadata(&mut want);
        // The generated name is the server's job, as is the PV's transition time.
        if let Some(m) = got.get_mut("metadata").and_then(Value::as_object_mut) {
            if let Some(name) = want["metadata"]["name"].as_str() {
                m.insert("name".into(), json!(name));
            }
        }
        if kind == "Service" && got["spec"].get("clusterIP").is_none() {
            // the allocator's job, not defaulting
            got["spec"]["clusterIP"] = want["spec"]["clusterIP"].clone();
            got["spec"]["clusterIPs"] = want["spec"]["clusterIPs"].clone();
        }
        if kind == "PersistentVolume" {
            if let (Some(g), Some(w)) = (got.get_mut("status"), want.get("status")) {
                g["lastPhaseTransitionTime"] = w["lastPhaseTransitionTime"].clone();
            }
        }
        assert_eq!(
            got,
            want,
            "{}:\n got: {}\nwant: {}",
            path.display(),
            serde_json::to_string(&got).unwrap_or_default(),
            serde_json::to_string(&want).unwrap_or_default()
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} reference files checked");
}

#[test]
fn qos_classes() {
    let best = json!({"spec": {"containers": [{"name": "c"}]}});
    assert_eq!(pod_qos_class(&best), "BestEffort");
    let burst = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}});
    assert_eq!(pod_qos_class(&burst), "Burstable");
    let guaranteed = json!({"spec": {"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}}}
    ]}});
    assert_eq!(pod_qos_class(&guaranteed), "Guaranteed");
    // limits only: requests are defaulted from limits, so the pod is Guaranteed
    let mut limits_only = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
    apply_defaults("", "v1", "Pod", &mut limits_only);
    assert_eq!(limits_only["status"]["qosClass"], "Guaranteed");
    assert_eq!(
        limits_only["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "1"
    );
    // one container without memory limit -> Burstable
    let partial = json!({"spec": {"containers": [
        {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}},
        {"name": "b", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}
    ]}});
    assert_eq!(pod_qos_class(&partial), "Burstable");
    // zero requests are ignored
    let zero =
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "0"}}}]}});
    assert_eq!(pod_qos_class(&zero), "BestEffort");
    // other resources do not count
    let eph = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}]}});
    assert_eq!(pod_qos_class(&eph), "BestEffort");
}

#[test]
fn pull_policies() {
    assert_eq!(image_pull_policy("nginx"), "Always");
    assert_eq!(image_pull_policy("nginx:latest"), "Always");
    assert_eq!(image_pull_policy("nginx:1.25"), "IfNotPresent");
    assert_eq!(
        image_pull_policy("registry.example.com:5000/team/app"),
        "Always"
    );
    assert_eq!(
        image_pull_policy("registry.example.com:5000/team/app:v2"),
        "IfNotPresent"
    );
    assert_eq!(
        image_pull_policy(
            "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        ),
        "IfNotPresent"
    );
    assert_eq!(image_pull_policy("Nginx"), "IfNotPresent"); // does not parse
    assert_eq!(image_pull_policy(""), "IfNotPresent");
}

#[test]
fn wrong_types_are_tolerated() {
    for (g, v, k) in [
        ("", "v1", "Pod"),
        ("apps", "v1", "Deployment"),
        ("batch", "v1", "Job"),
        ("batch", "v1", "CronJob"),
        ("", "v1", "Service"),
        ("apps", "v1", "StatefulSet"),
        ("", "v1", "Secret"),
        ("", "v1", "Node"),
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
        ("", "v1", "LimitRange"),
    ] {
        for bad in [
            json!(5),
            json!({"spec": 5}),
            json!({"spec": {"template": 3, "containers": "x"}}),
            json!({"spec": {"template": {"spec": {"containers": [1, {"ports": 4, "resources": 2}]}}}}),
            json!({"metadata": 1, "spec": {"containers": [{"resources": {"limits": 7}}], "tolerations": 3}}),
            json!({"stringData": 5, "spec": {"ports": [{"port": "x"}], "selector": 1}}),
        ] {
            let mut b = bad.clone();
            apply_defaults(g, v, k, &mut b);
            prepare_for_create(g, v, k, &mut b, "now");
            admit_pod_service_account(&mut b, "abcde");
            job_selector_and_labels(&mut b, "uid");
        }
    }
}

#[test]
fn service_account_admission_respects_opt_out_and_existing_mounts() {
    let mut pod =
        json!({"spec": {"automountServiceAccountToken": false, "containers": [{"name": "c"}]}});
    admit_pod_service_account(&mut pod, "abcde");
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
    assert!(pod["spec"].get("volumes").is_none());
    let mut pod = json!({"spec": {"serviceAccountName": "builder", "containers": [
        {"name": "a", "volumeMounts": [{"name": "x", "mountPath": SERVICE_ACCOUNT_MOUNT_PATH}]},
        {"name": "b"}], "initContainers": [{"name": "i"}]}});
    admit_pod_service_account(&mut pod, "abcde");
    assert_eq!(pod["spec"]["serviceAccount"], "builder");
    assert_eq!(
        pod["spec"]["containers"][0]["volumeMounts"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(
        pod["spec"]["containers"][1]["volumeMounts"][0]["name"],
        "kube-api-access-abcde"
    );
    assert_eq!(
        pod["spec"]["initContainers"][0]["volumeMounts"][0]["readOnly"],
        true
    );
    assert_eq!(pod["spec"]["volumes"][0]["projected"]["defaultMode"], 420);
    let sa = json!({"automountServiceAccountToken": false, "imagePullSecrets": [{"name": "reg"}]});
    let mut pod = json!({"spec": {"containers": [{"name": "c"}]}});
    admit_pod_service_account_with(&mut pod, "abcde", Some(&sa));
    assert!(pod["spec"].get("volumes").is_none());
    assert_eq!(pod["spec"]["imagePullSecrets"], json!([{"name": "reg"}]));
}

#[test]
fn workload_details() {
    let mut job = json!({"spec": {"backoffLimitPerIndex": 1, "completionMode": "Indexed", "completions": 3,
        "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    apply_defaults("batch", "v1", "Job", &mut job);
    assert_eq!(job["spec"]["backoffLimit"], 2147483647);
    assert_eq!(job["spec"]["parallelism"], 1);
    assert_eq!(job["spec"]["podReplacementPolicy"], "Failed");
    assert_eq!(
        job["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
        "True"
    );

    let mut svc = json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 443, "targetPort": "https"}]}});
    apply_defaults("", "v1", "Service", &mut svc);
    assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(svc["spec"]["allocateLoadBalancerNodePorts"], true);
    assert_eq!(
        svc["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
        10800
    );
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "https");

    let mut headless = json!({"spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
    apply_defaults("", "v1", "Service", &mut headless);
    // IP families are the service storage's, after defaulting (and field ownership).
    assert!(headless["spec"].get("ipFamilies").is_none());
    after_defaulting("", "Service", &mut headless, true);
    assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
    assert_eq!(headless["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));

    let mut ext = json!({"spec": {"type": "ExternalName", "externalName": "example.com"}});
    apply_defaults("", "v1", "Service", &mut ext);
    after_defaulting("", "Service", &mut ext, true);
    assert!(ext["spec"].get("ipFamilies").is_none());
    assert!(ext["spec"].get("internalTrafficPolicy").is_none());

    let mut pod = json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "busybox",
        "ports": [{"containerPort": 8080}],
        "livenessProbe": {"httpGet": {"port": 8080}}, "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
        "volumes": [{"name": "scratch"}, {"name": "s", "secret": {"secretName": "x"}}]}});
    apply_defaults("", "v1", "Pod", &mut pod);
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["ports"][0]["hostPort"], 8080);
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/");
    assert_eq!(c["livenessProbe"]["periodSeconds"], 10);
    assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(pod["spec"]["volumes"][0]["emptyDir"], json!({}));
    assert_eq!(pod["spec"]["volumes"][1]["secret"]["defaultMode"], 420);

    let mut rb = json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [
        {"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"}]});
    apply_defaults("rbac.authorization.k8s.io", "v1", "RoleBinding", &mut rb);
    assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    assert!(rb["subjects"][1].get("apiGroup").is_none());

    let ds_old = json!({"metadata": {"annotations": {"deprecated.daemonset.template.generation": "1"}},
        "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
    let mut ds_new =
        json!({"metadata": {}, "spec": {"template": {"spec": {"containers": [{"name": "b"}]}}}});
    prepare_for_update("apps", "v1", "DaemonSet", &mut ds_new, &ds_old);
    assert_eq!(
        ds_new["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "2"
    );
    let mut same = ds_old.clone();
    prepare_for_update("apps", "v1", "DaemonSet", &mut same, &ds_old);
    assert_eq!(
        same["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "1"
    );
}

#[test]
fn base64() {
    assert_eq!(base64_encode(b"v"), "dg==");
    assert_eq!(base64_encode(b"ab"), "YWI=");
    assert_eq!(base64_encode(b"abc"), "YWJj");
    assert_eq!(base64_encode(b""), "");
}

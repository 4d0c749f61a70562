use super::*;
use serde_json::json;

fn names(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).expect("a pod")
}

fn now() -> Timestamp {
    Timestamp::from_second(10_000).expect("a time")
}

#[test]
fn each_evaluator_matches_its_names() {
    let hard = names(&[
        "pods",
        "count/pods",
        "requests.cpu",
        "limits.memory",
        "hugepages-2Mi",
        "requests.hugepages-1Gi",
        "requests.example.com/gpu",
        "requests.kubernetes.io/thing",
        "services",
        "services.nodeports",
        "count/services",
        "requests.storage",
        "gold.storageclass.storage.k8s.io/requests.storage",
        "count/persistentvolumeclaims",
        "configmaps",
        "count/configmaps",
        "count/deployments.apps",
        "count/widgets.example.com",
        "nonsense",
    ]);
    let all = Evaluator::built_in();
    let matched = |group: &str, resource: &str| {
        all.iter()
            .find(|e| e.is(group, resource))
            .expect("built in")
            .matching_resources(&hard)
    };
    assert_eq!(
        matched("", "pods"),
        names(&[
            "count/pods",
            "limits.memory",
            "pods",
            "requests.cpu",
            "hugepages-2Mi",
            "requests.hugepages-1Gi",
            "requests.example.com/gpu",
        ])
    );
    assert_eq!(
        matched("", "services"),
        names(&["count/services", "services", "services.nodeports"])
    );
    assert_eq!(
        matched("", "persistentvolumeclaims"),
        names(&[
            "requests.storage",
            "gold.storageclass.storage.k8s.io/requests.storage",
            "count/persistentvolumeclaims"
        ])
    );
    assert_eq!(
        matched("", "configmaps"),
        names(&["configmaps", "count/configmaps"])
    );
    assert_eq!(
        Evaluator::object_count("apps", "deployments", None).matching_resources(&hard),
        names(&["count/deployments.apps"])
    );
    assert_eq!(
        object_count_name("example.com", "widgets"),
        "count/widgets.example.com"
    );
    assert!(all
        .iter()
        .all(|e| e.matching_resources(&names(&["nonsense"])).is_empty()));
}

#[test]
fn pods_are_charged_their_effective_requests_and_limits() {
    let web = pod(json!({"metadata": {"name": "web"}, "spec": {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "200m", "example.com/gpu": "1",
                "hugepages-2Mi": "4Mi"}, "limits": {"memory": "256Mi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "100m", "memory": "lots"}}}],
        "initContainers": [
            {"name": "init", "resources": {"requests": {"cpu": "1"}}},
            {"name": "sidecar", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "50m"}, "limits": {"memory": "64Mi"}}}],
        "overhead": {"cpu": "10m", "memory": "1Mi"}}}));
    let usage = pod_usage(&web, now());
    assert_eq!(
        resources::pretty_print(&usage),
        // cpu: max(300m + 50m sidecar, 1 init) + 10m overhead; the memory request
        // that is not a quantity is left out (only overhead remains); limits: 256Mi +
        // 64Mi sidecar, plus overhead as the limit is set.
        "count/pods=1,cpu=1010m,hugepages-2Mi=4Mi,limits.memory=321Mi,memory=1Mi,pods=1,\
         requests.cpu=1010m,requests.example.com/gpu=1,requests.hugepages-2Mi=4Mi,requests.memory=1Mi"
    );
}

#[test]
fn finished_and_expired_pods_keep_only_their_count() {
    let base = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
        "resources": {"requests": {"cpu": "100m"}}}]}});
    let mut succeeded = base.clone();
    succeeded["status"] = json!({"phase": "Succeeded"});
    let mut failed = base.clone();
    failed["status"] = json!({"phase": "Failed"});
    // Deleted at 9,990 s with 30 s of grace: charged until 10,020 s.
    let mut terminating = base.clone();
    terminating["metadata"]["deletionTimestamp"] = json!("1970-01-01T02:46:30Z");
    terminating["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    let mut expired = terminating.clone();
    expired["metadata"]["deletionGracePeriodSeconds"] = json!(5);
    for (value, charged) in [
        (base, true),
        (succeeded, false),
        (failed, false),
        (terminating, true),
        (expired, false),
    ] {
        let pod = pod(value);
        assert_eq!(pod_is_chargeable(&pod, now()), charged);
        let usage = pod_usage(&pod, now());
        assert_eq!(usage["count/pods"].to_string(), "1");
        assert_eq!(usage.contains_key("requests.cpu"), charged);
        assert_eq!(usage.contains_key("pods"), charged);
    }
    let running = pod(
        json!({"metadata": {"name": "p"}, "spec": {"containers": []},
        "status": {"phase": "Running"}}),
    );
    let done = pod(
        json!({"metadata": {"name": "p"}, "spec": {"containers": []},
        "status": {"phase": "Succeeded"}}),
    );
    assert!(pod_update_matters(&running, &done, now()));
    assert!(!pod_update_matters(&done, &running, now()));
    assert!(!pod_update_matters(&running, &running, now()));
}

#[test]
fn services_count_node_ports_and_load_balancers() {
    let service = |spec: serde_json::Value| -> Service {
        serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec})).expect("a service")
    };
    let ports = json!([{"port": 80}, {"port": 443, "nodePort": 30443}]);
    for (spec, expected) in [
        (
            json!({"ports": ports}),
            "count/services=1,services=1,services.loadbalancers=0,services.nodeports=0",
        ),
        (
            json!({"type": "NodePort", "ports": ports}),
            "count/services=1,services=1,services.loadbalancers=0,services.nodeports=2",
        ),
        (
            json!({"type": "LoadBalancer", "ports": ports}),
            "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2",
        ),
        (
            json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": ports}),
            "count/services=1,services=1,services.loadbalancers=1,services.nodeports=1",
        ),
        (
            json!({"type": "ExternalName", "externalName": "x"}),
            "count/services=1,services=1,services.loadbalancers=0,services.nodeports=0",
        ),
    ] {
        assert_eq!(
            resources::pretty_print(&service_usage(&service(spec.clone()))),
            expected,
            "{spec}"
        );
    }
    assert!(service_update_matters(
        &service(json!({"type": "NodePort"})),
        &service(json!({"type": "ClusterIP"}))
    ));
    assert!(!service_update_matters(
        &service(json!({"type": "ClusterIP"})),
        &service(json!({}))
    ));
}

#[test]
fn claims_count_storage_per_class() {
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "c"},
        "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1500m"}}},
        "status": {"allocatedResources": {"storage": "10Gi"}}
    }))
    .expect("a claim");
    assert_eq!(
        resources::pretty_print(&claim_usage(&claim)),
        "count/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/persistentvolumeclaims=1,\
         gold.storageclass.storage.k8s.io/requests.storage=2,persistentvolumeclaims=1,requests.storage=2"
    );
    let annotated: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "annotations": {"volume.beta.kubernetes.io/storage-class": "silver"}},
        "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("a claim");
    assert!(
        claim_usage(&annotated).contains_key("silver.storageclass.storage.k8s.io/requests.storage")
    );
}

#[test]
fn stats_follow_scopes_and_start_at_zero() {
    let pods: Vec<Pod> = [
        json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}}),
        json!({"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "250m"}}}]}}),
    ]
    .into_iter()
    .map(pod)
    .collect();
    let evaluator = &Evaluator::built_in()[0];
    let wanted = names(&["pods", "requests.cpu"]);
    let all = usage_stats(evaluator, &wanted, &[], pods.iter().map(Object::Pod), now());
    assert_eq!(resources::pretty_print(&all), "pods=2,requests.cpu=250m");
    let best_effort = usage_stats(
        evaluator,
        &wanted,
        &[scopes::exists(scopes::BEST_EFFORT)],
        pods.iter().map(Object::Pod),
        now(),
    );
    assert_eq!(
        resources::pretty_print(&best_effort),
        "pods=1,requests.cpu=0"
    );
    // Scoped quotas count nothing of other kinds.
    let configmaps = Evaluator::object_count("", "configmaps", Some("configmaps"));
    let scoped = usage_stats(
        &configmaps,
        &names(&["configmaps"]),
        &[scopes::exists(scopes::BEST_EFFORT)],
        [Object::Other, Object::Other],
        now(),
    );
    assert_eq!(resources::pretty_print(&scoped), "configmaps=0");
    let counted = usage_stats(
        &configmaps,
        &names(&["configmaps"]),
        &[],
        [Object::Other, Object::Other],
        now(),
    );
    assert_eq!(resources::pretty_print(&counted), "configmaps=2");
}

#[test]
fn containers_must_name_tracked_cpu_and_memory() {
    let pod = pod(json!({"metadata": {"name": "p"}, "spec": {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b"}],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}));
    assert_eq!(
        pod_constraints(&names(&["requests.cpu", "limits.memory", "pods"]), &pod),
        Err("must specify limits.memory for: a,b,i; requests.cpu for: b".to_string())
    );
    assert_eq!(
        pod_constraints(&names(&["pods", "requests.storage"]), &pod),
        Ok(())
    );
}

#[test]
fn extended_resource_names() {
    assert!(is_extended_resource_name("example.com/gpu"));
    assert!(!is_extended_resource_name("cpu"));
    assert!(!is_extended_resource_name("kubernetes.io/thing"));
    assert!(!is_extended_resource_name("requests.example.com/gpu"));
    assert!(!is_extended_resource_name("Example.com/gpu"));
    assert!(!is_extended_resource_name("example.com/-gpu"));
}

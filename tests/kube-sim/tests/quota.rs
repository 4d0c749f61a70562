//! kube-sim's ResourceQuota admission, checked through the API as a client sees it: the
//! real server's refusals (`exceeded quota`, `status unknown`, `failed quota: must
//! specify`), usage charged into `status.used` at admission, scopes, dry runs, and
//! Service updates that change node ports.

mod common;

use common::{call, start};
use serde_json::{json, Value};

const NS: &str = "/api/v1/namespaces/default";

async fn create(
    client: &kube::Client,
    resource: &str,
    body: Value,
) -> Result<Value, (u16, String)> {
    call(client, "POST", &format!("{NS}/{resource}"), Some(body)).await
}

fn pod(name: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "pause", "resources": resources}]}})
}

/// A quota as its controller leaves it: `status.hard` = `spec.hard`, `status.used` given.
async fn quota(client: &kube::Client, name: &str, spec: Value, used: Value) {
    let created = create(
        client,
        "resourcequotas",
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec}),
    )
    .await
    .expect("quota created");
    let mut with_status = created.clone();
    with_status["status"] = json!({"hard": created["spec"]["hard"], "used": used});
    call(
        client,
        "PUT",
        &format!("{NS}/resourcequotas/{name}/status"),
        Some(with_status),
    )
    .await
    .expect("status written");
}

async fn used(client: &kube::Client, name: &str) -> Value {
    call(client, "GET", &format!("{NS}/resourcequotas/{name}"), None)
        .await
        .expect("quota")["status"]["used"]
        .clone()
}

async fn service_account(client: &kube::Client) {
    create(
        client,
        "serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
    )
    .await
    .expect("service account");
}

#[tokio::test]
async fn creates_are_charged_and_refused_past_hard_as_kube_apiserver_does() {
    let (_sim, client) = start().await;
    service_account(&client).await;
    let cpu = json!({"requests": {"cpu": "200m"}, "limits": {"memory": "256Mi"}});

    // A quota its controller has not computed yet limits nothing.
    create(
        &client,
        "resourcequotas",
        json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "fresh"}, "spec": {"hard": {"pods": "0"}}}),
    )
    .await
    .expect("created");
    create(&client, "pods", pod("before", cpu.clone()))
        .await
        .expect("not limited yet");
    call(
        &client,
        "DELETE",
        &format!("{NS}/resourcequotas/fresh"),
        None,
    )
    .await
    .expect("deleted");

    quota(
        &client,
        "q",
        json!({"hard": {"pods": "3", "requests.cpu": "2", "limits.memory": "4Gi", "count/configmaps": "2"}}),
        json!({"pods": "1", "requests.cpu": "200m", "limits.memory": "256Mi", "count/configmaps": "0"}),
    )
    .await;

    // A dry run is checked but charges nothing.
    call(
        &client,
        "POST",
        &format!("{NS}/pods?dryRun=All"),
        Some(pod("dry", cpu.clone())),
    )
    .await
    .expect("a dry run fits");
    assert_eq!(used(&client, "q").await["pods"], "1");

    for name in ["p2", "p3"] {
        create(&client, "pods", pod(name, cpu.clone()))
            .await
            .expect("fits");
    }
    let used_now = used(&client, "q").await;
    assert_eq!(
        used_now,
        json!({"pods": "3", "requests.cpu": "600m", "limits.memory": "768Mi", "count/configmaps": "0"})
    );
    let refused = create(&client, "pods", pod("p4", cpu.clone()))
        .await
        .expect_err("over quota");
    assert_eq!(
        refused,
        (
            403,
            "pods \"p4\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"
                .to_string()
        )
    );
    assert_eq!(
        used(&client, "q").await["pods"],
        "3",
        "a refusal charges nothing"
    );

    // The charge is the API server's own status write.
    let stored = call(&client, "GET", &format!("{NS}/resourcequotas/q"), None)
        .await
        .expect("quota");
    let managers: Vec<(String, String)> = stored["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or_default().to_string(),
                m["subresource"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("kube-apiserver".to_string(), "status".to_string())),
        "{managers:?}"
    );

    // Counted objects of any kind: configmaps by their count name.
    for name in ["c1", "c2"] {
        create(
            &client,
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
        )
        .await
        .expect("fits");
    }
    assert_eq!(
        create(&client, "configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c3"}}))
            .await
            .expect_err("over quota"),
        (
            403,
            "configmaps \"c3\" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2"
                .to_string()
        )
    );
    // Deletions are the controller's to account for.
    call(&client, "DELETE", &format!("{NS}/configmaps/c1"), None)
        .await
        .expect("deleted");
    assert_eq!(used(&client, "q").await["count/configmaps"], "2");
}

#[tokio::test]
async fn tracked_cpu_and_memory_must_be_named_and_usage_must_be_known() {
    let (_sim, client) = start().await;
    service_account(&client).await;
    quota(
        &client,
        "compute",
        json!({"hard": {"requests.cpu": "1", "limits.memory": "1Gi"}}),
        json!({"requests.cpu": "0", "limits.memory": "0"}),
    )
    .await;
    assert_eq!(
        create(&client, "pods", pod("bare", json!({}))).await.expect_err("must specify"),
        (
            403,
            "pods \"bare\" is forbidden: failed quota: compute: must specify limits.memory for: c; requests.cpu for: c"
                .to_string()
        )
    );
    // A quota with limits but no usage yet for a name it tracks.
    quota(
        &client,
        "unknown",
        json!({"hard": {"services": "5", "services.nodeports": "2"}}),
        json!({"services": "0"}),
    )
    .await;
    assert_eq!(
        create(&client, "services", json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80}]}}))
        .await
        .expect_err("status unknown"),
        (
            403,
            "services \"s\" is forbidden: status unknown for quota: unknown, resources: services,services.nodeports"
                .to_string()
        )
    );
}

#[tokio::test]
async fn scopes_and_service_updates() {
    let (_sim, client) = start().await;
    service_account(&client).await;
    quota(
        &client,
        "best-effort",
        json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]}),
        json!({"pods": "0"}),
    )
    .await;
    create(&client, "pods", pod("a", json!({})))
        .await
        .expect("the first best-effort pod");
    create(
        &client,
        "pods",
        pod("b", json!({"requests": {"cpu": "1m"}})),
    )
    .await
    .expect("a burstable pod is outside the scope");
    let refused = create(&client, "pods", pod("c", json!({})))
        .await
        .expect_err("over");
    assert_eq!(refused.0, 403);
    assert!(
        refused.1.contains("exceeded quota: best-effort"),
        "{}",
        refused.1
    );

    quota(
        &client,
        "ports",
        json!({"hard": {"services.nodeports": "1"}}),
        json!({"services.nodeports": "0"}),
    )
    .await;
    let two_ports = json!([{"name": "a", "port": 80}, {"name": "b", "port": 81}]);
    create(
        &client,
        "services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"ports": two_ports}}),
    )
    .await
    .expect("a ClusterIP Service uses no node port");
    assert_eq!(used(&client, "ports").await["services.nodeports"], "0");
    let refused = call(
        &client,
        "PATCH",
        &format!("{NS}/services/web"),
        Some(json!({"spec": {"type": "NodePort"}})),
    )
    .await
    .expect_err("two node ports over one");
    assert_eq!(
        refused,
        (
            403,
            "services \"web\" is forbidden: exceeded quota: ports, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1"
                .to_string()
        )
    );
}

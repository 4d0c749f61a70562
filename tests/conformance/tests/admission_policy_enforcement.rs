//! ValidatingAdmissionPolicies enforced as kube-apiserver 1.29's admission plugin does
//! (with `--runtime-config=admissionregistration.k8s.io/v1beta1=true` and the
//! `ValidatingAdmissionPolicy` gate): refusals with upstream's Status (message, reason,
//! code), message expressions, `Warn` as a `Warning` header kubectl prints, parameters from
//! a ConfigMap, namespace selectors, `failurePolicy`, bindings without their policy, and
//! deletes. On a real cluster (`RKCM_TEST_KUBECONFIG`) the tests run when it serves the API
//! (skipping, saying so, when it does not); policies reach a real API server's admission
//! through an informer, so each test waits (with a deadline) for its policy to act. Every
//! binding is limited to the test's own namespace.

use std::time::Duration;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use rkcm_conformance::{wait_for, TestCluster};
use serde_json::{json, Value};

const API: &str = "admissionregistration.k8s.io/v1beta1";
const ACTIVE: Duration = Duration::from_secs(30);

/// A cluster enforcing policies, or `None` (skipped) when a real one does not serve the API.
async fn serving() -> Option<TestCluster> {
    let c = TestCluster::start_with_config(kube_sim::Config {
        runtime_config: format!("{API}=true"),
        feature_gates: "ValidatingAdmissionPolicy=true".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    if !c.serves(API).await {
        println!("skipped: the cluster does not serve {API} (kube-apiserver needs --runtime-config={API}=true and the ValidatingAdmissionPolicy gate)");
        return None;
    }
    Some(c)
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", kube_sim::api::random_suffix(6))
}

/// Creates a policy and its binding (limited to `ns` by its namespace's name label unless
/// `binding_spec` has its own `matchResources`); returns their names.
async fn bind(
    c: &TestCluster,
    ns: &str,
    policy_spec: Value,
    mut binding_spec: Value,
) -> (String, String) {
    let (policy, binding) = (unique("policy"), unique("binding"));
    binding_spec["policyName"] = json!(policy);
    if binding_spec.get("validationActions").is_none() {
        binding_spec["validationActions"] = json!(["Deny"]);
    }
    if binding_spec.get("matchResources").is_none() {
        binding_spec["matchResources"] = json!({"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": ns}}});
    }
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": API, "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": policy}, "spec": policy_spec},
        {"apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": binding}, "spec": binding_spec}]});
    c.kubectl_stdin(&["create", "-f", "-"], &objects.to_string())
        .await
        .unwrap();
    (policy, binding)
}

async fn unbind(c: &TestCluster, names: &(String, String)) {
    let _ = c
        .kubectl(&["delete", "validatingadmissionpolicybinding", &names.1])
        .await;
    let _ = c
        .kubectl(&["delete", "validatingadmissionpolicy", &names.0])
        .await;
}

fn deployments_rule(operations: Value) -> Value {
    json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": operations,
           "resources": ["deployments"]})
}

fn deployment(name: &str, replicas: i64) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    .unwrap()
}

fn deployments(c: &TestCluster, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "apps".into(),
        version: "v1".into(),
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        plural: "deployments".into(),
    };
    Api::namespaced_with(c.client.clone(), ns, &ar)
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..Default::default()
    }
}

/// Waits until a dry-run create of `d` is refused; the refusal's Status.
async fn refusal(api: &Api<DynamicObject>, d: &DynamicObject) -> kube::core::Status {
    wait_for("the policy to refuse the create", ACTIVE, || async {
        Ok(match api.create(&dry_run(), d).await {
            Err(kube::Error::Api(s)) => Some(*s),
            Ok(_) => None,
            Err(e) => return Err(e.into()),
        })
    })
    .await
    .unwrap()
}

fn max_replicas_policy() -> Value {
    json!({"failurePolicy": "Fail",
           "matchConstraints": {"resourceRules": [deployments_rule(json!(["CREATE", "UPDATE"]))]},
           "validations": [{"expression": "object.spec.replicas <= 5"}]})
}

#[tokio::test]
async fn too_many_replicas_are_refused_with_upstreams_status() {
    let Some(c) = serving().await else { return };
    let ns = c.namespace("vap-deny").await.unwrap();
    let names = bind(&c, &ns, max_replicas_policy(), json!({})).await;
    let api = deployments(&c, &ns);
    let s = refusal(&api, &deployment("web", 7)).await;
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        format!(
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy '{}' with binding '{}' denied request: failed expression: object.spec.replicas <= 5",
            names.0, names.1
        )
    );
    api.create(&PostParams::default(), &deployment("web", 3))
        .await
        .unwrap();
    // An update is checked too, and kubectl shows the message.
    let patched = c
        .kubectl(&[
            "patch",
            "deployment",
            "web",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":9}}"#,
        ])
        .await
        .unwrap();
    assert!(!patched.status.success());
    let stderr = String::from_utf8_lossy(&patched.stderr);
    assert!(
        stderr.contains("denied request: failed expression: object.spec.replicas <= 5"),
        "{stderr}"
    );
    unbind(&c, &names).await;
    c.cleanup().await;
}

#[tokio::test]
async fn message_expressions_and_reasons() {
    let Some(c) = serving().await else { return };
    let ns = c.namespace("vap-message").await.unwrap();
    let mut spec = max_replicas_policy();
    spec["validations"] = json!([{"expression": "object.spec.replicas <= 5",
        "messageExpression": "'replicas ' + string(object.spec.replicas) + ' is more than 5'",
        "reason": "Forbidden"}]);
    let names = bind(&c, &ns, spec, json!({})).await;
    let s = refusal(&deployments(&c, &ns), &deployment("web", 6)).await;
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert!(
        s.message.ends_with(&format!(
            "with binding '{}' denied request: replicas 6 is more than 5",
            names.1
        )),
        "{}",
        s.message
    );
    unbind(&c, &names).await;
    c.cleanup().await;
}

#[tokio::test]
async fn warn_gives_a_warning_header() {
    let Some(c) = serving().await else { return };
    let ns = c.namespace("vap-warn").await.unwrap();
    let names = bind(
        &c,
        &ns,
        max_replicas_policy(),
        json!({"validationActions": ["Warn"]}),
    )
    .await;
    let expected = format!(
        "Warning: Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': failed expression: object.spec.replicas <= 5",
        names.0, names.1
    );
    let args = [
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=7",
        "-n",
        &ns,
        "--dry-run=server",
    ];
    let stderr = wait_for("kubectl to print the warning", ACTIVE, || async {
        let out = c.kubectl(&args).await?;
        anyhow::ensure!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        Ok(stderr.contains("Warning:").then_some(stderr))
    })
    .await
    .unwrap();
    assert!(stderr.contains(&expected), "{stderr}");
    unbind(&c, &names).await;
    c.cleanup().await;
}

#[tokio::test]
async fn parameters_from_a_config_map() {
    let Some(c) = serving().await else { return };
    let ns = c.namespace("vap-params").await.unwrap();
    c.kubectl_ok(&[
        "create",
        "configmap",
        "limits",
        "-n",
        &ns,
        "--from-literal=max=2",
    ])
    .await
    .unwrap();
    let spec = json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [deployments_rule(json!(["CREATE"]))]},
        "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
                         "messageExpression": "'at most ' + params.data.max + ' replicas'"}]});
    let binding = json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}});
    let names = bind(&c, &ns, spec, binding).await;
    let api = deployments(&c, &ns);
    let s = refusal(&api, &deployment("web", 3)).await;
    assert!(
        s.message.ends_with("denied request: at most 2 replicas"),
        "{}",
        s.message
    );
    api.create(&dry_run(), &deployment("web", 2)).await.unwrap();
    c.kubectl_ok(&["delete", "configmap", "limits", "-n", &ns])
        .await
        .unwrap();
    let missing = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
        names.0, names.1
    );
    wait_for("the missing parameter to refuse", ACTIVE, || async {
        Ok(match api.create(&dry_run(), &deployment("web", 1)).await {
            Err(kube::Error::Api(s)) if s.message.ends_with(&missing) => Some(s.code),
            _ => None,
        })
    })
    .await
    .unwrap();
    unbind(&c, &names).await;
    c.cleanup().await;
}

#[tokio::test]
async fn namespace_selectors_limit_a_binding() {
    let Some(c) = serving().await else { return };
    let (on, off) = (
        c.namespace("vap-on").await.unwrap(),
        c.namespace("vap-off").await.unwrap(),
    );
    let marker = unique("vap");
    c.kubectl_ok(&["label", "namespace", &on, &format!("policy={marker}")])
        .await
        .unwrap();
    let binding =
        json!({"matchResources": {"namespaceSelector": {"matchLabels": {"policy": marker}}}});
    let names = bind(&c, &on, max_replicas_policy(), binding).await;
    refusal(&deployments(&c, &on), &deployment("web", 7)).await;
    deployments(&c, &off)
        .create(&dry_run(), &deployment("web", 7))
        .await
        .unwrap();
    unbind(&c, &names).await;
    c.cleanup().await;
}

#[tokio::test]
async fn failure_policy_decides_on_evaluation_errors() {
    let Some(c) = serving().await else { return };
    let ns = c.namespace("vap-failure").await.unwrap();
    let spec = |failure: &str| {
        json!({"failurePolicy": failure,
               "matchConstraints": {"resourceRules": [deployments_rule(json!(["CREATE"]))]},
               "validations": [{"expression": "object.metadata.name != 'marker'"},
                               {"expression": "object.spec.nope > 1"}]})
    };
    let ignore = bind(&c, &ns, spec("Ignore"), json!({})).await;
    let api = deployments(&c, &ns);
    // The marker shows the policy is in force; the erroring validation is ignored.
    refusal(&api, &deployment("marker", 1)).await;
    api.create(&dry_run(), &deployment("web", 1)).await.unwrap();
    unbind(&c, &ignore).await;
    let fail = bind(&c, &ns, spec("Fail"), json!({})).await;
    let expected = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: expression 'object.spec.nope > 1' resulted in error: no such key: nope",
        fail.0, fail.1
    );
    let s = wait_for("the failing expression to refuse", ACTIVE, || async {
        Ok(match api.create(&dry_run(), &deployment("web", 1)).await {
            Err(kube::Error::Api(s)) if s.message.ends_with(&expected) => Some(s),
            _ => None,
        })
    })
    .await
    .unwrap();
    assert_eq!(s.code, 422);
    unbind(&c, &fail).await;
    c.cleanup().await;
}

#[tokio::test]
async fn a_binding_without_its_policy_does_nothing() {
    let Some(c) = serving().await else { return };
    let ns = c.namespace("vap-orphan").await.unwrap();
    let binding = unique("binding");
    let obj = json!({"apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": binding},
        "spec": {"policyName": unique("missing"), "validationActions": ["Deny"]}});
    c.kubectl_stdin(&["create", "-f", "-"], &obj.to_string())
        .await
        .unwrap();
    deployments(&c, &ns)
        .create(&dry_run(), &deployment("web", 50))
        .await
        .unwrap();
    let _ = c
        .kubectl(&["delete", "validatingadmissionpolicybinding", &binding])
        .await;
    c.cleanup().await;
}

#[tokio::test]
async fn deletes_are_checked_against_the_old_object() {
    let Some(c) = serving().await else { return };
    let ns = c.namespace("vap-delete").await.unwrap();
    let spec = json!({"matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
             "resources": ["configmaps"]}]},
        "validations": [{"expression": "oldObject.metadata.name != 'protected' && object == null",
                         "message": "this ConfigMap is protected"}]});
    let names = bind(&c, &ns, spec, json!({})).await;
    for name in ["protected", "other"] {
        c.kubectl_ok(&["create", "configmap", name, "-n", &ns])
            .await
            .unwrap();
    }
    let cms: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        &ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let dry = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    let s = wait_for("the delete to be refused", ACTIVE, || async {
        Ok(match cms.delete("protected", &dry).await {
            Err(kube::Error::Api(s)) => Some(s),
            _ => None,
        })
    })
    .await
    .unwrap();
    assert_eq!(
        s.message,
        format!(
            "configmaps \"protected\" is forbidden: ValidatingAdmissionPolicy '{}' with binding '{}' denied request: this ConfigMap is protected",
            names.0, names.1
        )
    );
    cms.delete("other", &DeleteParams::default()).await.unwrap();
    unbind(&c, &names).await;
    c.cleanup().await;
}

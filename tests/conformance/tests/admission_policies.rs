//! `admissionregistration.k8s.io/v1beta1` ValidatingAdmissionPolicy and its bindings as
//! kube-apiserver 1.29 serves them: only with `--runtime-config`, defaulted, with a
//! generation that follows the spec, a status only the `status` subresource writes
//! (server-side apply included, as the status controller writes it), upstream's
//! validation messages, `kubectl get` columns, and, with the `ValidatingAdmissionPolicy`
//! gate, the status controller's bootstrap role. On a real cluster (`RKCM_TEST_KUBECONFIG`)
//! the tests run when it serves the group version and skip, saying so, when it does not;
//! the parts that depend on kube-sim's flags run on kube-sim only.

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use rkcm_conformance::TestCluster;
use serde_json::{json, Value};

const GROUP: &str = "admissionregistration.k8s.io";
const API: &str = "admissionregistration.k8s.io/v1beta1";
const GATE: &str = "ValidatingAdmissionPolicy=true";
const CONTROLLER: &str = "validatingadmissionpolicy-status-controller";

fn config(runtime: bool, gate: bool) -> kube_sim::Config {
    kube_sim::Config {
        runtime_config: if runtime {
            format!("{API}=true")
        } else {
            String::new()
        },
        feature_gates: if gate { GATE.into() } else { String::new() },
        ..Default::default()
    }
}

/// A cluster serving the API, or `None` (the test skipped) when a real one does not.
async fn serving() -> Option<TestCluster> {
    let c = TestCluster::start_with_config(config(true, true))
        .await
        .unwrap();
    if !c.serves(API).await {
        println!("skipped: the cluster does not serve {API} (kube-apiserver needs --runtime-config={API}=true)");
        return None;
    }
    Some(c)
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1beta1".into(),
        api_version: API.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn policies(c: &TestCluster) -> Api<DynamicObject> {
    Api::all_with(
        c.client.clone(),
        &resource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    )
}

fn bindings(c: &TestCluster) -> Api<DynamicObject> {
    Api::all_with(
        c.client.clone(),
        &resource(
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    )
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", kube_sim::api::random_suffix(6))
}

fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": API, "kind": kind,
                                  "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

fn deployments_rule() -> Value {
    json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
           "resources": ["deployments"]})
}

fn policy_spec() -> Value {
    json!({"matchConstraints": {"resourceRules": [deployments_rule()]},
           "validations": [{"expression": "object.spec.replicas <= 5"}]})
}

fn as_json(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap()
}

/// The 422 message of a refused create.
async fn refused(api: &Api<DynamicObject>, o: &DynamicObject) -> String {
    match api.create(&PostParams::default(), o).await {
        Err(kube::Error::Api(s)) if s.code == 422 => s.message.clone(),
        other => panic!("expected 422 Invalid, got {other:?}"),
    }
}

#[tokio::test]
async fn served_only_with_the_runtime_config() {
    let off = TestCluster::start_with_config(config(false, true))
        .await
        .unwrap();
    if off
        .sim_only("starting a cluster without --runtime-config")
        .is_none()
    {
        return;
    }
    let raw = off
        .kubectl(&["get", "--raw", &format!("/apis/{API}")])
        .await
        .unwrap();
    assert!(!raw.status.success());
    assert!(
        String::from_utf8_lossy(&raw.stderr).contains("NotFound"),
        "{raw:?}"
    );
    let group: Value = serde_json::from_str(
        &off.kubectl_ok(&["get", "--raw", &format!("/apis/{GROUP}")])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        group["versions"],
        json!([{"groupVersion": "admissionregistration.k8s.io/v1", "version": "v1"}])
    );
    let err = policies(&off).list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );

    // The runtime config alone serves the API (the gate only adds the controller's role).
    let on = TestCluster::start_with_config(config(true, false))
        .await
        .unwrap();
    let list = policies(&on).list(&Default::default()).await.unwrap();
    assert!(list.items.is_empty());
    let role = on
        .kubectl(&[
            "get",
            "clusterrole",
            &format!("system:controller:{CONTROLLER}"),
        ])
        .await
        .unwrap();
    assert!(!role.status.success(), "no role without the gate");
}

#[tokio::test]
async fn discovery_lists_both_kinds() {
    let Some(c) = serving().await else { return };
    let list: Value = serde_json::from_str(
        &c.kubectl_ok(&["get", "--raw", &format!("/apis/{API}")])
            .await
            .unwrap(),
    )
    .unwrap();
    let find = |name: &str| -> Value {
        list["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {list}"))
    };
    let policy = find("validatingadmissionpolicies");
    assert_eq!(policy["kind"], "ValidatingAdmissionPolicy");
    assert_eq!(policy["namespaced"], false);
    assert_eq!(policy["singularName"], "validatingadmissionpolicy");
    assert_eq!(policy["categories"], json!(["api-extensions"]));
    assert!(policy.get("shortNames").is_none(), "{policy}");
    assert_eq!(
        policy["verbs"],
        json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    let status = find("validatingadmissionpolicies/status");
    assert_eq!(status["verbs"], json!(["get", "patch", "update"]));
    let binding = find("validatingadmissionpolicybindings");
    assert_eq!(binding["kind"], "ValidatingAdmissionPolicyBinding");
    assert_eq!(binding["namespaced"], false);
    assert_eq!(binding["categories"], json!(["api-extensions"]));
    let group: Value = serde_json::from_str(
        &c.kubectl_ok(&["get", "--raw", &format!("/apis/{GROUP}")])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(group["preferredVersion"]["version"], "v1");
    // kubectl's aggregated discovery too.
    let out = c
        .kubectl_ok(&["api-resources", "--api-group", GROUP, "-o", "wide"])
        .await
        .unwrap();
    let row = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not in\n{out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        row("validatingadmissionpolicies")[1..4],
        [API, "false", "ValidatingAdmissionPolicy"]
    );
    assert_eq!(
        row("validatingadmissionpolicybindings")[1..4],
        [API, "false", "ValidatingAdmissionPolicyBinding"]
    );
}

#[tokio::test]
async fn policies_are_watched() {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{WatchEvent, WatchParams};
    let Some(c) = serving().await else { return };
    let api = policies(&c);
    let rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap_or_default();
    let name = unique("watched");
    let mut events = api
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(
        &PostParams::default(),
        &object("ValidatingAdmissionPolicy", &name, policy_spec()),
    )
    .await
    .unwrap();
    let added = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(event) = events.try_next().await.unwrap() {
            if let WatchEvent::Added(o) = event {
                if o.metadata.name.as_deref() == Some(name.as_str()) {
                    return o;
                }
            }
        }
        panic!("the watch ended without the policy");
    })
    .await
    .expect("an ADDED event within 20 s");
    assert_eq!(as_json(&added)["metadata"]["generation"], 1);
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn defaults_generation_and_the_status_strategy() {
    let Some(c) = serving().await else { return };
    let api = policies(&c);
    let name = unique("replicas");
    let created = api
        .create(
            &PostParams::default(),
            &object("ValidatingAdmissionPolicy", &name, policy_spec()),
        )
        .await
        .unwrap();
    let v = as_json(&created);
    assert_eq!(v["metadata"]["generation"], 1);
    assert_eq!(v["spec"]["failurePolicy"], "Fail");
    let mc = &v["spec"]["matchConstraints"];
    assert_eq!(mc["matchPolicy"], "Equivalent");
    assert_eq!(mc["namespaceSelector"], json!({}));
    assert_eq!(mc["objectSelector"], json!({}));
    assert_eq!(mc["resourceRules"][0]["scope"], "*");
    assert_eq!(v["status"], json!({}));

    // Status on the main resource is ignored; a spec change bumps the generation.
    let patch = json!({"metadata": {"labels": {"team": "a"}},
                       "spec": {"validations": [{"expression": "object.spec.replicas <= 3"}]},
                       "status": {"observedGeneration": 7}});
    let updated = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    let v = as_json(&updated);
    assert_eq!(v["metadata"]["generation"], 2);
    assert_eq!(v["status"], json!({}));
    let relabelled = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(as_json(&relabelled)["metadata"]["generation"], 2);

    // The status controller's write: server-side apply of status, forced, by its manager.
    let status = json!({"apiVersion": API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {"team": "c"}},
        "spec": {"failurePolicy": "Ignore"},
        "status": {"observedGeneration": 2, "typeChecking": {"expressionWarnings": [
            {"fieldRef": "spec.validations[0].expression", "warning": "undefined field 'replicas'"}]}}});
    let pp = PatchParams::apply("validatingadmissionpolicy-status").force();
    let applied = api
        .patch_status(&name, &pp, &Patch::Apply(status))
        .await
        .unwrap();
    let v = as_json(&applied);
    assert_eq!(v["status"]["observedGeneration"], 2);
    assert_eq!(
        v["status"]["typeChecking"]["expressionWarnings"][0]["warning"],
        "undefined field 'replicas'"
    );
    assert_eq!(
        v["spec"]["failurePolicy"], "Fail",
        "status writes keep the spec"
    );
    assert_eq!(v["metadata"]["labels"]["team"], "b", "and the labels");
    assert_eq!(v["metadata"]["generation"], 2);
    let managers: Vec<(String, String)> = v["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or("").to_string(),
                m["subresource"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("validatingadmissionpolicy-status".into(), "status".into())),
        "{managers:?}"
    );
    // A later spec write keeps the status the controller wrote.
    let again = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"failurePolicy": "Ignore"}})),
        )
        .await
        .unwrap();
    let v = as_json(&again);
    assert_eq!(v["metadata"]["generation"], 3);
    assert_eq!(v["status"]["observedGeneration"], 2);

    // Bindings: defaults and a generation that follows the spec.
    let bapi = bindings(&c);
    let bname = unique("replicas-binding");
    let spec = json!({"policyName": name, "validationActions": ["Deny"],
                      "matchResources": {"resourceRules": [deployments_rule()]}});
    let b = bapi
        .create(
            &PostParams::default(),
            &object("ValidatingAdmissionPolicyBinding", &bname, spec),
        )
        .await
        .unwrap();
    let v = as_json(&b);
    assert_eq!(v["metadata"]["generation"], 1);
    assert_eq!(v["spec"]["matchResources"]["matchPolicy"], "Equivalent");
    assert!(v.get("status").is_none());
    let b = bapi
        .patch(
            &bname,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"validationActions": ["Warn", "Audit"]}})),
        )
        .await
        .unwrap();
    assert_eq!(as_json(&b)["metadata"]["generation"], 2);
    bapi.delete(&bname, &DeleteParams::default()).await.unwrap();
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn validation_messages_are_upstreams() {
    let Some(c) = serving().await else { return };
    let api = policies(&c);
    let cases: Vec<(Value, String)> = vec![
        (
            json!({"failurePolicy": "Sometimes", "matchConstraints": {"resourceRules": [deployments_rule()]},
                   "validations": [{"expression": "true"}]}),
            "spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"".into(),
        ),
        (
            json!({"validations": [{"expression": "true"}]}),
            "spec.matchConstraints: Required value".into(),
        ),
        (
            json!({"matchConstraints": {"resourceRules": [deployments_rule()]}}),
            "[spec.validations: Required value: validations or auditAnnotations must contain at least one item, spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item]".into(),
        ),
        (
            json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["*", "apps"], "apiVersions": ["v1"],
                   "operations": ["CREATE"], "resources": ["deployments"]}]},
                   "validations": [{"expression": "true"}]}),
            "spec.matchConstraints.resourceRules[0].apiGroups: Invalid value: []string{\"*\", \"apps\"}: if '*' is present, must not specify other API groups".into(),
        ),
        (
            json!({"matchConstraints": {"resourceRules": [deployments_rule()]},
                   "variables": [{"name": "if", "expression": "1"}],
                   "validations": [{"expression": "true", "message": "a\nb"}]}),
            "[spec.variables[0].name: Invalid value: \"if\": name is not a valid CEL identifier, spec.validations[0].message: Invalid value: \"a\\nb\": message must not contain line breaks]".into(),
        ),
        (
            json!({"matchConstraints": {"resourceRules": [deployments_rule()]},
                   "validations": [{"expression": "params.max > object.spec.replicas"},
                                   {"expression": "true", "messageExpression": "object.spec.replicas"}]}),
            "[spec.validations[0].expression: Invalid value: \"params.max > object.spec.replicas\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.max > object.spec.replicas\n | ^, spec.validations[1].messageExpression: Invalid value: \"object.spec.replicas\": must evaluate to string]".into(),
        ),
    ];
    for (i, (spec, want)) in cases.into_iter().enumerate() {
        let name = format!("invalid-{i}");
        let got = refused(&api, &object("ValidatingAdmissionPolicy", &name, spec)).await;
        assert_eq!(
            got,
            format!("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"{name}\" is invalid: {want}")
        );
    }
    let bapi = bindings(&c);
    let got = refused(
        &bapi,
        &object(
            "ValidatingAdmissionPolicyBinding",
            "b",
            json!({"policyName": "p", "validationActions": ["Deny", "Warn"],
                   "paramRef": {"name": "x"}, "matchResources": {"matchPolicy": "Loose"}}),
        ),
    )
    .await;
    assert_eq!(
        got,
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"b\" is invalid: [spec.paramRef.parameterNotFoundAction: Required value, spec.matchResouces.matchPolicy: Unsupported value: \"Loose\": supported values: \"Equivalent\", \"Exact\", spec.validationActions: Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)]"
    );
}

#[tokio::test]
async fn kubectl_get_prints_upstreams_columns() {
    let Some(c) = serving().await else { return };
    let name = unique("params");
    let mut spec = policy_spec();
    spec["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    policies(&c)
        .create(
            &PostParams::default(),
            &object("ValidatingAdmissionPolicy", &name, spec),
        )
        .await
        .unwrap();
    let out = c
        .kubectl_ok(&[
            "get",
            "validatingadmissionpolicies.v1beta1.admissionregistration.k8s.io",
            &name,
        ])
        .await
        .unwrap();
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]);
    assert_eq!(lines[1][..3], [name.as_str(), "1", "v1/ConfigMap"]);

    let bname = unique("params-binding");
    bindings(&c)
        .create(
            &PostParams::default(),
            &object(
                "ValidatingAdmissionPolicyBinding",
                &bname,
                json!({"policyName": name, "validationActions": ["Audit"],
                       "paramRef": {"name": "limits", "parameterNotFoundAction": "Allow"}}),
            ),
        )
        .await
        .unwrap();
    let out = c
        .kubectl_ok(&[
            "get",
            "validatingadmissionpolicybindings.v1beta1.admissionregistration.k8s.io",
            &bname,
        ])
        .await
        .unwrap();
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "POLICYNAME", "PARAMREF", "AGE"]);
    assert_eq!(lines[1][..3], [bname.as_str(), name.as_str(), "*/limits"]);
    let _ = bindings(&c).delete(&bname, &DeleteParams::default()).await;
    let _ = policies(&c).delete(&name, &DeleteParams::default()).await;
}

#[tokio::test]
async fn the_gate_gives_the_status_controller_its_role() {
    let Some(c) = serving().await else { return };
    let role_name = format!("system:controller:{CONTROLLER}");
    let role: Value = serde_json::from_str(
        &c.kubectl_ok(&["get", "clusterrole", &role_name, "-o", "json"])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        role["rules"],
        json!([
            {"verbs": ["get", "list", "watch"], "apiGroups": [GROUP], "resources": ["validatingadmissionpolicies"]},
            {"verbs": ["get", "patch", "update"], "apiGroups": [GROUP], "resources": ["validatingadmissionpolicies/status"]},
            {"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]},
        ])
    );
    let account = format!("system:serviceaccount:kube-system:{CONTROLLER}");
    for (verb, resource, subresource, allowed) in [
        ("watch", "validatingadmissionpolicies", "", "yes"),
        ("patch", "validatingadmissionpolicies", "status", "yes"),
        ("update", "validatingadmissionpolicies", "", "no"),
        ("list", "validatingadmissionpolicybindings", "", "no"),
    ] {
        let resource = format!("{resource}.{GROUP}");
        let mut args = vec!["auth", "can-i", verb, &resource, "--as", &account];
        if !subresource.is_empty() {
            args.extend(["--subresource", subresource]);
        }
        let out = c.kubectl(&args).await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            allowed,
            "{verb} {resource} {subresource}"
        );
    }
}

/// A client acting as `user` (in `system:authenticated`), through the admin's impersonation.
async fn acting_as(c: &TestCluster, user: &str) -> kube::Client {
    let yaml = std::fs::read_to_string(&c.kubeconfig).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.auth_info.impersonate = Some(user.to_string());
    kube::Client::try_from(cfg).unwrap()
}

#[tokio::test]
async fn writers_must_be_able_to_read_the_parameters() {
    let Some(c) = serving().await else { return };
    let user = unique("policy-writer");
    let role = unique("policy-writer");
    let rules = json!([{"verbs": ["create", "get"], "apiGroups": [GROUP],
                        "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"]}]);
    let role_yaml = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                           "metadata": {"name": role}, "rules": rules});
    let binding_yaml = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]});
    for o in [&role_yaml, &binding_yaml] {
        c.kubectl_stdin(&["create", "-f", "-"], &o.to_string())
            .await
            .unwrap();
    }
    let as_writer = acting_as(&c, &user).await;
    let api: Api<DynamicObject> = Api::all_with(
        as_writer,
        &resource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    );
    let name = unique("with-params");
    let mut spec = policy_spec();
    spec["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    let o = object("ValidatingAdmissionPolicy", &name, spec);
    let message = refused(&api, &o).await;
    assert_eq!(
        message,
        format!("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"{name}\" is invalid: spec.paramKind: Forbidden: user &{{{user}  [system:authenticated] map[]}} must have \"get\" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)")
    );
    // Allowed to read every ConfigMap, the writer may create it.
    let reader = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{role}-cm")},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]});
    let reader_binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{role}-cm")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{role}-cm")},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]});
    for o in [&reader, &reader_binding] {
        c.kubectl_stdin(&["create", "-f", "-"], &o.to_string())
            .await
            .unwrap();
    }
    rkcm_conformance::wait_for(
        "the policy created",
        std::time::Duration::from_secs(10),
        || {
            let (api, o) = (api.clone(), o.clone());
            async move { Ok(api.create(&PostParams::default(), &o).await.ok()) }
        },
    )
    .await
    .unwrap();
    let _ = policies(&c).delete(&name, &DeleteParams::default()).await;
    for (kind, n) in [
        ("clusterrolebinding", role.clone()),
        ("clusterrole", role.clone()),
        ("clusterrolebinding", format!("{role}-cm")),
        ("clusterrole", format!("{role}-cm")),
    ] {
        let _ = c.kubectl(&["delete", kind, &n]).await;
    }
}

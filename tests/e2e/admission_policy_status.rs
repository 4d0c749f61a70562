//! End-to-end tests of validatingadmissionpolicy-status-controller (feature gate
//! `ValidatingAdmissionPolicy`, off by default in 1.29, as `admissionregistration.k8s.io/v1beta1`
//! is): the real `rkcm launcher` with `--feature-gates=ValidatingAdmissionPolicy=true`, on
//! kube-sim started with the matching `--runtime-config` and `--feature-gates` (or the real
//! cluster named by `RKCM_TEST_KUBECONFIG`, skipped when it does not serve the API, saying
//! so). Policies are written with kubectl and their status read back with kubectl.

mod common;

use common::*;
use rkcm_conformance::TestCluster;
use serde_json::{json, Value};

const API: &str = "admissionregistration.k8s.io/v1beta1";
const MANAGER: &str = "validatingadmissionpolicy-status";

async fn gated_cluster() -> TestCluster {
    TestCluster::start_with_config(kube_sim::Config {
        runtime_config: format!("{API}=true"),
        feature_gates: "ValidatingAdmissionPolicy=true".into(),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// The launcher with only this controller, or `None` (the test skipped) when the cluster
/// does not serve the API.
async fn stack() -> Option<LauncherStack> {
    let cluster = gated_cluster().await;
    if !cluster.serves(API).await {
        println!("skipped: the cluster does not serve {API} (kube-apiserver needs --runtime-config={API}=true and --feature-gates=ValidatingAdmissionPolicy=true)");
        return None;
    }
    Some(
        LauncherStack::start_with_nodes(
            cluster,
            &[
                "--controllers=validatingadmissionpolicy-status-controller",
                "--feature-gates=ValidatingAdmissionPolicy=true",
            ],
            None,
        )
        .await,
    )
}

fn policy(name: &str, rules: Value, validations: Value) -> String {
    json!({"apiVersion": API, "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": name},
           "spec": {"failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": rules},
                    "validations": validations}})
    .to_string()
}

fn deployments_rule() -> Value {
    json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["deployments"]}])
}

/// The policy once its status has observed `generation`.
async fn observed(stack: &LauncherStack, name: &str, generation: i64) -> Value {
    stack
        .wait(
            &format!("status.observedGeneration {generation} on policy {name}"),
            || async {
                let out = stack
                    .cluster
                    .kubectl_ok(&[
                        "get",
                        "validatingadmissionpolicies.v1beta1.admissionregistration.k8s.io",
                        name,
                        "-o",
                        "json",
                        "--show-managed-fields",
                    ])
                    .await?;
                let policy: Value = serde_json::from_str(&out)?;
                Ok((policy["status"]["observedGeneration"] == generation).then_some(policy))
            },
        )
        .await
}

fn warnings(policy: &Value) -> Vec<(String, String)> {
    policy["status"]["typeChecking"]["expressionWarnings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            (
                w["fieldRef"].as_str().unwrap_or_default().to_string(),
                w["warning"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn suffix() -> String {
    kube_sim::api::random_suffix(6)
}

#[tokio::test(flavor = "multi_thread")]
async fn type_errors_become_warnings_and_clear_when_fixed() {
    let Some(stack) = stack().await else {
        return;
    };
    let name = format!("e2e-replicas-{}", suffix());
    stack
        .kubectl_stdin(
            &["create", "-f", "-"],
            &policy(
                &name,
                deployments_rule(),
                json!([{"expression": "object.spec.replicas <= 5"},
                       {"expression": "object.spec.replicass <= 5",
                        "messageExpression": "'replicas: ' + object.spec.replicas"}]),
            ),
        )
        .await;

    // Check 1: the misspelt field and the int added to a string are warned about, named
    // by field path, in cel-go's words; the good expression is not.
    let checked = observed(&stack, &name, 1).await;
    assert_eq!(
        warnings(&checked),
        vec![
            (
                "spec.validations[1].expression".to_string(),
                "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n | object.spec.replicass <= 5\n | ...........^\n".to_string()
            ),
            (
                "spec.validations[1].messageExpression".to_string(),
                "apps/v1, Kind=Deployment: ERROR: <input>:1:14: found no matching overload for '_+_' applied to '(string, int)'\n | 'replicas: ' + object.spec.replicas\n | .............^\n".to_string()
            ),
        ],
        "{checked}"
    );
    // Written by a forced apply of the status subresource under upstream's field manager.
    let applied = checked["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| {
            m["manager"] == MANAGER && m["operation"] == "Apply" && m["subresource"] == "status"
        });
    assert!(applied, "{checked}");

    // Check 2: a corrected spec is a new generation, checked again, without warnings.
    stack
        .kubectl_stdin(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            &policy(
                &name,
                deployments_rule(),
                json!([{"expression": "object.spec.replicas <= 5"},
                       {"expression": "object.spec.replicas <= 5",
                        "messageExpression": "'replicas: ' + string(object.spec.replicas)"}]),
            ),
        )
        .await;
    let fixed = observed(&stack, &name, 2).await;
    assert!(warnings(&fixed).is_empty(), "{fixed}");
    assert_eq!(fixed["status"]["typeChecking"], json!({}), "{fixed}");
    stack
        .kubectl(&[
            "delete",
            "validatingadmissionpolicies.v1beta1.admissionregistration.k8s.io",
            &name,
        ])
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_matched_kind_is_checked_and_params_follow_their_kind() {
    let Some(stack) = stack().await else {
        return;
    };
    // Check 3: a policy on Deployments and ReplicaSets gets one text per kind, joined.
    let both = format!("e2e-both-{}", suffix());
    stack
        .kubectl_stdin(
            &["create", "-f", "-"],
            &policy(
                &both,
                json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                        "resources": ["replicasets", "deployments"]}]),
                json!([{"expression": "object.spec.strategy.type == 'Recreate'"}]),
            ),
        )
        .await;
    let checked = observed(&stack, &both, 1).await;
    let warnings_of_both = warnings(&checked);
    assert_eq!(warnings_of_both.len(), 1, "{checked}");
    assert_eq!(
        warnings_of_both[0].1,
        "apps/v1, Kind=ReplicaSet: ERROR: <input>:1:12: undefined field 'strategy'\n | object.spec.strategy.type == 'Recreate'\n | ...........^\n",
        "{checked}"
    );

    // Check 4: with a ConfigMap paramKind, `params` is a ConfigMap: its data checks, a
    // field ConfigMaps lack does not.
    let params = format!("e2e-params-{}", suffix());
    let body = json!({"apiVersion": API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": params},
        "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                 "matchConstraints": {"resourceRules": deployments_rule()},
                 "validations": [{"expression": "object.spec.replicas <= int(params.data.limit)"},
                                 {"expression": "params.spec.limit > 1"}]}});
    stack
        .kubectl_stdin(&["create", "-f", "-"], &body.to_string())
        .await;
    let checked = observed(&stack, &params, 1).await;
    assert_eq!(
        warnings(&checked),
        vec![(
            "spec.validations[1].expression".to_string(),
            "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'spec'\n | params.spec.limit > 1\n | ......^\n".to_string()
        )],
        "{checked}"
    );

    // Check 5: wildcard rules give no kind to check against, so nothing is warned about,
    // whatever the expressions say; the generation is still observed.
    let wildcard = format!("e2e-wildcard-{}", suffix());
    stack
        .kubectl_stdin(
            &["create", "-f", "-"],
            &policy(
                &wildcard,
                json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE"],
                        "resources": ["*"]}]),
                json!([{"expression": "object.no.such.field == 1"}]),
            ),
        )
        .await;
    let checked = observed(&stack, &wildcard, 1).await;
    assert!(warnings(&checked).is_empty(), "{checked}");
    for name in [&both, &params, &wildcard] {
        stack
            .kubectl(&[
                "delete",
                "validatingadmissionpolicies.v1beta1.admissionregistration.k8s.io",
                name,
            ])
            .await;
    }
}

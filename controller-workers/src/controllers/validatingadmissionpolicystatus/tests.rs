use k8s_openapi::api::admissionregistration::v1beta1::{
    MatchResources, NamedRuleWithOperations, ParamKind, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicySpec, ValidatingAdmissionPolicyStatus, Validation,
};
use rkcm_proto::v1::ResourceInfo;
use serde_json::json;

use super::typecheck::{params_gvk, types_to_check, ExpressionWarning, Gvk, RestMapping};
use super::{needs_check, status_apply};

fn info(group: &str, version: &str, resource: &str, kind: &str) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        kind: kind.into(),
        namespaced: true,
        verbs: vec!["get".into()],
    }
}

fn mapping() -> RestMapping {
    RestMapping::new(vec![
        info("", "v1", "pods", "Pod"),
        info("", "v1", "pods/status", "Pod"),
        info("", "v1", "configmaps", "ConfigMap"),
        info("apps", "v1", "deployments", "Deployment"),
        info("apps", "v1", "replicasets", "ReplicaSet"),
        info("apps", "v1", "statefulsets", "StatefulSet"),
        info("batch", "v1", "jobs", "Job"),
    ])
}

fn rule(groups: &[&str], versions: &[&str], resources: &[&str]) -> NamedRuleWithOperations {
    let list = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    NamedRuleWithOperations {
        api_groups: list(groups),
        api_versions: list(versions),
        resources: list(resources),
        operations: Some(vec!["CREATE".into()]),
        ..Default::default()
    }
}

fn spec(rules: Vec<NamedRuleWithOperations>) -> ValidatingAdmissionPolicySpec {
    ValidatingAdmissionPolicySpec {
        match_constraints: Some(MatchResources {
            resource_rules: Some(rules),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

#[test]
fn kinds_to_check_follow_upstreams_rules() {
    let cases: Vec<(&str, Vec<NamedRuleWithOperations>, Vec<Gvk>, bool)> = vec![
        ("no rules", vec![], vec![], false),
        (
            "one kind",
            vec![rule(&["apps"], &["v1"], &["deployments"])],
            vec![gvk("apps", "v1", "Deployment")],
            false,
        ),
        (
            "sorted by group, version, kind; core first",
            vec![rule(
                &["apps", ""],
                &["v1"],
                &["replicasets", "deployments", "pods"],
            )],
            vec![
                gvk("", "v1", "Pod"),
                gvk("apps", "v1", "Deployment"),
                gvk("apps", "v1", "ReplicaSet"),
            ],
            true,
        ),
        (
            "wildcard group",
            vec![rule(&["*"], &["v1"], &["pods"])],
            vec![],
            false,
        ),
        (
            "wildcard version",
            vec![rule(&[""], &["*"], &["pods"])],
            vec![],
            false,
        ),
        (
            "wildcard resources and subresources skipped",
            vec![rule(&[""], &["v1"], &["*", "pods/status", "pods"])],
            vec![gvk("", "v1", "Pod")],
            false,
        ),
        (
            "singular names map too",
            vec![rule(&["batch"], &["v1"], &["job"])],
            vec![gvk("batch", "v1", "Job")],
            false,
        ),
        (
            "unknown resource is a miss",
            vec![rule(&["example.com"], &["v1"], &["widgets"])],
            vec![],
            true,
        ),
        (
            "duplicates across rules once",
            vec![
                rule(&["apps"], &["v1"], &["deployments"]),
                rule(&["apps"], &["v1"], &["deployments"]),
            ],
            vec![gvk("apps", "v1", "Deployment")],
            false,
        ),
    ];
    for (name, rules, want, want_missed) in cases {
        let (got, missed) = types_to_check(&spec(rules), &mapping());
        assert_eq!(got, want, "{name}");
        assert_eq!(missed, want_missed, "{name}");
    }
}

#[test]
fn at_most_ten_kinds_from_one_rule() {
    let resources: Vec<ResourceInfo> = (0..12)
        .map(|i| {
            info(
                "example.com",
                "v1",
                &format!("r{i:02}"),
                &format!("K{i:02}"),
            )
        })
        .collect();
    let names: Vec<String> = (0..12).map(|i| format!("r{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (got, _) = types_to_check(
        &spec(vec![rule(&["example.com"], &["v1"], &names)]),
        &RestMapping::new(resources),
    );
    assert_eq!(got.len(), 10);
    assert_eq!(got[9].kind, "K09");
}

#[test]
fn params_kind_parses_as_a_group_version() {
    let with = |api_version: &str, kind: &str| ValidatingAdmissionPolicySpec {
        param_kind: Some(ParamKind {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        ..Default::default()
    };
    assert_eq!(params_gvk(&ValidatingAdmissionPolicySpec::default()), None);
    assert_eq!(
        params_gvk(&with("v1", "ConfigMap")),
        Some(gvk("", "v1", "ConfigMap"))
    );
    assert_eq!(
        params_gvk(&with("example.com/v1", "Limits")),
        Some(gvk("example.com", "v1", "Limits"))
    );
    assert_eq!(params_gvk(&with("a/b/c", "X")), None);
    assert_eq!(params_gvk(&with("", "")), None);
}

#[test]
fn checks_only_generations_not_yet_observed() {
    let policy = |generation: Option<i64>, observed: Option<i64>| ValidatingAdmissionPolicy {
        metadata: kube::api::ObjectMeta {
            generation,
            ..Default::default()
        },
        status: observed.map(|o| ValidatingAdmissionPolicyStatus {
            observed_generation: Some(o),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(needs_check(&policy(Some(1), None)));
    assert!(needs_check(&policy(Some(2), Some(1))));
    assert!(!needs_check(&policy(Some(2), Some(2))));
    assert!(!needs_check(&policy(None, None)));
}

#[test]
fn status_apply_is_upstreams_configuration() {
    assert_eq!(
        status_apply("p", 3, &[]),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"},
            "status": {"observedGeneration": 3, "typeChecking": {}},
        })
    );
    let warning = ExpressionWarning {
        field_ref: "spec.validations[0].expression".into(),
        warning: "w".into(),
    };
    assert_eq!(
        status_apply("p", 1, &[warning])["status"]["typeChecking"],
        json!({"expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": "w"}]})
    );
}

fn validation(expression: &str, message_expression: Option<&str>) -> Validation {
    Validation {
        expression: expression.into(),
        message_expression: message_expression.map(str::to_string),
        ..Default::default()
    }
}

/// The warnings the checker gives for expressions against apps/v1 Deployments, with the
/// schema from the built-in definitions.
fn deployment_warnings(validations: Vec<Validation>) -> Vec<ExpressionWarning> {
    let mut spec = spec(vec![rule(&["apps"], &["v1"], &["deployments"])]);
    spec.validations = Some(validations);
    let schema = rkcm_openapi::builtin()
        .resolve("apps", "v1", "Deployment")
        .expect("Deployment is built in");
    let ty = rkcm_cel::schema_decl_type(&schema, true, "Deployment1");
    super::typecheck::Context::for_test(vec![(gvk("apps", "v1", "Deployment"), ty)], None)
        .warnings(&spec)
}

#[test]
fn warnings_name_the_expression_and_carry_cel_gos_text() {
    let warnings = deployment_warnings(vec![
        validation(
            "object.spec.replicas > 1",
            Some("'too many: ' + string(object.spec.replicas)"),
        ),
        validation("object.spec.replicass > 1", None),
        validation(
            "object.metadata.name == 1",
            Some("object.spec.replicas + 'x'"),
        ),
    ]);
    let expected = vec![
        ExpressionWarning {
            field_ref: "spec.validations[1].expression".into(),
            warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n | object.spec.replicass > 1\n | ...........^\n".into(),
        },
        ExpressionWarning {
            field_ref: "spec.validations[2].expression".into(),
            warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(string, int)'\n | object.metadata.name == 1\n | .....................^\n".into(),
        },
        ExpressionWarning {
            field_ref: "spec.validations[2].messageExpression".into(),
            warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_+_' applied to '(int, string)'\n | object.spec.replicas + 'x'\n | .....................^\n".into(),
        },
    ];
    assert_eq!(warnings, expected);
}

#[test]
fn params_are_undeclared_without_a_params_type() {
    let warnings =
        deployment_warnings(vec![validation("object.spec.replicas <= params.max", None)]);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0]
            .warning
            .contains("undeclared reference to 'params' (in container '')"),
        "{warnings:?}"
    );
}

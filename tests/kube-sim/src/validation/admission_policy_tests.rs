use serde_json::{json, Value};

use super::super::{validate as validate_object, FieldCause};

const GROUP: &str = "admissionregistration.k8s.io";

fn causes(kind: &str, mut o: Value, old: Option<&Value>) -> Vec<String> {
    crate::admission_policies::apply_defaults(kind, &mut o);
    let found: Vec<FieldCause> = validate_object(GROUP, "v1beta1", kind, &o, old);
    found
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

fn rule() -> Value {
    json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
           "resources": ["deployments"]})
}

fn policy(spec: Value) -> Value {
    let mut p = json!({"metadata": {"name": "replicas"},
        "spec": {"matchConstraints": {"resourceRules": [rule()]},
                 "validations": [{"expression": "object.spec.replicas <= 5"}]}});
    if let (Some(base), Some(extra)) = (p["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    p
}

fn policy_causes(spec: Value) -> Vec<String> {
    causes("ValidatingAdmissionPolicy", policy(spec), None)
}

fn binding(spec: Value) -> Vec<String> {
    let o = json!({"metadata": {"name": "b"}, "spec": spec});
    causes("ValidatingAdmissionPolicyBinding", o, None)
}

#[test]
fn a_well_formed_policy_and_binding_pass() {
    assert!(policy_causes(json!({})).is_empty());
    assert!(policy_causes(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConditions": [{"name": "not-kube-system", "expression": "true"}],
        "variables": [{"name": "limit", "expression": "5"}],
        "auditAnnotations": [{"key": "high", "valueExpression": "'x'"}],
        "validations": [{"expression": "true", "message": "no", "reason": "Forbidden",
                         "messageExpression": "'too many'"}],
    }))
    .is_empty());
    assert!(binding(
        json!({"policyName": "replicas", "validationActions": ["Deny", "Audit"],
        "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"},
        "matchResources": {"resourceRules": [rule()]}})
    )
    .is_empty());
}

#[test]
fn policy_spec_rules_have_upstreams_paths_and_messages() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"failurePolicy": "Sometimes"}),
            vec!["spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\""],
        ),
        (
            json!({"matchConstraints": null}),
            vec!["spec.matchConstraints: Required value"],
        ),
        (
            json!({"matchConstraints": {"matchPolicy": "Loose"}}),
            vec![
                "spec.matchConstraints.matchPolicy: Unsupported value: \"Loose\": supported values: \"Equivalent\", \"Exact\"",
                "spec.matchConstraints.resourceRules: Required value",
            ],
        ),
        (
            json!({"validations": []}),
            vec![
                "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
                "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
            ],
        ),
        (
            json!({"validations": [{"expression": "  ", "message": "a\nb", "reason": "Gone", "messageExpression": " "}]}),
            vec![
                "spec.validations[0].expression: Required value: expression is not specified",
                "spec.validations[0].messageExpression: Invalid value: \" \": must be non-empty if specified",
                "spec.validations[0].message: Invalid value: \"a\\nb\": message must not contain line breaks",
                "spec.validations[0].reason: Unsupported value: \"Gone\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"",
            ],
        ),
        (
            json!({"paramKind": {"apiVersion": "a/b/c", "kind": "Config_Map"}}),
            vec![
                "spec.paramKind.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
                "spec.paramKind.kind: Invalid value: \"Config_Map\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ],
        ),
        (
            json!({"paramKind": {"apiVersion": "example.com/"}}),
            vec![
                "spec.paramKind.apiVersion: Invalid value: \"example.com/\": version must be specified",
                "spec.paramKind.kind: Required value",
            ],
        ),
        (
            json!({"variables": [{"name": "if", "expression": "1"}, {"name": " ", "expression": ""}]}),
            vec![
                "spec.variables[0].name: Invalid value: \"if\": name is not a valid CEL identifier",
                "spec.variables[1].name: Required value: name is not specified",
                "spec.variables[1].expression: Required value: expression is not specified",
            ],
        ),
        (
            json!({"matchConditions": [{"name": "a", "expression": "true"}, {"name": "a", "expression": ""},
                                       {"name": "not/ok/name", "expression": "true"}]}),
            vec![
                "spec.matchConditions[1].expression: Required value",
                "spec.matchConditions[1].name: Duplicate value: \"a\"",
                "spec.matchConditions[2].name: Invalid value: \"not/ok/name\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ],
        ),
        (
            json!({"auditAnnotations": [{"key": "k", "valueExpression": "'a'"}, {"key": "k", "valueExpression": ""}]}),
            vec![
                "spec.auditAnnotations[1].valueExpression: Required value: valueExpression is not specified",
                "spec.auditAnnotations[1].key: Duplicate value: \"k\"",
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(policy_causes(spec.clone()), want, "spec {spec}");
    }
}

#[test]
fn rules_follow_upstreams_wildcard_rules() {
    let with_rule = |r: Value| policy_causes(json!({"matchConstraints": {"resourceRules": [r]}}));
    assert_eq!(
        with_rule(json!({"apiGroups": ["*", "apps"], "apiVersions": [], "operations": ["*", "CREATE", "PATCH"],
                         "resources": ["*/*", "pods"], "scope": "Global", "resourceNames": ["a", "a", "b/c"]})),
        [
            "spec.matchConstraints.resourceRules[0].resourceNames[1]: Duplicate value: \"a\"",
            "spec.matchConstraints.resourceRules[0].resourceNames[2]: Invalid value: \"b/c\": may not contain '/'",
            "spec.matchConstraints.resourceRules[0].operations: Invalid value: []admissionregistration.OperationType{\"*\", \"CREATE\", \"PATCH\"}: if '*' is present, must not specify other operations",
            "spec.matchConstraints.resourceRules[0].operations[2]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
            "spec.matchConstraints.resourceRules[0].apiGroups: Invalid value: []string{\"*\", \"apps\"}: if '*' is present, must not specify other API groups",
            "spec.matchConstraints.resourceRules[0].apiVersions: Required value",
            "spec.matchConstraints.resourceRules[0].resources: Invalid value: []string{\"*/*\", \"pods\"}: if '*/*' is present, must not specify other resources",
            "spec.matchConstraints.resourceRules[0].scope: Unsupported value: \"Global\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
        ]
    );
    assert_eq!(
        with_rule(json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                         "resources": ["pods/*", "pods/status", "*/scale", "deployments/scale", "*", "pods"]})),
        [
            "spec.matchConstraints.resourceRules[0].resources[1]: Invalid value: \"pods/status\": if 'pods/*' is present, must not specify pods/status",
            "spec.matchConstraints.resourceRules[0].resources[3]: Invalid value: \"deployments/scale\": if '*/scale' is present, must not specify deployments/scale",
            "spec.matchConstraints.resourceRules[0].resources: Invalid value: []string{\"pods/*\", \"pods/status\", \"*/scale\", \"deployments/scale\", \"*\", \"pods\"}: if '*' is present, must not specify other resources without subresources",
        ]
    );
    // Upstream remembers only the last plain entry.
    assert!(with_rule(
        json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                             "resources": ["pods", "*"]})
    )
    .is_empty());
}

#[test]
fn binding_rules_have_upstreams_paths_and_messages() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({}),
            vec![
                "spec.policyName: Required value",
                "spec.validationActions: Required value: at least one validation action is required",
            ],
        ),
        (
            json!({"policyName": "Bad_Name", "validationActions": ["Deny", "Warn", "Deny", "Log"]}),
            vec![
                "spec.policyName: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.validationActions[2]: Duplicate value: \"Deny\"",
                "spec.validationActions[3]: Unsupported value: \"Log\": supported values: \"Audit\", \"Deny\", \"Warn\"",
                "spec.validationActions: Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\", \"Deny\", \"Log\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ],
        ),
        (
            json!({"policyName": "p", "validationActions": ["Audit"],
                   "paramRef": {"name": "x", "selector": {}, "parameterNotFoundAction": "Ignore"}}),
            vec![
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Unsupported value: \"Ignore\": supported values: \"Deny\", \"Allow\"",
            ],
        ),
        (
            json!({"policyName": "p", "validationActions": ["Warn"], "paramRef": {},
                   "matchResources": {"matchPolicy": "Loose"}}),
            vec![
                "spec.paramRef: Required value: one of name or selector must be specified",
                "spec.paramRef.parameterNotFoundAction: Required value",
                "spec.matchResouces.matchPolicy: Unsupported value: \"Loose\": supported values: \"Equivalent\", \"Exact\"",
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(binding(spec.clone()), want, "spec {spec}");
    }
}

#[test]
fn status_rules() {
    let mut p = policy(json!({}));
    p["status"] = json!({
    "typeChecking": {"expressionWarnings": [{"fieldRef": " ", "warning": ""},
                                            {"fieldRef": "spec.validations[0", "warning": "w"},
                                            {"fieldRef": "spec.validations[0].expression", "warning": "w"}]},
    "conditions": [
        {"type": "Ready", "status": "True", "reason": "Fine", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        {"type": "Ready", "status": "Maybe", "reason": "not ok", "lastTransitionTime": ""},
    ]});
    assert_eq!(
        causes("ValidatingAdmissionPolicy", p, None),
        [
            "status.typeChecking.expressionWarnings[0].warning: Required value",
            "status.typeChecking.expressionWarnings[0].fieldRef: Required value",
            "status.typeChecking.expressionWarnings[1].fieldRef: Invalid value: \"spec.validations[0\": invalid JSONPath: unterminated array",
            "status.conditions[1].type: Duplicate value: \"Ready\"",
            "status.conditions[1].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
            "status.conditions[1].lastTransitionTime: Required value: must be set",
            "status.conditions[1].reason: Invalid value: \"not ok\": a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
        ]
    );
}

#[test]
fn an_update_keeping_the_match_conditions_does_not_check_them_again() {
    // Stored before a stricter rule: upstream lets updates keep such match conditions.
    let old = policy(
        json!({"matchConditions": [{"name": "a", "expression": "true"},
                                                {"name": "a", "expression": "true"}]}),
    );
    let mut new = old.clone();
    new["spec"]["validations"][0]["message"] = json!("changed");
    assert!(causes("ValidatingAdmissionPolicy", new.clone(), Some(&old)).is_empty());
    new["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    assert_eq!(
        causes("ValidatingAdmissionPolicy", new, Some(&old)),
        ["spec.matchConditions[1].name: Duplicate value: \"a\""]
    );
}

#[test]
fn expressions_are_compiled_as_the_api_server_compiles_them() {
    let got = policy_causes(json!({
        "matchConditions": [{"name": "uses-variables", "expression": "variables.limit > 1"}],
        "variables": [{"name": "limit", "expression": "5"}],
        "validations": [
            {"expression": "params.max > 1"},
            {"expression": "variables.limit < 3", "messageExpression": "variables.limit"},
            {"expression": "variables.missing"},
        ],
        "auditAnnotations": [{"key": "limit", "valueExpression": "variables.limit"}],
    }));
    assert_eq!(
        got,
        [
            "spec.matchConditions[0].expression: Invalid value: \"variables.limit > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')\n | variables.limit > 1\n | ^",
            "spec.validations[0].expression: Invalid value: \"params.max > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.max > 1\n | ^",
            "spec.validations[1].messageExpression: Invalid value: \"variables.limit\": must evaluate to string",
            "spec.validations[2].expression: Invalid value: \"variables.missing\": compilation failed: ERROR: <input>:1:10: undefined field 'missing'\n | variables.missing\n | .........^",
            "spec.auditAnnotations[0].valueExpression: Invalid value: \"variables.limit\": must evaluate to one of [string null_type]",
        ]
    );
    // With a paramKind, params is declared (dyn), in match conditions too.
    assert!(policy_causes(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConditions": [{"name": "p", "expression": "params.data.enabled == 'true'"}],
        "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
                         "messageExpression": "'at most ' + params.data.max"}],
    }))
    .is_empty());
}

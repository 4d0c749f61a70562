use serde_json::{json, Value};

use super::*;
use crate::store::Store;

fn admin() -> User {
    User {
        name: "admin".into(),
        uid: String::new(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        extra: BTreeMap::new(),
    }
}

fn deployment(replicas: i64, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "team", "labels": labels},
           "spec": {"replicas": replicas}})
}

fn attrs<'a>(user: &'a User, object: Option<&'a Value>, op: &'a str) -> Attrs<'a> {
    Attrs {
        group: "apps",
        version: "v1",
        resource: "deployments",
        subresource: "",
        kind: "Deployment",
        operation: op,
        name: "web",
        namespace: "team",
        object,
        old_object: None,
        user,
        dry_run: false,
        options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
    }
}

fn policy(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("matchConstraints").is_none() {
        spec["matchConstraints"] = json!({"resourceRules": [{"apiGroups": ["apps"],
            "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["deployments"]}]});
    }
    let mut p = json!({"metadata": {"name": name, "uid": format!("uid-{name}-{}", spec)},
                       "spec": spec});
    crate::admission_policies::apply_defaults(crate::admission_policies::POLICY_KIND, &mut p);
    p
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy, "validationActions": ["Deny"]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    let mut b = json!({"metadata": {"name": name}, "spec": spec});
    crate::admission_policies::apply_defaults(crate::admission_policies::BINDING_KIND, &mut b);
    b
}

/// A store holding `objects` (resource key, object) and the namespace `team`.
fn store_with(objects: Vec<(ResKey, Value)>) -> Store {
    let store = Store::new(100);
    {
        let mut t = store.lock();
        t.put(
            &ResKey::new("", "namespaces"),
            json!({"metadata": {"name": "team", "labels": {"env": "prod"}}}),
        );
        for (k, o) in objects {
            t.put(&k, o);
        }
    }
    store
}

fn run(objects: Vec<(ResKey, Value)>, a: &Attrs) -> (ApiResult<()>, Vec<String>) {
    let store = store_with(objects);
    let registry = Registry::builtin();
    let t = store.lock();
    collect_warnings(|| admit(&t, &registry, None, a))
}

fn max_replicas() -> Value {
    policy(
        "max-replicas",
        json!({"validations": [{"expression": "object.spec.replicas <= 5"}]}),
    )
}

#[test]
fn a_failed_validation_is_refused_with_invalid() {
    let user = admin();
    let obj = deployment(7, json!({}));
    let (res, _) = run(
        vec![
            (policies_key(), max_replicas()),
            (bindings_key(), binding("b", "max-replicas", json!({}))),
        ],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    let err = res.expect_err("refused");
    assert_eq!((err.code, err.reason), (422, "Invalid"));
    let msg = "ValidatingAdmissionPolicy 'max-replicas' with binding 'b' denied request: failed expression: object.spec.replicas <= 5";
    assert_eq!(
        err.message,
        format!("deployments.apps \"web\" is forbidden: {msg}")
    );
    let details = err.details.as_deref().cloned().unwrap_or_default();
    assert_eq!(
        details,
        json!({"name": "web", "group": "apps", "kind": "deployments", "causes": [{"message": msg}]})
    );
    let small = deployment(3, json!({}));
    let (res, _) = run(
        vec![
            (policies_key(), max_replicas()),
            (bindings_key(), binding("b", "max-replicas", json!({}))),
        ],
        &attrs(&user, Some(&small), "CREATE"),
    );
    assert!(res.is_ok());
}

#[test]
fn no_binding_or_another_operation_does_nothing() {
    let user = admin();
    let obj = deployment(7, json!({}));
    let (res, _) = run(
        vec![(policies_key(), max_replicas())],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res.is_ok());
    let (res, _) = run(
        vec![
            (policies_key(), max_replicas()),
            (bindings_key(), binding("b", "max-replicas", json!({}))),
        ],
        &attrs(&user, None, "DELETE"),
    );
    assert!(res.is_ok());
    // A binding naming a policy that does not exist.
    let (res, _) = run(
        vec![(bindings_key(), binding("b", "missing", json!({})))],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res.is_ok());
}

#[test]
fn message_expressions_reasons_and_warnings() {
    let user = admin();
    let obj = deployment(7, json!({}));
    let p = policy(
        "p",
        json!({"validations": [{"expression": "object.spec.replicas <= 5",
            "messageExpression": "'replicas ' + string(object.spec.replicas) + ' > 5'",
            "message": "unused", "reason": "Forbidden"}]}),
    );
    let (res, _) = run(
        vec![
            (policies_key(), p.clone()),
            (bindings_key(), binding("b", "p", json!({}))),
        ],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    let err = res.expect_err("refused");
    assert_eq!((err.code, err.reason), (403, "Forbidden"));
    assert!(
        err.message.ends_with("denied request: replicas 7 > 5"),
        "{}",
        err.message
    );
    let warn = binding("w", "p", json!({"validationActions": ["Warn", "Audit"]}));
    let (res, warnings) = run(
        vec![(policies_key(), p), (bindings_key(), warn)],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res.is_ok());
    assert_eq!(
        warnings,
        vec![
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'w': replicas 7 > 5"
        ]
    );
}

#[test]
fn failure_policy_decides_on_errors() {
    let user = admin();
    let obj = deployment(7, json!({}));
    for (failure, refused) in [("Fail", true), ("Ignore", false)] {
        let p = policy(
            "p",
            json!({"failurePolicy": failure,
                   "validations": [{"expression": "object.spec.missing > 1"}]}),
        );
        let (res, _) = run(
            vec![
                (policies_key(), p),
                (bindings_key(), binding("b", "p", json!({}))),
            ],
            &attrs(&user, Some(&obj), "CREATE"),
        );
        assert_eq!(res.is_err(), refused, "{failure}");
        if let Err(e) = res {
            assert!(
                e.message.ends_with("denied request: expression 'object.spec.missing > 1' resulted in error: no such key: missing"),
                "{}",
                e.message
            );
            assert_eq!(e.code, 422);
        }
    }
}

#[test]
fn params_by_name_and_missing_params() {
    let user = admin();
    let obj = deployment(4, json!({}));
    let p = policy(
        "p",
        json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
               "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
                                "messageExpression": "'at most ' + params.data.max"}]}),
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "limits", "namespace": "team"}, "data": {"max": "3"}});
    let cms = ResKey::new("", "configmaps");
    let b = binding(
        "b",
        "p",
        json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}),
    );
    let (res, _) = run(
        vec![
            (policies_key(), p.clone()),
            (bindings_key(), b.clone()),
            (cms.clone(), cm),
        ],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res
        .expect_err("refused")
        .message
        .ends_with("denied request: at most 3"));
    let (res, _) = run(
        vec![(policies_key(), p.clone()), (bindings_key(), b)],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res.expect_err("refused").message.ends_with(
        "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    ));
    let allow = binding(
        "b",
        "p",
        json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Allow"}}),
    );
    let (res, _) = run(
        vec![(policies_key(), p), (bindings_key(), allow)],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res.is_ok());
}

#[test]
fn selectors_and_match_conditions() {
    let user = admin();
    let obj = deployment(7, json!({"tier": "web"}));
    let run_with = |b: Value, p: Value| {
        run(
            vec![(policies_key(), p), (bindings_key(), b)],
            &attrs(&user, Some(&obj), "CREATE"),
        )
        .0
        .is_err()
    };
    let ns =
        |env: &str| json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": env}}}});
    assert!(run_with(
        binding("b", "max-replicas", ns("prod")),
        max_replicas()
    ));
    assert!(!run_with(
        binding("b", "max-replicas", ns("dev")),
        max_replicas()
    ));
    let objsel = |op: &str| {
        json!({"matchResources": {"objectSelector": {"matchExpressions": [
        {"key": "tier", "operator": op, "values": ["web"]}]}}})
    };
    assert!(run_with(
        binding("b", "max-replicas", objsel("In")),
        max_replicas()
    ));
    assert!(!run_with(
        binding("b", "max-replicas", objsel("NotIn")),
        max_replicas()
    ));
    let conditioned = |cond: &str| {
        policy(
            "max-replicas",
            json!({"matchConditions": [{"name": "c", "expression": cond}],
                   "validations": [{"expression": "object.spec.replicas <= 5"}]}),
        )
    };
    let b = || binding("b", "max-replicas", json!({}));
    assert!(run_with(b(), conditioned("request.operation == 'CREATE'")));
    assert!(!run_with(
        b(),
        conditioned("request.userInfo.username == 'someone'")
    ));
    assert!(run_with(b(), conditioned("object.spec.nope")));
}

#[test]
fn variables_are_shared_and_their_errors_reported() {
    let user = admin();
    let obj = deployment(7, json!({}));
    let p = policy(
        "p",
        json!({"variables": [{"name": "r", "expression": "object.spec.replicas"},
                             {"name": "bad", "expression": "object.spec.nope"}],
               "validations": [{"expression": "variables.r <= 5"},
                               {"expression": "variables.bad == 1"}]}),
    );
    let (res, _) = run(
        vec![
            (policies_key(), p),
            (bindings_key(), binding("b", "p", json!({}))),
        ],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    // The first denial is reported.
    assert!(res
        .expect_err("refused")
        .message
        .ends_with("failed expression: variables.r <= 5"));
    let p = policy(
        "p",
        json!({"variables": [{"name": "bad", "expression": "object.spec.nope"}],
               "validations": [{"expression": "variables.bad == 1"}]}),
    );
    let (res, _) = run(
        vec![
            (policies_key(), p),
            (bindings_key(), binding("b", "p", json!({}))),
        ],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res.expect_err("refused").message.ends_with(
        "expression 'variables.bad == 1' resulted in error: composited variable \"bad\" fails to evaluate: no such key: nope"
    ));
}

#[test]
fn compilation_errors_and_unknown_param_kinds_are_configuration_errors() {
    let user = admin();
    let obj = deployment(1, json!({}));
    let p = policy(
        "p",
        json!({"validations": [{"expression": "object.spec.replicas"}]}),
    );
    let (res, _) = run(
        vec![
            (policies_key(), p),
            (bindings_key(), binding("b", "p", json!({}))),
        ],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res
        .expect_err("refused")
        .message
        .ends_with("denied request: compilation error: must evaluate to bool"));
    let p = policy(
        "p",
        json!({"paramKind": {"apiVersion": "example.com/v1", "kind": "Nope"},
               "validations": [{"expression": "true"}]}),
    );
    let (res, _) = run(
        vec![(policies_key(), p)],
        &attrs(&user, Some(&obj), "CREATE"),
    );
    assert!(res.expect_err("refused").message.ends_with(
        "ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Nope'"
    ));
}

#[test]
fn policies_and_bindings_are_never_checked() {
    let user = admin();
    let p = policy(
        "p",
        json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
               "operations": ["*"], "resources": ["*"]}]},
               "validations": [{"expression": "false"}]}),
    );
    let mut a = attrs(&user, None, "DELETE");
    a.group = GROUP;
    a.resource = "validatingadmissionpolicybindings";
    let (res, _) = run(
        vec![
            (policies_key(), p.clone()),
            (bindings_key(), binding("b", "p", json!({}))),
        ],
        &a,
    );
    assert!(res.is_ok());
    a.resource = "configmaps";
    a.group = "";
    let (res, _) = run(
        vec![
            (policies_key(), p),
            (bindings_key(), binding("b", "p", json!({}))),
        ],
        &a,
    );
    assert!(res.is_err());
}

#[test]
fn rules_match_scope_subresources_and_names() {
    let user = admin();
    let obj = deployment(1, json!({}));
    let mut a = attrs(&user, Some(&obj), "UPDATE");
    let rule = |resources: Value, scope: &str| {
        json!({"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["UPDATE"],
               "resources": resources, "scope": scope})
    };
    assert!(matching::rule_matches(
        &rule(json!(["deployments"]), "Namespaced"),
        &a
    ));
    assert!(!matching::rule_matches(
        &rule(json!(["deployments"]), "Cluster"),
        &a
    ));
    a.subresource = "status";
    assert!(!matching::rule_matches(
        &rule(json!(["deployments"]), "*"),
        &a
    ));
    assert!(matching::rule_matches(
        &rule(json!(["deployments/*"]), "*"),
        &a
    ));
    assert!(matching::rule_matches(&rule(json!(["*/status"]), "*"), &a));
}

#[test]
fn warnings_are_quoted_as_go_does() {
    let mut r = ApiResponse::json(200, json!({}));
    add_warning_headers(&mut r, vec!["say \"hi\"".into()]);
    assert_eq!(
        r.headers,
        vec![(
            "Warning".to_string(),
            "299 - \"say \\\"hi\\\"\"".to_string()
        )]
    );
}

fn user(name: &str) -> User {
    User {
        name: name.into(),
        uid: "u-1".into(),
        groups: vec!["system:authenticated".into()],
        extra: BTreeMap::new(),
    }
}

#[test]
fn the_authorizer_asks_rbac_for_the_requests_user() {
    let obj = deployment(1, json!({}));
    let p = policy(
        "p",
        json!({"validations": [
            {"expression": "authorizer.requestResource.check('create').allowed()",
             "messageExpression": "'user ' + request.userInfo.username + ' may not'"},
            {"expression": "!authorizer.serviceAccount('team', 'sa').group('').resource('pods').namespace('team').check('get').allowed()"}]}),
    );
    let objects = || {
        vec![
            (policies_key(), p.clone()),
            (bindings_key(), binding("b", "p", json!({}))),
        ]
    };
    let (res, _) = run(objects(), &attrs(&admin(), Some(&obj), "CREATE"));
    assert!(res.is_ok(), "{res:?}");
    let alice = user("alice");
    let (res, _) = run(objects(), &attrs(&alice, Some(&obj), "CREATE"));
    assert!(res
        .expect_err("refused")
        .message
        .ends_with("denied request: user alice may not"));
}

#[test]
fn messages_fall_back_from_unusable_message_expressions() {
    let user = admin();
    let obj = deployment(7, json!({}));
    for (expr, message, expected) in [
        ("'two\\nlines'", "the message", "the message"),
        ("'   '", "", "failed expression: object.spec.replicas <= 5"),
        ("object.spec.nope", " spaced ", "spaced"),
        ("'  trimmed  '", "unused", "trimmed"),
    ] {
        let p = policy(
            "p",
            json!({"validations": [{"expression": " object.spec.replicas <= 5 ",
                "messageExpression": expr, "message": message}]}),
        );
        let (res, _) = run(
            vec![
                (policies_key(), p),
                (bindings_key(), binding("b", "p", json!({}))),
            ],
            &attrs(&user, Some(&obj), "CREATE"),
        );
        let msg = res.expect_err("refused").message;
        assert!(
            msg.ends_with(&format!("denied request: {expected}")),
            "{expr}: {msg}"
        );
    }
}

#[test]
fn namespaces_are_matched_on_their_own_labels() {
    let user = admin();
    let p = policy(
        "p",
        json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
               "operations": ["DELETE"], "resources": ["namespaces"]}]},
               "validations": [{"expression": "namespaceObject == null && request.namespace == 'team'"},
                               {"expression": "false", "message": "protected"}]}),
    );
    let sel = |env: &str| {
        binding(
            "b",
            "p",
            json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": env}}}}),
        )
    };
    let ns = json!({"metadata": {"name": "team", "labels": {"env": "prod"}}});
    let registry = Registry::builtin();
    let def = registry.lookup("", "v1", "namespaces").expect("namespaces");
    let mut a = Attrs::new(&def, "", "DELETE", "team", "", &user);
    a.old_object = Some(&ns);
    let (res, _) = run(
        vec![(policies_key(), p.clone()), (bindings_key(), sel("prod"))],
        &a,
    );
    assert!(res
        .expect_err("refused")
        .message
        .ends_with("denied request: protected"));
    let (res, _) = run(vec![(policies_key(), p), (bindings_key(), sel("dev"))], &a);
    assert!(res.is_ok());
}

#[test]
fn match_condition_errors_follow_the_failure_policy() {
    let user = admin();
    let obj = deployment(7, json!({}));
    for (failure, refused) in [("Fail", true), ("Ignore", false)] {
        let p = policy(
            "p",
            json!({"failurePolicy": failure,
                   "matchConditions": [{"name": "a", "expression": "object.spec.nope == 1"},
                                       {"name": "b", "expression": "object.spec.other == 1"}],
                   "validations": [{"expression": "false"}]}),
        );
        let (res, _) = run(
            vec![
                (policies_key(), p),
                (bindings_key(), binding("b", "p", json!({}))),
            ],
            &attrs(&user, Some(&obj), "CREATE"),
        );
        assert_eq!(res.is_err(), refused);
        if let Err(e) = res {
            assert!(e.message.ends_with(
                "denied request: [expression 'object.spec.nope == 1' resulted in error: no such key: nope, expression 'object.spec.other == 1' resulted in error: no such key: other]"
            ), "{}", e.message);
        }
    }
}

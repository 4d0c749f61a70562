//! Tests of the admission environment: schema-typed conversion, escaped property names,
//! the authorizer library through a fake authorizer, and typed zero values.

use std::sync::{Arc, Mutex};

use super::{Activation, Authorizer, AuthzCheck, AuthzDecision, Value};
use crate::{compile, schema_decl_type, Env};

/// Allows `get` on deployments in `default` and the `/healthz` path; records every check.
#[derive(Default)]
struct FakeAuthorizer {
    seen: Mutex<Vec<AuthzCheck>>,
}

impl Authorizer for FakeAuthorizer {
    fn authorize(&self, check: &AuthzCheck) -> AuthzDecision {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(check.clone());
        }
        if check.verb == "explode" {
            return AuthzDecision {
                allowed: false,
                reason: String::new(),
                error: Some("webhook unreachable".into()),
            };
        }
        let allowed = check.path.as_deref() == Some("/healthz")
            || (check.resource == "deployments"
                && check.namespace == "default"
                && check.verb == "get");
        AuthzDecision {
            allowed,
            reason: if allowed { "RBAC: allowed" } else { "" }.into(),
            error: None,
        }
    }
}

fn admission_env() -> Env {
    let schema = serde_json::json!({"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "ratio": {"type": "number"},
        "weights": {"type": "array", "items": {"type": "number"}},
        "start": {"type": "string", "format": "date-time"},
        "timeout": {"type": "string", "format": "duration"},
        "blob": {"type": "string", "format": "byte"},
        "namespace": {"type": "string"},
        "x-y": {"type": "integer"}
    }}}});
    let object = schema_decl_type(&schema, true, "Widget1").expect("a CEL type");
    Env::admission(Some(object), None, false, true)
}

fn eval_admission(expr: &str, authorizer: Arc<FakeAuthorizer>) -> String {
    let object = serde_json::json!({"spec": {
        "ratio": 2, "weights": [1, 2.5], "start": "2024-01-02T03:04:05Z", "timeout": "90s",
        "blob": "aGk=", "namespace": "team-a", "x-y": 4}});
    let act = Activation::new()
        .with_json("object", &object)
        .with("oldObject", Value::Null)
        .with_json(
            "request",
            &serde_json::json!({"operation": "CREATE", "namespace": "default"}),
        )
        .with_json(
            "namespaceObject",
            &serde_json::json!({"metadata": {"name": "default"}}),
        )
        .with_authorizer(authorizer);
    match compile(&admission_env(), expr) {
        Err(issues) => format!("compile: {issues}"),
        Ok(c) => match c.evaluate(&act) {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        },
    }
}

#[test]
fn admission_expressions() {
    let cases = [
        ("object.spec.ratio", "2"),
        ("type(object.spec.ratio) == double", "true"),
        ("object.spec.weights.sum()", "3.5"),
        ("object.spec.start.getFullYear()", "2024"),
        ("object.spec.start + object.spec.timeout", "timestamp(\"2024-01-02T03:05:35Z\")"),
        ("object.spec.timeout.getSeconds()", "90"),
        ("string(object.spec.blob)", "\"hi\""),
        ("object.spec.__namespace__", "\"team-a\""),
        ("object.spec.x__dash__y", "4"),
        ("has(object.spec.x__dash__y)", "true"),
        ("request.operation == 'CREATE'", "true"),
        ("namespaceObject.metadata.name", "\"default\""),
        ("oldObject == null", "true"),
        ("object.spec.weights.filter(w, w > 2.0)", "[2.5]"),
        ("type(object.spec.weights[0]) == double", "true"),
        (
            "authorizer.group('apps').resource('deployments').namespace('default').check('get').allowed()",
            "true",
        ),
        (
            "authorizer.group('apps').resource('deployments').namespace('default').check('get').reason()",
            "\"RBAC: allowed\"",
        ),
        (
            "authorizer.group('apps').resource('deployments').namespace('kube-system').check('get').allowed()",
            "false",
        ),
        ("authorizer.path('/healthz').check('get').allowed()", "true"),
        ("authorizer.path(' ').check('get').allowed()", "error: path must not be empty"),
        (
            "authorizer.group('').resource('').check('get').allowed()",
            "error: resource must not be empty",
        ),
        (
            "authorizer.group('').resource('pods').check('explode').errored()",
            "true",
        ),
        (
            "authorizer.group('').resource('pods').check('explode').error()",
            "\"webhook unreachable\"",
        ),
        (
            "authorizer.serviceAccount('default', 'Bad_Name').path('/x').check('get').allowed()",
            "error: Invalid service account name",
        ),
        (
            "authorizer.serviceAccount('Bad.NS', 'sa').path('/x').check('get').allowed()",
            "error: Invalid service account namespace",
        ),
    ];
    let mut failures = Vec::new();
    for (expr, want) in cases {
        let got = eval_admission(expr, Arc::new(FakeAuthorizer::default()));
        if got != want {
            failures.push(format!("{expr}\n   want {want}\n    got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn authorizer_receives_the_check() {
    let authz = Arc::new(FakeAuthorizer::default());
    let got = eval_admission(
        "authorizer.serviceAccount('ns1', 'builder').group('apps').resource('deployments')\
         .subresource('scale').namespace('ns1').name('web').check('update').allowed()",
        authz.clone(),
    );
    assert_eq!(got, "false");
    let seen = authz.seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(
        seen,
        vec![AuthzCheck {
            service_account: Some(("ns1".into(), "builder".into())),
            path: None,
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            namespace: "ns1".into(),
            name: "web".into(),
            verb: "update".into(),
        }]
    );
}

#[test]
fn typed_empty_sums_and_missing_variables() {
    let env = Env::kubernetes_base();
    let run = |e: &str| match compile(&env, e) {
        Ok(c) => c
            .evaluate(&Activation::new())
            .map(|v| v.to_string())
            .unwrap_or_else(|e| e.to_string()),
        Err(i) => i.to_string(),
    };
    assert_eq!(run("dyn([]).sum()"), "0");
    let env2 = Env::kubernetes_base().with_variable("xs", crate::Type::list(crate::Type::Double));
    let c = compile(&env2, "xs.sum()").expect("compiles");
    let v = c.evaluate(&Activation::new().with_json("xs", &serde_json::json!([])));
    assert_eq!(v.map(|v| v.to_string()), Ok("0".to_string()));
    assert!(matches!(
        c.evaluate(&Activation::new().with_json("xs", &serde_json::json!([]))),
        Ok(Value::Double(_))
    ));
    let missing = c.evaluate(&Activation::new()).err().map(|e| e.to_string());
    assert_eq!(
        missing.as_deref(),
        Some("no such attribute(s): id: 1, names: [xs]")
    );
}

//! Checker and validator tests: cel-go's messages (worked out from cel-go v0.17.7's checker)
//! and output types, in the Kubernetes admission environment.

use crate::{compile, Env, ObjectType, Type};

fn obj(name: &str, fields: Vec<(&str, Type)>) -> Type {
    Type::object(ObjectType::new(
        name,
        fields.into_iter().map(|(n, t)| (n.to_string(), t)),
    ))
}

/// A small Deployment type named as `schema_decl_type` names it.
fn deployment() -> Type {
    let container = obj(
        "Deployment.spec.template.spec.containers.@idx",
        vec![("name", Type::String), ("image", Type::String)],
    );
    let pod_spec = obj(
        "Deployment.spec.template.spec",
        vec![("containers", Type::list(container))],
    );
    let template = obj("Deployment.spec.template", vec![("spec", pod_spec)]);
    let spec = obj(
        "Deployment.spec",
        vec![
            ("replicas", Type::Int),
            ("template", template),
            ("paused", Type::Bool),
        ],
    );
    let meta = obj(
        "Deployment.metadata",
        vec![
            ("name", Type::String),
            ("generateName", Type::String),
            ("labels", Type::map(Type::String, Type::String)),
            ("creationTimestamp", Type::Timestamp),
        ],
    );
    obj(
        "Deployment",
        vec![
            ("apiVersion", Type::String),
            ("kind", Type::String),
            ("metadata", meta),
            ("spec", spec),
        ],
    )
}

fn env() -> Env {
    Env::admission(Some(deployment()), None, false, true)
}

fn err(src: &str) -> String {
    match compile(&env(), src) {
        Ok(c) => panic!("{src}: compiled to {}", c.output_type()),
        Err(e) => e.to_string(),
    }
}

/// One error, displayed under `src` at `col` (1-based) of line 1.
fn at(src: &str, col: usize, msg: &str) -> String {
    format!(
        "ERROR: <input>:1:{col}: {msg}\n | {src}\n | {}^",
        ".".repeat(col - 1)
    )
}

#[test]
fn messages() {
    let cases: &[(&str, usize, &str)] = &[
        ("object.spec.replicass > 1", 12, "undefined field 'replicass'"),
        ("x", 1, "undeclared reference to 'x' (in container '')"),
        ("variables.foo", 1, "undeclared reference to 'variables' (in container '')"),
        ("foo(1)", 4, "undeclared reference to 'foo' (in container '')"),
        ("object.foo()", 11, "undeclared reference to 'foo' (in container '')"),
        ("1 + 'a'", 3, "found no matching overload for '_+_' applied to '(int, string)'"),
        ("1u + 1", 4, "found no matching overload for '_+_' applied to '(uint, int)'"),
        ("1 == 1.0", 3, "found no matching overload for '_==_' applied to '(int, double)'"),
        ("object.spec.replicas == null", 22, "found no matching overload for '_==_' applied to '(int, null)'"),
        ("object.metadata.name == 1", 22, "found no matching overload for '_==_' applied to '(string, int)'"),
        (
            "object.spec == object.metadata",
            13,
            "found no matching overload for '_==_' applied to '(Deployment.spec, Deployment.metadata)'",
        ),
        ("object.spec.replicas.size()", 26, "found no matching overload for 'size' applied to 'int.()'"),
        ("'a'.startsWith(1)", 15, "found no matching overload for 'startsWith' applied to 'string.(int)'"),
        ("true ? 1 : 'a'", 6, "found no matching overload for '_?_:_' applied to '(bool, int, string)'"),
        ("!1", 1, "found no matching overload for '!_' applied to '(int)'"),
        ("-'a'", 1, "found no matching overload for '-_' applied to '(string)'"),
        ("1 in ['a']", 3, "found no matching overload for '@in' applied to '(int, list(string))'"),
        ("[].size() + 'a'", 11, "found no matching overload for '_+_' applied to '(int, string)'"),
        ("[] + 1", 4, "found no matching overload for '_+_' applied to '(list(dyn), int)'"),
        ("sets.contains(1, 2)", 14, "found no matching overload for 'sets.contains' applied to '(int, int)'"),
        ("['a'].sum()", 10, "found no matching overload for 'sum' applied to 'list(string).()'"),
        ("quantity('1').sign()", 19, "found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'"),
        ("1 && true", 1, "expected type 'bool' but found 'int'"),
        ("true || 'a'", 9, "expected type 'bool' but found 'string'"),
        ("[1, 2].all(x, x)", 15, "expected type 'bool' but found 'int'"),
        ("[1, 2].map(x, x + 'a')", 17, "found no matching overload for '_+_' applied to '(int, string)'"),
        ("{'a': 1}.all(k, k > 1)", 19, "found no matching overload for '_>_' applied to '(string, int)'"),
        (
            "1.all(x, x)",
            1,
            "expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)",
        ),
        ("1.foo", 2, "type 'int' does not support field selection"),
        ("request.foo", 8, "undefined field 'foo'"),
        ("has(object.spec.foo)", 4, "undefined field 'foo'"),
        ("object.spec.template.spec.containers.exists(c, c.imagee == 'x')", 49, "undefined field 'imagee'"),
        ("authorizer.foo", 11, "unexpected failed resolution of 'kubernetes.authorization.Authorizer'"),
        ("Foo{}", 4, "undeclared reference to 'Foo' (in container '')"),
        ("int{}", 4, "'int' is not a message type"),
        (
            "kubernetes.NamespaceSpec{finalizers: 1}",
            36,
            "expected type of field 'finalizers' is 'list(string)' but provided type is 'int'",
        ),
        ("kubernetes.NamespaceSpec{other: 1}", 31, "undefined field 'other'"),
        ("[?1]", 3, "expected type 'optional(int)' but found 'int'"),
        // The 1.29 AST validators.
        ("duration('1x')", 10, "invalid duration argument"),
        ("duration(5)", 10, "invalid duration argument"),
        ("'a'.matches('[')", 13, "invalid matches argument"),
        // From cel-go's own checker tests.
        ("[].length", 3, "type 'list(_var0)' does not support field selection"),
        (
            "[].map(x, [].map(y, x in y && y in x))",
            33,
            "found no matching overload for '@in' applied to '(list(dyn), dyn)'",
        ),
        ("'string'.fun()", 13, "undeclared reference to 'fun' (in container '')"),
        ("undef()", 6, "undeclared reference to 'undef' (in container '')"),
        ("{?'key': 'hi'}", 10, "expected type 'optional(string)' but found 'string'"),
        ("matches('(', 'a')", 9, "invalid matches argument"),
        ("timestamp('2023-01-01')", 11, "invalid timestamp argument"),
        ("timestamp(253402300800)", 11, "invalid timestamp argument"),
        ("[1, 'a']", 5, "expected type 'int' but found 'string'"),
        ("{'a': 1, 'b': 'c'}", 15, "expected type 'int' but found 'string'"),
        ("{'a': 1, 2: 1}", 10, "expected type 'string' but found 'int'"),
        ("[1, dyn(2)]", 8, "expected type 'int' but found 'dyn'"),
    ];
    for (src, col, msg) in cases {
        assert_eq!(err(src), at(src, *col, msg), "{src}");
    }
}

#[test]
fn several_errors_sorted_by_location() {
    assert_eq!(
        err("b + a"),
        "ERROR: <input>:1:1: undeclared reference to 'b' (in container '')\n | b + a\n | ^\n\
         ERROR: <input>:1:5: undeclared reference to 'a' (in container '')\n | b + a\n | ....^"
    );
    // Errors do not cascade: `x` is an error, `x + 1` is still checked as int.
    assert_eq!(
        err("(x + 1) + 'a'"),
        "ERROR: <input>:1:2: undeclared reference to 'x' (in container '')\n | (x + 1) + 'a'\n | .^\n\
         ERROR: <input>:1:9: found no matching overload for '_+_' applied to '(int, string)'\n | (x + 1) + 'a'\n | ........^"
    );
}

#[test]
fn checker_locations_at_line_starts() {
    // cel-go's checker puts a node that starts a line at the end of the previous line.
    assert_eq!(
        err("object.spec.replicas > 1 &&\nfoo"),
        "ERROR: <input>:1:29: undeclared reference to 'foo' (in container '')\n | object.spec.replicas > 1 &&\n | ...........................^"
    );
    assert_eq!(
        err("object.spec.replicas > 1 &&\n  foo"),
        "ERROR: <input>:2:3: undeclared reference to 'foo' (in container '')\n |   foo\n | ..^"
    );
}

#[test]
fn output_types() {
    let cases: &[(&str, &str)] = &[
        ("object.spec.replicas", "int"),
        ("object.spec", "Deployment.spec"),
        ("object.metadata.labels['app'] == 'x'", "bool"),
        ("[1, 2]", "list(int)"),
        ("[]", "list(dyn)"),
        ("{'a': 1}", "map(string, int)"),
        ("{}.a", "dyn"),
        ("type(1)", "type(int)"),
        ("type(1) == int", "bool"),
        ("type(object) == string", "bool"),
        ("int('1') + 1", "int"),
        ("dyn(1) + 'a'", "string"),
        ("1 < 1.0 && 2u >= 1", "bool"),
        ("object.?spec", "optional(Deployment.spec)"),
        ("object.?spec.replicas.orValue(1)", "int"),
        ("object.metadata.labels[?'a']", "optional(string)"),
        ("optional.of(1).value() + 1", "int"),
        ("optional.none().hasValue()", "bool"),
        ("[?optional.of(1), 2]", "list(int)"),
        ("{?'a': optional.of(1)}", "map(string, int)"),
        (
            "object.spec.template.spec.containers.all(c, c.image.startsWith('x'))",
            "bool",
        ),
        (
            "object.spec.template.spec.containers.map(c, c.name)",
            "list(string)",
        ),
        (
            "object.spec.template.spec.containers.filter(c, c.name == 'a')",
            "list(Deployment.spec.template.spec.containers.@idx)",
        ),
        (
            "object.spec.template.spec.containers.exists_one(c, c.name == 'a')",
            "bool",
        ),
        ("has(object.spec.replicas)", "bool"),
        (
            "object.metadata.creationTimestamp < timestamp('2023-01-01T00:00:00Z')",
            "bool",
        ),
        ("duration('1h') + duration('30m')", "duration"),
        ("null == object.spec", "bool"),
        ("namespaceObject.metadata.UID", "string"),
        ("request.userInfo.groups.exists(g, g == 'x')", "bool"),
        ("request.options.anything", "dyn"),
        ("oldObject.spec.paused", "bool"),
        ("sets.contains([1], [2])", "bool"),
        ("url('https://x').getHost()", "string"),
        ("url('https://x').getQuery()", "map(string, list(string))"),
        ("quantity('1').isGreaterThan(quantity('2'))", "bool"),
        ("quantity('1').add(1).asInteger()", "int"),
        ("sign(quantity('1'))", "int"),
        (
            "authorizer.group('apps').resource('deployments').check('get').allowed()",
            "bool",
        ),
        (
            "authorizer.path('/healthz').check('get').reason()",
            "string",
        ),
        ("'abc'.find('b')", "string"),
        ("'abc'.findAll('b', 1)", "list(string)"),
        ("[1, 2].sum()", "int"),
        ("[1, 2].isSorted()", "bool"),
        ("[1, 2].indexOf(1)", "int"),
        ("'abc'.indexOf('b')", "int"),
        ("'a'.charAt(0) + 'a'.upperAscii()", "string"),
        ("['a'].join(',')", "string"),
        ("'%s, %d'.format(['a', 1])", "string"),
        ("strings.quote('a')", "string"),
        ("'a,b'.split(',')", "list(string)"),
        ("matches('a', 'b') && 'a'.matches('b')", "bool"),
        ("object.metadata.name.size() > 0", "bool"),
        ("timestamp(1).getFullYear()", "int"),
        ("duration('1s').getSeconds()", "int"),
        ("1 in [1, 2] && 'a' in {'a': 1}", "bool"),
        (
            "kubernetes.NamespaceSpec{finalizers: ['a']}",
            "kubernetes.NamespaceSpec",
        ),
        ("[[], [1]]", "list(list(int))"),
        ("google.protobuf.Timestamp", "type(timestamp)"),
        ("x.y", "dyn"),
    ];
    let env = env().with_variable("x", Type::Dyn);
    for (src, want) in cases {
        match compile(&env, src) {
            Ok(c) => assert_eq!(c.output_type().to_string(), *want, "{src}"),
            Err(e) => panic!("{src}: {e}"),
        }
    }
}

#[test]
fn admission_environment_variables() {
    // Without params: `params` is undeclared; without an authorizer: `authorizer` is.
    let env = Env::admission(None, None, false, false);
    assert!(compile(&env, "object.anything.at.all").is_ok());
    assert!(compile(&env, "params.x").is_err());
    assert!(compile(&env, "authorizer.path('/')").is_err());
    let env = Env::admission(None, None, true, false);
    assert_eq!(
        compile(&env, "params.x")
            .map(|c| c.output_type().to_string())
            .ok()
            .as_deref(),
        Some("dyn")
    );
    let params = obj(
        "ConfigMap",
        vec![("data", Type::map(Type::String, Type::String))],
    );
    let env = Env::admission(Some(deployment()), Some(params), true, false);
    assert_eq!(
        compile(&env, "params.data.x")
            .map(|c| c.output_type().to_string())
            .ok()
            .as_deref(),
        Some("string")
    );
    assert_eq!(
        compile(&env, "params.datum")
            .map_err(|e| e.to_string())
            .err()
            .as_deref(),
        Some("ERROR: <input>:1:7: undefined field 'datum'\n | params.datum\n | ......^")
    );
}

#[test]
fn parse_errors_come_first() {
    // A syntax error stops compilation before checking.
    let e = err("object.spec.replicass >");
    assert!(
        e.starts_with("ERROR: <input>:1:24: Syntax error: mismatched input '<EOF>'"),
        "{e}"
    );
    assert!(!e.contains("undefined field"), "{e}");
}

#[test]
fn deeply_nested_expressions_compile() {
    let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
    assert_eq!(
        compile(&env(), &deep)
            .map(|c| c.output_type().to_string())
            .ok()
            .as_deref(),
        Some("int")
    );
    let too_deep = format!("{}1{}", "[".repeat(260), "]".repeat(260));
    assert_eq!(
        err(&too_deep),
        "ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
    );
}

#[test]
fn new_expressions_environment() {
    // API validation compiles new expressions at compatibility version 1.28: strings v0, no
    // sets, no literal validators, homogeneous literals still required.
    let env = Env::kubernetes_base_for_new_expressions().with_variable("object", Type::Dyn);
    let e = |s: &str| compile(&env, s).err().map(|e| e.to_string());
    assert_eq!(
        e("'%s'.format(['a'])"),
        Some(at(
            "'%s'.format(['a'])",
            12,
            "undeclared reference to 'format' (in container '')"
        ))
    );
    // `sets` is then an undeclared variable, and `contains` the string function.
    assert_eq!(
        e("sets.contains([1], [1])").as_deref(),
        Some(
            "ERROR: <input>:1:1: undeclared reference to 'sets' (in container '')\n | sets.contains([1], [1])\n | ^\n\
             ERROR: <input>:1:14: found no matching overload for 'contains' applied to '!error!.(list(int), list(int))'\n | sets.contains([1], [1])\n | .............^"
        )
    );
    assert_eq!(e("duration('1x') > duration('1s')"), None);
    assert_eq!(e("['a'].join(',') == 'a' && 'a'.lowerAscii() == 'a'"), None);
    assert_eq!(
        e("[1, 'a']"),
        Some(at("[1, 'a']", 5, "expected type 'int' but found 'string'"))
    );
}

#[test]
fn very_long_chains_fail_cleanly_on_a_small_stack() {
    // cel-go's visitor limit (250) applies; the tree is not built deeper than that, so neither
    // parsing nor dropping it needs a large stack.
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let env = env().with_variable("a", Type::Dyn);
            let long_sum = format!("1{}", "+1".repeat(49_000));
            let long_select = format!("a{}", ".b".repeat(49_000));
            let long_and = format!("true{}", " && true".repeat(10_000));
            (
                compile(&env, &long_sum).err().map(|e| e.to_string()),
                compile(&env, &long_select).err().map(|e| e.to_string()),
                compile(&env, &long_and)
                    .map(|c| c.output_type().to_string())
                    .ok(),
            )
        })
        .expect("spawn");
    let (sum, select, and) = handle.join().expect("no stack overflow");
    let limit = "ERROR: <input>:-1:0: max recursion depth exceeded";
    assert_eq!(sum.as_deref(), Some(limit));
    assert_eq!(select.as_deref(), Some(limit));
    assert_eq!(and.as_deref(), Some("bool"));
}

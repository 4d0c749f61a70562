//! Table tests of the interpreter: operators, error absorption, overflow, macros, missing
//! keys, optional chaining and conversions.

use super::{Activation, Value};
use crate::{compile, Env};

/// Compiles in Kubernetes' base environment with `object` (dyn) and evaluates with `object`
/// bound to `json`: the value's display form, or `error: <message>`.
pub(super) fn run(expr: &str, json: serde_json::Value) -> String {
    let env = Env::kubernetes_base().with_variable("object", crate::Type::Dyn);
    let checked = match compile(&env, expr) {
        Ok(c) => c,
        Err(issues) => return format!("compile: {issues}"),
    };
    match checked.evaluate(&Activation::new().with_json("object", &json)) {
        Ok(v) => v.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

pub(super) fn table(cases: &[(&str, &str)]) {
    let obj = serde_json::json!({
        "spec": {"replicas": 3, "name": "web", "ratio": 1.5, "tags": ["a", "b"], "empty": null,
                 "labels": {"app": "web", "tier": "front"}},
        "n": 0
    });
    let mut failures = Vec::new();
    for (expr, want) in cases {
        let got = run(expr, obj.clone());
        if got != *want {
            failures.push(format!("{expr}\n   want {want}\n    got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn json_conversion_round_trips() {
    let j =
        serde_json::json!({"a": [1, 2.5, "x", true, null], "b": {"c": 18446744073709551615u64}});
    let v = Value::from_json(&j);
    assert_eq!(v.to_json(), Some(j));
    let b = Value::Bytes(b"hi!?".as_slice().into());
    assert_eq!(b.to_json(), Some(serde_json::json!("aGkhPw==")));
    assert_eq!(
        super::strings::base64_decode("aGkhPw==").as_deref(),
        Some(b"hi!?".as_slice())
    );
    assert_eq!(Value::Optional(None).to_json(), None);
}

#[test]
fn operators() {
    table(&[
        ("1 + 2 * 3", "7"),
        ("7 / 2", "3"),
        ("-7 % 3", "-1"),
        ("7u / 2u", "3u"),
        ("1.5 * 2.0", "3"),
        ("'ab' + 'cd'", "\"abcd\""),
        ("b'ab' + b'c'", "b\"abc\""),
        ("[1] + [2, 3]", "[1, 2, 3]"),
        ("9223372036854775807 + 1", "error: integer overflow"),
        ("-9223372036854775808 - 1", "error: integer overflow"),
        ("9223372036854775807 * 2", "error: integer overflow"),
        ("-(-9223372036854775808)", "error: integer overflow"),
        ("0u - 1u", "error: unsigned integer overflow"),
        ("1 / 0", "error: division by zero"),
        ("1 % 0", "error: modulus by zero"),
        ("1u / 0u", "error: division by zero"),
        ("1.0 / 0.0", "+Inf"),
        ("!true", "false"),
        ("-object.n", "0"),
        (
            "1 < 2 && 2u <= 3u && 'a' < 'b' && 2.5 > 1.0 && 3 >= 3",
            "true",
        ),
        ("1 < 1.5", "true"),
        ("dyn(2u) > 1", "true"),
        ("dyn(1) == 1.0", "true"),
        ("dyn(1) == 1u", "true"),
        ("dyn(1) == 'a'", "false"),
        ("[[1], [2]] == [[1], [2]]", "true"),
        ("[[1], [2]] == [[1], [3]]", "false"),
        ("[dyn(1), dyn('a')] == [dyn(1), dyn('a')]", "true"),
        ("dyn('a') + 1", "error: no such overload"),
        ("dyn(true) + dyn(true)", "error: no such overload: _+_"),
        ("dyn(1.5) % dyn(1.0)", "error: no such overload: _%_"),
        ("-dyn(true)", "error: no such overload"),
        ("dyn(1) < 'a'", "error: no such overload"),
        ("size(dyn(1))", "error: no such overload: size"),
        ("-9223372036854775807 / -1", "9223372036854775807"),
        ("(-9223372036854775807 - 1) / -1", "error: integer overflow"),
        ("(-9223372036854775807 - 1) % -1", "error: integer overflow"),
        (
            "18446744073709551615u + 1u",
            "error: unsigned integer overflow",
        ),
        (
            "5000000000u * 5000000000u",
            "error: unsigned integer overflow",
        ),
        ("{'a': 1} == {'a': 1}", "true"),
        ("{'a': 1} != {'a': 2}", "true"),
        ("2 in [1, 2]", "true"),
        ("'app' in object.spec.labels", "true"),
        ("'x' in object.spec.labels", "false"),
        ("true ? 1 : 2", "1"),
        ("object.n == 0 ? 'zero' : 'other'", "\"zero\""),
        ("[1, 2][1]", "2"),
        ("[1, 2][2]", "error: index out of bounds: 2"),
        ("{'a': 1}['a']", "1"),
        ("{1: 'x'}[dyn(1u)]", "\"x\""),
        ("{'a': 1}['b']", "error: no such key: b"),
        ("dyn(1)[0]", "error: no such key: 0"),
        (
            "[1, 2][dyn('x')]",
            "error: unsupported index type 'string' in list",
        ),
        (
            "[1, 2][dyn(1.5)]",
            "error: unsupported index value 1.5 in list",
        ),
        ("[1, 2][dyn(1.0)]", "2"),
        ("[1, 2][-1]", "error: index out of bounds: -1"),
        ("{'a': 1, 'a': 2}", "error: Failed with repeated key: a"),
        ("double('NaN') < 1.0", "error: NaN values cannot be ordered"),
    ]);
}

#[test]
fn error_absorption() {
    table(&[
        ("false && 1 / 0 == 1", "false"),
        ("1 / 0 == 1 && false", "false"),
        ("true || 1 / 0 == 1", "true"),
        ("1 / 0 == 1 || true", "true"),
        ("true && 1 / 0 == 1", "error: division by zero"),
        ("1 / 0 == 1 || false", "error: division by zero"),
        ("1 / 0 == 1 && 1 % 0 == 1", "error: division by zero"),
        ("object.missing == 1 || object.n == 0", "true"),
        ("object.missing == 1 ? 1 : 2", "error: no such key: missing"),
        ("size([1 / 0])", "error: division by zero"),
    ]);
}

#[test]
fn fields_and_presence() {
    table(&[
        ("object.spec.replicas", "3"),
        ("object.spec.replicass", "error: no such key: replicass"),
        ("object.spec.empty", "null"),
        ("object.spec.empty.x", "error: no such key: x"),
        ("has(object.spec.replicas)", "true"),
        ("has(object.spec.nope)", "false"),
        ("has(object.spec.empty.x)", "false"),
        ("object.spec.ratio > 1", "true"),
        ("object.spec.tags[0]", "\"a\""),
        ("object.spec.labels.app", "\"web\""),
    ]);
}

#[test]
fn macros() {
    table(&[
        ("[1, 2, 3].all(x, x > 0)", "true"),
        ("[1, 2, 3].all(x, x > 1)", "false"),
        ("[1, 2, 3].exists(x, x > 2)", "true"),
        ("[1, 2, 3].exists_one(x, x > 1)", "false"),
        ("[1, 2, 3].exists_one(x, x > 2)", "true"),
        ("[1, 2, 3].map(x, x * 2)", "[2, 4, 6]"),
        ("[1, 2, 3].map(x, x > 1, x * 2)", "[4, 6]"),
        ("[1, 2, 3].filter(x, x != 2)", "[1, 3]"),
        ("object.spec.labels.all(k, k.size() > 2)", "true"),
        (
            "object.spec.labels.map(k, object.spec.labels[k])",
            "[\"web\", \"front\"]",
        ),
        ("[0, 1].all(x, 1 / x > 0)", "error: division by zero"),
        ("[0, -1].all(x, 1 / x > 0)", "false"),
        ("[0, 1].exists(x, 1 / x > 0)", "true"),
        ("[1, 0].exists(x, 1 / x > 1)", "error: division by zero"),
        ("[[1], [2, 3]].all(l, l.all(x, x > 0))", "true"),
        (
            "dyn(1).all(x, x > 0)",
            "error: got 'types.Int', expected iterable type",
        ),
    ]);
}

#[test]
fn optionals() {
    table(&[
        ("object.?spec.?replicas", "optional.of(3)"),
        ("object.?spec.?nope", "optional.none()"),
        ("object.?nope.?deeper.orValue(7)", "7"),
        ("object.?spec.replicas.orValue(7)", "3"),
        ("object.spec.?replicas.hasValue()", "true"),
        ("object.?nope.hasValue()", "false"),
        ("optional.of(1).value()", "1"),
        (
            "optional.none().value()",
            "error: optional.none() dereference",
        ),
        ("optional.none().or(optional.of(2))", "optional.of(2)"),
        ("optional.of(1).or(optional.of(2))", "optional.of(1)"),
        ("optional.ofNonZeroValue('')", "optional.none()"),
        ("[1, 2][?5].orValue(0)", "0"),
        ("[1, 2][?1]", "optional.of(2)"),
        ("{'a': 1}[?'a']", "optional.of(1)"),
        ("[1, ?optional.none(), ?optional.of(3)]", "[1, 3]"),
        ("{'a': 1, ?'b': optional.none()}", "{\"a\": 1}"),
        ("optional.of(2).optMap(x, x * 2)", "optional.of(4)"),
        ("optional.none().optMap(x, x * 2)", "optional.none()"),
        (
            "optional.of(2).optFlatMap(x, optional.of(x + 1))",
            "optional.of(3)",
        ),
        ("optional.of([1, 2])[1]", "optional.of(2)"),
        ("optional.of({'k': 'v'})[?'x']", "optional.none()"),
        ("object.?spec.labels['app']", "optional.of(\"web\")"),
    ]);
}

#[test]
fn conversions() {
    table(&[
        ("int('42')", "42"),
        (
            "int('4x')",
            "error: type conversion error from 'string' to 'int'",
        ),
        (
            "int('99999999999999999999')",
            "error: type conversion error from 'string' to 'int'",
        ),
        (
            "int(dyn(true))",
            "error: type conversion error from 'bool' to 'int'",
        ),
        (
            "uint('x')",
            "error: type conversion error from 'string' to 'uint'",
        ),
        (
            "double('x')",
            "error: type conversion error from 'string' to 'double'",
        ),
        ("double('-inf') < 0.0", "true"),
        (
            "timestamp(dyn('yesterday'))",
            "error: type conversion error from 'string' to 'google.protobuf.Timestamp'",
        ),
        (
            "timestamp(dyn('0000-01-01T00:00:00Z'))",
            "error: timestamp overflow",
        ),
        ("timestamp(dyn(253402300800))", "error: timestamp overflow"),
        ("int(2.9)", "2"),
        ("int(-2.9)", "-2"),
        ("int(1e19)", "error: integer overflow"),
        ("int(18446744073709551615u)", "error: integer overflow"),
        ("uint(-1)", "error: unsigned integer overflow"),
        ("uint('7')", "7u"),
        ("double('1.5')", "1.5"),
        ("double(3)", "3"),
        ("string(1.5)", "\"1.5\""),
        ("string(1000000.0)", "\"1e+06\""),
        ("string(123456.0)", "\"123456\""),
        ("string(0.0001)", "\"0.0001\""),
        ("string(0.00001)", "\"1e-05\""),
        ("string(12u)", "\"12\""),
        ("string(b'abc')", "\"abc\""),
        ("string(true)", "\"true\""),
        ("bytes('ab')", "b\"ab\""),
        ("bool('true')", "true"),
        (
            "bool('yes')",
            "error: type conversion error from 'string' to 'bool'",
        ),
        ("bool('T')", "true"),
        ("type(1) == int", "true"),
        (
            "type('a') == string && type([]) == list && type({}) == map",
            "true",
        ),
        ("type(1) == type(1u)", "false"),
        ("type(null)", "null_type"),
        ("type(int)", "type"),
        ("dyn([1])", "[1]"),
        ("string(duration('1h30m'))", "\"5400s\""),
        ("string(duration('1.5s'))", "\"1.5s\""),
        (
            "duration(dyn('5x'))",
            "error: type conversion error from 'string' to 'google.protobuf.Duration'",
        ),
        ("string(-dyn(duration('1ms')))", "\"-0.001s\""),
        (
            "string(timestamp('2024-02-29T10:20:30.5Z'))",
            "\"2024-02-29T10:20:30.5Z\"",
        ),
        (
            "string(timestamp('2024-02-29T10:20:30+02:00'))",
            "\"2024-02-29T08:20:30Z\"",
        ),
        ("int(timestamp('1970-01-01T00:01:00Z'))", "60"),
        ("string(timestamp(86400))", "\"1970-01-02T00:00:00Z\""),
    ]);
}

#[test]
fn time_arithmetic_and_accessors() {
    table(&[
        ("timestamp('2024-02-29T10:20:30Z') + duration('1h') == timestamp('2024-02-29T11:20:30Z')", "true"),
        ("timestamp('2024-02-29T10:20:30Z') - timestamp('2024-02-29T10:00:00Z')", "duration(\"1230s\")"),
        ("duration('1h') + duration('1m') > duration('60m')", "true"),
        ("timestamp('9999-12-31T23:59:59Z') + duration('1s')", "error: timestamp overflow"),
        ("timestamp('2024-02-29T10:20:30.250Z').getFullYear()", "2024"),
        ("timestamp('2024-02-29T10:20:30.250Z').getMonth()", "1"),
        ("timestamp('2024-02-29T10:20:30.250Z').getDate()", "29"),
        ("timestamp('2024-02-29T10:20:30.250Z').getDayOfMonth()", "28"),
        ("timestamp('2024-02-29T10:20:30.250Z').getDayOfYear()", "59"),
        ("timestamp('2024-02-29T10:20:30.250Z').getDayOfWeek()", "4"),
        ("timestamp('2024-02-29T10:20:30.250Z').getHours()", "10"),
        ("timestamp('2024-02-29T10:20:30.250Z').getHours('+02:00')", "12"),
        ("timestamp('2024-02-29T23:20:30Z').getDate('+02:00')", "1"),
        ("timestamp('2024-02-29T10:20:30.250Z').getMinutes()", "20"),
        ("timestamp('2024-02-29T10:20:30.250Z').getSeconds()", "30"),
        ("timestamp('2024-02-29T10:20:30.250Z').getMilliseconds()", "250"),
        ("timestamp('2024-02-29T10:20:30Z').getHours('Europe/Paris')", "error: time zone Europe/Paris is not supported (only UTC and fixed offsets)"),
        ("duration('90m').getHours()", "1"),
        ("duration('90m').getMinutes()", "90"),
        ("duration('1.5s').getMilliseconds()", "1500"),
    ]);
}

#[test]
fn deeply_nested_expressions_evaluate() {
    let depth = 100;
    let expr = format!("{}1{}", "(".repeat(depth), " + 1)".repeat(depth));
    assert_eq!(run(&expr, serde_json::json!({})), (depth + 1).to_string());
}

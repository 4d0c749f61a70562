//! Parser tests: the tree built for every construct, node locations, and error messages
//! (expected strings worked out from cel-go v0.17.7's parser and its tests).

use std::sync::Arc;

use crate::ast::{debug_string, Expr, ExprKind, ParsedExpr};
use crate::parser::{parse, ParserOptions};
use crate::source::Source;

fn parse_opt(src: &str, optional: bool) -> Result<ParsedExpr, String> {
    let src = src.to_string();
    // Deep nesting needs a large stack (as `compile` provides).
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let opts = ParserOptions {
                optional_syntax: optional,
            };
            parse(Arc::new(Source::new(&src)), opts).map_err(|e| e.to_string())
        })
        .expect("spawn")
        .join()
        .expect("join")
}

fn tree(src: &str) -> String {
    match parse_opt(src, true) {
        Ok(p) => debug_string(&p.expr),
        Err(e) => panic!("{src}: {e}"),
    }
}

fn error(src: &str) -> String {
    match parse_opt(src, true) {
        Ok(p) => panic!("{src}: parsed as {}", debug_string(&p.expr)),
        Err(e) => e,
    }
}

#[test]
fn constructs() {
    let cases: &[(&str, &str)] = &[
        // Literals.
        ("1", "1"),
        ("-1", "-1"),
        ("- 1", "-1"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("0x1F", "31"),
        ("-0x10", "-16"),
        ("1u", "1u"),
        ("0xFFu", "255u"),
        ("1.5", "1.5"),
        ("-1.5e3", "-1500.0"),
        (".5", "0.5"),
        ("1e-2", "0.01"),
        (r#""a\tb""#, r#""a\tb""#),
        ("'single'", r#""single""#),
        (r#"r"raw\n""#, r#""raw\\n""#),
        ("'''tri\nple'''", r#""tri\nple""#),
        (r#"b"\xff\x00""#, "b[255, 0]"),
        ("true", "true"),
        ("false", "false"),
        ("null", "null"),
        // Identifiers, selection, calls.
        ("a", "a"),
        (".a", ".a"),
        ("a.b.c", "a.b.c"),
        ("a.b()", "a.b()"),
        ("a.b(1, 2)", "a.b(1, 2)"),
        ("f()", "f()"),
        (".f(x)", ".f(x)"),
        ("a[0]", "_[_](a, 0)"),
        ("a[0][1]", "_[_](_[_](a, 0), 1)"),
        ("a.as", "a.as"),
        // Operators and precedence.
        ("!a", "!_(a)"),
        ("!!a", "a"),
        ("!!!a", "!_(a)"),
        ("-a", "-_(a)"),
        ("--a", "a"),
        ("--1", "1"),
        ("---1", "-_(1)"),
        ("!-1", "!_(-1)"),
        ("a - 1", "_-_(a, 1)"),
        ("a-1", "_-_(a, 1)"),
        ("a - -1", "_-_(a, -1)"),
        ("1 + 2 * 3", "_+_(1, _*_(2, 3))"),
        ("1 * 2 + 3", "_+_(_*_(1, 2), 3)"),
        ("1 - 2 - 3", "_-_(_-_(1, 2), 3)"),
        ("a / b % c", "_%_(_/_(a, b), c)"),
        ("a < b == c", "_==_(_<_(a, b), c)"),
        ("a in b", "@in(a, b)"),
        ("a != b", "_!=_(a, b)"),
        ("a >= b && c <= d", "_&&_(_>=_(a, b), _<=_(c, d))"),
        ("a || b && c", "_||_(a, _&&_(b, c))"),
        ("a && b && c && d", "_&&_(_&&_(a, b), _&&_(c, d))"),
        ("a || b || c", "_||_(_||_(a, b), c)"),
        ("a ? b : c ? d : e", "_?_:_(a, b, _?_:_(c, d, e))"),
        ("(a ? b : c).d", "_?_:_(a, b, c).d"),
        ("(1 + 2) * 3", "_*_(_+_(1, 2), 3)"),
        // Aggregates.
        ("[]", "[]"),
        ("[,]", "[]"),
        ("[1, 2,]", "[1, 2]"),
        ("{}", "{}"),
        ("{'a': 1, 'b': 2,}", r#"{"a": 1, "b": 2}"#),
        ("T{}", "T{}"),
        ("a.b.T{f: 1, g: 2}", "a.b.T{f: 1, g: 2}"),
        (".T{f: 1,}", ".T{f: 1}"),
        // Optional syntax.
        ("a.?b", r#"_?._(a, "b")"#),
        ("a[?0]", "_[?_](a, 0)"),
        ("[?a, b]", "[?a, b]"),
        ("{?'k': v}", r#"{?"k": v}"#),
        ("T{?f: v}", "T{?f: v}"),
        // Macros.
        ("has(a.b)", "a.b~test-only"),
        (
            "l.all(x, x > 0)",
            "__comprehension__(x, l, __result__, true, @not_strictly_false(__result__), _&&_(__result__, _>_(x, 0)), __result__)",
        ),
        (
            "l.exists(x, p)",
            "__comprehension__(x, l, __result__, false, @not_strictly_false(!_(__result__)), _||_(__result__, p), __result__)",
        ),
        (
            "l.exists_one(x, p)",
            "__comprehension__(x, l, __result__, 0, true, _?_:_(p, _+_(__result__, 1), __result__), _==_(__result__, 1))",
        ),
        ("l.map(x, x * 2)", "__comprehension__(x, l, __result__, [], true, _+_(__result__, [_*_(x, 2)]), __result__)"),
        (
            "l.map(x, x > 0, x)",
            "__comprehension__(x, l, __result__, [], true, _?_:_(_>_(x, 0), _+_(__result__, [x]), __result__), __result__)",
        ),
        (
            "l.filter(x, x > 0)",
            "__comprehension__(x, l, __result__, [], true, _?_:_(_>_(x, 0), _+_(__result__, [x]), __result__), __result__)",
        ),
        (
            "o.optMap(v, v + 1)",
            "_?_:_(o.hasValue(), optional.of(__comprehension__(#unused, [], v, o.value(), false, v, _+_(v, 1))), optional.none())",
        ),
        (
            "o.optFlatMap(v, f(v))",
            "_?_:_(o.hasValue(), __comprehension__(#unused, [], v, o.value(), false, v, f(v)), optional.none())",
        ),
        // Not macros (wrong arity or style).
        ("has(a.b, c)", "has(a.b, c)"),
        ("a.has(b)", "a.has(b)"),
        ("all(l, x, p)", "all(l, x, p)"),
        ("l.map(x)", "l.map(x)"),
        // Comments and whitespace.
        ("a // comment\n  + b", "_+_(a, b)"),
    ];
    for (src, want) in cases {
        assert_eq!(tree(src), *want, "{src}");
    }
}

/// The offset recorded for the root node and for a chosen sub-node.
fn root_offset(src: &str) -> i32 {
    let p = parse_opt(src, true).unwrap_or_else(|e| panic!("{e}"));
    p.positions[p.expr.id as usize]
}

#[test]
fn node_locations() {
    let cases: &[(&str, i32)] = &[
        ("a.b", 1),          // select: the dot
        ("f(x)", 1),         // global call: the open parenthesis
        ("a.f(x)", 3),       // member call: the open parenthesis
        ("a[1]", 1),         // index: the bracket
        ("a + b", 2),        // operators: the operator
        ("a ? b : c", 2),    // conditional: the question mark
        ("!a", 0),           // unary: the first operator
        ("!!!a", 0),         // unary: the first operator
        ("-1", 0),           // negative literal: the sign
        (" [1]", 1),         // list: the bracket
        ("{1: 2}", 0),       // map: the brace
        ("T{f: 1}", 1),      // message: the brace
        (".a", 1),           // leading-dot identifier: the identifier
        ("has(a.b)", 3),     // has(): where the call is
        ("l.all(x, p)", 5),  // comprehension: where the call is
        ("a &&\nb && c", 7), // logic: the middle operator of the balanced tree
    ];
    for (src, want) in cases {
        assert_eq!(root_offset(src), *want, "{src}");
    }
    // Inner nodes: the message field entry sits at its colon.
    let p = parse_opt("T{f: 1}", true).unwrap();
    let ExprKind::Struct { fields, .. } = &p.expr.kind else {
        panic!()
    };
    assert_eq!(p.positions[fields[0].id as usize], 3);
}

#[test]
fn visitor_errors() {
    let cases: &[(&str, &str)] = &[
        ("0xFFFFFFFFFFFFFFFFF", "ERROR: <input>:1:1: invalid int literal\n | 0xFFFFFFFFFFFFFFFFF\n | ^"),
        ("0xFFFFFFFFFFFFFFFFFu", "ERROR: <input>:1:1: invalid uint literal\n | 0xFFFFFFFFFFFFFFFFFu\n | ^"),
        ("1.99e90000009", "ERROR: <input>:1:1: invalid double literal\n | 1.99e90000009\n | ^"),
        ("a + 9223372036854775808", "ERROR: <input>:1:5: invalid int literal\n | a + 9223372036854775808\n | ....^"),
        ("as", "ERROR: <input>:1:1: reserved identifier: as\n | as\n | ^"),
        ("while(1)", "ERROR: <input>:1:1: reserved identifier: while\n | while(1)\n | ^"),
        (".if", "ERROR: <input>:1:1: reserved identifier: if\n | .if\n | ^"),
        (
            "[1, 2, 3].map(var, var * var)",
            "ERROR: <input>:1:15: reserved identifier: var\n | [1, 2, 3].map(var, var * var)\n | ..............^\n\
             ERROR: <input>:1:15: argument is not an identifier\n | [1, 2, 3].map(var, var * var)\n | ..............^\n\
             ERROR: <input>:1:20: reserved identifier: var\n | [1, 2, 3].map(var, var * var)\n | ...................^\n\
             ERROR: <input>:1:26: reserved identifier: var\n | [1, 2, 3].map(var, var * var)\n | .........................^",
        ),
        ("1.all(2, 3)", "ERROR: <input>:1:7: argument must be a simple name\n | 1.all(2, 3)\n | ......^"),
        ("l.exists(a.b, 3)", "ERROR: <input>:1:11: argument must be a simple name\n | l.exists(a.b, 3)\n | ..........^"),
        ("l.filter(1, 3)", "ERROR: <input>:1:10: argument is not an identifier\n | l.filter(1, 3)\n | .........^"),
        ("has(a)", "ERROR: <input>:1:5: invalid argument to has() macro\n | has(a)\n | ....^"),
        ("has(a[1])", "ERROR: <input>:1:6: invalid argument to has() macro\n | has(a[1])\n | .....^"),
        (
            "o.optMap(1, 2)",
            "ERROR: <input>:1:10: optMap() variable name must be a simple identifier\n | o.optMap(1, 2)\n | .........^",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(error(src), *want, "{src}");
    }
}

#[test]
fn unsupported_optional_syntax_without_the_library() {
    // cel-go's own cases (its parser tests without optional syntax).
    let cases: &[(&str, &str)] = &[
        (
            "a.?b && a[?b]",
            "ERROR: <input>:1:2: unsupported syntax '.?'\n | a.?b && a[?b]\n | .^\n\
             ERROR: <input>:1:10: unsupported syntax '[?'\n | a.?b && a[?b]\n | .........^",
        ),
        (
            "[?a, ?b]",
            "ERROR: <input>:1:2: unsupported syntax '?'\n | [?a, ?b]\n | .^\n\
             ERROR: <input>:1:6: unsupported syntax '?'\n | [?a, ?b]\n | .....^",
        ),
        (
            "Msg{?field: value} && {?'key': value}",
            "ERROR: <input>:1:5: unsupported syntax '?'\n | Msg{?field: value} && {?'key': value}\n | ....^\n\
             ERROR: <input>:1:24: unsupported syntax '?'\n | Msg{?field: value} && {?'key': value}\n | .......................^",
        ),
        (
            "x{?.",
            "ERROR: <input>:1:3: unsupported syntax '?'\n | x{?.\n | ..^\n\
             ERROR: <input>:1:4: Syntax error: mismatched input '.' expecting IDENTIFIER\n | x{?.\n | ...^",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(parse_opt(src, false).unwrap_err(), *want, "{src}");
    }
    let err = parse_opt("a.?b", false).unwrap_err();
    assert_eq!(
        err,
        "ERROR: <input>:1:2: unsupported syntax '.?'\n | a.?b\n | .^"
    );
    let err = parse_opt("[?a]", false).unwrap_err();
    assert_eq!(
        err,
        "ERROR: <input>:1:2: unsupported syntax '?'\n | [?a]\n | .^"
    );
    assert!(
        parse_opt("o.optMap(v, v)", false).is_ok_and(|p| debug_string(&p.expr) == "o.optMap(v, v)")
    );
}

const PRIMARY: &str =
    "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";

#[test]
fn syntax_errors() {
    let cases: Vec<(&str, String)> = vec![
        ("1 +", format!("ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>' expecting {PRIMARY}\n | 1 +\n | ...^")),
        (
            "1 + $",
            format!(
                "ERROR: <input>:1:5: Syntax error: token recognition error at: '$'\n | 1 + $\n | ....^\n\
                 ERROR: <input>:1:6: Syntax error: mismatched input '<EOF>' expecting {PRIMARY}\n | 1 + $\n | .....^"
            ),
        ),
        (
            "a | b",
            "ERROR: <input>:1:3: Syntax error: token recognition error at: '| '\n | a | b\n | ..^\n\
             ERROR: <input>:1:5: Syntax error: extraneous input 'b' expecting <EOF>\n | a | b\n | ....^"
                .into(),
        ),
        ("1 + 2\n3 +", "ERROR: <input>:2:1: Syntax error: mismatched input '3' expecting <EOF>\n | 3 +\n | ^".into()),
        ("TestAllTypes(){}", "ERROR: <input>:1:15: Syntax error: mismatched input '{' expecting <EOF>\n | TestAllTypes(){}\n | ..............^".into()),
        (
            "{",
            "ERROR: <input>:1:2: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '}', '(', '.', ',', '-', '!', '?', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | {\n | .^".into(),
        ),
        ("{a}", "ERROR: <input>:1:3: Syntax error: mismatched input '}' expecting ':'\n | {a}\n | ..^".into()),
        ("ind[a{b}]", "ERROR: <input>:1:8: Syntax error: mismatched input '}' expecting ':'\n | ind[a{b}]\n | .......^".into()),
        // After an error ANTLR resynchronises and may report more (cel-go's own test cases).
        (
            "?",
            format!(
                "ERROR: <input>:1:1: Syntax error: mismatched input '?' expecting {PRIMARY}\n | ?\n | ^\n\
                 ERROR: <input>:1:2: Syntax error: mismatched input '<EOF>' expecting {PRIMARY}\n | ?\n | .^"
            ),
        ),
        (
            "in",
            format!(
                "ERROR: <input>:1:1: Syntax error: mismatched input 'in' expecting {PRIMARY}\n | in\n | ^\n\
                 ERROR: <input>:1:3: Syntax error: mismatched input '<EOF>' expecting {PRIMARY}\n | in\n | ..^"
            ),
        ),
        (
            "1 + +",
            format!(
                "ERROR: <input>:1:5: Syntax error: mismatched input '+' expecting {PRIMARY}\n | 1 + +\n | ....^\n\
                 ERROR: <input>:1:6: Syntax error: mismatched input '<EOF>' expecting {PRIMARY}\n | 1 + +\n | .....^"
            ),
        ),
        (
            "func{{a}}",
            "ERROR: <input>:1:6: Syntax error: extraneous input '{' expecting {'}', ',', '?', IDENTIFIER}\n | func{{a}}\n | .....^\n\
             ERROR: <input>:1:8: Syntax error: mismatched input '}' expecting ':'\n | func{{a}}\n | .......^\n\
             ERROR: <input>:1:9: Syntax error: extraneous input '}' expecting <EOF>\n | func{{a}}\n | ........^"
                .into(),
        ),
        (
            "      '😁' in ['😁', '😑', '😦']\n\t\t\t&& in.😁",
            format!(
                "ERROR: <input>:2:7: Syntax error: extraneous input 'in' expecting {PRIMARY}\n |    && in.😁\n | ......^\n\
                 ERROR: <input>:2:10: Syntax error: token recognition error at: '😁'\n |    && in.😁\n | .........＾\n\
                 ERROR: <input>:2:11: Syntax error: no viable alternative at input '.'\n |    && in.😁\n | .........．^"
            ),
        ),
        (
            "{\"a\": 1}.\"a\"",
            "ERROR: <input>:1:10: Syntax error: no viable alternative at input '.\"a\"'\n | {\"a\": 1}.\"a\"\n | .........^".into(),
        ),
        ("a.true", "ERROR: <input>:1:3: Syntax error: mismatched input 'true' expecting IDENTIFIER\n | a.true\n | ..^".into()),
        ("a.", "ERROR: <input>:1:3: Syntax error: no viable alternative at input '.'\n | a.\n | ..^".into()),
        (
            "\"\\xFh\"",
            format!(
                "ERROR: <input>:1:1: Syntax error: token recognition error at: '\"\\xFh'\n | \"\\xFh\"\n | ^\n\
                 ERROR: <input>:1:6: Syntax error: token recognition error at: '\"'\n | \"\\xFh\"\n | .....^\n\
                 ERROR: <input>:1:7: Syntax error: mismatched input '<EOF>' expecting {PRIMARY}\n | \"\\xFh\"\n | ......^"
            ),
        ),
        ("a ? b", "ERROR: <input>:1:6: Syntax error: mismatched input '<EOF>' expecting ':'\n | a ? b\n | .....^".into()),
        ("a ? b c", "ERROR: <input>:1:7: Syntax error: missing ':' at 'c'\n | a ? b c\n | ......^".into()),
        ("f(a b)", "ERROR: <input>:1:5: Syntax error: extraneous input 'b' expecting ')'\n | f(a b)\n | ....^".into()),
        ("msg{:a}", "ERROR: <input>:1:5: Syntax error: extraneous input ':' expecting {'}', ',', '?', IDENTIFIER}\n | msg{:a}\n | ....^\nERROR: <input>:1:7: Syntax error: mismatched input '}' expecting ':'\n | msg{:a}\n | ......^".into()),
    ];
    for (src, want) in cases {
        assert_eq!(error(src), want, "{src}");
    }
}

#[test]
fn limits() {
    let deep = format!("{}1{}", "(".repeat(251), ")".repeat(251));
    assert_eq!(
        error(&deep),
        "ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
    );
    let chain = format!("a{}", ".b".repeat(251));
    assert_eq!(
        error(&chain),
        "ERROR: <input>:-1:0: max recursion depth exceeded"
    );
    assert!(parse_opt(&format!("a{}", ".b".repeat(200)), true).is_ok());
    let big = format!("'{}'", "x".repeat(100_000));
    assert_eq!(
        error(&big),
        "ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100002, limit 100000"
    );
}

#[test]
fn qualified_names() {
    let p = parse_opt("a.b.c", true).unwrap();
    assert_eq!(p.expr.qualified_name().as_deref(), Some("a.b.c"));
    let p = parse_opt("a.b().c", true).unwrap();
    assert_eq!(p.expr.qualified_name(), None);
    let e = Expr::new(1, ExprKind::Ident("x".into()));
    assert_eq!(e.qualified_name().as_deref(), Some("x"));
}

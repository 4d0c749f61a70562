use super::*;
use crate::fields::FieldSelector;
use crate::recorded::{load, query_param, reference_dir};
use serde_json::json;

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parse_err(s: &str) -> String {
    match LabelSelector::parse(s) {
        Ok(sel) => panic!("{:?} parsed as {:?}", s, sel),
        Err(e) => e,
    }
}

fn parsed(s: &str) -> LabelSelector {
    match LabelSelector::parse(s) {
        Ok(sel) => sel,
        Err(e) => panic!("{:?}: {}", s, e),
    }
}

fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement {
        key: key.to_string(),
        operator,
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

#[test]
fn good_selectors_round_trip() {
    for s in [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        "x=",
        "x= ",
        "x=,z= ",
        "x= ,z= ",
        "!x",
        "x>1",
        "x>1,z<5",
    ] {
        assert_eq!(parsed(s).to_string(), s.replace(' ', ""), "{:?}", s);
    }
}

#[test]
fn bad_selectors_and_their_messages() {
    assert_eq!(
        parse_err("a===b"),
        "unable to parse requirement: found '=', expected: identifier"
    );
    assert_eq!(
        parse_err("x==a==b"),
        "found '==', expected: ',' or 'end of string'"
    );
    assert_eq!(
        parse_err("!x=a"),
        "found '=', expected: ',' or 'end of string'"
    );
    assert_eq!(
        parse_err("x<a"),
        "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    assert!(parse_err("x=a||y=b").starts_with(
        "unable to parse requirement: values[0][x]: Invalid value: \"a||y\": a valid label must be an empty string"
    ));
    assert_eq!(
        parse_err("x,,y"),
        "found ',', expected: identifier after ','"
    );
    assert_eq!(
        parse_err(",x,y"),
        "found ',', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        parse_err("x nott in (y)"),
        "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(
        parse_err("a in (xyz),"),
        "found '', expected: identifier after ','"
    );
    assert_eq!(
        parse_err("a in (xyz)b notin ()"),
        "found 'b', expected: ',' or 'end of string'"
    );
    assert_eq!(
        parse_err("a in (xyz abc)"),
        "unable to parse requirement: found 'abc', expected: ',' or ')'"
    );
    assert_eq!(
        parse_err("a notin("),
        "unable to parse requirement: found '', expected: ',', ')' or identifier"
    );
    assert_eq!(
        parse_err("a ("),
        "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(
        parse_err("("),
        "found '(', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        parse_err("x in a"),
        "unable to parse requirement: found 'a' expected: '('"
    );
    assert_eq!(
        parse_err("!"),
        "unable to parse requirement: found '', expected: identifier"
    );
    assert_eq!(
        parse_err("x=("),
        "unable to parse requirement: found '(', expected: identifier"
    );
    assert_eq!(
        parse_err("x in (a=)"),
        "unable to parse requirement: found '=', expected: ',' or ')'"
    );
    assert_eq!(
        parse_err("x in (a,=)"),
        "unable to parse requirement: found '=', expected: ',', or identifier"
    );
}

#[test]
fn key_and_value_validation_messages() {
    let name_regex = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    assert_eq!(
        parse_err("-x=1"),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"-x\": name part {}",
            name_regex
        )
    );
    assert_eq!(
        parse_err("a/b/c"),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            name_regex
        )
    );
    assert_eq!(
        parse_err("Example.com/x"),
        "unable to parse requirement: <nil>: Invalid value: \"Example.com/x\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
    assert_eq!(
        parse_err("/x"),
        "unable to parse requirement: <nil>: Invalid value: \"/x\": prefix part must be non-empty"
    );
    let long_key = "k".repeat(64);
    assert_eq!(
        parse_err(&long_key),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"{}\": name part must be no more than 63 characters",
            long_key
        )
    );
    let long_value = "v".repeat(64);
    assert_eq!(
        parse_err(&format!("k={}", long_value)),
        format!(
            "unable to parse requirement: values[0][k]: Invalid value: \"{}\": must be no more than 63 characters",
            long_value
        )
    );
    assert_eq!(
        parse_err("k=-v-"),
        "unable to parse requirement: values[0][k]: Invalid value: \"-v-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    // Two failures aggregate into a bracketed list.
    let both = parse_err("k>-x");
    assert!(both.starts_with("unable to parse requirement: [values[0]: Invalid value: \"-x\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][k]: Invalid value: \"-x\": a valid label"), "{}", both);
    // 63 characters and a DNS prefix are fine.
    parsed(&format!(
        "example.com/{}={}",
        "k".repeat(63),
        "v".repeat(63)
    ));
}

#[test]
fn set_based_parsing() {
    let cases: Vec<(&str, Vec<Requirement>)> = vec![
        ("\rx", vec![req("x", Operator::Exists, &[])]),
        (
            "this-is-a-dns.domain.com/key-with-dash",
            vec![req(
                "this-is-a-dns.domain.com/key-with-dash",
                Operator::Exists,
                &[],
            )],
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            vec![req(
                "0.1.2.domain/99",
                Operator::NotIn,
                &["10.10.100.1", "tick.tack.clock"],
            )],
        ),
        ("foo  in\t (abc)", vec![req("foo", Operator::In, &["abc"])]),
        ("x notin\n (abc)", vec![req("x", Operator::NotIn, &["abc"])]),
        (
            "x in (def,abc)",
            vec![req("x", Operator::In, &["abc", "def"])],
        ),
        ("x in (abc,)", vec![req("x", Operator::In, &["", "abc"])]),
        ("x in ()", vec![req("x", Operator::In, &[""])]),
        ("x notin ( )", vec![req("x", Operator::NotIn, &[""])]),
        ("x notin (, a)", vec![req("x", Operator::NotIn, &["", "a"])]),
        (
            "x notin (abc,,def),bar,z in (),w",
            vec![
                req("bar", Operator::Exists, &[]),
                req("w", Operator::Exists, &[]),
                req("x", Operator::NotIn, &["", "abc", "def"]),
                req("z", Operator::In, &[""]),
            ],
        ),
        (
            "a in (x,y,notin, z,in)",
            vec![req("a", Operator::In, &["in", "notin", "x", "y", "z"])],
        ),
        (
            "x=a,y!=b",
            vec![
                req("x", Operator::Equals, &["a"]),
                req("y", Operator::NotEquals, &["b"]),
            ],
        ),
        ("x==a", vec![req("x", Operator::DoubleEquals, &["a"])]),
        ("x>1", vec![req("x", Operator::GreaterThan, &["1"])]),
        ("x<7", vec![req("x", Operator::LessThan, &["7"])]),
        ("a ", vec![req("a", Operator::Exists, &[])]),
        ("notin=in", vec![req("notin", Operator::Equals, &["in"])]),
        (
            "!a,b",
            vec![
                req("a", Operator::DoesNotExist, &[]),
                req("b", Operator::Exists, &[]),
            ],
        ),
        ("x = y", vec![req("x", Operator::Equals, &["y"])]),
        (
            "i in (1,3),page",
            vec![
                req("i", Operator::In, &["1", "3"]),
                req("page", Operator::Exists, &[]),
            ],
        ),
    ];
    for (s, want) in cases {
        assert_eq!(parsed(s).requirements(), want.as_slice(), "{:?}", s);
    }
}

#[test]
fn matching() {
    let yes = |s: &str, l: &[(&str, &str)]| assert!(parsed(s).matches(&set(l)), "{} vs {:?}", s, l);
    let no = |s: &str, l: &[(&str, &str)]| assert!(!parsed(s).matches(&set(l)), "{} vs {:?}", s, l);
    yes("", &[("x", "y")]);
    yes("x=y", &[("x", "y")]);
    yes("x=y,z=w", &[("x", "y"), ("z", "w")]);
    yes("x!=y,z!=w", &[("x", "z"), ("z", "a")]);
    yes("notin=in", &[("notin", "in")]);
    yes("x", &[("x", "z")]);
    yes("!x", &[("y", "z")]);
    yes("x>1", &[("x", "2")]);
    yes("x<1", &[("x", "0")]);
    yes("x<1", &[("x", "-5")]);
    yes("x notin (a)", &[]);
    yes("x in (a,b)", &[("x", "b")]);
    yes("x=", &[("x", "")]);
    no("x=", &[]);
    no("x=z", &[]);
    no("x=y", &[("x", "z")]);
    no("x=y,z=w", &[("x", "w"), ("z", "w")]);
    no("x!=y,z!=w", &[("x", "z"), ("z", "w")]);
    no("x", &[("y", "z")]);
    no("!x", &[("x", "z")]);
    no("x>1", &[("x", "0")]);
    no("x>1", &[("x", "a")]);
    no("x>1", &[]);
    no("x<1", &[("x", "2")]);
    no("x in (a,b)", &[("x", "c")]);
    no("x in (a,b)", &[]);
    no("x notin (a)", &[("x", "a")]);
    let labels = [("foo", "bar"), ("baz", "blah")];
    yes("foo=bar,baz=blah", &labels);
    no("foo=bar,foobar=bar,baz=blah", &labels);
}

#[test]
fn string_form() {
    assert_eq!(
        parsed("z,y notin (jkl),x in (def,abc)").to_string(),
        "x in (abc,def),y notin (jkl),z"
    );
    assert_eq!(
        parsed("x notin (abc),y in (mno,jkl),z notin ()").to_string(),
        "x notin (abc),y in (jkl,mno),z notin ()"
    );
    assert_eq!(parsed("x=abc,y==jkl,z!=a").to_string(), "x=abc,y==jkl,z!=a");
    assert_eq!(parsed("!z,x>2,y<8").to_string(), "x>2,y<8,!z");
}

#[test]
fn nul_byte_ends_a_token() {
    // Upstream reads a NUL byte as the end of the input inside the lexer.
    assert!(parsed("x\0").matches(&set(&[("x", "1")])));
    assert_eq!(
        parse_err("a\0b"),
        "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
    );
}

#[test]
fn never_panics_on_odd_input() {
    for s in [
        "",
        " ",
        ",",
        "!",
        "!!",
        "=",
        "==",
        "!=",
        "(",
        ")",
        "()",
        "in",
        "notin",
        "in in (in)",
        "x in ((a))",
        "é=ü",
        "x=é",
        "\u{0}",
        "x in (",
        "x in (a",
        "x in (a,",
        "x>",
        "x<",
        "<",
        ">",
        "x>>1",
        "x!",
        "x!y",
        "a=b=c",
        "\t\r\n",
        "x in (,,,)",
        "x notin",
        "x notin (",
        "日本=語",
    ] {
        let _ = LabelSelector::parse(s);
        let _ = FieldSelector::parse(s);
    }
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let alphabet: Vec<char> = "ab=!(),<> \tinotx\\é0-./".chars().collect();
    for _ in 0..20000 {
        let mut s = String::new();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 12) as usize;
        for i in 0..len {
            let idx = ((seed >> (i * 5 % 60)) as usize) % alphabet.len();
            s.push(alphabet[idx]);
        }
        if let Ok(sel) = LabelSelector::parse(&s) {
            let _ = sel.matches(&set(&[("a", "b")]));
            // The string form parses back to the same requirements.
            let again = LabelSelector::parse(&sel.to_string());
            assert_eq!(
                again.as_ref().map(|s| s.requirements()),
                Ok(sel.requirements()),
                "{:?}",
                s
            );
        }
        if let Ok(fs) = FieldSelector::parse(&s) {
            let _ = fs.matches(&|_| None);
            assert_eq!(
                FieldSelector::parse(&fs.to_string()),
                Ok(fs.clone()),
                "{:?}",
                s
            );
        }
    }
}

#[test]
fn label_selector_objects() {
    let sel = LabelSelector::from_label_selector_json(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "back"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "owner", "operator": "Exists"}
        ]
    }))
    .unwrap_or_default();
    assert_eq!(
        sel.to_string(),
        "app=web,canary,!canary,env notin (prod),owner,tier in (back,front)"
            .replace("canary,!canary", "!canary")
    );
    assert!(sel.matches(&set(&[("app", "web"), ("tier", "front"), ("owner", "me")])));
    assert!(!sel.matches(&set(&[
        ("app", "web"),
        ("tier", "front"),
        ("owner", "me"),
        ("canary", "1")
    ])));
    assert!(!sel.matches(&set(&[
        ("app", "web"),
        ("tier", "front"),
        ("owner", "me"),
        ("env", "prod")
    ])));
    assert!(!sel.matches(&set(&[("app", "web"), ("tier", "mid"), ("owner", "me")])));
    assert!(!sel.is_empty());

    let everything = LabelSelector::from_label_selector_json(&json!({})).unwrap_or_default();
    assert!(everything.is_empty() && everything.matches(&set(&[])));
    let nothing = LabelSelector::from_label_selector_json(&Value::Null).unwrap_or_default();
    assert!(!nothing.is_empty() && nothing.is_nothing() && !nothing.matches(&set(&[])));
    assert!(LabelSelector::parse("")
        .map(|s| s.is_empty())
        .unwrap_or(false));

    // Scale's status.selector form (reference 077).
    let scale = LabelSelector::from_label_selector_json(&json!({"matchLabels": {"app": "web"}}));
    assert_eq!(scale.map(|s| s.to_string()), Ok("app=web".to_string()));
}

#[test]
fn label_selector_object_errors() {
    let err = |v: Value| {
        LabelSelector::from_label_selector_json(&v)
            .err()
            .unwrap_or_default()
    };
    assert_eq!(
        err(json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]})),
        "\"Foo\" is not a valid label selector operator"
    );
    assert_eq!(
        err(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
        "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
    );
    assert_eq!(
        err(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})),
        "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
    );
    assert_eq!(
        err(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x", "y"]}]})),
        "values: Invalid value: []string{\"x\", \"y\"}: values set must be empty for exists and does not exist"
    );
    assert_eq!(
        err(json!({"matchLabels": {"a b": "c"}})),
        "key: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    );
    assert!(err(json!({"matchLabels": {"a": "c d"}}))
        .starts_with("values[0][a]: Invalid value: \"c d\": a valid label must be"));
    assert_eq!(
        err(json!("app=web")),
        "json: cannot unmarshal string into Go value of type v1.LabelSelector"
    );
    assert_eq!(
        err(json!({"matchLabels": []})),
        "json: cannot unmarshal array into Go value of type map[string]string"
    );
    assert_eq!(
        err(json!({"matchLabels": {"a": 1}})),
        "json: cannot unmarshal number into Go value of type string"
    );
}

// --- recorded real-server answers -----------------------------------------------------

fn labels_of(item: &Value) -> BTreeMap<String, String> {
    item["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn reference_bad_label_selector_061() {
    let Some(dir) = reference_dir() else { return };
    let rec = load(&dir, "061-err-bad-label-selector.json");
    let path = rec["request"]["path"].as_str().unwrap_or("");
    let sel = query_param(path, "labelSelector").unwrap_or_default();
    assert_eq!(sel, "a===b");
    let body = &rec["response"]["body"];
    assert_eq!(body["code"], 400);
    assert_eq!(
        LabelSelector::parse(&sel).err().as_deref(),
        body["message"].as_str()
    );
}

#[test]
fn reference_set_selector_list_067() {
    let Some(dir) = reference_dir() else { return };
    // 067: set-based label selector over configmaps page1..page3 (i=1..3).
    let rec = load(&dir, "067-list-set-selector.json");
    let raw = query_param(
        rec["request"]["path"].as_str().unwrap_or(""),
        "labelSelector",
    )
    .unwrap_or_default();
    assert_eq!(raw, "i in (1,3),page");
    let sel = LabelSelector::parse(&raw).unwrap_or_default();
    let items = rec["response"]["body"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = items
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, vec!["page1", "page3"]);
    for item in &items {
        assert!(sel.matches(&labels_of(item)));
    }
    assert!(!sel.matches(&set(&[("i", "2"), ("page", "yes")])));
}

#[test]
fn reference_scale_selector_077() {
    // The Scale subresource shows the Deployment's `metav1.LabelSelector` in its string form
    // (`LabelSelectorAsSelector(...).String()`): the conversion and `Display` give the same.
    let Some(dir) = reference_dir() else { return };
    let deployment = load(&dir, "029-create-deployment.json");
    let scale = load(&dir, "077-scale-get.json");
    let selector = &deployment["response"]["body"]["spec"]["selector"];
    let converted = LabelSelector::from_label_selector_json(selector).unwrap_or_default();
    assert_eq!(
        Some(converted.to_string().as_str()),
        scale["response"]["body"]["status"]["selector"].as_str()
    );
}

#[test]
fn reference_workload_selectors_match_their_templates() {
    // Every workload the real server accepted has a selector that converts without error
    // and selects its own pod template.
    let Some(dir) = reference_dir() else { return };
    for name in [
        "029-create-deployment.json",
        "030-create-replicaset.json",
        "031-create-statefulset.json",
        "032-create-daemonset.json",
        "046-create-replicationcontroller.json",
    ] {
        let rec = load(&dir, name);
        let spec = &rec["response"]["body"]["spec"];
        let selector = match &spec["selector"] {
            // A ReplicationController's selector is a plain map.
            Value::Object(map) if !map.contains_key("matchLabels") => {
                serde_json::json!({ "matchLabels": map })
            }
            other => other.clone(),
        };
        let converted = LabelSelector::from_label_selector_json(&selector)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!converted.is_empty(), "{name}");
        assert!(
            converted.matches(&labels_of(&spec["template"])),
            "{name}: {converted}"
        );
    }
}

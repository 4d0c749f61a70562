//! How Go's `fmt` prints values that kube-apiserver puts in its messages: one copy, used by
//! every message the product and kube-sim write the way the real components do.

/// A string as Go's `%q` (`strconv.Quote`) prints it: the usual escapes, `\xNN` for
/// other ASCII control bytes, `\uNNNN` / `\UNNNNNNNN` for other non-printable characters.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A `[]string` as Go's `%#v` prints it: `[]string{"a", "b"}`, or `[]string(nil)` for a
/// nil slice (`nil`).
pub fn go_string_slice(values: &[String], nil: bool) -> String {
    if nil {
        return "[]string(nil)".to_string();
    }
    let parts: Vec<String> = values.iter().map(|v| quote(v)).collect();
    format!("[]string{{{}}}", parts.join(", "))
}

/// A `[]string` as Go's `%q` prints it: `["a" "b"]`.
pub fn quote_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| quote(item)).collect();
    format!("[{}]", quoted.join(" "))
}

/// The address Go prints for a non-nil pointer nested in a value printed with `%#v`. A real
/// server prints wherever the value happens to live (`0xc000a1b2c8`), which no one can
/// reproduce; this one stands for it, and comparisons of messages mask addresses.
pub const POINTER_ADDRESS: &str = "0xc000000000";

/// A Go value, as much of it as `%#v` shows.
#[derive(Clone, Debug, PartialEq)]
pub enum GoValue {
    /// A string or a named string type: printed quoted.
    Str(String),
    /// A number or a bool, printed as it is.
    Plain(String),
    /// A pointer of type `*T` (`ty` is `T`): `(*T)(nil)` or `(*T)(0xc000000000)`; the
    /// value it points to is not shown.
    Ptr { ty: String, nil: bool },
    /// Text printed as it is (a `GoString()` method's result, `<nil>`).
    Raw(String),
    /// A struct: `T{Field:value, ...}` with every field, in declaration order.
    Struct {
        ty: String,
        fields: Vec<(String, GoValue)>,
    },
    /// A slice of type `ty` (`[]T`): `[]T(nil)` when nil, else `[]T{a, b}`.
    Slice {
        ty: String,
        items: Option<Vec<GoValue>>,
    },
    /// A map of type `ty`: `map[K]V(nil)` when nil, else `map[K]V{k:v, ...}` (fmt sorts
    /// the keys).
    Map {
        ty: String,
        entries: Option<Vec<(GoValue, GoValue)>>,
    },
    /// A `[]byte`: `[]byte{0x61, 0x62}`, `[]byte(nil)`.
    Bytes(Option<Vec<u8>>),
}

impl GoValue {
    /// The value as Go's `%#v` prints it.
    pub fn go_syntax(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            GoValue::Str(s) => out.push_str(&quote(s)),
            GoValue::Plain(s) | GoValue::Raw(s) => out.push_str(s),
            GoValue::Ptr { ty, nil } => {
                let target = if *nil { "nil" } else { POINTER_ADDRESS };
                out.push_str(&format!("(*{ty})({target})"));
            }
            GoValue::Struct { ty, fields } => {
                out.push_str(ty);
                out.push('{');
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(name);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
            GoValue::Slice { ty, items } => {
                out.push_str(ty);
                match items {
                    None => out.push_str("(nil)"),
                    Some(items) => {
                        out.push('{');
                        for (i, item) in items.iter().enumerate() {
                            if i > 0 {
                                out.push_str(", ");
                            }
                            item.write(out);
                        }
                        out.push('}');
                    }
                }
            }
            GoValue::Map { ty, entries } => {
                out.push_str(ty);
                match entries {
                    None => out.push_str("(nil)"),
                    Some(entries) => {
                        let mut shown: Vec<(String, String)> = entries
                            .iter()
                            .map(|(k, v)| (k.go_syntax(), v.go_syntax()))
                            .collect();
                        shown.sort();
                        let body: Vec<String> =
                            shown.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                        out.push('{');
                        out.push_str(&body.join(", "));
                        out.push('}');
                    }
                }
            }
            GoValue::Bytes(None) => out.push_str("[]byte(nil)"),
            GoValue::Bytes(Some(bytes)) => {
                let body: Vec<String> = bytes.iter().map(|b| format!("{b:#04x}")).collect();
                out.push_str(&format!("[]byte{{{}}}", body.join(", ")));
            }
        }
    }
}

/// A `time.Time` through its `GoString()` method; `local` says the location is `time.Local`
/// (a time decoded from JSON), else it is `time.UTC` (the zero time).
pub fn go_time(
    year: i64,
    month: u32,
    day: u32,
    hms: (u32, u32, u32),
    nanos: u32,
    local: bool,
) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let month_name = MONTHS
        .get((month as usize).wrapping_sub(1))
        .copied()
        .unwrap_or("January");
    let location = if local { "time.Local" } else { "time.UTC" };
    format!(
        "time.Date({year}, time.{month_name}, {day}, {}, {}, {}, {nanos}, {location})",
        hms.0, hms.1, hms.2
    )
}

#[cfg(test)]
mod tests {
    use super::{go_time, quote, quote_list, GoValue};

    #[test]
    fn values_print_as_go_syntax_prints_them() {
        let selector = GoValue::Struct {
            ty: "v1.LabelSelector".into(),
            fields: vec![
                (
                    "MatchLabels".into(),
                    GoValue::Map {
                        ty: "map[string]string".into(),
                        entries: Some(vec![
                            (GoValue::Str("b".into()), GoValue::Str("2".into())),
                            (GoValue::Str("a".into()), GoValue::Str("1".into())),
                        ]),
                    },
                ),
                (
                    "MatchExpressions".into(),
                    GoValue::Slice {
                        ty: "[]v1.LabelSelectorRequirement".into(),
                        items: None,
                    },
                ),
            ],
        };
        assert_eq!(
            selector.go_syntax(),
            r#"v1.LabelSelector{MatchLabels:map[string]string{"a":"1", "b":"2"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#
        );
        let toleration = GoValue::Struct {
            ty: "core.Toleration".into(),
            fields: vec![
                ("Value".into(), GoValue::Str("x".into())),
                (
                    "TolerationSeconds".into(),
                    GoValue::Ptr {
                        ty: "int64".into(),
                        nil: false,
                    },
                ),
                (
                    "Other".into(),
                    GoValue::Ptr {
                        ty: "int64".into(),
                        nil: true,
                    },
                ),
            ],
        };
        assert_eq!(
            toleration.go_syntax(),
            r#"core.Toleration{Value:"x", TolerationSeconds:(*int64)(0xc000000000), Other:(*int64)(nil)}"#
        );
        assert_eq!(
            GoValue::Bytes(Some(b"no".to_vec())).go_syntax(),
            "[]byte{0x6e, 0x6f}"
        );
        assert_eq!(
            GoValue::Slice {
                ty: "[]string".into(),
                items: Some(vec![])
            }
            .go_syntax(),
            "[]string{}"
        );
        assert_eq!(
            go_time(1, 1, 1, (0, 0, 0), 0, false),
            "time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)"
        );
        assert_eq!(
            go_time(2024, 3, 9, (10, 5, 0), 0, true),
            "time.Date(2024, time.March, 9, 10, 5, 0, 0, time.Local)"
        );
    }

    #[test]
    fn lists_are_quoted_as_go_quotes_them() {
        assert_eq!(quote_list(&[]), "[]");
        assert_eq!(
            quote_list(&["a".to_string(), "b \"c\"".to_string(), "\u{85}".to_string()]),
            r#"["a" "b \"c\"" "\u0085"]"#
        );
    }

    #[test]
    fn strings_are_quoted_as_go_quotes_them() {
        let cases = [
            ("plain", r#""plain""#),
            ("a\"b", r#""a\"b""#),
            ("back\\slash", r#""back\\slash""#),
            ("tab\tnew\nline", r#""tab\tnew\nline""#),
            ("\u{1}", r#""\x01""#),
            ("\u{7f}", r#""\x7f""#),
            ("\u{85}", r#""\u0085""#),
            ("héllo", r#""héllo""#),
        ];
        for (input, quoted) in cases {
            assert_eq!(quote(input), quoted, "{input:?}");
        }
    }
}

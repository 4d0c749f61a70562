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

#[cfg(test)]
mod tests {
    use super::{quote, quote_list};

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

//! How Go's `fmt` prints values that kube-apiserver puts in its messages: one copy, used by
//! every message kube-sim writes the way the real server does.

/// A string as Go's `%q` (`strconv.Quote`) prints it: the usual escapes, `\xNN` for
/// other ASCII control bytes, `\uNNNN` / `\UNNNNNNNN` for other non-printable characters.
pub(crate) fn quote(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::quote;

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

//! The words Go's `encoding/json` uses for a malformed document: kube-apiserver passes
//! them through in its 400 answers ("invalid character 'n' looking for beginning of
//! object key string"), so kube-sim reports syntax errors the same way. A byte-level
//! checker that follows Go's scanner states and stops at the first error, as
//! `json.Unmarshal`'s validity check does.

/// What the scanner expects next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value (top level, after `:`, after `,` in an array).
    Value,
    /// A value or `]` right after `[`.
    ValueOrEndArray,
    /// A key string or `}` right after `{`.
    KeyOrEndObject,
    /// A key string after `,` in an object.
    Key,
    /// `:` after a key.
    Colon,
    /// `,` or `}` after an object member.
    ObjectNext,
    /// `,` or `]` after an array element.
    ArrayNext,
    /// Only spaces after the top-level value.
    End,
}

/// Go's `quoteChar`: a byte as the error text shows it.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".into(),
        b'"' => "'\"'".into(),
        _ => {
            let ch = char::from(c);
            let inner = match ch {
                '\n' => "\\n".to_string(),
                '\r' => "\\r".to_string(),
                '\t' => "\\t".to_string(),
                '\u{7}' => "\\a".to_string(),
                '\u{8}' => "\\b".to_string(),
                '\u{c}' => "\\f".to_string(),
                '\u{b}' => "\\v".to_string(),
                '\\' => "\\\\".to_string(),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => format!("\\x{:02x}", c as u32),
                c if (c as u32) >= 0x80 && (c as u32) < 0xa0 => format!("\\u{:04x}", c as u32),
                c => c.to_string(),
            };
            format!("'{inner}'")
        }
    }
}

fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// The first syntax error in `data` in Go's words, or `None` for a valid document.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut stack: Vec<u8> = Vec::new(); // b'{' or b'['
    let mut expect = Expect::Value;
    let mut i = 0;
    let n = data.len();
    let after_value = |stack: &Vec<u8>| match stack.last() {
        Some(b'{') => Expect::ObjectNext,
        Some(_) => Expect::ArrayNext,
        None => Expect::End,
    };
    while i < n {
        let c = data[i];
        if is_space(c) {
            i += 1;
            continue;
        }
        match expect {
            Expect::End => return Some(invalid(c, "after top-level value")),
            Expect::Colon => {
                if c != b':' {
                    return Some(invalid(c, "after object key"));
                }
                expect = Expect::Value;
                i += 1;
            }
            Expect::ObjectNext => match c {
                b',' => {
                    expect = Expect::Key;
                    i += 1;
                }
                b'}' => {
                    stack.pop();
                    expect = after_value(&stack);
                    i += 1;
                }
                _ => return Some(invalid(c, "after object key:value pair")),
            },
            Expect::ArrayNext => match c {
                b',' => {
                    expect = Expect::Value;
                    i += 1;
                }
                b']' => {
                    stack.pop();
                    expect = after_value(&stack);
                    i += 1;
                }
                _ => return Some(invalid(c, "after array element")),
            },
            Expect::KeyOrEndObject | Expect::Key => {
                if c == b'}' && expect == Expect::KeyOrEndObject {
                    stack.pop();
                    expect = after_value(&stack);
                    i += 1;
                } else if c == b'"' {
                    i = match string(data, i + 1) {
                        Ok(end) => end,
                        Err(e) => return Some(e),
                    };
                    expect = Expect::Colon;
                } else {
                    return Some(invalid(c, "looking for beginning of object key string"));
                }
            }
            Expect::Value | Expect::ValueOrEndArray => {
                if c == b']' && expect == Expect::ValueOrEndArray {
                    stack.pop();
                    expect = after_value(&stack);
                    i += 1;
                    continue;
                }
                match c {
                    b'{' => {
                        if stack.len() >= 10_000 {
                            return Some("exceeded max depth".into());
                        }
                        stack.push(b'{');
                        expect = Expect::KeyOrEndObject;
                        i += 1;
                    }
                    b'[' => {
                        if stack.len() >= 10_000 {
                            return Some("exceeded max depth".into());
                        }
                        stack.push(b'[');
                        expect = Expect::ValueOrEndArray;
                        i += 1;
                    }
                    b'"' => {
                        i = match string(data, i + 1) {
                            Ok(end) => end,
                            Err(e) => return Some(e),
                        };
                        expect = after_value(&stack);
                    }
                    b'-' | b'0'..=b'9' => {
                        i = match number(data, i) {
                            Ok(end) => end,
                            Err(e) => return Some(e),
                        };
                        expect = after_value(&stack);
                    }
                    b't' | b'f' | b'n' => {
                        let word: &[u8] = match c {
                            b't' => b"true",
                            b'f' => b"false",
                            _ => b"null",
                        };
                        for (k, want) in word.iter().enumerate().skip(1) {
                            match data.get(i + k) {
                                None => return Some("unexpected end of JSON input".into()),
                                Some(got) if got == want => {}
                                Some(got) => {
                                    return Some(invalid(
                                        *got,
                                        &format!(
                                            "in literal {} (expecting {})",
                                            std::str::from_utf8(word).unwrap_or_default(),
                                            quote_char(*want)
                                        ),
                                    ))
                                }
                            }
                        }
                        i += word.len();
                        expect = after_value(&stack);
                    }
                    _ => return Some(invalid(c, "looking for beginning of value")),
                }
            }
        }
    }
    if expect == Expect::End {
        None
    } else {
        Some("unexpected end of JSON input".into())
    }
}

/// Scans a string body from `i` (just past the opening quote); the index past the
/// closing quote.
fn string(data: &[u8], mut i: usize) -> Result<usize, String> {
    while i < data.len() {
        let c = data[i];
        match c {
            b'"' => return Ok(i + 1),
            b'\\' => {
                let Some(&e) = data.get(i + 1) else {
                    return Err("unexpected end of JSON input".into());
                };
                match e {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => i += 2,
                    b'u' => {
                        for k in 0..4 {
                            match data.get(i + 2 + k) {
                                None => return Err("unexpected end of JSON input".into()),
                                Some(h) if h.is_ascii_hexdigit() => {}
                                Some(h) => {
                                    return Err(invalid(*h, "in \\u hexadecimal character escape"))
                                }
                            }
                        }
                        i += 6;
                    }
                    other => return Err(invalid(other, "in string escape code")),
                }
            }
            c if c < 0x20 => return Err(invalid(c, "in string literal")),
            _ => i += 1,
        }
    }
    Err("unexpected end of JSON input".into())
}

/// Scans a number from `i`; the index past it.
fn number(data: &[u8], mut i: usize) -> Result<usize, String> {
    let at = |i: usize| data.get(i).copied();
    let eof = || "unexpected end of JSON input".to_string();
    if at(i) == Some(b'-') {
        i += 1;
        match at(i) {
            None => return Err(eof()),
            Some(b'0'..=b'9') => {}
            Some(c) => return Err(invalid(c, "in numeric literal")),
        }
    }
    if at(i) == Some(b'0') {
        i += 1;
    } else {
        while matches!(at(i), Some(b'0'..=b'9')) {
            i += 1;
        }
    }
    if at(i) == Some(b'.') {
        i += 1;
        match at(i) {
            None => return Err(eof()),
            Some(b'0'..=b'9') => {}
            Some(c) => return Err(invalid(c, "after decimal point in numeric literal")),
        }
        while matches!(at(i), Some(b'0'..=b'9')) {
            i += 1;
        }
    }
    if matches!(at(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(at(i), Some(b'+' | b'-')) {
            i += 1;
        }
        match at(i) {
            None => return Err(eof()),
            Some(b'0'..=b'9') => {}
            Some(c) => return Err(invalid(c, "in exponent of numeric literal")),
        }
        while matches!(at(i), Some(b'0'..=b'9')) {
            i += 1;
        }
    }
    Ok(i)
}

/// The body as kube-apiserver quotes it in a decode error: up to 30 bytes, as text when
/// it starts with `{`, else in hex; `<empty>` for nothing.
pub fn summarize(data: &[u8]) -> String {
    const MAX: usize = 30;
    let cut = &data[..data.len().min(MAX)];
    let more = if data.len() > MAX { " ..." } else { "" };
    match data.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(cut)),
        Some(_) => {
            let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_scanner_messages() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                "{not json",
                Some("invalid character 'n' looking for beginning of object key string"),
            ),
            ("", Some("unexpected end of JSON input")),
            ("{\"a\":1", Some("unexpected end of JSON input")),
            ("{\"a\" 1}", Some("invalid character '1' after object key")),
            (
                "{\"a\":1 \"b\"}",
                Some("invalid character '\"' after object key:value pair"),
            ),
            ("[1 2]", Some("invalid character '2' after array element")),
            ("{} x", Some("invalid character 'x' after top-level value")),
            ("tru", Some("unexpected end of JSON input")),
            (
                "trux",
                Some("invalid character 'x' in literal true (expecting 'e')"),
            ),
            (
                "nul!",
                Some("invalid character '!' in literal null (expecting 'l')"),
            ),
            ("-x", Some("invalid character 'x' in numeric literal")),
            (
                "1.x",
                Some("invalid character 'x' after decimal point in numeric literal"),
            ),
            (
                "1ex",
                Some("invalid character 'x' in exponent of numeric literal"),
            ),
            (
                "\"a\\q\"",
                Some("invalid character 'q' in string escape code"),
            ),
            (
                "\"\\u12g4\"",
                Some("invalid character 'g' in \\u hexadecimal character escape"),
            ),
            (
                "\"a\nb\"",
                Some("invalid character '\\n' in string literal"),
            ),
            (
                "'x'",
                Some("invalid character '\\'' looking for beginning of value"),
            ),
            ("{\"a\":[1,{\"b\":null}],\"c\":-0.5e+3}", None),
            ("  [] ", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                syntax_error(input.as_bytes()).as_deref(),
                *want,
                "{input:?}"
            );
        }
    }

    #[test]
    fn bodies_are_summarized_as_the_api_server_does() {
        assert_eq!(summarize(b"{not json"), "{not json");
        assert_eq!(summarize(b""), "<empty>");
        assert_eq!(summarize(b"[1]"), "5b315d");
        assert_eq!(
            summarize(b"{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\"}"),
            "{\"kind\":\"ConfigMap\",\"apiVersio ..."
        );
    }
}

//! Turning literal tokens into values, with cel-go's error messages.

/// Parses an int token (with its optional sign), as cel-go's `VisitInt`.
pub(crate) fn parse_int(sign: bool, text: &str) -> Option<i64> {
    let (digits, radix) = match text.strip_prefix("0x") {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    let signed = if sign {
        format!("-{digits}")
    } else {
        digits.to_string()
    };
    i64::from_str_radix(&signed, radix).ok()
}

/// Parses a uint token (ending in `u` or `U`).
pub(crate) fn parse_uint(text: &str) -> Option<u64> {
    let text = &text[..text.len().saturating_sub(1)];
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Parses a double token; out-of-range values are errors, as in Go's `strconv.ParseFloat`.
pub(crate) fn parse_double(sign: bool, text: &str) -> Option<f64> {
    let v: f64 = text.parse().ok()?;
    if v.is_infinite() {
        return None;
    }
    Some(if sign { -v } else { v })
}

const UNESCAPE: &str = "unable to unescape string";

/// Decodes a quoted string or bytes literal (without the `b` prefix), as cel-go's `unescape`.
/// Bytes come back as raw bytes; strings as UTF-8.
pub(crate) fn unescape(token: &str, is_bytes: bool) -> Result<Vec<u8>, String> {
    let value = token.replace("\r\n", "\n").replace('\r', "\n");
    let mut v: &str = &value;
    if v.len() < 2 {
        return Err(UNESCAPE.into());
    }
    let mut raw = false;
    if v.starts_with('r') || v.starts_with('R') {
        v = &v[1..];
        raw = true;
    }
    let first = v.as_bytes().first().copied();
    let last = v.as_bytes().last().copied();
    if v.is_empty() || first != last || !matches!(first, Some(b'"' | b'\'')) {
        return Err(UNESCAPE.into());
    }
    let inner: &str = if v.len() >= 6 && (v.starts_with("'''") || v.starts_with("\"\"\"")) {
        let q = &v[..3];
        if !v.ends_with(q) {
            return Err(UNESCAPE.into());
        }
        &v[3..v.len() - 3]
    } else {
        &v[1..v.len() - 1]
    };
    if raw || !inner.contains('\\') {
        return Ok(inner.as_bytes().to_vec());
    }
    let mut out = Vec::with_capacity(inner.len());
    let bytes = inner.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&e) = bytes.get(i + 1) else {
            return Err("unable to unescape string, found '\\' as last character".into());
        };
        i += 2;
        let simple = match e {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0C),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0B),
            b'\\' | b'\'' | b'"' | b'`' | b'?' => Some(e),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            continue;
        }
        match e {
            b'x' | b'X' | b'u' | b'U' => {
                let n = match e {
                    b'x' | b'X' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                if is_bytes && n > 2 {
                    return Err(UNESCAPE.into());
                }
                let hex = bytes.get(i..i + n).ok_or_else(|| UNESCAPE.to_string())?;
                let hex = std::str::from_utf8(hex).map_err(|_| UNESCAPE.to_string())?;
                let v = u32::from_str_radix(hex, 16).map_err(|_| UNESCAPE.to_string())?;
                i += n;
                push_code(&mut out, v, is_bytes)?;
            }
            b'0'..=b'3' => {
                let oct = bytes
                    .get(i..i + 2)
                    .ok_or_else(|| "unable to unescape octal sequence in string".to_string())?;
                let mut v = u32::from(e - b'0');
                for &d in oct {
                    if !(b'0'..=b'7').contains(&d) {
                        return Err("unable to unescape octal sequence in string".into());
                    }
                    v = v * 8 + u32::from(d - b'0');
                }
                i += 2;
                push_code(&mut out, v, is_bytes)?;
            }
            _ => return Err(UNESCAPE.into()),
        }
    }
    Ok(out)
}

/// Appends an escaped value: a raw byte in bytes literals, a UTF-8 encoded code point in strings
/// (invalid code points become U+FFFD as Go's encoder does; above U+10FFFF is an error).
fn push_code(out: &mut Vec<u8>, v: u32, raw_byte: bool) -> Result<(), String> {
    if raw_byte {
        out.push((v & 0xFF) as u8);
        return Ok(());
    }
    if v > 0x10FFFF {
        return Err(UNESCAPE.into());
    }
    if v < 0x80 {
        out.push(v as u8);
        return Ok(());
    }
    let c = char::from_u32(v).unwrap_or('\u{FFFD}');
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_int(false, "0x10"), Some(16));
        assert_eq!(parse_int(true, "9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_int(false, "9223372036854775808"), None);
        assert_eq!(parse_int(false, "0xFFFFFFFFFFFFFFFFF"), None);
        assert_eq!(parse_uint("18446744073709551615u"), Some(u64::MAX));
        assert_eq!(parse_uint("0x1FU"), Some(31));
        assert_eq!(parse_uint("0xFFFFFFFFFFFFFFFFFu"), None);
        assert_eq!(parse_double(true, "1.5"), Some(-1.5));
        assert_eq!(parse_double(false, "1.99e90000009"), None);
    }

    #[test]
    fn strings() {
        let s = |t: &str| String::from_utf8(unescape(t, false).unwrap()).unwrap();
        assert_eq!(s(r#""a\nb""#), "a\nb");
        assert_eq!(
            s(r#""\a\b\f\n\r\t\v'\"\\\? x""#),
            "\u{7}\u{8}\u{c}\n\r\t\u{b}'\"\\? x"
        );
        assert_eq!(s(r#"r"\n""#), "\\n");
        assert_eq!(s(r#"'''a'b'''"#), "a'b");
        assert_eq!(s(r#""\u00e9\U0001F601\x41\101""#), "é😁AA");
        assert_eq!(s(r#""\377""#), "ÿ");
        assert_eq!(unescape(r#""\377\xff""#, true).unwrap(), vec![0xFF, 0xFF]);
        assert_eq!(unescape(r#""\u00e9""#, true), Err(UNESCAPE.to_string()));
        assert_eq!(s("'a\r\nb'"), "a\nb");
    }
}

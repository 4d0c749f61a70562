//! Go's `time.Duration`: `time.ParseDuration` with its grammar, limits and error messages,
//! and `Duration.String()` (`1h30m0s`, `1.5s`, `250ms`), as KCM's flags, the API's duration
//! fields and CEL's `duration()` read and print them.

use std::fmt;

/// `time.ParseDuration`'s refusal, worded as Go words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// `time: invalid duration "x"`
    Invalid(String),
    /// `time: missing unit in duration "1"`
    MissingUnit(String),
    /// `time: unknown unit "x" in duration "1x"`
    UnknownUnit { unit: String, text: String },
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Invalid(text) => write!(f, "time: invalid duration {}", quote(text)),
            DurationError::MissingUnit(text) => {
                write!(f, "time: missing unit in duration {}", quote(text))
            }
            DurationError::UnknownUnit { unit, text } => write!(
                f,
                "time: unknown unit {} in duration {}",
                quote(unit),
                quote(text)
            ),
        }
    }
}

impl std::error::Error for DurationError {}

/// The time package's own quoting: printable ASCII kept (with `"` and `\` escaped), every
/// byte of anything else as `\xNN`.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c.is_ascii() && c >= ' ' && c != '\u{7f}' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else if c == '\u{7f}' {
            // DEL is below utf8.RuneSelf and not below ' ': Go keeps it as is.
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for byte in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{byte:02x}"));
            }
        }
    }
    out.push('"');
    out
}

const LIMIT: u64 = 1 << 63;

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Go's `leadingInt`: the digits at the start and the rest; `None` past 2^63.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut x: u64 = 0;
    for b in s[..end].bytes() {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(b - b'0');
        if x > LIMIT {
            return None;
        }
    }
    Some((x, &s[end..]))
}

/// Go's `leadingFraction`: the digits at the start as a fraction (value, scale), digits
/// past what fits in 63 bits read and dropped.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for b in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(b - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

/// `time.ParseDuration`: nanoseconds, negative durations included.
pub fn parse(text: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(text.to_string());
    let mut s = text;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (mut value, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let whole_digits = before != s.len();
        let (mut fraction, mut scale, mut fraction_digits) = (0u64, 1f64, false);
        if let Some(rest) = s.strip_prefix('.') {
            let before = rest.len();
            let (f, sc, rest) = leading_fraction(rest);
            fraction = f;
            scale = sc;
            s = rest;
            fraction_digits = before != s.len();
        }
        if !whole_digits && !fraction_digits {
            return Err(invalid());
        }
        let unit_end = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_end == 0 {
            return Err(DurationError::MissingUnit(text.to_string()));
        }
        let unit_text = &s[..unit_end];
        s = &s[unit_end..];
        let unit = unit_nanos(unit_text).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit_text.to_string(),
            text: text.to_string(),
        })?;
        if value > LIMIT / unit {
            return Err(invalid());
        }
        value *= unit;
        if fraction > 0 {
            // Go adds the fraction in float64, truncated.
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(invalid());
            }
        }
        total += value;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        // -2^63 is the one value only a negative duration reaches.
        return Ok((total as i64).wrapping_neg());
    }
    if total > LIMIT - 1 {
        return Err(invalid());
    }
    Ok(total as i64)
}

/// `Duration.String()`: `0s`, `1.5µs`, `250ms`, `1h30m0s`, `-2m3.5s`.
pub fn format(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let negative = nanos < 0;
    let mut u = nanos.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        // Below a second: one unit, with a fraction.
        let (unit, precision) = match u {
            0..=999 => ("ns", 0),
            1_000..=999_999 => ("\u{b5}s", 3),
            _ => ("ms", 6),
        };
        out.push_str(&with_fraction(u, precision));
        out.push_str(unit);
    } else {
        let seconds_part = with_fraction(u % 60_000_000_000, 9);
        out.push_str(&seconds_part);
        out.push('s');
        u /= 60_000_000_000;
        if u > 0 {
            let minutes = u % 60;
            u /= 60;
            out.insert_str(0, &format!("{minutes}m"));
            if u > 0 {
                out.insert_str(0, &format!("{u}h"));
            }
        }
    }
    if negative {
        out.insert(0, '-');
    }
    out
}

/// `value / 10^precision` printed with its fraction's trailing zeros (and a bare dot) cut.
fn with_fraction(value: u64, precision: u32) -> String {
    let scale = 10u64.pow(precision);
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:0width$}", width = precision as usize);
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_go() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("+0", 0),
            ("-0", 0),
            ("5s", 5_000_000_000),
            ("30s", 30_000_000_000),
            ("1478s", 1_478_000_000_000),
            ("-5s", -5_000_000_000),
            ("+5s", 5_000_000_000),
            ("-0s", 0),
            ("5.0s", 5_000_000_000),
            ("5.6s", 5_600_000_000),
            ("5.s", 5_000_000_000),
            (".5s", 500_000_000),
            ("1.004s", 1_004_000_000),
            ("100.00100s", 100_001_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12\u{b5}s", 12_000),
            ("12\u{3bc}s", 12_000),
            ("13ms", 13_000_000),
            ("14s", 14_000_000_000),
            ("15m", 900_000_000_000),
            ("16h", 57_600_000_000_000),
            ("3h30m", 12_600_000_000_000),
            ("10.5s4m", 250_500_000_000),
            ("-2m3.4s", -123_400_000_000),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
            ("39h9m14.425s", 140_954_425_000_000),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 1_200_000_000_000),
            ("9007199254740993ns", 9_007_199_254_740_993),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 360_000_000_000),
            ("0.830103483285477580700h", 2_988_372_539_827),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(*want), "{text}");
        }
    }

    #[test]
    fn refuses_as_go() {
        let cases = [
            ("", "time: invalid duration \"\""),
            ("3", "time: missing unit in duration \"3\""),
            ("-", "time: invalid duration \"-\""),
            ("s", "time: invalid duration \"s\""),
            (".", "time: invalid duration \".\""),
            ("-.", "time: invalid duration \"-.\""),
            (".s", "time: invalid duration \".s\""),
            ("+.s", "time: invalid duration \"+.s\""),
            ("1d", "time: unknown unit \"d\" in duration \"1d\""),
            ("\u{0}", "time: invalid duration \"\\x00\""),
            ("3000000h", "time: invalid duration \"3000000h\""),
            (
                "9223372036854775808ns",
                "time: invalid duration \"9223372036854775808ns\"",
            ),
            (
                "9223372036854775.808us",
                "time: invalid duration \"9223372036854775.808us\"",
            ),
            (
                "9223372036854ms775us808ns",
                "time: invalid duration \"9223372036854ms775us808ns\"",
            ),
            ("1 s", "time: unknown unit \" s\" in duration \"1 s\""),
        ];
        for (text, message) in cases {
            let error = parse(text).expect_err(text);
            assert_eq!(error.to_string(), message, "{text:?}");
        }
    }

    #[test]
    fn prints_as_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1\u{b5}s"),
            (2_200_000, "2.2ms"),
            (3_300_000_000, "3.3s"),
            (240_000_000_000, "4m0s"),
            (245_000_000_000, "4m5s"),
            (245_001_000_000, "4m5.001s"),
            (18_305_001_000_000, "5h5m5.001s"),
            (18_000_000_000_001, "5h0m0.000000001s"),
            (31_536_000_000_000_000, "8760h0m0s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (-4_000_000, "-4ms"),
        ];
        for (nanos, text) in cases {
            assert_eq!(format(*nanos), *text, "{nanos}");
        }
    }
}

//! Parsers for flag values written the Go way, shared by the worker's and the launcher's
//! flags (and every controller's options), so each syntax has one reading.

use std::time::Duration;

/// A Go duration (`1h30m`, `12h`, `500ms`, `1.5s`, `0`), as KCM's flags take them, with
/// Go's `time.ParseDuration` grammar and limits; negative durations are refused (no flag
/// takes one). Checked arithmetic throughout: a bad value is an error, never a panic.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = |why: &str| {
        format!("invalid duration {text:?}: {why} (expected e.g. 12h, 30m, 90s, 500ms)")
    };
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.starts_with('-') {
        return Err(invalid("it is negative"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid("it is empty"));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(invalid("expected a number before each unit"));
        }
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u128 = match &rest[..unit_end] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(invalid("a number has no unit")),
            _ => return Err(invalid("unknown unit")),
        };
        rest = &rest[unit_end..];
        let too_large = || invalid("it is too large");
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_large())?
        };
        let mut nanos = whole.checked_mul(unit).ok_or_else(too_large)?;
        let mut scale = unit;
        for digit in fraction.chars().filter_map(|c| c.to_digit(10)) {
            scale /= 10;
            nanos += u128::from(digit) * scale;
        }
        total = total.checked_add(nanos).ok_or_else(too_large)?;
        // Go's durations are int64 nanoseconds.
        if total > i64::MAX as u128 {
            return Err(too_large());
        }
    }
    Ok(Duration::from_nanos(total as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ok = [
            ("12h", Duration::from_secs(12 * 3600)),
            ("1h30m", Duration::from_secs(5400)),
            ("500ms", Duration::from_millis(500)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("+3s", Duration::from_secs(3)),
            ("0", Duration::ZERO),
            ("2562047h", Duration::from_secs(2_562_047 * 3600)),
        ];
        for (text, want) in ok {
            assert_eq!(parse_go_duration(text), Ok(want), "{text}");
        }
        for bad in [
            "",
            "12",
            "h",
            "-5s",
            "1m-3s",
            "1..5s",
            ".s",
            "3x",
            "2562048h",
            "99999999999999999999999999999999999999999h",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?}");
        }
    }
}

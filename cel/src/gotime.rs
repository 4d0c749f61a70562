//! Go's `time.ParseDuration` (from `rkcm-gocompat`) and `time.Parse(time.RFC3339, ...)`, as far as deciding whether a
//! literal converts (what cel-go's `duration()`/`timestamp()` literal validators evaluate).

/// Seconds between 0001-01-01T00:00:00Z and the Unix epoch (cel-go's lower timestamp bound).
pub(crate) const MIN_UNIX_TIME: i64 = -62_135_596_800;
/// Seconds between 9999-12-31T23:59:59Z and the Unix epoch (cel-go's upper timestamp bound).
pub(crate) const MAX_UNIX_TIME: i64 = 253_402_300_799;

/// Go's `time.ParseDuration` (the one copy, in `rkcm-gocompat`): nanoseconds, or `None`
/// where Go errs.
pub(crate) fn parse_duration(text: &str) -> Option<i64> {
    rkcm_gocompat::duration::parse(text).ok()
}

fn num(s: &[u8], n: usize) -> Option<i64> {
    let d = s.get(..n)?;
    if !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(d).ok()?.parse().ok()
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Go's `time.Parse(time.RFC3339, s)`: the Unix seconds, or `None` where Go errs.
pub(crate) fn parse_rfc3339(text: &str) -> Option<i64> {
    let s = text.as_bytes();
    let year = num(s, 4)?;
    if s.get(4) != Some(&b'-') {
        return None;
    }
    let month = num(&s[5..], 2)?;
    if s.get(7) != Some(&b'-') {
        return None;
    }
    let day = num(&s[8..], 2)?;
    if s.get(10) != Some(&b'T') {
        return None;
    }
    let mut rest = &s[11..];
    // The hour may have one digit in Go's general layout parser.
    let hour_len = if rest.get(1).is_some_and(u8::is_ascii_digit) {
        2
    } else {
        1
    };
    let hour = num(rest, hour_len)?;
    rest = &rest[hour_len..];
    if rest.first() != Some(&b':') {
        return None;
    }
    let minute = num(&rest[1..], 2)?;
    if rest.get(3) != Some(&b':') {
        return None;
    }
    let second = num(&rest[4..], 2)?;
    rest = &rest[6..];
    if matches!(rest.first(), Some(b'.' | b',')) && rest.get(1).is_some_and(u8::is_ascii_digit) {
        let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        rest = &rest[1 + n..];
    }
    let offset = match rest {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let h = num(&[*h1, *h2], 2)?;
            let m = num(&[*m1, *m2], 2)?;
            if h > 24 || m > 60 {
                return None;
            }
            let off = h * 3600 + m * 60;
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return None,
    };
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in(month, year)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_go() {
        let cases: &[(&str, Option<i64>)] = &[
            ("0", Some(0)),
            ("1s", Some(1_000_000_000)),
            ("-1.5h", Some(-5_400_000_000_000)),
            ("1h30m", Some(5_400_000_000_000)),
            ("300ms", Some(300_000_000)),
            ("1µs", Some(1_000)),
            (".5s", Some(500_000_000)),
            ("1", None),
            ("", None),
            ("1x", None),
            ("s", None),
            ("1.s", Some(1_000_000_000)),
            ("9223372036854775807ns", Some(i64::MAX)),
            ("9223372036854775808ns", None),
            ("-9223372036854775808ns", Some(i64::MIN)),
            ("3000000h", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_duration(s), *want, "{s}");
        }
    }

    #[test]
    fn timestamps_as_go() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2023-01-01T00:00:00.123456Z", Some(1_672_531_200)),
            ("2023-01-01T01:00:00+01:00", Some(1_672_531_200)),
            ("0001-01-01T00:00:00Z", Some(MIN_UNIX_TIME)),
            ("9999-12-31T23:59:59Z", Some(MAX_UNIX_TIME)),
            ("2023-02-29T00:00:00Z", None),
            ("2024-02-29T00:00:00Z", Some(1_709_164_800)),
            ("2023-01-01 00:00:00Z", None),
            ("2023-01-01T00:00:00", None),
            ("2023-13-01T00:00:00Z", None),
            ("2023-01-01T24:00:00Z", None),
            ("not a time", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_rfc3339(s), *want, "{s}");
        }
    }
}

//! Go's `time.Parse(time.RFC3339, text)`, which is how cluster-bootstrap reads a bootstrap
//! token's `expiration`: both the token cleaner and the signer must agree with kubeadm and
//! the API server's token authenticator on which texts are times and which are garbage
//! (garbage means expired).
//!
//! Go accepts more than RFC 3339 strictly allows, and so does this: a one-digit hour
//! (`T9:00:00Z`), a fraction of a second after `.` or `,` (digits past the ninth ignored),
//! zone offsets up to `±24:60`. It refuses what Go refuses: a lowercase `t` or `z`, a
//! missing zone, a leap second, a day the month does not have, anything trailing.

/// `text` as nanoseconds since the Unix epoch, or `None` when Go's parser refuses it.
///
/// Go's times reach past the years jiff's timestamps cover (`9999-12-31T23:59:59Z` is
/// a valid expiration), so the instant is counted here, in plain integers.
pub(super) fn parse(text: &str) -> Option<i128> {
    let mut cursor = Cursor(text.as_bytes());
    let year = cursor.digits(4)?;
    cursor.literal(b'-')?;
    let month = cursor.digits(2)?;
    cursor.literal(b'-')?;
    let day = cursor.digits(2)?;
    cursor.literal(b'T')?;
    let hour = cursor.one_or_two_digits()?;
    cursor.literal(b':')?;
    let minute = cursor.digits(2)?;
    cursor.literal(b':')?;
    let second = cursor.digits(2)?;
    let nanosecond = cursor.fraction();
    let offset_seconds = cursor.zone()?;
    let valid = cursor.0.is_empty()
        && (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour < 24
        && minute < 60
        && second < 60;
    if !valid {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400
        + i64::from(hour * 3600 + minute * 60 + second)
        - offset_seconds;
    Some(i128::from(seconds) * 1_000_000_000 + i128::from(nanosecond))
}

fn is_leap(year: u32) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's
/// `days_from_civil`); negative before 1970.
fn days_from_civil(year: u32, month: u32, day: u32) -> i64 {
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// What is left of the text.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn literal(&mut self, byte: u8) -> Option<()> {
        let (&first, rest) = self.0.split_first()?;
        (first == byte).then(|| self.0 = rest)
    }

    /// Exactly `count` ASCII digits.
    fn digits(&mut self, count: usize) -> Option<u32> {
        let taken = self.0.get(..count)?;
        if !taken.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.0 = &self.0[count..];
        Some(taken.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    }

    /// Go's hour (`15` in a layout): one digit, or two.
    fn one_or_two_digits(&mut self) -> Option<u32> {
        match self.0 {
            [a, b, ..] if a.is_ascii_digit() && b.is_ascii_digit() => self.digits(2),
            _ => self.digits(1),
        }
    }

    /// A fraction of a second the layout does not ask for, which Go takes anyway: `.` or
    /// `,` then at least one digit. Nanoseconds, from the first nine digits.
    fn fraction(&mut self) -> i32 {
        let [b'.' | b',', first, ..] = self.0 else {
            return 0;
        };
        if !first.is_ascii_digit() {
            return 0;
        }
        let digits = self.0[1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let mut nanos = 0i32;
        for position in 0..9 {
            let digit = self.0.get(1 + position).filter(|_| position < digits);
            nanos = nanos * 10 + digit.map_or(0, |d| i32::from(d - b'0'));
        }
        self.0 = &self.0[1 + digits..];
        nanos
    }

    /// `Z`, or `±hh:mm` (Go's `Z07:00`): the offset east of UTC, in seconds.
    fn zone(&mut self) -> Option<i64> {
        if self.literal(b'Z').is_some() {
            return Some(0);
        }
        let sign = match self.0.first()? {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        self.0 = &self.0[1..];
        let hours = self.digits(2)?;
        self.literal(b':')?;
        let minutes = self.digits(2)?;
        // Go allows 24 hours and 60 minutes: some write offsets that way.
        if hours > 24 || minutes > 60 {
            return None;
        }
        Some(sign * i64::from(hours * 3600 + minutes * 60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> i128 {
        text.parse::<jiff::Timestamp>().unwrap().as_nanosecond()
    }

    #[test]
    fn what_go_accepts() {
        let cases = [
            ("2024-02-29T10:20:30Z", "2024-02-29T10:20:30Z"),
            ("2024-02-29T10:20:30+02:00", "2024-02-29T08:20:30Z"),
            ("2024-02-29T10:20:30-01:30", "2024-02-29T11:50:30Z"),
            ("2024-02-29T10:20:30.5Z", "2024-02-29T10:20:30.5Z"),
            ("2024-02-29T10:20:30,25Z", "2024-02-29T10:20:30.25Z"),
            (
                "2024-02-29T10:20:30.1234567891234Z",
                "2024-02-29T10:20:30.123456789Z",
            ),
            ("2024-02-29T9:20:30Z", "2024-02-29T09:20:30Z"),
            ("2024-02-29T10:20:30+24:00", "2024-02-28T10:20:30Z"),
            ("2024-02-29T10:20:30-00:60", "2024-02-29T11:20:30Z"),
            ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"),
            ("1969-12-31T23:59:59.5Z", "1969-12-31T23:59:59.5Z"),
            ("1600-02-29T00:00:00Z", "1600-02-29T00:00:00Z"),
        ];
        for (text, instant) in cases {
            assert_eq!(parse(text), Some(at(instant)), "{text}");
        }
        // Beyond jiff's range, within Go's.
        assert_eq!(
            parse("9999-12-31T23:59:59Z"),
            Some(253_402_300_799 * 1_000_000_000)
        );
        assert_eq!(
            parse("0000-01-01T00:00:00+24:00"),
            Some((-62_167_219_200 - 86_400) * 1_000_000_000)
        );
    }

    #[test]
    fn what_go_refuses() {
        for text in [
            "",
            "garbage",
            "2024-02-29",
            "2024-02-29T10:20:30",
            "2024-02-29 10:20:30Z",
            "2024-02-29t10:20:30Z",
            "2024-02-29T10:20:30z",
            "2024-02-30T10:20:30Z",
            "2023-02-29T10:20:30Z",
            "2024-13-01T10:20:30Z",
            "2024-00-01T10:20:30Z",
            "2024-01-00T10:20:30Z",
            "1900-02-29T10:20:30Z",
            "2024-04-31T10:20:30Z",
            "2024-1-01T10:20:30Z",
            "24-01-01T10:20:30Z",
            "+2024-01-01T10:20:30Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T10:60:00Z",
            "2024-01-01T10:20:60Z",
            "2024-01-01T10:2:30Z",
            "2024-01-01T10:20:3Z",
            "2024-01-01T100:20:30Z",
            "2024-01-01T10:20:30.Z",
            "2024-01-01T10:20:30+0200",
            "2024-01-01T10:20:30+02",
            "2024-01-01T10:20:30+2:00",
            "2024-01-01T10:20:30+25:00",
            "2024-01-01T10:20:30+02:61",
            "2024-01-01T10:20:30 +02:00",
            "2024-01-01T10:20:30Z ",
            "2024-01-01T10:20:30ZZ",
            " 2024-01-01T10:20:30Z",
            "2024-01-01T10:20:30UTC",
            "２０２４-01-01T10:20:30Z",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }
}

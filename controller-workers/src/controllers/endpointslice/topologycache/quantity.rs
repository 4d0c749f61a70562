//! A resource quantity (`8`, `7500m`, `1.5`, `2k`, `1Ki`, `1e3`) in thousandths, rounded
//! up as apimachinery's `Quantity.MilliValue` rounds: enough for a Node's allocatable
//! CPU.

/// The quantity in thousandths, `None` when it is not a quantity or does not fit.
pub(super) fn milli_value(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    if digits.len() > 30 {
        return None;
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let fraction_digits = i32::try_from(fraction.len()).ok()?;
    let (power_of_ten, power_of_two) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        exponent if exponent.starts_with(['e', 'E']) => {
            let value: i32 = exponent[1..].parse().ok()?;
            if !(-30..=30).contains(&value) {
                return None;
            }
            (value, 0)
        }
        _ => return None,
    };
    let scaled = mantissa.checked_mul(1i128.checked_shl(power_of_two)?)?;
    // Thousandths: three more powers of ten.
    let exponent = power_of_ten + 3 - fraction_digits;
    let millis = if exponent >= 0 {
        scaled.checked_mul(10i128.checked_pow(exponent.unsigned_abs())?)?
    } else {
        let divisor = 10i128.checked_pow(exponent.unsigned_abs())?;
        // Rounded up, as MilliValue rounds.
        (scaled + divisor - 1) / divisor
    };
    let millis = i64::try_from(millis).ok()?;
    Some(if negative { -millis } else { millis })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_in_thousandths() {
        for (text, expected) in [
            ("8", Some(8000)),
            ("0", Some(0)),
            ("7500m", Some(7500)),
            ("1.5", Some(1500)),
            ("0.1", Some(100)),
            (".5", Some(500)),
            ("2k", Some(2_000_000)),
            ("1Ki", Some(1_024_000)),
            ("1e3", Some(1_000_000)),
            ("100u", Some(1)),
            ("1n", Some(1)),
            ("250m", Some(250)),
            ("-1", Some(-1000)),
            ("", None),
            ("abc", None),
            ("1x", None),
            ("1.2.3", None),
        ] {
            assert_eq!(milli_value(text), expected, "{text:?}");
        }
    }
}

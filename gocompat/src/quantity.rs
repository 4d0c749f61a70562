//! Resource quantities as Kubernetes reads, adds, compares and writes them
//! (apimachinery's `resource.Quantity`): `500m`, `1.5`, `768Mi`, `2e3`, `1k`.
//!
//! Parsing follows `ParseQuantity` exactly: the same grammar, the same errors, values
//! rounded away from zero to the nano unit, binary (`Ki`…`Ei`) amounts capped at 2^63-1,
//! and the text kept as it was written when Go keeps it (a quantity already in canonical
//! form, and a few non-canonical ones such as `+5` or `05` that Go keeps as well).
//! Its `Display` (`to_string`) is Go's `String()`: the kept text, or the canonical form in the
//! quantity's format (`1.5` → `1500m`, `1536Mi`, `1024` → `1Ki` only for binary ones).
//! Arithmetic follows `Add`/`Sub`: a zero quantity takes the format of what is added to
//! it, and any result forgets the kept text.
//!
//! Values are exact decimals (an `i128` mantissa and a base-10 exponent), so anything a
//! cluster holds is represented exactly; a number with more than 38 significant digits,
//! which Go would carry in a big decimal, is refused with [`QuantityError::OutOfRange`],
//! and a sum that would need more than 38 digits keeps its larger term.
//!
//! The one copy in the workspace: the controllers, kube-sim (its stored forms, quota
//! admission, tables, metrics) and node-sim (scheduling, kubelet) all use it.

use std::cmp::Ordering;
use std::fmt;

/// How a quantity is written (Go's `resource.Format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12e6`
    DecimalExponent,
    /// `12Mi` (12 × 2^20)
    BinarySI,
    /// `12M` (12 × 10^6)
    DecimalSI,
}

/// Why a text is not a quantity, with apimachinery's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// `ErrFormatWrong`.
    FormatWrong,
    /// `ErrNumeric`.
    Numeric,
    /// `ErrSuffix`.
    Suffix,
    /// A well-formed quantity with more significant digits than this module carries.
    OutOfRange,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::FormatWrong => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Numeric => "unable to parse numeric part of quantity",
            QuantityError::Suffix => "unable to parse quantity's suffix",
            QuantityError::OutOfRange => {
                "quantity has more significant digits than rkcm handles (38)"
            }
        })
    }
}

impl std::error::Error for QuantityError {}

/// A resource quantity: an exact decimal, the format it is written in, and the text it
/// was parsed from when Go keeps that text.
#[derive(Clone, Debug)]
pub struct Quantity {
    /// The value is `mantissa × 10^exponent`; the mantissa has no trailing zero (zero is
    /// `0 × 10^0`) and the exponent is never below -9.
    mantissa: i128,
    exponent: i64,
    format: Format,
    /// Go's cached string `s`: kept from parsing, forgotten by arithmetic.
    text: Option<Box<str>>,
}

/// The decimal SI suffixes by exponent of ten.
const DECIMAL_SUFFIXES: &[(i64, &str)] = &[
    (-9, "n"),
    (-6, "u"),
    (-3, "m"),
    (0, ""),
    (3, "k"),
    (6, "M"),
    (9, "G"),
    (12, "T"),
    (15, "P"),
    (18, "E"),
];

/// The binary SI suffixes by power of two.
const BINARY_SUFFIXES: &[(i64, &str)] = &[
    (10, "Ki"),
    (20, "Mi"),
    (30, "Gi"),
    (40, "Ti"),
    (50, "Pi"),
    (60, "Ei"),
];

/// The most significant digits a mantissa holds (i128 has 39 digits, not all of them).
const MAX_DIGITS: usize = 38;

fn pow10(exponent: i64) -> Option<i128> {
    u32::try_from(exponent)
        .ok()
        .and_then(|e| 10i128.checked_pow(e))
}

/// `(mantissa, exponent)` without trailing zeros in the mantissa.
fn normalize(mut mantissa: i128, mut exponent: i64) -> (i128, i64) {
    if mantissa == 0 {
        return (0, 0);
    }
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent = exponent.saturating_add(1);
    }
    (mantissa, exponent)
}

/// `value / 10^places`, rounded away from zero; whether nothing was lost.
fn divide_away_from_zero(value: i128, places: i64) -> (i128, bool) {
    match pow10(places) {
        Some(divisor) => {
            let quotient = value / divisor;
            if value % divisor == 0 {
                (quotient, true)
            } else {
                (quotient + value.signum(), false)
            }
        }
        // More places than digits: a non-zero value rounds to one unit.
        None => (value.signum(), value == 0),
    }
}

/// What Go's scanner finds in a quantity's text.
struct Scanned<'a> {
    positive: bool,
    /// Sign, digits, point and fraction as written (the part `inf.Dec` would read).
    value: &'a str,
    /// Integer digits without leading zeros (`"0"` when there are none).
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Go's `parseQuantityString`, byte for byte.
fn scan(text: &str) -> Result<Scanned<'_>, QuantityError> {
    let bytes = text.as_bytes();
    let end = bytes.len();
    let mut scanned = Scanned {
        positive: true,
        value: "",
        num: "",
        denom: "",
        suffix: "",
    };
    let mut pos = 0;
    if let Some(&first) = bytes.first() {
        match first {
            b'-' => {
                scanned.positive = false;
                pos += 1;
            }
            b'+' => pos += 1,
            _ => {}
        }
    }
    // Leading zeros.
    loop {
        if pos >= end {
            scanned.num = "0";
            scanned.value = "0";
            return Ok(scanned);
        }
        if bytes[pos] == b'0' {
            pos += 1;
        } else {
            break;
        }
    }
    // The integer part.
    let start = pos;
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        scanned.num = &text[start..end];
        scanned.value = text;
        return Ok(scanned);
    }
    scanned.num = if pos == start { "0" } else { &text[start..pos] };
    // The fraction.
    if bytes[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < end && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos >= end {
            scanned.denom = &text[start..end];
            scanned.value = text;
            return Ok(scanned);
        }
        scanned.denom = &text[start..pos];
    }
    scanned.value = &text[..pos];
    // The suffix: letters, then an optional sign and digits.
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && (bytes[pos] == b'-' || bytes[pos] == b'+') {
        pos += 1;
    }
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    scanned.suffix = &text[suffix_start..];
    Ok(scanned)
}

/// Go's suffix interpretation: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i64, Format)> {
    if let Some((exponent, _)) = DECIMAL_SUFFIXES.iter().find(|(_, s)| *s == suffix) {
        return Some((10, *exponent, Format::DecimalSI));
    }
    if let Some((exponent, _)) = BINARY_SUFFIXES.iter().find(|(_, s)| *s == suffix) {
        return Some((2, *exponent, Format::BinarySI));
    }
    let rest = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))
        .filter(|rest| !rest.is_empty())?;
    // Go parses an int64 and keeps its low 32 bits.
    let exponent = rest.parse::<i64>().ok()? as i32;
    Some((10, i64::from(exponent), Format::DecimalExponent))
}

impl Quantity {
    /// Go's `ParseQuantity`: the text must be a quantity exactly (no surrounding space).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        if text == "0" {
            return Ok(Quantity {
                text: Some(text.into()),
                ..Quantity::zero(Format::DecimalSI)
            });
        }
        let scanned = scan(text)?;
        let (base, exponent, format) = interpret(scanned.suffix).ok_or(QuantityError::Suffix)?;
        let keep_text = keeps_text(&scanned, base, exponent);
        let mut quantity = value_of(&scanned, base, exponent, format)?;
        if keep_text {
            quantity.text = Some(text.into());
        }
        Ok(quantity)
    }

    /// A quantity as a JSON string holds it: surrounding whitespace is ignored, as Go's
    /// `UnmarshalJSON` ignores it.
    pub fn from_api(text: &str) -> Result<Quantity, QuantityError> {
        Quantity::parse(text.trim())
    }

    /// The text Go caches as the quantity's string (`s`): the parsed text when it was
    /// already canonical, else none.
    pub fn cached_text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// Zero, in `format` (Go's `Quantity{Format: format}`).
    pub fn zero(format: Format) -> Quantity {
        Quantity {
            mantissa: 0,
            exponent: 0,
            format,
            text: None,
        }
    }

    /// `value` units (Go's `NewQuantity`).
    pub fn from_int(value: i64, format: Format) -> Quantity {
        let (mantissa, exponent) = normalize(i128::from(value), 0);
        Quantity {
            mantissa,
            exponent,
            format,
            text: None,
        }
    }

    /// `value` thousandths (Go's `NewMilliQuantity`).
    pub fn from_milli(value: i64, format: Format) -> Quantity {
        let (mantissa, exponent) = normalize(i128::from(value), -3);
        Quantity {
            mantissa,
            exponent,
            format,
            text: None,
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i32 {
        self.mantissa.signum() as i32
    }

    /// Adds `other` (Go's `Add`): a zero quantity takes `other`'s format.
    pub fn add(&mut self, other: &Quantity) {
        self.text = None;
        if self.is_zero() {
            self.format = other.format;
        }
        let (mantissa, exponent) = add_values(
            (self.mantissa, self.exponent),
            (other.mantissa, other.exponent),
        );
        self.mantissa = mantissa;
        self.exponent = exponent;
    }

    /// Subtracts `other` (Go's `Sub`): a zero quantity takes `other`'s format.
    pub fn sub(&mut self, other: &Quantity) {
        self.text = None;
        if self.is_zero() {
            self.format = other.format;
        }
        let (mantissa, exponent) = add_values(
            (self.mantissa, self.exponent),
            (other.mantissa.saturating_neg(), other.exponent),
        );
        self.mantissa = mantissa;
        self.exponent = exponent;
    }

    /// The sum, in `self`'s format unless `self` is zero.
    pub fn plus(&self, other: &Quantity) -> Quantity {
        let mut sum = self.clone();
        sum.add(other);
        sum
    }

    /// Negates it (Go's `Neg`).
    pub fn neg(&mut self) {
        self.text = None;
        self.mantissa = self.mantissa.saturating_neg();
    }

    /// The value rounded away from zero to whole units, and whether nothing was lost (Go's
    /// `RoundUp(0)`; the text is kept only when the value already was whole).
    pub fn round_up_to_units(&self) -> (Quantity, bool) {
        if self.exponent >= 0 {
            return (self.clone(), true);
        }
        let (units, exact) = divide_away_from_zero(self.mantissa, -self.exponent);
        let (mantissa, exponent) = normalize(units, 0);
        (
            Quantity {
                mantissa,
                exponent,
                format: self.format,
                text: None,
            },
            exact,
        )
    }

    /// The value in thousandths, rounded away from zero (Go's `MilliValue`); `None` when
    /// it does not fit an i64.
    pub fn milli_value(&self) -> Option<i64> {
        self.scaled_value(-3)
    }

    /// The value in units, rounded away from zero (Go's `Value`); `None` when it does not
    /// fit an i64.
    pub fn value(&self) -> Option<i64> {
        self.scaled_value(0)
    }

    /// The value in billionths (nano units), exactly: parsing already rounded it to the
    /// nano unit. `None` when it does not fit an i128.
    pub fn nano_value(&self) -> Option<i128> {
        let shift = self.exponent.checked_add(9)?;
        if self.mantissa == 0 {
            return Some(0);
        }
        self.mantissa.checked_mul(pow10(shift)?)
    }

    fn scaled_value(&self, scale: i64) -> Option<i64> {
        let shift = self.exponent - scale;
        let scaled = if shift >= 0 {
            if self.mantissa == 0 {
                0
            } else {
                self.mantissa.checked_mul(pow10(shift)?)?
            }
        } else {
            divide_away_from_zero(self.mantissa, -shift).0
        };
        i64::try_from(scaled).ok()
    }

    /// Compares values (formats and texts aside).
    pub fn cmp_value(&self, other: &Quantity) -> Ordering {
        cmp_values(
            (self.mantissa, self.exponent),
            (other.mantissa, other.exponent),
        )
    }

    /// Compares with a whole number.
    pub fn cmp_int(&self, value: i64) -> Ordering {
        let (mantissa, exponent) = normalize(i128::from(value), 0);
        cmp_values((self.mantissa, self.exponent), (mantissa, exponent))
    }

    /// The canonical form in the quantity's format (Go's `CanonicalizeBytes`).
    fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".to_string();
        }
        if self.format == Format::BinarySI
            && !(self.cmp_int(-1024) == Ordering::Greater && self.cmp_int(1024) == Ordering::Less)
        {
            if let Some(text) = self.binary_form() {
                return text;
            }
        }
        let format = match self.format {
            Format::BinarySI => Format::DecimalSI,
            other => other,
        };
        // Digits and an exponent that is a multiple of three.
        let mut digits = self.mantissa.unsigned_abs().to_string();
        let mut exponent = self.exponent;
        while exponent.rem_euclid(3) != 0 {
            digits.push('0');
            exponent -= 1;
        }
        let sign = if self.mantissa < 0 { "-" } else { "" };
        let suffix = match format {
            Format::DecimalExponent if exponent == 0 => String::new(),
            Format::DecimalExponent => format!("e{exponent}"),
            // Beyond `E` Go finds no suffix and writes none (so 1000E reads back as 1):
            // kept, since a real server writes the same.
            _ => DECIMAL_SUFFIXES
                .iter()
                .find(|(e, _)| *e == exponent)
                .map(|(_, s)| s.to_string())
                .unwrap_or_default(),
        };
        format!("{sign}{digits}{suffix}")
    }

    /// The binary form of a whole value (`1536Mi`, `1025`), or `None` when it has a
    /// fraction (then it is written as a decimal).
    fn binary_form(&self) -> Option<String> {
        let (units, exact) = self.round_up_to_units();
        if !exact {
            return None;
        }
        let value = units.mantissa.checked_mul(pow10(units.exponent)?)?;
        let mut magnitude = value.unsigned_abs();
        let mut times = 0;
        while magnitude >= 1024 && magnitude % 1024 == 0 {
            magnitude /= 1024;
            times += 1;
        }
        let suffix = BINARY_SUFFIXES
            .iter()
            .find(|(e, _)| *e == times * 10)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        let sign = if value < 0 { "-" } else { "" };
        Some(format!("{sign}{magnitude}{suffix}"))
    }
}

/// The `int64Amount{value, scale}` Go's `ParseQuantity` stores on its fast path, or `None`
/// where it falls back to an `inf.Dec` (too many digits, a scale below nano, a fraction of
/// a binary suffix, an overflow).
fn int64_amount(scanned: &Scanned<'_>, base: u32, exponent: i64) -> Option<(i64, i32)> {
    let digits = scanned.num.len() + scanned.denom.len();
    let (precision, scale, multiplier): (i64, i64, i64) = if base == 2 {
        if exponent < 0 || !scanned.denom.is_empty() {
            return None;
        }
        // Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1.
        let multiplier = u32::try_from(exponent)
            .ok()
            .and_then(|e| 1i64.checked_shl(e))
            .filter(|m| *m > 0)?;
        (
            15 - scanned.num.len() as i64 - exponent * 3 / 10 - 1,
            0,
            multiplier,
        )
    } else {
        (18 - digits as i64, exponent - scanned.denom.len() as i64, 1)
    };
    if precision < 0 || scale < -9 {
        return None;
    }
    let value: i64 = format!("{}{}", scanned.num, scanned.denom).parse().ok()?;
    let value = value.checked_mul(multiplier)?;
    Some((if scanned.positive { value } else { -value }, scale as i32))
}

/// Whether Go keeps the parsed text as the quantity's string (its fast path's canonical
/// check).
fn keeps_text(scanned: &Scanned<'_>, base: u32, exponent: i64) -> bool {
    let Some((_, scale)) = int64_amount(scanned, base, exponent) else {
        return false;
    };
    let shifted = format!("{}{}", scanned.num, scanned.denom);
    if base == 2 {
        let value: i64 = shifted.parse().unwrap_or(0);
        exponent % 10 == 0 && value & 0x07 != 0
    } else {
        scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0')
    }
}

/// How Go's `ParseQuantity` holds `text` when it takes the int64 fast path: the
/// `int64Amount{value, scale}` (`Some((0, 0))` for `"0"`); `None` when it holds an
/// `inf.Dec` instead or the text is no quantity.
pub fn go_int64_amount(text: &str) -> Option<(i64, i32)> {
    if text == "0" {
        return Some((0, 0));
    }
    let scanned = scan(text).ok()?;
    let (base, exponent, _) = interpret(scanned.suffix)?;
    int64_amount(&scanned, base, exponent)
}

/// The value of a scanned quantity, rounded away from zero to the nano unit.
fn value_of(
    scanned: &Scanned<'_>,
    base: u32,
    exponent: i64,
    mut format: Format,
) -> Result<Quantity, QuantityError> {
    let mut digits = format!("{}{}", scanned.num, scanned.denom);
    // The value is digits × 10^decimal_exponent × 2^binary_exponent.
    let mut decimal_exponent = -(scanned.denom.len() as i64);
    let binary_exponent = if base == 2 {
        exponent
    } else {
        decimal_exponent = decimal_exponent.saturating_add(exponent);
        0
    };
    // Trailing zeros change nothing; leading ones neither.
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
        decimal_exponent = decimal_exponent.saturating_add(1);
    }
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(Quantity::zero(format));
    }
    // Below the nano unit, round away from zero on the digits themselves.
    let (digits, decimal_exponent, rounded_up) = if binary_exponent == 0 && decimal_exponent < -9 {
        let dropped = usize::try_from(-9 - decimal_exponent).unwrap_or(usize::MAX);
        if dropped >= digits.len() {
            ("1".to_string(), -9, false)
        } else {
            let kept = &digits[..digits.len() - dropped];
            (
                kept.to_string(),
                -9,
                digits[digits.len() - dropped..].bytes().any(|b| b != b'0'),
            )
        }
    } else {
        (digits.to_string(), decimal_exponent, false)
    };
    if digits.len() > MAX_DIGITS {
        return Err(QuantityError::OutOfRange);
    }
    let mut mantissa: i128 = digits.parse().map_err(|_| QuantityError::Numeric)?;
    if rounded_up {
        mantissa += 1;
    }
    let mut decimal_exponent = decimal_exponent;
    if binary_exponent > 0 {
        let factor = u32::try_from(binary_exponent)
            .ok()
            .and_then(|e| 1i128.checked_shl(e))
            .ok_or(QuantityError::OutOfRange)?;
        mantissa = mantissa
            .checked_mul(factor)
            .ok_or(QuantityError::OutOfRange)?;
        if decimal_exponent < -9 {
            let (rounded, _) = divide_away_from_zero(mantissa, -9 - decimal_exponent);
            mantissa = rounded;
            decimal_exponent = -9;
        }
        // Binary amounts are capped at 2^63-1.
        let cap = (i128::from(i64::MAX), 0);
        if cmp_values(normalize(mantissa, decimal_exponent), cap) == Ordering::Greater {
            mantissa = cap.0;
            decimal_exponent = 0;
        }
    }
    let (mantissa, exponent) = normalize(mantissa, decimal_exponent);
    // A binary amount strictly between 0 and 1 is decimal.
    if format == Format::BinarySI && cmp_values((mantissa, exponent), (1, 0)) == Ordering::Less {
        format = Format::DecimalSI;
    }
    Ok(Quantity {
        mantissa: if scanned.positive {
            mantissa
        } else {
            -mantissa
        },
        exponent,
        format,
        text: None,
    })
}

/// `a + b`; when the exact sum needs more digits than a mantissa holds, the term of larger
/// magnitude.
fn add_values(a: (i128, i64), b: (i128, i64)) -> (i128, i64) {
    if a.0 == 0 {
        return b;
    }
    if b.0 == 0 {
        return a;
    }
    let exponent = a.1.min(b.1);
    let scaled = |(mantissa, e): (i128, i64)| mantissa.checked_mul(pow10(e - exponent)?);
    match (scaled(a), scaled(b)) {
        (Some(x), Some(y)) => match x.checked_add(y) {
            Some(sum) => normalize(sum, exponent),
            None => larger(a, b),
        },
        _ => larger(a, b),
    }
}

fn larger(a: (i128, i64), b: (i128, i64)) -> (i128, i64) {
    if cmp_magnitudes((a.0.unsigned_abs(), a.1), (b.0.unsigned_abs(), b.1)) == Ordering::Less {
        b
    } else {
        a
    }
}

fn cmp_values(a: (i128, i64), b: (i128, i64)) -> Ordering {
    let sign = a.0.signum().cmp(&b.0.signum());
    if sign != Ordering::Equal || a.0 == 0 {
        return sign;
    }
    let magnitude = cmp_magnitudes((a.0.unsigned_abs(), a.1), (b.0.unsigned_abs(), b.1));
    if a.0 < 0 {
        magnitude.reverse()
    } else {
        magnitude
    }
}

/// Compares two non-zero magnitudes: first where their leading digits stand, then digit
/// by digit.
fn cmp_magnitudes(a: (u128, i64), b: (u128, i64)) -> Ordering {
    let a_digits = a.0.to_string();
    let b_digits = b.0.to_string();
    let a_top = a.1.saturating_add(a_digits.len() as i64);
    let b_top = b.1.saturating_add(b_digits.len() as i64);
    a_top.cmp(&b_top).then_with(|| {
        let width = a_digits.len().max(b_digits.len());
        let pad = |digits: String| format!("{digits:0<width$}");
        pad(a_digits).cmp(&pad(b_digits))
    })
}

impl fmt::Display for Quantity {
    /// Go's `String()`: the kept text, or the canonical form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.text {
            Some(text) => f.write_str(text),
            None => f.write_str(&self.canonical()),
        }
    }
}

impl PartialEq for Quantity {
    /// Equal values (Go's `Cmp(..) == 0`), whatever their formats.
    fn eq(&self, other: &Quantity) -> bool {
        self.cmp_value(other) == Ordering::Equal
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Quantity, QuantityError> {
        Quantity::parse(text)
    }
}

#[cfg(test)]
mod tests;

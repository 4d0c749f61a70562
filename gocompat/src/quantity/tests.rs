use super::*;

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Parsed, then written back: Go's `ParseQuantity(text).String()`.
#[test]
fn parse_and_write_back_as_go_does() {
    for (text, written) in [
        ("0", "0"),
        ("1", "1"),
        ("600m", "600m"),
        ("1.5", "1500m"),
        ("0.5", "500m"),
        (".5", "500m"),
        ("1000m", "1"),
        ("2000", "2k"),
        ("1024", "1024"),
        ("1Ki", "1Ki"),
        ("768Mi", "768Mi"),
        ("1.5Gi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("0.5Ki", "512"),
        ("8Gi", "8Gi"),
        ("1e3", "1e3"),
        ("1E3", "1E3"),
        ("5e2", "500"),
        ("1e-3", "1e-3"),
        ("100u", "100u"),
        ("0.1n", "1n"),
        ("1n", "1n"),
        ("-1", "-1"),
        ("-1.5", "-1500m"),
        ("+5", "+5"),
        ("05", "05"),
        ("000", "0"),
        ("-0", "0"),
        (".", "0"),
        ("1.", "1."),
        ("1.G", "1.G"),
        ("1.5G", "1500M"),
        ("12345678901234567890", "12345678901234567890"),
        ("1000E", "1"),
        ("8Ei", "9223372036854775807"),
        ("1025Ki", "1025Ki"),
        ("100k", "100k"),
        ("100000", "100k"),
    ] {
        assert_eq!(q(text).to_string(), written, "{text}");
    }
}

#[test]
fn malformed_quantities_are_errors_never_panics() {
    for (text, error) in [
        ("", QuantityError::FormatWrong),
        ("abc", QuantityError::FormatWrong),
        ("1x", QuantityError::FormatWrong),
        ("1.2.3", QuantityError::FormatWrong),
        ("1 ", QuantityError::FormatWrong),
        (" 1", QuantityError::FormatWrong),
        ("1e", QuantityError::Suffix),
        ("1mi", QuantityError::Suffix),
        ("1Zi", QuantityError::FormatWrong),
        ("1Ki3", QuantityError::Suffix),
        ("1EE", QuantityError::Suffix),
        ("1e1.5", QuantityError::FormatWrong),
        ("--1", QuantityError::Suffix),
        (
            "123456789012345678901234567890123456789012345",
            QuantityError::OutOfRange,
        ),
    ] {
        assert_eq!(Quantity::parse(text).err(), Some(error), "{text:?}");
    }
    assert_eq!(
        Quantity::from_api(" 2 ").map(|q| q.to_string()),
        Ok("2".into())
    );
    // Extreme exponents are held, never a panic.
    for text in [
        "1e2147483647",
        "1e-2147483648",
        "9e99999999999",
        "1e9223372036854775807",
    ] {
        let _ = Quantity::parse(text).map(|q| (q.to_string(), q.milli_value()));
    }
}

#[test]
fn values_and_comparisons() {
    assert_eq!(q("250m").milli_value(), Some(250));
    assert_eq!(q("1Ki").milli_value(), Some(1_024_000));
    assert_eq!(q("100u").milli_value(), Some(1), "rounded up");
    assert_eq!(q("-100u").milli_value(), Some(-1), "away from zero");
    assert_eq!(q("1.5").value(), Some(2));
    assert_eq!(q("1e30").milli_value(), None);
    assert_eq!(q("1Gi").cmp_value(&q("1024Mi")), Ordering::Equal);
    assert_eq!(q("1G").cmp_value(&q("1Gi")), Ordering::Less);
    assert_eq!(q("-1").cmp_value(&q("1m")), Ordering::Less);
    assert_eq!(
        q("1e30").cmp_value(&q("999999999999999999999999999999")),
        Ordering::Greater
    );
    assert_eq!(q("-2").cmp_value(&q("-1")), Ordering::Less);
    assert_eq!(q("2"), q("2000m"));
    assert!(q("0").is_zero() && q("0Mi").is_zero() && !q("1n").is_zero());
}

#[test]
fn sums_take_the_format_of_the_first_non_zero_term() {
    let mut used = Quantity::zero(Format::DecimalSI);
    for _ in 0..3 {
        used.add(&q("256Mi"));
    }
    assert_eq!(used.to_string(), "768Mi");
    let mut cpu = Quantity::zero(Format::DecimalSI);
    for _ in 0..3 {
        cpu.add(&q("200m"));
    }
    assert_eq!(cpu.to_string(), "600m");
    // A decimal term added to a binary sum leaves a value with no binary form.
    let mut mixed = q("256Mi");
    mixed.add(&q("500M"));
    assert_eq!(mixed.to_string(), "768435456");
    // Arithmetic forgets the kept text.
    let mut kept = q("+5");
    kept.add(&Quantity::zero(Format::DecimalSI));
    assert_eq!(kept.to_string(), "5");
    let mut back = q("3");
    back.sub(&q("3"));
    assert_eq!(back.to_string(), "0");
    back.add(&q("1Ki"));
    assert_eq!(
        back.format(),
        Format::BinarySI,
        "zero takes the added format"
    );
    assert_eq!(q("1.5").plus(&q("500m")).to_string(), "2");
    let mut negative = q("1");
    negative.neg();
    assert_eq!(negative.to_string(), "-1");
    // A sum beyond 38 digits keeps its larger term instead of overflowing.
    let mut huge = q("1e100");
    huge.add(&q("1n"));
    assert_eq!(
        huge.to_string(),
        "10e99",
        "exponents are multiples of three"
    );
}

#[test]
fn rounding_up_to_whole_units() {
    let (rounded, exact) = q("1500m").round_up_to_units();
    assert_eq!((rounded.to_string(), exact), ("2".to_string(), false));
    let (rounded, exact) = q("2Gi").round_up_to_units();
    assert_eq!((rounded.to_string(), exact), ("2Gi".to_string(), true));
    let (rounded, exact) = q("-0.5").round_up_to_units();
    assert_eq!((rounded.to_string(), exact), ("-1".to_string(), false));
}

#[test]
fn nano_values_are_exact() {
    let nanos = |text: &str| Quantity::from_api(text).ok().and_then(|q| q.nano_value());
    assert_eq!(nanos("1"), Some(1_000_000_000));
    assert_eq!(nanos("100m"), Some(100_000_000));
    assert_eq!(nanos("1Ki"), Some(1024 * 1_000_000_000));
    assert_eq!(nanos("1.5"), Some(1_500_000_000));
    assert_eq!(nanos("1e3"), Some(1_000_000_000_000));
    assert_eq!(nanos("1Gi"), nanos("1024Mi"));
    assert_eq!(
        nanos("0.1n"),
        Some(1),
        "rounded up to the nano unit on parsing"
    );
    assert_eq!(nanos("-2m"), Some(-2_000_000));
    assert_eq!(
        nanos(" 3 "),
        Some(3_000_000_000),
        "JSON strings are trimmed"
    );
    assert_eq!(nanos("0"), Some(0));
    assert_eq!(nanos("abc"), None);
    assert_eq!(nanos(""), None);
    assert_eq!(nanos("1x"), None);
}

/// Every quantity field of the objects the real server created, sent and answered: the
/// stored form is Go's `String()` of what was sent.
#[test]
fn reference_stored_quantities() {
    use crate::recorded::{load, reference_dir};
    let Some(dir) = reference_dir() else { return };
    let cases = [
        (
            "031-create-statefulset.json",
            "/spec/volumeClaimTemplates/0/spec/resources/requests/storage",
        ),
        ("044-create-pvc.json", "/spec/resources/requests/storage"),
        ("045-create-pv.json", "/spec/capacity/storage"),
    ];
    for (name, pointer) in cases {
        let rec = load(&dir, name);
        let sent = rec["request"]["body"]
            .pointer(pointer)
            .and_then(|v| v.as_str());
        let stored = rec["response"]["body"]
            .pointer(pointer)
            .and_then(|v| v.as_str());
        let (Some(sent), Some(stored)) = (sent, stored) else {
            panic!("{name}: no quantity at {pointer}");
        };
        assert_eq!(q(sent).to_string(), stored, "{name}");
    }
}

#[test]
fn the_int64_amount_go_holds_on_its_fast_path() {
    let cases: &[(&str, Option<(i64, i32)>)] = &[
        ("0", Some((0, 0))),
        ("1", Some((1, 0))),
        ("-1.5", Some((-15, -1))),
        ("100m", Some((100, -3))),
        ("1Ki", Some((1024, 0))),
        ("1.5Gi", None),
        ("12e3", Some((12, 3))),
        ("1n", Some((1, -9))),
        ("0.1n", None),
        ("1234567890123456789", None),
        ("8Ei", None),
        ("nonsense", None),
    ];
    for (text, want) in cases {
        assert_eq!(go_int64_amount(text), *want, "{text}");
    }
    // The text is kept only where it is already canonical.
    assert_eq!(q("100m").cached_text(), Some("100m"));
    assert_eq!(q("1000m").cached_text(), None);
    assert_eq!(q("1.5Gi").cached_text(), None);
}

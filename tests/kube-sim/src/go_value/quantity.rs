//! A `resource.Quantity` as Go holds it, for `%#v`: `%#v` shows the struct's unexported
//! fields, so what prints depends on how `ParseQuantity` stored the value: a scaled int64
//! (`i`) when the digits fit, else a big decimal behind a pointer (`d`); the text it was
//! parsed from (`s`) only when that text is already canonical; and the format. Quantities
//! of a resource list are then rounded up to milli-units by the `v1` defaulting, which
//! forgets the text when it changes the scale.

use rkcm_gocompat::gofmt::GoValue;
use rkcm_gocompat::quantity::{Format, Quantity};

/// How Go holds a parsed quantity.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct GoQuantity {
    /// `i.value`, `i.scale` (meaningful when `big` is false).
    value: i64,
    scale: i32,
    /// `d.Dec` is set (the value did not fit the int64 fast path).
    big: bool,
    /// `s`: the cached text.
    text: String,
    format: &'static str,
}

fn format_name(format: Format) -> &'static str {
    match format {
        Format::DecimalExponent => "DecimalExponent",
        Format::BinarySI => "BinarySI",
        Format::DecimalSI => "DecimalSI",
    }
}

impl GoQuantity {
    /// The zero `resource.Quantity{}`.
    pub(super) fn zero() -> GoQuantity {
        GoQuantity {
            value: 0,
            scale: 0,
            big: false,
            text: String::new(),
            format: "",
        }
    }

    /// `ParseQuantity(text)` as Go stores it; a text Go refuses never reaches validation
    /// (decoding fails first), so it prints as the zero quantity.
    pub(super) fn parse(text: &str) -> GoQuantity {
        let text = text.trim();
        let Ok(parsed) = Quantity::parse(text) else {
            return GoQuantity::zero();
        };
        if text == "0" {
            return GoQuantity {
                text: text.into(),
                format: "DecimalSI",
                ..GoQuantity::zero()
            };
        }
        let format = format_name(parsed.format());
        match rkcm_gocompat::quantity::go_int64_amount(text) {
            Some((value, scale)) => GoQuantity {
                value,
                scale,
                big: false,
                text: parsed.cached_text().unwrap_or_default().to_string(),
                format,
            },
            None => GoQuantity {
                big: true,
                format,
                ..GoQuantity::zero()
            },
        }
    }

    /// `RoundUp(-3)`, as `SetDefaults_ResourceList` applies it to every quantity of a
    /// resource list.
    pub(super) fn round_up_to_milli(mut self) -> GoQuantity {
        const MILLI: i32 = -3;
        if self.big {
            self.text.clear();
            return self;
        }
        if self.scale >= MILLI {
            return self;
        }
        self.text.clear();
        self.value = scale_down_away_from_zero(self.value, (MILLI - self.scale) as u32);
        self.scale = MILLI;
        self
    }

    /// `(i.value, i.scale, d.Dec is set, s, Format)`.
    pub(super) fn parts(&self) -> (i64, i32, bool, &str, &str) {
        (self.value, self.scale, self.big, &self.text, self.format)
    }

    /// The `%#v` form: `resource.Quantity{i:resource.int64Amount{value:1, scale:0},
    /// d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"1", Format:"DecimalSI"}`.
    pub(super) fn go_value(&self) -> GoValue {
        let (value, scale) = if self.big {
            (0, 0)
        } else {
            (self.value, self.scale)
        };
        GoValue::Struct {
            ty: "resource.Quantity".into(),
            fields: vec![
                (
                    "i".into(),
                    GoValue::Struct {
                        ty: "resource.int64Amount".into(),
                        fields: vec![
                            ("value".into(), GoValue::Plain(value.to_string())),
                            ("scale".into(), GoValue::Plain(scale.to_string())),
                        ],
                    },
                ),
                (
                    "d".into(),
                    GoValue::Struct {
                        ty: "resource.infDecAmount".into(),
                        fields: vec![(
                            "Dec".into(),
                            GoValue::Ptr {
                                ty: "inf.Dec".into(),
                                nil: !self.big,
                            },
                        )],
                    },
                ),
                ("s".into(), GoValue::Str(self.text.clone())),
                ("Format".into(), GoValue::Str(self.format.into())),
            ],
        }
    }
}

/// `negativeScaleInt64`: `base / 10^steps`, rounded away from zero.
fn scale_down_away_from_zero(base: i64, steps: u32) -> i64 {
    let mut value = base;
    let mut fraction = false;
    for _ in 0..steps {
        if value % 10 != 0 {
            fraction = true;
        }
        value /= 10;
        if value == 0 {
            return match (fraction, base > 0) {
                (false, _) => 0,
                (true, true) => 1,
                (true, false) => -1,
            };
        }
    }
    match (fraction, base > 0) {
        (false, _) => value,
        (true, true) => value + 1,
        (true, false) => value - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::GoQuantity;

    fn printed(text: &str, defaulted: bool) -> String {
        let q = GoQuantity::parse(text);
        let q = if defaulted { q.round_up_to_milli() } else { q };
        q.go_value().go_syntax()
    }

    #[test]
    fn quantities_print_as_go_holds_them() {
        let shape = |value: i64, scale: i32, big: bool, s: &str, format: &str| {
            let dec = if big { "0xc000000000" } else { "nil" };
            format!(
                "resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, d:resource.infDecAmount{{Dec:(*inf.Dec)({dec})}}, s:\"{s}\", Format:\"{format}\"}}"
            )
        };
        let cases = [
            ("1", false, shape(1, 0, false, "1", "DecimalSI")),
            ("0", false, shape(0, 0, false, "0", "DecimalSI")),
            ("100m", true, shape(100, -3, false, "100m", "DecimalSI")),
            // Not canonical (trailing zeros): the text is not kept.
            ("1000m", false, shape(1000, -3, false, "", "DecimalSI")),
            ("0.5", false, shape(5, -1, false, "", "DecimalSI")),
            (
                "500Mi",
                false,
                shape(524288000, 0, false, "500Mi", "BinarySI"),
            ),
            // 128 is a multiple of 8: Go does not keep the text.
            ("128Mi", false, shape(134217728, 0, false, "", "BinarySI")),
            ("1Gi", false, shape(1073741824, 0, false, "1Gi", "BinarySI")),
            ("-2k", false, shape(-2, 3, false, "-2k", "DecimalSI")),
            ("1e3", false, shape(1, 3, false, "1e3", "DecimalExponent")),
            // Rounded up to milli-units by the defaulting, forgetting the text.
            ("1u", false, shape(1, -6, false, "1u", "DecimalSI")),
            ("1u", true, shape(1, -3, false, "", "DecimalSI")),
            ("1500u", true, shape(2, -3, false, "", "DecimalSI")),
            // A fraction of a binary amount is a big decimal.
            ("1.5Gi", true, shape(0, 0, true, "", "BinarySI")),
            (
                "12345678901234567890",
                false,
                shape(0, 0, true, "", "DecimalSI"),
            ),
        ];
        for (text, defaulted, want) in cases {
            assert_eq!(printed(text, defaulted), want, "{text}");
        }
        assert_eq!(
            GoQuantity::zero().go_value().go_syntax(),
            shape(0, 0, false, "", "")
        );
    }
}

//! Kubernetes' quantity library (`k8s.io/apiserver/pkg/cel/library/quantity.go`) on
//! `rkcm_gocompat::Quantity`.
//!
//! `isInteger`, `asInteger` and `asApproximateFloat` depend on how Go's `resource.Quantity`
//! holds the value: a scaled int64 (`int64Amount`, from the parser's fast path and int64
//! arithmetic) or an `inf.Dec` (everything else, never an integer for `AsInt64`). That
//! representation is tracked beside the value, following `ParseQuantity`, `Add` and `Sub`.

use std::cmp::Ordering;
use std::sync::Arc;

use rkcm_gocompat::Quantity;

use super::interp::R;
use super::value::{Object, Value};
use super::EvalError;

/// A quantity value with Go's internal representation.
#[derive(Clone, Debug)]
pub struct QuantityValue {
    pub quantity: Quantity,
    /// Go's `int64Amount` (`value × 10^scale`), or `None` when Go holds an `inf.Dec`.
    amount: Option<(i64, i32)>,
}

impl QuantityValue {
    /// Parses as Go's `resource.ParseQuantity`.
    pub fn parse(text: &str) -> Result<QuantityValue, rkcm_gocompat::QuantityError> {
        let quantity = Quantity::parse(text)?;
        Ok(QuantityValue {
            quantity,
            amount: rkcm_gocompat::quantity::go_int64_amount(text),
        })
    }

    /// Go's `AsInt64`.
    fn as_int64(&self) -> Option<i64> {
        let (value, scale) = self.amount?;
        match scale.cmp(&0) {
            Ordering::Equal => Some(value),
            Ordering::Less => None,
            Ordering::Greater => scale_up(value, i64::from(scale)),
        }
    }

    /// Go's `AsApproximateFloat64`.
    fn as_approximate_float(&self) -> f64 {
        match self.amount {
            Some((value, scale)) => value as f64 * pow10(scale),
            // An `inf.Dec` parsed or computed here is rounded to nano units.
            None => self
                .quantity
                .nano_value()
                .map_or(f64::NAN, |n| n as f64 * pow10(-9)),
        }
    }

    /// Go's `Add` (`negate` for `Sub`).
    fn plus(&self, other: &QuantityValue, negate: bool) -> QuantityValue {
        let mut quantity = self.quantity.clone();
        if negate {
            quantity.sub(&other.quantity);
        } else {
            quantity.add(&other.quantity);
        }
        let amount = match (self.amount, other.amount) {
            (Some(a), Some((bv, bs))) => {
                let b = if negate {
                    bv.checked_neg().map(|v| (v, bs))
                } else {
                    Some((bv, bs))
                };
                b.and_then(|b| add_amounts(a, b))
            }
            _ => None,
        };
        QuantityValue { quantity, amount }
    }
}

/// `value × 10^scale` when it fits an int64 (`positiveScaleInt64`).
fn scale_up(value: i64, scale: i64) -> Option<i64> {
    if value == 0 {
        return Some(0);
    }
    let mut v = value;
    for _ in 0..scale {
        v = v.checked_mul(10)?;
    }
    Some(v)
}

/// Go's `math.Pow10` for the small exponents quantities have.
fn pow10(n: i32) -> f64 {
    let exact = |k: u32| format!("1e{k}").parse::<f64>().unwrap_or(f64::NAN);
    if n >= 0 {
        exact(n.unsigned_abs())
    } else {
        1.0 / exact(n.unsigned_abs())
    }
}

/// `int64Amount.Add`: `None` when Go falls back to `inf.Dec`.
fn add_amounts(a: (i64, i32), b: (i64, i32)) -> Option<(i64, i32)> {
    let ((av, as_), (bv, bs)) = (a, b);
    if bv == 0 {
        return Some(a);
    }
    if av == 0 {
        return Some(b);
    }
    match as_.cmp(&bs) {
        Ordering::Equal => Some((av.checked_add(bv)?, as_)),
        Ordering::Greater => Some((
            scale_up(av, i64::from(as_) - i64::from(bs))?.checked_add(bv)?,
            bs,
        )),
        Ordering::Less => Some((
            av.checked_add(scale_up(bv, i64::from(bs) - i64::from(as_))?)?,
            as_,
        )),
    }
}

fn q(v: QuantityValue) -> Value {
    Value::Object(Object::Quantity(Arc::new(v)))
}

pub(super) fn call(function: &str, member: bool, args: &[Value]) -> R {
    use Value::{Int, String as S};
    let quantity = |v: &Value| match v {
        Value::Object(Object::Quantity(x)) => Some(x.clone()),
        _ => None,
    };
    match (function, args) {
        ("quantity", [S(s)]) => QuantityValue::parse(s)
            .map(q)
            .map_err(|e| EvalError::new(e.to_string())),
        ("isQuantity", [S(s)]) => Ok(Value::Bool(Quantity::parse(s).is_ok())),
        // 1.29 declares `sign` as a global function (`sign(q)`), the others as members.
        _ if !member && function != "sign" => Err(EvalError::no_such_overload()),
        (_, [recv, rest @ ..]) => {
            let Some(x) = quantity(recv) else {
                return Err(EvalError::no_such_overload());
            };
            let other = rest.first().and_then(quantity);
            let cmp = |y: &QuantityValue| x.quantity.cmp_value(&y.quantity);
            match (function, rest, other) {
                ("sign", [], _) => Ok(Int(i64::from(x.quantity.sign()))),
                ("isInteger", [], _) => Ok(Value::Bool(x.as_int64().is_some())),
                ("asInteger", [], _) => x
                    .as_int64()
                    .map(Int)
                    .ok_or_else(|| EvalError::new("cannot convert value to integer")),
                ("asApproximateFloat", [], _) => Ok(Value::Double(x.as_approximate_float())),
                ("isGreaterThan", [_], Some(y)) => Ok(Value::Bool(cmp(&y) == Ordering::Greater)),
                ("isLessThan", [_], Some(y)) => Ok(Value::Bool(cmp(&y) == Ordering::Less)),
                ("compareTo", [_], Some(y)) => Ok(Int(match cmp(&y) {
                    Ordering::Less => -1,
                    Ordering::Equal => 0,
                    Ordering::Greater => 1,
                })),
                ("add" | "sub", [_], Some(y)) => Ok(q(x.plus(&y, function == "sub"))),
                ("add" | "sub", [Int(i)], None) => {
                    // `resource.NewQuantity(i, DecimalExponent)`.
                    let y = QuantityValue {
                        quantity: Quantity::from_int(*i, rkcm_gocompat::Format::DecimalExponent),
                        amount: Some((*i, 0)),
                    };
                    Ok(q(x.plus(&y, function == "sub")))
                }
                _ => Err(EvalError::no_such_overload()),
            }
        }
        _ => Err(EvalError::no_such_overload()),
    }
}

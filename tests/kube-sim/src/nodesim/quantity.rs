//! Parsing of the two kinds of numbers node-sim reads from objects: resource quantities
//! (`500m`, `2Gi`, `1e3`) as the scheduler compares requests against allocatable, and
//! durations (`3s`, `1m30s`, `250ms`) as the kubelet reads them from pod annotations.

use std::time::Duration;

/// A quantity in thousandths of its unit (`"1"` → 1000, `"250m"` → 250, `"1Ki"` → 1_024_000),
/// rounded up as Go's `MilliValue` rounds. `None` for text that is not a quantity.
pub fn milli(text: &str) -> Option<i128> {
    // The one quantity parser of the workspace.
    let quantity = rkcm_gocompat::Quantity::from_api(text).ok()?;
    quantity.milli_value().map(i128::from)
}

/// A Go duration (`"3s"`, `"1m30s"`, `"500ms"`, `"2h"`: `time.ParseDuration`, the one copy
/// in `rkcm-gocompat`); node-sim's knobs also take a bare number of seconds (`"2"`,
/// `"0.5"`), which Go would refuse. Negative durations are refused.
pub fn duration(text: &str) -> Option<Duration> {
    let s = text.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return (secs >= 0.0 && secs.is_finite() && secs < 9.2e9)
            .then(|| Duration::from_secs_f64(secs));
    }
    let nanos = rkcm_gocompat::duration::parse(s).ok()?;
    u64::try_from(nanos).ok().map(Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_in_every_suffix() {
        assert_eq!(milli("1"), Some(1000));
        assert_eq!(milli("250m"), Some(250));
        assert_eq!(milli("0.5"), Some(500));
        assert_eq!(milli("1Ki"), Some(1_024_000));
        assert_eq!(milli("2Gi"), Some(2 * 1024 * 1024 * 1024 * 1000));
        assert_eq!(milli("1k"), Some(1_000_000));
        assert_eq!(milli("1e3"), Some(1_000_000));
        assert_eq!(milli("0.1m"), Some(1), "rounded up");
        assert_eq!(milli(""), None);
        assert_eq!(milli("lots"), None);
        assert_eq!(milli("1Zi"), None);
    }

    #[test]
    fn durations_like_go() {
        assert_eq!(duration("3s"), Some(Duration::from_secs(3)));
        assert_eq!(duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(duration("0"), Some(Duration::ZERO));
        for bad in ["", "s", "3 s", "3x", "-1", "1m-3s", "99999999999999999999h"] {
            assert_eq!(duration(bad), None, "{bad:?}");
        }
    }
}

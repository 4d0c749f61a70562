//! Parsers for flag values written the Go way, shared by the worker's and the launcher's
//! flags (and every controller's options), so each syntax has one reading.

use std::time::Duration;

/// A Go duration (`1h30m`, `12h`, `500ms`, `1.5s`, `0`), as KCM's flags take them: Go's
/// `time.ParseDuration` (one copy, in `rkcm-gocompat`) with its messages; negative durations
/// are refused (no flag takes one).
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let nanos = rkcm_gocompat::duration::parse(text).map_err(|e| e.to_string())?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("invalid duration {text:?}: a negative duration is not allowed here"))
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

//! Parsers for flag values written the Go way, shared by the worker's and the launcher's
//! flags (and every controller's options), so each syntax has one reading.

use std::time::Duration;

/// A Go duration (`1h30m`, `12h`, `500ms`, `90s`, `0`), as KCM's flags take them;
/// negative durations are refused. kube-core's parser reads the syntax.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = |why: String| {
        format!("invalid duration {text:?}: {why} (expected e.g. 12h, 30m, 90s, 500ms)")
    };
    if text.is_empty() {
        return Err(invalid("it is empty".into()));
    }
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let parsed: kube::core::Duration = text.parse().map_err(|e| invalid(format!("{e}")))?;
    if parsed.is_negative() {
        return Err(invalid("it is negative".into()));
    }
    Ok(parsed.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert!(parse_go_duration("12").is_err());
        assert!(parse_go_duration("h").is_err());
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("-5s").is_err());
    }
}

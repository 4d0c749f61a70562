//! Cron schedules as CronJobs write them (the standard 5-field format upstream parses:
//! minute, hour, day of month, month, day of week; `*`, lists, ranges, `/step`, month and
//! day names, `?`, and the descriptors `@yearly` `@annually` `@monthly` `@weekly`
//! `@daily` `@midnight` `@hourly`), evaluated in a time zone (the CronJob's
//! `spec.timeZone`, else the controller's, UTC here).

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Day-of-month and day-of-week both restricted: either may match (cron's rule).
    either_day: bool,
}

fn field(text: &str, min: u32, max: u32, names: &[&str]) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut star = false;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (
                range,
                step.parse::<u32>()
                    .map_err(|_| format!("invalid step {step:?}"))?,
            ),
            None => (part, 1),
        };
        if step == 0 {
            return Err(format!("step of zero in {part:?}"));
        }
        let value = |v: &str| -> Result<u32, String> {
            if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
                return Ok(i as u32 + min);
            }
            v.parse::<u32>()
                .map_err(|_| format!("failed to parse int from {v}"))
        };
        let (first, last) = if range == "*" || range == "?" {
            star = step == 1;
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            (v, if part.contains('/') { max } else { v })
        };
        if first < min || last > max || first > last {
            return Err(format!("{part:?}: values must be within {min}-{max}"));
        }
        let mut v = first;
        while v <= last {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// Splits a `TZ=Zone ` or `CRON_TZ=Zone ` prefix off a schedule (the cron library's
/// extension upstream still honours, unsupported but parsed): the zone name, if any,
/// and the schedule proper.
pub(super) fn split_time_zone(text: &str) -> Result<(Option<&str>, &str), String> {
    let text = text.trim();
    if !(text.starts_with("TZ=") || text.starts_with("CRON_TZ=")) {
        return Ok((None, text));
    }
    let Some(space) = text.find(' ') else {
        return Err(format!("missing schedule after the time zone: {text}"));
    };
    let equals = text.find('=').unwrap_or(0);
    Ok((Some(&text[equals + 1..space]), text[space..].trim()))
}

impl Schedule {
    pub(super) fn parse(text: &str) -> Result<Schedule, String> {
        let text = text.trim();
        let expanded = match text {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(format!("unrecognized descriptor: {other}"))
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: {text}",
                fields.len()
            ));
        }
        let (minutes, _) = field(fields[0], 0, 59, &[])?;
        let (hours, _) = field(fields[1], 0, 23, &[])?;
        let (days, days_star) = field(fields[2], 1, 31, &[])?;
        let (months, _) = field(fields[3], 1, 12, MONTHS)?;
        let (mut weekdays, weekdays_star) = field(fields[4], 0, 7, DAYS)?;
        if weekdays & (1 << 7) != 0 {
            // 7 is Sunday too.
            weekdays |= 1;
        }
        Ok(Schedule {
            minutes,
            hours,
            days,
            months,
            weekdays,
            either_day: !days_star && !weekdays_star,
        })
    }

    fn day_matches(&self, at: &DateTime) -> bool {
        let dom = self.days & (1 << at.day()) != 0;
        let dow = self.weekdays & (1 << at.weekday().to_sunday_zero_offset()) != 0;
        if self.either_day {
            dom || dow
        } else {
            dom && dow
        }
    }

    /// The first activation strictly after `after`, in `zone`; `None` if none within
    /// five years (an impossible date such as 30 February).
    pub(super) fn next(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let start = after.to_zoned(zone.clone()).datetime();
        // Next whole minute.
        let mut t = start
            .checked_add(1.minute())
            .ok()?
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?;
        let limit = start.year() + 5;
        while t.year() <= limit {
            if self.months & (1 << t.month()) == 0 {
                t = t
                    .first_of_month()
                    .checked_add(1.month())
                    .ok()?
                    .with()
                    .hour(0)
                    .minute(0)
                    .build()
                    .ok()?;
                continue;
            }
            if !self.day_matches(&t) {
                t = t
                    .checked_add(1.day())
                    .ok()?
                    .with()
                    .hour(0)
                    .minute(0)
                    .build()
                    .ok()?;
                continue;
            }
            if self.hours & (1 << t.hour()) == 0 {
                t = t
                    .checked_add(1.hour())
                    .ok()?
                    .with()
                    .minute(0)
                    .build()
                    .ok()?;
                continue;
            }
            if self.minutes & (1 << t.minute()) == 0 {
                t = t.checked_add(1.minute()).ok()?;
                continue;
            }
            let zoned: Zoned = t.to_zoned(zone.clone()).ok()?;
            let at = zoned.timestamp();
            if at > after {
                return Some(at);
            }
            t = t.checked_add(1.minute()).ok()?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn fields_and_descriptors() {
        let every_5 = Schedule::parse("*/5 * * * *").unwrap();
        assert_eq!(
            every_5.next(ts("2026-01-01T00:03:10Z"), &TimeZone::UTC),
            Some(ts("2026-01-01T00:05:00Z"))
        );
        let hourly = Schedule::parse("@hourly").unwrap();
        assert_eq!(
            hourly.next(ts("2026-01-01T00:00:00Z"), &TimeZone::UTC),
            Some(ts("2026-01-01T01:00:00Z"))
        );
        let weekdays = Schedule::parse("30 9 * * mon-fri").unwrap();
        // 2026-01-03 is a Saturday
        assert_eq!(
            weekdays.next(ts("2026-01-03T10:00:00Z"), &TimeZone::UTC),
            Some(ts("2026-01-05T09:30:00Z"))
        );
        let either = Schedule::parse("0 0 13 * 5").unwrap();
        // the 13th, or a Friday: 2026-01-09 is a Friday
        assert_eq!(
            either.next(ts("2026-01-06T00:00:00Z"), &TimeZone::UTC),
            Some(ts("2026-01-09T00:00:00Z"))
        );
        assert!(Schedule::parse("* * * *").is_err());
        assert!(Schedule::parse("61 * * * *").is_err());
        assert!(Schedule::parse("@sometimes").is_err());
        assert_eq!(
            Schedule::parse("0 0 30 2 *")
                .unwrap()
                .next(ts("2026-01-01T00:00:00Z"), &TimeZone::UTC),
            None
        );
    }

    #[test]
    fn time_zone_prefixes_are_split_off() {
        assert_eq!(split_time_zone("*/5 * * * *"), Ok((None, "*/5 * * * *")));
        assert_eq!(
            split_time_zone("TZ=Europe/Paris 0 9 * * 1"),
            Ok((Some("Europe/Paris"), "0 9 * * 1"))
        );
        assert_eq!(
            split_time_zone("CRON_TZ=Asia/Tokyo @daily"),
            Ok((Some("Asia/Tokyo"), "@daily"))
        );
        assert!(split_time_zone("TZ=UTC").is_err());
    }

    #[test]
    fn time_zones() {
        let nine = Schedule::parse("0 9 * * *").unwrap();
        let tokyo = TimeZone::get("Asia/Tokyo").unwrap();
        // 09:00 in Tokyo is 00:00 UTC
        assert_eq!(
            nine.next(ts("2026-01-01T01:00:00Z"), &tokyo),
            Some(ts("2026-01-02T00:00:00Z"))
        );
    }
}

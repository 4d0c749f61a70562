//! Service node ports from `--service-node-port-range`, as kube-apiserver's port allocator
//! hands them out: a requested port must be in the range and free; an unrequested one is
//! picked at random, preferring the upper part of the range (the lower band is left for
//! requested ports).

use std::collections::HashSet;
use std::fmt;

use rand::Rng;

/// kube-apiserver's default `--service-node-port-range`.
pub const DEFAULT_SERVICE_NODE_PORT_RANGE: &str = "30000-32767";

/// A port range as `k8s.io/apimachinery/pkg/util/net.PortRange` parses and prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub base: i64,
    pub size: i64,
}

impl PortRange {
    /// Parses `LOW-HIGH`, `LOW+OFFSET` or a single port, with the flag's error messages.
    pub fn parse(value: &str) -> Result<PortRange, String> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(PortRange { base: 0, size: 0 });
        }
        let number = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| format!("strconv.Atoi: parsing {s:?}: invalid syntax"))
        };
        let (low, high) = match (value.find('-'), value.find('+')) {
            (None, None) => {
                let port = number(value)?;
                (port, port)
            }
            (Some(h), None) => (number(&value[..h])?, number(&value[h + 1..])?),
            (None, Some(p)) => {
                let low = number(&value[..p])?;
                (low, low + number(&value[p + 1..])?)
            }
            (Some(_), Some(_)) => return Err(format!("unable to parse port range: {value}")),
        };
        if low > 65535 || high > 65535 {
            return Err(format!(
                "the port range cannot be greater than 65535: {value}"
            ));
        }
        if high < low {
            return Err(format!("end port cannot be less than start port: {value}"));
        }
        Ok(PortRange {
            base: low,
            size: 1 + high - low,
        })
    }

    fn contains(&self, port: i64) -> bool {
        port >= self.base && port - self.base < self.size
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.size == 0 {
            return Ok(());
        }
        write!(f, "{}-{}", self.base, self.base + self.size - 1)
    }
}

/// Why a port was not allocated (the allocator's error texts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PortError {
    NotInRange(String),
    Allocated,
    Full,
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::NotInRange(range) => write!(
                f,
                "provided port is not in the valid range. The range of valid ports is {range}"
            ),
            PortError::Allocated => f.write_str("provided port is already allocated"),
            PortError::Full => f.write_str("range is full"),
        }
    }
}

/// The node ports in use.
pub(super) struct PortAllocator {
    range: PortRange,
    /// Size of the lower band dynamic allocation avoids while the upper band has room.
    offset: i64,
    used: HashSet<i64>,
}

impl PortAllocator {
    pub(super) fn new(range: PortRange) -> Self {
        PortAllocator {
            range,
            offset: range_offset(range.size),
            used: HashSet::new(),
        }
    }

    pub(super) fn range(&self) -> PortRange {
        self.range
    }

    /// Takes a requested port.
    pub(super) fn allocate(&mut self, port: i64) -> Result<(), PortError> {
        if !self.range.contains(port) {
            return Err(PortError::NotInRange(self.range.to_string()));
        }
        if !self.used.insert(port) {
            return Err(PortError::Allocated);
        }
        Ok(())
    }

    /// Takes a free port: a random one of the upper band, else of the lower band.
    pub(super) fn allocate_next(&mut self) -> Result<i64, PortError> {
        let mut rng = rand::rng();
        for (from, to) in [(self.offset, self.range.size), (0, self.offset)] {
            let band = to - from;
            if band <= 0 {
                continue;
            }
            let start = rng.random_range(0..band);
            for i in 0..band {
                let port = self.range.base + from + (start + i) % band;
                if self.used.insert(port) {
                    return Ok(port);
                }
            }
        }
        Err(PortError::Full)
    }

    /// Gives a port back; a port out of range or free is left alone.
    pub(super) fn release(&mut self, port: i64) {
        self.used.remove(&port);
    }

    #[cfg(test)]
    pub(super) fn has(&self, port: i64) -> bool {
        self.used.contains(&port)
    }
}

/// The lower band's size: a 32nd of the range, at least 16 and at most 128 ports (none for
/// a range of 16 ports or fewer).
fn range_offset(size: i64) -> i64 {
    if size <= 16 {
        return 0;
    }
    (size / 32).clamp(16, 128)
}

#[cfg(test)]
mod tests {
    use super::*;

    type ParseCase = (&'static str, Result<(i64, i64), &'static str>);

    #[test]
    fn ranges_parse_as_the_flag_does() {
        let cases: &[ParseCase] = &[
            ("30000-32767", Ok((30000, 2768))),
            ("30000+10", Ok((30000, 11))),
            ("30080", Ok((30080, 1))),
            (" 100-200 ", Ok((100, 101))),
            (
                "200-100",
                Err("end port cannot be less than start port: 200-100"),
            ),
            (
                "60000-70000",
                Err("the port range cannot be greater than 65535: 60000-70000"),
            ),
            ("1-2+3", Err("unable to parse port range: 1-2+3")),
        ];
        for (input, want) in cases {
            let got = PortRange::parse(input).map(|r| (r.base, r.size));
            match want {
                Ok(w) => assert_eq!(got, Ok(*w), "{input}"),
                Err(m) => assert_eq!(got, Err((*m).to_string()), "{input}"),
            }
        }
        assert!(PortRange::parse("a-b").is_err());
        assert_eq!(
            PortRange::parse(DEFAULT_SERVICE_NODE_PORT_RANGE)
                .map(|r| r.to_string())
                .as_deref(),
            Ok("30000-32767")
        );
    }

    #[test]
    fn lower_band_sizes_follow_the_step_function() {
        for (size, want) in [
            (10, 0),
            (16, 0),
            (17, 16),
            (1000, 31),
            (2768, 86),
            (10000, 128),
        ] {
            assert_eq!(range_offset(size), want, "{size}");
        }
    }

    #[test]
    fn requested_ports_are_checked_and_released() {
        let mut a = PortAllocator::new(PortRange {
            base: 30000,
            size: 2768,
        });
        assert_eq!(a.allocate(30080), Ok(()));
        assert_eq!(a.allocate(30080), Err(PortError::Allocated));
        let out = a.allocate(80).unwrap_err();
        assert_eq!(
            out.to_string(),
            "provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
        a.release(30080);
        assert_eq!(a.allocate(30080), Ok(()));
        assert_eq!(
            PortError::Allocated.to_string(),
            "provided port is already allocated"
        );
    }

    #[test]
    fn dynamic_ports_prefer_the_upper_band_then_fill_the_range() {
        let range = PortRange {
            base: 30000,
            size: 40,
        };
        let mut a = PortAllocator::new(range);
        // 16 ports of lower band, 24 of upper band.
        for _ in 0..24 {
            let p = a.allocate_next().unwrap_or(0);
            assert!((30016..30040).contains(&p), "{p}");
        }
        for _ in 0..16 {
            let p = a.allocate_next().unwrap_or(0);
            assert!((30000..30016).contains(&p), "{p}");
        }
        assert_eq!(a.allocate_next(), Err(PortError::Full));
        a.release(30005);
        assert_eq!(a.allocate_next(), Ok(30005));
        assert!(a.has(30039));
    }
}

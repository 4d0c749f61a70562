//! Fault injection, for tests of how clients survive a misbehaving API server: drop every
//! open watch, fail the next N requests with 429 (with Retry-After) or 500, compact the
//! history so older resourceVersions get 410, pause serving, and move the clock that
//! stamps creation times (`clock?offset=-25h`, so a test can make an object look old to a
//! controller that ages objects; `offset=0` puts it back). Reached through the library
//! (`Faults`) or the admin-only endpoints under `/kube-sim/faults/`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::Mutex;

use tokio::sync::{watch, Notify};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    TooManyRequests,
    Internal,
}

pub struct Faults {
    drops: watch::Sender<u64>,
    fail_next: AtomicU32,
    failure: Mutex<Failure>,
    paused: AtomicBool,
    resumed: Notify,
    /// Milliseconds added to the time new objects are stamped as created.
    clock_offset_ms: AtomicI64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            drops: watch::channel(0).0,
            fail_next: AtomicU32::new(0),
            failure: Mutex::new(Failure::Internal),
            paused: AtomicBool::new(false),
            resumed: Notify::new(),
            clock_offset_ms: AtomicI64::new(0),
        }
    }
}

impl Faults {
    /// End every open watch (clients see their streams close and must re-watch).
    pub fn drop_watches(&self) {
        self.drops.send_modify(|n| *n += 1);
    }

    /// A receiver that changes when watches are to be dropped.
    pub fn watch_drops(&self) -> watch::Receiver<u64> {
        self.drops.subscribe()
    }

    /// Fail the next `n` API requests with `failure`.
    pub fn fail_next(&self, n: u32, failure: Failure) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = failure;
        self.fail_next.store(n, Ordering::SeqCst);
    }

    /// Whether this request is to fail, and how.
    pub fn take_failure(&self) -> Option<Failure> {
        let mut cur = self.fail_next.load(Ordering::SeqCst);
        while cur > 0 {
            match self
                .fail_next
                .compare_exchange(cur, cur - 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Some(*self.failure.lock().unwrap_or_else(|p| p.into_inner())),
                Err(now) => cur = now,
            }
        }
        None
    }

    /// Stamp objects created from now on `offset` away from the real time.
    pub fn set_clock_offset(&self, offset: chrono::Duration) {
        self.clock_offset_ms
            .store(offset.num_milliseconds(), Ordering::SeqCst);
    }

    /// What is added to the real time when an object's creation is stamped.
    pub fn clock_offset(&self) -> chrono::Duration {
        chrono::Duration::milliseconds(self.clock_offset_ms.load(Ordering::SeqCst))
    }

    pub fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
        self.resumed.notify_waiters();
    }

    /// Wait while serving is paused.
    pub async fn wait_if_paused(&self) {
        while self.paused.load(Ordering::SeqCst) {
            let n = self.resumed.notified();
            if !self.paused.load(Ordering::SeqCst) {
                break;
            }
            n.await;
        }
    }
}

/// A signed Go duration (`-25h`, `90m`, `-1h30m`, `1.5s`, `0`), for the clock fault.
pub fn parse_signed_duration(text: &str) -> Result<chrono::Duration, String> {
    let invalid = || format!("invalid duration {text:?} (expected e.g. -25h, 90m, 0)");
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total_ms: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_ms = match &rest[..unit_end] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            _ => return Err(invalid()),
        };
        rest = &rest[unit_end..];
        total_ms += number * unit_ms;
    }
    // About 290 years either way: far beyond any test's need, and no overflow below.
    if !total_ms.is_finite() || total_ms.abs() > 9.0e12 {
        return Err(invalid());
    }
    let ms = total_ms.round() as i64;
    Ok(chrono::Duration::milliseconds(if negative {
        -ms
    } else {
        ms
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_offsets_are_go_durations() {
        let h = chrono::Duration::hours;
        assert_eq!(parse_signed_duration("-25h"), Ok(-h(25)));
        assert_eq!(
            parse_signed_duration("1h30m"),
            Ok(chrono::Duration::minutes(90))
        );
        assert_eq!(parse_signed_duration("0"), Ok(chrono::Duration::zero()));
        assert_eq!(
            parse_signed_duration("1.5s"),
            Ok(chrono::Duration::milliseconds(1500))
        );
        for bad in ["", "-", "25", "3d", "h", "1e9999h"] {
            assert!(parse_signed_duration(bad).is_err(), "{bad}");
        }
        let f = Faults::default();
        f.set_clock_offset(-h(25));
        assert_eq!(f.clock_offset(), -h(25));
    }

    #[test]
    fn fail_next_counts_down() {
        let f = Faults::default();
        f.fail_next(2, Failure::TooManyRequests);
        assert_eq!(f.take_failure(), Some(Failure::TooManyRequests));
        assert_eq!(f.take_failure(), Some(Failure::TooManyRequests));
        assert_eq!(f.take_failure(), None);
    }

    #[tokio::test]
    async fn drop_signal_reaches_subscribers_and_pause_blocks_until_resume() {
        let f = std::sync::Arc::new(Faults::default());
        let mut rx = f.watch_drops();
        f.drop_watches();
        rx.changed().await.unwrap();
        f.pause();
        let g = f.clone();
        let waiter = tokio::spawn(async move { g.wait_if_paused().await });
        f.resume();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}

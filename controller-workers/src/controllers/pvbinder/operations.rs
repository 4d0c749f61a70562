//! The binder's asynchronous operations (upstream's `goroutinemap` with exponential
//! backoff): provisioning, deleting and recycling run apart from the sync loops, one at a
//! time per name (`provision-ns/claim[uid]`, `delete-pv[uid]`, `recycle-pv[uid]`). A name
//! already running is not started again; a name whose last run failed waits 500 ms, then
//! twice as long after each further failure up to 2m2s, before it may run again; a success
//! forgets the name.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::locks::lock;

pub(super) const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(2 * 60 + 2);

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// The operation runs already.
    AlreadyRunning,
    /// Its last run failed less than the backoff ago.
    BackingOff { remaining: Duration },
}

struct Entry {
    running: bool,
    last_error: Option<Instant>,
    backoff: Duration,
}

#[derive(Default)]
pub(super) struct RunningOperations {
    entries: Mutex<HashMap<String, Entry>>,
}

impl RunningOperations {
    /// Marks `name` as running, unless it runs or backs off.
    pub(super) fn start(&self, name: &str, now: Instant) -> Result<(), Refused> {
        let mut entries = lock(&self.entries);
        let entry = entries.entry(name.to_string()).or_insert(Entry {
            running: false,
            last_error: None,
            backoff: Duration::ZERO,
        });
        if entry.running {
            return Err(Refused::AlreadyRunning);
        }
        if let Some(failed) = entry.last_error {
            let until = failed + entry.backoff;
            if now <= until {
                return Err(Refused::BackingOff {
                    remaining: until - now,
                });
            }
        }
        entry.running = true;
        Ok(())
    }

    /// Records the end of a run of `name`.
    pub(super) fn finish(&self, name: &str, succeeded: bool, now: Instant) {
        let mut entries = lock(&self.entries);
        if succeeded {
            entries.remove(name);
            return;
        }
        if let Some(entry) = entries.get_mut(name) {
            entry.running = false;
            entry.backoff = if entry.backoff.is_zero() {
                INITIAL_BACKOFF
            } else {
                (entry.backoff * 2).min(MAX_BACKOFF)
            };
            entry.last_error = Some(now);
        }
    }

    #[cfg(test)]
    pub(super) fn is_running(&self, name: &str) -> bool {
        lock(&self.entries).get(name).is_some_and(|e| e.running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_at_a_time_and_backoff_after_failures() {
        let ops = RunningOperations::default();
        let t0 = Instant::now();
        assert_eq!(ops.start("delete-pv[u]", t0), Ok(()));
        assert_eq!(ops.start("delete-pv[u]", t0), Err(Refused::AlreadyRunning));
        assert_eq!(ops.start("recycle-pv[u]", t0), Ok(()), "another name runs");
        ops.finish("delete-pv[u]", false, t0);
        assert_eq!(
            ops.start("delete-pv[u]", t0 + Duration::from_millis(100)),
            Err(Refused::BackingOff {
                remaining: Duration::from_millis(400)
            })
        );
        let t1 = t0 + Duration::from_millis(501);
        assert_eq!(ops.start("delete-pv[u]", t1), Ok(()));
        ops.finish("delete-pv[u]", false, t1);
        assert!(
            ops.start("delete-pv[u]", t1 + Duration::from_millis(900))
                .is_err(),
            "the backoff doubled to 1 s"
        );
        let mut t = t1 + Duration::from_millis(1001);
        assert_eq!(ops.start("delete-pv[u]", t), Ok(()));
        // Keep failing: the backoff stops growing at 2m2s.
        for _ in 0..20 {
            ops.finish("delete-pv[u]", false, t);
            t += MAX_BACKOFF + Duration::from_millis(1);
            assert_eq!(ops.start("delete-pv[u]", t), Ok(()));
        }
        ops.finish("delete-pv[u]", true, t);
        assert!(!ops.is_running("delete-pv[u]"));
        assert_eq!(ops.start("delete-pv[u]", t), Ok(()), "success forgets it");
    }
}

//! Returning freed heap memory to the system after large lists and bursts of changes.
//!
//! Each object arrives as a parsed JSON tree of many small allocations that is freed as
//! soon as the object's compact form is built. glibc's allocator keeps what is freed in
//! its arenas (one per thread that allocated), so after the initial list of 10,000 pods
//! the process keeps the pages of 10,000 freed trees it will not need again. Once such a
//! burst is over, `malloc_trim(0)` gives every wholly free page of every arena back.
//! Other allocators and C libraries: nothing to do here.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::informers::Informers;

/// Objects built (listed or watched) since the last trim that make a trim worth it.
const BURST: u64 = 1_000;
/// Under a steady stream that never pauses, trim anyway after this many.
const STEADY: u64 = 50_000;
const TICK: Duration = Duration::from_secs(2);

/// Whether to trim now: `since_trim` objects were built since the last trim,
/// `since_tick` of them since the previous tick (0: the burst is over).
fn should_trim(since_trim: u64, since_tick: u64) -> bool {
    (since_trim >= BURST && since_tick == 0) || since_trim >= STEADY
}

use rkcm_client::memory::release_free_memory;

fn objects_built(informers: &Informers) -> u64 {
    informers
        .running()
        .iter()
        .map(|r| {
            let c = &r.cache.counters;
            c.events_received.load(Ordering::Relaxed) + c.objects_listed.load(Ordering::Relaxed)
        })
        .sum()
}

/// Runs until aborted: trims after every burst of [`BURST`] or more objects.
pub async fn run(informers: Arc<Informers>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut at_trim, mut at_tick) = (0u64, 0u64);
    loop {
        tick.tick().await;
        // Resources stop and start: a total that went down restarts the count.
        let now = objects_built(&informers);
        if now < at_trim {
            at_trim = 0;
        }
        let since_tick = now.saturating_sub(at_tick);
        at_tick = now;
        if should_trim(now - at_trim, since_tick) {
            at_trim = now;
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_a_burst_is_over_or_after_a_long_steady_stream() {
        for (since_trim, since_tick, trim) in [
            (0, 0, false),
            (999, 0, false),
            (1_000, 0, true),
            (1_000, 1, false),
            (20_000, 500, false),
            (49_999, 10, false),
            (50_000, 10, true),
        ] {
            assert_eq!(
                should_trim(since_trim, since_tick),
                trim,
                "{since_trim} {since_tick}"
            );
        }
    }

    #[test]
    fn releasing_is_harmless() {
        let freed: Vec<Vec<u8>> = (0..1000).map(|i| vec![0u8; 100 + i]).collect();
        drop(freed);
        release_free_memory();
    }
}

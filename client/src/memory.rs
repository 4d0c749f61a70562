//! Giving freed heap memory back to the system, for processes that free much at once (the
//! informer-server after a large list, a worker after the snapshots its streams decoded,
//! or once its start-up data is dropped).
//!
//! glibc's allocator keeps what is freed in its arenas (one per thread that allocated), so
//! after a burst of 10,000 decoded objects a process keeps the pages of the trees it freed.
//! `malloc_trim(0)` gives every wholly free page of every arena back; [`trim_after_bursts`]
//! calls it once a burst is over. Other allocators and C libraries: nothing to do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Objects decoded (listed or watched) since the last trim that make a trim worth it.
const BURST: u64 = 1_000;
/// Under a steady stream that never pauses, trim anyway after this many.
const STEADY: u64 = 50_000;
const TICK: Duration = Duration::from_secs(2);

/// Objects the informer streams of this process decoded (the client's watch).
static DECODED: AtomicU64 = AtomicU64::new(0);

/// Counts an object decoded from a stream.
pub(crate) fn count_decoded() {
    DECODED.fetch_add(1, Ordering::Relaxed);
}

/// Objects this process's informer streams have decoded so far.
pub fn decoded() -> u64 {
    DECODED.load(Ordering::Relaxed)
}

/// Whether to trim now: `since_trim` objects were handled since the last trim,
/// `since_tick` of them since the previous tick (0: the burst is over).
fn should_trim(since_trim: u64, since_tick: u64) -> bool {
    (since_trim >= BURST && since_tick == 0) || since_trim >= STEADY
}

/// Runs until aborted: gives free memory back after every burst of 1,000 or more objects
/// counted by `objects` (a running total), once a 2-second tick sees none, or after 50,000
/// under a stream that never pauses.
pub async fn trim_after_bursts(objects: impl Fn() -> u64) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut at_trim, mut at_tick) = (0u64, 0u64);
    loop {
        tick.tick().await;
        // Counted resources stop and start: a total that went down restarts the count.
        let now = objects();
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

/// Gives the allocator's free pages back to the system (glibc only).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim takes no pointer and touches only glibc's own free lists,
    // under the arenas' locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
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

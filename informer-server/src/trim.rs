//! Returning freed heap memory to the system after large lists and bursts of changes.
//!
//! Each object arrives as a parsed JSON tree of many small allocations that is freed as
//! soon as the object's compact form is built. glibc's allocator keeps what is freed in
//! its arenas (one per thread that allocated), so after the initial list of 10,000 pods
//! the process keeps the pages of 10,000 freed trees it will not need again. Once such a
//! burst is over, `malloc_trim(0)` gives every wholly free page of every arena back
//! ([`rkcm_client::memory`], which the workers use too). Other allocators and C
//! libraries: nothing to do here.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use rkcm_client::memory::trim_after_bursts;

use crate::informers::Informers;

/// Objects the caches built so far (listed or watched).
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

/// Runs until aborted: trims after every burst of objects the caches built.
pub async fn run(informers: Arc<Informers>) {
    trim_after_bursts(move || objects_built(&informers)).await
}

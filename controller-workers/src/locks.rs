//! Mutexes in the runtime guard plain bookkeeping (maps, sets, counters) that stays
//! consistent whatever a panicking holder left half-done, so a poisoned lock is used as
//! it is instead of spreading the panic to every later caller.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking over the guard even if a previous holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

//! Giving freed heap memory back to the system, for processes that free much at once (the
//! informer-server after a large list, a worker once its start-up data is dropped).
//!
//! glibc's allocator keeps what is freed in its arenas (one per thread that allocated);
//! `malloc_trim(0)` gives every wholly free page of every arena back. Other allocators and
//! C libraries: nothing to do.

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

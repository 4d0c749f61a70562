//! csi-sim's memory between passes: operations in flight and their retry backoff, and what
//! it did that the stores may not show yet.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::{RETRY_BASE, RETRY_MAX};

/// What csi-sim remembers between passes.
#[derive(Default)]
pub(super) struct CsiState {
    /// Keys of operations in flight (`provision/<uid>`, `resize/<uid>`, ...).
    pub(super) in_flight: HashSet<String>,
    /// When a claim (or VolumeAttachment) was first seen ready, for the delay knobs.
    pub(super) first_ready: HashMap<String, Instant>,
    /// Failed operations: retry no earlier than this, after this many failures.
    pub(super) backoff: HashMap<String, (Instant, u32)>,
    /// Claims provisioned (their volume may not be in the store yet).
    pub(super) provisioned: HashSet<String>,
    /// Claims resized to a size (the store may not show it yet).
    pub(super) resized: HashMap<String, String>,
    /// Volumes deleted.
    pub(super) deleted: HashSet<String>,
    /// Nodes (by uid) whose CSINode is registered.
    pub(super) csinodes: HashSet<String>,
    pub(super) drivers_created: bool,
}

impl CsiState {
    pub(super) fn ready_since(&mut self, key: &str) -> Instant {
        *self
            .first_ready
            .entry(key.to_string())
            .or_insert_with(Instant::now)
    }

    pub(super) fn backing_off(&self, key: &str) -> bool {
        self.backoff
            .get(key)
            .is_some_and(|(until, _)| Instant::now() < *until)
    }

    pub(super) fn failed(&mut self, key: &str) {
        let failures = self.backoff.get(key).map_or(0, |(_, n)| *n) + 1;
        let wait = RETRY_BASE
            .saturating_mul(1u32 << (failures - 1).min(10))
            .min(RETRY_MAX);
        self.backoff
            .insert(key.to_string(), (Instant::now() + wait, failures));
    }

    pub(super) fn succeeded(&mut self, key: &str) {
        self.backoff.remove(key);
    }
}

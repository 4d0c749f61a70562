//! ControllerExpectations: how a controller avoids acting twice on a cache that has not
//! caught up with its own writes (upstream `controller_utils.go`).
//!
//! Before creating N pods a controller records "expect N adds" under its key; each pod
//! creation seen by its informer lowers the count. While the count is positive the
//! controller does not recompute how many pods to create (it would see too few, and
//! create duplicates). Expectations older than five minutes are treated as satisfied, so
//! a lost event cannot wedge a controller. [`UidTrackingExpectations`] also remembers
//! which pods it deleted, so a deletion is counted once whether it is seen as a
//! deletionTimestamp update or as the final delete.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Expectee {
    add: i64,
    del: i64,
    since: Instant,
}

impl Expectee {
    fn fulfilled(&self) -> bool {
        self.add <= 0 && self.del <= 0
    }
}

#[derive(Default)]
pub struct ControllerExpectations {
    entries: Mutex<HashMap<String, Expectee>>,
}

impl ControllerExpectations {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Expectee>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// True when the controller may sync: no expectations, fulfilled, or expired.
    pub fn satisfied(&self, key: &str) -> bool {
        self.satisfied_at(key, Instant::now())
    }

    fn satisfied_at(&self, key: &str, now: Instant) -> bool {
        match self.lock().get(key) {
            Some(expectee) => {
                expectee.fulfilled() || now.duration_since(expectee.since) > EXPECTATIONS_TIMEOUT
            }
            None => true,
        }
    }

    /// Replaces the expectations of `key` (upstream SetExpectations).
    pub fn set(&self, key: &str, add: i64, del: i64) {
        self.lock().insert(
            key.to_string(),
            Expectee {
                add,
                del,
                since: Instant::now(),
            },
        );
    }

    pub fn expect_creations(&self, key: &str, adds: i64) {
        self.set(key, adds, 0);
    }

    pub fn expect_deletions(&self, key: &str, dels: i64) {
        self.set(key, 0, dels);
    }

    /// Adds to the existing counts (no-op without expectations), as upstream Raise/Lower.
    fn adjust(&self, key: &str, add: i64, del: i64) {
        if let Some(expectee) = self.lock().get_mut(key) {
            expectee.add += add;
            expectee.del += del;
        }
    }

    pub fn creation_observed(&self, key: &str) {
        self.adjust(key, -1, 0);
    }

    pub fn deletion_observed(&self, key: &str) {
        self.adjust(key, 0, -1);
    }

    /// A create or delete that was expected will not happen (it failed, or was skipped).
    pub fn lower(&self, key: &str, add: i64, del: i64) {
        self.adjust(key, -add, -del);
    }

    pub fn raise(&self, key: &str, add: i64, del: i64) {
        self.adjust(key, add, del);
    }

    pub fn delete(&self, key: &str) {
        self.lock().remove(key);
    }

    /// (adds, dels) still expected, for logs and tests.
    pub fn pending(&self, key: &str) -> Option<(i64, i64)> {
        self.lock().get(key).map(|e| (e.add, e.del))
    }
}

/// Expectations that also track the keys of the pods being deleted.
#[derive(Default)]
pub struct UidTrackingExpectations {
    counts: ControllerExpectations,
    deleting: Mutex<HashMap<String, HashSet<String>>>,
}

impl UidTrackingExpectations {
    pub fn new() -> Self {
        Self::default()
    }

    fn deleting(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.deleting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn satisfied(&self, key: &str) -> bool {
        self.counts.satisfied(key)
    }

    pub fn expect_creations(&self, key: &str, adds: i64) {
        self.counts.expect_creations(key, adds);
    }

    pub fn creation_observed(&self, key: &str) {
        self.counts.creation_observed(key);
    }

    pub fn lower(&self, key: &str, add: i64, del: i64) {
        self.counts.lower(key, add, del);
    }

    /// Expects the deletion of these pod keys (`ns/name`).
    pub fn expect_deletions(&self, key: &str, pod_keys: Vec<String>) {
        let mut deleting = self.deleting();
        let count = pod_keys.len() as i64;
        deleting.insert(key.to_string(), pod_keys.into_iter().collect());
        self.counts.expect_deletions(key, count);
    }

    /// Counts the deletion of `pod_key` once, if it was expected.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        let mut deleting = self.deleting();
        if let Some(keys) = deleting.get_mut(key) {
            if keys.remove(pod_key) {
                self.counts.deletion_observed(key);
            }
        }
    }

    pub fn delete(&self, key: &str) {
        let mut deleting = self.deleting();
        self.counts.delete(key);
        deleting.remove(key);
    }

    pub fn pending(&self, key: &str) -> Option<(i64, i64)> {
        self.counts.pending(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creations_block_until_observed() {
        let expectations = ControllerExpectations::new();
        assert!(expectations.satisfied("ns/rs"), "no expectations: sync");
        expectations.expect_creations("ns/rs", 2);
        assert!(!expectations.satisfied("ns/rs"));
        expectations.creation_observed("ns/rs");
        assert!(!expectations.satisfied("ns/rs"));
        expectations.creation_observed("ns/rs");
        assert!(expectations.satisfied("ns/rs"));
        // an observation beyond what was expected keeps it satisfied
        expectations.creation_observed("ns/rs");
        assert!(expectations.satisfied("ns/rs"));
    }

    #[test]
    fn failed_creations_lower_and_expiry_unblocks() {
        let expectations = ControllerExpectations::new();
        expectations.expect_creations("k", 3);
        expectations.lower("k", 2, 0);
        assert_eq!(expectations.pending("k"), Some((1, 0)));
        let later = Instant::now() + EXPECTATIONS_TIMEOUT + Duration::from_secs(1);
        assert!(
            expectations.satisfied_at("k", later),
            "expired after 5 minutes"
        );
        assert!(!expectations.satisfied_at("k", Instant::now()));
    }

    #[test]
    fn uid_tracking_counts_each_deleted_pod_once() {
        let expectations = UidTrackingExpectations::new();
        expectations.expect_deletions("ns/rs", vec!["ns/a".into(), "ns/b".into()]);
        assert!(!expectations.satisfied("ns/rs"));
        expectations.deletion_observed("ns/rs", "ns/a");
        expectations.deletion_observed("ns/rs", "ns/a");
        assert_eq!(expectations.pending("ns/rs"), Some((0, 1)));
        expectations.deletion_observed("ns/rs", "ns/unrelated");
        assert!(!expectations.satisfied("ns/rs"));
        expectations.deletion_observed("ns/rs", "ns/b");
        assert!(expectations.satisfied("ns/rs"));
        expectations.delete("ns/rs");
        assert_eq!(expectations.pending("ns/rs"), None);
    }
}

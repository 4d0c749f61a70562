//! Operations in flight (upstream `nestedpendingoperations` as the controller uses it): at
//! most one attach or detach runs per volume (per volume and node for a volume that may be
//! attached to several nodes), and a failed operation's key waits an exponentially growing
//! time (500 ms doubling to 2 min 2 s) before it may run again.

use std::time::{Duration, Instant};

const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(122);

/// An operation's key: the volume, and the node or "" for every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct OperationKey {
    pub(super) volume: String,
    pub(super) node: String,
}

impl OperationKey {
    /// The key of an operation on the volume at the node: per node only when the volume
    /// may be attached to several nodes at once.
    pub(super) fn new(volume: &str, node: &str, multi_attach: bool) -> OperationKey {
        OperationKey {
            volume: volume.to_string(),
            node: if multi_attach {
                node.to_string()
            } else {
                String::new()
            },
        }
    }

    /// Two keys name the same operation when the volumes match and either node is "" or
    /// both are the same node.
    fn matches(&self, other: &OperationKey) -> bool {
        self.volume == other.volume
            && (self.node.is_empty() || other.node.is_empty() || self.node == other.node)
    }
}

struct Operation {
    key: OperationKey,
    pending: bool,
    /// After a failure: not before this, and the wait that got it there.
    backoff: Option<(Instant, Duration)>,
}

#[derive(Default)]
pub(super) struct PendingOperations {
    operations: Vec<Operation>,
}

impl PendingOperations {
    /// `IsOperationPending`.
    pub(super) fn is_pending(&self, key: &OperationKey) -> bool {
        self.operations
            .iter()
            .any(|op| op.pending && op.key.matches(key))
    }

    /// `IsOperationSafeToRetry`: neither running nor waiting out a failure.
    pub(super) fn safe_to_retry(&self, key: &OperationKey, now: Instant) -> bool {
        !self.operations.iter().any(|op| {
            op.key.matches(key) && (op.pending || op.backoff.is_some_and(|(until, _)| now < until))
        })
    }

    /// Starts the operation unless one with its key runs or waits out a failure.
    pub(super) fn start(&mut self, key: &OperationKey, now: Instant) -> bool {
        if !self.safe_to_retry(key, now) {
            return false;
        }
        match self.operations.iter_mut().find(|op| op.key.matches(key)) {
            Some(op) => {
                op.key = key.clone();
                op.pending = true;
            }
            None => self.operations.push(Operation {
                key: key.clone(),
                pending: true,
                backoff: None,
            }),
        }
        true
    }

    /// Ends the operation: forgotten on success, backed off on failure.
    pub(super) fn finish(&mut self, key: &OperationKey, success: bool, now: Instant) {
        let Some(index) = self
            .operations
            .iter()
            .position(|op| op.pending && op.key == *key)
        else {
            return;
        };
        if success {
            self.operations.remove(index);
            return;
        }
        let op = &mut self.operations[index];
        op.pending = false;
        let wait = match op.backoff {
            None => INITIAL_BACKOFF,
            Some((_, last)) => (last * 2).min(MAX_BACKOFF),
        };
        op.backoff = Some((now + wait, wait));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_volumes_run_one_operation_in_the_cluster() {
        let now = Instant::now();
        let mut ops = PendingOperations::default();
        let exclusive = OperationKey::new("v", "n1", false);
        assert!(ops.start(&exclusive, now));
        assert!(ops.is_pending(&OperationKey::new("v", "n2", true)));
        assert!(!ops.start(&OperationKey::new("v", "n2", false), now));
        assert!(!ops.is_pending(&OperationKey::new("w", "n1", false)));
        ops.finish(&exclusive, true, now);
        assert!(!ops.is_pending(&exclusive));
    }

    #[test]
    fn shared_volumes_run_one_operation_per_node() {
        let now = Instant::now();
        let mut ops = PendingOperations::default();
        assert!(ops.start(&OperationKey::new("v", "n1", true), now));
        assert!(ops.start(&OperationKey::new("v", "n2", true), now));
        assert!(!ops.start(&OperationKey::new("v", "n1", true), now));
    }

    #[test]
    fn failures_back_off_exponentially() {
        let now = Instant::now();
        let mut ops = PendingOperations::default();
        let key = OperationKey::new("v", "n1", false);
        assert!(ops.start(&key, now));
        ops.finish(&key, false, now);
        assert!(!ops.is_pending(&key));
        assert!(!ops.safe_to_retry(&key, now + Duration::from_millis(499)));
        assert!(ops.start(&key, now + Duration::from_millis(500)));
        ops.finish(&key, false, now + Duration::from_millis(500));
        assert!(!ops.safe_to_retry(&key, now + Duration::from_millis(1499)));
        assert!(ops.safe_to_retry(&key, now + Duration::from_millis(1500)));
        let mut at = now;
        for _ in 0..20 {
            at += MAX_BACKOFF;
            assert!(ops.start(&key, at));
            ops.finish(&key, false, at);
        }
        assert!(ops.safe_to_retry(&key, at + MAX_BACKOFF));
        ops.start(&key, at + MAX_BACKOFF);
        ops.finish(&key, true, at + MAX_BACKOFF);
        assert!(ops.start(&key, at + MAX_BACKOFF));
    }
}

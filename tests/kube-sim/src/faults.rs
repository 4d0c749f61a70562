//! Fault injection, for tests of how clients survive a misbehaving API server: drop every
//! open watch, fail the next N requests with 429 (with Retry-After) or 500, compact the
//! history so older resourceVersions get 410, and pause serving. Reached through the
//! library (`Faults`) or the admin-only endpoints under `/kube-sim/faults/`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            drops: watch::channel(0).0,
            fail_next: AtomicU32::new(0),
            failure: Mutex::new(Failure::Internal),
            paused: AtomicBool::new(false),
            resumed: Notify::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

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

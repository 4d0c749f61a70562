//! What a controller is to the worker: built from the shared [`ControllerContext`] (it
//! takes the informers it needs and registers handlers that put keys on its queue), then
//! run as N workers that take keys and call its sync function, as KCM's controllers do:
//! success forgets the key's backoff, failure requeues it rate-limited (up to a maximum
//! for controllers that have one, like deployment's 15).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tracing::{debug, info, warn};

use crate::client::ClientFactory;
use crate::factory::Informers;
use crate::metrics::Metrics;
use crate::queue::WorkQueue;
use crate::recorder::Recorder;

/// A named readiness condition a controller adds to the worker's `/readyz`.
pub type ReadyCheck = (String, Arc<dyn Fn() -> bool + Send + Sync>);

#[derive(Clone)]
pub struct ControllerContext {
    pub informers: Arc<Informers>,
    pub clients: ClientFactory,
    pub metrics: Metrics,
    /// Beyond the stores' first snapshots (e.g. the garbage collector's monitors).
    pub ready_checks: Arc<std::sync::Mutex<Vec<ReadyCheck>>>,
}

impl ControllerContext {
    /// The controller's own client and event recorder.
    pub fn client_and_recorder(&self, name: &str) -> anyhow::Result<(kube::Client, Recorder)> {
        let client = self.clients.client(name)?;
        let recorder = Recorder::new(client.clone(), name);
        Ok((client, recorder))
    }

    /// A queue named as upstream names the controller's queue (the `name` label of the
    /// workqueue metrics).
    pub fn queue(&self, name: &str) -> Arc<WorkQueue<String>> {
        WorkQueue::new(name, Some(self.metrics.workqueue.for_queue(name)))
    }
}

pub type SyncFn = Arc<dyn Fn(String) -> BoxFuture<'static, anyhow::Result<()>> + Send + Sync>;

/// A controller ready to run.
pub struct Runnable {
    pub name: &'static str,
    pub queue: Arc<WorkQueue<String>>,
    pub workers: usize,
    pub sync: SyncFn,
    /// Give up on a key after this many failures in a row (it is retried at the next
    /// event or resync); `None` retries for ever.
    pub max_retries: Option<u32>,
}

impl Runnable {
    /// A controller whose workers call `sync(controller, key)` for each key of `queue`,
    /// retried for ever on failure (see [`Runnable::with_max_retries`]).
    pub fn new<C, F, Fut>(
        name: &'static str,
        queue: Arc<WorkQueue<String>>,
        workers: usize,
        controller: Arc<C>,
        sync: F,
    ) -> Runnable
    where
        C: Send + Sync + 'static,
        F: Fn(Arc<C>, String) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Runnable {
            name,
            queue,
            workers,
            sync: Arc::new(move |key| sync(controller.clone(), key).boxed()),
            max_retries: None,
        }
    }

    /// Gives up on a key after `retries` failures in a row (upstream's maxRetries).
    pub fn with_max_retries(mut self, retries: u32) -> Runnable {
        self.max_retries = Some(retries);
        self
    }

    /// A controller that works in passes over its stores instead of per key, as upstream's
    /// `go wait.Until(pass, period, stop)` loops do (the pod garbage collector, the CSR
    /// cleaner, the legacy token cleaner): `pass` runs once when the controller starts
    /// (the worker starts it once its stores hold their first snapshot and its credentials
    /// are ready), then again `period` after each pass ends, until the worker shuts down;
    /// shutdown waits for a pass in flight as it does for a key's sync.
    ///
    /// A pass deals with its own errors (upstream's log them and let the next pass retry),
    /// so it returns nothing. The passes are driven through a private queue holding one
    /// item, which reports no workqueue metrics: upstream has no queue there.
    pub fn periodic<C, F, Fut>(
        name: &'static str,
        period: Duration,
        controller: Arc<C>,
        pass: F,
    ) -> Runnable
    where
        C: Send + Sync + 'static,
        F: Fn(Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        const PASS: &str = "pass";
        let queue = WorkQueue::new(name, None);
        queue.add(PASS.to_string());
        let next = queue.clone();
        Runnable::new(name, queue, 1, controller, move |controller, key| {
            let this_pass = pass(controller);
            let next = next.clone();
            async move {
                this_pass.await;
                // Ignored once the queue is shut down: the loop ends there.
                next.add_after(key, period);
                Ok(())
            }
        })
    }

    /// Runs the workers until the queue is shut down and drained.
    pub async fn run(self, metrics: Metrics) {
        metrics.controller_running(self.name, true);
        info!(
            controller = self.name,
            workers = self.workers,
            "starting controller"
        );
        let workers: Vec<_> = (0..self.workers.max(1))
            .map(|_| {
                let queue = self.queue.clone();
                let sync = self.sync.clone();
                let name = self.name;
                let max_retries = self.max_retries;
                tokio::spawn(async move {
                    while let Some(key) = queue.get().await {
                        let started = std::time::Instant::now();
                        let result = sync(key.clone()).await;
                        debug!(controller = name, key = %key, elapsed = ?started.elapsed(), "synced");
                        match result {
                            Ok(()) => queue.forget(&key),
                            Err(error) => {
                                let retries = queue.num_requeues(&key);
                                let message = describe(&error);
                                if max_retries.is_some_and(|max| retries >= max) {
                                    warn!(controller = name, key = %key, error = %message, "dropping key out of the queue after {retries} retries");
                                    queue.forget(&key);
                                } else {
                                    if is_conflict_or_gone(&error)
                                        || error.downcast_ref::<Ignorable>().is_some()
                                    {
                                        // Our cache lags our own last write, or the
                                        // object went meanwhile: routine.
                                        debug!(controller = name, key = %key, error = %message, "conflict; requeuing");
                                    } else {
                                        warn!(controller = name, key = %key, error = %message, "error syncing; requeuing");
                                    }
                                    queue.add_rate_limited(key.clone());
                                }
                            }
                        }
                        queue.done(&key);
                    }
                })
            })
            .collect();
        for worker in workers {
            let _ = worker.await;
        }
        metrics.controller_running(self.name, false);
        info!(controller = self.name, "controller stopped");
    }
}

/// A sync failure that is expected and would be noise at warning level (upstream's
/// `IgnorableError`, e.g. a CSR the approver recognized but may not approve yet): the key
/// is retried with backoff all the same, and the failure logged at debug.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Ignorable(pub String);

/// Waits at most `timeout` for the queue's in-flight items, after stopping new work.
pub async fn shut_down(queue: &WorkQueue<String>, timeout: Duration) {
    if tokio::time::timeout(timeout, queue.shut_down_with_drain())
        .await
        .is_err()
    {
        warn!(
            queue = queue.name(),
            "shutdown: in-flight work did not finish in time"
        );
    }
}

/// An error chain in one line, API errors as their Status message and reason.
pub fn describe(error: &anyhow::Error) -> String {
    error
        .chain()
        // An API error's source is its Status, which would repeat the message.
        .filter(|cause| cause.downcast_ref::<kube::core::Status>().is_none())
        .map(|cause| match cause.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(status)) => {
                format!("{} ({} {})", status.message, status.code, status.reason)
            }
            _ => cause.to_string(),
        })
        .collect::<Vec<_>>()
        .join(": ")
}

fn is_conflict_or_gone(error: &anyhow::Error) -> bool {
    use crate::api_errors::{any_in_chain, is_conflict, is_namespace_terminating, is_not_found};
    any_in_chain(error, is_conflict)
        || any_in_chain(error, is_not_found)
        || any_in_chain(error, is_namespace_terminating)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_periodic_controller_runs_at_start_then_a_period_after_each_pass_until_shutdown() {
        let passes = Arc::new(AtomicUsize::new(0));
        let runnable = Runnable::periodic(
            "test",
            Duration::from_secs(20),
            passes.clone(),
            |passes| async move {
                // Each pass takes a second.
                tokio::time::sleep(Duration::from_secs(1)).await;
                passes.fetch_add(1, Ordering::SeqCst);
            },
        );
        let queue = runnable.queue.clone();
        let running = tokio::spawn(runnable.run(Metrics::new()));
        let count = || passes.load(Ordering::SeqCst);

        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(count(), 1, "the first pass runs at start");
        // The first pass ended at 1 s: the next runs from 21 s to 22 s.
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(count(), 1, "the period counts from the end of a pass");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(count(), 2);

        // At 42.5 s the third pass is in flight: shutdown waits for it, then stops.
        tokio::time::sleep(Duration::from_secs(20)).await;
        shut_down(&queue, Duration::from_secs(5)).await;
        assert_eq!(count(), 3, "the pass in flight finished");
        tokio::time::timeout(Duration::from_secs(1), running)
            .await
            .expect("the controller stops after shutdown")
            .expect("no panic");
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(count(), 3, "no pass after shutdown");
    }
}

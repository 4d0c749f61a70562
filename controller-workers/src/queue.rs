//! client-go's rate-limited, delaying workqueue: where a controller's event handlers put
//! keys and its workers take them.
//!
//! The guarantees controllers rely on, exactly as client-go gives them:
//! - an item is never handed to two workers at once (the `processing` set);
//! - an item added while it is being processed is queued again once, when its worker
//!   calls [`WorkQueue::done`] (the `dirty` set), so no change is lost and none is
//!   processed twice concurrently;
//! - an item added many times before a worker takes it is processed once;
//! - [`WorkQueue::add_after`] delays an add (the earliest pending delay wins);
//! - [`WorkQueue::add_rate_limited`] delays by the rate limiter, [`WorkQueue::forget`]
//!   resets its backoff;
//! - after [`WorkQueue::shut_down`] adds are ignored and workers still receive what is
//!   queued, then `None`; [`WorkQueue::shut_down_with_drain`] also waits for the items
//!   being processed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::metrics::QueueMetrics;
use crate::rate_limiter::{default_controller_rate_limiter, RateLimiter};

pub trait QueueItem: Clone + Eq + Hash + Send + Sync + 'static {}
impl<T: Clone + Eq + Hash + Send + Sync + 'static> QueueItem for T {}

struct State<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T>,
    /// Items a worker holds, with when it took them.
    processing: HashMap<T, Instant>,
    /// When each queued item was first added (for the queue-duration metric).
    added_at: HashMap<T, Instant>,
    shutting_down: bool,
}

pub struct WorkQueue<T: QueueItem> {
    name: String,
    state: Mutex<State<T>>,
    available: Notify,
    drained: Notify,
    limiter: Box<dyn RateLimiter<T>>,
    delayed: mpsc::UnboundedSender<(Instant, T)>,
    metrics: Option<QueueMetrics>,
}

impl<T: QueueItem> WorkQueue<T> {
    /// A queue with client-go's default controller rate limiter. Must be called within a
    /// tokio runtime (the delays and the unfinished-work metrics run on a task).
    pub fn new(name: &str, metrics: Option<QueueMetrics>) -> Arc<Self> {
        Self::with_rate_limiter(name, Box::new(default_controller_rate_limiter()), metrics)
    }

    pub fn with_rate_limiter(
        name: &str,
        limiter: Box<dyn RateLimiter<T>>,
        metrics: Option<QueueMetrics>,
    ) -> Arc<Self> {
        let (delayed, delayed_rx) = mpsc::unbounded_channel();
        let queue = Arc::new(WorkQueue {
            name: name.to_string(),
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashMap::new(),
                added_at: HashMap::new(),
                shutting_down: false,
            }),
            available: Notify::new(),
            drained: Notify::new(),
            limiter,
            delayed,
            metrics,
        });
        tokio::spawn(waiting_loop(Arc::downgrade(&queue), delayed_rx));
        queue
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn add(&self, item: T) {
        let mut state = self.lock();
        if state.shutting_down || state.dirty.contains(&item) {
            return;
        }
        if let Some(metrics) = &self.metrics {
            metrics.adds.inc();
        }
        state.dirty.insert(item.clone());
        state
            .added_at
            .entry(item.clone())
            .or_insert_with(Instant::now);
        if state.processing.contains_key(&item) {
            return;
        }
        state.queue.push_back(item);
        if let Some(metrics) = &self.metrics {
            metrics.depth.inc();
        }
        drop(state);
        self.available.notify_one();
    }

    /// Adds `item` once `delay` has passed (at once when it is zero).
    pub fn add_after(&self, item: T, delay: Duration) {
        if self.is_shutting_down() {
            return;
        }
        if delay.is_zero() {
            self.add(item);
            return;
        }
        // The receiver lives as long as the queue.
        let _ = self.delayed.send((Instant::now() + delay, item));
    }

    /// Adds `item` after the rate limiter's wait; counts a retry.
    pub fn add_rate_limited(&self, item: T) {
        if let Some(metrics) = &self.metrics {
            metrics.retries.inc();
        }
        let delay = self.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Stops the backoff of `item` (it succeeded, or will never be retried).
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }

    /// The next item to process, waiting for one; `None` once the queue is shut down and
    /// empty. The caller must call [`WorkQueue::done`] with it.
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.available.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if let Some(item) = state.queue.pop_front() {
                    let now = Instant::now();
                    state.dirty.remove(&item);
                    let added = state.added_at.remove(&item);
                    state.processing.insert(item.clone(), now);
                    if let Some(metrics) = &self.metrics {
                        metrics.depth.dec();
                        if let Some(added) = added {
                            metrics
                                .queue_duration
                                .observe(now.duration_since(added).as_secs_f64());
                        }
                    }
                    if !state.queue.is_empty() {
                        // Another worker may be waiting too.
                        self.available.notify_one();
                    }
                    return Some(item);
                }
                if state.shutting_down {
                    drop(state);
                    self.available.notify_waiters();
                    return None;
                }
            }
            notified.await;
        }
    }

    /// The worker is finished with `item`: if it was added meanwhile, it is queued again.
    pub fn done(&self, item: &T) {
        let mut state = self.lock();
        if let Some(started) = state.processing.remove(item) {
            if let Some(metrics) = &self.metrics {
                metrics
                    .work_duration
                    .observe(started.elapsed().as_secs_f64());
            }
        }
        let requeue = state.dirty.contains(item);
        if requeue {
            state.queue.push_back(item.clone());
            if let Some(metrics) = &self.metrics {
                metrics.depth.inc();
            }
        }
        let drained = state.processing.is_empty();
        drop(state);
        if requeue {
            self.available.notify_one();
        }
        if drained {
            self.drained.notify_waiters();
        }
    }

    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    /// Ignores further adds; workers get what is queued, then `None`.
    pub fn shut_down(&self) {
        self.lock().shutting_down = true;
        self.available.notify_waiters();
    }

    /// As [`WorkQueue::shut_down`], then waits until no item is being processed.
    pub async fn shut_down_with_drain(&self) {
        {
            let mut state = self.lock();
            state.shutting_down = true;
        }
        self.available.notify_waiters();
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.lock().processing.is_empty() {
                return;
            }
            drained.await;
        }
    }

    fn update_unfinished_work(&self) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let state = self.lock();
        let now = Instant::now();
        let mut total = 0.0;
        let mut longest: f64 = 0.0;
        for started in state.processing.values() {
            let running = now.duration_since(*started).as_secs_f64();
            total += running;
            longest = longest.max(running);
        }
        metrics.unfinished_work.set(total);
        metrics.longest_running.set(longest);
    }
}

/// Holds delayed items until they are due (keeping only the earliest time for an item
/// waiting twice), and refreshes the unfinished-work metrics every 500 ms as client-go.
async fn waiting_loop<T: QueueItem>(
    queue: Weak<WorkQueue<T>>,
    mut incoming: mpsc::UnboundedReceiver<(Instant, T)>,
) {
    let mut heap: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut waiting: HashMap<T, (Instant, u64)> = HashMap::new();
    let mut by_seq: HashMap<u64, T> = HashMap::new();
    let mut seq = 0u64;
    let mut metrics_tick = tokio::time::interval(Duration::from_millis(500));
    metrics_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let next = heap.peek().map(|Reverse((at, _))| *at);
        tokio::select! {
            received = incoming.recv() => {
                let Some((at, item)) = received else { return };
                match waiting.get(&item) {
                    Some((existing, _)) if *existing <= at => {}
                    Some((_, old_seq)) => {
                        by_seq.remove(old_seq);
                        seq += 1;
                        waiting.insert(item.clone(), (at, seq));
                        by_seq.insert(seq, item);
                        heap.push(Reverse((at, seq)));
                    }
                    None => {
                        seq += 1;
                        waiting.insert(item.clone(), (at, seq));
                        by_seq.insert(seq, item);
                        heap.push(Reverse((at, seq)));
                    }
                }
            }
            _ = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                let Some(queue) = queue.upgrade() else { return };
                let now = Instant::now();
                while let Some(Reverse((at, id))) = heap.peek().copied() {
                    if at > now {
                        break;
                    }
                    heap.pop();
                    // A stale entry (superseded by an earlier time) has no item.
                    if let Some(item) = by_seq.remove(&id) {
                        waiting.remove(&item);
                        queue.add(item);
                    }
                }
            }
            _ = metrics_tick.tick() => {
                let Some(queue) = queue.upgrade() else { return };
                queue.update_unfinished_work();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate_limiter::ItemExponentialFailure;

    async fn next_now(queue: &WorkQueue<&'static str>) -> Option<&'static str> {
        tokio::time::timeout(Duration::from_millis(50), queue.get())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test]
    async fn duplicate_adds_before_get_are_processed_once() {
        let queue = WorkQueue::new("t", None);
        queue.add("a");
        queue.add("b");
        queue.add("a");
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, Some("b"));
        assert_eq!(next_now(&queue).await, None);
    }

    #[tokio::test]
    async fn an_item_is_never_processed_twice_at_once_and_is_requeued_after_done() {
        let queue = WorkQueue::new("t", None);
        queue.add("a");
        let item = queue.get().await.unwrap();
        queue.add("a");
        queue.add("a");
        assert_eq!(queue.len(), 0, "held while processing");
        assert_eq!(next_now(&queue).await, None, "no second worker gets it");
        queue.done(&item);
        assert_eq!(queue.len(), 1, "re-queued once");
        assert_eq!(queue.get().await, Some("a"));
        queue.done(&"a");
        assert_eq!(next_now(&queue).await, None);
    }

    #[tokio::test]
    async fn waiting_workers_are_woken_by_add() {
        let queue = WorkQueue::new("t", None);
        let waiter = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get().await })
        };
        tokio::task::yield_now().await;
        queue.add("x");
        assert_eq!(waiter.await.unwrap(), Some("x"));
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_delays_and_the_earliest_delay_wins() {
        let queue = WorkQueue::new("t", None);
        queue.add_after("a", Duration::from_secs(10));
        queue.add_after("a", Duration::from_secs(2));
        queue.add_after("b", Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(1900)).await;
        assert!(queue.is_empty());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.get().await, Some("a"));
        queue.done(&"a");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(
            queue.len(),
            1,
            "a's later delay was superseded, b came once"
        );
        assert_eq!(queue.get().await, Some("b"));
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_backs_off_and_forget_resets() {
        let queue = WorkQueue::with_rate_limiter(
            "t",
            Box::new(ItemExponentialFailure::new(
                Duration::from_millis(100),
                Duration::from_secs(10),
            )),
            None,
        );
        queue.add_rate_limited("a");
        queue.add_rate_limited("a");
        assert_eq!(queue.num_requeues(&"a"), 2);
        tokio::time::sleep(Duration::from_millis(110)).await;
        assert_eq!(queue.len(), 1, "the earliest (100 ms) delay applies");
        let item = queue.get().await.unwrap();
        queue.forget(&item);
        queue.done(&item);
        assert_eq!(queue.num_requeues(&"a"), 0);
    }

    #[tokio::test]
    async fn shut_down_hands_out_the_rest_then_none_and_ignores_adds() {
        let queue = WorkQueue::new("t", None);
        queue.add("a");
        queue.shut_down();
        queue.add("b");
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, None);
    }

    #[tokio::test]
    async fn shut_down_with_drain_waits_for_processing() {
        let queue = WorkQueue::new("t", None);
        queue.add("a");
        let item = queue.get().await.unwrap();
        let drained = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.shut_down_with_drain().await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!drained.is_finished(), "still processing");
        queue.done(&item);
        tokio::time::timeout(Duration::from_secs(5), drained)
            .await
            .expect("drain finishes once done")
            .unwrap();
    }

    #[tokio::test]
    async fn metrics_count_adds_depth_and_retries() {
        let metrics = crate::metrics::Metrics::new();
        let queue = WorkQueue::new(
            "deployment",
            Some(metrics.workqueue.for_queue("deployment")),
        );
        queue.add("a");
        queue.add("a");
        queue.add("b");
        queue.add_rate_limited("c");
        let text = metrics.encode();
        assert!(
            text.contains("workqueue_adds_total{name=\"deployment\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_depth{name=\"deployment\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_retries_total{name=\"deployment\"} 1"),
            "{text}"
        );
        let a = queue.get().await.unwrap();
        queue.done(&a);
        let text = metrics.encode();
        assert!(
            text.contains("workqueue_queue_duration_seconds_count{name=\"deployment\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_work_duration_seconds_count{name=\"deployment\"} 1"),
            "{text}"
        );
    }
}

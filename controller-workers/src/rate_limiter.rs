//! How long a failed item waits before it is retried: client-go's workqueue rate limiters.
//!
//! A controller's queue uses [`default_controller_rate_limiter`], as every KCM controller
//! does: the slower of a per-item exponential backoff (5 ms doubling to 1000 s, so a key
//! that keeps failing backs off on its own) and one token bucket for the whole queue
//! (10 per second, burst 100, so a storm of failures cannot hammer the API server).

use crate::locks::lock;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` should wait now; counts as one more failure for it.
    fn when(&self, item: &T) -> Duration;
    /// The item succeeded: its failures are forgotten.
    fn forget(&self, item: &T);
    /// How many times the item has failed since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// `base * 2^failures`, capped at `max`, per item.
pub struct ItemExponentialFailure<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T: Hash + Eq + Clone> ItemExponentialFailure<T> {
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailure {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Hash + Eq + Clone + Send> RateLimiter<T> for ItemExponentialFailure<T> {
    fn when(&self, item: &T) -> Duration {
        let mut failures = lock(&self.failures);
        let count = failures.entry(item.clone()).or_insert(0);
        let exponent = *count;
        *count = count.saturating_add(1);
        let factor = 2f64.powi(exponent.min(1023) as i32);
        let backoff = self.base.as_secs_f64() * factor;
        if !backoff.is_finite() || backoff > self.max.as_secs_f64() {
            return self.max;
        }
        Duration::from_secs_f64(backoff)
    }

    fn forget(&self, item: &T) {
        lock(&self.failures).remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        lock(&self.failures).get(item).copied().unwrap_or(0)
    }
}

/// One token bucket for all items, with Go's `rate.Limiter` reservation semantics: a
/// request always gets a reservation, and waits until the bucket would have refilled to
/// cover it (tokens may go negative, so waits queue up fairly).
pub struct Bucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    pub fn new(qps: f64, burst: u32) -> Self {
        Bucket {
            qps,
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    fn reserve_at(&self, now: Instant) -> Duration {
        let mut state = lock(&self.state);
        let (tokens, last) = *state;
        let elapsed = now.saturating_duration_since(last).as_secs_f64();
        let tokens = (tokens + elapsed * self.qps).min(self.burst) - 1.0;
        *state = (tokens, now.max(last));
        if tokens >= 0.0 || self.qps <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-tokens / self.qps)
        }
    }
}

impl<T> RateLimiter<T> for Bucket {
    fn when(&self, _item: &T) -> Duration {
        self.reserve_at(Instant::now())
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// The longest wait any of the limiters asks for.
pub struct MaxOf<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOf<T> {
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOf { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOf<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .max()
            .unwrap_or_default()
    }
    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`.
pub fn default_controller_rate_limiter<T>() -> MaxOf<T>
where
    T: Hash + Eq + Clone + Send + 'static,
{
    MaxOf::new(vec![
        Box::new(ItemExponentialFailure::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(Bucket::new(10.0, 100)),
    ])
}

/// Per-id exponential delays measured from the last failure (client-go's
/// `flowcontrol.Backoff`, no jitter): the DaemonSet controller spaces out replacing a
/// node's failed daemon pods with it. An id untouched for twice the maximum starts over.
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: Mutex<HashMap<String, (Duration, Instant)>>,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn expired(&self, now: Instant, last: Instant) -> bool {
        now.saturating_duration_since(last) > self.max * 2
    }

    /// The current delay of `id` (zero when it has none).
    pub fn get(&self, id: &str) -> Duration {
        lock(&self.entries)
            .get(id)
            .map(|(delay, _)| *delay)
            .unwrap_or_default()
    }

    /// Records a failure of `id` at `now`: the first (or first after expiry) gets the
    /// initial delay, each further one doubles it up to the maximum.
    pub fn next(&self, id: &str, now: Instant) {
        let mut entries = lock(&self.entries);
        let delay = match entries.get(id) {
            Some((delay, last)) if !self.expired(now, *last) => (*delay * 2).min(self.max),
            _ => self.initial,
        };
        entries.insert(id.to_string(), (delay, now));
    }

    /// Is `now` still within `id`'s delay since its last failure?
    pub fn is_in_backoff_since_update(&self, id: &str, now: Instant) -> bool {
        match lock(&self.entries).get(id) {
            Some((delay, last)) if !self.expired(now, *last) => {
                now.saturating_duration_since(*last) < *delay
            }
            _ => false,
        }
    }

    /// Forgets ids that have not failed for twice the maximum delay.
    pub fn gc(&self, now: Instant) {
        let max = self.max;
        lock(&self.entries).retain(|_, (_, last)| now.saturating_duration_since(*last) <= max * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_per_item_doubles_from_5ms_and_caps_at_1000s() {
        let limiter =
            ItemExponentialFailure::new(Duration::from_millis(5), Duration::from_secs(1000));
        let waits: Vec<_> = (0..5).map(|_| limiter.when(&"a")).collect();
        assert_eq!(
            waits,
            [5, 10, 20, 40, 80].map(Duration::from_millis).to_vec()
        );
        assert_eq!(limiter.num_requeues(&"a"), 5);
        assert_eq!(
            limiter.when(&"b"),
            Duration::from_millis(5),
            "items are independent"
        );
        for _ in 0..30 {
            limiter.when(&"a");
        }
        assert_eq!(limiter.when(&"a"), Duration::from_secs(1000));
        for _ in 0..3000 {
            limiter.when(&"a");
        }
        assert_eq!(limiter.when(&"a"), Duration::from_secs(1000), "no overflow");
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
    }

    #[test]
    fn bucket_gives_a_burst_of_100_then_10_per_second() {
        let bucket = Bucket::new(10.0, 100);
        let start = Instant::now();
        for _ in 0..100 {
            assert_eq!(bucket.reserve_at(start), Duration::ZERO);
        }
        assert_eq!(bucket.reserve_at(start), Duration::from_millis(100));
        assert_eq!(bucket.reserve_at(start), Duration::from_millis(200));
        // a second later ten tokens have come back: two were owed, eight are free
        let later = start + Duration::from_secs(1);
        for _ in 0..8 {
            assert_eq!(bucket.reserve_at(later), Duration::ZERO);
        }
        assert_eq!(bucket.reserve_at(later), Duration::from_millis(100));
    }

    #[test]
    fn default_limiter_is_the_max_of_both() {
        let limiter = default_controller_rate_limiter::<String>();
        let key = "ns/name".to_string();
        assert_eq!(limiter.when(&key), Duration::from_millis(5));
        assert_eq!(limiter.when(&key), Duration::from_millis(10));
        assert_eq!(limiter.num_requeues(&key), 2);
        // the other 98 tokens of the burst
        for i in 0..98 {
            assert!(limiter.when(&format!("k{i}")) <= Duration::from_millis(5));
        }
        // bucket exhausted: a fresh item waits for the bucket, not its own 5 ms
        let wait = limiter.when(&"fresh".to_string());
        assert!(wait > Duration::from_millis(90), "{wait:?}");
        limiter.forget(&key);
        assert_eq!(limiter.num_requeues(&key), 0);
    }

    #[test]
    fn backoff_doubles_from_the_last_failure_and_expires() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let t0 = Instant::now();
        assert!(!backoff.is_in_backoff_since_update("a", t0));
        backoff.next("a", t0);
        assert_eq!(backoff.get("a"), Duration::from_secs(1));
        assert!(backoff.is_in_backoff_since_update("a", t0 + Duration::from_millis(500)));
        assert!(!backoff.is_in_backoff_since_update("a", t0 + Duration::from_secs(1)));
        for _ in 0..5 {
            backoff.next("a", t0);
        }
        assert_eq!(backoff.get("a"), Duration::from_secs(10), "capped");
        backoff.next("a", t0 + Duration::from_secs(21));
        assert_eq!(
            backoff.get("a"),
            Duration::from_secs(1),
            "expired: starts over"
        );
        backoff.gc(t0 + Duration::from_secs(100));
        assert_eq!(backoff.get("a"), Duration::ZERO);
    }
}

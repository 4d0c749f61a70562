//! The client-side rate limit on API server requests (`--kube-api-qps`,
//! `--kube-api-burst`), a token bucket as client-go's: `burst` requests at once, then
//! `qps` per second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A qps of 0 or less disables the limit.
    pub fn new(qps: f32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps: f64::from(qps),
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token now if one is free; else how long until one is.
    pub fn try_take(&self) -> Option<Duration> {
        if self.qps <= 0.0 {
            return None;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let (tokens, last) = *state;
        let tokens = (tokens + now.duration_since(last).as_secs_f64() * self.qps).min(self.burst);
        if tokens >= 1.0 {
            *state = (tokens - 1.0, now);
            None
        } else {
            *state = (tokens, now);
            Some(Duration::from_secs_f64((1.0 - tokens) / self.qps))
        }
    }

    pub async fn acquire(&self) {
        while let Some(wait) = self.try_take() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_qps() {
        let bucket = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert!(bucket.try_take().is_none());
        }
        let wait = bucket.try_take().expect("the burst is spent");
        assert!(
            wait <= Duration::from_millis(100) && wait > Duration::from_millis(50),
            "{wait:?}"
        );
        assert!(TokenBucket::new(0.0, 1).try_take().is_none());
    }
}

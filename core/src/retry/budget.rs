//! A per-service retry budget (Finagle style), so a failing downstream never
//! gets a retry storm: each request deposits `ratio` of a token, each retry
//! withdraws one, and a floor of `min_per_sec` retries per second is always allowed.

use parking_lot::Mutex;
use tokio::time::Instant;

pub struct RetryBudget {
    ratio: f64,
    min_per_sec: f64,
    inner: Mutex<BudgetState>,
}

struct BudgetState {
    /// Tokens earned by requests; capped so a quiet period cannot bank a storm.
    earned: f64,
    /// The floor's own bucket, refilled at `min_per_sec`.
    floor: f64,
    last_refill: Instant,
}

/// Most retries a long quiet spell can save up from deposits.
const EARNED_CAP: f64 = 100.0;

impl RetryBudget {
    pub fn new(ratio: f64, min_per_sec: u32) -> Self {
        let min_per_sec = min_per_sec as f64;
        RetryBudget {
            ratio,
            min_per_sec,
            inner: Mutex::new(BudgetState { earned: 0.0, floor: min_per_sec, last_refill: Instant::now() }),
        }
    }

    /// Called once per request (not per attempt).
    pub fn deposit(&self) {
        let mut s = self.inner.lock();
        s.earned = (s.earned + self.ratio).min(EARNED_CAP);
    }

    /// Takes one retry token; false means the budget is spent and the retry must not happen.
    pub fn try_withdraw(&self) -> bool {
        let mut s = self.inner.lock();
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(s.last_refill).as_secs_f64();
        s.floor = (s.floor + elapsed * self.min_per_sec).min(self.min_per_sec);
        s.last_refill = now;
        if s.floor >= 1.0 {
            s.floor -= 1.0;
            true
        } else if s.earned >= 1.0 {
            s.earned -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ratio_limits_retries_to_a_fraction_of_requests() {
        let b = RetryBudget::new(0.2, 0);
        let mut allowed = 0;
        for _ in 0..100 {
            b.deposit();
            if b.try_withdraw() {
                allowed += 1;
            }
        }
        assert_eq!(allowed, 20);
    }

    #[tokio::test(start_paused = true)]
    async fn floor_refills_over_time() {
        let b = RetryBudget::new(0.0, 2);
        assert!(b.try_withdraw());
        assert!(b.try_withdraw());
        assert!(!b.try_withdraw());
        tokio::time::advance(std::time::Duration::from_millis(500)).await;
        assert!(b.try_withdraw());
        assert!(!b.try_withdraw());
    }
}

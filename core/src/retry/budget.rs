//! A per-service retry budget (Finagle style), so a failing downstream never
//! gets a retry storm: each request deposits `ratio` of a token, each retry
//! withdraws one, and a floor of `min_per_sec` retries per second is always allowed.

use parking_lot::Mutex;
use tokio::time::Instant;

pub struct RetryBudget {
    /// Thousandths of a token per request: integer sums, so ten deposits of 0.2 make exactly two.
    ratio_milli: u64,
    min_per_sec: f64,
    inner: Mutex<BudgetState>,
}

struct BudgetState {
    /// Thousandths of tokens earned by requests; capped so a quiet period cannot bank a storm.
    earned_milli: u64,
    /// The floor's own bucket, refilled at `min_per_sec`.
    floor: f64,
    last_refill: Instant,
}

/// Most retries a long quiet spell can save up from deposits.
const EARNED_CAP_MILLI: u64 = 100_000;

impl RetryBudget {
    pub fn new(ratio: f64, min_per_sec: u32) -> Self {
        let min_per_sec = min_per_sec as f64;
        RetryBudget {
            ratio_milli: (ratio * 1000.0).round() as u64,
            min_per_sec,
            inner: Mutex::new(BudgetState { earned_milli: 0, floor: min_per_sec, last_refill: Instant::now() }),
        }
    }

    /// Called once per request (not per attempt).
    pub fn deposit(&self) {
        let mut s = self.inner.lock();
        s.earned_milli = (s.earned_milli + self.ratio_milli).min(EARNED_CAP_MILLI);
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
        } else if s.earned_milli >= 1000 {
            s.earned_milli -= 1000;
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

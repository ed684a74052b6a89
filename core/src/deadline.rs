//! The total deadline: one instant that covers every attempt and every backoff.

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    pub fn after(budget: Duration) -> Self {
        Deadline { at: Instant::now() + budget }
    }

    pub fn at(&self) -> Instant {
        self.at
    }

    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub fn expired(&self) -> bool {
        Instant::now() >= self.at
    }

    /// Whether a wait of `d` still leaves time for another attempt.
    pub fn fits(&self, d: Duration) -> bool {
        Instant::now() + d < self.at
    }

    /// The earlier of the deadline and `now + d`, and whether the deadline is the earlier.
    pub fn cap(&self, d: Duration) -> (Instant, bool) {
        let candidate = Instant::now() + d;
        if candidate >= self.at {
            (self.at, true)
        } else {
            (candidate, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn fits_and_caps() {
        let d = Deadline::after(Duration::from_millis(100));
        assert!(d.fits(Duration::from_millis(50)));
        assert!(!d.fits(Duration::from_millis(100)));
        assert!(d.cap(Duration::from_millis(500)).1);
        assert!(!d.cap(Duration::from_millis(10)).1);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(d.expired());
    }
}

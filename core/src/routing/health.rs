//! One provider's health on one route: a decaying window of outcomes, an EWMA of
//! latency, a cooling period after a 429, the in-flight count and the last error.
//!
//! Guarantees: outcomes fade with a half-life of a quarter of the window, so a
//! provider that recovers gets its traffic back within about one window; with too
//! little evidence a provider counts as healthy; nothing here calls host code.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Fewer (decayed) outcomes than this say nothing about health.
const MIN_EVIDENCE: f64 = 3.0;
/// Weight of a new latency sample in the EWMA.
const EWMA_ALPHA: f64 = 0.3;

pub(crate) struct ProviderHealth {
    inner: Mutex<Inner>,
    pub in_flight: AtomicU32,
}

struct Inner {
    successes: f64,
    failures: f64,
    updated: Instant,
    /// EWMA of successful attempts' latency, ms (`None` before the first).
    latency_ms: Option<f64>,
    cooling_until: Option<Instant>,
    last_error: Option<String>,
}

impl Default for ProviderHealth {
    fn default() -> Self {
        ProviderHealth {
            inner: Mutex::new(Inner { successes: 0.0, failures: 0.0, updated: Instant::now(), latency_ms: None, cooling_until: None, last_error: None }),
            in_flight: AtomicU32::new(0),
        }
    }
}

impl Inner {
    fn decay(&mut self, window: Duration, now: Instant) {
        let dt = now.saturating_duration_since(self.updated).as_secs_f64();
        let half_life = (window.as_secs_f64() / 4.0).max(0.001);
        let f = 0.5f64.powf(dt / half_life);
        self.successes *= f;
        self.failures *= f;
        self.updated = now;
    }
}

impl ProviderHealth {
    pub fn record_success(&self, latency: Duration, window: Duration) {
        let mut s = self.inner.lock();
        s.decay(window, Instant::now());
        s.successes += 1.0;
        let ms = latency.as_secs_f64() * 1000.0;
        s.latency_ms = Some(match s.latency_ms {
            Some(old) => old + EWMA_ALPHA * (ms - old),
            None => ms,
        });
    }

    pub fn record_failure(&self, error: String, window: Duration) {
        let mut s = self.inner.lock();
        s.decay(window, Instant::now());
        s.failures += 1.0;
        s.last_error = Some(error);
    }

    /// Notes an error that says nothing about health (a 4xx, a refusal before sending).
    pub fn note_error(&self, error: String) {
        self.inner.lock().last_error = Some(error);
    }

    /// Success rate over the window, 1.0 without enough evidence (fewer than `MIN_EVIDENCE`
    /// decayed outcomes: one failure does not make a provider unhealthy; `last_error` shows it).
    pub fn success_rate(&self, window: Duration) -> f64 {
        let mut s = self.inner.lock();
        s.decay(window, Instant::now());
        let total = s.successes + s.failures;
        if total < MIN_EVIDENCE {
            1.0
        } else {
            s.successes / total
        }
    }

    /// 0.0 (at or below 50% success) to 1.0 (all good).
    pub fn score(&self, window: Duration) -> f64 {
        ((self.success_rate(window) - 0.5) / 0.5).clamp(0.0, 1.0)
    }

    pub fn latency_ms(&self) -> Option<f64> {
        self.inner.lock().latency_ms
    }

    /// No attempt before `until` (a 429's `Retry-After`); a later deadline wins.
    pub fn cool_until(&self, until: Instant) {
        let mut s = self.inner.lock();
        if s.cooling_until.is_none_or(|t| t < until) {
            s.cooling_until = Some(until);
        }
    }

    /// Ends a cooling period (a reload: the operator may have fixed what the 429 was about).
    pub fn end_cooling(&self) {
        self.inner.lock().cooling_until = None;
    }

    /// Forgets every outcome, the latency and any cooling (the provider now calls another
    /// host); the last error stays as history.
    pub fn forget(&self) {
        let mut s = self.inner.lock();
        s.successes = 0.0;
        s.failures = 0.0;
        s.latency_ms = None;
        s.cooling_until = None;
        s.updated = Instant::now();
    }

    pub fn cooling_until(&self, now: Instant) -> Option<Instant> {
        self.inner.lock().cooling_until.filter(|t| *t > now)
    }

    pub fn last_error(&self) -> Option<String> {
        self.inner.lock().last_error.clone()
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// Counts a request in flight on a provider until dropped.
pub(crate) struct InFlight<'a>(&'a ProviderHealth);

impl<'a> InFlight<'a> {
    pub fn enter(h: &'a ProviderHealth) -> Self {
        h.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(h)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn failures_fade_and_health_returns() {
        let h = ProviderHealth::default();
        let w = Duration::from_secs(60);
        for _ in 0..10 {
            h.record_failure("HttpStatusError 503".into(), w);
        }
        assert_eq!(h.score(w), 0.0);
        for _ in 0..10 {
            h.record_success(Duration::from_millis(5), w);
        }
        assert!(h.score(w) < 0.1);
        // A full window later, the old failures weigh 1/16 of the fresh successes.
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..20 {
            h.record_success(Duration::from_millis(5), w);
        }
        assert!(h.score(w) > 0.9, "{}", h.score(w));
        assert_eq!(h.last_error().as_deref(), Some("HttpStatusError 503"));
    }

    #[tokio::test(start_paused = true)]
    async fn cooling_keeps_the_latest_deadline() {
        let h = ProviderHealth::default();
        let now = Instant::now();
        h.cool_until(now + Duration::from_secs(2));
        h.cool_until(now + Duration::from_secs(1));
        assert_eq!(h.cooling_until(now), Some(now + Duration::from_secs(2)));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(h.cooling_until(Instant::now()), None);
    }
}

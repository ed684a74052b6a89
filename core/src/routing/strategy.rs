//! Choosing a provider: weighted-health (weighted random over effective weights),
//! priority (the first that can serve, in config order) or least-latency (the
//! faster of two random picks, by EWMA).
//!
//! Guarantees: a provider with weight 0, an open breaker, a full bulkhead or a
//! full `max_concurrency` is never chosen; one cooling after a 429 (or already
//! tried twice in the last 1.5 s by this request) is chosen only once it may be
//! sent to, by telling the caller how long to wait; one this request gave up on
//! is not chosen again.

use std::time::Duration;

use tokio::time::Instant;

use super::config::{ProviderConfig, Strategy};
use super::health::ProviderHealth;
use crate::breaker::BreakerState;

/// Nobody hammers: at most this many attempts to one provider per request in `SPACING`.
pub(crate) const MAX_IN_SPACING: usize = 2;
pub(crate) const SPACING: Duration = Duration::from_millis(1500);

/// What this request knows about one provider so far.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tried {
    pub attempts: u32,
    /// Given up on for this request (silence, connect failure, a non-retryable error...).
    pub excluded: bool,
    /// A 429 from it was waited out (`wait_retry_after_ms`): the next one fails over.
    pub waited_429: bool,
    /// When this request's last `MAX_IN_SPACING` attempts to it were sent (for `SPACING`).
    sent_at: [Option<Instant>; MAX_IN_SPACING],
}

impl Tried {
    /// One more attempt, sent at `at`.
    pub fn sent(&mut self, at: Instant) {
        self.attempts += 1;
        self.sent_at.rotate_left(1);
        self.sent_at[MAX_IN_SPACING - 1] = Some(at);
    }

    /// Takes back the last `sent` (the attempt was refused before it left).
    pub fn unsent(&mut self) {
        self.attempts = self.attempts.saturating_sub(1);
        self.sent_at.rotate_right(1);
        self.sent_at[0] = None;
    }

    /// When this request may next send to the provider without hammering it.
    pub fn spaced_until(&self, now: Instant) -> Option<Instant> {
        let recent = self.sent_at.iter().flatten().filter(|t| now.saturating_duration_since(**t) < SPACING);
        if recent.clone().count() >= MAX_IN_SPACING {
            recent.map(|t| *t + SPACING).min()
        } else {
            None
        }
    }
}

pub(crate) enum Pick {
    Provider(usize),
    /// Nobody can be sent to now; the earliest that can, from this instant.
    Wait(Instant),
    None,
}

/// The weight selection uses now.
pub(crate) fn effective_weight(p: &ProviderConfig, health: &ProviderHealth, breaker: BreakerState, window: Duration) -> f64 {
    let w = p.weight as f64;
    if w == 0.0 {
        return 0.0;
    }
    let degraded = p.degraded() as f64;
    match breaker {
        BreakerState::Open => 0.0,
        // Probes only: the breaker admits as many as it allows.
        BreakerState::HalfOpen => degraded.max(1.0),
        BreakerState::Closed => degraded + (w - degraded) * health.score(window),
    }
}

/// What selection knows of one provider now.
pub(crate) struct Candidate<'a> {
    pub config: &'a ProviderConfig,
    pub health: &'a ProviderHealth,
    pub breaker: BreakerState,
    /// Its service's bulkhead has no permit left.
    pub bulkhead_full: bool,
}

/// Whether a provider can take an attempt now: its weight, or when it could.
fn availability(c: &Candidate<'_>, tried: &Tried, window: Duration, now: Instant) -> Result<f64, Option<Instant>> {
    if tried.excluded {
        return Err(None);
    }
    let w = effective_weight(c.config, c.health, c.breaker, window);
    if w <= 0.0 || c.bulkhead_full {
        return Err(None);
    }
    if c.config.max_concurrency.is_some_and(|m| c.health.in_flight() >= m) {
        return Err(None);
    }
    let wait = [c.health.cooling_until(now), tried.spaced_until(now)].into_iter().flatten().max();
    match wait {
        Some(at) => Err(Some(at)),
        None => Ok(w),
    }
}

/// Picks the next provider; `rand` gives uniform numbers in [0, 1).
pub(crate) fn pick(strategy: Strategy, candidates: &[Candidate<'_>], tried: &[Tried], window: Duration, now: Instant, mut rand: impl FnMut() -> f64) -> Pick {
    let mut ready: smallvec::SmallVec<[(usize, f64); 4]> = smallvec::SmallVec::new();
    let mut earliest: Option<Instant> = None;
    for (i, c) in candidates.iter().enumerate() {
        match availability(c, &tried[i], window, now) {
            Ok(w) => ready.push((i, w)),
            Err(Some(at)) => earliest = Some(earliest.map_or(at, |e| e.min(at))),
            Err(None) => {}
        }
    }
    if ready.is_empty() {
        return earliest.map_or(Pick::None, Pick::Wait);
    }
    let chosen = match strategy {
        Strategy::Priority => ready[0].0,
        Strategy::WeightedHealth => weighted(&ready, rand()),
        Strategy::LeastLatency => {
            if ready.len() == 1 {
                ready[0].0
            } else {
                // Power of two choices: two distinct random picks, the faster wins
                // (a provider never measured counts as fastest, so it gets measured).
                let a = (rand() * ready.len() as f64) as usize % ready.len();
                let mut b = (rand() * (ready.len() - 1) as f64) as usize % (ready.len() - 1);
                if b >= a {
                    b += 1;
                }
                let lat = |i: usize| candidates[ready[i].0].health.latency_ms().unwrap_or(0.0);
                if lat(b) < lat(a) {
                    ready[b].0
                } else {
                    ready[a].0
                }
            }
        }
    };
    Pick::Provider(chosen)
}

fn weighted(ready: &[(usize, f64)], r: f64) -> usize {
    let total: f64 = ready.iter().map(|(_, w)| w).sum();
    let mut x = r * total;
    for (i, w) in ready {
        if x < *w {
            return *i;
        }
        x -= w;
    }
    ready[ready.len() - 1].0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_pick_follows_the_weights() {
        let ready = [(0, 80.0), (1, 20.0)];
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        use rand::{Rng, SeedableRng};
        let n = 10_000;
        let first = (0..n).filter(|_| weighted(&ready, rng.random::<f64>()) == 0).count();
        let share = first as f64 / n as f64;
        assert!((share - 0.8).abs() <= 0.03, "{share}");
    }

    #[test]
    fn spacing_allows_two_attempts_in_a_window() {
        let now = Instant::now();
        let mut t = Tried::default();
        t.sent(now);
        assert!(t.spaced_until(now).is_none());
        t.sent(now + Duration::from_millis(100));
        assert_eq!(t.spaced_until(now + Duration::from_millis(200)), Some(now + SPACING));
        t.unsent();
        assert!(t.spaced_until(now + Duration::from_millis(200)).is_none());
        assert_eq!(t.attempts, 1);
    }
}

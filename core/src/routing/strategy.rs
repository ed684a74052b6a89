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

use super::config::Strategy;
use super::{ProviderRuntime, RouteRuntime};
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
    /// When this request's attempts to it were sent (for `SPACING`).
    pub sent_at: Vec<Instant>,
}

impl Tried {
    /// When this request may next send to the provider without hammering it.
    fn spaced_until(&self, now: Instant) -> Option<Instant> {
        let recent: Vec<&Instant> = self.sent_at.iter().filter(|t| now.saturating_duration_since(**t) < SPACING).collect();
        if recent.len() >= MAX_IN_SPACING {
            recent.iter().map(|t| **t + SPACING).min()
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
pub(crate) fn effective_weight(p: &ProviderRuntime, breaker: BreakerState, window: Duration) -> f64 {
    let w = p.config.weight as f64;
    if w == 0.0 {
        return 0.0;
    }
    let degraded = p.config.degraded() as f64;
    match breaker {
        BreakerState::Open => 0.0,
        // Probes only: the breaker admits as many as it allows.
        BreakerState::HalfOpen => degraded.max(1.0),
        BreakerState::Closed => degraded + (w - degraded) * p.health.score(window),
    }
}

/// Whether `p` can take an attempt now: its weight, or when it could.
fn availability(p: &ProviderRuntime, breaker: BreakerState, tried: &Tried, window: Duration, now: Instant) -> Result<f64, Option<Instant>> {
    if tried.excluded {
        return Err(None);
    }
    let w = effective_weight(p, breaker, window);
    if w <= 0.0 {
        return Err(None);
    }
    let bulkhead = &p.svc.shared.bulkhead;
    if bulkhead.in_use() >= bulkhead.max() as usize {
        return Err(None);
    }
    if p.config.max_concurrency.is_some_and(|m| p.health.in_flight() >= m) {
        return Err(None);
    }
    let wait = [p.health.cooling_until(now), tried.spaced_until(now)].into_iter().flatten().max();
    match wait {
        Some(at) => Err(Some(at)),
        None => Ok(w),
    }
}

/// Picks the next provider; `rand` gives uniform numbers in [0, 1).
pub(crate) fn pick(route: &RouteRuntime, breakers: &[BreakerState], tried: &[Tried], now: Instant, mut rand: impl FnMut() -> f64) -> Pick {
    let mut ready: Vec<(usize, f64)> = Vec::with_capacity(route.providers.len());
    let mut earliest: Option<(Instant, usize)> = None;
    for (i, p) in route.providers.iter().enumerate() {
        match availability(p, breakers[i], &tried[i], route.window, now) {
            Ok(w) => ready.push((i, w)),
            Err(Some(at)) => {
                if earliest.is_none_or(|(t, _)| at < t) {
                    earliest = Some((at, i));
                }
            }
            Err(None) => {}
        }
    }
    if ready.is_empty() {
        return match earliest {
            Some((at, _)) => Pick::Wait(at),
            None => Pick::None,
        };
    }
    let chosen = match route.config.strategy {
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
                let lat = |i: usize| route.providers[ready[i].0].health.latency_ms().unwrap_or(0.0);
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
        t.sent_at.push(now);
        assert!(t.spaced_until(now).is_none());
        t.sent_at.push(now + Duration::from_millis(100));
        assert_eq!(t.spaced_until(now + Duration::from_millis(200)), Some(now + SPACING));
    }
}

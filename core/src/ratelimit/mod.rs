//! Client-side rate limits: GCRA per service (and per endpoint or route nested under
//! it), local with `governor`, or shared by a fleet through one Redis Lua script; and
//! the adaptive pause a downstream's 429 asks for.
//!
//! Guarantees: a request that would exceed its rate waits up to `max_wait_ms`, never
//! past its deadline, then fails with `RateLimitedError` (with `retry_after`) and
//! nothing is sent; a 429 pauses the service (and, when shared, the fleet) for its
//! `Retry-After`; when Redis cannot answer the limiter uses its local share of the
//! rate (`rps / shared.expected_instances`), says so once in a
//! `shared_state_unavailable` event, and keeps trying Redis: a request never fails
//! because Redis is down.

pub mod config;

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use parking_lot::Mutex;
use tokio::time::Instant;

pub use config::{LimitRate, RateLimitConfig, SharedLimit};

use crate::deadline::Deadline;
use crate::error::{ErrorKind, HarnessError};
use crate::host::Event;
use crate::observability::events::EventHub;
use crate::observability::metrics::{Metrics, ServiceLabels};
use crate::state::{Rate, RateDecision, RateLimitStore};

type Direct = RateLimiter<NotKeyed, InMemoryState, DefaultClock>;

/// A pause after a 429 without `Retry-After`.
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(1);

/// One GCRA limit, in this process (public for the benchmarks).
pub struct LocalLimit {
    limiter: Direct,
    clock: DefaultClock,
}

impl LocalLimit {
    pub fn new(rate: &LimitRate) -> Self {
        LocalLimit { limiter: RateLimiter::direct(quota(rate.rps, rate.burst)), clock: DefaultClock::default() }
    }

    /// Takes a cell now, or says how long until one conforms (nothing is taken then).
    pub fn check(&self) -> Result<(), Duration> {
        self.limiter.check().map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

/// `rps` sustained with `burst` at once, as a governor quota (fractional rates allowed).
fn quota(rps: f64, burst: u32) -> Quota {
    let period = Duration::from_secs_f64(1.0 / rps.max(1e-6)).max(Duration::from_nanos(1));
    Quota::with_period(period).expect("a positive period").allow_burst(NonZeroU32::new(burst.max(1)).expect("at least 1"))
}

/// A service's limiter: its own rate, any nested endpoint rates, the shared store, the pause.
pub struct ServiceLimiter {
    pub service: Arc<str>,
    pub config: RateLimitConfig,
    local: LocalLimit,
    /// Used while Redis cannot answer: this process's share of the rate.
    fallback: LocalLimit,
    endpoints: Vec<(String, LocalLimit)>,
    /// The fleet's store and this limit's key in it.
    shared: Option<(Arc<dyn RateLimitStore>, String)>,
    paused_until: Mutex<Option<Instant>>,
    /// Attempts refused (nothing sent) and attempts that waited for a cell, since built.
    refused: AtomicU64,
    waited: AtomicU64,
    events: Arc<EventHub>,
    metrics: Arc<Metrics>,
}

/// A rate limit's live state in this process (`rate_limits()`, the admin console).
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct RateLimitState {
    /// The service, or `route:<name>` for a route's own limit.
    pub service: String,
    /// Milliseconds left of a downstream 429's pause in this process (0: not paused).
    pub paused_ms: u64,
    /// Attempts refused with `RateLimited` (nothing was sent) since the limiter was built;
    /// the count carries over a reload that keeps the limit's settings.
    pub refused: u64,
    /// Attempts that waited for capacity before they were sent.
    pub waited: u64,
}

impl ServiceLimiter {
    /// `store` is the fleet's store when `config.shared` is set.
    pub fn new(service: &str, config: &RateLimitConfig, store: Option<Arc<dyn RateLimitStore>>, events: Arc<EventHub>, metrics: Arc<Metrics>) -> Self {
        let shared = match (&config.shared, store) {
            (Some(s), Some(store)) => Some((store, s.key.clone())),
            _ => None,
        };
        let instances = config.shared.as_ref().map(|s| s.expected_instances.max(1)).unwrap_or(1) as f64;
        // The local share of the fleet's rate and burst (the burst's default, one second of
        // the rate, filled in first: as the local limiter has it).
        let rate = config.rate();
        let share = LimitRate { rps: rate.rps / instances, burst: (rate.burst as f64 / instances).ceil().max(1.0) as u32 };
        ServiceLimiter {
            service: service.into(),
            local: LocalLimit::new(&rate),
            fallback: LocalLimit::new(&share),
            endpoints: config.endpoint_rates().map(|(k, r)| (k.clone(), LocalLimit::new(&r))).collect(),
            shared,
            paused_until: Mutex::new(None),
            refused: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            config: config.clone(),
            events,
            metrics,
        }
    }

    /// Whether `other` would behave the same (then the state is kept across a reload).
    pub fn same_settings(&self, other: &RateLimitConfig) -> bool {
        &self.config == other
    }

    /// Waits for leave to send one attempt to `method` `endpoint`, within `max_wait_ms`
    /// and the deadline.
    pub async fn acquire(&self, method: &str, endpoint: &str, deadline: &Deadline) -> Result<(), HarnessError> {
        let started = Instant::now();
        let max_wait = Duration::from_millis(self.config.max_wait_ms);
        let mut slept = false;
        loop {
            let wait = self.next_wait(method, endpoint).await;
            let Some(wait) = wait else {
                let waited = started.elapsed();
                if slept {
                    self.waited.fetch_add(1, Ordering::Relaxed);
                    self.metrics.rate_limit_wait.get_or_create(&ServiceLabels { service: self.service.as_ref().into() }).observe(waited.as_secs_f64());
                }
                return Ok(());
            };
            let waited = started.elapsed();
            if waited + wait > max_wait || !deadline.fits(wait) {
                self.refused.fetch_add(1, Ordering::Relaxed);
                self.metrics.rate_limited.get_or_create(&ServiceLabels { service: self.service.as_ref().into() }).inc();
                let mut e = HarnessError::new(
                    ErrorKind::RateLimited,
                    format!("client-side rate limit: no capacity within max_wait_ms ({} ms); nothing was sent", self.config.max_wait_ms),
                );
                e.retry_after_ms = Some(wait.as_millis().max(1) as u64);
                e.code = Some("client_rate_limited".into());
                return Err(e);
            }
            tokio::time::sleep(wait).await;
            slept = true;
        }
    }

    /// `None` when a cell was taken for every limit that applies; else how long to wait.
    async fn next_wait(&self, method: &str, endpoint: &str) -> Option<Duration> {
        let now = Instant::now();
        if let Some(until) = *self.paused_until.lock() {
            if until > now {
                return Some(until - now);
            }
        }
        // The narrowest limit first, so a refused endpoint does not spend the service's cell.
        for (key, limit) in &self.endpoints {
            if crate::endpoint::key_matches(key, method, endpoint) {
                if let Err(wait) = limit.check() {
                    return Some(wait);
                }
            }
        }
        match &self.shared {
            Some((store, key)) => match store.check(key, self.rate()).await {
                Ok(RateDecision::Allowed) => None,
                Ok(RateDecision::Wait(d)) => Some(d),
                Ok(RateDecision::Paused(d)) => {
                    self.pause_locally(d);
                    Some(d)
                }
                Err(why) => {
                    if let Some(why) = why {
                        self.events.emit(Event::SharedStateUnavailable { service: self.service.to_string(), what: "rate_limit", error: why });
                    }
                    self.fallback.check().err()
                }
            },
            None => self.local.check().err(),
        }
    }

    fn rate(&self) -> Rate {
        let r = self.config.rate();
        Rate { per_second: r.rps, burst: r.burst }
    }

    fn pause_locally(&self, d: Duration) {
        let until = Instant::now() + d;
        let mut p = self.paused_until.lock();
        if p.is_none_or(|t| t < until) {
            *p = Some(until);
        }
    }

    /// A downstream 429: pause this service here and, when shared, across the fleet.
    pub async fn pause(&self, retry_after: Option<Duration>) {
        let d = retry_after.unwrap_or(DEFAULT_PAUSE).min(Duration::from_millis(self.config.max_pause_ms));
        self.pause_locally(d);
        if let Some((store, key)) = &self.shared {
            if let Err(Some(why)) = store.pause(key, d).await {
                self.events.emit(Event::SharedStateUnavailable { service: self.service.to_string(), what: "rate_limit", error: why });
            }
        }
    }

    /// Milliseconds of pause left in this process (0 when not paused).
    pub fn paused_ms(&self) -> u64 {
        let now = Instant::now();
        self.paused_until.lock().filter(|t| *t > now).map(|t| (t - now).as_millis() as u64).unwrap_or(0)
    }

    /// The pause left and the refused and waiting attempts so far.
    pub fn state(&self) -> RateLimitState {
        RateLimitState { service: self.service.to_string(), paused_ms: self.paused_ms(), refused: self.refused.load(Ordering::Relaxed), waited: self.waited.load(Ordering::Relaxed) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    #[test]
    fn gcra_admits_the_burst_then_the_rate_on_an_injected_clock() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::direct_with_clock(quota(10.0, 3), clock.clone());
        for _ in 0..3 {
            assert!(limiter.check().is_ok());
        }
        let wait = limiter.check().unwrap_err().wait_time_from(clock.now());
        assert_eq!(wait, Duration::from_millis(100));
        clock.advance(Duration::from_millis(100));
        assert!(limiter.check().is_ok());
        assert!(limiter.check().is_err());
        // Over 10 s at most 10/s + the burst.
        let mut admitted = 0;
        for _ in 0..1000 {
            clock.advance(Duration::from_millis(10));
            if limiter.check().is_ok() {
                admitted += 1;
            }
        }
        assert!((100..=103).contains(&admitted), "{admitted}");
    }

    #[test]
    fn fractional_rates_are_honoured() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::direct_with_clock(quota(0.5, 1), clock.clone());
        assert!(limiter.check().is_ok());
        assert_eq!(limiter.check().unwrap_err().wait_time_from(clock.now()), Duration::from_secs(2));
    }
}

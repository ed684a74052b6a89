//! A circuit breaker per (service, endpoint, method).
//!
//! Guarantees: checked before every attempt; opens after `failure_threshold`
//! consecutive failures; after `open_ms` lets exactly `half_open_probes` probes
//! through however many callers race; an outcome from a permit issued before a
//! state change is ignored; a probe dropped without an outcome (cancelled) frees
//! its slot. Cancellations and 4xx are not failures (the caller records them as
//! `Outcome::Ignored` / `Outcome::Success`).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::config::BreakerConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
    /// Neither: the attempt was cancelled or its result says nothing about health.
    Ignored,
}

type TransitionHook = Box<dyn Fn(BreakerState, BreakerState) + Send + Sync>;

pub struct CircuitBreaker {
    inner: Mutex<Inner>,
    on_transition: TransitionHook,
}

struct Inner {
    state: BreakerState,
    /// Bumped on every state change; permits from older generations are ignored.
    generation: u64,
    consecutive_failures: u32,
    open_until: Instant,
    probes_in_flight: u32,
    probe_successes: u32,
}

/// Leave to make one attempt. Record its outcome; dropping it unrecorded counts as `Ignored`.
pub struct Permit {
    breaker: Arc<CircuitBreaker>,
    generation: u64,
    probe: bool,
    recorded: bool,
}

/// The call was refused; the breaker stays open for about this long.
#[derive(Debug, Clone, Copy)]
pub struct Rejected {
    pub retry_in: Duration,
}

impl CircuitBreaker {
    pub fn new(on_transition: TransitionHook) -> Arc<Self> {
        Arc::new(CircuitBreaker {
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                generation: 0,
                consecutive_failures: 0,
                open_until: Instant::now(),
                probes_in_flight: 0,
                probe_successes: 0,
            }),
            on_transition,
        })
    }

    /// The state as a caller would see it now (an expired open period reads as half-open).
    pub fn state(&self) -> BreakerState {
        let s = self.inner.lock();
        if s.state == BreakerState::Open && Instant::now() >= s.open_until {
            BreakerState::HalfOpen
        } else {
            s.state
        }
    }

    fn transition(&self, s: &mut Inner, to: BreakerState, cfg: &BreakerConfig) {
        let from = s.state;
        s.state = to;
        s.generation += 1;
        s.consecutive_failures = 0;
        s.probes_in_flight = 0;
        s.probe_successes = 0;
        if to == BreakerState::Open {
            s.open_until = Instant::now() + Duration::from_millis(cfg.open_ms);
        }
        (self.on_transition)(from, to);
    }

    /// Opened by hand (an operator): refuses every call until `close_by_hand`.
    pub fn open_by_hand(&self) {
        // Held open: about a century, until closed by hand.
        self.set_by_hand(BreakerState::Open, Instant::now() + Duration::from_secs(3_000_000_000));
    }

    /// Closed by hand: traffic flows again, failures counted from zero.
    pub fn close_by_hand(&self) {
        self.set_by_hand(BreakerState::Closed, Instant::now());
    }

    fn set_by_hand(&self, to: BreakerState, open_until: Instant) {
        let mut s = self.inner.lock();
        let from = s.state;
        s.state = to;
        s.generation += 1;
        s.consecutive_failures = 0;
        s.probes_in_flight = 0;
        s.probe_successes = 0;
        s.open_until = open_until;
        if from != to {
            (self.on_transition)(from, to);
        }
    }

    pub fn acquire(self: &Arc<Self>, cfg: &BreakerConfig) -> Result<Permit, Rejected> {
        let mut s = self.inner.lock();
        if s.state == BreakerState::Open {
            let now = Instant::now();
            if now < s.open_until {
                return Err(Rejected { retry_in: s.open_until - now });
            }
            self.transition(&mut s, BreakerState::HalfOpen, cfg);
        }
        let probe = s.state == BreakerState::HalfOpen;
        if probe {
            if s.probes_in_flight + s.probe_successes >= cfg.half_open_probes {
                return Err(Rejected { retry_in: Duration::ZERO });
            }
            s.probes_in_flight += 1;
        }
        Ok(Permit { breaker: self.clone(), generation: s.generation, probe, recorded: false })
    }
}

impl Permit {
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    pub fn record(mut self, outcome: Outcome, cfg: &BreakerConfig) {
        self.recorded = true;
        let b = self.breaker.clone();
        let mut s = b.inner.lock();
        if s.generation != self.generation {
            return; // started before a state change: says nothing about the current state
        }
        match (s.state, outcome) {
            (BreakerState::Closed, Outcome::Success) => s.consecutive_failures = 0,
            (BreakerState::Closed, Outcome::Failure) => {
                s.consecutive_failures += 1;
                if s.consecutive_failures >= cfg.failure_threshold {
                    b.transition(&mut s, BreakerState::Open, cfg);
                }
            }
            (BreakerState::HalfOpen, Outcome::Success) => {
                s.probes_in_flight = s.probes_in_flight.saturating_sub(1);
                s.probe_successes += 1;
                if s.probe_successes >= cfg.half_open_probes {
                    b.transition(&mut s, BreakerState::Closed, cfg);
                }
            }
            (BreakerState::HalfOpen, Outcome::Failure) => b.transition(&mut s, BreakerState::Open, cfg),
            (BreakerState::HalfOpen, Outcome::Ignored) => s.probes_in_flight = s.probes_in_flight.saturating_sub(1),
            _ => {}
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.recorded && self.probe {
            let mut s = self.breaker.inner.lock();
            if s.generation == self.generation {
                s.probes_in_flight = s.probes_in_flight.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn cfg() -> BreakerConfig {
        BreakerConfig { failure_threshold: 3, open_ms: 1000, half_open_probes: 1 }
    }

    fn breaker() -> Arc<CircuitBreaker> {
        CircuitBreaker::new(Box::new(|_, _| {}))
    }

    fn fail(b: &Arc<CircuitBreaker>, n: u32) {
        for _ in 0..n {
            b.acquire(&cfg()).unwrap().record(Outcome::Failure, &cfg());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_consecutive_failures_only() {
        let b = breaker();
        fail(&b, 2);
        b.acquire(&cfg()).unwrap().record(Outcome::Success, &cfg());
        fail(&b, 2);
        assert_eq!(b.state(), BreakerState::Closed);
        fail(&b, 1);
        assert_eq!(b.state(), BreakerState::Open);
        assert!(b.acquire(&cfg()).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn ignored_outcomes_do_not_count() {
        let b = breaker();
        for _ in 0..10 {
            b.acquire(&cfg()).unwrap().record(Outcome::Ignored, &cfg());
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn exactly_n_probes_when_many_race() {
        let b = breaker();
        let c = BreakerConfig { half_open_probes: 2, ..cfg() };
        for _ in 0..3 {
            b.acquire(&c).unwrap().record(Outcome::Failure, &c);
        }
        tokio::time::advance(Duration::from_millis(1001)).await;
        let mut permits = Vec::new();
        let mut rejected = 0;
        for _ in 0..200 {
            match b.acquire(&c) {
                Ok(p) => permits.push(p),
                Err(_) => rejected += 1,
            }
        }
        assert_eq!((permits.len(), rejected), (2, 198));
        for p in permits {
            p.record(Outcome::Success, &c);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_probe_reopens() {
        let b = breaker();
        fail(&b, 3);
        tokio::time::advance(Duration::from_millis(1001)).await;
        b.acquire(&cfg()).unwrap().record(Outcome::Failure, &cfg());
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn stale_outcome_is_ignored() {
        let b = breaker();
        let old = b.acquire(&cfg()).unwrap();
        fail(&b, 3);
        tokio::time::advance(Duration::from_millis(1001)).await;
        let probe = b.acquire(&cfg()).unwrap();
        probe.record(Outcome::Success, &cfg());
        assert_eq!(b.state(), BreakerState::Closed);
        old.record(Outcome::Failure, &cfg());
        fail(&b, 2);
        assert_eq!(b.state(), BreakerState::Closed, "the stale failure must not count");
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_probe_frees_its_slot() {
        let b = breaker();
        fail(&b, 3);
        tokio::time::advance(Duration::from_millis(1001)).await;
        drop(b.acquire(&cfg()).unwrap());
        assert!(b.acquire(&cfg()).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn transitions_are_reported() {
        let n = Arc::new(AtomicU32::new(0));
        let n2 = n.clone();
        let b = CircuitBreaker::new(Box::new(move |_, _| {
            n2.fetch_add(1, Ordering::Relaxed);
        }));
        for _ in 0..3 {
            b.acquire(&cfg()).unwrap().record(Outcome::Failure, &cfg());
        }
        tokio::time::advance(Duration::from_millis(1001)).await;
        b.acquire(&cfg()).unwrap().record(Outcome::Success, &cfg());
        assert_eq!(n.load(Ordering::Relaxed), 3); // closed->open->half_open->closed
    }
}

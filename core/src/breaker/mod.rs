//! A circuit breaker per (service, endpoint, method).
//!
//! Guarantees: checked before every attempt. `consecutive` mode opens after
//! `failure_threshold` failures in a row; `sliding_window` mode opens when, over the
//! window (the last N calls, or the calls of the last T ms in ten buckets) and with at
//! least `minimum_calls`, the failure rate or the slow-call rate reaches its
//! threshold. After `open_ms` exactly `probes` trial calls pass however many callers
//! race; when enough succeed the breaker closes, or first ramps through the
//! configured fractions of traffic, one step per `step_ms` (a failure during the ramp
//! reopens it). An outcome from a permit issued before a state change is ignored; a
//! probe dropped without an outcome (cancelled) frees its slot. Cancellations and 4xx
//! are not failures (the caller records them as `Outcome::Ignored` / `Outcome::Success`).

pub mod config;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

pub use config::{BreakerConfig, BreakerMode, WindowType};

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

/// One breaker as the state API shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct BreakerInfo {
    pub service: String,
    pub endpoint: String,
    pub method: String,
    /// `closed`, `open` or `half_open` (probing or ramping back).
    #[schemars(extend("enum" = ["closed", "open", "half_open"]))]
    pub state: &'static str,
    /// `closed`, `open`, `probing` or `ramping`.
    #[schemars(extend("enum" = ["closed", "open", "probing", "ramping"]))]
    pub phase: &'static str,
    /// The share of calls let through now.
    pub admit_ratio: f64,
    /// Calls in the current window (`sliding_window` breakers).
    pub calls: u32,
    pub failure_rate: f64,
    pub slow_call_rate: f64,
}

impl BreakerInfo {
    pub(crate) fn new(service: String, endpoint: String, method: String, v: BreakerView) -> Self {
        BreakerInfo {
            service,
            endpoint,
            method,
            state: v.state.as_str(),
            phase: v.phase,
            admit_ratio: v.admit_ratio,
            calls: v.calls,
            failure_rate: v.failure_rate,
            slow_call_rate: v.slow_call_rate,
        }
    }
}

/// What the breaker-state API shows for one breaker.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerView {
    pub state: BreakerState,
    /// `closed`, `open`, `probing` (half-open trial calls) or `ramping`.
    pub phase: &'static str,
    /// The share of calls let through now: 1 closed, 0 open, the step's fraction while ramping.
    pub admit_ratio: f64,
    /// Calls in the current window (`sliding_window` mode; 0 otherwise).
    pub calls: u32,
    pub failure_rate: f64,
    pub slow_call_rate: f64,
}

impl BreakerView {
    /// A breaker that has seen nothing.
    pub fn closed() -> BreakerView {
        BreakerView { state: BreakerState::Closed, phase: "closed", admit_ratio: 1.0, calls: 0, failure_rate: 0.0, slow_call_rate: 0.0 }
    }
}

struct Inner {
    state: BreakerState,
    /// Bumped on every state (or phase) change; permits from older generations are ignored.
    generation: u64,
    consecutive_failures: u32,
    open_until: Instant,
    probes_in_flight: u32,
    probe_successes: u32,
    probe_failures: u32,
    /// Set while half-open traffic ramps back after the probes passed.
    ramp: Option<Ramp>,
    window: Window,
}

struct Ramp {
    fractions: Vec<f64>,
    stage: usize,
    stage_until: Instant,
    step: Duration,
    /// Admission credit: each call adds the step's fraction; a call passes when it reaches 1.
    credit: f64,
}

impl Ramp {
    /// Moves to the stage `now` falls in; `None` once every stage has passed.
    fn fraction(&mut self, now: Instant) -> Option<f64> {
        while now >= self.stage_until {
            self.stage += 1;
            self.stage_until += self.step;
            if self.stage >= self.fractions.len() {
                return None;
            }
        }
        self.fractions.get(self.stage).copied()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    calls: u32,
    failures: u32,
    slow: u32,
}

impl Counts {
    fn add(&mut self, failed: bool, slow: bool) {
        self.calls += 1;
        self.failures += failed as u32;
        self.slow += slow as u32;
    }
}

/// Bit flags of one call in a count window.
const FAILED: u8 = 1;
const SLOW: u8 = 2;
/// Buckets in a time window.
const BUCKETS: u64 = 10;

/// The calls the rates are taken over. The arithmetic is exact: a count window is a ring
/// of the last N outcomes with running sums; a time window is ten buckets, each tagged
/// with the period it counts, so a stale bucket is never summed.
enum Window {
    /// `consecutive` mode keeps no window.
    None,
    Count { ring: Vec<u8>, next: usize, filled: usize, sums: Counts },
    Time { buckets: Vec<(u64, Counts)>, bucket_ms: u64, base: Instant },
}

impl Window {
    fn for_config(cfg: &BreakerConfig) -> Window {
        match (cfg.mode, cfg.window.kind) {
            (BreakerMode::Consecutive, _) => Window::None,
            (_, WindowType::Count) => {
                Window::Count { ring: vec![0; cfg.window_size() as usize], next: 0, filled: 0, sums: Counts::default() }
            }
            (_, WindowType::Time) => Window::Time {
                buckets: vec![(u64::MAX, Counts::default()); BUCKETS as usize],
                bucket_ms: (cfg.window_ms() / BUCKETS).max(1),
                base: Instant::now(),
            },
        }
    }

    /// Whether this window has the shape `cfg` asks for (a reload may change it).
    fn fits(&self, cfg: &BreakerConfig) -> bool {
        match (self, cfg.mode, cfg.window.kind) {
            (Window::None, BreakerMode::Consecutive, _) => true,
            (Window::Count { ring, .. }, BreakerMode::SlidingWindow, WindowType::Count) => ring.len() == cfg.window_size() as usize,
            (Window::Time { bucket_ms, .. }, BreakerMode::SlidingWindow, WindowType::Time) => *bucket_ms == (cfg.window_ms() / BUCKETS).max(1),
            _ => false,
        }
    }

    fn add(&mut self, failed: bool, slow: bool, now: Instant) {
        match self {
            Window::None => {}
            Window::Count { ring, next, filled, sums } => {
                if *filled == ring.len() {
                    let old = ring[*next];
                    sums.calls -= 1;
                    sums.failures -= (old & FAILED != 0) as u32;
                    sums.slow -= (old & SLOW != 0) as u32;
                } else {
                    *filled += 1;
                }
                ring[*next] = if failed { FAILED } else { 0 } | if slow { SLOW } else { 0 };
                *next = (*next + 1) % ring.len();
                sums.add(failed, slow);
            }
            Window::Time { buckets, bucket_ms, base } => {
                let period = now.saturating_duration_since(*base).as_millis() as u64 / *bucket_ms;
                let b = &mut buckets[(period % BUCKETS) as usize];
                if b.0 != period {
                    *b = (period, Counts::default());
                }
                b.1.add(failed, slow);
            }
        }
    }

    fn counts(&self, now: Instant) -> Counts {
        match self {
            Window::None => Counts::default(),
            Window::Count { sums, .. } => *sums,
            Window::Time { buckets, bucket_ms, base } => {
                let period = now.saturating_duration_since(*base).as_millis() as u64 / *bucket_ms;
                let mut c = Counts::default();
                for (p, b) in buckets {
                    if *p != u64::MAX && *p + BUCKETS > period && *p <= period {
                        c.calls += b.calls;
                        c.failures += b.failures;
                        c.slow += b.slow;
                    }
                }
                c
            }
        }
    }

    fn clear(&mut self) {
        match self {
            Window::None => {}
            Window::Count { ring, next, filled, sums } => {
                ring.iter_mut().for_each(|b| *b = 0);
                (*next, *filled, *sums) = (0, 0, Counts::default());
            }
            Window::Time { buckets, .. } => buckets.iter_mut().for_each(|b| *b = (u64::MAX, Counts::default())),
        }
    }
}

fn rate(part: u32, calls: u32) -> f64 {
    if calls == 0 {
        0.0
    } else {
        part as f64 / calls as f64
    }
}

/// Leave to make one attempt. Record its outcome; dropping it unrecorded counts as `Ignored`.
pub struct Permit {
    breaker: Arc<CircuitBreaker>,
    generation: u64,
    probe: bool,
    recorded: bool,
    /// When the call started (only when slow calls are counted).
    started: Option<Instant>,
    /// The settings the permit was issued under (its outcome is judged by them).
    cfg: Arc<BreakerConfig>,
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
                probe_failures: 0,
                ramp: None,
                window: Window::None,
            }),
            on_transition,
        })
    }

    /// The state as a caller would see it now (an expired open period reads as half-open,
    /// a finished ramp as closed).
    pub fn state(&self) -> BreakerState {
        self.view().state
    }

    /// State, phase and the current window's rates.
    pub fn view(&self) -> BreakerView {
        let mut s = self.inner.lock();
        let now = Instant::now();
        let c = s.window.counts(now);
        let (state, phase, admit_ratio) = match s.state {
            BreakerState::Open if now >= s.open_until => (BreakerState::HalfOpen, "probing", 0.0),
            BreakerState::Open => (BreakerState::Open, "open", 0.0),
            BreakerState::Closed => (BreakerState::Closed, "closed", 1.0),
            BreakerState::HalfOpen => match s.ramp.as_mut().map(|r| r.fraction(now)) {
                Some(Some(f)) => (BreakerState::HalfOpen, "ramping", f),
                Some(None) => (BreakerState::Closed, "closed", 1.0),
                None => (BreakerState::HalfOpen, "probing", 0.0),
            },
        };
        BreakerView {
            state,
            phase,
            admit_ratio,
            calls: c.calls,
            failure_rate: rate(c.failures, c.calls),
            slow_call_rate: rate(c.slow, c.calls),
        }
    }

    fn transition(&self, s: &mut Inner, to: BreakerState, cfg: &BreakerConfig) {
        let from = Self::enter(s, to);
        if to == BreakerState::Open {
            s.open_until = Instant::now() + Duration::from_millis(cfg.open_ms);
        }
        (self.on_transition)(from, to);
    }

    /// Moves to `to` with every count of the old state cleared; returns the old state.
    fn enter(s: &mut Inner, to: BreakerState) -> BreakerState {
        let from = s.state;
        s.state = to;
        s.generation += 1;
        s.consecutive_failures = 0;
        s.probes_in_flight = 0;
        s.probe_successes = 0;
        s.probe_failures = 0;
        s.ramp = None;
        s.window.clear();
        from
    }

    /// The probes passed: ramp back through `cfg`'s fractions, or close when there are none.
    fn recover(&self, s: &mut Inner, cfg: &BreakerConfig) {
        let fractions = cfg.ramp();
        if fractions.is_empty() {
            return self.transition(s, BreakerState::Closed, cfg);
        }
        s.generation += 1;
        s.probes_in_flight = 0;
        let step = Duration::from_millis(cfg.step_ms());
        // Credit starts so that the first call after the probes passes.
        s.ramp = Some(Ramp { fractions: fractions.to_vec(), stage: 0, stage_until: Instant::now() + step, step, credit: 1.0 + 1e-9 - fractions[0] });
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
        let from = Self::enter(&mut s, to);
        s.open_until = open_until;
        if from != to {
            (self.on_transition)(from, to);
        }
    }

    pub fn acquire(self: &Arc<Self>, cfg: &Arc<BreakerConfig>) -> Result<Permit, Rejected> {
        let mut s = self.inner.lock();
        if !s.window.fits(cfg) {
            s.window = Window::for_config(cfg);
        }
        let started = cfg.slow_call.is_some().then(Instant::now);
        let permit = |s: &Inner, probe: bool| Permit { breaker: self.clone(), generation: s.generation, probe, recorded: false, started, cfg: cfg.clone() };
        match s.state {
            BreakerState::Closed => return Ok(permit(&s, false)),
            BreakerState::Open => {
                let now = Instant::now();
                if now < s.open_until {
                    return Err(Rejected { retry_in: s.open_until - now });
                }
                self.transition(&mut s, BreakerState::HalfOpen, cfg);
            }
            BreakerState::HalfOpen => {}
        }
        if let Some(ramp) = s.ramp.as_mut() {
            let now = Instant::now();
            let Some(fraction) = ramp.fraction(now) else {
                self.transition(&mut s, BreakerState::Closed, cfg);
                return Ok(permit(&s, false));
            };
            ramp.credit += fraction;
            if ramp.credit >= 1.0 {
                ramp.credit -= 1.0;
                return Ok(permit(&s, false));
            }
            return Err(Rejected { retry_in: Duration::ZERO });
        }
        if s.probes_in_flight + s.probe_successes + s.probe_failures >= cfg.probes() {
            return Err(Rejected { retry_in: Duration::ZERO });
        }
        s.probes_in_flight += 1;
        Ok(permit(&s, true))
    }
}

impl Permit {
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    pub fn record(mut self, outcome: Outcome) {
        self.recorded = true;
        let cfg = &*self.cfg;
        let b = self.breaker.clone();
        let mut s = b.inner.lock();
        if s.generation != self.generation {
            return; // started before a state change: says nothing about the current state
        }
        match (s.state, outcome) {
            (_, Outcome::Ignored) if self.probe => s.probes_in_flight = s.probes_in_flight.saturating_sub(1),
            (_, Outcome::Ignored) => {}
            (BreakerState::Closed, _) if cfg.mode == BreakerMode::SlidingWindow => {
                let now = Instant::now();
                let slow = match (&cfg.slow_call, self.started) {
                    (Some(sc), Some(t)) => now.saturating_duration_since(t) >= Duration::from_millis(sc.duration_ms),
                    _ => false,
                };
                s.window.add(outcome == Outcome::Failure, slow, now);
                let c = s.window.counts(now);
                if c.calls >= cfg.minimum_calls {
                    let by_failures = rate(c.failures, c.calls) >= cfg.failure_rate_threshold;
                    let by_slow = cfg.slow_call.as_ref().is_some_and(|sc| rate(c.slow, c.calls) >= sc.rate_threshold);
                    if by_failures || by_slow {
                        b.transition(&mut s, BreakerState::Open, cfg);
                    }
                }
            }
            (BreakerState::Closed, Outcome::Success) => s.consecutive_failures = 0,
            (BreakerState::Closed, Outcome::Failure) => {
                s.consecutive_failures += 1;
                if s.consecutive_failures >= cfg.failure_threshold {
                    b.transition(&mut s, BreakerState::Open, cfg);
                }
            }
            // Ramping: one failure reopens; a success changes nothing.
            (BreakerState::HalfOpen, Outcome::Failure) if !self.probe => b.transition(&mut s, BreakerState::Open, cfg),
            (BreakerState::HalfOpen, Outcome::Success) if !self.probe => {}
            (BreakerState::HalfOpen, Outcome::Success) => {
                s.probes_in_flight = s.probes_in_flight.saturating_sub(1);
                s.probe_successes += 1;
                if s.probe_successes >= cfg.probes_needed() {
                    b.recover(&mut s, cfg);
                }
            }
            (BreakerState::HalfOpen, Outcome::Failure) => {
                s.probes_in_flight = s.probes_in_flight.saturating_sub(1);
                s.probe_failures += 1;
                if s.probe_failures > cfg.probes() - cfg.probes_needed() {
                    b.transition(&mut s, BreakerState::Open, cfg);
                }
            }
            (BreakerState::Open, _) => {}
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

    fn cfg() -> Arc<BreakerConfig> {
        Arc::new(BreakerConfig { failure_threshold: 3, open_ms: 1000, half_open_probes: 1, ..Default::default() })
    }

    fn breaker() -> Arc<CircuitBreaker> {
        CircuitBreaker::new(Box::new(|_, _| {}))
    }

    fn fail(b: &Arc<CircuitBreaker>, n: u32) {
        for _ in 0..n {
            b.acquire(&cfg()).unwrap().record(Outcome::Failure);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_consecutive_failures_only() {
        let b = breaker();
        fail(&b, 2);
        b.acquire(&cfg()).unwrap().record(Outcome::Success);
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
            b.acquire(&cfg()).unwrap().record(Outcome::Ignored);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn exactly_n_probes_when_many_race() {
        let b = breaker();
        let c = Arc::new(BreakerConfig { half_open_probes: 2, ..(*cfg()).clone() });
        for _ in 0..3 {
            b.acquire(&c).unwrap().record(Outcome::Failure);
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
            p.record(Outcome::Success);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_probe_reopens() {
        let b = breaker();
        fail(&b, 3);
        tokio::time::advance(Duration::from_millis(1001)).await;
        b.acquire(&cfg()).unwrap().record(Outcome::Failure);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn stale_outcome_is_ignored() {
        let b = breaker();
        let old = b.acquire(&cfg()).unwrap();
        fail(&b, 3);
        tokio::time::advance(Duration::from_millis(1001)).await;
        let probe = b.acquire(&cfg()).unwrap();
        probe.record(Outcome::Success);
        assert_eq!(b.state(), BreakerState::Closed);
        old.record(Outcome::Failure);
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
            b.acquire(&cfg()).unwrap().record(Outcome::Failure);
        }
        tokio::time::advance(Duration::from_millis(1001)).await;
        b.acquire(&cfg()).unwrap().record(Outcome::Success);
        assert_eq!(n.load(Ordering::Relaxed), 3); // closed->open->half_open->closed
    }
}

/// The sliding window, slow calls, success-rate probes and the ramp, on tokio's paused
/// clock (the injected clock: `advance` moves it, nothing sleeps).
#[cfg(test)]
mod sliding_tests {
    use super::*;

    fn breaker() -> Arc<CircuitBreaker> {
        CircuitBreaker::new(Box::new(|_, _| {}))
    }

    fn sliding(v: serde_json::Value) -> Arc<BreakerConfig> {
        let mut base = serde_json::json!({"mode": "sliding_window", "open_ms": 1000});
        base.as_object_mut().unwrap().extend(v.as_object().unwrap().clone());
        let c: BreakerConfig = serde_json::from_value(base).unwrap();
        c.validate("b").unwrap();
        Arc::new(c)
    }

    /// Outcomes in order: `F` failure, `S` success, `.` ignored.
    fn run(b: &Arc<CircuitBreaker>, c: &Arc<BreakerConfig>, pattern: &str) {
        for ch in pattern.chars() {
            let outcome = match ch {
                'F' => Outcome::Failure,
                'S' => Outcome::Success,
                _ => Outcome::Ignored,
            };
            b.acquire(c).expect("closed").record(outcome);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn count_window_arithmetic() {
        let b = breaker();
        let c = sliding(serde_json::json!({"window": {"type": "count", "size": 10}, "minimum_calls": 10, "failure_rate_threshold": 0.5}));
        run(&b, &c, "FFFFSSSSS.");
        let v = b.view();
        assert_eq!((v.calls, v.failure_rate), (9, 4.0 / 9.0), "ignored calls are not counted");
        run(&b, &c, "S");
        assert_eq!((b.view().calls, b.view().failure_rate), (10, 0.4));
        // The oldest outcome (F) leaves as a new one (S) enters.
        run(&b, &c, "S");
        assert_eq!((b.view().calls, b.view().failure_rate), (10, 0.3));
        // Four more failures replace F F F S: 0.3 - 0.3 + 0.4 = 0.4, then one more reaches 0.5.
        run(&b, &c, "FFFF");
        assert_eq!(b.view().failure_rate, 0.4);
        assert_eq!(b.state(), BreakerState::Closed);
        run(&b, &c, "F");
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.view().calls, 0, "opening starts a fresh window");
    }

    #[tokio::test(start_paused = true)]
    async fn time_window_forgets_old_buckets() {
        let b = breaker();
        let c = sliding(serde_json::json!({"window": {"type": "time", "size_ms": 1000}, "minimum_calls": 5, "failure_rate_threshold": 0.5}));
        run(&b, &c, "FF");
        tokio::time::advance(Duration::from_millis(500)).await;
        run(&b, &c, "SSSS");
        assert_eq!((b.view().calls, b.view().failure_rate), (6, 2.0 / 6.0));
        // 600 ms later the two failures (bucket 0) have left the 1 s window.
        tokio::time::advance(Duration::from_millis(600)).await;
        assert_eq!((b.view().calls, b.view().failure_rate), (4, 0.0));
        run(&b, &c, "FFF");
        assert_eq!(b.state(), BreakerState::Closed, "3 of 7 is below 0.5");
        run(&b, &c, "F");
        assert_eq!(b.state(), BreakerState::Open, "4 of 8");
    }

    #[tokio::test(start_paused = true)]
    async fn thirty_percent_failures_trip_the_window_but_not_the_consecutive_breaker() {
        // Every tenth call of three fails, never two in a row: 30% failures.
        let pattern: String = "FSSFSSFSSS".repeat(20);
        let consecutive = Arc::new(BreakerConfig { failure_threshold: 5, ..Default::default() });
        let b = breaker();
        run(&b, &consecutive, &pattern);
        assert_eq!(b.state(), BreakerState::Closed);
        let window = sliding(serde_json::json!({"window": {"type": "count", "size": 100}, "minimum_calls": 20, "failure_rate_threshold": 0.25}));
        let b = breaker();
        let mut opened_after = None;
        for (i, ch) in pattern.chars().enumerate() {
            match b.acquire(&window) {
                Ok(p) => p.record(if ch == 'F' { Outcome::Failure } else { Outcome::Success }),
                Err(_) => {
                    opened_after = Some(i);
                    break;
                }
            }
        }
        assert_eq!(opened_after, Some(20), "opens once minimum_calls (20) are in at 30%");
    }

    #[tokio::test(start_paused = true)]
    async fn slow_calls_trip_it_with_no_failures() {
        let b = breaker();
        let c = sliding(serde_json::json!({
            "window": {"type": "count", "size": 10}, "minimum_calls": 4,
            "slow_call": {"duration_ms": 100, "rate_threshold": 0.5}
        }));
        for i in 0..4 {
            let p = b.acquire(&c).unwrap();
            tokio::time::advance(Duration::from_millis(if i % 2 == 0 { 150 } else { 10 })).await;
            p.record(Outcome::Success);
        }
        let v = b.view();
        assert_eq!((v.state, v.slow_call_rate, v.failure_rate), (BreakerState::Open, 0.0, 0.0), "opened at 2 slow of 4 (the window restarts)");
        // And fast successes alone never trip it.
        let b = breaker();
        run(&b, &c, &"S".repeat(50));
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn exactly_n_probes_under_a_race_and_the_success_rate() {
        let c = sliding(serde_json::json!({
            "window": {"type": "count", "size": 10}, "minimum_calls": 2,
            "half_open": {"probes": 5, "success_rate": 0.6}
        }));
        let b = breaker();
        run(&b, &c, "FF");
        assert_eq!(b.state(), BreakerState::Open);
        tokio::time::advance(Duration::from_millis(1001)).await;
        // 200 callers race in 4 threads: exactly 5 probes pass.
        let permits = std::sync::Mutex::new(Vec::new());
        let rt = tokio::runtime::Handle::current();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let _clock = rt.enter();
                    for _ in 0..50 {
                        if let Ok(p) = b.acquire(&c) {
                            permits.lock().unwrap().push(p);
                        }
                    }
                });
            }
        });
        let mut permits = permits.into_inner().unwrap();
        assert_eq!(permits.len(), 5);
        assert!(permits.iter().all(Permit::is_probe));
        // 2 failures are allowed (3 of 5 needed); the third reopens.
        permits.pop().unwrap().record(Outcome::Failure);
        permits.pop().unwrap().record(Outcome::Failure);
        assert_eq!(b.view().phase, "probing");
        permits.pop().unwrap().record(Outcome::Failure);
        assert_eq!(b.state(), BreakerState::Open);
        permits.into_iter().for_each(|p| p.record(Outcome::Success));
        assert_eq!(b.state(), BreakerState::Open, "probes from before the reopening are stale");
        // Next round: 3 successes of 5 close it (no ramp configured).
        tokio::time::advance(Duration::from_millis(1001)).await;
        let round: Vec<Permit> = (0..200).filter_map(|_| b.acquire(&c).ok()).collect();
        assert_eq!(round.len(), 5);
        for p in round.into_iter().take(3) {
            p.record(Outcome::Success);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn the_ramp_admits_its_fractions_then_closes() {
        let c = sliding(serde_json::json!({
            "window": {"type": "count", "size": 10}, "minimum_calls": 2,
            "half_open": {"probes": 2, "success_rate": 1.0, "ramp": [0.1, 0.5, 1.0], "step_ms": 100}
        }));
        let b = breaker();
        run(&b, &c, "FF");
        tokio::time::advance(Duration::from_millis(1001)).await;
        b.acquire(&c).unwrap().record(Outcome::Success);
        b.acquire(&c).unwrap().record(Outcome::Success);
        let v = b.view();
        assert_eq!((v.state, v.phase, v.admit_ratio), (BreakerState::HalfOpen, "ramping", 0.1));
        let admitted = |n: usize| (0..n).filter(|_| b.acquire(&c).map(|p| p.record(Outcome::Success)).is_ok()).count();
        assert_eq!(admitted(100), 10, "10% of calls in the first step");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(b.view().admit_ratio, 0.5);
        assert_eq!(admitted(100), 50, "50% in the second");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(admitted(100), 100, "then all: closed");
        assert_eq!(b.view().phase, "closed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_during_the_ramp_reopens() {
        let c = Arc::new(BreakerConfig {
            failure_threshold: 1,
            open_ms: 1000,
            half_open: Some(config::HalfOpenConfig { probes: 1, success_rate: 1.0, ramp: vec![0.5], step_ms: 1000 }),
            ..Default::default()
        });
        let b = breaker();
        b.acquire(&c).unwrap().record(Outcome::Failure);
        tokio::time::advance(Duration::from_millis(1001)).await;
        b.acquire(&c).unwrap().record(Outcome::Success);
        assert_eq!(b.view().phase, "ramping");
        let in_ramp = b.acquire(&c).expect("the first ramp call passes");
        assert!(!in_ramp.is_probe());
        assert!(b.acquire(&c).is_err(), "the next is held back at 50%");
        in_ramp.record(Outcome::Failure);
        let v = b.view();
        assert_eq!((v.state, v.phase), (BreakerState::Open, "open"));
        assert!(b.acquire(&c).is_err());
    }
}

//! An adaptive concurrency limit in the manner of Netflix's concurrency-limits: the
//! limit follows the measured round-trip time, growing while latency stays at its
//! baseline and shrinking when queueing shows.
//!
//! Guarantees: the limit stays within `min..=max`; samples are taken over windows of at
//! least `window_ms` and 10 calls (their mean RTT is one update), so one outlier does not
//! move it; a window in which fewer than half the permits were used (the caller, not
//! the downstream, is the limit) never grows it, but queueing still brings it down, so a
//! limit set high for yesterday's capacity falls once the downstream queues. A sample
//! that cannot take the lock is skipped rather than waited for: the request path never
//! blocks here.
//!
//! Both algorithms keep a no-load baseline: the lowest window-mean RTT seen, forgotten now
//! and then (every 30 × limit windows) in case the downstream became slower for good.
//! Gradient2 compares the short-term RTT with the lower of its long-term average and that
//! baseline: the average alone absorbs a queue that stood from the first window, and then
//! no rise is ever seen.
//!
//! Hand-written (two formulas, ~100 lines): the `concurrency-limits` family has no
//! maintained Rust crate, and the published ones wrap a semaphore we already have.

use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::HarnessError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Compares the short-term RTT with a long-term average (tolerating `tolerance` times it).
    Gradient2,
    /// Estimates the queue from the lowest RTT seen and keeps it between 3 and 6 log10(limit).
    Vegas,
}

/// `bulkhead.adaptive`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdaptiveConfig {
    pub algorithm: Algorithm,
    pub min: u32,
    pub max: u32,
    pub initial: u32,
    /// `gradient2`: the latency rise (over the long-term average) taken as no queueing.
    pub tolerance: f64,
    /// Shortest sampling window.
    pub window_ms: u64,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig { algorithm: Algorithm::Gradient2, min: 4, max: 1000, initial: 20, tolerance: 1.2, window_ms: 100 }
    }
}

impl AdaptiveConfig {
    pub fn validate(&self, at: &str) -> Result<(), HarnessError> {
        let bad = |field: &str, msg: String| Err(HarnessError::config(format!("{at}.{field}: {msg}")));
        if self.min == 0 {
            return bad("min", "expected an integer >= 1, got 0".into());
        }
        if self.max < self.min || self.max > 1_000_000 {
            return bad("max", format!("expected an integer from min ({}) to 1000000, got {}", self.min, self.max));
        }
        if !(self.min..=self.max).contains(&self.initial) {
            return bad("initial", format!("expected an integer from min ({}) to max ({}), got {}", self.min, self.max, self.initial));
        }
        if self.tolerance.is_nan() || !(1.0..=10.0).contains(&self.tolerance) {
            return bad("tolerance", format!("expected a number from 1 to 10, got {}", self.tolerance));
        }
        if !(10..=60_000).contains(&self.window_ms) {
            return bad("window_ms", format!("expected an integer from 10 to 60000, got {}", self.window_ms));
        }
        Ok(())
    }
}

/// Calls per window before an update, whatever its length.
const MIN_WINDOW_CALLS: u32 = 10;

pub struct AdaptiveLimit {
    pub config: AdaptiveConfig,
    state: Mutex<State>,
}

struct State {
    limit: f64,
    window_start: Instant,
    rtt_sum: Duration,
    calls: u32,
    max_in_flight: usize,
    baseline: Baseline,
    algo: Algo,
}

enum Algo {
    Gradient2 { long_rtt: Ewma },
    Vegas,
}

/// The lowest window-mean RTT, refreshed every `30 × limit` windows.
struct Baseline {
    rtt_noload: f64,
    probe_count: u64,
}

impl Baseline {
    /// Takes one window's mean RTT; `true` when it set a new baseline (the window says
    /// nothing about queueing).
    fn observe(&mut self, rtt: f64, limit: f64) -> bool {
        self.probe_count += 1;
        if self.rtt_noload == 0.0 || rtt < self.rtt_noload {
            self.rtt_noload = rtt;
            return true;
        }
        // Now and then, forget the baseline: the downstream may have become slower for good.
        if self.probe_count as f64 >= 30.0 * limit {
            self.probe_count = 0;
            self.rtt_noload = rtt;
            return true;
        }
        false
    }
}

/// An exponential average over `window` values; a plain mean for the first `warmup`.
struct Ewma {
    value: f64,
    count: u32,
    window: u32,
    warmup: u32,
}

impl Ewma {
    fn add(&mut self, x: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.value += (x - self.value) / self.count as f64;
        } else {
            let factor = 2.0 / (self.window as f64 + 1.0);
            self.value = self.value * (1.0 - factor) + x * factor;
        }
        self.value
    }
}

fn log10(limit: f64) -> f64 {
    limit.log10().floor().max(1.0)
}

impl AdaptiveLimit {
    pub fn new(config: AdaptiveConfig) -> Self {
        let algo = match config.algorithm {
            Algorithm::Gradient2 => Algo::Gradient2 { long_rtt: Ewma { value: 0.0, count: 0, window: 600, warmup: 10 } },
            Algorithm::Vegas => Algo::Vegas,
        };
        AdaptiveLimit {
            state: Mutex::new(State {
                limit: config.initial as f64,
                window_start: Instant::now(),
                rtt_sum: Duration::ZERO,
                calls: 0,
                max_in_flight: 0,
                baseline: Baseline { rtt_noload: 0.0, probe_count: 0 },
                algo,
            }),
            config,
        }
    }

    pub fn limit(&self) -> u32 {
        self.state.lock().limit as u32
    }

    /// One finished call: its RTT and the permits in use when it started. Returns the
    /// new limit when a window closed and the limit changed.
    pub fn sample(&self, rtt: Duration, in_flight: usize) -> Option<u32> {
        let mut s = self.state.try_lock()?;
        s.rtt_sum += rtt;
        s.calls += 1;
        s.max_in_flight = s.max_in_flight.max(in_flight);
        let now = Instant::now();
        if s.calls < MIN_WINDOW_CALLS || now.saturating_duration_since(s.window_start) < Duration::from_millis(self.config.window_ms) {
            return None;
        }
        let mean = s.rtt_sum.as_secs_f64() / s.calls as f64;
        let in_flight = s.max_in_flight;
        (s.window_start, s.rtt_sum, s.calls, s.max_in_flight) = (now, Duration::ZERO, 0, 0);
        let before = s.limit as u32;
        let next = self.update(&mut s, mean, in_flight);
        s.limit = next.clamp(self.config.min as f64, self.config.max as f64);
        let after = s.limit as u32;
        (after != before).then_some(after)
    }

    fn update(&self, s: &mut State, rtt: f64, in_flight: usize) -> f64 {
        let limit = s.limit;
        // The caller, not the downstream, is the limit: no growth, but queueing still counts.
        let app_limited = (in_flight as f64) < limit / 2.0;
        let fresh_baseline = s.baseline.observe(rtt, limit);
        let noload = s.baseline.rtt_noload;
        let next = match &mut s.algo {
            Algo::Gradient2 { long_rtt } => {
                // As Netflix's Gradient2Limit: queue 4, smoothing 0.2, gradient in 0.5..=1.
                let long = long_rtt.add(rtt);
                if long / rtt > 2.0 {
                    // Latency is back to normal after a long overload: forget it faster.
                    long_rtt.value *= 0.95;
                }
                let reference = long.min(noload);
                let gradient = (self.config.tolerance * reference / rtt).clamp(0.5, 1.0);
                let next = limit * gradient + 4.0;
                limit * 0.8 + next * 0.2
            }
            Algo::Vegas => {
                // As Netflix's VegasLimit: alpha 3, beta 6, threshold 1 (times log10 of the limit).
                if fresh_baseline {
                    return limit;
                }
                let queue = (limit * (1.0 - noload / rtt)).ceil();
                let l = log10(limit);
                if queue <= l {
                    limit + 6.0 * l
                } else if queue < 3.0 * l {
                    limit + l
                } else if queue > 6.0 * l {
                    limit - l
                } else {
                    limit
                }
            }
        };
        if app_limited && next > limit {
            return limit;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A downstream that serves `capacity` at once in `service` each, queueing the rest.
    fn rtt_at(in_flight: f64, capacity: f64, service: f64) -> f64 {
        service * (in_flight / capacity).max(1.0)
    }

    /// Drives a limiter as a saturated caller would: every window, `limit` calls in flight.
    async fn converge(capacity: f64, windows: u32, limiter: &AdaptiveLimit) -> u32 {
        for _ in 0..windows {
            let l = limiter.limit() as f64;
            for _ in 0..MIN_WINDOW_CALLS {
                limiter.sample(Duration::from_secs_f64(rtt_at(l, capacity, 0.040)), l as usize);
            }
            tokio::time::advance(Duration::from_millis(limiter.config.window_ms)).await;
            limiter.sample(Duration::from_secs_f64(rtt_at(l, capacity, 0.040)), l as usize);
        }
        limiter.limit()
    }

    #[tokio::test(start_paused = true)]
    async fn vegas_and_gradient2_settle_near_the_capacity_and_recover() {
        for algorithm in [Algorithm::Vegas, Algorithm::Gradient2] {
            let limiter = AdaptiveLimit::new(AdaptiveConfig { algorithm, ..AdaptiveConfig::default() });
            let at_50 = converge(50.0, 300, &limiter).await;
            // Vegas keeps 3-6 log10(limit) queued; Gradient2 tolerates `tolerance` (1.2) times the
            // long-term RTT, and that average itself drifts up under sustained queueing.
            let band = if algorithm == Algorithm::Vegas { 45..=70 } else { 45..=90 };
            assert!(band.contains(&at_50), "{algorithm:?} settled at {at_50} for a capacity of 50");
            let at_200 = converge(200.0, 300, &limiter).await;
            assert!(at_200 >= 150, "{algorithm:?} reached only {at_200} once the capacity was 200");
            let back = converge(50.0, 300, &limiter).await;
            // Gradient2's long-term average learned the 200-wide baseline's drift: it comes
            // down most of the way in 300 windows (30 s at the default 100 ms).
            let band = if algorithm == Algorithm::Vegas { 45..=70 } else { 45..=110 };
            assert!(band.contains(&back), "{algorithm:?} came back to {back}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn stays_within_bounds_and_does_not_grow_when_the_caller_is_the_limit() {
        let limiter = AdaptiveLimit::new(AdaptiveConfig { algorithm: Algorithm::Vegas, min: 4, max: 30, initial: 20, ..AdaptiveConfig::default() });
        // Only 3 in flight: the caller is the limit, whatever the latency says.
        for _ in 0..50 {
            for _ in 0..=MIN_WINDOW_CALLS {
                limiter.sample(Duration::from_millis(40), 3);
            }
            tokio::time::advance(Duration::from_millis(100)).await;
        }
        assert_eq!(limiter.limit(), 20);
        assert_eq!(converge(1000.0, 100, &limiter).await, 30, "capped at max");
        // Gradient2 halves at most per window and adds 4: without a floor it rests near 8-14.
        let g = AdaptiveLimit::new(AdaptiveConfig { algorithm: Algorithm::Gradient2, min: 20, max: 30, initial: 20, ..AdaptiveConfig::default() });
        assert_eq!(converge(1000.0, 300, &g).await, 30, "capped at max");
        assert_eq!(converge(1.0, 300, &g).await, 20, "floored at min");
    }

    /// A closed loop of `callers` against a downstream of `capacity` (FIFO, `service` each):
    /// in flight is the lower of the limit and the callers.
    async fn drive(callers: f64, capacity: f64, windows: u32, limiter: &AdaptiveLimit) -> u32 {
        for _ in 0..windows {
            let in_flight = (limiter.limit() as f64).min(callers);
            let rtt = Duration::from_secs_f64(rtt_at(in_flight, capacity, 0.050));
            for _ in 0..MIN_WINDOW_CALLS {
                limiter.sample(rtt, in_flight as usize);
            }
            tokio::time::advance(Duration::from_millis(limiter.config.window_ms)).await;
            limiter.sample(rtt, in_flight as usize);
        }
        limiter.limit()
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_set_high_comes_down_when_the_downstream_queues_though_callers_use_under_half() {
        for algorithm in [Algorithm::Vegas, Algorithm::Gradient2] {
            let limiter = AdaptiveLimit::new(AdaptiveConfig { algorithm, min: 4, max: 1000, initial: 100, ..AdaptiveConfig::default() });
            // The first window sees the downstream unloaded (20 callers, capacity 20)...
            assert_eq!(drive(20.0, 20.0, 1, &limiter).await, 100);
            // ...then 40 callers (under half of 100) queue behind a capacity of 20: 100 ms answers.
            let settled = drive(40.0, 20.0, 300, &limiter).await;
            assert!((10..=40).contains(&settled), "{algorithm:?} settled at {settled} for a capacity of 20");
            // The capacity returns: the limit grows back past the callers.
            let back = drive(40.0, 200.0, 300, &limiter).await;
            assert!(back >= 40, "{algorithm:?} grew back only to {back}");
        }
    }

    #[test]
    fn bad_values_name_their_field() {
        let bad = |c: AdaptiveConfig| c.validate("services.s.bulkhead.adaptive").unwrap_err().message;
        assert!(bad(AdaptiveConfig { min: 0, ..Default::default() }).starts_with("services.s.bulkhead.adaptive.min"));
        assert!(bad(AdaptiveConfig { initial: 2000, ..Default::default() }).starts_with("services.s.bulkhead.adaptive.initial"));
        assert!(bad(AdaptiveConfig { max: 2, ..Default::default() }).starts_with("services.s.bulkhead.adaptive.max"));
        assert!(bad(AdaptiveConfig { tolerance: 0.5, ..Default::default() }).starts_with("services.s.bulkhead.adaptive.tolerance"));
    }
}

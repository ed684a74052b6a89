//! Hedged reads: when an idempotent request's first attempt has not answered after the
//! endpoint's observed p95 (or a fixed `after_ms`), a second attempt starts on another
//! connection; the first answer wins and the others are cancelled.
//!
//! Guarantees: never for a non-idempotent request without an idempotency key; hedges
//! draw on their own budget (`budget_ratio` of requests, at most `BUDGET_CAP` saved
//! up), so a slow downstream never sees more than that much extra load; no hedge before
//! `MIN_SAMPLES` latencies are known (a quantile of nothing is no basis); a hedge takes
//! its own breaker and bulkhead permits, and a cancelled attempt releases both.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;

/// `hedge:` on a service or an endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HedgeConfig {
    /// A quantile of the endpoint's observed latency: `p50` to `p99.9`.
    #[serde(default)]
    pub after: Option<String>,
    /// A fixed delay instead.
    #[serde(default)]
    pub after_ms: Option<u64>,
    /// Extra attempts at most (each after one more delay).
    #[serde(default = "one")]
    pub max_extra: u32,
    /// Hedges allowed as a fraction of requests.
    #[serde(default = "five_percent")]
    pub budget_ratio: f64,
}

fn one() -> u32 {
    1
}

fn five_percent() -> f64 {
    0.05
}

/// Latencies known before a quantile is trusted.
pub const MIN_SAMPLES: usize = 20;
/// Hedges saved up at most (in whole hedges).
pub const BUDGET_CAP: i64 = 10;
const RING: usize = 512;
/// The quantile is recomputed every this many samples (a copy and a selection of `RING`).
const REFRESH_EVERY: usize = 128;

impl HedgeConfig {
    /// The quantile `after` names (0.95 for `p95`).
    pub fn quantile(&self) -> Option<f64> {
        // Asked once per eligible request: the usual spellings without a float parse.
        match self.after.as_deref()? {
            "p95" => return Some(0.95),
            "p99" => return Some(0.99),
            "p90" => return Some(0.9),
            _ => {}
        }
        let q: f64 = self.after.as_deref()?.strip_prefix('p')?.parse().ok()?;
        (q > 0.0 && q < 100.0).then_some(q / 100.0)
    }

    pub fn validate(&self, at: &str) -> Result<(), HarnessError> {
        let bad = |field: &str, msg: String| Err(HarnessError::config(format!("{at}.{field}: {msg}")));
        match (&self.after, self.after_ms) {
            (Some(_), Some(_)) => return bad("after_ms", "give either after (a quantile) or after_ms, not both".into()),
            (None, None) => return bad("after", "required: a quantile such as p95, or after_ms".into()),
            (Some(a), None) => match self.quantile() {
                Some(q) if (0.5..=0.999).contains(&q) => {}
                _ => return bad("after", format!("expected a quantile from p50 to p99.9, got {:?}", crate::redact::escape_control(a))),
            },
            (None, Some(ms)) if ms == 0 || ms > 600_000 => return bad("after_ms", format!("expected an integer from 1 to 600000, got {ms}")),
            _ => {}
        }
        if !(1..=3).contains(&self.max_extra) {
            return bad("max_extra", format!("expected an integer from 1 to 3, got {}", self.max_extra));
        }
        if self.budget_ratio.is_nan() || !(self.budget_ratio > 0.0 && self.budget_ratio <= 1.0) {
            return bad("budget_ratio", format!("expected a number above 0 and at most 1, got {}", self.budget_ratio));
        }
        Ok(())
    }

    /// How long the first attempt has before a hedge starts; `None` while the endpoint's
    /// latency is not yet known.
    pub fn delay(&self, latencies: &Latencies) -> Option<Duration> {
        match self.after_ms {
            Some(ms) => Some(Duration::from_millis(ms)),
            None => latencies.quantile(),
        }
    }
}

/// The last `RING` attempt latencies of one endpoint and a quantile of them, recomputed
/// every `REFRESH_EVERY` samples (lock-free: a racing writer may skew one sample, never
/// the quantile's validity).
pub struct Latencies {
    ring: Box<[AtomicU32]>,
    next: CacheLine<AtomicUsize>,
    /// The quantile last computed, in microseconds (0: not yet). Read by every request, so
    /// kept off the cache line that every sample writes.
    cached_us: CacheLine<AtomicU32>,
}

#[derive(Default)]
#[repr(align(64))]
struct CacheLine<T>(T);

impl Default for Latencies {
    fn default() -> Self {
        Latencies { ring: (0..RING).map(|_| AtomicU32::new(0)).collect(), next: Default::default(), cached_us: Default::default() }
    }
}

impl Latencies {
    /// Samples about one call in four once the quantile is known (chosen by the measured
    /// time's 256-ns bits: no shared counter), every call before.
    pub fn sample(&self, took: Duration, quantile: f64) {
        if took.subsec_nanos() & 0b11_0000_0000 != 0 && self.cached_us.0.load(Ordering::Relaxed) != 0 {
            return;
        }
        self.record(took, quantile);
    }

    pub fn record(&self, took: Duration, quantile: f64) {
        let us = took.as_micros().clamp(1, u32::MAX as u128) as u32;
        let i = self.next.0.fetch_add(1, Ordering::Relaxed);
        self.ring[i % RING].store(us, Ordering::Relaxed);
        let n = i + 1;
        if n >= MIN_SAMPLES && (n.is_multiple_of(REFRESH_EVERY) || n == MIN_SAMPLES) {
            let mut v: Vec<u32> = self.ring[..n.min(RING)].iter().map(|a| a.load(Ordering::Relaxed)).collect();
            let k = ((v.len() as f64 * quantile).ceil() as usize).clamp(1, v.len()) - 1;
            let (_, q, _) = v.select_nth_unstable(k);
            self.cached_us.0.store(*q, Ordering::Relaxed);
        }
    }

    pub fn quantile(&self) -> Option<Duration> {
        match self.cached_us.0.load(Ordering::Relaxed) {
            0 => None,
            us => Some(Duration::from_micros(us as u64)),
        }
    }
}

/// A service's hedge budget, in thousandths of a hedge: each eligible request deposits
/// `budget_ratio`, each hedge takes one whole.
#[derive(Default)]
pub struct HedgeBudget {
    milli: AtomicI64,
}

impl HedgeBudget {
    pub fn deposit(&self, ratio: f64) {
        // One read, and a write only below the cap: a full budget (the steady state of a
        // healthy downstream) costs no contended write per request.
        if self.milli.load(Ordering::Relaxed) >= BUDGET_CAP * 1000 {
            return;
        }
        let add = (ratio * 1000.0).round() as i64;
        let before = self.milli.fetch_add(add, Ordering::AcqRel);
        if before + add > BUDGET_CAP * 1000 {
            // Over the cap by at most one deposit per racing caller: trim back to it.
            let _ = self.milli.fetch_min(BUDGET_CAP * 1000, Ordering::AcqRel);
        }
    }

    pub fn withdraw(&self) -> bool {
        self.milli.fetch_update(Ordering::AcqRel, Ordering::Acquire, |m| (m >= 1000).then_some(m - 1000)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(v: serde_json::Value) -> Result<HedgeConfig, String> {
        let c: HedgeConfig = serde_json::from_value(v).map_err(|e| e.to_string())?;
        c.validate("services.s.hedge").map_err(|e| e.message)?;
        Ok(c)
    }

    #[test]
    fn config_forms_and_errors() {
        let c = cfg(serde_json::json!({"after": "p95", "max_extra": 1, "budget_ratio": 0.05})).unwrap();
        assert_eq!(c.quantile(), Some(0.95));
        assert_eq!(cfg(serde_json::json!({"after_ms": 150})).unwrap().delay(&Latencies::default()), Some(Duration::from_millis(150)));
        assert!(cfg(serde_json::json!({})).unwrap_err().starts_with("services.s.hedge.after:"));
        assert!(cfg(serde_json::json!({"after": "p95", "after_ms": 3})).unwrap_err().starts_with("services.s.hedge.after_ms:"));
        assert!(cfg(serde_json::json!({"after": "fast"})).unwrap_err().starts_with("services.s.hedge.after:"));
        assert!(cfg(serde_json::json!({"after": "p10"})).unwrap_err().starts_with("services.s.hedge.after:"));
        assert!(cfg(serde_json::json!({"after": "p99", "max_extra": 0})).unwrap_err().starts_with("services.s.hedge.max_extra:"));
        assert!(cfg(serde_json::json!({"after": "p99", "budget_ratio": 2})).unwrap_err().starts_with("services.s.hedge.budget_ratio:"));
    }

    #[test]
    fn the_quantile_needs_samples_and_follows_them() {
        let l = Latencies::default();
        for _ in 0..MIN_SAMPLES - 1 {
            l.record(Duration::from_millis(5), 0.95);
        }
        assert_eq!(l.quantile(), None, "too few samples");
        l.record(Duration::from_millis(5), 0.95);
        assert_eq!(l.quantile(), Some(Duration::from_millis(5)));
        // 95 fast and 5 slow of every 100: p95 is fast, p99 slow.
        let l = Latencies::default();
        for i in 0..1024 {
            l.record(Duration::from_millis(if i % 100 < 95 { 5 } else { 80 }), 0.95);
        }
        assert_eq!(l.quantile(), Some(Duration::from_millis(5)));
        let l99 = Latencies::default();
        for i in 0..1024 {
            l99.record(Duration::from_millis(if i % 100 < 95 { 5 } else { 80 }), 0.99);
        }
        assert_eq!(l99.quantile(), Some(Duration::from_millis(80)));
    }

    #[test]
    fn the_budget_allows_its_ratio_and_caps_savings() {
        let b = HedgeBudget::default();
        let mut hedges = 0;
        for _ in 0..1000 {
            b.deposit(0.05);
            if b.withdraw() {
                hedges += 1;
            }
        }
        assert_eq!(hedges, 50);
        for _ in 0..100_000 {
            b.deposit(0.05);
        }
        let saved = (0..100).filter(|_| b.withdraw()).count() as i64;
        assert_eq!(saved, BUDGET_CAP);
    }
}

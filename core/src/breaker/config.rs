//! `breaker:` for a service (or one endpoint): consecutive failures (the default) or a
//! sliding window of failure and slow-call rates; half-open probes and a ramp back.

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BreakerMode {
    /// Opens after `failure_threshold` failures in a row.
    #[default]
    Consecutive,
    /// Opens when the failure rate or the slow-call rate over `window` reaches its threshold.
    SlidingWindow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WindowType {
    /// The last `size` calls.
    #[default]
    Count,
    /// The calls of the last `size_ms`.
    Time,
}

/// `breaker.window`: `{type: count, size: 100}` or `{type: time, size_ms: 10000}`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WindowConfig {
    #[serde(rename = "type")]
    pub kind: WindowType,
    pub size: Option<u32>,
    pub size_ms: Option<u64>,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig { kind: WindowType::Count, size: None, size_ms: None }
    }
}

/// `breaker.slow_call`: a call that took at least `duration_ms` is slow, success or not.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlowCallConfig {
    pub duration_ms: u64,
    pub rate_threshold: f64,
}

/// `breaker.half_open`: `probes` trial calls; at least `success_rate` of them must
/// succeed; then traffic ramps through `ramp` (fractions of the normal rate), one step
/// every `step_ms`, to 1.0 (closed).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HalfOpenConfig {
    pub probes: u32,
    pub success_rate: f64,
    pub ramp: Vec<f64>,
    pub step_ms: u64,
}

impl Default for HalfOpenConfig {
    fn default() -> Self {
        HalfOpenConfig { probes: 1, success_rate: 1.0, ramp: Vec::new(), step_ms: 5000 }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    pub mode: BreakerMode,
    /// `consecutive`: failures in a row that open the breaker.
    pub failure_threshold: u32,
    pub open_ms: u64,
    /// Trial calls after `open_ms` (kept for configs written before `half_open`).
    pub half_open_probes: u32,
    /// `sliding_window`: the calls the rates are taken over.
    pub window: WindowConfig,
    /// `sliding_window`: no decision on fewer calls than this in the window.
    pub minimum_calls: u32,
    pub failure_rate_threshold: f64,
    pub slow_call: Option<SlowCallConfig>,
    pub half_open: Option<HalfOpenConfig>,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            mode: BreakerMode::Consecutive,
            failure_threshold: 5,
            open_ms: 30000,
            half_open_probes: 1,
            window: WindowConfig::default(),
            minimum_calls: 20,
            failure_rate_threshold: 0.5,
            slow_call: None,
            half_open: None,
        }
    }
}

/// The largest window the breaker keeps (calls for `count`, one bucket in ten for `time`).
pub const MAX_WINDOW_CALLS: u32 = 100_000;
const MAX_PROBES: u32 = 10_000;
const MAX_RAMP_STEPS: usize = 20;

impl BreakerConfig {
    /// The calls a count window holds (100 unless given).
    pub fn window_size(&self) -> u32 {
        self.window.size.unwrap_or(100)
    }

    /// The span of a time window (10 s unless given).
    pub fn window_ms(&self) -> u64 {
        self.window.size_ms.unwrap_or(10_000)
    }

    pub fn probes(&self) -> u32 {
        self.half_open.as_ref().map_or(self.half_open_probes, |h| h.probes)
    }

    /// Successful probes needed to leave half-open.
    pub fn probes_needed(&self) -> u32 {
        let rate = self.half_open.as_ref().map_or(1.0, |h| h.success_rate);
        ((self.probes() as f64 * rate).ceil() as u32).clamp(1, self.probes())
    }

    /// The ramp after the probes: the fractions below 1.0, in order.
    pub fn ramp(&self) -> &[f64] {
        let r = self.half_open.as_ref().map_or(&[][..], |h| &h.ramp[..]);
        let end = r.iter().position(|f| *f >= 1.0).unwrap_or(r.len());
        &r[..end]
    }

    pub fn step_ms(&self) -> u64 {
        self.half_open.as_ref().map_or(5000, |h| h.step_ms)
    }

    /// Checks the ranges serde cannot express; `at` is the field path (`services.x.breaker`).
    pub fn validate(&self, at: &str) -> Result<(), HarnessError> {
        let bad = |field: &str, msg: String| HarnessError::config(format!("{at}.{field}: {msg}"));
        let rate = |field: &str, v: f64| {
            if v.is_nan() || !(v > 0.0 && v <= 1.0) {
                Err(bad(field, format!("expected a number above 0 and at most 1, got {v}")))
            } else {
                Ok(())
            }
        };
        if self.open_ms == 0 {
            return Err(bad("open_ms", "expected an integer >= 1, got 0".into()));
        }
        if self.failure_threshold == 0 {
            return Err(bad("failure_threshold", "expected an integer >= 1, got 0".into()));
        }
        if self.half_open_probes == 0 {
            return Err(bad("half_open_probes", "expected an integer >= 1, got 0".into()));
        }
        match self.window.kind {
            WindowType::Count => {
                if self.window.size_ms.is_some() {
                    return Err(bad("window.size_ms", "only for `type: time` (a count window takes `size`)".into()));
                }
                let n = self.window_size();
                if !(1..=MAX_WINDOW_CALLS).contains(&n) {
                    return Err(bad("window.size", format!("expected an integer from 1 to {MAX_WINDOW_CALLS}, got {n}")));
                }
            }
            WindowType::Time => {
                if self.window.size.is_some() {
                    return Err(bad("window.size", "only for `type: count` (a time window takes `size_ms`)".into()));
                }
                let ms = self.window_ms();
                if !(10..=3_600_000).contains(&ms) {
                    return Err(bad("window.size_ms", format!("expected an integer from 10 to 3600000, got {ms}")));
                }
            }
        }
        if self.minimum_calls == 0 {
            return Err(bad("minimum_calls", "expected an integer >= 1, got 0".into()));
        }
        if self.window.kind == WindowType::Count && self.minimum_calls > self.window_size() {
            return Err(bad("minimum_calls", format!("must be at most window.size ({}), got {}", self.window_size(), self.minimum_calls)));
        }
        rate("failure_rate_threshold", self.failure_rate_threshold)?;
        if let Some(s) = &self.slow_call {
            if s.duration_ms == 0 {
                return Err(bad("slow_call.duration_ms", "expected an integer >= 1, got 0".into()));
            }
            rate("slow_call.rate_threshold", s.rate_threshold)?;
        }
        if self.mode == BreakerMode::Consecutive && self.slow_call.is_some() {
            return Err(bad("slow_call", "needs `mode: sliding_window` (slow calls are a rate over the window)".into()));
        }
        if let Some(h) = &self.half_open {
            if self.half_open_probes != 1 {
                return Err(bad("half_open_probes", "give either half_open_probes or half_open.probes, not both".into()));
            }
            if !(1..=MAX_PROBES).contains(&h.probes) {
                return Err(bad("half_open.probes", format!("expected an integer from 1 to {MAX_PROBES}, got {}", h.probes)));
            }
            rate("half_open.success_rate", h.success_rate)?;
            if h.ramp.len() > MAX_RAMP_STEPS {
                return Err(bad("half_open.ramp", format!("at most {MAX_RAMP_STEPS} steps, got {}", h.ramp.len())));
            }
            let mut last = 0.0;
            for (i, f) in h.ramp.iter().enumerate() {
                if f.is_nan() || *f <= last || *f > 1.0 {
                    return Err(bad(&format!("half_open.ramp[{i}]"), format!("expected rising fractions above 0 and at most 1, got {f}")));
                }
                last = *f;
            }
            if h.step_ms == 0 {
                return Err(bad("half_open.step_ms", "expected an integer >= 1, got 0".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> Result<(), String> {
        let c: BreakerConfig = serde_json::from_value(v).map_err(|e| e.to_string())?;
        c.validate("services.s.breaker").map_err(|e| e.message)
    }

    #[test]
    fn the_documented_example_parses() {
        let v = serde_json::json!({
            "mode": "sliding_window",
            "window": {"type": "time", "size_ms": 10000},
            "minimum_calls": 20,
            "failure_rate_threshold": 0.5,
            "slow_call": {"duration_ms": 2000, "rate_threshold": 0.8},
            "open_ms": 30000,
            "half_open": {"probes": 5, "success_rate": 0.8, "ramp": [0.1, 0.5, 1.0], "step_ms": 5000}
        });
        let c: BreakerConfig = serde_json::from_value(v).unwrap();
        c.validate("b").unwrap();
        assert_eq!((c.probes(), c.probes_needed(), c.ramp(), c.step_ms()), (5, 4, &[0.1, 0.5][..], 5000));
        assert_eq!(BreakerConfig::default().probes_needed(), 1);
    }

    #[test]
    fn bad_values_name_their_field() {
        let cases = [
            (serde_json::json!({"failure_rate_threshold": 1.5}), "services.s.breaker.failure_rate_threshold"),
            (serde_json::json!({"window": {"type": "count", "size": 0}}), "services.s.breaker.window.size"),
            (serde_json::json!({"window": {"type": "time", "size": 5}}), "services.s.breaker.window.size"),
            (serde_json::json!({"window": {"type": "count", "size": 10}, "minimum_calls": 11}), "services.s.breaker.minimum_calls"),
            (serde_json::json!({"slow_call": {"duration_ms": 10, "rate_threshold": 0.5}}), "services.s.breaker.slow_call"),
            (serde_json::json!({"half_open": {"ramp": [0.5, 0.2]}}), "services.s.breaker.half_open.ramp[1]"),
            (serde_json::json!({"half_open": {"probes": 0}}), "services.s.breaker.half_open.probes"),
            (serde_json::json!({"half_open": {"success_rate": 0}}), "services.s.breaker.half_open.success_rate"),
        ];
        for (v, field) in cases {
            let e = parse(v.clone()).unwrap_err();
            assert!(e.starts_with(field), "{v}: {e}");
        }
        assert!(parse(serde_json::json!({"mode": "rolling"})).unwrap_err().contains("unknown variant"));
    }
}

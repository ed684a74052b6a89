//! `services.<name>.rate_limit` (and `routes.<name>.rate_limit`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;
use crate::redact::{escape_control, redact_url};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Requests per second, sustained (fractions allowed: 0.5 is one every 2 s).
    pub rps: f64,
    /// Requests that may go at once (default: one second's worth, at least 1).
    pub burst: u32,
    /// Longest a request waits for capacity (or a pause) before `RateLimitedError`.
    pub max_wait_ms: u64,
    /// Longest pause a downstream's `Retry-After` may impose.
    pub max_pause_ms: u64,
    /// The same limit for a whole fleet, through Redis.
    pub shared: Option<SharedLimit>,
    /// Tighter limits nested under the service's, by endpoint (`GET /orders/{id}` or `/orders/{id}`).
    pub endpoints: BTreeMap<String, LimitRate>,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig { rps: 0.0, burst: 0, max_wait_ms: 1000, max_pause_ms: 60000, shared: None, endpoints: BTreeMap::new() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitRate {
    pub rps: f64,
    #[serde(default)]
    pub burst: u32,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SharedLimit {
    pub redis_url: String,
    /// The fleet-wide name of this limit (e.g. the downstream app id).
    pub key: String,
    /// While Redis is down each instance takes `rps / expected_instances`.
    pub expected_instances: u32,
}

impl Default for SharedLimit {
    fn default() -> Self {
        SharedLimit { redis_url: String::new(), key: String::new(), expected_instances: 1 }
    }
}

/// The default burst: one second's worth of the rate, at least 1.
fn burst_for(rps: f64, burst: u32) -> u32 {
    if burst > 0 {
        burst
    } else {
        rps.ceil().max(1.0).min(u32::MAX as f64) as u32
    }
}

impl RateLimitConfig {
    pub fn rate(&self) -> LimitRate {
        LimitRate { rps: self.rps, burst: burst_for(self.rps, self.burst) }
    }

    pub fn validate(&self, path: &str) -> Result<(), HarnessError> {
        let bad = |field: &str, msg: String| HarnessError::config(format!("{path}.{field}: {msg}"));
        if !(self.rps > 0.0 && self.rps.is_finite()) {
            return Err(bad("rps", format!("expected a number > 0, got {}", self.rps)));
        }
        if self.max_pause_ms == 0 {
            return Err(bad("max_pause_ms", "expected an integer >= 1, got 0".into()));
        }
        for (k, r) in &self.endpoints {
            if k.is_empty() || k.chars().any(char::is_control) {
                return Err(bad("endpoints", format!("an endpoint key must be printable, got {:?}", escape_control(k))));
            }
            if !(r.rps > 0.0 && r.rps.is_finite()) {
                return Err(bad(&format!("endpoints.{k}.rps"), format!("expected a number > 0, got {}", r.rps)));
            }
        }
        if let Some(s) = &self.shared {
            match url::Url::parse(&s.redis_url) {
                Ok(u) if u.scheme() == "redis" || u.scheme() == "rediss" => {}
                _ => return Err(bad("shared.redis_url", format!("expected a redis:// URL, got {:?}", escape_control(&redact_url(&s.redis_url))))),
            }
            if s.key.is_empty() || s.key.chars().any(char::is_control) || s.key.len() > 256 {
                return Err(bad("shared.key", "required: printable text of at most 256 characters".into()));
            }
            if s.expected_instances == 0 {
                return Err(bad("shared.expected_instances", "expected an integer >= 1, got 0".into()));
            }
        }
        Ok(())
    }

    /// Endpoint limits with their default bursts filled in.
    pub fn endpoint_rates(&self) -> impl Iterator<Item = (&String, LimitRate)> {
        self.endpoints.iter().map(|(k, r)| (k, LimitRate { rps: r.rps, burst: burst_for(r.rps, r.burst) }))
    }
}

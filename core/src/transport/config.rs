//! The transport stage's settings: timeouts, redirects, response limits, and what one
//! HTTP client (one connection pool) is built from.

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutConfig {
    pub connect_ms: u64,
    pub response_ms: u64,
    pub request_ms: u64,
    /// Longest silence while reading a body (between chunks of a stream).
    pub idle_ms: u64,
}

impl Default for TimeoutConfig {
    fn default() -> Self {
        TimeoutConfig { connect_ms: 1000, response_ms: 3000, request_ms: 15000, idle_ms: 30000 }
    }
}

/// Redirects: returned to the caller by default; followed only when asked, same origin only.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RedirectConfig {
    pub follow: bool,
    /// Most redirects followed for one attempt.
    pub max: u32,
}

impl Default for RedirectConfig {
    fn default() -> Self {
        RedirectConfig { follow: false, max: 3 }
    }
}

/// Bounds on what one service may cost.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest response body read (by `Content-Length` or while reading).
    pub max_response_bytes: u64,
    /// Distinct endpoint labels tracked; past it, new ones share `{other}`.
    pub max_endpoints: u32,
    /// Largest request body sent (a caller's, or one an interceptor puts in).
    pub max_request_bytes: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig { max_response_bytes: 64 * 1024 * 1024, max_endpoints: 1000, max_request_bytes: 32 * 1024 * 1024 }
    }
}

/// What one HTTP client (its connection pool) is built from.
#[derive(Debug, Clone, Copy)]
pub struct ClientSettings<'a> {
    pub base_url: &'a str,
    /// The config field `base_url` came from (`services.<name>.base_url`), for errors.
    pub field: &'a str,
    pub user_agent: &'a str,
    pub connect_ms: u64,
    pub redirects: &'a RedirectConfig,
    /// Idle connections kept per host.
    pub idle_pool: usize,
}

fn at_least_one(at: &str, field: &str, v: u64) -> Result<(), HarnessError> {
    if v == 0 {
        return Err(HarnessError::config(format!("{at}.{field}: expected an integer >= 1, got 0")));
    }
    Ok(())
}

impl TimeoutConfig {
    /// Checks the values serde cannot, naming fields under `at` (`services.<name>.timeouts`).
    pub fn validate(&self, at: &str) -> Result<(), HarnessError> {
        for (field, v) in [("connect_ms", self.connect_ms), ("response_ms", self.response_ms), ("request_ms", self.request_ms), ("idle_ms", self.idle_ms)] {
            at_least_one(at, field, v)?;
        }
        Ok(())
    }
}

impl LimitsConfig {
    /// Checks the values serde cannot, naming fields under `at` (`services.<name>.limits`).
    pub fn validate(&self, at: &str) -> Result<(), HarnessError> {
        at_least_one(at, "max_response_bytes", self.max_response_bytes)?;
        at_least_one(at, "max_endpoints", self.max_endpoints as u64)?;
        at_least_one(at, "max_request_bytes", self.max_request_bytes)
    }
}

impl RedirectConfig {
    /// Checks the values serde cannot, naming fields under `at` (`services.<name>.redirects`).
    pub fn validate(&self, at: &str) -> Result<(), HarnessError> {
        if !(1..=20).contains(&self.max) {
            return Err(HarnessError::config(format!("{at}.max: expected an integer from 1 to 20, got {}", self.max)));
        }
        Ok(())
    }
}

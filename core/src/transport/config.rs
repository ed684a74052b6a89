//! The transport stage's settings: timeouts, redirects, response limits, and what one
//! HTTP client (one connection pool) is built from.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
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
#[derive(Debug, Clone, Deserialize, Serialize)]
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
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest response body read (by `Content-Length` or while reading).
    pub max_response_bytes: u64,
    /// Distinct endpoint labels tracked; past it, new ones share `{other}`.
    pub max_endpoints: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig { max_response_bytes: 64 * 1024 * 1024, max_endpoints: 1000 }
    }
}

/// What one HTTP client (its connection pool) is built from.
#[derive(Debug, Clone, Copy)]
pub struct ClientSettings<'a> {
    pub base_url: &'a str,
    pub user_agent: &'a str,
    pub connect_ms: u64,
    pub redirects: &'a RedirectConfig,
    /// Idle connections kept per host.
    pub idle_pool: usize,
}

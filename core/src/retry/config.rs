//! The retry stage's settings (`services.<name>.retry`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    pub max_retries: u32,
    pub base_delay_ms: u64,
    pub max_delay_ms: u64,
    pub retry_on_500: bool,
    pub max_retry_after_ms: u64,
    /// Retries allowed as a fraction of requests (Finagle-style budget).
    pub budget_ratio: f64,
    /// Retries per second always allowed, whatever the ratio says.
    pub budget_min_per_sec: u32,
    /// Full jitter on backoff; off only for deterministic tests.
    pub jitter: bool,
    /// Count the budget across a fleet through Redis (local when Redis is down).
    pub budget_shared: Option<SharedBudgetConfig>,
}

/// `retry.budget_shared`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SharedBudgetConfig {
    pub redis_url: String,
    pub key: String,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 1,
            base_delay_ms: 200,
            max_delay_ms: 5000,
            retry_on_500: false,
            max_retry_after_ms: 30000,
            budget_ratio: 0.2,
            budget_min_per_sec: 10,
            jitter: true,
            budget_shared: None,
        }
    }
}

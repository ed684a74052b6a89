//! The retry stage's settings (`services.<name>.retry`).

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;
use crate::redact::{escape_control, redact_url};

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
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

impl RetryConfig {
    /// Checks the values serde cannot, naming fields under `at` (`services.<name>.retry`).
    pub fn validate(&self, at: &str) -> Result<(), HarnessError> {
        let bad = |field: &str, msg: String| Err(HarnessError::config(format!("{at}.{field}: {msg}")));
        if self.max_delay_ms < self.base_delay_ms {
            return bad("max_delay_ms", format!("must be >= retry.base_delay_ms ({}), got {}", self.base_delay_ms, self.max_delay_ms));
        }
        if !(0.0..=1.0).contains(&self.budget_ratio) || self.budget_ratio.is_nan() {
            return bad("budget_ratio", format!("expected a number from 0 to 1, got {}", self.budget_ratio));
        }
        if let Some(b) = &self.budget_shared {
            match url::Url::parse(&b.redis_url) {
                Ok(u) if u.scheme() == "redis" || u.scheme() == "rediss" => {}
                _ => return bad("budget_shared.redis_url", format!("expected a redis:// URL, got {:?}", escape_control(&redact_url(&b.redis_url)))),
            }
            if b.key.is_empty() || b.key.chars().any(char::is_control) || b.key.len() > 256 {
                return bad("budget_shared.key", "required: printable text of at most 256 characters".into());
            }
        }
        Ok(())
    }
}

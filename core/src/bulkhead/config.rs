//! The bulkhead's settings (`services.<name>.bulkhead`).

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BulkheadConfig {
    /// The fixed limit (unused when `adaptive` is set).
    pub max_concurrency: u32,
    /// A limit that follows the measured latency (Gradient2 or Vegas), within `min..=max`.
    pub adaptive: Option<super::adaptive::AdaptiveConfig>,
}

impl Default for BulkheadConfig {
    fn default() -> Self {
        BulkheadConfig { max_concurrency: 200, adaptive: None }
    }
}

impl BulkheadConfig {
    /// Checks the values serde cannot, naming fields under `at` (`services.<name>.bulkhead`).
    pub fn validate(&self, at: &str) -> Result<(), HarnessError> {
        if self.max_concurrency == 0 {
            return Err(HarnessError::config(format!("{at}.max_concurrency: expected an integer >= 1, got 0")));
        }
        if let Some(a) = &self.adaptive {
            a.validate(&format!("{at}.adaptive"))?;
        }
        Ok(())
    }
}

//! The bulkhead's settings (`services.<name>.bulkhead`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
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

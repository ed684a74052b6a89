//! Routes: business code names a route, Harness picks a provider.
//!
//! What a route is (`config.rs`), how one provider is chosen (`strategy.rs`), what is
//! known of each provider's health (`health.rs`), what an answer costs (`price.rs`) and
//! the answers kept for degradation (`fallback.rs`): plain data and pure functions. Routes are compiled (each provider
//! bound to the service it is reached through) in `engine/route.rs`; the failover
//! rules are the pipeline's (`pipeline/rules.rs`).

pub mod config;
pub(crate) mod fallback;
pub(crate) mod health;
pub mod price;
pub(crate) mod strategy;

use serde::Serialize;

pub use config::{RouteConfig, Strategy};

/// The breaker scope (the `service` of its breaker key and metrics) of a route's provider.
pub fn provider_scope(route: &str, provider: &str) -> String {
    format!("route:{route}/{provider}")
}

/// One provider as `routing_state` shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ProviderState {
    pub id: String,
    pub service: String,
    pub model: Option<String>,
    /// The configured weight.
    pub weight: u32,
    /// The weight selection uses now (health, breaker and cooling applied).
    pub effective_weight: f64,
    /// 0.0 to 1.0, from the success rate over the health window.
    pub health: f64,
    pub success_rate: f64,
    pub latency_ewma_ms: Option<f64>,
    #[schemars(extend("enum" = ["closed", "open", "half_open"]))]
    pub breaker: &'static str,
    pub in_flight: u32,
    /// Milliseconds left of a 429's `Retry-After`.
    pub cooling_ms: Option<u64>,
    pub last_error: Option<String>,
}

/// A route as `routing_state` shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RouteState {
    pub route: String,
    #[schemars(extend("enum" = ["weighted-health", "priority", "least-latency"]))]
    pub strategy: &'static str,
    pub providers: Vec<ProviderState>,
}

impl RouteState {
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a route state always serialises")
    }
}

//! Routes: business code names a route, Harness picks a provider.
//!
//! A route is compiled into the snapshot with its providers, each bound to the
//! service it is reached through (so that service's timeouts, breaker, bulkhead
//! and credentials apply) and to its health, which outlives snapshots. The
//! selection strategies are in `strategy.rs`, the failover rules in
//! `pipeline/route.rs`, the degraded answers in `fallback.rs`.

pub mod config;
pub(crate) mod fallback;
pub(crate) mod health;
pub(crate) mod strategy;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::engine::registry::Registry;
use crate::engine::ServiceRuntime;
use crate::state::BudgetPolicy;
pub use config::RouteConfig;
use config::ProviderConfig;
use health::ProviderHealth;

/// How long a failover-budget deposit counts.
const BUDGET_TTL: Duration = Duration::from_secs(10);

pub(crate) struct RouteRuntime {
    pub name: Arc<str>,
    pub config: RouteConfig,
    pub providers: Vec<ProviderRuntime>,
    /// The total deadline across providers.
    pub request_ms: u64,
    pub budget: BudgetPolicy,
    /// The budget's key (`route:<name>`), apart from every service's.
    pub budget_key: String,
    pub window: Duration,
    /// Answers kept for degradation; outlives snapshots.
    pub fallback: Arc<fallback::FallbackCache>,
    /// `rate_limit` on the route's requests, before any provider's own.
    pub limiter: Option<Arc<crate::ratelimit::ServiceLimiter>>,
    /// The route's hedge budget; outlives snapshots.
    pub hedges: Arc<crate::hedge::HedgeBudget>,
}

pub(crate) struct ProviderRuntime {
    pub id: Arc<str>,
    /// The provider's own breaker scope, `route:<route>/<provider>`: whatever service it
    /// points at, no other provider's outcomes (two models behind one gateway URL) move it.
    pub scope: Arc<str>,
    pub config: ProviderConfig,
    pub svc: Arc<ServiceRuntime>,
    pub health: Arc<ProviderHealth>,
}

/// The breaker scope (the `service` of its breaker key and metrics) of a route's provider.
pub fn provider_scope(route: &str, provider: &str) -> String {
    format!("route:{route}/{provider}")
}

impl RouteRuntime {
    pub fn build(
        name: &str,
        config: &RouteConfig,
        services: &std::collections::HashMap<String, Arc<ServiceRuntime>>,
        registry: &Registry,
    ) -> Result<RouteRuntime, crate::error::HarnessError> {
        let providers: Vec<ProviderRuntime> = config
            .providers
            .iter()
            .map(|p| ProviderRuntime {
                id: p.id.as_str().into(),
                scope: provider_scope(name, &p.id).into(),
                config: p.clone(),
                svc: services[&p.service].clone(),
                health: registry.provider_health(name, &p.id),
            })
            .collect();
        let request_ms = config
            .request_ms
            .unwrap_or_else(|| providers.iter().map(|p| p.svc.config.timeouts.request_ms).max().unwrap_or(15000));
        let limiter = config
            .rate_limit
            .as_ref()
            .map(|rl| registry.limiter(&format!("route:{name}"), rl, &format!("routes.{name}.rate_limit")))
            .transpose()?;
        Ok(RouteRuntime {
            limiter,
            hedges: registry.hedge_budget(&format!("route:{name}")),
            name: name.into(),
            budget: BudgetPolicy { ratio: config.budget_ratio, min_per_sec: config.budget_min_per_sec, ttl: BUDGET_TTL },
            budget_key: format!("route:{name}"),
            window: Duration::from_millis(config.health_window_ms),
            fallback: registry.route_cache(name, config.fallback.cache_entries as usize),
            config: config.clone(),
            providers,
            request_ms,
        })
    }

    pub fn provider_index(&self, id: &str) -> Option<usize> {
        self.providers.iter().position(|p| &*p.id == id)
    }
}

/// One provider as `routing_state` shows it.
#[derive(Debug, Clone, Serialize)]
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
    pub breaker: &'static str,
    pub in_flight: u32,
    /// Milliseconds left of a 429's `Retry-After`.
    pub cooling_ms: Option<u64>,
    pub last_error: Option<String>,
}

/// A route as `routing_state` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RouteState {
    pub route: String,
    pub strategy: &'static str,
    pub providers: Vec<ProviderState>,
}

impl RouteState {
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a route state always serialises")
    }
}

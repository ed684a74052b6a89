//! Routes compiled for requests, in one place: a configured route with its providers, and
//! every plain service as a route of one provider. The pipeline runs both through one
//! attempt loop; what differs is the rules after a failed attempt (`Rules`).
//!
//! Guarantees: a route's provider has its own breaker scope (`route:<route>/<provider>`)
//! and health record, whatever service it points at; a plain service's one provider is
//! the service itself (its own breaker, no health record, the service's retry rules);
//! health, fallback answers, limiters and hedge budgets outlive snapshots by key.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::registry::Registry;
use super::service::ServiceRuntime;
use crate::error::HarnessError;
use crate::routing::config::{ProviderConfig, RouteConfig};
use crate::routing::fallback::FallbackCache;
use crate::routing::health::ProviderHealth;
use crate::routing::price::{self, Price};
use crate::state::{BudgetPolicy, RetryBudgetStore};

/// How long a route's failover-budget deposit counts.
const BUDGET_TTL: Duration = Duration::from_secs(10);

/// What happens after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rules {
    /// A plain service: the same endpoint again, as its `retry:` allows.
    Retry,
    /// A route: the same provider again or another one, as its failover rules say.
    Failover,
}

pub(crate) struct RouteRuntime {
    pub name: Arc<str>,
    pub rules: Rules,
    /// The route's config (a plain service's is the default: `http`, one provider).
    pub config: RouteConfig,
    pub providers: Vec<ProviderRuntime>,
    /// The total deadline across every attempt.
    pub request_ms: u64,
    /// Where retries and failovers are paid for, and at what rate.
    pub budgets: Arc<dyn RetryBudgetStore>,
    pub budget_key: Arc<str>,
    pub budget: BudgetPolicy,
    pub window: Duration,
    /// Answers kept for degradation (routes only); outlives snapshots.
    pub fallback: Option<Arc<FallbackCache>>,
    /// `rate_limit` on the route's requests, before any provider's own.
    pub limiter: Option<Arc<crate::ratelimit::ServiceLimiter>>,
    /// Where the route's hedges are paid for (a plain service's: its own).
    pub hedges: Arc<crate::hedge::HedgeBudget>,
}

pub(crate) struct ProviderRuntime {
    pub id: Arc<str>,
    /// The `service` of the provider's breaker key and metrics.
    pub scope: Arc<str>,
    pub config: ProviderConfig,
    /// Its own `price`, else the `prices:` entry for its model (`routing/price.rs`).
    pub price: Option<Price>,
    pub svc: Arc<ServiceRuntime>,
    pub health: Arc<ProviderHealth>,
    /// Its wire format (`Pass` on a plain `http` route).
    pub adapter: crate::adapters::Adapter,
}

impl RouteRuntime {
    /// A configured route (already validated against the services it names), priced from
    /// each provider's own `price` or the `prices:` table.
    pub fn build(
        name: &str,
        config: &RouteConfig,
        prices: &BTreeMap<String, Price>,
        services: &std::collections::HashMap<String, Arc<ServiceRuntime>>,
        registry: &Registry,
    ) -> Result<RouteRuntime, HarnessError> {
        let providers: Vec<ProviderRuntime> = config
            .providers
            .iter()
            .map(|p| ProviderRuntime {
                id: p.id.as_str().into(),
                scope: crate::routing::provider_scope(name, &p.id).into(),
                config: p.clone(),
                price: price::resolve(p.price, p.model.as_deref(), prices),
                svc: services[&p.service].clone(),
                health: registry.provider_health(name, &p.id),
                adapter: crate::adapters::Adapter::resolve(config.adapter, p, &registry.host_adapters),
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
            rules: Rules::Failover,
            budgets: registry.budgets.clone(),
            budget: BudgetPolicy { ratio: config.budget_ratio, min_per_sec: config.budget_min_per_sec, ttl: BUDGET_TTL },
            budget_key: format!("route:{name}").into(),
            window: Duration::from_millis(config.health_window_ms),
            fallback: Some(registry.route_cache(name, config.fallback.cache_entries as usize)),
            config: config.clone(),
            providers,
            request_ms,
        })
    }

    /// A plain service as a route of one provider: the service itself.
    pub fn plain(svc: &Arc<ServiceRuntime>) -> RouteRuntime {
        let provider = ProviderRuntime {
            id: svc.name.clone(),
            scope: svc.name.clone(),
            config: ProviderConfig { id: svc.name.to_string(), service: svc.name.to_string(), weight: 1, ..Default::default() },
            price: None,
            svc: svc.clone(),
            health: Default::default(),
            adapter: crate::adapters::Adapter::Pass,
        };
        RouteRuntime {
            name: svc.name.clone(),
            rules: Rules::Retry,
            config: RouteConfig::default(),
            request_ms: svc.config.timeouts.request_ms,
            budgets: svc.budgets.clone(),
            budget_key: svc.name.clone(),
            budget: svc.budget,
            window: Duration::from_secs(60),
            fallback: None,
            limiter: None,
            hedges: svc.shared.hedges.clone(),
            providers: vec![provider],
        }
    }

    pub fn provider_index(&self, id: &str) -> Option<usize> {
        self.providers.iter().position(|p| &*p.id == id)
    }
}

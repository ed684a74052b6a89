//! One service, compiled: its transport (behind any mock or faults), base URL, static
//! headers, credential, limiter, budgets, schemas and per-endpoint settings.

use std::sync::Arc;

use http::HeaderMap;

use super::registry::ServiceShared;
use crate::config::ServiceConfig;
use crate::credentials::Credential;
use crate::ratelimit::ServiceLimiter;
use crate::redact::Secrets;
use crate::state::{BudgetPolicy, RetryBudgetStore};
use crate::transport::Transport;

/// One service, compiled.
pub(crate) struct ServiceRuntime {
    pub name: Arc<str>,
    pub config: ServiceConfig,
    pub transport: Arc<dyn Transport>,
    /// The network transport under any mock or faults (shared across reloads by key).
    pub(crate) network: Arc<dyn Transport>,
    /// What `network` was built from; equal keys share the client across reloads.
    pub(crate) transport_key: String,
    /// Faults may be injected: each attempt carries a mark for the record.
    pub faulty: bool,
    /// Parsed once; each request only sets path and query (no host re-parse).
    pub base_url: url::Url,
    /// The base URL's own path prefix, without a trailing slash.
    pub base_path: String,
    pub static_headers: HeaderMap,
    /// Credentials from config (sensitive header values, the base URL's password).
    pub secrets: Secrets,
    pub budget: BudgetPolicy,
    /// State that outlives snapshots (the bulkhead), shared by key.
    pub shared: Arc<ServiceShared>,
    /// The service's credential; kept from the previous snapshot when unchanged.
    pub credential: Option<Arc<Credential>>,
    /// The client-side rate limit (and 429 pause), when configured.
    pub limiter: Option<Arc<ServiceLimiter>>,
    /// Where this service's retry budget is counted: this process, or the fleet.
    pub budgets: Arc<dyn RetryBudgetStore>,
    /// Response schemas by endpoint key, compiled for this snapshot.
    pub schemas: Vec<(String, Arc<crate::validation::Schema>)>,
    /// The operations of the service's OpenAPI document (none without one).
    pub operations: Arc<crate::validation::openapi::Operations>,
    /// Endpoints with their own breaker settings (most services have none).
    pub endpoint_breakers: Vec<(String, Arc<crate::breaker::BreakerConfig>)>,
    /// The service's breaker settings (a permit holds them until its outcome is recorded).
    pub breaker: Arc<crate::breaker::BreakerConfig>,
    /// Endpoints with their own hedging.
    pub endpoint_hedges: Vec<(String, crate::hedge::HedgeConfig)>,
    /// Endpoints with their own caching.
    pub endpoint_caches: Vec<(String, crate::cache::HttpCacheConfig)>,
}

impl ServiceRuntime {
    /// The breaker settings for (`method`, `endpoint`): the endpoint's own, else the service's.
    pub fn breaker_for(&self, method: &str, endpoint: &str) -> &Arc<crate::breaker::BreakerConfig> {
        if self.endpoint_breakers.is_empty() {
            return &self.breaker;
        }
        self.endpoint_breakers.iter().find(|(k, _)| crate::endpoint::key_matches(k, method, endpoint)).map_or(&self.breaker, |(_, b)| b)
    }

    /// The hedging for (`method`, `endpoint`): the endpoint's own, else the service's.
    pub fn hedge_for(&self, method: &str, endpoint: &str) -> Option<&crate::hedge::HedgeConfig> {
        if self.endpoint_hedges.is_empty() {
            return self.config.hedge.as_ref();
        }
        self.endpoint_hedges.iter().find(|(k, _)| crate::endpoint::key_matches(k, method, endpoint)).map(|(_, h)| h).or(self.config.hedge.as_ref())
    }

    /// The caching for (`method`, `endpoint`): the endpoint's own, else the service's.
    pub fn cache_for(&self, method: &str, endpoint: &str) -> Option<&crate::cache::HttpCacheConfig> {
        if self.endpoint_caches.is_empty() {
            return self.config.cache.as_ref();
        }
        self.endpoint_caches.iter().find(|(k, _)| crate::endpoint::key_matches(k, method, endpoint)).map(|(_, c)| c).or(self.config.cache.as_ref())
    }

    /// The response schema for (`method`, `endpoint`), if one applies.
    pub fn schema_for(&self, method: &str, endpoint: &str) -> Option<&Arc<crate::validation::Schema>> {
        if self.schemas.is_empty() {
            return None;
        }
        self.schemas.iter().find(|(k, _)| crate::validation::key_matches(k, method, endpoint)).map(|(_, s)| s)
    }

    /// Every secret known for this request: config's and the caller's sensitive headers and
    /// query values, and what the service's credential holds now (an HMAC secret, AWS keys).
    pub fn secrets_for(&self, req: &crate::request::Request) -> Secrets {
        let mut s = self.secrets.clone();
        if let Some(c) = &self.credential {
            for v in c.secret_values() {
                s.add(v.expose());
            }
        }
        for (k, v) in req.headers.iter().chain(req.query.iter()) {
            s.add_if_sensitive(k, v);
        }
        s
    }
}


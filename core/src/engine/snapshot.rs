//! The compiled, immutable form of one config: what a request needs, ready to use.
//!
//! Guarantees: a snapshot never changes once built; building one validates
//! everything first (nothing is swapped in on error); a service's HTTP client
//! (its connection pool) is carried over from the previous snapshot when the
//! settings it was built from are unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::registry::{Registry, ServiceShared};
use crate::config::{Config, ServiceConfig};
use crate::credentials::{Credential, Providers};
use crate::error::HarnessError;
use crate::redact::{redact_url, Secrets};
use crate::ratelimit::ServiceLimiter;
use crate::routing::RouteRuntime;
use crate::state::{BudgetPolicy, RetryBudgetStore};
use crate::observability::metrics::FaultLabels;
use crate::transport::faults::FaultTransport;
use crate::transport::mock::{HostMocks, MockRule, MockTransport};
use crate::transport::reqwest::ReqwestTransport;
use crate::transport::Transport;

/// How long a retry-budget deposit counts.
const BUDGET_TTL: std::time::Duration = std::time::Duration::from_secs(10);

pub(crate) struct Snapshot {
    pub config: Arc<Config>,
    pub version: String,
    /// `client.name`, shared by every record (a clone is a reference count).
    pub client_name: Arc<str>,
    pub services: HashMap<String, Arc<ServiceRuntime>>,
    pub routes: HashMap<String, Arc<RouteRuntime>>,
    /// The audit log's masking, compiled for this config (when auditing is on).
    pub audit_masker: Option<crate::observability::audit::Masker>,
    /// Services answered by the mock (sorted), and the fault seed when faults are on.
    pub mocked: Vec<String>,
    pub fault_seed: Option<u64>,
}

/// One service, compiled.
pub(crate) struct ServiceRuntime {
    pub name: Arc<str>,
    pub config: ServiceConfig,
    pub transport: Arc<dyn Transport>,
    /// The network transport under any mock or faults (shared across reloads by key).
    network: Arc<dyn Transport>,
    /// What `network` was built from; equal keys share the client across reloads.
    transport_key: String,
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
    /// Endpoints with their own breaker settings (most services have none).
    pub endpoint_breakers: Vec<(String, Arc<crate::breaker::BreakerConfig>)>,
    /// The service's breaker settings (a permit holds them until its outcome is recorded).
    pub breaker: Arc<crate::breaker::BreakerConfig>,
    /// Endpoints with their own hedging.
    pub endpoint_hedges: Vec<(String, crate::hedge::HedgeConfig)>,
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

    /// The response schema for (`method`, `endpoint`), if one applies.
    pub fn schema_for(&self, method: &str, endpoint: &str) -> Option<&Arc<crate::validation::Schema>> {
        if self.schemas.is_empty() {
            return None;
        }
        self.schemas.iter().find(|(k, _)| crate::validation::key_matches(k, method, endpoint)).map(|(_, s)| s)
    }

    /// Every secret known for this request: config's and the caller's sensitive headers and query values.
    pub fn secrets_for(&self, req: &crate::request::Request) -> Secrets {
        let mut s = self.secrets.clone();
        for (k, v) in req.headers.iter().chain(req.query.iter()) {
            s.add_if_sensitive(k, v);
        }
        s
    }
}

/// What a service's HTTP client is built from. It keeps as many idle connections as the
/// service may have requests in flight (at least 1024), so that a service allowed
/// thousands at once does not reconnect most of them on every burst.
fn client_settings<'a>(svc: &'a ServiceConfig, user_agent: &'a str) -> crate::transport::config::ClientSettings<'a> {
    let bulkhead = &svc.bulkhead;
    let idle_pool = bulkhead.adaptive.as_ref().map_or(bulkhead.max_concurrency, |a| a.max).max(1024) as usize;
    crate::transport::config::ClientSettings { base_url: &svc.base_url, user_agent, connect_ms: svc.timeouts.connect_ms, redirects: &svc.redirects, idle_pool }
}

fn transport_key(client_name: &str, svc: &ServiceConfig) -> String {
    let origin = url::Url::parse(&svc.base_url).map(|u| u.origin().ascii_serialization()).unwrap_or_default();
    format!("{client_name}|{}|{}|{}|{origin}", svc.timeouts.connect_ms, svc.redirects.follow, svc.redirects.max)
}

impl Snapshot {
    /// The service whose settings govern breaker scope `name`: a service, or a route's
    /// provider (`route:<route>/<provider>`, see `routing::provider_scope`).
    pub fn breaker_owner(&self, name: &str) -> Option<&Arc<ServiceRuntime>> {
        if let Some(svc) = self.services.get(name) {
            return Some(svc);
        }
        let (route, provider) = name.strip_prefix("route:")?.split_once('/')?;
        let rt = self.routes.get(route)?;
        rt.providers.iter().find(|p| &*p.id == provider).map(|p| &p.svc)
    }

    /// Compiles `config` (already validated by the caller). `previous` lends HTTP clients;
    /// `fixed_transport` (tests, mock mode) replaces every service's transport.
    pub fn build(
        config: Config,
        previous: Option<&Snapshot>,
        registry: &Registry,
        fixed_transport: Option<&Arc<dyn Transport>>,
        providers: &Providers,
        mocks: &Arc<HostMocks>,
    ) -> Result<Snapshot, HarnessError> {
        config.validate()?;
        let mut services = HashMap::new();
        let mock_all = config.mock.active();
        let mut mocked = Vec::new();
        let fault_seed = config.faults.active().then(|| config.faults.seed.unwrap_or_else(rand::random));
        for (name, svc) in &config.services {
            let mut static_headers = HeaderMap::new();
            let mut secrets = Secrets::default();
            for (k, v) in &svc.headers.0 {
                secrets.add_if_sensitive(k, v);
                let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) else {
                    return Err(HarnessError::config(format!("services.{name}.headers.{k}: not a valid HTTP header")));
                };
                let mut v = v;
                v.set_sensitive(true);
                static_headers.insert(k, v);
            }
            let base_url = url::Url::parse(&svc.base_url)
                .map_err(|e| HarnessError::config(format!("services.{name}.base_url: {e} ({})", redact_url(&svc.base_url))))?;
            if let Some(password) = base_url.password() {
                secrets.add(password);
            }
            let previous_credential = previous.and_then(|p| p.services.get(name)).and_then(|s| s.credential.as_ref());
            let ctx = crate::credentials::BuildContext {
                providers,
                events: registry.events(),
                metrics: registry.metrics(),
                connect_ms: svc.timeouts.connect_ms,
                max_retry_after_ms: svc.retry.max_retry_after_ms,
            };
            let credential = svc.auth.as_ref().map(|a| Credential::build(name, a, &ctx, previous_credential)).transpose()?;
            let key = transport_key(&config.client.name, svc);
            let network: Arc<dyn Transport> = match (fixed_transport, previous.and_then(|p| p.services.get(name))) {
                (Some(t), _) => t.clone(),
                (None, Some(prev)) if prev.transport_key == key => prev.network.clone(),
                _ => Arc::new(ReqwestTransport::new(&client_settings(svc, &config.client.name))?),
            };
            let base_path = base_url.path().trim_end_matches('/').to_string();
            let mut transport = network.clone();
            if mock_all || mocks.has(name) {
                let rules = config.mock.services.get(name).map(Vec::as_slice).unwrap_or(&[]);
                let rules = rules.iter().enumerate().map(|(i, r)| MockRule::from_config(&format!("mock.services.{name}[{i}]"), r)).collect::<Result<_, _>>()?;
                transport = Arc::new(MockTransport::new(name, &base_path, rules, mocks.clone()));
                mocked.push(name.clone());
            }
            let fault_rules: Vec<_> = match fault_seed {
                Some(_) => config
                    .faults
                    .rules
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.service == *name)
                    .map(|(i, r)| {
                        let labels = FaultLabels { service: name.as_str().into(), fault: r.fault.as_str().into() };
                        (i, r.clone(), registry.metrics().faults_injected.get_or_create(&labels).clone())
                    })
                    .collect(),
                None => Vec::new(),
            };
            let faulty = !fault_rules.is_empty();
            if let (true, Some(seed)) = (faulty, fault_seed) {
                transport = Arc::new(FaultTransport::new(transport, &base_path, fault_rules, seed));
            }
            services.insert(
                name.clone(),
                Arc::new(ServiceRuntime {
                    name: name.as_str().into(),
                    config: svc.clone(),
                    transport,
                    network,
                    transport_key: key,
                    faulty,
                    base_path,
                    base_url,
                    static_headers,
                    secrets,
                    budget: BudgetPolicy {
                        ratio: svc.retry.budget_ratio,
                        min_per_sec: svc.retry.budget_min_per_sec,
                        ttl: BUDGET_TTL,
                    },
                    shared: registry.service(name, &svc.bulkhead),
                    credential,
                    limiter: svc.rate_limit.as_ref().map(|rl| registry.limiter(name, rl, &format!("services.{name}.rate_limit"))).transpose()?,
                    budgets: registry.budget_store(name, svc.retry.budget_shared.as_ref())?,
                    schemas: crate::validation::compile(name, &svc.endpoints)?,
                    endpoint_breakers: svc.endpoints.iter().filter_map(|(k, e)| Some((k.clone(), Arc::new(e.breaker.clone()?)))).collect(),
                    breaker: Arc::new(svc.breaker.clone()),
                    endpoint_hedges: svc.endpoints.iter().filter_map(|(k, e)| Some((k.clone(), e.hedge.clone()?))).collect(),
                }),
            );
        }
        let routes = config
            .routes
            .iter()
            .map(|(name, r)| RouteRuntime::build(name, r, &services, registry).map(|rt| (name.clone(), Arc::new(rt))))
            .collect::<Result<_, _>>()?;
        let version = config.version();
        let client_name = config.client.name.as_str().into();
        let audit_masker = config.audit.enabled.then(|| crate::observability::audit::Masker::new(&config.audit));
        mocked.sort_unstable();
        Ok(Snapshot { config: Arc::new(config), version, client_name, services, routes, audit_masker, mocked, fault_seed })
    }
}

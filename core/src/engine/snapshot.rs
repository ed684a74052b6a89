//! The compiled, immutable form of one config: what a request needs, ready to use.
//!
//! Guarantees: a snapshot never changes once built; building one validates
//! everything first (nothing is swapped in on error); a service's HTTP client
//! (its connection pool) is carried over from the previous snapshot when the
//! settings it was built from are unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::registry::Registry;
use crate::config::{Config, ServiceConfig, Validated};
use crate::credentials::{Credential, Providers};
use crate::error::HarnessError;
use crate::redact::{redact_url, Secrets};
use super::route::RouteRuntime;
pub(crate) use super::service::ServiceRuntime;
use crate::state::BudgetPolicy;
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
    /// Configured routes, compiled.
    pub routes: HashMap<String, Arc<RouteRuntime>>,
    /// Every plain service as a route of one provider (what a request naming it runs).
    pub plain: HashMap<String, Arc<RouteRuntime>>,
    /// The audit log's masking, compiled for this config (when auditing is on).
    pub audit_masker: Option<crate::observability::audit::Masker>,
    /// Services answered by the mock (sorted), and the fault seed when faults are on.
    pub mocked: Vec<String>,
    pub fault_seed: Option<u64>,
}

/// What a service's HTTP client is built from. It keeps as many idle connections as the
/// service may have requests in flight (at least 1024), so that a service allowed
/// thousands at once does not reconnect most of them on every burst.
fn client_settings<'a>(svc: &'a ServiceConfig, user_agent: &'a str, field: &'a str) -> crate::transport::config::ClientSettings<'a> {
    let bulkhead = &svc.bulkhead;
    let idle_pool = bulkhead.adaptive.as_ref().map_or(bulkhead.max_concurrency, |a| a.max).max(1024) as usize;
    crate::transport::config::ClientSettings { base_url: &svc.base_url, field, user_agent, connect_ms: svc.timeouts.connect_ms, redirects: &svc.redirects, idle_pool }
}

fn transport_key(client_name: &str, svc: &ServiceConfig) -> String {
    let origin = url::Url::parse(&svc.base_url).map(|u| u.origin().ascii_serialization()).unwrap_or_default();
    format!("{client_name}|{}|{}|{}|{origin}", svc.timeouts.connect_ms, svc.redirects.follow, svc.redirects.max)
}

impl Snapshot {
    /// What a request's name resolves to: a route, `route/model` (the route served only by
    /// its providers of that model), or a plain service; an unknown name is a
    /// `ConfigError` listing the known ones.
    pub fn resolve(&self, name: &str) -> Result<(Arc<RouteRuntime>, Option<String>), HarnessError> {
        if let Some(rt) = self.routes.get(name) {
            return Ok((rt.clone(), None));
        }
        if let Some((route, model)) = name.split_once('/') {
            if let Some(rt) = self.routes.get(route) {
                return Ok((rt.clone(), Some(model.to_string())));
            }
        }
        if let Some(plan) = self.plain.get(name) {
            return Ok((plan.clone(), None));
        }
        let mut known: Vec<&str> = self.services.keys().chain(self.routes.keys()).map(String::as_str).collect();
        known.sort_unstable();
        Err(HarnessError::config(format!(
            "request.service: unknown service `{}` (configured services and routes: {})",
            crate::redact::escape_control(name),
            known.join(", ")
        )))
    }

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

    /// Compiles a validated config (never checked again here). `previous` lends HTTP
    /// clients, and credentials whose config and secrets are unchanged unless
    /// `renew_credentials` (then every credential reads its source again); `fixed_transport`
    /// (tests, mock mode) replaces every service's transport.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        config: Validated,
        previous: Option<&Snapshot>,
        renew_credentials: bool,
        registry: &Registry,
        fixed_transport: Option<&Arc<dyn Transport>>,
        providers: &Providers,
        mocks: &Arc<HostMocks>,
    ) -> Result<Snapshot, HarnessError> {
        let config = config.into_inner();
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
            let previous_credential = previous.filter(|_| !renew_credentials).and_then(|p| p.services.get(name)).and_then(|s| s.credential.as_ref());
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
                _ => Arc::new(ReqwestTransport::new(&client_settings(svc, &config.client.name, &format!("services.{name}.base_url")))?),
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
            // The endpoints' own schemas first: they win over the document's for the same label.
            let mut schemas = crate::validation::compile(name, &svc.endpoints)?;
            let operations = match &svc.openapi {
                Some(o) => {
                    let (ops, declared) = crate::validation::openapi::load(name, o)?;
                    schemas.extend(declared);
                    Arc::new(ops)
                }
                None => Default::default(),
            };
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
                    schemas,
                    operations,
                    endpoint_breakers: svc.endpoints.iter().filter_map(|(k, e)| Some((k.clone(), Arc::new(e.breaker.clone()?)))).collect(),
                    breaker: Arc::new(svc.breaker.clone()),
                    endpoint_hedges: svc.endpoints.iter().filter_map(|(k, e)| Some((k.clone(), e.hedge.clone()?))).collect(),
                    endpoint_caches: svc.endpoints.iter().filter_map(|(k, e)| Some((k.clone(), e.cache.clone()?))).collect(),
                }),
            );
        }
        let routes = config
            .routes
            .iter()
            .map(|(name, r)| RouteRuntime::build(name, r, &config.prices, &services, registry).map(|rt| (name.clone(), Arc::new(rt))))
            .collect::<Result<_, _>>()?;
        let plain = services.iter().map(|(name, svc)| (name.clone(), Arc::new(RouteRuntime::plain(svc)))).collect();
        let version = config.version();
        let client_name = config.client.name.as_str().into();
        let audit_masker = config.audit.enabled.then(|| crate::observability::audit::Masker::new(&config.audit));
        mocked.sort_unstable();
        Ok(Snapshot { config: Arc::new(config), version, client_name, services, routes, plain, audit_masker, mocked, fault_seed })
    }
}

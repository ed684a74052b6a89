//! State that outlives config snapshots: per-service bulkheads and per-endpoint
//! breakers and metric handles, carried across reloads by key.
//!
//! Guarantees: endpoint state is bounded per service (`limits.max_endpoints`,
//! then the shared `{other}`); state idle for `ENDPOINT_IDLE_EVICTION` with a
//! closed breaker that no request holds is dropped with its metric series; a
//! service's bulkhead keeps its permits across a resize.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use crate::breaker::{BreakerState, CircuitBreaker};
use crate::bulkhead::Bulkhead;
use crate::endpoint;
use crate::host::Event;
use crate::observability::events::EventHub;
use crate::retry::config::SharedBudgetConfig;
use crate::error::HarnessError;
use crate::ratelimit::{RateLimitConfig, ServiceLimiter};
use crate::routing::fallback::FallbackCache;
use crate::state::redis::{RedisConn, RedisRateLimits, SharedBudget, SharedBudgetStore};
use crate::state::{RateLimitStore, RetryBudgetStore};
use crate::routing::health::ProviderHealth;
use crate::observability::metrics::{attempt_label, AttemptLabels, AttemptLatencyLabels, EndpointLabels, Metrics, RequestLabels, ServiceLabels, TransitionLabels};

/// Endpoint state idle this long, with a closed breaker, is dropped.
pub const ENDPOINT_IDLE_EVICTION: Duration = Duration::from_secs(600);
/// How often the registry looks for idle endpoints (on the next new endpoint or metrics read).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Per-service state kept across reloads.
pub(crate) struct ServiceShared {
    pub bulkhead: Bulkhead,
    pub hedges: Arc<crate::hedge::HedgeBudget>,
}

pub(crate) struct EndpointState {
    pub breaker: Arc<CircuitBreaker>,
    /// Recent attempt latencies, for a hedge's `after: pNN` (recorded only when hedging).
    pub latencies: crate::hedge::Latencies,
    pub latency: Histogram,
    pub retries: Counter,
    /// The heatmap's commonest cell (first attempt, success) and its latency, looked up once.
    pub first_success: Counter,
    pub first_latency: Histogram,
    /// `harness_requests_total` handles by final status, so the hot path skips the family lookup.
    requests_by_status: RwLock<Vec<(Option<u16>, Counter)>>,
    labels: EndpointLabels,
    /// Shared names for log records (a clone is a reference count, not an allocation).
    pub names: (Arc<str>, Arc<str>, Arc<str>),
    /// Milliseconds since the registry's epoch at the last request.
    last_used_ms: AtomicU64,
}

impl EndpointState {
    /// Counts one attempt in the retry heatmap.
    pub fn record_attempt(&self, metrics: &Metrics, attempt: u32, outcome: &'static str, seconds: f64) {
        if attempt == 1 {
            self.first_latency.observe(seconds);
            if outcome == "success" {
                self.first_success.inc();
                return;
            }
        } else {
            metrics
                .attempt_latency
                .get_or_create(&AttemptLatencyLabels { service: self.labels.service.clone(), endpoint: self.labels.endpoint.clone(), attempt: attempt_label(attempt).into() })
                .observe(seconds);
        }
        metrics
            .attempts
            .get_or_create(&AttemptLabels {
                service: self.labels.service.clone(),
                endpoint: self.labels.endpoint.clone(),
                attempt: attempt_label(attempt).into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    pub fn requests_counter(&self, metrics: &Metrics, status: Option<u16>) -> Counter {
        if let Some((_, c)) = self.requests_by_status.read().iter().find(|(s, _)| *s == status) {
            return c.clone();
        }
        let counter = metrics
            .requests
            .get_or_create(&RequestLabels {
                service: self.labels.service.clone(),
                endpoint: self.labels.endpoint.clone(),
                method: self.labels.method.clone(),
                status: status.map(|s| s.to_string()).unwrap_or_else(|| "error".into()).into(),
            })
            .clone();
        self.requests_by_status.write().push((status, counter.clone()));
        counter
    }
}

/// Borrowed form of the endpoint key; hashes exactly like `(String, String, String)`.
#[derive(Hash)]
struct KeyRef<'a>(&'a str, &'a str, &'a str);

impl hashbrown::Equivalent<(String, String, String)> for KeyRef<'_> {
    fn equivalent(&self, key: &(String, String, String)) -> bool {
        self.0 == key.0 && self.1 == key.1 && self.2 == key.2
    }
}

struct Endpoints {
    map: hashbrown::HashMap<(String, String, String), Arc<EndpointState>>,
    /// Labels per service, not counting the shared `{other}`.
    per_service: HashMap<String, usize>,
    last_sweep_ms: u64,
}

pub(crate) struct Registry {
    services: Mutex<HashMap<String, Arc<ServiceShared>>>,
    /// Provider health by (route, provider id), carried across reloads.
    providers: Mutex<HashMap<(String, String), Arc<ProviderHealth>>>,
    /// Fallback answers by route.
    route_caches: Mutex<HashMap<String, Arc<FallbackCache>>>,
    /// Hedge budgets by route (`route:<name>`); a service's lives in its `ServiceShared`.
    hedge_budgets: Mutex<HashMap<String, Arc<crate::hedge::HedgeBudget>>>,
    /// One Redis connection per URL, shared by every store on it.
    redis: Mutex<HashMap<String, Arc<RedisConn>>>,
    /// Rate limiters by service (or `route:<name>`), kept while their settings hold.
    limiters: Mutex<HashMap<String, Arc<ServiceLimiter>>>,
    /// Fleet-wide retry budgets by (redis_url, key).
    shared_budgets: Mutex<HashMap<(String, String), Arc<dyn RetryBudgetStore>>>,
    /// The process-local retry budget (the default, and the fallback of a shared one).
    pub budgets: Arc<dyn RetryBudgetStore>,
    /// Adapters the host registered by name (`register_adapter`), resolved at each snapshot.
    pub host_adapters: crate::adapters::HostAdapters,
    /// Host interceptors (`add_interceptor`), in registration order.
    pub interceptors: crate::interceptors::Interceptors,
    endpoints: RwLock<Endpoints>,
    metrics: Arc<Metrics>,
    events: Arc<EventHub>,
    epoch: tokio::time::Instant,
}

impl Registry {
    pub fn new(metrics: Arc<Metrics>, events: Arc<EventHub>, budgets: Arc<dyn RetryBudgetStore>) -> Self {
        Registry {
            redis: Mutex::new(HashMap::new()),
            hedge_budgets: Mutex::new(HashMap::new()),
            limiters: Mutex::new(HashMap::new()),
            shared_budgets: Mutex::new(HashMap::new()),
            budgets,
            host_adapters: Default::default(),
            interceptors: Default::default(),
            services: Mutex::new(HashMap::new()),
            providers: Mutex::new(HashMap::new()),
            route_caches: Mutex::new(HashMap::new()),
            endpoints: RwLock::new(Endpoints { map: hashbrown::HashMap::new(), per_service: HashMap::new(), last_sweep_ms: 0 }),
            metrics,
            events,
            epoch: tokio::time::Instant::now(),
        }
    }

    /// The shared state of `name`, created with `bulkhead` if new (a reload
    /// reconfigures existing bulkheads once it has swapped the snapshot in).
    pub fn service(&self, name: &str, bulkhead: &crate::bulkhead::config::BulkheadConfig) -> Arc<ServiceShared> {
        self.services
            .lock()
            .entry(name.to_string())
            .or_insert_with(|| {
                let labels = ServiceLabels { service: name.into() };
                let gauge = self.metrics.bulkhead_in_use.get_or_create(&labels).clone();
                let limit = self.metrics.bulkhead_limit.get_or_create(&labels).clone();
                Arc::new(ServiceShared { bulkhead: Bulkhead::new(bulkhead, gauge, limit), hedges: Default::default() })
            })
            .clone()
    }

    /// A route's hedge budget, kept across reloads.
    pub fn hedge_budget(&self, key: &str) -> Arc<crate::hedge::HedgeBudget> {
        self.hedge_budgets.lock().entry(key.to_string()).or_default().clone()
    }

    /// The health of `provider` on `route`, kept across reloads while the id stays.
    pub fn provider_health(&self, route: &str, provider: &str) -> Arc<ProviderHealth> {
        self.providers.lock().entry((route.to_string(), provider.to_string())).or_default().clone()
    }

    /// The fallback cache of `route`, resized to `capacity`.
    pub fn route_cache(&self, route: &str, capacity: usize) -> Arc<FallbackCache> {
        let cache = self.route_caches.lock().entry(route.to_string()).or_insert_with(|| Arc::new(FallbackCache::new(capacity))).clone();
        cache.resize(capacity);
        cache
    }

    /// The connection for `url` (created on first use; it connects lazily).
    pub fn redis(&self, url: &str, path: &str) -> Result<Arc<RedisConn>, HarnessError> {
        if let Some(c) = self.redis.lock().get(url) {
            return Ok(c.clone());
        }
        let conn = RedisConn::new(url, path)?;
        Ok(self.redis.lock().entry(url.to_string()).or_insert(conn).clone())
    }

    /// The limiter for `name` under `config`: the previous one while its settings hold
    /// (its cells and pause carry over a reload), else a new one.
    pub fn limiter(&self, name: &str, config: &RateLimitConfig, path: &str) -> Result<Arc<ServiceLimiter>, HarnessError> {
        if let Some(l) = self.limiters.lock().get(name).filter(|l| l.same_settings(config)) {
            return Ok(l.clone());
        }
        let store: Option<Arc<dyn RateLimitStore>> = match &config.shared {
            Some(s) => Some(Arc::new(RedisRateLimits::new(self.redis(&s.redis_url, &format!("{path}.shared.redis_url"))?))),
            None => None,
        };
        let limiter = Arc::new(ServiceLimiter::new(name, config, store, self.events.clone(), self.metrics.clone()));
        self.limiters.lock().insert(name.to_string(), limiter.clone());
        Ok(limiter)
    }

    /// The limiters in use, for the pause gauge.
    pub fn limiters(&self) -> Vec<Arc<ServiceLimiter>> {
        self.limiters.lock().values().cloned().collect()
    }

    /// The retry budget of `service`: shared through Redis when `shared` is set, else local.
    pub fn budget_store(&self, service: &str, shared: Option<&SharedBudgetConfig>) -> Result<Arc<dyn RetryBudgetStore>, HarnessError> {
        let Some(s) = shared else { return Ok(self.budgets.clone()) };
        let id = (s.redis_url.clone(), s.key.clone());
        if let Some(b) = self.shared_budgets.lock().get(&id) {
            return Ok(b.clone());
        }
        let conn = self.redis(&s.redis_url, &format!("services.{service}.retry.budget_shared.redis_url"))?;
        let events = self.events.clone();
        let name = service.to_string();
        let on_outage = Box::new(move |why: String| {
            events.emit(Event::SharedStateUnavailable { service: name.clone(), what: "retry_budget", error: why });
        });
        let store: Arc<dyn RetryBudgetStore> = Arc::new(SharedBudgetStore(SharedBudget::new(conn, &s.key, self.budgets.clone(), on_outage)));
        Ok(self.shared_budgets.lock().entry(id).or_insert(store).clone())
    }

    pub fn events(&self) -> &Arc<EventHub> {
        &self.events
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The state for (service, endpoint, method); past `max_endpoints` labels on the
    /// service (after dropping idle ones), the shared `{other}` state.
    pub fn endpoint(&self, service: &str, endpoint: &str, method: &str, max_endpoints: u32) -> Arc<EndpointState> {
        let now = self.now_ms();
        if let Some(e) = self.endpoints.read().map.get(&KeyRef(service, endpoint, method)) {
            e.last_used_ms.store(now, Ordering::Relaxed);
            return e.clone();
        }
        let mut eps = self.endpoints.write();
        if let Some(e) = eps.map.get(&KeyRef(service, endpoint, method)) {
            return e.clone();
        }
        if now.saturating_sub(eps.last_sweep_ms) >= SWEEP_EVERY.as_millis() as u64 {
            self.sweep(&mut eps, now);
        }
        let mut endpoint = endpoint;
        if endpoint != endpoint::OTHER && eps.per_service.get(service).copied().unwrap_or(0) >= max_endpoints as usize {
            endpoint = endpoint::OTHER;
            if let Some(e) = eps.map.get(&KeyRef(service, endpoint, method)) {
                e.last_used_ms.store(now, Ordering::Relaxed);
                return e.clone();
            }
        }
        if endpoint != endpoint::OTHER {
            *eps.per_service.entry(service.to_string()).or_default() += 1;
        }
        let state = self.new_endpoint(service, endpoint, method, now);
        eps.map.insert((service.to_string(), endpoint.to_string(), method.to_string()), state.clone());
        state
    }

    fn new_endpoint(&self, service: &str, endpoint: &str, method: &str, now: u64) -> Arc<EndpointState> {
        let labels = EndpointLabels { service: service.into(), endpoint: endpoint.into(), method: method.into() };
        let transitions = self.metrics.breaker_transitions.clone();
        let events = self.events.clone();
        let hook_labels = labels.clone();
        // Runs under the breaker's lock: it only counts and enqueues, never calls host code.
        let breaker = CircuitBreaker::new(Box::new(move |from: BreakerState, to: BreakerState| {
            transitions
                .get_or_create(&TransitionLabels {
                    service: hook_labels.service.clone(),
                    endpoint: hook_labels.endpoint.clone(),
                    method: hook_labels.method.clone(),
                    from: from.as_str().into(),
                    to: to.as_str().into(),
                })
                .inc();
            if events.is_active() {
                events.emit(Event::BreakerStateChanged {
                    service: hook_labels.service.0.clone(),
                    endpoint: hook_labels.endpoint.0.clone(),
                    method: hook_labels.method.0.clone(),
                    from: from.as_str(),
                    to: to.as_str(),
                });
            }
        }));
        Arc::new(EndpointState {
            breaker,
            latencies: Default::default(),
            latency: self.metrics.latency.get_or_create(&labels).clone(),
            retries: self.metrics.retries.get_or_create(&labels).clone(),
            first_success: self
                .metrics
                .attempts
                .get_or_create(&AttemptLabels { service: labels.service.clone(), endpoint: labels.endpoint.clone(), attempt: "1".into(), outcome: "success".into() })
                .clone(),
            first_latency: self
                .metrics
                .attempt_latency
                .get_or_create(&AttemptLatencyLabels { service: labels.service.clone(), endpoint: labels.endpoint.clone(), attempt: "1".into() })
                .clone(),
            requests_by_status: RwLock::new(Vec::new()),
            names: (service.into(), endpoint.into(), method.into()),
            labels,
            last_used_ms: AtomicU64::new(now),
        })
    }

    /// Drops endpoint state idle for `ENDPOINT_IDLE_EVICTION` whose breaker is closed
    /// and that no request holds, with its metric series.
    fn sweep(&self, eps: &mut Endpoints, now: u64) {
        eps.last_sweep_ms = now;
        let idle_ms = ENDPOINT_IDLE_EVICTION.as_millis() as u64;
        let mut evicted = Vec::new();
        eps.map.retain(|(service, endpoint, _), e| {
            let idle = now.saturating_sub(e.last_used_ms.load(Ordering::Relaxed)) >= idle_ms;
            let keep = !idle || Arc::strong_count(e) > 1 || e.breaker.state() != BreakerState::Closed;
            if !keep {
                evicted.push(e.clone());
                if endpoint != endpoint::OTHER {
                    if let Some(n) = eps.per_service.get_mut(service) {
                        *n = n.saturating_sub(1);
                    }
                }
            }
            keep
        });
        for e in evicted {
            let statuses: Vec<String> = e
                .requests_by_status
                .read()
                .iter()
                .map(|(s, _)| s.map(|s| s.to_string()).unwrap_or_else(|| "error".into()))
                .collect();
            self.metrics.remove_endpoint(&e.labels, &statuses);
        }
    }

    /// Sweeps idle endpoints if the last sweep is older than a minute.
    pub fn maybe_sweep(&self) {
        let now = self.now_ms();
        if now.saturating_sub(self.endpoints.read().last_sweep_ms) >= SWEEP_EVERY.as_millis() as u64 {
            self.sweep(&mut self.endpoints.write(), now);
        }
    }

    /// Sets the breaker-state gauges from every endpoint's breaker (at a metrics read).
    pub fn refresh_breaker_gauges(&self) {
        for e in self.endpoints.read().map.values() {
            let view = e.breaker.view();
            let v = match view.state {
                BreakerState::Closed => 0,
                BreakerState::HalfOpen => 1,
                BreakerState::Open => 2,
            };
            self.metrics.breaker_state.get_or_create(&e.labels).set(v);
            self.metrics.breaker_admit_ratio.get_or_create(&e.labels).set(view.admit_ratio);
            if view.calls > 0 || self.metrics.breaker_failure_rate.get(&e.labels).is_some() {
                self.metrics.breaker_failure_rate.get_or_create(&e.labels).set(view.failure_rate);
                self.metrics.breaker_slow_call_rate.get_or_create(&e.labels).set(view.slow_call_rate);
            }
        }
    }

    /// Closes every breaker of `service`: what they learned was about a host it no longer calls.
    pub fn close_breakers_of(&self, service: &str) {
        for e in self.endpoints.read().map.values().filter(|e| &*e.names.0 == service) {
            e.breaker.close_by_hand();
        }
    }

    /// How many endpoint states are held (all services, `{other}` included).
    pub fn endpoint_count(&self) -> usize {
        self.endpoints.read().map.len()
    }

    /// The breaker state for a key, `{other}` when the service is at its limit, else closed.
    pub fn breaker_state(&self, service: &str, endpoint: &str, method: &str, max_endpoints: usize) -> &'static str {
        self.breaker_state_enum(service, endpoint, method, max_endpoints).as_str()
    }

    /// Every endpoint's breaker: (service, endpoint, method, state and window rates), sorted.
    pub fn breakers(&self) -> Vec<(String, String, String, crate::breaker::BreakerView)> {
        let mut out: Vec<_> = self.endpoints.read().map.values().map(|e| (e.names.0.to_string(), e.names.1.to_string(), e.names.2.to_string(), e.breaker.view())).collect();
        out.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
        out
    }

    pub fn breaker_state_enum(&self, service: &str, endpoint: &str, method: &str, max_endpoints: usize) -> BreakerState {
        self.breaker_view(service, endpoint, method, max_endpoints).state
    }

    /// The breaker of a key with its phase and window rates (a key with no traffic: closed, empty).
    pub fn breaker_view(&self, service: &str, endpoint: &str, method: &str, max_endpoints: usize) -> crate::breaker::BreakerView {
        let eps = self.endpoints.read();
        let at_limit = eps.per_service.get(service).copied().unwrap_or(0) >= max_endpoints;
        let found = eps
            .map
            .get(&KeyRef(service, endpoint, method))
            .or_else(|| at_limit.then(|| eps.map.get(&KeyRef(service, endpoint::OTHER, method))).flatten());
        match found {
            Some(e) => e.breaker.view(),
            None => crate::breaker::BreakerView::closed(),
        }
    }
}

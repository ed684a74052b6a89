//! The client: config held behind one atomic swap, per-service state (HTTP pool,
//! bulkhead, retry budget), per-endpoint breakers, metrics and listeners.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use http::{HeaderMap, HeaderName, HeaderValue};
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::breaker::{BreakerState, CircuitBreaker};
use crate::bulkhead::Bulkhead;
use crate::config::Config;
use crate::error::{ErrorKind, HarnessError};
use crate::observability::log::RequestListener;
use crate::observability::metrics::{EndpointLabels, Metrics, RequestLabels, ServiceLabels, TransitionLabels};
use crate::redact::{redact_url, Secrets};
use crate::request::{Request, Response};
use crate::retry::RetryBudget;
use crate::runtime::{self, BlockingCall, Task};
use crate::{endpoint, pipeline, transport};

pub(crate) struct ServiceState {
    pub http: reqwest::Client,
    pub bulkhead: Bulkhead,
    pub budget: RetryBudget,
    /// Parsed once; each request only sets path and query (no host re-parse).
    pub base_url: url::Url,
    /// The base URL's own path prefix, without a trailing slash.
    pub base_path: String,
    pub static_headers: HeaderMap,
    /// Credentials from config (sensitive header values, the base URL's password).
    pub secrets: Secrets,
}

impl ServiceState {
    /// Every secret known for this request: config's and the caller's sensitive headers and query values.
    pub fn secrets_for(&self, req: &Request) -> Secrets {
        let mut s = self.secrets.clone();
        for (k, v) in req.headers.iter().chain(req.query.iter()) {
            s.add_if_sensitive(k, v);
        }
        s
    }
}

/// Endpoint state idle this long, with a closed breaker, is dropped.
pub const ENDPOINT_IDLE_EVICTION: Duration = Duration::from_secs(600);
/// How often the registry looks for idle endpoints (on the next new endpoint or metrics read).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

pub(crate) struct EndpointState {
    pub breaker: Arc<CircuitBreaker>,
    pub latency: Histogram,
    pub retries: Counter,
    /// `harness_requests_total` handles by final status, so the hot path skips the family lookup.
    requests_by_status: RwLock<Vec<(Option<u16>, Counter)>>,
    labels: EndpointLabels,
    /// Shared names for log records (a clone is a reference count, not an allocation).
    pub names: (Arc<str>, Arc<str>, Arc<str>),
    /// Milliseconds since the registry's epoch at the last request.
    last_used_ms: AtomicU64,
}

impl EndpointState {
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

/// Per-endpoint state, bounded per service and swept of idle entries.
struct Endpoints {
    map: hashbrown::HashMap<(String, String, String), Arc<EndpointState>>,
    /// Labels per service, not counting the shared `{other}`.
    per_service: HashMap<String, usize>,
    last_sweep_ms: u64,
}

pub(crate) struct ClientInner {
    pub config: ArcSwap<Config>,
    pub services: HashMap<String, ServiceState>,
    endpoints: RwLock<Endpoints>,
    epoch: tokio::time::Instant,
    /// The process that built this client; its pools and tasks do not survive a fork.
    pid: u32,
    pub metrics: Arc<Metrics>,
    pub listeners: RwLock<Vec<Arc<dyn RequestListener>>>,
    pub client_name: Arc<str>,
    rng: Mutex<SmallRng>,
    closed: AtomicBool,
}

impl ClientInner {
    pub fn jitter(&self) -> f64 {
        self.rng.lock().random::<f64>()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The state for (service, endpoint, method); past `max_endpoints` labels on the
    /// service (after dropping idle ones), the shared `{other}` state.
    pub fn endpoint_state(&self, service: &str, endpoint: &str, method: &str, max_endpoints: u32) -> Arc<EndpointState> {
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
        let hook_labels = labels.clone();
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
        }));
        Arc::new(EndpointState {
            breaker,
            latency: self.metrics.latency.get_or_create(&labels).clone(),
            retries: self.metrics.retries.get_or_create(&labels).clone(),
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
    fn maybe_sweep(&self) {
        let now = self.now_ms();
        if now.saturating_sub(self.endpoints.read().last_sweep_ms) >= SWEEP_EVERY.as_millis() as u64 {
            self.sweep(&mut self.endpoints.write(), now);
        }
    }

    /// How many endpoint states are held (all services, `{other}` included).
    pub fn endpoint_count(&self) -> usize {
        self.endpoints.read().map.len()
    }
}

/// Options that tests and hosts may set; the config file covers everything else.
#[derive(Default)]
pub struct ClientOptions {
    /// Seeds the backoff jitter, for reproducible runs.
    pub jitter_seed: Option<u64>,
    pub listeners: Vec<Arc<dyn RequestListener>>,
}

/// A Harness client. Cheap to clone; every clone shares state.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cfg = self.inner.config.load();
        f.debug_struct("Client")
            .field("name", &cfg.client.name)
            .field("services", &cfg.services.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Client {
    pub fn new(config: Config) -> Result<Client, HarnessError> {
        Self::with_options(config, ClientOptions::default())
    }

    /// From the in-memory map a binding passes (a dict, an object, a Map).
    pub fn from_value(value: serde_json::Value) -> Result<Client, HarnessError> {
        Self::new(Config::from_value(value)?)
    }

    /// From a `.yaml`, `.json` or `.toml` file.
    pub fn from_path(path: impl AsRef<std::path::Path>) -> Result<Client, HarnessError> {
        Self::new(Config::from_path(path)?)
    }

    pub fn with_options(config: Config, options: ClientOptions) -> Result<Client, HarnessError> {
        config.validate()?;
        // The runtime must exist (and not be a fork's) before any pool is built.
        runtime::handle()?;
        let metrics = Arc::new(Metrics::new());
        let mut services = HashMap::new();
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
            let gauge = metrics.bulkhead_in_use.get_or_create(&ServiceLabels { service: name.as_str().into() }).clone();
            services.insert(
                name.clone(),
                ServiceState {
                    http: transport::build_client(svc, &config.client.name)?,
                    bulkhead: Bulkhead::new(svc.bulkhead.max_concurrency, gauge),
                    budget: RetryBudget::new(svc.retry.budget_ratio, svc.retry.budget_min_per_sec),
                    base_path: base_url.path().trim_end_matches('/').to_string(),
                    base_url,
                    static_headers,
                    secrets,
                },
            );
        }
        let rng = match options.jitter_seed {
            Some(seed) => SmallRng::seed_from_u64(seed),
            None => SmallRng::from_os_rng(),
        };
        let client_name: Arc<str> = config.client.name.as_str().into();
        Ok(Client {
            inner: Arc::new(ClientInner {
                config: ArcSwap::from_pointee(config),
                services,
                endpoints: RwLock::new(Endpoints { map: hashbrown::HashMap::new(), per_service: HashMap::new(), last_sweep_ms: 0 }),
                epoch: tokio::time::Instant::now(),
                pid: std::process::id(),
                metrics,
                listeners: RwLock::new(options.listeners),
                client_name,
                rng: Mutex::new(rng),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// Runs one request through the pipeline on the caller's tokio runtime.
    pub async fn request(&self, req: Request) -> Result<Response, HarnessError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(HarnessError::new(ErrorKind::Harness, "the client is closed"));
        }
        self.check_process()?;
        pipeline::execute(&self.inner, req).await
    }

    /// A client built before a `fork()` holds the parent's connections and runtime:
    /// in the child it refuses with a clear error (build a new client there).
    fn check_process(&self) -> Result<(), HarnessError> {
        let pid = std::process::id();
        if self.inner.pid == pid {
            return Ok(());
        }
        Err(HarnessError::new(
            ErrorKind::Harness,
            format!(
                "this Harness client was created in process {} and cannot be used in forked child {pid}: create a new client in the child",
                self.inner.pid
            ),
        ))
    }

    /// Spawns the request on the core's runtime; await the task from any executor,
    /// or drop it to cancel the request and free its permits.
    pub fn spawn(&self, req: Request) -> Result<Task<Result<Response, HarnessError>>, HarnessError> {
        self.check_process()?;
        let client = self.clone();
        runtime::spawn(async move { client.request(req).await })
    }

    /// Prepares the request to be driven on the calling thread by a blocking host API
    /// (`BlockingCall::wait_timeout`); dropping the call cancels the request.
    pub fn start_blocking(&self, req: Request) -> Result<BlockingCall<Result<Response, HarnessError>>, HarnessError> {
        self.check_process()?;
        let client = self.clone();
        BlockingCall::new(async move { client.request(req).await })
    }

    /// The Prometheus text exposition of this client's metrics.
    pub fn metrics_text(&self) -> String {
        self.inner.maybe_sweep();
        self.inner.metrics.encode()
    }

    /// The breaker state for (service, endpoint, method); `endpoint` defaults to the
    /// template of `path`. `closed` for a key that has seen no traffic.
    pub fn breaker_state(&self, service: &str, method: &str, path: &str, endpoint: Option<&str>) -> &'static str {
        let ep = endpoint.map(str::to_string).unwrap_or_else(|| endpoint::template(path));
        let method = method.to_ascii_uppercase();
        let max = self.inner.config.load().services.get(service).map(|s| s.limits.max_endpoints as usize).unwrap_or(usize::MAX);
        let eps = self.inner.endpoints.read();
        let at_limit = eps.per_service.get(service).copied().unwrap_or(0) >= max;
        let found = eps
            .map
            .get(&KeyRef(service, &ep, &method))
            .or_else(|| at_limit.then(|| eps.map.get(&KeyRef(service, endpoint::OTHER, &method))).flatten());
        match found {
            Some(e) => e.breaker.state().as_str(),
            None => BreakerState::Closed.as_str(),
        }
    }

    /// Bulkhead permits currently held on a service.
    pub fn bulkhead_in_use(&self, service: &str) -> Result<usize, HarnessError> {
        self.inner
            .services
            .get(service)
            .map(|s| s.bulkhead.in_use())
            .ok_or_else(|| HarnessError::config(format!("service: unknown service `{service}`")))
    }

    /// How many endpoint states this client holds (bounded by `limits.max_endpoints` per service).
    pub fn endpoint_count(&self) -> usize {
        self.inner.endpoint_count()
    }

    pub fn add_listener(&self, listener: Arc<dyn RequestListener>) {
        self.inner.listeners.write().push(listener);
    }

    pub fn config(&self) -> Arc<Config> {
        self.inner.config.load_full()
    }

    /// Refuses new requests; requests in flight finish (or are cancelled by their callers).
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        crate::observability::log::flush();
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }
}

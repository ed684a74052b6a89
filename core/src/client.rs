//! The client: config held behind one atomic swap, per-service state (HTTP pool,
//! bulkhead, retry budget), per-endpoint breakers, metrics and listeners.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
}

pub(crate) struct EndpointState {
    pub breaker: Arc<CircuitBreaker>,
    pub latency: Histogram,
    pub retries: Counter,
    /// `harness_requests_total` handles by final status, so the hot path skips the family lookup.
    requests_by_status: RwLock<Vec<(Option<u16>, Counter)>>,
    labels: EndpointLabels,
    /// Shared names for log records (a clone is a reference count, not an allocation).
    pub names: (Arc<str>, Arc<str>, Arc<str>),
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
                status: status.map(|s| s.to_string()).unwrap_or_else(|| "error".into()),
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

pub(crate) struct ClientInner {
    pub config: ArcSwap<Config>,
    pub services: HashMap<String, ServiceState>,
    endpoints: RwLock<hashbrown::HashMap<(String, String, String), Arc<EndpointState>>>,
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

    pub fn endpoint_state(&self, service: &str, endpoint: &str, method: &str) -> Arc<EndpointState> {
        if let Some(e) = self.endpoints.read().get(&KeyRef(service, endpoint, method)) {
            return e.clone();
        }
        let key = (service.to_string(), endpoint.to_string(), method.to_string());
        let mut map = self.endpoints.write();
        map.entry(key)
            .or_insert_with(|| {
                let labels = EndpointLabels { service: service.into(), endpoint: endpoint.into(), method: method.into() };
                let transitions = self.metrics.breaker_transitions.clone();
                let (s, e, m) = (service.to_string(), endpoint.to_string(), method.to_string());
                let breaker = CircuitBreaker::new(Box::new(move |from: BreakerState, to: BreakerState| {
                    transitions
                        .get_or_create(&TransitionLabels {
                            service: s.clone(),
                            endpoint: e.clone(),
                            method: m.clone(),
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
                })
            })
            .clone()
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
            for (k, v) in &svc.headers.0 {
                let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) else {
                    return Err(HarnessError::config(format!("services.{name}.headers.{k}: not a valid HTTP header")));
                };
                let mut v = v;
                v.set_sensitive(true);
                static_headers.insert(k, v);
            }
            let gauge = metrics.bulkhead_in_use.get_or_create(&ServiceLabels { service: name.clone() }).clone();
            services.insert(
                name.clone(),
                ServiceState {
                    http: transport::build_client(svc, &config.client.name)?,
                    bulkhead: Bulkhead::new(svc.bulkhead.max_concurrency, gauge),
                    budget: RetryBudget::new(svc.retry.budget_ratio, svc.retry.budget_min_per_sec),
                    base_url: url::Url::parse(&svc.base_url)
                        .map_err(|e| HarnessError::config(format!("services.{name}.base_url: {e}")))?,
                    base_path: url::Url::parse(&svc.base_url)
                        .map(|u| u.path().trim_end_matches('/').to_string())
                        .unwrap_or_default(),
                    static_headers,
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
                endpoints: RwLock::new(hashbrown::HashMap::new()),
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
        pipeline::execute(&self.inner, req).await
    }

    /// Spawns the request on the core's runtime; await the task from any executor,
    /// or drop it to cancel the request and free its permits.
    pub fn spawn(&self, req: Request) -> Result<Task<Result<Response, HarnessError>>, HarnessError> {
        let client = self.clone();
        runtime::spawn(async move { client.request(req).await })
    }

    /// Prepares the request to be driven on the calling thread by a blocking host API
    /// (`BlockingCall::wait_timeout`); dropping the call cancels the request.
    pub fn start_blocking(&self, req: Request) -> Result<BlockingCall<Result<Response, HarnessError>>, HarnessError> {
        let client = self.clone();
        BlockingCall::new(async move { client.request(req).await })
    }

    /// The Prometheus text exposition of this client's metrics.
    pub fn metrics_text(&self) -> String {
        self.inner.metrics.encode()
    }

    /// The breaker state for (service, endpoint, method); `endpoint` defaults to the
    /// template of `path`. `closed` for a key that has seen no traffic.
    pub fn breaker_state(&self, service: &str, method: &str, path: &str, endpoint: Option<&str>) -> &'static str {
        let ep = endpoint.map(str::to_string).unwrap_or_else(|| endpoint::template(path));
        let method = method.to_ascii_uppercase();
        match self.inner.endpoints.read().get(&KeyRef(service, &ep, &method)) {
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

//! The engine: the live config snapshot behind one atomic swap, the state that
//! outlives snapshots, and the client's own telemetry (metrics, events, log writer).
//!
//! Guarantees: a request loads the snapshot once and finishes under it; a reload
//! validates and compiles the whole new config before swapping it in (on error
//! the old one stays and the error names the field); breakers, endpoint state,
//! retry budgets and bulkheads carry over by key; a shrunk bulkhead lets its
//! in-flight permits finish and admits new requests only below the new limit;
//! reloads are serialised, requests never wait on one.

pub mod registry;
pub mod route;
pub mod service;
pub mod snapshot;
pub mod watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::config::{Config, Validated};
use crate::credentials::Providers;
use crate::transport::mock::HostMocks;
use crate::error::{ErrorKind, HarnessError};
use crate::host::{Event, EventSink};
use crate::observability::events::EventHub;
use crate::observability::log::{LogWriter, RequestRecord};
use crate::observability::metrics::{Metrics, ReloadLabels};
use crate::redact::escape_control;
use crate::state::memory::MemoryState;
use crate::state::RetryBudgetStore;
use crate::transport::Transport;

use registry::Registry;
pub(crate) use snapshot::{ServiceRuntime, Snapshot};

/// What a host binding plugs in when it builds a client.
#[derive(Default, Clone)]
pub struct EngineOptions {
    /// Seeds the backoff jitter, for reproducible runs.
    pub jitter_seed: Option<u64>,
    /// Listeners from the start (more can be added later).
    pub sinks: Vec<Arc<dyn EventSink>>,
    /// The host's own logging and its `log.sink` name (`python`, `slf4j`).
    pub host_log: Option<(&'static str, Arc<dyn EventSink>)>,
    /// Replaces every service's transport (core tests; mock mode).
    pub transport: Option<Arc<dyn Transport>>,
    /// The retry-budget backend (default: in memory).
    pub budgets: Option<Arc<dyn RetryBudgetStore>>,
}

pub(crate) struct Engine {
    snapshot: ArcSwap<Snapshot>,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub events: Arc<EventHub>,
    pub log: LogWriter,
    pub audit: crate::observability::audit::AuditLog,
    /// The `metrics.listen` endpoint: its address and task.
    scrape: Mutex<Option<(String, tokio::task::JoinHandle<()>)>>,
    /// The OTLP exporter for the active `otel:` (read per request; swapped on reload).
    pub otel: arc_swap::ArcSwapOption<crate::observability::otel::Otel>,
    /// This engine, weakly (for tasks that must not keep it alive); set by the client.
    me: std::sync::OnceLock<std::sync::Weak<Engine>>,
    /// Host token providers (`type: callback`), by service.
    pub providers: Providers,
    /// Mock rules set by host code (`client.mock`), kept across reloads.
    pub mocks: Arc<HostMocks>,
    /// Mock mode and fault injection are each announced once per client.
    announced: Mutex<(bool, Option<u64>)>,
    fixed_transport: Option<Arc<dyn Transport>>,
    host_log_name: Option<&'static str>,
    rng: Mutex<SmallRng>,
    closed: AtomicBool,
    /// The process that built this engine; its pools and tasks do not survive a fork.
    pub pid: u32,
    reloading: Mutex<()>,
    pub(crate) watcher: Mutex<Option<watch::Watcher>>,
    /// Every cache of this client (kept across reloads, resized by them).
    pub caches: crate::cache::Caches,
    /// With `config_source`: what the fleet's config source did here.
    pub config_source: std::sync::OnceLock<Arc<Mutex<crate::fleet::source::SourceState>>>,
}

/// `cache.shared`: the caches shared through the fleet's Redis (an outage is one
/// `shared_state_unavailable` event naming the service or route that met it).
fn share_caches(caches: &crate::cache::Caches, config: &crate::cache::CacheConfig, registry: &Registry, events: &Arc<EventHub>) -> Result<(), HarnessError> {
    let events = events.clone();
    let on_outage = Arc::new(move |name: &str, why: String| {
        events.emit(Event::SharedStateUnavailable { service: name.to_string(), what: "cache", error: why });
    });
    caches.share(config, |url| registry.redis(url, "cache.shared.redis_url"), on_outage)
}

impl Engine {
    pub fn new(config: Validated, options: EngineOptions) -> Result<Engine, HarnessError> {
        let metrics = Arc::new(Metrics::new());
        let events = Arc::new(EventHub::new(metrics.events_dropped.clone()));
        for s in options.sinks {
            events.add(s);
        }
        let host_log_name = options.host_log.as_ref().map(|(n, _)| *n);
        if let Some((_, sink)) = options.host_log {
            events.set_log_sink(sink);
        }
        check_log_sink(config.config(), host_log_name)?;
        let budgets: Arc<dyn RetryBudgetStore> = options.budgets.unwrap_or_else(|| Arc::new(MemoryState::new()));
        let registry = Registry::new(metrics.clone(), events.clone(), budgets);
        let providers = Providers::default();
        let mocks = Arc::new(HostMocks::default());
        let caches = crate::cache::Caches::new(&config.config().cache);
        share_caches(&caches, &config.config().cache, &registry, &events)?;
        let snapshot = Snapshot::build(config, None, false, &registry, options.transport.as_ref(), &providers, &mocks)?;
        let rng = match options.jitter_seed {
            Some(seed) => SmallRng::seed_from_u64(seed),
            None => SmallRng::from_os_rng(),
        };
        let audit_dropped = metrics.audit_dropped.clone();
        let engine = Engine {
            snapshot: ArcSwap::from_pointee(snapshot),
            registry,
            metrics,
            events,
            log: LogWriter::default(),
            audit: crate::observability::audit::AuditLog::new(audit_dropped),
            scrape: Mutex::new(None),
            otel: arc_swap::ArcSwapOption::empty(),
            me: std::sync::OnceLock::new(),
            providers,
            mocks,
            announced: Mutex::new((false, None)),
            fixed_transport: options.transport,
            host_log_name,
            rng: Mutex::new(rng),
            closed: AtomicBool::new(false),
            pid: std::process::id(),
            reloading: Mutex::new(()),
            watcher: Mutex::new(None),
            caches,
            config_source: std::sync::OnceLock::new(),
        };
        engine.announce();
        Ok(engine)
    }

    /// The active snapshot; a request takes it once and keeps it to the end.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    pub fn jitter(&self) -> f64 {
        self.rng.lock().random::<f64>()
    }

    /// Swaps in `config` if it is valid; else the old config stays and the error names the field.
    pub fn reload(&self, config: Result<Validated, HarnessError>, source: &str) -> Result<String, HarnessError> {
        let _one_at_a_time = self.reloading.lock();
        let built = config.and_then(|config| {
            check_log_sink(config.config(), self.host_log_name)?;
            let previous = self.snapshot.load();
            // A version from the fleet's config source makes every credential read its source
            // again: a rotated key must not stay cached on some instances.
            let renew = source.starts_with("config_source:");
            Snapshot::build(config, Some(&previous), renew, &self.registry, self.fixed_transport.as_ref(), &self.providers, &self.mocks)
        });
        match built {
            Ok(snapshot) => {
                let version = snapshot.version.clone();
                let previous = self.snapshot.load();
                for (name, svc) in &snapshot.services {
                    svc.shared.bulkhead.configure(&svc.config.bulkhead);
                    // A service moved to another base URL (a rollback off a dead host) starts
                    // with closed breakers; a reload that keeps the URL keeps what they learned.
                    if previous.services.get(name).is_some_and(|p| p.config.base_url != svc.config.base_url) {
                        self.registry.close_breakers_of(name);
                    }
                }
                // A reload gives every provider cooling after a 429 a fresh start. A provider
                // whose service now calls another base URL (or that now names another service)
                // also forgets its health and closes its own breakers (`route:<r>/<p>`): what
                // they learned was about a host it no longer calls.
                let base_url = |s: &Snapshot, service: &str| s.services.get(service).map(|svc| svc.config.base_url.clone());
                for (route, rt) in &snapshot.routes {
                    for p in &rt.providers {
                        p.health.end_cooling();
                        let before = previous.routes.get(route).and_then(|r| r.providers.iter().find(|q| q.id == p.id));
                        let moved = before.is_some_and(|q| {
                            q.config.service != p.config.service || base_url(&previous, &q.config.service) != base_url(&snapshot, &p.config.service)
                        });
                        if moved {
                            p.health.forget();
                            self.registry.close_breakers_of(&p.scope);
                        }
                    }
                }
                self.caches.configure(&snapshot.config.cache);
                if let Err(e) = share_caches(&self.caches, &snapshot.config.cache, &self.registry, &self.events) {
                    eprintln!("{{\"event\":\"harness.cache_shared_failed\",\"error\":{:?}}}", e.message);
                }
                self.snapshot.store(Arc::new(snapshot));
                self.metrics.config_reloads.get_or_create(&ReloadLabels { result: "applied".into() }).inc();
                self.events.emit(Event::ConfigReloaded { version: version.clone(), source: source.to_string() });
                // A reload from a watched file moves the endpoint too (API reloads report a bind error).
                if let Err(e) = self.sync_scrape_inner() {
                    eprintln!("{{\"event\":\"harness.metrics_listen_failed\",\"error\":{:?}}}", e.message);
                }
                self.announce();
                if let Err(e) = self.sync_otel() {
                    eprintln!("{{\"event\":\"harness.otel_failed\",\"error\":{:?}}}", e.message);
                }
                Ok(version)
            }
            Err(e) => {
                self.metrics.config_reloads.get_or_create(&ReloadLabels { result: "rejected".into() }).inc();
                self.events.emit(Event::ConfigRejected {
                    version: self.snapshot.load().version.clone(),
                    source: source.to_string(),
                    error: e.to_string(),
                });
                Err(e)
            }
        }
    }

    /// Where a finished request's record goes: stderr or the host's logging (if enabled),
    /// and every listener.
    pub fn record(&self, snapshot: &Snapshot, record: RequestRecord) {
        let log = &snapshot.config.log;
        let listening = self.events.is_active();
        if log.enabled {
            if log.sink == "stderr" {
                if listening {
                    self.log.write(record.clone());
                } else {
                    self.log.write(record);
                    return;
                }
            } else {
                self.events.log(record.clone());
            }
        }
        if listening {
            self.events.emit(Event::RequestFinished(record));
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Starts, moves or stops the `metrics.listen` endpoint to match the active config.
    pub fn sync_scrape(self: &Arc<Self>) -> Result<(), HarnessError> {
        let _ = self.me.set(Arc::downgrade(self));
        self.sync_scrape_inner()
    }

    fn sync_scrape_inner(&self) -> Result<(), HarnessError> {
        let Some(me) = self.me.get().cloned() else { return Ok(()) };
        let want = self.snapshot().config.metrics.listen.clone();
        let mut slot = self.scrape.lock();
        if slot.as_ref().map(|(a, _)| a) == want.as_ref() {
            return Ok(());
        }
        if let Some((_, task)) = slot.take() {
            task.abort();
        }
        if let Some(addr) = want {
            let text = crate::observability::scrape::weak_text(me, Engine::metrics_text);
            let task = crate::observability::scrape::start(&addr, text)?;
            *slot = Some((addr, task));
        }
        Ok(())
    }

    /// Says once on stderr that mocks answer (and for which services), and whenever faults
    /// are switched on or reseeded, with the seed that replays them.
    fn announce(&self) {
        let snapshot = self.snapshot();
        let mut said = self.announced.lock();
        if !snapshot.mocked.is_empty() && !said.0 {
            said.0 = true;
            tracing::warn!(target: "harness", services = ?snapshot.mocked, "mock mode: these services are answered by mock rules, not the network");
            eprintln!("{}", serde_json::json!({"event": "harness.mock_mode", "client": &*snapshot.client_name, "services": snapshot.mocked}));
        }
        if snapshot.fault_seed.is_some() && said.1 != snapshot.fault_seed {
            said.1 = snapshot.fault_seed;
            let rules = snapshot.config.faults.rules.len();
            tracing::warn!(target: "harness", seed = snapshot.fault_seed, rules, "fault injection is on");
            eprintln!("{}", serde_json::json!({"event": "harness.faults_on", "client": &*snapshot.client_name, "seed": snapshot.fault_seed, "rules": rules}));
        }
    }

    /// Rebuilds the active snapshot from its own config (host mocks changed which services
    /// the mock answers); no reload event, since the config did not change.
    pub fn rebuild(&self) -> Result<(), HarnessError> {
        let _one_at_a_time = self.reloading.lock();
        let previous = self.snapshot.load_full();
        let config = Validated::trusted((*previous.config).clone());
        let snapshot = Snapshot::build(config, Some(&previous), false, &self.registry, self.fixed_transport.as_ref(), &self.providers, &self.mocks)?;
        self.snapshot.store(Arc::new(snapshot));
        drop(_one_at_a_time);
        self.announce();
        Ok(())
    }

    /// Starts, replaces or stops the OTLP exporter to match the active config; a replaced
    /// exporter sends what it holds first.
    pub fn sync_otel(&self) -> Result<(), HarnessError> {
        let snapshot = self.snapshot();
        let cfg = &snapshot.config.otel;
        let current = self.otel.load_full();
        let same = match (&current, &cfg.endpoint) {
            (Some(o), Some(_)) => o.key.0 == *cfg && o.key.1 == snapshot.config.client.name,
            (None, None) => true,
            _ => false,
        };
        if same {
            return Ok(());
        }
        let next = match cfg.endpoint {
            Some(_) => Some(Arc::new(crate::observability::otel::Otel::start(cfg, &snapshot.config.client.name)?)),
            None => None,
        };
        if let Some(old) = self.otel.swap(next) {
            old.shutdown();
        }
        Ok(())
    }

    /// The Prometheus text, with the gauges that are read from state refreshed first.
    pub fn metrics_text(&self) -> String {
        self.registry.maybe_sweep();
        self.registry.refresh_breaker_gauges();
        for rt in self.snapshot().routes.values() {
            for p in &rt.providers {
                let labels = crate::observability::metrics::ProviderLabels { route: rt.name.as_ref().into(), provider: p.id.as_ref().into() };
                self.metrics.provider_health.get_or_create(&labels).set(p.health.score(rt.window));
            }
        }
        for l in self.registry.limiters() {
            let labels = crate::observability::metrics::ServiceLabels { service: l.service.as_ref().into() };
            self.metrics.rate_limit_paused.get_or_create(&labels).set(l.paused_ms() as i64);
        }
        self.metrics.encode()
    }

    /// Refuses new requests, stops watching, and flushes this client's log and events.
    pub fn close(&self) {
        if let Some((_, task)) = self.scrape.lock().take() {
            task.abort();
        }
        self.closed.store(true, Ordering::Release);
        self.watcher.lock().take();
        if let Some(otel) = self.otel.swap(None) {
            otel.shutdown();
        }
        self.log.flush();
        self.events.flush();
        self.audit.flush();
    }

    /// A client built before a `fork()` holds the parent's connections and runtime:
    /// in the child it refuses with a clear error (build a new client there).
    pub fn check_usable(&self) -> Result<(), HarnessError> {
        if self.is_closed() {
            return Err(HarnessError::new(ErrorKind::Harness, "the client is closed"));
        }
        let pid = std::process::id();
        if self.pid == pid {
            return Ok(());
        }
        Err(HarnessError::new(
            ErrorKind::Harness,
            format!(
                "this Harness client was created in process {} and cannot be used in forked child {pid}: create a new client in the child",
                self.pid
            ),
        ))
    }
}

/// `log.sink` names the host's logging only where that host provides it.
fn check_log_sink(config: &Config, host: Option<&'static str>) -> Result<(), HarnessError> {
    let sink = config.log.sink.as_str();
    if sink == "stderr" || Some(sink) == host {
        return Ok(());
    }
    let only = match sink {
        "python" => "the Python binding",
        "slf4j" => "the JVM binding",
        _ => "no binding",
    };
    Err(HarnessError::config(format!("log.sink: `{}` is only available from {only}", escape_control(sink))))
}

//! The client: a facade over one engine. Requests, streams, reload, watching,
//! listeners and admin reads (breaker state, bulkhead use, metrics).

use std::path::Path;
use std::sync::Arc;

use crate::config::{Config, Validated};
use crate::endpoint;
use crate::engine::{watch, Engine, EngineOptions};
use crate::error::HarnessError;
use crate::host::EventSink;
use crate::pipeline;
use crate::request::Request;
use crate::target;
use crate::adapters::{ChatRequest, ChatResponse, EmbedRequest, EmbedResponse};
use crate::pipeline::chat::ChatStream;
use crate::pipeline::stream::StreamResponse;
use crate::response::Response;
use crate::routing::{ProviderState, RouteState};
use crate::runtime;

/// Options a host may set when building a client; the config file covers everything else.
pub type ClientOptions = EngineOptions;

/// A Harness client. Cheap to clone; every clone shares state.
#[derive(Clone)]
pub struct Client {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snapshot = self.engine.snapshot();
        f.debug_struct("Client")
            .field("name", &snapshot.config.client.name)
            .field("services", &snapshot.config.services.keys().collect::<Vec<_>>())
            .field("config_version", &snapshot.version)
            .finish()
    }
}

pub use crate::breaker::BreakerInfo;

impl Client {
    pub fn new(config: Config) -> Result<Client, HarnessError> {
        Self::with_options(config, ClientOptions::default())
    }

    /// From the in-memory map a binding passes (a dict, an object, a Map).
    pub fn from_value(value: serde_json::Value) -> Result<Client, HarnessError> {
        Self::from_validated(Config::load_value(value)?, ClientOptions::default())
    }

    /// From a `.yaml`, `.json` or `.toml` file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Client, HarnessError> {
        Self::from_validated(Config::load_path(path)?, ClientOptions::default())
    }

    /// From a file; with `watch`, the client reloads within a second of the file changing
    /// (an invalid edit is rejected, with an event and a log line, and the old config stays).
    pub fn from_file(path: impl AsRef<Path>, watch: bool, options: ClientOptions) -> Result<Client, HarnessError> {
        let client = Self::from_validated(Config::load_path(path.as_ref())?, options)?;
        if watch {
            client.watch(path)?;
        }
        Ok(client)
    }

    /// A config built or changed in code is validated here, once.
    pub fn with_options(config: Config, options: ClientOptions) -> Result<Client, HarnessError> {
        Self::from_validated(config.check()?, options)
    }

    /// From a config loaded and validated already (`Config::load_value`, `load_text`, `load_path`).
    pub fn from_validated(config: Validated, options: ClientOptions) -> Result<Client, HarnessError> {
        // The runtime must exist (and not be a fork's) before any pool is built.
        runtime::handle()?;
        let engine = Arc::new(Engine::new(config, options)?);
        engine.sync_scrape()?;
        engine.sync_otel()?;
        if let Some(source) = engine.snapshot().config.config_source.clone() {
            follow_config_source(&engine, source)?;
        }
        Ok(Client { engine })
    }

    /// With `config_source`: the version applied, the one Redis says this instance should
    /// run, the last rejected one and why, and whether Redis answers; `None` without one.
    pub fn config_source_state(&self) -> Option<crate::fleet::source::SourceState> {
        self.engine.config_source.get().map(|s| s.lock().clone())
    }

    /// Runs one request through the pipeline on the caller's tokio runtime.
    pub async fn request(&self, req: Request) -> Result<Response, HarnessError> {
        self.engine.check_usable()?;
        pipeline::execute(&self.engine, req).await
    }


    /// Runs one request up to its response head; pull the body with `next_chunk`.
    pub async fn stream(&self, req: Request) -> Result<StreamResponse, HarnessError> {
        self.engine.check_usable()?;
        pipeline::stream(&self.engine, req).await
    }

    /// One chat answer on an `openai-compatible` route: the provider is chosen, failed
    /// over and priced by the route.
    pub async fn chat(&self, route: &str, chat: ChatRequest) -> Result<ChatResponse, HarnessError> {
        self.engine.check_usable()?;
        pipeline::chat(&self.engine, route, chat).await
    }



    /// Embeds `req.inputs` on a route of `kind: embeddings`: one vector per input, in order,
    /// batched per the providers' limits, each batch routed (failover, breakers, cost).
    pub async fn embed(&self, route: &str, req: EmbedRequest) -> Result<EmbedResponse, HarnessError> {
        self.engine.check_usable()?;
        pipeline::embed(&self.engine, route, req).await
    }

    /// A streamed chat answer: returns once a provider answers; pull normalised chunks.
    pub async fn chat_stream(&self, route: &str, chat: ChatRequest) -> Result<ChatStream, HarnessError> {
        self.engine.check_usable()?;
        pipeline::chat_stream(&self.engine, route, chat).await
    }



    /// Drops every cached answer of one service or route (every cache's, `None`: all of
    /// them), in this process and, with `cache.shared`, in the fleet's store; how many
    /// entries this process dropped. An unknown name is a `ConfigError`.
    pub fn cache_clear(&self, name: Option<&str>) -> Result<usize, HarnessError> {
        self.engine.check_usable()?;
        if let Some(n) = name {
            let snapshot = self.engine.snapshot();
            if !snapshot.services.contains_key(n) && !snapshot.routes.contains_key(n) {
                return Err(HarnessError::config(format!("cache_clear: unknown service or route `{}`", crate::redact::escape_control(n))));
            }
        }
        Ok(self.engine.caches.clear(name))
    }

    /// How much this client's caches hold (entries and bytes), and with `cache.shared`
    /// whether it hears the fleet's announcements now.
    pub fn cache_sizes(&self) -> crate::cache::CacheSizes {
        self.engine.caches.sizes()
    }

    /// Per provider of `route`: configured and effective weight, health, breaker state,
    /// in-flight count, cooling and last error.
    pub fn routing_state(&self, route: &str) -> Result<RouteState, HarnessError> {
        self.engine.check_usable()?;
        let snapshot = self.engine.snapshot();
        let Some(rt) = snapshot.routes.get(route) else {
            return Err(HarnessError::config(format!("route: unknown route `{}`", crate::redact::escape_control(route))));
        };
        let ep = endpoint::template(&rt.config.path);
        let now = tokio::time::Instant::now();
        let providers = rt
            .providers
            .iter()
            .map(|p| {
                let breaker = self.engine.registry.breaker_state_enum(&p.scope, &ep, "POST", p.svc.config.limits.max_endpoints as usize);
                ProviderState {
                    id: p.id.to_string(),
                    service: p.svc.name.to_string(),
                    model: p.config.model.clone(),
                    weight: p.config.weight,
                    effective_weight: (crate::routing::strategy::effective_weight(&p.config, &p.health, breaker, rt.window) * 1000.0).round() / 1000.0,
                    health: (p.health.score(rt.window) * 1000.0).round() / 1000.0,
                    success_rate: (p.health.success_rate(rt.window) * 1000.0).round() / 1000.0,
                    latency_ewma_ms: p.health.latency_ms().map(|l| (l * 1000.0).round() / 1000.0),
                    breaker: breaker.as_str(),
                    in_flight: p.health.in_flight(),
                    cooling_ms: p.health.cooling_until(now).map(|t| t.saturating_duration_since(now).as_millis() as u64),
                    last_error: p.health.last_error(),
                }
            })
            .collect();
        let strategy = rt.config.strategy.as_str();
        Ok(RouteState { route: route.to_string(), strategy, providers })
    }

    /// Sets a provider's weight at runtime, as a reload would (validated, versioned, with
    /// a `config_reloaded` event); returns the new `config_version`.
    pub fn set_weight(&self, route: &str, provider: &str, weight: u32) -> Result<String, HarnessError> {
        self.engine.check_usable()?;
        let mut config = (*self.engine.snapshot().config).clone();
        let Some(r) = config.routes.get_mut(route) else {
            return Err(HarnessError::config(format!("route: unknown route `{}`", crate::redact::escape_control(route))));
        };
        let Some(p) = r.providers.iter_mut().find(|p| p.id == provider) else {
            return Err(HarnessError::config(format!("routes.{route}.providers: unknown provider `{}`", crate::redact::escape_control(provider))));
        };
        p.weight = weight;
        if p.degraded_weight.is_some_and(|d| d > weight) {
            p.degraded_weight = Some(weight);
        }
        self.engine.reload(config.check(), "set_weight")
    }

    /// Registers a host adapter under `name` (a provider's `adapter: <name>` reaches it);
    /// a second registration of the name replaces the first. The active config picks it
    /// up at once (providers naming it stop being refused).
    pub fn register_adapter(&self, name: &str, adapter: Arc<dyn crate::adapters::HostAdapter>) -> Result<(), HarnessError> {
        self.engine.check_usable()?;
        if !crate::adapters::host::valid_name(name) {
            return Err(HarnessError::config(format!(
                "name: a host adapter's name is letters, digits, `-` and `_` (at most 64) and not a built-in's ({}), got {:?}",
                crate::adapters::BUILT_IN.join(", "),
                crate::redact::escape_control(name)
            )));
        }
        self.engine.registry.host_adapters.insert(name, adapter);
        self.engine.rebuild()
    }

    /// Adds a host interceptor (`crate::interceptors`); one of the same name is replaced
    /// in its place. Applies to calls that start from now on.
    pub fn add_interceptor(&self, reg: crate::interceptors::Registration, host: Arc<dyn crate::interceptors::HostInterceptor>) -> Result<(), HarnessError> {
        self.engine.check_usable()?;
        self.engine.registry.interceptors.add(reg, host)
    }

    /// Removes the interceptor of this name; whether there was one.
    pub fn remove_interceptor(&self, name: &str) -> bool {
        self.engine.registry.interceptors.remove(name)
    }

    /// Replaces the config if it is valid; returns the new `config_version`. On error
    /// the old config stays in force and the `ConfigError` names the field.
    pub fn reload(&self, config: Config) -> Result<String, HarnessError> {
        self.engine.reload(config.check(), "api")
    }

    /// `reload` from the in-memory map a binding passes.
    pub fn reload_value(&self, value: serde_json::Value) -> Result<String, HarnessError> {
        self.engine.reload(Config::load_value(value), "api")
    }

    /// `reload` from config text (`yaml`, `json` or `toml`), e.g. what a binding serialised;
    /// a text that does not even parse counts as a rejected reload too.
    pub fn reload_text(&self, text: &str, format: &str) -> Result<String, HarnessError> {
        self.engine.reload(Config::load_text(text, format), "api")
    }

    /// `reload` from a `.yaml`, `.json` or `.toml` file.
    pub fn reload_path(&self, path: impl AsRef<Path>) -> Result<String, HarnessError> {
        let path = path.as_ref();
        self.engine.reload(Config::load_path(path), &format!("file:{}", path.display()))
    }

    /// Reloads whenever `path` changes, until the client is closed.
    pub fn watch(&self, path: impl AsRef<Path>) -> Result<(), HarnessError> {
        let weak = Arc::downgrade(&self.engine);
        let w = watch::watch(path.as_ref(), move |path| {
            let Some(engine) = weak.upgrade() else { return false };
            let source = format!("file:{}", path.display());
            if let Err(e) = engine.reload(Config::load_path(path), &source) {
                let line = serde_json::json!({
                    "event": "harness.config_rejected",
                    "source": source,
                    "error": e.to_string(),
                    "note": "the previous config stays in force",
                });
                eprintln!("{line}");
            }
            true
        })?;
        *self.engine.watcher.lock() = Some(w);
        Ok(())
    }

    /// The token provider for a service with `auth.type: callback` (or SigV4 keys from the host:
    /// `aws_sigv4` with `credentials: callback`); replacing any earlier one clears a dead
    /// credential's state on the next refresh.
    pub fn set_token_provider(&self, service: &str, provider: Arc<dyn crate::host::TokenProvider>) -> Result<(), HarnessError> {
        let snapshot = self.engine.snapshot();
        let svc = snapshot.services.get(service).ok_or_else(|| unknown_service(service))?;
        if !svc.config.auth.as_ref().is_some_and(|a| a.takes_token_provider()) {
            return Err(HarnessError::config(format!(
                "services.{service}.auth.type: a token provider needs `type: callback` (or `type: aws_sigv4` with `credentials: callback`)"
            )));
        }
        self.engine.providers.write().insert(service.to_string(), provider);
        if let Some(c) = &svc.credential {
            c.revive();
        }
        Ok(())
    }

    /// Per service with credentials: status, expiry, last refresh and error, pool keys.
    /// Never a secret.
    pub fn credentials_state(&self) -> Vec<crate::credentials::CredentialState> {
        let snapshot = self.engine.snapshot();
        let mut out: Vec<_> = snapshot.services.iter().filter_map(|(name, s)| s.credential.as_ref().map(|c| c.state(name))).collect();
        out.sort_by(|a, b| a.service.cmp(&b.service));
        out
    }

    /// Every secret a service holds now: sensitive static header values, the base URL's
    /// password, and its credential's token, pool keys, client secret and cached access token.
    /// For a layer that passes answers on (the gateway) to scrub them; `None` for an unknown
    /// service. Never print the values.
    pub fn service_secrets(&self, service: &str) -> Option<crate::redact::Secrets> {
        let snapshot = self.engine.snapshot();
        let svc = snapshot.services.get(service)?;
        let mut secrets = svc.secrets.clone();
        if let Some(c) = &svc.credential {
            for s in c.secret_values() {
                secrets.add(s.expose());
            }
        }
        Some(secrets)
    }

    /// A short hash of the active config (the same config gives the same version everywhere).
    pub fn config_version(&self) -> String {
        self.engine.snapshot().version.clone()
    }

    /// The Prometheus text exposition of this client's metrics.
    pub fn metrics_text(&self) -> String {
        self.engine.metrics_text()
    }

    /// The breaker state for (service, endpoint, method); `endpoint` defaults to the
    /// template of `path`. `closed` for a key that has seen no traffic.
    pub fn breaker_state(&self, service: &str, method: &str, path: &str, endpoint: Option<&str>) -> &'static str {
        let ep = endpoint.map(str::to_string).unwrap_or_else(|| endpoint::template(path));
        let max = self.engine.snapshot().breaker_owner(service).map(|s| s.config.limits.max_endpoints as usize).unwrap_or(usize::MAX);
        self.engine.registry.breaker_state(service, &ep, &method.to_ascii_uppercase(), max)
    }

    /// The breaker for (service, endpoint, method) with its phase and current window's
    /// rates; `endpoint` defaults to the template of `path`.
    pub fn breaker_details(&self, service: &str, method: &str, path: &str, endpoint: Option<&str>) -> BreakerInfo {
        let ep = endpoint.map(str::to_string).unwrap_or_else(|| endpoint::template(path));
        let method = method.to_ascii_uppercase();
        let max = self.engine.snapshot().breaker_owner(service).map(|s| s.config.limits.max_endpoints as usize).unwrap_or(usize::MAX);
        let v = self.engine.registry.breaker_view(service, &ep, &method, max);
        BreakerInfo::new(service.to_string(), ep, method, v)
    }

    /// Every breaker the client has state for: `(service, endpoint, method, state)`.
    pub fn breakers(&self) -> Vec<(String, String, String, &'static str)> {
        self.engine.registry.breakers().into_iter().map(|(s, e, m, v)| (s, e, m, v.state.as_str())).collect()
    }

    /// Every breaker with its phase and its current window's rates.
    pub fn all_breaker_details(&self) -> Vec<BreakerInfo> {
        self.engine.registry.breakers().into_iter().map(|(s, e, m, v)| BreakerInfo::new(s, e, m, v)).collect()
    }

    /// Opens (`open: true`, held until closed by hand) or closes one endpoint's breaker by hand.
    pub fn set_breaker(&self, service: &str, method: &str, endpoint: &str, open: bool) -> Result<(), HarnessError> {
        let snapshot = self.engine.snapshot();
        let Some(svc) = snapshot.breaker_owner(service) else {
            return Err(HarnessError::config(format!(
                "service: unknown service or provider scope `{}` (a route's provider is `route:<route>/<provider>`)",
                crate::redact::escape_control(service)
            )));
        };
        let method = target::method(method)?;
        target::check_endpoint(endpoint)?;
        let ep = self.engine.registry.endpoint(service, endpoint, method.as_str(), svc.config.limits.max_endpoints);
        if open {
            ep.breaker.open_by_hand();
        } else {
            ep.breaker.close_by_hand();
        }
        Ok(())
    }

    /// A rate limiter outside any service (a gateway's per-caller limit), named `name` in
    /// metrics and events; shared across processes with `config.shared`.
    pub fn rate_limiter(&self, name: &str, config: &crate::ratelimit::RateLimitConfig) -> Result<Arc<crate::ratelimit::ServiceLimiter>, HarnessError> {
        self.engine.registry.limiter(name, config, &format!("limiter.{name}"))
    }

    /// A service's bulkhead limit now (it moves when `bulkhead.adaptive` is set).
    pub fn bulkhead_limit(&self, service: &str) -> Result<u32, HarnessError> {
        self.bulkhead(service, |b| b.max())
    }

    /// Bulkhead permits currently held on a service.
    pub fn bulkhead_in_use(&self, service: &str) -> Result<usize, HarnessError> {
        self.bulkhead(service, |b| b.in_use())
    }

    /// A service's rate limit now: the 429 pause left and the attempts refused and waiting
    /// so far; `None` when the service has no `rate_limit`.
    pub fn rate_limit_state(&self, service: &str) -> Result<Option<crate::ratelimit::RateLimitState>, HarnessError> {
        let snapshot = self.engine.snapshot();
        let svc = snapshot.services.get(service).ok_or_else(|| unknown_service(service))?;
        Ok(svc.limiter.as_ref().map(|l| l.state()))
    }

    /// Every rate limit of the active config, live (`rate_limits`): each service's, then each
    /// route's (`route:<name>`), sorted by name.
    pub fn rate_limits(&self) -> Vec<crate::ratelimit::RateLimitState> {
        let snapshot = self.engine.snapshot();
        let mut services: Vec<_> = snapshot.services.values().filter_map(|s| s.limiter.as_ref().map(|l| l.state())).collect();
        let mut routes: Vec<_> = snapshot.routes.values().filter_map(|r| r.limiter.as_ref().map(|l| l.state())).collect();
        services.sort_by(|a, b| a.service.cmp(&b.service));
        routes.sort_by(|a, b| a.service.cmp(&b.service));
        services.extend(routes);
        services
    }

    fn bulkhead<T>(&self, service: &str, read: impl FnOnce(&crate::bulkhead::Bulkhead) -> T) -> Result<T, HarnessError> {
        let snapshot = self.engine.snapshot();
        let svc = snapshot.services.get(service).ok_or_else(|| unknown_service(service))?;
        Ok(read(&svc.shared.bulkhead))
    }

    /// How many endpoint states this client holds (bounded by `limits.max_endpoints` per service).
    pub fn endpoint_count(&self) -> usize {
        self.engine.registry.endpoint_count()
    }

    /// Adds an event listener: it gets every event on the client's event thread.
    /// The returned id removes it (`remove_listener`).
    pub fn add_listener(&self, sink: Arc<dyn EventSink>) -> u64 {
        self.engine.events.add(sink)
    }

    /// Removes a listener; with none left, the client no longer builds events at all.
    pub fn remove_listener(&self, id: u64) -> bool {
        self.engine.events.remove(id)
    }

    /// Counts events a binding dropped after the core delivered them (its own buffer was
    /// full), in `harness_events_dropped_total`.
    pub fn note_dropped_events(&self, n: u64) {
        self.engine.events.note_dropped(n);
    }

    pub fn config(&self) -> Arc<Config> {
        self.engine.snapshot().config.clone()
    }

    /// Delivers this client's queued log records, audit records and events now (they go out on their
    /// own threads a moment after each request otherwise).
    /// Answers `method path_template` on `service` with `response`, from now on and across
    /// reloads (the latest rule first); the service no longer reaches the network. Path
    /// variables (`/orders/{id}`) are substituted into string values of the answer.
    pub fn mock(&self, service: &str, method: &str, path: &str, response: crate::transport::mock::MockResponse) -> Result<(), HarnessError> {
        if !self.engine.snapshot().services.contains_key(service) {
            return Err(HarnessError::config(format!("mock: unknown service `{}`", crate::redact::escape_control(service))));
        }
        let rule = crate::transport::mock::MockRule::from_host(method, path, &response)?;
        self.engine.mocks.add(service, rule);
        self.engine.rebuild()
    }

    /// Removes the mocks set by host code for `service` (or every service); a service with
    /// no mock left reaches the network again, unless mock mode is on in config.
    pub fn clear_mocks(&self, service: Option<&str>) -> Result<(), HarnessError> {
        self.engine.mocks.clear(service);
        self.engine.rebuild()
    }

    pub fn flush(&self) {
        self.engine.log.flush();
        self.engine.events.flush();
        self.engine.audit.flush();
    }

    /// Refuses new requests (in-flight ones finish), stops watching, and flushes this
    /// client's log records and events.
    pub fn close(&self) {
        self.engine.close();
    }

    pub fn is_closed(&self) -> bool {
        self.engine.is_closed()
    }
}

fn unknown_service(service: &str) -> HarnessError {
    HarnessError::config(format!("service: unknown service `{}`", crate::redact::escape_control(service)))
}

/// Starts following the fleet's config: the cached copy applied now (when there is one),
/// then Redis, behind the caller. A pushed version keeps this bootstrap's `config_source`.
fn follow_config_source(engine: &Arc<Engine>, source: crate::fleet::ConfigSourceConfig) -> Result<(), HarnessError> {
    use crate::fleet::source::Source;
    let conn = engine.registry.redis(&source.redis_url, "config_source.redis_url")?;
    let weak = Arc::downgrade(engine);
    let bootstrap = serde_json::to_value(&source).map_err(|e| HarnessError::config(format!("config_source: {e}")))?;
    let name = source.name.clone();
    let running = move |engine: &Engine, version: u64| {
        use crate::observability::metrics::ConfigVersionLabels;
        engine.metrics.config_version.clear();
        engine.metrics.config_version.get_or_create(&ConfigVersionLabels { name: name.as_str().into(), version: version.to_string().into() }).set(1);
    };
    running(engine, 0);
    let apply = Box::new(move |text: &str, format: &str, version: u64| {
        let engine = weak.upgrade()?;
        let config = Config::parse_text(text, format).and_then(|mut v| {
            if let Some(o) = v.as_object_mut() {
                o.insert("config_source".into(), bootstrap.clone());
            }
            Config::load_value(v)
        });
        let result = engine.reload(config, &format!("config_source:{version}"));
        let outcome = if result.is_ok() { "applied" } else { "rejected" };
        engine.metrics.config_pushes.get_or_create(&crate::observability::metrics::PushLabels { outcome: outcome.into() }).inc();
        if result.is_ok() {
            running(&engine, version);
        }
        Some(result)
    });
    let weak = Arc::downgrade(engine);
    let alive = Box::new(move || weak.upgrade().is_some_and(|e| !e.is_closed()));
    let follower = Source::new(source, apply, alive);
    let _ = engine.config_source.set(follower.state());
    engine.events.add(follower.traffic());
    follower.apply_cached();
    runtime::handle()?.spawn(follower.run(conn));
    Ok(())
}

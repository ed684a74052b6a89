//! The gateway's state: the core client, the callers compiled from the config (swapped whole on
//! a reload), the gateway's own metrics, the callers' budgets and the scrubber of services'
//! secrets.

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use arc_swap::ArcSwap;
use harness_core::observability::metrics::Label;
use harness_core::ratelimit::ServiceLimiter;
use harness_core::{Client, ClientOptions, HarnessError};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::activity::Activity;
use crate::budget::{Budgets, CostFamily};
use crate::config::{sha256_hex, GatewayConfig, Loaded};
use crate::scrub::Scrubber;

/// One caller, compiled from `callers:`.
pub struct Caller {
    pub name: String,
    routes: Vec<String>,
    services: Vec<String>,
    pub(crate) limiter: Option<Arc<ServiceLimiter>>,
    pub(crate) budget_per_day: Option<f64>,
    /// The rate limit as configured (what the console shows).
    pub(crate) rate_limit: Option<harness_core::ratelimit::RateLimitConfig>,
}

impl Caller {
    pub(crate) fn may_use_route(&self, route: &str) -> bool {
        self.routes.iter().any(|r| r == "*" || r == route)
    }

    pub(crate) fn may_use_service(&self, service: &str) -> bool {
        self.services.iter().any(|s| s == "*" || s == service)
    }
}

/// What a reload replaces.
pub(crate) struct Settings {
    pub(crate) gateway: GatewayConfig,
    /// Callers by the hex SHA-256 of their key.
    callers: HashMap<String, Arc<Caller>>,
}

// Every value is a core `Label`: escaped on output (prometheus-client writes values raw), so
// no caller, route, service or model name can end a label or start a sample of its own.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    caller: Label,
    api: Label,
    target: Label,
    status: Label,
}

pub(crate) struct GatewayMetrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    pub(crate) in_flight: Gauge,
    pub(crate) unauthorized: Counter,
}

impl GatewayMetrics {
    /// `cost` is the budgets' spend counters, registered here among the gateway's series.
    fn new(cost: CostFamily) -> Self {
        let mut registry = Registry::with_prefix("harness_gateway");
        let requests = Family::<RequestLabels, Counter>::default();
        let in_flight = Gauge::default();
        let unauthorized = Counter::default();
        registry.register("requests", "Gateway requests by caller, API, route or service, and HTTP status", requests.clone());
        registry.register("cost", "Spend by caller, in the routes' price unit", cost);
        registry.register("in_flight", "Requests (and streams) being served", in_flight.clone());
        registry.register("unauthorized", "Requests refused for a missing or wrong key (nothing forwarded)", unauthorized.clone());
        GatewayMetrics { registry: Mutex::new(registry), requests, in_flight, unauthorized }
    }
}

/// The gateway's state: the core client and what the config says about callers.
pub struct Gateway {
    pub client: Client,
    pub(crate) settings: ArcSwap<Settings>,
    /// The config file, re-read by an admin reload without a body.
    pub(crate) path: Option<String>,
    /// Where the first config read the host: what a reload over HTTP may read when there is no
    /// config file to compare with (an embedded gateway).
    pub(crate) started_with: std::collections::BTreeMap<String, String>,
    pub(crate) metrics: GatewayMetrics,
    /// Spend and reservations per caller name (today's); kept across reloads.
    pub(crate) budgets: Arc<Budgets>,
    /// Each caller's day, each provider's cost today, reloads and admin actions (the console's).
    pub(crate) activity: Activity,
    /// Requests and streams being served (for the drain report).
    pub in_flight: AtomicI64,
    /// The services' secrets last seen, and their scrubber.
    scrubber: Mutex<(Vec<String>, Arc<Scrubber>)>,
}

impl Gateway {
    pub fn new(loaded: Loaded, path: Option<String>) -> Result<Arc<Gateway>, HarnessError> {
        let client = Client::with_options(loaded.core.clone(), ClientOptions::default())?;
        let settings = compile(&client, &loaded)?;
        let budgets = Arc::new(Budgets::default());
        Ok(Arc::new(Gateway {
            client,
            settings: ArcSwap::from_pointee(settings),
            started_with: loaded.host_references.clone(),
            path,
            metrics: GatewayMetrics::new(budgets.cost()),
            budgets,
            activity: Activity::default(),
            in_flight: AtomicI64::new(0),
            scrubber: Mutex::new((Vec::new(), Arc::new(Scrubber::new([])))),
        }))
    }

    /// Validates `loaded` whole, then swaps it in (the core first; callers after).
    pub fn reload(&self, loaded: Loaded) -> Result<String, HarnessError> {
        let settings = compile(&self.client, &loaded)?;
        let version = self.client.reload(loaded.core)?;
        self.settings.store(Arc::new(settings));
        self.forget_unconfigured();
        Ok(version)
    }

    /// A scrubber for every secret the services hold now (a token refresh or a reload changes
    /// them; the scrubber is rebuilt only then).
    pub(crate) fn scrubber(&self) -> Arc<Scrubber> {
        let cfg = self.client.config();
        let mut secrets: Vec<String> = Vec::new();
        for name in cfg.services.keys() {
            if let Some(s) = self.client.service_secrets(name) {
                secrets.extend(s.values().map(str::to_string));
            }
        }
        secrets.sort_unstable();
        secrets.dedup();
        let mut cache = self.scrubber.lock();
        if cache.0 != secrets {
            let scrubber = Arc::new(Scrubber::new(secrets.iter().map(String::as_str)));
            *cache = (secrets, scrubber);
        }
        cache.1.clone()
    }

    pub(crate) fn gateway_config(&self) -> GatewayConfig {
        self.settings.load().gateway.clone()
    }

    /// The caller a key belongs to.
    pub(crate) fn caller(&self, key: &str) -> Option<Arc<Caller>> {
        self.settings.load().callers.get(&sha256_hex(key.as_bytes())).cloned()
    }

    /// The admin API and console exist only with an admin key configured.
    pub(crate) fn admin_on(&self) -> bool {
        self.settings.load().gateway.admin_key_sha256.is_some()
    }

    pub(crate) fn admin_ok(&self, key: &str) -> Option<bool> {
        let s = self.settings.load();
        let want = s.gateway.admin_key_sha256.as_deref()?;
        let got = sha256_hex(key.as_bytes());
        // Both are fixed-length hex digests: compare without an early exit.
        Some(ring_eq(got.as_bytes(), want.to_ascii_lowercase().as_bytes()))
    }

    /// Every configured caller, by name.
    pub(crate) fn callers(&self) -> Vec<Arc<Caller>> {
        let mut out: Vec<Arc<Caller>> = self.settings.load().callers.values().cloned().collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The console's counters keep only the callers and providers the config names.
    pub(crate) fn forget_unconfigured(&self) {
        let callers: Vec<String> = self.callers().iter().map(|c| c.name.clone()).collect();
        let cfg = self.client.config();
        let providers: Vec<(String, String)> = cfg.routes.iter().flat_map(|(r, rc)| rc.providers.iter().map(move |p| (r.clone(), p.id.clone()))).collect();
        self.activity.retain(&callers, &providers);
    }

    pub(crate) fn count(&self, caller: &str, api: &str, target: &str, status: u16) {
        self.activity.request(caller, status);
        self.metrics.requests.get_or_create(&RequestLabels { caller: caller.into(), api: api.into(), target: target.into(), status: status.to_string().into() }).inc();
    }

    /// The core's series and the gateway's, as one Prometheus text.
    pub fn metrics_text(&self) -> String {
        let mut text = self.client.metrics_text();
        if let Some(cut) = text.rfind("# EOF") {
            text.truncate(cut);
        }
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.metrics.registry.lock());
        text
    }
}

/// Constant-time equality of two byte strings of the same length.
fn ring_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn compile(client: &Client, loaded: &Loaded) -> Result<Settings, HarnessError> {
    let mut callers = HashMap::new();
    for (name, c) in &loaded.callers {
        let limiter = c.rate_limit.as_ref().map(|rl| client.rate_limiter(&format!("caller:{name}"), rl)).transpose()?;
        callers.insert(
            c.key_sha256.to_ascii_lowercase(),
            Arc::new(Caller { name: name.clone(), routes: c.routes.clone(), services: c.services.clone(), limiter, budget_per_day: c.budget_per_day, rate_limit: c.rate_limit.clone() }),
        );
    }
    Ok(Settings { gateway: loaded.gateway.clone(), callers })
}

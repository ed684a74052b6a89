//! What crosses to a host, as data: the error view, the client's read-only views (by name,
//! as JSON), and the JSON Schema of the config and of every view, from which the host type
//! files (`index.d.ts`, the `.pyi` stubs, the Kotlin classes) are generated.
//!
//! Guarantees: a view never holds a secret; the schema is the one the core serialises
//! with (serde's names and tags), so a generated type cannot drift from what crosses.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::error::HarnessError;

/// An error as every binding shows it: the kind (the exception class), the message, the
/// context, and `text`, the message with its context but without the kind name (what a
/// host exception's message is, since its class already names the kind). Each binding's
/// exception classes are generated from its fields and `ErrorKind::KINDS`, in this order: a
/// new field goes last (Java sees the Kotlin error's constructor by position).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ErrorView {
    /// `TimeoutError`, `HttpStatusError`, ... (`ErrorKind::NAMES`).
    #[schemars(schema_with = "kind_schema")]
    pub kind: &'static str,
    /// The engine's message alone, without the kind name or the context; for a `ConfigError`
    /// it starts with the field path.
    pub message: String,
    /// The message and its context (service, endpoint, status, attempts, trace id).
    pub text: String,
    /// The service of the call.
    pub service: Option<String>,
    /// The endpoint label (template) of the call.
    pub endpoint: Option<String>,
    /// The HTTP method of the call.
    pub method: Option<String>,
    /// Attempts made before giving up.
    pub attempts: u32,
    /// The upstream's HTTP status, when it answered.
    pub status: Option<u16>,
    /// The downstream's normalised error code, read from its body (`errCode`, `error.code` or a
    /// top-level one).
    pub code: Option<String>,
    /// When to try again, in milliseconds: a 429's Retry-After, the client's own rate limit, or
    /// what is left of a duplicate delivery's lease.
    pub retry_after_ms: Option<u64>,
    /// The W3C trace id of the call (32 hex digits).
    pub trace_id: Option<String>,
    /// Which timeout expired (`TimeoutError`): `connect`, `response`, `idle`, `ttft` or `total`.
    #[schemars(extend("enum" = ["connect", "response", "idle", "ttft", "total", null]))]
    pub phase: Option<&'static str>,
    /// Routed requests: the provider whose answer this error is.
    pub provider: Option<String>,
    /// `NoHealthyProviderError` (and a chat stream no other provider could take over): each
    /// provider of the route, in config order, and its last error or why it was not tried;
    /// empty otherwise.
    pub provider_errors: Vec<ProviderError>,
}

/// `ErrorView::kind`: one of the kind names.
fn kind_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": crate::error::ErrorKind::NAMES})
}

/// One provider's last error in a `NoHealthyProviderError`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ProviderError {
    pub provider: String,
    pub error: String,
}

impl ErrorView {
    pub fn of(e: &HarnessError) -> ErrorView {
        let full = e.to_string();
        let text = full.strip_prefix(e.name()).and_then(|t| t.strip_prefix(": ")).unwrap_or(&full).to_string();
        ErrorView {
            kind: e.name(),
            message: e.message.clone(),
            text,
            phase: e.phase(),
            service: e.service.clone(),
            endpoint: e.endpoint.clone(),
            method: e.method.clone(),
            attempts: e.attempts,
            status: e.status,
            code: e.code.clone(),
            retry_after_ms: e.retry_after_ms,
            trace_id: e.trace_id.clone(),
            provider: e.provider.clone(),
            provider_errors: e.provider_errors.iter().map(|(p, err)| ProviderError { provider: p.clone(), error: err.clone() }).collect(),
        }
    }
}

/// One read-only view of a client, by name: its arguments and the type it gives.
#[derive(Debug, Clone, Copy)]
pub struct ViewSpec {
    pub name: &'static str,
    pub args: &'static [&'static str],
    /// The returned type's name in the host schema (`[T]` for a list of `T`).
    pub returns: &'static str,
    pub doc: &'static str,
}

/// Every view a binding may ask `Client::view` for.
pub const VIEWS: &[ViewSpec] = &[
    ViewSpec {
        name: "routing_state",
        args: &["route"],
        returns: "RouteState",
        doc: "The state of a route: its strategy and, per provider in config order, the configured and effective weight, health and success rate (0 to 1), latency EWMA, breaker, requests in flight, cooling left of a 429's Retry-After and last error. A ConfigError for an unknown route.",
    },
    ViewSpec {
        name: "credentials_state",
        args: &[],
        returns: "[CredentialState]",
        doc: "Per service with credentials, sorted by service: type, status (valid, refreshing, expired, dead), expiry and last refresh (Unix ms), last error, and each pool key's status. Never a secret.",
    },
    ViewSpec {
        name: "breaker_details",
        args: &["service", "method", "path", "endpoint?"],
        returns: "BreakerInfo",
        doc: "The circuit breaker for (service, endpoint, method): state, phase (probing or ramping while half open), the share of calls it admits, and its current window's calls, failure rate and slow-call rate. The endpoint defaults to the path's template (IDs collapsed to {id}).",
    },
    ViewSpec { name: "breakers", args: &[], returns: "[BreakerInfo]", doc: "Every breaker the client has state for, as breaker_details shows it." },
    ViewSpec {
        name: "rate_limits",
        args: &[],
        returns: "[RateLimitState]",
        doc: "Every rate_limit of the config, live in this process: each service's, then each route's (route:<name>), sorted by name; the pause left of a downstream 429 (ms), and the attempts refused (RateLimitedError, nothing sent) and held waiting for capacity since the limit was set (kept across a reload that keeps its settings).",
    },
    ViewSpec {
        name: "config_source_state",
        args: &[],
        returns: "ConfigSourceState",
        doc: "The fleet config source (config_source) as this instance follows it: its name and instance id, the version applied with its hash, where it came from (redis, cache_file or bootstrap) and when, the version Redis says this instance should run, the last version it rejected with the reason (naming the field), whether Redis answered and its last error. A ConfigError without a config_source.",
    },
    ViewSpec {
        name: "describe",
        args: &[],
        returns: "Description",
        doc: "What the active config holds: its version, the client's name, each service (base URL without credentials, auth type, named endpoints) and each route (strategy, providers). Never a secret.",
    },
];

/// The active config in brief (`describe`): what runs, never a secret.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Description {
    /// The config's short hash (`config_version`).
    pub config_version: String,
    /// This library's version.
    pub harness_version: String,
    /// `client.name`.
    pub client: String,
    /// By name.
    pub services: Vec<ServiceSummary>,
    /// By name.
    pub routes: Vec<RouteSummary>,
}

/// One service of `describe`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ServiceSummary {
    pub name: String,
    /// Without a password (`***`).
    pub base_url: String,
    /// `bearer`, `header`, `query`, `oauth2_client_credentials` or `callback`; none without auth.
    pub auth: Option<String>,
    /// The endpoints the config names (`GET /orders/{id}`).
    pub endpoints: Vec<String>,
}

/// One route of `describe`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RouteSummary {
    pub name: String,
    /// `weighted-health`, `priority` or `least-latency`.
    pub strategy: String,
    /// Provider ids in config order.
    pub providers: Vec<String>,
}

impl crate::client::Client {
    /// One of the client's read-only views by name (`crate::view::VIEWS`), as JSON: what a
    /// binding hands its host without a copy of the type. An unknown name or a missing
    /// argument is a `ConfigError`.
    pub fn view(&self, name: &str, args: &[String]) -> Result<serde_json::Value, HarnessError> {
        use crate::view::to_json;
        let Some(spec) = crate::view::VIEWS.iter().find(|v| v.name == name) else {
            return Err(HarnessError::config(format!("view: unknown view `{}`", crate::redact::escape_control(name))));
        };
        let required = spec.args.iter().filter(|a| !a.ends_with('?')).count();
        if args.len() < required || args.len() > spec.args.len() {
            return Err(HarnessError::config(format!("view.{name}: expected arguments ({}), got {}", spec.args.join(", "), args.len())));
        }
        let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
        Ok(match name {
            "routing_state" => to_json(&self.routing_state(arg(0))?),
            "credentials_state" => to_json(&self.credentials_state()),
            "breaker_details" => to_json(&self.breaker_details(arg(0), arg(1), arg(2), args.get(3).map(String::as_str))),
            "breakers" => to_json(&self.all_breaker_details()),
            "rate_limits" => to_json(&self.rate_limits()),
            "describe" => to_json(&self.describe()),
            "config_source_state" => to_json(&self.config_source_state().ok_or_else(|| HarnessError::config("config_source_state: this client has no config_source"))?),
            other => return Err(HarnessError::new(crate::error::ErrorKind::Harness, format!("view: `{other}` is listed but not served (a bug in Harness)"))),
        })
    }

    /// What the active config holds (`describe`): version, client name, services and routes.
    pub fn describe(&self) -> Description {
        let cfg = self.config();
        let services = cfg
            .services
            .iter()
            .map(|(name, s)| ServiceSummary {
                name: name.clone(),
                base_url: crate::redact::redact_url(&s.base_url).into_owned(),
                auth: s.auth.as_ref().map(|a| a.type_name().to_string()),
                endpoints: s.endpoints.keys().cloned().collect(),
            })
            .collect();
        let routes = cfg
            .routes
            .iter()
            .map(|(name, r)| RouteSummary { name: name.clone(), strategy: r.strategy.as_str().to_string(), providers: r.providers.iter().map(|p| p.id.clone()).collect() })
            .collect();
        Description { config_version: self.config_version(), harness_version: env!("CARGO_PKG_VERSION").to_string(), client: cfg.client.name.clone(), services, routes }
    }
}

/// A view's value as JSON.
pub fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("a view always serialises")
}

/// The JSON Schema of the config and of every view (`$defs`, with `roots` naming the types
/// a host sees): the source of the generated host type files.
pub fn host_schema() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut roots = serde_json::Map::new();
    macro_rules! root {
        ($($name:literal => $t:ty),* $(,)?) => {$(
            roots.insert($name.to_string(), generator.subschema_for::<$t>().to_value());
        )*};
    }
    root! {
        "Config" => crate::config::Config,
        "ErrorView" => ErrorView,
        "Event" => crate::host::Event,
        "RequestRecord" => crate::observability::log::RequestRecord,
        "ChatResponse" => crate::adapters::ChatResponse,
        "ChatChunk" => crate::adapters::ChatChunk,
        "EmbedResponse" => crate::adapters::EmbedResponse,
        "RouteState" => crate::routing::RouteState,
        "CredentialState" => crate::credentials::CredentialState,
        "BreakerInfo" => crate::breaker::BreakerInfo,
        "RateLimitState" => crate::ratelimit::RateLimitState,
        "Routed" => crate::response::Routed,
        "Description" => Description,
        "ConfigSourceState" => crate::fleet::source::SourceState,
        "IdempotencyConfig" => crate::idempotency::IdempotencyConfig,
        "InterceptedRequest" => crate::interceptors::InterceptedRequest,
        "InterceptedResponse" => crate::interceptors::InterceptedResponse,
        "RequestChanges" => crate::interceptors::RequestChanges,
        "Rejection" => crate::interceptors::Rejection,
    }
    let defs: serde_json::Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    let views: Vec<Value> = VIEWS.iter().map(|v| serde_json::json!({"name": v.name, "args": v.args, "returns": v.returns, "doc": v.doc})).collect();
    // The error classes every host has: the kinds (name, doc) and the view they cross as.
    let kinds: Vec<Value> = crate::error::ErrorKind::KINDS.iter().map(|(name, doc)| serde_json::json!({"name": name, "doc": doc})).collect();
    let errors = serde_json::json!({"view": "ErrorView", "kinds": kinds});
    serde_json::json!({"roots": roots, "$defs": defs, "views": views, "errors": errors})
}

#[cfg(test)]
mod tests {
    use crate::client::Client;

    #[test]
    fn describe_lists_services_and_routes_and_never_a_secret() {
        let client = Client::from_value(serde_json::json!({
            "client": {"name": "billing"},
            "services": {
                "orders": {
                    "base_url": "http://user:pa55word@127.0.0.1:1",
                    "auth": {"type": "bearer", "token": {"value": "tok-SECRET-1"}},
                    "endpoints": {"GET /orders/{id}": {}}
                },
                "llm": {"base_url": "http://127.0.0.1:2"}
            },
            "routes": {"chat": {"providers": [{"id": "a", "service": "llm", "model": "m", "weight": 1}, {"id": "b", "service": "orders", "weight": 1}]}}
        }))
        .unwrap();
        let d = client.describe();
        assert_eq!((d.client.as_str(), d.config_version.as_str()), ("billing", client.config_version().as_str()));
        let names: Vec<&str> = d.services.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["llm", "orders"]);
        let orders = &d.services[1];
        assert_eq!((orders.auth.as_deref(), orders.endpoints.clone()), (Some("bearer"), vec!["GET /orders/{id}".to_string()]));
        assert_eq!(d.routes[0].providers, ["a", "b"]);
        assert_eq!(d.routes[0].strategy, "weighted-health");
        let text = client.view("describe", &[]).unwrap().to_string();
        assert!(!text.contains("pa55word") && !text.contains("tok-SECRET-1"), "{text}");
        assert!(text.contains("\"base_url\":\"http://user:***@127.0.0.1:1"), "{text}");
    }

    #[test]
    fn rate_limits_lists_each_service_then_each_route_with_a_limit() {
        let client = Client::from_value(serde_json::json!({
            "services": {
                "zeta": {"base_url": "http://127.0.0.1:1", "rate_limit": {"rps": 5}},
                "alpha": {"base_url": "http://127.0.0.1:2", "rate_limit": {"rps": 1, "burst": 1}},
                "free": {"base_url": "http://127.0.0.1:3"}
            },
            "routes": {"chat": {"rate_limit": {"rps": 2}, "providers": [{"id": "a", "service": "free", "model": "m", "weight": 1}]}}
        }))
        .unwrap();
        let v = client.view("rate_limits", &[]).unwrap();
        let names: Vec<&str> = v.as_array().unwrap().iter().map(|s| s["service"].as_str().unwrap()).collect();
        assert_eq!(names, ["alpha", "zeta", "route:chat"]);
        assert_eq!(v[0], serde_json::json!({"service": "alpha", "paused_ms": 0, "refused": 0, "waited": 0}));
        assert!(Client::from_value(serde_json::json!({"services": {}})).unwrap().rate_limits().is_empty());
    }

    #[test]
    fn an_unknown_view_or_a_missing_argument_is_a_config_error_naming_it() {
        let client = Client::from_value(serde_json::json!({"services": {}})).unwrap();
        let e = client.view("nope", &[]).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Config);
        assert!(e.message.contains("`nope`"), "{}", e.message);
        let e = client.view("routing_state", &[]).unwrap_err();
        assert!(e.message.starts_with("view.routing_state: expected arguments (route)"), "{}", e.message);
    }
}

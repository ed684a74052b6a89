//! The one config schema, loaded from YAML, JSON, TOML or an in-memory map.
//!
//! Guarantees: every key has the default from DESIGN.md; an unknown key or an
//! invalid value is a `ConfigError` whose message starts with the field path,
//! e.g. `services.orders.retry.max_retries: expected an integer >= 0, got -1`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod files;

use crate::error::HarnessError;
use crate::json;
use crate::redact::{escape_control, redact_url};
use crate::target;

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub client: ClientConfig,
    pub log: LogConfig,
    pub services: BTreeMap<String, ServiceConfig>,
    /// Routes: a name business code calls, served by a choice of providers.
    pub routes: BTreeMap<String, crate::routing::RouteConfig>,
    /// Prices by model name (a provider's `model`), for providers without their own `price`.
    pub prices: BTreeMap<String, crate::routing::price::Price>,
    /// One audit record per request, to a rotating file (off by default).
    pub audit: crate::observability::audit::AuditConfig,
    pub metrics: MetricsConfig,
    /// Spans to an OpenTelemetry collector over OTLP/HTTP (off until `otel.endpoint` is set).
    pub otel: crate::observability::otel::OtelConfig,
    /// Answers from rules instead of the network (off unless enabled or `HARNESS_MOCK=1`).
    pub mock: crate::transport::mock::MockConfig,
    /// Injected latency, statuses, resets and cut bodies (off unless enabled or `HARNESS_FAULTS=1`).
    pub faults: crate::transport::faults::FaultsConfig,
    /// Host interceptors: the time each may take, and levels by name.
    pub interceptors: crate::interceptors::InterceptorsConfig,
    /// The caches' sizes and the fleet's shared cache (what is cached is set per service and route).
    pub cache: crate::cache::CacheConfig,
    /// The fleet's config in Redis: this file is then the bootstrap, and the version pushed
    /// for this instance replaces the rest of it (README "Running a fleet").
    pub config_source: Option<crate::fleet::ConfigSourceConfig>,
}

/// `metrics:` (the text is always available from the client's `metrics()`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve `GET /metrics` on this address (e.g. `127.0.0.1:9464`).
    pub listen: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// Sent as the user agent and in logs.
    pub name: String,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig { name: "harness".into() }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// One record per request; host listeners get the record either way.
    pub enabled: bool,
    /// Where records go: `stderr` (a JSON line), or the host's own logging when the
    /// binding provides it (`python`: the `harness` logger; `slf4j`: logger `dev.harness`).
    pub sink: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { enabled: true, sink: "stderr".into() }
    }
}

#[derive(Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    pub base_url: String,
    pub timeouts: TimeoutConfig,
    pub retry: RetryConfig,
    pub breaker: BreakerConfig,
    pub bulkhead: BulkheadConfig,
    pub headers: Headers,
    pub redirects: RedirectConfig,
    pub limits: LimitsConfig,
    /// Credentials: a token, a key pool, OAuth2 client credentials or a host provider.
    pub auth: Option<crate::credentials::AuthConfig>,
    /// Client-side rate limit (GCRA), local or shared by a fleet; the 429 pause.
    pub rate_limit: Option<crate::ratelimit::RateLimitConfig>,
    /// Hedged reads: a second attempt when the first is slower than the endpoint's p95 (off by default).
    pub hedge: Option<crate::hedge::HedgeConfig>,
    /// Per endpoint (`GET /orders/{id}`, `/orders/{id}`, or an `operationId` of `openapi`):
    /// response validation, breaker, hedging.
    pub endpoints: BTreeMap<String, crate::validation::EndpointConfig>,
    /// The service's OpenAPI document: endpoints labelled by `operationId`, answers checked
    /// against each operation's response schemas, declared-idempotent operations resent.
    pub openapi: Option<crate::validation::OpenApiConfig>,
    /// HTTP caching (RFC 9111) and coalescing of GET and HEAD requests (off by default).
    pub cache: Option<crate::cache::HttpCacheConfig>,
}

impl fmt::Debug for ServiceConfig {
    // By hand: the base URL's password is shown as `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceConfig")
            .field("base_url", &redact_url(&self.base_url))
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("breaker", &self.breaker)
            .field("bulkhead", &self.bulkhead)
            .field("headers", &self.headers)
            .field("redirects", &self.redirects)
            .field("limits", &self.limits)
            .field("auth", &self.auth)
            .field("hedge", &self.hedge)
            .field("endpoints", &self.endpoints.keys().collect::<Vec<_>>())
            .field("openapi", &self.openapi)
            .field("cache", &self.cache)
            .field("rate_limit", &self.rate_limit.as_ref().map(|r| (r.rps, r.burst, r.shared.as_ref().map(|s| redact_url(&s.redis_url).into_owned()))))
            .finish()
    }
}

/// Static headers sent with every request; values are redacted from Debug output.
#[derive(Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Headers(pub BTreeMap<String, String>);

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.keys().map(|k| (k, "<redacted>"))).finish()
    }
}

pub use crate::breaker::config::BreakerConfig;
pub use crate::bulkhead::config::BulkheadConfig;
pub use crate::retry::config::{RetryConfig, SharedBudgetConfig};
pub use crate::transport::config::{LimitsConfig, RedirectConfig, TimeoutConfig};

/// A config that passed validation: what a client is built from and what a reload swaps
/// in. Only `Config::check` (and the `load_*` functions, which parse then check) make
/// one, so a config is validated once per load and a snapshot never checks it again.
#[derive(Debug, Clone)]
pub struct Validated(Config);

impl Validated {
    pub fn config(&self) -> &Config {
        &self.0
    }

    pub fn into_inner(self) -> Config {
        self.0
    }

    /// A config that was validated when it was loaded (a snapshot's own, rebuilt).
    pub(crate) fn trusted(config: Config) -> Validated {
        Validated(config)
    }
}

impl Config {
    /// Validates the config (as built or changed in code): a `ConfigError` naming the field.
    pub fn check(self) -> Result<Validated, HarnessError> {
        self.validate()?;
        Ok(Validated(self))
    }

    /// Parses and validates the in-memory map a binding passes.
    pub fn load_value(value: Value) -> Result<Validated, HarnessError> {
        let mut value = if value.is_null() { Value::Object(Default::default()) } else { value };
        json::check_value("config", &value)?;
        // `openapi: orders.yaml` is short for `openapi: {spec: orders.yaml}`.
        if let Some(services) = value.get_mut("services").and_then(Value::as_object_mut) {
            for svc in services.values_mut() {
                if let Some(spec) = svc.get_mut("openapi").filter(|v| v.is_string()) {
                    *spec = serde_json::json!({ "spec": spec.take() });
                }
            }
        }
        let config: Config = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            // Keys come from the document: a control character in one is shown escaped.
            HarnessError::config(escape_control(&describe_error(&path, &e.into_inner().to_string())))
        })?;
        config.check()
    }

    /// Parses and validates config text (`yaml`, `yml`, `json` or `toml`).
    pub fn load_text(text: &str, format: &str) -> Result<Validated, HarnessError> {
        Self::load_value(Self::parse_text(text, format)?)
    }

    /// Loads and validates a `.yaml`/`.yml`, `.json` or `.toml` file; relative file
    /// references in it (secrets, schemas, fixtures, the audit file) resolve against the
    /// file's folder.
    pub fn load_path(path: impl AsRef<Path>) -> Result<Validated, HarnessError> {
        Self::load_value(Self::parse_file(path.as_ref())?)
    }

    /// `load_path`, as a plain `Config`.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Config, HarnessError> {
        Self::load_path(path).map(Validated::into_inner)
    }

    /// A config file as a JSON value (format from its extension), its relative file
    /// references made absolute against its folder; not yet checked for meaning.
    pub fn parse_file(path: &Path) -> Result<Value, HarnessError> {
        let text = files::read_text(path, "config file")?;
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        let mut value = Self::parse_text(&text, &ext)?;
        files::resolve_relative(&mut value, &files::folder_of(path));
        Ok(value)
    }

    /// `load_text`, as a plain `Config`.
    pub fn from_str_with_format(text: &str, format: &str) -> Result<Config, HarnessError> {
        Self::load_text(text, format).map(Validated::into_inner)
    }

    /// The config text as a JSON value, checked for depth, not yet for meaning (a gateway
    /// takes its own sections out before the rest becomes a `Config`).
    pub fn parse_text(text: &str, format: &str) -> Result<Value, HarnessError> {
        let parse_err = |e: String| HarnessError::config(format!("config: cannot parse {format}: {e}"));
        // Before the parser: a pathologically deep document is refused in linear time.
        match format {
            "json" => json::check_text("config", text.as_bytes())?,
            _ => json::check_config_text("config", text)?,
        }
        let value: Value = match format {
            "yaml" | "yml" => serde_yaml::from_str(text).map_err(|e| parse_err(e.to_string()))?,
            "json" => json::parse_checked(text).map_err(|e| parse_err(e.to_string()))?,
            "toml" => {
                let t: toml::Value = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
                serde_json::to_value(t).map_err(|e| parse_err(e.to_string()))?
            }
            other => {
                return Err(HarnessError::config(format!(
                    "config: unknown file format `{other}` (expected .yaml, .yml, .json or .toml)"
                )))
            }
        };
        Ok(value)
    }

    /// `load_value`, as a plain `Config`.
    pub fn from_value(value: Value) -> Result<Config, HarnessError> {
        Self::load_value(value).map(Validated::into_inner)
    }

    /// Checks the value ranges serde cannot express.
    pub fn validate(&self) -> Result<(), HarnessError> {
        fn bad(path: String, msg: impl fmt::Display) -> HarnessError {
            HarnessError::config(format!("{path}: {msg}"))
        }
        if !["stderr", "python", "slf4j"].contains(&self.log.sink.as_str()) {
            return Err(bad("log.sink".into(), format!("expected stderr, python or slf4j, got {:?}", escape_control(&self.log.sink))));
        }
        let name = &self.client.name;
        if name.is_empty() || name.chars().any(char::is_control) || http::HeaderValue::try_from(name.as_str()).is_err() {
            return Err(bad("client.name".into(), format!("expected printable text (it is sent as the user agent), got {:?}", escape_control(name))));
        }
        for (name, s) in &self.services {
            if name.is_empty() || name.chars().any(char::is_control) {
                return Err(bad(format!("services.{}", escape_control(name)), "a service name must be printable"));
            }
            let p = |field: &str| format!("services.{name}.{field}");
            if s.base_url.is_empty() {
                return Err(bad(p("base_url"), "required (e.g. http://127.0.0.1:8080)"));
            }
            match url::Url::parse(&s.base_url) {
                Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {}
                _ => {
                    let shown = redact_url(&s.base_url);
                    return Err(bad(p("base_url"), format!("expected an http(s) URL, got {:?}", escape_control(&shown))));
                }
            }
            s.timeouts.validate(&p("timeouts"))?;
            s.retry.validate(&p("retry"))?;
            s.breaker.validate(&p("breaker"))?;
            s.bulkhead.validate(&p("bulkhead"))?;
            if let Some(h) = &s.hedge {
                h.validate(&p("hedge"))?;
            }
            for (key, ep) in &s.endpoints {
                let at = p(&format!("endpoints.{}", escape_control(key)));
                if let Some(b) = &ep.breaker {
                    b.validate(&format!("{at}.breaker"))?;
                }
                if let Some(h) = &ep.hedge {
                    h.validate(&format!("{at}.hedge"))?;
                }
            }
            for (k, v) in &s.headers.0 {
                if target::is_forbidden_header(k) {
                    return Err(target::forbidden_header(&p("headers"), k));
                }
                if http::HeaderName::try_from(k.as_str()).is_err() || http::HeaderValue::try_from(v.as_str()).is_err() {
                    return Err(bad(p(&format!("headers.{}", escape_control(k))), "not a valid HTTP header"));
                }
            }
            s.limits.validate(&p("limits"))?;
            if let Some(auth) = &s.auth {
                auth.validate(&p("auth"))?;
            }
            if let Some(rl) = &s.rate_limit {
                rl.validate(&p("rate_limit"))?;
            }
            for key in s.endpoints.keys() {
                crate::validation::validate_key(name, key)?;
            }
            s.redirects.validate(&p("redirects"))?;
            if s.openapi.as_ref().is_some_and(|o| o.spec.trim().is_empty()) {
                return Err(bad(p("openapi.spec"), "required: the path of an OpenAPI 3.0 or 3.1 document"));
            }
        }
        crate::routing::price::validate_table(&self.prices)?;
        for (name, r) in &self.routes {
            crate::routing::config::validate(name, r, &self.services)?;
        }
        self.audit.validate()?;
        self.otel.validate()?;
        self.faults.validate(|s| self.services.contains_key(s))?;
        self.interceptors.validate()?;
        self.cache.validate()?;
        if let Some(s) = &self.config_source {
            s.validate()?;
        }
        for (name, r) in &self.routes {
            let embeddings = |n: &str| self.routes.get(n).is_some_and(|e| e.kind == crate::routing::config::RouteKind::Embeddings);
            let chat = r.kind == crate::routing::config::RouteKind::Chat && r.adapter == crate::routing::config::AdapterKind::OpenaiCompatible;
            r.cache.validate(&format!("routes.{name}.cache"), chat, &embeddings)?;
        }
        for name in self.mock.services.keys() {
            if !self.services.contains_key(name) {
                return Err(bad(format!("mock.services.{name}"), "unknown service"));
            }
        }
        if let Some(l) = &self.metrics.listen {
            if l.parse::<std::net::SocketAddr>().is_err() {
                return Err(bad("metrics.listen".into(), format!("expected host:port with an IP address (e.g. 127.0.0.1:9464), got {:?}", escape_control(l))));
            }
        }
        Ok(())
    }

    pub fn service(&self, name: &str) -> Option<&ServiceConfig> {
        self.services.get(name)
    }

    /// A short, stable hash of the whole config (its canonical JSON): the same
    /// config gives the same version in every language and process.
    pub fn version(&self) -> String {
        let text = serde_json::to_string(self).expect("a config always serialises");
        // FNV-1a: a label for humans and logs, not a security boundary.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{:012x}", h >> 16)
    }
}

/// Turns serde's message into `path: expected ..., got ...`.
pub(crate) fn describe_error(path: &str, serde_msg: &str) -> String {
    // A part read with its own path tracker (`credentials::AuthConfig`) says where inside
    // it the error is: `@token.value: invalid type...`.
    if let Some(rest) = serde_msg.strip_prefix('@') {
        if let Some((inner, msg)) = rest.split_once(": ") {
            let joined = match (path, inner) {
                (".", _) => inner.to_string(),
                (_, ".") => path.to_string(),
                _ if inner.starts_with('[') => format!("{path}{inner}"),
                _ => format!("{path}.{inner}"),
            };
            return describe_error(&joined, msg);
        }
    }
    let path = if path == "." { "config".to_string() } else { path.to_string() };
    if let Some(rest) = serde_msg.strip_prefix("unknown field `") {
        let key = rest.split('`').next().unwrap_or("");
        // serde_path_to_error already ends the path with the unknown key.
        let full = if key.is_empty() {
            // An empty key still gets a name a reader can see.
            match path.trim_matches('.') {
                "" | "config" => "\"\"".to_string(),
                base => format!("{base}.\"\""),
            }
        } else if path == "config" {
            key.to_string()
        } else if path == key || path.ends_with(&format!(".{key}")) {
            path.clone()
        } else {
            format!("{path}.{key}")
        };
        let expected = rest.split_once("expected ").map(|(_, e)| format!(" (expected {e})")).unwrap_or_default();
        return format!("{full}: unknown key{expected}");
    }
    if let Some(rest) = serde_msg.strip_prefix("missing field `") {
        let key = rest.split('`').next().unwrap_or("");
        return format!("{path}.{key}: required");
    }
    // "invalid value: integer `-1`, expected u32" / "invalid type: string \"x\", expected u64"
    let (got, expected) = match serde_msg.split_once(", expected ") {
        Some((g, e)) => (g, e),
        None => return format!("{path}: {serde_msg}"),
    };
    let got = got
        .trim_start_matches("invalid value: ")
        .trim_start_matches("invalid type: ")
        .replace('`', "");
    let got = got.strip_prefix("integer ").map(str::to_string).unwrap_or(got);
    let got = got.strip_prefix("floating point ").map(str::to_string).unwrap_or(got);
    let expected = match expected {
        e if e.starts_with('u') && e[1..].chars().all(|c| c.is_ascii_digit()) => "an integer >= 0".to_string(),
        "f64" | "f32" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        e => e.to_string(),
    };
    format!("{path}: expected {expected}, got {got}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        Config::from_value(v).unwrap_err().message
    }

    #[test]
    fn defaults_match_design() {
        let c = Config::from_value(json!({"services": {"orders": {"base_url": "http://127.0.0.1:1"}}})).unwrap();
        let s = &c.services["orders"];
        assert_eq!((s.timeouts.connect_ms, s.timeouts.response_ms, s.timeouts.request_ms), (1000, 3000, 15000));
        assert_eq!(s.retry.max_retries, 1);
        assert_eq!(s.retry.base_delay_ms, 200);
        assert!(!s.retry.retry_on_500);
        assert_eq!(s.retry.budget_ratio, 0.2);
        assert_eq!((s.breaker.failure_threshold, s.breaker.open_ms, s.breaker.half_open_probes), (5, 30000, 1));
        assert_eq!(s.bulkhead.max_concurrency, 200);
        assert!(c.log.enabled);
    }

    #[test]
    fn negative_integer_names_field() {
        let m = err(json!({"services": {"orders": {"base_url": "http://x", "retry": {"max_retries": -1}}}}));
        assert_eq!(m, "services.orders.retry.max_retries: expected an integer >= 0, got -1");
    }

    #[test]
    fn unknown_key_names_field() {
        let m = err(json!({"services": {"orders": {"base_url": "http://x", "retry": {"max_retry": 2}}}}));
        assert!(m.starts_with("services.orders.retry.max_retry: unknown key"), "{m}");
        // Found by fuzzing: an empty key is still named, a control character shown escaped.
        let m = err(json!({"": 1}));
        assert!(m.starts_with("\"\": unknown key"), "{m}");
        let m = err(json!({"services": {"orders": {"base_url": "http://x", "": 1}}}));
        assert!(m.starts_with("services.orders.\"\": unknown key"), "{m}");
        let m = err(json!({"lo\ng": 1}));
        assert!(m.starts_with("lo\\ng: unknown key") && !m.contains('\n'), "{m}");
    }

    #[test]
    fn wrong_type_names_field() {
        let m = err(json!({"services": {"orders": {"base_url": "http://x", "timeouts": {"connect_ms": "fast"}}}}));
        assert_eq!(m, "services.orders.timeouts.connect_ms: expected an integer >= 0, got string \"fast\"");
    }

    #[test]
    fn missing_base_url() {
        assert!(err(json!({"services": {"orders": {}}})).starts_with("services.orders.base_url: required"));
    }

    #[test]
    fn ratio_out_of_range() {
        let m = err(json!({"services": {"o": {"base_url": "http://x", "retry": {"budget_ratio": 1.5}}}}));
        assert!(m.starts_with("services.o.retry.budget_ratio:"), "{m}");
    }

    #[test]
    fn yaml_and_toml_load_the_same_shape() {
        let y = Config::from_str_with_format("services:\n  a:\n    base_url: http://127.0.0.1:1\n    retry: { max_retries: 3 }\n", "yaml").unwrap();
        let t = Config::from_str_with_format("[services.a]\nbase_url = \"http://127.0.0.1:1\"\n[services.a.retry]\nmax_retries = 3\n", "toml").unwrap();
        assert_eq!(y.services["a"].retry.max_retries, 3);
        assert_eq!(t.services["a"].retry.max_retries, 3);
    }

    #[test]
    fn base_url_password_is_redacted() {
        let m = err(json!({"services": {"b": {"base_url": "ftp://user:SECRET@host"}}}));
        assert!(m.starts_with("services.b.base_url:") && m.contains("user:***@host") && !m.contains("SECRET"), "{m}");
        let c = Config::from_value(json!({"services": {"b": {"base_url": "http://user:SECRET@host"}}})).unwrap();
        assert!(!format!("{c:?}").contains("SECRET"));
    }

    #[test]
    fn framing_headers_in_config_are_refused() {
        for h in ["Host", "Content-Length", "transfer-encoding", "Connection", "Proxy-Authorization"] {
            let m = err(json!({"services": {"a": {"base_url": "http://x", "headers": {h: "v"}}}}));
            assert!(m.starts_with(&format!("services.a.headers.{h}:")), "{m}");
        }
    }

    #[test]
    fn client_name_with_control_character_names_field() {
        let m = err(json!({"client": {"name": "bff\napi"}}));
        assert!(m.starts_with("client.name:") && !m.contains('\n'), "{m}");
    }

    #[test]
    fn limits_and_redirects_defaults() {
        let c = Config::from_value(json!({"services": {"a": {"base_url": "http://x"}}})).unwrap();
        let s = &c.services["a"];
        assert_eq!((s.limits.max_response_bytes, s.limits.max_endpoints), (64 * 1024 * 1024, 1000));
        assert!(!s.redirects.follow);
    }

    #[test]
    fn deep_config_text_is_refused_fast() {
        let t = std::time::Instant::now();
        let yaml = format!("services: {}", "[".repeat(100_000));
        assert!(Config::from_str_with_format(&yaml, "yaml").unwrap_err().message.contains("nested deeper than 512"));
        let json_text = format!("{{\"services\": {}", "[".repeat(100_000));
        assert!(Config::from_str_with_format(&json_text, "json").is_err());
        let toml_text = format!("a = {}", "[".repeat(100_000));
        assert!(Config::from_str_with_format(&toml_text, "toml").is_err());
        let block: String = (0..2000).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
        assert!(Config::from_str_with_format(&block, "yaml").is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[test]
    fn version_is_stable_and_changes_with_the_config() {
        let a = Config::from_value(json!({"services": {"a": {"base_url": "http://x"}}})).unwrap();
        let b = Config::from_value(json!({"services": {"a": {"base_url": "http://x", "retry": {"max_retries": 1}}}})).unwrap();
        let c = Config::from_value(json!({"services": {"a": {"base_url": "http://y"}}})).unwrap();
        assert_eq!(a.version(), b.version(), "defaults spelled out are the same config");
        assert_ne!(a.version(), c.version());
        assert_eq!(a.version().len(), 12);
    }

    #[test]
    fn header_values_are_redacted_in_debug() {
        let c = Config::from_value(json!({"services": {"a": {"base_url": "http://x", "headers": {"authorization": "Bearer s3cr3t"}}}})).unwrap();
        assert!(!format!("{c:?}").contains("s3cr3t"));
    }
}

//! The `routes:` section: which providers serve a route, how one is chosen, and
//! what happens when they fail. Defaults follow DESIGN.md ("Routing").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::price::Price;
use crate::error::HarnessError;
use crate::redact::escape_control;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    #[default]
    WeightedHealth,
    Priority,
    LeastLatency,
}

impl Strategy {
    /// The name in config and in the state API.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::WeightedHealth => "weighted-health",
            Strategy::Priority => "priority",
            Strategy::LeastLatency => "least-latency",
        }
    }
}

/// What a route's providers are called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RouteKind {
    /// `chat` and `chat_stream` (and plain requests).
    #[default]
    Chat,
    /// `embed`: texts in, vectors out.
    Embeddings,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Criticality {
    /// Never a synthetic answer: a cached one at most, else `NoHealthyProviderError`.
    #[default]
    Core,
    /// May be served the configured static fallback.
    NonCore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AdapterKind {
    /// Requests and responses pass through as they are.
    #[default]
    Http,
    /// The OpenAI chat-completions shape, normalised per provider.
    OpenaiCompatible,
}

/// The built-in adapters by config name (`adapters::built_in` has each one).
pub const BUILT_IN_ADAPTERS: [&str; 4] = ["openai-compatible", "anthropic", "gemini", "azure-openai"];
/// The built-in adapters with an embeddings call (`ChatAdapter::embeds`).
pub const EMBEDDING_ADAPTERS: [&str; 3] = ["openai-compatible", "azure-openai", "gemini"];

/// A host adapter's name: letters, digits, `-` and `_`, at most 64, not a built-in's.
pub fn valid_host_adapter_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') && !BUILT_IN_ADAPTERS.contains(&name)
}

/// What a stream does when it breaks after its first chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MidStream {
    /// Hold chunks until the answer is complete or `hold_bytes` is reached; a failure
    /// while holding restarts on a backup unseen by the caller.
    #[default]
    Hold,
    /// Pass chunks at once; a failure gives the caller a `restart` chunk, then the new answer.
    Restart,
    /// Pass chunks at once; a failure is an error.
    Error,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StreamConfig {
    pub mid_stream: MidStream,
    /// With `hold`: content bytes held before chunks start flowing to the caller.
    pub hold_bytes: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig { mid_stream: MidStream::Hold, hold_bytes: 1 << 20 }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RouteConfig {
    pub kind: RouteKind,
    pub strategy: Strategy,
    pub criticality: Criticality,
    pub adapter: AdapterKind,
    /// Streaming only: the first content chunk must come within this long of the request.
    pub ttft_ms: u64,
    /// The total deadline across every provider (default: the largest `timeouts.request_ms`
    /// among the providers' services).
    pub request_ms: Option<u64>,
    /// Attempts across all providers, the first included.
    pub max_attempts: u32,
    /// A 5xx is retried on the same provider this many times before failing over.
    pub same_provider_retries: u32,
    /// Failovers and retries as a share of the route's requests (plus `budget_min_per_sec`).
    pub budget_ratio: f64,
    pub budget_min_per_sec: u32,
    /// Longest `Retry-After` waited out when no other provider can serve.
    pub max_retry_after_ms: u64,
    /// A 429 whose `Retry-After` is at most this long is waited out on the same provider
    /// (once, within the deadline) before failing over; 0: fail over at once.
    pub wait_retry_after_ms: u64,
    /// Health window: outcomes older than this count for (almost) nothing.
    pub health_window_ms: u64,
    /// The path a chat call posts to (providers whose adapter has its own path use that).
    pub path: String,
    /// `max_tokens` for providers whose format requires one (Anthropic's), when neither the
    /// request nor the provider gives one (default 4096).
    pub max_tokens: Option<u32>,
    /// What an answer that does not match the request's `response_format` comes to.
    pub structured_output: StructuredOutput,
    pub stream: StreamConfig,
    pub providers: Vec<ProviderConfig>,
    /// A non-retryable provider error code (e.g. `context_length_exceeded`) sent to another provider.
    pub on_error: BTreeMap<String, OnError>,
    pub fallback: FallbackConfig,
    /// A limit on the route's requests, before any provider's own.
    pub rate_limit: Option<crate::ratelimit::RateLimitConfig>,
    /// Hedged requests: a second attempt on another provider when the first is slow (not streams).
    pub hedge: Option<crate::hedge::HedgeConfig>,
    /// Coalescing of identical chats in flight, and the exact and semantic answer caches.
    pub cache: crate::cache::RouteCacheConfig,
}

impl Default for RouteConfig {
    fn default() -> Self {
        RouteConfig {
            kind: RouteKind::Chat,
            strategy: Strategy::WeightedHealth,
            criticality: Criticality::Core,
            adapter: AdapterKind::Http,
            ttft_ms: 8000,
            request_ms: None,
            max_attempts: 3,
            same_provider_retries: 1,
            budget_ratio: 0.2,
            budget_min_per_sec: 10,
            max_retry_after_ms: 30000,
            wait_retry_after_ms: 0,
            health_window_ms: 60000,
            path: "/v1/chat/completions".into(),
            max_tokens: None,
            structured_output: StructuredOutput::default(),
            stream: StreamConfig::default(),
            providers: Vec::new(),
            on_error: BTreeMap::new(),
            fallback: FallbackConfig::default(),
            rate_limit: None,
            hedge: None,
            cache: Default::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnInvalid {
    /// A failed attempt: the next provider is tried (within `max_attempts` and the budget).
    #[default]
    Failover,
    /// A `SchemaError` to the caller at once.
    Error,
}

/// `response_format: json_object | json_schema` answers are checked (JSON Schema, by the
/// core's validator): the caller never gets invalid JSON labelled as structured.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StructuredOutput {
    pub on_invalid: OnInvalid,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OnError {
    pub provider: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FallbackConfig {
    /// Serve the last good answer for the same request this long after it was fetched (0: off).
    pub cache_ttl_ms: u64,
    /// Most answers kept.
    pub cache_entries: u32,
    /// Part of the cache key: change it to stop serving answers cached before.
    pub version: String,
    /// `criticality: non-core` only: the answer when nothing else can be served (a string is
    /// the assistant's content for `openai-compatible`; any JSON is the body otherwise).
    #[serde(rename = "static")]
    pub static_answer: Option<Value>,
}

impl Default for FallbackConfig {
    fn default() -> Self {
        FallbackConfig { cache_ttl_ms: 0, cache_entries: 1000, version: "v1".into(), static_answer: None }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderConfig {
    pub id: String,
    /// The service (base URL, timeouts, breaker, bulkhead, auth) this provider is reached through.
    pub service: String,
    /// The model name sent to this provider.
    pub model: Option<String>,
    /// Share of traffic; 0 means registered but not serving.
    pub weight: u32,
    /// The weight an unhealthy provider moves toward (default: weight / 20, at least 1).
    pub degraded_weight: Option<u32>,
    /// In-flight requests on this provider for this route (default: the service's bulkhead only).
    pub max_concurrency: Option<u32>,
    /// What this provider's answers cost; wins over the top-level `prices:` entry for `model`.
    pub price: Option<Price>,
    pub params: Params,
    /// Takes the partial answer as an assistant prefill and continues it.
    pub accepts_prefill: bool,
    /// The provider's wire format: `openai-compatible` (default on an `openai-compatible`
    /// route), `anthropic`, `gemini`, `azure-openai`, or the name of a host adapter
    /// (`register_adapter`).
    pub adapter: Option<String>,
    /// `max_tokens` for this provider when the request gives none (formats that require one).
    pub max_tokens: Option<u32>,
    /// `anthropic`: the `anthropic-version` header (default 2023-06-01); `azure-openai`: the
    /// `api-version` parameter (default 2024-10-21); `gemini`: the path's version (default v1beta).
    pub api_version: Option<String>,
    /// `azure-openai`: the deployment (default: `model`).
    pub deployment: Option<String>,
    /// Embeddings: most inputs per request to this provider (default: its format's limit,
    /// 2048 for OpenAI and Azure, 100 for Gemini).
    pub max_batch: Option<u32>,
    /// Merged into this provider's request body last (its own parameters).
    pub extra_body: Option<serde_json::Map<String, Value>>,
}

/// Per-provider parameter normalisation for `openai-compatible`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    pub temperature: Option<TemperatureParam>,
    /// The field the token limit goes in: `max_tokens` or `max_completion_tokens`.
    pub max_tokens_field: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RangeMode {
    /// Values outside the range are moved to its nearest end.
    #[default]
    Clamp,
    /// OpenAI's 0..2 is mapped linearly onto the range.
    Scale,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TemperatureParam {
    pub range: [f64; 2],
    pub mode: RangeMode,
}

impl RouteConfig {
    /// The path a call posts to: an embeddings route left on the chat default posts to `/v1/embeddings`.
    pub fn call_path(&self) -> &str {
        if self.kind == RouteKind::Embeddings && self.path == "/v1/chat/completions" {
            "/v1/embeddings"
        } else {
            &self.path
        }
    }
}

impl ProviderConfig {
    pub fn degraded(&self) -> u32 {
        self.degraded_weight.unwrap_or_else(|| if self.weight == 0 { 0 } else { self.weight.div_ceil(20) }).min(self.weight)
    }
}

/// Checks a route against the services it names.
pub(crate) fn validate<S>(name: &str, r: &RouteConfig, services: &BTreeMap<String, S>) -> Result<(), HarnessError> {
    let bad = |field: &str, msg: String| HarnessError::config(format!("routes.{name}.{field}: {msg}"));
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(HarnessError::config(format!("routes.{}: a route name must be printable", escape_control(name))));
    }
    if services.contains_key(name) {
        return Err(HarnessError::config(format!("routes.{name}: a service has the same name (requests name either, so names must differ)")));
    }
    if r.providers.is_empty() {
        return Err(bad("providers", "expected at least one provider".into()));
    }
    if let Some(h) = &r.hedge {
        h.validate(&format!("routes.{name}.hedge"))?;
    }
    if r.max_attempts == 0 {
        return Err(bad("max_attempts", "expected an integer >= 1, got 0".into()));
    }
    for (field, v) in [("ttft_ms", r.ttft_ms), ("health_window_ms", r.health_window_ms)] {
        if v == 0 {
            return Err(bad(field, "expected an integer >= 1, got 0".into()));
        }
    }
    if r.request_ms == Some(0) {
        return Err(bad("request_ms", "expected an integer >= 1, got 0".into()));
    }
    if !(0.0..=1.0).contains(&r.budget_ratio) || r.budget_ratio.is_nan() {
        return Err(bad("budget_ratio", format!("expected a number from 0 to 1, got {}", r.budget_ratio)));
    }
    if !r.path.starts_with('/') {
        return Err(bad("path", format!("expected a path starting with `/`, got {:?}", escape_control(&r.path))));
    }
    crate::target::check_path(&r.path).map_err(|e| bad("path", e.message))?;
    let mut ids: Vec<&str> = Vec::new();
    for (i, p) in r.providers.iter().enumerate() {
        let f = |field: &str| format!("providers[{i}].{field}");
        if p.id.is_empty() || p.id.chars().any(|c| c.is_control()) || p.id.len() > 128 {
            return Err(bad(&f("id"), "required: printable text of at most 128 characters".into()));
        }
        if ids.contains(&p.id.as_str()) {
            return Err(bad(&f("id"), format!("`{}` is used twice", p.id)));
        }
        ids.push(&p.id);
        if !services.contains_key(&p.service) {
            let known: Vec<&str> = services.keys().map(String::as_str).collect();
            return Err(bad(&f("service"), format!("unknown service `{}` (configured: {})", escape_control(&p.service), known.join(", "))));
        }
        if let Some(d) = p.degraded_weight {
            if d > p.weight {
                return Err(bad(&f("degraded_weight"), format!("must be <= weight ({}), got {d}", p.weight)));
            }
        }
        if p.max_concurrency == Some(0) {
            return Err(bad(&f("max_concurrency"), "expected an integer >= 1, got 0".into()));
        }
        if let Some(price) = &p.price {
            price.validate(&format!("routes.{name}.{}", f("price")))?;
        }
        if let Some(t) = &p.params.temperature {
            let [lo, hi] = t.range;
            if !(lo.is_finite() && hi.is_finite() && lo >= 0.0 && lo <= hi) {
                return Err(bad(&f("params.temperature.range"), format!("expected [low, high] with 0 <= low <= high, got [{lo}, {hi}]")));
            }
        }
        if let Some(field) = &p.params.max_tokens_field {
            if field != "max_tokens" && field != "max_completion_tokens" {
                return Err(bad(&f("params.max_tokens_field"), format!("expected max_tokens or max_completion_tokens, got {:?}", escape_control(field))));
            }
        }
        if r.adapter == AdapterKind::OpenaiCompatible && p.model.as_deref().unwrap_or("").is_empty() {
            return Err(bad(&f("model"), "required with adapter openai-compatible".into()));
        }
        if let Some(a) = &p.adapter {
            if r.adapter != AdapterKind::OpenaiCompatible {
                return Err(bad(&f("adapter"), "needs the route's `adapter: openai-compatible` (the shape the route's callers speak)".into()));
            }
            if !BUILT_IN_ADAPTERS.contains(&a.as_str()) && !valid_host_adapter_name(a) {
                return Err(bad(
                    &f("adapter"),
                    format!("unknown adapter {:?}: one of {} or a host adapter's name (letters, digits, `-`, `_`, at most 64)", escape_control(a), BUILT_IN_ADAPTERS.join(", ")),
                ));
            }
        }
        for (field, v) in [("api_version", &p.api_version), ("deployment", &p.deployment)] {
            if let Some(v) = v {
                if v.is_empty() || v.len() > 128 || !v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                    return Err(bad(&f(field), format!("expected letters, digits, `-`, `_` or `.` (at most 128), got {:?}", escape_control(v))));
                }
            }
        }
        // The model goes into Gemini's path: it must not change it.
        if p.adapter.as_deref() == Some("gemini") {
            if let Some(m) = p.model.as_deref().filter(|m| !m.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))) {
                return Err(bad(&f("model"), format!("a gemini model name is letters, digits, `-`, `_` and `.`, got {:?}", escape_control(m))));
            }
        }
        if p.adapter.as_deref() == Some("azure-openai") && p.deployment.is_none() {
            if let Some(m) = p.model.as_deref().filter(|m| !m.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))) {
                return Err(bad(&f("deployment"), format!("required: the model {:?} cannot name a deployment", escape_control(m))));
            }
        }
        if r.kind == RouteKind::Embeddings {
            let name = p.adapter.as_deref().unwrap_or("openai-compatible");
            if !EMBEDDING_ADAPTERS.contains(&name) {
                return Err(bad(&f("adapter"), format!("{name:?} has no embeddings call (openai-compatible, azure-openai and gemini do)")));
            }
        }
        if p.max_batch == Some(0) {
            return Err(bad(&f("max_batch"), "expected an integer >= 1, got 0".into()));
        }
        if p.max_tokens == Some(0) {
            return Err(bad(&f("max_tokens"), "expected an integer >= 1, got 0".into()));
        }
    }
    if r.providers.iter().all(|p| p.weight == 0) {
        return Err(bad("providers", "at least one provider needs a weight above 0".into()));
    }
    for (code, target) in &r.on_error {
        if !ids.contains(&target.provider.as_str()) {
            return Err(bad(&format!("on_error.{}.provider", escape_control(code)), format!("unknown provider `{}` (this route has: {})", escape_control(&target.provider), ids.join(", "))));
        }
    }
    if r.fallback.static_answer.as_ref().is_some_and(|v| !v.is_null()) && r.criticality == Criticality::Core {
        return Err(bad("fallback.static", "only for criticality non-core: a core route never gets a synthetic answer".into()));
    }
    if let Some(rl) = &r.rate_limit {
        rl.validate(&format!("routes.{name}.rate_limit"))?;
    }
    if r.kind == RouteKind::Embeddings && r.adapter != AdapterKind::OpenaiCompatible {
        return Err(bad("adapter", "a route of kind embeddings needs `adapter: openai-compatible`".into()));
    }
    if r.max_tokens == Some(0) {
        return Err(bad("max_tokens", "expected an integer >= 1, got 0".into()));
    }
    if r.fallback.cache_entries == 0 {
        return Err(bad("fallback.cache_entries", "expected an integer >= 1, got 0".into()));
    }
    Ok(())
}

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
/// host exception's message is, since its class already names the kind).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ErrorView {
    /// `TimeoutError`, `HttpStatusError`, ... (`ErrorKind::NAMES`).
    #[schemars(extend("enum" = ["HarnessError", "TimeoutError", "CircuitOpenError", "BulkheadFullError", "RateLimitedError", "HttpStatusError", "AuthError", "SchemaError", "ConnectError", "CancelledError", "NoHealthyProviderError", "ConfigError", "ProtocolError", "ResponseTooLargeError", "DuplicateInFlightError"]))]
    pub kind: &'static str,
    /// The engine's message alone.
    pub message: String,
    /// The message and its context (service, endpoint, status, attempts, trace id).
    pub text: String,
    /// `TimeoutError`: `connect`, `response`, `idle`, `ttft` or `total`.
    #[schemars(extend("enum" = ["connect", "response", "idle", "ttft", "total", null]))]
    pub phase: Option<&'static str>,
    pub service: Option<String>,
    pub endpoint: Option<String>,
    pub method: Option<String>,
    pub attempts: u32,
    pub status: Option<u16>,
    /// The downstream's normalised error code.
    pub code: Option<String>,
    pub retry_after_ms: Option<u64>,
    pub trace_id: Option<String>,
    /// Routed requests: the provider whose answer this error is.
    pub provider: Option<String>,
    /// `NoHealthyProviderError`: each provider and its last error (or why it was not tried).
    pub provider_errors: Vec<ProviderError>,
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
    ViewSpec { name: "routing_state", args: &["route"], returns: "RouteState", doc: "Per provider of the route: weights, health, breaker, in-flight, cooling and last error." },
    ViewSpec { name: "credentials_state", args: &[], returns: "[CredentialState]", doc: "Per service with credentials: status, expiry, last refresh and error, pool keys. Never a secret." },
    ViewSpec { name: "breaker_details", args: &["service", "method", "path", "endpoint?"], returns: "BreakerInfo", doc: "One breaker with its phase and its current window's rates." },
    ViewSpec { name: "breakers", args: &[], returns: "[BreakerInfo]", doc: "Every breaker the client has state for." },
];

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
        "RouteState" => crate::routing::RouteState,
        "CredentialState" => crate::credentials::CredentialState,
        "BreakerInfo" => crate::breaker::BreakerInfo,
    }
    let defs: serde_json::Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    let views: Vec<Value> = VIEWS.iter().map(|v| serde_json::json!({"name": v.name, "args": v.args, "returns": v.returns, "doc": v.doc})).collect();
    serde_json::json!({"roots": roots, "$defs": defs, "views": views, "errors": crate::error::ErrorKind::NAMES})
}

//! The values that cross UniFFI on the request path and in errors: requests, responses,
//! stream heads, mocks, what routing did, and the core error flattened. Translation only;
//! every check is the core's (`Request::try_from` hands bad input to it).

use harness_core::transport::mock::MockResponse;
use harness_core::view::ErrorView;
use harness_core::{Body, HarnessError, Request, Response, Routed, Usage};

/// One header or query parameter; a list of these keeps order and repeats.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeEntry {
    pub name: String,
    pub value: String,
}

/// A request as the facade passes it; `json` is JSON text, sent byte for byte after the
/// core's checks (`Body::JsonText`).
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeRequest {
    pub service: String,
    pub method: String,
    pub path: String,
    pub endpoint: Option<String>,
    pub query: Vec<NativeEntry>,
    pub headers: Vec<NativeEntry>,
    pub json: Option<String>,
    pub body: Option<Vec<u8>>,
    pub idempotency_key: Option<String>,
    /// Checked by the core's rule (`harness_core::request::millis`): a negative is refused there.
    pub timeout_ms: Option<i64>,
    pub traceparent: Option<String>,
    /// Who the call is made for (a user or tenant id): the audit record's `principal`, never sent.
    pub principal: Option<String>,
}

#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeResponse {
    pub status: u16,
    pub headers: Vec<NativeEntry>,
    pub body: Vec<u8>,
    pub elapsed_ms: f64,
    pub attempts: u32,
    pub trace_id: String,
    /// Set when the request named a route: who answered, and how.
    pub routed: Option<NativeRouted>,
}

/// An opened stream's head, and the handle its chunks are read with (`request_path`).
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeStreamHead {
    /// First, so the facade can close a stream whose caller has gone without decoding the rest.
    pub stream: u64,
    pub status: u16,
    pub headers: Vec<NativeEntry>,
    pub attempts: u32,
    pub trace_id: String,
}

/// What `NativeClient::mock` answers with; `json` is JSON text the facade wrote.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeMockResponse {
    /// Signed, so a negative or too-large status from the host is a `ConfigError`, not a wrap.
    pub status: i32,
    pub json: Option<String>,
    pub body: Option<String>,
    pub headers: Vec<NativeEntry>,
    pub latency_ms: i64,
}

impl TryFrom<NativeMockResponse> for MockResponse {
    type Error = NativeError;

    fn try_from(r: NativeMockResponse) -> Result<MockResponse, NativeError> {
        let status = u16::try_from(r.status)
            .map_err(|_| config_error(format!("mock.status: expected an HTTP status from 200 to 999, got {}", r.status)))?;
        let latency_ms = u64::try_from(r.latency_ms).map_err(|_| config_error(format!("mock.latency_ms: must not be negative, got {}", r.latency_ms)))?;
        let json = match r.json {
            Some(text) => {
                harness_core::json::check_text("mock.json", text.as_bytes())?;
                Some(harness_core::json::parse_checked(&text).map_err(|e| config_error(format!("mock.json: not JSON: {e}")))?)
            }
            None => None,
        };
        Ok(MockResponse { status, json, body: r.body, headers: pairs(r.headers), latency_ms })
    }
}

/// The core error, flattened; the Kotlin facade maps `kind` to its sealed exception tree.
#[derive(uniffi::Error, Debug, Clone)]
pub enum NativeError {
    Failure {
        /// Stable kind name, e.g. `TimeoutError` (see `ErrorKind::NAMES`).
        kind: String,
        /// The readable message (core `Display`: kind, message, context): no secrets, no body.
        detail: String,
        /// The core's message alone (no kind name, no context). Not `message`: that name
        /// is `Throwable.message` in the generated Kotlin.
        reason: String,
        service: Option<String>,
        endpoint: Option<String>,
        method: Option<String>,
        attempts: u32,
        status: Option<u16>,
        code: Option<String>,
        retry_after_ms: Option<u64>,
        trace_id: Option<String>,
        phase: Option<String>,
        body: Option<Vec<u8>>,
        /// Routed requests: the provider whose answer this error is.
        provider: Option<String>,
        /// `NoHealthyProviderError`: each provider of the route and its last error (or why it
        /// was not tried), in config order.
        provider_errors: Vec<NativeProviderError>,
    },
}

/// One provider of a route and what went wrong with it.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeProviderError {
    pub provider: String,
    pub error: String,
}

impl std::fmt::Display for NativeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let NativeError::Failure { detail, .. } = self;
        f.write_str(detail)
    }
}

impl std::error::Error for NativeError {}

impl From<HarnessError> for NativeError {
    fn from(e: HarnessError) -> Self {
        // The core's view of the error (its kind, message and context); `detail` is the whole
        // readable text, which the facade's exception message is.
        let v = ErrorView::of(&e);
        NativeError::Failure {
            kind: v.kind.to_string(),
            detail: e.to_string(),
            reason: v.message,
            phase: v.phase.map(str::to_string),
            service: v.service,
            endpoint: v.endpoint,
            method: v.method,
            attempts: v.attempts,
            status: v.status,
            code: v.code,
            retry_after_ms: v.retry_after_ms,
            trace_id: v.trace_id,
            body: e.body.map(|b| b.to_vec()),
            provider: v.provider,
            provider_errors: v.provider_errors.into_iter().map(|p| NativeProviderError { provider: p.provider, error: p.error }).collect(),
        }
    }
}

pub(crate) fn config_error(message: String) -> NativeError {
    HarnessError::config(message).into()
}

pub(crate) fn pairs(entries: Vec<NativeEntry>) -> Vec<(String, String)> {
    entries.into_iter().map(|e| (e.name, e.value)).collect()
}

impl TryFrom<NativeRequest> for Request {
    type Error = NativeError;

    fn try_from(r: NativeRequest) -> Result<Request, NativeError> {
        let body = match (r.json, r.body) {
            (Some(_), Some(_)) => return Err(config_error("body: give either json or body, not both".into())),
            // Not parsed here: the core checks nesting, NaN and lone surrogates and sends it as is.
            (Some(text), None) => Body::JsonText(text.into_bytes().into()),
            (None, Some(bytes)) => Body::Bytes(bytes.into()),
            (None, None) => Body::Empty,
        };
        Ok(Request {
            service: r.service,
            method: r.method,
            path: r.path,
            endpoint: r.endpoint,
            query: pairs(r.query),
            headers: pairs(r.headers),
            body,
            idempotency_key: r.idempotency_key,
            timeout_ms: r.timeout_ms.map(|t| harness_core::request::millis("request.timeout_ms", t as f64)).transpose()?,
            traceparent: r.traceparent,
            principal: r.principal,
        })
    }
}

impl From<Response> for NativeResponse {
    fn from(r: Response) -> Self {
        NativeResponse {
            status: r.status,
            headers: r.headers.into_iter().map(|(name, value)| NativeEntry { name, value }).collect(),
            body: r.body.to_vec(),
            elapsed_ms: r.elapsed_ms,
            attempts: r.attempts,
            trace_id: r.trace_id,
            routed: r.routed.map(|r| (*r).into()),
        }
    }
}

/// A core `Client`; every method is a direct call into it. The request path finds it by
/// `handle` (`request_path`), which stops finding it once this object is dropped.
/// Token counts as the provider reported them.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// Attempts one provider got, in the order providers were first tried.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeProviderAttempts {
    pub provider: String,
    pub attempts: u32,
}

/// What routing did for one request (`harness_core::Routed`).
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeRouted {
    pub route: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub attempts_by_provider: Vec<NativeProviderAttempts>,
    /// `cache` or `static` when no provider answered.
    pub fallback: Option<String>,
    pub usage: Option<NativeUsage>,
    pub cost: Option<f64>,
}

impl From<Usage> for NativeUsage {
    fn from(u: Usage) -> Self {
        NativeUsage { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens }
    }
}

fn attempts(list: Vec<(String, u32)>) -> Vec<NativeProviderAttempts> {
    list.into_iter().map(|(provider, attempts)| NativeProviderAttempts { provider, attempts }).collect()
}

impl From<Routed> for NativeRouted {
    fn from(r: Routed) -> Self {
        NativeRouted {
            route: r.route,
            provider: r.provider,
            model: r.model,
            attempts_by_provider: attempts(r.attempts_by_provider),
            fallback: r.fallback.map(str::to_string),
            usage: r.usage.map(Into::into),
            cost: r.cost,
        }
    }
}

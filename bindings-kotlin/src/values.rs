//! The values that cross UniFFI on the request path and in errors: responses, stream heads,
//! mocks, what routing did, and the core error flattened (a request crosses as the core's
//! JSON: `request_path::request_frame`). Translation only;
//! every check is the core's.

use harness_core::transport::mock::MockResponse;
use harness_core::view::ErrorView;
use harness_core::{HarnessError, Response};

/// One header or query parameter; a list of these keeps order and repeats.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeEntry {
    pub name: String,
    pub value: String,
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
    pub routed: Option<String>,
    /// Set when a cache had a part in the answer: the core's `CacheStamp` JSON.
    pub cache: Option<String>,
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

/// The core error: its kind (the Kotlin facade maps it to its sealed exception tree), its
/// readable text, and the rest as the core's `ErrorView` JSON, decoded into the generated
/// `ErrorView` (no field of the error is restated here).
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
        /// `ErrorView` as JSON: service, endpoint, method, attempts, status, code,
        /// retry_after_ms, trace_id, phase, provider, provider_errors.
        view: String,
        /// The downstream's raw error body, if any (bytes, not part of the view).
        body: Option<Vec<u8>>,
    },
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
            reason: v.message.clone(),
            view: harness_core::view::to_json(&v).to_string(),
            body: e.body.map(|b| b.to_vec()),
        }
    }
}

pub(crate) fn config_error(message: String) -> NativeError {
    HarnessError::config(message).into()
}

pub(crate) fn pairs(entries: Vec<NativeEntry>) -> Vec<(String, String)> {
    entries.into_iter().map(|e| (e.name, e.value)).collect()
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
            routed: r.routed.map(|r| harness_core::view::to_json(&*r).to_string()),
            cache: r.cache.map(|c| harness_core::view::to_json(&*c).to_string()),
        }
    }
}

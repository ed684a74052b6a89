//! Errors cross as data: every field of a core `HarnessError` in a plain object
//! (`NativeError`) that `index.js` turns into its class. Nothing is encoded in a
//! message string; a fallible synchronous call returns `Either<T, NativeError>`.

use harness_core::{ErrorKind, HarnessError};
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Every field of a core `HarnessError`.
#[napi(object)]
pub struct NativeError {
    /// The class name (`TimeoutError`, ...).
    pub name: String,
    /// The readable message, without the leading class name.
    pub message: String,
    pub service: Option<String>,
    pub endpoint: Option<String>,
    pub method: Option<String>,
    pub attempts: u32,
    pub status: Option<u32>,
    /// The normalised downstream error code.
    pub code: Option<String>,
    pub retry_after_ms: Option<f64>,
    pub trace_id: Option<String>,
    pub phase: Option<String>,
    pub body: Option<Buffer>,
    /// Routed calls: the provider whose answer this error is.
    pub provider: Option<String>,
    /// `NoHealthyProviderError`: each provider of the route and its last error (or why it was
    /// not tried), in config order; empty otherwise.
    pub provider_errors: Vec<NativeProviderError>,
}

/// One provider's last error, as a `NoHealthyProviderError` lists it.
#[napi(object)]
pub struct NativeProviderError {
    pub provider: String,
    pub error: String,
}

/// A synchronous call's result: the value, or the error as data.
pub type Outcome<T> = Either<T, NativeError>;

pub fn outcome<T>(r: std::result::Result<T, HarnessError>) -> Outcome<T> {
    match r {
        Ok(v) => Either::A(v),
        Err(e) => Either::B(native_error(e)),
    }
}

fn display_without_name(e: &HarnessError) -> String {
    let shown = e.to_string();
    let prefix = format!("{}: ", e.name());
    shown.strip_prefix(&prefix).map(str::to_string).unwrap_or(shown)
}

pub fn native_error(e: HarnessError) -> NativeError {
    NativeError {
        name: e.name().to_string(),
        message: display_without_name(&e),
        phase: e.phase().map(str::to_string),
        service: e.service,
        endpoint: e.endpoint,
        method: e.method,
        attempts: e.attempts,
        status: e.status.map(u32::from),
        code: e.code,
        retry_after_ms: e.retry_after_ms.map(|v| v as f64),
        trace_id: e.trace_id,
        body: e.body.map(|b| Buffer::from(Vec::from(b))),
        provider: e.provider,
        provider_errors: e.provider_errors.into_iter().map(|(provider, error)| NativeProviderError { provider, error }).collect(),
    }
}

/// Every error class name, base first (the JS class tree is built from this).
#[napi]
pub fn error_names() -> Vec<String> {
    ErrorKind::NAMES.iter().map(|s| s.to_string()).collect()
}

/// The core's error for a host value that JS could not encode faithfully, naming `field`:
/// `lone_surrogate` (a string that is not valid Unicode), `too_deep` (nested past the limit,
/// where JSON.stringify overflowed its stack) or `non_finite` (NaN or an infinity, which
/// JSON.stringify writes as `null`).
#[napi]
pub fn host_input_error(kind: String, field: String) -> NativeError {
    let e = match kind.as_str() {
        "lone_surrogate" => harness_core::json::lone_surrogate(&field),
        "too_deep" => harness_core::json::too_deep(&field),
        "non_finite" => harness_core::json::non_finite(&field),
        other => HarnessError::config(format!("{field}: {other}")),
    };
    native_error(e)
}

//! What business code asks for, and what it gets back.

use bytes::Bytes;

use crate::error::HarnessError;

/// A host's milliseconds (`timeout_ms`, a mock's latency), one rule for every language and
/// the one the config's `*_ms` keys follow: a whole number at least 0 (`1500.0` is 1500; a
/// fraction, a negative, NaN or infinity is a `ConfigError` naming `field`).
pub fn millis(field: &str, ms: f64) -> Result<u64, HarnessError> {
    if ms.is_finite() && ms >= 0.0 && ms.fract() == 0.0 && ms <= u64::MAX as f64 {
        Ok(ms as u64)
    } else {
        Err(HarnessError::config(format!("{field}: expected an integer >= 0, got {ms}")))
    }
}

#[derive(Debug, Clone, Default)]
pub enum Body {
    #[default]
    Empty,
    Bytes(Bytes),
    /// A JSON value built in Rust; key order is kept.
    Json(serde_json::Value),
    /// JSON text the host serialised (a binding's `JsonWriter` walk or its runtime's
    /// encoder), sent byte for byte after the nesting check.
    JsonText(Bytes),
}

/// One call: which service, which endpoint, which payload; everything else is the pipeline's.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub service: String,
    pub method: String,
    pub path: String,
    /// Label for breaker keys and metrics; default: the path with IDs collapsed to `{id}`.
    pub endpoint: Option<String>,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// Sent as `Idempotency-Key`; makes any method safe to retry.
    pub idempotency_key: Option<String>,
    /// Overrides the service's total timeout (`timeouts.request_ms`).
    pub timeout_ms: Option<u64>,
    /// The caller's W3C `traceparent`, continued downstream.
    pub traceparent: Option<String>,
    /// Who the call is made for (a user or tenant id), kept in the audit record only;
    /// never sent downstream.
    pub principal: Option<String>,
}

impl Request {
    pub fn new(service: impl Into<String>, method: impl Into<String>, path: impl Into<String>) -> Self {
        Request { service: service.into(), method: method.into(), path: path.into(), ..Default::default() }
    }
}

#[cfg(test)]
mod millis_tests {
    use super::millis;

    #[test]
    fn milliseconds_are_whole_and_at_least_zero() {
        assert_eq!(millis("timeout_ms", 0.0).unwrap(), 0);
        assert_eq!(millis("timeout_ms", 250.0).unwrap(), 250);
        assert_eq!(millis("timeout_ms", 1500.0).unwrap(), 1500);
        for bad in [-1.0, 0.5, 1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e30] {
            let e = millis("request.timeout_ms", bad).unwrap_err();
            assert!(e.message.starts_with("request.timeout_ms: expected an integer >= 0"), "{}", e.message);
        }
    }
}

//! What business code asks for, and what it gets back.

use bytes::Bytes;

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

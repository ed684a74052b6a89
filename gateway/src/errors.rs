//! Harness errors as HTTP answers in the OpenAI error shape:
//! `{"error": {"type", "code", "message", "harness_kind", "trace_id"}}`, with the status a
//! client expects (429 with `Retry-After`, 503, 504, ...).

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use harness_core::HarnessError;
use serde_json::json;

/// An error the gateway answers with.
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub code: Option<String>,
    pub message: String,
    pub harness_kind: Option<&'static str>,
    pub trace_id: Option<String>,
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, code: &str, message: impl Into<String>) -> Self {
        ApiError { status, kind, code: Some(code.into()), message: message.into(), harness_kind: None, trace_id: None, retry_after_s: None }
    }

    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "invalid_request_error", "invalid_api_key", "a valid caller key is required (Authorization: Bearer <key>)")
    }

    pub fn forbidden(what: &str) -> Self {
        Self::new(StatusCode::FORBIDDEN, "permission_error", "not_allowed", format!("this caller may not use {what}"))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", "invalid_request", message)
    }
}

impl From<HarnessError> for ApiError {
    fn from(e: HarnessError) -> Self {
        let kind = e.name();
        let (status, kind_str) = match kind {
            "ConfigError" => (StatusCode::BAD_REQUEST, "invalid_request_error"),
            "RateLimitedError" => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error"),
            "TimeoutError" => (StatusCode::GATEWAY_TIMEOUT, "timeout_error"),
            "NoHealthyProviderError" | "CircuitOpenError" | "BulkheadFullError" => (StatusCode::SERVICE_UNAVAILABLE, "service_unavailable_error"),
            "DuplicateInFlightError" => (StatusCode::CONFLICT, "conflict_error"),
            "AuthError" => (StatusCode::BAD_GATEWAY, "upstream_auth_error"),
            // The downstream's own 4xx is the caller's to see; anything else it did is a bad gateway.
            "HttpStatusError" => match e.status {
                Some(s) if (400..500).contains(&s) && s != 401 && s != 403 && s != 407 => (StatusCode::from_u16(s).unwrap_or(StatusCode::BAD_GATEWAY), "upstream_error"),
                _ => (StatusCode::BAD_GATEWAY, "upstream_error"),
            },
            _ => (StatusCode::BAD_GATEWAY, "upstream_error"),
        };
        let retry_after_s = e.retry_after_ms.map(|ms| ms.div_ceil(1000).max(1));
        ApiError {
            status,
            kind: kind_str,
            code: e.code.clone().or_else(|| Some(kind.to_string())),
            message: e.message.clone(),
            harness_kind: Some(kind),
            trace_id: e.trace_id.clone(),
            retry_after_s: if status == StatusCode::TOO_MANY_REQUESTS { retry_after_s.or(Some(1)) } else { retry_after_s },
        }
    }
}

impl ApiError {
    /// The body, also sent as the last event of a stream that fails after its head.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"type": self.kind, "code": self.code, "message": self.message, "harness_kind": self.harness_kind, "trace_id": self.trace_id}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after_s {
            r.headers_mut().insert("retry-after", HeaderValue::from(s));
        }
        r
    }
}

//! JS values to core requests (positional fields, cheaper across napi than an object).

use bytes::Bytes;
use harness_core::{Body, HarnessError, Request};

pub(crate) fn pairs(flat: Option<Vec<String>>, field: &str) -> Result<Vec<(String, String)>, HarnessError> {
    let Some(flat) = flat else { return Ok(Vec::new()) };
    if flat.len() % 2 != 0 {
        return Err(HarnessError::config(format!("request.{field}: expected name/value pairs")));
    }
    let mut it = flat.into_iter();
    let mut out = Vec::with_capacity(it.len() / 2);
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(out)
}

/// The JS-side fields of a request.
#[allow(clippy::too_many_arguments)]
pub fn core_request(
    service: String,
    method: String,
    path: String,
    endpoint: Option<String>,
    query: Option<Vec<String>>,
    headers: Option<Vec<String>>,
    json: Option<String>,
    body: Option<&[u8]>,
    idempotency_key: Option<String>,
    timeout_ms: Option<f64>,
    traceparent: Option<String>,
    principal: Option<String>,
) -> Result<Request, HarnessError> {
    let body = match (json, body) {
        (Some(_), Some(_)) => return Err(HarnessError::config("request.json: give either json or body, not both")),
        // JSON.stringify's text, sent byte for byte; the core checks nesting, NaN and lone surrogates.
        (Some(text), None) => Body::JsonText(Bytes::from(text.into_bytes())),
        (None, Some(buf)) => Body::Bytes(Bytes::copy_from_slice(buf)),
        (None, None) => Body::Empty,
    };
    let timeout_ms = timeout_ms_of(timeout_ms)?;
    Ok(Request {
        service,
        method,
        path,
        endpoint,
        query: pairs(query, "query")?,
        headers: pairs(headers, "headers")?,
        body,
        idempotency_key,
        timeout_ms,
        traceparent,
        principal,
    })
}

/// A JS timeout in milliseconds: an integer >= 0, or none.
pub(crate) fn timeout_ms_of(timeout_ms: Option<f64>) -> Result<Option<u64>, HarnessError> {
    timeout_ms.map(|t| millis_of("request.timeout_ms", t)).transpose()
}

/// A JS duration in milliseconds: an integer >= 0 (an error naming `field` otherwise).
pub(crate) fn millis_of(field: &str, ms: f64) -> Result<u64, HarnessError> {
    if ms.is_finite() && ms >= 0.0 && ms.fract() == 0.0 && ms <= u64::MAX as f64 {
        Ok(ms as u64)
    } else {
        Err(HarnessError::config(format!("{field}: expected an integer >= 0, got {ms}")))
    }
}

/// JSON text from `JSON.stringify` as a value: checked (depth, lone surrogates) before parsing.
pub(crate) fn json_value(field: &str, text: &str) -> Result<serde_json::Value, HarnessError> {
    harness_core::json::check_text(field, text.as_bytes())?;
    harness_core::json::parse_checked(text).map_err(|e| HarnessError::config(format!("{field}: not valid JSON: {e}")))
}

/// The length of `s` in UTF-16 code units (JS string indices).
pub fn utf16_len(s: &str) -> usize {
    if s.is_ascii() { s.len() } else { s.encode_utf16().count() }
}

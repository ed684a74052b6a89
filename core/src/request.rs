//! What business code asks for, and what it gets back.

use bytes::Bytes;
use serde::{Deserialize, Deserializer};

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

/// `millis` for a field read from a host's JSON (`timeout_ms` of a request or a chat call):
/// an integer or a float, or null; anything else is refused with the core's wording.
pub(crate) fn host_millis<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<f64>::deserialize(d)?
        .map(|ms| millis("", ms).map_err(|e| serde::de::Error::custom(e.message.trim_start_matches(": "))))
        .transpose()
}

/// A host's JSON read into `T` (a request's head, a chat call): a field that does not fit is a
/// `ConfigError` naming it under `prefix` (`request.timeout_ms: expected an integer >= 0, got -1`).
/// The text is checked as every body is first (depth, NaN, lone surrogates), so nesting up to
/// `json::MAX_DEPTH` reads without running out of stack.
pub(crate) fn from_host_json<T: serde::de::DeserializeOwned>(prefix: &str, text: &[u8]) -> Result<T, HarnessError> {
    crate::json::check_text(prefix, text)?;
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let refused = |path: &str, e: serde_json::Error| {
        // serde_json ends its message with where in the text it stopped; the field names that.
        let text = e.to_string();
        let position = format!(" at line {} column {}", e.line(), e.column());
        let message = text.strip_suffix(&position).unwrap_or(&text);
        match path {
            "." | "" => HarnessError::config(format!("{prefix}: {message}")),
            _ => HarnessError::config(format!("{prefix}.{path}: {message}")),
        }
    };
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        refused(&path, e.into_inner())
    })?;
    de.end().map_err(|e| refused("", e))?;
    Ok(value)
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
///
/// A host that crosses text sends it as one JSON object without the body ([`Request::from_host`]):
/// `query` and `headers` are lists of `[name, value]` pairs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub service: String,
    pub method: String,
    pub path: String,
    /// Label for breaker keys and metrics; default: the path with IDs collapsed to `{id}`.
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub query: Vec<(String, String)>,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(skip)]
    pub body: Body,
    /// Sent as `Idempotency-Key`; makes any method safe to retry.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Overrides the service's total timeout (`timeouts.request_ms`).
    #[serde(default, deserialize_with = "host_millis")]
    pub timeout_ms: Option<u64>,
    /// The caller's W3C `traceparent`, continued downstream.
    #[serde(default)]
    pub traceparent: Option<String>,
    /// Who the call is made for (a user or tenant id), kept in the audit record only;
    /// never sent downstream.
    #[serde(default)]
    pub principal: Option<String>,
}

impl Request {
    /// A request a host sent as its JSON head (every field but the body) and the body beside
    /// it; a field that does not fit is a `ConfigError` naming it (`request.timeout_ms`).
    pub fn from_host(head: &[u8], body: Body) -> Result<Request, HarnessError> {
        let mut request: Request = from_host_json("request", head)?;
        request.body = body;
        Ok(request)
    }

    pub fn new(service: impl Into<String>, method: impl Into<String>, path: impl Into<String>) -> Self {
        Request { service: service.into(), method: method.into(), path: path.into(), ..Default::default() }
    }
}

#[cfg(test)]
mod millis_tests {
    use super::{millis, Body, Request};

    #[test]
    fn a_host_head_reads_every_field_and_keeps_the_body_beside_it() {
        let head = br#"{"service":"users","method":"GET","path":"/u/1","endpoint":"u","query":[["a","1"],["a","2"]],
            "headers":[["x-t","v"]],"idempotency_key":"k","timeout_ms":1500.0,"traceparent":null,"principal":"p"}"#;
        let r = Request::from_host(head, Body::Bytes("hi".into())).unwrap();
        assert_eq!((r.service.as_str(), r.method.as_str(), r.path.as_str()), ("users", "GET", "/u/1"));
        assert_eq!(r.query, [("a".to_string(), "1".to_string()), ("a".into(), "2".into())]);
        assert_eq!(r.headers, [("x-t".to_string(), "v".to_string())]);
        assert_eq!((r.timeout_ms, r.principal.as_deref(), r.idempotency_key.as_deref()), (Some(1500), Some("p"), Some("k")));
        assert!(matches!(r.body, Body::Bytes(b) if &b[..] == b"hi"));
    }

    #[test]
    fn a_bad_host_head_is_a_config_error_naming_the_field() {
        let cases: [(&[u8], &str); 6] = [
            (br#"{"service":"s","method":"GET","path":"/","timeout_ms":-1}"#, "request.timeout_ms: expected an integer >= 0, got -1"),
            (br#"{"service":"s","method":"GET","path":"/","timeout_ms":0.5}"#, "request.timeout_ms: expected an integer >= 0, got 0.5"),
            (br#"{"service":"s","method":"GET","path":"/","query":[["a"]]}"#, "request.query[0]: invalid length 1"),
            (br#"{"service":"s","method":"GET","path":"/","colour":"red"}"#, "request.colour: unknown field `colour`"),
            (br#"{"service":"s","method":"GET"}"#, "request: missing field `path`"),
            (br#"{"service":"s","method":"GET","path":"/\ud800"}"#, "request: contains a lone surrogate"),
        ];
        for (head, want) in cases {
            let e = Request::from_host(head, Body::Empty).unwrap_err();
            assert_eq!(e.kind, crate::error::ErrorKind::Config);
            assert!(e.message.starts_with(want), "{} (wanted {want})", e.message);
        }
        let deep = format!(r#"{{"service":"s","method":"GET","path":"/","query":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
        assert!(Request::from_host(deep.as_bytes(), Body::Empty).unwrap_err().message.contains("nested deeper than 512"));
        let trailing = br#"{"service":"s","method":"GET","path":"/"} x"#;
        assert!(Request::from_host(trailing, Body::Empty).unwrap_err().message.starts_with("request: trailing characters"));
    }

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

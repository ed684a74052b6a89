//! The one error type every binding maps to native exceptions.
//!
//! `ErrorKind::name()` is the stable, cross-language class name; the context
//! (service, endpoint, method, attempts, trace id) is filled by the pipeline.
//! Messages never contain header values, tokens or query strings.

use std::fmt;

use bytes::Bytes;

use crate::redact::escape_control;

/// Most bytes of a downstream body kept on an error (`error.body`).
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// Which timeout expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutPhase {
    Connect,
    Response,
    /// A body (usually a stream) went silent for `timeouts.idle_ms`.
    Idle,
    /// A streamed answer's first chunk did not come within the route's `ttft_ms`.
    Ttft,
    Total,
}

impl TimeoutPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutPhase::Connect => "connect",
            TimeoutPhase::Response => "response",
            TimeoutPhase::Idle => "idle",
            TimeoutPhase::Ttft => "ttft",
            TimeoutPhase::Total => "total",
        }
    }
}

/// The stable kinds, named as the exception classes are in every language; each kind's
/// name and one-line doc are in `ErrorKind::KINDS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    Timeout(TimeoutPhase),
    CircuitOpen,
    BulkheadFull,
    RateLimited,
    HttpStatus,
    Auth,
    Schema,
    Connect,
    Cancelled,
    NoHealthyProvider,
    Config,
    Protocol,
    ResponseTooLarge,
    DuplicateInFlight,
    Interceptor,
    Harness,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout(_) => "TimeoutError",
            ErrorKind::CircuitOpen => "CircuitOpenError",
            ErrorKind::BulkheadFull => "BulkheadFullError",
            ErrorKind::RateLimited => "RateLimitedError",
            ErrorKind::HttpStatus => "HttpStatusError",
            ErrorKind::Auth => "AuthError",
            ErrorKind::Schema => "SchemaError",
            ErrorKind::Connect => "ConnectError",
            ErrorKind::Cancelled => "CancelledError",
            ErrorKind::NoHealthyProvider => "NoHealthyProviderError",
            ErrorKind::Config => "ConfigError",
            ErrorKind::Protocol => "ProtocolError",
            ErrorKind::ResponseTooLarge => "ResponseTooLargeError",
            ErrorKind::DuplicateInFlight => "DuplicateInFlightError",
            ErrorKind::Interceptor => "InterceptorError",
            ErrorKind::Harness => "HarnessError",
        }
    }

    /// What this kind means, in one line (its entry of `KINDS`).
    pub fn doc(self) -> &'static str {
        let name = self.name();
        Self::KINDS.iter().find(|(n, _)| *n == name).map(|(_, d)| *d).unwrap_or_default()
    }

    /// Every kind's name and one-line doc, base first: each binding's exception classes are
    /// generated from it (`harness types`). In a doc, `snake_case` names a field of
    /// `ErrorView` (or the raw `body` beside it) and `...Error` a kind; each language writes
    /// them its own way.
    pub const KINDS: [(&'static str, &'static str); 16] = [
        (
            "HarnessError",
            "A failure of no other kind: a closed client, a runtime used after fork, a broken body, or the idempotent receiver's store down, lease lost or failed delivery (`code` says which).",
        ),
        (
            "TimeoutError",
            "A timeout expired; `phase` says which: `connect`, `response`, `idle` (no body bytes for `timeouts.idle_ms` while streaming), `ttft` (no first chunk of a streamed chat answer within the route's `ttft_ms`) or `total`.",
        ),
        ("CircuitOpenError", "The circuit breaker for this service, endpoint and method is open: the call was not sent."),
        ("BulkheadFullError", "The service's bulkhead has no free permit: the call was not sent."),
        (
            "RateLimitedError",
            "Rate limited; `retry_after_ms` says when to try again, if known. Either the client's own limit (`rate_limit` in the config: `code` is `client_rate_limited` and there is no `status`, nothing was sent) or the downstream's 429.",
        ),
        ("HttpStatusError", "The upstream answered with an error status; `status`, `code` and `body` describe it."),
        ("AuthError", "Credentials were refused (a 401 or 403) or could not be obtained (a token provider failed)."),
        ("SchemaError", "The response did not match its JSON Schema; the message says what did not match."),
        ("ConnectError", "The connection could not be made (refused, reset or a DNS failure)."),
        ("CancelledError", "The request was cancelled before it finished."),
        (
            "NoHealthyProviderError",
            "No provider of a route could answer; `provider_errors` lists each provider, in config order, with its last error or why it was not tried.",
        ),
        ("ConfigError", "Bad config or bad input; the message starts with the field path (e.g. `services.orders.retry.max_retries`)."),
        (
            "ProtocolError",
            "The server answered, but not with valid HTTP (bad status line, conflicting lengths, too many headers, a final 1xx); not retried.",
        ),
        ("ResponseTooLargeError", "The response body is larger than the service's `limits.max_response_bytes` (64 MiB by default)."),
        (
            "DuplicateInFlightError",
            "Another delivery of this message is being processed now (the idempotent receiver): the handler did not run. `retry_after_ms` is what is left of that delivery's lease; redeliver after it (the sender's retry usually does).",
        ),
        (
            "InterceptorError",
            "A host interceptor refused the call or failed the answer: the message names it and its phase; `code` is `raised`, `timeout`, `invalid` (a change that may not be made) or a `Reject`'s own code, and `status` the answer's when `after` rejected it.",
        ),
    ];

    /// Every kind name, base first; bindings build their class trees from this.
    pub const NAMES: [&'static str; 16] = {
        let mut names = [""; 16];
        let mut i = 0;
        while i < names.len() {
            names[i] = Self::KINDS[i].0;
            i += 1;
        }
        names
    };
}

/// An error with the context a caller needs to act on it.
#[derive(Clone)]
pub struct HarnessError {
    pub kind: ErrorKind,
    pub message: String,
    pub service: Option<String>,
    pub endpoint: Option<String>,
    pub method: Option<String>,
    pub attempts: u32,
    pub status: Option<u16>,
    /// Normalised downstream error code (`code`, `errCode`, `error.code`).
    pub code: Option<String>,
    pub retry_after_ms: Option<u64>,
    pub trace_id: Option<String>,
    /// Raw downstream body, for `HttpStatusError` and friends.
    pub body: Option<Bytes>,
    /// Routed requests: the provider whose answer this error is.
    pub provider: Option<String>,
    /// `NoHealthyProviderError`: each provider of the route and its last error (or why it
    /// was not tried), in config order.
    pub provider_errors: Vec<(String, String)>,
}

impl HarnessError {
    /// Control characters in `message` are escaped (`\n`, `\u{1b}`): an error text is one line.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let message = message.into();
        let message = match escape_control(&message) {
            std::borrow::Cow::Borrowed(_) => message,
            std::borrow::Cow::Owned(escaped) => escaped,
        };
        HarnessError {
            kind,
            message,
            service: None,
            endpoint: None,
            method: None,
            attempts: 0,
            status: None,
            code: None,
            retry_after_ms: None,
            trace_id: None,
            body: None,
            provider: None,
            provider_errors: Vec::new(),
        }
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Config, message)
    }

    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    pub fn phase(&self) -> Option<&'static str> {
        match self.kind {
            ErrorKind::Timeout(p) => Some(p.as_str()),
            _ => None,
        }
    }
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name(), self.message)?;
        let mut ctx = Vec::new();
        if let Some(s) = &self.service {
            ctx.push(format!("service={}", escape_control(s)));
        }
        if let Some(p) = &self.provider {
            ctx.push(format!("provider={}", escape_control(p)));
        }
        if let (Some(m), Some(e)) = (&self.method, &self.endpoint) {
            ctx.push(format!("endpoint={m} {}", escape_control(e)));
        }
        if let Some(s) = self.status {
            ctx.push(format!("status={s}"));
        }
        if self.attempts > 0 {
            ctx.push(format!("attempts={}", self.attempts));
        }
        if let Some(t) = &self.trace_id {
            ctx.push(format!("trace_id={t}"));
        }
        if !ctx.is_empty() {
            write!(f, " ({})", ctx.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Debug for HarnessError {
    // The raw body is left out: it is downstream data and may be large.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HarnessError")
            .field("kind", &self.name())
            .field("message", &self.message)
            .field("service", &self.service)
            .field("endpoint", &self.endpoint)
            .field("method", &self.method)
            .field("attempts", &self.attempts)
            .field("status", &self.status)
            .field("code", &self.code)
            .field("provider", &self.provider)
            .field("trace_id", &self.trace_id)
            .finish()
    }
}

impl std::error::Error for HarnessError {}

/// Code and message pulled out of a downstream error body.
#[derive(Debug, Default, PartialEq)]
pub struct NormalizedBody {
    pub code: Option<String>,
    pub message: Option<String>,
}

/// Normalises a downstream error body: JSON `code`/`errCode`/`error.code` and
/// `message`/`msg`/`error.message`; an HTML page is reduced to its title.
pub fn normalize_body(content_type: Option<&str>, body: &[u8]) -> NormalizedBody {
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim_start();
    let looks_json = content_type.is_some_and(|c| c.contains("json")) || trimmed.starts_with('{');
    if looks_json {
        if let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(trimmed) {
            let scalar = |v: &serde_json::Value| match v {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            };
            let nested = obj.get("error").and_then(|e| e.as_object());
            let code = obj
                .get("code")
                .and_then(scalar)
                .or_else(|| obj.get("errCode").and_then(scalar))
                .or_else(|| nested.and_then(|e| e.get("code")).and_then(scalar));
            let message = obj
                .get("message")
                .and_then(scalar)
                .or_else(|| obj.get("msg").and_then(scalar))
                .or_else(|| nested.and_then(|e| e.get("message")).and_then(scalar))
                .or_else(|| obj.get("error").and_then(|e| e.as_str().map(str::to_string)));
            return NormalizedBody { code, message };
        }
    }
    let looks_html = content_type.is_some_and(|c| c.contains("html")) || trimmed.starts_with('<');
    if looks_html {
        let lower = text.to_ascii_lowercase();
        if let Some(start) = lower.find("<title") {
            if let Some(open_end) = lower[start..].find('>') {
                let from = start + open_end + 1;
                if let Some(len) = lower[from..].find("</title>") {
                    let title = text[from..from + len].split_whitespace().collect::<Vec<_>>().join(" ");
                    return NormalizedBody { code: None, message: Some(title) };
                }
            }
        }
        return NormalizedBody::default();
    }
    let short: String = text.chars().take(200).collect();
    NormalizedBody { code: None, message: (!short.trim().is_empty()).then(|| short.trim().to_string()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_top_level_code_and_message() {
        let n = normalize_body(Some("application/json"), br#"{"code":"E42","message":"nope"}"#);
        assert_eq!(n, NormalizedBody { code: Some("E42".into()), message: Some("nope".into()) });
    }

    #[test]
    fn json_err_code_and_msg() {
        let n = normalize_body(None, br#"{"errCode":1001,"msg":"bad"}"#);
        assert_eq!(n, NormalizedBody { code: Some("1001".into()), message: Some("bad".into()) });
    }

    #[test]
    fn json_nested_error_object() {
        let n = normalize_body(Some("application/json"), br#"{"error":{"code":"rate","message":"slow down"}}"#);
        assert_eq!(n, NormalizedBody { code: Some("rate".into()), message: Some("slow down".into()) });
    }

    #[test]
    fn html_reduced_to_title() {
        let n = normalize_body(Some("text/html"), b"<html><head><TITLE>502 Bad\n Gateway</TITLE></head><body>x</body></html>");
        assert_eq!(n.message.as_deref(), Some("502 Bad Gateway"));
    }

    #[test]
    fn messages_are_one_line() {
        let e = HarnessError::new(ErrorKind::HttpStatus, "a\r\nX-Injected: 1");
        assert_eq!(e.message, "a\\r\\nX-Injected: 1");
        assert!(!e.to_string().contains('\n'));
    }

    #[test]
    fn every_kind_has_a_name_and_a_doc_in_kinds() {
        use ErrorKind::*;
        let all = [
            Harness,
            Timeout(TimeoutPhase::Total),
            CircuitOpen,
            BulkheadFull,
            RateLimited,
            HttpStatus,
            Auth,
            Schema,
            Connect,
            Cancelled,
            NoHealthyProvider,
            Config,
            Protocol,
            ResponseTooLarge,
            DuplicateInFlight,
            Interceptor,
        ];
        assert_eq!(all.map(|k| k.name()), ErrorKind::NAMES);
        assert!(all.iter().all(|k| !k.doc().is_empty() && !k.doc().contains('\n')));
    }

    #[test]
    fn display_has_no_body() {
        let mut e = HarnessError::new(ErrorKind::HttpStatus, "upstream answered 500");
        e.body = Some(Bytes::from_static(b"secret-token-xyz"));
        assert!(!e.to_string().contains("secret"));
        assert!(!format!("{e:?}").contains("secret"));
    }
}

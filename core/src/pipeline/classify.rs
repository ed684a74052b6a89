//! What an attempt's outcome means: the error kind, what the breaker records,
//! and whether (and how soon) it may be retried.
//!
//! Guarantees: 5xx, timeouts, broken connections and protocol faults count
//! against the breaker; 4xx and 429 do not (429 is neutral), nor does an
//! over-large body; a downstream message is scrubbed of known secrets and
//! capped before it reaches an error.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::HeaderMap;

use crate::breaker::Outcome;
use crate::error::{normalize_body, ErrorKind, HarnessError, MAX_ERROR_BODY};
use crate::redact::Secrets;
use crate::retry::{self, Failure};
use crate::transport::TransportFailure;

pub(crate) struct Classified {
    pub failure: Failure,
    pub health: Outcome,
    pub error: HarnessError,
    pub retry_after: Option<Duration>,
}

/// An error status (>= 400) with the (capped) body read so far.
pub(crate) fn status(status: u16, headers: &HeaderMap, body: Bytes, secrets: &Secrets) -> Classified {
    let health = if status >= 500 {
        Outcome::Failure
    } else if status == 429 {
        Outcome::Ignored
    } else {
        Outcome::Success
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let retry_after = header("retry-after").and_then(|v| retry::parse_retry_after(v, SystemTime::now()));
    let mut norm = normalize_body(header("content-type"), &body);
    // A downstream may echo the request's credentials: scrub before the text goes anywhere.
    norm.message = norm.message.map(|m| secrets.downstream_message(&m));
    norm.code = norm.code.map(|c| secrets.downstream_message(&c));
    let kind = match status {
        401 | 403 => ErrorKind::Auth,
        429 => ErrorKind::RateLimited,
        _ => ErrorKind::HttpStatus,
    };
    let reason = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    let message = match &norm.message {
        Some(m) => format!("upstream answered {status} {reason}: {m}"),
        None => format!("upstream answered {status} {reason}"),
    };
    let mut error = HarnessError::new(kind, message);
    error.status = Some(status);
    error.code = norm.code;
    error.retry_after_ms = retry_after.map(|d| d.as_millis() as u64);
    // A copy, not a slice: a slice would keep a larger buffer alive.
    let body = if body.len() > MAX_ERROR_BODY { Bytes::copy_from_slice(&body[..MAX_ERROR_BODY]) } else { body };
    // The raw body too: a downstream that echoes the request's credential does not leak it.
    error.body = Some(secrets.scrub_bytes(&body).map(Bytes::from).unwrap_or(body));
    Classified { failure: Failure::Status(status), health, error, retry_after }
}

/// A transport failure: refused, reset and cut-short connections are `ConnectError`;
/// timeouts name their phase.
pub(crate) fn transport(tf: TransportFailure) -> Classified {
    let kind = match tf.failure {
        Failure::Protocol => ErrorKind::Protocol,
        Failure::TooLarge => ErrorKind::ResponseTooLarge,
        Failure::Unmatched => ErrorKind::Config,
        _ => tf.phase().map(ErrorKind::Timeout).unwrap_or(ErrorKind::Connect),
    };
    // An over-large body says nothing about the server's health.
    let health = if matches!(tf.failure, Failure::TooLarge | Failure::Unmatched) { Outcome::Ignored } else { Outcome::Failure };
    Classified { failure: tf.failure, health, error: HarnessError::new(kind, tf.message), retry_after: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds_and_breaker_outcomes() {
        let s = Secrets::default();
        let h = HeaderMap::new();
        let c = status(503, &h, Bytes::new(), &s);
        assert_eq!((c.error.name(), c.health), ("HttpStatusError", Outcome::Failure));
        let c = status(429, &h, Bytes::new(), &s);
        assert_eq!((c.error.name(), c.health), ("RateLimitedError", Outcome::Ignored));
        let c = status(401, &h, Bytes::new(), &s);
        assert_eq!((c.error.name(), c.health), ("AuthError", Outcome::Success));
        let c = transport(TransportFailure::new(Failure::IdleTimeout, "idle"));
        assert_eq!((c.error.name(), c.error.phase()), ("TimeoutError", Some("idle")));
        let c = transport(TransportFailure::new(Failure::TooLarge, "big"));
        assert_eq!((c.error.name(), c.health), ("ResponseTooLargeError", Outcome::Ignored));
        let c = transport(TransportFailure::new(Failure::Protocol, "bad"));
        assert_eq!((c.error.name(), c.health), ("ProtocolError", Outcome::Failure));
    }

    #[test]
    fn error_bodies_are_capped_by_copy() {
        let big = Bytes::from(vec![b'x'; MAX_ERROR_BODY * 2]);
        let c = status(500, &HeaderMap::new(), big, &Secrets::default());
        assert_eq!(c.error.body.unwrap().len(), MAX_ERROR_BODY);
    }
}

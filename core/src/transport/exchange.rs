//! One exchange as every transport speaks it: the request the pipeline built, the
//! response head, a body pulled chunk by chunk, and why an attempt failed.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use crate::error::TimeoutPhase;

/// What went wrong with one attempt, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The connection could not be made: no byte of the request was sent.
    ConnectRefused,
    /// Connect did not finish in time: no byte was sent either.
    ConnectTimeout,
    /// The connection broke after the request may have been sent (reset, truncated body).
    Broken,
    /// No response head within the response timeout.
    ResponseTimeout,
    /// The body went silent for the idle timeout.
    IdleTimeout,
    /// A streamed answer's first chunk (or its head) did not come within `ttft_ms` of the request.
    TtftTimeout,
    /// The total deadline expired during the attempt.
    TotalTimeout,
    /// The server answered, but not with valid HTTP: not retried, counts against the breaker.
    Protocol,
    /// The body was over `limits.max_response_bytes`: not retried (it would be again).
    TooLarge,
    /// The server answered with this status.
    Status(u16),
    /// Mock mode: no rule answers this request (nothing was sent; never retried).
    Unmatched,
    /// An interceptor's `after` rejected the answer as retryable (a 200 that is an error).
    Declared,
}

impl Failure {
    /// True when the request provably never reached the server.
    pub fn never_sent(self) -> bool {
        matches!(self, Failure::ConnectRefused | Failure::ConnectTimeout | Failure::Unmatched)
    }
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One request as the pipeline built it (validated path, merged headers, body bytes).
#[derive(Debug, Clone)]
pub struct OutgoingRequest {
    pub method: Method,
    pub url: url::Url,
    pub headers: HeaderMap,
    pub body: Option<Bytes>,
    /// Where a fault-injecting transport names the fault it injected (only when faults are on).
    pub fault: Option<FaultMark>,
}

/// The fault injected into one attempt, if any (`latency`, `status`, `reset`, `stream_cut`).
pub type FaultMark = std::sync::Arc<std::sync::OnceLock<&'static str>>;

/// A response head and the source of its body.
pub struct Exchange {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Box<dyn BodySource>,
}

/// The body of one response, pulled a chunk at a time.
pub trait BodySource: Send {
    /// The next chunk; `Ok(None)` at the end of a complete body. A body cut short is an error.
    fn next_chunk(&mut self) -> BoxFuture<'_, Result<Option<Bytes>, TransportFailure>>;
}

/// Sends requests. `ReqwestTransport` is the real one; `MemoryTransport` answers from a script.
pub trait Transport: Send + Sync {
    fn send(&self, request: OutgoingRequest) -> BoxFuture<'_, Result<Exchange, TransportFailure>>;
}

/// Why one attempt failed at the transport level.
#[derive(Debug, Clone)]
pub struct TransportFailure {
    pub failure: Failure,
    pub message: String,
    /// The bytes read before a size limit stopped the read (an error page's first 64 KiB).
    pub partial: Option<Bytes>,
}

impl TransportFailure {
    pub fn new(failure: Failure, message: impl Into<String>) -> Self {
        TransportFailure { failure, message: message.into(), partial: None }
    }

    pub fn phase(&self) -> Option<TimeoutPhase> {
        match self.failure {
            Failure::ConnectTimeout => Some(TimeoutPhase::Connect),
            Failure::ResponseTimeout => Some(TimeoutPhase::Response),
            Failure::TotalTimeout => Some(TimeoutPhase::Total),
            Failure::IdleTimeout => Some(TimeoutPhase::Idle),
            Failure::TtftTimeout => Some(TimeoutPhase::Ttft),
            _ => None,
        }
    }
}

/// The `Content-Length` a response declared; two different values are a protocol fault.
pub fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, TransportFailure> {
    let mut found: Option<u64> = None;
    for v in headers.get_all(http::header::CONTENT_LENGTH) {
        for part in v.to_str().unwrap_or("").split(',') {
            let Ok(n) = part.trim().parse::<u64>() else {
                return Err(TransportFailure::new(Failure::Protocol, "the server sent an invalid Content-Length"));
            };
            if found.is_some_and(|f| f != n) {
                return Err(TransportFailure::new(Failure::Protocol, "the server sent conflicting Content-Length values"));
            }
            found = Some(n);
        }
    }
    Ok(found)
}

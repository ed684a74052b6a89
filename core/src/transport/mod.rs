//! The transport stage: one HTTP exchange, head first, then the body as a stream
//! of chunks the caller pulls.
//!
//! Guarantees: reqwest (and hyper) types stop in this module; the pipeline sees
//! only `http` types, `Bytes` and `TransportFailure`. Timeouts other than connect
//! are the pipeline's (it wraps `send` and each `next_chunk` in its timers), so
//! any `Transport` gets the same response, idle and total deadlines. A body is
//! pulled chunk by chunk: nothing is read ahead of the consumer beyond the
//! transport's own socket buffer.

pub mod faults;
pub mod memory;
pub mod mock;
pub mod reqwest;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use crate::error::TimeoutPhase;
use crate::retry::Failure;

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

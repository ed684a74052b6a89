//! What one attempt comes to, and what it learned for the request's record.

use std::time::Duration;

use tokio::time::Instant;

use super::classify::Classified;
use crate::breaker::Permit;
use crate::bulkhead::BulkheadPermit;
use crate::error::HarnessError;
use crate::response::Response;
use crate::transport::{BodySource, Failure, TransportFailure};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Buffered,
    Stream,
}

/// A successful head whose body the caller will pull, with the permits it holds until then.
pub(crate) struct Open {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Box<dyn BodySource>,
    pub breaker: Permit,
    pub bulkhead: BulkheadPermit,
    /// When the request was sent (a time-to-first-token counts from here, not from the head).
    pub sent: Instant,
}

pub(crate) enum Reached {
    Buffered(Response),
    Stream(Open),
}

impl Reached {
    pub fn status(&self) -> u16 {
        match self {
            Reached::Buffered(r) => r.status,
            Reached::Stream(o) => o.status,
        }
    }
}

/// What one attempt came to.
pub(crate) enum Once {
    Reached(Reached),
    /// Not sent: the breaker is open, the bulkhead is full, or no credential could be had.
    Refused(HarnessError),
    /// Sent, and failed: what it means for retries and health.
    Failed(Classified),
    /// The downstream refused the credential; it was refreshed or rotated: send again now.
    Replay,
    /// The request itself is bad: no attempt can succeed.
    Fatal(HarnessError),
}

/// What an attempt learned for the request's record, applied once it is over (an
/// attempt only reads the call, so that hedged attempts can share it).
#[derive(Default)]
pub(crate) struct Side {
    pub fault: Option<&'static str>,
    pub schema_violation: Option<String>,
    pub auth_replayed: bool,
    /// A route's hedge on another provider won: that provider answered.
    pub provider: Option<usize>,
}

/// How long an attempt waits for its response head: `response_ms`, or a streamed chat's
/// `ttft_ms` when that is shorter (and then a timeout is a time-to-first-token one).
#[derive(Clone, Copy)]
pub(crate) struct HeadBound {
    pub after: Duration,
    ttft: bool,
}

impl HeadBound {
    pub fn new(response_ms: u64, ttft: Option<Duration>) -> Self {
        let response = Duration::from_millis(response_ms);
        match ttft {
            Some(t) if t < response => HeadBound { after: t, ttft: true },
            _ => HeadBound { after: response, ttft: false },
        }
    }

    pub fn failure(self) -> TransportFailure {
        if self.ttft {
            TransportFailure::new(Failure::TtftTimeout, format!("no first chunk within ttft_ms ({} ms): no response head", self.after.as_millis()))
        } else {
            TransportFailure::new(Failure::ResponseTimeout, format!("no response within {} ms", self.after.as_millis()))
        }
    }
}

//! An in-memory transport that answers from a script, for core unit tests:
//! the whole pipeline runs (timeouts on tokio's clock, retries, breaker,
//! streaming) with no socket.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use parking_lot::Mutex;

use super::exchange::{BodySource, BoxFuture, Exchange, Failure, OutgoingRequest, Transport, TransportFailure};

/// One scripted piece of a body.
#[derive(Debug, Clone)]
pub enum Chunk {
    Data(Bytes),
    /// Nothing arrives for this long.
    Pause(Duration),
    /// The connection breaks here.
    Cut,
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Respond { status: u16, headers: Vec<(&'static str, String)>, delay: Duration, body: Vec<Chunk> },
    Fail(Failure),
    /// Never answers.
    Hang,
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Reply::Respond { status, headers: Vec::new(), delay: Duration::ZERO, body: vec![Chunk::Data(Bytes::from_static(b"{}"))] }
    }

    pub fn chunks(status: u16, body: Vec<Chunk>) -> Self {
        Reply::Respond { status, headers: Vec::new(), delay: Duration::ZERO, body }
    }
}

/// Answers each request with the next scripted reply (the last one repeats) and
/// keeps what it was sent.
#[derive(Default)]
pub struct MemoryTransport {
    replies: Mutex<VecDeque<Reply>>,
    sent: Mutex<Vec<OutgoingRequest>>,
    /// Counts body pulls (to show nothing is read ahead of a consumer).
    pulls: Option<Arc<AtomicUsize>>,
}

impl MemoryTransport {
    pub fn new(replies: Vec<Reply>) -> Self {
        MemoryTransport { replies: Mutex::new(replies.into()), sent: Mutex::new(Vec::new()), pulls: None }
    }

    /// Counts every body chunk pulled into `pulls`.
    pub fn counting(mut self, pulls: Arc<AtomicUsize>) -> Self {
        self.pulls = Some(pulls);
        self
    }

    pub fn sent(&self) -> Vec<OutgoingRequest> {
        self.sent.lock().clone()
    }

    fn next_reply(&self) -> Reply {
        let mut q = self.replies.lock();
        if q.len() > 1 {
            q.pop_front().expect("non-empty")
        } else {
            q.front().cloned().unwrap_or_else(|| Reply::status(200))
        }
    }
}

impl Transport for MemoryTransport {
    fn send(&self, request: OutgoingRequest) -> BoxFuture<'_, Result<Exchange, TransportFailure>> {
        self.sent.lock().push(request);
        let reply = self.next_reply();
        let pulls = self.pulls.clone();
        Box::pin(async move {
            match reply {
                Reply::Fail(f) => Err(TransportFailure::new(f, format!("scripted {f:?}"))),
                Reply::Hang => std::future::pending().await,
                Reply::Respond { status, headers, delay, body } => {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    let mut map = HeaderMap::new();
                    for (k, v) in headers {
                        map.append(k, HeaderValue::from_str(&v).expect("a scripted header value"));
                    }
                    let status = StatusCode::from_u16(status).expect("a scripted status");
                    Ok(Exchange { status, headers: map, body: Box::new(MemoryBody { chunks: body.into(), pulls }) })
                }
            }
        })
    }
}

struct MemoryBody {
    chunks: VecDeque<Chunk>,
    pulls: Option<Arc<AtomicUsize>>,
}

impl BodySource for MemoryBody {
    fn next_chunk(&mut self) -> BoxFuture<'_, Result<Option<Bytes>, TransportFailure>> {
        if let Some(p) = &self.pulls {
            p.fetch_add(1, Ordering::SeqCst);
        }
        Box::pin(async move {
            loop {
                match self.chunks.pop_front() {
                    None => return Ok(None),
                    Some(Chunk::Data(b)) => return Ok(Some(b)),
                    Some(Chunk::Pause(d)) => tokio::time::sleep(d).await,
                    Some(Chunk::Cut) => return Err(TransportFailure::new(Failure::Broken, "body cut short: scripted cut")),
                }
            }
        })
    }
}

//! A response whose body the caller pulls chunk by chunk.
//!
//! Guarantees: nothing is read ahead of the consumer beyond the transport's own
//! buffer (back-pressure is the pull); each chunk must come within `idle_ms` and
//! the total deadline (`TimeoutError`, phase `idle` or `total`); a body cut
//! before its end is an error (`ConnectError` or `ProtocolError`), never a clean
//! end; the breaker, metrics, log line and events record the outcome once, when
//! the stream ends, fails, or is dropped or cancelled by the consumer (recorded
//! as `CancelledError`, neutral for the breaker), which also releases the
//! connection and the bulkhead permit.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Sleep;

use super::call::Call;
use super::classify;
use super::exchange::{chunk_bound, chunk_timeout};
use super::outcome::Open;
use crate::breaker::{Outcome, Permit};
use crate::bulkhead::BulkheadPermit;
use crate::engine::Engine;
use crate::error::{ErrorKind, HarnessError};
use crate::transport::BodySource;

pub struct StreamResponse {
    pub status: u16,
    /// Header names in lower case, in the order received; repeated names repeat.
    pub headers: Vec<(String, String)>,
    pub attempts: u32,
    pub trace_id: String,
    live: Option<Box<Live>>,
}

struct Live {
    engine: Arc<Engine>,
    call: Call,
    body: Box<dyn BodySource>,
    breaker: Option<Permit>,
    _bulkhead: BulkheadPermit,
    timer: Pin<Box<Sleep>>,
    idle: Duration,
    received: u64,
    /// The head's status, for the record.
    status: u16,
}

impl std::fmt::Debug for StreamResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamResponse")
            .field("status", &self.status)
            .field("attempts", &self.attempts)
            .field("trace_id", &self.trace_id)
            .field("open", &self.live.is_some())
            .finish()
    }
}

impl StreamResponse {
    pub(crate) fn new(engine: Arc<Engine>, call: Call, open: Open) -> Self {
        let idle = Duration::from_millis(call.svc(call.lanes.current).config.timeouts.idle_ms);
        let timer = Box::pin(tokio::time::sleep_until(call.deadline.at()));
        StreamResponse {
            status: open.status,
            headers: open.headers,
            attempts: call.attempts,
            trace_id: call.trace.trace_id.to_string(),
            live: Some(Box::new(Live {
                engine,
                call,
                body: open.body,
                breaker: Some(open.breaker),
                _bulkhead: open.bulkhead,
                timer,
                idle,
                received: 0,
                status: open.status,
            })),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether the stream has ended (completely, with an error, or cancelled).
    pub fn is_done(&self) -> bool {
        self.live.is_none()
    }

    /// The next chunk; `Ok(None)` once the body has ended completely. After an
    /// error or a cancel, every call is `Ok(None)`.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, HarnessError> {
        let Some(live) = self.live.as_mut() else { return Ok(None) };
        let (at, phase) = chunk_bound(live.idle, &live.call.deadline);
        live.timer.as_mut().reset(at);
        let next = tokio::select! {
            biased;
            c = live.body.next_chunk() => c,
            _ = live.timer.as_mut() => Err(chunk_timeout(phase, live.idle)),
        };
        match next {
            Ok(Some(chunk)) => {
                live.received += chunk.len() as u64;
                Ok(Some(chunk))
            }
            Ok(None) => {
                let live = self.live.take().expect("live");
                live.end(None);
                Ok(None)
            }
            Err(tf) => {
                let live = self.live.take().expect("live");
                let c = classify::transport(tf);
                let error = live.call.with_context(c.error);
                live.end(Some((c.health, error.clone())));
                Err(error)
            }
        }
    }

    /// Stops reading: the connection and the bulkhead permit are released at once,
    /// and the outcome is recorded as cancelled by the consumer.
    pub fn cancel(&mut self) {
        if let Some(live) = self.live.take() {
            let e = HarnessError::new(ErrorKind::Cancelled, "the consumer stopped reading the stream");
            let e = live.call.with_context(e);
            live.end(Some((Outcome::Ignored, e)));
        }
    }
}

impl Drop for StreamResponse {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl Live {
    /// Records the stream's outcome once: breaker, metrics, log line, events.
    fn end(mut self, failure: Option<(Outcome, HarnessError)>) {
        if let Some(permit) = self.breaker.take() {
            permit.record(failure.as_ref().map(|(o, _)| *o).unwrap_or(Outcome::Success));
        }
        drop(self.body);
        self.call.observe(&self.engine, Some(self.status), failure.as_ref().map(|(_, e)| e), true, None);
    }
}

/// A stream a host can pull from any thread or executor, and cancel while a pull waits.
pub(crate) trait Pull: Send + 'static {
    type Item: Send + 'static;
    fn pull(&mut self) -> crate::transport::BoxFuture<'_, Result<Option<Self::Item>, HarnessError>>;
}

impl Pull for StreamResponse {
    type Item = Bytes;
    fn pull(&mut self) -> crate::transport::BoxFuture<'_, Result<Option<Bytes>, HarnessError>> {
        Box::pin(self.next_chunk())
    }
}

/// The shared part of a handle: the stream behind an async lock, and a cancel signal.
pub(crate) struct Puller<S> {
    stream: tokio::sync::Mutex<Option<S>>,
    cancelled: AtomicBool,
    cancel: Notify,
}

impl<S: Pull> Puller<S> {
    pub fn new(stream: S) -> Arc<Self> {
        Arc::new(Puller { stream: tokio::sync::Mutex::new(Some(stream)), cancelled: AtomicBool::new(false), cancel: Notify::new() })
    }

    /// The next item (`Ok(None)` at the end); a cancelled stream gives `CancelledError`.
    pub fn next(self: &Arc<Self>) -> impl Future<Output = Result<Option<S::Item>, HarnessError>> + Send + 'static {
        let shared = self.clone();
        async move {
            let cancelled = shared.cancel.notified();
            tokio::pin!(cancelled);
            cancelled.as_mut().enable();
            let mut guard = shared.stream.lock().await;
            if shared.cancelled.load(Ordering::Acquire) {
                guard.take();
                return Err(HarnessError::new(ErrorKind::Cancelled, "the stream was cancelled"));
            }
            let Some(stream) = guard.as_mut() else { return Ok(None) };
            tokio::select! {
                r = stream.pull() => {
                    if !matches!(r, Ok(Some(_))) {
                        guard.take();
                    }
                    r
                }
                _ = cancelled => {
                    guard.take();
                    Err(HarnessError::new(ErrorKind::Cancelled, "the stream was cancelled"))
                }
            }
        }
    }

    /// A waiting `next()` ends with `CancelledError`; the stream is dropped (which releases
    /// its connection and permits and records the outcome as cancelled).
    pub fn cancel(self: &Arc<Self>) {
        self.cancelled.store(true, Ordering::Release);
        self.cancel.notify_waiters();
        if let Ok(mut guard) = self.stream.try_lock() {
            guard.take();
            return;
        }
        // A `next()` holds the stream: it ends on the notification, or, if its future was
        // dropped instead, this task takes the stream as soon as the lock is free.
        if let Ok(handle) = crate::runtime::handle() {
            let shared = self.clone();
            handle.spawn(async move {
                shared.stream.lock().await.take();
            });
        }
    }
}

/// A stream that host bindings can share between threads and executors: `next()`
/// is a `'static` future to spawn or block on; `cancel()` works even while a
/// `next()` is waiting.
#[derive(Clone)]
pub struct StreamHandle {
    puller: Arc<Puller<StreamResponse>>,
    head: Arc<Head>,
}

struct Head {
    status: u16,
    headers: Vec<(String, String)>,
    attempts: u32,
    trace_id: String,
}

impl StreamHandle {
    pub fn new(stream: StreamResponse) -> Self {
        let head = Arc::new(Head {
            status: stream.status,
            headers: stream.headers.clone(),
            attempts: stream.attempts,
            trace_id: stream.trace_id.clone(),
        });
        StreamHandle { puller: Puller::new(stream), head }
    }

    pub fn status(&self) -> u16 {
        self.head.status
    }

    pub fn headers(&self) -> &[(String, String)] {
        &self.head.headers
    }

    pub fn attempts(&self) -> u32 {
        self.head.attempts
    }

    pub fn trace_id(&self) -> &str {
        &self.head.trace_id
    }

    /// The next chunk (`Ok(None)` at the end); a cancelled stream gives `CancelledError`.
    pub fn next(&self) -> impl Future<Output = Result<Option<Bytes>, HarnessError>> + Send + 'static {
        self.puller.next()
    }

    /// Cancels the stream: a waiting `next()` ends with `CancelledError`, the connection
    /// and permits are released, and the outcome is recorded as cancelled.
    pub fn cancel(&self) {
        self.puller.cancel()
    }
}

//! The one completion path, generic over the core's `Outcome`. A feature stages an
//! `Operation` (`CompletionQueue::stage`); calls made in one JS tick start with one crossing
//! into the core's runtime (`flush`). Every outcome (a response, an opened stream, a chunk, a
//! chat answer, an embeddings answer, a receiver claim, an error) is pushed from any thread as one row of a batch,
//! and a single weak threadsafe function wakes the JS thread, at most once per batch, to
//! `drain()` it all. JS matches each row to its promise by id.
//!
//! This module imports no feature: features import it. What an outcome leaves open (a body
//! stream, a chat stream, a lease) crosses as a handle class defined here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use harness_core::{ChatStreamHandle, Claim, ErrorKind, HarnessError, Lease, Operation, Outcome, Response, StreamHandle};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use tokio::sync::Notify;

use crate::convert::{text_of, utf16_len, write_view};

/// Numbers per row of `CompletionBatch::meta`: id, status (> 0: an HTTP status; else the row's
/// kind, see below), elapsed ms, attempts, UTF-16 lengths of the header text and the trace id in
/// `text`, the body (a length in `bodies`, or `BODY_*`), and for a response the views of `views`
/// that are the row's, as bits (`VIEW_*`, in that order); every other kind has its view or has none.
const FIELDS: usize = 8;
/// A response's last column: the next view is its routing record (`Routed`).
const VIEW_ROUTED: u8 = 1;
/// A response's last column: the next view (after the routing record, if any) is its `CacheStamp`.
const VIEW_CACHE: u8 = 2;
/// Bodies and chunks up to this size share the batch's `bodies` buffer; bigger ones cross on their own.
const SMALL_BODY: usize = 4096;
/// Kinds of rows that are not a response or an opened stream (the status column).
const ERROR: f64 = 0.0;
const CHUNK: f64 = -1.0;
/// The end of a body or a chat stream.
const END: f64 = -2.0;
/// A chat answer: its view, and the provider's raw answer as the body.
const CHAT: f64 = -3.0;
/// An opened chat stream (the next of `handles`).
const CHAT_STREAM: f64 = -4.0;
/// A chat stream's chunk (its view).
const CHAT_CHUNK: f64 = -5.0;
/// A receiver claim to run (the next of `handles`).
const LEASE: f64 = -6.0;
/// A receiver claim of a processed key: the stored result (JSON text) is the body.
const STORED: f64 = -7.0;
/// A receiver `complete` or `fail` recorded.
const SETTLED: f64 = -8.0;
/// An embeddings answer: its view, and its vectors as the next of `floats`.
const EMBED: f64 = -9.0;
/// Body column: >= 0 = a length in `bodies`.
const BODY_LARGE: f64 = -1.0;
/// An opened body stream (the next of `handles`); the status column is its HTTP status.
const BODY_STREAM: f64 = -2.0;
const BODY_NONE: f64 = -3.0;

/// The layout of `CompletionBatch::meta` (index.js reads it from here).
#[napi(object)]
pub struct CompletionLayout {
    pub fields: u32,
    pub error: i32,
    pub chunk: i32,
    pub end: i32,
    pub chat: i32,
    pub chat_stream: i32,
    pub chat_chunk: i32,
    pub lease: i32,
    pub stored: i32,
    pub settled: i32,
    pub embed: i32,
    pub body_large: i32,
    pub body_stream: i32,
    pub body_none: i32,
    pub view_routed: u32,
    pub view_cache: u32,
}

#[napi]
pub fn completion_layout() -> CompletionLayout {
    CompletionLayout {
        fields: FIELDS as u32,
        error: ERROR as i32,
        chunk: CHUNK as i32,
        end: END as i32,
        chat: CHAT as i32,
        chat_stream: CHAT_STREAM as i32,
        chat_chunk: CHAT_CHUNK as i32,
        lease: LEASE as i32,
        stored: STORED as i32,
        settled: SETTLED as i32,
        embed: EMBED as i32,
        body_large: BODY_LARGE as i32,
        body_stream: BODY_STREAM as i32,
        body_none: BODY_NONE as i32,
        view_routed: u32::from(VIEW_ROUTED),
        view_cache: u32::from(VIEW_CACHE),
    }
}

/// Everything finished since the last `drain()`, laid out so that a whole batch crosses to JS
/// as a handful of values instead of an object per completion.
#[napi(object, object_from_js = false)]
pub struct CompletionBatch {
    /// `FIELDS` numbers per row (see the constants above).
    pub meta: Float64Array,
    /// Per response or opened stream: its headers (`name\0value\0name\0value`, split lazily in JS),
    /// then its trace id.
    pub text: String,
    /// The small bodies and chunks, back to back (copied out in JS, so a kept body does not keep the batch).
    pub bodies: Buffer,
    pub large: Vec<Buffer>,
    /// The rows' views (camelCased JSON, see `convert.rs`) joined with `,`: JS wraps them in
    /// `[...]` and parses once; empty when none.
    pub views: String,
    /// What the rows' outcomes left open, in row order.
    pub handles: Vec<Either3<NativeStream, NativeChatStream, NativeLease>>,
    /// Per embeddings answer, in row order: every vector, one after another (`count` of
    /// `dimensions` floats), handed over as the core's own buffer (JS makes one view per vector).
    pub floats: Vec<Float32Array>,
    /// Events for listening clients, `[key,{"type":...}]` entries joined with `,` (JS wraps them in
    /// `[...]` and parses once); empty when none.
    pub events: String,
}

/// One open thing an outcome hands to JS.
enum Handle {
    Stream(StreamHandle),
    ChatStream(ChatStreamHandle),
    Lease(Lease),
}

/// Rows waiting for the JS thread, in `CompletionBatch` layout.
#[derive(Default)]
struct Rows {
    meta: Vec<f64>,
    text: String,
    bodies: Vec<u8>,
    large: Vec<Vec<u8>>,
    views: Vec<u8>,
    handles: Vec<Handle>,
    floats: Vec<Vec<f32>>,
}

impl Rows {
    fn push(&mut self, id: u32, outcome: std::result::Result<Outcome, HarnessError>) {
        let id = f64::from(id);
        match outcome {
            Ok(Outcome::Response(r)) => self.response(id, r),
            Ok(Outcome::Stream(s)) => {
                let (headers_len, trace_len) = self.head(s.headers(), s.trace_id());
                self.meta.extend_from_slice(&[id, f64::from(s.status()), 0.0, f64::from(s.attempts()), headers_len, trace_len, BODY_STREAM, 0.0]);
                self.handles.push(Handle::Stream(s));
            }
            Ok(Outcome::Chunk(Some(c))) => {
                let body = self.body(c);
                self.row(id, CHUNK, body);
            }
            Ok(Outcome::Chunk(None)) | Ok(Outcome::ChatChunk(None)) => self.row(id, END, BODY_NONE),
            Ok(Outcome::Chat(c)) => {
                self.view(&c);
                let body = self.body(c.raw);
                self.row(id, CHAT, body);
            }
            Ok(Outcome::ChatStream(s)) => {
                self.handles.push(Handle::ChatStream(s));
                self.row(id, CHAT_STREAM, BODY_NONE);
            }
            Ok(Outcome::ChatChunk(Some(c))) => {
                self.view(&c);
                self.row(id, CHAT_CHUNK, BODY_NONE);
            }
            Ok(Outcome::Claimed(Claim::Run(lease))) => {
                self.handles.push(Handle::Lease(lease));
                self.row(id, LEASE, BODY_NONE);
            }
            Ok(Outcome::Claimed(Claim::Done(result))) => {
                let body = self.body(result);
                self.row(id, STORED, body);
            }
            Ok(Outcome::Settled) => self.row(id, SETTLED, BODY_NONE),
            Ok(Outcome::Embed(mut r)) => {
                // The vectors move out (no copy here); the view is the rest (`data` is not serialised).
                self.floats.push(std::mem::take(&mut r.data));
                self.view(&r);
                self.row(id, EMBED, BODY_NONE);
            }
            Err(e) => {
                self.view(&harness_core::ErrorView::of(&e));
                let body = e.body.map_or(BODY_NONE, |b| self.body(b));
                self.row(id, ERROR, body);
            }
        }
    }

    /// The plain request's row: the hot path, no view unless the request named a route or a
    /// cache had a part in the answer.
    fn response(&mut self, id: f64, r: Response) {
        let (headers_len, trace_len) = self.head(&r.headers, &r.trace_id);
        let body = self.body(r.body);
        let mut views = 0;
        if let Some(rt) = r.routed {
            self.view(&*rt);
            views |= VIEW_ROUTED;
        }
        if let Some(c) = r.cache {
            self.view(&*c);
            views |= VIEW_CACHE;
        }
        self.meta.extend_from_slice(&[id, f64::from(r.status), r.elapsed_ms, f64::from(r.attempts), headers_len, trace_len, body, f64::from(views)]);
    }

    fn row(&mut self, id: f64, kind: f64, body: f64) {
        self.meta.extend_from_slice(&[id, kind, 0.0, 0.0, 0.0, 0.0, body, 0.0]);
    }

    fn head(&mut self, headers: &[(String, String)], trace_id: &str) -> (f64, f64) {
        let before = self.text.len();
        for (i, (k, v)) in headers.iter().enumerate() {
            if i > 0 {
                self.text.push('\0');
            }
            self.text.push_str(k);
            self.text.push('\0');
            self.text.push_str(v);
        }
        let headers_len = utf16_len(&self.text[before..]);
        self.text.push_str(trace_id);
        (headers_len as f64, utf16_len(trace_id) as f64)
    }

    fn body(&mut self, body: Bytes) -> f64 {
        let len = body.len();
        if len <= SMALL_BODY {
            self.bodies.extend_from_slice(&body);
            len as f64
        } else {
            self.large.push(Vec::from(body));
            BODY_LARGE
        }
    }

    fn view<T: serde::Serialize>(&mut self, v: &T) {
        if !self.views.is_empty() {
            self.views.push(b',');
        }
        write_view(&mut self.views, v);
    }
}

type Wake = ThreadsafeFunction<(), Unknown<'static>, (), Status, false, true>;

/// A translated call waiting for `CompletionQueue::flush` to start it.
struct Staged {
    op: Operation,
    id: u32,
    cancel: Option<Arc<Notify>>,
}

pub(crate) struct QueueInner {
    rows: Mutex<Rows>,
    events: Mutex<String>,
    /// Set while a wake-up is queued on the JS thread, so a burst of completions costs one wake.
    scheduled: AtomicBool,
    wake: Wake,
    /// Calls made since the last flush (only the JS thread pushes).
    staged: Mutex<Vec<Staged>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl QueueInner {
    fn finish(&self, id: u32, outcome: std::result::Result<Outcome, HarnessError>) {
        lock(&self.rows).push(id, outcome);
        self.schedule();
    }

    fn schedule(&self) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }

    /// Queues one event (its JSON object) for the client JS knows as `key`.
    pub(crate) fn push_event(&self, key: u32, json: &str) {
        {
            let mut events = lock(&self.events);
            if !events.is_empty() {
                events.push(',');
            }
            events.push('[');
            events.push_str(&key.to_string());
            events.push(',');
            events.push_str(json);
            events.push(']');
        }
        self.schedule();
    }
}

/// Runs one staged operation to its outcome; `cancel` firing first gives `CancelledError`
/// (dropping the operation, and with it every permit it held, before the promise settles).
async fn run(s: Staged, queue: Arc<QueueInner>) {
    let Staged { op, id, cancel } = s;
    let started = op.start();
    let outcome = match cancel {
        None => started.await,
        Some(cancel) => tokio::select! {
            r = started => r,
            _ = cancel.notified() => Err(HarnessError::new(ErrorKind::Cancelled, "the request was cancelled")),
        },
    };
    queue.finish(id, outcome);
}

/// Where calls are staged and completions wait for the JS thread: one per JS module instance.
/// Its wake-up is a weak threadsafe function, so it never keeps the process alive by itself
/// (the JS wrapper holds the loop only while calls are pending).
#[napi]
pub struct CompletionQueue {
    pub(crate) inner: Arc<QueueInner>,
}

impl CompletionQueue {
    /// Stages `op`; `flush()` starts it and its outcome comes back under `id`.
    pub(crate) fn stage(&self, op: Operation, id: u32, cancel: Option<&CancelToken>) {
        lock(&self.inner.staged).push(Staged { op, id, cancel: cancel.map(|c| c.notify.clone()) });
    }
}

#[napi]
impl CompletionQueue {
    /// `onWake` is called on the JS thread when completions are ready; it calls `drain()`.
    #[napi(constructor)]
    pub fn new(on_wake: Function<(), Unknown<'static>>) -> Result<Self> {
        let wake = on_wake.build_threadsafe_function().callee_handled::<false>().weak::<true>().build_callback(|_| Ok(()))?;
        Ok(CompletionQueue {
            inner: Arc::new(QueueInner {
                rows: Mutex::new(Rows::default()),
                events: Mutex::new(String::new()),
                scheduled: AtomicBool::new(false),
                wake,
                staged: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Starts every staged call on the core runtime (the JS wrapper calls it once per tick).
    #[napi]
    pub fn flush(&self) {
        let staged = std::mem::take(&mut *lock(&self.inner.staged));
        if staged.is_empty() {
            return;
        }
        let queue = self.inner.clone();
        match harness_core::runtime::handle() {
            // One task crosses into the runtime and spawns the batch from a worker.
            Ok(handle) => drop(handle.spawn(async move {
                for s in staged {
                    tokio::spawn(run(s, queue.clone()));
                }
            })),
            Err(e) => {
                for s in staged {
                    queue.finish(s.id, Err(e.clone()));
                }
            }
        }
    }

    /// Every completion ready now.
    #[napi]
    pub fn drain(&self) -> CompletionBatch {
        // Clear the flag before taking, so a push racing this drain schedules a fresh wake.
        self.inner.scheduled.store(false, Ordering::Release);
        let rows = std::mem::take(&mut *lock(&self.inner.rows));
        let events = std::mem::take(&mut *lock(&self.inner.events));
        CompletionBatch {
            meta: Float64Array::new(rows.meta),
            text: rows.text,
            bodies: Buffer::from(rows.bodies),
            large: rows.large.into_iter().map(Buffer::from).collect(),
            views: text_of(rows.views),
            handles: rows
                .handles
                .into_iter()
                .map(|h| match h {
                    Handle::Stream(handle) => Either3::A(NativeStream { handle }),
                    Handle::ChatStream(handle) => Either3::B(NativeChatStream { handle }),
                    Handle::Lease(inner) => Either3::C(NativeLease { inner }),
                })
                .collect(),
            floats: rows.floats.into_iter().map(Float32Array::new).collect(),
            events,
        }
    }
}

/// A one-shot cancel switch the JS wrapper ties to an `AbortSignal`.
#[napi]
pub struct CancelToken {
    notify: Arc<Notify>,
}

#[napi]
impl CancelToken {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        CancelToken { notify: Arc::new(Notify::new()) }
    }

    /// Drops the call's future (freeing every permit it held); its promise settles with CancelledError.
    #[napi]
    pub fn cancel(&self) {
        // notify_one stores a permit, so a cancel that races ahead of the first poll is not lost.
        self.notify.notify_one();
    }
}

/// An opened streamed body; `index.js` wraps it in `StreamResponse` (its `body` async iterable).
/// Dropped by the GC without a `cancel()`, it releases its connection and permit then.
#[napi]
pub struct NativeStream {
    handle: StreamHandle,
}

#[napi]
impl NativeStream {
    /// Stages a read of the next chunk; it completes through `queue` under `id` (a chunk,
    /// the end, or an error).
    #[napi]
    pub fn read(&self, queue: &CompletionQueue, id: u32) {
        queue.stage(Operation::Read(self.handle.clone()), id, None);
    }

    /// Stops the stream: a pending read ends with CancelledError, and the connection and
    /// bulkhead permit are released at once.
    #[napi]
    pub fn cancel(&self) {
        self.handle.cancel();
    }
}

/// An opened chat stream; `index.js` wraps it in `ChatStream` (an async iterable of chunks).
/// Dropped by the GC without a `cancel()`, it releases its connection and permits then.
#[napi]
pub struct NativeChatStream {
    handle: ChatStreamHandle,
}

#[napi]
impl NativeChatStream {
    /// Stages a read of the next chunk; it completes through `queue` under `id` (a chunk,
    /// the end after `done`, or an error).
    #[napi]
    pub fn read(&self, queue: &CompletionQueue, id: u32) {
        queue.stage(Operation::ChatRead(self.handle.clone()), id, None);
    }

    /// Stops the answer: a pending read ends with CancelledError; connection and permits are released.
    #[napi]
    pub fn cancel(&self) {
        self.handle.cancel();
    }

    #[napi(getter)]
    pub fn route(&self) -> String {
        self.handle.route().to_string()
    }

    #[napi(getter)]
    pub fn trace_id(&self) -> String {
        self.handle.trace_id().to_string()
    }
}

/// A delivery's claim to run the handler (the core's `Lease`, opaque to JS: its fencing number
/// cannot be forged); the receiver (`idempotency.rs`) completes or fails it.
#[napi]
pub struct NativeLease {
    inner: Lease,
}

impl NativeLease {
    pub(crate) fn lease(&self) -> &Lease {
        &self.inner
    }
}

#[napi]
impl NativeLease {
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key.clone()
    }

    /// The fencing number (0 when the store was down and the handler runs without dedup).
    #[napi(getter)]
    pub fn fence(&self) -> f64 {
        self.inner.fence as f64
    }

    /// False when the store was down and `on_store_down: process` let it run without dedup.
    #[napi(getter)]
    pub fn deduplicated(&self) -> bool {
        self.inner.deduplicated
    }
}

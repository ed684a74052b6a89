//! The one completion pattern: everything that comes back to JS (a finished
//! request, an opened stream, a body chunk, a receiver claim, an event) is pushed
//! into this queue from any thread, and a single weak threadsafe function wakes the
//! JS thread, at most once per batch, to `drain()` it all. Work goes the other way the same
//! way: calls made in one JS tick are staged and start with one crossing into
//! the core's runtime (`flush`). JS matches each completion to its promise by id.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use harness_core::{ChatRequest, ChatResponse, ChatStreamHandle, Claim, ErrorKind, HarnessError, Idempotency, Lease, Request, Response, StreamHandle};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use tokio::sync::Notify;

use crate::convert::utf16_len;
use crate::errors::{native_error, NativeError};
use crate::idempotency::NativeLease;
use crate::routing::{chat_chunk, chat_response, routed, NativeChatChunk, NativeChatResponse, NativeChatStream, NativeRouted};
use crate::stream::NativeStream;

/// Numbers per completion in `CompletionBatch::meta`: id, status, elapsed ms, attempts, UTF-16
/// lengths of the header text and the trace id in `text`, body length in `bodies`, and 1 when
/// the response's routing record is the next of `routed` (else 0).
const FIELDS: usize = 8;
/// Bodies and chunks up to this size share the batch's `bodies` buffer; bigger ones cross on their own.
const SMALL_BODY: usize = 4096;
/// Status column: 0 = failed (its error is the next of `errors`), > 0 = an HTTP status.
const STATUS_CHUNK: f64 = -1.0;
const STATUS_END: f64 = -2.0;
/// Status of a chat answer (the next of `chats`), an opened chat stream (the next of
/// `chat_streams`) and a chat stream's chunk (the next of `chat_chunks`).
const STATUS_CHAT: f64 = -3.0;
const STATUS_CHAT_STREAM: f64 = -4.0;
const STATUS_CHAT_CHUNK: f64 = -5.0;
/// The receiver: a claim to run (the next of `leases`), a claim of a processed key (its stored
/// result, JSON text, is the row's body), and a `complete` or `fail` recorded.
const STATUS_LEASE: f64 = -6.0;
const STATUS_STORED: f64 = -7.0;
const STATUS_RECORDED: f64 = -8.0;
/// Body column: >= 0 = a length in `bodies`, -1 = the next of `large`, -2 = the next of `streams`.
const BODY_LARGE: f64 = -1.0;
const BODY_STREAM: f64 = -2.0;

/// The layout of `CompletionBatch::meta` (index.js reads it from here).
#[napi(object)]
pub struct CompletionLayout {
    pub fields: u32,
    /// Status of a body chunk (its bytes are the row's body).
    pub status_chunk: i32,
    /// Status of the end of a body or a chat stream (no more chunks).
    pub status_end: i32,
    /// Status of a chat answer (the next of `chats`).
    pub status_chat: i32,
    /// Status of an opened chat stream (the next of `chatStreams`).
    pub status_chat_stream: i32,
    /// Status of a chat stream's chunk (the next of `chatChunks`).
    pub status_chat_chunk: i32,
    /// Status of a receiver claim to run (the next of `leases`).
    pub status_lease: i32,
    /// Status of a receiver claim of a processed key (the stored result is the row's body).
    pub status_stored: i32,
    /// Status of a receiver `complete` or `fail` recorded.
    pub status_recorded: i32,
    /// Body length meaning "the next of `large`".
    pub body_large: i32,
    /// Body length meaning "the next of `streams`" (an opened stream).
    pub body_stream: i32,
}

#[napi]
pub fn completion_layout() -> CompletionLayout {
    CompletionLayout {
        fields: FIELDS as u32,
        status_chunk: STATUS_CHUNK as i32,
        status_end: STATUS_END as i32,
        status_chat: STATUS_CHAT as i32,
        status_chat_stream: STATUS_CHAT_STREAM as i32,
        status_chat_chunk: STATUS_CHAT_CHUNK as i32,
        status_lease: STATUS_LEASE as i32,
        status_stored: STATUS_STORED as i32,
        status_recorded: STATUS_RECORDED as i32,
        body_large: BODY_LARGE as i32,
        body_stream: BODY_STREAM as i32,
    }
}

/// Everything finished since the last `drain()`, laid out so that a whole batch crosses to JS
/// as a handful of values instead of an object per completion.
#[napi(object, object_from_js = false)]
pub struct CompletionBatch {
    /// `FIELDS` numbers per completion (see the constants above).
    pub meta: Float64Array,
    /// Per response or opened stream: its headers (`name\0value\0name\0value`, split lazily in JS),
    /// then its trace id.
    pub text: String,
    /// The small bodies and chunks, back to back (copied out in JS, so a kept body does not keep the batch).
    pub bodies: Buffer,
    pub large: Vec<Buffer>,
    pub errors: Vec<NativeError>,
    pub streams: Vec<NativeStream>,
    /// Routing records of responses to requests that named a route.
    pub routed: Vec<NativeRouted>,
    pub chats: Vec<NativeChatResponse>,
    pub chat_streams: Vec<NativeChatStream>,
    pub chat_chunks: Vec<NativeChatChunk>,
    /// Receiver claims to run.
    pub leases: Vec<NativeLease>,
    /// Events for listening clients, `[key,{"type":...}]` entries joined with `,` (JS wraps them in
    /// `[...]` and parses once); empty when none.
    pub events: String,
}

/// Completions waiting for the JS thread, in `CompletionBatch` layout.
#[derive(Default)]
struct Done {
    meta: Vec<f64>,
    text: String,
    bodies: Vec<u8>,
    large: Vec<Vec<u8>>,
    errors: Vec<NativeError>,
    streams: Vec<StreamHandle>,
    routed: Vec<NativeRouted>,
    chats: Vec<NativeChatResponse>,
    chat_streams: Vec<ChatStreamHandle>,
    chat_chunks: Vec<NativeChatChunk>,
    leases: Vec<Lease>,
}

impl Done {
    fn push_head(&mut self, headers: &[(String, String)], trace_id: &str) -> (f64, f64) {
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

    fn push_body(&mut self, body: Bytes) -> f64 {
        let len = body.len();
        if len <= SMALL_BODY {
            self.bodies.extend_from_slice(&body);
            len as f64
        } else {
            self.large.push(Vec::from(body));
            BODY_LARGE
        }
    }

    fn response(&mut self, id: u32, r: Response) {
        let (headers_len, trace_len) = self.push_head(&r.headers, &r.trace_id);
        let body = self.push_body(r.body);
        let has_routed = match r.routed {
            Some(rt) => {
                self.routed.push(routed(*rt));
                1.0
            }
            None => 0.0,
        };
        self.meta.extend_from_slice(&[f64::from(id), f64::from(r.status), r.elapsed_ms, f64::from(r.attempts), headers_len, trace_len, body, has_routed]);
    }

    fn stream(&mut self, id: u32, s: StreamHandle) {
        let (headers_len, trace_len) = self.push_head(s.headers(), s.trace_id());
        self.meta.extend_from_slice(&[f64::from(id), f64::from(s.status()), 0.0, f64::from(s.attempts()), headers_len, trace_len, BODY_STREAM, 0.0]);
        self.streams.push(s);
    }

    fn chunk(&mut self, id: u32, chunk: Option<Bytes>) {
        let (status, body) = match chunk {
            Some(c) => (STATUS_CHUNK, self.push_body(c)),
            None => (STATUS_END, 0.0),
        };
        self.meta.extend_from_slice(&[f64::from(id), status, 0.0, 0.0, 0.0, 0.0, body, 0.0]);
    }

    fn chat(&mut self, id: u32, r: ChatResponse) {
        self.chats.push(chat_response(r));
        self.meta.extend_from_slice(&[f64::from(id), STATUS_CHAT, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }

    fn chat_stream(&mut self, id: u32, s: ChatStreamHandle) {
        self.chat_streams.push(s);
        self.meta.extend_from_slice(&[f64::from(id), STATUS_CHAT_STREAM, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }

    fn chat_chunk(&mut self, id: u32, chunk: Option<harness_core::ChatChunk>) {
        let status = match chunk {
            Some(c) => {
                self.chat_chunks.push(chat_chunk(c));
                STATUS_CHAT_CHUNK
            }
            None => STATUS_END,
        };
        self.meta.extend_from_slice(&[f64::from(id), status, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }

    fn claim(&mut self, id: u32, claim: Claim) {
        match claim {
            Claim::Run(lease) => {
                self.leases.push(lease);
                self.meta.extend_from_slice(&[f64::from(id), STATUS_LEASE, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
            }
            Claim::Done(result) => {
                let body = self.push_body(result);
                self.meta.extend_from_slice(&[f64::from(id), STATUS_STORED, 0.0, 0.0, 0.0, 0.0, body, 0.0]);
            }
        }
    }

    fn recorded(&mut self, id: u32) {
        self.meta.extend_from_slice(&[f64::from(id), STATUS_RECORDED, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }

    fn error(&mut self, id: u32, e: HarnessError) {
        self.errors.push(native_error(e));
        self.meta.extend_from_slice(&[f64::from(id), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }
}

type Wake = ThreadsafeFunction<(), Unknown<'static>, (), Status, false, true>;

/// What a staged call does once it starts on the core runtime.
pub(crate) enum Work {
    /// A buffered request.
    Request(harness_core::Client, Request),
    /// A request up to its response head; the body is pulled with `Read`.
    Open(harness_core::Client, Request),
    /// The next chunk of an opened stream.
    Read(StreamHandle),
    /// A chat answer on a route.
    Chat(harness_core::Client, String, ChatRequest),
    /// A chat stream, up to its first provider's answer; chunks are pulled with `ChatRead`.
    ChatOpen(harness_core::Client, String, ChatRequest),
    /// The next chunk of a chat stream.
    ChatRead(ChatStreamHandle),
    /// A receiver claim of a key.
    Claim(Arc<Idempotency>, String),
    /// Storing a handler's result (JSON text) for a lease.
    Complete(Arc<Idempotency>, Lease, Vec<u8>),
    /// Marking a lease failed.
    Fail(Arc<Idempotency>, Lease),
}

/// A translated call waiting for `CompletionQueue::flush` to start it.
pub(crate) struct Staged {
    pub work: Work,
    pub id: u32,
    pub cancel: Option<Arc<Notify>>,
}

pub(crate) struct QueueInner {
    done: Mutex<Done>,
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
    fn finish(&self, push: impl FnOnce(&mut Done)) {
        push(&mut lock(&self.done));
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

    pub(crate) fn stage(&self, s: Staged) {
        lock(&self.staged).push(s);
    }
}

/// Awaits `call`, or gives `CancelledError` as soon as `cancel` fires (dropping the call,
/// and with it every permit it held, before the promise settles).
async fn cancellable<T>(call: impl std::future::Future<Output = std::result::Result<T, HarnessError>>, cancel: Option<Arc<Notify>>) -> std::result::Result<T, HarnessError> {
    match cancel {
        None => call.await,
        Some(cancel) => tokio::select! {
            r = call => r,
            _ = cancel.notified() => Err(HarnessError::new(ErrorKind::Cancelled, "the request was cancelled")),
        },
    }
}

/// Runs one staged call to its completion.
async fn run(s: Staged, queue: Arc<QueueInner>) {
    let Staged { work, id, cancel } = s;
    match work {
        Work::Request(client, req) => {
            // Boxed once here, so spawning and polling this task never copy the (large) pipeline future.
            let call = Box::pin(async move { client.request(req).await });
            match cancellable(call, cancel).await {
                Ok(r) => queue.finish(|d| d.response(id, r)),
                Err(e) => queue.finish(|d| d.error(id, e)),
            }
        }
        Work::Open(client, req) => {
            let call = Box::pin(async move { client.stream(req).await });
            match cancellable(call, cancel).await {
                Ok(s) => queue.finish(|d| d.stream(id, StreamHandle::new(s))),
                Err(e) => queue.finish(|d| d.error(id, e)),
            }
        }
        Work::Read(stream) => match stream.next().await {
            Ok(chunk) => queue.finish(|d| d.chunk(id, chunk)),
            Err(e) => queue.finish(|d| d.error(id, e)),
        },
        Work::Chat(client, route, chat) => {
            let call = Box::pin(async move { client.chat(&route, chat).await });
            match cancellable(call, cancel).await {
                Ok(r) => queue.finish(|d| d.chat(id, r)),
                Err(e) => queue.finish(|d| d.error(id, e)),
            }
        }
        Work::ChatOpen(client, route, chat) => {
            let call = Box::pin(async move { client.chat_stream(&route, chat).await });
            match cancellable(call, cancel).await {
                Ok(s) => queue.finish(|d| d.chat_stream(id, ChatStreamHandle::new(s))),
                Err(e) => queue.finish(|d| d.error(id, e)),
            }
        }
        Work::ChatRead(stream) => match stream.next().await {
            Ok(chunk) => queue.finish(|d| d.chat_chunk(id, chunk)),
            Err(e) => queue.finish(|d| d.error(id, e)),
        },
        Work::Claim(idem, key) => match idem.claim(&key).await {
            Ok(claim) => queue.finish(|d| d.claim(id, claim)),
            Err(e) => queue.finish(|d| d.error(id, e)),
        },
        Work::Complete(idem, lease, result) => match idem.complete(&lease, &result).await {
            Ok(()) => queue.finish(|d| d.recorded(id)),
            Err(e) => queue.finish(|d| d.error(id, e)),
        },
        Work::Fail(idem, lease) => match idem.fail(&lease).await {
            Ok(()) => queue.finish(|d| d.recorded(id)),
            Err(e) => queue.finish(|d| d.error(id, e)),
        },
    }
}

/// Where calls are staged and completions wait for the JS thread: one per JS module instance.
/// Its wake-up is a weak threadsafe function, so it never keeps the process alive by itself
/// (the JS wrapper holds the loop only while calls are pending).
#[napi]
pub struct CompletionQueue {
    pub(crate) inner: Arc<QueueInner>,
}

#[napi]
impl CompletionQueue {
    /// `onWake` is called on the JS thread when completions are ready; it calls `drain()`.
    #[napi(constructor)]
    pub fn new(on_wake: Function<(), Unknown<'static>>) -> Result<Self> {
        let wake = on_wake.build_threadsafe_function().callee_handled::<false>().weak::<true>().build_callback(|_| Ok(()))?;
        Ok(CompletionQueue {
            inner: Arc::new(QueueInner {
                done: Mutex::new(Done::default()),
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
                    queue.finish(|d| d.error(s.id, e.clone()));
                }
            }
        }
    }

    /// Every completion ready now.
    #[napi]
    pub fn drain(&self) -> CompletionBatch {
        // Clear the flag before taking, so a push racing this drain schedules a fresh wake.
        self.inner.scheduled.store(false, Ordering::Release);
        let done = std::mem::take(&mut *lock(&self.inner.done));
        let events = std::mem::take(&mut *lock(&self.inner.events));
        CompletionBatch {
            meta: Float64Array::new(done.meta),
            text: done.text,
            bodies: Buffer::from(done.bodies),
            large: done.large.into_iter().map(Buffer::from).collect(),
            errors: done.errors,
            streams: done.streams.into_iter().map(NativeStream::new).collect(),
            routed: done.routed,
            chats: done.chats,
            chat_streams: done.chat_streams.into_iter().map(NativeChatStream::new).collect(),
            chat_chunks: done.chat_chunks,
            leases: done.leases.into_iter().map(NativeLease::new).collect(),
            events,
        }
    }
}

/// A one-shot cancel switch the JS wrapper ties to an `AbortSignal`.
#[napi]
pub struct CancelToken {
    pub(crate) notify: Arc<Notify>,
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

//! The request path: one downcall starts a request or a chat call (or opens a stream or a
//! chat stream, or reads one of its chunks); outcomes come back in batches, with no upcall: one
//! JVM thread waits in `harness_kotlin_wait`, which returns every outcome queued by the time
//! it wakes as one batch. The engine's threads only queue an outcome (and wake that thread
//! when the queue was empty and it sleeps); they never run JVM code. Measured against an
//! upcall per batch (JNA attaches and calls back into the JVM on the engine's worker, which
//! then decodes and resumes there while the worker's other tasks wait): see the README,
//! "How outcomes come back".
//!
//! UniFFI's async protocol costs several JNA calls per request, each with by-value
//! structures the JVM must allocate and clean up (measured: most of the binding's CPU).
//! These C functions take and return only integers and one byte array. A request crosses as
//! its head in the core's JSON (`Request::from_host`) with the body beside it, a chat call as
//! the core's `ChatRequest` JSON (frames: `request_frame`, `chat_frame`); outcomes travel in
//! UniFFI's own serialisation of `NativeResponse`, `NativeStreamHead`, `NativeChatStreamHead`,
//! `NativeLease` and `NativeError` (a receiver's step as `NativeReceiverCall`), so both sides
//! use the generated converters; chat answers and chunks cross as the core's JSON views,
//! decoded into the generated `Types.kt`.
//!
//! One pattern, no addresses (README "How outcomes come back"):
//! - the JVM names its waiting caller by a *ticket*, an id in its own registry of calls;
//!   every outcome comes back as a row of a batch with that ticket and a tag saying what the
//!   bytes are;
//! - Rust objects are named by generation-checked *handles* (`handles.rs`): the client,
//!   a receiver, a running request's task, an open stream. A stale handle finds nothing.
//!
//! Ownership: `harness_kotlin_start` / `harness_kotlin_open` (and `harness_kotlin_chat` /
//! `harness_kotlin_chat_open`, `harness_kotlin_receive`) return a task handle (0 when
//! the outcome was already delivered); the JVM drops it once with `harness_kotlin_drop`,
//! which aborts the work (freeing its permits) if it is still running. An opened stream is
//! in `STREAMS` until its body ends or fails (removed here) or the JVM closes it with
//! `harness_kotlin_close`, which cancels it and frees its connection and permit at once.
//! Nothing here unwinds into the JVM: every entry point catches panics.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Condvar, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use harness_core::runtime::{self, Task};
use harness_core::{Body, ChatRequest, ChatResponse, ChatStreamHandle, Claim, EmbedRequest, EmbedResponse, ErrorKind, HarnessError, Request, StreamHandle};
use uniffi::{Lift, Lower};

use crate::handles::{Handles, CLIENTS, RECEIVERS};
use crate::receiver::{NativeLease, NativeReceiverCall};
use crate::chat::NativeChatStreamHead;
use crate::values::{NativeEntry, NativeError, NativeResponse, NativeStreamHead};
use crate::UniFfiTag;

/// `NativeResponse`, the outcome of `harness_kotlin_start`.
const RESPONSE: i32 = 0;
/// `NativeError`, for any call.
const ERROR: i32 = 1;
/// `NativeStreamHead`, the outcome of `harness_kotlin_open`.
const STREAM: i32 = 2;
/// One body chunk, as raw bytes, from `harness_kotlin_next`.
const CHUNK: i32 = 3;
/// The body ended completely (no bytes), from `harness_kotlin_next`; for a chat stream,
/// after its `done` chunk.
const END: i32 = 4;
/// A chat answer, the outcome of `harness_kotlin_chat`: a 4-byte big-endian length, the
/// core's `ChatResponse` view as JSON text of that length, then the provider's raw answer.
const CHAT: i32 = 5;
/// `NativeChatStreamHead`, the outcome of `harness_kotlin_chat_open`.
const CHAT_STREAM: i32 = 6;
/// One chat chunk (the core's `ChatChunk` view as JSON text), from `harness_kotlin_next`.
const CHAT_CHUNK: i32 = 7;
/// `NativeLease`: a claim from `harness_kotlin_receive` that lets the handler run.
const LEASE: i32 = 8;
/// The stored result (its JSON text, raw bytes): a claim from `harness_kotlin_receive` for a
/// message already processed.
const STORED: i32 = 9;
/// An embeddings answer, the outcome of `harness_kotlin_embed`: a 4-byte big-endian length,
/// the core's `EmbedResponse` view as JSON text of that length, then every vector as
/// little-endian float32s, one after another (`EmbedResponse::le_bytes`), read in one copy.
const EMBED: i32 = 10;

/// Outcomes not yet taken, and how many threads sleep in `harness_kotlin_wait` for them.
static QUEUE: Mutex<Queue> = Mutex::new(Queue { outcomes: Vec::new(), sleeping: 0 });
/// Signalled when an outcome lands in an empty queue while a waiter sleeps.
static READY: Condvar = Condvar::new();

struct Queue {
    outcomes: Vec<Outcome>,
    sleeping: u32,
}

/// One finished call: its ticket, what the bytes are, the bytes.
struct Outcome {
    ticket: i64,
    tag: i32,
    data: Vec<u8>,
}

/// One row of a drained batch as the JVM reads it (32 bytes, native byte order): the ticket,
/// the tag, the outcome's bytes (address and length, valid until `harness_kotlin_free`).
#[repr(C)]
struct Row {
    ticket: i64,
    tag: i32,
    _pad: i32,
    data: *const u8,
    len: u64,
}

/// A drained batch: `count` and `rows` are what the JVM reads (`RequestPath.drain`); the rows
/// point into `outcomes`, kept here until the JVM frees the batch.
#[repr(C)]
struct Batch {
    count: u64,
    rows: *const Row,
    row_store: Vec<Row>,
    outcomes: Vec<Outcome>,
}

/// Started requests and stream opens, until the JVM drops them.
static TASKS: Handles<Task<()>> = Handles::new();
/// Open streams (bodies and chat streams), until they end or the JVM closes them.
static STREAMS: Handles<OpenStream> = Handles::new();

/// What an open stream's handle names: one table, so a handle never means two things.
#[derive(Clone)]
enum OpenStream {
    Body(StreamHandle),
    Chat(ChatStreamHandle),
}

impl OpenStream {
    fn cancel(&self) {
        match self {
            OpenStream::Body(s) => s.cancel(),
            OpenStream::Chat(s) => s.cancel(),
        }
    }
}

/// Waits up to `timeout_ms` for outcomes, then takes every queued one as one batch (an
/// address; 0 when none came in time; `timeout_ms` 0 does not wait). The JVM reads the batch's
/// rows and frees it once with `harness_kotlin_free`; batches are independent, so two threads
/// may each wait and hold one.
#[no_mangle]
pub extern "C" fn harness_kotlin_wait(timeout_ms: u32) -> u64 {
    catch_unwind(|| {
        let outcomes = {
            let mut queue = QUEUE.lock().unwrap_or_else(|p| p.into_inner());
            if queue.outcomes.is_empty() && timeout_ms > 0 {
                queue.sleeping += 1;
                queue = READY
                    .wait_timeout_while(queue, Duration::from_millis(timeout_ms.into()), |q| q.outcomes.is_empty())
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                queue.sleeping -= 1;
            }
            std::mem::take(&mut queue.outcomes)
        };
        if outcomes.is_empty() {
            return 0;
        }
        let row_store: Vec<Row> = outcomes
            .iter()
            .map(|o| Row { ticket: o.ticket, tag: o.tag, _pad: 0, data: o.data.as_ptr(), len: o.data.len() as u64 })
            .collect();
        let batch = Box::new(Batch { count: row_store.len() as u64, rows: row_store.as_ptr(), row_store, outcomes });
        Box::into_raw(batch) as u64
    })
    .unwrap_or(0)
}

/// Frees a batch from `harness_kotlin_wait` (its rows and bytes); 0 is a no-op.
///
/// # Safety
/// `batch` must come from `harness_kotlin_wait` and be freed once.
#[no_mangle]
pub unsafe extern "C" fn harness_kotlin_free(batch: u64) {
    if batch != 0 {
        // SAFETY: the caller's contract: a live batch from `harness_kotlin_wait`, freed once.
        drop(unsafe { Box::from_raw(batch as *mut Batch) });
    }
}

/// One starting entry point: `$name(owner, ticket, bytes, len)` reads its `len` bytes, runs
/// `$start(owner, ticket, bytes)` guarded against panics, and returns the task to drop with
/// `harness_kotlin_drop` (0 when the outcome was already delivered).
macro_rules! entry {
    ($(#[doc = $doc:literal])* $name:ident => $start:expr) => {
        $(#[doc = $doc])*
        ///
        /// # Safety
        /// `bytes` must point to `len` readable bytes (or `len` be 0).
        #[no_mangle]
        pub unsafe extern "C" fn $name(owner: u64, ticket: i64, bytes: *const u8, len: u64) -> u64 {
            // SAFETY: the caller's contract above.
            let bytes = unsafe { self::bytes(bytes, len) };
            guarded(ticket, || $start(owner, ticket, bytes))
        }
    };
}

entry! {
    /// Starts a request (a request frame: `request_frame`) on the client `owner`
    /// (`NativeClient::handle`); the outcome (`RESPONSE` or `ERROR`) is delivered with `ticket`.
    harness_kotlin_start => |c, t, b| start(c, t, b, Mode::Buffered)
}

entry! {
    /// Opens a request as a stream: the outcome is `STREAM` (the head and the stream's handle)
    /// or `ERROR` (an error status fails here, before the body).
    harness_kotlin_open => |c, t, b| start(c, t, b, Mode::Stream)
}

entry! {
    /// Starts a chat call (a chat frame: `chat_frame`) on `owner`: the outcome is `CHAT` or `ERROR`.
    harness_kotlin_chat => |c, t, b| start_chat(c, t, b, Mode::Buffered)
}

entry! {
    /// Opens a chat stream: the outcome is `CHAT_STREAM` (the stream's handle, route and trace
    /// id) once a provider answered, or `ERROR`; its chunks are read with `harness_kotlin_next`.
    harness_kotlin_chat_open => |c, t, b| start_chat(c, t, b, Mode::Stream)
}

entry! {
    /// Starts an embeddings call (an embed frame: `embed_frame`) on `owner`: the outcome is
    /// `EMBED` or `ERROR`.
    harness_kotlin_embed => start_embed
}

entry! {
    /// Runs one step of a delivery (serialised `NativeReceiverCall`) on the receiver `owner`
    /// (`NativeIdempotency::handle`). A claim's outcome is `LEASE` (run the handler), `STORED`
    /// (already processed: the stored result) or `ERROR` (`DuplicateInFlightError`, ...);
    /// `complete` and `fail` end with `END` or `ERROR`.
    harness_kotlin_receive => receive
}

/// Drops a task from `harness_kotlin_start` or `harness_kotlin_open`: aborts it if still
/// running. A stale handle (dropped before) is a no-op.
#[no_mangle]
pub extern "C" fn harness_kotlin_drop(task: u64) {
    let _ = catch_unwind(AssertUnwindSafe(|| drop(TASKS.remove(task))));
}

/// Reads the next chunk of `stream`; the outcome is `CHUNK` (a body) or `CHAT_CHUNK` (a chat
/// stream), `END` or `ERROR`, with `ticket`. After `END` or `ERROR` the stream is gone (its
/// handle finds nothing).
#[no_mangle]
pub extern "C" fn harness_kotlin_next(stream: u64, ticket: i64) {
    let read = catch_unwind(AssertUnwindSafe(|| {
        let Some(handle) = STREAMS.get(stream) else {
            return deliver_error(ticket, HarnessError::new(ErrorKind::Cancelled, "the stream is closed").into());
        };
        let spawned = runtime::handle().map(|rt| {
            // Detached: a waiting read ends when the stream does, and `harness_kotlin_close` ends it.
            drop(rt.spawn(async move {
                match handle {
                    OpenStream::Body(body) => {
                        let outcome = CatchUnwind(body.next()).await;
                        if !matches!(outcome, Ok(Ok(Some(_)))) {
                            drop(STREAMS.remove(stream));
                        }
                        match outcome {
                            Ok(Ok(Some(chunk))) => deliver(ticket, CHUNK, chunk),
                            Ok(Ok(None)) => deliver(ticket, END, Vec::new()),
                            Ok(Err(e)) => deliver_error(ticket, e.into()),
                            Err(_) => deliver_error(ticket, bug("reading the stream panicked (a bug in Harness)")),
                        }
                    }
                    OpenStream::Chat(chat) => {
                        let outcome = CatchUnwind(chat.next()).await;
                        if !matches!(outcome, Ok(Ok(Some(_)))) {
                            drop(STREAMS.remove(stream));
                        }
                        match outcome {
                            Ok(Ok(Some(chunk))) => deliver(ticket, CHAT_CHUNK, serde_json::to_vec(&chunk).unwrap_or_default()),
                            Ok(Ok(None)) => deliver(ticket, END, Vec::new()),
                            Ok(Err(e)) => deliver_error(ticket, e.into()),
                            Err(_) => deliver_error(ticket, bug("reading the chat stream panicked (a bug in Harness)")),
                        }
                    }
                }
            }))
        });
        if let Err(e) = spawned {
            drop(STREAMS.remove(stream));
            deliver_error(ticket, e.into());
        }
    }));
    if read.is_err() {
        deliver_error(ticket, bug("reading the stream panicked"));
    }
}

/// Stops reading `stream`: a waiting read ends with `CancelledError`, and the connection and
/// the bulkhead permit are released at once. A stale handle (ended or closed) is a no-op.
#[no_mangle]
pub extern "C" fn harness_kotlin_close(stream: u64) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some(s) = STREAMS.remove(stream) {
            s.cancel();
        }
    }));
}

/// # Safety
/// `data` must point to `len` readable bytes, valid for the rest of the entry point.
unsafe fn bytes<'a>(data: *const u8, len: u64) -> &'a [u8] {
    if len == 0 || data.is_null() {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(data, len as usize) }
    }
}

/// Runs a starting entry point; a panic becomes an `ERROR` outcome (and no task).
fn guarded(ticket: i64, f: impl FnOnce() -> u64) -> u64 {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| fail(ticket, bug("starting the request panicked")))
}

// A request frame's first byte: what its body is (`RequestPath.kt` writes the same).
const BODY_NONE: u8 = 0;
const BODY_JSON: u8 = 1;
const BODY_BYTES: u8 = 2;

/// A 4-byte big-endian length, that many bytes, and the rest.
fn split(frame: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = frame.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
    (len <= rest.len()).then(|| rest.split_at(len))
}

fn malformed(what: &str) -> HarnessError {
    HarnessError::new(ErrorKind::Harness, format!("the {what} frame did not decode (a bug in Harness)"))
}

/// A request as the facade frames it (`RequestPath.request`): the body's kind (one byte), the
/// head's length, the head (the core's `Request` as JSON, without the body), then the body.
/// Every field's rule is the core's (`Request::from_host`).
fn request_frame(frame: &[u8]) -> Result<Request, HarnessError> {
    let Some((&kind, rest)) = frame.split_first() else { return Err(malformed("request")) };
    let Some((head, body)) = split(rest) else { return Err(malformed("request")) };
    let body = match kind {
        BODY_NONE if body.is_empty() => Body::Empty,
        // Not parsed here: the core checks nesting, NaN and lone surrogates and sends it as is.
        BODY_JSON => Body::JsonText(bytes::Bytes::copy_from_slice(body)),
        BODY_BYTES => Body::Bytes(bytes::Bytes::copy_from_slice(body)),
        _ => return Err(malformed("request")),
    };
    Request::from_host(head, body)
}

/// A chat call as the facade frames it (`RequestPath.chat`): the route's length, the route,
/// then the call as the core's `ChatRequest` JSON (`ChatRequest::from_host`).
fn chat_frame(frame: &[u8]) -> Result<(String, ChatRequest), HarnessError> {
    let Some((route, call)) = split(frame) else { return Err(malformed("chat")) };
    let Ok(route) = std::str::from_utf8(route) else { return Err(malformed("chat")) };
    Ok((route.to_string(), ChatRequest::from_host(call)?))
}

/// An embeddings call as the facade frames it (`RequestPath.chat`, the same layout): the
/// route's length, the route, then the call as the core's `EmbedRequest` JSON
/// (`EmbedRequest::from_host`).
fn embed_frame(frame: &[u8]) -> Result<(String, EmbedRequest), HarnessError> {
    let Some((route, call)) = split(frame) else { return Err(malformed("embed")) };
    let Ok(route) = std::str::from_utf8(route) else { return Err(malformed("embed")) };
    Ok((route.to_string(), EmbedRequest::from_host(call)?))
}

#[derive(Clone, Copy)]
enum Mode {
    Buffered,
    Stream,
}

/// The task's handle, or 0 once the outcome was delivered (a request that cannot start).
fn start(client: u64, ticket: i64, bytes: &[u8], mode: Mode) -> u64 {
    let Some(client) = CLIENTS.get(client) else {
        return fail(ticket, HarnessError::new(ErrorKind::Harness, "the client is closed").into());
    };
    let request = match request_frame(bytes) {
        Ok(r) => r,
        Err(e) => return fail(ticket, e.into()),
    };
    spawn_task(ticket, async move {
        match mode {
            Mode::Buffered => match CatchUnwind(client.request(request)).await {
                Ok(Ok(response)) => deliver_value(ticket, RESPONSE, NativeResponse::from(response)),
                Ok(Err(e)) => deliver_error(ticket, e.into()),
                Err(_) => deliver_error(ticket, bug("the request task panicked (a bug in Harness)")),
            },
            Mode::Stream => match CatchUnwind(client.stream(request)).await {
                Ok(Ok(stream)) => opened(ticket, StreamHandle::new(stream)),
                Ok(Err(e)) => deliver_error(ticket, e.into()),
                Err(_) => deliver_error(ticket, bug("opening the stream panicked (a bug in Harness)")),
            },
        }
    })
}

/// `start` for a chat call (`Buffered`) or a chat stream (`Stream`).
fn start_chat(client: u64, ticket: i64, bytes: &[u8], mode: Mode) -> u64 {
    let Some(client) = CLIENTS.get(client) else {
        return fail(ticket, HarnessError::new(ErrorKind::Harness, "the client is closed").into());
    };
    let (route, chat) = match chat_frame(bytes) {
        Ok(r) => r,
        Err(e) => return fail(ticket, e.into()),
    };
    spawn_task(ticket, async move {
        match mode {
            Mode::Buffered => match CatchUnwind(client.chat(&route, chat)).await {
                Ok(Ok(answer)) => deliver(ticket, CHAT, chat_bytes(&answer)),
                Ok(Err(e)) => deliver_error(ticket, e.into()),
                Err(_) => deliver_error(ticket, bug("the chat task panicked (a bug in Harness)")),
            },
            Mode::Stream => match CatchUnwind(client.chat_stream(&route, chat)).await {
                Ok(Ok(stream)) => chat_opened(ticket, ChatStreamHandle::new(stream)),
                Ok(Err(e)) => deliver_error(ticket, e.into()),
                Err(_) => deliver_error(ticket, bug("opening the chat stream panicked (a bug in Harness)")),
            },
        }
    })
}

/// `start` for an embeddings call.
fn start_embed(client: u64, ticket: i64, bytes: &[u8]) -> u64 {
    let Some(client) = CLIENTS.get(client) else {
        return fail(ticket, HarnessError::new(ErrorKind::Harness, "the client is closed").into());
    };
    let (route, call) = match embed_frame(bytes) {
        Ok(r) => r,
        Err(e) => return fail(ticket, e.into()),
    };
    spawn_task(ticket, async move {
        match CatchUnwind(client.embed(&route, call)).await {
            Ok(Ok(answer)) => deliver(ticket, EMBED, embed_bytes(&answer)),
            Ok(Err(e)) => deliver_error(ticket, e.into()),
            Err(_) => deliver_error(ticket, bug("the embeddings task panicked (a bug in Harness)")),
        }
    })
}

/// `start` for a receiver's step: the core's `claim`, `complete` or `fail`, nothing more.
fn receive(receiver: u64, ticket: i64, mut bytes: &[u8]) -> u64 {
    let Some(receiver) = RECEIVERS.get(receiver) else {
        return fail(ticket, HarnessError::new(ErrorKind::Harness, "the receiver is closed").into());
    };
    let call = match <NativeReceiverCall as Lift<UniFfiTag>>::try_read(&mut bytes) {
        Ok(c) => c,
        Err(e) => return fail(ticket, bug(&format!("the receiver call did not decode: {e}"))),
    };
    spawn_task(ticket, async move {
        let step = async {
            match call {
                NativeReceiverCall::Claim { key } => match receiver.claim(&key).await {
                    Ok(Claim::Run(lease)) => deliver_value(ticket, LEASE, NativeLease::from(lease)),
                    Ok(Claim::Done(result)) => deliver(ticket, STORED, result),
                    Err(e) => deliver_error(ticket, e.into()),
                },
                NativeReceiverCall::Complete { lease, result } => match receiver.complete(&lease.into(), result.as_bytes()).await {
                    Ok(()) => deliver(ticket, END, Vec::new()),
                    Err(e) => deliver_error(ticket, e.into()),
                },
                NativeReceiverCall::Fail { lease } => match receiver.fail(&lease.into()).await {
                    Ok(()) => deliver(ticket, END, Vec::new()),
                    Err(e) => deliver_error(ticket, e.into()),
                },
            }
        };
        if CatchUnwind(step).await.is_err() {
            deliver_error(ticket, bug("the receiver task panicked (a bug in Harness)"));
        }
    })
}

/// Spawns a started call on the core's runtime and keeps its task under a handle for the JVM
/// to drop; 0 once the outcome was delivered (it could not be spawned).
fn spawn_task(ticket: i64, work: impl Future<Output = ()> + Send + 'static) -> u64 {
    let task = match runtime::spawn(work) {
        Ok(task) => task,
        Err(e) => return fail(ticket, e.into()),
    };
    match TASKS.insert(task) {
        Ok(handle) => handle,
        // Dropping the task aborts it; the JVM hears why.
        Err(task) => {
            drop(task);
            fail(ticket, HarnessError::new(ErrorKind::Harness, "too many requests in flight").into())
        }
    }
}

/// Keeps the opened stream under a handle and delivers its head (the JVM closes it if
/// its caller has gone meanwhile).
fn opened(ticket: i64, handle: StreamHandle) {
    let mut head = NativeStreamHead {
        stream: 0,
        status: handle.status(),
        headers: handle.headers().iter().map(|(name, value)| NativeEntry { name: name.clone(), value: value.clone() }).collect(),
        attempts: handle.attempts(),
        trace_id: handle.trace_id().to_string(),
    };
    match STREAMS.insert(OpenStream::Body(handle)) {
        Ok(stream) => {
            head.stream = stream;
            deliver_value(ticket, STREAM, head);
        }
        Err(handle) => {
            handle.cancel();
            deliver_error(ticket, HarnessError::new(ErrorKind::Harness, "too many open streams").into());
        }
    }
}

/// `opened` for a chat stream.
fn chat_opened(ticket: i64, handle: ChatStreamHandle) {
    let mut head = NativeChatStreamHead { stream: 0, route: handle.route().to_string(), trace_id: handle.trace_id().to_string() };
    match STREAMS.insert(OpenStream::Chat(handle)) {
        Ok(stream) => {
            head.stream = stream;
            deliver_value(ticket, CHAT_STREAM, head);
        }
        Err(handle) => {
            handle.cancel();
            deliver_error(ticket, HarnessError::new(ErrorKind::Harness, "too many open streams").into());
        }
    }
}

fn fail(ticket: i64, error: NativeError) -> u64 {
    deliver_error(ticket, error);
    0
}

/// `CHAT`'s bytes: the view's length, the view, the raw answer.
fn chat_bytes(answer: &ChatResponse) -> Vec<u8> {
    let view = serde_json::to_vec(answer).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + view.len() + answer.raw.len());
    out.extend_from_slice(&(view.len() as u32).to_be_bytes());
    out.extend_from_slice(&view);
    out.extend_from_slice(&answer.raw);
    out
}

/// `EMBED`'s bytes: the view's length, the view, the vectors as little-endian float32s.
fn embed_bytes(answer: &EmbedResponse) -> Vec<u8> {
    let view = serde_json::to_vec(answer).unwrap_or_default();
    let vectors = answer.le_bytes();
    let mut out = Vec::with_capacity(4 + view.len() + vectors.len());
    out.extend_from_slice(&(view.len() as u32).to_be_bytes());
    out.extend_from_slice(&view);
    out.extend_from_slice(&vectors);
    out
}

fn deliver_value<T: Lower<UniFfiTag>>(ticket: i64, tag: i32, value: T) {
    let mut data = Vec::with_capacity(256);
    T::write(value, &mut data);
    push(Outcome { ticket, tag, data });
}

fn deliver_error(ticket: i64, error: NativeError) {
    deliver_value(ticket, ERROR, error);
}

/// Queues an outcome's bytes as they are (an owned buffer is not copied again).
fn deliver(ticket: i64, tag: i32, data: impl Into<Vec<u8>>) {
    push(Outcome { ticket, tag, data: data.into() });
}

/// Queues an outcome; one that lands in an empty queue wakes a sleeping waiter (the others
/// join the batch it is about to take, so a busy JVM is not woken per outcome).
fn push(outcome: Outcome) {
    let mut queue = QUEUE.lock().unwrap_or_else(|p| p.into_inner());
    queue.outcomes.push(outcome);
    let wake = queue.outcomes.len() == 1 && queue.sleeping > 0;
    drop(queue);
    if wake {
        READY.notify_one();
    }
}

fn bug(message: &str) -> NativeError {
    HarnessError::new(ErrorKind::Harness, message.to_string()).into()
}

/// Turns a panic inside a future into an outcome, so the JVM always hears back.
struct CatchUnwind<F>(F);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning; the inner future is never moved out.
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(poll) => poll.map(Ok),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    use crate::NativeClient;

    /// Outcomes by ticket: (tag, bytes).
    type Outcomes = HashMap<i64, (i32, Vec<u8>)>;

    static OUTCOMES: Mutex<Option<Outcomes>> = Mutex::new(None);
    static DELIVERED: Condvar = Condvar::new();
    static TICKETS: AtomicI64 = AtomicI64::new(1);

    /// The JVM's part (`RequestPath.drain`): take a batch when one comes, read each row, free it.
    /// It waits a minute at a time, so an outcome whose wake-up got lost would miss `wait`'s
    /// 10 s and fail the test, not arrive at the next timeout.
    fn record() {
        let batch = harness_kotlin_wait(60_000);
        if batch == 0 {
            return;
        }
        let b = unsafe { &*(batch as *const Batch) };
        let rows = unsafe { std::slice::from_raw_parts(b.rows, b.count as usize) };
        let mut outcomes = OUTCOMES.lock().unwrap();
        for row in rows {
            let bytes = unsafe { bytes(row.data, row.len) }.to_vec();
            outcomes.get_or_insert_with(HashMap::new).insert(row.ticket, (row.tag, bytes));
        }
        drop(outcomes);
        unsafe { harness_kotlin_free(batch) };
        DELIVERED.notify_all();
    }

    fn wait(ticket: i64) -> (i32, Vec<u8>) {
        let mut outcomes = OUTCOMES.lock().unwrap();
        loop {
            if let Some(b) = outcomes.get_or_insert_with(HashMap::new).remove(&ticket) {
                return b;
            }
            let (guard, timeout) = DELIVERED.wait_timeout(outcomes, Duration::from_secs(10)).unwrap();
            assert!(!timeout.timed_out(), "no outcome for ticket {ticket}");
            outcomes = guard;
        }
    }

    fn ticket() -> i64 {
        // Two waiting threads, as a JVM could have: each batch goes to one of them.
        static DRAINERS: std::sync::Once = std::sync::Once::new();
        DRAINERS.call_once(|| {
            for _ in 0..2 {
                std::thread::spawn(|| loop {
                    record()
                });
            }
        });
        TICKETS.fetch_add(1, Ordering::Relaxed)
    }

    /// Starts `request` and waits for its outcome: (task returned, tag, outcome bytes).
    fn run(client: u64, request: &[u8]) -> (u64, i32, Vec<u8>) {
        let ticket = ticket();
        let task = unsafe { harness_kotlin_start(client, ticket, request.as_ptr(), request.len() as u64) };
        let (tag, bytes) = wait(ticket);
        harness_kotlin_drop(task);
        (task, tag, bytes)
    }

    fn client() -> NativeClient {
        crate::tests::from_json(r#"{"log": {"enabled": false}, "services": {"svc": {"base_url": "http://127.0.0.1:1"}}}"#).unwrap()
    }

    /// A request frame as `RequestPath.request` writes it.
    fn frame(kind: u8, head: &str, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend((head.len() as u32).to_be_bytes());
        out.extend(head.as_bytes());
        out.extend(body);
        out
    }

    fn encoded(json: Option<&str>) -> Vec<u8> {
        let head = r#"{"service":"svc","method":"POST","path":"/x"}"#;
        match json {
            Some(text) => frame(BODY_JSON, head, text.as_bytes()),
            None => frame(BODY_NONE, head, b""),
        }
    }

    fn contains(haystack: &[u8], needle: &str) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    /// Outcomes pushed from many threads at once, each waking (or joining a batch) as it
    /// comes: every one is drained exactly once, none waits for a wake-up that never comes.
    #[test]
    fn outcomes_from_many_threads_all_arrive_once() {
        let first = ticket();
        const THREADS: i64 = 8;
        const EACH: i64 = 5_000;
        let base = TICKETS.fetch_add(THREADS * EACH, Ordering::Relaxed);
        let pushers: Vec<_> = (0..THREADS)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        let ticket = base + t * EACH + i;
                        deliver(ticket, CHUNK, ticket.to_le_bytes().to_vec());
                    }
                })
            })
            .collect();
        for p in pushers {
            p.join().unwrap();
        }
        for ticket in base..base + THREADS * EACH {
            assert_eq!(wait(ticket), (CHUNK, ticket.to_le_bytes().to_vec()));
        }
        assert!(first < base);
    }

    #[test]
    fn a_request_that_cannot_start_is_delivered_at_once_as_a_config_error() {
        let bad = frame(BODY_NONE, r#"{"service":"svc","method":"POST","path":"/x","timeout_ms":-1}"#, b"");
        let (task, tag, outcome) = run(client().handle(), &bad);
        assert_eq!((task, tag), (0, ERROR));
        assert!(contains(&outcome, "ConfigError") && contains(&outcome, "request.timeout_ms"), "{}", String::from_utf8_lossy(&outcome));
    }

    #[test]
    fn a_frame_keeps_the_body_the_host_wrote_byte_for_byte() {
        let text = r#"{"z":1,"a":18446744073709551616}"#;
        match request_frame(&encoded(Some(text))).unwrap().body {
            Body::JsonText(b) => assert_eq!(&b[..], text.as_bytes()),
            other => panic!("expected JsonText, got {other:?}"),
        }
        let head = r#"{"service":"svc","method":"PUT","path":"/x","headers":[["a","1"],["a","2"]]}"#;
        let r = request_frame(&frame(BODY_BYTES, head, &[0, 255])).unwrap();
        assert!(matches!(r.body, Body::Bytes(ref b) if &b[..] == [0, 255]));
        assert_eq!(r.headers.len(), 2);
    }

    #[test]
    fn a_frame_that_does_not_add_up_is_an_error_not_a_panic() {
        let head = r#"{"service":"svc","method":"GET","path":"/"}"#;
        let mut short = frame(BODY_NONE, head, b"");
        short.truncate(10);
        let mut huge_len = frame(BODY_NONE, head, b"");
        huge_len[1..5].copy_from_slice(&u32::MAX.to_be_bytes());
        for bad in [vec![], vec![BODY_JSON], short, huge_len, frame(7, head, b""), frame(BODY_NONE, head, b"x")] {
            let e = request_frame(&bad).unwrap_err();
            assert!(e.message.contains("frame did not decode"), "{}", e.message);
        }
        for bad in [&[0u8, 0, 0, 9][..], &[0, 0, 0, 1, 0xff, b'{', b'}']] {
            assert!(chat_frame(bad).unwrap_err().message.contains("frame did not decode"));
        }
    }

    #[test]
    fn a_json_body_nested_too_deep_is_a_config_error_from_the_core() {
        let c = client();
        let deep = format!("{}0{}", "[".repeat(20_000), "]".repeat(20_000));
        let (_, tag, outcome) = run(c.handle(), &encoded(Some(&deep)));
        assert_eq!(tag, ERROR);
        assert!(contains(&outcome, "ConfigError") && contains(&outcome, "nested deeper than 512"), "{}", String::from_utf8_lossy(&outcome));
    }

    #[test]
    fn bytes_that_do_not_decode_are_an_error_not_a_panic() {
        let (task, tag, outcome) = run(client().handle(), &[0xff, 0x00, 0x01]);
        assert_eq!((task, tag), (0, ERROR));
        assert!(contains(&outcome, "HarnessError"));
    }

    #[test]
    fn a_spawned_request_delivers_its_outcome() {
        let c = client();
        c.shutdown();
        let (task, tag, outcome) = run(c.handle(), &encoded(None));
        assert_ne!(task, 0);
        assert_eq!(tag, ERROR);
        assert!(contains(&outcome, "closed"), "{}", String::from_utf8_lossy(&outcome));
    }

    #[test]
    fn a_dropped_or_made_up_client_handle_is_an_error_not_a_crash() {
        let c = client();
        let h = c.handle();
        drop(c);
        for handle in [h, 0, 12345, u64::MAX] {
            let (task, tag, outcome) = run(handle, &encoded(None));
            assert_eq!((task, tag), (0, ERROR));
            assert!(contains(&outcome, "the client is closed"), "{}", String::from_utf8_lossy(&outcome));
        }
    }

    #[test]
    fn dropping_a_task_twice_and_closing_unknown_streams_are_no_ops() {
        let c = client();
        let ticket = ticket();
        let req = encoded(None);
        let task = unsafe { harness_kotlin_start(c.handle(), ticket, req.as_ptr(), req.len() as u64) };
        wait(ticket);
        harness_kotlin_drop(task);
        harness_kotlin_drop(task);
        harness_kotlin_drop(0);
        harness_kotlin_close(0);
        harness_kotlin_close(task);
        let t = self::ticket();
        harness_kotlin_next(98765, t);
        let (tag, outcome) = wait(t);
        assert_eq!(tag, ERROR);
        assert!(contains(&outcome, "CancelledError"), "{}", String::from_utf8_lossy(&outcome));
    }

    /// A chat frame as `RequestPath.chat` writes it.
    fn chat_request(route: &str, params: Option<&str>) -> Vec<u8> {
        let call = match params {
            Some(p) => format!(r#"{{"messages":[{{"role":"user","content":"hi"}}],"params":{p}}}"#),
            None => r#"{"messages":[{"role":"user","content":"hi"}]}"#.to_string(),
        };
        let mut out = (route.len() as u32).to_be_bytes().to_vec();
        out.extend(route.as_bytes());
        out.extend(call.as_bytes());
        out
    }

    #[test]
    fn a_chat_call_with_bad_params_is_delivered_at_once_as_a_config_error() {
        let c = client();
        let ticket = ticket();
        let req = chat_request("chat", Some("[1]"));
        let task = unsafe { harness_kotlin_chat(c.handle(), ticket, req.as_ptr(), req.len() as u64) };
        let (tag, outcome) = wait(ticket);
        assert_eq!((task, tag), (0, ERROR));
        assert!(contains(&outcome, "request.params: invalid type"), "{}", String::from_utf8_lossy(&outcome));
    }

    #[test]
    fn a_chat_stream_on_an_unknown_route_is_a_config_error_naming_the_route() {
        let c = client();
        let ticket = ticket();
        let req = chat_request("nowhere", None);
        let task = unsafe { harness_kotlin_chat_open(c.handle(), ticket, req.as_ptr(), req.len() as u64) };
        let (tag, outcome) = wait(ticket);
        harness_kotlin_drop(task);
        assert_eq!(tag, ERROR);
        assert!(contains(&outcome, "ConfigError") && contains(&outcome, "nowhere"), "{}", String::from_utf8_lossy(&outcome));
    }

    #[test]
    fn opening_a_stream_to_a_refused_port_is_an_error() {
        let c = crate::tests::from_json(
            r#"{"log": {"enabled": false}, "services": {"svc": {"base_url": "http://127.0.0.1:1", "retry": {"max_retries": 0}}}}"#,
        )
        .unwrap();
        let ticket = ticket();
        let req = frame(BODY_NONE, r#"{"service":"svc","method":"GET","path":"/x"}"#, b"");
        let task = unsafe { harness_kotlin_open(c.handle(), ticket, req.as_ptr(), req.len() as u64) };
        let (tag, outcome) = wait(ticket);
        harness_kotlin_drop(task);
        assert_eq!(tag, ERROR);
        assert!(contains(&outcome, "ConnectError"), "{}", String::from_utf8_lossy(&outcome));
    }

    #[test]
    fn an_embed_call_with_no_inputs_or_an_unknown_field_is_a_config_error_naming_it() {
        let c = client();
        for (call, field) in [(r#"{"inputs":[]}"#, "inputs"), (r#"{"inputs":["a"],"dims":3}"#, "dims"), (r#"{"inputs":["a"],"dimensions":0}"#, "dimensions")] {
            let mut req = (5u32).to_be_bytes().to_vec();
            req.extend(b"embed");
            req.extend(call.as_bytes());
            let ticket = ticket();
            let task = unsafe { harness_kotlin_embed(c.handle(), ticket, req.as_ptr(), req.len() as u64) };
            let (tag, outcome) = wait(ticket);
            harness_kotlin_drop(task);
            assert_eq!(tag, ERROR);
            assert!(contains(&outcome, "ConfigError") && contains(&outcome, field), "{}", String::from_utf8_lossy(&outcome));
        }
        assert!(embed_frame(&[0, 0, 0, 9]).unwrap_err().message.contains("frame did not decode"));
    }

    #[test]
    fn embed_bytes_carry_the_view_then_the_vectors_little_endian() {
        let r = EmbedResponse { data: vec![1.0, -2.5], count: 1, dimensions: 2, route: "e".into(), ..Default::default() };
        let b = embed_bytes(&r);
        let n = u32::from_be_bytes(b[..4].try_into().unwrap()) as usize;
        let view: serde_json::Value = serde_json::from_slice(&b[4..4 + n]).unwrap();
        assert_eq!((view["count"].as_u64(), view["dimensions"].as_u64(), view["route"].as_str()), (Some(1), Some(2), Some("e")));
        assert_eq!(&b[4 + n..], &[1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat()[..]);
    }

    fn receive_step(receiver: u64, call: NativeReceiverCall) -> (i32, Vec<u8>) {
        let mut buf = Vec::new();
        <NativeReceiverCall as Lower<UniFfiTag>>::write(call, &mut buf);
        let ticket = ticket();
        let task = unsafe { harness_kotlin_receive(receiver, ticket, buf.as_ptr(), buf.len() as u64) };
        let outcome = wait(ticket);
        harness_kotlin_drop(task);
        outcome
    }

    #[test]
    fn a_delivery_claims_completes_and_a_duplicate_gets_the_stored_text() {
        let r = crate::receiver::NativeIdempotency::from_json("{}".into()).unwrap();
        let key = r.key("t".into(), "e".into(), "m1".into()).unwrap();
        let (tag, bytes) = receive_step(r.handle(), NativeReceiverCall::Claim { key: key.clone() });
        assert_eq!(tag, LEASE);
        let lease = <NativeLease as Lift<UniFfiTag>>::try_read(&mut &bytes[..]).unwrap();
        assert!(lease.deduplicated);
        let (tag, _) = receive_step(r.handle(), NativeReceiverCall::Claim { key: key.clone() });
        assert_eq!(tag, ERROR, "a duplicate while pending");
        let (tag, _) = receive_step(r.handle(), NativeReceiverCall::Complete { lease, result: r#"{"ok":true}"#.into() });
        assert_eq!(tag, END);
        let (tag, stored) = receive_step(r.handle(), NativeReceiverCall::Claim { key });
        assert_eq!((tag, &stored[..]), (STORED, &br#"{"ok":true}"#[..]));
    }

    #[test]
    fn a_freed_or_made_up_receiver_handle_is_an_error_not_a_crash() {
        let r = crate::receiver::NativeIdempotency::from_json("{}".into()).unwrap();
        let h = r.handle();
        drop(r);
        for handle in [h, 0, 777] {
            let (tag, outcome) = receive_step(handle, NativeReceiverCall::Claim { key: "k".into() });
            assert_eq!(tag, ERROR);
            assert!(contains(&outcome, "the receiver is closed"), "{}", String::from_utf8_lossy(&outcome));
        }
    }
}

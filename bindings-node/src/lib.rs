//! harness-node: the napi-rs bridge between Node and harness-core.
//!
//! A translation table only: JS request fields in, core calls, plain results
//! out. Every request runs on the core's own tokio runtime (napi's `async`
//! runtime is deliberately not enabled: one runtime per process). Requests made
//! in one JS tick are staged on the `CompletionQueue` and start with one crossing
//! into the runtime; their results come back through the same queue in batches
//! (one wake-up, a few values per batch), and JS resolves each promise by id. Errors cross as structured
//! objects (or, for synchronous calls, as a marked JSON reason) so that the JS
//! wrapper (`index.js`) can rebuild the class tree without losing a field.

// The core's HarnessError is large by design (full call context); it crosses once per failed call.
#![allow(clippy::result_large_err)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use harness_core::{Body, ErrorKind, HarnessError, Request, Response};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use tokio::sync::Notify;

/// Prefix of a synchronous error reason that carries a serialised `HarnessError`.
const ERROR_MARKER: &str = "\u{1}HARNESS_ERROR\u{1}";

/// Every field of a core `HarnessError`.
#[napi(object)]
pub struct NativeError {
    /// The class name (`TimeoutError`, ...).
    pub name: String,
    /// The readable message, without the leading class name.
    pub message: String,
    pub service: Option<String>,
    pub endpoint: Option<String>,
    pub method: Option<String>,
    pub attempts: u32,
    pub status: Option<u32>,
    /// The normalised downstream error code.
    pub code: Option<String>,
    pub retry_after_ms: Option<f64>,
    pub trace_id: Option<String>,
    pub phase: Option<String>,
    pub body: Option<Buffer>,
}

/// Every request finished since the last `drain()`, laid out so that a whole batch crosses to JS
/// as a handful of values instead of an object per request.
#[napi(object)]
pub struct CompletionBatch {
    /// `COMPLETION_FIELDS` numbers per request, in order: id, status (0 when it failed: its error is
    /// the next of `errors`), elapsed ms, attempts, then the UTF-16 lengths of its header text and
    /// trace id in `text`, and its body length in `bodies` (-1 when over `SMALL_BODY` bytes: its
    /// body is the next of `large`).
    pub meta: Float64Array,
    /// Per successful request: its headers (`name\0value\0name\0value`, split lazily in JS), then its trace id.
    pub text: String,
    /// The small bodies, back to back (copied out in JS, so a kept body does not keep the batch).
    pub bodies: Buffer,
    pub large: Vec<Buffer>,
    pub errors: Vec<NativeError>,
}

/// Numbers per request in `CompletionBatch::meta` (index.js reads the same layout).
const COMPLETION_FIELDS: usize = 7;
/// Bodies up to this size share the batch's `bodies` buffer; bigger ones cross on their own.
const SMALL_BODY: usize = 4096;

fn display_without_name(e: &HarnessError) -> String {
    let shown = e.to_string();
    let prefix = format!("{}: ", e.name());
    shown.strip_prefix(&prefix).map(str::to_string).unwrap_or(shown)
}

fn native_error(e: HarnessError) -> NativeError {
    NativeError {
        name: e.name().to_string(),
        message: display_without_name(&e),
        phase: e.phase().map(str::to_string),
        service: e.service,
        endpoint: e.endpoint,
        method: e.method,
        attempts: e.attempts,
        status: e.status.map(u32::from),
        code: e.code,
        retry_after_ms: e.retry_after_ms.map(|v| v as f64),
        trace_id: e.trace_id,
        body: e.body.map(|b| Buffer::from(Vec::from(b))),
    }
}

/// The length of `s` in UTF-16 code units (JS string indices).
fn utf16_len(s: &str) -> usize {
    if s.is_ascii() { s.len() } else { s.encode_utf16().count() }
}

/// Finished requests waiting for the JS thread, in `CompletionBatch` layout.
#[derive(Default)]
struct Done {
    meta: Vec<f64>,
    text: String,
    bodies: Vec<u8>,
    large: Vec<Vec<u8>>,
    errors: Vec<NativeError>,
}

impl Done {
    fn push_response(&mut self, id: u32, r: Response) {
        let before = self.text.len();
        for (i, (k, v)) in r.headers.iter().enumerate() {
            if i > 0 {
                self.text.push('\0');
            }
            self.text.push_str(k);
            self.text.push('\0');
            self.text.push_str(v);
        }
        let headers_len = utf16_len(&self.text[before..]);
        self.text.push_str(&r.trace_id);
        let body_len = r.body.len();
        if body_len <= SMALL_BODY {
            self.bodies.extend_from_slice(&r.body);
        } else {
            self.large.push(Vec::from(r.body));
        }
        self.meta.extend_from_slice(&[
            f64::from(id),
            f64::from(r.status),
            r.elapsed_ms,
            f64::from(r.attempts),
            headers_len as f64,
            utf16_len(&r.trace_id) as f64,
            if body_len <= SMALL_BODY { body_len as f64 } else { -1.0 },
        ]);
    }

    fn push_error(&mut self, id: u32, e: HarnessError) {
        self.errors.push(native_error(e));
        self.meta.extend_from_slice(&[f64::from(id), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }
}

/// A synchronous error: the reason is the marker plus the JSON of every field.
fn sync_error(e: HarnessError) -> Error {
    let json = serde_json::json!({
        "name": e.name(),
        "message": display_without_name(&e),
        "phase": e.phase(),
        "service": e.service,
        "endpoint": e.endpoint,
        "method": e.method,
        "attempts": e.attempts,
        "status": e.status,
        "code": e.code,
        "retryAfterMs": e.retry_after_ms,
        "traceId": e.trace_id,
    });
    Error::new(Status::GenericFailure, format!("{ERROR_MARKER}{json}"))
}

fn pairs(flat: Option<Vec<String>>, field: &str) -> std::result::Result<Vec<(String, String)>, HarnessError> {
    let Some(flat) = flat else { return Ok(Vec::new()) };
    if flat.len() % 2 != 0 {
        return Err(HarnessError::config(format!("request.{field}: expected name/value pairs")));
    }
    let mut it = flat.into_iter();
    let mut out = Vec::with_capacity(it.len() / 2);
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(out)
}

/// The JS-side fields of a request, positional (cheaper across napi than an object).
#[allow(clippy::too_many_arguments)]
fn core_request(
    service: String,
    method: String,
    path: String,
    endpoint: Option<String>,
    query: Option<Vec<String>>,
    headers: Option<Vec<String>>,
    json: Option<String>,
    body: Option<&[u8]>,
    idempotency_key: Option<String>,
    timeout_ms: Option<f64>,
    traceparent: Option<String>,
) -> std::result::Result<Request, HarnessError> {
    let body = match (json, body) {
        (Some(_), Some(_)) => return Err(HarnessError::config("request.json: give either json or body, not both")),
        // JSON.stringify's text, sent byte for byte; the core checks nesting, NaN and lone surrogates.
        (Some(text), None) => Body::JsonText(Bytes::from(text.into_bytes())),
        (None, Some(buf)) => Body::Bytes(Bytes::copy_from_slice(buf)),
        (None, None) => Body::Empty,
    };
    let timeout_ms = match timeout_ms {
        None => None,
        Some(t) if t.is_finite() && t >= 0.0 && t.fract() == 0.0 && t <= u64::MAX as f64 => Some(t as u64),
        Some(t) => return Err(HarnessError::config(format!("request.timeout_ms: expected an integer >= 0, got {t}"))),
    };
    Ok(Request {
        service,
        method,
        path,
        endpoint,
        query: pairs(query, "query")?,
        headers: pairs(headers, "headers")?,
        body,
        idempotency_key,
        timeout_ms,
        traceparent,
    })
}

type Wake = ThreadsafeFunction<(), Unknown<'static>, (), Status, false, true>;

/// A translated request waiting for `CompletionQueue::flush` to start it.
struct Staged {
    client: harness_core::Client,
    req: Request,
    id: u32,
    cancel: Option<Arc<Notify>>,
}

struct QueueInner {
    done: Mutex<Done>,
    /// Set while a wake-up is queued on the JS thread, so a burst of completions costs one wake.
    scheduled: AtomicBool,
    wake: Wake,
    /// Requests made since the last flush (only the JS thread touches it).
    staged: Mutex<Vec<Staged>>,
}

impl QueueInner {
    fn finish(&self, id: u32, outcome: std::result::Result<Response, HarnessError>) {
        {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            match outcome {
                Ok(r) => done.push_response(id, r),
                Err(e) => done.push_error(id, e),
            }
        }
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// Runs one request to its completion.
async fn run(s: Staged, queue: Arc<QueueInner>) {
    let Staged { client, req, id, cancel } = s;
    // Boxed once here, so spawning and polling this task never copy the (large) pipeline future.
    let call = Box::pin(async move { client.request(req).await });
    let outcome = match cancel {
        None => call.await,
        // The request future is dropped as soon as the cancel wins, before the promise settles.
        Some(cancel) => tokio::select! {
            r = call => r,
            _ = cancel.notified() => Err(HarnessError::new(ErrorKind::Cancelled, "the request was cancelled")),
        },
    };
    queue.finish(id, outcome);
}

/// Where requests are staged and finished requests wait for the JS thread: one per JS module
/// instance. Requests made in one JS tick start together (one crossing into the runtime), and
/// completions are batched behind one weak threadsafe function, so it never keeps the process
/// alive by itself (the JS wrapper holds the loop only while requests are pending).
#[napi]
pub struct CompletionQueue {
    inner: Arc<QueueInner>,
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
                scheduled: AtomicBool::new(false),
                wake,
                staged: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Starts every staged request on the core runtime (the JS wrapper calls it once per tick).
    #[napi]
    pub fn flush(&self) {
        let staged = std::mem::take(&mut *self.inner.staged.lock().unwrap_or_else(|e| e.into_inner()));
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
        let done = std::mem::take(&mut *self.inner.done.lock().unwrap_or_else(|e| e.into_inner()));
        CompletionBatch {
            meta: Float64Array::new(done.meta),
            text: done.text,
            bodies: Buffer::from(done.bodies),
            large: done.large.into_iter().map(Buffer::from).collect(),
            errors: done.errors,
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

    /// Drops the request future (freeing every permit it held); its promise settles with CancelledError.
    #[napi]
    pub fn cancel(&self) {
        // notify_one stores a permit, so a cancel that races ahead of the first poll is not lost.
        self.notify.notify_one();
    }
}

/// The native client; `index.js` wraps it in the public `Client` class.
#[napi]
pub struct NativeClient {
    inner: harness_core::Client,
}

#[napi]
impl NativeClient {
    /// From the JSON text of a config object (the core checks its nesting before parsing).
    #[napi(factory)]
    pub fn from_json(json: String) -> Result<NativeClient> {
        harness_core::Config::from_str_with_format(&json, "json")
            .and_then(harness_core::Client::new)
            .map(|inner| NativeClient { inner })
            .map_err(sync_error)
    }

    /// From a `.yaml`, `.json` or `.toml` file.
    #[napi(factory)]
    pub fn from_path(path: String) -> Result<NativeClient> {
        harness_core::Client::from_path(path).map(|inner| NativeClient { inner }).map_err(sync_error)
    }

    /// Stages a request; `queue.flush()` starts it on the core runtime and it completes through
    /// `queue` under `id`. Returns an error at once (and stages nothing) if the input cannot be translated.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &self,
        queue: &CompletionQueue,
        id: u32,
        service: String,
        method: String,
        path: String,
        endpoint: Option<String>,
        query: Option<Vec<String>>,
        headers: Option<Vec<String>>,
        json: Option<String>,
        body: Option<Buffer>,
        idempotency_key: Option<String>,
        timeout_ms: Option<f64>,
        traceparent: Option<String>,
        cancel: Option<&CancelToken>,
    ) -> Option<NativeError> {
        let req = core_request(
            service,
            method,
            path,
            endpoint,
            query,
            headers,
            json,
            body.as_deref(),
            idempotency_key,
            timeout_ms,
            traceparent,
        );
        match req {
            Ok(req) => {
                let staged = Staged { client: self.inner.clone(), req, id, cancel: cancel.map(|c| c.notify.clone()) };
                queue.inner.staged.lock().unwrap_or_else(|e| e.into_inner()).push(staged);
                None
            }
            Err(e) => Some(native_error(e)),
        }
    }

    /// The Prometheus text exposition of this client's metrics.
    #[napi]
    pub fn metrics(&self) -> String {
        self.inner.metrics_text()
    }

    /// `closed`, `open` or `half_open`.
    #[napi]
    pub fn breaker_state(&self, service: String, method: String, path: String, endpoint: Option<String>) -> String {
        self.inner.breaker_state(&service, &method, &path, endpoint.as_deref()).to_string()
    }

    /// Bulkhead permits currently held on a service.
    #[napi]
    pub fn bulkhead_in_use(&self, service: String) -> Result<u32> {
        self.inner.bulkhead_in_use(&service).map(|n| n as u32).map_err(sync_error)
    }

    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }

    #[napi]
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// Every error class name, base first (the JS class tree is built from this).
#[napi]
pub fn error_names() -> Vec<String> {
    ErrorKind::NAMES.iter().map(|s| s.to_string()).collect()
}

/// The core's error for a host value that JS could not encode faithfully, naming `field`:
/// `lone_surrogate` (a string that is not valid Unicode), `too_deep` (nested past the limit,
/// where JSON.stringify overflowed its stack) or `non_finite` (NaN or an infinity, which
/// JSON.stringify writes as `null`).
#[napi]
pub fn host_input_error(kind: String, field: String) -> NativeError {
    let e = match kind.as_str() {
        "lone_surrogate" => harness_core::json::lone_surrogate(&field),
        "too_deep" => harness_core::json::too_deep(&field),
        "non_finite" => harness_core::json::non_finite(&field),
        other => HarnessError::config(format!("{field}: {other}")),
    };
    native_error(e)
}

/// The most levels of nesting in a JSON body or a config (the core's limit).
#[napi]
pub fn json_max_depth() -> u32 {
    harness_core::json::MAX_DEPTH as u32
}

/// Numbers per request in `CompletionBatch::meta`.
#[napi]
pub fn completion_fields() -> u32 {
    COMPLETION_FIELDS as u32
}

/// The marker that starts a synchronous error's reason.
#[napi]
pub fn error_marker() -> String {
    ERROR_MARKER.to_string()
}

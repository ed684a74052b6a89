//! Routing: chat calls (their request built from JS JSON text), chat answers, routed
//! responses, chat streams pulled one chunk per `read`, and the route state. Every
//! decision (which provider, failover, pricing) is the core's; this only translates.

use harness_core::{ChatChunk, ChatRequest, ChatResponse, ChatStreamHandle, HarnessError, Routed, Usage};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::completion::{CompletionQueue, Staged, Work};

/// Token counts as the provider reported them.
#[napi(object, object_from_js = false)]
pub struct NativeUsage {
    pub prompt_tokens: f64,
    pub completion_tokens: f64,
    pub total_tokens: f64,
}

fn usage(u: Option<Usage>) -> Option<NativeUsage> {
    u.map(|u| NativeUsage { prompt_tokens: u.prompt_tokens as f64, completion_tokens: u.completion_tokens as f64, total_tokens: u.total_tokens as f64 })
}

/// Attempts one provider got (JS turns the list into `[id, n]` pairs).
#[napi(object, object_from_js = false)]
pub struct NativeProviderAttempts {
    pub provider: String,
    pub attempts: u32,
}

fn attempts(list: Vec<(String, u32)>) -> Vec<NativeProviderAttempts> {
    list.into_iter().map(|(provider, attempts)| NativeProviderAttempts { provider, attempts }).collect()
}

/// What routing did for a plain request that named a route.
#[napi(object, object_from_js = false)]
pub struct NativeRouted {
    pub route: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub attempts_by_provider: Vec<NativeProviderAttempts>,
    /// `cache` or `static`.
    pub fallback: Option<String>,
    pub usage: Option<NativeUsage>,
    pub cost: Option<f64>,
}

pub(crate) fn routed(r: Routed) -> NativeRouted {
    NativeRouted {
        route: r.route,
        provider: r.provider,
        model: r.model,
        attempts_by_provider: attempts(r.attempts_by_provider),
        fallback: r.fallback.map(str::to_string),
        usage: usage(r.usage),
        cost: r.cost,
    }
}

/// A chat answer (`index.js` wraps it in `ChatResponse`).
#[napi(object, object_from_js = false)]
pub struct NativeChatResponse {
    pub content: String,
    pub finish_reason: Option<String>,
    pub usage: Option<NativeUsage>,
    pub route: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub cost: Option<f64>,
    pub fallback: Option<String>,
    pub attempts: u32,
    pub attempts_by_provider: Vec<NativeProviderAttempts>,
    pub trace_id: String,
    pub elapsed_ms: f64,
    pub raw: Buffer,
}

pub(crate) fn chat_response(r: ChatResponse) -> NativeChatResponse {
    NativeChatResponse {
        content: r.content,
        finish_reason: r.finish_reason,
        usage: usage(r.usage),
        route: r.route,
        provider: r.provider,
        model: r.model,
        cost: r.cost,
        fallback: r.fallback.map(str::to_string),
        attempts: r.attempts,
        attempts_by_provider: attempts(r.attempts_by_provider),
        trace_id: r.trace_id,
        elapsed_ms: r.elapsed_ms,
        raw: Buffer::from(Vec::from(r.raw)),
    }
}

/// One piece of a streamed chat answer.
#[napi(object, object_from_js = false)]
pub struct NativeChatChunk {
    /// `delta`, `restart` or `done`.
    pub kind: String,
    pub content: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    pub usage: Option<NativeUsage>,
    pub cost: Option<f64>,
    pub reason: Option<String>,
}

pub(crate) fn chat_chunk(c: ChatChunk) -> NativeChatChunk {
    NativeChatChunk {
        kind: c.kind.as_str().to_string(),
        content: c.content,
        provider: c.provider,
        model: c.model,
        finish_reason: c.finish_reason,
        usage: usage(c.usage),
        cost: c.cost,
        reason: c.reason,
    }
}

/// The core's chat request from JS: `messages` and `params` as JSON.stringify wrote them
/// (JS checked NaN, BigInt and cycles; the core checks nesting and lone surrogates here,
/// and the messages' shape when the call starts).
pub(crate) fn chat_request(
    messages: String,
    params: Option<String>,
    headers: Option<Vec<String>>,
    timeout_ms: Option<f64>,
    traceparent: Option<String>,
    principal: Option<String>,
) -> std::result::Result<ChatRequest, HarnessError> {
    let messages = crate::convert::json_value("messages", &messages)?;
    let params = match params {
        None => serde_json::Map::new(),
        Some(text) => match crate::convert::json_value("params", &text)? {
            serde_json::Value::Object(map) => map,
            _ => return Err(HarnessError::config("params: expected an object of chat parameters")),
        },
    };
    Ok(ChatRequest {
        messages,
        params,
        headers: crate::convert::pairs(headers, "headers")?,
        timeout_ms: crate::convert::timeout_ms_of(timeout_ms)?,
        traceparent,
        principal,
    })
}

/// An opened chat stream; `index.js` wraps it in `ChatStream` (an async iterable of chunks).
/// Dropped by the GC without a `cancel()`, it releases its connection and permits then.
#[napi]
pub struct NativeChatStream {
    handle: ChatStreamHandle,
}

impl NativeChatStream {
    pub(crate) fn new(handle: ChatStreamHandle) -> Self {
        NativeChatStream { handle }
    }
}

#[napi]
impl NativeChatStream {
    /// Stages a read of the next chunk; it completes through `queue` under `id` (a chunk,
    /// the end after `done`, or an error).
    #[napi]
    pub fn read(&self, queue: &CompletionQueue, id: u32) {
        queue.inner.stage(Staged { work: Work::ChatRead(self.handle.clone()), id, cancel: None });
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

/// One provider of a route as `routingState` shows it.
#[napi(object, object_from_js = false)]
pub struct NativeProviderState {
    pub id: String,
    pub service: String,
    pub model: Option<String>,
    pub weight: u32,
    pub effective_weight: f64,
    pub health: f64,
    pub success_rate: f64,
    pub latency_ewma_ms: Option<f64>,
    /// `closed`, `open` or `half_open`.
    pub breaker: String,
    pub in_flight: u32,
    pub cooling_ms: Option<f64>,
    pub last_error: Option<String>,
}

#[napi(object, object_from_js = false)]
pub struct NativeRouteState {
    pub route: String,
    pub strategy: String,
    pub providers: Vec<NativeProviderState>,
}

pub(crate) fn route_state(s: harness_core::RouteState) -> NativeRouteState {
    NativeRouteState {
        route: s.route,
        strategy: s.strategy.to_string(),
        providers: s
            .providers
            .into_iter()
            .map(|p| NativeProviderState {
                id: p.id,
                service: p.service,
                model: p.model,
                weight: p.weight,
                effective_weight: p.effective_weight,
                health: p.health,
                success_rate: p.success_rate,
                latency_ewma_ms: p.latency_ewma_ms,
                breaker: p.breaker.to_string(),
                in_flight: p.in_flight,
                cooling_ms: p.cooling_ms.map(|v| v as f64),
                last_error: p.last_error,
            })
            .collect(),
    }
}

//! Chat on an `openai-compatible` route: one answer (`chat`), or a stream of
//! normalised chunks (`ChatStream`) that survives a provider failing mid-answer.
//!
//! Stream guarantees: before the first chunk, a connect or head failure or no
//! chunk within `ttft_ms` fails over to another provider; after it, each event
//! must come within `idle_ms`, and a cut or a stall is never reported as success:
//! per `stream.mid_stream` the answer is held until complete (or `hold_bytes`) and
//! restarted elsewhere unseen (`hold`), or the caller gets a `restart` chunk and
//! the new answer (`restart`), or an error (`error`). A provider configured with
//! `accepts_prefill` continues the partial answer instead; a refused prefill is
//! retried cleanly and never masks the original failure. A malformed chunk is
//! skipped with a `stream_chunk_skipped` event. A stream that closes cleanly
//! without `[DONE]` ends at once, with the usage it gave. SSE framing comes from
//! `eventsource-stream`; no event may exceed `MAX_EVENT_BYTES` and the stream
//! never exceeds the service's `limits.max_response_bytes`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

use super::attempts;
use super::call::{Call, Failed, RouteCall};
use super::classify;
use super::outcome::{Mode, Reached};
use super::route::{attempt_metric, bill_failed, settle};
use crate::adapters::host::HostChat;
use crate::adapters::{openai, Adapter, EventFault, EventRead, EventReader, Parsed};
use crate::adapters::{ChatChunk, ChatChunkKind, ChatResponse, ToolCall, ToolCallDelta, Usage};
use crate::breaker::{Outcome, Permit};
use crate::bulkhead::BulkheadPermit;
use crate::engine::Engine;
use crate::error::{ErrorKind, HarnessError, TimeoutPhase};
use crate::host::Event;
use crate::response::Response;
use crate::redact::truncate_chars;
use crate::routing::config::{MidStream, OnInvalid};
use crate::transport::{BodySource, Failure, TransportFailure};

/// Largest single SSE event (a line that never ends is not buffered forever).
const MAX_EVENT_BYTES: u64 = 1 << 20;

/// A chat answer from a route's buffered answer: the completion as the route read it
/// (read here only for a degraded answer, which the route did not read).
pub(crate) fn answer(call: &mut Call, route: &str, resp: Response) -> Result<ChatResponse, HarnessError> {
    let parsed = match call.route.as_mut().and_then(|rc| rc.parsed.take()) {
        Some(p) => p,
        None => openai::parse_completion(&resp.body).map_err(|why| HarnessError::new(ErrorKind::Schema, format!("route `{route}`: {why}")))?,
    };
    let routed = resp.routed.map(|b| *b).unwrap_or_default();
    Ok(ChatResponse {
        content: parsed.content,
        tool_calls: parsed.tool_calls,
        finish_reason: parsed.finish_reason,
        usage: routed.usage,
        route: route.to_string(),
        provider: routed.provider,
        model: routed.model,
        cost: routed.cost,
        fallback: routed.fallback,
        attempts: resp.attempts,
        attempts_by_provider: routed.attempts_by_provider,
        trace_id: resp.trace_id,
        elapsed_ms: resp.elapsed_ms,
        cache: None,
        raw: resp.body,
    })
}

/// Opens a streamed chat answer: returns once a provider has answered with a head.
pub(crate) async fn chat_stream(engine: &Arc<Engine>, mut call: Call, route: &str, recording: Option<Recording>) -> Result<ChatStream, HarnessError> {
    let rt = call.plan.clone();
    // The first chunk is due `ttft_ms` after each provider's request is sent, head included.
    call.route.as_mut().expect("a routed call").ttft = Some(Duration::from_millis(rt.config.ttft_ms));
    let mut live = Live {
        engine: engine.clone(),
        call,
        attempt: None,
        mode: rt.config.stream.mid_stream,
        hold_bytes: rt.config.stream.hold_bytes,
        ttft: Duration::from_millis(rt.config.ttft_ms),
        held: Vec::new(),
        held_bytes: 0,
        releasing: false,
        delivered: false,
        answer: String::new(),
        tools: Vec::new(),
        out: VecDeque::new(),
        original: None,
    };
    if let Err(e) = live.open(None).await {
        return Err(live.fail(e));
    }
    let trace_id = live.call.trace.trace_id.to_string();
    Ok(ChatStream { route: route.to_string(), trace_id, live: Some(Box::new(live)), replay: VecDeque::new(), recording })
}

/// A streamed answer being kept for the exact cache: stored only when it reaches `done`.
pub(crate) struct Recording {
    pub key: crate::cache::store::Key,
    pub ttl: Duration,
    pub owner: Arc<str>,
    pub chunks: Vec<ChatChunk>,
}

impl ChatStream {
    /// A stored answer, replayed as a stream (its `done` carries no cost: none was spent).
    pub(crate) fn replay(route: &str, trace_id: String, chunks: Vec<ChatChunk>) -> ChatStream {
        let mut replay: VecDeque<ChatChunk> = chunks.into();
        if let Some(done) = replay.back_mut() {
            done.cost = None;
        }
        ChatStream { route: route.to_string(), trace_id, live: None, replay, recording: None }
    }
}

/// A stream's event reader: a native format's, or a host adapter's (awaited).
enum Reader {
    Native(Box<dyn EventReader>),
    Host(Arc<HostChat>),
}

type Events = Pin<Box<dyn Stream<Item = Result<eventsource_stream::Event, EventStreamError<TransportFailure>>> + Send>>;

/// One provider's streamed answer in progress.
struct Attempt {
    idx: usize,
    events: Events,
    breaker: Option<Permit>,
    _bulkhead: BulkheadPermit,
    sent: Instant,
    /// Bytes since the last complete event, and in all.
    since_event: Arc<AtomicU64>,
    got_first: bool,
    /// Reads the provider's events in its format.
    reader: Reader,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    idle: Duration,
}

struct Live {
    engine: Arc<Engine>,
    call: Call,
    attempt: Option<Attempt>,
    mode: MidStream,
    hold_bytes: u64,
    ttft: Duration,
    /// `hold`: chunks not yet given to the caller.
    held: Vec<ChatChunk>,
    held_bytes: u64,
    /// `hold`: past `hold_bytes`, chunks flow.
    releasing: bool,
    /// Some content has reached the caller.
    delivered: bool,
    /// The answer so far (what a prefill continues).
    answer: String,
    /// The tool calls so far, assembled from `tool_call` chunks (what `done` carries).
    tools: Vec<ToolCall>,
    out: VecDeque<ChatChunk>,
    /// The first mid-stream failure: what the caller hears if no one can take over.
    original: Option<HarnessError>,
}

/// A streamed chat answer: pull chunks with `next`; the last is `done`.
pub struct ChatStream {
    pub route: String,
    pub trace_id: String,
    live: Option<Box<Live>>,
    /// A cached answer's chunks, replayed (no provider is called).
    replay: VecDeque<ChatChunk>,
    recording: Option<Recording>,
}

impl std::fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStream").field("route", &self.route).field("trace_id", &self.trace_id).field("open", &self.live.is_some()).finish()
    }
}

impl ChatStream {
    /// The next chunk; `Ok(None)` after `done`, and after an error or `cancel` (a shared
    /// `ChatStreamHandle` says `CancelledError` instead once cancelled).
    pub async fn next(&mut self) -> Result<Option<ChatChunk>, HarnessError> {
        let Some(live) = self.live.as_mut() else { return Ok(self.replay.pop_front()) };
        match live.next().await {
            Ok(Some(c)) => {
                if let Some(rec) = self.recording.as_mut() {
                    // A restart voids what came before it: only the final answer is kept.
                    match c.kind {
                        ChatChunkKind::Restart => rec.chunks.clear(),
                        _ => rec.chunks.push(c.clone()),
                    }
                }
                if c.kind == ChatChunkKind::Done {
                    let live = self.live.take().expect("live");
                    if let Some(rec) = self.recording.take() {
                        let degraded = live.call.route.as_ref().is_some_and(|rc| rc.fallback.is_some());
                        if let (false, Some(a)) = (degraded, crate::cache::answers::Answer::from_chunks(&self.route, rec.chunks)) {
                            live.engine.caches.answer_put(&rec.owner, rec.key, Arc::new(a), rec.ttl);
                        }
                    }
                    live.finish_ok();
                }
                Ok(Some(c))
            }
            Ok(None) => {
                self.live.take();
                Ok(None)
            }
            Err(e) => {
                let live = self.live.take().expect("live");
                Err(live.fail(e))
            }
        }
    }

    /// Stops the answer: the connection and permits are released, the outcome recorded as cancelled.
    pub fn cancel(&mut self) {
        if let Some(mut live) = self.live.take() {
            if let Some(a) = live.attempt.take() {
                if let Some(p) = a.breaker {
                    p.record(Outcome::Ignored);
                }
            }
            let e = HarnessError::new(ErrorKind::Cancelled, "the consumer stopped reading the stream");
            let e = live.call.with_context(e);
            live.call.observe(&live.engine, Some(200), Some(&e), true, None);
        }
    }

    pub fn is_done(&self) -> bool {
        self.live.is_none() && self.replay.is_empty()
    }
}

impl super::stream::Pull for ChatStream {
    type Item = ChatChunk;
    fn pull(&mut self) -> crate::transport::BoxFuture<'_, Result<Option<ChatChunk>, HarnessError>> {
        Box::pin(self.next())
    }
}

/// A chat stream host bindings can share between threads and executors: `next()` is a
/// `'static` future; `cancel()` works even while a `next()` waits.
#[derive(Clone)]
pub struct ChatStreamHandle {
    puller: Arc<super::stream::Puller<ChatStream>>,
    route: Arc<str>,
    trace_id: Arc<str>,
}

impl ChatStreamHandle {
    pub fn new(stream: ChatStream) -> Self {
        let route = stream.route.as_str().into();
        let trace_id = stream.trace_id.as_str().into();
        ChatStreamHandle { puller: super::stream::Puller::new(stream), route, trace_id }
    }

    pub fn route(&self) -> &str {
        &self.route
    }

    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// The next chunk (`Ok(None)` after `done`); a cancelled stream gives `CancelledError`.
    pub fn next(&self) -> impl std::future::Future<Output = Result<Option<ChatChunk>, HarnessError>> + Send + 'static {
        self.puller.next()
    }

    pub fn cancel(&self) {
        self.puller.cancel()
    }
}

impl Drop for ChatStream {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl Live {
    fn rc(&mut self) -> &mut RouteCall {
        self.call.route.as_mut().expect("a routed call")
    }

    /// Opens an answer on the next provider the route picks; `prefill` is the partial
    /// answer a prefill-accepting provider may continue.
    async fn open(&mut self, prefill: Option<String>) -> Result<(), HarnessError> {
        self.rc().prefill = prefill;
        let reached = attempts::run(&self.engine, &mut self.call, Mode::Stream).await;
        let rc = self.rc();
        let continued = rc.prefill_used;
        rc.prefill = None;
        rc.prefill_used = false;
        let open = match reached? {
            Reached::Stream(open) => open,
            Reached::Buffered(_) => unreachable!("a stream never buffers"),
        };
        let idx = self.call.lanes.answered.take().expect("an open stream has a provider");
        if !continued {
            self.answer.clear();
            self.tools.clear();
        }
        let svc = self.call.svc(idx);
        let limit = svc.config.limits.max_response_bytes;
        let idle = Duration::from_millis(svc.config.timeouts.idle_ms);
        let since_event = Arc::new(AtomicU64::new(0));
        let events = sse(open.body, since_event.clone(), limit).eventsource();
        let reader = match &self.call.plan.providers[idx].adapter {
            Adapter::Native(a) => Reader::Native(a.stream()),
            Adapter::Host(h) => Reader::Host(h.clone()),
            Adapter::Pass | Adapter::Missing(_) => Reader::Native(Box::new(openai::Chunks)),
        };
        self.attempt = Some(Attempt {
            reader,
            idx,
            events: Box::pin(events),
            breaker: Some(open.breaker),
            _bulkhead: open.bulkhead,
            sent: open.sent,
            since_event,
            got_first: false,
            finish_reason: None,
            usage: None,
            model: None,
            idle,
        });
        Ok(())
    }

    async fn next(&mut self) -> Result<Option<ChatChunk>, HarnessError> {
        loop {
            if let Some(c) = self.out.pop_front() {
                return Ok(Some(c));
            }
            if self.attempt.is_none() {
                return Ok(None);
            }
            let a = self.attempt.as_mut().expect("attempt");
            // Before the first chunk the time-to-first-token limit applies, then the idle timeout.
            let (bound, phase) = if a.got_first {
                (Instant::now() + a.idle, TimeoutPhase::Idle)
            } else {
                (a.sent + self.ttft, TimeoutPhase::Ttft)
            };
            let (bound, phase) = if self.call.deadline.at() < bound { (self.call.deadline.at(), TimeoutPhase::Total) } else { (bound, phase) };
            let ev = tokio::select! {
                biased;
                e = a.events.next() => e,
                _ = tokio::time::sleep_until(bound) => {
                    let what = match phase {
                        TimeoutPhase::Ttft => format!("no first chunk within ttft_ms ({} ms)", self.ttft.as_millis()),
                        TimeoutPhase::Idle => format!("the stream went silent for {} ms", a.idle.as_millis()),
                        _ => "request deadline expired while streaming".to_string(),
                    };
                    let failure = match phase {
                        TimeoutPhase::Total => Failure::TotalTimeout,
                        TimeoutPhase::Ttft => Failure::TtftTimeout,
                        _ => Failure::IdleTimeout,
                    };
                    self.broken(HarnessError::new(ErrorKind::Timeout(phase), what), failure).await?;
                    continue;
                }
            };
            match ev {
                None => {
                    // A clean close, with or without an end event: the answer is complete.
                    self.complete().await?;
                }
                Some(Ok(event)) => {
                    a.since_event.store(0, Ordering::Relaxed);
                    let read = match &mut a.reader {
                        Reader::Native(r) => r.read(&event.event, &event.data),
                        Reader::Host(h) => h.read(&event.event, &event.data, self.call.deadline.remaining()).await,
                    };
                    match read {
                        Ok(EventRead::Skip) => {}
                        Ok(EventRead::Piece(parsed)) => self.take(parsed),
                        Ok(EventRead::Done(parsed)) => {
                            self.take(parsed);
                            self.complete().await?;
                        }
                        Err(EventFault::Malformed(why)) => self.skipped(why),
                        Err(EventFault::Failed { code, message }) => {
                            let idx = self.attempt.as_ref().expect("attempt").idx;
                            let message = self.call.secrets(idx).downstream_message(&message);
                            let mut e = HarnessError::new(ErrorKind::Protocol, format!("the provider failed mid-stream: {}", truncate_chars(&message, 300)));
                            e.code = code;
                            self.broken(e, Failure::Protocol).await?;
                        }
                    }
                }
                Some(Err(EventStreamError::Transport(tf))) => {
                    let c = classify::transport(tf);
                    self.broken(c.error, c.failure).await?;
                }
                Some(Err(other)) => {
                    let why = match other {
                        EventStreamError::Utf8(e) => format!("not UTF-8: {e}"),
                        EventStreamError::Parser(e) => format!("unparseable: {e}"),
                        EventStreamError::Transport(tf) => tf.message,
                    };
                    let e = HarnessError::new(ErrorKind::Protocol, format!("the stream is not valid server-sent events: {why}"));
                    self.broken(e, Failure::Protocol).await?;
                }
            }
        }
    }

    /// What one event said: its text and tool-call pieces to the caller, the rest kept for `done`.
    fn take(&mut self, parsed: Parsed) {
        let a = self.attempt.as_mut().expect("attempt");
        a.got_first = true;
        if parsed.usage.is_some() {
            a.usage = parsed.usage;
        }
        if parsed.model.is_some() {
            a.model = parsed.model;
        }
        if parsed.finish_reason.is_some() {
            a.finish_reason = parsed.finish_reason;
        }
        if !parsed.content.is_empty() {
            self.push_delta(parsed.content);
        }
        for d in parsed.tool_deltas {
            self.push_tool_call(d);
        }
    }

    fn provider_id(&self, idx: usize) -> String {
        self.call.plan.providers[idx].id.to_string()
    }

    fn push_delta(&mut self, content: String) {
        self.answer.push_str(&content);
        let chunk = self.piece(ChatChunkKind::Delta, content, None);
        self.release(chunk);
    }

    fn push_tool_call(&mut self, d: ToolCallDelta) {
        openai::assemble(&mut self.tools, &d);
        let chunk = self.piece(ChatChunkKind::ToolCall, String::new(), Some(d));
        self.release(chunk);
    }

    /// A `delta` or `tool_call` chunk from the current provider.
    fn piece(&self, kind: ChatChunkKind, content: String, tool_call: Option<ToolCallDelta>) -> ChatChunk {
        let idx = self.attempt.as_ref().expect("attempt").idx;
        ChatChunk {
            kind,
            content,
            provider: Some(self.provider_id(idx)),
            model: self.attempt.as_ref().and_then(|a| a.model.clone()),
            tool_call,
            tool_calls: Vec::new(),
            finish_reason: None,
            usage: None,
            cost: None,
            reason: None,
        }
    }

    /// Held (`hold`, up to `hold_bytes`) or given to the caller.
    fn release(&mut self, chunk: ChatChunk) {
        if self.mode == MidStream::Hold && !self.releasing {
            let t = chunk.tool_call.as_ref();
            self.held_bytes += (chunk.content.len() + t.map(|t| t.arguments.len() + t.name.as_ref().map_or(0, String::len)).unwrap_or(0)) as u64;
            self.held.push(chunk);
            if self.held_bytes > self.hold_bytes {
                self.releasing = true;
                self.delivered = true;
                self.out.extend(self.held.drain(..));
            }
        } else {
            self.delivered = true;
            self.out.push_back(chunk);
        }
    }

    fn skipped(&mut self, why: String) {
        if self.engine.events.is_active() {
            let idx = self.attempt.as_ref().expect("attempt").idx;
            let route = self.call.plan.name.to_string();
            self.engine.events.emit(Event::StreamChunkSkipped {
                route,
                provider: self.provider_id(idx),
                trace_id: self.call.trace.trace_id.to_string(),
                reason: why,
            });
        }
    }

    /// The provider finished its answer: checked against the request's `response_format`
    /// (an answer that does not match is broken, or the call's error), recorded, held
    /// chunks released, then `done`.
    async fn complete(&mut self) -> Result<(), HarnessError> {
        // An answer that calls tools has no content to check: the format applies to the content.
        if let Some(s) = self.call.route.as_ref().and_then(|rc| rc.structured.as_ref()).filter(|_| self.tools.is_empty()) {
            if let Err(why) = s.check(&self.answer) {
                let idx = self.attempt.as_ref().expect("attempt").idx;
                let e = HarnessError::new(ErrorKind::Schema, format!("provider `{}` answered with content that does not match response_format: {why}", self.provider_id(idx)));
                if self.call.plan.config.structured_output.on_invalid == OnInvalid::Error {
                    return Err(e);
                }
                return self.broken(e, Failure::Protocol).await;
            }
        }
        let a = self.attempt.take().expect("attempt");
        let latency = a.sent.elapsed();
        if let Some(p) = a.breaker {
            p.record(Outcome::Success);
        }
        let rt = self.call.plan.clone();
        rt.providers[a.idx].health.record_success(latency, rt.window);
        attempt_metric(&self.engine, &rt, a.idx, "success");
        settle(&self.engine, &mut self.call, a.idx, a.model.clone(), a.usage);
        self.out.extend(self.held.drain(..));
        let rc = self.call.route.as_ref().expect("route");
        self.out.push_back(ChatChunk {
            kind: ChatChunkKind::Done,
            content: String::new(),
            provider: Some(rt.providers[a.idx].id.to_string()),
            model: rc.model.clone(),
            tool_call: None,
            tool_calls: std::mem::take(&mut self.tools),
            finish_reason: a.finish_reason,
            usage: a.usage,
            cost: rc.cost,
            reason: None,
        });
        Ok(())
    }

    /// The current provider's answer broke: record it, then take over elsewhere or fail.
    async fn broken(&mut self, e: HarnessError, failure: Failure) -> Result<(), HarnessError> {
        let a = self.attempt.take().expect("attempt");
        // An oversized stream, or a model's answer off the requested format, says nothing about health.
        let health = if failure == Failure::TooLarge || e.kind == ErrorKind::Schema { Outcome::Ignored } else { Outcome::Failure };
        if let Some(p) = a.breaker {
            p.record(health);
        }
        let rt = self.call.plan.clone();
        let from = rt.providers[a.idx].id.to_string();
        let summary = format!("{} {}", e.name(), e.message);
        if health == Outcome::Failure {
            rt.providers[a.idx].health.record_failure(summary.clone(), rt.window);
        } else {
            rt.providers[a.idx].health.note_error(summary.clone());
        }
        attempt_metric(&self.engine, &rt, a.idx, e.name());
        let lanes = &mut self.call.lanes;
        lanes.tried[a.idx].excluded = true;
        lanes.errors[a.idx] = Some(summary);
        lanes.failed = Some(Failed { from: a.idx, reason: e.name(), status: None, code: None });
        bill_failed(&self.engine, &rt, a.idx, a.model.as_deref(), a.usage);
        let e = {
            let mut e = e;
            e.provider = Some(from.clone());
            e
        };
        if failure == Failure::TotalTimeout || failure == Failure::TooLarge {
            return Err(e);
        }
        let before_first = !a.got_first;
        if !before_first && self.mode == MidStream::Error {
            return Err(e);
        }
        if !before_first && self.original.is_none() {
            self.original = Some(e.clone());
        }
        // A prefill continues what the caller has (or what is held); none before the first chunk,
        // nor once tool calls have begun (a prefill continues text only).
        let prefill = (!self.answer.is_empty() && self.tools.is_empty()).then(|| self.answer.clone());
        let opened = self.open(prefill).await;
        if let Err(next) = opened {
            // Nobody could take over: the first failure is what went wrong.
            let mut first = self.original.clone().unwrap_or(e);
            first.provider_errors = next.provider_errors;
            return Err(first);
        }
        let to = self.attempt.as_ref().map(|a| a.idx).expect("opened");
        let to_id = self.provider_id(to);
        if before_first {
            return Ok(());
        }
        let continued = !self.answer.is_empty();
        let mode = if continued {
            "continue"
        } else if !self.delivered {
            // Nothing reached the caller: drop what was held and start again unseen.
            self.held.clear();
            self.held_bytes = 0;
            "hidden"
        } else if self.mode == MidStream::Restart {
            self.out.push_back(ChatChunk {
                kind: ChatChunkKind::Restart,
                content: String::new(),
                provider: Some(to_id.clone()),
                model: rt.providers[to].config.model.clone(),
                tool_call: None,
                tool_calls: Vec::new(),
                finish_reason: None,
                usage: None,
                cost: None,
                reason: Some(format!("{} from {from}", self.original.as_ref().map(|e| e.name()).unwrap_or("error"))),
            });
            self.delivered = false;
            "restart"
        } else {
            // `hold` past `hold_bytes`: part of the answer is out and cannot be taken back.
            let a = self.attempt.take().expect("attempt");
            if let Some(p) = a.breaker {
                p.record(Outcome::Ignored);
            }
            return Err(self.original.clone().expect("a mid-stream failure"));
        };
        if self.engine.events.is_active() {
            self.engine.events.emit(Event::StreamRestarted {
                route: rt.name.to_string(),
                from,
                to: to_id,
                trace_id: self.call.trace.trace_id.to_string(),
                reason: self.original.as_ref().map(|e| e.to_string()).unwrap_or_default(),
                mode,
            });
        }
        Ok(())
    }

    fn finish_ok(self: Box<Self>) {
        self.call.observe(&self.engine, Some(200), None, true, None);
    }

    /// Records the failed stream once and returns its error with context.
    fn fail(mut self, e: HarnessError) -> HarnessError {
        if let Some(a) = self.attempt.take() {
            if let Some(p) = a.breaker {
                p.record(Outcome::Ignored);
            }
        }
        let e = self.call.with_context(e);
        self.call.observe(&self.engine, e.status, Some(&e), true, None);
        e
    }
}

/// The body as a byte stream for the SSE parser, refusing an event over `MAX_EVENT_BYTES`
/// or a stream over `limit`.
pub(crate) fn sse(body: Box<dyn BodySource>, since_event: Arc<AtomicU64>, limit: u64) -> impl Stream<Item = Result<Bytes, TransportFailure>> + Send {
    futures_util::stream::unfold((body, since_event, 0u64, false), move |(mut body, since, total, ended)| async move {
        if ended {
            return None;
        }
        match body.next_chunk().await {
            Ok(Some(chunk)) => {
                let total = total + chunk.len() as u64;
                let pending = since.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
                if total > limit {
                    let tf = TransportFailure::new(Failure::TooLarge, format!("stream over limits.max_response_bytes ({limit})"));
                    return Some((Err(tf), (body, since, total, true)));
                }
                if pending > MAX_EVENT_BYTES {
                    let tf = TransportFailure::new(Failure::Protocol, format!("a server-sent event over {MAX_EVENT_BYTES} bytes"));
                    return Some((Err(tf), (body, since, total, true)));
                }
                Some((Ok(chunk), (body, since, total, false)))
            }
            Ok(None) => None,
            Err(tf) => Some((Err(tf), (body, since, total, true))),
        }
    })
}

//! Simulated model providers for the routing tests, in five wire formats.
//!
//! `POST /__admin/provider/{name}` (a `ProviderSpec` as JSON) sets how provider `name`
//! behaves from its next request on (the request counter and log are kept; send
//! `"reset": true` to clear them). `GET /__admin/provider-log/{name}` returns
//! `{"count": n, "requests": [{"n", "model", "stream", "body", "at_ms", "outcome", "kind",
//! "path", "format", "headers"}]}` (headers: the vendors' key headers, content-type and any `x-test-*`; embeddings also `"inputs"`): `kind` is `chat` or
//! `embeddings`; `path` the request's path with its query; `format` one of `openai`,
//! `anthropic`, `gemini`, `azure`, `inhouse`; `headers` the request's `x-api-key`,
//! `anthropic-version`, `x-goog-api-key`, `api-key`, `authorization` and `content-type`
//! (those sent, lower-case names). `outcome` is `answer`, `fail_{status}` (a planned
//! failure, or a refused prefill), `silence`, `blocked`, or `reject_{status}` (refused
//! before any fault: a missing header, `max_tokens` or `api-version`, or over `max_batch`).
//!
//! One provider speaks the format the request's path chooses; the spec and its faults are
//! the same for all, only the shapes differ (`formats/`):
//!
//! | path under `/llm/{name}` | format |
//! |---|---|
//! | `/v1/messages` | Anthropic Messages (`x-api-key`, `anthropic-version` and `max_tokens` required) |
//! | `/v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse` | Gemini (`x-goog-api-key` or `?key=` required) |
//! | `/v1beta/models/{model}:embedContent`, `:batchEmbedContents` | Gemini embeddings |
//! | `/openai/deployments/{deployment}/chat/completions?api-version=V` | Azure OpenAI (`api-version`, `api-key` required) |
//! | `/openai/deployments/{deployment}/embeddings?api-version=V` | Azure OpenAI embeddings |
//! | `/v1/embeddings` | OpenAI embeddings |
//! | `/inhouse/generate` | the in-house model server |
//! | anything else (`/v1/chat/completions`) | OpenAI chat completions, with or without `"stream": true` |
//!
//! The model is the body's `model`, Gemini's from the path, Azure's the deployment.
//!
//! With `tool_calls` in the spec the answer makes those tool calls: OpenAI streams each
//! call's id and name in one chunk, then its arguments in two; Anthropic a `tool_use` block
//! with two `input_json_delta`s; Gemini one event with the whole `functionCall`. The
//! in-house format has no tool calls. Stream faults (`cut_after`, `stall_after`,
//! `malformed_at`, `error_at`, `delay_ms`) count content pieces: words and tool-call deltas
//! (a Gemini function call is one piece).
//!
//! Embeddings are deterministic and depend only on the text: for a text of `L` characters
//! and dimension `d` (the request's `dimensions` / `outputDimensionality`, else the spec's
//! `dimensions`), element `k < d` is `(L + k * 0.25) / 8.0` (as f32). A text counts
//! `ceil(L / 4)` tokens, at least 1 (the usage sums them, unless `prompt_tokens` is set).
//! `encoding_format: "base64"` sends each vector as the base64 of its little-endian f32s.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::formats::{self, Call, Format, Op};

/// How one provider behaves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderSpec {
    /// Clears the request counter and log.
    pub reset: bool,
    /// Share of requests that fail, spread evenly (1.0: all, 0.5: every other one).
    pub fail_rate: f64,
    /// The first `fail_first` requests fail, whatever `fail_rate` says.
    pub fail_first: u32,
    /// The status of a failure.
    pub fail_status: u16,
    /// `error.code` and `error.type` in a failure's body (OpenAI); `error_type` overrides
    /// Anthropic's `error.type` and Gemini's `error.status`; `error_code` is the in-house
    /// `failure.kind`.
    pub error_code: Option<String>,
    pub error_type: Option<String>,
    /// A failure's message, in every format (default: "{name} failed on purpose").
    pub error_message: Option<String>,
    /// A `Retry-After` header on failures.
    pub retry_after: Option<String>,
    /// Wait before the response head.
    pub latency_ms: u64,
    /// Accept the request and never answer.
    pub silence: bool,
    /// The answer; `{name}` and `{model}` are replaced. Streamed word by word.
    pub content: String,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Reported as `usage.prompt_tokens_details.cached_tokens` (a prompt-cache hit);
    /// Anthropic's `cache_read_input_tokens`, Gemini's `cachedContentTokenCount`.
    pub cached_tokens: Option<u64>,
    /// Gemini's `usageMetadata.thoughtsTokenCount`, when set.
    pub reasoning_tokens: Option<u64>,
    pub finish_reason: String,
    /// Tool calls the answer makes (`finish_reason` stays as set: say `tool_calls`).
    pub tool_calls: Vec<ToolCallSpec>,
    /// A last assistant message is a prefill to continue; refused with 400 when false.
    pub accept_prefill: bool,
    /// The prompt is blocked: OpenAI/Azure answer Azure's 400 `content_filter`, Anthropic a
    /// 200 with `stop_reason: "refusal"` and no content, Gemini a 200 with `finishReason:
    /// "SAFETY"` and no content, the in-house server a 400 `blocked` failure. Chat only.
    pub blocked: bool,
    /// The embeddings' dimension when the request does not ask for one.
    pub dimensions: usize,
    /// `words`: each lower-cased word (letters and digits) adds 1 to element `hash(word) % d`
    /// (FNV-1a), so texts sharing most words point the same way (the semantic cache's tests);
    /// default: the length-only vectors above.
    pub embedding: Option<String>,
    /// An embeddings request with more inputs than this is refused with 400.
    pub max_batch: Option<usize>,
    pub stream: StreamSpec,
    /// When set, failures, latency and silence apply only to requests for this model; the
    /// provider answers other models normally (one gateway base URL serving two models).
    pub only_model: Option<String>,
}

/// One tool call of an answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallSpec {
    pub id: String,
    pub name: String,
    /// The arguments' JSON text, sent as is (Anthropic's `input` and Gemini's `args` are
    /// it parsed; text that is not JSON is sent as a JSON string).
    pub arguments: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamSpec {
    /// Wait after the head, before the first chunk.
    pub ttft_ms: u64,
    /// Wait between chunks.
    pub delay_ms: u64,
    /// Close the connection (no terminating chunk) after this many content chunks (tool-call
    /// chunks count too; the same for `stall_after`, `malformed_at` and `error_at`).
    pub cut_after: Option<usize>,
    /// Go silent (connection kept open) after this many content chunks.
    pub stall_after: Option<usize>,
    /// Send a malformed event before content chunk number `malformed_at`.
    pub malformed_at: Option<usize>,
    /// Before content chunk number `error_at`, send the format's in-stream error event
    /// (overloaded), end the body and close the connection.
    pub error_at: Option<usize>,
    /// End with `data: [DONE]` (OpenAI and Azure only).
    pub done: bool,
    /// Put `usage` on the last chunk (OpenAI and Azure; the others always send usage).
    pub usage: bool,
}

impl Default for ProviderSpec {
    fn default() -> Self {
        ProviderSpec {
            reset: false,
            fail_rate: 0.0,
            fail_first: 0,
            fail_status: 503,
            error_code: None,
            error_type: None,
            error_message: None,
            retry_after: None,
            latency_ms: 0,
            silence: false,
            content: "Hello from {name}".into(),
            prompt_tokens: None,
            completion_tokens: None,
            cached_tokens: None,
            reasoning_tokens: None,
            finish_reason: "stop".into(),
            tool_calls: Vec::new(),
            accept_prefill: true,
            blocked: false,
            dimensions: 4,
            embedding: None,
            max_batch: None,
            stream: StreamSpec::default(),
            only_model: None,
        }
    }
}

impl Default for StreamSpec {
    fn default() -> Self {
        StreamSpec { ttft_ms: 0, delay_ms: 0, cut_after: None, stall_after: None, malformed_at: None, error_at: None, done: true, usage: true }
    }
}

#[derive(Default)]
struct Provider {
    spec: ProviderSpec,
    count: u64,
    /// Error diffusion for `fail_rate`: failures spread evenly, deterministically.
    owed: f64,
    log: Vec<Value>,
}

/// Every simulated provider, by name.
pub struct Providers {
    map: Mutex<HashMap<String, Provider>>,
    started: Instant,
}

impl Default for Providers {
    fn default() -> Self {
        Providers { map: Mutex::new(HashMap::new()), started: Instant::now() }
    }
}

/// Most log entries kept per provider.
const MAX_LOG: usize = 50_000;

/// The request headers a log entry keeps (and any named `x-test-*`).
const LOGGED_HEADERS: [&str; 6] = ["x-api-key", "anthropic-version", "x-goog-api-key", "api-key", "authorization", "content-type"];

impl Providers {
    pub fn configure(&self, name: &str, body: &[u8]) -> Result<(), String> {
        let spec: ProviderSpec = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let mut map = self.map.lock();
        let p = map.entry(name.to_string()).or_default();
        if spec.reset {
            p.count = 0;
            p.owed = 0.0;
            p.log.clear();
        }
        p.spec = spec;
        Ok(())
    }

    pub fn log(&self, name: &str) -> Value {
        let map = self.map.lock();
        match map.get(name) {
            Some(p) => json!({"count": p.count, "requests": p.log}),
            None => json!({"count": 0, "requests": []}),
        }
    }
}

/// A failure, rendered in each format's error shape.
pub(crate) struct Failure {
    pub status: u16,
    /// The spec's `error_code`, or a refusal's own code.
    pub code: Option<String>,
    /// The spec's `error_type`: overrides each format's own type.
    pub kind: Option<String>,
    pub message: String,
    pub retry_after: Option<String>,
    /// A request the provider refuses as invalid (a prefill, too many inputs), not a fault.
    pub refusal: bool,
}

/// An answer, the same in every format.
pub(crate) struct Answer {
    pub name: String,
    pub model: String,
    pub content: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub finish: String,
    pub tools: Vec<ToolCallSpec>,
}

impl Answer {
    /// The content's word-sized pieces.
    pub fn words(&self) -> Vec<String> {
        words(&self.content)
    }
}

/// Embeddings, one vector per input in order.
pub(crate) struct Embeddings {
    pub model: String,
    pub vectors: Vec<Vec<f32>>,
    pub tokens: u64,
}

/// What the provider decided for one request.
enum Plan {
    /// Refused before any fault (a missing header or field): status and body as they are.
    Reject { status: u16, body: Value },
    Fail(Failure),
    Silence,
    Blocked { model: String, prompt_tokens: u64 },
    Answer(Answer),
    Embed(Embeddings),
}

/// What a format renders: a whole body, or a stream of events.
pub(crate) enum Reply {
    Body { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    Stream(Stream),
}

impl Reply {
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply::Body { status, headers: json_headers(), body: body.to_string().into_bytes() }
    }
}

/// An SSE answer: its events in order, those that are content pieces counted for the
/// stream faults.
pub(crate) struct Stream {
    pub events: Vec<(String, bool)>,
    /// Sent for `error_at`.
    pub error: String,
    /// Sent for `malformed_at`.
    pub malformed: String,
}

pub(crate) fn json_headers() -> Vec<(String, String)> {
    vec![("content-type".to_string(), "application/json".to_string())]
}

pub async fn serve(
    reader: &mut BufReader<TcpStream>,
    providers: &Providers,
    name: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<bool> {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let rest = path.strip_prefix("/llm/").and_then(|r| r.strip_prefix(name)).unwrap_or("");
    let call = formats::read(rest, headers, &request);
    let (plan, spec) = {
        let mut map = providers.map.lock();
        let p = map.entry(name.to_string()).or_default();
        p.count += 1;
        let n = p.count;
        let spec = match &p.spec.only_model {
            Some(m) if *m != call.model => ProviderSpec { content: p.spec.content.clone(), ..Default::default() },
            _ => p.spec.clone(),
        };
        let plan = plan(p, n, &spec, name, &call);
        let outcome = match &plan {
            Plan::Reject { status, .. } => format!("reject_{status}"),
            Plan::Fail(f) if f.refusal && call.op == Op::Embed => format!("reject_{}", f.status),
            Plan::Fail(f) => format!("fail_{}", f.status),
            Plan::Silence => "silence".into(),
            Plan::Blocked { .. } => "blocked".into(),
            Plan::Answer(_) | Plan::Embed(_) => "answer".into(),
        };
        if p.log.len() < MAX_LOG {
            let logged: serde_json::Map<String, Value> = headers
                .iter()
                .filter(|(k, _)| LOGGED_HEADERS.contains(&k.as_str()) || k.starts_with("x-test-"))
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            let mut entry = json!({
                "n": n,
                "model": call.model,
                "stream": call.stream,
                "body": request,
                "at_ms": providers.started.elapsed().as_secs_f64() * 1000.0,
                "outcome": outcome,
                "kind": if call.op == Op::Embed { "embeddings" } else { "chat" },
                "path": path,
                "format": call.format.name(),
                "headers": logged,
            });
            if call.op == Op::Embed {
                entry["inputs"] = json!(call.inputs.len());
            }
            p.log.push(entry);
        }
        (plan, spec)
    };
    if spec.latency_ms > 0 && !matches!(plan, Plan::Reject { .. }) {
        tokio::time::sleep(Duration::from_millis(spec.latency_ms)).await;
    }
    let reply = match plan {
        Plan::Silence => {
            let mut sink = [0u8; 1024];
            while reader.read(&mut sink).await? > 0 {}
            return Ok(false);
        }
        Plan::Reject { status, body } => Reply::json(status, &body),
        Plan::Fail(f) => {
            let (status, mut headers, body) = formats::failure(call.format, &f);
            if let Some(ra) = f.retry_after {
                headers.push(("retry-after".into(), ra));
            }
            Reply::Body { status, headers, body: body.to_string().into_bytes() }
        }
        Plan::Blocked { model, prompt_tokens } => formats::blocked(call.format, &model, prompt_tokens, call.stream),
        Plan::Answer(a) => formats::answer(call.format, &a, call.stream, &spec.stream),
        Plan::Embed(e) => formats::embeddings(&call, &e),
    };
    match reply {
        Reply::Body { status, headers, body } => {
            super::write_response(reader, status, &headers, &body).await?;
            Ok(true)
        }
        Reply::Stream(s) => stream_events(reader, &s, &spec.stream).await,
    }
}

/// Decides one request's fate; `n` is its number at this provider.
fn plan(p: &mut Provider, n: u64, spec: &ProviderSpec, name: &str, call: &Call) -> Plan {
    if let Some((status, body)) = &call.reject {
        return Plan::Reject { status: *status, body: body.clone() };
    }
    if call.op == Op::Embed {
        if let Some(max) = spec.max_batch.filter(|m| call.inputs.len() > *m) {
            return Plan::Fail(Failure {
                status: 400,
                code: Some("too_many_inputs".into()),
                kind: None,
                message: format!("{} inputs is more than the {max} allowed in one request", call.inputs.len()),
                retry_after: None,
                refusal: true,
            });
        }
    }
    p.owed += spec.fail_rate;
    let fail = if n <= spec.fail_first as u64 {
        true
    } else if p.owed >= 1.0 - 1e-9 {
        p.owed -= 1.0;
        true
    } else {
        false
    };
    let prompt_tokens = spec.prompt_tokens.unwrap_or((call.prompt_chars as u64 / 4).max(1));
    if spec.silence {
        return Plan::Silence;
    }
    if fail {
        return Plan::Fail(Failure {
            status: spec.fail_status,
            code: spec.error_code.clone(),
            kind: spec.error_type.clone(),
            message: spec.error_message.clone().unwrap_or_else(|| format!("{name} failed on purpose")),
            retry_after: spec.retry_after.clone(),
            refusal: false,
        });
    }
    if call.op == Op::Embed {
        let words = spec.embedding.as_deref() == Some("words");
        let vectors: Vec<Vec<f32>> = call.inputs.iter().map(|(t, d)| if words { embed_words(t, d.unwrap_or(spec.dimensions)) } else { embed(t, d.unwrap_or(spec.dimensions)) }).collect();
        let tokens = call.inputs.iter().map(|(t, _)| (t.chars().count() as u64).div_ceil(4).max(1)).sum();
        return Plan::Embed(Embeddings { model: call.model.clone(), vectors, tokens: spec.prompt_tokens.unwrap_or(tokens) });
    }
    if spec.blocked {
        return Plan::Blocked { model: call.model.clone(), prompt_tokens };
    }
    if call.prefill.is_some() && !spec.accept_prefill {
        return Plan::Fail(Failure {
            status: 400,
            code: Some("prefill_unsupported".into()),
            kind: None,
            message: "assistant prefill is not supported".into(),
            retry_after: None,
            refusal: true,
        });
    }
    let full = spec.content.replace("{name}", name).replace("{model}", &call.model);
    let mut content = match &call.prefill {
        Some(p) if full.starts_with(p.as_str()) => full[p.len()..].to_string(),
        _ => full,
    };
    let mut finish = spec.finish_reason.clone();
    if let Some(max) = call.max_new_tokens {
        let pieces = words(&content);
        if pieces.len() > max {
            content = pieces[..max].concat();
            finish = "length".into();
        }
    }
    let pieces = words(&content).len() as u64;
    Plan::Answer(Answer {
        name: name.to_string(),
        model: call.model.clone(),
        content,
        prompt_tokens,
        completion_tokens: spec.completion_tokens.unwrap_or(pieces),
        cached_tokens: spec.cached_tokens,
        reasoning_tokens: spec.reasoning_tokens,
        finish,
        tools: if call.format == Format::InHouse { Vec::new() } else { spec.tool_calls.clone() },
    })
}

/// A bag of words hashed into `dimensions` buckets (see `ProviderSpec::embedding`).
fn embed_words(text: &str, dimensions: usize) -> Vec<f32> {
    let mut v = vec![0f32; dimensions.max(1)];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in word.to_lowercase().bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
        }
        let at = (h % v.len() as u64) as usize;
        v[at] += 1.0;
    }
    v
}

/// The deterministic embedding of `text` (see the module's doc).
fn embed(text: &str, dimensions: usize) -> Vec<f32> {
    let len = text.chars().count() as f32;
    (0..dimensions).map(|k| (len + k as f32 * 0.25) / 8.0).collect()
}

/// Word-sized pieces, each keeping its leading space.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, w) in text.split(' ').enumerate() {
        out.push(if i == 0 { w.to_string() } else { format!(" {w}") });
    }
    out.retain(|w| !w.is_empty());
    out
}

/// A tool call's arguments in two halves (split on a character boundary).
pub(crate) fn halves(arguments: &str) -> [&str; 2] {
    let half = arguments.char_indices().nth(arguments.chars().count() / 2).map_or(arguments.len(), |(at, _)| at);
    [&arguments[..half], &arguments[half..]]
}

/// A tool call's arguments as JSON (a JSON string when they are not JSON).
pub(crate) fn parsed_arguments(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

/// Writes a stream's events, applying the stream faults to its counted pieces.
async fn stream_events(reader: &mut BufReader<TcpStream>, stream: &Stream, spec: &StreamSpec) -> std::io::Result<bool> {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    reader.get_mut().write_all(head.as_bytes()).await?;
    if spec.ttft_ms > 0 {
        tokio::time::sleep(Duration::from_millis(spec.ttft_ms)).await;
    }
    let total = stream.events.iter().filter(|(_, counted)| *counted).count();
    let mut i = 0;
    let mut ended = false;
    for (event, counted) in &stream.events {
        if *counted {
            if spec.cut_after == Some(i) {
                reader.get_mut().shutdown().await?;
                return Ok(false);
            }
            if spec.stall_after == Some(i) {
                let mut sink = [0u8; 1024];
                while reader.read(&mut sink).await? > 0 {}
                return Ok(false);
            }
            if spec.error_at == Some(i) {
                return end_with_error(reader, &stream.error).await;
            }
            if spec.malformed_at == Some(i) && !write_piece(reader, &stream.malformed).await {
                return Ok(false);
            }
            if i > 0 && spec.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(spec.delay_ms)).await;
            }
            i += 1;
        } else if i == total && !ended {
            // Past the last piece: a cut or an error there comes before the closing events.
            ended = true;
            if spec.cut_after == Some(total) {
                reader.get_mut().shutdown().await?;
                return Ok(false);
            }
            if spec.error_at == Some(total) {
                return end_with_error(reader, &stream.error).await;
            }
        }
        if !write_piece(reader, event).await {
            return Ok(false);
        }
    }
    reader.get_mut().write_all(b"0\r\n\r\n").await?;
    Ok(true)
}

/// Sends an in-stream error event, ends the body and closes the connection.
async fn end_with_error(reader: &mut BufReader<TcpStream>, error: &str) -> std::io::Result<bool> {
    if write_piece(reader, error).await {
        let _ = reader.get_mut().write_all(b"0\r\n\r\n").await;
        let _ = reader.get_mut().shutdown().await;
    }
    Ok(false)
}

/// Writes one chunked-encoding piece; false when the client has gone.
async fn write_piece(reader: &mut BufReader<TcpStream>, data: &str) -> bool {
    let piece = format!("{:x}\r\n{}\r\n", data.len(), data);
    reader.get_mut().write_all(piece.as_bytes()).await.is_ok()
}

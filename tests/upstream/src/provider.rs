//! Simulated OpenAI-compatible model providers for the routing tests.
//!
//! `POST /__admin/provider/{name}` (a `ProviderSpec` as JSON) sets how provider `name`
//! behaves from its next request on (the request counter and log are kept; send
//! `"reset": true` to clear them). `GET /__admin/provider-log/{name}` returns
//! `{"count": n, "requests": [{"n", "model", "stream", "body", "at_ms", "outcome"}]}`.
//! The provider itself answers `POST /llm/{name}/v1/chat/completions` (any path under
//! `/llm/{name}/`), with or without `"stream": true`. With `tool_calls` in the spec it
//! answers with those tool calls (streamed: after the content, each call's id and name in
//! one chunk, then its arguments in two).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

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
    /// `error.code` and `error.type` in a failure's body.
    pub error_code: Option<String>,
    pub error_type: Option<String>,
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
    /// Reported as `usage.prompt_tokens_details.cached_tokens` (a prompt-cache hit).
    pub cached_tokens: Option<u64>,
    pub finish_reason: String,
    /// Tool calls the answer makes (`finish_reason` stays as set: say `tool_calls`).
    pub tool_calls: Vec<ToolCallSpec>,
    /// A last assistant message is a prefill to continue; refused with 400 when false.
    pub accept_prefill: bool,
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
    /// The arguments' JSON text, sent as is.
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
    /// chunks count too; the same for `stall_after` and `malformed_at`).
    pub cut_after: Option<usize>,
    /// Go silent (connection kept open) after this many content chunks.
    pub stall_after: Option<usize>,
    /// Send a malformed event before content chunk number `malformed_at`.
    pub malformed_at: Option<usize>,
    /// End with `data: [DONE]`.
    pub done: bool,
    /// Put `usage` on the last chunk.
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
            retry_after: None,
            latency_ms: 0,
            silence: false,
            content: "Hello from {name}".into(),
            prompt_tokens: None,
            completion_tokens: None,
            cached_tokens: None,
            finish_reason: "stop".into(),
            tool_calls: Vec::new(),
            accept_prefill: true,
            stream: StreamSpec::default(),
            only_model: None,
        }
    }
}

impl Default for StreamSpec {
    fn default() -> Self {
        StreamSpec { ttft_ms: 0, delay_ms: 0, cut_after: None, stall_after: None, malformed_at: None, done: true, usage: true }
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

/// What the provider decided for one request.
enum Plan {
    Fail { status: u16, body: Value, retry_after: Option<String> },
    Silence,
    Answer { content: String, model: String, prompt_tokens: u64, completion_tokens: Option<u64>, cached_tokens: Option<u64>, finish: String, tools: Vec<ToolCallSpec> },
}

pub async fn serve(
    reader: &mut BufReader<TcpStream>,
    providers: &Providers,
    name: &str,
    body: &[u8],
) -> std::io::Result<bool> {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let model = request.get("model").and_then(Value::as_str).unwrap_or("").to_string();
    let stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let messages = request.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let (plan, spec) = {
        let mut map = providers.map.lock();
        let p = map.entry(name.to_string()).or_default();
        p.count += 1;
        let n = p.count;
        let spec = match &p.spec.only_model {
            Some(m) if *m != model => ProviderSpec { content: p.spec.content.clone(), ..Default::default() },
            _ => p.spec.clone(),
        };
        p.owed += spec.fail_rate;
        let fail = if n <= spec.fail_first as u64 {
            true
        } else if p.owed >= 1.0 - 1e-9 {
            p.owed -= 1.0;
            true
        } else {
            false
        };
        let prefill = messages
            .last()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
            .and_then(|m| m.get("content").and_then(Value::as_str))
            .map(str::to_string);
        let plan = if spec.silence {
            Plan::Silence
        } else if fail {
            let code = spec.error_code.clone().unwrap_or_else(|| format!("status_{}", spec.fail_status));
            let kind = spec.error_type.clone().unwrap_or_else(|| "server_error".into());
            Plan::Fail {
                status: spec.fail_status,
                body: json!({"error": {"code": code, "type": kind, "message": format!("{name} failed on purpose")}}),
                retry_after: spec.retry_after.clone(),
            }
        } else if prefill.is_some() && !spec.accept_prefill {
            Plan::Fail {
                status: 400,
                body: json!({"error": {"code": "prefill_unsupported", "type": "invalid_request_error", "message": "assistant prefill is not supported"}}),
                retry_after: None,
            }
        } else {
            let full = spec.content.replace("{name}", name).replace("{model}", &model);
            let content = match &prefill {
                Some(p) if full.starts_with(p.as_str()) => full[p.len()..].to_string(),
                _ => full,
            };
            let chars: usize = messages.iter().filter_map(|m| m.get("content").and_then(Value::as_str)).map(str::len).sum();
            Plan::Answer {
                content,
                model: model.clone(),
                prompt_tokens: spec.prompt_tokens.unwrap_or((chars as u64 / 4).max(1)),
                completion_tokens: spec.completion_tokens,
                cached_tokens: spec.cached_tokens,
                finish: spec.finish_reason.clone(),
                tools: spec.tool_calls.clone(),
            }
        };
        let outcome = match &plan {
            Plan::Fail { status, .. } => format!("fail_{status}"),
            Plan::Silence => "silence".into(),
            Plan::Answer { .. } => "answer".into(),
        };
        if p.log.len() < MAX_LOG {
            p.log.push(json!({
                "n": n,
                "model": model,
                "stream": stream,
                "body": request,
                "at_ms": providers.started.elapsed().as_secs_f64() * 1000.0,
                "outcome": outcome,
            }));
        }
        (plan, spec)
    };
    if spec.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(spec.latency_ms)).await;
    }
    match plan {
        Plan::Silence => {
            let mut sink = [0u8; 1024];
            while reader.read(&mut sink).await? > 0 {}
            Ok(false)
        }
        Plan::Fail { status, body, retry_after } => {
            let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
            if let Some(ra) = retry_after {
                headers.push(("retry-after".into(), ra));
            }
            super::write_response(reader, status, &headers, body.to_string().as_bytes()).await?;
            Ok(true)
        }
        Plan::Answer { content, model, prompt_tokens, completion_tokens, cached_tokens, finish, tools } => {
            let pieces = words(&content);
            let completion = completion_tokens.unwrap_or(pieces.len() as u64);
            let mut usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens.saturating_add(completion)});
            if let Some(cached) = cached_tokens {
                usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
            }
            if !stream {
                let body = json!({
                    "id": format!("chatcmpl-{name}"),
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "message": message(&content, &tools), "finish_reason": finish}],
                    "usage": usage,
                });
                let headers = vec![("content-type".to_string(), "application/json".to_string())];
                super::write_response(reader, 200, &headers, body.to_string().as_bytes()).await?;
                return Ok(true);
            }
            let mut deltas: Vec<Value> = pieces.iter().map(|p| json!({"content": p})).collect();
            for (i, t) in tools.iter().enumerate() {
                deltas.push(json!({"tool_calls": [{"index": i, "id": t.id, "type": "function", "function": {"name": t.name, "arguments": ""}}]}));
                let half = t.arguments.char_indices().nth(t.arguments.chars().count() / 2).map_or(t.arguments.len(), |(at, _)| at);
                for part in [&t.arguments[..half], &t.arguments[half..]] {
                    deltas.push(json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}));
                }
            }
            if let Some(first) = deltas.first_mut() {
                first["role"] = json!("assistant");
            }
            stream_answer(reader, name, &model, &deltas, &finish, usage, &spec.stream).await
        }
    }
}

/// The answer's message: `content` null when it only calls tools, as OpenAI sends it.
fn message(content: &str, tools: &[ToolCallSpec]) -> Value {
    if tools.is_empty() {
        return json!({"role": "assistant", "content": content});
    }
    let calls: Vec<Value> = tools.iter().map(|t| json!({"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}})).collect();
    json!({"role": "assistant", "content": if content.is_empty() { Value::Null } else { json!(content) }, "tool_calls": calls})
}

/// Word-sized pieces, each keeping its leading space.
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, w) in text.split(' ').enumerate() {
        out.push(if i == 0 { w.to_string() } else { format!(" {w}") });
    }
    out.retain(|w| !w.is_empty());
    out
}

async fn stream_answer(
    reader: &mut BufReader<TcpStream>,
    name: &str,
    model: &str,
    pieces: &[Value],
    finish: &str,
    usage: Value,
    spec: &StreamSpec,
) -> std::io::Result<bool> {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    reader.get_mut().write_all(head.as_bytes()).await?;
    if spec.ttft_ms > 0 {
        tokio::time::sleep(Duration::from_millis(spec.ttft_ms)).await;
    }
    let chunk = |delta: Value, finish: Value, usage: Option<&Value>| {
        let mut v = json!({
            "id": format!("chatcmpl-{name}"),
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if let Some(u) = usage {
            v["usage"] = u.clone();
        }
        format!("data: {v}\n\n")
    };
    for (i, piece) in pieces.iter().enumerate() {
        if spec.cut_after == Some(i) {
            reader.get_mut().shutdown().await?;
            return Ok(false);
        }
        if spec.stall_after == Some(i) {
            let mut sink = [0u8; 1024];
            while reader.read(&mut sink).await? > 0 {}
            return Ok(false);
        }
        if spec.malformed_at == Some(i) && !write_piece(reader, "data: {\"choices\": [broken\n\n").await {
            return Ok(false);
        }
        if i > 0 && spec.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(spec.delay_ms)).await;
        }
        if !write_piece(reader, &chunk(piece.clone(), Value::Null, None)).await {
            return Ok(false);
        }
    }
    if spec.cut_after == Some(pieces.len()) {
        reader.get_mut().shutdown().await?;
        return Ok(false);
    }
    let last = chunk(json!({}), json!(finish), spec.usage.then_some(&usage));
    if !write_piece(reader, &last).await {
        return Ok(false);
    }
    if spec.done && !write_piece(reader, "data: [DONE]\n\n").await {
        return Ok(false);
    }
    reader.get_mut().write_all(b"0\r\n\r\n").await?;
    Ok(true)
}

/// Writes one chunked-encoding piece; false when the client has gone.
async fn write_piece(reader: &mut BufReader<TcpStream>, data: &str) -> bool {
    let piece = format!("{:x}\r\n{}\r\n", data.len(), data);
    reader.get_mut().write_all(piece.as_bytes()).await.is_ok()
}

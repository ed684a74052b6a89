//! The `openai-compatible` adapter: one chat-completions request, normalised for
//! each provider (model name, temperature range, the token-limit field), and the
//! answer read back the same way from any of them (content, tool calls, finish reason, usage).
//!
//! Guarantees: the caller's request is never changed in place (each provider gets
//! its own copy); an answer that does not parse as a chat completion is an error
//! naming what is missing, not an empty success.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::usage::Usage;
use super::wire::{self, AnswerFault, ChatAdapter, EventFault, EventRead, EventReader, Parsed, RouteDefaults, Shaped};
pub use super::wire::{ToolCall, ToolCallDelta};
pub(crate) use super::wire::assemble;
use crate::error::HarnessError;
use crate::routing::config::{ProviderConfig, RangeMode};

/// The `openai-compatible` format: the caller's body, normalised per provider.
pub struct OpenAi;

impl ChatAdapter for OpenAi {
    fn name(&self) -> &str {
        "openai-compatible"
    }

    fn shape(&self, body: &Value, p: &ProviderConfig, _route: &RouteDefaults, stream: bool) -> Result<Shaped, String> {
        let mut body = prepare(body, p, stream);
        if let Some(extra) = &p.extra_body {
            wire::extra(&mut body, extra);
        }
        Ok(Shaped { body, path: None, headers: Vec::new() })
    }

    fn parse(&self, body: &[u8]) -> Result<Parsed, AnswerFault> {
        parse_completion(body).map_err(AnswerFault::Malformed)
    }

    fn stream(&self) -> Box<dyn EventReader> {
        Box::new(Chunks)
    }

    fn error_code(&self, _status: u16, _body: &[u8]) -> Option<String> {
        // OpenAI's own codes (`context_length_exceeded`, `content_filter`, ...) are the common ones.
        None
    }

    fn embeds(&self) -> bool {
        true
    }

    fn shape_embed(&self, body: &Value, p: &ProviderConfig, _route: &RouteDefaults) -> Result<Shaped, String> {
        Ok(Shaped { body: embed_body(body, p), path: None, headers: Vec::new() })
    }

    fn parse_embed(&self, body: &[u8], inputs: usize) -> Result<super::embeddings::Embedded, String> {
        super::embeddings::parse_openai(body, Some(inputs))
    }
}

/// OpenAI's embeddings body: the model, the inputs, floats (not base64), and the provider's `extra_body`.
pub(crate) fn embed_body(body: &Value, p: &ProviderConfig) -> Value {
    let mut out = body.clone();
    if let Some(o) = out.as_object_mut() {
        if let Some(m) = &p.model {
            o.insert("model".into(), Value::String(m.clone()));
        }
        o.entry("encoding_format").or_insert_with(|| Value::String("float".into()));
    }
    if let Some(extra) = &p.extra_body {
        wire::extra(&mut out, extra);
    }
    out
}

/// OpenAI's chunks: `data: {...}` until `data: [DONE]`.
pub(crate) struct Chunks;

impl EventReader for Chunks {
    fn read(&mut self, _event: &str, data: &str) -> Result<EventRead, EventFault> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(EventRead::Done(Parsed::default()));
        }
        if data.is_empty() {
            return Ok(EventRead::Skip);
        }
        parse_chunk(data).map(EventRead::Piece)
    }
}

/// A chat call: the messages and any other chat-completions parameters.
///
/// A host that crosses text sends it as one JSON object ([`ChatRequest::from_host`]), `headers`
/// as a list of `[name, value]` pairs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    /// `[{"role": "user", "content": "..."}, ...]`
    pub messages: Value,
    /// `temperature`, `max_tokens`, `tools`, ...; `model` is set per provider.
    #[serde(default)]
    pub params: Map<String, Value>,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(default, deserialize_with = "crate::request::host_millis")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub traceparent: Option<String>,
    /// Who the call is made for, kept in the audit record only.
    #[serde(default)]
    pub principal: Option<String>,
}

impl ChatRequest {
    pub fn new(messages: Value) -> Self {
        ChatRequest { messages, ..Default::default() }
    }

    /// A chat call a host sent as one JSON object; a field that does not fit is a `ConfigError`
    /// naming it (`request.params: invalid type ...`). The messages themselves are checked
    /// when the call is made ([`ChatRequest::body`]).
    pub fn from_host(text: &[u8]) -> Result<ChatRequest, HarnessError> {
        crate::request::from_host_json("request", text)
    }

    /// The request body, checked: messages are a non-empty list of objects with a `role`.
    pub fn body(&self) -> Result<Value, HarnessError> {
        let Some(list) = self.messages.as_array().filter(|l| !l.is_empty()) else {
            return Err(HarnessError::config("messages: expected a non-empty list of messages"));
        };
        for (i, m) in list.iter().enumerate() {
            if m.get("role").and_then(Value::as_str).is_none() {
                return Err(HarnessError::config(format!("messages[{i}].role: required (a string such as \"user\")")));
            }
        }
        for k in ["messages", "stream"] {
            if self.params.contains_key(k) {
                return Err(HarnessError::config(format!("params.{k}: set by Harness (use chat or chat_stream)")));
            }
        }
        if let Some(c) = self.params.get(CACHE_PARAM).filter(|c| !c.is_boolean()) {
            return Err(HarnessError::config(format!("params.cache: expected true or false (false: the route's answer caches are skipped), got {c}")));
        }
        let mut body = Map::new();
        body.insert("messages".into(), self.messages.clone());
        for (k, v) in &self.params {
            // Harness's own switch, never sent to a provider.
            if k != CACHE_PARAM {
                body.insert(k.clone(), v.clone());
            }
        }
        Ok(Value::Object(body))
    }

    /// `params.cache: false`: the caller bypasses the route's answer caches for this call.
    pub fn bypasses_cache(&self) -> bool {
        self.params.get(CACHE_PARAM) == Some(&Value::Bool(false))
    }
}

/// The chat parameter that turns the route's answer caches off for one call.
pub const CACHE_PARAM: &str = "cache";

/// A chat answer, the same shape from every provider.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct ChatResponse {
    /// The assistant's text.
    #[schemars(extend("x-sensitive" = true))]
    pub content: String,
    /// The tools the model asked to call (finish reason `tool_calls`), in the provider's order.
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub route: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub cost: Option<f64>,
    /// `cache` or `static` when no provider answered (see `Routed::fallback`).
    #[schemars(extend("enum" = ["cache", "static", null]))]
    pub fallback: Option<&'static str>,
    pub attempts: u32,
    pub attempts_by_provider: Vec<(String, u32)>,
    pub trace_id: String,
    pub elapsed_ms: f64,
    /// Set when a cache had a part in the answer: `exact` or `semantic` (with the
    /// similarity and the cost saved), or `coalesced` (an identical call's answer, shared).
    pub cache: Option<crate::cache::stamp::CacheStamp>,
    /// The provider's whole answer (not part of the view: bindings hand it over as bytes).
    #[serde(skip)]
    pub raw: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChatChunkKind {
    /// More of the answer.
    Delta,
    /// More of a tool call: `tool_call` says which (index) and what arrived.
    ToolCall,
    /// The answer so far is void: it starts again from another provider.
    Restart,
    /// The end: finish reason, usage and cost.
    Done,
}

impl ChatChunkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChatChunkKind::Delta => "delta",
            ChatChunkKind::ToolCall => "tool_call",
            ChatChunkKind::Restart => "restart",
            ChatChunkKind::Done => "done",
        }
    }
}

/// One piece of a streamed chat answer.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ChatChunk {
    pub kind: ChatChunkKind,
    /// `delta`: the new text.
    #[schemars(extend("x-sensitive" = true))]
    pub content: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// `tool_call`: the piece of one tool call that arrived.
    pub tool_call: Option<ToolCallDelta>,
    /// `done`: the tool calls assembled from every `tool_call` chunk.
    pub tool_calls: Vec<ToolCall>,
    /// `done`.
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub cost: Option<f64>,
    /// `restart`: why the previous provider's answer was abandoned.
    pub reason: Option<String>,
}

/// The body for one provider: its model, its temperature range, its token-limit field.
pub(crate) fn prepare(body: &Value, p: &ProviderConfig, stream: bool) -> Value {
    let mut out = body.as_object().cloned().unwrap_or_default();
    if let Some(model) = &p.model {
        out.insert("model".into(), Value::String(model.clone()));
    }
    if let Some(t) = &p.params.temperature {
        if let Some(v) = out.get("temperature").and_then(Value::as_f64) {
            let [lo, hi] = t.range;
            let scaled = match t.mode {
                RangeMode::Clamp => v.clamp(lo, hi),
                RangeMode::Scale => (lo + (v / 2.0) * (hi - lo)).clamp(lo, hi),
            };
            // Rounded so that 0.7 stays 0.7 rather than 0.70000000001.
            let scaled = (scaled * 1e6).round() / 1e6;
            out.insert("temperature".into(), serde_json::Number::from_f64(scaled).map(Value::Number).unwrap_or(Value::Null));
        }
    }
    if let Some(field) = &p.params.max_tokens_field {
        let other = if field == "max_tokens" { "max_completion_tokens" } else { "max_tokens" };
        if let Some(v) = out.remove(other) {
            out.entry(field.clone()).or_insert(v);
        }
    }
    if stream {
        out.insert("stream".into(), Value::Bool(true));
        // Ask for usage on the last chunk (providers that do not know the option ignore it).
        out.entry("stream_options").or_insert_with(|| serde_json::json!({"include_usage": true}));
    } else {
        out.remove("stream");
    }
    Value::Object(out)
}

/// Reads a whole chat completion.
pub(crate) fn parse_completion(body: &[u8]) -> Result<Parsed, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("the answer has no choices[0]")?;
    let message = choice.get("message").ok_or("the answer has no choices[0].message")?;
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let mut tool_calls = Vec::new();
    for (i, t) in message.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
        let f = t.get("function").ok_or_else(|| format!("choices[0].message.tool_calls[{i}] has no function"))?;
        tool_calls.push(ToolCall {
            id: t.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
            name: f.get("name").and_then(Value::as_str).ok_or_else(|| format!("choices[0].message.tool_calls[{i}].function has no name"))?.to_string(),
            arguments: arguments(f.get("arguments")),
        });
    }
    Ok(Parsed {
        content,
        tool_calls,
        tool_deltas: Vec::new(),
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_string),
        usage: Usage::from_value(v.get("usage"))?,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
    })
}

/// Reads one streamed chunk (`data:` of an SSE event): `Malformed` for one that does not
/// parse, `Failed` for an `{"error": ...}` chunk (a provider failing mid-stream).
pub(crate) fn parse_chunk(data: &str) -> Result<Parsed, EventFault> {
    let v: Value = serde_json::from_str(data).map_err(|e| EventFault::Malformed(format!("malformed chunk: {e}")))?;
    if !v.is_object() {
        return Err(EventFault::Malformed("malformed chunk: not a JSON object".into()));
    }
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(stream_error(err));
    }
    let choice = v.get("choices").and_then(Value::as_array).and_then(|c| c.first());
    let content = choice
        .and_then(|c| c.get("delta"))
        .and_then(|d| d.get("content"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut tool_deltas = Vec::new();
    let deltas = choice.and_then(|c| c.get("delta")).and_then(|d| d.get("tool_calls")).and_then(Value::as_array);
    for (i, t) in deltas.map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
        let f = t.get("function");
        tool_deltas.push(ToolCallDelta {
            index: t.get("index").and_then(Value::as_u64).map(|n| n.min(1024) as u32).unwrap_or(i as u32),
            id: t.get("id").and_then(Value::as_str).map(str::to_string),
            name: f.and_then(|f| f.get("name")).and_then(Value::as_str).map(str::to_string),
            arguments: f.and_then(|f| f.get("arguments")).map(|a| arguments(Some(a))).unwrap_or_default(),
        });
    }
    Ok(Parsed {
        content,
        tool_calls: Vec::new(),
        tool_deltas,
        finish_reason: choice.and_then(|c| c.get("finish_reason")).and_then(Value::as_str).map(str::to_string),
        usage: Usage::from_value(v.get("usage")).map_err(EventFault::Malformed)?,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
    })
}

/// An `{"error": ...}` object sent mid-stream.
pub(crate) fn stream_error(err: &Value) -> EventFault {
    let text = |k: &str| err.get(k).and_then(Value::as_str).map(str::to_string);
    let message = text("message").unwrap_or_else(|| crate::redact::truncate_chars(&err.to_string(), 300));
    let code = text("code").or_else(|| text("type")).or_else(|| text("status"));
    let code = wire::common_code(0, code.as_deref(), &message).map(str::to_string).or(code);
    EventFault::Failed { code, message }
}

/// A whole answer in OpenAI's chat-completion shape: how a native format's answer is handed
/// on (serialised straight from the parsed answer, with no JSON tree in between).
pub(crate) fn completion_bytes(p: &Parsed) -> Vec<u8> {
    #[derive(Serialize)]
    struct Function<'a> {
        name: &'a str,
        arguments: &'a str,
    }
    #[derive(Serialize)]
    struct Call<'a> {
        id: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        function: Function<'a>,
    }
    #[derive(Serialize)]
    struct Message<'a> {
        role: &'static str,
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<Call<'a>>,
    }
    #[derive(Serialize)]
    struct Choice<'a> {
        index: u32,
        message: Message<'a>,
        finish_reason: Option<&'a str>,
    }
    #[derive(Serialize)]
    struct Completion<'a> {
        object: &'static str,
        model: Option<&'a str>,
        choices: [Choice<'a>; 1],
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Value>,
    }
    let calls: Vec<Call> = p.tool_calls.iter().map(|t| Call { id: &t.id, kind: "function", function: Function { name: &t.name, arguments: &t.arguments } }).collect();
    let content = if p.content.is_empty() && !calls.is_empty() { None } else { Some(p.content.as_str()) };
    let c = Completion {
        object: "chat.completion",
        model: p.model.as_deref(),
        choices: [Choice { index: 0, message: Message { role: "assistant", content, tool_calls: calls }, finish_reason: p.finish_reason.as_deref() }],
        usage: p.usage.as_ref().map(Usage::openai_json),
    };
    serde_json::to_vec(&c).unwrap_or_default()
}

/// Tool-call arguments as the provider sent them: a string as is, anything else as its JSON.
fn arguments(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A chat completion body carrying `content` (a non-core route's static answer).
pub(crate) fn completion_body(content: &str) -> Value {
    serde_json::json!({
        "object": "chat.completion",
        "model": "static",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::config::{Params, TemperatureParam};
    use serde_json::json;

    #[test]
    fn a_host_chat_call_keeps_its_order_and_a_bad_field_is_named() {
        let text = br#"{"messages":[{"role":"user","content":"hi"}],"params":{"z":1,"a":0.5},"headers":[["x","y"]],"timeout_ms":900}"#;
        let chat = ChatRequest::from_host(text).unwrap();
        assert_eq!(chat.messages[0]["content"], "hi");
        assert_eq!(chat.params.keys().collect::<Vec<_>>(), ["z", "a"]);
        assert_eq!((chat.headers.len(), chat.timeout_ms), (1, Some(900)));
        for (text, want) in [
            (&br#"{"messages":[],"params":[1]}"#[..], "request.params: invalid type: sequence, expected a map"),
            (br#"{"messages":[],"timeout_ms":-3}"#, "request.timeout_ms: expected an integer >= 0, got -3"),
            (br#"{"params":{}}"#, "request: missing field `messages`"),
        ] {
            let e = ChatRequest::from_host(text).unwrap_err();
            assert!(e.message.starts_with(want), "{} (wanted {want})", e.message);
        }
        let deep = format!(r#"{{"messages":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
        assert!(ChatRequest::from_host(deep.as_bytes()).unwrap_err().message.contains("nested deeper than 512"));
    }

    fn provider(range: Option<[f64; 2]>, mode: RangeMode, field: Option<&str>) -> ProviderConfig {
        ProviderConfig {
            id: "p".into(),
            service: "s".into(),
            model: Some("glm-4-flash".into()),
            weight: 1,
            params: Params {
                temperature: range.map(|range| TemperatureParam { range, mode }),
                max_tokens_field: field.map(str::to_string),
            },
            ..Default::default()
        }
    }

    #[test]
    fn parameters_are_normalised_per_provider() {
        let body = json!({"messages": [{"role": "user", "content": "hi"}], "model": "whatever", "temperature": 0.0, "max_tokens": 64});
        let out = prepare(&body, &provider(Some([0.01, 0.99]), RangeMode::Clamp, Some("max_completion_tokens")), false);
        assert_eq!(out["model"], "glm-4-flash");
        assert_eq!(out["temperature"], 0.01);
        assert_eq!(out["max_completion_tokens"], 64);
        assert!(out.get("max_tokens").is_none());
        let scaled = prepare(&json!({"temperature": 1.0}), &provider(Some([0.0, 1.0]), RangeMode::Scale, None), true);
        assert_eq!(scaled["temperature"], 0.5);
        assert_eq!(scaled["stream"], true);
        assert_eq!(scaled["stream_options"]["include_usage"], true);
        // The caller's body is untouched.
        assert_eq!(body["model"], "whatever");
    }

    #[test]
    fn answers_and_chunks_are_read_the_same_from_any_provider() {
        let p = parse_completion(br#"{"model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#).unwrap();
        assert_eq!((p.content.as_str(), p.finish_reason.as_deref(), p.model.as_deref()), ("hi", Some("stop"), Some("m")));
        assert_eq!(p.usage, Some(Usage { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, ..Default::default() }));
        assert!(parse_completion(b"{}").unwrap_err().contains("choices"));
        // Usage never wraps, and absurd counts are a malformed answer, not a bill.
        let max = u64::MAX;
        let wraps = format!(r#"{{"choices":[{{"message":{{"content":"x"}}}}],"usage":{{"prompt_tokens":{max},"completion_tokens":2}}}}"#);
        assert!(parse_completion(wraps.as_bytes()).unwrap_err().starts_with("malformed usage"));
        let big = r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1000000001}}"#;
        assert!(parse_completion(big.as_bytes()).unwrap_err().contains("more than 1000000000"));
        assert!(parse_chunk(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":18446744073709551615}}"#).is_err());
        let near = r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":999999999,"completion_tokens":1}}"#;
        assert_eq!(parse_completion(near.as_bytes()).unwrap().usage.unwrap().total_tokens, 1_000_000_000);
        let c = parse_chunk(r#"{"choices":[{"delta":{"content":"Hel"},"finish_reason":null}]}"#).unwrap();
        assert_eq!(c.content, "Hel");
        assert!(parse_chunk("{\"choices\": [broken").is_err());
        let failed = parse_chunk(r#"{"error":{"message":"Overloaded","type":"server_error","code":"overloaded"}}"#).unwrap_err();
        assert_eq!(failed, EventFault::Failed { code: Some("overloaded".into()), message: "Overloaded".into() });
    }

    #[test]
    fn tool_calls_are_read_from_answers_and_assembled_from_chunks() {
        let p = parse_completion(br#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}]}"#).unwrap();
        assert_eq!(p.tool_calls, [ToolCall { id: "call_1".into(), name: "get_weather".into(), arguments: r#"{"city":"Paris"}"#.into() }]);
        assert_eq!((p.content.as_str(), p.finish_reason.as_deref()), ("", Some("tool_calls")));
        assert!(parse_completion(br#"{"choices":[{"message":{"tool_calls":[{"id":"x"}]}}]}"#).unwrap_err().contains("tool_calls[0]"));
        let mut calls = Vec::new();
        for data in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}"#,
        ] {
            for d in parse_chunk(data).unwrap().tool_deltas {
                assemble(&mut calls, &d);
            }
        }
        assert_eq!(calls, [ToolCall { id: "call_1".into(), name: "get_weather".into(), arguments: r#"{"city":"Paris"}"#.into() }]);
    }

    #[test]
    fn chat_requests_are_checked() {
        assert!(ChatRequest::new(json!([])).body().unwrap_err().message.starts_with("messages:"));
        assert!(ChatRequest::new(json!([{"content": "x"}])).body().unwrap_err().message.starts_with("messages[0].role"));
        let mut r = ChatRequest::new(json!([{"role": "user", "content": "x"}]));
        r.params.insert("stream".into(), json!(true));
        assert!(r.body().unwrap_err().message.starts_with("params.stream"));
    }
}

//! Anthropic's Messages API (`POST /v1/messages`) in front of any route: a request read into
//! the chat-completions shape the core takes, and the core's answer, stream and errors
//! written back the way Anthropic's SDKs read them.
//!
//! Requests: `system` (a string or text blocks) becomes a system message; `messages` with
//! string or block content: `text` and `image` (base64 or URL source, as an `image_url` part)
//! blocks become content parts, an assistant's `tool_use` blocks its `tool_calls` (the input
//! as JSON text), each `tool_result` a `tool` message (its text; `is_error` is said in the
//! text), in the order they came; `thinking` blocks of earlier turns are dropped.
//! `max_tokens`, `temperature`, `top_p`, `stop_sequences` (as `stop`), `tools` (as function
//! tools, `input_schema` as `parameters`), `tool_choice` (`auto`, `any` as `required`, `tool`
//! as a named function, `none`; `disable_parallel_tool_use` as `parallel_tool_calls: false`)
//! and `metadata.user_id` (as `user`) are translated; `top_k`, `thinking`, `service_tier`
//! and any other field with no chat-completions counterpart are dropped. A block or tool
//! that cannot be expressed (documents, server tools) is a 400 naming where it is.
//!
//! Answers: a text block (when there is text), then one `tool_use` block per tool call (its
//! input the parsed arguments); finish reasons `stop`/`length`/`tool_calls`/`content_filter`
//! as `end_turn`/`max_tokens`/`tool_use`/`refusal`; usage with the cache read apart
//! (`input_tokens` excludes `cache_read_input_tokens`, as Anthropic counts). A refusal the
//! core reports as a `content_filter` error is an answer with `stop_reason: "refusal"`.
//! Streams: Anthropic's named events, blocks opened and closed in order, an `error` event
//! when the core fails after the head. Errors: `{"type": "error", "error": {"type",
//! "message"}}` with the status the OpenAI-shaped API gives.

use std::collections::HashMap;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use harness_core::{ChatResponse, ToolCallDelta, Usage};
use serde_json::{json, Map, Value};

use crate::errors::ApiError;

/// A Messages request in the chat-completions shape.
pub(crate) struct Translated {
    pub model: String,
    pub stream: bool,
    pub messages: Value,
    pub params: Map<String, Value>,
}

/// Reads a Messages request; `Err` is a 400's message naming the field.
pub(crate) fn request(v: &Value) -> Result<Translated, String> {
    let obj = v.as_object().ok_or("the body must be a JSON object")?;
    let model = match obj.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => return Err("`model` is required: a route, or route/model".into()),
    };
    let stream = match obj.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("`stream`: expected a boolean".into()),
    };
    let mut messages = Vec::new();
    match obj.get("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            if !s.is_empty() {
                messages.push(json!({"role": "system", "content": s}));
            }
        }
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => texts.push(b.get("text").and_then(Value::as_str).ok_or_else(|| format!("`system[{j}].text`: required"))?),
                    other => return Err(format!("`system[{j}].type`: expected text blocks, got {}", shown(other))),
                }
            }
            if !texts.is_empty() {
                messages.push(json!({"role": "system", "content": texts.join("\n")}));
            }
        }
        Some(_) => return Err("`system`: expected a string or a list of text blocks".into()),
    }
    let list = obj.get("messages").and_then(Value::as_array).filter(|l| !l.is_empty()).ok_or("`messages`: expected a non-empty list of messages")?;
    for (i, m) in list.iter().enumerate() {
        turn(i, m, &mut messages)?;
    }
    let mut params = Map::new();
    if let Some(v) = obj.get("max_tokens").filter(|v| !v.is_null()) {
        let n = v.as_u64().filter(|n| *n >= 1).ok_or("`max_tokens`: expected an integer >= 1")?;
        params.insert("max_tokens".into(), json!(n));
    }
    for k in ["temperature", "top_p"] {
        if let Some(v) = obj.get(k).filter(|v| !v.is_null()) {
            if !v.is_number() {
                return Err(format!("`{k}`: expected a number"));
            }
            params.insert(k.into(), v.clone());
        }
    }
    if let Some(v) = obj.get("stop_sequences").filter(|v| !v.is_null()) {
        let stops = v.as_array().filter(|l| l.iter().all(Value::is_string)).ok_or("`stop_sequences`: expected a list of strings")?;
        if !stops.is_empty() {
            params.insert("stop".into(), Value::Array(stops.clone()));
        }
    }
    if let Some(v) = obj.get("tools").filter(|v| !v.is_null()) {
        let tools = v.as_array().ok_or("`tools`: expected a list of tools")?;
        let mut out = Vec::new();
        for (i, t) in tools.iter().enumerate() {
            if let Some(kind) = t.get("type").and_then(Value::as_str).filter(|k| *k != "custom") {
                return Err(format!("`tools[{i}]`: a server tool (type {kind:?}) cannot be served through a route; only client tools (name, description, input_schema)"));
            }
            let name = t.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or_else(|| format!("`tools[{i}].name`: required"))?;
            let mut f = json!({"name": name, "parameters": t.get("input_schema").cloned().unwrap_or_else(|| json!({"type": "object"}))});
            if let Some(d) = t.get("description").and_then(Value::as_str) {
                f["description"] = json!(d);
            }
            out.push(json!({"type": "function", "function": f}));
        }
        if !out.is_empty() {
            params.insert("tools".into(), Value::Array(out));
        }
    }
    if let Some(c) = obj.get("tool_choice").filter(|v| !v.is_null()) {
        let choice = match c.get("type").and_then(Value::as_str) {
            Some("auto") => json!("auto"),
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => {
                let name = c.get("name").and_then(Value::as_str).ok_or("`tool_choice.name`: required with type tool")?;
                json!({"type": "function", "function": {"name": name}})
            }
            other => return Err(format!("`tool_choice.type`: expected auto, any, tool or none, got {}", shown(other))),
        };
        params.insert("tool_choice".into(), choice);
        if c.get("disable_parallel_tool_use").and_then(Value::as_bool) == Some(true) {
            params.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    if let Some(u) = obj.get("metadata").and_then(|m| m.get("user_id")).and_then(Value::as_str) {
        params.insert("user".into(), json!(u));
    }
    Ok(Translated { model, stream, messages: Value::Array(messages), params })
}

fn shown(v: Option<&str>) -> String {
    v.map_or_else(|| "none".into(), |s| format!("{:?}", harness_core::redact::escape_control(s)))
}

/// One Messages turn as one or more chat messages (a user turn's tool results are `tool`
/// messages, in place).
fn turn(i: usize, m: &Value, out: &mut Vec<Value>) -> Result<(), String> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some(r @ ("user" | "assistant")) => r,
        other => return Err(format!("`messages[{i}].role`: expected user or assistant, got {}", shown(other))),
    };
    let blocks = match m.get("content") {
        Some(Value::String(s)) => {
            out.push(json!({"role": role, "content": s}));
            return Ok(());
        }
        Some(Value::Array(blocks)) => blocks,
        _ => return Err(format!("`messages[{i}].content`: expected a string or a list of content blocks")),
    };
    if role == "assistant" {
        let mut text = String::new();
        let mut calls = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
                Some("tool_use") => {
                    let id = b.get("id").and_then(Value::as_str).ok_or_else(|| format!("`messages[{i}].content[{j}].id`: required"))?;
                    let name = b.get("name").and_then(Value::as_str).ok_or_else(|| format!("`messages[{i}].content[{j}].name`: required"))?;
                    let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                    calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}));
                }
                // An earlier turn's reasoning is the provider's own; other vendors cannot take it.
                Some("thinking" | "redacted_thinking") => {}
                other => return Err(format!("`messages[{i}].content[{j}].type`: an assistant turn takes text and tool_use blocks, got {}", shown(other))),
            }
        }
        let mut msg = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) }});
        if !calls.is_empty() {
            msg["tool_calls"] = Value::Array(calls);
        }
        out.push(msg);
        return Ok(());
    }
    let mut parts: Vec<Value> = Vec::new();
    let flush = |parts: &mut Vec<Value>, out: &mut Vec<Value>| {
        if parts.is_empty() {
            return;
        }
        let content = match parts.as_slice() {
            [only] if only["type"] == "text" => only["text"].clone(),
            _ => Value::Array(std::mem::take(parts)),
        };
        parts.clear();
        out.push(json!({"role": "user", "content": content}));
    };
    for (j, b) in blocks.iter().enumerate() {
        let at = || format!("messages[{i}].content[{j}]");
        match b.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(json!({"type": "text", "text": b.get("text").and_then(Value::as_str).ok_or_else(|| format!("`{}.text`: required", at()))?})),
            Some("image") => parts.push(image(b, &at())?),
            Some("tool_result") => {
                flush(&mut parts, out);
                let id = b.get("tool_use_id").and_then(Value::as_str).ok_or_else(|| format!("`{}.tool_use_id`: required", at()))?;
                let mut text = match b.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(inner)) => {
                        let mut texts = Vec::new();
                        for (k, c) in inner.iter().enumerate() {
                            match c.get("type").and_then(Value::as_str) {
                                Some("text") => texts.push(c.get("text").and_then(Value::as_str).unwrap_or("")),
                                other => return Err(format!("`{}.content[{k}].type`: a tool result is passed on as text, got {}", at(), shown(other))),
                            }
                        }
                        texts.join("\n")
                    }
                    Some(_) => return Err(format!("`{}.content`: expected a string or text blocks", at())),
                };
                if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                    text = format!("Error: {text}");
                }
                out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
            }
            other => return Err(format!("`{}.type`: a user turn takes text, image and tool_result blocks, got {}", at(), shown(other))),
        }
    }
    flush(&mut parts, out);
    Ok(())
}

/// An `image` block as an `image_url` part (base64 as a data URL).
fn image(b: &Value, at: &str) -> Result<Value, String> {
    let source = b.get("source").ok_or_else(|| format!("`{at}.source`: required"))?;
    let url = match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = source.get("media_type").and_then(Value::as_str).ok_or_else(|| format!("`{at}.source.media_type`: required"))?;
            let data = source.get("data").and_then(Value::as_str).ok_or_else(|| format!("`{at}.source.data`: required"))?;
            format!("data:{media};base64,{data}")
        }
        Some("url") => source.get("url").and_then(Value::as_str).ok_or_else(|| format!("`{at}.source.url`: required"))?.to_string(),
        other => return Err(format!("`{at}.source.type`: expected base64 or url, got {}", shown(other))),
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// Anthropic's stop reason for a finish reason (`tool_use` whenever tools were called).
pub(crate) fn stop_reason(finish: Option<&str>, called_tools: bool) -> &'static str {
    match finish {
        Some("length") => "max_tokens",
        Some("content_filter") => "refusal",
        Some("tool_calls") => "tool_use",
        _ if called_tools => "tool_use",
        _ => "end_turn",
    }
}

/// Anthropic's usage: input tokens without the cache read, which is counted apart.
pub(crate) fn usage(u: Option<&Usage>) -> Value {
    let u = u.copied().unwrap_or_default();
    json!({"input_tokens": u.prompt_tokens.saturating_sub(u.cached_tokens), "output_tokens": u.completion_tokens, "cache_read_input_tokens": u.cached_tokens})
}

/// A tool call's arguments as a `tool_use` input: the JSON they are (an empty text is `{}`).
fn input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

fn tool_id(id: &str, trace_id: &str, index: usize) -> String {
    if id.is_empty() {
        format!("toolu_{trace_id}_{index}")
    } else {
        id.to_string()
    }
}

/// A buffered answer as a Messages answer.
pub(crate) fn message(r: &ChatResponse, model: &str) -> Value {
    let mut content = Vec::new();
    if !r.content.is_empty() {
        content.push(json!({"type": "text", "text": r.content}));
    }
    for (i, t) in r.tool_calls.iter().enumerate() {
        content.push(json!({"type": "tool_use", "id": tool_id(&t.id, &r.trace_id, i), "name": t.name, "input": input(&t.arguments)}));
    }
    json!({
        "id": format!("msg_{}", r.trace_id),
        "type": "message",
        "role": "assistant",
        "model": r.model.clone().unwrap_or_else(|| model.to_string()),
        "content": content,
        "stop_reason": stop_reason(r.finish_reason.as_deref(), !r.tool_calls.is_empty()),
        "stop_sequence": Value::Null,
        "usage": usage(r.usage.as_ref()),
        "harness": {"route": r.route, "provider": r.provider, "cost": r.cost, "attempts": r.attempts, "trace_id": r.trace_id, "fallback": r.fallback},
    })
}

/// A refusal the core reported as a `content_filter` error, as the answer Anthropic gives.
pub(crate) fn refusal(trace_id: &str, model: &str) -> Value {
    json!({
        "id": format!("msg_{trace_id}"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": "refusal",
        "stop_sequence": Value::Null,
        "usage": usage(None),
    })
}

/// Anthropic's error type for the gateway's status.
pub(crate) fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 409 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        408 | 504 => "timeout_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// An error's body in Anthropic's shape; the gateway's own details under `harness`.
pub(crate) fn error_body(e: &ApiError) -> Value {
    let mut v = json!({"type": "error", "error": {"type": error_type(e.status), "message": e.message},
        "harness": {"code": e.code, "harness_kind": e.harness_kind, "trace_id": e.trace_id}});
    if let Some(t) = &e.trace_id {
        v["request_id"] = json!(t);
    }
    v
}

/// An error as Anthropic answers it (status and `Retry-After` as the OpenAI-shaped API).
pub(crate) fn error_response(e: ApiError) -> Response {
    let mut r = (e.status, axum::Json(error_body(&e))).into_response();
    if let Some(s) = e.retry_after_s {
        r.headers_mut().insert("retry-after", HeaderValue::from(s));
    }
    if let Some(t) = e.trace_id.as_deref().and_then(|t| HeaderValue::from_str(t).ok()) {
        r.headers_mut().insert("x-harness-trace-id", t);
    }
    r
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Tool(u32),
}

/// A streamed answer written as Anthropic's events: `message_start` before the first
/// block, each block started, added to and stopped in order, then `message_delta` and
/// `message_stop` (or an `error` event).
pub(crate) struct Events {
    id: String,
    trace_id: String,
    started: bool,
    /// The block being written, and its index.
    open: Option<(Open, usize)>,
    next: usize,
    /// Tool call index -> its block's index.
    tools: HashMap<u32, usize>,
}

impl Events {
    pub fn new(trace_id: &str) -> Events {
        Events { id: format!("msg_{trace_id}"), trace_id: trace_id.to_string(), started: false, open: None, next: 0, tools: HashMap::new() }
    }

    /// Whether any block reached the caller.
    pub fn said_anything(&self) -> bool {
        self.next > 0
    }

    fn start(&mut self, model: &str) -> String {
        if self.started {
            return String::new();
        }
        self.started = true;
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": self.id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": Value::Null, "stop_sequence": Value::Null, "usage": {"input_tokens": 0, "output_tokens": 0}}}),
        )
    }

    fn close(&mut self) -> String {
        match self.open.take() {
            Some((_, index)) => event("content_block_stop", json!({"type": "content_block_stop", "index": index})),
            None => String::new(),
        }
    }

    fn open(&mut self, kind: Open, block: Value) -> (String, usize) {
        let mut out = self.close();
        let index = self.next;
        self.next += 1;
        self.open = Some((kind, index));
        out.push_str(&event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": block})));
        (out, index)
    }

    /// More text (empty: nothing).
    pub fn text(&mut self, model: &str, text: &str) -> String {
        if text.is_empty() {
            return String::new();
        }
        let mut out = self.start(model);
        let index = match self.open {
            Some((Open::Text, index)) => index,
            _ => {
                let (o, index) = self.open(Open::Text, json!({"type": "text", "text": ""}));
                out.push_str(&o);
                index
            }
        };
        out.push_str(&event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}})));
        out
    }

    /// A piece of a tool call: its first opens a `tool_use` block, its arguments are
    /// `input_json_delta`s.
    pub fn tool(&mut self, model: &str, t: &ToolCallDelta) -> String {
        let mut out = self.start(model);
        let index = match (self.open, self.tools.get(&t.index)) {
            (Some((Open::Tool(i), index)), _) if i == t.index => index,
            // A piece of a call whose block is already closed (calls interleaved): sent on its block.
            (_, Some(index)) => *index,
            _ => {
                let id = tool_id(t.id.as_deref().unwrap_or(""), &self.trace_id, t.index as usize);
                let block = json!({"type": "tool_use", "id": id, "name": t.name.clone().unwrap_or_default(), "input": {}});
                let (o, index) = self.open(Open::Tool(t.index), block);
                self.tools.insert(t.index, index);
                out.push_str(&o);
                index
            }
        };
        if !t.arguments.is_empty() {
            out.push_str(&event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": t.arguments}})));
        }
        out
    }

    /// The end: the open block stopped, the stop reason and usage, `message_stop`.
    pub fn finish(&mut self, model: &str, finish: Option<&str>, usage: Option<&Usage>) -> String {
        let mut out = self.start(model);
        out.push_str(&self.close());
        let reason = stop_reason(finish, !self.tools.is_empty());
        out.push_str(&event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": Value::Null}, "usage": self::usage(usage)})));
        out.push_str(&event("message_stop", json!({"type": "message_stop"})));
        out
    }

    /// A failure after the head: the last event.
    pub fn error(&mut self, e: &ApiError) -> String {
        event("error", error_body(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_with_every_block_kind_becomes_chat_messages_in_order() {
        let t = request(&json!({
            "model": "chat", "max_tokens": 100, "temperature": 0.2, "top_p": 0.9, "top_k": 5, "stop_sequences": ["END"],
            "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
            "metadata": {"user_id": "u-1"},
            "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
                    {"type": "image", "source": {"type": "url", "url": "https://x/cat.png"}}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]}, {"type": "text", "text": "And tomorrow?"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "no data", "is_error": true}]},
            ]
        }))
        .unwrap();
        assert_eq!(t.model, "chat");
        assert!(!t.stream);
        assert_eq!(
            t.messages,
            json!([
                {"role": "system", "content": "Be brief.\nBe kind."},
                {"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                    {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}]},
                {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
                {"role": "user", "content": "And tomorrow?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "toolu_2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no data"},
            ])
        );
        assert_eq!(
            Value::Object(t.params),
            json!({"max_tokens": 100, "temperature": 0.2, "top_p": 0.9, "stop": ["END"], "user": "u-1", "parallel_tool_calls": false,
                "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})
        );
        for (choice, want) in [("auto", json!("auto")), ("any", json!("required")), ("none", json!("none"))] {
            let t = request(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": choice}, "stream": true})).unwrap();
            assert_eq!(t.params["tool_choice"], want);
            assert!(t.stream);
        }
    }

    #[test]
    fn what_cannot_be_translated_is_named() {
        let bad = |v: Value| request(&v).err().unwrap();
        assert!(bad(json!({"messages": [{"role": "user", "content": "hi"}]})).starts_with("`model` is required"));
        assert!(bad(json!({"model": "m", "messages": []})).starts_with("`messages`"));
        assert!(bad(json!({"model": "m", "messages": [{"role": "system", "content": "x"}]})).starts_with("`messages[0].role`"));
        let e = bad(json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}));
        assert!(e.starts_with("`messages[0].content[0].type`") && e.contains("\"document\""), "{e}");
        let e = bad(json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search_20250305", "name": "web_search"}]}));
        assert!(e.starts_with("`tools[0]`: a server tool"), "{e}");
        assert!(bad(json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0})).starts_with("`max_tokens`"));
    }

    #[test]
    fn answers_and_streams_read_as_anthropic_writes_them() {
        let r = ChatResponse {
            content: "Checking.".into(),
            tool_calls: vec![harness_core::ToolCall { id: String::new(), name: "get_weather".into(), arguments: r#"{"city":"Paris"}"#.into() }],
            finish_reason: Some("tool_calls".into()),
            usage: Some(Usage { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110, cached_tokens: 40, reasoning_tokens: 0 }),
            trace_id: "t1".into(),
            model: Some("m-a".into()),
            ..Default::default()
        };
        let m = message(&r, "chat");
        assert_eq!(m["content"], json!([{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_t1_0", "name": "get_weather", "input": {"city": "Paris"}}]));
        assert_eq!((m["stop_reason"].as_str(), m["model"].as_str(), m["id"].as_str()), (Some("tool_use"), Some("m-a"), Some("msg_t1")));
        assert_eq!(m["usage"], json!({"input_tokens": 60, "output_tokens": 10, "cache_read_input_tokens": 40}));
        assert_eq!(stop_reason(Some("length"), false), "max_tokens");
        assert_eq!(stop_reason(Some("content_filter"), false), "refusal");
        assert_eq!(stop_reason(Some("stop"), false), "end_turn");

        let mut e = Events::new("t2");
        let mut text = e.text("m", "Hi ");
        text += &e.text("m", "there");
        text += &e.tool("m", &ToolCallDelta { index: 0, id: Some("call_0".into()), name: Some("f".into()), arguments: String::new() });
        text += &e.tool("m", &ToolCallDelta { index: 0, id: None, name: None, arguments: "{\"a\":".into() });
        text += &e.tool("m", &ToolCallDelta { index: 0, id: None, name: None, arguments: "1}".into() });
        text += &e.finish("m", Some("tool_calls"), None);
        let names: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
        assert_eq!(
            names,
            ["message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
        );
        let data: Vec<Value> = text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
        assert_eq!(data[5]["content_block"], json!({"type": "tool_use", "id": "call_0", "name": "f", "input": {}}));
        assert_eq!(data[5]["index"], 1);
        assert_eq!(data[7]["delta"], json!({"type": "input_json_delta", "partial_json": "1}"}));
        assert_eq!(data[9]["delta"]["stop_reason"], "tool_use");
    }
}

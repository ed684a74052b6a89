//! OpenAI chat completions (`/v1/chat/completions` and any path no other format claims),
//! and Azure OpenAI's (`/openai/deployments/{deployment}/chat/completions?api-version=V`),
//! the same shapes behind a deployment, `api-version` and an `api-key` header.

use serde_json::{json, Value};

use super::{header, query_param, sse, Call, Format, Op};
use crate::provider::{halves, Answer, Failure, Reply, Stream, StreamSpec, ToolCallSpec};

pub(super) fn read(format: Format, request: &Value) -> Call {
    let model = request.get("model").and_then(Value::as_str).unwrap_or("").to_string();
    let mut call = Call::new(format, Op::Chat, model);
    call.stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let messages = request.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    call.prefill = messages
        .last()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .and_then(|m| m.get("content").and_then(Value::as_str))
        .map(str::to_string);
    call.prompt_chars = messages.iter().filter_map(|m| m.get("content").and_then(Value::as_str)).map(str::len).sum();
    call
}

/// Azure refuses a request without `api-version` (404) or `api-key` (401).
pub(super) fn azure_reject(query: &str, headers: &[(String, String)]) -> Option<(u16, Value)> {
    if query_param(query, "api-version").is_none_or(str::is_empty) {
        return Some((404, json!({"error": {"code": "404", "message": "Resource not found"}})));
    }
    if header(headers, "api-key").is_none() {
        let message = "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.";
        return Some((401, json!({"error": {"code": "401", "message": message}})));
    }
    None
}

pub(super) fn failure(f: &Failure) -> Value {
    let code = f.code.clone().unwrap_or_else(|| format!("status_{}", f.status));
    let kind = f.kind.clone().unwrap_or_else(|| if f.refusal { "invalid_request_error" } else { "server_error" }.into());
    json!({"error": {"code": code, "type": kind, "message": f.message}})
}

/// Azure's answer to a prompt its content filter blocks.
pub(super) fn content_filter() -> Value {
    json!({"error": {
        "code": "content_filter",
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
        "param": "prompt",
        "status": 400,
        "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {"hate": {"filtered": true, "severity": "high"}}},
    }})
}

pub(super) fn answer(a: &Answer, stream: bool, spec: &StreamSpec) -> Reply {
    let name = &a.name;
    let mut usage = json!({"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens, "total_tokens": a.prompt_tokens.saturating_add(a.completion_tokens)});
    if let Some(cached) = a.cached_tokens {
        usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    if !stream {
        let body = json!({
            "id": format!("chatcmpl-{name}"),
            "object": "chat.completion",
            "created": 0,
            "model": a.model,
            "choices": [{"index": 0, "message": message(&a.content, &a.tools), "finish_reason": a.finish}],
            "usage": usage,
        });
        return Reply::json(200, &body);
    }
    let mut deltas: Vec<Value> = a.words().iter().map(|p| json!({"content": p})).collect();
    for (i, t) in a.tools.iter().enumerate() {
        deltas.push(json!({"tool_calls": [{"index": i, "id": t.id, "type": "function", "function": {"name": t.name, "arguments": ""}}]}));
        for part in halves(&t.arguments) {
            deltas.push(json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}));
        }
    }
    if let Some(first) = deltas.first_mut() {
        first["role"] = json!("assistant");
    }
    let chunk = |delta: Value, finish: Value, usage: Option<&Value>| {
        let mut v = json!({
            "id": format!("chatcmpl-{name}"),
            "object": "chat.completion.chunk",
            "created": 0,
            "model": a.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if let Some(u) = usage {
            v["usage"] = u.clone();
        }
        sse(None, &v)
    };
    let mut events: Vec<(String, bool)> = deltas.into_iter().map(|d| (chunk(d, Value::Null, None), true)).collect();
    events.push((chunk(json!({}), json!(a.finish), spec.usage.then_some(&usage)), false));
    if spec.done {
        events.push(("data: [DONE]\n\n".into(), false));
    }
    Reply::Stream(Stream {
        events,
        error: "data: {\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"code\":\"overloaded\"}}\n\n".into(),
        malformed: "data: {\"choices\": [broken\n\n".into(),
    })
}

/// The answer's message: `content` null when it only calls tools, as OpenAI sends it.
fn message(content: &str, tools: &[ToolCallSpec]) -> Value {
    if tools.is_empty() {
        return json!({"role": "assistant", "content": content});
    }
    let calls: Vec<Value> = tools.iter().map(|t| json!({"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}})).collect();
    json!({"role": "assistant", "content": if content.is_empty() { Value::Null } else { json!(content) }, "tool_calls": calls})
}

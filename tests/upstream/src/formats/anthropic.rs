//! Anthropic Messages (`POST /v1/messages`): `x-api-key`, `anthropic-version` and
//! `max_tokens` required; content blocks; `usage.input_tokens` excludes the cached tokens;
//! streams as named events (`message_start` ... `message_stop`, no `[DONE]`).

use serde_json::{json, Value};

use super::{header, sse, Call, Format, Op};
use crate::provider::{halves, parsed_arguments, Answer, Failure, Reply, Stream};

/// The text of a string content or of its text blocks (`None` when a block is not text).
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| (b.get("type").and_then(Value::as_str) == Some("text")).then(|| b.get("text").and_then(Value::as_str).unwrap_or("")))
            .collect::<Option<Vec<&str>>>()
            .map(|t| t.concat()),
        _ => None,
    }
}

/// Characters of text in a content: a string, or its text blocks.
fn chars_of(content: &Value) -> usize {
    match content {
        Value::String(s) => s.len(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).map(str::len).sum(),
        _ => 0,
    }
}

fn error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

pub(super) fn read(headers: &[(String, String)], request: &Value) -> Call {
    let model = request.get("model").and_then(Value::as_str).unwrap_or("").to_string();
    let mut call = Call::new(Format::Anthropic, Op::Chat, model);
    call.stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let messages = request.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    call.prefill = messages
        .last()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .and_then(|m| m.get("content").and_then(text_of));
    call.prompt_chars = request.get("system").map_or(0, chars_of)
        + messages.iter().filter_map(|m| m.get("content")).map(chars_of).sum::<usize>();
    call.reject = if header(headers, "x-api-key").is_none() {
        Some((401, error("authentication_error", "x-api-key header is required")))
    } else if header(headers, "anthropic-version").is_none() {
        Some((400, error("invalid_request_error", "anthropic-version: header is required")))
    } else if request.get("max_tokens").is_none_or(Value::is_null) {
        Some((400, error("invalid_request_error", "max_tokens: Field required")))
    } else {
        None
    };
    call
}

pub(super) fn failure(f: &Failure) -> Value {
    let kind = f.kind.clone().unwrap_or_else(|| {
        match f.status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            s if s >= 500 => "api_error",
            _ => "invalid_request_error",
        }
        .into()
    });
    error(&kind, &f.message)
}

fn stop_reason(finish: &str) -> &str {
    match finish {
        "stop" => "end_turn",
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        other => other,
    }
}

fn usage(input: u64, output: u64, cached: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output, "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0})
}

fn message(id: &str, model: &str, content: Vec<Value>, stop: Value, usage: Value) -> Value {
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": usage,
    })
}

/// The events before and after the content blocks of a stream.
fn stream(id: &str, model: &str, input: u64, cached: u64, blocks: Vec<(String, bool)>, stop: &str, output: u64) -> Reply {
    let start = message(id, model, Vec::new(), Value::Null, usage(input, 1, cached));
    let mut events = vec![
        (sse(Some("message_start"), &json!({"type": "message_start", "message": start})), false),
        (sse(Some("ping"), &json!({"type": "ping"})), false),
    ];
    events.extend(blocks);
    let delta = json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output}});
    events.push((sse(Some("message_delta"), &delta), false));
    events.push((sse(Some("message_stop"), &json!({"type": "message_stop"})), false));
    Reply::Stream(Stream {
        events,
        error: sse(Some("error"), &error("overloaded_error", "Overloaded")),
        malformed: "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"delta\": [broken\n\n".into(),
    })
}

pub(super) fn answer(a: &Answer, streamed: bool) -> Reply {
    let id = format!("msg_{}", a.name);
    let cached = a.cached_tokens.unwrap_or(0);
    let input = a.prompt_tokens.saturating_sub(cached);
    let stop = stop_reason(&a.finish);
    if !streamed {
        let mut content = Vec::new();
        if !a.content.is_empty() {
            content.push(json!({"type": "text", "text": a.content}));
        }
        for t in &a.tools {
            content.push(json!({"type": "tool_use", "id": t.id, "name": t.name, "input": parsed_arguments(&t.arguments)}));
        }
        let body = message(&id, &a.model, content, json!(stop), usage(input, a.completion_tokens, cached));
        return Reply::json(200, &body);
    }
    let mut blocks = Vec::new();
    let mut index = 0;
    let words = a.words();
    if !words.is_empty() {
        let start = json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}});
        blocks.push((sse(Some("content_block_start"), &start), false));
        for w in words {
            let delta = json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": w}});
            blocks.push((sse(Some("content_block_delta"), &delta), true));
        }
        blocks.push((sse(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index})), false));
        index += 1;
    }
    for t in &a.tools {
        let start = json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": t.id, "name": t.name, "input": {}}});
        blocks.push((sse(Some("content_block_start"), &start), false));
        for part in halves(&t.arguments) {
            let delta = json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}});
            blocks.push((sse(Some("content_block_delta"), &delta), true));
        }
        blocks.push((sse(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index})), false));
        index += 1;
    }
    stream(&id, &a.model, input, cached, blocks, stop, a.completion_tokens)
}

/// A refusal: `stop_reason: "refusal"` and no content.
pub(super) fn blocked(model: &str, prompt_tokens: u64, streamed: bool) -> Reply {
    let id = "msg_refusal";
    if streamed {
        return stream(id, model, prompt_tokens, 0, Vec::new(), "refusal", 0);
    }
    Reply::json(200, &message(id, model, Vec::new(), json!("refusal"), usage(prompt_tokens, 0, 0)))
}

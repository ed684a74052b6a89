//! Gemini (`POST /v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`): the model from the path, `x-goog-api-key` (or
//! `?key=`) required; `contents` of `parts`; streams `data:` events separated by
//! `\r\n\r\n`, one per word, one per whole function call, the last with `finishReason` and
//! `usageMetadata`, and no `[DONE]`.

use serde_json::{json, Value};

use super::{header, query_param, Call, Format, Op};
use crate::provider::{parsed_arguments, Answer, Failure, Reply, Stream};

/// Texts of a content's text parts (`None` when a part is not text).
fn text_of(content: &Value) -> Option<String> {
    let parts = content.get("parts").and_then(Value::as_array)?;
    parts.iter().map(|p| p.get("text").and_then(Value::as_str)).collect::<Option<Vec<&str>>>().map(|t| t.concat())
}

fn chars_of(content: &Value) -> usize {
    let parts = content.get("parts").and_then(Value::as_array);
    parts.into_iter().flatten().filter_map(|p| p.get("text").and_then(Value::as_str)).map(str::len).sum()
}

/// Refused without an API key (403), as Google does.
pub(super) fn auth_reject(query: &str, headers: &[(String, String)]) -> Option<(u16, Value)> {
    if header(headers, "x-goog-api-key").is_some() || query_param(query, "key").is_some_and(|k| !k.is_empty()) {
        return None;
    }
    let message = "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.";
    Some((403, json!({"error": {"code": 403, "message": message, "status": "PERMISSION_DENIED"}})))
}

pub(super) fn read(model: &str, stream: bool, query: &str, headers: &[(String, String)], request: &Value) -> Call {
    let mut call = Call::new(Format::Gemini, Op::Chat, model.to_string());
    call.stream = stream;
    let contents = request.get("contents").and_then(Value::as_array).cloned().unwrap_or_default();
    call.prefill = contents.last().filter(|c| c.get("role").and_then(Value::as_str) == Some("model")).and_then(text_of);
    call.prompt_chars = request.get("systemInstruction").map_or(0, chars_of) + contents.iter().map(chars_of).sum::<usize>();
    call.reject = auth_reject(query, headers);
    call
}

/// Google's error status for an HTTP status.
fn status_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        500 => "INTERNAL",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        s if s >= 500 => "INTERNAL",
        _ => "FAILED_PRECONDITION",
    }
}

pub(super) fn failure(f: &Failure) -> Value {
    let status = f.kind.clone().unwrap_or_else(|| status_name(f.status).into());
    json!({"error": {"code": f.status, "message": f.message, "status": status}})
}

fn finish_reason(finish: &str) -> String {
    match finish {
        "stop" | "tool_calls" => "STOP".into(),
        "length" => "MAX_TOKENS".into(),
        "content_filter" => "SAFETY".into(),
        other => other.to_ascii_uppercase(),
    }
}

fn usage(a: &Answer) -> Value {
    let mut u = json!({
        "promptTokenCount": a.prompt_tokens,
        "candidatesTokenCount": a.completion_tokens,
        "totalTokenCount": a.prompt_tokens.saturating_add(a.completion_tokens),
    });
    if let Some(c) = a.cached_tokens {
        u["cachedContentTokenCount"] = json!(c);
    }
    if let Some(r) = a.reasoning_tokens {
        u["thoughtsTokenCount"] = json!(r);
    }
    u
}

fn event(data: &Value) -> String {
    format!("data: {data}\r\n\r\n")
}

fn stream(events: Vec<(String, bool)>) -> Reply {
    Reply::Stream(Stream {
        events,
        error: event(&json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})),
        malformed: "data: {\"candidates\": [broken\r\n\r\n".into(),
    })
}

pub(super) fn answer(a: &Answer, streamed: bool) -> Reply {
    let finish = finish_reason(&a.finish);
    let calls: Vec<Value> = a.tools.iter().map(|t| json!({"functionCall": {"name": t.name, "args": parsed_arguments(&t.arguments)}})).collect();
    let response = |parts: Vec<Value>, finish: Option<&str>, usage: Option<Value>| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        let mut r = json!({"candidates": [candidate], "modelVersion": a.model});
        if let Some(u) = usage {
            r["usageMetadata"] = u;
        }
        r
    };
    if !streamed {
        let mut parts = Vec::new();
        if !a.content.is_empty() {
            parts.push(json!({"text": a.content}));
        }
        parts.extend(calls);
        return Reply::json(200, &response(parts, Some(&finish), Some(usage(a))));
    }
    let mut events: Vec<(String, bool)> = a.words().into_iter().map(|w| (event(&response(vec![json!({"text": w})], None, None)), true)).collect();
    events.extend(calls.into_iter().map(|c| (event(&response(vec![c], None, None)), true)));
    events.push((event(&response(vec![json!({"text": ""})], Some(&finish), Some(usage(a)))), false));
    stream(events)
}

/// A prompt blocked for safety: 200, `finishReason: "SAFETY"`, no content.
pub(super) fn blocked(model: &str, prompt_tokens: u64, streamed: bool) -> Reply {
    let body = json!({
        "candidates": [{
            "finishReason": "SAFETY",
            "index": 0,
            "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}],
        }],
        "usageMetadata": {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens},
        "modelVersion": model,
    });
    if streamed {
        return stream(vec![(event(&body), false)]);
    }
    Reply::json(200, &body)
}

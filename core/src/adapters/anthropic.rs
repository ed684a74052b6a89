//! The `anthropic` adapter: Anthropic's Messages API (`POST /v1/messages`).
//!
//! Requests: system messages become `system`; content parts become blocks (text, image
//! from a URL or base64, `tool_use` from an assistant's tool calls, `tool_result` from a
//! `tool` message); consecutive turns of one role are joined, as the API requires;
//! `max_tokens` is always sent (the request's, else the provider's `max_tokens`, else the
//! route's, else 4096); tools and `tool_choice` are translated; `response_format` is
//! asked for as one forced tool whose input is the answer (the API has no JSON mode),
//! read back as the content. `anthropic-version` is sent unless the service sets it.
//! OpenAI parameters with no counterpart (`seed`, `n`, penalties, ...) are dropped; any
//! other key passes through (e.g. `top_k`, `thinking`).
//!
//! Answers and streams: text and tool_use blocks, stop reasons onto the common set,
//! usage with cache reads (input tokens here exclude cached ones, so the prompt is their
//! sum), `error` events mid-stream, `ping`s skipped, unknown events ignored.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::usage::Usage;
use super::wire::{self, AnswerFault, ChatAdapter, EventFault, EventRead, EventReader, Parsed, RouteDefaults, Shaped, ToolCall, ToolCallDelta};
use crate::routing::config::ProviderConfig;

pub struct Anthropic;

/// The version header sent unless the provider's `api_version` or the service sets one.
const VERSION: &str = "2023-06-01";
/// `max_tokens` when neither the request, the provider nor the route gives one.
const DEFAULT_MAX_TOKENS: u64 = 4096;
/// The forced tool that carries a `response_format` answer.
pub(crate) const STRUCTURED_TOOL: &str = "harness_structured_output";

/// OpenAI parameters the Messages API has no counterpart for.
const DROPPED: [&str; 11] =
    ["seed", "n", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "stream_options", "parallel_tool_calls", "max_completion_tokens", "user"];

impl ChatAdapter for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn shape(&self, body: &Value, p: &ProviderConfig, route: &RouteDefaults, stream: bool) -> Result<Shaped, String> {
        let prepared = super::openai::prepare(body, p, false);
        let src = prepared.as_object().expect("a chat body is an object");
        let mut out = Map::new();
        out.insert("model".into(), src.get("model").cloned().unwrap_or(Value::Null));
        let (system, messages) = messages(src.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default())?;
        if !system.is_empty() {
            out.insert("system".into(), Value::String(system));
        }
        out.insert("messages".into(), Value::Array(messages));
        let max = wire::max_tokens(&prepared).or(p.max_tokens.map(u64::from)).or(route.max_tokens.map(u64::from)).unwrap_or(DEFAULT_MAX_TOKENS);
        out.insert("max_tokens".into(), json!(max));
        if let Some(t) = src.get("temperature").and_then(Value::as_f64) {
            // 0..1 here (OpenAI's is 0..2), unless the provider's own range says otherwise.
            let t = if p.params.temperature.is_some() { t } else { t.clamp(0.0, 1.0) };
            out.insert("temperature".into(), json!(t));
        }
        if let Some(stops) = wire::stops(&prepared) {
            out.insert("stop_sequences".into(), Value::Array(stops));
        }
        if let Some(user) = src.get("user").and_then(Value::as_str) {
            out.insert("metadata".into(), json!({"user_id": user}));
        }
        let mut tools: Vec<Value> = Vec::new();
        for (i, t) in src.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
            let f = t.get("function").ok_or_else(|| format!("tools[{i}]: only function tools can be sent to anthropic"))?;
            let name = f.get("name").and_then(Value::as_str).ok_or_else(|| format!("tools[{i}].function.name: required"))?;
            let mut tool = json!({"name": name, "input_schema": f.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object"}))});
            if let Some(d) = f.get("description") {
                tool["description"] = d.clone();
            }
            tools.push(tool);
        }
        let mut choice = match src.get("tool_choice") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(match s.as_str() {
                "auto" => json!({"type": "auto"}),
                "required" => json!({"type": "any"}),
                "none" => json!({"type": "none"}),
                other => return Err(format!("tool_choice: unknown choice {other:?}")),
            }),
            Some(v) => {
                let name = v.get("function").and_then(|f| f.get("name")).and_then(Value::as_str).ok_or("tool_choice: expected auto, required, none or {\"type\": \"function\", \"function\": {\"name\": ...}}")?;
                Some(json!({"type": "tool", "name": name}))
            }
        };
        if src.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
            let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
            c["disable_parallel_tool_use"] = Value::Bool(true);
        }
        if let Some(schema) = structured_schema(src.get("response_format"))? {
            tools.push(json!({"name": STRUCTURED_TOOL, "description": "Give the answer as this tool's input.", "input_schema": schema}));
            choice = Some(json!({"type": "tool", "name": STRUCTURED_TOOL}));
        }
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
        if let Some(c) = choice {
            out.insert("tool_choice".into(), c);
        }
        for (k, v) in src {
            let handled = ["model", "messages", "max_tokens", "temperature", "stop", "tools", "tool_choice", "response_format", "stream"].contains(&k.as_str());
            if !handled && !DROPPED.contains(&k.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
        if stream {
            out.insert("stream".into(), Value::Bool(true));
        }
        let mut body = Value::Object(out);
        if let Some(extra) = &p.extra_body {
            wire::extra(&mut body, extra);
        }
        let version = p.api_version.clone().unwrap_or_else(|| VERSION.to_string());
        Ok(Shaped { body, path: Some("/v1/messages".into()), headers: vec![("anthropic-version".into(), version)] })
    }

    fn parse(&self, body: &[u8]) -> Result<Parsed, AnswerFault> {
        // Read into typed fields (no JSON tree): a tool's input stays the provider's own text.
        let m: MessageIn = serde_json::from_slice(body).map_err(|e| AnswerFault::Malformed(format!("the answer is not a message: {e}")))?;
        if m.kind.as_deref() != Some("message") {
            return Err(AnswerFault::Malformed("the answer is not a message (no `\"type\": \"message\"`)".into()));
        }
        let blocks = m.content.ok_or_else(|| AnswerFault::Malformed("the answer has no content list".into()))?;
        let mut p = Parsed { model: m.model, ..Default::default() };
        for (i, b) in blocks.into_iter().enumerate() {
            match b.kind.as_ref() {
                "text" => p.content.push_str(b.text.as_deref().unwrap_or("")),
                "tool_use" => {
                    let name = b.name.ok_or_else(|| AnswerFault::Malformed(format!("content[{i}]: a tool_use block has no name")))?;
                    let input = b.input.map_or("{}", |r| r.get()).to_string();
                    if name == STRUCTURED_TOOL {
                        p.content = input;
                        continue;
                    }
                    p.tool_calls.push(ToolCall { id: b.id.unwrap_or_default(), name, arguments: input });
                }
                // Thinking, redacted thinking and any newer block: not part of the answer's text.
                _ => {}
            }
        }
        let reason = m.stop_reason.as_deref();
        p.finish_reason = reason.map(finish_reason);
        if p.finish_reason.as_deref() == Some("tool_calls") && p.tool_calls.is_empty() {
            // Only the structured-output tool was called: a plain answer.
            p.finish_reason = Some("stop".into());
        }
        p.usage = usage(m.usage.as_ref(), None).map_err(AnswerFault::Malformed)?;
        if reason == Some("refusal") && p.content.is_empty() && p.tool_calls.is_empty() {
            return Err(AnswerFault::Refused { code: "content_filter".into(), message: "the model refused to answer (stop_reason refusal)".into() });
        }
        Ok(p)
    }

    fn stream(&self) -> Box<dyn EventReader> {
        Box::new(Events::default())
    }

    fn error_code(&self, status: u16, body: &[u8]) -> Option<String> {
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let err = v.get("error");
        let kind = err.and_then(|e| e.get("type")).and_then(Value::as_str);
        let message = err.and_then(|e| e.get("message")).and_then(Value::as_str).unwrap_or("");
        wire::common_code(status, kind, message).map(str::to_string)
    }
}

/// A Messages answer, as far as it is read.
#[derive(Deserialize)]
struct MessageIn<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, borrow)]
    content: Option<Vec<BlockIn<'a>>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct BlockIn<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
}

/// A `response_format` as the schema of the forced tool: `json_schema`'s schema, or any object.
fn structured_schema(format: Option<&Value>) -> Result<Option<Value>, String> {
    let Some(f) = format.filter(|f| !f.is_null()) else { return Ok(None) };
    match f.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("json_schema") => {
            let schema = f.get("json_schema").and_then(|s| s.get("schema")).ok_or("response_format.json_schema.schema: required")?;
            Ok(Some(schema.clone()))
        }
        other => Err(format!("response_format.type: expected text, json_object or json_schema, got {other:?}")),
    }
}

/// OpenAI messages as Anthropic's `system` and turns.
fn messages(list: &[Value]) -> Result<(String, Vec<Value>), String> {
    let mut system: Vec<String> = Vec::new();
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let (role, blocks) = match role {
            "system" | "developer" => {
                system.push(wire::text_of(m.get("content")));
                continue;
            }
            "user" => ("user", blocks(m.get("content"), i)?),
            "assistant" => {
                let mut b = blocks(m.get("content"), i)?;
                for (j, t) in m.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
                    let f = t.get("function").ok_or_else(|| format!("messages[{i}].tool_calls[{j}].function: required"))?;
                    b.push(json!({
                        "type": "tool_use",
                        "id": t.get("id").and_then(Value::as_str).unwrap_or_default(),
                        "name": f.get("name").and_then(Value::as_str).ok_or_else(|| format!("messages[{i}].tool_calls[{j}].function.name: required"))?,
                        "input": wire::arguments_value(f.get("arguments").and_then(Value::as_str).unwrap_or("")),
                    }));
                }
                ("assistant", b)
            }
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str).ok_or_else(|| format!("messages[{i}].tool_call_id: required for a tool message"))?;
                ("user", vec![json!({"type": "tool_result", "tool_use_id": id, "content": wire::text_of(m.get("content"))})])
            }
            other => return Err(format!("messages[{i}].role: anthropic takes system, user, assistant and tool, got {other:?}")),
        };
        match turns.last_mut() {
            Some((last, b)) if last == role => b.extend(blocks),
            _ => turns.push((role.to_string(), blocks)),
        }
    }
    let out = turns
        .into_iter()
        .map(|(role, blocks)| {
            // One text block is sent as a plain string (how a prefill is usually written).
            let content = match blocks.as_slice() {
                [b] if b.get("type").and_then(Value::as_str) == Some("text") => b["text"].clone(),
                _ => Value::Array(blocks),
            };
            json!({"role": role, "content": content})
        })
        .collect();
    Ok((system.join("\n\n"), out))
}

/// A message's content as blocks (text and images).
fn blocks(content: Option<&Value>, i: usize) -> Result<Vec<Value>, String> {
    match content {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) if s.is_empty() => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![json!({"type": "text", "text": s})]),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, part)| match part.get("type").and_then(Value::as_str) {
                Some("text") => Ok(json!({"type": "text", "text": part.get("text").and_then(Value::as_str).unwrap_or("")})),
                Some("image_url") => {
                    let source = match wire::image_source(part).map_err(|e| format!("messages[{i}].content[{j}]: {e}"))? {
                        (Some(media), data) => json!({"type": "base64", "media_type": media, "data": data}),
                        (None, url) => json!({"type": "url", "url": url}),
                    };
                    Ok(json!({"type": "image", "source": source}))
                }
                other => Err(format!("messages[{i}].content[{j}].type: anthropic takes text and image_url parts, got {other:?}")),
            })
            .collect(),
        Some(_) => Err(format!("messages[{i}].content: expected a string or a list of parts")),
    }
}

fn finish_reason(r: &str) -> String {
    match r {
        "end_turn" | "stop_sequence" | "pause_turn" => "stop",
        "max_tokens" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        other => other,
    }
    .to_string()
}

/// Anthropic's usage: the prompt is the input plus cache reads and writes.
fn usage(v: Option<&Value>, output: Option<u64>) -> Result<Option<Usage>, String> {
    let Some(o) = v.and_then(Value::as_object) else { return Ok(None) };
    let n = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
    let read = n("cache_read_input_tokens");
    let prompt = n("input_tokens").saturating_add(read).saturating_add(n("cache_creation_input_tokens"));
    let completion = output.unwrap_or_else(|| n("output_tokens"));
    Usage::checked(prompt, completion, None, read, 0).map(Some)
}

/// One streamed answer: which block is which tool call, and the usage so far.
#[derive(Default)]
struct Events {
    /// Block index -> tool-call index (`None`: the structured-output tool, read as content).
    tools: HashMap<u64, Option<u32>>,
    next_tool: u32,
    /// `message_start`'s usage (input and cache counts), completed by `message_delta`.
    start_usage: Option<Value>,
}

impl EventReader for Events {
    fn read(&mut self, event: &str, data: &str) -> Result<EventRead, EventFault> {
        if data.trim().is_empty() {
            return Ok(EventRead::Skip);
        }
        let v: Value = serde_json::from_str(data).map_err(|e| EventFault::Malformed(format!("malformed {event} event: {e}")))?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(event);
        let mut p = Parsed::default();
        match kind {
            "message_start" => {
                let m = v.get("message");
                p.model = m.and_then(|m| m.get("model")).and_then(Value::as_str).map(str::to_string);
                self.start_usage = m.and_then(|m| m.get("usage")).cloned();
                p.usage = usage(self.start_usage.as_ref(), None).map_err(EventFault::Malformed)?;
            }
            "content_block_start" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let block = v.get("content_block");
                match block.and_then(|b| b.get("type")).and_then(Value::as_str) {
                    Some("text") => p.content = block.and_then(|b| b.get("text")).and_then(Value::as_str).unwrap_or("").to_string(),
                    Some("tool_use") => {
                        let name = block.and_then(|b| b.get("name")).and_then(Value::as_str).unwrap_or_default();
                        if name == STRUCTURED_TOOL {
                            self.tools.insert(index, None);
                        } else {
                            let at = self.next_tool;
                            self.next_tool += 1;
                            self.tools.insert(index, Some(at));
                            p.tool_deltas.push(ToolCallDelta {
                                index: at,
                                id: block.and_then(|b| b.get("id")).and_then(Value::as_str).map(str::to_string),
                                name: Some(name.to_string()),
                                arguments: String::new(),
                            });
                        }
                    }
                    _ => return Ok(EventRead::Skip),
                }
            }
            "content_block_delta" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let d = v.get("delta");
                match d.and_then(|d| d.get("type")).and_then(Value::as_str) {
                    Some("text_delta") => p.content = d.and_then(|d| d.get("text")).and_then(Value::as_str).unwrap_or("").to_string(),
                    Some("input_json_delta") => {
                        let part = d.and_then(|d| d.get("partial_json")).and_then(Value::as_str).unwrap_or("").to_string();
                        match self.tools.get(&index) {
                            Some(None) => p.content = part,
                            Some(Some(at)) => p.tool_deltas.push(ToolCallDelta { index: *at, id: None, name: None, arguments: part }),
                            None => return Err(EventFault::Malformed(format!("input_json_delta for block {index}, which is not a tool_use block"))),
                        }
                    }
                    _ => return Ok(EventRead::Skip),
                }
            }
            "message_delta" => {
                let reason = v.get("delta").and_then(|d| d.get("stop_reason")).and_then(Value::as_str);
                let structured_only = self.next_tool == 0 && self.tools.values().any(Option::is_none);
                p.finish_reason = reason.map(|r| if r == "tool_use" && structured_only { "stop".to_string() } else { finish_reason(r) });
                let output = v.get("usage").and_then(|u| u.get("output_tokens")).and_then(Value::as_u64);
                let base = self.start_usage.clone().unwrap_or_else(|| v.get("usage").cloned().unwrap_or_else(|| json!({})));
                p.usage = usage(Some(&base), output).map_err(EventFault::Malformed)?;
            }
            "message_stop" => return Ok(EventRead::Done(p)),
            "error" => {
                let err = v.get("error");
                let t = err.and_then(|e| e.get("type")).and_then(Value::as_str);
                let message = err.and_then(|e| e.get("message")).and_then(Value::as_str).unwrap_or("error event").to_string();
                let code = wire::common_code(0, t, &message).map(str::to_string).or(t.map(str::to_string));
                return Err(EventFault::Failed { code, message });
            }
            // `ping`, `content_block_stop`, and event types added later.
            _ => return Ok(EventRead::Skip),
        }
        Ok(EventRead::Piece(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> ProviderConfig {
        ProviderConfig { id: "a".into(), service: "s".into(), model: Some("claude-x".into()), weight: 1, ..Default::default() }
    }

    #[test]
    fn requests_take_the_system_out_join_turns_and_translate_tools() {
        let body = json!({
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "look", "arguments": "{\"x\":1}"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "a cat"},
                {"role": "user", "content": "so?"},
            ],
            "tools": [{"type": "function", "function": {"name": "look", "description": "d", "parameters": {"type": "object"}}}],
            "tool_choice": "required", "temperature": 1.6, "stop": "END", "seed": 3, "top_k": 5,
        });
        let s = Anthropic.shape(&body, &provider(), &RouteDefaults { path: "/v1/chat/completions", max_tokens: Some(300) }, true).unwrap();
        assert_eq!(s.path.as_deref(), Some("/v1/messages"));
        assert_eq!(s.headers, [("anthropic-version".to_string(), VERSION.to_string())]);
        let b = s.body;
        assert_eq!(b["system"], "Be brief.");
        assert_eq!(b["model"], "claude-x");
        assert_eq!(b["max_tokens"], 300);
        assert_eq!(b["temperature"], 1.0);
        assert_eq!(b["stop_sequences"], json!(["END"]));
        assert_eq!(b["top_k"], 5);
        assert!(b.get("seed").is_none());
        assert_eq!(b["stream"], true);
        assert_eq!(b["tool_choice"], json!({"type": "any"}));
        assert_eq!(b["tools"][0], json!({"name": "look", "description": "d", "input_schema": {"type": "object"}}));
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m[0]["content"][1], json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}));
        assert_eq!(m[1]["content"][0], json!({"type": "tool_use", "id": "t1", "name": "look", "input": {"x": 1}}));
        // The tool result and the next user text are one user turn.
        assert_eq!(m[2]["content"][0], json!({"type": "tool_result", "tool_use_id": "t1", "content": "a cat"}));
        assert_eq!(m[2]["content"][1], json!({"type": "text", "text": "so?"}));
        assert_eq!(m.len(), 3);
        // The caller's body is untouched.
        assert_eq!(body["temperature"], 1.6);
    }

    #[test]
    fn max_tokens_comes_from_the_request_then_the_provider_then_the_route() {
        let body = json!({"messages": [{"role": "user", "content": "hi"}]});
        let route = RouteDefaults { path: "/", max_tokens: Some(300) };
        let mut p = provider();
        assert_eq!(Anthropic.shape(&body, &p, &RouteDefaults::default(), false).unwrap().body["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(Anthropic.shape(&body, &p, &route, false).unwrap().body["max_tokens"], 300);
        p.max_tokens = Some(50);
        assert_eq!(Anthropic.shape(&body, &p, &route, false).unwrap().body["max_tokens"], 50);
        let with = json!({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 7});
        assert_eq!(Anthropic.shape(&with, &p, &route, false).unwrap().body["max_tokens"], 7);
        let bad = json!({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]});
        assert!(Anthropic.shape(&bad, &p, &route, false).unwrap_err().contains("messages[0].content[0].type"));
    }

    #[test]
    fn answers_read_text_tools_usage_and_refusals() {
        let p = Anthropic
            .parse(br#"{"type":"message","model":"claude-x","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t1","name":"look","input":{"x":1}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":90}}"#)
            .unwrap();
        assert_eq!(p.content, "Let me look.");
        assert_eq!(p.tool_calls, [ToolCall { id: "t1".into(), name: "look".into(), arguments: r#"{"x":1}"#.into() }]);
        assert_eq!(p.finish_reason.as_deref(), Some("tool_calls"));
        let u = p.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.cached_tokens, u.completion_tokens, u.total_tokens), (100, 90, 5, 105));
        let refused = Anthropic.parse(br#"{"type":"message","content":[],"stop_reason":"refusal","usage":{"input_tokens":1,"output_tokens":0}}"#);
        assert!(matches!(refused, Err(AnswerFault::Refused { ref code, .. }) if code == "content_filter"));
        assert!(matches!(Anthropic.parse(br#"{"type":"error","error":{"type":"overloaded_error"}}"#), Err(AnswerFault::Malformed(_))));
        let structured = Anthropic
            .parse(br#"{"type":"message","content":[{"type":"tool_use","id":"t","name":"harness_structured_output","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}"#)
            .unwrap();
        assert_eq!((structured.content.as_str(), structured.finish_reason.as_deref(), structured.tool_calls.len()), (r#"{"a":1}"#, Some("stop"), 0));
    }

    #[test]
    fn streams_read_every_event_kind() {
        let mut r = Anthropic.stream();
        let mut content = String::new();
        let mut calls = Vec::new();
        let mut last = Parsed::default();
        let mut done = false;
        for (event, data) in [
            ("message_start", r#"{"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5}}}"#),
            ("ping", r#"{"type":"ping"}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"look","input":{}}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\":"}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}"#),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}"#),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ] {
            match r.read(event, data).unwrap() {
                EventRead::Piece(p) => {
                    content.push_str(&p.content);
                    for d in &p.tool_deltas {
                        super::super::wire::assemble(&mut calls, d);
                    }
                    if p.finish_reason.is_some() {
                        last = p;
                    }
                }
                EventRead::Done(_) => done = true,
                EventRead::Skip => {}
            }
        }
        assert!(done);
        assert_eq!(content, "Hi");
        assert_eq!(calls, [ToolCall { id: "t1".into(), name: "look".into(), arguments: r#"{"x":1}"#.into() }]);
        assert_eq!(last.finish_reason.as_deref(), Some("tool_calls"));
        let u = last.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.cached_tokens, u.completion_tokens), (15, 5, 7));
        let e = r.read("error", r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#).unwrap_err();
        assert_eq!(e, EventFault::Failed { code: Some("overloaded".into()), message: "Overloaded".into() });
        assert!(matches!(r.read("content_block_delta", "{broken"), Err(EventFault::Malformed(_))));
    }

    #[test]
    fn errors_map_onto_common_codes() {
        let code = |s, b: &str| Anthropic.error_code(s, b.as_bytes());
        assert_eq!(code(529, r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#).as_deref(), Some("overloaded"));
        assert_eq!(code(400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}"#).as_deref(), Some("context_length_exceeded"));
        assert_eq!(code(429, r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#).as_deref(), Some("rate_limited"));
        assert_eq!(code(401, "not json").as_deref(), Some("auth"));
    }
}

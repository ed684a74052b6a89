//! The `gemini` adapter: Google's Gemini API (`models/{model}:generateContent`, and
//! `:streamGenerateContent?alt=sse` for streams; the version segment is the provider's
//! `api_version`, default `v1beta`).
//!
//! Requests: `contents` of `parts` with the `user` and `model` roles; system messages
//! become `systemInstruction`; images become `inlineData` (base64) or `fileData` (a URL);
//! an assistant's tool calls become `functionCall` parts and a `tool` message a
//! `functionResponse` named after the call it answers; tools become
//! `functionDeclarations` and `tool_choice` the `functionCallingConfig`; sampling
//! parameters and `response_format` go into `generationConfig` (`responseMimeType`,
//! `responseJsonSchema`). OpenAI parameters with no counterpart are dropped; any other key
//! passes through (e.g. `safetySettings`).
//!
//! Answers and streams: text parts (thoughts skipped), whole `functionCall` parts as tool
//! calls, `usageMetadata` (thoughts as reasoning tokens, cached content as cached tokens);
//! a prompt or an answer blocked for safety is a `content_filter` error, never an empty
//! success. A stream has no end marker: it ends when the body does.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::usage::Usage;
use super::wire::{self, AnswerFault, ChatAdapter, EventFault, EventRead, EventReader, Parsed, RouteDefaults, Shaped, ToolCall, ToolCallDelta};
use crate::routing::config::ProviderConfig;

pub struct Gemini;

/// OpenAI parameters that become part of `generationConfig`, or have no counterpart.
const HANDLED: [&str; 20] = [
    "model",
    "messages",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "n",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
    "tools",
    "tool_choice",
    "stream",
    "stream_options",
    "logit_bias",
    "user",
    "parallel_tool_calls",
    "logprobs",
];

/// Finish reasons that mean the answer was blocked.
const BLOCKED: [&str; 6] = ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"];

impl ChatAdapter for Gemini {
    fn name(&self) -> &str {
        "gemini"
    }

    fn shape(&self, body: &Value, p: &ProviderConfig, _route: &RouteDefaults, stream: bool) -> Result<Shaped, String> {
        let prepared = super::openai::prepare(body, p, false);
        let src = prepared.as_object().expect("a chat body is an object");
        let model = p.model.clone().unwrap_or_default();
        let mut out = Map::new();
        let (system, contents) = contents(src.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default())?;
        out.insert("contents".into(), Value::Array(contents));
        if !system.is_empty() {
            out.insert("systemInstruction".into(), json!({"parts": [{"text": system}]}));
        }
        let mut config = Map::new();
        for (from, to) in [("temperature", "temperature"), ("top_p", "topP"), ("seed", "seed"), ("n", "candidateCount"), ("presence_penalty", "presencePenalty"), ("frequency_penalty", "frequencyPenalty")] {
            if let Some(v) = src.get(from).filter(|v| !v.is_null()) {
                config.insert(to.into(), v.clone());
            }
        }
        if let Some(max) = wire::max_tokens(&prepared) {
            config.insert("maxOutputTokens".into(), json!(max));
        }
        if let Some(stops) = wire::stops(&prepared) {
            config.insert("stopSequences".into(), Value::Array(stops));
        }
        if let Some(f) = src.get("response_format").filter(|f| !f.is_null()) {
            match f.get("type").and_then(Value::as_str) {
                Some("text") => {}
                Some("json_object") => {
                    config.insert("responseMimeType".into(), json!("application/json"));
                }
                Some("json_schema") => {
                    let schema = f.get("json_schema").and_then(|s| s.get("schema")).ok_or("response_format.json_schema.schema: required")?;
                    config.insert("responseMimeType".into(), json!("application/json"));
                    config.insert("responseJsonSchema".into(), schema.clone());
                }
                other => return Err(format!("response_format.type: expected text, json_object or json_schema, got {other:?}")),
            }
        }
        if !config.is_empty() {
            out.insert("generationConfig".into(), Value::Object(config));
        }
        let mut declarations = Vec::new();
        for (i, t) in src.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
            let f = t.get("function").ok_or_else(|| format!("tools[{i}]: only function tools can be sent to gemini"))?;
            let name = f.get("name").and_then(Value::as_str).ok_or_else(|| format!("tools[{i}].function.name: required"))?;
            let mut d = json!({"name": name});
            for k in ["description", "parameters"] {
                if let Some(v) = f.get(k) {
                    d[k] = v.clone();
                }
            }
            declarations.push(d);
        }
        if !declarations.is_empty() {
            out.insert("tools".into(), json!([{"functionDeclarations": declarations}]));
        }
        let calling = match src.get("tool_choice") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(match s.as_str() {
                "auto" => json!({"mode": "AUTO"}),
                "required" => json!({"mode": "ANY"}),
                "none" => json!({"mode": "NONE"}),
                other => return Err(format!("tool_choice: unknown choice {other:?}")),
            }),
            Some(v) => {
                let name = v.get("function").and_then(|f| f.get("name")).and_then(Value::as_str).ok_or("tool_choice: expected auto, required, none or {\"type\": \"function\", \"function\": {\"name\": ...}}")?;
                Some(json!({"mode": "ANY", "allowedFunctionNames": [name]}))
            }
        };
        if let Some(c) = calling {
            out.insert("toolConfig".into(), json!({"functionCallingConfig": c}));
        }
        for (k, v) in src {
            if !HANDLED.contains(&k.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
        let mut body = Value::Object(out);
        if let Some(extra) = &p.extra_body {
            wire::extra(&mut body, extra);
        }
        let version = p.api_version.as_deref().unwrap_or("v1beta");
        let path = if stream { format!("/{version}/models/{model}:streamGenerateContent?alt=sse") } else { format!("/{version}/models/{model}:generateContent") };
        Ok(Shaped { body, path: Some(path), headers: Vec::new() })
    }

    fn parse(&self, body: &[u8]) -> Result<Parsed, AnswerFault> {
        let v: Value = serde_json::from_slice(body).map_err(|e| AnswerFault::Malformed(format!("the answer is not JSON: {e}")))?;
        let mut calls = 0;
        let p = response(&v, &mut calls).map_err(AnswerFault::Malformed)?;
        if let Some(why) = blocked(&v, &p) {
            return Err(AnswerFault::Refused { code: "content_filter".into(), message: why });
        }
        if v.get("candidates").and_then(Value::as_array).is_none_or(|c| c.is_empty()) {
            return Err(AnswerFault::Malformed("the answer has no candidates".into()));
        }
        let mut p = p;
        p.tool_calls = p.tool_deltas.drain(..).map(|d| ToolCall { id: d.id.unwrap_or_default(), name: d.name.unwrap_or_default(), arguments: d.arguments }).collect();
        Ok(p)
    }

    fn stream(&self) -> Box<dyn EventReader> {
        Box::new(Events::default())
    }

    fn error_code(&self, status: u16, body: &[u8]) -> Option<String> {
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let err = v.get("error");
        let kind = err.and_then(|e| e.get("status")).and_then(Value::as_str);
        let message = err.and_then(|e| e.get("message")).and_then(Value::as_str).unwrap_or("");
        wire::common_code(status, kind, message).map(str::to_string)
    }

    fn embeds(&self) -> bool {
        true
    }

    /// `batchEmbedContents` takes at most 100 requests.
    fn max_batch(&self) -> u32 {
        100
    }

    fn shape_embed(&self, body: &Value, p: &ProviderConfig, _route: &RouteDefaults) -> Result<Shaped, String> {
        let model = p.model.clone().unwrap_or_default();
        let dims = body.get("dimensions").filter(|d| !d.is_null());
        let requests: Vec<Value> = body
            .get("input")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|text| {
                let mut r = json!({"model": format!("models/{model}"), "content": {"parts": [{"text": text}]}});
                if let Some(d) = dims {
                    r["outputDimensionality"] = d.clone();
                }
                r
            })
            .collect();
        let mut out = json!({"requests": requests});
        if let Some(extra) = &p.extra_body {
            wire::extra(&mut out, extra);
        }
        let version = p.api_version.as_deref().unwrap_or("v1beta");
        Ok(Shaped { body: out, path: Some(format!("/{version}/models/{model}:batchEmbedContents")), headers: Vec::new() })
    }

    fn parse_embed(&self, body: &[u8], inputs: usize) -> Result<super::embeddings::Embedded, String> {
        super::embeddings::parse_gemini(body, Some(inputs))
    }
}

/// Why a response was blocked, if it was: the prompt, or an answer stopped for safety with nothing in it.
fn blocked(v: &Value, p: &Parsed) -> Option<String> {
    if let Some(reason) = v.get("promptFeedback").and_then(|f| f.get("blockReason")).and_then(Value::as_str) {
        return Some(format!("the prompt was blocked ({reason})"));
    }
    let reason = v.get("candidates").and_then(|c| c.get(0)).and_then(|c| c.get("finishReason")).and_then(Value::as_str)?;
    (BLOCKED.contains(&reason) && p.content.is_empty() && p.tool_deltas.is_empty()).then(|| format!("the answer was blocked (finishReason {reason})"))
}

/// One `GenerateContentResponse` (a whole answer or a streamed event); `calls` numbers tool calls across events.
fn response(v: &Value, calls: &mut u32) -> Result<Parsed, String> {
    if !v.is_object() {
        return Err("not a JSON object".into());
    }
    let mut p = Parsed { model: v.get("modelVersion").and_then(Value::as_str).map(str::to_string), ..Default::default() };
    let candidate = v.get("candidates").and_then(|c| c.get(0));
    let parts = candidate.and_then(|c| c.get("content")).and_then(|c| c.get("parts")).and_then(Value::as_array);
    for part in parts.map(Vec::as_slice).unwrap_or_default() {
        if let Some(f) = part.get("functionCall") {
            let name = f.get("name").and_then(Value::as_str).ok_or("a functionCall part has no name")?;
            let id = f.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{calls}"), str::to_string);
            p.tool_deltas.push(ToolCallDelta { index: *calls, id: Some(id), name: Some(name.to_string()), arguments: f.get("args").cloned().unwrap_or_else(|| json!({})).to_string() });
            *calls += 1;
        } else if part.get("thought").and_then(Value::as_bool) != Some(true) {
            if let Some(t) = part.get("text").and_then(Value::as_str) {
                p.content.push_str(t);
            }
        }
    }
    if let Some(reason) = candidate.and_then(|c| c.get("finishReason")).and_then(Value::as_str) {
        p.finish_reason = Some(match reason {
            "STOP" if *calls > 0 => "tool_calls".into(),
            "STOP" => "stop".into(),
            "MAX_TOKENS" => "length".into(),
            r if BLOCKED.contains(&r) => "content_filter".into(),
            other => other.to_ascii_lowercase(),
        });
    }
    if let Some(u) = v.get("usageMetadata").and_then(Value::as_object) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let thoughts = n("thoughtsTokenCount");
        let completion = n("candidatesTokenCount").saturating_add(thoughts);
        let total = u.get("totalTokenCount").and_then(Value::as_u64);
        p.usage = Some(Usage::checked(n("promptTokenCount"), completion, total, n("cachedContentTokenCount"), thoughts)?);
    }
    Ok(p)
}

/// OpenAI messages as Gemini's `systemInstruction` text and `contents`.
fn contents(list: &[Value]) -> Result<(String, Vec<Value>), String> {
    let mut system: Vec<String> = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    // A functionResponse is named after the function it answers.
    let mut names: HashMap<String, String> = HashMap::new();
    for (i, m) in list.iter().enumerate() {
        let (role, parts) = match m.get("role").and_then(Value::as_str).unwrap_or("") {
            "system" | "developer" => {
                system.push(wire::text_of(m.get("content")));
                continue;
            }
            "user" => ("user", parts(m.get("content"), i)?),
            "assistant" => {
                let mut out = parts(m.get("content"), i)?;
                for (j, t) in m.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
                    let f = t.get("function").ok_or_else(|| format!("messages[{i}].tool_calls[{j}].function: required"))?;
                    let name = f.get("name").and_then(Value::as_str).ok_or_else(|| format!("messages[{i}].tool_calls[{j}].function.name: required"))?;
                    if let Some(id) = t.get("id").and_then(Value::as_str) {
                        names.insert(id.to_string(), name.to_string());
                    }
                    out.push(json!({"functionCall": {"name": name, "args": wire::arguments_value(f.get("arguments").and_then(Value::as_str).unwrap_or(""))}}));
                }
                ("model", out)
            }
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str).ok_or_else(|| format!("messages[{i}].tool_call_id: required for a tool message"))?;
                let name = names.get(id).ok_or_else(|| format!("messages[{i}].tool_call_id: no earlier tool call has id {id:?} (gemini needs the function's name)"))?;
                let text = wire::text_of(m.get("content"));
                let response = match serde_json::from_str::<Value>(&text) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({"result": text}),
                };
                ("user", vec![json!({"functionResponse": {"name": name, "response": response}})])
            }
            other => return Err(format!("messages[{i}].role: gemini takes system, user, assistant and tool, got {other:?}")),
        };
        match turns.last_mut() {
            Some((last, p)) if *last == role => p.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    let out = turns.into_iter().map(|(role, parts)| json!({"role": role, "parts": parts})).collect();
    Ok((system.join("\n\n"), out))
}

/// A message's content as parts (text and images).
fn parts(content: Option<&Value>, i: usize) -> Result<Vec<Value>, String> {
    match content {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) if s.is_empty() => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![json!({"text": s})]),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(j, part)| match part.get("type").and_then(Value::as_str) {
                Some("text") => Ok(json!({"text": part.get("text").and_then(Value::as_str).unwrap_or("")})),
                Some("image_url") => match wire::image_source(part).map_err(|e| format!("messages[{i}].content[{j}]: {e}"))? {
                    (Some(media), data) => Ok(json!({"inlineData": {"mimeType": media, "data": data}})),
                    (None, url) => Ok(json!({"fileData": {"fileUri": url, "mimeType": mime_of(&url)}})),
                },
                other => Err(format!("messages[{i}].content[{j}].type: gemini takes text and image_url parts, got {other:?}")),
            })
            .collect(),
        Some(_) => Err(format!("messages[{i}].content: expected a string or a list of parts")),
    }
}

/// An image URL's media type, from its extension (JPEG when it has none known).
fn mime_of(url: &str) -> &'static str {
    let path = url.split(['?', '#']).next().unwrap_or("").to_ascii_lowercase();
    match path.rsplit_once('.').map(|(_, e)| e) {
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        Some("heic") => "image/heic",
        _ => "image/jpeg",
    }
}

/// One streamed answer: tool calls are numbered across events.
#[derive(Default)]
struct Events {
    calls: u32,
    /// Something has been said (a block after it is the end of a long answer, not a refusal).
    said: bool,
}

impl EventReader for Events {
    fn read(&mut self, _event: &str, data: &str) -> Result<EventRead, EventFault> {
        if data.trim().is_empty() {
            return Ok(EventRead::Skip);
        }
        let v: Value = serde_json::from_str(data).map_err(|e| EventFault::Malformed(format!("malformed event: {e}")))?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let message = err.get("message").and_then(Value::as_str).unwrap_or("error event").to_string();
            let status = err.get("code").and_then(Value::as_u64).unwrap_or(0) as u16;
            let kind = err.get("status").and_then(Value::as_str);
            return Err(EventFault::Failed { code: wire::common_code(status, kind, &message).map(str::to_string), message });
        }
        let p = response(&v, &mut self.calls).map_err(EventFault::Malformed)?;
        if !self.said {
            if let Some(why) = blocked(&v, &p) {
                return Err(EventFault::Failed { code: Some("content_filter".into()), message: why });
            }
        }
        self.said |= !p.content.is_empty() || !p.tool_deltas.is_empty();
        Ok(EventRead::Piece(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> ProviderConfig {
        ProviderConfig { id: "g".into(), service: "s".into(), model: Some("gemini-x".into()), weight: 1, ..Default::default() }
    }

    #[test]
    fn requests_become_contents_with_a_system_instruction_and_generation_config() {
        let body = json!({
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}]},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "look", "arguments": "{\"x\":1}"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "a cat"},
            ],
            "tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "look"}},
            "temperature": 0.5, "max_tokens": 99, "stop": ["END"], "seed": 4,
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}},
            "safetySettings": [],
        });
        let s = Gemini.shape(&body, &provider(), &RouteDefaults::default(), true).unwrap();
        assert_eq!(s.path.as_deref(), Some("/v1beta/models/gemini-x:streamGenerateContent?alt=sse"));
        let b = s.body;
        assert_eq!(b["systemInstruction"], json!({"parts": [{"text": "Be brief."}]}));
        assert_eq!(b["contents"][0]["parts"][1], json!({"fileData": {"fileUri": "https://x/cat.png", "mimeType": "image/png"}}));
        assert_eq!(b["contents"][1], json!({"role": "model", "parts": [{"functionCall": {"name": "look", "args": {"x": 1}}}]}));
        assert_eq!(b["contents"][2], json!({"role": "user", "parts": [{"functionResponse": {"name": "look", "response": {"result": "a cat"}}}]}));
        let g = &b["generationConfig"];
        assert_eq!((g["temperature"].as_f64(), g["maxOutputTokens"].as_u64(), g["seed"].as_u64()), (Some(0.5), Some(99), Some(4)));
        assert_eq!(g["stopSequences"], json!(["END"]));
        assert_eq!(g["responseMimeType"], "application/json");
        assert_eq!(b["tools"], json!([{"functionDeclarations": [{"name": "look", "parameters": {"type": "object"}}]}]));
        assert_eq!(b["toolConfig"], json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["look"]}}));
        assert_eq!(b["safetySettings"], json!([]));
        assert!(b.get("messages").is_none() && b.get("model").is_none());
        let unknown = json!({"messages": [{"role": "tool", "tool_call_id": "zz", "content": "x"}]});
        assert!(Gemini.shape(&unknown, &provider(), &RouteDefaults::default(), false).unwrap_err().contains("tool_call_id"));
    }

    #[test]
    fn answers_read_text_calls_usage_and_blocks() {
        let p = Gemini
            .parse(br#"{"candidates":[{"content":{"role":"model","parts":[{"text":"thinking","thought":true},{"text":"Hi"},{"functionCall":{"name":"look","args":{"x":1}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":4,"thoughtsTokenCount":6,"totalTokenCount":20,"cachedContentTokenCount":3},"modelVersion":"gemini-x-001"}"#)
            .unwrap();
        assert_eq!(p.content, "Hi");
        assert_eq!(p.tool_calls, [ToolCall { id: "call_0".into(), name: "look".into(), arguments: r#"{"x":1}"#.into() }]);
        assert_eq!(p.finish_reason.as_deref(), Some("tool_calls"));
        let u = p.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens, u.reasoning_tokens, u.cached_tokens, u.total_tokens), (10, 10, 6, 3, 20));
        assert_eq!(p.model.as_deref(), Some("gemini-x-001"));
        let blocked = Gemini.parse(br#"{"candidates":[{"finishReason":"SAFETY","index":0}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}"#);
        assert!(matches!(blocked, Err(AnswerFault::Refused { ref code, .. }) if code == "content_filter"));
        let prompt = Gemini.parse(br#"{"promptFeedback":{"blockReason":"SAFETY"}}"#);
        assert!(matches!(prompt, Err(AnswerFault::Refused { ref code, .. }) if code == "content_filter"));
        assert!(matches!(Gemini.parse(b"{}"), Err(AnswerFault::Malformed(_))));
    }

    #[test]
    fn streams_number_calls_and_fail_on_a_block_or_an_error() {
        let mut r = Gemini.stream();
        let EventRead::Piece(a) = r.read("message", r#"{"candidates":[{"content":{"parts":[{"text":"He"}]}}]}"#).unwrap() else { panic!() };
        assert_eq!(a.content, "He");
        let EventRead::Piece(b) = r.read("message", r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a","args":{}}},{"functionCall":{"name":"b","args":{"y":2}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2}}"#).unwrap() else {
            panic!()
        };
        assert_eq!(b.tool_deltas.iter().map(|d| d.index).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(b.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(b.usage.unwrap().total_tokens, 3);
        let mut fresh = Gemini.stream();
        let e = fresh.read("message", r#"{"candidates":[{"finishReason":"SAFETY"}]}"#).unwrap_err();
        assert!(matches!(e, EventFault::Failed { code: Some(ref c), .. } if c == "content_filter"));
        let e = fresh.read("message", r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#).unwrap_err();
        assert!(matches!(e, EventFault::Failed { code: Some(ref c), .. } if c == "overloaded"));
    }

    #[test]
    fn errors_map_onto_common_codes() {
        let code = |s, b: &str| Gemini.error_code(s, b.as_bytes());
        assert_eq!(code(429, r#"{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}"#).as_deref(), Some("rate_limited"));
        assert_eq!(code(400, r#"{"error":{"code":400,"message":"The input token count (3000000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#).as_deref(), Some("context_length_exceeded"));
        assert_eq!(code(404, r#"{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}"#).as_deref(), Some("not_found_model"));
    }
}

//! The exact answer cache of a chat route: what identifies a chat (its normalised
//! request), which chats may be cached, and a stored answer replayed buffered or as a stream.
//!
//! Guarantees: the key covers the route (and its model pin), the messages, tools, tool
//! choice, response format, every sampling parameter, the cache version and, unless the
//! scope is `route`, the principal; object key order and whitespace never matter. By
//! default only deterministic requests (`temperature: 0`, or a `seed`) are cacheable.

use serde_json::Value;

use super::config::{CacheScope, EmbedText};
use super::store::{key, Key, Weigh};
use crate::adapters::{ChatChunk, ChatChunkKind, ChatRequest, ChatResponse};

/// Request fields that never change the answer (the caller's bookkeeping, transport).
const NOT_PART_OF_THE_ANSWER: [&str; 6] = ["user", "metadata", "stream", "stream_options", "store", crate::adapters::openai::CACHE_PARAM];

/// JSON with object keys sorted at every level, so equal requests serialise equally.
pub fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(serde_json::to_string(k).unwrap_or_default().as_bytes());
                out.push(b':');
                canonical(&m[k], out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(x, out);
            }
            out.push(b']');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// The normalised request: messages and every parameter that shapes the answer.
pub fn normalised(chat: &ChatRequest) -> Vec<u8> {
    let mut params = chat.params.clone();
    for k in NOT_PART_OF_THE_ANSWER {
        params.remove(k);
    }
    let mut out = Vec::with_capacity(256);
    canonical(&chat.messages, &mut out);
    out.push(0);
    canonical(&Value::Object(params), &mut out);
    out
}

/// May this chat's answer be cached: `temperature: 0` or a `seed`, unless `any_temperature`.
pub fn deterministic(chat: &ChatRequest, any_temperature: bool) -> bool {
    any_temperature || chat.params.get("temperature").and_then(Value::as_f64) == Some(0.0) || chat.params.get("seed").is_some_and(|s| !s.is_null())
}

/// The key of an exact answer: `kind` (`exact` or `flight`), the route as named (a model pin
/// included), the version, the principal unless shared route-wide, the normalised request.
pub fn chat_key(kind: &str, route: &str, version: &str, scope: CacheScope, principal: Option<&str>, chat: &ChatRequest) -> Key {
    let who = match scope {
        CacheScope::Principal => principal.unwrap_or(""),
        CacheScope::Route => "",
    };
    let scope_tag: &[u8] = if scope == CacheScope::Route { b"route" } else { b"principal" };
    key(&[b"chat", kind.as_bytes(), route.as_bytes(), version.as_bytes(), scope_tag, who.as_bytes(), &normalised(chat)])
}

/// The text a semantic lookup embeds: the last user message, or the whole conversation
/// (`role: text` per message); `None` when there is no text to embed.
pub fn embed_text(chat: &ChatRequest, what: EmbedText) -> Option<String> {
    let list = chat.messages.as_array()?;
    let text_of = |m: &Value| -> String {
        match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            // Content parts: their text, in order.
            Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"),
            _ => String::new(),
        }
    };
    let text = match what {
        EmbedText::LastMessage => list.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("user")).map(text_of)?,
        EmbedText::Conversation => list
            .iter()
            .map(|m| format!("{}: {}", m.get("role").and_then(Value::as_str).unwrap_or(""), text_of(m)))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    (!text.trim().is_empty()).then_some(text)
}

/// The semantic scope of a chat: the route as named (its model pin), the cache version,
/// the system prompt, the tools, tool choice and response format, every other parameter
/// but the prompt, and the principal unless the scope is route-wide. Two prompts are only
/// ever compared within one scope.
pub fn semantic_scope(route: &str, version: &str, scope: CacheScope, principal: Option<&str>, chat: &ChatRequest) -> u64 {
    let mut system = Vec::new();
    if let Some(list) = chat.messages.as_array() {
        for m in list.iter().filter(|m| m.get("role").and_then(Value::as_str) == Some("system")) {
            canonical(m, &mut system);
        }
    }
    let mut params = chat.params.clone();
    for k in NOT_PART_OF_THE_ANSWER {
        params.remove(k);
    }
    let mut rest = Vec::new();
    canonical(&Value::Object(params), &mut rest);
    let who = match scope {
        CacheScope::Principal => principal.unwrap_or(""),
        CacheScope::Route => "",
    };
    let k = key(&[b"semantic-scope", route.as_bytes(), version.as_bytes(), &system, &rest, who.as_bytes()]);
    u64::from_le_bytes(k[..8].try_into().expect("8 bytes"))
}

/// A stored chat answer: the answer, and its chunks when it was streamed.
#[derive(Clone)]
pub struct Answer {
    pub response: ChatResponse,
    pub chunks: Option<Vec<ChatChunk>>,
}

impl Weigh for Answer {
    fn bytes(&self) -> usize {
        let chunks: usize = self.chunks.as_ref().map_or(0, |c| c.iter().map(|c| c.content.len() + 64).sum());
        self.response.content.len() * 2 + self.response.raw.len() + chunks + 512
    }
}

/// A stored answer as the fleet's store keeps it (JSON; the provider's answer in base64).
#[derive(serde::Serialize, serde::Deserialize)]
struct AnswerWire {
    content: String,
    tool_calls: Vec<crate::adapters::ToolCall>,
    finish_reason: Option<String>,
    usage: Option<crate::adapters::Usage>,
    route: String,
    provider: Option<String>,
    model: Option<String>,
    cost: Option<f64>,
    raw: String,
    chunks: Option<Vec<ChatChunk>>,
}

impl Answer {
    /// The answer as the fleet's store keeps it.
    pub fn to_wire(&self) -> Option<Vec<u8>> {
        use base64::Engine as _;
        let r = &self.response;
        let w = AnswerWire {
            content: r.content.clone(),
            tool_calls: r.tool_calls.clone(),
            finish_reason: r.finish_reason.clone(),
            usage: r.usage,
            route: r.route.clone(),
            provider: r.provider.clone(),
            model: r.model.clone(),
            cost: r.cost,
            raw: base64::engine::general_purpose::STANDARD.encode(&r.raw),
            chunks: self.chunks.clone(),
        };
        serde_json::to_vec(&w).ok()
    }

    /// An answer read back from the fleet's store; `None` when malformed.
    pub fn from_wire(bytes: &[u8]) -> Option<Answer> {
        use base64::Engine as _;
        let w: AnswerWire = serde_json::from_slice(bytes).ok()?;
        let raw = base64::engine::general_purpose::STANDARD.decode(w.raw.as_bytes()).ok()?;
        let response = ChatResponse {
            content: w.content,
            tool_calls: w.tool_calls,
            finish_reason: w.finish_reason,
            usage: w.usage,
            route: w.route,
            provider: w.provider,
            model: w.model,
            cost: w.cost,
            raw: raw.into(),
            ..Default::default()
        };
        Some(Answer { response, chunks: w.chunks })
    }

    /// The answer as a stream: its recorded chunks, or one delta per piece of content and
    /// tool call followed by `done`.
    pub fn replay(&self) -> Vec<ChatChunk> {
        if let Some(c) = &self.chunks {
            return c.clone();
        }
        let r = &self.response;
        let base = ChatChunk { kind: ChatChunkKind::Delta, content: String::new(), provider: r.provider.clone(), model: r.model.clone(), tool_call: None, tool_calls: Vec::new(), finish_reason: None, usage: None, cost: None, reason: None };
        let mut out = Vec::new();
        if !r.content.is_empty() {
            out.push(ChatChunk { content: r.content.clone(), ..base.clone() });
        }
        out.push(ChatChunk { kind: ChatChunkKind::Done, tool_calls: r.tool_calls.clone(), finish_reason: r.finish_reason.clone(), usage: r.usage, cost: r.cost, ..base });
        out
    }

    /// A streamed answer assembled, for a buffered caller.
    pub fn from_chunks(route: &str, chunks: Vec<ChatChunk>) -> Option<Answer> {
        let done = chunks.last().filter(|c| c.kind == ChatChunkKind::Done)?;
        let content: String = chunks.iter().filter(|c| c.kind == ChatChunkKind::Delta).map(|c| c.content.as_str()).collect();
        let response = ChatResponse {
            content,
            tool_calls: done.tool_calls.clone(),
            finish_reason: done.finish_reason.clone(),
            usage: done.usage,
            route: route.to_string(),
            provider: chunks.iter().find_map(|c| c.provider.clone()),
            model: chunks.iter().find_map(|c| c.model.clone()),
            cost: done.cost,
            ..Default::default()
        };
        Some(Answer { response, chunks: Some(chunks) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(messages: Value, params: Value) -> ChatRequest {
        ChatRequest { messages, params: params.as_object().cloned().unwrap_or_default(), ..Default::default() }
    }

    #[test]
    fn key_order_and_bookkeeping_never_change_the_key_and_everything_else_does() {
        let m = json!([{"role": "user", "content": "hi"}]);
        let a = chat(m.clone(), json!({"temperature": 0, "tools": [{"a": 1, "b": 2}], "user": "u1"}));
        let b = chat(json!([{"content": "hi", "role": "user"}]), json!({"tools": [{"b": 2, "a": 1}], "temperature": 0, "user": "u2"}));
        let k = |c: &ChatRequest, p: Option<&str>| chat_key("exact", "r", "", CacheScope::Principal, p, c);
        assert_eq!(k(&a, None), k(&b, None));
        assert_ne!(k(&a, Some("t1")), k(&a, Some("t2")), "principals never share");
        assert_eq!(chat_key("exact", "r", "", CacheScope::Route, Some("t1"), &a), chat_key("exact", "r", "", CacheScope::Route, Some("t2"), &a));
        assert_ne!(k(&a, None), k(&chat(m.clone(), json!({"temperature": 0, "tools": [{"a": 1, "b": 3}]})), None));
        assert_ne!(k(&a, None), chat_key("exact", "r", "v2", CacheScope::Principal, None, &a));
        assert_ne!(k(&a, None), chat_key("exact", "r/gpt-x", "", CacheScope::Principal, None, &a));
    }

    #[test]
    fn only_deterministic_requests_are_cacheable_by_default() {
        let m = json!([]);
        assert!(deterministic(&chat(m.clone(), json!({"temperature": 0})), false));
        assert!(deterministic(&chat(m.clone(), json!({"temperature": 0.7, "seed": 3})), false));
        assert!(!deterministic(&chat(m.clone(), json!({"temperature": 0.7})), false));
        assert!(!deterministic(&chat(m.clone(), json!({})), false));
        assert!(deterministic(&chat(m, json!({"temperature": 0.7})), true));
    }

    #[test]
    fn a_streamed_answer_assembles_and_replays() {
        let d = |t: &str| ChatChunk { kind: ChatChunkKind::Delta, content: t.into(), provider: Some("p".into()), model: None, tool_call: None, tool_calls: vec![], finish_reason: None, usage: None, cost: None, reason: None };
        let mut done = d("");
        done.kind = ChatChunkKind::Done;
        done.finish_reason = Some("stop".into());
        let a = Answer::from_chunks("r", vec![d("Hel"), d("lo"), done.clone()]).unwrap();
        assert_eq!(a.response.content, "Hello");
        assert_eq!(a.replay().len(), 3);
        assert!(Answer::from_chunks("r", vec![d("cut")]).is_none(), "a stream that never finished is not an answer");
        let back = Answer::from_wire(&a.to_wire().unwrap()).unwrap();
        assert_eq!((back.response.content.as_str(), back.replay().len()), ("Hello", 3), "a stored stream survives the fleet's wire form");
        assert!(Answer::from_wire(b"{}").is_none());
        let buffered = Answer { response: a.response.clone(), chunks: None };
        let r = buffered.replay();
        assert_eq!((r[0].content.as_str(), r.last().unwrap().kind), ("Hello", ChatChunkKind::Done));
    }
}

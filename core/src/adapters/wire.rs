//! What every wire format reads and writes: the adapter traits, the request a format
//! shapes, what an answer or a streamed event says (`Parsed`, tool calls), the faults, and
//! the helpers the formats share (the common error codes, `extra_body`, content parts).

use serde::Serialize;
use serde_json::{Map, Value};

use super::embeddings::Embedded;
use super::usage::Usage;
use crate::routing::config::ProviderConfig;

/// The common error codes every adapter maps its vendor's errors onto.
pub const CODES: [&str; 7] = ["context_length_exceeded", "content_filter", "rate_limited", "overloaded", "invalid_request", "auth", "not_found_model"];

/// The built-in adapters, by their config name.
pub const BUILT_IN: [&str; 4] = crate::routing::config::BUILT_IN_ADAPTERS;

/// One provider's request: its body, and the path and headers its format needs.
#[derive(Debug, Clone)]
pub struct Shaped {
    pub body: Value,
    /// Replaces the route's `path` (query included), e.g. Gemini's `models/{model}:generateContent`.
    pub path: Option<String>,
    /// Sent unless the service already sets the header (e.g. `anthropic-version`).
    pub headers: Vec<(String, String)>,
}

/// A whole answer that is not a usable chat answer.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerFault {
    /// Not the format's answer shape: a broken answer (fails over).
    Malformed(String),
    /// The provider answered, but with a refusal it states in the body (e.g. Gemini's
    /// safety block): a provider error with this common code (`on_error` applies).
    Refused { code: String, message: String },
}

/// What one streamed event says.
#[derive(Debug, Clone)]
pub enum EventRead {
    /// Content, tool-call pieces, the finish reason or usage (any of them may be empty).
    Piece(Parsed),
    /// The answer is complete (OpenAI's `[DONE]`, Anthropic's `message_stop`); what the
    /// event itself carried comes with it.
    Done(Parsed),
    /// Nothing for the caller (`ping`, an empty event).
    Skip,
}

/// A streamed event that ends the provider's answer badly.
#[derive(Debug, Clone, PartialEq)]
pub enum EventFault {
    /// Not an event of the format: skipped with a `stream_chunk_skipped` event.
    Malformed(String),
    /// The provider said, mid-stream, that it failed (Anthropic's `error` event, an
    /// OpenAI `{"error": ...}` chunk): the stream is broken, with this common code.
    Failed { code: Option<String>, message: String },
}

/// What an answer (or one streamed event) says, the same from every format.
#[derive(Debug, Default, Clone)]
pub struct Parsed {
    pub content: String,
    /// A whole answer's tool calls.
    pub tool_calls: Vec<ToolCall>,
    /// An event's pieces of tool calls.
    pub tool_deltas: Vec<ToolCallDelta>,
    /// One of `stop`, `length`, `tool_calls`, `content_filter` (a vendor's other reasons as it sent them).
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub model: Option<String>,
}

/// What a provider's wire format needs: a chat request in, an answer or events out.
///
/// `body` is the caller's chat body in the OpenAI shape (already checked: a non-empty
/// `messages` list); an adapter never changes it in place.
pub trait ChatAdapter: Send + Sync {
    /// Its name in config (`providers[].adapter`) and in errors.
    fn name(&self) -> &str;
    /// The request for provider `p`; `Err` names what the format cannot carry.
    fn shape(&self, body: &Value, p: &ProviderConfig, route: &RouteDefaults, stream: bool) -> Result<Shaped, String>;
    /// Reads a whole (2xx) answer.
    fn parse(&self, body: &[u8]) -> Result<Parsed, AnswerFault>;
    /// A reader for one streamed answer (formats that spread a tool call over events keep state).
    fn stream(&self) -> Box<dyn EventReader>;
    /// The common code for an error answer (status >= 400), from its body; `None` keeps
    /// the code the vendor sent.
    fn error_code(&self, status: u16, body: &[u8]) -> Option<String>;

    /// Whether the format has an embeddings call.
    fn embeds(&self) -> bool {
        false
    }
    /// Most inputs one embeddings request may carry (the vendor's documented limit).
    fn max_batch(&self) -> u32 {
        2048
    }
    /// An embeddings request for provider `p`; `body` is `{"input": [...], "dimensions"?}`.
    fn shape_embed(&self, _body: &Value, _p: &ProviderConfig, _route: &RouteDefaults) -> Result<Shaped, String> {
        Err(format!("adapter {} has no embeddings call", self.name()))
    }
    /// Reads an embeddings answer for `inputs` texts.
    fn parse_embed(&self, _body: &[u8], _inputs: usize) -> Result<Embedded, String> {
        Err(format!("adapter {} has no embeddings call", self.name()))
    }
}

/// Reads one streamed answer's events in order.
pub trait EventReader: Send {
    /// `event` is the SSE event name (`message` when none was sent).
    fn read(&mut self, event: &str, data: &str) -> Result<EventRead, EventFault>;
}

/// What a route adds to every provider's request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteDefaults<'a> {
    /// The route's `path` (the OpenAI-compatible and Azure formats post there).
    pub path: &'a str,
    /// The route's `max_tokens`, for formats that require one.
    pub max_tokens: Option<u32>,
}

/// A tool the model asks to call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ToolCall {
    pub id: String,
    /// The function's name.
    pub name: String,
    /// The arguments as the JSON text the provider sent (never re-encoded).
    #[schemars(extend("x-sensitive" = true))]
    pub arguments: String,
}

/// One streamed piece of a tool call: the first names it, the rest add to its arguments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ToolCallDelta {
    /// Which tool call of the answer (0, 1, ...).
    pub index: u32,
    pub id: Option<String>,
    pub name: Option<String>,
    /// More of the arguments' JSON text.
    #[schemars(extend("x-sensitive" = true))]
    pub arguments: String,
}

/// Adds one streamed piece to the tool calls assembled so far.
pub(crate) fn assemble(calls: &mut Vec<ToolCall>, d: &ToolCallDelta) {
    let i = d.index as usize;
    while calls.len() <= i {
        calls.push(ToolCall::default());
    }
    let c = &mut calls[i];
    if let Some(id) = &d.id {
        c.id.clone_from(id);
    }
    if let Some(name) = &d.name {
        c.name.push_str(name);
    }
    c.arguments.push_str(&d.arguments);
}

/// The common code for a vendor error: its status, its own code or type, and its message.
pub(crate) fn common_code(status: u16, kind: Option<&str>, message: &str) -> Option<&'static str> {
    let kind = kind.unwrap_or("").to_ascii_lowercase();
    let msg = message.to_ascii_lowercase();
    let context = ["context_length_exceeded", "string_above_max_length"].contains(&kind.as_str())
        || ["prompt is too long", "context length", "context window", "maximum context", "too many tokens", "exceeds the maximum number of tokens", "input token count"]
            .iter()
            .any(|p| msg.contains(p));
    if context && (400..500).contains(&status) && status != 429 {
        return Some("context_length_exceeded");
    }
    if ["content_filter", "responsibleaipolicyviolation", "safety"].contains(&kind.as_str()) {
        return Some("content_filter");
    }
    Some(match (status, kind.as_str()) {
        (401 | 403, _) | (_, "authentication_error" | "permission_error" | "permission_denied" | "unauthenticated") => "auth",
        (429, _) | (_, "rate_limit_error" | "resource_exhausted" | "rate_limit_exceeded") => "rate_limited",
        (529, _) | (_, "overloaded_error" | "overloaded") => "overloaded",
        (503, "unavailable") => "overloaded",
        (404, _) | (_, "not_found_error" | "model_not_found" | "deploymentnotfound" | "not_found") => "not_found_model",
        (400 | 413 | 422, _) | (_, "invalid_request_error" | "invalid_argument" | "request_too_large") => "invalid_request",
        _ => return None,
    })
}

/// A provider's `extra_body` merged into its request body.
pub(crate) fn extra(body: &mut Value, extra: &Map<String, Value>) {
    if let Value::Object(b) = body {
        for (k, v) in extra {
            match b.get_mut(k) {
                Some(slot) => merge(slot, v),
                None => {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// `overlay` merged into `base`: objects key by key, anything else replaced (a provider's `extra_body`).
pub(crate) fn merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// A message's content as text: a string, or the text parts of a list.
pub(crate) fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str).is_none_or(|t| t == "text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// An image part's source: `(Some(media type), base64 data)` for a `data:` URL, `(None, url)` otherwise.
pub(crate) fn image_source(part: &Value) -> Result<(Option<String>, String), String> {
    let url = part
        .get("image_url")
        .and_then(|i| i.get("url").or(Some(i)))
        .and_then(Value::as_str)
        .ok_or("an image_url part needs image_url.url")?;
    match url.strip_prefix("data:") {
        Some(rest) => {
            let (meta, data) = rest.split_once(',').ok_or("a data: URL needs a comma before its data")?;
            let media = meta.strip_suffix(";base64").ok_or("a data: URL image must be base64 (`data:image/png;base64,...`)")?;
            Ok((Some(media.to_string()), data.to_string()))
        }
        None => Ok((None, url.to_string())),
    }
}

/// Tool-call arguments (JSON text) as a JSON value; text that is not JSON is kept as a string.
pub(crate) fn arguments_value(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// The token limit a request gives, in either OpenAI field.
pub(crate) fn max_tokens(body: &Value) -> Option<u64> {
    body.get("max_completion_tokens").or_else(|| body.get("max_tokens")).and_then(Value::as_u64)
}

/// `stop` as a list of strings.
pub(crate) fn stops(body: &Value) -> Option<Vec<Value>> {
    match body.get("stop") {
        Some(Value::String(s)) => Some(vec![Value::String(s.clone())]),
        Some(Value::Array(a)) => Some(a.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vendor_errors_map_onto_the_common_codes() {
        let cases = [
            (400, Some("invalid_request_error"), "prompt is too long: 210000 tokens > 200000 maximum", Some("context_length_exceeded")),
            (400, Some("INVALID_ARGUMENT"), "The input token count (40000) exceeds the maximum number of tokens allowed", Some("context_length_exceeded")),
            (400, Some("content_filter"), "filtered", Some("content_filter")),
            (529, Some("overloaded_error"), "Overloaded", Some("overloaded")),
            (503, Some("UNAVAILABLE"), "The model is overloaded.", Some("overloaded")),
            (429, Some("RESOURCE_EXHAUSTED"), "quota", Some("rate_limited")),
            (401, Some("authentication_error"), "invalid x-api-key", Some("auth")),
            (403, Some("PERMISSION_DENIED"), "no", Some("auth")),
            (404, Some("not_found_error"), "model: claude-9", Some("not_found_model")),
            (400, Some("invalid_request_error"), "max_tokens: Field required", Some("invalid_request")),
            (500, Some("api_error"), "boom", None),
        ];
        for (status, kind, msg, want) in cases {
            assert_eq!(common_code(status, kind, msg), want, "{status} {kind:?} {msg}");
        }
        // Every code an adapter gives is one of the list.
        for (s, k, m, _) in cases {
            if let Some(c) = common_code(s, k, m) {
                assert!(CODES.contains(&c));
            }
        }
    }

    #[test]
    fn extra_body_merges_objects_and_replaces_the_rest() {
        let mut base = json!({"a": {"x": 1, "y": 2}, "b": [1], "c": 1});
        merge(&mut base, &json!({"a": {"y": 3, "z": 4}, "b": [2], "d": null}));
        assert_eq!(base, json!({"a": {"x": 1, "y": 3, "z": 4}, "b": [2], "c": 1, "d": null}));
    }

    #[test]
    fn image_sources_are_read_from_urls_and_data_urls() {
        assert_eq!(image_source(&json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})).unwrap(), (Some("image/png".into()), "AAAA".into()));
        assert_eq!(image_source(&json!({"image_url": {"url": "https://x/y.png"}})).unwrap(), (None, "https://x/y.png".into()));
        assert!(image_source(&json!({"image_url": {"url": "data:image/png,raw"}})).unwrap_err().contains("base64"));
        assert!(image_source(&json!({"type": "image_url"})).is_err());
    }
}

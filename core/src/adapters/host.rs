//! Host-language adapters: a provider's wire format written in Python, TypeScript or
//! Kotlin (`client.register_adapter(name, adapter)`), for an in-house model server with
//! its own JSON. The host object has three methods; JSON text crosses each way:
//!
//! - `build_request(request)`: `{"request": <the OpenAI-shaped chat body, model set>,
//!   "provider": {"id", "model"}, "stream": bool}` -> `{"path": "/...", "body": <JSON>,
//!   "headers"?: {"name": "value"}}`;
//! - `parse_response(response)`: `{"status", "headers": {...}, "body": <text>}` -> an
//!   answer `{"content", "tool_calls"?: [{"id", "name", "arguments"}], "finish_reason"?,
//!   "usage"?: {"prompt_tokens", "completion_tokens", "cached_tokens"?}, "model"?}` or
//!   `{"error": {"code": <a common code or the vendor's>, "message"}}` (also how an error
//!   status is given its code);
//! - `parse_stream_event(event)`: `{"event", "data"}` -> `null` (nothing for the caller),
//!   `{"content"?, "tool_calls"?: [{"index", "id"?, "name"?, "arguments"}],
//!   "finish_reason"?, "usage"?, "done"?: bool}` or `{"error": {"code", "message"}}`.
//!
//! Guarantees: the core awaits the host (a binding hops to the host's own thread or loop,
//! as for token providers), within the call's deadline; an adapter that raises, hangs past
//! the deadline or returns something else is a `ProtocolError` naming the adapter and the
//! step (the provider's attempt fails; the route fails over), never a crash.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::{json, Value};

use super::usage::Usage;
use super::wire::{self, AnswerFault, EventFault, EventRead, Parsed, Shaped, ToolCall, ToolCallDelta};
use crate::routing::config::ProviderConfig;
use crate::transport::BoxFuture;

/// Which of the host object's methods the core calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostStep {
    BuildRequest,
    ParseResponse,
    ParseStreamEvent,
}

impl HostStep {
    /// The host method's name (`snake_case`; a binding maps it to its language's style).
    pub fn as_str(self) -> &'static str {
        match self {
            HostStep::BuildRequest => "build_request",
            HostStep::ParseResponse => "parse_response",
            HostStep::ParseStreamEvent => "parse_stream_event",
        }
    }
}

/// A host adapter as a binding gives it to the core: one entry point, JSON text each way.
/// `Err` is the host exception's message.
pub trait HostAdapter: Send + Sync {
    fn call(&self, step: HostStep, input: String) -> BoxFuture<'_, Result<String, String>>;
}

/// The host adapters a client has, by name.
#[derive(Default)]
pub struct HostAdapters {
    map: RwLock<HashMap<String, Arc<dyn HostAdapter>>>,
}

impl HostAdapters {
    pub fn insert(&self, name: &str, a: Arc<dyn HostAdapter>) {
        self.map.write().insert(name.to_string(), a);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn HostAdapter>> {
        self.map.read().get(name).cloned()
    }
}

/// A host adapter's name: letters, digits, `-` and `_`, at most 64, not a built-in's.
pub fn valid_name(name: &str) -> bool {
    crate::routing::config::valid_host_adapter_name(name)
}

/// A registered host adapter, as a provider's adapter.
pub(crate) struct HostChat {
    pub name: Arc<str>,
    host: Arc<dyn HostAdapter>,
}

/// Longest text a host adapter may return (a request body or one parsed answer).
const MAX_HOST_OUTPUT: usize = 64 << 20;

impl HostChat {
    pub fn new(name: &str, host: Arc<dyn HostAdapter>) -> HostChat {
        HostChat { name: name.into(), host }
    }

    /// Calls the host, within `budget`; what it returns, parsed.
    async fn call(&self, step: HostStep, input: Value, budget: Duration) -> Result<Value, String> {
        let text = input.to_string();
        let out = match tokio::time::timeout(budget, self.host.call(step, text)).await {
            Err(_) => return Err(format!("adapter `{}` did not return from {} within the request's deadline", self.name, step.as_str())),
            Ok(Err(raised)) => return Err(format!("adapter `{}` raised in {}: {}", self.name, step.as_str(), crate::redact::truncate_chars(&raised, 500))),
            Ok(Ok(out)) => out,
        };
        if out.len() > MAX_HOST_OUTPUT {
            return Err(format!("adapter `{}`: {} returned more than {MAX_HOST_OUTPUT} bytes", self.name, step.as_str()));
        }
        serde_json::from_str(&out).map_err(|e| format!("adapter `{}`: {} did not return JSON: {e}", self.name, step.as_str()))
    }

    pub async fn shape(&self, body: &Value, p: &ProviderConfig, stream: bool, budget: Duration) -> Result<Shaped, String> {
        let mut request = body.clone();
        if let (Some(m), Some(o)) = (&p.model, request.as_object_mut()) {
            o.insert("model".into(), Value::String(m.clone()));
        }
        let input = json!({"request": request, "provider": {"id": p.id, "model": p.model}, "stream": stream});
        let out = self.call(HostStep::BuildRequest, input, budget).await?;
        let bad = |what: &str| format!("adapter `{}`: build_request returned {what}", self.name);
        let path = out.get("path").and_then(Value::as_str).ok_or_else(|| bad("no `path` (a string starting with `/`)"))?;
        if !path.starts_with('/') {
            return Err(bad("a `path` that does not start with `/`"));
        }
        crate::target::check_path(path).map_err(|e| bad(&format!("a bad `path`: {}", e.message)))?;
        let mut body = out.get("body").cloned().ok_or_else(|| bad("no `body`"))?;
        if let Some(extra) = &p.extra_body {
            wire::extra(&mut body, extra);
        }
        let mut headers = Vec::new();
        if let Some(h) = out.get("headers").filter(|h| !h.is_null()) {
            let h = h.as_object().ok_or_else(|| bad("`headers` that are not an object"))?;
            for (k, v) in h {
                let v = v.as_str().ok_or_else(|| bad(&format!("a header `{k}` that is not a string")))?;
                if crate::target::is_forbidden_header(k) || http::HeaderName::try_from(k.as_str()).is_err() || http::HeaderValue::try_from(v).is_err() {
                    return Err(bad(&format!("a header `{}` that cannot be sent", crate::redact::escape_control(k))));
                }
                headers.push((k.clone(), v.to_string()));
            }
        }
        Ok(Shaped { body, path: Some(path.to_string()), headers })
    }

    fn response_input(status: u16, headers: &[(String, String)], body: &[u8]) -> Value {
        let h: serde_json::Map<String, Value> = headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), Value::String(v.clone()))).collect();
        json!({"status": status, "headers": h, "body": String::from_utf8_lossy(body)})
    }

    pub async fn parse(&self, status: u16, headers: &[(String, String)], body: &[u8], budget: Duration) -> Result<Parsed, AnswerFault> {
        let out = self.call(HostStep::ParseResponse, Self::response_input(status, headers, body), budget).await.map_err(AnswerFault::Malformed)?;
        if let Some(err) = out.get("error").filter(|e| !e.is_null()) {
            let (code, message) = host_error(err);
            return Err(AnswerFault::Refused { code: code.unwrap_or_else(|| "invalid_request".into()), message });
        }
        let mut p = piece(&out).map_err(|e| AnswerFault::Malformed(format!("adapter `{}`: parse_response returned {e}", self.name)))?;
        p.tool_calls = p.tool_deltas.drain(..).map(|d| ToolCall { id: d.id.unwrap_or_default(), name: d.name.unwrap_or_default(), arguments: d.arguments }).collect();
        Ok(p)
    }

    /// The code the host gives an error answer (`None` when it gives none or fails: the status decides).
    pub async fn error_code(&self, status: u16, headers: &[(String, String)], body: &[u8], budget: Duration) -> Option<String> {
        let out = self.call(HostStep::ParseResponse, Self::response_input(status, headers, body), budget).await.ok()?;
        out.get("error").and_then(|e| host_error(e).0).or_else(|| wire::common_code(status, None, "").map(str::to_string))
    }

    pub async fn read(&self, event: &str, data: &str, budget: Duration) -> Result<EventRead, EventFault> {
        let out = self.call(HostStep::ParseStreamEvent, json!({"event": event, "data": data}), budget).await.map_err(|message| EventFault::Failed { code: None, message })?;
        if out.is_null() {
            return Ok(EventRead::Skip);
        }
        if let Some(err) = out.get("error").filter(|e| !e.is_null()) {
            let (code, message) = host_error(err);
            return Err(EventFault::Failed { code, message });
        }
        let p = piece(&out).map_err(|e| EventFault::Malformed(format!("adapter `{}`: parse_stream_event returned {e}", self.name)))?;
        if out.get("done").and_then(Value::as_bool) == Some(true) {
            return Ok(EventRead::Done(p));
        }
        Ok(EventRead::Piece(p))
    }
}

fn host_error(err: &Value) -> (Option<String>, String) {
    let code = err.get("code").and_then(Value::as_str).map(str::to_string);
    let message = err.get("message").and_then(Value::as_str).map_or_else(|| err.to_string(), str::to_string);
    (code, crate::redact::truncate_chars(&message, 500))
}

/// An answer or event as the host gives it.
fn piece(v: &Value) -> Result<Parsed, String> {
    if !v.is_object() {
        return Err("something other than an object".into());
    }
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let mut p = Parsed { content: text("content").unwrap_or_default(), finish_reason: text("finish_reason"), model: text("model"), ..Default::default() };
    for (i, t) in v.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
        let args = match t.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => other.to_string(),
        };
        p.tool_deltas.push(ToolCallDelta {
            index: t.get("index").and_then(Value::as_u64).map_or(i as u32, |n| n.min(1024) as u32),
            id: t.get("id").and_then(Value::as_str).map(str::to_string),
            name: t.get("name").and_then(Value::as_str).map(str::to_string),
            arguments: args,
        });
    }
    if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        p.usage = Some(Usage::checked(n("prompt_tokens"), n("completion_tokens"), None, n("cached_tokens"), n("reasoning_tokens"))?);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host adapter written the way a binding's would call a Python class.
    struct InHouse;
    impl HostAdapter for InHouse {
        fn call(&self, step: HostStep, input: String) -> BoxFuture<'_, Result<String, String>> {
            Box::pin(async move {
                let v: Value = serde_json::from_str(&input).unwrap();
                Ok(match step {
                    HostStep::BuildRequest => {
                        let prompt = v["request"]["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap_or("")).collect::<Vec<_>>().join("\n");
                        json!({"path": "/inhouse/generate", "body": {"prompt": prompt, "stream": v["stream"]}, "headers": {"x-tenant": "t1"}}).to_string()
                    }
                    HostStep::ParseResponse => {
                        if v["status"].as_u64() != Some(200) {
                            return Ok(json!({"error": {"code": "overloaded", "message": "busy"}}).to_string());
                        }
                        let b: Value = serde_json::from_str(v["body"].as_str().unwrap()).map_err(|e| e.to_string())?;
                        json!({"content": b["output"]["text"], "usage": {"prompt_tokens": b["tokens"]["in"], "completion_tokens": b["tokens"]["out"]}, "finish_reason": "stop"}).to_string()
                    }
                    HostStep::ParseStreamEvent => {
                        let d: Value = serde_json::from_str(v["data"].as_str().unwrap()).map_err(|e| e.to_string())?;
                        if d["end"] == true {
                            json!({"done": true, "finish_reason": "stop"}).to_string()
                        } else {
                            json!({"content": d["token"]}).to_string()
                        }
                    }
                })
            })
        }
    }

    struct Raises;
    impl HostAdapter for Raises {
        fn call(&self, _step: HostStep, _input: String) -> BoxFuture<'_, Result<String, String>> {
            Box::pin(async { Err("ValueError: no".to_string()) })
        }
    }

    fn provider() -> ProviderConfig {
        ProviderConfig { id: "house".into(), service: "s".into(), model: Some("m1".into()), weight: 1, ..Default::default() }
    }

    #[tokio::test]
    async fn a_host_adapter_shapes_requests_and_reads_answers_and_events() {
        let a = HostChat::new("inhouse", Arc::new(InHouse));
        let s = a.shape(&json!({"messages": [{"role": "user", "content": "hi"}]}), &provider(), false, Duration::from_secs(1)).await.unwrap();
        assert_eq!(s.path.as_deref(), Some("/inhouse/generate"));
        assert_eq!(s.body, json!({"prompt": "hi", "stream": false}));
        assert_eq!(s.headers, [("x-tenant".to_string(), "t1".to_string())]);
        let h: Vec<(String, String)> = Vec::new();
        let p = a.parse(200, &h, br#"{"output":{"text":"hello"},"tokens":{"in":3,"out":1}}"#, Duration::from_secs(1)).await.unwrap();
        assert_eq!((p.content.as_str(), p.usage.unwrap().total_tokens), ("hello", 4));
        assert_eq!(a.error_code(503, &h, b"{}", Duration::from_secs(1)).await.as_deref(), Some("overloaded"));
        assert!(matches!(a.read("message", r#"{"token":"he"}"#, Duration::from_secs(1)).await.unwrap(), EventRead::Piece(p) if p.content == "he"));
        assert!(matches!(a.read("message", r#"{"end":true}"#, Duration::from_secs(1)).await.unwrap(), EventRead::Done(_)));
    }

    #[tokio::test]
    async fn a_raising_adapter_is_an_error_naming_it_and_the_step() {
        let a = HostChat::new("inhouse", Arc::new(Raises));
        let e = a.shape(&json!({"messages": []}), &provider(), false, Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(e, "adapter `inhouse` raised in build_request: ValueError: no");
        let e = a.parse(200, &[], b"{}", Duration::from_secs(1)).await.unwrap_err();
        assert!(matches!(e, AnswerFault::Malformed(m) if m.contains("parse_response")));
        assert!(!valid_name("anthropic") && !valid_name("a b") && valid_name("in-house_2"));
    }
}

//! Chat for UniFFI: the chat request in (messages and params as JSON text the facade wrote,
//! checked by the core's JSON rules). Chat answers, chunks, what routing did for a request
//! and `routing_state` cross as the core's JSON views (`request_path`, `NativeClient::view`),
//! decoded into the generated `Types.kt`.
//! Translation only: choosing, failing over and pricing are the core's.

use harness_core::json;
use harness_core::{ChatRequest, HarnessError};

use crate::values::{pairs, NativeEntry, NativeError};

/// A chat call as the facade passes it. `messages` and `params` are JSON text (a list of
/// message objects, an object of chat-completions parameters); the core validates both.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeChatRequest {
    pub route: String,
    pub messages: String,
    pub params: Option<String>,
    pub headers: Vec<NativeEntry>,
    /// Checked by the core's rule (`harness_core::request::millis`): a negative is refused there.
    pub timeout_ms: Option<i64>,
    pub traceparent: Option<String>,
    /// Who the call is made for: the audit record's `principal`, never sent.
    pub principal: Option<String>,
}

/// An opened chat stream: the handle its chunks are read with (`request_path`), then its route and trace.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeChatStreamHead {
    /// First, so the facade can close a stream whose caller has gone without decoding the rest.
    pub stream: u64,
    pub route: String,
    pub trace_id: String,
}

/// JSON text the facade wrote, checked as the core checks every body (depth, NaN, lone
/// surrogates) before it is parsed, so no text can overflow a stack.
fn parse(field: &str, text: &str) -> Result<serde_json::Value, HarnessError> {
    json::check_text(field, text.as_bytes())?;
    json::parse_checked(text).map_err(|e| HarnessError::config(format!("{field}: not JSON: {e}")))
}

impl TryFrom<NativeChatRequest> for (String, ChatRequest) {
    type Error = NativeError;

    fn try_from(r: NativeChatRequest) -> Result<(String, ChatRequest), NativeError> {
        let messages = parse("messages", &r.messages)?;
        let params = match r.params.as_deref().map(|p| parse("params", p)).transpose()? {
            None => serde_json::Map::new(),
            Some(serde_json::Value::Object(o)) => o,
            Some(_) => return Err(HarnessError::config("params: expected an object of chat parameters").into()),
        };
        let chat = ChatRequest {
            messages,
            params,
            headers: pairs(r.headers),
            timeout_ms: r.timeout_ms.map(|t| harness_core::request::millis("request.timeout_ms", t as f64)).transpose()?,
            traceparent: r.traceparent,
            principal: r.principal,
        };
        Ok((r.route, chat))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: &str, params: Option<&str>) -> NativeChatRequest {
        NativeChatRequest {
            route: "chat".into(),
            messages: messages.into(),
            params: params.map(str::to_string),
            headers: vec![],
            timeout_ms: None,
            traceparent: None,
            principal: None,
        }
    }

    fn reason(e: NativeError) -> String {
        let NativeError::Failure { kind, reason, .. } = e;
        assert_eq!(kind, "ConfigError");
        reason
    }

    #[test]
    fn messages_and_params_keep_their_order_and_values() {
        let (route, chat) =
            <(String, ChatRequest)>::try_from(req(r#"[{"role":"user","content":"hi"}]"#, Some(r#"{"z":1,"a":0.5}"#))).unwrap();
        assert_eq!(route, "chat");
        assert_eq!(chat.messages[0]["content"], "hi");
        assert_eq!(chat.params.keys().collect::<Vec<_>>(), ["z", "a"]);
    }

    #[test]
    fn params_that_are_not_an_object_are_a_config_error_naming_params() {
        let e = <(String, ChatRequest)>::try_from(req("[]", Some("[1]"))).unwrap_err();
        assert!(reason(e).starts_with("params:"));
    }

    #[test]
    fn messages_nested_too_deep_are_a_config_error_not_a_crash() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = <(String, ChatRequest)>::try_from(req(&deep, None)).unwrap_err();
        assert!(reason(e).contains("messages: nested deeper than 512"));
    }
}

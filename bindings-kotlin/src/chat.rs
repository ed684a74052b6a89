//! Routing and chat for UniFFI: the chat request in (messages and params as JSON text the
//! facade wrote, checked by the core's JSON rules) and what routing did for a request
//! (`NativeRouted`) out. Chat answers, chunks and `routing_state` cross as the core's JSON
//! views (`request_path`, `NativeClient::view`), decoded into the generated `Types.kt`.
//! Translation only: choosing, failing over and pricing are the core's.

use harness_core::json;
use harness_core::{ChatRequest, HarnessError, Routed, Usage};

use crate::{pairs, NativeEntry, NativeError};

/// A chat call as the facade passes it. `messages` and `params` are JSON text (a list of
/// message objects, an object of chat-completions parameters); the core validates both.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeChatRequest {
    pub route: String,
    pub messages: String,
    pub params: Option<String>,
    pub headers: Vec<NativeEntry>,
    pub timeout_ms: Option<u64>,
    pub traceparent: Option<String>,
    /// Who the call is made for: the audit record's `principal`, never sent.
    pub principal: Option<String>,
}

/// Token counts as the provider reported them.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// Attempts one provider got, in the order providers were first tried.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeProviderAttempts {
    pub provider: String,
    pub attempts: u32,
}

/// What routing did for one request (`harness_core::Routed`).
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeRouted {
    pub route: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub attempts_by_provider: Vec<NativeProviderAttempts>,
    /// `cache` or `static` when no provider answered.
    pub fallback: Option<String>,
    pub usage: Option<NativeUsage>,
    pub cost: Option<f64>,
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
            timeout_ms: r.timeout_ms,
            traceparent: r.traceparent,
            principal: r.principal,
        };
        Ok((r.route, chat))
    }
}

impl From<Usage> for NativeUsage {
    fn from(u: Usage) -> Self {
        NativeUsage { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens }
    }
}

fn attempts(list: Vec<(String, u32)>) -> Vec<NativeProviderAttempts> {
    list.into_iter().map(|(provider, attempts)| NativeProviderAttempts { provider, attempts }).collect()
}

impl From<Routed> for NativeRouted {
    fn from(r: Routed) -> Self {
        NativeRouted {
            route: r.route,
            provider: r.provider,
            model: r.model,
            attempts_by_provider: attempts(r.attempts_by_provider),
            fallback: r.fallback.map(str::to_string),
            usage: r.usage.map(Into::into),
            cost: r.cost,
        }
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

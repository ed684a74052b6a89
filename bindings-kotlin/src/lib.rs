//! harness-kotlin: the UniFFI surface the Kotlin facade (`dev.harness`) is built on.
//!
//! Translation only: JSON text in (config, JSON bodies; the facade writes it, key order
//! and numbers as the caller gave them, and the core checks it), core `Request` /
//! `Response` / `StreamResponse` / `HarnessError` out. Requests and stream chunks take the
//! leaner path in `request_path` (one downcall to start, one upcall with the outcome, Rust
//! objects named by `handles`, never by address) and spawn on the core's own runtime;
//! dropping the task (a cancelled coroutine or future) aborts the request and frees its
//! permits. Events and log records reach Kotlin through one foreign trait (`events`). The
//! idempotent receiver (`receiver`) is its own object; its claim / complete / fail steps take
//! the same request path. Host code the core calls (token providers, adapters, interceptors)
//! is a UniFFI async foreign trait each (`credentials`, `adapters`, `interceptors`).
//! Nothing here panics on bad input: every bad value is a `ConfigError` naming the field.

// HarnessFailure carries the full error context by value, as UniFFI's error enums must; errors are rare next to I/O.
#![allow(clippy::result_large_err)]

mod adapters;
mod chat;
mod client;
mod credentials;
mod events;
mod handles;
mod interceptors;
mod receiver;
mod request_path;
mod values;

use harness_core::ErrorKind;

pub use adapters::{AdapterError, NativeAdapter};
pub use chat::NativeChatStreamHead;
pub use client::NativeClient;
pub use credentials::{NativeToken, NativeTokenProvider, TokenError};
pub use events::{ListenerError, NativeEventSink};
pub use interceptors::{InterceptorHostError, NativeInterceptor, NativeRegistration};
pub use receiver::{NativeIdempotency, NativeLease, NativeReceiverCall};
pub use values::{NativeEntry, NativeError, NativeMockResponse, NativeResponse, NativeStreamHead};

uniffi::setup_scaffolding!();

/// Every kind name, base first; the Kotlin tests check the exception tree covers them.
#[uniffi::export]
pub fn error_kind_names() -> Vec<String> {
    ErrorKind::NAMES.iter().map(|s| s.to_string()).collect()
}

/// This library's version (the workspace's one version); the facade refuses a library whose
/// version differs from the jar's own.
#[uniffi::export]
pub fn native_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The most levels of arrays and objects in a JSON body or a config (`harness_core::json::MAX_DEPTH`):
/// the facade's writer stops there, so a cyclic or absurdly deep value never exhausts the JVM.
#[uniffi::export]
pub fn json_max_depth() -> u32 {
    harness_core::json::MAX_DEPTH as u32
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Arc;

    use harness_core::transport::mock::MockResponse;
    use harness_core::Request;

    /// Records what the core hands the host's logging.
    #[derive(Default)]
    pub(crate) struct Recorded(pub std::sync::Mutex<Vec<String>>);

    impl NativeEventSink for Recorded {
        fn on_event(&self, event: String) -> Result<(), ListenerError> {
            self.0.lock().unwrap().push(event);
            Ok(())
        }
    }

    pub(crate) fn from_json(config: &str) -> Result<NativeClient, NativeError> {
        NativeClient::from_json(config.into(), Arc::new(Recorded::default()))
    }

    #[test]
    fn bad_config_json_is_a_config_error() {
        let NativeError::Failure { kind, .. } = from_json("[").unwrap_err();
        assert_eq!(kind, "ConfigError");
    }

    #[test]
    fn log_sink_slf4j_is_accepted_and_python_is_not() {
        assert!(from_json(r#"{"log": {"sink": "slf4j"}}"#).is_ok());
        let NativeError::Failure { reason, .. } = from_json(r#"{"log": {"sink": "python"}}"#).unwrap_err();
        assert!(reason.starts_with("log.sink"), "{reason}");
    }

    #[test]
    fn a_reload_returns_the_new_version_and_a_bad_one_keeps_the_old() {
        let c = from_json(r#"{"services": {"svc": {"base_url": "http://127.0.0.1:1"}}}"#).unwrap();
        let v1 = c.config_version();
        let v2 = c.reload_json(r#"{"services": {"svc": {"base_url": "http://127.0.0.1:2"}}}"#.into()).unwrap();
        assert_ne!(v1, v2);
        assert_eq!(c.config_version(), v2);
        let NativeError::Failure { kind, reason, .. } =
            c.reload_json(r#"{"services": {"svc": {"base_url": "http://127.0.0.1:2", "retry": {"max_retries": -1}}}}"#.into()).unwrap_err();
        assert_eq!(kind, "ConfigError");
        assert!(reason.starts_with("services.svc.retry.max_retries"), "{reason}");
        assert_eq!(c.config_version(), v2);
    }

    #[test]
    fn request_records_reach_the_host_log_when_the_sink_is_slf4j() {
        let log = Arc::new(Recorded::default());
        let c = NativeClient::from_json(
            r#"{"log": {"sink": "slf4j"}, "services": {"svc": {"base_url": "http://127.0.0.1:1", "retry": {"max_retries": 0}}}}"#.into(),
            log.clone(),
        )
        .unwrap();
        let task = harness_core::Operation::Request(c.client.clone(), Request::new("svc", "GET", "/x")).start().spawn().unwrap();
        let _ = harness_core::runtime::handle().unwrap().block_on(task);
        c.flush();
        let events = log.0.lock().unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        let record: serde_json::Value = serde_json::from_str(&events[0]).unwrap();
        assert_eq!((record["type"].as_str(), record["service"].as_str(), record["method"].as_str()), (Some("request_finished"), Some("svc"), Some("GET")));
        assert!(record["error_kind"].is_string(), "{record}");
    }

    #[test]
    fn a_dropped_client_is_no_longer_found_by_its_handle() {
        let c = from_json("{}").unwrap();
        let h = c.handle();
        assert!(handles::CLIENTS.get(h).is_some());
        drop(c);
        assert!(handles::CLIENTS.get(h).is_none());
    }

    fn mock_response(status: i32, json: Option<&str>, latency_ms: i64) -> NativeMockResponse {
        NativeMockResponse { status, json: json.map(str::to_string), body: None, headers: vec![], latency_ms }
    }

    #[test]
    fn a_mock_out_of_range_or_not_json_is_a_config_error_naming_the_field() {
        let reason = |r: NativeMockResponse| {
            let NativeError::Failure { kind, reason, .. } = MockResponse::try_from(r).unwrap_err();
            assert_eq!(kind, "ConfigError");
            reason
        };
        assert!(reason(mock_response(-1, None, 0)).starts_with("mock.status:"));
        assert!(reason(mock_response(70_000, None, 0)).starts_with("mock.status:"));
        assert!(reason(mock_response(200, None, -5)).starts_with("mock.latency_ms:"));
        assert!(reason(mock_response(200, Some("{"), 0)).starts_with("mock.json:"));
        let deep = format!("{}{}", "[".repeat(1_000), "]".repeat(1_000));
        assert!(reason(mock_response(200, Some(&deep), 0)).contains("nested deeper than 512"));
        let ok = MockResponse::try_from(mock_response(201, Some(r#"{"id":"{id}"}"#), 5)).unwrap();
        assert_eq!((ok.status, ok.latency_ms, ok.json), (201, 5, Some(serde_json::json!({"id": "{id}"}))));
    }

    #[test]
    fn a_config_nested_100_000_deep_is_a_config_error_not_a_crash() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let NativeError::Failure { kind, reason, .. } = from_json(&deep).unwrap_err();
        assert_eq!(kind, "ConfigError");
        assert!(reason.contains("nested deeper than 512"), "{reason}");
    }
}

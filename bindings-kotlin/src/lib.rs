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
//! the same request path.
//! Nothing here panics on bad input: every bad value is a `ConfigError` naming the field.

// HarnessFailure carries the full error context by value, as UniFFI's error enums must; errors are rare next to I/O.
#![allow(clippy::result_large_err)]

mod chat;
mod credentials;
mod events;
mod handles;
mod receiver;
mod request_path;

use std::sync::Arc;

use harness_core::transport::mock::MockResponse;
use harness_core::{Body, Client, ClientOptions, Config, ErrorKind, HarnessError, Request, Response};

use events::HostSink;
pub use chat::{NativeChatRequest, NativeChatStreamHead, NativeProviderAttempts, NativeRouted, NativeUsage};
pub use credentials::{NativeToken, NativeTokenProvider, TokenError};
pub use events::{ListenerError, NativeAuditRecord, NativeEvent, NativeEventSink, NativeRequestRecord};
pub use receiver::{NativeIdempotency, NativeLease, NativeReceiverCall};

uniffi::setup_scaffolding!();

/// One header or query parameter; a list of these keeps order and repeats.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeEntry {
    pub name: String,
    pub value: String,
}

/// A request as the facade passes it; `json` is JSON text, sent byte for byte after the
/// core's checks (`Body::JsonText`).
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeRequest {
    pub service: String,
    pub method: String,
    pub path: String,
    pub endpoint: Option<String>,
    pub query: Vec<NativeEntry>,
    pub headers: Vec<NativeEntry>,
    pub json: Option<String>,
    pub body: Option<Vec<u8>>,
    pub idempotency_key: Option<String>,
    pub timeout_ms: Option<u64>,
    pub traceparent: Option<String>,
    /// Who the call is made for (a user or tenant id): the audit record's `principal`, never sent.
    pub principal: Option<String>,
}

#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeResponse {
    pub status: u16,
    pub headers: Vec<NativeEntry>,
    pub body: Vec<u8>,
    pub elapsed_ms: f64,
    pub attempts: u32,
    pub trace_id: String,
    /// Set when the request named a route: who answered, and how.
    pub routed: Option<NativeRouted>,
}

/// An opened stream's head, and the handle its chunks are read with (`request_path`).
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeStreamHead {
    /// First, so the facade can close a stream whose caller has gone without decoding the rest.
    pub stream: u64,
    pub status: u16,
    pub headers: Vec<NativeEntry>,
    pub attempts: u32,
    pub trace_id: String,
}

/// What `NativeClient::mock` answers with; `json` is JSON text the facade wrote.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeMockResponse {
    /// Signed, so a negative or too-large status from the host is a `ConfigError`, not a wrap.
    pub status: i32,
    pub json: Option<String>,
    pub body: Option<String>,
    pub headers: Vec<NativeEntry>,
    pub latency_ms: i64,
}

impl TryFrom<NativeMockResponse> for MockResponse {
    type Error = NativeError;

    fn try_from(r: NativeMockResponse) -> Result<MockResponse, NativeError> {
        let status = u16::try_from(r.status)
            .map_err(|_| config_error(format!("mock.status: expected an HTTP status from 200 to 999, got {}", r.status)))?;
        let latency_ms = u64::try_from(r.latency_ms).map_err(|_| config_error(format!("mock.latency_ms: must not be negative, got {}", r.latency_ms)))?;
        let json = match r.json {
            Some(text) => {
                harness_core::json::check_text("mock.json", text.as_bytes())?;
                Some(harness_core::json::parse_checked(&text).map_err(|e| config_error(format!("mock.json: not JSON: {e}")))?)
            }
            None => None,
        };
        Ok(MockResponse { status, json, body: r.body, headers: pairs(r.headers), latency_ms })
    }
}

/// The core error, flattened; the Kotlin facade maps `kind` to its sealed exception tree.
#[derive(uniffi::Error, Debug, Clone)]
pub enum NativeError {
    Failure {
        /// Stable kind name, e.g. `TimeoutError` (see `ErrorKind::NAMES`).
        kind: String,
        /// The readable message (core `Display`: kind, message, context): no secrets, no body.
        detail: String,
        /// The core's message alone (no kind name, no context). Not `message`: that name
        /// is `Throwable.message` in the generated Kotlin.
        reason: String,
        service: Option<String>,
        endpoint: Option<String>,
        method: Option<String>,
        attempts: u32,
        status: Option<u16>,
        code: Option<String>,
        retry_after_ms: Option<u64>,
        trace_id: Option<String>,
        phase: Option<String>,
        body: Option<Vec<u8>>,
        /// Routed requests: the provider whose answer this error is.
        provider: Option<String>,
        /// `NoHealthyProviderError`: each provider of the route and its last error (or why it
        /// was not tried), in config order.
        provider_errors: Vec<NativeProviderError>,
    },
}

/// One provider of a route and what went wrong with it.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeProviderError {
    pub provider: String,
    pub error: String,
}

impl std::fmt::Display for NativeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let NativeError::Failure { detail, .. } = self;
        f.write_str(detail)
    }
}

impl std::error::Error for NativeError {}

impl From<HarnessError> for NativeError {
    fn from(e: HarnessError) -> Self {
        NativeError::Failure {
            kind: e.name().to_string(),
            detail: e.to_string(),
            reason: e.message.clone(),
            phase: e.phase().map(str::to_string),
            service: e.service,
            endpoint: e.endpoint,
            method: e.method,
            attempts: e.attempts,
            status: e.status,
            code: e.code,
            retry_after_ms: e.retry_after_ms,
            trace_id: e.trace_id,
            body: e.body.map(|b| b.to_vec()),
            provider: e.provider,
            provider_errors: e.provider_errors.into_iter().map(|(provider, error)| NativeProviderError { provider, error }).collect(),
        }
    }
}

fn config_error(message: String) -> NativeError {
    HarnessError::config(message).into()
}

fn pairs(entries: Vec<NativeEntry>) -> Vec<(String, String)> {
    entries.into_iter().map(|e| (e.name, e.value)).collect()
}

impl TryFrom<NativeRequest> for Request {
    type Error = NativeError;

    fn try_from(r: NativeRequest) -> Result<Request, NativeError> {
        let body = match (r.json, r.body) {
            (Some(_), Some(_)) => return Err(config_error("body: give either json or body, not both".into())),
            // Not parsed here: the core checks nesting, NaN and lone surrogates and sends it as is.
            (Some(text), None) => Body::JsonText(text.into_bytes().into()),
            (None, Some(bytes)) => Body::Bytes(bytes.into()),
            (None, None) => Body::Empty,
        };
        Ok(Request {
            service: r.service,
            method: r.method,
            path: r.path,
            endpoint: r.endpoint,
            query: pairs(r.query),
            headers: pairs(r.headers),
            body,
            idempotency_key: r.idempotency_key,
            timeout_ms: r.timeout_ms,
            traceparent: r.traceparent,
            principal: r.principal,
        })
    }
}

impl From<Response> for NativeResponse {
    fn from(r: Response) -> Self {
        NativeResponse {
            status: r.status,
            headers: r.headers.into_iter().map(|(name, value)| NativeEntry { name, value }).collect(),
            body: r.body.to_vec(),
            elapsed_ms: r.elapsed_ms,
            attempts: r.attempts,
            trace_id: r.trace_id,
            routed: r.routed.map(|r| (*r).into()),
        }
    }
}

/// A core `Client`; every method is a direct call into it. The request path finds it by
/// `handle` (`request_path`), which stops finding it once this object is dropped.
#[derive(uniffi::Object)]
pub struct NativeClient {
    client: Client,
    handle: u64,
}

impl std::fmt::Debug for NativeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.client.fmt(f)
    }
}

impl Drop for NativeClient {
    fn drop(&mut self) {
        request_path::CLIENTS.remove(self.handle);
    }
}

impl NativeClient {
    fn new(client: Client) -> Result<Self, NativeError> {
        let handle = request_path::CLIENTS
            .insert(client.clone())
            .map_err(|_| HarnessError::new(ErrorKind::Harness, "too many Harness clients in this process"))?;
        Ok(NativeClient { client, handle })
    }
}

/// The host's logging: `log: { sink: slf4j }` sends each request record to `log`.
fn options(log: Arc<dyn NativeEventSink>) -> ClientOptions {
    ClientOptions { host_log: Some(("slf4j", Arc::new(HostSink(log)))), ..ClientOptions::default() }
}

#[uniffi::export]
impl NativeClient {
    /// From the config as a JSON document (the facade serialises its Map). The core checks
    /// its nesting before parsing, so no document, however deep, can overflow a stack.
    #[uniffi::constructor]
    pub fn from_json(config: String, log: Arc<dyn NativeEventSink>) -> Result<Self, NativeError> {
        Self::new(Client::with_options(Config::from_str_with_format(&config, "json")?, options(log))?)
    }

    /// From a `.yaml`, `.json` or `.toml` file; with `watch`, reloaded when the file changes.
    #[uniffi::constructor]
    pub fn from_file(path: String, watch: bool, log: Arc<dyn NativeEventSink>) -> Result<Self, NativeError> {
        Self::new(Client::from_file(path, watch, options(log))?)
    }

    /// What the facade passes to `harness_kotlin_start` and `harness_kotlin_open`.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Replaces the config (JSON text) if it is valid; the new config version. The text goes
    /// to the engine whole, so one that does not even parse (or is too deep) is a rejected
    /// reload there (event, metric) like any invalid config.
    pub fn reload_json(&self, config: String) -> Result<String, NativeError> {
        Ok(self.client.reload_text(&config, "json")?)
    }

    /// Replaces the config from a `.yaml`, `.json` or `.toml` file if it is valid.
    pub fn reload_file(&self, path: String) -> Result<String, NativeError> {
        Ok(self.client.reload_path(path)?)
    }

    pub fn config_version(&self) -> String {
        self.client.config_version()
    }

    /// Adds a listener for every event of this client; the id `unlisten` takes.
    pub fn listen(&self, sink: Arc<dyn NativeEventSink>) -> u64 {
        self.client.add_listener(Arc::new(HostSink(sink)))
    }

    /// Removes the listener `listen` returned `id` for; false if it was already removed.
    pub fn unlisten(&self, id: u64) -> bool {
        self.client.remove_listener(id)
    }

    /// Delivers queued log records, audit records and events now.
    pub fn flush(&self) {
        self.client.flush()
    }

    pub fn metrics_text(&self) -> String {
        self.client.metrics_text()
    }

    pub fn breaker_state(&self, service: String, method: String, path: String, endpoint: Option<String>) -> String {
        self.client.breaker_state(&service, &method, &path, endpoint.as_deref()).to_string()
    }

    /// A read-only view by name (`harness_core::view::VIEWS`: `routing_state`,
    /// `credentials_state`, `breaker_details`, `breakers`) as the core's JSON text; the facade
    /// decodes it into the generated types (`Types.kt`).
    pub fn view(&self, name: String, args: Vec<String>) -> Result<String, NativeError> {
        Ok(self.client.view(&name, &args)?.to_string())
    }

    pub fn bulkhead_in_use(&self, service: String) -> Result<u64, NativeError> {
        Ok(self.client.bulkhead_in_use(&service)? as u64)
    }

    /// The service's bulkhead limit now (fixed, or where its adaptive limit stands).
    pub fn bulkhead_limit(&self, service: String) -> Result<u32, NativeError> {
        Ok(self.client.bulkhead_limit(&service)?)
    }

    /// The token provider for a service with `auth.type: callback` (replaces any earlier one).
    pub fn set_token_provider(&self, service: String, provider: Arc<dyn NativeTokenProvider>) -> Result<(), NativeError> {
        Ok(self.client.set_token_provider(&service, Arc::new(credentials::HostProvider(provider)))?)
    }

    /// Sets a provider's weight at runtime (as a reload: validated, versioned, with an event);
    /// the new config version.
    pub fn set_weight(&self, route: String, provider: String, weight: u32) -> Result<String, NativeError> {
        Ok(self.client.set_weight(&route, &provider, weight)?)
    }

    /// Answers `service`'s requests for `method` ("" or "*": any) and the path template `path`
    /// from now on, latest rule first, with no network; the whole pipeline still runs.
    pub fn mock(&self, service: String, method: String, path: String, response: NativeMockResponse) -> Result<(), NativeError> {
        Ok(self.client.mock(&service, &method, &path, response.try_into()?)?)
    }

    /// Removes host mocks for `service` (every service when None); it reaches the network again.
    pub fn clear_mocks(&self, service: Option<String>) -> Result<(), NativeError> {
        Ok(self.client.clear_mocks(service.as_deref())?)
    }

    /// Refuses new requests and flushes this client's records and events. (Not `close`:
    /// UniFFI objects already have a Kotlin `close()` that frees the handle; the facade
    /// leaves freeing to the GC cleaner.)
    pub fn shutdown(&self) {
        self.client.close()
    }

    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}

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

    pub(crate) fn req(json: Option<&str>) -> NativeRequest {
        NativeRequest {
            service: "svc".into(),
            method: "POST".into(),
            path: "/x".into(),
            endpoint: None,
            query: vec![],
            headers: vec![],
            json: json.map(str::to_string),
            body: None,
            idempotency_key: None,
            timeout_ms: None,
            traceparent: None,
            principal: None,
        }
    }

    #[test]
    fn a_json_body_is_sent_as_the_text_the_host_wrote() {
        let text = r#"{"z":1,"a":18446744073709551616}"#;
        match Request::try_from(req(Some(text))).unwrap().body {
            Body::JsonText(b) => assert_eq!(&b[..], text.as_bytes()),
            other => panic!("expected JsonText, got {other:?}"),
        }
    }

    #[test]
    fn json_and_body_together_are_a_config_error_naming_the_field() {
        let mut r = req(Some("{}"));
        r.body = Some(vec![1]);
        let NativeError::Failure { kind, detail, reason, .. } = Request::try_from(r).unwrap_err();
        assert_eq!(kind, "ConfigError");
        assert!(detail.starts_with("ConfigError: body:"), "{detail}");
        assert!(reason.starts_with("body:"), "{reason}");
    }

    /// Records what the core hands the host's logging.
    #[derive(Default)]
    pub(crate) struct Recorded(pub std::sync::Mutex<Vec<NativeEvent>>);

    impl NativeEventSink for Recorded {
        fn on_event(&self, event: NativeEvent) -> Result<(), ListenerError> {
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
        match &events[0] {
            NativeEvent::RequestFinished { record } => {
                assert_eq!((record.service.as_str(), record.method.as_str()), ("svc", "GET"));
                assert!(record.error_kind.is_some());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_dropped_client_is_no_longer_found_by_its_handle() {
        let c = from_json("{}").unwrap();
        let h = c.handle();
        assert!(request_path::CLIENTS.get(h).is_some());
        drop(c);
        assert!(request_path::CLIENTS.get(h).is_none());
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

//! The native client: construction, reload, calls (staged on the completion queue),
//! listeners and admin reads. `index.js` wraps it in the public `Client` class.

use std::path::Path;
use std::sync::{Arc, Mutex};

use harness_core::transport::mock::MockResponse;
use harness_core::{ClientOptions, Config, Operation};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::completion::{CancelToken, CompletionQueue};
use crate::convert::{error, fallible, view_text, Fallible, NativeError};
use crate::events::NodeSink;

#[napi]
pub struct NativeClient {
    inner: harness_core::Client,
    /// The core listener id while JS has listeners.
    sink: Mutex<Option<u64>>,
}

impl NativeClient {
    fn wrap(inner: harness_core::Client) -> Self {
        NativeClient { inner, sink: Mutex::new(None) }
    }
}

/// The core's views a client answers (`harness_core::view::VIEWS`): `index.js` gives `Client` one
/// method per view from these, so a new view in the core needs no line here or there.
#[napi(object, object_from_js = false)]
pub struct ViewSpec {
    /// The core's name (`routing_state`); the JS method is its camelCase.
    pub name: String,
    /// The arguments in order; an optional one ends with `?`.
    pub args: Vec<String>,
}

#[napi]
pub fn view_specs() -> Vec<ViewSpec> {
    harness_core::view::VIEWS.iter().map(|v| ViewSpec { name: v.name.to_string(), args: v.args.iter().map(|a| a.to_string()).collect() }).collect()
}

/// From the JSON text of a config object (the core checks its nesting before parsing).
#[napi]
pub fn client_from_json(json: String) -> Fallible<NativeClient> {
    fallible(Config::from_str_with_format(&json, "json").and_then(harness_core::Client::new).map(NativeClient::wrap))
}

/// From a `.yaml`, `.json` or `.toml` file; with `watch`, it reloads when the file changes.
#[napi]
pub fn client_from_file(path: String, watch: bool) -> Fallible<NativeClient> {
    fallible(harness_core::Client::from_file(path, watch, ClientOptions::default()).map(NativeClient::wrap))
}

#[napi]
impl NativeClient {
    /// Stages a request (or, with `streaming`, a stream open); `queue.flush()` starts it on the
    /// core runtime and it completes through `queue` under `id`. Returns the error at once (and
    /// stages nothing) if the input cannot be translated.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &self,
        queue: &CompletionQueue,
        id: u32,
        streaming: bool,
        service: String,
        method: String,
        path: String,
        endpoint: Option<String>,
        query: Option<Vec<String>>,
        headers: Option<Vec<String>>,
        json: Option<String>,
        body: Option<Buffer>,
        idempotency_key: Option<String>,
        timeout_ms: Option<f64>,
        traceparent: Option<String>,
        principal: Option<String>,
        cancel: Option<&CancelToken>,
    ) -> Option<NativeError> {
        let req = crate::convert::request(service, method, path, endpoint, query, headers, json, body.as_deref(), idempotency_key, timeout_ms, traceparent, principal);
        match req {
            Ok(req) => {
                let client = self.inner.clone();
                queue.stage(if streaming { Operation::Stream(client, req) } else { Operation::Request(client, req) }, id, cancel);
                None
            }
            Err(e) => Some(error(e)),
        }
    }

    /// Stages a chat call on `route` (or, with `streaming`, a chat stream open); it starts with
    /// `queue.flush()` and completes through `queue` under `id`. `messages` and `params` are
    /// JSON text. Returns the error at once (and stages nothing) if the input cannot be translated.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn chat(
        &self,
        queue: &CompletionQueue,
        id: u32,
        streaming: bool,
        route: String,
        messages: String,
        params: Option<String>,
        headers: Option<Vec<String>>,
        timeout_ms: Option<f64>,
        traceparent: Option<String>,
        principal: Option<String>,
        cancel: Option<&CancelToken>,
    ) -> Option<NativeError> {
        match crate::convert::chat_request(messages, params, headers, timeout_ms, traceparent, principal) {
            Ok(chat) => {
                let client = self.inner.clone();
                queue.stage(if streaming { Operation::ChatStream(client, route, chat) } else { Operation::Chat(client, route, chat) }, id, cancel);
                None
            }
            Err(e) => Some(error(e)),
        }
    }

    /// Stages an embeddings call on `route` (a route of `kind: embeddings`); it starts with
    /// `queue.flush()` and completes through `queue` under `id`. `request` is the JSON text of
    /// the core's `EmbedRequest` (`{"inputs", "dimensions"?, "headers"?, "timeout_ms"?,
    /// "traceparent"?, "principal"?}`). Returns the error at once (and stages nothing) if it
    /// cannot be read.
    #[napi]
    pub fn embed(&self, queue: &CompletionQueue, id: u32, route: String, request: String, cancel: Option<&CancelToken>) -> Option<NativeError> {
        match harness_core::EmbedRequest::from_host(request.as_bytes()) {
            Ok(req) => {
                queue.stage(Operation::Embed(self.inner.clone(), route, req), id, cancel);
                None
            }
            Err(e) => Some(error(e)),
        }
    }

    /// Registers `ask` (`(id, step, input) => ...`, see `adapters.rs`) as the host adapter
    /// `name`: providers with `adapter: <name>` reach it. A second registration replaces the first.
    #[napi(ts_args_type = "name: string, ask: (id: number, step: string, input: string) => unknown")]
    pub fn register_adapter(&self, name: String, ask: Function<crate::host::AskArgs, Unknown<'static>>) -> Option<NativeError> {
        let adapter = match crate::adapters::node_adapter(ask) {
            Ok(a) => a,
            Err(e) => return Some(error(harness_core::HarnessError::config(format!("registerAdapter: {}", e.reason)))),
        };
        self.inner.register_adapter(&name, adapter).err().map(error)
    }

    /// Registers `ask` (`(id, phase, input) => ...`, see `interceptors.rs`) as the interceptor
    /// `name`, called for `before`, `after` or both; one of the same name is replaced in its place.
    #[napi(ts_args_type = "name: string, level: string | undefined | null, services: string[] | undefined | null, before: boolean, after: boolean, wantBody: boolean, ask: (id: number, phase: string, input: string) => unknown")]
    #[allow(clippy::too_many_arguments)]
    pub fn add_interceptor(
        &self,
        name: String,
        level: Option<String>,
        services: Option<Vec<String>>,
        before: bool,
        after: bool,
        want_body: bool,
        ask: Function<crate::host::AskArgs, Unknown<'static>>,
    ) -> Option<NativeError> {
        let reg = match crate::interceptors::registration(name, level, services, before, after, want_body) {
            Ok(r) => r,
            Err(e) => return Some(error(e)),
        };
        let host = match crate::interceptors::node_interceptor(ask) {
            Ok(h) => h,
            Err(e) => return Some(error(harness_core::HarnessError::config(format!("use: {}", e.reason)))),
        };
        self.inner.add_interceptor(reg, host).err().map(error)
    }

    /// Removes the interceptor `name`; whether there was one.
    #[napi]
    pub fn remove_interceptor(&self, name: String) -> bool {
        self.inner.remove_interceptor(&name)
    }

    /// One of the core's read-only views (`view_specs`) as camelCased JSON text, the shape
    /// `types.d.ts` declares.
    #[napi]
    pub fn view(&self, name: String, args: Vec<String>) -> Fallible<String> {
        fallible(self.inner.view(&name, &args).map(|v| view_text(&v)))
    }

    /// Sets a provider's weight (validated and versioned as a reload); returns the new version.
    #[napi]
    pub fn set_weight(&self, route: String, provider: String, weight: u32) -> Fallible<String> {
        fallible(self.inner.set_weight(&route, &provider, weight))
    }

    /// Replaces the config with the JSON text of a config object; returns the new version.
    #[napi]
    pub fn reload_json(&self, json: String) -> Fallible<String> {
        // Checked and parsed as `Config::from_str_with_format` does; the value goes through the
        // engine, so a schema error is counted and announced as a rejected reload.
        fallible(self.inner.reload_text(&json, "json"))
    }

    /// Replaces the config with a `.yaml`, `.json` or `.toml` file; returns the new version.
    #[napi]
    pub fn reload_path(&self, path: String) -> Fallible<String> {
        fallible(self.inner.reload_path(Path::new(&path)))
    }

    /// A short hash of the active config.
    #[napi]
    pub fn config_version(&self) -> String {
        self.inner.config_version()
    }

    /// Starts delivering this client's events through `queue`, tagged with `key`
    /// (a no-op while already listening).
    #[napi]
    pub fn listen(&self, queue: &CompletionQueue, key: u32) {
        let mut id = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        if id.is_none() {
            *id = Some(self.inner.add_listener(Arc::new(NodeSink::new(queue.inner.clone(), key))));
        }
    }

    /// Removes the core listener while the client has no JS listener: the core then
    /// builds no events at all.
    #[napi]
    pub fn unlisten(&self) {
        if let Some(id) = self.sink.lock().unwrap_or_else(|p| p.into_inner()).take() {
            self.inner.remove_listener(id);
        }
    }

    /// Delivers this client's queued log records and events now (into the completion queue).
    #[napi]
    pub fn flush(&self) {
        self.inner.flush();
    }

    /// The Prometheus text exposition of this client's metrics.
    #[napi]
    pub fn metrics(&self) -> String {
        self.inner.metrics_text()
    }

    /// `closed`, `open` or `half_open`.
    #[napi]
    pub fn breaker_state(&self, service: String, method: String, path: String, endpoint: Option<String>) -> String {
        self.inner.breaker_state(&service, &method, &path, endpoint.as_deref()).to_string()
    }

    /// A service's bulkhead limit now (it moves when `bulkhead.adaptive` is set).
    #[napi]
    pub fn bulkhead_limit(&self, service: String) -> Fallible<u32> {
        fallible(self.inner.bulkhead_limit(&service))
    }

    /// Bulkhead permits currently held on a service.
    #[napi]
    pub fn bulkhead_in_use(&self, service: String) -> Fallible<u32> {
        fallible(self.inner.bulkhead_in_use(&service).map(|n| n as u32))
    }

    /// Makes `ask` (`(id) => ...`, see `credentials.rs`) the token provider of `service`
    /// (whose `auth.type` must be `callback`).
    #[napi(ts_args_type = "service: string, ask: (id: number) => unknown")]
    pub fn set_token_provider(&self, service: String, ask: Function<u32, Unknown<'static>>) -> Option<NativeError> {
        let provider = match crate::credentials::node_provider(ask) {
            Ok(p) => p,
            Err(e) => return Some(error(harness_core::HarnessError::config(format!("setTokenProvider: {}", e.reason)))),
        };
        self.inner.set_token_provider(&service, provider).err().map(error)
    }

    /// From now on answers `service`'s requests that match `method` (`""` or `"*"`: any) and
    /// `path` (a template relative to the base URL, or `*`) with this response, latest mock
    /// first. `json` is JSON text; `headers` flat name/value pairs.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn mock(
        &self,
        service: String,
        method: String,
        path: String,
        status: u32,
        json: Option<String>,
        body: Option<String>,
        headers: Option<Vec<String>>,
        latency_ms: f64,
    ) -> Option<NativeError> {
        let response = mock_response(status, json, body, headers, latency_ms);
        response.and_then(|r| self.inner.mock(&service, &method, &path, r)).err().map(error)
    }

    /// Removes the mocks host code set on `service` (or on every service): it reaches the network again.
    #[napi]
    pub fn clear_mocks(&self, service: Option<String>) -> Option<NativeError> {
        self.inner.clear_mocks(service.as_deref()).err().map(error)
    }

    /// Drops the stored answers of `name`, a service or a route (every one's when None); how
    /// many were dropped. An unknown name is a `ConfigError`.
    #[napi]
    pub fn cache_clear(&self, name: Option<String>) -> Fallible<u32> {
        fallible(self.inner.cache_clear(name.as_deref()).map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
    }

    /// Refuses new requests, stops watching, and flushes this client's log records and events.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }

    #[napi]
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// The JS fields of a mock answer; the core checks the rest (status range, headers, both bodies).
fn mock_response(status: u32, json: Option<String>, body: Option<String>, headers: Option<Vec<String>>, latency_ms: f64) -> std::result::Result<MockResponse, harness_core::HarnessError> {
    Ok(MockResponse {
        status: u16::try_from(status).map_err(|_| harness_core::HarnessError::config(format!("mock.status: expected an HTTP status from 200 to 999, got {status}")))?,
        json: json.map(|text| crate::convert::json_value("mock.json", &text)).transpose()?,
        body,
        headers: crate::convert::pairs(headers, "headers")?,
        latency_ms: crate::convert::millis_of("mock.latency_ms", latency_ms)?,
    })
}

//! The client object the facade holds: config in (JSON text or a file), views and state
//! out as the core's JSON, events and log records to host sinks. Requests themselves take
//! the leaner path in `request_path`.

use std::sync::Arc;

use harness_core::{Client, ClientOptions, Config, ErrorKind, HarnessError};

use crate::adapters::{HostAdapterBridge, NativeAdapter};
use crate::credentials::{self, NativeTokenProvider};
use crate::events::{HostSink, NativeEventSink};
use crate::handles::CLIENTS;
use crate::interceptors::{HostInterceptorBridge, NativeInterceptor, NativeRegistration};
use crate::values::{NativeError, NativeMockResponse};

/// A core `Client`; every method is a direct call into it. The request path finds it by
/// `handle` (`request_path`), which stops finding it once this object is dropped.
#[derive(uniffi::Object)]
pub struct NativeClient {
    pub(crate) client: Client,
    pub(crate) handle: u64,
}

impl std::fmt::Debug for NativeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.client.fmt(f)
    }
}

impl Drop for NativeClient {
    fn drop(&mut self) {
        CLIENTS.remove(self.handle);
    }
}

impl NativeClient {
    fn new(client: Client) -> Result<Self, NativeError> {
        let handle = CLIENTS
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

    /// Registers a host adapter under `name` (providers with `adapter: <name>` use it; a second
    /// registration replaces the first). A built-in's name or a bad one is a `ConfigError`
    /// naming `name`.
    pub fn register_adapter(&self, name: String, adapter: Arc<dyn NativeAdapter>) -> Result<(), NativeError> {
        Ok(self.client.register_adapter(&name, Arc::new(HostAdapterBridge(adapter)))?)
    }

    /// Adds a host interceptor (a second of the same name replaces the first, in its place).
    /// A bad name or level, or neither `before` nor `after`, is a `ConfigError` naming the field.
    pub fn add_interceptor(&self, registration: NativeRegistration, interceptor: Arc<dyn NativeInterceptor>) -> Result<(), NativeError> {
        Ok(self.client.add_interceptor(registration.try_into()?, Arc::new(HostInterceptorBridge(interceptor)))?)
    }

    /// Removes the interceptor of this name; whether there was one.
    pub fn remove_interceptor(&self, name: String) -> bool {
        self.client.remove_interceptor(&name)
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

    /// Drops the stored answers of `name`, a service or a route (every one's when None); how
    /// many were dropped. An unknown name is a `ConfigError`.
    pub fn cache_clear(&self, name: Option<String>) -> Result<u64, NativeError> {
        Ok(self.client.cache_clear(name.as_deref())? as u64)
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

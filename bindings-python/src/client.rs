//! The native client: one core `Client`, a blocking call that releases the GIL,
//! and an async call that runs on the core's runtime and resolves an asyncio future
//! through the loop's bridge. Streams, chat on routes, routing state, reload, listeners
//! and the `logging` sink too.

use std::sync::Arc;

use bytes::Bytes;
use harness_core::interceptors::{Level, Registration};
use harness_core::{Client, ClientOptions, Config, HarnessError, Operation};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use crate::callbacks::PySink;
use crate::completion::{self, Bridge};
use crate::adapters::PyHostAdapter;
use crate::convert::{self, CallArgs, ChatArgs, EmbedArgs, JsonMode};
use crate::credentials::PyTokenProvider;
use crate::interceptors::PyInterceptor;
use crate::errors::{config_error, to_py};

#[pyclass(name = "Client", module = "harness._native", frozen)]
pub struct NativeClient {
    inner: Client,
}

/// Drives `op` on this thread (no bridge) or submits it to the runtime for `future`.
fn run<'py>(py: Python<'py>, op: Operation, bridge: Option<&Bound<'py, Bridge>>, future: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    match (bridge, future) {
        (Some(bridge), Some(future)) => Ok(Bound::new(py, completion::submit(py, bridge, future, op)?)?.into_any()),
        _ => completion::drive(py, op),
    }
}

/// A config as the constructor and `reload` take it: a file path, or a dict as JSON text.
enum Source {
    Path(String),
    Json(Bytes),
}

fn source(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Source> {
    if config.is_instance_of::<PyString>() {
        return Ok(Source::Path(convert::string("config", config)?));
    }
    if config.hasattr("__fspath__")? {
        let path = py.import("os")?.call_method1("fspath", (config,))?.str()?;
        return Ok(Source::Path(convert::string("config", &path.into_any())?));
    }
    if !(config.is_instance_of::<PyDict>() || config.hasattr("keys")?) {
        return Err(config_error(py, format!("config: expected a dict or a path to a config file, got {}", config.get_type().name()?)));
    }
    // The same depth-limited walk as a JSON body, then the core's JSON loader: no
    // nesting can overflow a stack, and errors name the field as for a config file.
    Ok(Source::Json(convert::json_text(config, JsonMode::Config)?))
}

fn utf8(text: &Bytes) -> &str {
    std::str::from_utf8(text).expect("JsonWriter writes UTF-8")
}

/// Every client can send its request records to `logging` (`log: {sink: python}`).
fn options(py: Python<'_>) -> PyResult<ClientOptions> {
    let log = py.import("harness._events")?.getattr("_log_record")?.unbind();
    Ok(ClientOptions { host_log: Some(("python", Arc::new(PySink::new(log)))), ..ClientOptions::default() })
}

#[pymethods]
impl NativeClient {
    /// Builds a client from a dict (the config structure) or a path to a YAML/JSON/TOML file;
    /// with `watch`, the client reloads when that file changes.
    #[new]
    #[pyo3(signature = (config, watch=false))]
    fn new(py: Python<'_>, config: &Bound<'_, PyAny>, watch: bool) -> PyResult<Self> {
        let options = options(py)?;
        let client = match source(py, config)? {
            Source::Path(p) => py.detach(|| Client::from_file(p, watch, options)),
            Source::Json(_) if watch => return Err(config_error(py, "watch: needs a path to a config file, got a dict")),
            Source::Json(text) => {
                py.detach(|| Config::from_str_with_format(utf8(&text), "json").and_then(|c| Client::with_options(c, options)))
            }
        };
        client.map(|inner| NativeClient { inner }).map_err(|e| to_py(py, e))
    }

    /// Replaces the config (a dict or a file path) if it is valid and returns the new
    /// version; on error the old config stays and the `ConfigError` names the field.
    fn reload(&self, py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<String> {
        let result = match source(py, config)? {
            Source::Path(p) => py.detach(|| self.inner.reload_path(p)),
            Source::Json(text) => py.detach(|| match harness_core::json::parse_checked(utf8(&text)) {
                Ok(value) => self.inner.reload_value(value),
                Err(e) => Err(HarnessError::config(format!("config: {e}"))),
            }),
        };
        result.map_err(|e| to_py(py, e))
    }

    /// A short hash of the active config (equal configs give equal versions).
    #[getter]
    fn config_version(&self) -> String {
        self.inner.config_version()
    }

    /// Calls `listener(event)` for every event, on the client's event thread.
    fn add_listener(&self, listener: &Bound<'_, PyAny>) -> PyResult<()> {
        if !listener.is_callable() {
            return Err(config_error(listener.py(), format!("listener: expected a callable, got {}", listener.get_type().name()?)));
        }
        self.inner.add_listener(Arc::new(PySink::new(listener.clone().unbind())));
        Ok(())
    }

    /// Sets the token provider of a service with `auth: {type: callback}`: `provider` is a
    /// `harness._credentials.TokenProvider`, called on a thread of its own at each refresh.
    fn set_token_provider(&self, py: Python<'_>, service: &Bound<'_, PyAny>, provider: &Bound<'_, PyAny>) -> PyResult<()> {
        let service = convert::string("service", service)?;
        let provider = Arc::new(PyTokenProvider::new(provider.clone().unbind()));
        self.inner.set_token_provider(&service, provider).map_err(|e| to_py(py, e))
    }

    /// A read-only view by name (`harness_core::view::VIEWS`: `routing_state`,
    /// `credentials_state`, `breaker_details`, `breakers`) as plain Python objects with the
    /// core's names; the package wraps them in the generated types (`harness._types`).
    fn view<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>, args: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let name = convert::string("view", name)?;
        // Each argument must be a str, and its error names it as the view does (`service`,
        // `endpoint`, ...); a trailing None is an optional argument left out.
        let spec = harness_core::view::VIEWS.iter().find(|v| v.name == name);
        let mut texts = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            if a.is_none() {
                break;
            }
            let field = spec.and_then(|s| s.args.get(i)).map(|f| f.trim_end_matches('?')).unwrap_or("args");
            texts.push(convert::string(field, a)?);
        }
        let args = texts;
        let value = self.inner.view(&name, &args).map_err(|e| to_py(py, e))?;
        crate::views::json_to_py(py, &value)
    }

    /// Delivers this client's queued log records and events now.
    fn flush(&self, py: Python<'_>) {
        // The event thread needs the GIL to finish: wait without it.
        py.detach(|| self.inner.flush())
    }

    /// Runs one request (`op` is `"request"`) or opens a streamed response (`"stream"`).
    /// Without `bridge`, on this thread with the GIL released until it finishes (or, for a
    /// stream, its head arrives; an error status raises here), Ctrl-C interrupting and
    /// cancelling it; the outcome is returned. With `bridge` and `future`, on the runtime:
    /// the outcome resolves `future` through the loop's completion queue, and the returned
    /// `Pending` cancels the operation when cancelled or dropped.
    #[pyo3(signature = (op, bridge, future, service, method, path, endpoint=None, params=None, headers=None, json=None, content=None, idempotency_key=None, timeout_ms=None, traceparent=None, principal=None))]
    #[allow(clippy::too_many_arguments)]
    fn call<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        bridge: Option<&Bound<'py, Bridge>>,
        future: Option<&Bound<'py, PyAny>>,
        service: &Bound<'py, PyAny>,
        method: &Bound<'py, PyAny>,
        path: &Bound<'py, PyAny>,
        endpoint: Option<&Bound<'py, PyAny>>,
        params: Option<&Bound<'py, PyAny>>,
        headers: Option<&Bound<'py, PyAny>>,
        json: Option<&Bound<'py, PyAny>>,
        content: Option<&Bound<'py, PyAny>>,
        idempotency_key: Option<&Bound<'py, PyAny>>,
        timeout_ms: Option<&Bound<'py, PyAny>>,
        traceparent: Option<&Bound<'py, PyAny>>,
        principal: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let req = convert::request(
            py,
            CallArgs { service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent, principal },
        )?;
        let op = match op {
            "request" => Operation::Request(self.inner.clone(), req),
            "stream" => Operation::Stream(self.inner.clone(), req),
            other => return Err(config_error(py, format!("op: expected request or stream, got {other}"))),
        };
        run(py, op, bridge, future)
    }

    /// One chat answer on a route (`op` is `"chat"`) or a streamed one (`"chat_stream"`),
    /// driven as `call` drives a request: on this thread without `bridge`, else on the
    /// runtime resolving `future`. `params` is a dict of chat-completions parameters; the
    /// answer is a dict of `harness.ChatResponse` fields.
    #[pyo3(signature = (op, bridge, future, route, messages, params=None, headers=None, timeout_ms=None, traceparent=None, principal=None))]
    #[allow(clippy::too_many_arguments)]
    fn chat<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        bridge: Option<&Bound<'py, Bridge>>,
        future: Option<&Bound<'py, PyAny>>,
        route: &Bound<'py, PyAny>,
        messages: &Bound<'py, PyAny>,
        params: Option<&Bound<'py, PyAny>>,
        headers: Option<&Bound<'py, PyAny>>,
        timeout_ms: Option<&Bound<'py, PyAny>>,
        traceparent: Option<&Bound<'py, PyAny>>,
        principal: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (route, chat) = convert::chat(py, ChatArgs { route, messages, params, headers, timeout_ms, traceparent, principal })?;
        let op = match op {
            "chat" => Operation::Chat(self.inner.clone(), route, chat),
            "chat_stream" => Operation::ChatStream(self.inner.clone(), route, chat),
            other => return Err(config_error(py, format!("op: expected chat or chat_stream, got {other}"))),
        };
        run(py, op, bridge, future)
    }

    /// The vectors of `inputs` on a route of `kind: embeddings`, driven as `chat` is: on this
    /// thread without `bridge`, else on the runtime resolving `future`. The answer is a dict of
    /// `harness.EmbedResponse` fields and `data`, the vectors as little-endian float32 bytes.
    #[pyo3(signature = (bridge, future, route, inputs, dimensions=None, headers=None, timeout_ms=None, traceparent=None, principal=None))]
    #[allow(clippy::too_many_arguments)]
    fn embed<'py>(
        &self,
        py: Python<'py>,
        bridge: Option<&Bound<'py, Bridge>>,
        future: Option<&Bound<'py, PyAny>>,
        route: &Bound<'py, PyAny>,
        inputs: &Bound<'py, PyAny>,
        dimensions: Option<&Bound<'py, PyAny>>,
        headers: Option<&Bound<'py, PyAny>>,
        timeout_ms: Option<&Bound<'py, PyAny>>,
        traceparent: Option<&Bound<'py, PyAny>>,
        principal: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (route, req) = convert::embed(py, EmbedArgs { route, inputs, dimensions, headers, timeout_ms, traceparent, principal })?;
        run(py, Operation::Embed(self.inner.clone(), route, req), bridge, future)
    }

    /// Registers a host adapter under `name` (providers with `adapter: <name>` use it):
    /// `adapter` is a `harness._adapters.HostAdapter`, called on a thread of its own per step.
    fn register_adapter(&self, py: Python<'_>, name: &Bound<'_, PyAny>, adapter: &Bound<'_, PyAny>) -> PyResult<()> {
        let name = convert::string("name", name)?;
        let adapter = Arc::new(PyHostAdapter::new(adapter.clone().unbind()));
        py.detach(|| self.inner.register_adapter(&name, adapter)).map_err(|e| to_py(py, e))
    }

    /// Registers an interceptor: `host` is a `harness._interceptors.HostInterceptor`, called
    /// on a thread of its own for each `before`/`after`; `level` is `application`, `attempt`
    /// or `None` (the config's `interceptors.levels`, else `application`).
    #[pyo3(signature = (name, host, level=None, services=None, before=false, after=false, want_body=false))]
    #[allow(clippy::too_many_arguments)]
    fn add_interceptor(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        host: &Bound<'_, PyAny>,
        level: Option<&Bound<'_, PyAny>>,
        services: Option<&Bound<'_, PyAny>>,
        before: bool,
        after: bool,
        want_body: bool,
    ) -> PyResult<()> {
        let name = convert::string("name", name)?;
        let level = match level.filter(|l| !l.is_none()) {
            Some(l) => Some(Level::parse("level", &convert::string("level", l)?).map_err(|e| to_py(py, e))?),
            None => None,
        };
        let mut names = Vec::new();
        if let Some(services) = services.filter(|s| !s.is_none()) {
            if services.is_instance_of::<PyString>() {
                names.push(convert::string("services", services)?);
            } else {
                let list = services.try_iter().map_err(|_| config_error(py, format!("services: expected a list of strings, got {}", services.get_type().name().map(|n| n.to_string()).unwrap_or_default())))?;
                for (i, s) in list.enumerate() {
                    names.push(convert::string(&format!("services[{i}]"), &s?)?);
                }
            }
        }
        let reg = Registration { name, level, services: names, before, after, want_body };
        let host = Arc::new(PyInterceptor::new(host.clone().unbind()));
        py.detach(|| self.inner.add_interceptor(reg, host)).map_err(|e| to_py(py, e))
    }

    /// Removes the interceptor of this name; whether there was one.
    fn remove_interceptor(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        let name = convert::string("name", name)?;
        Ok(py.detach(|| self.inner.remove_interceptor(&name)))
    }

    /// Sets a provider's weight as a reload would; returns the new config version.
    fn set_weight(&self, py: Python<'_>, route: &Bound<'_, PyAny>, provider: &Bound<'_, PyAny>, weight: &Bound<'_, PyAny>) -> PyResult<String> {
        let route = convert::string("route", route)?;
        let provider = convert::string("provider", provider)?;
        let weight = if weight.is_instance_of::<PyInt>() && !weight.is_instance_of::<PyBool>() {
            weight.extract::<u32>().map_err(|_| config_error(py, format!("weight: expected an integer from 0 to {}, got one outside that range", u32::MAX)))?
        } else {
            return Err(config_error(py, format!("weight: expected an integer from 0 to {}, got {}", u32::MAX, weight.get_type().name()?)));
        };
        py.detach(|| self.inner.set_weight(&route, &provider, weight)).map_err(|e| to_py(py, e))
    }

    /// Answers `service`'s requests matching `method` (`""` or `"*"`: any) and the path
    /// template `path` from this rule (latest first), with the whole pipeline still running.
    #[pyo3(signature = (service, method, path, status, latency_ms, json=None, body=None, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn mock<'py>(
        &self,
        py: Python<'py>,
        service: &Bound<'py, PyAny>,
        method: &Bound<'py, PyAny>,
        path: &Bound<'py, PyAny>,
        status: &Bound<'py, PyAny>,
        latency_ms: &Bound<'py, PyAny>,
        json: Option<&Bound<'py, PyAny>>,
        body: Option<&Bound<'py, PyAny>>,
        headers: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let (service, method, path, response) = convert::mock(convert::MockArgs { service, method, path, status, json, body, headers, latency_ms })?;
        py.detach(|| self.inner.mock(&service, &method, &path, response)).map_err(|e| to_py(py, e))
    }

    /// Removes the mocks set by `mock` for `service` (all services when `None`).
    #[pyo3(signature = (service=None))]
    fn clear_mocks(&self, py: Python<'_>, service: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let service = service.filter(|s| !s.is_none()).map(|s| convert::string("service", s)).transpose()?;
        py.detach(|| self.inner.clear_mocks(service.as_deref())).map_err(|e| to_py(py, e))
    }

    /// Drops the stored answers of `name`, a service or a route (every one's when `None`);
    /// how many were dropped. An unknown name is a `ConfigError`.
    #[pyo3(signature = (name=None))]
    fn cache_clear(&self, py: Python<'_>, name: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        let name = name.filter(|s| !s.is_none()).map(|s| convert::string("name", s)).transpose()?;
        py.detach(|| self.inner.cache_clear(name.as_deref())).map_err(|e| to_py(py, e))
    }

    /// The Prometheus text exposition of this client's metrics.
    fn metrics(&self) -> String {
        self.inner.metrics_text()
    }

    /// The breaker state (`closed`, `open`, `half_open`) for (service, endpoint, method).
    #[pyo3(signature = (service, method, path, endpoint=None))]
    fn breaker_state(
        &self,
        service: &Bound<'_, PyAny>,
        method: &Bound<'_, PyAny>,
        path: &Bound<'_, PyAny>,
        endpoint: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        let endpoint = endpoint.filter(|e| !e.is_none()).map(|e| convert::string("endpoint", e)).transpose()?;
        Ok(self.inner.breaker_state(
            &convert::string("service", service)?,
            &convert::string("method", method)?,
            &convert::string("path", path)?,
            endpoint.as_deref(),
        ))
    }

    /// The bulkhead's current concurrency limit on a service (adaptive limits move).
    fn bulkhead_limit(&self, py: Python<'_>, service: &Bound<'_, PyAny>) -> PyResult<u32> {
        self.inner.bulkhead_limit(&convert::string("service", service)?).map_err(|e| to_py(py, e))
    }

    /// Bulkhead permits currently held on a service.
    fn bulkhead_in_use(&self, py: Python<'_>, service: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.inner.bulkhead_in_use(&convert::string("service", service)?).map_err(|e| to_py(py, e))
    }

    /// Refuses new requests; requests in flight finish.
    fn close(&self, py: Python<'_>) {
        // Flushes events and log records, whose thread needs the GIL: wait without it.
        py.detach(|| self.inner.close())
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn __repr__(&self) -> String {
        // The core's Debug shows the client name and service names only, never headers or secrets.
        format!("<harness._native.{:?}>", self.inner)
    }
}

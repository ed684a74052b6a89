//! The native client: one core `Client`, a blocking call that releases the GIL,
//! and an async call that runs on the core's runtime and resolves an asyncio future.

use std::time::Duration;

use harness_core::{Client, Config, HarnessError, Response};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::bridge::{Bridge, Pending};
use crate::convert::{self, CallArgs, JsonMode, Reply};
use crate::errors::{config_error, to_py};

/// How long a blocking call waits between checks for Ctrl-C (the issue asks for < 100 ms).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

type Outcome = Result<Result<Response, HarnessError>, HarnessError>;

#[pyclass(name = "Client", module = "harness._native", frozen)]
pub struct NativeClient {
    inner: Client,
}

fn finish(py: Python<'_>, outcome: Outcome) -> PyResult<Reply> {
    match outcome.and_then(|r| r) {
        Ok(resp) => Ok(Reply(resp)),
        Err(e) => Err(to_py(py, e)),
    }
}

#[pymethods]
impl NativeClient {
    /// Builds a client from a dict (the config structure) or a path to a YAML/JSON/TOML file.
    #[new]
    fn new(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Self> {
        let path = if config.is_instance_of::<PyString>() {
            Some(convert::string("config", config)?)
        } else if config.hasattr("__fspath__")? {
            Some(convert::string("config", &py.import("os")?.call_method1("fspath", (config,))?.str()?.into_any())?)
        } else {
            None
        };
        let client = match path {
            Some(p) => py.detach(|| Client::from_path(p)),
            None => {
                if !(config.is_instance_of::<PyDict>() || config.hasattr("keys")?) {
                    return Err(config_error(
                        py,
                        format!("config: expected a dict or a path to a config file, got {}", config.get_type().name()?),
                    ));
                }
                // The same depth-limited walk as a JSON body, then the core's JSON loader: no
                // nesting can overflow a stack, and errors name the field as for a config file.
                let text = convert::json_text(config, JsonMode::Config)?;
                py.detach(|| {
                    let text = std::str::from_utf8(&text).expect("JsonWriter writes UTF-8");
                    Config::from_str_with_format(text, "json").and_then(Client::new)
                })
            }
        };
        client.map(|inner| NativeClient { inner }).map_err(|e| to_py(py, e))
    }

    /// Runs one request, blocking this thread (not the GIL) until it finishes;
    /// Ctrl-C interrupts it and cancels the request.
    #[pyo3(signature = (service, method, path, endpoint=None, params=None, headers=None, json=None, content=None, idempotency_key=None, timeout_ms=None, traceparent=None))]
    #[allow(clippy::too_many_arguments)]
    fn request<'py>(
        &self,
        py: Python<'py>,
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
    ) -> PyResult<Reply> {
        let req = convert::request(
            py,
            CallArgs { service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent },
        )?;
        // Driven on this thread (GIL released): no hand-off to a runtime worker and back.
        let mut call = self.inner.start_blocking(req).map_err(|e| to_py(py, e))?;
        loop {
            if let Some(outcome) = py.detach(|| call.wait_timeout(SIGNAL_CHECK)) {
                return finish(py, outcome);
            }
            // A KeyboardInterrupt returns here; dropping `call` cancels the request.
            py.check_signals()?;
        }
    }

    /// Starts one request whose result resolves `future` through `bridge` (the loop's
    /// completion queue); the returned `Pending` cancels the request when cancelled or dropped.
    #[pyo3(signature = (bridge, future, service, method, path, endpoint=None, params=None, headers=None, json=None, content=None, idempotency_key=None, timeout_ms=None, traceparent=None))]
    #[allow(clippy::too_many_arguments)]
    fn request_async<'py>(
        &self,
        py: Python<'py>,
        bridge: &Bound<'py, Bridge>,
        future: &Bound<'py, PyAny>,
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
    ) -> PyResult<Pending> {
        let req = convert::request(
            py,
            CallArgs { service, method, path, endpoint, params, headers, json, content, idempotency_key, timeout_ms, traceparent },
        )?;
        let (client, shared, future) = (self.inner.clone(), bridge.get().shared.clone(), future.clone().unbind());
        // runtime::spawn refuses after a fork; the Task aborts the request when dropped.
        let task = harness_core::runtime::spawn(async move {
            let outcome = client.request(req).await;
            shared.complete(future, outcome);
        })
        .map_err(|e| to_py(py, e))?;
        Ok(Pending { task: Mutex::new(Some(task)) })
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

    /// Bulkhead permits currently held on a service.
    fn bulkhead_in_use(&self, py: Python<'_>, service: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.inner.bulkhead_in_use(&convert::string("service", service)?).map_err(|e| to_py(py, e))
    }

    /// Refuses new requests; requests in flight finish.
    fn close(&self) {
        self.inner.close()
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

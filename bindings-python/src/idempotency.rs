//! The idempotent receiver (`harness_core::Idempotency`) for Python: keys, signatures and
//! metrics are plain calls; `claim`, `complete` and `fail` either block this thread (not
//! the GIL, Ctrl-C checked) or run on the core's runtime and resolve an asyncio future
//! through the loop's bridge. A claim to run comes back as a `Lease` (the core's, opaque:
//! its fencing number cannot be forged); a processed key as its stored result, JSON text.
//! `harness._idempotency` composes claim -> handler -> complete / fail.

use std::sync::Arc;

use bytes::Bytes;
use harness_core::{ErrorKind, HarnessError, Idempotency, Operation};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::completion::{self, Bridge, Pending};
use crate::convert::{self, JsonMode};
use crate::errors::{config_error, to_py};
use crate::handles::NativeLease;

/// The idempotent receiver (the core's); `harness._idempotency` composes its calls.
#[pyclass(name = "Idempotency", module = "harness._native", frozen)]
pub struct NativeIdempotency {
    inner: Arc<Idempotency>,
    pid: u32,
}

#[pymethods]
impl NativeLease {
    /// The claimed key.
    #[getter]
    fn key(&self) -> &str {
        &self.inner.key
    }

    /// The fencing number (0 when the store was down and the handler runs without dedup).
    #[getter]
    fn fence(&self) -> u64 {
        self.inner.fence
    }

    /// False when the store was down and `on_store_down: process` let the handler run without dedup.
    #[getter]
    fn deduplicated(&self) -> bool {
        self.inner.deduplicated
    }

    fn __repr__(&self) -> String {
        format!("<harness._native.Lease key={:?} fence={} deduplicated={}>", self.inner.key, self.inner.fence, self.inner.deduplicated)
    }
}

impl NativeIdempotency {
    /// A receiver built before a fork holds its parent's connection (and, in memory, a stale copy of its state).
    fn check_process(&self, py: Python<'_>) -> PyResult<()> {
        if self.pid == std::process::id() {
            return Ok(());
        }
        let message = format!(
            "this receiver was built in process {} and cannot be used in forked child {}: build a new one in the child",
            self.pid,
            std::process::id()
        );
        Err(to_py(py, HarnessError::new(ErrorKind::Harness, message)))
    }
}

fn result_bytes(result: &Bound<'_, PyBytes>) -> Bytes {
    Bytes::copy_from_slice(result.as_bytes())
}

#[pymethods]
impl NativeIdempotency {
    /// Builds a receiver from its config dict (`None`: every default, in memory).
    #[new]
    #[pyo3(signature = (config=None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let value = match config.filter(|c| !c.is_none()) {
            None => serde_json::Value::Null,
            Some(c) if c.is_instance_of::<PyDict>() || c.hasattr("keys")? => {
                // The config walk of `harness.Client`: depth-limited, errors name the field.
                let text = convert::json_text(c, JsonMode::Config)?;
                let text = std::str::from_utf8(&text).expect("JsonWriter writes UTF-8");
                harness_core::json::parse_checked(text).map_err(|e| config_error(py, format!("config: {e}")))?
            }
            Some(c) => return Err(config_error(py, format!("config: expected a dict, got {}", c.get_type().name()?))),
        };
        // Detached: a `signature.secret` may be read from a file.
        let inner = py.detach(|| Idempotency::from_value(value)).map_err(|e| to_py(py, e))?;
        Ok(NativeIdempotency { inner: Arc::new(inner), pid: std::process::id() })
    }

    /// `{prefix}{tenant}:{event_type}:{msg_id}`; a `ConfigError` naming a bad part.
    fn key(&self, py: Python<'_>, tenant: &Bound<'_, PyAny>, event_type: &Bound<'_, PyAny>, msg_id: &Bound<'_, PyAny>) -> PyResult<String> {
        let (tenant, event_type, msg_id) =
            (convert::string("tenant", tenant)?, convert::string("event_type", event_type)?, convert::string("msg_id", msg_id)?);
        self.inner.key(&tenant, &event_type, &msg_id).map_err(|e| to_py(py, e))
    }

    /// The handler's result as the JSON text that is stored (the `json=` body walk).
    fn encode<'py>(&self, py: Python<'py>, result: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &convert::json_text(result, JsonMode::Result)?))
    }

    /// Claims `key`, blocking this thread (not the GIL): a `Lease` (run the handler) or the
    /// stored result (`bytes`); raises `DuplicateInFlightError`, `failed_before` or `store_unavailable`.
    fn claim<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.check_process(py)?;
        completion::drive(py, Operation::Claim(self.inner.clone(), convert::string("key", key)?))
    }

    /// Stores the result (JSON text from `encode`), blocking this thread (not the GIL);
    /// `lease_lost` when another delivery took the key over.
    fn complete<'py>(&self, py: Python<'py>, lease: &Bound<'py, NativeLease>, result: &Bound<'py, PyBytes>) -> PyResult<Bound<'py, PyAny>> {
        self.check_process(py)?;
        completion::drive(py, Operation::Complete(self.inner.clone(), lease.get().inner.clone(), result_bytes(result)))
    }

    /// Marks the claim failed, blocking this thread (not the GIL).
    fn fail<'py>(&self, py: Python<'py>, lease: &Bound<'py, NativeLease>) -> PyResult<Bound<'py, PyAny>> {
        self.check_process(py)?;
        completion::drive(py, Operation::Fail(self.inner.clone(), lease.get().inner.clone()))
    }

    /// `claim` on the runtime; `future` resolves (through `bridge`) to a `Lease` or the stored result.
    fn claim_async(&self, py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>, key: &Bound<'_, PyAny>) -> PyResult<Pending> {
        self.check_process(py)?;
        completion::submit(py, bridge, future, Operation::Claim(self.inner.clone(), convert::string("key", key)?))
    }

    /// `complete` on the runtime; `future` resolves (through `bridge`) to `None`.
    fn complete_async(
        &self,
        py: Python<'_>,
        bridge: &Bound<'_, Bridge>,
        future: &Bound<'_, PyAny>,
        lease: &Bound<'_, NativeLease>,
        result: &Bound<'_, PyBytes>,
    ) -> PyResult<Pending> {
        self.check_process(py)?;
        completion::submit(py, bridge, future, Operation::Complete(self.inner.clone(), lease.get().inner.clone(), result_bytes(result)))
    }

    /// `fail` on the runtime; `future` resolves (through `bridge`) to `None`.
    fn fail_async(&self, py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>, lease: &Bound<'_, NativeLease>) -> PyResult<Pending> {
        self.check_process(py)?;
        completion::submit(py, bridge, future, Operation::Fail(self.inner.clone(), lease.get().inner.clone()))
    }

    /// Checks a signed delivery (HMAC-SHA256 of `{timestamp}.{body}`); `AuthError` with code
    /// `bad_signature` or `stale_signature`, `ConfigError` when no signature is configured.
    fn verify(&self, py: Python<'_>, timestamp: &Bound<'_, PyAny>, body: &Bound<'_, PyAny>, signature: &Bound<'_, PyAny>) -> PyResult<()> {
        let (timestamp, body, signature) =
            (convert::string("timestamp", timestamp)?, convert::bytes_like("body", body)?, convert::string("signature", signature)?);
        self.inner.verify(&timestamp, &body, &signature).map_err(|e| to_py(py, e))
    }

    /// The hex signature of `{timestamp}.{body}`, as `verify` expects it.
    fn sign(&self, py: Python<'_>, timestamp: &Bound<'_, PyAny>, body: &Bound<'_, PyAny>) -> PyResult<String> {
        let (timestamp, body) = (convert::string("timestamp", timestamp)?, convert::bytes_like("body", body)?);
        self.inner.sign(&timestamp, &body).map_err(|e| to_py(py, e))
    }

    /// The receiver's counters (`harness_idempotency_total{outcome}`), Prometheus text.
    fn metrics(&self) -> String {
        self.inner.metrics_text()
    }

    fn __repr__(&self) -> String {
        // The core's Debug shows the prefix and the backend only, never the secret or the URL.
        format!("<harness._native.{:?}>", self.inner)
    }
}

//! A streamed response: the core's `StreamHandle`, read chunk by chunk either on the
//! calling thread (GIL released, Ctrl-C checked) or on the runtime through the bridge.

use std::time::Duration;

use harness_core::{BlockingCall, ErrorKind, HarnessError, StreamHandle};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::bridge::{Bridge, Completion};
use crate::errors::to_py;

/// How long a blocking read waits between checks for Ctrl-C (as a blocking request does).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

#[pyclass(name = "Stream", module = "harness._native", frozen)]
pub struct NativeStream {
    handle: StreamHandle,
    pid: u32,
}

impl NativeStream {
    pub fn new(handle: StreamHandle) -> Self {
        NativeStream { handle, pid: std::process::id() }
    }

    /// A stream opened before a fork belongs to the parent's connection pool.
    fn check_process(&self) -> Result<(), HarnessError> {
        if self.pid == std::process::id() {
            return Ok(());
        }
        Err(HarnessError::new(
            ErrorKind::Harness,
            format!("this stream was opened in process {} and cannot be read in forked child {}", self.pid, std::process::id()),
        ))
    }
}

#[pymethods]
impl NativeStream {
    /// The response status.
    #[getter]
    fn status(&self) -> u16 {
        self.handle.status()
    }

    /// The response headers as (lower-case name, value) pairs, in order.
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (k, v) in self.handle.headers() {
            out.append((k.as_str(), v.as_str()))?;
        }
        Ok(out)
    }

    /// Attempts made before the response head arrived.
    #[getter]
    fn attempts(&self) -> u32 {
        self.handle.attempts()
    }

    /// The W3C trace id of this call.
    #[getter]
    fn trace_id(&self) -> &str {
        self.handle.trace_id()
    }

    /// The next chunk (`None` at the end), blocking this thread (not the GIL);
    /// Ctrl-C interrupts the wait.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.check_process().map_err(|e| to_py(py, e))?;
        let mut call = BlockingCall::new(self.handle.next()).map_err(|e| to_py(py, e))?;
        loop {
            if let Some(outcome) = py.detach(|| call.wait_timeout(SIGNAL_CHECK)) {
                return match outcome.and_then(|r| r) {
                    Ok(chunk) => Ok(chunk.map(|b| PyBytes::new(py, &b))),
                    Err(e) => Err(to_py(py, e)),
                };
            }
            // A KeyboardInterrupt returns here; dropping `call` leaves the stream to `cancel()`.
            py.check_signals()?;
        }
    }

    /// Reads the next chunk on the runtime and resolves `future` with it through `bridge`.
    /// Not cancellable by itself: an asyncio cancel calls `cancel()`, which ends this read at
    /// once (an aborted read could leave the stream locked and its permit held).
    fn next_async(&self, py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_process().map_err(|e| to_py(py, e))?;
        let (next, shared, future) = (self.handle.next(), bridge.get().shared.clone(), future.clone().unbind());
        let handle = harness_core::runtime::handle().map_err(|e| to_py(py, e))?;
        // Detached: it ends with a chunk, the end, an error, or `cancel()`.
        drop(handle.spawn(async move { shared.complete(future, Completion::Chunk(next.await)) }));
        Ok(())
    }

    /// Stops reading: the connection and the bulkhead permit are released at once, and a
    /// read in progress ends with `CancelledError`. No effect once the body has ended.
    fn cancel(&self) {
        self.handle.cancel()
    }
}

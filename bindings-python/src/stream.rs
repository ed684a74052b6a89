//! A streamed response, read chunk by chunk: each read is an `Operation::Read` on the one
//! completion path, on this thread (GIL released, Ctrl-C checked) or on the runtime.

use harness_core::Operation;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::completion::{self, Bridge};
use crate::errors::to_py;
use crate::handles::{check_process, NativeStream};

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

    /// The next chunk (`bytes`, `None` at the end), blocking this thread (not the GIL);
    /// Ctrl-C interrupts the wait (the Python side then cancels the stream).
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        check_process("stream", self.pid).map_err(|e| to_py(py, e))?;
        completion::drive(py, Operation::Read(self.handle.clone()))
    }

    /// Reads the next chunk on the runtime and resolves `future` with it through `bridge`.
    /// An asyncio cancel calls `cancel()`, which ends this read at once.
    fn next_async(&self, py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>) -> PyResult<()> {
        check_process("stream", self.pid).map_err(|e| to_py(py, e))?;
        completion::submit_detached(py, bridge, future, Operation::Read(self.handle.clone()))
    }

    /// Stops reading: the connection and the bulkhead permit are released at once, and a
    /// read in progress ends with `CancelledError`. No effect once the body has ended.
    fn cancel(&self) {
        self.handle.cancel()
    }
}

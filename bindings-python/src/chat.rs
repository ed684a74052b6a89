//! A streamed chat answer, read chunk by chunk exactly as `stream.rs` reads a body: each
//! read is an `Operation::ChatRead` on the one completion path.

use harness_core::Operation;
use pyo3::prelude::*;

use crate::completion::{self, Bridge};
use crate::errors::to_py;
use crate::handles::{check_process, NativeChatStream};

#[pymethods]
impl NativeChatStream {
    /// The route the answer comes through.
    #[getter]
    fn route(&self) -> &str {
        self.handle.route()
    }

    /// The W3C trace id of this call.
    #[getter]
    fn trace_id(&self) -> &str {
        self.handle.trace_id()
    }

    /// The next chunk as a dict (the `ChatChunk` view; `None` after `done`), blocking this
    /// thread (not the GIL); Ctrl-C interrupts the wait.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        check_process("chat stream", self.pid).map_err(|e| to_py(py, e))?;
        completion::drive(py, Operation::ChatRead(self.handle.clone()))
    }

    /// Reads the next chunk on the runtime and resolves `future` with it through `bridge`.
    /// An asyncio cancel calls `cancel()`, which ends this read at once.
    fn next_async(&self, py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>) -> PyResult<()> {
        check_process("chat stream", self.pid).map_err(|e| to_py(py, e))?;
        completion::submit_detached(py, bridge, future, Operation::ChatRead(self.handle.clone()))
    }

    /// Stops the answer: the connection and permits are released at once, and a read in
    /// progress ends with `CancelledError`.
    fn cancel(&self) {
        self.handle.cancel()
    }
}

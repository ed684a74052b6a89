//! Streamed answers, read chunk by chunk: a response body (`NativeStream`, each read an
//! `Operation::Read`) and a chat answer (`NativeChatStream`, each read an
//! `Operation::ChatRead`), both on the one completion path, on this thread (GIL released,
//! Ctrl-C checked) or on the runtime. One macro writes the reading methods of both.

use harness_core::Operation;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::completion::{self, Bridge};
use crate::errors::to_py;
use crate::handles::{check_process, NativeChatStream, NativeStream};

/// The `#[pymethods]` of a stream class: its own getters (`$head`), then `next` (blocking
/// this thread, not the GIL; Ctrl-C interrupts the wait and the Python side cancels),
/// `next_async` (on the runtime, resolving `future` through `bridge`; an asyncio cancel calls
/// `cancel()`, which ends the read at once) and `cancel` (the connection and permits are
/// released at once; a read in progress ends with `CancelledError`).
macro_rules! stream_methods {
    ($class:ident, $what:literal, $read:path, { $($head:tt)* }) => {
        #[pymethods]
        impl $class {
            $($head)*

            /// The next chunk (`None` at the end), blocking this thread (not the GIL).
            fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                check_process($what, self.pid).map_err(|e| to_py(py, e))?;
                completion::drive(py, $read(self.handle.clone()))
            }

            /// Reads the next chunk on the runtime and resolves `future` with it through `bridge`.
            fn next_async(&self, py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>) -> PyResult<()> {
                check_process($what, self.pid).map_err(|e| to_py(py, e))?;
                completion::submit_detached(py, bridge, future, $read(self.handle.clone()))
            }

            /// Stops reading: connection and permits are released at once. No effect once ended.
            fn cancel(&self) {
                self.handle.cancel()
            }
        }
    };
}

stream_methods!(NativeStream, "stream", Operation::Read, {
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
});

// A chunk is a dict of the `ChatChunk` view; the read after `done` gives `None`.
stream_methods!(NativeChatStream, "chat stream", Operation::ChatRead, {
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
});

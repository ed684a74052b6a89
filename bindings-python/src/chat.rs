//! A streamed chat answer: the core's `ChatStreamHandle`, read chunk by chunk either on
//! the calling thread (GIL released, Ctrl-C checked) or on the runtime through the bridge,
//! exactly as `stream.rs` reads a streamed body.

use std::time::Duration;

use harness_core::{BlockingCall, ChatStreamHandle, ErrorKind, HarnessError};
use pyo3::prelude::*;

use crate::bridge::{Bridge, Completion};
use crate::convert::Chunk;
use crate::errors::to_py;

/// How long a blocking read waits between checks for Ctrl-C (as a blocking request does).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

#[pyclass(name = "ChatStream", module = "harness._native", frozen)]
pub struct NativeChatStream {
    handle: ChatStreamHandle,
    pid: u32,
}

impl NativeChatStream {
    pub fn new(handle: ChatStreamHandle) -> Self {
        NativeChatStream { handle, pid: std::process::id() }
    }

    /// A stream opened before a fork belongs to the parent's connection pool.
    fn check_process(&self) -> Result<(), HarnessError> {
        if self.pid == std::process::id() {
            return Ok(());
        }
        Err(HarnessError::new(
            ErrorKind::Harness,
            format!("this chat stream was opened in process {} and cannot be read in forked child {}", self.pid, std::process::id()),
        ))
    }
}

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

    /// The next chunk as a tuple (`None` after the `done` chunk), blocking this thread
    /// (not the GIL); Ctrl-C interrupts the wait.
    fn next(&self, py: Python<'_>) -> PyResult<Option<Chunk>> {
        self.check_process().map_err(|e| to_py(py, e))?;
        let mut call = BlockingCall::new(self.handle.next()).map_err(|e| to_py(py, e))?;
        loop {
            if let Some(outcome) = py.detach(|| call.wait_timeout(SIGNAL_CHECK)) {
                return outcome.and_then(|r| r).map(|c| c.map(Chunk)).map_err(|e| to_py(py, e));
            }
            // A KeyboardInterrupt returns here; the Python side cancels the stream.
            py.check_signals()?;
        }
    }

    /// Reads the next chunk on the runtime and resolves `future` with it through `bridge`.
    /// An asyncio cancel calls `cancel()`, which ends this read at once.
    fn next_async(&self, py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_process().map_err(|e| to_py(py, e))?;
        let (next, shared, future) = (self.handle.next(), bridge.get().shared.clone(), future.clone().unbind());
        let handle = harness_core::runtime::handle().map_err(|e| to_py(py, e))?;
        // Detached: it ends with a chunk, the end, an error, or `cancel()`.
        drop(handle.spawn(async move { shared.complete(future, Completion::ChatChunk(next.await)) }));
        Ok(())
    }

    /// Stops the answer: the connection and permits are released at once, and a read in
    /// progress ends with `CancelledError`.
    fn cancel(&self) {
        self.handle.cancel()
    }
}

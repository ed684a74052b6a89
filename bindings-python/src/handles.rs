//! The native objects a completion hands to Python (an open stream, a chat stream, a
//! receiver's lease): their types only. Their methods live with the feature that reads
//! them (`stream.rs`, `idempotency.rs`), so this module imports no feature and
//! the conversion module (`convert.rs`) can build them without an import cycle.

use harness_core::{ChatStreamHandle, ErrorKind, HarnessError, Lease, StreamHandle};
use pyo3::prelude::*;

/// An open streamed response (the core's `StreamHandle`).
#[pyclass(name = "Stream", module = "harness._native", frozen)]
pub struct NativeStream {
    pub handle: StreamHandle,
    pub pid: u32,
}

/// A streamed chat answer (the core's `ChatStreamHandle`).
#[pyclass(name = "ChatStream", module = "harness._native", frozen)]
pub struct NativeChatStream {
    pub handle: ChatStreamHandle,
    pub pid: u32,
}

/// A delivery's claim to run the handler (the core's `Lease`; opaque: its fencing number cannot be forged).
#[pyclass(name = "Lease", module = "harness._native", frozen)]
pub struct NativeLease {
    pub inner: Lease,
}

impl NativeStream {
    pub fn new(handle: StreamHandle) -> Self {
        NativeStream { handle, pid: std::process::id() }
    }
}

impl NativeChatStream {
    pub fn new(handle: ChatStreamHandle) -> Self {
        NativeChatStream { handle, pid: std::process::id() }
    }
}

/// A stream opened before a fork belongs to the parent's connection pool.
pub fn check_process(what: &str, pid: u32) -> Result<(), HarnessError> {
    if pid == std::process::id() {
        return Ok(());
    }
    Err(HarnessError::new(ErrorKind::Harness, format!("this {what} was opened in process {pid} and cannot be read in forked child {}", std::process::id())))
}

//! harness._native: the PyO3 translation table between Python and harness-core.
//!
//! Argument in, core call, result or error out. No retry, timeout or breaker
//! logic lives here; the pure-Python package `harness` wraps these types.

// HarnessError carries its context inline (as in the core); errors are rare next to I/O.
#![allow(clippy::result_large_err)]

mod adapters;
mod callbacks;
mod client;
mod completion;
mod convert;
mod credentials;
mod errors;
mod handles;
mod idempotency;
mod interceptors;
mod stream;
mod views;

use pyo3::prelude::*;

/// Called at interpreter exit: waits for listener and `logging` calls in progress and
/// skips every later one (a thread must not enter a finalizing interpreter).
#[pyfunction]
fn shut_down(py: Python<'_>) {
    // The calls in progress need the GIL to finish.
    py.detach(callbacks::shut_down)
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::NativeClient>()?;
    m.add_class::<completion::Bridge>()?;
    m.add_class::<completion::Pending>()?;
    m.add_class::<handles::NativeStream>()?;
    m.add_class::<handles::NativeChatStream>()?;
    m.add_class::<idempotency::NativeIdempotency>()?;
    m.add_class::<handles::NativeLease>()?;
    m.add("ERROR_NAMES", harness_core::ErrorKind::NAMES.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(shut_down, m)?)?;
    Ok(())
}

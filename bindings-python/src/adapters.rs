//! The core's `HostAdapter`, implemented once for Python, the way token providers are
//! (`credentials.rs`): each step calls the host object on a short-lived thread of its own (a
//! runtime worker never waits for the GIL; `callbacks::call_on_thread`);
//! `harness._adapters.HostAdapter` turns the core's JSON text into a dict, calls the method,
//! runs a coroutine on the loop captured at `register_adapter`, and hands `json.dumps` of the
//! answer (or the exception raised) to `deliver`, which may run on that loop's thread.
//! Translation only: the core owns the deadline, the checks of what comes back and the errors
//! naming the adapter and the step.

use std::sync::Arc;

use harness_core::adapters::host::HostStep;
use harness_core::adapters::HostAdapter;
use harness_core::transport::BoxFuture;
use pyo3::prelude::*;

use crate::callbacks;

pub struct PyHostAdapter {
    /// A `harness._adapters.HostAdapter`: called as `adapter(step, input, deliver)`.
    adapter: Arc<Py<PyAny>>,
}

impl PyHostAdapter {
    pub fn new(adapter: Py<PyAny>) -> Self {
        PyHostAdapter { adapter: Arc::new(adapter) }
    }
}

impl HostAdapter for PyHostAdapter {
    fn call(&self, step: HostStep, input: String) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(callbacks::call_on_thread("harness-adapter", self.adapter.clone(), step.as_str(), input))
    }
}

//! The core's `HostInterceptor`, implemented once for Python as host adapters are
//! (`adapters.rs`): each `before`/`after` runs on a short-lived thread of its own (a runtime
//! worker never waits for the GIL; `callbacks::call_on_thread`); `harness._interceptors.
//! HostInterceptor` turns the core's JSON text into a request or response object, calls the
//! function, runs a coroutine on the loop captured at `add_interceptor`, and hands the JSON
//! text of the changes (or of a `Reject`, or the exception raised) to `deliver`.
//! Translation only: the core owns the timeout, the checks of the changes and the errors.

use std::sync::Arc;

use harness_core::interceptors::{HostInterceptor, Phase};
use harness_core::transport::BoxFuture;
use pyo3::prelude::*;

use crate::callbacks;

pub struct PyInterceptor {
    /// A `harness._interceptors.HostInterceptor`: called as `host(phase, input, deliver)`.
    host: Arc<Py<PyAny>>,
}

impl PyInterceptor {
    pub fn new(host: Py<PyAny>) -> Self {
        PyInterceptor { host: Arc::new(host) }
    }
}

impl HostInterceptor for PyInterceptor {
    fn call(&self, phase: Phase, input: String) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(callbacks::call_on_thread("harness-interceptor", self.host.clone(), phase.as_str(), input))
    }
}

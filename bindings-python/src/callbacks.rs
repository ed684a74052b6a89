//! The core's `EventSink`, implemented once for Python: on the client's event thread
//! (a plain thread, never a runtime worker) it takes the GIL, builds a `harness.Event`
//! and calls a Python callable with it. Listeners and the `logging` sink both use it;
//! coroutine listeners are scheduled on their loop by the Python side (`harness._events`).
//!
//! At interpreter exit (`atexit`, before finalization) `shut_down` waits for calls in
//! progress and stops every later one: a thread must not enter a finalizing interpreter.

use harness_core::{Event, EventSink};
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

static EVENT_CLASS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// True once the interpreter is exiting; a sink holds the read side while it runs Python code.
static EXITING: RwLock<bool> = RwLock::new(false);

/// Waits for sink calls in progress (call it without the GIL), then refuses new ones.
pub fn shut_down() {
    *EXITING.write() = true;
}

/// Whether the interpreter is exiting (host code must not be entered any more).
pub fn exiting() -> bool {
    *EXITING.read()
}

pub struct PySink {
    callable: Py<PyAny>,
}

impl PySink {
    pub fn new(callable: Py<PyAny>) -> Self {
        PySink { callable }
    }
}

impl EventSink for PySink {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        let exiting = EXITING.read();
        if *exiting {
            return Ok(()); // the interpreter is exiting: nobody is left to tell
        }
        Python::try_attach(|py| self.call(py, event).map_err(|e| describe(py, e))).unwrap_or(Ok(()))
    }
}

impl PySink {
    fn call(&self, py: Python<'_>, event: &Event) -> PyResult<()> {
        let class = EVENT_CLASS.get_or_try_init(py, || -> PyResult<Py<PyAny>> { Ok(py.import("harness._events")?.getattr("Event")?.unbind()) })?;
        let fields = crate::views::json_to_py(py, &event.to_value())?;
        let event = class.bind(py).call1((fields,))?;
        self.callable.bind(py).call1((event,))?;
        Ok(())
    }
}

/// `TypeName: message`, what the core reports (once) for a listener or token provider that raised.
pub fn describe(py: Python<'_>, e: PyErr) -> String {
    let name = e.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into());
    match e.value(py).str() {
        Ok(text) if !text.is_empty().unwrap_or(true) => format!("{name}: {text}"),
        _ => name,
    }
}

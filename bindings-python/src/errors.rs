//! Maps a core `HarnessError` to the Python exception of the same name
//! (the class tree lives in `harness/_errors.py`).

use harness_core::HarnessError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict};

static CLASSES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Bound<'_, PyDict>> {
    CLASSES
        .get_or_try_init(py, || -> PyResult<Py<PyDict>> {
            let module = py.import("harness._errors")?;
            let map = PyDict::new(py);
            for name in harness_core::ErrorKind::NAMES {
                map.set_item(name, module.getattr(name)?)?;
            }
            Ok(map.unbind())
        })
        .map(|d| d.bind(py))
}

/// The Python exception for a core error; never fails (falls back to RuntimeError).
pub fn to_py(py: Python<'_>, e: HarnessError) -> PyErr {
    build(py, &e).unwrap_or_else(|build_err| {
        PyRuntimeError::new_err(format!("{e} (and the Harness exception could not be built: {build_err})"))
    })
}

fn build(py: Python<'_>, e: &HarnessError) -> PyResult<PyErr> {
    let classes = classes(py)?;
    let cls = match classes.get_item(e.name())? {
        Some(c) => c,
        None => classes.get_item("HarnessError")?.expect("HarnessError is in NAMES"),
    };
    // Display is "Name: message (context)"; the class already says the name.
    let text = e.to_string();
    let text = text.strip_prefix(&format!("{}: ", e.name())).unwrap_or(&text).to_string();
    let kw = PyDict::new(py);
    kw.set_item("message", &e.message)?;
    kw.set_item("service", e.service.as_deref())?;
    kw.set_item("endpoint", e.endpoint.as_deref())?;
    kw.set_item("method", e.method.as_deref())?;
    kw.set_item("attempts", e.attempts)?;
    kw.set_item("status", e.status)?;
    kw.set_item("code", e.code.as_deref())?;
    kw.set_item("retry_after_ms", e.retry_after_ms)?;
    kw.set_item("trace_id", e.trace_id.as_deref())?;
    kw.set_item("phase", e.phase())?;
    kw.set_item("body", e.body.as_ref().map(|b| PyBytes::new(py, b)))?;
    kw.set_item("provider", e.provider.as_deref())?;
    kw.set_item("provider_errors", &e.provider_errors)?;
    let instance = cls.call((text,), Some(&kw))?;
    Ok(PyErr::from_value(instance))
}

/// A `ConfigError` for bad input at the binding's edge, naming the field.
pub fn config_error(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_py(py, HarnessError::config(message))
}

//! Maps a core `HarnessError` to the Python exception of the same name
//! (the class tree lives in `harness/_errors.py`).

use harness_core::view::ErrorView;
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
    // The core's view of the error: its kind, and `text`, the message without the kind name.
    let v = ErrorView::of(e);
    let cls = match classes.get_item(v.kind)? {
        Some(c) => c,
        None => classes.get_item("HarnessError")?.expect("HarnessError is in NAMES"),
    };
    // Every field of the view by its wire name, as the generated constructor takes them; the
    // class already names the kind, and `text` is the message.
    let kw = crate::views::view(py, &v)?;
    kw.del_item("kind")?;
    kw.del_item("text")?;
    // Pairs, as the constructor keeps them (the view's are objects).
    let provider_errors: Vec<(&str, &str)> = v.provider_errors.iter().map(|p| (p.provider.as_str(), p.error.as_str())).collect();
    kw.set_item("provider_errors", provider_errors)?;
    // The downstream's raw body crosses beside the view, never inside it.
    kw.set_item("body", e.body.as_ref().map(|b| PyBytes::new(py, b)))?;
    let instance = cls.call((v.text,), Some(&kw))?;
    Ok(PyErr::from_value(instance))
}

/// A `ConfigError` for bad input at the binding's edge, naming the field.
pub fn config_error(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_py(py, HarnessError::config(message))
}

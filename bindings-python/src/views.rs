//! The core's views and events as plain Python objects (dicts, lists, str, int, float, bool,
//! None) under their wire names: what every binding shows of a core type, with no field of it
//! restated here.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// A core view (serde) as a Python dict with its wire names.
pub fn view<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyDict>> {
    let value = harness_core::view::to_json(v);
    Ok(json_to_py(py, &value)?.cast_into::<PyDict>()?)
}

/// A JSON value (a view, an event) as plain Python objects.
pub fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (_, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let out = PyList::empty(py);
            for x in items {
                out.append(json_to_py(py, x)?)?;
            }
            out.into_any()
        }
        Value::Object(map) => {
            let out = PyDict::new(py);
            for (k, x) in map {
                out.set_item(k, json_to_py(py, x)?)?;
            }
            out.into_any()
        }
    })
}

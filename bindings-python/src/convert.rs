//! Python values in, core `Request` out; core `Response` in, a plain tuple out.
//! Every bad input becomes a `ConfigError` that names the argument.

use bytes::Bytes;
use harness_core::{Body, Request, Response};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::config_error;

/// The arguments of one call, as the Python wrapper passes them.
pub struct CallArgs<'a, 'py> {
    pub service: &'a Bound<'py, PyAny>,
    pub method: &'a Bound<'py, PyAny>,
    pub path: &'a Bound<'py, PyAny>,
    pub endpoint: Option<&'a Bound<'py, PyAny>>,
    pub params: Option<&'a Bound<'py, PyAny>>,
    pub headers: Option<&'a Bound<'py, PyAny>>,
    pub json: Option<&'a Bound<'py, PyAny>>,
    pub content: Option<&'a Bound<'py, PyAny>>,
    pub idempotency_key: Option<&'a Bound<'py, PyAny>>,
    pub timeout_ms: Option<&'a Bound<'py, PyAny>>,
    pub traceparent: Option<&'a Bound<'py, PyAny>>,
}

fn present<'a, 'py>(v: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    v.filter(|v| !v.is_none())
}

pub fn string(field: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(s.to_cow()?.into_owned()),
        Err(_) => Err(config_error(v.py(), format!("{field}: expected a string, got {}", type_name(v)))),
    }
}

fn opt_string(field: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    present(v).map(|v| string(field, v)).transpose()
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// A query value: strings as is, numbers and booleans in their usual spelling.
fn scalar(field: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_cow()?.into_owned());
    }
    if v.is_instance_of::<PyBool>() {
        return Ok(if v.is_truthy()? { "true" } else { "false" }.into());
    }
    if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>() {
        return Ok(v.str()?.to_cow()?.into_owned());
    }
    Err(config_error(v.py(), format!("{field}: expected a string or a number, got {}", type_name(v))))
}

/// A mapping or a sequence of (name, value) pairs; `multi` lets a value be a list (repeated keys).
fn pairs(field: &str, v: &Bound<'_, PyAny>, multi: bool) -> PyResult<Vec<(String, String)>> {
    let py = v.py();
    let items: Bound<'_, PyAny> = if let Ok(d) = v.cast::<PyDict>() {
        d.items().into_any()
    } else if v.hasattr("items")? {
        v.call_method0("items")?
    } else if v.is_instance_of::<PyString>() || v.is_instance_of::<PyBytes>() {
        return Err(config_error(py, format!("{field}: expected a mapping or a list of pairs, got {}", type_name(v))));
    } else {
        v.clone()
    };
    let iter = items
        .try_iter()
        .map_err(|_| config_error(py, format!("{field}: expected a mapping or a list of pairs, got {}", type_name(v))))?;
    let mut out = Vec::new();
    for item in iter {
        let item = item?;
        let pair = item
            .cast::<PyTuple>()
            .ok()
            .filter(|t| t.len() == 2)
            .map(|t| (t.get_item(0), t.get_item(1)))
            .or_else(|| item.cast::<PyList>().ok().filter(|l| l.len() == 2).map(|l| (l.get_item(0), l.get_item(1))));
        let Some((Ok(k), Ok(val))) = pair else {
            return Err(config_error(py, format!("{field}: expected (name, value) pairs, got {}", type_name(&item))));
        };
        let name = string(field, &k)?;
        let item_field = format!("{field}.{name}");
        if multi && (val.is_instance_of::<PyList>() || val.is_instance_of::<PyTuple>()) {
            for x in val.try_iter()? {
                out.push((name.clone(), scalar(&item_field, &x?)?));
            }
        } else if multi {
            out.push((name, scalar(&item_field, &val)?));
        } else {
            out.push((name, string(&item_field, &val)?));
        }
    }
    Ok(out)
}

fn body(py: Python<'_>, json: Option<&Bound<'_, PyAny>>, content: Option<&Bound<'_, PyAny>>) -> PyResult<Body> {
    match (present(json), present(content)) {
        (Some(_), Some(_)) => Err(config_error(py, "json: cannot be combined with content")),
        (Some(j), None) => pythonize::depythonize::<serde_json::Value>(j)
            .map(Body::Json)
            .map_err(|e| config_error(py, format!("json: not JSON-serialisable: {e}"))),
        (None, Some(c)) => {
            if let Ok(b) = c.cast::<PyBytes>() {
                Ok(Body::Bytes(Bytes::copy_from_slice(b.as_bytes())))
            } else if let Ok(s) = c.cast::<PyString>() {
                Ok(Body::Bytes(Bytes::copy_from_slice(s.to_cow()?.as_bytes())))
            } else if let Ok(b) = c.cast::<PyByteArray>() {
                Ok(Body::Bytes(Bytes::from(b.to_vec())))
            } else if let Ok(m) = c.call_method0("tobytes").and_then(|b| b.cast_into::<PyBytes>().map_err(Into::into)) {
                Ok(Body::Bytes(Bytes::copy_from_slice(m.as_bytes())))
            } else {
                Err(config_error(py, format!("content: expected bytes or str, got {}", type_name(c))))
            }
        }
        (None, None) => Ok(Body::Empty),
    }
}

fn timeout(py: Python<'_>, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(v) = present(v) else { return Ok(None) };
    if v.is_instance_of::<PyBool>() || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>()) {
        return Err(config_error(py, format!("timeout_ms: expected a number of milliseconds, got {}", type_name(v))));
    }
    let ms: f64 = v.extract()?;
    if !ms.is_finite() || ms < 0.0 {
        return Err(config_error(py, format!("timeout_ms: expected a number >= 0, got {ms}")));
    }
    Ok(Some(ms.ceil() as u64))
}

pub fn request(py: Python<'_>, a: CallArgs<'_, '_>) -> PyResult<Request> {
    Ok(Request {
        service: string("service", a.service)?,
        method: string("method", a.method)?,
        path: string("path", a.path)?,
        endpoint: opt_string("endpoint", a.endpoint)?,
        query: present(a.params).map(|p| pairs("params", p, true)).transpose()?.unwrap_or_default(),
        headers: present(a.headers).map(|h| pairs("headers", h, false)).transpose()?.unwrap_or_default(),
        body: body(py, a.json, a.content)?,
        idempotency_key: opt_string("idempotency_key", a.idempotency_key)?,
        timeout_ms: timeout(py, a.timeout_ms)?,
        traceparent: opt_string("traceparent", a.traceparent)?,
    })
}

/// A finished response: `(status, [(name, value)], content, elapsed_ms, attempts, trace_id)`.
pub struct Reply(pub Response);

impl<'py> IntoPyObject<'py> for Reply {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        let r = self.0;
        let headers = PyList::empty(py);
        for (k, v) in &r.headers {
            headers.append((k.as_str(), v.as_str()))?;
        }
        (r.status, headers, PyBytes::new(py, &r.body), r.elapsed_ms, r.attempts, r.trace_id).into_pyobject(py)
    }
}

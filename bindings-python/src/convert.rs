//! The one conversion module: Python values in (a request, a chat, a mock, JSON bodies and
//! configs), the core's outcomes and views out. Every bad input becomes a `ConfigError`
//! that names the argument.

use std::borrow::Cow;

use bytes::Bytes;
use harness_core::json::{self as core_json, JsonWriter};
use harness_core::transport::mock::MockResponse;
use harness_core::{Body, ChatRequest, Claim, EmbedRequest, EmbedResponse, HarnessError, Outcome, Request, Response};
use pyo3::exceptions::PyUnicodeEncodeError;
use pyo3::prelude::*;
use pyo3::{ffi, intern, PyTypeInfo};
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PyMapping, PySequence, PySet, PyString, PyTuple,
};

use crate::errors::{config_error, to_py};
use crate::handles::{NativeChatStream, NativeLease, NativeStream};
use crate::views::view;

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
    /// Who the call is made for; it goes into the audit record only.
    pub principal: Option<&'a Bound<'py, PyAny>>,
}

fn present<'a, 'py>(v: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    v.filter(|v| !v.is_none())
}

/// A `str` as UTF-8; a lone surrogate (which UTF-8 cannot encode) is a `ConfigError` naming `field`.
pub fn text<'a>(field: &str, s: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    let py = s.py();
    s.to_cow().map_err(|e| if e.is_instance_of::<PyUnicodeEncodeError>(py) { to_py(py, core_json::lone_surrogate(field)) } else { e })
}

pub fn string(field: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(text(field, s)?.into_owned()),
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
        return Ok(text(field, s)?.into_owned());
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
        (Some(j), None) => json_text(j, JsonMode::Body).map(Body::JsonText),
        (None, Some(c)) => bytes_like("content", c).map(Body::Bytes),
        (None, None) => Ok(Body::Empty),
    }
}

/// Bytes, a bytearray, a buffer with `tobytes()` (memoryview), or a str as UTF-8.
pub fn bytes_like(field: &str, c: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = c.cast::<PyBytes>() {
        Ok(Bytes::copy_from_slice(b.as_bytes()))
    } else if let Ok(s) = c.cast::<PyString>() {
        Ok(Bytes::copy_from_slice(text(field, s)?.as_bytes()))
    } else if let Ok(b) = c.cast::<PyByteArray>() {
        Ok(Bytes::from(b.to_vec()))
    } else if let Ok(m) = c.call_method0("tobytes").and_then(|b| b.cast_into::<PyBytes>().map_err(Into::into)) {
        Ok(Bytes::copy_from_slice(m.as_bytes()))
    } else {
        Err(config_error(c.py(), format!("{field}: expected bytes or str, got {}", type_name(c))))
    }
}

// ---- JSON: a Python value walked into the core's JsonWriter ---------------------------------

/// What a walk accepts besides the plain JSON types.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum JsonMode {
    /// A `json=` body: exactly what `json.dumps(value, allow_nan=False)` accepts.
    Body,
    /// Chat `messages`: accepted as a body is.
    Messages,
    /// Chat-completions parameters (`temperature=...`): accepted as a body is.
    Params,
    /// A config dict: also any `Mapping`, `Sequence`, `set` and `frozenset` (as lists), as configs always took.
    Config,
    /// An idempotent handler's result, stored as JSON text: accepted as a body is.
    Result,
    /// A mock's answer (`client.mock(..., json=...)`): accepted as a body is.
    Mock,
}

impl JsonMode {
    fn field(self) -> &'static str {
        match self {
            JsonMode::Body => "json",
            JsonMode::Messages => "messages",
            JsonMode::Params => "params",
            JsonMode::Config => "config",
            JsonMode::Result => "result",
            JsonMode::Mock => "mock.json",
        }
    }
}

/// An open list or dict of the walk: its items and the index of the next one.
enum Frame<'py> {
    Array { items: Bound<'py, PySequence>, next: usize },
    Object { items: Bound<'py, PyList>, next: usize },
}

enum Fault {
    /// The value being written is refused; the error gets its location.
    Here(HarnessError),
    /// The value is refused as a whole (the nesting limit).
    Whole(HarnessError),
    /// A Python exception raised by the value itself (a dict subclass's `items()`...).
    Py(PyErr),
}

impl From<PyErr> for Fault {
    fn from(e: PyErr) -> Self {
        Fault::Py(e)
    }
}

type Walk<T> = Result<T, Fault>;

fn refuse(message: String) -> Fault {
    Fault::Here(HarnessError::config(message))
}

/// JSON text for a Python value, as `json.dumps(value, allow_nan=False)` would write it (keys
/// in dict order, ints of any size exact, floats as `float.__repr__`), checked by the core's
/// writer. Iterative: the only stack is `frames`, which the writer caps at `MAX_DEPTH`, so
/// no depth and no self-reference can overflow anything.
pub fn json_text(root: &Bound<'_, PyAny>, mode: JsonMode) -> PyResult<Bytes> {
    let py = root.py();
    let mut w = JsonWriter::new(mode.field());
    let mut frames = Vec::new();
    match walk(&mut w, &mut frames, root, mode) {
        Ok(()) => Ok(w.finish()),
        Err(Fault::Py(e)) => Err(e),
        Err(Fault::Whole(e)) => Err(to_py(py, e)),
        Err(Fault::Here(e)) => match location(&frames, mode) {
            Some(at) => Err(config_error(py, format!("{} (at {at})", e.message))),
            None => Err(to_py(py, e)),
        },
    }
}

fn walk<'py>(w: &mut JsonWriter, frames: &mut Vec<Frame<'py>>, root: &Bound<'py, PyAny>, mode: JsonMode) -> Walk<()> {
    let field = mode.field();
    let mut value = Some(root.clone());
    loop {
        if let Some(v) = value.take() {
            if let Some(frame) = write_value(w, &v, mode)? {
                frames.push(frame);
            }
        }
        let Some(top) = frames.last_mut() else { return Ok(()) };
        match top {
            Frame::Array { items, next } if *next < items.len()? => {
                value = Some(items.get_item(*next)?);
                *next += 1;
            }
            Frame::Array { .. } => {
                w.end_array();
                frames.pop();
            }
            Frame::Object { items, next } if *next < items.len() => {
                let item = items.get_item(*next)?;
                *next += 1;
                let Some(pair) = item.cast::<PyTuple>().ok().filter(|t| t.len() == 2) else {
                    return Err(refuse(format!("{field}: items() must give (key, value) tuples, got {}", type_name(&item))));
                };
                w.key(&key_text(field, &pair.get_item(0)?)?);
                value = Some(pair.get_item(1)?);
            }
            Frame::Object { .. } => {
                w.end_object();
                frames.pop();
            }
        }
    }
}

/// Writes a scalar, or opens a list or dict and returns its frame. The order of the checks
/// is `json.dumps`'s: str, None, bool (before int), int, float, list/tuple, dict.
fn write_value<'py>(w: &mut JsonWriter, v: &Bound<'py, PyAny>, mode: JsonMode) -> Walk<Option<Frame<'py>>> {
    let field = mode.field();
    if let Ok(s) = v.cast::<PyString>() {
        w.string(&walk_text(field, s)?);
    } else if v.is_none() {
        w.null();
    } else if let Ok(b) = v.cast::<PyBool>() {
        w.bool(b.is_true());
    } else if let Ok(i) = v.cast::<PyInt>() {
        match int_text(field, i)? {
            Ok(n) => w.i64(n),
            Err(digits) => w.number_text(&digits).map_err(Fault::Here)?,
        }
    } else if let Ok(f) = v.cast::<PyFloat>() {
        w.number_text(&float_text(field, f)?).map_err(Fault::Here)?;
    } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        return open_array(w, v.cast::<PySequence>().map_err(PyErr::from)?.clone());
    } else if let Ok(d) = v.cast::<PyDict>() {
        // A dict subclass's own items(), as json.dumps uses.
        let items = if d.is_exact_instance_of::<PyDict>() { d.items() } else { as_list(&v.call_method0("items")?)? };
        return open_object(w, items);
    } else if mode == JsonMode::Config && (v.is_instance_of::<PySet>() || v.is_instance_of::<PyFrozenSet>()) {
        return open_array(w, as_list(v)?.into_sequence());
    } else if mode == JsonMode::Config && v.is_instance_of::<PyMapping>() {
        return open_object(w, as_list(&v.call_method0("items")?)?);
    } else if mode == JsonMode::Config
        && v.is_instance_of::<PySequence>()
        && !(v.is_instance_of::<PyBytes>() || v.is_instance_of::<PyByteArray>())
    {
        return open_array(w, as_list(v)?.into_sequence());
    } else {
        return Err(refuse(format!("{field}: object of type {} is not JSON serializable", type_name(v))));
    }
    Ok(None)
}

fn open_array<'py>(w: &mut JsonWriter, items: Bound<'py, PySequence>) -> Walk<Option<Frame<'py>>> {
    w.begin_array().map_err(Fault::Whole)?;
    Ok(Some(Frame::Array { items, next: 0 }))
}

fn open_object<'py>(w: &mut JsonWriter, items: Bound<'py, PyList>) -> Walk<Option<Frame<'py>>> {
    w.begin_object().map_err(Fault::Whole)?;
    Ok(Some(Frame::Object { items, next: 0 }))
}

fn as_list<'py>(v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    Ok(PyList::type_object(v.py()).call1((v,))?.cast_into::<PyList>()?)
}

fn walk_text<'a>(field: &str, s: &'a Bound<'_, PyString>) -> Walk<Cow<'a, str>> {
    let py = s.py();
    s.to_cow().map_err(|e| if e.is_instance_of::<PyUnicodeEncodeError>(py) { Fault::Here(core_json::lone_surrogate(field)) } else { Fault::Py(e) })
}

/// A dict key as `json.dumps` turns it into a string: str as is, float as its repr,
/// `true`/`false`/`null`, int in decimal; anything else is refused.
fn key_text<'a>(field: &str, k: &'a Bound<'_, PyAny>) -> Walk<Cow<'a, str>> {
    if let Ok(s) = k.cast::<PyString>() {
        return walk_text(field, s);
    }
    if let Ok(f) = k.cast::<PyFloat>() {
        return Ok(float_text(field, f)?.into());
    }
    if let Ok(b) = k.cast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.into());
    }
    if k.is_none() {
        return Ok("null".into());
    }
    if let Ok(i) = k.cast::<PyInt>() {
        return Ok(match int_text(field, i)? {
            Ok(n) => n.to_string(),
            Err(digits) => digits,
        }
        .into());
    }
    Err(refuse(format!("{field}: keys must be str, int, float, bool or None, not {}", type_name(k))))
}

/// An int that fits i64 (the fast path), or else its exact decimal digits (`int.__repr__`,
/// which IntEnum and other subclasses do not override for json.dumps either).
fn int_text(field: &str, i: &Bound<'_, PyInt>) -> Walk<Result<i64, String>> {
    if let Ok(n) = i.extract::<i64>() {
        return Ok(Ok(n));
    }
    let py = i.py();
    let digits = PyInt::type_object(py)
        .call_method1(intern!(py, "__repr__"), (i,))
        // More digits than sys.get_int_max_str_digits() allows, as json.dumps reports too.
        .map_err(|e| refuse(format!("{field}: {e}")))?;
    Ok(Err(digits.str()?.to_cow()?.into_owned()))
}

/// `float.__repr__` (what json.dumps writes: `1e+16`, `0.1`); NaN and infinities are refused.
fn float_text(field: &str, f: &Bound<'_, PyFloat>) -> Walk<String> {
    let x = f.value();
    if !x.is_finite() {
        let spelled = if x.is_nan() { "nan" } else if x > 0.0 { "inf" } else { "-inf" };
        return Err(refuse(format!("{field}: {spelled} is not a JSON number (NaN and Infinity are refused)")));
    }
    let repr = if f.is_exact_instance_of::<PyFloat>() { f.repr()? } else { PyFloat::new(f.py(), x).repr()? };
    Ok(repr.to_cow()?.into_owned())
}

/// Where in the value the walk stopped (`json.items[2].name`), for an error message; None at the root.
fn location(frames: &[Frame<'_>], mode: JsonMode) -> Option<String> {
    const MAX_CHARS: usize = 200;
    let mut at = String::from(if mode == JsonMode::Config { "" } else { mode.field() });
    for frame in frames {
        match frame {
            Frame::Array { next, .. } => at.push_str(&format!("[{}]", next.saturating_sub(1))),
            Frame::Object { items, next } => {
                let key = items.get_item(next.saturating_sub(1)).and_then(|item| item.get_item(0)?.str());
                let key = key.map(|k| k.to_string_lossy().into_owned()).unwrap_or_else(|_| "?".into());
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(&key);
            }
        }
    }
    if frames.is_empty() || at.is_empty() {
        return None;
    }
    // Deep values keep the innermost part of their location.
    let chars = at.chars().count();
    Some(if chars > MAX_CHARS { format!("...{}", at.chars().skip(chars - MAX_CHARS).collect::<String>()) } else { at })
}

fn timeout(py: Python<'_>, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(v) = present(v) else { return Ok(None) };
    if v.is_instance_of::<PyBool>() || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>()) {
        return Err(config_error(py, format!("timeout_ms: expected an integer >= 0, got {}", type_name(v))));
    }
    // The core's rule for every language: a whole number of milliseconds >= 0.
    let ms: f64 = v.extract()?;
    harness_core::request::millis("timeout_ms", ms).map(Some).map_err(|e| to_py(py, e))
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
        principal: opt_string("principal", a.principal)?,
    })
}

/// The arguments of `client.mock(...)`, as the Python wrapper passes them.
pub struct MockArgs<'a, 'py> {
    pub service: &'a Bound<'py, PyAny>,
    pub method: &'a Bound<'py, PyAny>,
    pub path: &'a Bound<'py, PyAny>,
    pub status: &'a Bound<'py, PyAny>,
    pub json: Option<&'a Bound<'py, PyAny>>,
    pub body: Option<&'a Bound<'py, PyAny>>,
    pub headers: Option<&'a Bound<'py, PyAny>>,
    pub latency_ms: &'a Bound<'py, PyAny>,
}

/// A non-negative `int` (not a `bool`) for `field`; what it means is the core's to check.
fn count(field: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(config_error(v.py(), format!("{field}: expected an integer, got {}", type_name(v))));
    }
    v.extract::<u64>().map_err(|_| {
        let negative = v.lt(0).unwrap_or(false);
        config_error(v.py(), format!("{field}: expected an integer {}, got {v}", if negative { ">= 0" } else { "below 2**64" }))
    })
}

/// A status as the core takes it (a `u16`); the core checks the range it accepts.
fn status(v: &Bound<'_, PyAny>) -> PyResult<u16> {
    let n = count("mock.status", v)?;
    u16::try_from(n).map_err(|_| config_error(v.py(), format!("mock.status: expected an HTTP status, got {n}")))
}

/// `(service, method, path)` and the core's `MockResponse`; the core checks the service, the
/// path template, the status range, the headers and `json` with `body`.
pub fn mock(a: MockArgs<'_, '_>) -> PyResult<(String, String, String, MockResponse)> {
    let (service, method, path) = (string("service", a.service)?, string("method", a.method)?, string("path", a.path)?);
    let response = MockResponse {
        status: status(a.status)?,
        json: present(a.json).map(|j| json_value(j, JsonMode::Mock)).transpose()?,
        body: opt_string("mock.body", a.body)?,
        headers: present(a.headers).map(|h| pairs("mock.headers", h, false)).transpose()?.unwrap_or_default(),
        latency_ms: count("mock.latency_ms", a.latency_ms)?,
    };
    Ok((service, method, path, response))
}

/// The arguments of one chat call, as the Python wrapper passes them.
pub struct ChatArgs<'a, 'py> {
    pub route: &'a Bound<'py, PyAny>,
    pub messages: &'a Bound<'py, PyAny>,
    /// The chat-completions parameters (`temperature`, `max_tokens`...), a dict.
    pub params: Option<&'a Bound<'py, PyAny>>,
    pub headers: Option<&'a Bound<'py, PyAny>>,
    pub timeout_ms: Option<&'a Bound<'py, PyAny>>,
    pub traceparent: Option<&'a Bound<'py, PyAny>>,
    /// Who the call is made for; it goes into the audit record only.
    pub principal: Option<&'a Bound<'py, PyAny>>,
}

/// A Python value walked to JSON text (as `json=` is) and read back as a JSON value.
fn json_value(v: &Bound<'_, PyAny>, mode: JsonMode) -> PyResult<serde_json::Value> {
    let text = json_text(v, mode)?;
    let text = std::str::from_utf8(&text).expect("JsonWriter writes UTF-8");
    core_json::parse_checked(text).map_err(|e| config_error(v.py(), format!("{}: {e}", mode.field())))
}

/// The route name and the core's `ChatRequest`; the core checks messages and params.
pub fn chat(py: Python<'_>, a: ChatArgs<'_, '_>) -> PyResult<(String, ChatRequest)> {
    let route = string("route", a.route)?;
    let params = match present(a.params).map(|p| json_value(p, JsonMode::Params)).transpose()? {
        None => serde_json::Map::new(),
        Some(serde_json::Value::Object(map)) => map,
        Some(_) => return Err(config_error(py, "params: expected a dict of chat-completions parameters")),
    };
    let chat = ChatRequest {
        messages: json_value(a.messages, JsonMode::Messages)?,
        params,
        headers: present(a.headers).map(|h| pairs("extra_headers", h, false)).transpose()?.unwrap_or_default(),
        timeout_ms: timeout(py, a.timeout_ms)?,
        traceparent: opt_string("traceparent", a.traceparent)?,
        principal: opt_string("principal", a.principal)?,
    };
    Ok((route, chat))
}

/// The arguments of one embeddings call, as the Python wrapper passes them.
pub struct EmbedArgs<'a, 'py> {
    pub route: &'a Bound<'py, PyAny>,
    pub inputs: &'a Bound<'py, PyAny>,
    pub dimensions: Option<&'a Bound<'py, PyAny>>,
    pub headers: Option<&'a Bound<'py, PyAny>>,
    pub timeout_ms: Option<&'a Bound<'py, PyAny>>,
    pub traceparent: Option<&'a Bound<'py, PyAny>>,
    /// Who the call is made for; it goes into the audit record only.
    pub principal: Option<&'a Bound<'py, PyAny>>,
}

/// The texts to embed: a list or tuple of `str` (a lone `str` is refused: it is not a list).
fn texts(v: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let py = v.py();
    let expected = || config_error(py, format!("inputs: expected a list of strings, got {}", type_name(v)));
    if !(v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>()) {
        return Err(expected());
    }
    let mut out = Vec::with_capacity(v.len().unwrap_or(0));
    for (i, item) in v.try_iter()?.enumerate() {
        let item = item?;
        match item.cast::<PyString>() {
            Ok(s) => out.push(text(&format!("inputs[{i}]"), s)?.into_owned()),
            Err(_) => return Err(config_error(py, format!("inputs[{i}]: expected a string, got {}", type_name(&item)))),
        }
    }
    Ok(out)
}

/// `dimensions`: an `int` (not a `bool`) from 1 up; the core refuses 0.
fn dimensions(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    let Some(v) = present(v) else { return Ok(None) };
    let n = count("dimensions", v)?;
    u32::try_from(n).map(Some).map_err(|_| config_error(v.py(), format!("dimensions: expected an integer from 1 to {}, got {n}", u32::MAX)))
}

/// The route name and the core's `EmbedRequest`; the core checks the inputs (at least one, none empty).
pub fn embed(py: Python<'_>, a: EmbedArgs<'_, '_>) -> PyResult<(String, EmbedRequest)> {
    let route = string("route", a.route)?;
    let req = EmbedRequest {
        inputs: texts(a.inputs)?,
        dimensions: dimensions(a.dimensions)?,
        headers: present(a.headers).map(|h| pairs("headers", h, false)).transpose()?.unwrap_or_default(),
        timeout_ms: timeout(py, a.timeout_ms)?,
        traceparent: opt_string("traceparent", a.traceparent)?,
        principal: opt_string("principal", a.principal)?,
    };
    Ok((route, req))
}

/// An embeddings answer: the view's fields (`count`, `dimensions`, `usage`...) and `data`,
/// every vector as little-endian float32 bytes one after another, written straight into one
/// `bytes` (the package cuts it into one `array('f')` per vector, a bulk copy each).
fn embedded<'py>(py: Python<'py>, r: &EmbedResponse) -> PyResult<Bound<'py, PyDict>> {
    let d = view(py, r)?;
    let data = PyBytes::new_with(py, r.data.len() * 4, |buf| {
        for (out, f) in buf.chunks_exact_mut(4).zip(&r.data) {
            out.copy_from_slice(&f.to_le_bytes());
        }
        Ok(())
    })?;
    d.set_item("data", data)?;
    Ok(d)
}

/// An operation's outcome as Python sees it: a response tuple, a native stream, bytes, a
/// view's dict (a chat answer with its `raw` bytes, a chat chunk), a lease or a stored
/// result; an error is the Harness exception of its kind.
pub fn outcome<'py>(py: Python<'py>, outcome: Result<Outcome, HarnessError>) -> PyResult<Bound<'py, PyAny>> {
    let o = outcome.map_err(|e| to_py(py, e))?;
    Ok(match o {
        Outcome::Response(r) => Reply(r).into_pyobject(py)?.into_any(),
        Outcome::Stream(s) => Bound::new(py, NativeStream::new(s))?.into_any(),
        Outcome::Chunk(Some(b)) => PyBytes::new(py, &b).into_any(),
        Outcome::Chunk(None) | Outcome::ChatChunk(None) | Outcome::Settled => py.None().into_bound(py),
        Outcome::Chat(r) => {
            let raw = content(py, r.raw.clone())?;
            let d = view(py, &r)?;
            d.set_item("raw", raw)?;
            d.into_any()
        }
        Outcome::ChatStream(s) => Bound::new(py, NativeChatStream::new(s))?.into_any(),
        Outcome::ChatChunk(Some(c)) => view(py, &c)?.into_any(),
        Outcome::Embed(r) => embedded(py, &r)?.into_any(),
        Outcome::Claimed(Claim::Run(lease)) => Bound::new(py, NativeLease { inner: lease })?.into_any(),
        Outcome::Claimed(Claim::Done(result)) => PyBytes::new(py, &result).into_any(),
    })
}

/// A finished response: `(status, [(name, value)], content, elapsed_ms, attempts, trace_id,
/// routed, cache)`, `routed` a dict for a request that named a route and `cache` the core's
/// `CacheStamp` dict when a cache had a part in the answer, each else `None`.
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
        let routed = r.routed.map(|b| view(py, &*b)).transpose()?;
        let cache = r.cache.map(|b| view(py, &*b)).transpose()?;
        (r.status, headers, content(py, r.body)?, r.elapsed_ms, r.attempts, r.trace_id, routed, cache).into_pyobject(py)
    }
}

/// From this size on, a body's Rust pages are released while it is copied into Python.
const RELEASE_MIN: usize = 1 << 20;
/// Copied per step; the Rust pages behind a step are released before the next one.
const RELEASE_STEP: usize = 4 << 20;

/// The body as a real `bytes`, which must hold its data inline, so one copy is unavoidable.
/// A large, uniquely owned body is copied in steps and the Rust pages already copied are
/// released as it goes: an N-byte body peaks at N plus one step in RSS instead of 2N.
fn content<'py>(py: Python<'py>, body: Bytes) -> PyResult<Bound<'py, PyBytes>> {
    if body.len() < RELEASE_MIN {
        return Ok(PyBytes::new(py, &body));
    }
    let mut owned = match body.try_into_mut() {
        Ok(owned) => owned,
        Err(shared) => return Ok(PyBytes::new(py, &shared)),
    };
    let len = owned.len();
    // SAFETY: PyBytes_FromStringAndSize(NULL, n) returns a new reference (or NULL with an
    // exception set) to a bytes object whose n bytes are uninitialised (not touched, so not
    // yet resident); they are all written below before the object is returned.
    let out = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as ffi::Py_ssize_t))?
            .cast_into_unchecked::<PyBytes>()
    };
    // SAFETY: `out` is a bytes object, whose buffer is valid for `len` bytes.
    let dst = unsafe { ffi::PyBytes_AsString(out.as_ptr()) } as usize;
    let src = &mut owned[..];
    // Without the GIL: nothing else can reach `out` yet, and other threads need not wait for a big copy.
    py.detach(|| copy_releasing(src, dst as *mut u8));
    Ok(out)
}

/// Copies `src` to `dst` step by step, releasing each whole page of `src` once copied.
fn copy_releasing(src: &mut [u8], dst: *mut u8) {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let base = src.as_mut_ptr() as usize;
    let mut released = base.next_multiple_of(page) - base; // offset of the first whole page
    let mut done = 0;
    while done < src.len() {
        let n = RELEASE_STEP.min(src.len() - done);
        // SAFETY: `dst` is valid for `src.len()` bytes and does not overlap `src`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(done), dst.add(done), n) };
        done += n;
        let end = (base + done) / page * page - base;
        if end > released {
            // SAFETY: whole pages inside a heap buffer we own exclusively (`&mut`), which
            // malloc maps private and anonymous: afterwards they read as zeros (never read
            // again) and hold no memory; the buffer is freed as usual when it drops.
            unsafe { libc::madvise(src.as_mut_ptr().add(released).cast(), end - released, libc::MADV_DONTNEED) };
            released = end;
        }
    }
}

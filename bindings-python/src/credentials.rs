//! The core's `TokenProvider`, implemented once for Python. Each fetch calls the host
//! function on a short-lived thread of its own (a runtime worker never waits for the GIL);
//! `harness._credentials.TokenProvider` runs a coroutine on the loop captured at
//! `set_token_provider`, and the answer comes back through a oneshot channel fed by
//! `deliver`, which may run on that loop's thread. Translation only: the core owns
//! single-flight, timeouts and caching.

use std::sync::Arc;

use harness_core::credentials::secret::Secret;
use harness_core::transport::BoxFuture;
use harness_core::{ProviderError, Token, TokenProvider};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyCFunction, PyDict, PyFloat, PyInt, PyString, PyTuple};
use tokio::sync::oneshot;

use crate::callbacks;

type Answer = Result<Token, ProviderError>;
type Reply = Arc<Mutex<Option<oneshot::Sender<Answer>>>>;

const EXPECTED: &str = "expected {\"token\": str, \"expires_in\": seconds or None} or a (token, expires_in) tuple";

pub struct PyTokenProvider {
    /// A `harness._credentials.TokenProvider`: called as `adapter(deliver)`.
    adapter: Arc<Py<PyAny>>,
}

impl PyTokenProvider {
    pub fn new(adapter: Py<PyAny>) -> Self {
        PyTokenProvider { adapter: Arc::new(adapter) }
    }
}

impl TokenProvider for PyTokenProvider {
    fn fetch(&self) -> BoxFuture<'_, Answer> {
        let adapter = self.adapter.clone();
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            let reply: Reply = Arc::new(Mutex::new(Some(tx)));
            let thread = std::thread::Builder::new().name("harness-token".into()).spawn(move || call(&adapter, reply));
            if let Err(e) = thread {
                return Err(ProviderError::new(format!("could not start the token provider's thread: {e}")));
            }
            rx.await.unwrap_or_else(|_| Err(ProviderError::new("the token provider finished without an answer")))
        })
    }
}

fn send(reply: &Reply, answer: Answer) {
    if let Some(tx) = reply.lock().take() {
        let _ = tx.send(answer); // the refresh timed out and stopped listening: nothing to do
    }
}

/// On the provider's own thread: runs the host function; its answer arrives through `deliver`.
fn call(adapter: &Py<PyAny>, reply: Reply) {
    if callbacks::exiting() {
        return send(&reply, Err(ProviderError::new("the Python interpreter is exiting")));
    }
    let outcome = Python::try_attach(|py| -> PyResult<()> {
        let to = reply.clone();
        // deliver(ok, value): the provider's answer, or the exception it raised.
        let deliver = PyCFunction::new_closure(py, Some(c"deliver"), None, move |args, _kw| -> PyResult<()> {
            let (ok, value): (bool, Bound<'_, PyAny>) = args.extract()?;
            let answer = if ok { token(&value) } else { Err(ProviderError::new(callbacks::describe(args.py(), PyErr::from_value(value)))) };
            send(&to, answer);
            Ok(())
        })?;
        adapter.bind(py).call1((deliver,))?;
        Ok(())
    });
    match outcome {
        None => send(&reply, Err(ProviderError::new("the Python interpreter is not available"))),
        Some(Err(e)) => {
            let message = Python::try_attach(|py| callbacks::describe(py, e)).unwrap_or_else(|| "the token provider failed".into());
            send(&reply, Err(ProviderError::new(message)))
        }
        Some(Ok(())) => {}
    }
}

/// The provider's answer as a core `Token`. Errors name what was expected, never the value.
fn token(value: &Bound<'_, PyAny>) -> Answer {
    let bad = |what: String| Err(ProviderError::new(format!("the token provider {what}; {EXPECTED}")));
    let (token, expires_in) = if let Ok(d) = value.cast::<PyDict>() {
        match d.get_item("token") {
            Ok(Some(t)) => (t, d.get_item("expires_in").ok().flatten()),
            _ => return bad("returned a dict without \"token\"".into()),
        }
    } else if let Some(t) = value.cast::<PyTuple>().ok().filter(|t| t.len() == 2) {
        (t.get_item(0).expect("len 2"), Some(t.get_item(1).expect("len 2")))
    } else {
        return bad(format!("returned {}", type_name(value)));
    };
    let Ok(token) = token.cast::<PyString>().map(|s| s.to_string()) else {
        return bad(format!("returned a token of type {}, not str", type_name(&token)));
    };
    if token.is_empty() {
        return bad("returned an empty token".into());
    }
    let expires_in = match expires_in.filter(|e| !e.is_none()) {
        None => None,
        Some(e) if e.is_instance_of::<PyBool>() || !(e.is_instance_of::<PyInt>() || e.is_instance_of::<PyFloat>()) => {
            return bad(format!("returned expires_in of type {}, not a number of seconds", type_name(&e)));
        }
        Some(e) => match e.extract::<f64>().map_err(|e| e.to_string()).and_then(Token::lifetime_from_secs) {
            Ok(d) => Some(d),
            Err(why) => return bad(format!("returned an invalid expires_in: {why}")),
        },
    };
    Ok(Token { value: Secret::new(token), expires_in })
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "an object".into())
}

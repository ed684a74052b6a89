//! The core's `EventSink`, implemented once for Python: on the client's event thread
//! (a plain thread, never a runtime worker) it takes the GIL, builds a `harness.Event`
//! and calls a Python callable with it. Listeners and the `logging` sink both use it;
//! coroutine listeners are scheduled on their loop by the Python side (`harness._events`).
//!
//! At interpreter exit (`atexit`, before finalization) `shut_down` waits for calls in
//! progress and stops every later one: a thread must not enter a finalizing interpreter.
//!
//! `call_on_thread` is how host functions that answer with JSON (host adapters,
//! interceptors) are called: on a short-lived thread of their own, answering by `deliver`.

use std::sync::Arc;

use harness_core::{Event, EventSink};
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyString};
use tokio::sync::oneshot;

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

type Reply = Arc<Mutex<Option<oneshot::Sender<Result<String, String>>>>>;

/// Calls `host(step, input, deliver)` on a short-lived thread named `thread` (a runtime
/// worker never waits for the GIL) and waits for `deliver(ok, value)`: `value` is the JSON
/// text of the answer, or the exception raised (as `TypeName: message`). `deliver` may be
/// called later from another thread (an event loop's, for a coroutine). Host adapters and
/// interceptors both cross this way.
pub async fn call_on_thread(thread: &str, host: Arc<Py<PyAny>>, step: &'static str, input: String) -> Result<String, String> {
    let (tx, rx) = oneshot::channel();
    let reply: Reply = Arc::new(Mutex::new(Some(tx)));
    let spawned = std::thread::Builder::new().name(thread.into()).spawn(move || enter(&host, step, input, reply));
    if let Err(e) = spawned {
        return Err(format!("could not start the {thread} thread: {e}"));
    }
    rx.await.unwrap_or_else(|_| Err("the host function finished without an answer".into()))
}

fn send(reply: &Reply, answer: Result<String, String>) {
    if let Some(tx) = reply.lock().take() {
        let _ = tx.send(answer); // the call's deadline passed and nobody listens: nothing to do
    }
}

/// On the host call's own thread: runs it; its answer arrives through `deliver`.
fn enter(host: &Py<PyAny>, step: &str, input: String, reply: Reply) {
    if exiting() {
        return send(&reply, Err("the Python interpreter is exiting".into()));
    }
    let outcome = Python::try_attach(|py| -> PyResult<()> {
        let to = reply.clone();
        let deliver = PyCFunction::new_closure(py, Some(c"deliver"), None, move |args, _kw| -> PyResult<()> {
            let (ok, value): (bool, Bound<'_, PyAny>) = args.extract()?;
            let answer = if !ok {
                Err(describe(args.py(), PyErr::from_value(value)))
            } else {
                match value.cast::<PyString>() {
                    Ok(s) => s.to_cow().map(|t| t.into_owned()).map_err(|e| describe(args.py(), e)),
                    Err(_) => Err("TypeError: the answer did not become JSON text".into()),
                }
            };
            send(&to, answer);
            Ok(())
        })?;
        host.bind(py).call1((step, input, deliver))?;
        Ok(())
    });
    match outcome {
        None => send(&reply, Err("the Python interpreter is not available".into())),
        Some(Err(e)) => {
            let message = Python::try_attach(|py| describe(py, e)).unwrap_or_else(|| "the host function failed".into());
            send(&reply, Err(message))
        }
        Some(Ok(())) => {}
    }
}

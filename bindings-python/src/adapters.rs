//! The core's `HostAdapter`, implemented once for Python, the way token providers are
//! (`credentials.rs`): each step calls the host object on a short-lived thread of its own (a
//! runtime worker never waits for the GIL); `harness._adapters.HostAdapter` turns the core's
//! JSON text into a dict, calls the method, runs a coroutine on the loop captured at
//! `register_adapter`, and hands `json.dumps` of the answer (or the exception raised) to
//! `deliver`, which may run on that loop's thread. Translation only: the core owns the
//! deadline, the checks of what comes back and the errors naming the adapter and the step.

use std::sync::Arc;

use harness_core::adapters::host::HostStep;
use harness_core::adapters::HostAdapter;
use harness_core::transport::BoxFuture;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyString};
use tokio::sync::oneshot;

use crate::callbacks;

type Answer = Result<String, String>;
type Reply = Arc<Mutex<Option<oneshot::Sender<Answer>>>>;

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
    fn call(&self, step: HostStep, input: String) -> BoxFuture<'_, Answer> {
        let adapter = self.adapter.clone();
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            let reply: Reply = Arc::new(Mutex::new(Some(tx)));
            let thread = std::thread::Builder::new().name("harness-adapter".into()).spawn(move || call(&adapter, step, input, reply));
            if let Err(e) = thread {
                return Err(format!("could not start the adapter's thread: {e}"));
            }
            rx.await.unwrap_or_else(|_| Err("the adapter finished without an answer".into()))
        })
    }
}

fn send(reply: &Reply, answer: Answer) {
    if let Some(tx) = reply.lock().take() {
        let _ = tx.send(answer); // the call's deadline passed and nobody listens: nothing to do
    }
}

/// On the adapter's own thread: runs the host method; its answer arrives through `deliver`.
fn call(adapter: &Py<PyAny>, step: HostStep, input: String, reply: Reply) {
    if callbacks::exiting() {
        return send(&reply, Err("the Python interpreter is exiting".into()));
    }
    let outcome = Python::try_attach(|py| -> PyResult<()> {
        let to = reply.clone();
        // deliver(ok, value): the JSON text of the method's answer, or the exception it raised.
        let deliver = PyCFunction::new_closure(py, Some(c"deliver"), None, move |args, _kw| -> PyResult<()> {
            let (ok, value): (bool, Bound<'_, PyAny>) = args.extract()?;
            let answer = if !ok {
                Err(callbacks::describe(args.py(), PyErr::from_value(value)))
            } else {
                match value.cast::<PyString>() {
                    Ok(s) => s.to_cow().map(|t| t.into_owned()).map_err(|e| callbacks::describe(args.py(), e)),
                    Err(_) => Err("TypeError: the adapter's answer did not become JSON text".into()),
                }
            };
            send(&to, answer);
            Ok(())
        })?;
        adapter.bind(py).call1((step.as_str(), input, deliver))?;
        Ok(())
    });
    match outcome {
        None => send(&reply, Err("the Python interpreter is not available".into())),
        Some(Err(e)) => {
            let message = Python::try_attach(|py| callbacks::describe(py, e)).unwrap_or_else(|| "the adapter failed".into());
            send(&reply, Err(message))
        }
        Some(Ok(())) => {}
    }
}

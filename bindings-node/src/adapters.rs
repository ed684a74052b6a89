//! Host adapters written in JS (`client.registerAdapter(name, { buildRequest, parseResponse,
//! parseStreamEvent })`), run the way token providers are (`credentials.rs`).
//!
//! `NodeHostAdapter` is the core's `HostAdapter` for a JS object. The core calls `call` on its
//! runtime; it registers a oneshot under a fresh id and asks the JS thread, through a weak
//! threadsafe function (it never keeps the process alive), to run the object's method for that
//! step with the input's JSON text. The JS wrapper (`index.js`) parses the input, awaits the
//! method's result (a value or a Promise), stringifies it and settles the id with
//! `adapterResolve`, or with `adapterReject` and `"<Name>: <message>"` when it threw or
//! rejected. A call the core gives up on (the request's deadline) drops its oneshot and forgets
//! the id; a late answer is then ignored.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use harness_core::adapters::host::HostStep;
use harness_core::adapters::HostAdapter;
use harness_core::transport::BoxFuture;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use tokio::sync::oneshot;

type Answer = std::result::Result<String, String>;

/// What `ask` is called with: the call's id, the step (`build_request`, ...) and its input.
pub(crate) type AskArgs = FnArgs<(u32, &'static str, String)>;

/// Calls `(id, step, input) => ...` on the JS thread; plain arguments, weak.
type Ask = ThreadsafeFunction<AskArgs, Unknown<'static>, AskArgs, Status, false, true>;

/// Calls waiting for JS, by id (one table per process: ids are unique across adapters).
fn waiting() -> MutexGuard<'static, HashMap<u32, oneshot::Sender<Answer>>> {
    static WAITING: OnceLock<Mutex<HashMap<u32, oneshot::Sender<Answer>>>> = OnceLock::new();
    WAITING.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

static LAST_ID: AtomicU32 = AtomicU32::new(0);

/// Forgets its id when the call ends or is dropped (the core's deadline passed).
struct Forget(u32);

impl Drop for Forget {
    fn drop(&mut self) {
        waiting().remove(&self.0);
    }
}

pub(crate) struct NodeHostAdapter {
    ask: Ask,
}

impl HostAdapter for NodeHostAdapter {
    fn call(&self, step: HostStep, input: String) -> BoxFuture<'_, Answer> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut w = waiting();
            let mut id;
            loop {
                id = LAST_ID.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
                if id != 0 && !w.contains_key(&id) {
                    break;
                }
            }
            w.insert(id, tx);
            id
        };
        let forget = Forget(id);
        let status = self.ask.call(FnArgs::from((id, step.as_str(), input)), ThreadsafeFunctionCallMode::NonBlocking);
        Box::pin(async move {
            let _forget = forget;
            if status != Status::Ok {
                return Err(format!("Error: the Node adapter could not be called ({status})"));
            }
            rx.await.unwrap_or_else(|_| Err("Error: the Node adapter was dropped before it answered".to_string()))
        })
    }
}

fn settle(id: u32, answer: Answer) {
    // Sent outside the table's lock; a call already given up on is not in the table.
    let tx = waiting().remove(&id);
    if let Some(tx) = tx {
        let _ = tx.send(answer);
    }
}

/// The adapter's answer for call `id`: its result as JSON text (the core parses and checks it).
#[napi]
pub fn adapter_resolve(id: u32, json: String) {
    settle(id, Ok(json));
}

/// The adapter threw or its promise rejected (`message` is `"<Name>: <message>"`).
#[napi]
pub fn adapter_reject(id: u32, message: String) {
    settle(id, Err(message));
}

/// `ask` is `(id, step, input) => ...`: it runs the JS adapter's method and settles `id`.
pub(crate) fn node_adapter(ask: Function<AskArgs, Unknown<'static>>) -> Result<Arc<dyn HostAdapter>> {
    let ask = ask.build_threadsafe_function().callee_handled::<false>().weak::<true>().build()?;
    Ok(Arc::new(NodeHostAdapter { ask }))
}

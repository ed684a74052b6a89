//! Calls from the core into JS that answer with JSON text: host adapters (`adapters.rs`) and
//! interceptors (`interceptors.rs`), run the way token providers are (`credentials.rs`).
//!
//! `JsHost::call` runs on the core's runtime; it registers a oneshot under a fresh id and asks
//! the JS thread, through a weak threadsafe function (it never keeps the process alive), to
//! run the host function for that step with the input's JSON text. The JS wrapper
//! (`index.js`) parses the input, awaits the function's result (a value or a Promise),
//! stringifies it and settles the id with `hostResolve`, or with `hostReject` and
//! `"<Name>: <message>"` when it threw or rejected. No tokio worker ever waits on JS: the
//! future awaits the oneshot. A call the core gives up on (a deadline, `interceptors.timeout_ms`)
//! drops its oneshot and forgets the id; a late answer is then ignored.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use harness_core::transport::BoxFuture;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use tokio::sync::oneshot;

pub(crate) type Answer = std::result::Result<String, String>;

/// What `ask` is called with: the call's id, the step (`build_request`, `before`, ...) and its input.
pub(crate) type AskArgs = FnArgs<(u32, &'static str, String)>;

/// Calls `(id, step, input) => ...` on the JS thread; plain arguments, weak.
type Ask = ThreadsafeFunction<AskArgs, Unknown<'static>, AskArgs, Status, false, true>;

/// Calls waiting for JS, by id (one table per process: ids are unique across hosts).
fn waiting() -> MutexGuard<'static, HashMap<u32, oneshot::Sender<Answer>>> {
    static WAITING: OnceLock<Mutex<HashMap<u32, oneshot::Sender<Answer>>>> = OnceLock::new();
    WAITING.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

static LAST_ID: AtomicU32 = AtomicU32::new(0);

/// Forgets its id when the call ends or is dropped (the core gave up on it).
struct Forget(u32);

impl Drop for Forget {
    fn drop(&mut self) {
        waiting().remove(&self.0);
    }
}

/// A JS object's functions, reached by step name; `what` names it in the binding's own errors.
pub(crate) struct JsHost {
    ask: Ask,
    what: &'static str,
}

impl JsHost {
    /// `ask` is `(id, step, input) => ...`: it runs the host function and settles `id`.
    pub(crate) fn new(ask: Function<AskArgs, Unknown<'static>>, what: &'static str) -> Result<JsHost> {
        let ask = ask.build_threadsafe_function().callee_handled::<false>().weak::<true>().build()?;
        Ok(JsHost { ask, what })
    }

    pub(crate) fn call(&self, step: &'static str, input: String) -> BoxFuture<'_, Answer> {
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
        let status = self.ask.call(FnArgs::from((id, step, input)), ThreadsafeFunctionCallMode::NonBlocking);
        let what = self.what;
        Box::pin(async move {
            let _forget = forget;
            if status != Status::Ok {
                return Err(format!("Error: the Node {what} could not be called ({status})"));
            }
            rx.await.unwrap_or_else(|_| Err(format!("Error: the Node {what} was dropped before it answered")))
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

/// The host function's answer for call `id`: its result as JSON text (the core parses and checks it).
#[napi]
pub fn host_resolve(id: u32, json: String) {
    settle(id, Ok(json));
}

/// The host function threw or its promise rejected (`message` is `"<Name>: <message>"`).
#[napi]
pub fn host_reject(id: u32, message: String) {
    settle(id, Err(message));
}

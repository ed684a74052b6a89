//! Host token providers (the credential state crosses as a view, `client.rs`).
//!
//! `NodeTokenProvider` is the core's `TokenProvider` for a JS function. The core calls
//! `fetch` on its runtime; it registers a oneshot under a fresh id and asks the JS thread,
//! through a weak threadsafe function (it never keeps the process alive), to run the
//! provider for that id. The JS wrapper (`index.js`) awaits the function's result (a value
//! or a Promise) and settles the id with `tokenResolve` or `tokenReject`. A fetch the core
//! gives up on (its `refresh.timeout_ms`) drops its oneshot and forgets the id; a late
//! answer is then ignored. Nothing here ever puts a token into a message.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use harness_core::credentials::secret::Secret;
use harness_core::transport::BoxFuture;
use harness_core::{ProviderError, Token, TokenProvider};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use tokio::sync::oneshot;

type Answer = std::result::Result<Token, ProviderError>;

/// Calls `(id) => ...` on the JS thread; plain arguments, weak.
type Ask = ThreadsafeFunction<u32, Unknown<'static>, u32, Status, false, true>;

/// Fetches waiting for JS, by id (one table per process: ids are unique across providers).
fn waiting() -> MutexGuard<'static, HashMap<u32, oneshot::Sender<Answer>>> {
    static WAITING: OnceLock<Mutex<HashMap<u32, oneshot::Sender<Answer>>>> = OnceLock::new();
    WAITING.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

static LAST_ID: AtomicU32 = AtomicU32::new(0);

/// Forgets its id when the fetch ends or is dropped (the core timed it out).
struct Forget(u32);

impl Drop for Forget {
    fn drop(&mut self) {
        waiting().remove(&self.0);
    }
}

pub(crate) struct NodeTokenProvider {
    ask: Ask,
}

impl TokenProvider for NodeTokenProvider {
    fn fetch(&self) -> BoxFuture<'_, Answer> {
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
        let status = self.ask.call(id, ThreadsafeFunctionCallMode::NonBlocking);
        Box::pin(async move {
            let _forget = forget;
            if status != Status::Ok {
                return Err(ProviderError::new(format!("the Node token provider could not be called ({status})")));
            }
            rx.await.unwrap_or_else(|_| Err(ProviderError::new("the Node token provider was dropped before it answered")))
        })
    }
}

fn settle(id: u32, answer: Answer) {
    // Sent outside the table's lock; a fetch already given up on is not in the table.
    let tx = waiting().remove(&id);
    if let Some(tx) = tx {
        let _ = tx.send(answer);
    }
}

/// The provider's answer for fetch `id`: the token and, if it expires, its lifetime in seconds.
/// `index.js` has checked the types; the lifetime rule is the core's (`Token::lifetime_from_secs`).
#[napi]
pub fn token_resolve(id: u32, token: String, expires_in: Option<f64>) {
    let expires_in = match expires_in {
        None => None,
        Some(s) => match Token::lifetime_from_secs(s) {
            Ok(d) => Some(d),
            Err(why) => return settle(id, Err(ProviderError::new(format!("token provider: expiresIn: {why}")))),
        },
    };
    settle(id, Ok(Token { value: Secret::new(token), expires_in }));
}

/// The provider threw or its promise rejected (`message` is the host error's message).
#[napi]
pub fn token_reject(id: u32, message: String) {
    settle(id, Err(ProviderError::new(message)));
}

/// `ask` is `(id) => ...`: it runs the JS provider and settles `id`.
pub(crate) fn node_provider(ask: Function<u32, Unknown<'static>>) -> Result<Arc<dyn TokenProvider>> {
    let ask = ask.build_threadsafe_function().callee_handled::<false>().weak::<true>().build()?;
    Ok(Arc::new(NodeTokenProvider { ask }))
}

//! The request path: one downcall starts a request, one upcall delivers its outcome.
//!
//! UniFFI's async protocol costs several JNA calls per request, each with by-value
//! structures the JVM must allocate and clean up (measured: most of the binding's CPU).
//! These three C functions take and return only integers and one byte array; the request
//! and its outcome travel in UniFFI's own serialisation of `NativeRequest`,
//! `NativeResponse` and `NativeError`, so both sides use the generated converters.
//!
//! Ownership: `harness_kotlin_start` returns a boxed `Task` (0 when it failed at once and
//! the outcome was already delivered); the JVM drops it exactly once with
//! `harness_kotlin_drop`, which aborts the request (freeing its permits) if it is still
//! running. Nothing here unwinds into the JVM: every entry point catches panics.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use harness_core::runtime::{self, Task};
use harness_core::{ErrorKind, HarnessError, Request};
use uniffi::{Lift, Lower};

use crate::{NativeClient, NativeError, NativeRequest, NativeResponse, UniFfiTag};

/// The JVM's completion function: (ticket, outcome bytes, length). The bytes are valid
/// only during the call: a tag byte (0 = `NativeResponse`, 1 = `NativeError`), then the value.
type Completion = extern "C" fn(ticket: i64, data: *const u8, len: u64);

static COMPLETION: AtomicUsize = AtomicUsize::new(0);

/// Registers the JVM's completion function (once per class load of the facade).
#[no_mangle]
pub extern "C" fn harness_kotlin_set_completion(completion: Option<Completion>) {
    COMPLETION.store(completion.map_or(0, |f| f as usize), Ordering::Release);
}

/// Starts `request` (serialised `NativeRequest`, `len` bytes) on the client at `client`
/// (`NativeClient::address`). The outcome is delivered to the completion function with
/// `ticket`; the return value is the task to drop, or 0 if the outcome was already delivered.
///
/// # Safety
/// `client` must be the address of a live `NativeClient` for the duration of the call, and
/// `request` must point to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn harness_kotlin_start(client: u64, ticket: i64, request: *const u8, len: u64) -> u64 {
    let started = catch_unwind(AssertUnwindSafe(|| {
        let bytes: &[u8] = if len == 0 { &[] } else { std::slice::from_raw_parts(request, len as usize) };
        start(&*(client as *const NativeClient), ticket, bytes)
    }));
    started.unwrap_or_else(|_| fail(ticket, bug("starting the request panicked")))
}

/// Drops a task returned by `harness_kotlin_start`: aborts the request if it is still running.
///
/// # Safety
/// `task` must come from `harness_kotlin_start` and be dropped only once.
#[no_mangle]
pub unsafe extern "C" fn harness_kotlin_drop(task: u64) {
    if task != 0 {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(task as *mut Task<()>))));
    }
}

/// The boxed task, or 0 once the outcome was delivered (a request that cannot start).
fn start(native: &NativeClient, ticket: i64, mut bytes: &[u8]) -> u64 {
    let request = match <NativeRequest as Lift<UniFfiTag>>::try_read(&mut bytes) {
        Ok(r) => r,
        Err(e) => return fail(ticket, bug(&format!("the request did not decode: {e}"))),
    };
    let request = match Request::try_from(request) {
        Ok(r) => r,
        Err(e) => return fail(ticket, e),
    };
    let client = native.client.clone();
    let spawned = runtime::spawn(async move {
        let outcome = match CatchUnwind(client.request(request)).await {
            Ok(result) => result.map(NativeResponse::from).map_err(NativeError::from),
            Err(_) => Err(bug("the request task panicked (a bug in Harness)")),
        };
        deliver(ticket, outcome);
    });
    match spawned {
        Ok(task) => Box::into_raw(Box::new(task)) as u64,
        Err(e) => fail(ticket, e.into()),
    }
}

fn fail(ticket: i64, error: NativeError) -> u64 {
    deliver(ticket, Err(error));
    0
}

fn deliver(ticket: i64, outcome: Result<NativeResponse, NativeError>) {
    let completion = COMPLETION.load(Ordering::Acquire);
    if completion == 0 {
        return;
    }
    // SAFETY: only `harness_kotlin_set_completion` stores here, and only `Completion`s.
    let completion: Completion = unsafe { std::mem::transmute::<usize, Completion>(completion) };
    let mut buf = Vec::with_capacity(match &outcome {
        Ok(r) => r.body.len() + 64 * r.headers.len() + 64,
        Err(_) => 256,
    });
    match outcome {
        Ok(response) => {
            buf.push(0);
            <NativeResponse as Lower<UniFfiTag>>::write(response, &mut buf);
        }
        Err(error) => {
            buf.push(1);
            <NativeError as Lower<UniFfiTag>>::write(error, &mut buf);
        }
    }
    completion(ticket, buf.as_ptr(), buf.len() as u64);
}

fn bug(message: &str) -> NativeError {
    HarnessError::new(ErrorKind::Harness, message.to_string()).into()
}

/// Turns a panic inside the request future into an outcome, so the JVM always hears back.
struct CatchUnwind<F>(F);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning; the inner future is never moved out.
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(poll) => poll.map(Ok),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicI64;
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    static OUTCOMES: Mutex<Option<HashMap<i64, Vec<u8>>>> = Mutex::new(None);
    static DELIVERED: Condvar = Condvar::new();
    static TICKETS: AtomicI64 = AtomicI64::new(1);

    extern "C" fn record(ticket: i64, data: *const u8, len: u64) {
        let bytes = unsafe { std::slice::from_raw_parts(data, len as usize) }.to_vec();
        OUTCOMES.lock().unwrap().get_or_insert_with(HashMap::new).insert(ticket, bytes);
        DELIVERED.notify_all();
    }

    /// Starts `request` and waits for its outcome: (task returned, tag byte, outcome bytes).
    fn run(client: &NativeClient, request: &[u8]) -> (u64, u8, Vec<u8>) {
        harness_kotlin_set_completion(Some(record));
        let ticket = TICKETS.fetch_add(1, Ordering::Relaxed);
        let task = unsafe { harness_kotlin_start(client.address(), ticket, request.as_ptr(), request.len() as u64) };
        let mut outcomes = OUTCOMES.lock().unwrap();
        let bytes = loop {
            if let Some(b) = outcomes.get_or_insert_with(HashMap::new).remove(&ticket) {
                break b;
            }
            outcomes = DELIVERED.wait_timeout(outcomes, Duration::from_secs(10)).unwrap().0;
        };
        drop(outcomes);
        unsafe { harness_kotlin_drop(task) };
        (task, bytes[0], bytes[1..].to_vec())
    }

    fn client() -> NativeClient {
        NativeClient::from_json(r#"{"services": {"svc": {"base_url": "http://127.0.0.1:1"}}}"#.into()).unwrap()
    }

    fn encoded(json: Option<&str>) -> Vec<u8> {
        encode(crate::tests::req(json))
    }

    fn encode(request: NativeRequest) -> Vec<u8> {
        let mut buf = Vec::new();
        <NativeRequest as Lower<UniFfiTag>>::write(request, &mut buf);
        buf
    }

    fn contains(haystack: &[u8], needle: &str) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    #[test]
    fn a_request_that_cannot_start_is_delivered_at_once_as_a_config_error() {
        let mut both = crate::tests::req(Some("{}"));
        both.body = Some(vec![1]);
        let (task, tag, outcome) = run(&client(), &encode(both));
        assert_eq!((task, tag), (0, 1));
        assert!(contains(&outcome, "ConfigError"));
    }

    #[test]
    fn a_json_body_nested_too_deep_is_a_config_error_from_the_core() {
        let c = NativeClient::from_json(r#"{"services": {"svc": {"base_url": "http://127.0.0.1:1"}}}"#.into()).unwrap();
        let deep = format!("{}0{}", "[".repeat(20_000), "]".repeat(20_000));
        let (_, tag, outcome) = run(&c, &encoded(Some(&deep)));
        assert_eq!(tag, 1);
        assert!(contains(&outcome, "ConfigError") && contains(&outcome, "nested deeper than 512"), "{}", String::from_utf8_lossy(&outcome));
    }

    #[test]
    fn bytes_that_do_not_decode_are_an_error_not_a_panic() {
        let (task, tag, outcome) = run(&client(), &[0xff, 0x00, 0x01]);
        assert_eq!((task, tag), (0, 1));
        assert!(contains(&outcome, "HarnessError"));
    }

    #[test]
    fn a_spawned_request_delivers_its_outcome() {
        let c = client();
        c.shutdown();
        let (task, tag, outcome) = run(&c, &encoded(None));
        assert_ne!(task, 0);
        assert_eq!(tag, 1);
        assert!(contains(&outcome, "closed"), "{}", String::from_utf8_lossy(&outcome));
    }
}

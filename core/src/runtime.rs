//! The one tokio runtime of the process, owned by the core.
//!
//! Created lazily, it records the PID that made it; use in a forked child gives a
//! clear `HarnessError` instead of a hang (tokio's threads do not survive fork).
//! Bindings `spawn` a request onto it and await the `Task` from any executor;
//! dropping the `Task` aborts the request and frees every permit it held.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

use crate::error::{ErrorKind, HarnessError};

struct Owned {
    runtime: Runtime,
    pid: u32,
}

static RUNTIME: OnceLock<Result<Owned, String>> = OnceLock::new();

/// The core's runtime handle; an error after a fork or if the runtime could not start.
pub fn handle() -> Result<Handle, HarnessError> {
    let owned = RUNTIME.get_or_init(|| {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.thread_name("harness-worker").enable_all();
        // Default: one worker per core. Hosts with a busy main thread (Node, asyncio) may want fewer.
        if let Some(n) = std::env::var("HARNESS_WORKER_THREADS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|n| *n > 0) {
            builder.worker_threads(n);
        }
        builder
            .build()
            .map(|runtime| Owned { runtime, pid: std::process::id() })
            .map_err(|e| e.to_string())
    });
    match owned {
        Ok(o) if o.pid == std::process::id() => Ok(o.runtime.handle().clone()),
        Ok(o) => Err(HarnessError::new(
            ErrorKind::Harness,
            format!(
                "the Harness runtime was started in process {} and cannot be used in forked child {}: create clients after fork (or use a spawn/forkserver start method)",
                o.pid,
                std::process::id()
            ),
        )),
        Err(e) => Err(HarnessError::new(ErrorKind::Harness, format!("cannot start the Harness runtime: {e}"))),
    }
}

/// A spawned piece of work; awaiting it gives the result, dropping it cancels the work.
pub struct Task<T> {
    join: JoinHandle<T>,
}

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.join.abort();
    }
}

impl<T> Future for Task<T> {
    type Output = Result<T, HarnessError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.join).poll(cx).map(|r| {
            r.map_err(|e| {
                if e.is_cancelled() {
                    HarnessError::new(ErrorKind::Cancelled, "the request was cancelled")
                } else {
                    HarnessError::new(ErrorKind::Harness, "the request task panicked (a bug in Harness)")
                }
            })
        })
    }
}

impl<T: Send + 'static> Task<T> {
    /// Blocks the calling (non-runtime) thread for at most `timeout`; `None` if not done yet,
    /// so a host can check for interrupts (Ctrl-C) between waits.
    pub fn wait_timeout(&mut self, timeout: std::time::Duration) -> Option<Result<T, HarnessError>> {
        let handle = match handle() {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        if Handle::try_current().is_ok() {
            return Some(Err(HarnessError::new(
                ErrorKind::Harness,
                "a blocking Harness call was made from inside an async runtime; use the async API",
            )));
        }
        handle.block_on(async { tokio::time::timeout(timeout, &mut *self).await.ok() })
    }
}

/// Spawns `fut` on the core runtime.
pub fn spawn<F>(fut: F) -> Result<Task<F::Output>, HarnessError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(Task { join: handle()?.spawn(fut) })
}

/// A call driven on the caller's own (non-runtime) thread: `wait_timeout` polls it
/// there, with sockets and timers served by the runtime's workers. Compared with
/// `spawn` + wait this saves a thread hand-off per call, which is what a blocking
/// host API (Python's sync client) pays for. Dropping it cancels the call.
pub struct BlockingCall<T> {
    fut: Pin<Box<dyn Future<Output = T> + Send>>,
    handle: Handle,
}

impl<T> BlockingCall<T> {
    pub fn new(fut: impl Future<Output = T> + Send + 'static) -> Result<Self, HarnessError> {
        Ok(BlockingCall { fut: Box::pin(fut), handle: handle()? })
    }

    /// Drives the call for at most `timeout`; `None` if not done yet, so the host can
    /// check for interrupts (Ctrl-C) between waits.
    pub fn wait_timeout(&mut self, timeout: std::time::Duration) -> Option<Result<T, HarnessError>> {
        if Handle::try_current().is_ok() {
            return Some(Err(HarnessError::new(
                ErrorKind::Harness,
                "a blocking Harness call was made from inside an async runtime; use the async API",
            )));
        }
        if let Err(e) = handle() {
            return Some(Err(e));
        }
        let fut = &mut self.fut;
        self.handle.block_on(async { tokio::time::timeout(timeout, fut).await.ok() }).map(Ok)
    }
}

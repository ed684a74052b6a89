//! The one tokio runtime of the process, owned by the core.
//!
//! Created lazily, it records the PID that made it. tokio's threads do not survive
//! fork: a forked child that asks for the runtime gets a fresh one of its own (the
//! parent's is left untouched, never dropped, since dropping it would wait on
//! threads that do not exist), and anything bound to the parent's runtime (a
//! client, a task) refuses with a clear `HarnessError` instead of hanging.
//! Bindings `spawn` a request onto it and await the `Task` from any executor;
//! dropping the `Task` aborts the request and frees every permit it held.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use std::task::{Context, Poll};

use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

use crate::error::{ErrorKind, HarnessError};

struct Owned {
    runtime: Runtime,
    pid: u32,
}

/// The runtime of the current process (a forked child replaces its parent's).
static RUNTIME: ArcSwapOption<Owned> = ArcSwapOption::const_empty();
/// Serialises starting a runtime; never held on the hot path.
static STARTING: Mutex<()> = Mutex::new(());

fn build() -> Result<Owned, HarnessError> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.thread_name("harness-worker").enable_all();
    // Default: one worker per core. Hosts with a busy main thread (Node, asyncio) may want fewer.
    if let Some(n) = std::env::var("HARNESS_WORKER_THREADS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|n| *n > 0) {
        builder.worker_threads(n);
    }
    builder
        .build()
        .map(|runtime| Owned { runtime, pid: std::process::id() })
        .map_err(|e| HarnessError::new(ErrorKind::Harness, format!("cannot start the Harness runtime: {e}")))
}

/// The core's runtime handle, started on first use in this process.
pub fn handle() -> Result<Handle, HarnessError> {
    let pid = std::process::id();
    if let Some(o) = RUNTIME.load().as_ref() {
        if o.pid == pid {
            return Ok(o.runtime.handle().clone());
        }
    }
    let _starting = STARTING.lock();
    let current = RUNTIME.load_full();
    if let Some(o) = current.as_ref() {
        if o.pid == pid {
            return Ok(o.runtime.handle().clone());
        }
    }
    let fresh = Arc::new(build()?);
    let handle = fresh.runtime.handle().clone();
    // The parent's runtime is leaked in the child: its threads are gone, so dropping it could hang.
    std::mem::forget(RUNTIME.swap(Some(fresh)));
    Ok(handle)
}

/// The error for work bound to the runtime of another (parent) process.
fn forked(started_in: u32) -> HarnessError {
    HarnessError::new(
        ErrorKind::Harness,
        format!(
            "this Harness call was started in process {started_in} and cannot run in forked child {}: create a new client in the child",
            std::process::id()
        ),
    )
}

/// A spawned piece of work; awaiting it gives the result, dropping it cancels the work.
pub struct Task<T> {
    join: JoinHandle<T>,
    pid: u32,
}

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        // In a forked child the task's runtime has no threads: leave it be.
        if self.pid == std::process::id() {
            self.join.abort();
        }
    }
}

impl<T> Future for Task<T> {
    type Output = Result<T, HarnessError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.pid != std::process::id() {
            return Poll::Ready(Err(forked(self.pid)));
        }
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
        if self.pid != std::process::id() {
            return Some(Err(forked(self.pid)));
        }
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
    Ok(Task { join: handle()?.spawn(fut), pid: std::process::id() })
}

/// A call driven on the caller's own (non-runtime) thread: `wait_timeout` polls it
/// there, with sockets and timers served by the runtime's workers. Compared with
/// `spawn` + wait this saves a thread hand-off per call, which is what a blocking
/// host API (Python's sync client) pays for. Dropping it cancels the call.
pub struct BlockingCall<T> {
    fut: Pin<Box<dyn Future<Output = T> + Send>>,
    handle: Handle,
    pid: u32,
}

impl<T> BlockingCall<T> {
    /// Takes the future already boxed (an `Operation`'s is), so a call allocates it once.
    pub fn new(fut: Pin<Box<dyn Future<Output = T> + Send>>) -> Result<Self, HarnessError> {
        Ok(BlockingCall { fut, handle: handle()?, pid: std::process::id() })
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
        if self.pid != std::process::id() {
            return Some(Err(forked(self.pid)));
        }
        let fut = &mut self.fut;
        self.handle.block_on(async { tokio::time::timeout(timeout, fut).await.ok() }).map(Ok)
    }
}

//! The one completion path, generic over the core's `Outcome`: every operation (a request,
//! a stream open or read, a chat, a receiver step) is driven the same two ways.
//!
//! - `drive`: on the calling thread, the GIL released, Ctrl-C checked between slices (a
//!   KeyboardInterrupt drops the operation, which cancels it).
//! - `submit`: on the core's runtime; a runtime thread queues the outcome here (no GIL) and
//!   wakes the asyncio loop through a `Notifier`; the loop, watching the notifier's fd with
//!   `add_reader`, resolves the futures on its own thread (`drain`).
//!
//! Outcomes become Python values in one place, `convert::outcome`.

use std::sync::Arc;
use std::time::Duration;

use harness_core::runtime::Task;
use harness_core::{HarnessError, Operation, Outcome};
use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::convert;
use crate::errors::to_py;

/// How long a blocking call waits between checks for Ctrl-C (the issue asked for < 100 ms).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// Runs `op` to its outcome on this thread, with the GIL released.
pub fn drive<'py>(py: Python<'py>, op: Operation) -> PyResult<Bound<'py, PyAny>> {
    let mut call = op.start().blocking().map_err(|e| to_py(py, e))?;
    loop {
        if let Some(outcome) = py.detach(|| call.wait_timeout(SIGNAL_CHECK)) {
            return convert::outcome(py, outcome.and_then(|r| r));
        }
        // A KeyboardInterrupt returns here; dropping `call` cancels the operation.
        py.check_signals()?;
    }
}

/// Starts `op` on the runtime; its outcome resolves `future` through `bridge`. The returned
/// `Pending` cancels the operation when cancelled or dropped.
pub fn submit(py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>, op: Operation) -> PyResult<Pending> {
    let (shared, future) = (bridge.get().shared.clone(), future.clone().unbind());
    // runtime::spawn refuses after a fork; the Task aborts the operation when dropped.
    let task = harness_core::runtime::spawn(async move { shared.complete(future, op.start().await) }).map_err(|e| to_py(py, e))?;
    Ok(Pending { task: Mutex::new(Some(task)) })
}

/// `submit` for a read of an open stream, left to run: an asyncio cancel cancels the stream
/// itself instead (an aborted read could leave the stream locked and its permit held).
pub fn submit_detached(py: Python<'_>, bridge: &Bound<'_, Bridge>, future: &Bound<'_, PyAny>, op: Operation) -> PyResult<()> {
    let (shared, future) = (bridge.get().shared.clone(), future.clone().unbind());
    let handle = harness_core::runtime::handle().map_err(|e| to_py(py, e))?;
    drop(handle.spawn(async move { shared.complete(future, op.start().await) }));
    Ok(())
}

type Done = (Py<PyAny>, Result<Outcome, HarnessError>);

pub struct Shared {
    wake: notifier::Notifier,
    queue: Mutex<Vec<Done>>,
}

impl Shared {
    /// Called on a runtime thread: queue the result, wake the loop if it was idle.
    pub fn complete(&self, future: Py<PyAny>, outcome: Result<Outcome, HarnessError>) {
        let was_empty = {
            let mut q = self.queue.lock();
            q.push((future, outcome));
            q.len() == 1
        };
        if was_empty {
            self.wake.notify();
        }
    }
}

/// One per asyncio loop: the completion queue and its wake-up notifier.
#[pyclass(module = "harness._native", frozen)]
pub struct Bridge {
    pub shared: Arc<Shared>,
}

#[pymethods]
impl Bridge {
    /// `portable=True` uses the socket pair even where eventfd exists (tests exercise it on Linux).
    #[new]
    #[pyo3(signature = (portable=false))]
    fn new(portable: bool) -> PyResult<Self> {
        let wake = notifier::Notifier::new(portable)?;
        Ok(Bridge { shared: Arc::new(Shared { wake, queue: Mutex::new(Vec::new()) }) })
    }

    /// The fd the loop watches (`loop.add_reader(bridge.fileno(), bridge.drain)`).
    fn fileno(&self) -> i32 {
        self.shared.wake.fileno()
    }

    /// Which notifier wakes the loop: `eventfd` (Linux) or `socketpair` (elsewhere, or when asked).
    #[getter]
    fn kind(&self) -> &'static str {
        self.shared.wake.kind()
    }

    /// Resolves every finished future; runs on the loop's thread.
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        // Cleared before taking the queue: a result queued after this wakes the loop again.
        self.shared.wake.clear();
        let done = std::mem::take(&mut *self.shared.queue.lock());
        let mut first_err = None;
        for (future, outcome) in done {
            // One future that cannot be resolved must not strand the others.
            if let Err(e) = resolve(py, future.bind(py), outcome) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

fn resolve(py: Python<'_>, future: &Bound<'_, PyAny>, outcome: Result<Outcome, HarnessError>) -> PyResult<()> {
    if future.call_method0("cancelled")?.is_truthy()? {
        return Ok(()); // dropping `outcome` cancels an opened stream, freeing its permit
    }
    match convert::outcome(py, outcome) {
        Ok(value) => future.call_method1("set_result", (value,))?,
        Err(e) => future.call_method1("set_exception", (e.into_value(py),))?,
    };
    Ok(())
}

/// An in-flight async request or stream open; `cancel()` (or dropping it) cancels it in Rust.
#[pyclass(module = "harness._native", frozen)]
pub struct Pending {
    pub task: Mutex<Option<Task<()>>>,
}

#[pymethods]
impl Pending {
    /// Cancels the request and frees its permits (no effect once it finished).
    fn cancel(&self) {
        self.task.lock().take();
    }
}

/// Wakes an asyncio loop from any thread: an eventfd on Linux, a Unix socket pair elsewhere.
mod notifier {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    pub enum Notifier {
        #[cfg(target_os = "linux")]
        EventFd(std::os::fd::OwnedFd),
        /// (the end the loop reads, the end runtime threads write)
        SocketPair(UnixStream, UnixStream),
    }

    impl Notifier {
        pub fn new(portable: bool) -> std::io::Result<Notifier> {
            #[cfg(target_os = "linux")]
            if !portable {
                use std::os::fd::{FromRawFd, OwnedFd};
                // SAFETY: plain syscall; the fd is owned by the OwnedFd below.
                let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // SAFETY: `fd` is a fresh, valid descriptor nobody else owns.
                return Ok(Notifier::EventFd(unsafe { OwnedFd::from_raw_fd(fd) }));
            }
            let _ = portable;
            let (read, write) = UnixStream::pair()?;
            read.set_nonblocking(true)?;
            write.set_nonblocking(true)?;
            Ok(Notifier::SocketPair(read, write))
        }

        pub fn kind(&self) -> &'static str {
            match self {
                #[cfg(target_os = "linux")]
                Notifier::EventFd(_) => "eventfd",
                Notifier::SocketPair(..) => "socketpair",
            }
        }

        pub fn fileno(&self) -> i32 {
            match self {
                #[cfg(target_os = "linux")]
                Notifier::EventFd(fd) => fd.as_raw_fd(),
                Notifier::SocketPair(read, _) => read.as_raw_fd(),
            }
        }

        /// Makes the fd readable (any thread, no GIL).
        pub fn notify(&self) {
            match self {
                #[cfg(target_os = "linux")]
                Notifier::EventFd(fd) => {
                    let one: u64 = 1;
                    // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own.
                    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
                }
                // A full buffer (WouldBlock) already means "readable": nothing to do.
                Notifier::SocketPair(_, write) => drop((&*write).write(&[1])),
            }
        }

        /// Makes the fd unreadable again (on the loop's thread).
        pub fn clear(&self) {
            match self {
                #[cfg(target_os = "linux")]
                Notifier::EventFd(fd) => {
                    let mut buf = 0u64;
                    // SAFETY: reads 8 bytes into a valid u64 (EAGAIN when already drained is fine).
                    unsafe { libc::read(fd.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
                }
                Notifier::SocketPair(read, _) => {
                    let mut buf = [0u8; 64];
                    while matches!((&*read).read(&mut buf), Ok(n) if n > 0) {}
                }
            }
        }
    }
}

//! Hands finished requests back to an asyncio loop without touching the GIL on
//! a runtime thread: results queue up here and an eventfd wakes the loop, which
//! resolves the futures on its own thread (`drain`, registered with `add_reader`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use harness_core::runtime::Task;
use harness_core::{HarnessError, Response};
use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::convert::Reply;
use crate::errors::to_py;

type Done = (Py<PyAny>, Result<Response, HarnessError>);

pub struct Shared {
    wake: OwnedFd,
    queue: Mutex<Vec<Done>>,
}

impl Shared {
    /// Called on a runtime thread: queue the result, wake the loop if it was idle.
    pub fn complete(&self, future: Py<PyAny>, outcome: Result<Response, HarnessError>) {
        let was_empty = {
            let mut q = self.queue.lock();
            q.push((future, outcome));
            q.len() == 1
        };
        if was_empty {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own.
            unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }
}

/// One per asyncio loop: the completion queue and its wake-up fd.
#[pyclass(module = "harness._native", frozen)]
pub struct Bridge {
    pub shared: Arc<Shared>,
}

#[pymethods]
impl Bridge {
    #[new]
    fn new() -> PyResult<Self> {
        // SAFETY: plain syscall; the fd is owned by the OwnedFd below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: `fd` is a fresh, valid descriptor nobody else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Bridge { shared: Arc::new(Shared { wake, queue: Mutex::new(Vec::new()) }) })
    }

    /// The fd the loop watches (`loop.add_reader(bridge.fileno(), bridge.drain)`).
    fn fileno(&self) -> i32 {
        self.shared.wake.as_raw_fd()
    }

    /// Resolves every finished request's future; runs on the loop's thread.
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        let mut buf = 0u64;
        // SAFETY: reads 8 bytes into a valid u64 (EAGAIN when already drained is fine).
        unsafe { libc::read(self.shared.wake.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
        let done = std::mem::take(&mut *self.shared.queue.lock());
        for (future, outcome) in done {
            let future = future.bind(py);
            if future.call_method0("cancelled")?.is_truthy()? {
                continue;
            }
            match outcome {
                Ok(resp) => future.call_method1("set_result", (Reply(resp),))?,
                Err(e) => future.call_method1("set_exception", (to_py(py, e).into_value(py),))?,
            };
        }
        Ok(())
    }
}

/// An in-flight async request; `cancel()` (or dropping it) cancels it in Rust.
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

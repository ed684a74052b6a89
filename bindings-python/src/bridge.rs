//! The one way async results cross into asyncio: a runtime thread queues the result
//! here (no GIL) and wakes the loop through a `Notifier`; the loop, watching the
//! notifier's fd with `add_reader`, resolves the futures on its own thread (`drain`).
//! Requests, stream opens, stream chunks (bodies and chat answers) and the idempotent
//! receiver's claim, complete and fail all take this path.

use std::sync::Arc;

use bytes::Bytes;
use harness_core::runtime::Task;
use harness_core::{ChatChunk, ChatResponse, ChatStream, ChatStreamHandle, Claim, HarnessError, Response, StreamHandle, StreamResponse};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::chat::NativeChatStream;
use crate::convert::{ChatReply, Chunk, Reply};
use crate::errors::to_py;
use crate::idempotency::claim_to_py;
use crate::stream::NativeStream;

/// What a finished piece of async work gives the loop; turned into Python objects there.
pub enum Completion {
    Reply(Result<Response, HarnessError>),
    Stream(Result<StreamResponse, HarnessError>),
    Chunk(Result<Option<Bytes>, HarnessError>),
    ChatReply(Result<ChatResponse, HarnessError>),
    ChatStream(Result<ChatStream, HarnessError>),
    ChatChunk(Result<Option<ChatChunk>, HarnessError>),
    /// An idempotent receiver's claim: a `Lease` or the stored result.
    Claimed(Result<Claim, HarnessError>),
    /// A receiver's `complete` or `fail`: `None`.
    Settled(Result<(), HarnessError>),
}

impl Completion {
    fn into_py(self, py: Python<'_>) -> Result<Bound<'_, PyAny>, PyErr> {
        match self {
            Completion::Reply(Ok(r)) => Ok(Reply(r).into_pyobject(py)?.into_any()),
            Completion::Stream(Ok(s)) => Ok(Bound::new(py, NativeStream::new(StreamHandle::new(s)))?.into_any()),
            Completion::Chunk(Ok(Some(b))) => Ok(PyBytes::new(py, &b).into_any()),
            Completion::Chunk(Ok(None)) => Ok(py.None().into_bound(py)),
            Completion::ChatReply(Ok(r)) => Ok(ChatReply(r).into_pyobject(py)?.into_any()),
            Completion::ChatStream(Ok(s)) => Ok(Bound::new(py, NativeChatStream::new(ChatStreamHandle::new(s)))?.into_any()),
            Completion::ChatChunk(Ok(Some(c))) => Ok(Chunk(c).into_pyobject(py)?.into_any()),
            Completion::ChatChunk(Ok(None)) => Ok(py.None().into_bound(py)),
            Completion::Claimed(Ok(c)) => claim_to_py(py, c),
            Completion::Settled(Ok(())) => Ok(py.None().into_bound(py)),
            Completion::Reply(Err(e))
            | Completion::Stream(Err(e))
            | Completion::Chunk(Err(e))
            | Completion::ChatReply(Err(e))
            | Completion::ChatStream(Err(e))
            | Completion::ChatChunk(Err(e))
            | Completion::Claimed(Err(e))
            | Completion::Settled(Err(e)) => Err(to_py(py, e)),
        }
    }
}

type Done = (Py<PyAny>, Completion);

pub struct Shared {
    wake: notifier::Notifier,
    queue: Mutex<Vec<Done>>,
}

impl Shared {
    /// Called on a runtime thread: queue the result, wake the loop if it was idle.
    pub fn complete(&self, future: Py<PyAny>, outcome: Completion) {
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

fn resolve(py: Python<'_>, future: &Bound<'_, PyAny>, outcome: Completion) -> PyResult<()> {
    if future.call_method0("cancelled")?.is_truthy()? {
        return Ok(()); // dropping `outcome` cancels an opened stream, freeing its permit
    }
    match outcome.into_py(py) {
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

//! A streaming response's body, pulled one chunk per `read` through the completion queue.

use harness_core::StreamHandle;
use napi_derive::napi;

use crate::completion::{CompletionQueue, Staged, Work};

/// An opened stream; `index.js` wraps it in `StreamResponse` (its `body` async iterable).
/// Dropped by the GC without a `cancel()`, it releases its connection and permit then.
#[napi]
pub struct NativeStream {
    handle: StreamHandle,
}

impl NativeStream {
    pub(crate) fn new(handle: StreamHandle) -> Self {
        NativeStream { handle }
    }
}

#[napi]
impl NativeStream {
    /// Stages a read of the next chunk; it completes through `queue` under `id` (a chunk,
    /// the end, or an error).
    #[napi]
    pub fn read(&self, queue: &CompletionQueue, id: u32) {
        queue.inner.stage(Staged { work: Work::Read(self.handle.clone()), id, cancel: None });
    }

    /// Stops the stream: a pending read ends with CancelledError, and the connection and
    /// bulkhead permit are released at once.
    #[napi]
    pub fn cancel(&self) {
        self.handle.cancel();
    }
}

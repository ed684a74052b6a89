//! The idempotent receiver (`harness_core::Idempotency`) for JS: construction, keys,
//! signatures and metrics are synchronous; `claim`, `complete` and `fail` are staged on
//! the completion queue like every other core future (`completion.rs`). A claim to run
//! comes back as a `NativeLease` (the core's lease, opaque to JS: its fencing number
//! cannot be forged); a processed key comes back as its stored result, JSON text.
//! `index.js` composes claim -> handler -> complete / fail into `run`.

use std::sync::Arc;

use harness_core::{Idempotency, Lease};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::completion::{CompletionQueue, Staged, Work};
use crate::errors::{native_error, outcome, NativeError, Outcome};

#[napi]
pub struct NativeIdempotency {
    inner: Arc<Idempotency>,
}

/// From the JSON text of a receiver config object (checked for depth before parsing).
#[napi]
pub fn idempotency_from_json(json: String) -> Outcome<NativeIdempotency> {
    outcome(
        harness_core::json::check_text("config", json.as_bytes())
            .and_then(|()| {
                harness_core::json::parse_checked(&json).map_err(|e| harness_core::HarnessError::config(format!("config: cannot parse json: {e}")))
            })
            .and_then(Idempotency::from_value)
            .map(|i| NativeIdempotency { inner: Arc::new(i) }),
    )
}

/// A delivery's claim to run the handler (the core's `Lease`).
#[napi]
pub struct NativeLease {
    inner: Lease,
}

#[napi]
impl NativeLease {
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key.clone()
    }

    /// The fencing number (0 when the store was down and the handler runs without dedup).
    #[napi(getter)]
    pub fn fence(&self) -> f64 {
        self.inner.fence as f64
    }

    /// False when the store was down and `on_store_down: process` let it run without dedup.
    #[napi(getter)]
    pub fn deduplicated(&self) -> bool {
        self.inner.deduplicated
    }
}

impl NativeLease {
    pub(crate) fn new(inner: Lease) -> Self {
        NativeLease { inner }
    }
}

#[napi]
impl NativeIdempotency {
    /// `{prefix}{tenant}:{event_type}:{msg_id}`; a ConfigError naming a bad part.
    #[napi]
    pub fn key(&self, tenant: String, event_type: String, msg_id: String) -> Outcome<String> {
        outcome(self.inner.key(&tenant, &event_type, &msg_id))
    }

    /// Stages a claim of `key`; it completes through `queue` under `id` with a lease, the
    /// stored result, or an error.
    #[napi]
    pub fn claim(&self, queue: &CompletionQueue, id: u32, key: String) {
        queue.inner.stage(Staged { work: Work::Claim(self.inner.clone(), key), id, cancel: None });
    }

    /// Stages storing `result` (JSON text) for `lease`; returns the error at once (and stages
    /// nothing) if the text is not JSON the core accepts.
    #[napi]
    pub fn complete(&self, queue: &CompletionQueue, id: u32, lease: &NativeLease, result: String) -> Option<NativeError> {
        if let Err(e) = harness_core::json::check_text("result", result.as_bytes()) {
            return Some(native_error(e));
        }
        let work = Work::Complete(self.inner.clone(), lease.inner.clone(), result.into_bytes());
        queue.inner.stage(Staged { work, id, cancel: None });
        None
    }

    /// Stages marking `lease` failed.
    #[napi]
    pub fn fail(&self, queue: &CompletionQueue, id: u32, lease: &NativeLease) {
        queue.inner.stage(Staged { work: Work::Fail(self.inner.clone(), lease.inner.clone()), id, cancel: None });
    }

    /// Checks a signed delivery; the error (AuthError `bad_signature` / `stale_signature`, or a
    /// ConfigError when no signature is configured), or nothing when it is good.
    #[napi]
    pub fn verify(&self, timestamp: String, body: Buffer, signature: String) -> Option<NativeError> {
        self.inner.verify(&timestamp, &body, &signature).err().map(native_error)
    }

    /// Hex HMAC-SHA256 of `{timestamp}.{body}`, as `verify` expects.
    #[napi]
    pub fn sign(&self, timestamp: String, body: Buffer) -> Outcome<String> {
        outcome(self.inner.sign(&timestamp, &body))
    }

    /// `harness_idempotency_total{outcome}`, Prometheus text.
    #[napi]
    pub fn metrics_text(&self) -> String {
        self.inner.metrics_text()
    }

    /// The core's description (prefix, backend; a configured secret shows as `***`).
    #[napi]
    pub fn describe(&self) -> String {
        format!("{:?}", self.inner)
    }
}

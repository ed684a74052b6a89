//! The idempotent receiver (`harness_core::Idempotency`) for JS: construction, keys,
//! signatures and metrics are synchronous; `claim`, `complete` and `fail` are operations
//! staged on the completion queue like every other (`completion.rs`). A claim to run
//! comes back as a `NativeLease` (the core's lease, opaque to JS: its fencing number
//! cannot be forged); a processed key comes back as its stored result, JSON text.
//! `index.js` composes claim -> handler -> complete / fail into `run`.

use std::sync::Arc;

use harness_core::{Idempotency, Operation};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::completion::{CompletionQueue, NativeLease};
use crate::convert::{error, fallible, Fallible, NativeError};

#[napi]
pub struct NativeIdempotency {
    inner: Arc<Idempotency>,
}

/// From the JSON text of a receiver config object (checked for depth before parsing).
#[napi]
pub fn idempotency_from_json(json: String) -> Fallible<NativeIdempotency> {
    fallible(
        harness_core::json::check_text("config", json.as_bytes())
            .and_then(|()| {
                harness_core::json::parse_checked(&json).map_err(|e| harness_core::HarnessError::config(format!("config: cannot parse json: {e}")))
            })
            .and_then(Idempotency::from_value)
            .map(|i| NativeIdempotency { inner: Arc::new(i) }),
    )
}

#[napi]
impl NativeIdempotency {
    /// `{prefix}{tenant}:{event_type}:{msg_id}`; a ConfigError naming a bad part.
    #[napi]
    pub fn key(&self, tenant: String, event_type: String, msg_id: String) -> Fallible<String> {
        fallible(self.inner.key(&tenant, &event_type, &msg_id))
    }

    /// Stages a claim of `key`; it completes through `queue` under `id` with a lease, the
    /// stored result, or an error.
    #[napi]
    pub fn claim(&self, queue: &CompletionQueue, id: u32, key: String) {
        queue.stage(Operation::Claim(self.inner.clone(), key), id, None);
    }

    /// Stages storing `result` (JSON text) for `lease`; returns the error at once (and stages
    /// nothing) if the text is not JSON the core accepts.
    #[napi]
    pub fn complete(&self, queue: &CompletionQueue, id: u32, lease: &NativeLease, result: String) -> Option<NativeError> {
        if let Err(e) = harness_core::json::check_text("result", result.as_bytes()) {
            return Some(error(e));
        }
        queue.stage(Operation::Complete(self.inner.clone(), lease.lease().clone(), result.into_bytes().into()), id, None);
        None
    }

    /// Stages marking `lease` failed.
    #[napi]
    pub fn fail(&self, queue: &CompletionQueue, id: u32, lease: &NativeLease) {
        queue.stage(Operation::Fail(self.inner.clone(), lease.lease().clone()), id, None);
    }

    /// Checks a signed delivery; the error (AuthError `bad_signature` / `stale_signature`, or a
    /// ConfigError when no signature is configured), or nothing when it is good.
    #[napi]
    pub fn verify(&self, timestamp: String, body: Buffer, signature: String) -> Option<NativeError> {
        self.inner.verify(&timestamp, &body, &signature).err().map(error)
    }

    /// Hex HMAC-SHA256 of `{timestamp}.{body}`, as `verify` expects.
    #[napi]
    pub fn sign(&self, timestamp: String, body: Buffer) -> Fallible<String> {
        fallible(self.inner.sign(&timestamp, &body))
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

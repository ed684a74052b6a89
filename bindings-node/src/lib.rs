//! harness-node: the napi-rs bridge between Node and harness-core.
//!
//! A translation table only: JS request fields in, core calls, plain results
//! out. Every call runs on the core's own tokio runtime (napi's `async` runtime
//! is deliberately not enabled: one runtime per process). Everything that comes
//! back to JS (finished requests, opened streams, body chunks, events) takes one
//! path, the `CompletionQueue` (`completion.rs`): pushed from any thread, one weak
//! wake-up per batch, drained by JS, matched to promises by id. Errors cross as
//! data (`NativeError`, `errors.rs`), never inside a message string; `index.js`
//! turns them into its class tree.
//!
//! Modules: `client` (the native client), `convert` (JS fields to a core request),
//! `completion` (the queue), `stream` (streaming bodies), `events` (the event sink),
//! `credentials` (JS token providers, the credential state), `routing` (chat calls and
//! streams, routed responses, the route state), `idempotency` (the idempotent receiver:
//! claims, leases and results through the same queue; keys, signatures), `errors`.

// The core's HarnessError is large by design (full call context); it crosses once per failed call.
#![allow(clippy::result_large_err)]

mod client;
mod completion;
mod convert;
mod credentials;
mod errors;
mod events;
mod idempotency;
mod routing;
mod stream;

use napi_derive::napi;

/// The most levels of nesting in a JSON body or a config (the core's limit).
#[napi]
pub fn json_max_depth() -> u32 {
    harness_core::json::MAX_DEPTH as u32
}

/// This native module's version (the workspace's one version); `index.js` refuses to load a
/// module whose version differs from its own package's.
#[napi]
pub fn native_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

//! harness-node: the napi-rs bridge between Node and harness-core.
//!
//! A translation table only: JS fields in, a core `Operation` or call, the core's
//! values out. Every operation runs on the core's own tokio runtime (napi's `async`
//! runtime is deliberately not enabled: one runtime per process). Everything that
//! comes back to JS (any `Outcome`: responses, opened streams, chunks, chat answers,
//! receiver claims, embeddings; and events) takes one path, the `CompletionQueue`
//! (`completion.rs`): pushed from any thread, one weak wake-up per batch, drained by
//! JS, matched to promises by id. Views and errors cross as the core's serde JSON
//! (`ErrorView` for errors), camelCased as `types.d.ts` declares, never inside a
//! message string; `index.js` turns errors into its class tree.
//!
//! Modules: `completion` (the queue, generic over `Outcome`; it imports no feature),
//! `convert` (JS fields to core requests, core values to JS), `client` (the native
//! client: calls, views, mocks, listeners), `events` (the event sink), `credentials`
//! (JS token providers), `host` (calls into JS answered with JSON text, by id), `adapters` (JS
//! host adapters), `interceptors` (JS interceptors), `idempotency` (the idempotent receiver).

// The core's HarnessError is large by design (full call context); it crosses once per failed call.
#![allow(clippy::result_large_err)]
// The napi exports are only reached from JS: a unit-test build sees them as unused.
#![cfg_attr(test, allow(dead_code))]

mod adapters;
mod client;
mod completion;
mod convert;
mod credentials;
mod events;
mod host;
mod idempotency;
mod interceptors;

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

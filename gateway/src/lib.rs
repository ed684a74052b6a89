//! Harness as an HTTP access layer: the same engine and config behind an OpenAI-compatible
//! API (`/v1/chat/completions`, `/v1/embeddings`, `/v1/models`), Anthropic's Messages API
//! (`/v1/messages`, any route behind it), a plain pipeline for configured services
//! (`/v1/services/{service}/...`), per-caller keys, an admin API and its browser console
//! (`/admin/ui`), `/healthz`, `/readyz`,
//! `/metrics`, and a graceful drain on SIGTERM.
//!
//! Guarantees: it runs on the core's own tokio runtime (no second runtime); callers are known
//! only by the SHA-256 of their keys; a request without a valid key is answered 401 and
//! nothing is forwarded; a caller's headers never replace credentials, routing or framing
//! (only a short allowlist is forwarded); no service credential is ever in an answer's headers
//! or body (see `scrub`); request heads and bodies are bounded (a declared
//! length over the limit is refused before reading), a head must arrive within
//! `header_timeout_ms` and a body within `body_timeout_ms`; on shutdown, no new connection is accepted and in-flight
//! requests and streams get `drain_ms` to finish.

#![allow(clippy::result_large_err)]

mod activity;
mod anthropic;
mod budget;
pub mod config;
mod console;
pub mod errors;
mod handlers;
mod scrub;
mod server;
mod state;

pub use config::{sha256_hex, CallerConfig, GatewayConfig, Loaded};
pub use server::{run, start, Started};
pub use state::{Caller, Gateway};

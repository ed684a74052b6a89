//! harness-core: the resilient request pipeline every Harness binding shares.
//!
//! Business code names a service, a method, a path and a payload; the pipeline
//! (`pipeline/`) does timeouts, retries, breaking, isolation and telemetry on an
//! `engine/` that holds the live config snapshot. Host code is reached only
//! through `host/`; reqwest types stop at `transport/`; shared state goes through
//! `state/` traits. No unsafe code.

// HarnessError carries its context inline so bindings can move fields out; errors are rare next to I/O.
#![allow(clippy::result_large_err)]
#![forbid(unsafe_code)]

pub mod adapters;
pub mod breaker;
pub mod cache;
pub mod bulkhead;
pub mod client;
pub mod config;
pub mod credentials;
pub mod deadline;
pub mod endpoint;
mod engine;
pub mod error;
pub mod fleet;
pub mod hedge;
#[cfg(test)]
mod fuzz;
pub mod host;
pub mod idempotency;
pub mod interceptors;
pub mod json;
pub mod observability;
mod pipeline;
pub use pipeline::chat::{ChatStream, ChatStreamHandle};
pub mod ratelimit;
pub mod redact;
pub mod request;
pub mod response;
pub mod retry;
pub mod routing;
pub mod runtime;
pub mod state;
pub mod target;
pub mod transport;
pub mod validation;
pub mod view;
pub mod op;

pub use client::{Client, ClientOptions};
pub use config::{Config, Validated};
pub use idempotency::{Claim, Idempotency, IdempotencyConfig, Lease};
pub use error::{ErrorKind, HarnessError, TimeoutPhase};
pub use host::{Event, EventSink, ProviderError, Token, TokenProvider};
pub use observability::log::RequestRecord;
pub use request::{Body, Request};
pub use pipeline::stream::{StreamHandle, StreamResponse};
pub use response::{Response, Routed};
pub use adapters::{ChatChunk, ChatChunkKind, ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, ToolCall, ToolCallDelta, Usage};
pub use routing::{ProviderState, RouteState};
pub use op::{Operation, Outcome, Started};
pub use runtime::{BlockingCall, Task};
pub use view::ErrorView;

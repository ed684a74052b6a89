//! harness-core: the resilient request pipeline every Harness binding shares.
//!
//! Business code names a service, a method, a path and a payload; the pipeline
//! (see `pipeline.rs`) does timeouts, retries, breaking, isolation and telemetry.

// HarnessError carries its context inline so bindings can move fields out; errors are rare next to I/O.
#![allow(clippy::result_large_err)]

pub mod breaker;
pub mod bulkhead;
pub mod client;
pub mod config;
pub mod deadline;
pub mod endpoint;
pub mod error;
pub mod json;
pub mod observability;
mod pipeline;
pub mod redact;
pub mod request;
pub mod retry;
pub mod runtime;
pub mod target;
pub mod transport;

pub use client::{Client, ClientOptions};
pub use config::Config;
pub use error::{ErrorKind, HarnessError, TimeoutPhase};
pub use observability::log::{RequestListener, RequestRecord};
pub use request::{Body, Request, Response};
pub use runtime::{BlockingCall, Task};

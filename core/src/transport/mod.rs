//! The transport stage: one HTTP exchange, head first, then the body as a stream
//! of chunks the caller pulls.
//!
//! Guarantees: reqwest (and hyper) types stop in this module; the pipeline sees
//! only `http` types, `Bytes` and `TransportFailure`. Timeouts other than connect
//! are the pipeline's (it wraps `send` and each `next_chunk` in its timers), so
//! any `Transport` gets the same response, idle and total deadlines. A body is
//! pulled chunk by chunk: nothing is read ahead of the consumer beyond the
//! transport's own socket buffer.

pub mod config;
pub mod exchange;
pub mod faults;
pub mod memory;
pub mod mock;
pub mod reqwest;

pub use config::{LimitsConfig, RedirectConfig, TimeoutConfig};
pub use exchange::{declared_length, BodySource, BoxFuture, Exchange, Failure, FaultMark, OutgoingRequest, Transport, TransportFailure};

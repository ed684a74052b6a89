//! State that a fleet may share: token cache, rate-limit buckets, retry budget and
//! idempotency records. Each is a trait; `memory` is the default backend, a Redis
//! backend implements the same traits for fleets.
//!
//! Guarantees: every method is safe to call concurrently; a backend error never
//! panics, it is returned as `StateError` (the pipeline decides whether to fail
//! open or closed); keys are opaque strings chosen by the caller.

pub mod memory;
pub mod redis;
pub mod store;

pub use store::*;

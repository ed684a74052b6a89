//! State that a fleet may share: token cache, rate-limit buckets, retry budget and
//! idempotency records. Each is a trait; `memory` is the default backend, a Redis
//! backend implements the same traits for fleets.
//!
//! Guarantees: every method is safe to call concurrently; a backend error never
//! panics, it is returned as `StateError` (the pipeline decides whether to fail
//! open or closed); keys are opaque strings chosen by the caller.

pub mod memory;

use std::time::{Duration, SystemTime};

use crate::transport::BoxFuture;

/// A backend could not answer (connection lost, script error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateError(pub String);

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "state backend: {}", self.0)
    }
}

/// A cached credential. The value is a secret: its Debug output is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct CachedToken {
    pub value: String,
    pub expires_at: SystemTime,
}

impl std::fmt::Debug for CachedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedToken").field("value", &"***").field("expires_at", &self.expires_at).finish()
    }
}

pub trait TokenCache: Send + Sync {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<CachedToken>, StateError>>;
    fn put<'a>(&'a self, key: &'a str, token: CachedToken) -> BoxFuture<'a, Result<(), StateError>>;
    fn remove<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StateError>>;
}

/// A GCRA rate: `per_second` sustained, `burst` more at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: u32,
}

/// The answer of a rate-limit check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDecision {
    Allowed,
    /// Not now; the earliest a request would conform.
    Wait(Duration),
}

pub trait RateLimitStore: Send + Sync {
    /// Takes one cell for `key` if it conforms to `rate`, atomically.
    fn check<'a>(&'a self, key: &'a str, rate: Rate) -> BoxFuture<'a, Result<RateDecision, StateError>>;
}

/// How deposits become retries: each request deposits `ratio` of a retry; `min_per_sec`
/// retries a second are always allowed; deposits expire after `ttl`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetPolicy {
    pub ratio: f64,
    pub min_per_sec: u32,
    pub ttl: Duration,
}

pub trait RetryBudgetStore: Send + Sync {
    /// One request's deposit (cheap, never waits).
    fn deposit(&self, key: &str, policy: &BudgetPolicy);
    /// One retry's withdrawal; false when the budget is spent.
    fn withdraw<'a>(&'a self, key: &'a str, policy: &'a BudgetPolicy) -> BoxFuture<'a, Result<bool, StateError>>;
}

/// What a receiver knows about an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyState {
    /// Never seen (now claimed by this caller).
    Claimed,
    /// Another delivery is processing it.
    InFlight,
    /// Done; the stored result.
    Done(Vec<u8>),
}

pub trait IdempotencyStore: Send + Sync {
    /// Claims `key` for `ttl` unless it is in flight or done.
    fn begin<'a>(&'a self, key: &'a str, ttl: Duration) -> BoxFuture<'a, Result<IdempotencyState, StateError>>;
    /// Stores the result of a claimed key for `ttl`.
    fn complete<'a>(&'a self, key: &'a str, result: Vec<u8>, ttl: Duration) -> BoxFuture<'a, Result<(), StateError>>;
    /// Gives a claimed key back (the work failed; a redelivery may try again).
    fn release<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StateError>>;
}

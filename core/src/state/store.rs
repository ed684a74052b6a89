//! The traits every backend implements, and the values they trade.

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
    /// A downstream asked for a pause (a 429): this long is left.
    Paused(Duration),
}

/// A store could not answer: `Some(why)` the first time in an outage (report it), `None` after.
pub type Unavailable = Option<String>;

/// Fleet-wide rate limits (GCRA) and pauses; a process's own limits need no store.
pub trait RateLimitStore: Send + Sync {
    /// Takes one cell for `key` if it conforms to `rate` and `key` is not paused, atomically.
    fn check<'a>(&'a self, key: &'a str, rate: Rate) -> BoxFuture<'a, Result<RateDecision, Unavailable>>;
    /// Pauses `key` for `pause` (a longer pause already set stays).
    fn pause<'a>(&'a self, key: &'a str, pause: Duration) -> BoxFuture<'a, Result<(), Unavailable>>;
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

/// What the store says about a key when a delivery claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimState {
    /// This delivery may run the handler, holding `fence`.
    Claimed { fence: u64 },
    Processed(Vec<u8>),
    InFlight { lease_left: Duration },
    /// Failed before, and `retry_failed` is off.
    Failed,
}

/// What finishing a claim (`complete` or `fail`) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Written,
    /// This same claim was finished before (a repeated call): nothing changed.
    AlreadyFinished,
    /// The lease expired and another delivery holds the key: nothing written.
    Lost,
}

/// Where the idempotent receiver's state lives. `Err(Some(why))` is the first failure of an
/// outage, `Err(None)` a later one (see `redis::RedisConn`).
pub trait IdempotencyStore: Send + Sync {
    fn claim<'a>(&'a self, key: &'a str, lease: Duration, ttl: Duration, retry_failed: bool) -> BoxFuture<'a, Result<ClaimState, Unavailable>>;
    /// Stores the result if `fence` still holds the key.
    fn complete<'a>(&'a self, key: &'a str, fence: u64, result: &'a [u8], ttl: Duration) -> BoxFuture<'a, Result<Finish, Unavailable>>;
    /// Marks the claim failed if `fence` still holds the key.
    fn fail<'a>(&'a self, key: &'a str, fence: u64, ttl: Duration) -> BoxFuture<'a, Result<Finish, Unavailable>>;
}

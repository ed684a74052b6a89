//! The Redis backend: one connection per URL, bounded calls, outages noticed once.
//!
//! Guarantees: every call is bounded by `CALL_TIMEOUT`; after a failure Redis is not
//! asked again for `RETRY_AFTER` (so an outage costs a request at most one bounded
//! wait, not one per request), and the connection manager reconnects; the first
//! failure of an outage is reported (`Err(Some(why))`), later ones are quiet
//! (`Err(None)`) until Redis answers again. Multi-step state changes are one Lua script.
//! A call that finds its connection dropped (Redis restarted) is sent once more on a fresh
//! connection before it fails, so the first call after a restart (which may be storing a
//! handler's result) is not lost; every script here is safe to run twice.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::store::{BudgetPolicy, ClaimState, Finish, IdempotencyStore, Rate, RateDecision, RateLimitStore, RetryBudgetStore, StateError};
use crate::error::HarnessError;
use crate::redact::{escape_control, redact_url};
use crate::transport::BoxFuture;

/// Longest one Redis call may take before it counts as unavailable.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// After a failure, Redis is left alone this long.
pub const RETRY_AFTER: Duration = Duration::from_millis(500);

pub use super::store::Unavailable;

pub struct RedisConn {
    client: redis::Client,
    conn: tokio::sync::Mutex<Option<redis::aio::ConnectionManager>>,
    down_until: Mutex<Option<Instant>>,
    in_outage: AtomicBool,
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConn").finish_non_exhaustive()
    }
}

impl RedisConn {
    pub fn new(url: &str, path: &str) -> Result<Arc<Self>, HarnessError> {
        let client = redis::Client::open(url).map_err(|_| {
            HarnessError::config(format!("{path}: not a valid Redis URL ({:?})", escape_control(&redact_url(url))))
        })?;
        Ok(Arc::new(RedisConn { client, conn: tokio::sync::Mutex::new(None), down_until: Mutex::new(None), in_outage: AtomicBool::new(false) }))
    }

    async fn connection(&self) -> Result<redis::aio::ConnectionManager, String> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let made = tokio::time::timeout(CALL_TIMEOUT, self.client.get_connection_manager())
            .await
            .map_err(|_| "redis did not answer in time".to_string())?
            .map_err(|e| format!("redis: {:?}", e.kind()))?;
        *slot = Some(made.clone());
        Ok(made)
    }

    fn failed(&self, why: String) -> Unavailable {
        *self.down_until.lock() = Some(Instant::now() + RETRY_AFTER);
        (!self.in_outage.swap(true, Ordering::AcqRel)).then_some(why)
    }

    /// Runs a script; `Err` when Redis cannot answer now (see the module doc).
    pub async fn script<T: redis::FromRedisValue>(&self, script: &redis::Script, keys: &[&str], args: &[String]) -> Result<T, Unavailable> {
        if self.down_until.lock().is_some_and(|t| Instant::now() < t) {
            return Err(None);
        }
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        for a in args {
            inv.arg(a);
        }
        let give_up = Instant::now() + CALL_TIMEOUT;
        let mut fresh = false;
        loop {
            let mut conn = match self.connection().await {
                Ok(c) => c,
                Err(why) => return Err(self.failed(why)),
            };
            match tokio::time::timeout_at(give_up, inv.invoke_async::<T>(&mut conn)).await {
                Ok(Ok(v)) => {
                    self.in_outage.store(false, Ordering::Release);
                    return Ok(v);
                }
                Ok(Err(e)) if !fresh && (e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error()) => {
                    // The connection died under us (a restart): once more, on a new one.
                    fresh = true;
                    *self.conn.lock().await = None;
                }
                Ok(Err(e)) => return Err(self.failed(format!("redis: {:?}", e.kind()))),
                Err(_) => return Err(self.failed("redis did not answer in time".into())),
            }
        }
    }

    /// The client, for connections of another kind (pub/sub).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// Whether the last call failed (an outage is in progress).
    pub fn is_down(&self) -> bool {
        self.in_outage.load(Ordering::Acquire)
    }
}

/// Deposits and withdrawals in per-second buckets (on Redis's clock) over the budget's window.
const BUDGET_WITHDRAW: &str = r#"
-- KEYS[1] deposits prefix, KEYS[2] withdrawals prefix; ARGV: ratio, min_per_sec, window_s, pending deposits
local t = redis.call('TIME')
local now = tonumber(t[1])
local window = tonumber(ARGV[3])
local pending = tonumber(ARGV[4])
if pending > 0 then
  redis.call('INCRBY', KEYS[1] .. now, pending)
  redis.call('EXPIRE', KEYS[1] .. now, window + 2)
end
local d, w = 0, 0
for s = now - window + 1, now do
  d = d + (tonumber(redis.call('GET', KEYS[1] .. s)) or 0)
  w = w + (tonumber(redis.call('GET', KEYS[2] .. s)) or 0)
end
local allowed = tonumber(ARGV[1]) * d + tonumber(ARGV[2]) * window
if w + 1 <= allowed then
  redis.call('INCR', KEYS[2] .. now)
  redis.call('EXPIRE', KEYS[2] .. now, window + 2)
  return 1
end
return 0
"#;

const BUDGET_DEPOSIT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1])
redis.call('INCRBY', KEYS[1] .. now, ARGV[1])
redis.call('EXPIRE', KEYS[1] .. now, tonumber(ARGV[2]) + 2)
return 1
"#;

/// A retry budget counted across a fleet: deposits are batched (flushed at most every
/// `FLUSH_EVERY` or with the next withdrawal, never one round trip per request); a
/// withdrawal is one script. While Redis cannot answer, the local budget decides.
pub struct SharedBudget {
    conn: Arc<RedisConn>,
    deposits_key: String,
    withdrawals_key: String,
    pending: AtomicU64,
    flushing: AtomicBool,
    local: Arc<dyn RetryBudgetStore>,
    on_outage: Box<dyn Fn(String) + Send + Sync>,
}

const FLUSH_EVERY: Duration = Duration::from_millis(200);

impl SharedBudget {
    pub fn new(conn: Arc<RedisConn>, key: &str, local: Arc<dyn RetryBudgetStore>, on_outage: Box<dyn Fn(String) + Send + Sync>) -> Arc<Self> {
        Arc::new(SharedBudget {
            conn,
            deposits_key: format!("harness:budget:{key}:d:"),
            withdrawals_key: format!("harness:budget:{key}:w:"),
            pending: AtomicU64::new(0),
            flushing: AtomicBool::new(false),
            local,
            on_outage,
        })
    }

    fn window_s(policy: &BudgetPolicy) -> u64 {
        policy.ttl.as_secs().max(1)
    }

    /// Starts one background flush of the pending deposits, unless one is under way.
    fn schedule_flush(self: &Arc<Self>, policy: BudgetPolicy) {
        if self.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(handle) = crate::runtime::handle() else {
            self.flushing.store(false, Ordering::Release);
            return;
        };
        let me = self.clone();
        handle.spawn(async move {
            tokio::time::sleep(FLUSH_EVERY).await;
            let n = me.pending.swap(0, Ordering::AcqRel);
            if n > 0 {
                let script = redis::Script::new(BUDGET_DEPOSIT);
                let r: Result<i64, Unavailable> = me.conn.script(&script, &[&me.deposits_key], &[n.to_string(), Self::window_s(&policy).to_string()]).await;
                if let Err(Some(why)) = r {
                    (me.on_outage)(why);
                }
            }
            me.flushing.store(false, Ordering::Release);
        });
    }

    pub fn deposit_shared(self: &Arc<Self>, key: &str, policy: &BudgetPolicy) {
        self.local.deposit(key, policy);
        self.pending.fetch_add(1, Ordering::Relaxed);
        self.schedule_flush(*policy);
    }

    pub async fn withdraw_shared(&self, key: &str, policy: &BudgetPolicy) -> Result<bool, StateError> {
        let pending = self.pending.swap(0, Ordering::AcqRel);
        let script = redis::Script::new(BUDGET_WITHDRAW);
        let args = [policy.ratio.to_string(), policy.min_per_sec.to_string(), Self::window_s(policy).to_string(), pending.to_string()];
        match self.conn.script::<i64>(&script, &[&self.deposits_key, &self.withdrawals_key], &args).await {
            Ok(v) => {
                // The local budget keeps counting too, for the next outage.
                let _ = self.local.withdraw(key, policy).await;
                Ok(v == 1)
            }
            Err(why) => {
                self.pending.fetch_add(pending, Ordering::Relaxed);
                if let Some(why) = why {
                    (self.on_outage)(why);
                }
                self.local.withdraw(key, policy).await
            }
        }
    }
}

/// The `RetryBudgetStore` face of a shared budget (one per service that asks for it).
pub struct SharedBudgetStore(pub Arc<SharedBudget>);

impl RetryBudgetStore for SharedBudgetStore {
    fn deposit(&self, key: &str, policy: &BudgetPolicy) {
        self.0.deposit_shared(key, policy);
    }

    fn withdraw<'a>(&'a self, key: &'a str, policy: &'a BudgetPolicy) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(self.0.withdraw_shared(key, policy))
    }
}

// ---- the idempotent receiver: one hash per key (`s` state P/D/F, `f` fence, `l` lease end in ms, `r` result)

/// KEYS[1] the record, KEYS[2] the fence counter; ARGV lease_ms, ttl_ms, retry_failed (0/1).
/// Returns {1, fence, ''} claimed, {2, 0, result} processed, {3, lease_left_ms, ''} in flight, {4, 0, ''} failed.
const CLAIM: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HGET', KEYS[1], 's')
if s == 'D' then return {2, 0, redis.call('HGET', KEYS[1], 'r')} end
if s == 'P' then
  local l = tonumber(redis.call('HGET', KEYS[1], 'l'))
  if l > now then return {3, l - now, ''} end
end
if s == 'F' and ARGV[3] == '0' then return {4, 0, ''} end
local f = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 's', 'P', 'f', f, 'l', now + tonumber(ARGV[1]))
redis.call('HDEL', KEYS[1], 'r')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, f, ''}
"#;

/// KEYS[1] the record; ARGV fence, new state (D/F), ttl_ms, result.
/// 1 written, 2 this fence finished it before, 0 another fence holds it (lost).
const FINISH: &str = r#"
if redis.call('HGET', KEYS[1], 'f') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 's') ~= 'P' then return 2 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'r', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;

/// The idempotent receiver's state in Redis (a fleet).
pub struct RedisReceiver {
    conn: Arc<RedisConn>,
    fence_key: String,
    claim: redis::Script,
    finish: redis::Script,
}

impl RedisReceiver {
    pub fn new(url: &str, prefix: &str) -> Result<Self, HarnessError> {
        Ok(RedisReceiver {
            conn: RedisConn::new(url, "redis_url")?,
            fence_key: format!("{prefix}__fence"),
            claim: redis::Script::new(CLAIM),
            finish: redis::Script::new(FINISH),
        })
    }

    async fn finish(&self, key: &str, fence: u64, state: &str, result: &[u8], ttl: Duration) -> Result<Finish, Unavailable> {
        // Results are text (bindings store JSON); anything else is refused before this point.
        let args = [fence.to_string(), state.to_string(), ttl.as_millis().to_string(), String::from_utf8_lossy(result).into_owned()];
        let code: i64 = self.conn.script(&self.finish, &[key], &args).await?;
        Ok(match code {
            1 => Finish::Written,
            2 => Finish::AlreadyFinished,
            _ => Finish::Lost,
        })
    }
}

impl IdempotencyStore for RedisReceiver {
    fn claim<'a>(&'a self, key: &'a str, lease: Duration, ttl: Duration, retry_failed: bool) -> BoxFuture<'a, Result<ClaimState, Unavailable>> {
        Box::pin(async move {
            let args = [lease.as_millis().to_string(), ttl.as_millis().to_string(), (retry_failed as u8).to_string()];
            let (code, n, result): (i64, i64, Vec<u8>) = self.conn.script(&self.claim, &[key, &self.fence_key], &args).await?;
            Ok(match code {
                1 => ClaimState::Claimed { fence: n as u64 },
                2 => ClaimState::Processed(result),
                3 => ClaimState::InFlight { lease_left: Duration::from_millis(n.max(1) as u64) },
                _ => ClaimState::Failed,
            })
        })
    }

    fn complete<'a>(&'a self, key: &'a str, fence: u64, result: &'a [u8], ttl: Duration) -> BoxFuture<'a, Result<Finish, Unavailable>> {
        Box::pin(self.finish(key, fence, "D", result, ttl))
    }

    fn fail<'a>(&'a self, key: &'a str, fence: u64, ttl: Duration) -> BoxFuture<'a, Result<Finish, Unavailable>> {
        Box::pin(self.finish(key, fence, "F", b"", ttl))
    }
}

// ---- fleet-wide rate limits: GCRA in one Lua script on Redis's clock; the 429 pause rides
// on the same round trip.

const CHECK: &str = r#"
local pause = redis.call('PTTL', KEYS[2])
if pause > 0 then return {2, pause} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat - tonumber(ARGV[2])
if allow_at > now then return {0, math.ceil((allow_at - now) / 1000)} end
local new_tat = tat + tonumber(ARGV[1])
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
return {1, 0}
"#;

/// KEYS[1] the pause flag; ARGV[1] milliseconds. A longer pause already set stays.
const PAUSE: &str = r#"
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 1
"#;

/// `RateLimitStore` on Redis: keys `harness:rl:{key}:tat` and `harness:rl:{key}:pause`.
pub struct RedisRateLimits {
    conn: Arc<RedisConn>,
    check: redis::Script,
    pause: redis::Script,
}

impl RedisRateLimits {
    pub fn new(conn: Arc<RedisConn>) -> Self {
        RedisRateLimits { conn, check: redis::Script::new(CHECK), pause: redis::Script::new(PAUSE) }
    }
}

impl RateLimitStore for RedisRateLimits {
    fn check<'a>(&'a self, key: &'a str, rate: Rate) -> BoxFuture<'a, Result<RateDecision, Unavailable>> {
        Box::pin(async move {
            let interval_us = (1_000_000.0 / rate.per_second.max(1e-6)).max(1.0);
            let tolerance_us = interval_us * (rate.burst.max(1) - 1) as f64;
            let (tat, pause) = (format!("harness:rl:{key}:tat"), format!("harness:rl:{key}:pause"));
            let args = [format!("{interval_us:.0}"), format!("{tolerance_us:.0}")];
            let (code, ms): (i64, i64) = self.conn.script(&self.check, &[&tat, &pause], &args).await?;
            let d = Duration::from_millis(ms.max(1) as u64);
            Ok(match code {
                1 => RateDecision::Allowed,
                2 => RateDecision::Paused(d),
                _ => RateDecision::Wait(d),
            })
        })
    }

    fn pause<'a>(&'a self, key: &'a str, pause: Duration) -> BoxFuture<'a, Result<(), Unavailable>> {
        Box::pin(async move {
            let k = format!("harness:rl:{key}:pause");
            let _: i64 = self.conn.script(&self.pause, &[&k], &[pause.as_millis().max(1).to_string()]).await?;
            Ok(())
        })
    }
}

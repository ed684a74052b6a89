//! The in-memory backend of the state traits: one process, no I/O, tokio's clock.
//! (Local rate limits are `governor`'s, in `ratelimit/`; only a fleet needs a store.)
//!
//! Guarantees: every operation is atomic under one short lock and never awaits
//! while holding it; expired entries are dropped lazily when touched and in a
//! sweep once the map grows past `SWEEP_AT`, so memory stays bounded by live keys.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::store::*;
use crate::transport::BoxFuture;

/// Entries kept before expired ones are swept.
const SWEEP_AT: usize = 10_000;
/// Deposits are kept in this many time slices of `ttl / SLICES` each.
const SLICES: usize = 10;

#[derive(Default)]
pub struct MemoryState {
    tokens: Mutex<HashMap<String, CachedToken>>,
    budgets: Mutex<HashMap<String, Budget>>,
}

impl MemoryState {
    pub fn new() -> Self {
        Self::default()
    }
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

impl TokenCache for MemoryState {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<CachedToken>, StateError>> {
        let mut tokens = self.tokens.lock();
        let hit = tokens.get(key).cloned();
        if hit.as_ref().is_some_and(|t| t.expires_at <= SystemTime::now()) {
            tokens.remove(key);
            return ready(Ok(None));
        }
        ready(Ok(hit))
    }

    fn put<'a>(&'a self, key: &'a str, token: CachedToken) -> BoxFuture<'a, Result<(), StateError>> {
        let mut tokens = self.tokens.lock();
        if tokens.len() >= SWEEP_AT {
            let now = SystemTime::now();
            tokens.retain(|_, t| t.expires_at > now);
        }
        tokens.insert(key.to_string(), token);
        ready(Ok(()))
    }

    fn remove<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        self.tokens.lock().remove(key);
        ready(Ok(()))
    }
}


/// Deposits in time slices (so they expire), and the floor's own bucket.
struct Budget {
    /// Thousandths of a retry per slice, newest last, with each slice's start.
    slices: Vec<(Instant, u64)>,
    floor: f64,
    last_refill: Instant,
}

impl Budget {
    fn new(policy: &BudgetPolicy) -> Self {
        Budget { slices: Vec::with_capacity(SLICES + 1), floor: policy.min_per_sec as f64, last_refill: Instant::now() }
    }

    fn expire(&mut self, now: Instant, ttl: Duration) {
        self.slices.retain(|(start, _)| now.saturating_duration_since(*start) < ttl);
    }
}

impl RetryBudgetStore for MemoryState {
    fn deposit(&self, key: &str, policy: &BudgetPolicy) {
        let now = Instant::now();
        let slice = (policy.ttl / SLICES as u32).max(Duration::from_millis(1));
        let milli = (policy.ratio * 1000.0).round() as u64;
        let mut budgets = self.budgets.lock();
        let b = match budgets.get_mut(key) {
            Some(b) => b,
            None => budgets.entry(key.to_string()).or_insert_with(|| Budget::new(policy)),
        };
        match b.slices.last_mut() {
            Some((start, n)) if now.saturating_duration_since(*start) < slice => *n += milli,
            _ => {
                b.expire(now, policy.ttl);
                b.slices.push((now, milli));
            }
        }
    }

    fn withdraw<'a>(&'a self, key: &'a str, policy: &'a BudgetPolicy) -> BoxFuture<'a, Result<bool, StateError>> {
        let now = Instant::now();
        let mut budgets = self.budgets.lock();
        let b = budgets.entry(key.to_string()).or_insert_with(|| Budget::new(policy));
        let min = policy.min_per_sec as f64;
        b.floor = (b.floor + now.saturating_duration_since(b.last_refill).as_secs_f64() * min).min(min);
        b.last_refill = now;
        if b.floor >= 1.0 {
            b.floor -= 1.0;
            return ready(Ok(true));
        }
        b.expire(now, policy.ttl);
        // Integer thousandths: ten deposits of 0.2 make exactly two retries.
        let mut need = 1000u64;
        if b.slices.iter().map(|(_, n)| n).sum::<u64>() < need {
            return ready(Ok(false));
        }
        for (_, n) in b.slices.iter_mut() {
            let take = need.min(*n);
            *n -= take;
            need -= take;
            if need == 0 {
                break;
            }
        }
        ready(Ok(true))
    }
}


enum Receipt {
    Pending { lease_until: Instant },
    Processed(Vec<u8>),
    Failed,
}

struct Record {
    state: Receipt,
    fence: u64,
    expires: Instant,
}

#[derive(Default)]
/// The idempotent receiver's state in this process (its own map and fence counter).
pub struct MemoryReceiver {
    inner: Mutex<(HashMap<String, Record>, u64)>,
}


impl IdempotencyStore for MemoryReceiver {
    fn claim<'a>(&'a self, key: &'a str, lease: Duration, ttl: Duration, retry_failed: bool) -> BoxFuture<'a, Result<ClaimState, Unavailable>> {
        let now = Instant::now();
        let mut g = self.inner.lock();
        let (map, fences) = &mut *g;
        if map.len() >= SWEEP_AT {
            map.retain(|_, r| r.expires > now);
        }
        if let Some(r) = map.get(key).filter(|r| r.expires > now) {
            match &r.state {
                Receipt::Processed(result) => return ready(Ok(ClaimState::Processed(result.clone()))),
                Receipt::Pending { lease_until } if *lease_until > now => {
                    return ready(Ok(ClaimState::InFlight { lease_left: *lease_until - now }));
                }
                Receipt::Failed if !retry_failed => return ready(Ok(ClaimState::Failed)),
                _ => {}
            }
        }
        *fences += 1;
        let fence = *fences;
        map.insert(key.to_string(), Record { state: Receipt::Pending { lease_until: now + lease }, fence, expires: now + ttl });
        ready(Ok(ClaimState::Claimed { fence }))
    }

    fn complete<'a>(&'a self, key: &'a str, fence: u64, result: &'a [u8], ttl: Duration) -> BoxFuture<'a, Result<Finish, Unavailable>> {
        ready(Ok(self.finish(key, fence, Receipt::Processed(result.to_vec()), ttl)))
    }

    fn fail<'a>(&'a self, key: &'a str, fence: u64, ttl: Duration) -> BoxFuture<'a, Result<Finish, Unavailable>> {
        ready(Ok(self.finish(key, fence, Receipt::Failed, ttl)))
    }
}

impl MemoryReceiver {
    fn finish(&self, key: &str, fence: u64, to: Receipt, ttl: Duration) -> Finish {
        let mut g = self.inner.lock();
        match g.0.get_mut(key) {
            Some(r) if r.fence == fence && matches!(r.state, Receipt::Pending { .. }) => {
                r.state = to;
                r.expires = Instant::now() + ttl;
                Finish::Written
            }
            Some(r) if r.fence == fence => Finish::AlreadyFinished,
            _ => Finish::Lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> BudgetPolicy {
        BudgetPolicy { ratio: 0.2, min_per_sec: 0, ttl: Duration::from_secs(10) }
    }

    #[tokio::test(start_paused = true)]
    async fn budget_deposits_make_exact_retries_and_expire() {
        let s = MemoryState::new();
        for _ in 0..10 {
            s.deposit("svc", &policy());
        }
        assert!(s.withdraw("svc", &policy()).await.unwrap());
        assert!(s.withdraw("svc", &policy()).await.unwrap());
        assert!(!s.withdraw("svc", &policy()).await.unwrap());
        for _ in 0..10 {
            s.deposit("svc", &policy());
        }
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(!s.withdraw("svc", &policy()).await.unwrap(), "deposits older than the ttl expired");
    }

    #[tokio::test(start_paused = true)]
    async fn budget_floor_refills_per_second() {
        let s = MemoryState::new();
        let p = BudgetPolicy { ratio: 0.0, min_per_sec: 2, ttl: Duration::from_secs(10) };
        assert!(s.withdraw("a", &p).await.unwrap() && s.withdraw("a", &p).await.unwrap());
        assert!(!s.withdraw("a", &p).await.unwrap());
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(s.withdraw("a", &p).await.unwrap());
    }

    #[tokio::test]
    async fn tokens_expire_and_are_redacted() {
        let s = MemoryState::new();
        let t = CachedToken { value: "tok-secret".into(), expires_at: SystemTime::now() + Duration::from_secs(60) };
        s.put("a", t.clone()).await.unwrap();
        assert_eq!(s.get("a").await.unwrap(), Some(t.clone()));
        assert!(!format!("{t:?}").contains("tok-secret"));
        s.put("b", CachedToken { value: "x".into(), expires_at: SystemTime::now() - Duration::from_secs(1) }).await.unwrap();
        assert_eq!(s.get("b").await.unwrap(), None);
    }
}

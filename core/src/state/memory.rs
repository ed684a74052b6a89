//! The in-memory backend of every state trait: one process, no I/O, tokio's clock.
//!
//! Guarantees: every operation is atomic under one short lock and never awaits
//! while holding it; expired entries are dropped lazily when touched and in a
//! sweep once the map grows past `SWEEP_AT`, so memory stays bounded by live keys.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::*;

/// Entries kept before expired ones are swept.
const SWEEP_AT: usize = 10_000;
/// Deposits are kept in this many time slices of `ttl / SLICES` each.
const SLICES: usize = 10;

#[derive(Default)]
pub struct MemoryState {
    tokens: Mutex<HashMap<String, CachedToken>>,
    /// GCRA: the theoretical arrival time per key.
    tats: Mutex<HashMap<String, Instant>>,
    budgets: Mutex<HashMap<String, Budget>>,
    idempotency: Mutex<HashMap<String, (IdempotencyState, Instant)>>,
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

impl RateLimitStore for MemoryState {
    fn check<'a>(&'a self, key: &'a str, rate: Rate) -> BoxFuture<'a, Result<RateDecision, StateError>> {
        let now = Instant::now();
        let interval = Duration::from_secs_f64(1.0 / rate.per_second.max(1e-9));
        let tolerance = interval * rate.burst;
        let mut tats = self.tats.lock();
        if tats.len() >= SWEEP_AT {
            tats.retain(|_, tat| *tat > now);
        }
        let tat = tats.get(key).copied().unwrap_or(now).max(now);
        let allow_at = tat.checked_sub(tolerance).unwrap_or(now);
        if allow_at > now {
            return ready(Ok(RateDecision::Wait(allow_at - now)));
        }
        tats.insert(key.to_string(), tat + interval);
        ready(Ok(RateDecision::Allowed))
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

impl IdempotencyStore for MemoryState {
    fn begin<'a>(&'a self, key: &'a str, ttl: Duration) -> BoxFuture<'a, Result<IdempotencyState, StateError>> {
        let now = Instant::now();
        let mut map = self.idempotency.lock();
        if map.len() >= SWEEP_AT {
            map.retain(|_, (_, until)| *until > now);
        }
        match map.get(key) {
            Some((state, until)) if *until > now => {
                let seen = match state {
                    IdempotencyState::Done(r) => IdempotencyState::Done(r.clone()),
                    _ => IdempotencyState::InFlight,
                };
                ready(Ok(seen))
            }
            _ => {
                map.insert(key.to_string(), (IdempotencyState::InFlight, now + ttl));
                ready(Ok(IdempotencyState::Claimed))
            }
        }
    }

    fn complete<'a>(&'a self, key: &'a str, result: Vec<u8>, ttl: Duration) -> BoxFuture<'a, Result<(), StateError>> {
        self.idempotency.lock().insert(key.to_string(), (IdempotencyState::Done(result), Instant::now() + ttl));
        ready(Ok(()))
    }

    fn release<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        let mut map = self.idempotency.lock();
        if matches!(map.get(key), Some((IdempotencyState::InFlight, _))) {
            map.remove(key);
        }
        ready(Ok(()))
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

    #[tokio::test(start_paused = true)]
    async fn gcra_allows_burst_then_paces() {
        let s = MemoryState::new();
        let rate = Rate { per_second: 10.0, burst: 2 };
        for _ in 0..3 {
            assert_eq!(s.check("k", rate).await.unwrap(), RateDecision::Allowed);
        }
        match s.check("k", rate).await.unwrap() {
            RateDecision::Wait(d) => assert!(d > Duration::ZERO && d <= Duration::from_millis(100), "{d:?}"),
            other => panic!("{other:?}"),
        }
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(s.check("k", rate).await.unwrap(), RateDecision::Allowed);
    }

    #[tokio::test(start_paused = true)]
    async fn idempotency_claims_once_and_replays_the_result() {
        let s = MemoryState::new();
        let ttl = Duration::from_secs(60);
        assert_eq!(s.begin("k", ttl).await.unwrap(), IdempotencyState::Claimed);
        assert_eq!(s.begin("k", ttl).await.unwrap(), IdempotencyState::InFlight);
        s.complete("k", b"ok".to_vec(), ttl).await.unwrap();
        assert_eq!(s.begin("k", ttl).await.unwrap(), IdempotencyState::Done(b"ok".to_vec()));
        assert_eq!(s.begin("j", ttl).await.unwrap(), IdempotencyState::Claimed);
        s.release("j").await.unwrap();
        assert_eq!(s.begin("j", ttl).await.unwrap(), IdempotencyState::Claimed);
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(s.begin("k", ttl).await.unwrap(), IdempotencyState::Claimed);
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

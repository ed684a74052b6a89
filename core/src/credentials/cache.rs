//! One credential's token: cached, refreshed with two thresholds, single-flight.
//!
//! Guarantees: before the soft threshold the cached token is used as is; inside the
//! soft window one background refresh starts and requests do not wait (a failed one
//! leaves the current token in use); inside the hard window (or with no token)
//! requests wait for a refresh and fail with `AuthError` if none succeeds; however
//! many requests need a refresh at once, the provider is called exactly once; a
//! refresh never outlives `timeout_ms`; a dead credential fails fast until it is
//! replaced; nothing here prints a token.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::secret::Secret;
use super::shared::{SharedTokens, Unavailable};
use crate::host::Token;
use crate::error::{ErrorKind, HarnessError};
use crate::host::{ProviderError, TokenProvider};

/// The refresh thresholds and the provider's time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub soft: Duration,
    pub hard: Duration,
    pub timeout: Duration,
}

struct Cached {
    value: Secret,
    /// `None`: never expires.
    expires_at: Option<Instant>,
    /// The thresholds for this token: the configured ones, shrunk for a short-lived
    /// token (at most half and a fifth of its lifetime) so it is not refreshed at once.
    soft: Duration,
    hard: Duration,
}

#[derive(Default)]
struct State {
    token: Option<Cached>,
    /// The refresh in flight, if any: its waiters are woken when it ends.
    inflight: Option<Arc<Notify>>,
    /// Refreshes finished so far (a waiter tells its own refresh's end from an older one).
    completed: u64,
    dead: Option<String>,
    last_error: Option<String>,
    last_refresh: Option<SystemTime>,
}

/// The fleet's shared copy and the warning to give (once per outage) when it is unavailable.
pub(crate) type Shared = (Arc<SharedTokens>, Arc<dyn Fn(String) + Send + Sync>);

/// Where the provider comes from: fixed (OAuth2), or set by the host later (`callback`).
pub(crate) type ProviderSlot = Arc<dyn Fn() -> Option<Arc<dyn TokenProvider>> + Send + Sync>;

pub struct RefreshingToken {
    state: Mutex<State>,
    provider: ProviderSlot,
    thresholds: Thresholds,
    service: String,
    /// A fleet-wide copy in Redis, and what to do (once per outage) when it is unavailable.
    shared: Option<Shared>,
    shared_down: std::sync::atomic::AtomicBool,
    /// `harness_token_refreshes_total{service,outcome}`: (success, failure).
    counters: Option<(prometheus_client::metrics::counter::Counter, prometheus_client::metrics::counter::Counter)>,
}

/// What the state API shows of a token (never the token).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenStatus {
    /// `valid`, `refreshing`, `expired` or `dead`.
    pub status: &'static str,
    /// Unix milliseconds; absent for a token that does not expire (or none yet).
    pub expires_at_ms: Option<u64>,
    pub last_refresh_ms: Option<u64>,
    pub last_error: Option<String>,
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn auth_error(message: String) -> HarnessError {
    HarnessError::new(ErrorKind::Auth, message)
}

/// Ends a refresh that did not finish normally (a panicking provider): no refresh may
/// stay in flight forever.
struct RefreshGuard {
    cache: Arc<RefreshingToken>,
    done: Arc<Notify>,
    finished: bool,
}

impl Drop for RefreshGuard {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut st = self.cache.state.lock();
        st.inflight = None;
        st.completed += 1;
        st.last_error = Some("the token provider panicked".into());
        drop(st);
        self.done.notify_waiters();
    }
}

impl RefreshingToken {
    #[cfg(test)]
    pub(crate) fn new(service: &str, provider: ProviderSlot, thresholds: Thresholds) -> Arc<Self> {
        Self::with_shared(service, provider, thresholds, None, None)
    }

    pub(crate) fn with_shared(
        service: &str,
        provider: ProviderSlot,
        thresholds: Thresholds,
        shared: Option<Shared>,
        counters: Option<(prometheus_client::metrics::counter::Counter, prometheus_client::metrics::counter::Counter)>,
    ) -> Arc<Self> {
        Arc::new(RefreshingToken {
            counters,
            state: Mutex::new(State::default()),
            provider,
            thresholds,
            service: service.to_string(),
            shared,
            shared_down: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// One provider call, bounded by the refresh timeout.
    /// One provider call, bounded by the refresh timeout. Whatever the provider gives, a
    /// lifetime of zero is malformed and a longer one than `MAX_TOKEN_LIFETIME` is held
    /// that long (no clock overflow); the token in use is scrubbed from an error's text.
    async fn call_provider(&self, p: &Arc<dyn TokenProvider>) -> Result<Token, ProviderError> {
        let r = match tokio::time::timeout(self.thresholds.timeout, p.fetch()).await {
            Ok(r) => r,
            Err(_) => Err(ProviderError::new(format!("the token provider did not answer within {} ms", self.thresholds.timeout.as_millis()))),
        };
        match r {
            Ok(Token { expires_in: Some(d), .. }) if d.is_zero() => Err(ProviderError::new("the token provider gave a lifetime of 0 (expected a positive number of seconds)")),
            Ok(mut t) => {
                t.expires_in = t.expires_in.map(|d| d.min(crate::host::MAX_TOKEN_LIFETIME));
                Ok(t)
            }
            Err(mut e) => {
                if let Some(current) = self.state.lock().token.as_ref() {
                    let mut known = crate::redact::Secrets::default();
                    known.add(current.value.expose());
                    e.message = known.scrub(&e.message).into_owned();
                }
                Err(e)
            }
        }
    }

    fn shared_unavailable(&self, why: &Unavailable) {
        use std::sync::atomic::Ordering;
        if !self.shared_down.swap(true, Ordering::AcqRel) {
            if let Some((_, warn)) = &self.shared {
                warn(why.0.clone());
            }
        }
    }

    /// A refresh, through the fleet's shared copy when there is one; with Redis
    /// unavailable, a local refresh (and one warning per outage).
    async fn fetch(&self, p: Arc<dyn TokenProvider>) -> Result<Token, ProviderError> {
        let Some((shared, _)) = &self.shared else { return self.call_provider(&p).await };
        match self.fetch_shared(shared, &p).await {
            Ok(r) => {
                self.shared_down.store(false, std::sync::atomic::Ordering::Release);
                r
            }
            Err(unavailable) => {
                self.shared_unavailable(&unavailable);
                self.call_provider(&p).await
            }
        }
    }

    /// Uses a fresh token another process stored, else takes the lock and refreshes for
    /// everyone, else waits for the lock holder's token.
    async fn fetch_shared(&self, shared: &SharedTokens, p: &Arc<dyn TokenProvider>) -> Result<Result<Token, ProviderError>, Unavailable> {
        let current = self.state.lock().token.as_ref().map(|t| t.value.clone());
        let usable = |found: Option<(Secret, Option<SystemTime>)>| -> Option<Token> {
            let (v, exp) = found?;
            if Some(&v) == current.as_ref() {
                return None;
            }
            let Some(e) = exp else { return Some(Token { value: v, expires_in: None }) };
            let left = e.duration_since(SystemTime::now()).ok()?;
            (left > self.thresholds.hard.min(left / 2)).then_some(Token { value: v, expires_in: Some(left) })
        };
        if let Some(t) = usable(shared.get().await?) {
            return Ok(Ok(t));
        }
        match shared.try_lock(self.thresholds.timeout + Duration::from_secs(1)).await? {
            Some(fence) => {
                // Checked again under the lock: a holder that stored its token and let go
                // between our read and our lock must not be followed by a second refresh.
                if let Some(t) = usable(shared.get().await?) {
                    let _ = shared.unlock(fence).await;
                    return Ok(Ok(t));
                }
                let r = self.call_provider(p).await;
                if let Ok(t) = &r {
                    let expires = t.expires_in.map(|d| SystemTime::now() + d);
                    let _ = shared.put(fence, &t.value, expires).await;
                }
                let _ = shared.unlock(fence).await;
                Ok(r)
            }
            None => {
                // Another process is refreshing: wait for its token.
                let until = Instant::now() + self.thresholds.timeout;
                while Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if let Some(t) = usable(shared.get().await?) {
                        return Ok(Ok(t));
                    }
                }
                Ok(Err(ProviderError::new("waited for another process's refresh, which did not finish in time")))
            }
        }
    }

    /// A token usable now, refreshing as the thresholds say. `wait` bounds how long a
    /// request may wait for a refresh (its own deadline).
    pub async fn get(self: &Arc<Self>, wait: Duration) -> Result<Secret, HarnessError> {
        let give_up = Instant::now() + wait;
        loop {
            let (notified, seen) = {
                let mut st = self.state.lock();
                if let Some(why) = &st.dead {
                    return Err(auth_error(format!("the credential for `{}` is dead: {why}", self.service)));
                }
                let now = Instant::now();
                if let Some(t) = &st.token {
                    let fresh = t.expires_at.is_none_or(|at| now + t.hard < at);
                    if fresh {
                        let value = t.value.clone();
                        let soft = t.expires_at.is_some_and(|at| now + t.soft >= at);
                        if soft && st.inflight.is_none() {
                            self.start_refresh(&mut st);
                        }
                        return Ok(value);
                    }
                }
                let notify = match &st.inflight {
                    Some(n) => n.clone(),
                    None => self.start_refresh(&mut st),
                };
                let notified = notify.notified_owned();
                (notified, st.completed)
            };
            tokio::pin!(notified);
            notified.as_mut().enable();
            // The refresh may have ended between the lock and `enable`.
            let pending = self.state.lock().completed == seen;
            if pending && tokio::time::timeout_at(give_up, notified).await.is_err() {
                return Err(auth_error(format!("no token for `{}` within the request's deadline (a refresh is still running)", self.service)));
            }
            let st = self.state.lock();
            let now = Instant::now();
            let usable = st.token.as_ref().is_some_and(|t| t.expires_at.is_none_or(|at| now + t.hard < at));
            if st.completed > seen && !usable && st.dead.is_none() {
                let why = st.last_error.clone().unwrap_or_else(|| "the refresh failed".into());
                return Err(auth_error(format!("cannot get a token for `{}`: {why}", self.service)));
            }
            if usable {
                if let Some(t) = &st.token {
                    return Ok(t.value.clone());
                }
            }
        }
    }

    /// The token held now, if any, without refreshing (to scrub it from what is passed on).
    pub fn peek(&self) -> Option<Secret> {
        self.state.lock().token.as_ref().map(|t| t.value.clone())
    }

    /// Starts the one refresh (the caller holds the lock and saw none in flight).
    fn start_refresh(self: &Arc<Self>, st: &mut State) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        st.inflight = Some(notify.clone());
        let this = self.clone();
        let done = notify.clone();
        // On the runtime, not in the request: a cancelled request never cancels the refresh.
        let task = async move {
            // If the provider panics (or the task is dropped), the guard still ends the refresh.
            let guard = RefreshGuard { cache: this.clone(), done: done.clone(), finished: false };
            let result = match (this.provider)() {
                None => Err(ProviderError::new(format!("no token provider is set for `{}`", this.service))),
                Some(p) => this.fetch(p).await,
            };
            let mut st = this.state.lock();
            st.inflight = None;
            st.completed += 1;
            st.last_refresh = Some(SystemTime::now());
            match result {
                Ok(token) => {
                    let (soft, hard) = match token.expires_in {
                        Some(ttl) => (this.thresholds.soft.min(ttl / 2), this.thresholds.hard.min(ttl / 5)),
                        None => (this.thresholds.soft, this.thresholds.hard),
                    };
                    st.token = Some(Cached { value: token.value, expires_at: token.expires_in.map(|d| Instant::now() + d), soft, hard });
                    st.last_error = None;
                    if let Some((ok, _)) = &this.counters {
                        ok.inc();
                    }
                }
                Err(e) => {
                    let message = crate::redact::escape_control(&e.message).into_owned();
                    if e.dead {
                        st.dead = Some(message.clone());
                    }
                    st.last_error = Some(message);
                    if let Some((_, failed)) = &this.counters {
                        failed.inc();
                    }
                }
            }
            drop(st);
            let mut guard = guard;
            guard.finished = true;
            done.notify_waiters();
        };
        // On the runtime the request runs on (the core's, or a Rust caller's own).
        match tokio::runtime::Handle::try_current().map_err(|_| ()).or_else(|_| crate::runtime::handle().map_err(|_| ())) {
            Ok(h) => {
                h.spawn(task);
            }
            Err(()) => {
                st.inflight = None;
            }
        }
        notify
    }

    /// The downstream rejected `token` (a 401): unless a newer one is already cached, the
    /// next `get` waits for a fresh one.
    pub fn reject(&self, token: &Secret) {
        let mut st = self.state.lock();
        if st.token.as_ref().is_some_and(|t| &t.value == token) {
            st.token = None;
        }
    }

    /// Forgets a dead verdict (the provider changed).
    pub fn revive(&self) {
        let mut st = self.state.lock();
        st.dead = None;
        st.token = None;
    }

    pub fn status(&self) -> TokenStatus {
        let st = self.state.lock();
        let now = Instant::now();
        let status = if st.dead.is_some() {
            "dead"
        } else if st.inflight.is_some() {
            "refreshing"
        } else {
            match &st.token {
                Some(t) if t.expires_at.is_none_or(|at| now < at) => "valid",
                _ => "expired",
            }
        };
        let expires_at_ms = st.token.as_ref().and_then(|t| t.expires_at).map(|at| {
            let left = at.saturating_duration_since(now);
            unix_ms(SystemTime::now() + left)
        });
        TokenStatus { status, expires_at_ms, last_refresh_ms: st.last_refresh.map(unix_ms), last_error: st.last_error.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::BoxFuture;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Counts calls; answers after `delay` with a token valid for `ttl`, or fails.
    struct Counting {
        calls: AtomicU32,
        delay: Duration,
        ttl: Option<Duration>,
        fail: Mutex<Option<ProviderError>>,
    }

    impl TokenProvider for Counting {
        fn fetch(&self) -> BoxFuture<'_, Result<Token, ProviderError>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                tokio::time::sleep(self.delay).await;
                if let Some(e) = self.fail.lock().clone() {
                    return Err(e);
                }
                Ok(Token { value: Secret::new(format!("tok-{n}")), expires_in: self.ttl })
            })
        }
    }

    fn setup(ttl: Option<Duration>, delay: Duration) -> (Arc<RefreshingToken>, Arc<Counting>) {
        let p = Arc::new(Counting { calls: AtomicU32::new(0), delay, ttl, fail: Mutex::new(None) });
        let slot_p: Arc<dyn TokenProvider> = p.clone();
        let slot: ProviderSlot = Arc::new(move || Some(slot_p.clone()));
        let t = Thresholds { soft: Duration::from_secs(600), hard: Duration::from_secs(60), timeout: Duration::from_secs(10) };
        (RefreshingToken::new("svc", slot, t), p)
    }

    const WAIT: Duration = Duration::from_secs(30);

    #[tokio::test(start_paused = true)]
    async fn a_thousand_concurrent_waiters_make_one_provider_call() {
        let (cache, p) = setup(Some(Duration::from_secs(3600)), Duration::from_millis(50));
        let waiters: Vec<_> = (0..1000).map(|_| {
            let c = cache.clone();
            tokio::spawn(async move { c.get(WAIT).await })
        }).collect();
        for w in waiters {
            assert_eq!(w.await.unwrap().unwrap().expose(), "tok-1");
        }
        assert_eq!(p.calls.load(Ordering::SeqCst), 1);
        assert_eq!(cache.status().status, "valid");
    }

    #[tokio::test(start_paused = true)]
    async fn the_soft_window_refreshes_in_the_background_without_waiting() {
        let (cache, p) = setup(Some(Duration::from_secs(3600)), Duration::from_secs(5));
        assert_eq!(cache.get(WAIT).await.unwrap().expose(), "tok-1");
        // 55 minutes later: 5 minutes left, inside the soft (10 min) but not the hard (1 min) window.
        tokio::time::advance(Duration::from_secs(55 * 60)).await;
        let started = Instant::now();
        assert_eq!(cache.get(WAIT).await.unwrap().expose(), "tok-1", "no waiting in the soft window");
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(cache.status().status, "refreshing");
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(cache.get(WAIT).await.unwrap().expose(), "tok-2");
        assert_eq!(p.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_soft_refresh_keeps_the_current_token() {
        let (cache, p) = setup(Some(Duration::from_secs(3600)), Duration::ZERO);
        cache.get(WAIT).await.unwrap();
        *p.fail.lock() = Some(ProviderError::new("auth server down"));
        tokio::time::advance(Duration::from_secs(55 * 60)).await;
        assert_eq!(cache.get(WAIT).await.unwrap().expose(), "tok-1");
        tokio::task::yield_now().await;
        assert_eq!(cache.get(WAIT).await.unwrap().expose(), "tok-1");
        assert_eq!(cache.status().last_error.as_deref(), Some("auth server down"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_hard_window_waits_and_fails_when_no_refresh_succeeds() {
        let (cache, p) = setup(Some(Duration::from_secs(3600)), Duration::ZERO);
        cache.get(WAIT).await.unwrap();
        *p.fail.lock() = Some(ProviderError::new("auth server down"));
        tokio::time::advance(Duration::from_secs(3600 - 30)).await;
        let e = cache.get(WAIT).await.unwrap_err();
        assert_eq!(e.name(), "AuthError");
        assert!(e.message.contains("auth server down"), "{}", e.message);
        *p.fail.lock() = None;
        assert_eq!(cache.get(WAIT).await.unwrap().expose(), "tok-3");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_credential_fails_fast_without_calling_again() {
        let (cache, p) = setup(Some(Duration::from_secs(3600)), Duration::ZERO);
        *p.fail.lock() = Some(ProviderError { message: "invalid_grant".into(), dead: true });
        assert!(cache.get(WAIT).await.unwrap_err().message.contains("invalid_grant"));
        for _ in 0..10 {
            assert!(cache.get(WAIT).await.unwrap_err().message.contains("is dead"));
        }
        assert_eq!(p.calls.load(Ordering::SeqCst), 1);
        assert_eq!(cache.status().status, "dead");
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_lived_token_is_not_refreshed_on_every_request() {
        let (cache, p) = setup(Some(Duration::from_secs(30)), Duration::ZERO);
        for _ in 0..5 {
            assert_eq!(cache.get(WAIT).await.unwrap().expose(), "tok-1");
        }
        assert_eq!(p.calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(25)).await;
        assert_eq!(cache.get(WAIT).await.unwrap().expose(), "tok-2", "inside its shrunk hard window (6 s)");
    }

    struct Panicking;
    impl TokenProvider for Panicking {
        fn fetch(&self) -> BoxFuture<'_, Result<Token, ProviderError>> {
            Box::pin(async { panic!("provider bug") })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_provider_ends_its_refresh_with_an_error() {
        let p: Arc<dyn TokenProvider> = Arc::new(Panicking);
        let slot: ProviderSlot = Arc::new(move || Some(p.clone()));
        let t = Thresholds { soft: Duration::from_secs(600), hard: Duration::from_secs(60), timeout: Duration::from_secs(10) };
        let cache = RefreshingToken::new("svc", slot, t);
        let e = cache.get(WAIT).await.unwrap_err();
        assert!(e.message.contains("panicked"), "{}", e.message);
        assert_eq!(cache.status().status, "expired", "no refresh is left in flight");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_provider_times_out() {
        let (cache, _p) = setup(Some(Duration::from_secs(3600)), Duration::from_secs(60));
        let e = cache.get(WAIT).await.unwrap_err();
        assert!(e.message.contains("did not answer within 10000 ms"), "{}", e.message);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rejected_token_is_refreshed_once_for_all_its_holders() {
        let (cache, p) = setup(Some(Duration::from_secs(3600)), Duration::from_millis(10));
        let t1 = cache.get(WAIT).await.unwrap();
        cache.reject(&t1);
        cache.reject(&t1);
        let (a, b) = tokio::join!(cache.get(WAIT), cache.get(WAIT));
        assert_eq!((a.unwrap().expose().to_string(), b.unwrap().expose().to_string()), ("tok-2".into(), "tok-2".into()));
        assert_eq!(p.calls.load(Ordering::SeqCst), 2);
        let status = cache.status();
        assert!(!format!("{status:?}").contains("tok-"));
    }
}

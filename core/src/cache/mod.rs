//! Answers not sent for: HTTP caching by RFC 9111 (`http.rs`), identical in-flight
//! requests sharing one call (`Flights`), an exact and a semantic answer cache for chat
//! routes (`answers.rs`, `semantic.rs`), all in this process's bounded stores
//! (`store.rs`) and, with `cache.shared`, in the fleet's Redis too (`shared.rs`).
//!
//! Guarantees: nothing is cached unless the config turns it on; no answer crosses
//! principals unless a route's `scope: route` says so; errors, partial streams and
//! answers that failed validation are never stored; every store is bounded in bytes.

pub mod answers;
pub mod config;
pub mod http;
pub mod semantic;
pub mod shared;
pub mod stamp;
pub mod store;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{FutureExt, Shared, WeakShared};
use parking_lot::Mutex;

use crate::error::HarnessError;
pub use config::{CacheConfig, CacheScope, HttpCacheConfig, RouteCacheConfig, SharedCacheConfig};
use shared::{Kind, SemanticWire, SharedCache};
pub use stamp::CacheStamp;
use store::{Key, Store};

type Flight<T> = Pin<Box<dyn Future<Output = Result<T, HarnessError>> + Send>>;

/// Identical calls in flight: the first starts the work, the rest wait for its result.
/// The work runs while any caller still waits (a cancelled caller cancels nobody else)
/// and is dropped, permits and all, when every caller has gone.
pub struct Flights<T: Clone> {
    map: Mutex<HashMap<Key, WeakShared<Flight<T>>>>,
}

impl<T: Clone> Default for Flights<T> {
    fn default() -> Self {
        Flights { map: Mutex::new(HashMap::new()) }
    }
}

impl<T: Clone + Send + Sync + 'static> Flights<T> {
    /// The call in flight under `key`, or a new one from `start`; true when this caller started it.
    pub fn join(&self, key: Key, start: impl FnOnce() -> Flight<T>) -> (Shared<Flight<T>>, bool) {
        let mut map = self.map.lock();
        if let Some(live) = map.get(&key).and_then(WeakShared::upgrade) {
            return (live, false);
        }
        let shared = start().shared();
        if let Some(weak) = shared.downgrade() {
            map.insert(key, weak);
        }
        // Finished or abandoned flights leave dead weak entries: swept when they pile up.
        if map.len() > 1024 {
            map.retain(|_, w| w.upgrade().is_some());
        }
        (shared, true)
    }

    /// The flight under `key` is over: later callers start their own.
    pub fn done(&self, key: &Key) {
        self.map.lock().remove(key);
    }

    pub fn in_flight(&self) -> usize {
        self.map.lock().values().filter(|w| w.upgrade().is_some()).count()
    }
}

/// Every cache of one client; kept across reloads (a reload resizes the stores).
pub struct Caches {
    pub http: Arc<Store<http::Variants>>,
    pub answers: Arc<Store<answers::Answer>>,
    pub flights: Flights<crate::response::Response>,
    pub chat_flights: Flights<crate::adapters::ChatResponse>,
    /// Prompts' embeddings, each pointing at its answer in `answers`.
    pub semantic: Arc<semantic::SemanticIndex>,
    /// The fleet's store (`cache.shared`), when configured.
    shared: arc_swap::ArcSwapOption<SharedCache>,
}

/// How much a client's caches hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheSizes {
    pub http_entries: usize,
    pub answers: usize,
    pub semantic_entries: usize,
    /// Local bytes, every store together.
    pub bytes: usize,
    /// With `cache.shared`: whether this instance hears the fleet now (subscribed to its
    /// channel, its semantic index filled from Redis since).
    pub shared_listening: Option<bool>,
}

/// Applies what other instances announce to this client's stores.
struct Local {
    http: Arc<Store<http::Variants>>,
    answers: Arc<Store<answers::Answer>>,
    semantic: Arc<semantic::SemanticIndex>,
}

impl shared::Apply for Local {
    fn semantic(&self, entry: &SemanticWire, vector: &[f32], ttl: Duration) {
        let Some(k) = entry.answer_key() else { return };
        let expires = tokio::time::Instant::now() + ttl;
        self.semantic.insert(&entry.r, entry.s, vector, bytes::Bytes::copy_from_slice(&k), expires);
    }

    fn clear(&self, name: Option<&str>) {
        clear_local(&self.http, &self.answers, &self.semantic, name);
    }
}

fn clear_local(http: &Store<http::Variants>, answers: &Store<answers::Answer>, semantic: &semantic::SemanticIndex, name: Option<&str>) -> usize {
    let s = match name {
        Some(n) => semantic.clear_route(n),
        None => semantic.clear(),
    };
    http.clear(name) + answers.clear(name) + s
}

impl Caches {
    pub fn new(config: &CacheConfig) -> Caches {
        Caches {
            http: Arc::new(Store::new(config.max_bytes as usize, config.max_entry_bytes as usize)),
            answers: Arc::new(Store::new(config.max_bytes as usize, config.max_entry_bytes as usize)),
            flights: Flights::default(),
            chat_flights: Flights::default(),
            semantic: Arc::new(semantic::SemanticIndex::new(config.semantic_max_entries as usize, config.semantic_max_bytes as usize)),
            shared: arc_swap::ArcSwapOption::empty(),
        }
    }

    pub fn configure(&self, config: &CacheConfig) {
        self.http.resize(config.max_bytes as usize, config.max_entry_bytes as usize);
        self.answers.resize(config.max_bytes as usize, config.max_entry_bytes as usize);
    }

    /// Shares the stores through Redis as `config` says (a changed `cache.shared` starts
    /// over; `None` stops sharing). `connect` gives the connection for a URL;
    /// `on_outage(name, why)` hears of the first failure of each outage.
    pub fn share(
        &self,
        config: &CacheConfig,
        connect: impl FnOnce(&str) -> Result<Arc<crate::state::redis::RedisConn>, crate::error::HarnessError>,
        on_outage: Arc<dyn Fn(&str, String) + Send + Sync>,
    ) -> Result<(), crate::error::HarnessError> {
        let Some(want) = &config.shared else {
            self.shared.store(None);
            return Ok(());
        };
        if self.shared.load().as_ref().is_some_and(|s| s.config() == want) {
            return Ok(());
        }
        let conn = connect(&want.redis_url)?;
        let local = Arc::new(Local { http: self.http.clone(), answers: self.answers.clone(), semantic: self.semantic.clone() });
        self.shared.store(Some(SharedCache::start(conn, want, config.max_entry_bytes as usize, local, on_outage)));
        Ok(())
    }

    pub fn shared(&self) -> Option<Arc<SharedCache>> {
        self.shared.load_full()
    }

    /// How much is stored here now.
    pub fn sizes(&self) -> CacheSizes {
        CacheSizes {
            http_entries: self.http.len(),
            answers: self.answers.len(),
            semantic_entries: self.semantic.len(),
            bytes: self.http.bytes() + self.answers.bytes() + self.semantic.bytes(),
            shared_listening: self.shared().map(|s| s.listening()),
        }
    }

    /// Drops what is stored for one service or route (everything when `None`) here and,
    /// when shared, in Redis and on every instance (behind the caller); how many entries
    /// went here.
    pub fn clear(&self, name: Option<&str>) -> usize {
        if let (Some(shared), Ok(rt)) = (self.shared(), crate::runtime::handle()) {
            let name = name.map(str::to_string);
            rt.spawn(async move { shared.clear(name.as_deref()).await });
        }
        clear_local(&self.http, &self.answers, &self.semantic, name)
    }

    /// The HTTP variants stored under `k`: here, else in the fleet's store (then kept here too).
    pub async fn http_get(&self, owner: &Arc<str>, k: &Key) -> Option<Arc<http::Variants>> {
        if let Some(v) = self.http.get(k) {
            return Some(v);
        }
        let (bytes, ttl) = self.shared()?.get(Kind::Http, owner, k).await?;
        let vars = Arc::new(http::Variants::from_wire(&bytes)?);
        self.http.put(*k, owner, vars.clone(), ttl);
        Some(vars)
    }

    /// Stores HTTP variants here and in the fleet's store.
    pub fn http_put(&self, owner: &Arc<str>, k: Key, vars: Arc<http::Variants>, ttl: Duration) {
        if self.http.put(k, owner, vars.clone(), ttl) {
            if let (Some(shared), Some(bytes)) = (self.shared(), vars.to_wire()) {
                shared.put(Kind::Http, owner, &k, bytes, ttl);
            }
        }
    }

    /// The answer stored under `k`: here, else in the fleet's store (then kept here too).
    pub async fn answer_get(&self, owner: &Arc<str>, k: &Key) -> Option<Arc<answers::Answer>> {
        if let Some(a) = self.answers.get(k) {
            return Some(a);
        }
        let (bytes, ttl) = self.shared()?.get(Kind::Answer, owner, k).await?;
        let answer = Arc::new(answers::Answer::from_wire(&bytes)?);
        self.answers.put(*k, owner, answer.clone(), ttl);
        Some(answer)
    }

    /// Stores an answer here and in the fleet's store.
    pub fn answer_put(&self, owner: &Arc<str>, k: Key, answer: Arc<answers::Answer>, ttl: Duration) -> bool {
        if !self.answers.put(k, owner, answer.clone(), ttl) {
            return false;
        }
        if let (Some(shared), Some(bytes)) = (self.shared(), answer.to_wire()) {
            shared.put(Kind::Answer, owner, &k, bytes, ttl);
        }
        true
    }

    /// A prompt's vector pointing at its answer, here and (announced to every instance) in
    /// the fleet's store.
    pub fn semantic_put(&self, owner: &Arc<str>, scope: u64, vector: &[f32], k: Key, answer: Arc<answers::Answer>, ttl: Duration) {
        if !self.answers.put(k, owner, answer.clone(), ttl) {
            return;
        }
        let expires = tokio::time::Instant::now() + ttl;
        self.semantic.insert(owner, scope, vector, bytes::Bytes::copy_from_slice(&k), expires);
        if let (Some(shared), Some(bytes)) = (self.shared(), answer.to_wire()) {
            shared.put_semantic(owner, &SemanticWire::new(owner, scope, &k, vector), &k, bytes, ttl);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn identical_calls_share_one_flight_and_a_dropped_caller_cancels_nobody() {
        let flights: Arc<Flights<u32>> = Arc::new(Flights::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let key = store::key(&[b"k"]);
        let start = |runs: Arc<AtomicUsize>| {
            move || -> Flight<u32> {
                Box::pin(async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    Ok(7)
                })
            }
        };
        let (a, lead_a) = flights.join(key, start(runs.clone()));
        let (b, lead_b) = flights.join(key, start(runs.clone()));
        let (c, _) = flights.join(key, start(runs.clone()));
        assert!(lead_a && !lead_b);
        drop(a);
        let (b, c) = tokio::join!(b, c);
        assert_eq!((b.unwrap(), c.unwrap()), (7, 7));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        flights.done(&key);
        let (d, lead_d) = flights.join(key, start(runs.clone()));
        drop(d);
        assert!(lead_d);
        let (e, lead_e) = flights.join(key, start(runs.clone()));
        assert!(lead_e, "every caller of the last flight went: a new one starts");
        drop(e);
    }
}

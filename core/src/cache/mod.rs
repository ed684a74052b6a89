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
pub mod stamp;
pub mod store;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use futures_util::future::{FutureExt, Shared, WeakShared};
use parking_lot::Mutex;

use crate::error::HarnessError;
pub use config::{CacheConfig, CacheScope, HttpCacheConfig, RouteCacheConfig};
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
    pub http: Store<http::Variants>,
    pub answers: Store<answers::Answer>,
    pub flights: Flights<crate::response::Response>,
    pub chat_flights: Flights<crate::adapters::ChatResponse>,
    /// Prompts' embeddings, each pointing at its answer in `answers`.
    pub semantic: semantic::SemanticIndex,
}

impl Caches {
    pub fn new(config: &CacheConfig) -> Caches {
        Caches {
            http: Store::new(config.max_bytes as usize, config.max_entry_bytes as usize),
            answers: Store::new(config.max_bytes as usize, config.max_entry_bytes as usize),
            flights: Flights::default(),
            chat_flights: Flights::default(),
            semantic: semantic::SemanticIndex::new(config.semantic_max_entries as usize, config.semantic_max_bytes as usize),
        }
    }

    pub fn configure(&self, config: &CacheConfig) {
        self.http.resize(config.max_bytes as usize, config.max_entry_bytes as usize);
        self.answers.resize(config.max_bytes as usize, config.max_entry_bytes as usize);
    }

    /// Drops what is stored for one service or route (everything when `None`); how many entries went.
    pub fn clear(&self, name: Option<&str>) -> usize {
        let semantic = match name {
            Some(n) => self.semantic.clear_route(n),
            None => self.semantic.clear(),
        };
        self.http.clear(name) + self.answers.clear(name) + semantic
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

//! The last good answer per request, for when every provider fails.
//!
//! Guarantees: keyed by route, method, path, the request body and the route's
//! `fallback.version`, so a changed prompt or version never gets an old answer;
//! served only within `cache_ttl_ms` of being fetched; bounded by
//! `cache_entries` (oldest out first); answers over `MAX_ENTRY_BYTES` are not kept.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use parking_lot::Mutex;
use tokio::time::{Duration, Instant};

use crate::response::Response;

/// Larger answers are not cached (the cache holds at most `entries` times this).
const MAX_ENTRY_BYTES: usize = 256 * 1024;

pub(crate) struct FallbackCache {
    inner: Mutex<Inner>,
}

struct Inner {
    capacity: usize,
    map: hashbrown::HashMap<u128, (Instant, Response)>,
    order: VecDeque<u128>,
}

impl FallbackCache {
    pub fn new(capacity: usize) -> Self {
        FallbackCache { inner: Mutex::new(Inner { capacity, map: hashbrown::HashMap::new(), order: VecDeque::new() }) }
    }

    pub fn resize(&self, capacity: usize) {
        let mut s = self.inner.lock();
        s.capacity = capacity;
        s.trim();
    }

    /// A 128-bit key from two differently seeded hashes (collisions are not a concern at this size).
    pub fn key(parts: &[&[u8]]) -> u128 {
        let mut a = std::collections::hash_map::DefaultHasher::new();
        let mut b = std::collections::hash_map::DefaultHasher::new();
        0xa5u8.hash(&mut b);
        for p in parts {
            p.hash(&mut a);
            p.hash(&mut b);
        }
        ((a.finish() as u128) << 64) | b.finish() as u128
    }

    pub fn put(&self, key: u128, resp: &Response) {
        if resp.body.len() > MAX_ENTRY_BYTES {
            return;
        }
        let mut s = self.inner.lock();
        if s.map.insert(key, (Instant::now(), resp.clone())).is_none() {
            s.order.push_back(key);
        }
        s.trim();
    }

    pub fn get(&self, key: u128, ttl: Duration) -> Option<Response> {
        let s = self.inner.lock();
        let (at, resp) = s.map.get(&key)?;
        (at.elapsed() <= ttl).then(|| resp.clone())
    }
}

impl Inner {
    fn trim(&mut self) {
        while self.map.len() > self.capacity {
            match self.order.pop_front() {
                Some(k) => {
                    self.map.remove(&k);
                }
                None => break,
            }
        }
        // Keys re-put after eviction may repeat in `order`; drop the stale ones.
        if self.order.len() > self.capacity * 2 {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(body: &'static str) -> Response {
        Response { status: 200, headers: vec![], body: body.into(), elapsed_ms: 0.0, attempts: 1, trace_id: String::new(), routed: None, cache: None }
    }

    #[tokio::test(start_paused = true)]
    async fn entries_expire_and_are_bounded() {
        let c = FallbackCache::new(2);
        let k = |s: &str| FallbackCache::key(&[b"chat", s.as_bytes()]);
        c.put(k("a"), &resp("A"));
        c.put(k("b"), &resp("B"));
        c.put(k("c"), &resp("C"));
        assert!(c.get(k("a"), Duration::from_secs(1)).is_none(), "the oldest is evicted");
        assert_eq!(c.get(k("c"), Duration::from_secs(1)).unwrap().body, "C");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(c.get(k("c"), Duration::from_secs(1)).is_none(), "past its ttl");
        assert_ne!(k("a"), k("b"));
    }
}

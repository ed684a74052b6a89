//! One store for every cached answer of this process: least recently used out first,
//! bounded in total bytes, each entry with its own expiry and the name (service or route)
//! it belongs to, so one name can be cleared.
//!
//! Guarantees: `bytes()` never exceeds the cap after an insert returns; an entry larger
//! than the per-entry cap is refused; an expired entry is never returned.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A key: SHA-256 of what identifies the answer (stable across processes, so a fleet can share it).
pub type Key = [u8; 32];

/// SHA-256 over `parts`, each length-prefixed (so `["ab", "c"]` and `["a", "bc"]` differ).
pub fn key(parts: &[&[u8]]) -> Key {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(&(p.len() as u64).to_le_bytes());
        ctx.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

pub fn hex(k: &Key) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a stored value reports about itself.
pub trait Weigh {
    fn bytes(&self) -> usize;
}

struct Slot<V> {
    owner: Arc<str>,
    value: Arc<V>,
    expires: Instant,
    bytes: usize,
}

pub struct Store<V> {
    inner: Mutex<Inner<V>>,
}

struct Inner<V> {
    // `lru` keeps the recency order (a hit moves an entry to the front) in O(1).
    map: lru::LruCache<Key, Slot<V>>,
    bytes: usize,
    max_bytes: usize,
    max_entry: usize,
}

/// Per-entry bookkeeping, counted against the cap with the value itself.
const OVERHEAD: usize = 96;

impl<V: Weigh> Store<V> {
    pub fn new(max_bytes: usize, max_entry: usize) -> Self {
        Store { inner: Mutex::new(Inner { map: lru::LruCache::unbounded(), bytes: 0, max_bytes, max_entry }) }
    }

    /// New caps (a reload); entries over them go.
    pub fn resize(&self, max_bytes: usize, max_entry: usize) {
        let mut s = self.inner.lock();
        s.max_bytes = max_bytes;
        s.max_entry = max_entry;
        s.trim();
    }

    /// The live value under `k` (a use: it moves to the front).
    pub fn get(&self, k: &Key) -> Option<Arc<V>> {
        let mut s = self.inner.lock();
        let now = Instant::now();
        match s.map.get(k) {
            Some(slot) if slot.expires > now => Some(slot.value.clone()),
            Some(_) => {
                if let Some(slot) = s.map.pop(k) {
                    s.bytes -= slot.bytes;
                }
                None
            }
            None => None,
        }
    }

    /// Stores `value` for `ttl`; false when it is over the per-entry cap.
    pub fn put(&self, k: Key, owner: &Arc<str>, value: Arc<V>, ttl: Duration) -> bool {
        let bytes = value.bytes() + OVERHEAD;
        let mut s = self.inner.lock();
        if bytes > s.max_entry.saturating_add(OVERHEAD) || bytes > s.max_bytes {
            if let Some(old) = s.map.pop(&k) {
                s.bytes -= old.bytes;
            }
            return false;
        }
        let expires = Instant::now().checked_add(ttl).unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        if let Some(old) = s.map.put(k, Slot { owner: owner.clone(), value, expires, bytes }) {
            s.bytes -= old.bytes;
        }
        s.bytes += bytes;
        s.trim();
        true
    }

    pub fn remove(&self, k: &Key) {
        let mut s = self.inner.lock();
        if let Some(old) = s.map.pop(k) {
            s.bytes -= old.bytes;
        }
    }

    /// Removes every entry of `owner` (every entry when `None`); how many went.
    pub fn clear(&self, owner: Option<&str>) -> usize {
        let mut s = self.inner.lock();
        let keys: Vec<Key> = s.map.iter().filter(|(_, v)| owner.is_none_or(|o| &*v.owner == o)).map(|(k, _)| *k).collect();
        for k in &keys {
            if let Some(old) = s.map.pop(k) {
                s.bytes -= old.bytes;
            }
        }
        keys.len()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map.len()
    }

    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

impl<V> Inner<V> {
    fn trim(&mut self) {
        while self.bytes > self.max_bytes {
            match self.map.pop_lru() {
                Some((_, slot)) => self.bytes -= slot.bytes,
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Blob(usize);
    impl Weigh for Blob {
        fn bytes(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn the_byte_cap_holds_and_the_least_recently_used_goes_first() {
        let s: Store<Blob> = Store::new(10 * (100 + OVERHEAD), 1000);
        let owner: Arc<str> = "svc".into();
        for i in 0..10u8 {
            assert!(s.put(key(&[&[i]]), &owner, Arc::new(Blob(100)), Duration::from_secs(60)));
        }
        assert!(s.get(&key(&[&[0]])).is_some(), "a use moves 0 to the front");
        s.put(key(&[&[10]]), &owner, Arc::new(Blob(100)), Duration::from_secs(60));
        assert!(s.get(&key(&[&[1]])).is_none(), "1 was the least recently used");
        assert!(s.get(&key(&[&[0]])).is_some());
        assert!(s.bytes() <= 10 * (100 + OVERHEAD));
        assert!(!s.put(key(&[b"big"]), &owner, Arc::new(Blob(2000)), Duration::from_secs(60)), "over the per-entry cap");
    }

    #[test]
    fn expired_entries_are_never_returned_and_clear_takes_one_owner() {
        let s: Store<Blob> = Store::new(1 << 20, 1 << 20);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        s.put(key(&[b"1"]), &a, Arc::new(Blob(1)), Duration::ZERO);
        assert!(s.get(&key(&[b"1"])).is_none());
        s.put(key(&[b"2"]), &a, Arc::new(Blob(1)), Duration::from_secs(60));
        s.put(key(&[b"3"]), &b, Arc::new(Blob(1)), Duration::from_secs(60));
        assert_eq!(s.clear(Some("a")), 1);
        assert!(s.get(&key(&[b"3"])).is_some());
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]));
    }
}

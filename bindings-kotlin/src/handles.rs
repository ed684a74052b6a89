//! Handles: how the JVM names a Rust object (a client, a receiver, a running request, an open stream)
//! across the C request path without ever holding its address.
//!
//! A handle is `generation << 32 | slot << SHARD_BITS | shard` and never 0 (0 means "none").
//! A stale, repeated or forged handle finds nothing, since the slot's generation has moved on,
//! so a JVM-side mistake gives "not found", never a use of freed memory. Shards keep concurrent
//! requests from queueing on one lock, and lookups (a client, per request) only read-lock;
//! values are dropped outside the lock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use harness_core::{Client, Idempotency};

const SHARD_BITS: u32 = 4;
const SHARDS: usize = 1 << SHARD_BITS;
/// Slots per shard: what fits beside the shard in the handle's low 32 bits.
const MAX_SLOTS: usize = 1 << (32 - SHARD_BITS);

/// Live clients (`NativeClient::handle`).
pub(crate) static CLIENTS: Handles<Client> = Handles::new();
/// Live idempotent receivers (`NativeIdempotency::handle`).
pub(crate) static RECEIVERS: Handles<Arc<Idempotency>> = Handles::new();

pub struct Handles<T> {
    shards: [RwLock<Slab<T>>; SHARDS],
    next_shard: AtomicUsize,
}

struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

struct Slot<T> {
    /// Bumped on every insert, never 0, so a handle names one insert only.
    generation: u32,
    value: Option<T>,
}

impl<T> Handles<T> {
    pub const fn new() -> Self {
        Handles { shards: [const { RwLock::new(Slab { slots: Vec::new(), free: Vec::new() }) }; SHARDS], next_shard: AtomicUsize::new(0) }
    }

    /// Stores `value`; its handle, or the value back when every slot is taken.
    pub fn insert(&self, value: T) -> Result<u64, T> {
        let shard = self.next_shard.fetch_add(1, Ordering::Relaxed) % SHARDS;
        let mut slab = self.write(shard);
        let index = match slab.free.pop() {
            Some(i) => i as usize,
            None if slab.slots.len() < MAX_SLOTS => {
                slab.slots.push(Slot { generation: 0, value: None });
                slab.slots.len() - 1
            }
            None => return Err(value),
        };
        let slot = &mut slab.slots[index];
        slot.generation = slot.generation.wrapping_add(1).max(1);
        slot.value = Some(value);
        Ok((u64::from(slot.generation) << 32) | ((index as u64) << SHARD_BITS) | shard as u64)
    }

    /// Takes the value out (for the caller to drop, outside the lock); `None` for a stale handle.
    pub fn remove(&self, handle: u64) -> Option<T> {
        let (shard, index, generation) = split(handle)?;
        let mut slab = self.write(shard);
        let slot = slab.slots.get_mut(index).filter(|s| s.generation == generation)?;
        let value = slot.value.take()?;
        slab.free.push(index as u32);
        Some(value)
    }

    /// A clone of the value; `None` for a stale handle.
    pub fn get(&self, handle: u64) -> Option<T>
    where
        T: Clone,
    {
        let (shard, index, generation) = split(handle)?;
        let slab = self.read(shard);
        slab.slots.get(index).filter(|s| s.generation == generation)?.value.clone()
    }

    // A panic while holding a shard cannot leave a slot half-written: a poisoned lock is used as is.
    fn read(&self, shard: usize) -> RwLockReadGuard<'_, Slab<T>> {
        self.shards[shard].read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, shard: usize) -> RwLockWriteGuard<'_, Slab<T>> {
        self.shards[shard].write().unwrap_or_else(|p| p.into_inner())
    }
}

fn split(handle: u64) -> Option<(usize, usize, u32)> {
    let generation = (handle >> 32) as u32;
    if generation == 0 {
        return None;
    }
    let low = handle as u32;
    Some(((low as usize) & (SHARDS - 1), (low >> SHARD_BITS) as usize, generation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_finds_its_value_until_removed() {
        let h: Handles<String> = Handles::new();
        let a = h.insert("a".into()).unwrap();
        assert_ne!(a, 0);
        assert_eq!(h.get(a).as_deref(), Some("a"));
        assert_eq!(h.remove(a).as_deref(), Some("a"));
        assert_eq!(h.get(a), None);
        assert_eq!(h.remove(a), None, "removing twice is a no-op");
    }

    #[test]
    fn a_stale_handle_never_reaches_the_slots_next_value() {
        let h: Handles<u32> = Handles::new();
        let handles: Vec<u64> = (0..100).map(|i| h.insert(i).unwrap()).collect();
        for &x in &handles {
            h.remove(x);
        }
        let fresh: Vec<u64> = (100..200).map(|i| h.insert(i).unwrap()).collect();
        for &old in &handles {
            assert_eq!(h.get(old), None);
            assert_eq!(h.remove(old), None);
        }
        for (i, &f) in fresh.iter().enumerate() {
            assert_eq!(h.get(f), Some(100 + i as u32));
        }
    }

    #[test]
    fn zero_and_made_up_handles_find_nothing() {
        let h: Handles<u32> = Handles::new();
        h.insert(1).unwrap();
        for bogus in [0, 1, u64::MAX, 2 << 32, (1 << 32) | 0xffff_fff0] {
            assert_eq!(h.get(bogus), None);
            assert_eq!(h.remove(bogus), None);
        }
    }
}

//! A bulkhead per service: at most `max` attempts in flight; full means fail fast.
//!
//! Guarantees: a permit is released however the attempt ends (success, error,
//! timeout, cancellation), because release is the permit's `Drop`; the limit can
//! change while permits are out (a reload): permits already held finish, and new
//! ones are granted only below the new limit.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;

pub struct Bulkhead {
    inner: Arc<Inner>,
}

struct Inner {
    max: AtomicU32,
    in_use: AtomicUsize,
    gauge: Gauge,
}

pub struct BulkheadPermit {
    inner: Arc<Inner>,
}

impl Drop for BulkheadPermit {
    fn drop(&mut self) {
        self.inner.in_use.fetch_sub(1, Ordering::AcqRel);
        self.inner.gauge.dec();
    }
}

impl Bulkhead {
    pub fn new(max: u32, in_use_gauge: Gauge) -> Self {
        Bulkhead { inner: Arc::new(Inner { max: AtomicU32::new(max), in_use: AtomicUsize::new(0), gauge: in_use_gauge }) }
    }

    /// A permit now, or `None` when the limit is reached.
    pub fn try_acquire(&self) -> Option<BulkheadPermit> {
        let max = self.inner.max.load(Ordering::Acquire) as usize;
        self.inner.in_use.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).ok()?;
        self.inner.gauge.inc();
        Some(BulkheadPermit { inner: self.inner.clone() })
    }

    /// Changes the limit; permits already held are not revoked.
    pub fn resize(&self, max: u32) {
        self.inner.max.store(max, Ordering::Release);
    }

    pub fn in_use(&self) -> usize {
        self.inner.in_use.load(Ordering::Acquire)
    }

    pub fn max(&self) -> u32 {
        self.inner.max.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_fails_fast_and_drop_releases() {
        let b = Bulkhead::new(2, Gauge::default());
        let p1 = b.try_acquire().unwrap();
        let _p2 = b.try_acquire().unwrap();
        assert!(b.try_acquire().is_none());
        assert_eq!(b.in_use(), 2);
        drop(p1);
        assert_eq!(b.in_use(), 1);
        assert!(b.try_acquire().is_some());
    }

    #[test]
    fn shrinking_lets_held_permits_finish_and_admits_below_the_new_limit() {
        let b = Bulkhead::new(10, Gauge::default());
        let mut held: Vec<_> = (0..8).map(|_| b.try_acquire().unwrap()).collect();
        b.resize(5);
        assert!(b.try_acquire().is_none(), "8 in flight, limit 5");
        held.truncate(5);
        assert!(b.try_acquire().is_none(), "5 in flight, limit 5");
        held.pop();
        let p = b.try_acquire().expect("4 in flight, limit 5");
        assert!(b.try_acquire().is_none());
        drop(p);
        b.resize(20);
        assert_eq!((b.in_use(), b.max()), (4, 20));
    }
}

//! A bulkhead per service: a semaphore that fails fast when full.
//!
//! Guarantees: a permit is released however the attempt ends (success, error,
//! timeout, cancellation), because release is the permit's `Drop`.

use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct Bulkhead {
    max: u32,
    semaphore: Arc<Semaphore>,
    in_use_gauge: Gauge,
}

pub struct BulkheadPermit {
    _permit: OwnedSemaphorePermit,
    gauge: Gauge,
}

impl Drop for BulkheadPermit {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl Bulkhead {
    pub fn new(max: u32, in_use_gauge: Gauge) -> Self {
        Bulkhead { max, semaphore: Arc::new(Semaphore::new(max as usize)), in_use_gauge }
    }

    /// A permit now, or `None` when every permit is taken.
    pub fn try_acquire(&self) -> Option<BulkheadPermit> {
        let permit = self.semaphore.clone().try_acquire_owned().ok()?;
        self.in_use_gauge.inc();
        Some(BulkheadPermit { _permit: permit, gauge: self.in_use_gauge.clone() })
    }

    pub fn in_use(&self) -> usize {
        self.max as usize - self.semaphore.available_permits()
    }

    pub fn max(&self) -> u32 {
        self.max
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
}

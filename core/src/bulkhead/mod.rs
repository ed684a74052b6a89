//! A bulkhead per service: at most `max` attempts in flight; full means fail fast.
//! The limit is fixed (`max_concurrency`) or adaptive (`adaptive:`, see `adaptive`).
//!
//! Guarantees: a permit is released however the attempt ends (success, error,
//! timeout, cancellation), because release is the permit's `Drop`; the limit can
//! change while permits are out (a reload, or the adaptive limit moving): permits
//! already held finish, and new ones are granted only below the new limit.

pub mod adaptive;
pub mod config;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

pub use config::BulkheadConfig;
use adaptive::AdaptiveLimit;

pub struct Bulkhead {
    inner: Arc<Inner>,
}

struct Inner {
    max: AtomicU32,
    in_use: AtomicUsize,
    gauge: Gauge,
    /// The current limit, as a gauge.
    limit_gauge: Gauge,
    adaptive: ArcSwapOption<AdaptiveLimit>,
}

pub struct BulkheadPermit {
    inner: Arc<Inner>,
    /// With an adaptive limit: the limiter, when the call started and what was in flight.
    sample: Option<(Arc<AdaptiveLimit>, Instant, usize)>,
}

impl Drop for BulkheadPermit {
    fn drop(&mut self) {
        self.inner.in_use.fetch_sub(1, Ordering::AcqRel);
        self.inner.gauge.dec();
        if let Some((limiter, started, in_flight)) = self.sample.take() {
            if let Some(limit) = limiter.sample(started.elapsed(), in_flight) {
                // Only while this limiter is still the configured one (a reload may replace it).
                if self.inner.adaptive.load().as_ref().is_some_and(|l| Arc::ptr_eq(l, &limiter)) {
                    self.inner.max.store(limit, Ordering::Release);
                    self.inner.limit_gauge.set(limit as i64);
                }
            }
        }
    }
}

impl Bulkhead {
    pub fn new(config: &BulkheadConfig, in_use_gauge: Gauge, limit_gauge: Gauge) -> Self {
        let b = Bulkhead {
            inner: Arc::new(Inner {
                max: AtomicU32::new(config.max_concurrency),
                in_use: AtomicUsize::new(0),
                gauge: in_use_gauge,
                limit_gauge,
                adaptive: ArcSwapOption::empty(),
            }),
        };
        b.configure(config);
        b
    }

    /// A permit now, or `None` when the limit is reached.
    pub fn try_acquire(&self) -> Option<BulkheadPermit> {
        let max = self.inner.max.load(Ordering::Acquire) as usize;
        let before = self.inner.in_use.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).ok()?;
        self.inner.gauge.inc();
        let sample = self.inner.adaptive.load_full().map(|l| (l, Instant::now(), before + 1));
        Some(BulkheadPermit { inner: self.inner.clone(), sample })
    }

    /// Applies a (re)loaded config: a fixed limit, or an adaptive one (kept, with what it
    /// learned, when its settings did not change). Permits already held are not revoked.
    pub fn configure(&self, config: &BulkheadConfig) {
        match &config.adaptive {
            None => {
                self.inner.adaptive.store(None);
                self.resize(config.max_concurrency);
            }
            Some(a) => {
                if self.inner.adaptive.load().as_ref().is_some_and(|l| &l.config == a) {
                    return;
                }
                self.inner.adaptive.store(Some(Arc::new(AdaptiveLimit::new(a.clone()))));
                self.resize(a.initial);
            }
        }
    }

    /// Changes the limit; permits already held are not revoked.
    pub fn resize(&self, max: u32) {
        self.inner.max.store(max, Ordering::Release);
        self.inner.limit_gauge.set(max as i64);
    }

    /// Whether the limit is adaptive.
    pub fn is_adaptive(&self) -> bool {
        self.inner.adaptive.load().is_some()
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
        let b = Bulkhead::new(&BulkheadConfig { max_concurrency: 2, adaptive: None }, Gauge::default(), Gauge::default());
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
        let b = Bulkhead::new(&BulkheadConfig { max_concurrency: 10, adaptive: None }, Gauge::default(), Gauge::default());
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

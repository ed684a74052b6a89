//! A pool of API keys for one provider: round-robin, quarantine, cool-down.
//!
//! Guarantees: requests spread over the usable keys in turn (a quarantined or cooling
//! key's turn goes to the next usable key after the last one used, so the usable keys
//! share the load evenly: within 1 over any N requests); a key answered with
//! 401/403 is quarantined (until the config reloads); a key answered with 429
//! cools down for its `Retry-After`; with no usable key the request fails with
//! `RateLimitedError` (some key is cooling: `retry_after_ms` says when) or
//! `AuthError` (all quarantined); a key is named by its index or its configured
//! name, never by its value.

use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;

use super::secret::{Secret, SecretSource};
use crate::error::{ErrorKind, HarnessError};

/// A key rate-limited without a `Retry-After` cools down this long.
const DEFAULT_COOL: Duration = Duration::from_secs(1);

pub struct KeyPool {
    service: String,
    keys: Vec<(String, SecretSource)>,
    status: Mutex<Status>,
    /// The longest a key cools after a 429 (the service's `retry.max_retry_after_ms`).
    max_cool: Duration,
    /// `harness_auth_pool_keys_total`, by key name (never the key) and outcome.
    metrics: Option<prometheus_client::metrics::family::Family<crate::observability::metrics::KeyLabels, prometheus_client::metrics::counter::Counter>>,
}

struct Status {
    /// The key used last: the next pick starts after it.
    last: Option<usize>,
    keys: Vec<KeyState>,
}

#[derive(Clone, Default)]
struct KeyState {
    quarantined: bool,
    cool_until: Option<Instant>,
    last_error: Option<String>,
}

/// What the state API shows of one key.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct KeyStatus {
    pub index: usize,
    pub name: String,
    /// `ok`, `cooling` or `quarantined`.
    #[schemars(extend("enum" = ["ok", "cooling", "quarantined"]))]
    pub status: &'static str,
    pub retry_after_ms: Option<u64>,
    pub last_error: Option<String>,
}

impl KeyPool {
    pub fn new(service: &str, keys: Vec<(String, SecretSource)>) -> Self {
        let n = keys.len();
        KeyPool { service: service.into(), keys, status: Mutex::new(Status { last: None, keys: vec![KeyState::default(); n] }), max_cool: Duration::MAX, metrics: None }
    }

    /// Caps a key's cooling after a 429 (a hostile `Retry-After: 99999999` cools it this long).
    pub fn with_max_cool(mut self, max: Duration) -> Self {
        self.max_cool = max;
        self
    }

    /// Counts key use and rejections in `metrics`.
    pub fn with_metrics(
        mut self,
        metrics: prometheus_client::metrics::family::Family<crate::observability::metrics::KeyLabels, prometheus_client::metrics::counter::Counter>,
    ) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn count(&self, idx: usize, outcome: &str) {
        if let (Some(m), Some((name, _))) = (&self.metrics, self.keys.get(idx)) {
            m.get_or_create(&crate::observability::metrics::KeyLabels {
                service: self.service.as_str().into(),
                key: name.as_str().into(),
                outcome: outcome.into(),
            })
            .inc();
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The next usable key after the last one used, round-robin, and its index.
    pub fn pick(&self) -> Result<(usize, Secret), HarnessError> {
        let n = self.keys.len();
        let now = Instant::now();
        let mut status = self.status.lock();
        let start = status.last.map_or(0, |l| l + 1);
        let mut soonest: Option<Instant> = None;
        for i in 0..n {
            let idx = (start + i) % n;
            let s = &status.keys[idx];
            if s.quarantined {
                continue;
            }
            match s.cool_until {
                Some(until) if until > now => soonest = Some(soonest.map_or(until, |x| x.min(until))),
                _ => {
                    let secret = self.keys[idx].1.current()?;
                    status.last = Some(idx);
                    drop(status);
                    self.count(idx, "sent");
                    return Ok((idx, secret));
                }
            }
        }
        Err(match soonest {
            Some(until) => {
                let mut e = HarnessError::new(ErrorKind::RateLimited, format!("every key of `{}` is rate-limited or quarantined", self.service));
                e.retry_after_ms = Some(until.saturating_duration_since(now).as_millis() as u64);
                e
            }
            None => HarnessError::new(ErrorKind::Auth, format!("every key of `{}` was rejected (401/403) and is quarantined", self.service)),
        })
    }

    /// A downstream answer about key `idx`: 401/403 quarantine it, 429 cools it down.
    pub fn report(&self, idx: usize, status: u16, retry_after: Option<Duration>) {
        if matches!(status, 401 | 403 | 429) {
            self.count(idx, &status.to_string());
        }
        let mut st = self.status.lock();
        let Some(s) = st.keys.get_mut(idx) else { return };
        match status {
            401 | 403 => {
                s.quarantined = true;
                s.last_error = Some(format!("rejected with {status}"));
            }
            429 => {
                s.cool_until = Some(Instant::now() + retry_after.unwrap_or(DEFAULT_COOL).min(self.max_cool));
                s.last_error = Some("rate-limited (429)".into());
            }
            _ => {}
        }
    }

    /// Whether another key than `idx` could serve now.
    pub fn has_other(&self, idx: usize) -> bool {
        let now = Instant::now();
        let usable = |s: &KeyState| !s.quarantined && s.cool_until.is_none_or(|u| u <= now);
        self.status.lock().keys.iter().enumerate().any(|(i, s)| i != idx && usable(s))
    }

    pub fn status(&self) -> Vec<KeyStatus> {
        let now = Instant::now();
        self.status
            .lock()
            .keys
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let cooling = s.cool_until.filter(|u| *u > now);
                KeyStatus {
                    index: i,
                    name: self.keys[i].0.clone(),
                    status: if s.quarantined {
                        "quarantined"
                    } else if cooling.is_some() {
                        "cooling"
                    } else {
                        "ok"
                    },
                    retry_after_ms: cooling.map(|u| (u - now).as_millis() as u64),
                    last_error: s.last_error.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> KeyPool {
        let keys = (0..3).map(|i| (format!("k{i}"), SecretSource::Fixed(Secret::new(format!("key-{i}"))))).collect();
        KeyPool::new("llm", keys)
    }

    #[test]
    fn a_quarantined_keys_turn_is_shared_evenly_by_the_others() {
        let p = pool();
        p.report(1, 401, None);
        let picks: Vec<usize> = (0..30).map(|_| p.pick().unwrap().0).collect();
        assert_eq!(picks.iter().filter(|&&i| i == 0).count(), 15, "{picks:?}");
        assert_eq!(picks.iter().filter(|&&i| i == 2).count(), 15, "{picks:?}");
        // Within 1 over any window of N requests.
        for w in picks.windows(3) {
            let zeros = w.iter().filter(|&&i| i == 0).count();
            assert!((1..=2).contains(&zeros), "{picks:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn round_robin_skips_quarantined_and_cooling_keys() {
        let p = pool();
        let picks: Vec<usize> = (0..6).map(|_| p.pick().unwrap().0).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        p.report(1, 401, None);
        p.report(2, 429, Some(Duration::from_secs(5)));
        assert!((0..4).all(|_| p.pick().unwrap().0 == 0));
        p.report(0, 429, Some(Duration::from_secs(2)));
        let e = p.pick().unwrap_err();
        assert_eq!((e.name(), e.retry_after_ms), ("RateLimitedError", Some(2000)));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(p.pick().unwrap().0, 0);
        let s = p.status();
        assert_eq!(s.iter().map(|k| k.status).collect::<Vec<_>>(), vec!["ok", "quarantined", "cooling"]);
        assert!(!format!("{s:?}").contains("key-"));
    }

    #[test]
    fn all_quarantined_is_an_auth_error() {
        let p = pool();
        for i in 0..3 {
            p.report(i, 403, None);
        }
        assert_eq!(p.pick().unwrap_err().name(), "AuthError");
    }
}

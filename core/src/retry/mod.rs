//! Which attempts may be sent again, and how long to wait first.
//!
//! Guarantees: only idempotent methods, requests with an idempotency key, or
//! requests that never left (connect refused) are resent; backoff never
//! overflows; `Retry-After` is honoured in both forms and clamped; the pipeline
//! never sleeps past the deadline (checked by the caller with `Deadline::fits`).


use std::time::{Duration, SystemTime};

use http::Method;

pub mod config;

pub use crate::transport::Failure;
pub use config::{RetryConfig, SharedBudgetConfig};


pub fn is_idempotent(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE)
}

/// Is this outcome worth another try at all (ignoring the method)?
pub fn is_retryable(failure: Failure, cfg: &RetryConfig) -> bool {
    match failure {
        Failure::ConnectRefused | Failure::ConnectTimeout | Failure::Broken | Failure::ResponseTimeout | Failure::IdleTimeout | Failure::TtftTimeout | Failure::Declared => true,
        Failure::TotalTimeout | Failure::Protocol | Failure::TooLarge | Failure::Unmatched => false,
        Failure::Status(s) => matches!(s, 429 | 502 | 503 | 504) || (s == 500 && cfg.retry_on_500),
    }
}

/// May this request be sent again after this failure?
pub fn may_resend(method: &Method, declared_safe: bool, failure: Failure) -> bool {
    is_idempotent(method) || declared_safe || failure.never_sent()
}

/// Exponential backoff for retry number `retry` (1 = first retry): `base * 2^(retry-1)`,
/// capped at `max`, never overflowing. With `jitter = Some(r)`, `r` in [0, 1), the wait
/// is spread over [cap/2, cap] ("equal jitter") so retries from many callers de-synchronise.
pub fn backoff(retry: u32, base: Duration, max: Duration, jitter: Option<f64>) -> Duration {
    let shift = retry.saturating_sub(1).min(63);
    let factor = 1u64.checked_shl(shift).unwrap_or(u64::MAX);
    let base_ms = base.as_millis().min(u64::MAX as u128) as u64;
    let capped = base_ms.saturating_mul(factor).min(max.as_millis().min(u64::MAX as u128) as u64);
    let ms = match jitter {
        Some(r) => {
            let half = capped / 2;
            half + ((capped - half) as f64 * r.clamp(0.0, 1.0)) as u64
        }
        None => capped,
    };
    Duration::from_millis(ms)
}

/// Parses `Retry-After` as delta-seconds or an HTTP-date; garbage gives `None`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX / 1000)));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait before retry number `retry`: the server's `Retry-After` (clamped) when given,
/// else exponential backoff.
pub fn delay_for(retry: u32, cfg: &RetryConfig, retry_after: Option<Duration>, jitter: f64) -> Duration {
    if let Some(ra) = retry_after {
        return ra.min(Duration::from_millis(cfg.max_retry_after_ms));
    }
    backoff(
        retry,
        Duration::from_millis(cfg.base_delay_ms),
        Duration::from_millis(cfg.max_delay_ms),
        cfg.jitter.then_some(jitter),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(1, ms(200), ms(5000), None), ms(200));
        assert_eq!(backoff(2, ms(200), ms(5000), None), ms(400));
        assert_eq!(backoff(3, ms(200), ms(5000), None), ms(800));
        assert_eq!(backoff(10, ms(200), ms(5000), None), ms(5000));
    }

    #[test]
    fn backoff_never_overflows() {
        for retry in [0, 1, 63, 64, 65, 1000, u32::MAX] {
            assert!(backoff(retry, ms(200), ms(5000), Some(0.99)) <= ms(5000));
        }
        assert_eq!(backoff(u32::MAX, Duration::MAX, Duration::MAX, None).as_millis(), u64::MAX as u128);
    }

    #[test]
    fn jitter_stays_within_half_to_full() {
        assert_eq!(backoff(2, ms(200), ms(5000), Some(0.0)), ms(200));
        assert_eq!(backoff(2, ms(200), ms(5000), Some(1.0)), ms(400));
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(10));
        let d = parse_retry_after(&date, now).unwrap();
        assert!(d >= Duration::from_secs(9) && d <= Duration::from_secs(10), "{d:?}");
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
        // Found by fuzzing: delta-seconds has no sign.
        assert_eq!(parse_retry_after("+0", now), None);
        assert_eq!(parse_retry_after("", now), None);
        let past = httpdate::fmt_http_date(now - Duration::from_secs(10));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_is_clamped() {
        let cfg = RetryConfig { max_retry_after_ms: 1000, ..Default::default() };
        assert_eq!(delay_for(1, &cfg, Some(Duration::from_secs(3600)), 0.5), ms(1000));
    }

    #[test]
    fn which_requests_may_resend() {
        assert!(may_resend(&Method::GET, false, Failure::Status(503)));
        assert!(may_resend(&Method::DELETE, false, Failure::Broken));
        assert!(!may_resend(&Method::POST, false, Failure::Status(503)));
        assert!(!may_resend(&Method::POST, false, Failure::Broken));
        assert!(may_resend(&Method::POST, true, Failure::Status(503)));
        assert!(may_resend(&Method::POST, false, Failure::ConnectRefused));
        assert!(!may_resend(&Method::PATCH, false, Failure::ResponseTimeout));
    }

    #[test]
    fn which_outcomes_are_retryable() {
        let cfg = RetryConfig::default();
        for s in [429, 502, 503, 504] {
            assert!(is_retryable(Failure::Status(s), &cfg));
        }
        for s in [400, 401, 403, 404, 409, 422, 500, 501] {
            assert!(!is_retryable(Failure::Status(s), &cfg), "{s}");
        }
        let on500 = RetryConfig { retry_on_500: true, ..Default::default() };
        assert!(is_retryable(Failure::Status(500), &on500));
        assert!(!is_retryable(Failure::TotalTimeout, &cfg));
    }
}

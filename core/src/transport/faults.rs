//! Fault injection: a transport that wraps a service's own (real or mock) and, by rule and
//! rate, adds latency, answers a status, resets the connection, or cuts the body short.
//!
//! Faults enter below every policy, so timeouts, retries, the breaker, routing and the
//! metrics react to them as to real ones. Guarantees: off unless `faults.enabled` (or
//! `HARNESS_FAULTS=1`); decisions are a pure function of the seed, the rule and the request's
//! number on this snapshot, so a run with the same seed and order replays the same faults;
//! every injected fault is counted (`harness_faults_injected_total`) and named in the
//! request's record (`fault`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};

use super::mock::OneChunk;
use super::exchange::{BodySource, BoxFuture, Exchange, Failure, OutgoingRequest, Transport, TransportFailure};
use crate::endpoint;
use crate::error::HarnessError;
use crate::redact::escape_control;

/// `faults:`
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FaultsConfig {
    pub enabled: bool,
    /// Seeds every decision (default: a fresh seed per config load, printed in the announcement).
    pub seed: Option<u64>,
    pub rules: Vec<FaultRule>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    pub service: String,
    /// `"GET /orders/{id}"` or `"/orders/{id}"`; every endpoint when absent.
    pub endpoint: Option<String>,
    /// The share of matching attempts that get the fault.
    pub rate: f64,
    pub fault: FaultKind,
    pub latency_ms: Option<u64>,
    pub status: Option<u16>,
    pub retry_after_s: Option<u64>,
    pub after_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Wait `latency_ms`, then send.
    Latency,
    /// Answer `status` (with `Retry-After: retry_after_s`) without sending.
    Status,
    /// The connection resets before the response head.
    Reset,
    /// The body breaks after `after_bytes`.
    StreamCut,
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Latency => "latency",
            FaultKind::Status => "status",
            FaultKind::Reset => "reset",
            FaultKind::StreamCut => "stream_cut",
        }
    }
}

impl FaultsConfig {
    pub fn active(&self) -> bool {
        self.enabled || std::env::var("HARNESS_FAULTS").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
    }

    /// Checks every rule; `services` are the configured service names.
    pub fn validate(&self, mut services: impl FnMut(&str) -> bool) -> Result<(), HarnessError> {
        for (i, r) in self.rules.iter().enumerate() {
            let field = |f: &str| format!("faults.rules[{i}].{f}");
            let bad = |f: &str, m: String| Err(HarnessError::config(format!("{}: {m}", field(f))));
            if !services(&r.service) {
                return bad("service", format!("unknown service `{}` (faults name a service, also one behind a route)", escape_control(&r.service)));
            }
            if let Some(e) = &r.endpoint {
                let tpl = e.split_once(' ').map(|(_, t)| t).unwrap_or(e);
                if !tpl.starts_with('/') || e.chars().any(char::is_control) {
                    return bad("endpoint", format!("expected \"METHOD /path/{{var}}\" or \"/path\", got {:?}", escape_control(e)));
                }
            }
            if !(0.0..=1.0).contains(&r.rate) {
                return bad("rate", format!("expected a number from 0 to 1, got {}", r.rate));
            }
            match r.fault {
                FaultKind::Latency if r.latency_ms.is_none_or(|l| l > 600_000) => return bad("latency_ms", "required for `latency`, at most 600000".into()),
                FaultKind::Status if !r.status.is_some_and(|s| (200..=599).contains(&s)) => return bad("status", "required for `status`: an HTTP status from 200 to 599".into()),
                FaultKind::StreamCut if r.after_bytes.is_none() => return bad("after_bytes", "required for `stream_cut`".into()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// splitmix64: a well-mixed 64-bit hash (hand-written: six lines, no crate needed for it).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The faults of one service, around its transport.
pub struct FaultTransport {
    inner: Arc<dyn Transport>,
    base_path: String,
    rules: Vec<(usize, FaultRule, Counter)>,
    seed: u64,
    n: AtomicU64,
}

impl FaultTransport {
    /// `rules`: this service's rules with their index in `faults.rules` and their counter.
    pub fn new(inner: Arc<dyn Transport>, base_path: &str, rules: Vec<(usize, FaultRule, Counter)>, seed: u64) -> Self {
        FaultTransport { inner, base_path: base_path.to_string(), rules, seed, n: AtomicU64::new(0) }
    }

    /// The first rule that fires for this attempt.
    fn draw(&self, method: &str, path: &str) -> Option<&(usize, FaultRule, Counter)> {
        let n = self.n.fetch_add(1, Ordering::Relaxed);
        self.rules.iter().find(|(i, r, _)| {
            let applies = r.endpoint.as_deref().is_none_or(|e| endpoint::key_matches_path(e, method, path));
            let u = (mix(self.seed ^ mix(n) ^ ((*i as u64) << 48)) >> 11) as f64 / (1u64 << 53) as f64;
            applies && u < r.rate
        })
    }
}

impl Transport for FaultTransport {
    fn send(&self, request: OutgoingRequest) -> BoxFuture<'_, Result<Exchange, TransportFailure>> {
        let path = request.url.path();
        let path = path.strip_prefix(self.base_path.as_str()).filter(|p| p.starts_with('/')).unwrap_or(path);
        let Some((i, rule, counter)) = self.draw(request.method.as_str(), path) else {
            return self.inner.send(request);
        };
        counter.inc();
        let kind = rule.fault;
        if let Some(mark) = &request.fault {
            let _ = mark.set(kind.as_str());
        }
        let i = *i;
        Box::pin(async move {
            match kind {
                FaultKind::Latency => {
                    tokio::time::sleep(Duration::from_millis(rule.latency_ms.unwrap_or(0))).await;
                    self.inner.send(request).await
                }
                FaultKind::Status => {
                    let status = StatusCode::from_u16(rule.status.unwrap_or(503)).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
                    let mut headers = HeaderMap::new();
                    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    if let Some(s) = rule.retry_after_s {
                        headers.insert(http::header::RETRY_AFTER, HeaderValue::from(s));
                    }
                    let body = format!("{{\"error\":{{\"code\":\"injected_fault\",\"message\":\"fault injected by faults.rules[{i}]\"}}}}");
                    Ok(Exchange { status, headers, body: Box::new(OneChunk(Some(Bytes::from(body)))) })
                }
                FaultKind::Reset => Err(TransportFailure::new(Failure::Broken, format!("connection reset before the response head (fault injected by faults.rules[{i}])"))),
                FaultKind::StreamCut => {
                    let mut ex = self.inner.send(request).await?;
                    ex.body = Box::new(CutBody { inner: ex.body, left: rule.after_bytes.unwrap_or(0), rule: i });
                    // The declared length no longer holds.
                    ex.headers.remove(http::header::CONTENT_LENGTH);
                    Ok(ex)
                }
            }
        })
    }
}

/// A body that breaks after `left` more bytes.
struct CutBody {
    inner: Box<dyn BodySource>,
    left: u64,
    rule: usize,
}

impl BodySource for CutBody {
    fn next_chunk(&mut self) -> BoxFuture<'_, Result<Option<Bytes>, TransportFailure>> {
        Box::pin(async move {
            if self.left == 0 {
                return Err(TransportFailure::new(Failure::Broken, format!("the body was cut (fault injected by faults.rules[{}])", self.rule)));
            }
            match self.inner.next_chunk().await? {
                Some(mut chunk) => {
                    if chunk.len() as u64 > self.left {
                        chunk.truncate(self.left as usize);
                    }
                    self.left -= chunk.len() as u64;
                    Ok(Some(chunk))
                }
                None => Ok(None),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_checked_with_their_index() {
        let cfg = |v: serde_json::Value| serde_json::from_value::<FaultsConfig>(v).unwrap().validate(|s| s == "orders").unwrap_err().message;
        assert!(cfg(serde_json::json!({"rules": [{"service": "nope", "rate": 0.1, "fault": "reset"}]})).contains("faults.rules[0].service"));
        assert!(cfg(serde_json::json!({"rules": [{"service": "orders", "rate": 0.1, "fault": "reset"}, {"service": "orders", "rate": 2, "fault": "reset"}]})).contains("faults.rules[1].rate"));
        assert!(cfg(serde_json::json!({"rules": [{"service": "orders", "rate": 0.1, "fault": "latency"}]})).contains("faults.rules[0].latency_ms"));
        assert!(cfg(serde_json::json!({"rules": [{"service": "orders", "rate": 0.1, "fault": "status"}]})).contains("faults.rules[0].status"));
        assert!(cfg(serde_json::json!({"rules": [{"service": "orders", "rate": 0.1, "fault": "stream_cut"}]})).contains("after_bytes"));
        assert!(serde_json::from_value::<FaultsConfig>(serde_json::json!({"rules": [{"service": "orders", "rate": 0.1, "fault": "explode"}]})).is_err());
    }

    #[test]
    fn the_same_seed_draws_the_same_faults_at_the_configured_rate() {
        let rule = FaultRule { service: "s".into(), endpoint: None, rate: 0.1, fault: FaultKind::Reset, latency_ms: None, status: None, retry_after_s: None, after_bytes: None };
        let make = |seed| FaultTransport::new(Arc::new(crate::transport::memory::MemoryTransport::new(vec![])), "", vec![(0, rule.clone(), Counter::default())], seed);
        let (a, b, c) = (make(7), make(7), make(8));
        let draws = |t: &FaultTransport| (0..20_000).map(|_| t.draw("GET", "/x").is_some()).collect::<Vec<_>>();
        let (da, db, dc) = (draws(&a), draws(&b), draws(&c));
        assert_eq!(da, db);
        assert_ne!(da, dc);
        let hits = da.iter().filter(|x| **x).count();
        assert!((1_800..2_200).contains(&hits), "{hits} of 20000 at 0.1");
    }
}

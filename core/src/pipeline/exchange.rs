//! One attempt on the wire: send, wait for the head, read the body (or hand it over as a
//! stream), classify the outcome, record it on the breaker.
//!
//! Guarantees: the head must come within `response_ms` (a streamed chat's `ttft_ms` when
//! shorter) and the deadline, each body chunk within `idle_ms` and the deadline; a
//! buffered body is never read past `limits.max_response_bytes` (an error page past 64
//! KiB); a 2xx JSON body is checked against its endpoint's schema; a credential the
//! downstream refused is reported to it (a pool key cools or is quarantined, a token is
//! refreshed), and the request is replayed once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::{Instant, Sleep};

use super::call::Call;
use super::classify::{self, Classified};
use super::outcome::{HeadBound, Mode, Once, Open, Reached, Side};
use crate::breaker::{Outcome, Permit};
use crate::bulkhead::BulkheadPermit;
use crate::deadline::Deadline;
use crate::engine::registry::EndpointState;
use crate::engine::{Engine, ServiceRuntime};
use crate::error::MAX_ERROR_BODY;
use crate::host::Event;
use crate::observability::metrics::SchemaLabels;
use crate::response::{headers_to_pairs, Response};
use crate::transport::{BodySource, Failure, OutgoingRequest, TransportFailure};
use crate::validation::ValidateMode;

/// One attempt's request and the permits it holds.
pub(crate) struct Racer {
    pub request: OutgoingRequest,
    pub applied: Option<crate::credentials::Applied>,
    pub breaker: Permit,
    pub bulkhead: BulkheadPermit,
}

/// Where an attempt goes: its provider, that provider's endpoint state (breaker) and service.
#[derive(Clone, Copy)]
pub(crate) struct Lane<'a> {
    pub idx: usize,
    pub ep: &'a EndpointState,
    pub svc: &'a ServiceRuntime,
}

impl<'a> Lane<'a> {
    pub fn of(call: &'a Call, idx: usize) -> Lane<'a> {
        Lane { idx, ep: &call.lanes.eps[idx], svc: &call.plan.providers[idx].svc }
    }
}

/// Tells the hedging race that the first attempt has had no answer by `at`: the attempt's
/// own response timer fires at `at` first, raises `due` and goes on to the response
/// deadline, so that an attempt that answers in time costs no second timer.
#[derive(Clone, Copy)]
pub(crate) struct HedgeSignal<'a> {
    pub at: Instant,
    pub due: &'a AtomicBool,
}

/// How the attempt waits: for a whole body or a stream's head, and how long.
#[derive(Clone, Copy)]
pub(crate) struct Waits<'a> {
    pub mode: Mode,
    pub head: HeadBound,
    pub idle: Duration,
    pub hedge: Option<HedgeSignal<'a>>,
}

impl Waits<'_> {
    pub fn of(svc: &ServiceRuntime, mode: Mode, ttft: Option<Duration>) -> Waits<'static> {
        let ttft = if mode == Mode::Stream { ttft } else { None };
        Waits { mode, head: HeadBound::new(svc.config.timeouts.response_ms, ttft), idle: Duration::from_millis(svc.config.timeouts.idle_ms), hedge: None }
    }
}

/// Sends one attempt and reads its answer (the head, for a stream).
pub(crate) async fn exchange(engine: &Engine, call: &Call, lane: Lane<'_>, racer: Racer, waits: Waits<'_>) -> (Once, Side) {
    let mut side = Side::default();
    let once = exchange_inner(engine, call, lane, racer, waits, &mut side).await;
    (once, side)
}

async fn exchange_inner(engine: &Engine, call: &Call, lane: Lane<'_>, racer: Racer, waits: Waits<'_>, side: &mut Side) -> Once {
    let Racer { request, applied, breaker, bulkhead } = racer;
    let svc = lane.svc;
    let sent_at = Instant::now();
    let (until, head_bound_is_total) = call.deadline.cap(waits.head.after);
    let mut hedge = waits.hedge.filter(|h| h.at < until);
    let timer = tokio::time::sleep_until(hedge.map_or(until, |h| h.at));
    tokio::pin!(timer);
    let fault = request.fault.clone();
    let send = svc.transport.send(request);
    tokio::pin!(send);
    let sent = loop {
        tokio::select! {
            biased;
            r = &mut send => break r,
            _ = &mut timer => {
                if let Some(h) = hedge.take() {
                    // No head by the hedge delay: say so, and wait on for the response deadline.
                    h.due.store(true, Ordering::Release);
                    timer.as_mut().reset(until);
                    continue;
                }
                break Err(if head_bound_is_total {
                    TransportFailure::new(Failure::TotalTimeout, "request deadline expired")
                } else {
                    waits.head.failure()
                });
            }
        }
    };
    if let Some(kind) = fault.as_ref().and_then(|m| m.get()) {
        side.fault = Some(kind);
    }
    let exchange = match sent {
        Ok(exchange) => exchange,
        Err(tf) => {
            drop(bulkhead);
            let c = classify::transport(tf);
            breaker.record(c.health);
            return Once::Failed(c);
        }
    };
    let status = exchange.status.as_u16();
    if status >= 400 {
        return refused(call, lane, (exchange, applied, breaker, bulkhead), waits, timer.as_mut(), side).await;
    }
    let headers = headers_to_pairs(exchange.headers);
    if waits.mode == Mode::Stream {
        return Once::Reached(Reached::Stream(Open { status, headers, body: exchange.body, breaker, bulkhead, sent: sent_at }));
    }
    let mut body = exchange.body;
    let limit = svc.config.limits.max_response_bytes;
    let declared = declared_from_pairs(&headers);
    let read = read_body(body.as_mut(), limit, declared, waits.idle, &call.deadline, timer.as_mut()).await;
    drop(bulkhead);
    let body = match read {
        Ok(body) => body,
        Err(tf) => {
            let c = classify::transport(tf);
            breaker.record(c.health);
            return Once::Failed(c);
        }
    };
    // Response validation: a 2xx JSON body against the endpoint's schema.
    let (_, endpoint, method) = &lane.ep.names;
    if let Some(schema) = svc.schema_for(method, endpoint).filter(|_| (200..300).contains(&status)) {
        if let Err(what) = schema.check(status, &body) {
            let (service, endpoint, _) = &lane.ep.names;
            engine.metrics.schema_violations.get_or_create(&SchemaLabels { service: service.as_ref().into(), endpoint: endpoint.as_ref().into() }).inc();
            if engine.events.is_active() {
                engine.events.emit(Event::SchemaViolation {
                    service: service.to_string(),
                    endpoint: endpoint.to_string(),
                    method: method.to_string(),
                    trace_id: call.trace.trace_id.to_string(),
                    violation: what.clone(),
                    mode: if schema.mode == ValidateMode::Enforce { "enforce" } else { "warn" },
                });
            }
            if schema.mode == ValidateMode::Enforce {
                let health = if schema.breaker_counts { Outcome::Failure } else { Outcome::Success };
                breaker.record(health);
                let mut error = crate::validation::error(status, &what);
                error.body = Some(if body.len() > MAX_ERROR_BODY { Bytes::copy_from_slice(&body[..MAX_ERROR_BODY]) } else { body });
                return Once::Failed(Classified { failure: Failure::Protocol, health, error, retry_after: None });
            }
            side.schema_violation = Some(what);
        }
    }
    breaker.record(Outcome::Success);
    Once::Reached(Reached::Buffered(Response { status, headers, body, elapsed_ms: 0.0, attempts: call.attempts, trace_id: String::new(), routed: None, cache: None }))
}

/// An error status: its page (at most 64 KiB), classified; a refused credential reported
/// and the request replayed; a 429 pauses the service.
async fn refused(
    call: &Call,
    lane: Lane<'_>,
    (exchange, applied, breaker, bulkhead): (crate::transport::Exchange, Option<crate::credentials::Applied>, Permit, BulkheadPermit),
    waits: Waits<'_>,
    timer: std::pin::Pin<&mut Sleep>,
    side: &mut Side,
) -> Once {
    let svc = lane.svc;
    let status = exchange.status.as_u16();
    let mut body = exchange.body;
    // An error page is kept only up to MAX_ERROR_BODY: read no further.
    let read = read_body(body.as_mut(), MAX_ERROR_BODY as u64, None, waits.idle, &call.deadline, timer).await;
    drop(body);
    drop(bulkhead);
    let body = match read {
        Ok(b) => b,
        Err(tf) if tf.failure == Failure::TooLarge => tf.partial.unwrap_or_default(),
        Err(_) => Bytes::new(),
    };
    let mut secrets = call.secrets(lane.idx);
    if let Some(a) = &applied {
        secrets.add(a.secret.expose());
    }
    let c = classify::status(status, &exchange.headers, body, &secrets);
    breaker.record(c.health);
    // The answer about the credential is recorded even on the replay (a pool key that
    // answered 429 cools, whichever attempt it was); a refused one is replayed once,
    // whatever the method: it was not executed.
    if let (Some(cred), Some(a)) = (&svc.credential, &applied) {
        if matches!(status, 401 | 403 | 429) && cred.answer(a, status, c.retry_after, call.auth_replayed) {
            side.auth_replayed = true;
            return Once::Replay;
        }
    }
    // Adaptive 429: the whole service (the fleet, when shared) pauses for its Retry-After.
    if status == 429 {
        if let Some(limiter) = &svc.limiter {
            limiter.pause(c.retry_after).await;
        }
    }
    Once::Failed(c)
}

fn declared_from_pairs(headers: &[(String, String)]) -> Option<u64> {
    headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.trim().parse().ok())
}

/// The earlier of the deadline and `now + idle`, and which phase it belongs to.
pub(crate) fn chunk_bound(idle: Duration, deadline: &Deadline) -> (Instant, Failure) {
    let (at, is_total) = deadline.cap(idle);
    (at, if is_total { Failure::TotalTimeout } else { Failure::IdleTimeout })
}

pub(crate) fn chunk_timeout(failure: Failure, idle: Duration) -> TransportFailure {
    match failure {
        Failure::IdleTimeout => TransportFailure::new(Failure::IdleTimeout, format!("no body bytes for {} ms", idle.as_millis())),
        _ => TransportFailure::new(Failure::TotalTimeout, "request deadline expired while reading the body"),
    }
}

/// Reads a whole body, at most `limit` bytes (refused at once by a declared length,
/// else as soon as the count passes it), each chunk within the idle timeout and the
/// deadline. One timer serves every chunk: it is re-armed, not re-registered.
async fn read_body(body: &mut dyn BodySource, limit: u64, declared: Option<u64>, idle: Duration, deadline: &Deadline, mut timer: std::pin::Pin<&mut Sleep>) -> Result<Bytes, TransportFailure> {
    if let Some(len) = declared.filter(|len| *len > limit) {
        return Err(too_large(limit, format!("Content-Length is {len}"), None));
    }
    let mut buf: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0).min(limit) as usize);
    loop {
        let (at, phase) = chunk_bound(idle, deadline);
        timer.as_mut().reset(at);
        let chunk = tokio::select! {
            biased;
            c = body.next_chunk() => c?,
            _ = &mut timer => return Err(chunk_timeout(phase, idle)),
        };
        let Some(chunk) = chunk else { return Ok(Bytes::from(buf)) };
        if (buf.len() + chunk.len()) as u64 > limit {
            let room = limit as usize - buf.len();
            buf.extend_from_slice(&chunk[..room]);
            return Err(too_large(limit, format!("more than {limit} bytes received"), Some(Bytes::from(buf))));
        }
        if buf.is_empty() && declared == Some(chunk.len() as u64) {
            // One chunk holds the whole declared body: keep it, no copy.
            return Ok(chunk);
        }
        buf.extend_from_slice(&chunk);
    }
}

fn too_large(max: u64, what: String, partial: Option<Bytes>) -> TransportFailure {
    let mut tf = TransportFailure::new(Failure::TooLarge, format!("response body over limits.max_response_bytes ({max}): {what}"));
    tf.partial = partial;
    tf
}

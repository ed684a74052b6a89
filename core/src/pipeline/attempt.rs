//! The attempt loop: breaker, bulkhead, transport, record, retry, backoff.
//!
//! Guarantees: the breaker is checked before every attempt; a full bulkhead
//! fails fast; the response head must come within `response_ms` (and the
//! deadline), each body chunk within `idle_ms` (and the deadline); a buffered
//! body is never read past `limits.max_response_bytes`; only idempotent methods,
//! requests with an idempotency key, or requests that never left are resent,
//! only while the retry budget allows; the loop never sleeps past the deadline.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::{Instant, Sleep};

use super::classify::{self, Classified};
use super::Call;
use crate::breaker::{Outcome, Permit};
use crate::bulkhead::BulkheadPermit;
use crate::deadline::Deadline;
use crate::engine::registry::EndpointState;
use crate::observability::metrics::SchemaLabels;
use crate::validation::ValidateMode;
use crate::engine::{Engine, ServiceRuntime};
use crate::error::{ErrorKind, HarnessError, TimeoutPhase, MAX_ERROR_BODY};
use crate::host::Event;
use crate::response::{headers_to_pairs, Response};
use crate::retry::{self, Failure};
use crate::transport::{BodySource, TransportFailure};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Buffered,
    Stream,
}

/// A successful head whose body the caller will pull, with the permits it holds until then.
pub(crate) struct Open {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Box<dyn BodySource>,
    pub breaker: Permit,
    pub bulkhead: BulkheadPermit,
    /// When the request was sent (a time-to-first-token counts from here, not from the head).
    pub sent: Instant,
}

/// How long an attempt waits for its response head: `response_ms`, or a streamed chat's
/// `ttft_ms` when that is shorter (and then a timeout is a time-to-first-token one).
#[derive(Clone, Copy)]
pub(crate) struct HeadBound {
    after: Duration,
    ttft: bool,
}

impl HeadBound {
    fn new(response_ms: u64, ttft: Option<Duration>) -> Self {
        let response = Duration::from_millis(response_ms);
        match ttft {
            Some(t) if t < response => HeadBound { after: t, ttft: true },
            _ => HeadBound { after: response, ttft: false },
        }
    }

    fn failure(self) -> TransportFailure {
        if self.ttft {
            TransportFailure::new(Failure::TtftTimeout, format!("no first chunk within ttft_ms ({} ms): no response head", self.after.as_millis()))
        } else {
            TransportFailure::new(Failure::ResponseTimeout, format!("no response within {} ms", self.after.as_millis()))
        }
    }
}

pub(crate) enum Reached {
    Buffered(Response),
    Stream(Open),
}

/// What one attempt came to.
pub(crate) enum Once {
    Reached(Reached),
    /// Not sent: the breaker is open, the bulkhead is full, or no credential could be had.
    Refused(HarnessError),
    /// Sent, and failed: what it means for retries and health.
    Failed(Classified),
    /// The downstream refused the credential; it was refreshed or rotated: send again now.
    Replay,
    /// The request itself is bad: no attempt can succeed.
    Fatal(HarnessError),
}

/// The service loop: one service, same-endpoint retries.
pub(crate) async fn run(engine: &Engine, call: &mut Call, mode: Mode) -> Result<Reached, HarnessError> {
    let ep = call.ep.clone();
    loop {
        if call.deadline.expired() {
            return Err(HarnessError::new(ErrorKind::Timeout(TimeoutPhase::Total), "request deadline expired before the next attempt"));
        }
        let classified = match once(engine, call, &ep, mode).await {
            Once::Reached(r) => return Ok(r),
            Once::Refused(e) | Once::Fatal(e) => return Err(e),
            Once::Replay => continue,
            Once::Failed(c) => c,
        };
        let svc = call.svc.clone();
        let cfg = &svc.config;
        // May this be sent again?
        if !retry::is_retryable(classified.failure, &cfg.retry)
            || call.attempts > cfg.retry.max_retries
            || !retry::may_resend(&call.method, call.req.idempotency_key.is_some(), classified.failure)
        {
            return Err(classified.error);
        }
        let delay = retry::delay_for(call.attempts, &cfg.retry, classified.retry_after, engine.jitter());
        // Never sleep past the deadline: when the wait cannot fit, fail now.
        if !call.deadline.fits(delay) {
            return Err(classified.error);
        }
        if !svc.budgets.withdraw(&svc.name, &svc.budget).await.unwrap_or(false) {
            engine.metrics.budget_exhausted.get_or_create(&crate::observability::metrics::ServiceLabels { service: svc.name.as_ref().into() }).inc();
            return Err(classified.error);
        }
        call.ep.retries.inc();
        retry_event(engine, call, &classified, delay);
        tokio::time::sleep(delay).await;
    }
}

pub(crate) fn retry_event(engine: &Engine, call: &Call, classified: &Classified, delay: Duration) {
    if engine.events.is_active() {
        let (service, endpoint, method) = &call.ep.names;
        engine.events.emit(Event::RetryScheduled {
            service: service.to_string(),
            endpoint: endpoint.to_string(),
            method: method.to_string(),
            trace_id: call.trace.trace_id.to_string(),
            attempt: call.attempts,
            delay_ms: delay.as_millis() as u64,
            reason: classified.error.name(),
            status: classified.error.status,
        });
    }
}

/// One attempt on `call.svc`, with `ep`'s breaker: breaker, bulkhead, credentials,
/// transport, then the body (buffered) or the open stream.
pub(crate) async fn once(engine: &Engine, call: &mut Call, ep: &EndpointState, mode: Mode) -> Once {
    let svc = call.svc.clone();
    let cfg = &svc.config;
    // A streamed chat's first chunk is due `ttft_ms` after the request is sent: a provider
    // that sends no head by then is as silent as one that sends a head and no chunk.
    let response_timeout = HeadBound::new(cfg.timeouts.response_ms, match mode {
        Mode::Stream => call.route.as_ref().and_then(|rc| rc.ttft),
        Mode::Buffered => None,
    });
    let idle = Duration::from_millis(cfg.timeouts.idle_ms);
    // The rate limit (and a downstream's 429 pause) before anything else: a refusal sends nothing.
    if let Some(limiter) = &svc.limiter {
        let (_, endpoint, method) = &ep.names;
        if let Err(e) = limiter.acquire(method, endpoint, &call.deadline).await {
            return Once::Refused(e);
        }
    }
    // Breaker before every attempt.
    let breaker = match ep.breaker.acquire(svc.breaker_for(&ep.names.2, &ep.names.1)) {
        Ok(p) => p,
        Err(r) => {
            let mut e = HarnessError::new(ErrorKind::CircuitOpen, "circuit breaker is open: the call was not sent");
            e.retry_after_ms = Some(r.retry_in.as_millis() as u64);
            return Once::Refused(e);
        }
    };
    // Bulkhead: full means fail fast; the breaker permit drops unrecorded (ignored).
    let bulkhead = &svc.shared.bulkhead;
    let Some(bulkhead_permit) = bulkhead.try_acquire() else {
        if engine.events.is_active() {
            let (service, endpoint, method) = &ep.names;
            engine.events.emit(Event::BulkheadRejected {
                service: service.to_string(),
                endpoint: endpoint.to_string(),
                method: method.to_string(),
                max_concurrency: bulkhead.max(),
            });
        }
        return Once::Refused(HarnessError::new(
            ErrorKind::BulkheadFull,
            format!("bulkhead full: {} requests already in flight", bulkhead.max()),
        ));
    };
    call.attempts += 1;
    let mut request = match call.outgoing() {
        Ok(r) => r,
        Err(e) => return Once::Fatal(e),
    };
    // Credentials per attempt: a refresh or a rotation between attempts is picked up.
    let applied = match &svc.credential {
        Some(c) => match c.apply(&mut request, call.deadline.remaining()).await {
            Ok(a) => Some(a),
            Err(e) => {
                // No credential, nothing sent: not an attempt.
                call.attempts -= 1;
                return Once::Refused(e);
            }
        },
        None => None,
    };

    let started = Instant::now();
    let (_, endpoint, method) = &ep.names;
    // Hedging: buffered reads (or keyed writes, or chat completions) with `hedge:` on the
    // service, the endpoint or the route (a route hedges on another provider).
    let route = call.route.as_ref().map(|rc| (rc.rt.clone(), rc.current.unwrap_or(0)));
    let hedge = match (&route, mode) {
        (_, Mode::Stream) => None,
        (None, _) => svc.hedge_for(method, endpoint),
        (Some((rt, _)), _) => rt.config.hedge.as_ref(),
    }
    .filter(|_| {
        retry::is_idempotent(&call.method)
            || call.req.idempotency_key.is_some()
            || route.as_ref().is_some_and(|(rt, _)| rt.config.adapter == crate::routing::config::AdapterKind::OpenaiCompatible)
    });
    let once = match hedge {
        None => {
            let (once, side) = exchange(engine, call, ep, &svc, request, applied, breaker, bulkhead_permit, mode, response_timeout, idle, None).await;
            side.apply(call);
            once
        }
        Some(h) => {
            let first = Racer { request, applied, breaker, bulkhead: bulkhead_permit };
            let (source, budget) = match &route {
                None => (Source::Service, &svc.shared.hedges),
                Some((rt, first)) => (Source::Route(rt, *first), &*rt.hedges),
            };
            let lane = Lane { ep, svc: &svc, provider: route.as_ref().map(|(_, i)| *i) };
            let (mut once, side, extra) = hedged(engine, call, lane, h, first, started, source, budget).await;
            side.apply(call);
            call.attempts += extra;
            if let Once::Reached(Reached::Buffered(r)) = &mut once {
                r.attempts = call.attempts;
            }
            once
        }
    };
    // The retry heatmap: every attempt that was sent, by number and outcome.
    let outcome = match &once {
        Once::Reached(_) => Some("success"),
        Once::Failed(c) => Some(c.error.name()),
        Once::Replay => Some("AuthError"),
        _ => None,
    };
    if let Some(outcome) = outcome {
        ep.record_attempt(&engine.metrics, call.attempts, outcome, started.elapsed().as_secs_f64());
        if call.spans.is_some() {
            attempt_span(call, &svc, &once, outcome, started);
        }
    }
    once
}

/// Keeps one sent attempt for its span.
fn attempt_span(call: &mut Call, svc: &ServiceRuntime, once: &Once, outcome: &'static str, started: Instant) {
    let status = match once {
        Once::Reached(Reached::Buffered(r)) => Some(r.status),
        Once::Reached(Reached::Stream(o)) => Some(o.status),
        Once::Failed(c) => c.error.status,
        _ => None,
    };
    let provider = call.route.as_ref().and_then(|rc| rc.current).map(|i| call.route.as_ref().expect("route").rt.providers[i].id.clone());
    let span = crate::observability::otel::AttemptSpan {
        number: call.attempts,
        span: call.wire,
        start: started.duration_since(call.started),
        end: call.started.elapsed(),
        status,
        outcome,
        server: super::server_of(svc),
        provider,
    };
    if let Some(spans) = call.spans.as_mut() {
        spans.push(span);
    }
}

/// What an attempt learned for the request's record, applied once it is over (an
/// attempt only reads the call, so that hedged attempts can share it).
#[derive(Default)]
pub(crate) struct Side {
    fault: Option<&'static str>,
    schema_violation: Option<String>,
    auth_replayed: bool,
    /// A route's hedge on another provider won: that provider answered.
    provider: Option<usize>,
}

impl Side {
    fn apply(self, call: &mut Call) {
        if self.fault.is_some() {
            call.fault = self.fault;
        }
        if self.schema_violation.is_some() {
            call.schema_violation = self.schema_violation;
        }
        call.auth_replayed |= self.auth_replayed;
        if let (Some(i), Some(rc)) = (self.provider, call.route.as_mut()) {
            rc.current = Some(i);
        }
    }
}

/// One attempt's request and the permits it holds.
struct Racer {
    request: crate::transport::OutgoingRequest,
    applied: Option<crate::credentials::Applied>,
    breaker: Permit,
    bulkhead: BulkheadPermit,
}

type RaceFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = (Once, Side, bool)> + Send + 'a>>;

/// Where an attempt goes: its endpoint state (breaker), its service, and for a route the provider.
#[derive(Clone, Copy)]
struct Lane<'a> {
    ep: &'a EndpointState,
    svc: &'a ServiceRuntime,
    provider: Option<usize>,
}

/// Where hedges go: the same service, or another provider of the route (the first one's index).
#[derive(Clone, Copy)]
enum Source<'a> {
    Service,
    Route(&'a crate::routing::RouteRuntime, usize),
}

/// The first attempt, and a hedge (up to `max_extra`) each time the attempts in flight
/// have not answered after the hedge delay. The first answer wins; the others are
/// dropped, which cancels them (the connection closes) and releases their permits. A
/// failed attempt waits for the others; no hedge starts after one. Returns the result,
/// what the winner learned, and how many hedges were sent.
#[allow(clippy::too_many_arguments)]
async fn hedged<'a>(
    engine: &'a Engine,
    call: &'a Call,
    lane: Lane<'a>,
    h: &crate::hedge::HedgeConfig,
    first: Racer,
    started: Instant,
    source: Source<'a>,
    budget: &crate::hedge::HedgeBudget,
) -> (Once, Side, u32) {
    budget.deposit(h.budget_ratio);
    let quantile = h.quantile();
    // The latency of the request's own endpoint (the route's, for a route).
    let latencies = &call.ep.latencies;
    let record = |took: Duration| {
        if let Some(q) = quantile {
            latencies.sample(took, q);
        }
    };
    let Some(delay) = h.delay(latencies) else {
        // No basis for a delay yet: a plain attempt, whose latency starts the basis.
        let (once, side, _) = race(engine, call, lane, first, false, None).await;
        record(started.elapsed());
        return (once, side, 0);
    };
    // The common case first: the primary answers before the delay, and nothing else is
    // allocated, polled or timed (the primary lives on this stack and its own response timer
    // raises `due`; hedges go in a set beside it).
    let due = std::sync::atomic::AtomicBool::new(false);
    let primary = race(engine, call, lane, first, false, Some(HedgeSignal { at: started + delay, due: &due }));
    tokio::pin!(primary);
    let answered = std::future::poll_fn(|cx| match std::future::Future::poll(primary.as_mut(), cx) {
        std::task::Poll::Ready(r) => std::task::Poll::Ready(Some(r)),
        std::task::Poll::Pending if due.load(std::sync::atomic::Ordering::Acquire) => std::task::Poll::Ready(None),
        std::task::Poll::Pending => std::task::Poll::Pending,
    })
    .await;
    if let Some((once, mut side, _)) = answered {
        record(started.elapsed());
        side.provider = None;
        return (once, side, 0);
    }
    let mut racers = futures_util::stream::FuturesUnordered::<RaceFuture<'a>>::new();
    let mut primary_live = true;
    let mut extra = 0u32;
    let mut may_hedge = true;
    let mut next_at = started + delay;
    let mut failed: Option<(Once, Side)> = None;
    let name = match source {
        Source::Service => lane.svc.name.as_ref(),
        Source::Route(rt, _) => rt.name.as_ref(),
    };
    let labels = crate::observability::metrics::ServiceLabels { service: name.into() };
    loop {
        let mut hedge_due = false;
        let done = tokio::select! {
            biased;
            (once, mut side, _) = &mut primary, if primary_live => {
                primary_live = false;
                record(started.elapsed());
                side.provider = None;
                Some((once, side, false))
            }
            Some(done) = futures_util::StreamExt::next(&mut racers), if !racers.is_empty() => Some(done),
            _ = tokio::time::sleep_until(next_at), if may_hedge && extra < h.max_extra => {
                hedge_due = true;
                None
            }
            else => None,
        };
        if hedge_due {
            next_at += delay;
            match start_hedge(engine, call, lane, source, budget).await {
                Some((r, hedge_lane)) => {
                    extra += 1;
                    engine.metrics.hedges_sent.get_or_create(&labels).inc();
                    // Shown from the first hedge on, as 0 until one wins.
                    let _ = engine.metrics.hedges_won.get_or_create(&labels);
                    racers.push(Box::pin(race(engine, call, hedge_lane, r, true, None)));
                }
                None => may_hedge = false,
            }
            continue;
        }
        let Some((once, side, is_hedge)) = done else {
            // Nothing left to wait for (every branch disabled): the last failure stands.
            let (once, side) = failed.expect("a race ends with an answer or a failure");
            return (once, side, extra);
        };
        let reached = matches!(once, Once::Reached(_));
        if reached || (!primary_live && racers.is_empty()) {
            if reached && is_hedge {
                engine.metrics.hedges_won.get_or_create(&labels).inc();
            }
            // Losers still racing are dropped here: cancelled, permits released.
            return (once, side, extra);
        }
        // A failure while others still run: wait for them, start no more.
        may_hedge = false;
        failed = Some((once, side));
    }
}

/// One racing attempt on its lane; the side notes the lane's provider.
async fn race<'a>(engine: &'a Engine, call: &'a Call, lane: Lane<'a>, r: Racer, is_hedge: bool, signal: Option<HedgeSignal<'a>>) -> (Once, Side, bool) {
    let response_timeout = HeadBound::new(lane.svc.config.timeouts.response_ms, None);
    let idle = Duration::from_millis(lane.svc.config.timeouts.idle_ms);
    let (once, mut side) = exchange(engine, call, lane.ep, lane.svc, r.request, r.applied, r.breaker, r.bulkhead, Mode::Buffered, response_timeout, idle, signal).await;
    side.provider = lane.provider;
    (once, side, is_hedge)
}

/// A hedge's lane, request and permits, if there is somewhere to send it and the budget,
/// the breaker and the bulkhead allow one. A route's hedge goes to the provider its
/// strategy would pick next with the first one set aside.
async fn start_hedge<'a>(engine: &Engine, call: &'a Call, first: Lane<'a>, source: Source<'a>, budget: &crate::hedge::HedgeBudget) -> Option<(Racer, Lane<'a>)> {
    let (lane, body) = match source {
        Source::Service => (first, None),
        Source::Route(rt, first_idx) => {
            let rc = call.route.as_ref()?;
            let breakers: Vec<crate::breaker::BreakerState> = rc.eps.iter().map(|e| e.breaker.state()).collect();
            let mut tried = rc.tried.clone();
            tried[first_idx].excluded = true;
            let crate::routing::strategy::Pick::Provider(j) = crate::routing::strategy::pick(rt, &breakers, &tried, Instant::now(), || engine.jitter()) else {
                return None;
            };
            let p = &rt.providers[j];
            let body = rc.json.as_ref().map(|json| crate::request::Body::Json(crate::adapters::openai::prepare(json, &p.config, false)));
            (Lane { ep: &rc.eps[j], svc: &p.svc, provider: Some(j) }, body)
        }
    };
    let (_, endpoint, method) = &lane.ep.names;
    // Permits first (cheap, and a refusal costs no budget), then the budget.
    let breaker = lane.ep.breaker.acquire(lane.svc.breaker_for(method, endpoint)).ok()?;
    let bulkhead = lane.svc.shared.bulkhead.try_acquire()?;
    if !budget.withdraw() {
        return None;
    }
    let wire = call.trace.next_span();
    let mut request = super::build_request(lane.svc, &call.req, body.as_ref().unwrap_or(&call.req.body), &call.method, &wire).ok()?;
    let applied = match &lane.svc.credential {
        Some(c) => Some(c.apply(&mut request, call.deadline.remaining()).await.ok()?),
        None => None,
    };
    Some((Racer { request, applied, breaker, bulkhead }, lane))
}

/// Sends one attempt and reads its answer (the head, for a stream).
#[allow(clippy::too_many_arguments)]
async fn exchange(
    engine: &Engine,
    call: &Call,
    ep: &EndpointState,
    svc: &ServiceRuntime,
    request: crate::transport::OutgoingRequest,
    applied: Option<crate::credentials::Applied>,
    breaker: Permit,
    bulkhead_permit: BulkheadPermit,
    mode: Mode,
    response_timeout: HeadBound,
    idle: Duration,
    hedge: Option<HedgeSignal<'_>>,
) -> (Once, Side) {
    let mut side = Side::default();
    let once = exchange_inner(engine, call, ep, svc, request, applied, breaker, bulkhead_permit, mode, response_timeout, idle, hedge, &mut side).await;
    (once, side)
}

/// Tells the hedging race that the first attempt has had no answer by `at`: the attempt's
/// own response timer fires at `at` first, raises `due` and goes on to the response
/// deadline, so that an attempt that answers in time costs no second timer.
#[derive(Clone, Copy)]
struct HedgeSignal<'a> {
    at: Instant,
    due: &'a std::sync::atomic::AtomicBool,
}

#[allow(clippy::too_many_arguments)]
async fn exchange_inner(
    engine: &Engine,
    call: &Call,
    ep: &EndpointState,
    svc: &ServiceRuntime,
    request: crate::transport::OutgoingRequest,
    applied: Option<crate::credentials::Applied>,
    breaker: Permit,
    bulkhead_permit: BulkheadPermit,
    mode: Mode,
    response_timeout: HeadBound,
    idle: Duration,
    mut hedge: Option<HedgeSignal<'_>>,
    side: &mut Side,
) -> Once {
    let cfg = &svc.config;
    let sent_at = Instant::now();
    let (until, head_bound_is_total) = call.deadline.cap(response_timeout.after);
    hedge = hedge.filter(|h| h.at < until);
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
                    h.due.store(true, std::sync::atomic::Ordering::Release);
                    timer.as_mut().reset(until);
                    continue;
                }
                break Err(if head_bound_is_total {
                    TransportFailure::new(Failure::TotalTimeout, "request deadline expired")
                } else {
                    response_timeout.failure()
                });
            }
        }
    };
    if let Some(kind) = fault.as_ref().and_then(|m| m.get()) {
        side.fault = Some(kind);
    }
    match sent {
        Ok(exchange) if exchange.status.as_u16() < 400 => {
            let status = exchange.status.as_u16();
            let headers = headers_to_pairs(exchange.headers);
            if mode == Mode::Stream {
                return Once::Reached(Reached::Stream(Open { status, headers, body: exchange.body, breaker, bulkhead: bulkhead_permit, sent: sent_at }));
            }
            let mut body = exchange.body;
            let limit = cfg.limits.max_response_bytes;
            let declared = declared_from_pairs(&headers);
            let read = read_body(body.as_mut(), limit, declared, idle, &call.deadline, timer.as_mut()).await;
            drop(bulkhead_permit);
            match read {
                Ok(body) => {
                    // Response validation: a 2xx JSON body against the endpoint's schema.
                    let (_, endpoint, method) = &ep.names;
                    if let Some(schema) = svc.schema_for(method, endpoint).filter(|_| (200..300).contains(&status)) {
                        if let Err(what) = schema.check(&body) {
                            let (service, endpoint, _) = &ep.names;
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
                    let resp = Response { status, headers, body, elapsed_ms: 0.0, attempts: call.attempts, trace_id: String::new(), routed: None };
                    Once::Reached(Reached::Buffered(resp))
                }
                Err(tf) => {
                    let c = classify::transport(tf);
                    breaker.record(c.health);
                    Once::Failed(c)
                }
            }
        }
        Ok(exchange) => {
            let status = exchange.status.as_u16();
            let mut body = exchange.body;
            // An error page is kept only up to MAX_ERROR_BODY: read no further.
            let read = read_body(body.as_mut(), MAX_ERROR_BODY as u64, None, idle, &call.deadline, timer.as_mut()).await;
            drop(body);
            drop(bulkhead_permit);
            let body = match read {
                Ok(b) => b,
                Err(tf) if tf.failure == Failure::TooLarge => tf.partial.unwrap_or_default(),
                Err(_) => Bytes::new(),
            };
            let mut secrets = svc.secrets_for(&call.req);
            if let Some(a) = &applied {
                secrets.add(a.secret.expose());
            }
            let c = classify::status(status, &exchange.headers, body, &secrets);
            breaker.record(c.health);
            // A credential the downstream refused (401, or 403/429 for a pool key):
            // refresh or rotate, and replay once, whatever the method: it was not executed.
            // The answer about the credential is recorded even on the replay (a pool key that
            // answered 429 cools, whichever attempt it was).
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
        Err(tf) => {
            drop(bulkhead_permit);
            let c = classify::transport(tf);
            breaker.record(c.health);
            Once::Failed(c)
        }
    }
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
async fn read_body(
    body: &mut dyn BodySource,
    limit: u64,
    declared: Option<u64>,
    idle: Duration,
    deadline: &Deadline,
    mut timer: std::pin::Pin<&mut Sleep>,
) -> Result<Bytes, TransportFailure> {
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

//! One attempt through the stages, in their fixed order: rate limit -> breaker ->
//! bulkhead -> credentials -> the exchange (raced by hedges when asked) -> the retry
//! heatmap and the attempt's span.
//!
//! Guarantees: the breaker is checked before every attempt; a full bulkhead fails fast;
//! a refusal (rate limit, open breaker, full bulkhead, no credential) sends nothing and
//! is not counted as an attempt; credentials are applied per attempt, so a refresh or a
//! rotation between attempts is picked up.

use tokio::time::Instant;

use super::call::{server_of, Call};
use super::exchange::{exchange, Lane, Racer, Waits};
use super::outcome::{Mode, Once, Reached, Side};
use super::race;
use crate::engine::Engine;
use crate::error::{ErrorKind, HarnessError};
use crate::host::Event;

/// One attempt on provider `call.lanes.current` (a plain service's only one).
pub(crate) async fn once(engine: &Engine, call: &mut Call, mode: Mode) -> Once {
    let idx = call.lanes.current;
    let (ep, svc) = (call.lanes.eps[idx].clone(), call.plan.providers[idx].svc.clone());
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
        return Once::Refused(HarnessError::new(ErrorKind::BulkheadFull, format!("bulkhead full: {} requests already in flight", bulkhead.max())));
    };
    call.attempts += 1;
    let mut request = match call.outgoing().await {
        Ok(r) => r,
        // An adapter that failed for this provider only (a host adapter that raised, or one
        // not registered): not sent, so not an attempt; the route goes elsewhere.
        Err(e) if e.provider.is_some() => {
            call.attempts -= 1;
            return Once::Refused(e);
        }
        Err(e) => return Once::Fatal(e),
    };
    // Attempt interceptors change the request before credentials (a signature covers them);
    // a refusal sends nothing.
    if !engine.registry.interceptors.is_empty() {
        if let Err(e) = super::intercept::attempt_before(engine, call, idx, call.attempts, &mut request).await {
            call.attempts -= 1;
            return Once::Fatal(e);
        }
    }
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
    let racer = Racer { request, applied, breaker, bulkhead: bulkhead_permit };
    let ttft = call.route.as_ref().and_then(|rc| rc.ttft);
    let once = match race::hedge_for(call, mode) {
        None => {
            let (once, side) = exchange(engine, call, Lane::of(call, idx), racer, Waits::of(&svc, mode, ttft)).await;
            apply(call, side);
            once
        }
        Some(h) => {
            let (mut once, side, extra) = race::hedged(engine, call, &h, racer, started).await;
            apply(call, side);
            call.attempts += extra;
            if let Once::Reached(Reached::Buffered(r)) = &mut once {
                r.attempts = call.attempts;
            }
            once
        }
    };
    let once = if engine.registry.interceptors.is_empty() { once } else { super::intercept::attempt_after(engine, call, once, started.elapsed()).await };
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
            attempt_span(call, &once, outcome, started);
        }
    }
    once
}

/// What an attempt learned, into the request's record.
fn apply(call: &mut Call, side: Side) {
    if side.fault.is_some() {
        call.fault = side.fault;
    }
    if side.schema_violation.is_some() {
        call.schema_violation = side.schema_violation;
    }
    call.auth_replayed |= side.auth_replayed;
    if let Some(i) = side.provider {
        call.lanes.current = i;
    }
}

/// Keeps one sent attempt for its span.
fn attempt_span(call: &mut Call, once: &Once, outcome: &'static str, started: Instant) {
    let status = match once {
        Once::Reached(r) => Some(r.status()),
        Once::Failed(c) => c.error.status,
        _ => None,
    };
    let idx = call.lanes.current;
    let provider = call.route.is_some().then(|| call.plan.providers[idx].id.clone());
    let span = crate::observability::otel::AttemptSpan {
        number: call.attempts,
        span: call.wire,
        start: started.duration_since(call.started),
        end: call.started.elapsed(),
        status,
        outcome,
        server: server_of(&call.plan.providers[idx].svc),
        provider,
    };
    if let Some(spans) = call.spans.as_mut() {
        spans.push(span);
    }
}

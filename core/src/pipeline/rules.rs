//! What happens after an attempt: the answer is kept, the call fails, or another attempt
//! follows (after a backoff, on the same provider or another). A plain service follows its
//! retry rules, a route its failover rules (DESIGN.md "Routing").
//!
//! Retry rules: only idempotent methods, requests with an idempotency key, or requests that
//! never left are resent; at most `retry.max_retries` times; only while the retry budget
//! allows; never sleeping past the deadline (a backoff that cannot fit fails at once).
//!
//! Failover rules: a 5xx is retried on the same provider up to `same_provider_retries`
//! times after a backoff, then fails over; a 429 cools the provider until its `Retry-After`
//! (at most `max_retry_after_ms`) and fails over at once, unless its `Retry-After` is at
//! most `wait_retry_after_ms`: then it is waited out on the same provider, once per
//! provider and never past the deadline (a wait that cannot fit fails over); a connect failure, silence until
//! the response timeout (or, streaming, `ttft_ms` after the request is sent), a broken,
//! malformed or oversized answer, an open breaker or a full bulkhead fails over at once; a
//! non-retryable 4xx goes to the `on_error` provider for its code, or to the caller
//! intact. Every attempt after the first is within `max_attempts`, the deadline and the
//! route's failover budget; a request that is not retry-safe is never sent twice.

use std::time::Duration;

use tokio::time::Instant;

use super::call::{Call, Failed};
use super::classify::Classified;
use super::outcome::{Once, Reached};
use super::route::{attempt_metric, summary};
use crate::adapters::{openai, Adapter, AnswerFault};
use crate::breaker::Outcome;
use crate::engine::route::Rules;
use crate::engine::Engine;
use crate::error::{ErrorKind, HarnessError, TimeoutPhase};
use crate::host::Event;
use crate::observability::metrics::ServiceLabels;
use crate::retry::{self, Failure};
use crate::routing::config::{AdapterKind, OnInvalid};

/// How long a provider cools after a 429 without `Retry-After`.
const DEFAULT_COOLING: Duration = Duration::from_secs(1);

pub(crate) enum Step {
    /// The answer (or an open stream).
    Done(Reached),
    /// The call ends with this error.
    Fail(HarnessError),
    /// Another attempt: on this provider (`Some`), or wherever the selector picks;
    /// `error` is what this attempt came to.
    Again { to: Option<usize>, error: Option<HarnessError> },
    /// A route may make no more attempts (`max_attempts`): nobody could answer.
    Exhausted,
}

/// The call's deadline passed before the next attempt: the last error, or a total timeout.
pub(crate) fn expired(call: &Call, last_error: Option<HarnessError>) -> HarnessError {
    let fresh = || HarnessError::new(ErrorKind::Timeout(TimeoutPhase::Total), "request deadline expired before the next attempt");
    match call.plan.rules {
        Rules::Retry => fresh(),
        Rules::Failover => last_error.unwrap_or_else(fresh),
    }
}

/// Whether another attempt may start at all (a route's `max_attempts`).
pub(crate) fn may_attempt(call: &Call) -> bool {
    call.plan.rules == Rules::Retry || call.attempts < call.plan.config.max_attempts
}

/// What follows the attempt on provider `idx` that started at `t0`.
pub(crate) async fn after(engine: &Engine, call: &mut Call, idx: usize, t0: Instant, outcome: Once) -> Step {
    let outcome = checked_answer(call, idx, outcome).await;
    let failover = call.plan.rules == Rules::Failover;
    match outcome {
        Once::Reached(reached) => {
            if failover {
                let p = &call.plan.providers[idx];
                p.health.record_success(t0.elapsed(), call.plan.window);
                attempt_metric(engine, &call.plan, idx, "success");
            }
            call.lanes.answered = Some(idx);
            Step::Done(reached)
        }
        Once::Fatal(e) => Step::Fail(e),
        Once::Replay => Step::Again { to: Some(idx), error: None },
        Once::Refused(e) if failover => refused(call, idx, e),
        Once::Refused(e) => Step::Fail(e),
        Once::Failed(mut c) if failover => {
            recode(call, idx, &mut c).await;
            failover_after(engine, call, idx, c).await
        }
        Once::Failed(c) => retry_after(engine, call, c).await,
    }
}

/// A route's 2xx read in the provider's format: one that is not a chat answer is a broken
/// answer; a refusal stated in the body (a safety block) a provider error with its common
/// code; one that does not match the request's `response_format` a failed attempt (or,
/// with `structured_output.on_invalid: error`, the call's error). A good one is read here,
/// once, for whoever needs it next, and a native format's is handed on in OpenAI's shape.
async fn checked_answer(call: &mut Call, idx: usize, outcome: Once) -> Once {
    let Once::Reached(Reached::Buffered(mut resp)) = outcome else { return outcome };
    let plan = call.plan.clone();
    let p = &plan.providers[idx];
    if let Some(inputs) = call.route.as_ref().and_then(|rc| rc.embed) {
        return checked_embeddings(call, idx, resp, inputs);
    }
    let parsed = match &p.adapter {
        Adapter::Pass | Adapter::Missing(_) => return Once::Reached(Reached::Buffered(resp)),
        Adapter::Native(a) => a.parse(&resp.body),
        Adapter::Host(h) => h.parse(resp.status, &resp.headers, &resp.body, call.deadline.remaining()).await,
    };
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(AnswerFault::Malformed(why)) => {
            return Once::Failed(Classified {
                failure: Failure::Protocol,
                health: Outcome::Failure,
                error: HarnessError::new(ErrorKind::Protocol, format!("provider `{}` answered {} with no chat answer: {why}", p.id, resp.status)),
                retry_after: None,
            })
        }
        Err(AnswerFault::Refused { code, message }) => {
            let mut error = HarnessError::new(ErrorKind::HttpStatus, format!("provider `{}` answered {} with a refusal: {message}", p.id, resp.status));
            error.status = Some(resp.status);
            error.code = Some(code);
            // Not a fault of the provider's health; the route's `on_error` decides where it goes.
            return Once::Failed(Classified { failure: Failure::Status(resp.status), health: Outcome::Success, error, retry_after: None });
        }
    };
    // An answer that calls tools has no content to check: the format applies to the content.
    let checked = call.route.as_ref().and_then(|rc| rc.structured.as_ref()).filter(|_| parsed.tool_calls.is_empty());
    if let Some(s) = checked {
        if let Err(why) = s.check(&parsed.content) {
            let error = HarnessError::new(ErrorKind::Schema, format!("provider `{}` answered with content that does not match response_format: {why}", p.id));
            if plan.config.structured_output.on_invalid == OnInvalid::Error {
                return Once::Fatal(error);
            }
            // A model's bad answer says nothing about the provider's availability.
            return Once::Failed(Classified { failure: Failure::Protocol, health: Outcome::Ignored, error, retry_after: None });
        }
    }
    if !p.adapter.speaks_openai() {
        resp.body = openai::completion_bytes(&parsed).into();
    }
    if let Some(rc) = call.route.as_mut() {
        rc.parsed = Some(parsed);
    }
    Once::Reached(Reached::Buffered(resp))
}

/// An embeddings batch's 2xx: one vector per input, all of one length, or a broken answer.
fn checked_embeddings(call: &mut Call, idx: usize, mut resp: crate::response::Response, inputs: usize) -> Once {
    let p = &call.plan.providers[idx];
    let read = match &p.adapter {
        Adapter::Native(a) => a.parse_embed(&resp.body, inputs),
        _ => Err("its adapter has no embeddings call".to_string()),
    };
    match read {
        Ok(e) => {
            if !p.adapter.speaks_openai() {
                resp.body = serde_json::to_vec(&e.openai_json()).unwrap_or_default().into();
            }
            if let Some(rc) = call.route.as_mut() {
                rc.embedded = Some(e);
            }
            Once::Reached(Reached::Buffered(resp))
        }
        Err(why) => Once::Failed(Classified {
            failure: Failure::Protocol,
            health: Outcome::Failure,
            error: HarnessError::new(ErrorKind::Protocol, format!("provider `{}` answered {} with no embeddings: {why}", p.id, resp.status)),
            retry_after: None,
        }),
    }
}

/// An error answer's common code, in the provider's format (`on_error` keys on it).
async fn recode(call: &Call, idx: usize, c: &mut Classified) {
    let (Some(status), Some(body)) = (c.error.status, c.error.body.as_ref()) else { return };
    let code = match &call.plan.providers[idx].adapter {
        Adapter::Native(a) => a.error_code(status, body),
        Adapter::Host(h) => h.error_code(status, &[], body, call.deadline.remaining()).await,
        Adapter::Pass | Adapter::Missing(_) => None,
    };
    if code.is_some() {
        c.error.code = code;
    }
}

/// A plain service: the same endpoint again, if the retry rules and the budget allow.
async fn retry_after(engine: &Engine, call: &mut Call, c: Classified) -> Step {
    let plan = call.plan.clone();
    let cfg = &plan.providers[0].svc.config;
    // May this be sent again?
    if !retry::is_retryable(c.failure, &cfg.retry)
        || call.attempts > cfg.retry.max_retries
        || !retry::may_resend(&call.method, call.declared_safe, c.failure)
    {
        return Step::Fail(c.error);
    }
    let delay = retry::delay_for(call.attempts, &cfg.retry, c.retry_after, engine.jitter());
    // Never sleep past the deadline: when the wait cannot fit, fail now.
    if !call.deadline.fits(delay) {
        return Step::Fail(c.error);
    }
    if !plan.budgets.withdraw(&plan.budget_key, &plan.budget).await.unwrap_or(false) {
        engine.metrics.budget_exhausted.get_or_create(&ServiceLabels { service: plan.name.as_ref().into() }).inc();
        return Step::Fail(c.error);
    }
    call.ep.retries.inc();
    retry_event(engine, call, &c, delay);
    tokio::time::sleep(delay).await;
    Step::Again { to: Some(0), error: None }
}

/// Not sent (breaker open, bulkhead full, no credential): elsewhere, at once.
fn refused(call: &mut Call, idx: usize, e: HarnessError) -> Step {
    let s = summary(&e);
    // A refusal says nothing new about the provider: its own last error stays.
    if !matches!(e.kind, ErrorKind::CircuitOpen | ErrorKind::BulkheadFull) {
        call.plan.providers[idx].health.note_error(s.clone());
    }
    let lanes = &mut call.lanes;
    lanes.tried[idx].unsent();
    if lanes.tried[idx].attempts == 0 {
        lanes.order.retain(|i| *i != idx);
    }
    lanes.tried[idx].excluded = true;
    lanes.errors[idx] = Some(s);
    lanes.failed = Some(Failed::of(idx, &e));
    Step::Again { to: None, error: Some(e) }
}

/// What to do after a failed attempt on a route's provider.
enum Next {
    /// Try the same provider again after this delay.
    Same(Duration),
    /// Wait out a 429's `Retry-After` on the same provider, or fail over when that cannot fit.
    WaitOut(Duration),
    /// Pick again (elsewhere, or here once its cooling ends).
    Repick,
    /// Go to this provider (`on_error`).
    To(usize),
    Stop,
}

async fn failover_after(engine: &Engine, call: &mut Call, idx: usize, c: Classified) -> Step {
    let plan = call.plan.clone();
    let cfg = &plan.config;
    let safe = cfg.adapter == AdapterKind::OpenaiCompatible || retry::is_idempotent(&call.method) || call.declared_safe;
    let s = summary(&c.error);
    let p = &plan.providers[idx];
    match c.health {
        Outcome::Failure => p.health.record_failure(s.clone(), plan.window),
        _ => p.health.note_error(s.clone()),
    }
    attempt_metric(engine, &plan, idx, c.error.name());
    call.lanes.errors[idx] = Some(s);
    call.lanes.failed = Some(Failed::of(idx, &c.error));
    let next = decide(engine, call, idx, &c);
    if !safe && !c.failure.never_sent() && c.failure != Failure::Status(429) {
        return Step::Fail(c.error);
    }
    match next {
        Next::Stop => Step::Fail(c.error),
        Next::To(target) => Step::Again { to: Some(target), error: Some(c.error) },
        Next::Same(_) | Next::WaitOut(_) | Next::Repick if call.attempts >= cfg.max_attempts => Step::Exhausted,
        Next::Same(delay) | Next::WaitOut(delay) => {
            if matches!(next, Next::WaitOut(_)) && !call.deadline.fits(delay) {
                // Never sleeping past the deadline: another provider now instead.
                return repick(call, c).await;
            }
            if !call.deadline.fits(delay) || !plan.budgets.withdraw(&plan.budget_key, &plan.budget).await.unwrap_or(false) {
                return Step::Fail(c.error);
            }
            call.ep.retries.inc();
            retry_event(engine, call, &c, delay);
            tokio::time::sleep(delay).await;
            Step::Again { to: Some(idx), error: Some(c.error) }
        }
        Next::Repick => repick(call, c).await,
    }
}

/// Elsewhere (or here once its cooling ends), if the route's failover budget allows.
async fn repick(call: &mut Call, c: Classified) -> Step {
    let plan = &call.plan;
    if !plan.budgets.withdraw(&plan.budget_key, &plan.budget).await.unwrap_or(false) {
        return Step::Fail(c.error);
    }
    call.ep.retries.inc();
    Step::Again { to: None, error: Some(c.error) }
}

/// The failover rule for one failed attempt.
fn decide(engine: &Engine, call: &mut Call, idx: usize, c: &Classified) -> Next {
    let plan = call.plan.clone();
    let cfg = &plan.config;
    let p = &plan.providers[idx];
    let lanes = &mut call.lanes;
    let attempts_here = lanes.tried[idx].attempts;
    match c.failure {
        Failure::Status(429) => {
            // Clamped like a service's Retry-After: a hostile or broken `Retry-After: 99999999`
            // must not take a provider out for years.
            let cap = Duration::from_millis(cfg.max_retry_after_ms);
            let now = Instant::now();
            p.health.cool_until(now + c.retry_after.unwrap_or(DEFAULT_COOLING).min(cap));
            // The primary's price over the fastest answer: a short enough hint is waited out
            // here (once: a provider that limits again after its own hint fails over).
            let tried = &mut lanes.tried[idx];
            match c.retry_after {
                Some(hint) if cfg.wait_retry_after_ms > 0 && hint <= Duration::from_millis(cfg.wait_retry_after_ms) && !tried.waited_429 => {
                    // Nor more than two attempts to one provider in 1.5 s.
                    let spaced = tried.spaced_until(now).map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
                    let wait = hint.max(spaced);
                    if call.deadline.fits(wait) {
                        tried.waited_429 = true;
                        Next::WaitOut(wait)
                    } else {
                        Next::Repick
                    }
                }
                _ => Next::Repick,
            }
        }
        Failure::Status(s) if s >= 500 && attempts_here <= cfg.same_provider_retries => {
            Next::Same(retry::delay_for(attempts_here, &p.svc.config.retry, None, engine.jitter()))
        }
        Failure::Status(s) if s >= 500 => {
            lanes.tried[idx].excluded = true;
            Next::Repick
        }
        Failure::Status(_) if call.route.as_ref().is_some_and(|rc| rc.prefill_used) => {
            // A refused prefill: ask the same provider again, cleanly.
            if let Some(rc) = call.route.as_mut() {
                rc.prefill = None;
                rc.prefill_used = false;
            }
            Next::Same(Duration::ZERO)
        }
        Failure::Status(_) => {
            // A non-retryable answer: never again here; elsewhere only when `on_error` says so.
            lanes.tried[idx].excluded = true;
            let target = c.error.code.as_deref().and_then(|code| cfg.on_error.get(code)).and_then(|t| plan.provider_index(&t.provider));
            match target {
                Some(t) if t != idx && !lanes.tried[t].excluded => Next::To(t),
                _ => Next::Stop,
            }
        }
        Failure::TotalTimeout => Next::Stop,
        // Connect failures, silence, a broken, malformed or oversized answer (as an oversized
        // streamed event is): elsewhere, at once.
        _ => {
            lanes.tried[idx].excluded = true;
            Next::Repick
        }
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

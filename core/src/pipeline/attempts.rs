//! The one attempt loop, for a plain service and a route alike: select a provider, one
//! attempt, then the rules say what follows (`rules.rs`).
//!
//! Guarantees: a route's own rate limit is taken once per request, before its first
//! attempt; no attempt starts past the deadline; a route waits for a cooling provider
//! only when no other can serve, and only within `max_retry_after_ms` and the deadline; a
//! request never makes more than two attempts to one provider in 1.5 s.

use tokio::time::Instant;

use super::attempt;
use super::call::Call;
use super::outcome::{Mode, Reached};
use super::route::{failover_event, no_healthy};
use super::rules::{self, Step};
use super::select::select;
use crate::engine::route::Rules;
use crate::engine::Engine;
use crate::error::HarnessError;
use crate::routing::health::InFlight;
use crate::routing::strategy::Pick;

/// Runs the call's attempts until one answers (its head, for a stream) or none may follow.
pub(crate) async fn run(engine: &Engine, call: &mut Call, mode: Mode) -> Result<Reached, HarnessError> {
    let plan = call.plan.clone();
    let mut forced: Option<usize> = None;
    let mut last_error: Option<HarnessError> = None;
    // The route's own limit, once per request (each provider's service applies its own per attempt).
    if call.attempts == 0 {
        if let Some(limiter) = &plan.limiter {
            let (_, endpoint, method) = &call.ep.names;
            limiter.acquire(method, endpoint, &call.deadline).await?;
        }
    }
    if !call.intercepted {
        call.intercepted = true;
        if !engine.registry.interceptors.is_empty() {
            super::intercept::application_before(engine, call).await?;
        }
    }
    loop {
        if call.deadline.expired() {
            return Err(rules::expired(call, last_error));
        }
        let now = Instant::now();
        let idx = match forced.take() {
            Some(i) => i,
            None => match select(engine, call) {
                Pick::Provider(i) => i,
                Pick::Wait(at) => {
                    let wait = at.saturating_duration_since(now);
                    if wait.as_millis() as u64 > plan.config.max_retry_after_ms || !call.deadline.fits(wait) {
                        break;
                    }
                    tokio::time::sleep_until(at).await;
                    continue;
                }
                Pick::None => break,
            },
        };
        if !rules::may_attempt(call) {
            break;
        }
        begin(engine, call, idx, now);
        let in_flight = (plan.rules == Rules::Failover).then(|| InFlight::enter(&plan.providers[idx].health));
        let t0 = Instant::now();
        let outcome = attempt::once(engine, call, mode).await;
        drop(in_flight);
        let idx = hedge_winner(call, idx, now);
        match rules::after(engine, call, idx, t0, outcome).await {
            Step::Done(reached) => {
                if !engine.registry.interceptors.is_empty() {
                    let answer = super::intercept::parts(&reached);
                    super::intercept::application_after(engine, call, answer).await?;
                }
                return Ok(reached);
            }
            Step::Fail(e) => return Err(e),
            Step::Again { to, error } => {
                forced = to;
                if error.is_some() {
                    last_error = error;
                }
            }
            Step::Exhausted => break,
        }
    }
    Err(no_healthy(call))
}

/// Provider `idx` takes the next attempt: a failover from the last one is announced.
fn begin(engine: &Engine, call: &mut Call, idx: usize, now: Instant) {
    if let Some(failed) = call.lanes.failed.take() {
        if failed.from != idx {
            failover_event(engine, call, failed, idx);
        }
    }
    let lanes = &mut call.lanes;
    lanes.current = idx;
    if !lanes.order.contains(&idx) {
        lanes.order.push(idx);
    }
    lanes.tried[idx].sent(now);
}

/// A hedge on another provider may have answered first: the answer is that provider's.
fn hedge_winner(call: &mut Call, idx: usize, now: Instant) -> usize {
    let won = call.lanes.current;
    if won != idx {
        let lanes = &mut call.lanes;
        if !lanes.order.contains(&won) {
            lanes.order.push(won);
        }
        lanes.tried[won].sent(now);
    }
    won
}

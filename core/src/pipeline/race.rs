//! Hedged attempts: when the first attempt has not answered after the hedge delay, a
//! second one starts (on the same service, or for a route on the provider its strategy
//! would pick next); the first answer wins and the others are cancelled.
//!
//! Guarantees: only buffered reads, keyed writes and `openai-compatible` chat completions
//! are hedged (never a stream, never an unsafe write); hedges draw on their own budget;
//! a loser is dropped, which closes its connection and releases its permits; a failed
//! attempt waits for the others, and no hedge starts after one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::call::{build_request, build_shaped, Call};
use super::exchange::{exchange, HedgeSignal, Lane, Racer, Waits};
use super::outcome::{Mode, Once, Side};
use super::select::select_other;
use crate::engine::route::Rules;
use crate::engine::Engine;
use crate::hedge::HedgeConfig;
use crate::observability::metrics::ServiceLabels;
use crate::routing::config::AdapterKind;

type RaceFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = (Once, Side, bool)> + Send + 'a>>;

/// The hedging that applies to this attempt, if any: the endpoint's or the service's
/// `hedge:` for a plain service, the route's for a route.
pub(crate) fn hedge_for(call: &Call, mode: Mode) -> Option<HedgeConfig> {
    if mode == Mode::Stream {
        return None;
    }
    let safe = crate::retry::is_idempotent(&call.method) || call.declared_safe || call.plan.config.adapter == AdapterKind::OpenaiCompatible;
    if !safe {
        return None;
    }
    match call.plan.rules {
        Rules::Retry => {
            let (_, endpoint, method) = &call.ep.names;
            call.plan.providers[0].svc.hedge_for(method, endpoint).cloned()
        }
        Rules::Failover => call.plan.config.hedge.clone(),
    }
}

/// The first attempt, and a hedge (up to `max_extra`) each time the attempts in flight
/// have not answered after the hedge delay. Returns the result, what the winner learned,
/// and how many hedges were sent.
pub(crate) async fn hedged<'a>(engine: &'a Engine, call: &'a Call, h: &HedgeConfig, first: Racer, started: Instant) -> (Once, Side, u32) {
    let lane = Lane::of(call, call.lanes.current);
    let budget = &*call.plan.hedges;
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
        let (once, side, _) = race(engine, call, lane, first, None).await;
        record(started.elapsed());
        return (once, side, 0);
    };
    // The common case first: the primary answers before the delay, and nothing else is
    // allocated, polled or timed (the primary lives on this stack and its own response timer
    // raises `due`; hedges go in a set beside it).
    let due = AtomicBool::new(false);
    let primary = race(engine, call, lane, first, Some(HedgeSignal { at: started + delay, due: &due }));
    tokio::pin!(primary);
    let answered = std::future::poll_fn(|cx| match std::future::Future::poll(primary.as_mut(), cx) {
        std::task::Poll::Ready(r) => std::task::Poll::Ready(Some(r)),
        std::task::Poll::Pending if due.load(Ordering::Acquire) => std::task::Poll::Ready(None),
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
    let labels = ServiceLabels { service: call.plan.name.as_ref().into() };
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
            match start_hedge(engine, call, lane.idx).await {
                Some((r, hedge_lane)) => {
                    extra += 1;
                    engine.metrics.hedges_sent.get_or_create(&labels).inc();
                    // Shown from the first hedge on, as 0 until one wins.
                    let _ = engine.metrics.hedges_won.get_or_create(&labels);
                    let hedge = async move {
                        let (once, side, _) = race(engine, call, hedge_lane, r, None).await;
                        (once, side, true)
                    };
                    racers.push(Box::pin(hedge));
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
async fn race<'a>(engine: &'a Engine, call: &'a Call, lane: Lane<'a>, r: Racer, signal: Option<HedgeSignal<'a>>) -> (Once, Side, bool) {
    let mut waits = Waits::of(lane.svc, Mode::Buffered, None);
    waits.hedge = signal;
    let (once, mut side) = exchange(engine, call, lane, r, waits).await;
    side.provider = Some(lane.idx);
    (once, side, false)
}

/// A hedge's lane, request and permits, if there is somewhere to send it and the budget,
/// the breaker and the bulkhead allow one.
async fn start_hedge<'a>(engine: &Engine, call: &'a Call, first: usize) -> Option<(Racer, Lane<'a>)> {
    let lane = Lane::of(call, select_other(engine, call, first)?);
    let p = &call.plan.providers[lane.idx];
    let shaped = match call.route.as_ref().and_then(|rc| rc.json.as_ref()) {
        Some(json) if !matches!(p.adapter, crate::adapters::Adapter::Pass) => Some(super::route::shape(p, json, &call.plan.config, false, call.deadline.remaining()).await.ok()?),
        _ => None,
    };
    let (_, endpoint, method) = &lane.ep.names;
    // Permits first (cheap, and a refusal costs no budget), then the budget.
    let breaker = lane.ep.breaker.acquire(lane.svc.breaker_for(method, endpoint)).ok()?;
    let bulkhead = lane.svc.shared.bulkhead.try_acquire()?;
    if !call.plan.hedges.withdraw() {
        return None;
    }
    let wire = call.trace.next_span();
    let mut request = match shaped {
        Some(s) => build_shaped(lane.svc, &call.req, s, &call.method, &wire).ok()?,
        None => build_request(lane.svc, &call.req, &call.req.body, &call.method, &wire).ok()?,
    };
    // A hedge is an attempt: attempt interceptors see it (one that refuses it: no hedge).
    if !engine.registry.interceptors.is_empty() {
        super::intercept::attempt_before(engine, call, lane.idx, call.attempts + 1, &mut request).await.ok()?;
    }
    let applied = match &lane.svc.credential {
        Some(c) => Some(c.apply(&mut request, call.deadline.remaining()).await.ok()?),
        None => None,
    };
    Some((Racer { request, applied, breaker, bulkhead }, lane))
}

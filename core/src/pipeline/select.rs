//! The one selector: which provider the next attempt goes to. A plain service has one,
//! always chosen (its own breaker and bulkhead then speak for it); a route's strategy
//! chooses among the providers that can serve now.

use smallvec::SmallVec;
use tokio::time::Instant;

use super::call::Call;
use crate::engine::route::Rules;
use crate::engine::Engine;
use crate::routing::strategy::{self, Candidate, Pick};

/// The strategy's view of the call's providers now.
fn candidates(call: &Call) -> SmallVec<[Candidate<'_>; 4]> {
    call.plan
        .providers
        .iter()
        .zip(&call.lanes.eps)
        .map(|(p, ep)| {
            let bulkhead = &p.svc.shared.bulkhead;
            Candidate { config: &p.config, health: &p.health, breaker: ep.breaker.state(), bulkhead_full: bulkhead.in_use() >= bulkhead.max() as usize }
        })
        .collect()
}

/// The provider for the next attempt.
pub(crate) fn select(engine: &Engine, call: &Call) -> Pick {
    if call.plan.rules == Rules::Retry {
        return Pick::Provider(0);
    }
    let c = candidates(call);
    strategy::pick(call.plan.config.strategy, &c, &call.lanes.tried, call.plan.window, Instant::now(), || engine.jitter())
}

/// Another provider than `except` for a hedge: the one the strategy would pick next with
/// `except` set aside (none for a plain service: its hedges go to the same service).
pub(crate) fn select_other(engine: &Engine, call: &Call, except: usize) -> Option<usize> {
    if call.plan.rules == Rules::Retry {
        return Some(except);
    }
    let c = candidates(call);
    let mut tried = call.lanes.tried.clone();
    tried[except].excluded = true;
    match strategy::pick(call.plan.config.strategy, &c, &tried, call.plan.window, Instant::now(), || engine.jitter()) {
        Pick::Provider(j) => Some(j),
        _ => None,
    }
}

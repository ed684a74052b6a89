//! A call's buffered answer: the attempt loop to an answer, then (on a route) its usage,
//! cost and degraded answers.

use super::attempts;
use super::call::Call;
use super::outcome::{Mode, Reached};
use super::route;
use crate::engine::Engine;
use crate::error::HarnessError;
use crate::response::Response;

/// The buffered answer of a call (a route's with its usage and cost, or a degraded one).
pub(super) async fn buffered(engine: &Engine, call: &mut Call) -> Result<Response, HarnessError> {
    let reached = match attempts::run(engine, call, Mode::Buffered).await {
        Ok(Reached::Buffered(resp)) => Ok(resp),
        Ok(Reached::Stream(_)) => unreachable!("a buffered call never reaches a stream"),
        Err(e) => Err(e),
    };
    if call.route.is_none() {
        return reached;
    }
    route::answer(engine, call, reached)
}

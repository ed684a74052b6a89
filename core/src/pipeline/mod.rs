//! The request path, in its one fixed order, readable top to bottom:
//!
//! snapshot (once) -> resolve the name (a route, or a plain service as a route of one
//! provider) -> check path, headers, body -> total deadline (`call.rs`) -> the attempt
//! loop (`attempts.rs`) {
//!   select a provider (`select.rs`) -> one attempt (`attempt.rs`: rate limit -> breaker
//!   -> bulkhead -> credentials -> the exchange, `exchange.rs`, raced by hedges,
//!   `race.rs`) -> what follows: the answer, a retry or failover after a backoff within
//!   the deadline and the budget, or the error (`rules.rs`)
//! } -> a route's usage, cost and degraded answers (`route.rs`) -> typed result or typed
//! error -> one record: metrics, log line, audit, span, events (`observability::finish`).
//!
//! A stream records its outcome when it ends (`stream.rs`); a chat reads its answer once
//! (`chat.rs`). The pipeline never imports the client; it runs on an `Engine`.

mod attempt;
mod attempts;
mod call;
pub(crate) mod chat;
mod classify;
mod exchange;
mod outcome;
mod race;
mod route;
mod rules;
mod select;
pub(crate) mod stream;

use std::sync::Arc;

use crate::adapters::{ChatRequest, ChatResponse};
use crate::engine::Engine;
use crate::error::HarnessError;
use crate::request::Request;
use crate::response::Response;
use call::Call;
use outcome::{Mode, Reached};
use stream::StreamResponse;

/// Runs one request and reads its whole body.
pub(crate) async fn execute(engine: &Engine, req: Request) -> Result<Response, HarnessError> {
    let mut call = Call::start(engine, req, false)?;
    let result = buffered(engine, &mut call).await;
    call.finish(engine, result)
}

/// The buffered answer of a call (a route's with its usage and cost, or a degraded one).
async fn buffered(engine: &Engine, call: &mut Call) -> Result<Response, HarnessError> {
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

/// Runs one request up to its response head; the body is the caller's to pull.
pub(crate) async fn stream(engine: &Arc<Engine>, req: Request) -> Result<StreamResponse, HarnessError> {
    let mut call = Call::start(engine, req, true)?;
    match attempts::run(engine, &mut call, Mode::Stream).await {
        Ok(Reached::Stream(open)) => Ok(StreamResponse::new(engine.clone(), call, open)),
        Ok(Reached::Buffered(_)) => unreachable!("a streaming call never buffers its success"),
        Err(e) => {
            let e = call.with_context(e);
            call.observe(engine, e.status, Some(&e), true, None);
            Err(e)
        }
    }
}

/// One chat answer through its route (failover, degradation and cost included).
pub(crate) async fn chat(engine: &Engine, route: &str, chat: ChatRequest) -> Result<ChatResponse, HarnessError> {
    let mut call = Call::start_chat(engine, route, &chat, false)?;
    let result = buffered(engine, &mut call).await;
    let resp = call.finish(engine, result)?;
    chat::answer(&mut call, route, resp)
}

pub(crate) use chat::chat_stream;

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
mod buffered;
mod cached;
mod call;
pub(crate) mod chat;
mod classify;
mod exchange;
mod intercept;
mod outcome;
mod race;
mod route;
mod rules;
mod select;
pub(crate) mod stream;

use std::sync::Arc;

use crate::adapters::{ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, Embedded, Usage};
use crate::engine::Engine;
use crate::error::HarnessError;
use crate::request::Request;
use crate::response::Response;
use buffered::buffered;
use call::Call;
use outcome::{Mode, Reached};
use stream::StreamResponse;

/// Runs one request and reads its whole body (a cacheable GET or HEAD through the caches).
pub(crate) async fn execute(engine: &Arc<Engine>, req: Request) -> Result<Response, HarnessError> {
    let mut call = Call::start(engine, req, false)?;
    if let Some(rule) = cached::http_rule(&call) {
        return cached::http_call(engine, call, rule).await;
    }
    let result = buffered(engine, &mut call).await;
    call.finish(engine, result)
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

/// One chat answer through its route (its answer caches, failover, degradation and cost included).
pub(crate) async fn chat(engine: &Arc<Engine>, route: &str, chat: ChatRequest) -> Result<ChatResponse, HarnessError> {
    let mut call = Call::start_chat(engine, route, &chat, false)?;
    let caching = cached::ChatCaching::of(&call, route, &chat);
    if caching.is_off() {
        let result = buffered(engine, &mut call).await;
        let resp = call.finish(engine, result)?;
        return chat::answer(&mut call, route, resp);
    }
    if let Some((key, _)) = &caching.exact {
        if let Some(hit) = cached::chat_hit(engine, &mut call, key).await {
            return Ok(cached::answer_from(&call, &hit));
        }
    }
    // The prompt's embedding: a failed embeddings call skips the semantic cache, never the chat.
    let mut vector = None;
    if let Some(plan) = &caching.semantic {
        let req = EmbedRequest { inputs: vec![plan.text.clone()], principal: chat.principal.clone(), ..Default::default() };
        if let Ok(mut e) = embed(engine, &plan.embeddings_route, req).await {
            e.data.truncate(e.dimensions as usize);
            if let Some(hit) = cached::semantic_hit(engine, &mut call, plan, &e.data).await {
                return Ok(cached::answer_from(&call, &hit));
            }
            vector = Some(e.data);
        }
    }
    let owner = call.plan.name.clone();
    let answer = cached::chat_call(engine, call, route, &caching).await?;
    cached::chat_store(engine, &owner, caching.exact, &answer);
    if let (Some(plan), Some(v)) = (&caching.semantic, vector) {
        cached::semantic_store(engine, &owner, plan, &v, &answer);
    }
    Ok(answer)
}

/// A streamed chat answer: a stored one replayed, else a provider's (kept for the exact
/// cache once complete, when the route has one and the request is cacheable).
pub(crate) async fn chat_stream(engine: &Arc<Engine>, route: &str, chat: ChatRequest) -> Result<chat::ChatStream, HarnessError> {
    let mut call = Call::start_chat(engine, route, &chat, true)?;
    let mut recording = None;
    if let Some((key, ttl)) = cached::ChatCaching::of(&call, route, &chat).exact {
        if let Some(hit) = cached::chat_hit(engine, &mut call, &key).await {
            return Ok(chat::ChatStream::replay(route, call.trace.trace_id.to_string(), hit.replay()));
        }
        recording = Some(chat::Recording { key, ttl, owner: call.plan.name.clone(), chunks: Vec::new() });
    }
    chat::chat_stream(engine, call, route, recording).await
}

/// One batch of an embeddings call: its vectors and the routed answer.
async fn embed_batch(engine: &Engine, route: &str, req: &EmbedRequest, inputs: &[String]) -> Result<(Embedded, Response), HarnessError> {
    let mut call = Call::start_embed(engine, route, req, inputs)?;
    let result = buffered(engine, &mut call).await;
    let resp = call.finish(engine, result)?;
    let embedded = match call.route.as_mut().and_then(|rc| rc.embedded.take()) {
        Some(e) => e,
        // A degraded (cached) answer: OpenAI's shape.
        None => crate::adapters::embeddings::parse_openai(&resp.body, Some(inputs.len())).map_err(|why| HarnessError::new(crate::error::ErrorKind::Schema, format!("route `{route}`: {why}")))?,
    };
    Ok((embedded, resp))
}

/// How many batches of one embeddings call are in flight at once.
const EMBED_PARALLEL: usize = 4;

/// An embeddings call: its inputs in batches every provider of the route takes, each a
/// routed call, joined in input order.
pub(crate) async fn embed(engine: &Engine, route: &str, req: EmbedRequest) -> Result<EmbedResponse, HarnessError> {
    use futures_util::StreamExt;
    req.check()?;
    let started = std::time::Instant::now();
    let batch = {
        let snapshot = engine.snapshot();
        let rt = snapshot.routes.get(route);
        rt.map(|rt| rt.providers.iter().map(|p| p.config.max_batch.unwrap_or_else(|| p.adapter.max_batch())).min().unwrap_or(1).max(1)).unwrap_or(1) as usize
    };
    let batches: Vec<_> = req.inputs.chunks(batch).map(|inputs| embed_batch(engine, route, &req, inputs)).collect();
    let results: Vec<Result<(Embedded, Response), HarnessError>> = futures_util::stream::iter(batches).buffered(EMBED_PARALLEL).collect().await;
    let mut out = EmbedResponse { route: route.to_string(), ..Default::default() };
    let mut usage: Option<Usage> = None;
    for (i, r) in results.into_iter().enumerate() {
        let (e, resp) = r?;
        if i == 0 {
            out.dimensions = e.dimensions as u32;
            out.trace_id = resp.trace_id.clone();
            let routed = resp.routed.as_deref();
            out.provider = routed.and_then(|r| r.provider.clone());
            out.model = e.model.clone().or_else(|| routed.and_then(|r| r.model.clone()));
        } else if e.dimensions as u32 != out.dimensions {
            let mut err = HarnessError::new(
                crate::error::ErrorKind::Protocol,
                format!("route `{route}`: batch {i} came back with {}-value vectors, batch 0 with {} (the route's providers serve different models)", e.dimensions, out.dimensions),
            );
            err.trace_id = Some(resp.trace_id.clone());
            return Err(err);
        }
        if let Some(c) = resp.routed.as_deref().and_then(|r| r.cost) {
            *out.cost.get_or_insert(0.0) += c;
        }
        if let Some(u) = e.usage {
            let t = usage.get_or_insert_with(Usage::default);
            t.prompt_tokens = t.prompt_tokens.saturating_add(u.prompt_tokens);
            t.completion_tokens = t.completion_tokens.saturating_add(u.completion_tokens);
            t.total_tokens = t.total_tokens.saturating_add(u.total_tokens);
        }
        out.attempts += resp.attempts;
        out.batches += 1;
        out.count += e.count as u32;
        out.data.extend_from_slice(&e.data);
    }
    out.usage = usage;
    out.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(out)
}

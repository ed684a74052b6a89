//! The routes: the OpenAI-compatible data plane, the service pipeline, the admin API and the
//! operational endpoints.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use harness_core::deadline::Deadline;
use harness_core::{ChatChunkKind, ChatRequest, Request};
use serde_json::{json, Map, Value};

use crate::activity::{AuditRecord, ReloadRecord, Refusal};
use crate::budget::{Pricing, Reservation, StreamCharge};
use crate::config::Loaded;
use crate::errors::ApiError;
use crate::state::{Caller, Gateway};

type Gw = State<Arc<Gateway>>;

pub fn router(gw: Arc<Gateway>, max_body: usize) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/messages", post(messages))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/v1/services/{service}", any(service))
        .route("/v1/services/{service}/{*rest}", any(service))
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/admin/routes", get(admin_routes))
        .route("/admin/routes/{route}", get(admin_route))
        .route("/admin/routes/{route}/providers/{provider}/weight", post(admin_weight))
        .route("/admin/routes/{route}/providers/{provider}/test", post(admin_test))
        .route("/admin/reload", post(admin_reload))
        .route("/admin/breakers", get(admin_breakers))
        .route("/admin/breakers/{action}", post(admin_breaker_set))
        .route("/admin/credentials", get(admin_credentials))
        .route("/admin/fleet", get(admin_fleet))
        .route("/admin/fleet/promote", post(admin_fleet_promote))
        .route("/admin/fleet/rollback", post(admin_fleet_rollback))
        .route("/admin/callers", get(admin_callers))
        .route("/admin/services", get(admin_services))
        .route("/admin/config", get(admin_config))
        .route("/admin/audit", get(admin_audit))
        .route("/admin/ui", get(crate::console::page))
        .route("/admin/ui/", get(crate::console::page))
        .route("/admin/ui/{asset}", get(crate::console::asset))
        .route("/admin/cache/clear", post(admin_cache_clear_all))
        .route("/admin/cache/clear/{name}", post(admin_cache_clear))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "no such endpoint") })
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn_with_state(gw.clone(), bounded_body))
        .layer(axum::middleware::from_fn_with_state(gw.clone(), scrub_response))
        .layer(axum::middleware::from_fn(crate::console::admin_headers))
        .with_state(gw)
}

/// Every answer, whatever its route or status, with the services' secrets replaced in its
/// headers and body (a streamed body chunk by chunk, a secret split across chunks included).
async fn scrub_response(State(gw): Gw, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let resp = next.run(req).await;
    let scrubber = gw.scrubber();
    if scrubber.is_empty() {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    for value in parts.headers.values_mut() {
        if let Some(v) = scrubber.header(value) {
            *value = v;
        }
    }
    let body = if axum::body::HttpBody::size_hint(&body).exact().is_some() {
        // A body already in memory: scrubbed whole (its length may change).
        let bytes = http_body_util::BodyExt::collect(body).await.map(|c| c.to_bytes()).unwrap_or_default();
        match scrubber.bytes(&bytes) {
            Some(b) => {
                parts.headers.remove("content-length");
                Body::from(b)
            }
            None => Body::from(bytes),
        }
    } else {
        let frames = body.into_data_stream();
        Body::from_stream(futures_util::stream::unfold((frames, Some(scrubber.stream())), |(mut frames, scrub)| async move {
            let mut scrub = scrub?;
            loop {
                match futures_util::StreamExt::next(&mut frames).await {
                    Some(Ok(chunk)) => {
                        let out = scrub.push(&chunk);
                        if !out.is_empty() {
                            return Some((Ok(Bytes::from(out)), (frames, Some(scrub))));
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), (frames, None))),
                    None => {
                        let out = scrub.finish();
                        return (!out.is_empty()).then(|| (Ok(Bytes::from(out)), (frames, None)));
                    }
                }
            }
        }))
    };
    Response::from_parts(parts, body)
}

/// Reads a request body whole before any handler runs: a declared length over
/// `max_body_bytes` is refused at once (413, nothing read), a longer body at the limit (413),
/// and a body not complete within `body_timeout_ms` gets 408. Each of these closes the
/// connection (the rest of the body is never read).
async fn bounded_body(State(gw): Gw, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let g = gw.gateway_config();
    let anthropic = req.uri().path() == "/v1/messages";
    let refuse = |status, code, message: String| {
        let e = ApiError::new(status, "invalid_request_error", code, message);
        let mut r = if anthropic { crate::anthropic::error_response(e) } else { e.into_response() };
        r.headers_mut().insert("connection", HeaderValue::from_static("close"));
        r
    };
    let too_large = || refuse(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", format!("the body is over {} bytes (gateway.max_body_bytes)", g.max_body_bytes));
    let declared = req.headers().get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > g.max_body_bytes as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let read = http_body_util::BodyExt::collect(http_body_util::Limited::new(body, g.max_body_bytes));
    match tokio::time::timeout(Duration::from_millis(g.body_timeout_ms), read).await {
        Ok(Ok(body)) => next.run(axum::extract::Request::from_parts(parts, Body::from(body.to_bytes()))).await,
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => too_large(),
        Ok(Err(_)) => refuse(StatusCode::BAD_REQUEST, "invalid_request", "the body could not be read".into()),
        Err(_) => refuse(StatusCode::REQUEST_TIMEOUT, "body_timeout", format!("the body did not arrive within {} ms (gateway.body_timeout_ms)", g.body_timeout_ms)),
    }
}

/// The caller's key: `Authorization: Bearer <key>` (what OpenAI SDKs send) or `x-api-key`.
fn key(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let (scheme, rest) = v.split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim()).filter(|k| !k.is_empty());
    }
    headers.get("x-api-key").and_then(|v| v.to_str().ok()).filter(|k| !k.is_empty())
}

fn authenticate(gw: &Gateway, headers: &HeaderMap) -> Result<Arc<Caller>, ApiError> {
    match key(headers).and_then(|k| gw.caller(k)) {
        Some(c) => Ok(c),
        None => {
            gw.metrics.unauthorized.inc();
            Err(ApiError::unauthorized())
        }
    }
}

/// Counts a request in flight until dropped (a stream holds it to its end).
struct InFlight(Arc<Gateway>);

impl InFlight {
    fn new(gw: &Arc<Gateway>) -> Self {
        gw.in_flight.fetch_add(1, Ordering::Relaxed);
        gw.metrics.in_flight.inc();
        InFlight(gw.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.metrics.in_flight.dec();
    }
}

/// The metric label and log target of a route or service that is not configured: callers
/// choose these names, so each one must not become a series of its own.
const UNKNOWN: &str = "{unknown}";

fn access_log(caller: &str, api: &str, target: &str, status: u16, started: Instant, trace_id: Option<&str>, cost: Option<f64>) {
    use std::io::Write;
    let mut line = json!({"event": "harness.gateway", "caller": caller, "api": api, "target": target, "status": status,
        "duration_ms": (started.elapsed().as_secs_f64() * 1e6).round() / 1e3, "trace_id": trace_id, "cost": cost})
    .to_string();
    line.push('\n');
    // One write per line (stderr is unbuffered: formatting into it would write piece by piece).
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn traceparent(headers: &HeaderMap) -> Option<String> {
    headers.get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// Admission for a caller: its budget (reserving `reserve` of it until the request settles),
/// then its rate limit.
async fn admit(gw: &Arc<Gateway>, caller: &Arc<Caller>, what: &str, reserve: f64) -> Result<Reservation, ApiError> {
    let Some(reservation) = gw.budgets.reserve(&caller.name, caller.budget_per_day, reserve) else {
        gw.activity.refused(&caller.name, Refusal::Budget);
        let mut e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "insufficient_quota", "budget_exceeded", format!("caller `{}` has spent its budget for today", caller.name));
        e.retry_after_s = Some(86_400 - std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() % 86_400).unwrap_or(0));
        return Err(e);
    };
    if let Some(l) = &caller.limiter {
        if let Err(e) = l.acquire("POST", what, &Deadline::after(Duration::from_secs(60))).await {
            gw.activity.refused(&caller.name, Refusal::RateLimited);
            return Err(e.into());
        }
    }
    Ok(reservation)
}

// ---- /v1/chat/completions ----

async fn chat(State(gw): Gw, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let caller = match authenticate(&gw, &headers) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let guard = InFlight::new(&gw);
    let (status, target, resp, trace, cost) = match chat_inner(&gw, &caller, &headers, &body, guard).await {
        Ok(done) => done,
        // The error names the trace whenever the core made one (the downstream's own 4xx included).
        Err((target, e)) => {
            let trace = e.trace_id.clone();
            (e.status.as_u16(), target, e.into_response(), trace, None)
        }
    };
    gw.count(&caller.name, "chat", &target, status);
    access_log(&caller.name, "chat", &target, status, started, trace.as_deref(), cost);
    resp
}

type ChatDone = (u16, String, Response, Option<String>, Option<f64>);

/// An answer's `message` in OpenAI's shape: `content` is null when the model only calls tools.
fn message(r: &harness_core::ChatResponse) -> Value {
    if r.tool_calls.is_empty() {
        return json!({"role": "assistant", "content": r.content});
    }
    let calls: Vec<Value> = r.tool_calls.iter().map(|t| json!({"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}})).collect();
    let content = if r.content.is_empty() { Value::Null } else { json!(r.content) };
    json!({"role": "assistant", "content": content, "tool_calls": calls})
}

/// One streamed piece of a tool call in OpenAI's `delta.tool_calls[]` shape (id and name on the first).
fn tool_call_delta(t: &harness_core::ToolCallDelta) -> Value {
    let mut function = json!({"arguments": t.arguments});
    let mut v = json!({"index": t.index});
    if let Some(id) = &t.id {
        v["id"] = json!(id);
        v["type"] = json!("function");
    }
    if let Some(name) = &t.name {
        function["name"] = json!(name);
    }
    v["function"] = function;
    v
}

/// A chat call admitted: its route, the prices it may be charged at, and what it holds of its
/// caller's budget.
pub(crate) struct Admitted {
    pub route: String,
    pub pricing: Pricing,
    pub reservation: Reservation,
}

/// What every chat-shaped API (`/v1/chat/completions`, `/v1/messages`) checks before calling
/// the core: the route exists (404) and the caller may use it (403); a budgeted caller
/// reserves the most the request can cost (its output capped by its `max_tokens`, or by the
/// route's default, which is then sent with it); then its budget and rate limit admit it.
pub(crate) async fn admit_chat(gw: &Arc<Gateway>, caller: &Arc<Caller>, model: &str, obj: &mut Map<String, Value>, messages: &Value, what: &str) -> Result<Admitted, (String, ApiError)> {
    let route = model.split('/').next().unwrap_or("").to_string();
    if !gw.client.config().routes.contains_key(&route) {
        let e = ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "model_not_found", format!("no route `{}`", harness_core::redact::escape_control(&route)));
        return Err((UNKNOWN.into(), e));
    }
    if !caller.may_use_route(&route) {
        return Err((route.clone(), ApiError::forbidden(&format!("route `{route}`"))));
    }
    let pricing = Pricing::new(&gw.client.config(), &route, model, messages);
    let mut reserve = 0.0;
    if caller.budget_per_day.is_some() && !pricing.is_free() {
        let asked = ["max_completion_tokens", "max_tokens"].into_iter().find_map(|k| obj.get(k).and_then(Value::as_u64));
        let g = gw.gateway_config();
        let default = g.route_max_tokens.get(&route).copied().unwrap_or(g.default_max_tokens);
        if !obj.contains_key("max_tokens") && !obj.contains_key("max_completion_tokens") {
            obj.insert("max_tokens".into(), json!(default));
        }
        reserve = pricing.max_cost(asked.unwrap_or(default));
    }
    let reservation = admit(gw, caller, what, reserve).await.map_err(|e| (route.clone(), e))?;
    Ok(Admitted { route, pricing, reservation })
}

/// What a buffered answer is charged: the provider's cost, nothing for a fallback, else an
/// estimate from its size.
pub(crate) fn answer_charge(r: &harness_core::ChatResponse, pricing: &Pricing) -> f64 {
    match (r.cost, r.fallback) {
        (Some(c), _) => c,
        (None, Some(_)) => 0.0,
        (None, None) => pricing.estimate(r.provider.as_deref(), (r.content.len() + r.tool_calls.iter().map(|t| t.name.len() + t.arguments.len()).sum::<usize>()) as u64),
    }
}

async fn chat_inner(gw: &Arc<Gateway>, caller: &Arc<Caller>, headers: &HeaderMap, body: &[u8], guard: InFlight) -> Result<ChatDone, (String, ApiError)> {
    let v: Value = serde_json::from_slice(body).map_err(|e| (String::new(), ApiError::bad_request(format!("the body is not JSON: {e}"))))?;
    let Some(mut obj) = v.as_object().cloned() else { return Err((String::new(), ApiError::bad_request("the body must be a JSON object"))) };
    let model = match obj.remove("model") {
        Some(Value::String(m)) if !m.is_empty() => m,
        _ => return Err((String::new(), ApiError::bad_request("`model` is required: a route, or route/model"))),
    };
    let stream = obj.remove("stream").and_then(|s| s.as_bool()).unwrap_or(false);
    obj.remove("stream_options");
    let messages = obj.remove("messages").unwrap_or(Value::Null);
    let Admitted { route, pricing, reservation } = admit_chat(gw, caller, &model, &mut obj, &messages, "/v1/chat/completions").await?;
    let req = ChatRequest { messages, params: obj, headers: Vec::new(), timeout_ms: None, traceparent: traceparent(headers), principal: Some(caller.name.clone()) };
    if !stream {
        // A failed call releases its reservation (dropped) and is charged nothing.
        let r = gw.client.chat(&model, req).await.map_err(|e| (route.clone(), ApiError::from(e)))?;
        let charge = answer_charge(&r, &pricing);
        reservation.settle(charge);
        gw.activity.charge(&route, r.provider.as_deref(), charge);
        let body = json!({
            "id": format!("chatcmpl-{}", r.trace_id),
            "object": "chat.completion",
            "created": now_s(),
            "model": r.model.clone().unwrap_or_else(|| model.clone()),
            "choices": [{"index": 0, "message": message(&r), "finish_reason": r.finish_reason.clone().unwrap_or_else(|| "stop".into())}],
            "usage": r.usage.as_ref().map(usage_json),
            "harness": {"route": r.route, "provider": r.provider, "cost": r.cost, "attempts": r.attempts, "trace_id": r.trace_id, "fallback": r.fallback},
        });
        let mut resp = Json(body).into_response();
        resp.headers_mut().insert("x-harness-trace-id", HeaderValue::from_str(&r.trace_id).unwrap_or(HeaderValue::from_static("")));
        return Ok((200, route, resp, Some(r.trace_id), Some(charge)));
    }
    let s = gw.client.chat_stream(&model, req).await.map_err(|e| (route.clone(), ApiError::from(e)))?;
    let trace_id = s.trace_id.clone();
    let id = format!("chatcmpl-{trace_id}");
    let created = now_s();
    // The content is scrubbed as one text across chunks (a secret split over two deltas would
    // pass a per-event scrub); each event is scrubbed again as it is sent.
    let content_scrub = gw.scrubber().stream();
    // Charged for what it streamed when it ends, or when it is dropped (the caller left).
    let charge = StreamCharge::new(reservation, pricing);
    let charged_route = route.clone();
    // One SSE event per chunk, in OpenAI's shape; a failure after the head is the last event.
    let events = futures_util::stream::unfold(Some((s, guard, content_scrub, charge)), move |state| {
        let (id, model, charged_route) = (id.clone(), model.clone(), charged_route.clone());
        async move {
            let (mut s, guard, mut scrub, mut charge) = state?;
            let chunk = |model: &str, delta: Value, finish: Option<String>, extra: Option<(&str, Value)>| {
                let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
                if let Some((k, v)) = extra {
                    c[k] = v;
                }
                format!("data: {c}\n\n")
            };
            // The content held back (a possible start of a secret), as a delta before `then`.
            let flush = |scrub: &mut crate::scrub::StreamScrub, model: &str| {
                let rest = scrub.finish_str();
                if rest.is_empty() { String::new() } else { chunk(model, json!({"content": rest}), None, None) }
            };
            loop {
                match s.next().await {
                    Ok(Some(c)) => {
                        // The model that answered, as a non-streamed answer names it.
                        let m = c.model.as_deref().unwrap_or(&model);
                        let text = match c.kind {
                            ChatChunkKind::Delta => {
                                charge.delta(c.provider.as_deref(), &c.content);
                                let content = scrub.push_str(&c.content);
                                if content.is_empty() && !c.content.is_empty() {
                                    continue;
                                }
                                chunk(m, json!({"content": content}), None, None)
                            }
                            ChatChunkKind::ToolCall => {
                                let Some(t) = &c.tool_call else { continue };
                                charge.delta(c.provider.as_deref(), &t.arguments);
                                chunk(m, json!({"tool_calls": [tool_call_delta(t)]}), None, None)
                            }
                            ChatChunkKind::Restart => flush(&mut scrub, m) + &chunk(m, json!({}), None, Some(("harness", json!({"restart": c.reason, "provider": c.provider})))),
                            ChatChunkKind::Done => {
                                let spent = charge.done(c.provider.as_deref(), c.cost);
                                guard.0.activity.charge(&charged_route, c.provider.as_deref(), spent);
                                let usage = c.usage.as_ref().map(usage_json);
                                let mut last = flush(&mut scrub, m);
                                last.push_str(&chunk(m, json!({}), Some(c.finish_reason.clone().unwrap_or_else(|| "stop".into())), Some(("usage", usage.unwrap_or(Value::Null)))));
                                last.push_str("data: [DONE]\n\n");
                                return Some((Ok::<_, std::convert::Infallible>(Bytes::from(last)), None));
                            }
                        };
                        return Some((Ok(Bytes::from(text)), Some((s, guard, scrub, charge))));
                    }
                    Ok(None) => return Some((Ok(Bytes::from(flush(&mut scrub, &model) + "data: [DONE]\n\n")), None)),
                    Err(e) => {
                        let e = ApiError::from(e);
                        return Some((Ok(Bytes::from(format!("{}data: {}\n\n", flush(&mut scrub, &model), e.body()))), None));
                    }
                }
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(events));
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    h.insert("x-harness-trace-id", HeaderValue::from_str(&trace_id).unwrap_or(HeaderValue::from_static("")));
    Ok((200, route, resp, Some(trace_id), None))
}

fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

// ---- /v1/messages (Anthropic's Messages API) ----

async fn messages(State(gw): Gw, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let caller = match authenticate(&gw, &headers) {
        Ok(c) => c,
        Err(mut e) => {
            e.message = "a valid caller key is required (x-api-key: <key>, or Authorization: Bearer <key>)".into();
            return crate::anthropic::error_response(e);
        }
    };
    let guard = InFlight::new(&gw);
    let (status, target, resp, trace, cost) = match messages_inner(&gw, &caller, &headers, &body, guard).await {
        Ok(done) => done,
        Err((target, e)) => {
            let trace = e.trace_id.clone();
            (e.status.as_u16(), target, crate::anthropic::error_response(e), trace, None)
        }
    };
    gw.count(&caller.name, "messages", &target, status);
    access_log(&caller.name, "messages", &target, status, started, trace.as_deref(), cost);
    resp
}

/// A refusal: the core reports one (a Gemini safety block, Anthropic's `refusal`, Azure's
/// content filter) as an error with the code `content_filter`; Anthropic answers it.
fn refused(e: &harness_core::HarnessError) -> bool {
    e.code.as_deref() == Some("content_filter")
}

fn sse(body: Body, trace_id: &str) -> Response {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    h.insert("x-harness-trace-id", HeaderValue::from_str(trace_id).unwrap_or(HeaderValue::from_static("")));
    resp
}

async fn messages_inner(gw: &Arc<Gateway>, caller: &Arc<Caller>, headers: &HeaderMap, body: &[u8], guard: InFlight) -> Result<ChatDone, (String, ApiError)> {
    use crate::anthropic;
    let v: Value = serde_json::from_slice(body).map_err(|e| (String::new(), ApiError::bad_request(format!("the body is not JSON: {e}"))))?;
    let anthropic::Translated { model, stream, messages, mut params } = anthropic::request(&v).map_err(|m| (String::new(), ApiError::bad_request(m)))?;
    let Admitted { route, pricing, reservation } = admit_chat(gw, caller, &model, &mut params, &messages, "/v1/messages").await?;
    let req = ChatRequest { messages, params, headers: Vec::new(), timeout_ms: None, traceparent: traceparent(headers), principal: Some(caller.name.clone()) };
    let trace_header = |resp: &mut Response, t: &str| {
        resp.headers_mut().insert("x-harness-trace-id", HeaderValue::from_str(t).unwrap_or(HeaderValue::from_static("")));
    };
    if !stream {
        return match gw.client.chat(&model, req).await {
            Ok(r) => {
                let charge = answer_charge(&r, &pricing);
                reservation.settle(charge);
                gw.activity.charge(&route, r.provider.as_deref(), charge);
                let mut resp = Json(anthropic::message(&r, &model)).into_response();
                trace_header(&mut resp, &r.trace_id);
                Ok((200, route, resp, Some(r.trace_id), Some(charge)))
            }
            Err(e) if refused(&e) => {
                let trace = e.trace_id.clone().unwrap_or_default();
                let mut resp = Json(anthropic::refusal(&trace, &model)).into_response();
                trace_header(&mut resp, &trace);
                Ok((200, route, resp, Some(trace), Some(0.0)))
            }
            Err(e) => Err((route, ApiError::from(e))),
        };
    }
    let s = match gw.client.chat_stream(&model, req).await {
        Ok(s) => s,
        Err(e) if refused(&e) => {
            let trace = e.trace_id.clone().unwrap_or_default();
            let text = anthropic::Events::new(&trace).finish(&model, Some("content_filter"), None);
            return Ok((200, route, sse(Body::from(text), &trace), Some(trace), Some(0.0)));
        }
        Err(e) => return Err((route, ApiError::from(e))),
    };
    let trace_id = s.trace_id.clone();
    let content_scrub = gw.scrubber().stream();
    let charge = StreamCharge::new(reservation, pricing);
    let events = anthropic::Events::new(&trace_id);
    let charged_route = route.clone();
    let body = futures_util::stream::unfold(Some((s, guard, content_scrub, charge, events)), move |state| {
        let (model, charged_route) = (model.clone(), charged_route.clone());
        async move {
            let (mut s, guard, mut scrub, mut charge, mut ev) = state?;
            loop {
                let out = match s.next().await {
                    Ok(Some(c)) => {
                        let m = c.model.clone().unwrap_or_else(|| model.clone());
                        match c.kind {
                            ChatChunkKind::Delta => {
                                charge.delta(c.provider.as_deref(), &c.content);
                                ev.text(&m, &scrub.push_str(&c.content))
                            }
                            ChatChunkKind::ToolCall => {
                                let Some(t) = &c.tool_call else { continue };
                                charge.delta(c.provider.as_deref(), &t.arguments);
                                // Text held back by the scrubber goes first, in its own block.
                                let held = scrub.finish_str();
                                ev.text(&m, &held) + &ev.tool(&m, t)
                            }
                            ChatChunkKind::Restart => {
                                if !ev.said_anything() {
                                    // Nothing reached the caller: the answer starts afresh unseen.
                                    let _ = scrub.finish_str();
                                    continue;
                                }
                                // Anthropic's events cannot take back what was sent.
                                let e = ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", "restarted", format!("the answer restarted on another provider after part of it was sent ({})", c.reason.as_deref().unwrap_or("provider failed")));
                                return Some((Ok::<_, std::convert::Infallible>(Bytes::from(ev.error(&e))), None));
                            }
                            ChatChunkKind::Done => {
                                let spent = charge.done(c.provider.as_deref(), c.cost);
                                guard.0.activity.charge(&charged_route, c.provider.as_deref(), spent);
                                let held = scrub.finish_str();
                                let last = ev.text(&m, &held) + &ev.finish(&m, c.finish_reason.as_deref(), c.usage.as_ref());
                                return Some((Ok(Bytes::from(last)), None));
                            }
                        }
                    }
                    Ok(None) => {
                        let held = scrub.finish_str();
                        return Some((Ok(Bytes::from(ev.text(&model, &held) + &ev.finish(&model, None, None))), None));
                    }
                    Err(e) if refused(&e) => {
                        let held = scrub.finish_str();
                        return Some((Ok(Bytes::from(ev.text(&model, &held) + &ev.finish(&model, Some("content_filter"), None))), None));
                    }
                    Err(e) => {
                        let held = scrub.finish_str();
                        let e = ApiError::from(e);
                        return Some((Ok(Bytes::from(ev.text(&model, &held) + &ev.error(&e))), None));
                    }
                };
                if !out.is_empty() {
                    return Some((Ok(Bytes::from(out)), Some((s, guard, scrub, charge, ev))));
                }
            }
        }
    });
    Ok((200, route, sse(Body::from_stream(body), &trace_id), Some(trace_id), None))
}

// ---- /v1/embeddings ----

async fn embeddings(State(gw): Gw, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let caller = match authenticate(&gw, &headers) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let _guard = InFlight::new(&gw);
    let (status, target, resp, trace, cost) = match embeddings_inner(&gw, &caller, &headers, &body).await {
        Ok(done) => done,
        Err((target, e)) => {
            let trace = e.trace_id.clone();
            (e.status.as_u16(), target, e.into_response(), trace, None)
        }
    };
    gw.count(&caller.name, "embeddings", &target, status);
    access_log(&caller.name, "embeddings", &target, status, started, trace.as_deref(), cost);
    resp
}

/// `input` as texts: a string or a list of strings; token arrays are refused by name.
fn embed_inputs(input: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let tokens = || ApiError::bad_request("`input`: token arrays (lists of integers) are not supported; send the text to embed, a string or a list of strings");
    let texts = match input {
        Some(Value::String(s)) if s.is_empty() => return Err(ApiError::bad_request("`input`: an empty string cannot be embedded")),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut texts = Vec::with_capacity(items.len());
            for (i, x) in items.iter().enumerate() {
                match x {
                    Value::String(s) if s.is_empty() => return Err(ApiError::bad_request(format!("`input[{i}]`: an empty string cannot be embedded"))),
                    Value::String(s) => texts.push(s.clone()),
                    Value::Number(_) | Value::Array(_) => return Err(tokens()),
                    _ => return Err(ApiError::bad_request(format!("`input[{i}]`: expected a string"))),
                }
            }
            texts
        }
        _ => return Err(ApiError::bad_request("`input`: expected a string or a non-empty list of strings")),
    };
    if texts.len() > harness_core::adapters::embeddings::MAX_INPUTS {
        return Err(ApiError::bad_request(format!("`input`: at most {} texts in one request", harness_core::adapters::embeddings::MAX_INPUTS)));
    }
    Ok(texts)
}

/// Standard base64 (with padding) of `bytes`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            out.push(if i <= chunk.len() { ALPHABET[(n >> shift & 63) as usize] as char } else { '=' });
        }
    }
    out
}

async fn embeddings_inner(gw: &Arc<Gateway>, caller: &Arc<Caller>, headers: &HeaderMap, body: &[u8]) -> Result<ChatDone, (String, ApiError)> {
    let bad = |e: ApiError| (String::new(), e);
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(ApiError::bad_request(format!("the body is not JSON: {e}"))))?;
    let Some(obj) = v.as_object() else { return Err(bad(ApiError::bad_request("the body must be a JSON object"))) };
    let model = match obj.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => return Err(bad(ApiError::bad_request("`model` is required: an embeddings route, or route/model"))),
    };
    let inputs = embed_inputs(obj.get("input")).map_err(bad)?;
    let dimensions = match obj.get("dimensions") {
        None | Some(Value::Null) => None,
        Some(d) => Some(d.as_u64().filter(|d| (1..=u32::MAX as u64).contains(d)).ok_or_else(|| bad(ApiError::bad_request("`dimensions`: expected an integer >= 1")))? as u32),
    };
    let base64_out = match obj.get("encoding_format") {
        None | Some(Value::Null) => false,
        Some(Value::String(f)) if f == "float" => false,
        Some(Value::String(f)) if f == "base64" => true,
        Some(_) => return Err(bad(ApiError::bad_request("`encoding_format`: expected \"float\" or \"base64\""))),
    };
    let (route, pinned) = match model.split_once('/') {
        Some((r, m)) => (r.to_string(), Some(m.to_string())),
        None => (model.clone(), None),
    };
    let cfg = gw.client.config();
    let Some(rc) = cfg.routes.get(&route) else {
        let e = ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "model_not_found", format!("no route `{}`", harness_core::redact::escape_control(&route)));
        return Err((UNKNOWN.into(), e));
    };
    if !caller.may_use_route(&route) {
        return Err((route.clone(), ApiError::forbidden(&format!("route `{route}`"))));
    }
    if rc.kind != harness_core::routing::config::RouteKind::Embeddings {
        return Err((route.clone(), ApiError::bad_request(format!("`model`: route `{route}` is a chat route; embeddings need a route of kind embeddings"))));
    }
    if let Some(m) = &pinned {
        // An embeddings call is routed whole: a model can be named only when every provider
        // of the route serves it (vectors of different models are not comparable anyway).
        if !rc.providers.iter().any(|p| p.model.as_deref() == Some(m.as_str())) {
            let e = ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "model_not_found", format!("route `{route}` serves no model `{}`", harness_core::redact::escape_control(m)));
            return Err((route.clone(), e));
        }
        if !rc.providers.iter().all(|p| p.model.as_deref() == Some(m.as_str())) {
            return Err((route.clone(), ApiError::bad_request(format!("`model`: the providers of route `{route}` serve several models and an embeddings call cannot pin one; name the route alone"))));
        }
    }
    let pricing = Pricing::new(&cfg, &route, &model, &json!(inputs));
    drop(cfg);
    let reserve = if caller.budget_per_day.is_some() && !pricing.is_free() { pricing.max_cost(0) } else { 0.0 };
    let reservation = admit(gw, caller, "/v1/embeddings", reserve).await.map_err(|e| (route.clone(), e))?;
    let mut req = harness_core::EmbedRequest::new(inputs);
    req.dimensions = dimensions;
    req.traceparent = traceparent(headers);
    req.principal = Some(caller.name.clone());
    // A failed call releases its reservation (dropped) and is charged nothing.
    let r = gw.client.embed(&route, req).await.map_err(|e| (route.clone(), ApiError::from(e)))?;
    let charge = r.cost.unwrap_or_else(|| pricing.estimate(r.provider.as_deref(), 0));
    reservation.settle(charge);
    gw.activity.charge(&route, r.provider.as_deref(), charge);
    let data: Vec<Value> = (0..r.count as usize)
        .map(|i| {
            let v = r.vector(i);
            let embedding = if base64_out { json!(base64(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())) } else { json!(v) };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    let u = r.usage.unwrap_or_default();
    let body = json!({
        "object": "list",
        "data": data,
        "model": r.model.clone().unwrap_or_else(|| model.clone()),
        "usage": {"prompt_tokens": u.prompt_tokens, "total_tokens": u.total_tokens},
        "harness": {"route": r.route, "provider": r.provider, "cost": r.cost, "attempts": r.attempts, "batches": r.batches, "trace_id": r.trace_id},
    });
    let mut resp = Json(body).into_response();
    resp.headers_mut().insert("x-harness-trace-id", HeaderValue::from_str(&r.trace_id).unwrap_or(HeaderValue::from_static("")));
    Ok((200, route, resp, Some(r.trace_id), Some(charge)))
}

// ---- /v1/models ----

async fn models(State(gw): Gw, headers: HeaderMap) -> Response {
    let caller = match authenticate(&gw, &headers) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let cfg = gw.client.config();
    let mut data = Vec::new();
    for (name, r) in cfg.routes.iter().filter(|(n, _)| caller.may_use_route(n)) {
        data.push(json!({"id": name, "object": "model", "created": 0, "owned_by": "harness"}));
        let mut seen = std::collections::BTreeSet::new();
        for p in &r.providers {
            if let Some(m) = p.model.as_deref().filter(|m| seen.insert(m.to_string())) {
                data.push(json!({"id": format!("{name}/{m}"), "object": "model", "created": 0, "owned_by": p.id}));
            }
        }
    }
    Json(json!({"object": "list", "data": data})).into_response()
}

// ---- /v1/services/{service}/... ----

/// Request headers a caller may pass on; anything else (credentials, cookies, host, framing,
/// routing) is dropped.
const FORWARDED: &[&str] = &["accept", "accept-language", "content-type", "if-match", "if-none-match", "if-modified-since", "prefer"];
/// Response headers passed back.
const RETURNED: &[&str] = &["content-type", "content-language", "cache-control", "etag", "last-modified", "location", "retry-after"];

async fn service(State(gw): Gw, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let caller = match authenticate(&gw, &headers) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let _guard = InFlight::new(&gw);
    // The raw (still percent-encoded) path: the core refuses `..` however it is spelled.
    let rest = uri.path().strip_prefix("/v1/services/").unwrap_or("");
    let (name, path) = match rest.split_once('/') {
        Some((n, p)) => (n.to_string(), format!("/{p}")),
        None => (rest.to_string(), "/".to_string()),
    };
    let (status, resp, trace) = match service_inner(&gw, &caller, &name, &method, &path, uri.query(), &headers, body).await {
        Ok(r) => r,
        Err(e) => {
            let trace = e.trace_id.clone();
            (e.status.as_u16(), e.into_response(), trace)
        }
    };
    let target = if gw.client.config().services.contains_key(&name) { name.as_str() } else { UNKNOWN };
    gw.count(&caller.name, "service", target, status);
    access_log(&caller.name, "service", target, status, started, trace.as_deref(), None);
    resp
}

#[allow(clippy::too_many_arguments)]
async fn service_inner(gw: &Arc<Gateway>, caller: &Arc<Caller>, name: &str, method: &Method, path: &str, query: Option<&str>, headers: &HeaderMap, body: Bytes) -> Result<(u16, Response, Option<String>), ApiError> {
    if !gw.client.config().services.contains_key(name) {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "service_not_found", "no such service"));
    }
    if !caller.may_use_service(name) {
        return Err(ApiError::forbidden(&format!("service `{name}`")));
    }
    let _reservation = admit(gw, caller, "/v1/services", 0.0).await?;
    let full = match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let mut req = Request::new(name, method.as_str(), full);
    for (k, v) in headers {
        if FORWARDED.contains(&k.as_str()) {
            if let Ok(v) = v.to_str() {
                req.headers.push((k.as_str().to_string(), v.to_string()));
            }
        }
    }
    req.idempotency_key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_string);
    req.traceparent = traceparent(headers);
    req.principal = Some(caller.name.clone());
    if !body.is_empty() {
        req.body = harness_core::Body::Bytes(body);
    }
    match gw.client.request(req).await {
        Ok(r) => {
            let mut resp = Response::new(Body::from(r.body));
            *resp.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK);
            for (k, v) in &r.headers {
                if RETURNED.contains(&k.as_str()) {
                    if let (Ok(k), Ok(v)) = (axum::http::HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) {
                        resp.headers_mut().append(k, v);
                    }
                }
            }
            resp.headers_mut().insert("x-harness-trace-id", HeaderValue::from_str(&r.trace_id).unwrap_or(HeaderValue::from_static("")));
            Ok((r.status, resp, Some(r.trace_id)))
        }
        // The downstream's own answer (already scrubbed of known secrets) goes back as it came.
        Err(e) if e.name() == "HttpStatusError" && e.body.is_some() => {
            let status = e.status.unwrap_or(502);
            let mut resp = Response::new(Body::from(e.body.clone().unwrap_or_default()));
            *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            if let Some(ms) = e.retry_after_ms {
                resp.headers_mut().insert("retry-after", HeaderValue::from(ms.div_ceil(1000)));
            }
            if let Some(t) = &e.trace_id {
                resp.headers_mut().insert("x-harness-trace-id", HeaderValue::from_str(t).unwrap_or(HeaderValue::from_static("")));
            }
            Ok((status, resp, e.trace_id.clone()))
        }
        Err(e) => Err(e.into()),
    }
}

// ---- operations ----

async fn readyz(State(gw): Gw) -> Response {
    let cfg = gw.client.config();
    let mut unready = Vec::new();
    for (name, r) in &cfg.routes {
        if r.criticality != harness_core::routing::config::Criticality::Core {
            continue;
        }
        let healthy = gw.client.routing_state(name).map(|s| s.providers.iter().any(|p| p.effective_weight > 0.0)).unwrap_or(false);
        if !healthy {
            unready.push(name.clone());
        }
    }
    if unready.is_empty() {
        Json(json!({"status": "ready", "config_version": gw.client.config_version()})).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "not_ready", "routes_without_a_healthy_provider": unready}))).into_response()
    }
}

async fn metrics(State(gw): Gw) -> Response {
    ([("content-type", "text/plain; version=0.0.4")], gw.metrics_text()).into_response()
}

// ---- admin ----

/// The admin principal: `admin:` and the first 12 hex digits of the key's SHA-256, which names
/// the key in audit records without being usable as it.
fn admin(gw: &Gateway, headers: &HeaderMap) -> Result<String, ApiError> {
    match key(headers).map(|k| (gw.admin_ok(k), k)) {
        _ if !gw.admin_on() => Err(ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "the admin API is off (gateway.admin_key_sha256)")),
        Some((Some(true), k)) => Ok(format!("admin:{}", &crate::config::sha256_hex(k.as_bytes())[..12])),
        _ => Err(ApiError::new(StatusCode::UNAUTHORIZED, "invalid_request_error", "invalid_admin_key", "the admin key is required")),
    }
}

/// Records an admin action (kept for `/admin/audit`, and one `harness.admin_action` line).
fn audit(gw: &Gateway, principal: &str, action: &str, target: String, ok: bool, detail: Value) {
    gw.activity.audit(AuditRecord { at_ms: crate::activity::now_ms(), principal: principal.to_string(), action: action.into(), target, ok, detail });
}

/// Audits `result` as `action` on `target`, then passes it on.
fn audited<T>(gw: &Gateway, principal: &str, action: &str, target: String, detail: Value, result: Result<T, ApiError>) -> Result<T, ApiError> {
    match &result {
        Ok(_) => audit(gw, principal, action, target, true, detail),
        Err(e) => audit(gw, principal, action, target, false, json!({"request": detail, "error": e.message})),
    }
    result
}

async fn admin_routes(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    let names: Vec<String> = gw.client.config().routes.keys().cloned().collect();
    let states: Vec<Value> = names.iter().filter_map(|n| route_view(&gw, n).ok()).collect();
    Ok(Json(json!({"routes": states})).into_response())
}

/// A route's routing state, each provider with what it was charged today (`cost_today`, in
/// the routes' price unit).
fn route_view(gw: &Gateway, route: &str) -> Result<Value, ApiError> {
    let mut v = gw.client.routing_state(route)?.to_value();
    if let Some(providers) = v.get_mut("providers").and_then(Value::as_array_mut) {
        for p in providers {
            let id = p["id"].as_str().unwrap_or_default().to_string();
            p["cost_today"] = json!(gw.activity.provider_cost_today(route, &id));
        }
    }
    Ok(v)
}

async fn admin_route(State(gw): Gw, headers: HeaderMap, Path(route): Path<String>) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    Ok(Json(route_view(&gw, &route)?).into_response())
}

async fn admin_weight(State(gw): Gw, headers: HeaderMap, Path((route, provider)): Path<(String, String)>, body: Bytes) -> Result<Response, ApiError> {
    let principal = admin(&gw, &headers)?;
    let target = format!("{route}/{provider}");
    let weight = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("weight").and_then(Value::as_u64))
        .filter(|w| *w <= u32::MAX as u64)
        .ok_or_else(|| ApiError::bad_request("weight: expected {\"weight\": n}, an integer >= 0"));
    let result = weight.and_then(|w| gw.client.set_weight(&route, &provider, w as u32).map(|v| (w, v)).map_err(ApiError::from));
    let detail = json!({"weight": result.as_ref().ok().map(|(w, _)| *w)});
    let (_, version) = reloaded(&gw, &principal, "set_weight", audited(&gw, &principal, "set_weight", target, detail, result))?;
    Ok(Json(json!({"ok": true, "config_version": version})).into_response())
}

/// Keeps a reload tried by hand in the history (accepted or not, with the field a rejected
/// config named), then passes its result on.
fn reloaded<T>(gw: &Gateway, principal: &str, source: &str, result: Result<T, ApiError>) -> Result<T, ApiError> {
    let error = result.as_ref().err().map(|e| e.message.clone());
    // A refusal before any config was read (a bad request body) is not a reload.
    if result.is_ok() || result.as_ref().err().is_some_and(|e| e.harness_kind == Some("ConfigError")) {
        gw.activity.reloaded(ReloadRecord {
            at_ms: crate::activity::now_ms(),
            source: source.into(),
            principal: principal.into(),
            accepted: result.is_ok(),
            version: gw.client.config_version(),
            field_path: error.as_deref().and_then(crate::activity::field_path),
            error,
        });
    }
    result
}

async fn admin_reload(State(gw): Gw, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let principal = admin(&gw, &headers)?;
    let from = if body.is_empty() { "the config file" } else { "the request body" };
    let result = reload_from(&gw, &headers, &body).await;
    let version = reloaded(&gw, &principal, "admin_reload", audited(&gw, &principal, "reload", from.into(), json!({"bytes": body.len()}), result))?;
    Ok(Json(json!({"ok": true, "config_version": version})).into_response())
}

async fn reload_from(gw: &Gateway, headers: &HeaderMap, body: &[u8]) -> Result<String, ApiError> {
    let loaded = if body.is_empty() {
        let path = gw.path.as_deref().ok_or_else(|| ApiError::bad_request("no config file to re-read: send the config as the body"))?;
        Loaded::from_path(path)?
    } else {
        let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the config must be UTF-8 text"))?;
        let json = headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.contains("json"));
        let value = harness_core::Config::parse_text(text, if json { "json" } else { "yaml" })?;
        // The admin key is not read access to the host: a config sent over HTTP reads only the
        // files and environment variables the config file on disk reads, where it reads them.
        let allowed = match gw.path.as_deref() {
            Some(path) => Loaded::value_at(path).map(|v| crate::config::host_references(&v)).unwrap_or_default(),
            None => gw.started_with.clone(),
        };
        crate::config::check_remote_reload(&value, &allowed)?;
        Loaded::from_value(value)?
    };
    Ok(gw.reload(loaded)?)
}

/// Drops every cached answer (HTTP cache, exact and semantic answers) of every service and route.
async fn admin_cache_clear_all(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    let principal = admin(&gw, &headers)?;
    let cleared = audited(&gw, &principal, "cache_clear", "*".into(), json!({}), gw.client.cache_clear(None).map_err(ApiError::from))?;
    Ok(Json(json!({"ok": true, "cleared": cleared})).into_response())
}

/// Drops one service's or route's cached answers; an unknown name is a 400 naming it.
async fn admin_cache_clear(State(gw): Gw, headers: HeaderMap, Path(name): Path<String>) -> Result<Response, ApiError> {
    let principal = admin(&gw, &headers)?;
    let cleared = audited(&gw, &principal, "cache_clear", name.clone(), json!({}), gw.client.cache_clear(Some(&name)).map_err(ApiError::from))?;
    Ok(Json(json!({"ok": true, "cleared": cleared})).into_response())
}

/// A direct call to one provider, bypassing routing and weights (the first step when adding a
/// provider at weight 0).
async fn admin_test(State(gw): Gw, headers: HeaderMap, Path((route, provider)): Path<(String, String)>, body: Bytes) -> Result<Response, ApiError> {
    let principal = admin(&gw, &headers)?;
    let target = format!("{route}/{provider}");
    let out = audited(&gw, &principal, "test_provider", target, json!({}), test_provider(&gw, &route, &provider, &body).await)?;
    // The call was made: its outcome (an answer or the provider's error) is part of the record.
    audit(&gw, &principal, "test_provider_result", format!("{route}/{provider}"), out["ok"] == true, json!({"status": out["status"], "error": out["error"], "elapsed_ms": out["elapsed_ms"]}));
    Ok(Json(out).into_response())
}

async fn test_provider(gw: &Gateway, route: &str, provider: &str, body: &[u8]) -> Result<Value, ApiError> {
    let cfg = gw.client.config();
    let r = cfg.routes.get(route).ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "no such route"))?;
    let p = r.providers.iter().find(|p| p.id == provider).ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "no such provider"))?;
    let messages = if body.is_empty() {
        json!([{"role": "user", "content": "Reply with the single word: ok"}])
    } else {
        serde_json::from_slice::<Value>(body).ok().and_then(|v| v.get("messages").cloned()).ok_or_else(|| ApiError::bad_request("expected {\"messages\": [...]}"))?
    };
    let mut b = Map::new();
    if let Some(m) = &p.model {
        b.insert("model".into(), Value::String(m.clone()));
    }
    b.insert("messages".into(), messages);
    b.insert("max_tokens".into(), json!(16));
    let mut req = Request::new(p.service.clone(), "POST", r.path.clone());
    req.body = harness_core::Body::Json(Value::Object(b));
    let started = Instant::now();
    let out = match gw.client.request(req).await {
        Ok(resp) => json!({"ok": true, "status": resp.status, "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0, "trace_id": resp.trace_id,
            "body": serde_json::from_slice::<Value>(&resp.body).unwrap_or(Value::Null)}),
        Err(e) => json!({"ok": false, "error": ApiError::from(e).body()["error"], "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0}),
    };
    Ok(out)
}

async fn admin_breakers(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    let list: Vec<Value> = gw.client.all_breaker_details().into_iter().map(|b| json!(b)).collect();
    Ok(Json(json!({"breakers": list})).into_response())
}

async fn admin_breaker_set(State(gw): Gw, headers: HeaderMap, Path(action): Path<String>, body: Bytes) -> Result<Response, ApiError> {
    let principal = admin(&gw, &headers)?;
    let open = match action.as_str() {
        "open" => true,
        "close" => false,
        _ => return Err(ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "expected /admin/breakers/open or /close")),
    };
    let v: Value = serde_json::from_slice(&body).map_err(|_| ApiError::bad_request("expected {\"service\", \"method\", \"endpoint\"}"))?;
    let field = |k: &str| v.get(k).and_then(Value::as_str).ok_or_else(|| ApiError::bad_request(format!("{k}: required")));
    let (service, method, endpoint) = (field("service")?, field("method")?, field("endpoint")?);
    let target = format!("{service} {method} {endpoint}");
    let action = if open { "breaker_open" } else { "breaker_close" };
    audited(&gw, &principal, action, target, json!({}), gw.client.set_breaker(service, method, endpoint, open).map_err(ApiError::from))?;
    Ok(Json(json!({"ok": true, "state": if open { "open" } else { "closed" }})).into_response())
}

async fn admin_credentials(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    Ok(Json(json!({"credentials": serde_json::to_value(gw.client.credentials_state()).unwrap_or(Value::Null)})).into_response())
}

/// The fleet config source (README "Running a fleet"): what this gateway runs, the fleet's
/// stable version and canary with its guard, per version the live instances with their
/// requests, errors and p99, the stragglers, and the last 50 audit records. 404 without a
/// `config_source`; 503 with this gateway's own state when Redis does not answer.
async fn admin_fleet(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    let Some(src) = gw.client.config().config_source.clone() else {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "this gateway has no config_source"));
    };
    let mine = serde_json::to_value(gw.client.config_source_state()).unwrap_or(Value::Null);
    let fleet = async {
        let mut a = harness_core::fleet::Admin::connect(&src.redis_url, &src.name).await?;
        let state = a.state().await?;
        let beats = a.heartbeats().await?;
        let (versions, stragglers) = harness_core::fleet::summarize(&state, &beats);
        let log = a.log().await?;
        let recent = &log[log.len().saturating_sub(50)..];
        Ok::<Value, harness_core::HarnessError>(json!({
            "name": src.name, "this_instance": mine, "stable": state.stable, "canary": state.canary,
            "canary_percent": state.percent as f64 / 100.0, "previous": state.previous, "guard": a.guard().await?,
            "versions": versions, "stragglers": stragglers, "instances": beats, "history": recent,
        }))
    };
    match fleet.await {
        Ok(v) => Ok(Json(v).into_response()),
        Err(e) => Ok((StatusCode::SERVICE_UNAVAILABLE, Json(json!({"name": src.name, "this_instance": mine, "error": e.message}))).into_response()),
    }
}

/// Per caller, today (UTC): requests, errors (status >= 400), refusals by its rate limit and
/// by its budget, what it spent and holds reserved, its budget and what is left of it.
async fn admin_callers(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    let callers: Vec<Value> = gw
        .callers()
        .iter()
        .map(|c| {
            let day = gw.activity.caller_day(&c.name);
            let (spent, reserved) = gw.budgets.spent_today(&c.name);
            let rate_limit = c.rate_limit.as_ref().map(|r| json!({"rps": r.rps, "burst": r.burst, "max_wait_ms": r.max_wait_ms, "shared": r.shared.is_some()}));
            json!({"name": c.name, "requests": day.requests, "errors": day.errors, "rate_limited": day.rate_limited, "budget_refused": day.budget_refused,
                "cost_today": spent, "reserved": reserved, "budget_per_day": c.budget_per_day,
                "budget_left": c.budget_per_day.map(|b| (b - spent - reserved).max(0.0)), "rate_limit": rate_limit})
        })
        .collect();
    Ok(Json(json!({"day": "UTC", "callers": callers})).into_response())
}

/// Per service: its bulkhead (in use, limit), its rate limit as configured, and the breaker of
/// each endpoint it has state for (state, phase, the current window's rates).
async fn admin_services(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    let cfg = gw.client.config();
    let breakers = gw.client.all_breaker_details();
    let services: Vec<Value> = cfg
        .services
        .iter()
        .map(|(name, s)| {
            let endpoints: Vec<Value> = breakers.iter().filter(|b| &b.service == name).map(|b| json!(b)).collect();
            let rate_limit = s.rate_limit.as_ref().map(|r| {
                let endpoints: Map<String, Value> = r.endpoints.iter().map(|(e, l)| (e.clone(), json!({"rps": l.rps, "burst": l.burst}))).collect();
                let state = gw.client.rate_limit_state(name).ok().flatten();
                json!({"rps": r.rps, "burst": r.burst, "max_wait_ms": r.max_wait_ms, "shared": r.shared.is_some(), "endpoints": endpoints, "state": state})
            });
            json!({"service": name, "bulkhead": {"in_use": gw.client.bulkhead_in_use(name).ok(), "limit": gw.client.bulkhead_limit(name).ok()},
                "rate_limit": rate_limit, "endpoints": endpoints})
        })
        .collect();
    // Breakers of route providers (`route:<route>/<provider>`) belong to no service of the config.
    let providers: Vec<Value> = breakers.iter().filter(|b| !cfg.services.contains_key(&b.service)).map(|b| json!(b)).collect();
    Ok(Json(json!({"services": services, "provider_breakers": providers})).into_response())
}

/// The active config version, the reloads tried through the admin API (newest first, each
/// rejected one with its error and field path), and with the fleet config source what this
/// instance applied and rejected.
async fn admin_config(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    let source = gw.client.config_source_state().map(|s| serde_json::to_value(s).unwrap_or(Value::Null));
    Ok(Json(json!({"version": gw.client.config_version(), "reloads": gw.activity.reloads(), "config_source": source})).into_response())
}

/// The admin actions taken on this gateway (newest first, the last 100).
async fn admin_audit(State(gw): Gw, headers: HeaderMap) -> Result<Response, ApiError> {
    admin(&gw, &headers)?;
    Ok(Json(json!({"audit": gw.activity.audit_trail()})).into_response())
}

/// The fleet admin, connected to this gateway's config source (404 without one).
async fn fleet_admin(gw: &Gateway) -> Result<harness_core::fleet::Admin, ApiError> {
    let Some(src) = gw.client.config().config_source.clone() else {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "this gateway has no config_source"));
    };
    Ok(harness_core::fleet::Admin::connect(&src.redis_url, &src.name).await?)
}

/// Widens the fleet's canary to `{"percent": p}` (default 100: it becomes stable), with the
/// admin principal as the fleet log's author.
async fn admin_fleet_promote(State(gw): Gw, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let principal = admin(&gw, &headers)?;
    let v: Value = if body.is_empty() { json!({}) } else { serde_json::from_slice(&body).map_err(|_| ApiError::bad_request("expected {\"percent\": p}"))? };
    let percent = match v.get("percent") {
        None => Ok(100.0),
        Some(p) => p.as_f64().filter(|p| *p > 0.0 && *p <= 100.0).ok_or_else(|| ApiError::bad_request("percent: expected a number in (0, 100]")),
    };
    let result = async {
        let basis_points = (percent? * 100.0).round() as u32;
        Ok::<_, ApiError>(fleet_admin(&gw).await?.promote(basis_points, &principal).await?)
    }
    .await;
    let version = audited(&gw, &principal, "fleet_promote", "canary".into(), json!({"percent": v.get("percent")}), result)?;
    Ok(Json(json!({"ok": true, "version": version})).into_response())
}

/// Withdraws the fleet's canary, else returns stable to the previous version; `{"reason"}`
/// goes to the fleet log with the admin principal as author.
async fn admin_fleet_rollback(State(gw): Gw, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let principal = admin(&gw, &headers)?;
    let v: Value = if body.is_empty() { json!({}) } else { serde_json::from_slice(&body).map_err(|_| ApiError::bad_request("expected {\"reason\": \"...\"}"))? };
    let reason = v.get("reason").and_then(Value::as_str).unwrap_or("rolled back from the admin API");
    let reason: String = harness_core::redact::escape_control(reason).chars().take(500).collect();
    let result = async { Ok::<_, ApiError>(fleet_admin(&gw).await?.rollback(&principal, &reason, None).await?) }.await;
    let version = audited(&gw, &principal, "fleet_rollback", "fleet".into(), json!({"reason": reason}), result)?;
    Ok(Json(json!({"ok": true, "rolled_back": version})).into_response())
}

/// A usage in the OpenAI shape, with the prompt-cache hit and the reasoning tokens when the
/// provider reported them (`prompt_tokens_details.cached_tokens`,
/// `completion_tokens_details.reasoning_tokens`, as OpenAI's SDKs read them; what the core's
/// `Usage::openai_json` renders, which is not public to this crate).
fn usage_json(u: &harness_core::Usage) -> Value {
    let mut v = json!({"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens});
    if u.cached_tokens > 0 {
        v["prompt_tokens_details"] = json!({"cached_tokens": u.cached_tokens});
    }
    if u.reasoning_tokens > 0 {
        v["completion_tokens_details"] = json!({"reasoning_tokens": u.reasoning_tokens});
    }
    v
}

//! A request that names a route: pick a provider, fail over, degrade.
//!
//! Order: snapshot -> route -> validate -> total deadline (the route's) -> loop {
//!   pick (strategy; skips open breakers, full bulkheads, cooling and given-up providers)
//!   -> one attempt on the provider's service (`attempt::once`: its breaker, bulkhead,
//!   credentials, timeouts) -> record health -> same provider again, another one, or stop
//! } -> answer (usage, model, cost) | cached answer | static answer | error.
//!
//! Failover rules (DESIGN.md "Routing"): a 5xx is retried on the same provider up to
//! `same_provider_retries` times after a backoff, then fails over; a 429 cools the
//! provider until its `Retry-After` and fails over at once (waiting it out only when
//! no one else can serve, within `max_retry_after_ms` and the deadline); a connect
//! failure, silence until the response timeout (or, streaming, `ttft_ms` after the request
//! is sent), a broken, malformed or oversized answer, an open breaker or a full bulkhead
//! fails over at once; a non-retryable 4xx goes to the `on_error`
//! provider for its code, or to the caller intact. Every attempt after the first is
//! within `max_attempts`, the total deadline and the route's failover budget; a
//! request that is not retry-safe is never sent twice. A request never makes more
//! than two attempts to one provider in 1.5 s.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde_json::Value;
use tokio::time::Instant;

use super::attempt::{self, Mode, Once, Reached};
use super::classify::Classified;
use super::{build_request, Call};
use crate::adapters::{openai, Usage};
use crate::redact::escape_control;
use crate::breaker::{BreakerState, Outcome};
use crate::deadline::Deadline;
use crate::endpoint;
use crate::engine::registry::EndpointState;
use crate::engine::{Engine, ServiceRuntime, Snapshot};
use crate::error::{ErrorKind, HarnessError};
use crate::host::Event;
use crate::json;
use crate::observability::log::RequestRecord;
use crate::observability::metrics::{CostLabels, FailoverLabels, FallbackLabels, RouteAttemptLabels};
use crate::observability::trace::TraceContext;
use crate::redact::truncate_chars;
use crate::request::{Body, Request};
use crate::response::{Response, Routed};
use crate::retry::{self, Failure};
use crate::routing::config::{AdapterKind, Criticality};
use crate::routing::health::InFlight;
use crate::routing::strategy::{self, Pick, Tried};
use crate::routing::RouteRuntime;
use crate::target;
use crate::transport::OutgoingRequest;

/// Endpoint labels tracked per route (its own record, not a provider's).
const ROUTE_MAX_ENDPOINTS: u32 = 1000;
/// How long a provider cools after a 429 without `Retry-After`.
const DEFAULT_COOLING: Duration = Duration::from_secs(1);

/// What a routed request knows, kept on its `Call`.
pub(crate) struct RouteCall {
    pub rt: Arc<RouteRuntime>,
    /// `openai-compatible`: the caller's JSON body, prepared per provider.
    pub json: Option<Value>,
    /// Provider bodies ask for a stream.
    pub stream: bool,
    /// The provider of the attempt in progress (or the last one).
    pub current: Option<usize>,
    pub tried: Vec<Tried>,
    /// Providers in the order first tried.
    pub order: Vec<usize>,
    /// Each provider's own endpoint state (its breaker, scoped to the provider) for this
    /// request's endpoint.
    pub eps: Vec<Arc<EndpointState>>,
    /// This request's last error per provider, summarised.
    pub errors: Vec<Option<String>>,
    pub answered: Option<usize>,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    pub cost: Option<f64>,
    pub fallback: Option<&'static str>,
    /// The last failure (provider, kind, status, code): the next pick elsewhere is a failover.
    pub failed: Option<(usize, &'static str, Option<u16>, Option<String>)>,
    /// A partial streamed answer a prefill-accepting provider is asked to continue.
    pub prefill: Option<String>,
    /// The last request sent carried the prefill.
    pub prefill_used: bool,
    /// A streamed chat: each provider's first chunk (its head included) is due this long
    /// after its request is sent.
    pub ttft: Option<Duration>,
}

impl RouteCall {
    pub fn outgoing(&mut self, svc: &ServiceRuntime, req: &Request, method: &Method, trace: &TraceContext) -> Result<OutgoingRequest, HarnessError> {
        let idx = self.current.expect("a provider is chosen before an attempt");
        let provider = &self.rt.providers[idx].config;
        self.prefill_used = false;
        let body = match &self.json {
            Some(j) => {
                let mut v = openai::prepare(j, provider, self.stream);
                // Only a provider configured to accept it is asked to continue a partial answer.
                if let (Some(partial), true) = (&self.prefill, provider.accepts_prefill) {
                    if let Some(list) = v.get_mut("messages").and_then(Value::as_array_mut) {
                        list.push(serde_json::json!({"role": "assistant", "content": partial}));
                        self.prefill_used = true;
                    }
                }
                Body::Json(v)
            }
            None => req.body.clone(),
        };
        build_request(svc, req, &body, method, trace)
    }

    pub fn stamp_error(&self, e: &mut HarnessError) {
        if e.provider.is_none() && e.kind != ErrorKind::NoHealthyProvider {
            e.provider = self.current.map(|i| self.rt.providers[i].id.to_string());
        }
    }

    pub fn stamp_record(&self, r: &mut RequestRecord) {
        r.route = Some(self.rt.name.clone());
        let idx = self.answered.or(self.current);
        r.provider = idx.map(|i| self.rt.providers[i].id.clone());
        // The route's own endpoint has no breaker in use: report the provider's.
        if let Some(i) = idx {
            r.breaker = self.eps[i].breaker.state().as_str();
        }
        r.model = self.model.clone();
        r.cost = self.cost;
        r.fallback = self.fallback;
    }

    pub fn attempts_by_provider(&self) -> Vec<(String, u32)> {
        self.order.iter().map(|&i| (self.rt.providers[i].id.to_string(), self.tried[i].attempts)).collect()
    }

    pub fn routed(&self) -> Routed {
        Routed {
            route: self.rt.name.to_string(),
            provider: self.answered.map(|i| self.rt.providers[i].id.to_string()),
            model: self.model.clone(),
            attempts_by_provider: self.attempts_by_provider(),
            fallback: self.fallback,
            usage: self.usage,
            cost: self.cost,
        }
    }

    /// Usage, model and cost of the answering provider; the cost goes to `harness_cost_total`.
    pub fn settle(&mut self, engine: &Engine, idx: usize, model: Option<String>, usage: Option<Usage>) {
        let p = &self.rt.providers[idx];
        self.answered = Some(idx);
        self.model = model.or_else(|| p.config.model.clone());
        self.usage = usage;
        self.cost = match (usage, &p.config.price) {
            (Some(u), Some(price)) => Some(openai::cost(&u, price)),
            _ => None,
        };
        if let Some(c) = self.cost {
            engine.metrics.cost.get_or_create(&self.cost_labels(idx)).inc_by(c);
        }
    }

    /// A failed attempt that reported usage (a stream cut after its usage) is priced apart.
    pub fn bill_failed(&self, engine: &Engine, idx: usize, usage: Option<Usage>) {
        let p = &self.rt.providers[idx];
        if let (Some(u), Some(price)) = (usage, &p.config.price) {
            engine.metrics.failed_cost.get_or_create(&self.cost_labels(idx)).inc_by(openai::cost(&u, price));
        }
    }

    fn cost_labels(&self, idx: usize) -> CostLabels {
        let p = &self.rt.providers[idx];
        CostLabels {
            route: self.rt.name.as_ref().into(),
            provider: p.id.as_ref().into(),
            model: self.model.clone().or_else(|| p.config.model.clone()).unwrap_or_default().into(),
        }
    }
}

/// Builds the call for a request that names a route.
/// Every provider, or only those serving `model` (`route/model`); a model no provider serves
/// is a `ConfigError` naming the ones that are.
fn pinned(rt: &RouteRuntime, model: Option<&str>) -> Result<Vec<Tried>, HarnessError> {
    let mut tried = vec![Tried::default(); rt.providers.len()];
    let Some(model) = model else { return Ok(tried) };
    for (t, p) in tried.iter_mut().zip(&rt.providers) {
        t.excluded = p.config.model.as_deref() != Some(model);
    }
    if tried.iter().all(|t| t.excluded) {
        let mut models: Vec<&str> = rt.providers.iter().filter_map(|p| p.config.model.as_deref()).collect();
        models.dedup();
        return Err(HarnessError::config(format!(
            "request.service: route `{}` has no provider of model `{}` (models: {})",
            rt.name,
            escape_control(model),
            models.join(", ")
        )));
    }
    Ok(tried)
}

pub(crate) fn start(
    engine: &Engine,
    snapshot: Arc<Snapshot>,
    rt: Arc<RouteRuntime>,
    req: Request,
    started: Instant,
    streaming: bool,
    model: Option<String>,
) -> Result<Call, HarnessError> {
    let method = target::method(&req.method)?;
    target::check_path(&req.path)?;
    if let Some(e) = &req.endpoint {
        target::check_endpoint(e)?;
    }
    target::check_principal(req.principal.as_deref())?;
    let template = match &req.endpoint {
        Some(e) => e.clone(),
        None => endpoint::template(&req.path),
    };
    let ep = engine.registry.endpoint(&rt.name, &template, method.as_str(), ROUTE_MAX_ENDPOINTS);
    let eps = rt
        .providers
        .iter()
        .map(|p| engine.registry.endpoint(&p.scope, &template, method.as_str(), p.svc.config.limits.max_endpoints))
        .collect();
    let (trace, spans) = super::trace_for(engine, &snapshot, &req);
    let json = match rt.config.adapter {
        AdapterKind::OpenaiCompatible => Some(json_object(&req.body)?),
        AdapterKind::Http => None,
    };
    // Bad headers or a bad body fail now, before any provider is tried.
    let svc = rt.providers[0].svc.clone();
    let check_body = if json.is_some() { Body::Empty } else { req.body.clone() };
    build_request(&svc, &req, &check_body, &method, &trace)?;
    let deadline = Deadline::after(Duration::from_millis(req.timeout_ms.unwrap_or(rt.request_ms)));
    engine.budgets.deposit(&rt.budget_key, &rt.budget);
    let n = rt.providers.len();
    let rc = RouteCall {
        json,
        stream: streaming,
        current: None,
        tried: pinned(&rt, model.as_deref())?,
        order: Vec::new(),
        eps,
        errors: vec![None; n],
        answered: None,
        model: None,
        usage: None,
        cost: None,
        fallback: None,
        failed: None,
        prefill: None,
        prefill_used: false,
        ttft: None,
        rt,
    };
    Ok(Call {
        snapshot,
        svc,
        ep,
        req,
        method,
        wire: trace.next_span(),
        trace,
        spans,
        deadline,
        started,
        attempts: 0,
        auth_replayed: false,
        first: None,
        route: Some(Box::new(rc)),
        schema_violation: None,
        fault: None,
    })
}

/// The body of an `openai-compatible` request, as a JSON object.
fn json_object(body: &Body) -> Result<Value, HarnessError> {
    let v = match body {
        Body::Json(v) => {
            json::check_value("json", v)?;
            v.clone()
        }
        Body::JsonText(b) | Body::Bytes(b) => {
            json::check_text("json", b)?;
            serde_json::from_slice(b).map_err(|e| HarnessError::config(format!("json: {e}")))?
        }
        Body::Empty => Value::Null,
    };
    if !v.is_object() {
        return Err(HarnessError::config("json: an openai-compatible route takes a JSON object (the chat-completions request)"));
    }
    Ok(v)
}

fn rc(call: &mut Call) -> &mut RouteCall {
    call.route.as_mut().expect("a routed call")
}

/// `ErrorKind Message`, one line, capped.
fn summary(e: &HarnessError) -> String {
    let mut s = format!("{} {}", e.name(), e.message);
    if let Some(code) = &e.code {
        s.push_str(&format!(" [{code}]"));
    }
    truncate_chars(&s, 300)
}

pub(crate) fn attempt_metric(engine: &Engine, rt: &RouteRuntime, idx: usize, outcome: &str) {
    engine
        .metrics
        .route_attempts
        .get_or_create(&RouteAttemptLabels { route: rt.name.as_ref().into(), provider: rt.providers[idx].id.as_ref().into(), outcome: outcome.into() })
        .inc();
}

/// What to do after a failed attempt.
enum Next {
    /// Try the same provider again after this delay.
    Same(Duration),
    /// Pick again (elsewhere, or here once its cooling ends).
    Repick,
    /// Go to this provider (`on_error`).
    To(usize),
    Stop,
}

/// The route loop: returns the head (or whole answer) of the first provider that answers.
pub(crate) async fn run(engine: &Engine, call: &mut Call, mode: Mode) -> Result<Reached, HarnessError> {
    let rt = rc(call).rt.clone();
    let cfg = &rt.config;
    let safe = cfg.adapter == AdapterKind::OpenaiCompatible
        || retry::is_idempotent(&call.method)
        || call.req.idempotency_key.is_some();
    let mut forced: Option<usize> = None;
    let mut last_error: Option<HarnessError> = None;
    // The route's own limit, once per request (each provider's service applies its own per attempt).
    if call.attempts == 0 {
        if let Some(limiter) = &rt.limiter {
            let (_, endpoint, method) = &call.ep.names;
            limiter.acquire(method, endpoint, &call.deadline).await?;
        }
    }
    loop {
        if call.deadline.expired() {
            return Err(last_error.unwrap_or_else(|| HarnessError::new(ErrorKind::Timeout(crate::error::TimeoutPhase::Total), "request deadline expired before the next attempt")));
        }
        let now = Instant::now();
        let idx = match forced.take() {
            Some(i) => i,
            None => {
                let r = rc(call);
                let breakers: Vec<BreakerState> = r.eps.iter().map(|e| e.breaker.state()).collect();
                match strategy::pick(&rt, &breakers, &r.tried, now, || engine.jitter()) {
                    Pick::Provider(i) => i,
                    Pick::Wait(at) => {
                        let wait = at.saturating_duration_since(now);
                        if wait.as_millis() as u64 > cfg.max_retry_after_ms || !call.deadline.fits(wait) {
                            break;
                        }
                        tokio::time::sleep_until(at).await;
                        continue;
                    }
                    Pick::None => break,
                }
            }
        };
        if call.attempts >= cfg.max_attempts {
            break;
        }
        let p = &rt.providers[idx];
        let r = rc(call);
        if let Some((from, reason, status, code)) = r.failed.take() {
            if from != idx {
                failover_event(engine, &rt, from, idx, reason, status, code, &call.trace);
            }
        }
        let r = rc(call);
        r.current = Some(idx);
        if !r.order.contains(&idx) {
            r.order.push(idx);
        }
        r.tried[idx].attempts += 1;
        r.tried[idx].sent_at.push(now);
        let ep = r.eps[idx].clone();
        call.svc = p.svc.clone();
        let in_flight = InFlight::enter(&p.health);
        let t0 = Instant::now();
        let mut outcome = attempt::once(engine, call, &ep, mode).await;
        drop(in_flight);
        // A hedge on another provider may have answered first: the answer is that provider's.
        let won = rc(call).current.unwrap_or(idx);
        if won != idx {
            let r = rc(call);
            if !r.order.contains(&won) {
                r.order.push(won);
            }
            r.tried[won].attempts += 1;
            r.tried[won].sent_at.push(now);
        }
        let idx = won;
        let p = &rt.providers[idx];
        // An `openai-compatible` 2xx that is not a chat completion is a broken answer.
        if let Once::Reached(Reached::Buffered(resp)) = &outcome {
            if cfg.adapter == AdapterKind::OpenaiCompatible {
                if let Err(why) = openai::parse_completion(&resp.body) {
                    outcome = Once::Failed(Classified {
                        failure: Failure::Protocol,
                        health: Outcome::Failure,
                        error: HarnessError::new(ErrorKind::Protocol, format!("provider `{}` answered 200 with no chat completion: {why}", p.id)),
                        retry_after: None,
                    });
                }
            }
        }
        let c = match outcome {
            Once::Reached(reached) => {
                p.health.record_success(t0.elapsed(), rt.window);
                attempt_metric(engine, &rt, idx, "success");
                rc(call).answered = Some(idx);
                return Ok(reached);
            }
            Once::Fatal(e) => return Err(e),
            Once::Replay => {
                forced = Some(idx);
                continue;
            }
            Once::Refused(e) => {
                // Not sent (breaker open, bulkhead full, no credential): elsewhere, at once.
                let s = summary(&e);
                // A refusal says nothing new about the provider: its own last error stays.
                if !matches!(e.kind, ErrorKind::CircuitOpen | ErrorKind::BulkheadFull) {
                    p.health.note_error(s.clone());
                }
                let r = rc(call);
                r.tried[idx].attempts -= 1;
                r.tried[idx].sent_at.pop();
                if r.tried[idx].attempts == 0 {
                    r.order.retain(|&i| i != idx);
                }
                r.tried[idx].excluded = true;
                r.errors[idx] = Some(s);
                r.failed = Some((idx, e.name(), e.status, e.code.clone()));
                last_error = Some(e);
                continue;
            }
            Once::Failed(c) => c,
        };
        let s = summary(&c.error);
        match c.health {
            Outcome::Failure => p.health.record_failure(s.clone(), rt.window),
            _ => p.health.note_error(s.clone()),
        }
        attempt_metric(engine, &rt, idx, c.error.name());
        let r = rc(call);
        r.errors[idx] = Some(s);
        r.failed = Some((idx, c.error.name(), c.error.status, c.error.code.clone()));
        let next = decide(cfg, r, idx, &c, engine);
        if !safe && !c.failure.never_sent() && c.failure != Failure::Status(429) {
            return Err(c.error);
        }
        match next {
            Next::Stop => return Err(c.error),
            Next::To(target) => {
                forced = Some(target);
                last_error = Some(c.error);
                continue;
            }
            Next::Same(_) | Next::Repick if call.attempts >= cfg.max_attempts => break,
            Next::Same(delay) => {
                if !call.deadline.fits(delay) || !engine.budgets.withdraw(&rt.budget_key, &rt.budget).await.unwrap_or(false) {
                    return Err(c.error);
                }
                call.ep.retries.inc();
                attempt::retry_event(engine, call, &c, delay);
                tokio::time::sleep(delay).await;
                forced = Some(idx);
                last_error = Some(c.error);
            }
            Next::Repick => {
                if !engine.budgets.withdraw(&rt.budget_key, &rt.budget).await.unwrap_or(false) {
                    return Err(c.error);
                }
                call.ep.retries.inc();
                last_error = Some(c.error);
            }
        }
    }
    Err(no_healthy(call))
}

/// The failover rule for one failed attempt.
fn decide(cfg: &crate::routing::RouteConfig, r: &mut RouteCall, idx: usize, c: &Classified, engine: &Engine) -> Next {
    let p = &r.rt.providers[idx];
    match c.failure {
        Failure::Status(429) => {
            // Clamped like a service's Retry-After: a hostile or broken `Retry-After: 99999999`
            // must not take a provider out for years.
            let cap = Duration::from_millis(cfg.max_retry_after_ms);
            p.health.cool_until(Instant::now() + c.retry_after.unwrap_or(DEFAULT_COOLING).min(cap));
            Next::Repick
        }
        Failure::Status(s) if s >= 500 && r.tried[idx].attempts <= cfg.same_provider_retries => {
            Next::Same(retry::delay_for(r.tried[idx].attempts, &p.svc.config.retry, None, engine.jitter()))
        }
        Failure::Status(s) if s >= 500 => {
            r.tried[idx].excluded = true;
            Next::Repick
        }
        Failure::Status(_) if r.prefill_used => {
            // A refused prefill: ask the same provider again, cleanly.
            r.prefill = None;
            r.prefill_used = false;
            Next::Same(Duration::ZERO)
        }
        Failure::Status(_) => {
            // A non-retryable answer: never again here; elsewhere only when `on_error` says so.
            r.tried[idx].excluded = true;
            let target = c.error.code.as_deref().and_then(|code| cfg.on_error.get(code)).and_then(|t| r.rt.provider_index(&t.provider));
            match target {
                Some(t) if t != idx && !r.tried[t].excluded => Next::To(t),
                _ => Next::Stop,
            }
        }
        Failure::TotalTimeout => Next::Stop,
        // Connect failures, silence, a broken, malformed or oversized answer (as an oversized
        // streamed event is): elsewhere, at once.
        _ => {
            r.tried[idx].excluded = true;
            Next::Repick
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn failover_event(engine: &Engine, rt: &RouteRuntime, from: usize, to: usize, reason: &'static str, status: Option<u16>, code: Option<String>, trace: &TraceContext) {
    let (from, to) = (&rt.providers[from].id, &rt.providers[to].id);
    engine
        .metrics
        .failovers
        .get_or_create(&FailoverLabels { route: rt.name.as_ref().into(), from: from.as_ref().into(), to: to.as_ref().into() })
        .inc();
    if engine.events.is_active() {
        engine.events.emit(Event::ProviderFailover {
            route: rt.name.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            trace_id: trace.trace_id.to_string(),
            reason,
            status,
            code,
        });
    }
}

/// Every provider failed or could not be tried: each one's last error, or why not.
fn no_healthy(call: &Call) -> HarnessError {
    let r = call.route.as_ref().expect("a routed call");
    let now = Instant::now();
    let list: Vec<(String, String)> = r
        .rt
        .providers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let why = match &r.errors[i] {
                Some(e) => e.clone(),
                None if p.config.weight == 0 => "not tried (weight 0)".into(),
                None if r.eps[i].breaker.state() == BreakerState::Open => "not tried (circuit open)".into(),
                None => match p.health.cooling_until(now) {
                    Some(t) => format!("not tried (cooling for {} ms after a 429)", t.saturating_duration_since(now).as_millis()),
                    None if p.svc.shared.bulkhead.in_use() >= p.svc.shared.bulkhead.max() as usize => "not tried (bulkhead full)".into(),
                    None => "not tried".into(),
                },
            };
            (p.id.to_string(), why)
        })
        .collect();
    let text: Vec<String> = list.iter().map(|(p, e)| format!("{p}: {e}")).collect();
    let mut e = HarnessError::new(
        ErrorKind::NoHealthyProvider,
        truncate_chars(&format!("no provider of route `{}` could answer ({})", r.rt.name, text.join("; ")), 2000),
    );
    e.provider_errors = list;
    e
}

/// A buffered routed request: the answer (with usage and cost), else a degraded one.
pub(crate) async fn execute(engine: &Engine, call: &mut Call) -> Result<Response, HarnessError> {
    let rt = rc(call).rt.clone();
    let key = (rt.config.fallback.cache_ttl_ms > 0).then(|| cache_key(call));
    match run(engine, call, Mode::Buffered).await {
        Ok(Reached::Buffered(mut resp)) => {
            let r = rc(call);
            let idx = r.answered.expect("an answer has a provider");
            let (model, usage) = match rt.config.adapter {
                AdapterKind::OpenaiCompatible => match openai::parse_completion(&resp.body) {
                    Ok(parsed) => (parsed.model, parsed.usage),
                    Err(_) => (None, None),
                },
                AdapterKind::Http => (None, None),
            };
            r.settle(engine, idx, model, usage);
            resp.attempts = call.attempts;
            resp.routed = Some(Box::new(rc(call).routed()));
            if let Some(k) = key {
                if (200..300).contains(&resp.status) {
                    rt.fallback.put(k, &resp);
                }
            }
            Ok(resp)
        }
        Ok(Reached::Stream(_)) => unreachable!("a buffered call never reaches a stream"),
        Err(e) => degrade(engine, call, e, key),
    }
}

/// Whether an error means "nobody could answer" (worth a degraded answer) rather than
/// "the request is wrong".
fn degradable(e: &HarnessError) -> bool {
    match e.kind {
        ErrorKind::NoHealthyProvider
        | ErrorKind::Timeout(_)
        | ErrorKind::Connect
        | ErrorKind::CircuitOpen
        | ErrorKind::BulkheadFull
        | ErrorKind::RateLimited
        | ErrorKind::Protocol => true,
        ErrorKind::HttpStatus => e.status.is_some_and(|s| s >= 500),
        _ => false,
    }
}

/// Degradation levels 2 and 3: the last good answer, then (non-core only) the static one.
fn degrade(engine: &Engine, call: &mut Call, e: HarnessError, key: Option<u128>) -> Result<Response, HarnessError> {
    let rt = rc(call).rt.clone();
    if !degradable(&e) {
        return Err(e);
    }
    let fb = &rt.config.fallback;
    let served = key.and_then(|k| rt.fallback.get(k, Duration::from_millis(fb.cache_ttl_ms))).map(|mut resp| {
        let r = rc(call);
        let mut routed = resp.routed.take().map(|b| *b).unwrap_or_default();
        routed.fallback = Some("cache");
        routed.attempts_by_provider = r.attempts_by_provider();
        r.fallback = Some("cache");
        r.model = routed.model.clone();
        resp.routed = Some(Box::new(routed));
        (resp, "cache")
    });
    let served = served.or_else(|| {
        let answer = fb.static_answer.as_ref().filter(|v| !v.is_null())?;
        if rt.config.criticality != Criticality::NonCore {
            return None;
        }
        let body = match (rt.config.adapter, answer) {
            (AdapterKind::OpenaiCompatible, Value::String(s)) => openai::completion_body(s),
            _ => answer.clone(),
        };
        let r = rc(call);
        r.fallback = Some("static");
        let resp = Response {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(&body).unwrap_or_default().into(),
            elapsed_ms: 0.0,
            attempts: 0,
            trace_id: String::new(),
            routed: Some(Box::new(Routed { route: rt.name.to_string(), fallback: Some("static"), attempts_by_provider: r.attempts_by_provider(), ..Default::default() })),
        };
        Some((resp, "static"))
    });
    let Some((mut resp, kind)) = served else { return Err(e) };
    resp.attempts = call.attempts;
    engine.metrics.fallbacks.get_or_create(&FallbackLabels { route: rt.name.as_ref().into(), kind: kind.into() }).inc();
    if engine.events.is_active() {
        engine.events.emit(Event::FallbackServed { route: rt.name.to_string(), kind, trace_id: call.trace.trace_id.to_string() });
    }
    Ok(resp)
}

/// Route, method, path, the caller's body and the route's `fallback.version`.
fn cache_key(call: &Call) -> u128 {
    let r = call.route.as_ref().expect("a routed call");
    let body: Vec<u8> = match (&r.json, &call.req.body) {
        (Some(v), _) => serde_json::to_vec(v).unwrap_or_default(),
        (None, Body::Json(v)) => serde_json::to_vec(v).unwrap_or_default(),
        (None, Body::JsonText(b) | Body::Bytes(b)) => b.to_vec(),
        (None, Body::Empty) => Vec::new(),
    };
    crate::routing::fallback::FallbackCache::key(&[
        r.rt.name.as_bytes(),
        call.method.as_str().as_bytes(),
        call.req.path.as_bytes(),
        r.rt.config.fallback.version.as_bytes(),
        &body,
    ])
}

//! What only a configured route adds to a request: each provider's form of an
//! `openai-compatible` body, who answered and what it cost, the failover events, and the
//! degraded answers (the last good one, then a non-core route's static one) when no
//! provider can answer.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::call::{Call, Failed, RouteCall};
use crate::adapters::{openai, Adapter, RouteDefaults, Shaped, Usage};
use crate::breaker::BreakerState;
use crate::engine::route::{ProviderRuntime, RouteRuntime};
use crate::engine::Engine;
use crate::error::{ErrorKind, HarnessError};
use crate::host::Event;
use crate::observability::metrics::{CostLabels, FailoverLabels, FallbackLabels, RouteAttemptLabels};
use crate::redact::truncate_chars;
use crate::request::Body;
use crate::response::{Response, Routed};
use crate::routing::config::{AdapterKind, Criticality, RouteConfig};

impl RouteCall {
    /// The request for provider `p` in its wire format (its model, parameter ranges,
    /// token-limit field, path and headers), with the partial answer when it may continue
    /// one. `None`: an `http` route, the caller's body as it is.
    pub async fn shaped_for(&mut self, p: &ProviderRuntime, route: &RouteConfig, budget: Duration) -> Result<Option<Shaped>, HarnessError> {
        self.prefill_used = false;
        let Some(json) = self.json.as_ref() else { return Ok(None) };
        if matches!(p.adapter, Adapter::Pass) {
            return Ok(None);
        }
        // Only a provider configured to accept it is asked to continue a partial answer.
        let with_prefill = match (&self.prefill, p.config.accepts_prefill) {
            (Some(partial), true) => {
                let mut v = json.clone();
                if let Some(list) = v.get_mut("messages").and_then(Value::as_array_mut) {
                    list.push(serde_json::json!({"role": "assistant", "content": partial}));
                }
                Some(v)
            }
            _ => None,
        };
        if self.embed.is_some() {
            return shape_embed(p, json, route).map(Some);
        }
        let shaped = shape(p, with_prefill.as_ref().unwrap_or(json), route, self.stream, budget).await?;
        self.prefill_used = with_prefill.is_some();
        Ok(Some(shaped))
    }
}

/// An embeddings batch in provider `p`'s wire format.
fn shape_embed(p: &ProviderRuntime, body: &Value, route: &RouteConfig) -> Result<Shaped, HarnessError> {
    let defaults = RouteDefaults { path: route.call_path(), max_tokens: None };
    match &p.adapter {
        Adapter::Native(a) => a.shape_embed(body, &p.config, &defaults).map_err(|why| HarnessError::config(format!("request.{why} (provider `{}`)", p.id))),
        _ => Err(HarnessError::config(format!("provider `{}`: its adapter has no embeddings call", p.id))),
    }
}

/// A chat body in provider `p`'s wire format. A request the format cannot carry is a
/// `ConfigError` naming the field; an adapter that fails (a host adapter that raises, or
/// one not registered) is an error carrying the provider, which refuses that provider only.
pub(crate) async fn shape(p: &ProviderRuntime, body: &Value, route: &RouteConfig, stream: bool, budget: Duration) -> Result<Shaped, HarnessError> {
    let defaults = RouteDefaults { path: &route.path, max_tokens: route.max_tokens };
    let on_provider = |mut e: HarnessError| {
        e.provider = Some(p.id.to_string());
        e
    };
    match &p.adapter {
        Adapter::Pass => Ok(Shaped { body: body.clone(), path: None, headers: Vec::new() }),
        Adapter::Native(a) => a.shape(body, &p.config, &defaults, stream).map_err(|why| HarnessError::config(format!("request.{why} (provider `{}`, adapter {})", p.id, a.name()))),
        Adapter::Host(h) => h.shape(body, &p.config, stream, budget).await.map_err(|why| on_provider(HarnessError::new(ErrorKind::Protocol, why))),
        Adapter::Missing(name) => Err(on_provider(HarnessError::config(format!("adapter `{name}` of provider `{}` is not registered (client.register_adapter)", p.id)))),
    }
}

/// `ErrorKind Message`, one line, capped.
pub(crate) fn summary(e: &HarnessError) -> String {
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

fn cost_labels(rt: &RouteRuntime, idx: usize, model: Option<&str>) -> CostLabels {
    let p = &rt.providers[idx];
    CostLabels {
        route: rt.name.as_ref().into(),
        provider: p.id.as_ref().into(),
        model: model.or(p.config.model.as_deref()).unwrap_or_default().into(),
    }
}

/// Usage, model and cost of the answering provider; the cost goes to `harness_cost_total`.
pub(crate) fn settle(engine: &Engine, call: &mut Call, idx: usize, model: Option<String>, usage: Option<Usage>) {
    call.lanes.answered = Some(idx);
    let Some(rc) = call.route.as_mut() else { return };
    let p = &call.plan.providers[idx];
    rc.model = model.or_else(|| p.config.model.clone());
    rc.usage = usage;
    rc.cost = p.price.and_then(|price| price.cost(usage.as_ref()));
    if let Some(c) = rc.cost {
        engine.metrics.cost.get_or_create(&cost_labels(&call.plan, idx, rc.model.as_deref())).inc_by(c);
    }
}

/// A failed attempt that reported usage (a stream cut after its usage) is priced apart.
pub(crate) fn bill_failed(engine: &Engine, rt: &RouteRuntime, idx: usize, model: Option<&str>, usage: Option<Usage>) {
    let p = &rt.providers[idx];
    if let Some(c) = usage.and(p.price).and_then(|price| price.cost(usage.as_ref())) {
        engine.metrics.failed_cost.get_or_create(&cost_labels(rt, idx, model)).inc_by(c);
    }
}

pub(crate) fn attempts_by_provider(call: &Call) -> Vec<(String, u32)> {
    call.lanes.order.iter().map(|&i| (call.plan.providers[i].id.to_string(), call.lanes.tried[i].attempts)).collect()
}

/// What routing did, for the answer.
pub(crate) fn routed(call: &Call) -> Routed {
    let rc = call.route.as_ref();
    Routed {
        route: call.plan.name.to_string(),
        provider: call.lanes.answered.map(|i| call.plan.providers[i].id.to_string()),
        model: rc.and_then(|r| r.model.clone()),
        attempts_by_provider: attempts_by_provider(call),
        fallback: rc.and_then(|r| r.fallback),
        usage: rc.and_then(|r| r.usage),
        cost: rc.and_then(|r| r.cost),
    }
}

pub(crate) fn failover_event(engine: &Engine, call: &Call, failed: Failed, to: usize) {
    let rt = &call.plan;
    let Failed { from, reason, status, code } = failed;
    let (from, to) = (&rt.providers[from].id, &rt.providers[to].id);
    engine.metrics.failovers.get_or_create(&FailoverLabels { route: rt.name.as_ref().into(), from: from.as_ref().into(), to: to.as_ref().into() }).inc();
    if engine.events.is_active() {
        engine.events.emit(Event::ProviderFailover {
            route: rt.name.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            trace_id: call.trace.trace_id.to_string(),
            reason,
            status,
            code,
        });
    }
}

/// Every provider failed or could not be tried: each one's last error, or why not.
pub(crate) fn no_healthy(call: &Call) -> HarnessError {
    let now = Instant::now();
    let list: Vec<(String, String)> = call
        .plan
        .providers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let why = match &call.lanes.errors[i] {
                Some(e) => e.clone(),
                None if p.config.weight == 0 => "not tried (weight 0)".into(),
                None if call.lanes.eps[i].breaker.state() == BreakerState::Open => "not tried (circuit open)".into(),
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
        truncate_chars(&format!("no provider of route `{}` could answer ({})", call.plan.name, text.join("; ")), 2000),
    );
    e.provider_errors = list;
    e
}

/// A buffered routed answer: its usage and cost, kept for degradation; or, when no
/// provider could answer, a degraded one.
pub(crate) fn answer(engine: &Engine, call: &mut Call, reached: Result<Response, HarnessError>) -> Result<Response, HarnessError> {
    let rt = call.plan.clone();
    let key = (rt.config.fallback.cache_ttl_ms > 0).then(|| cache_key(call));
    match reached {
        Ok(mut resp) => {
            let idx = call.lanes.answered.expect("an answer has a provider");
            let rc = call.route.as_ref();
            let (model, usage) = match (rc.and_then(|rc| rc.parsed.as_ref()), rc.and_then(|rc| rc.embedded.as_ref())) {
                (Some(parsed), _) => (parsed.model.clone(), parsed.usage),
                (None, Some(e)) => (e.model.clone(), e.usage),
                (None, None) => (None, None),
            };
            settle(engine, call, idx, model, usage);
            resp.attempts = call.attempts;
            resp.routed = Some(Box::new(routed(call)));
            if let (Some(k), Some(cache)) = (key, &rt.fallback) {
                if (200..300).contains(&resp.status) {
                    cache.put(k, &resp);
                }
            }
            Ok(resp)
        }
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
    let rt = call.plan.clone();
    if !degradable(&e) {
        return Err(e);
    }
    let fb = &rt.config.fallback;
    let cached = key.zip(rt.fallback.as_ref()).and_then(|(k, cache)| cache.get(k, Duration::from_millis(fb.cache_ttl_ms)));
    let served = cached.map(|mut resp| {
        let mut r = resp.routed.take().map(|b| *b).unwrap_or_default();
        r.fallback = Some("cache");
        r.attempts_by_provider = attempts_by_provider(call);
        if let Some(rc) = call.route.as_mut() {
            rc.fallback = Some("cache");
            rc.model = r.model.clone();
        }
        resp.routed = Some(Box::new(r));
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
        if let Some(rc) = call.route.as_mut() {
            rc.fallback = Some("static");
        }
        let resp = Response {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(&body).unwrap_or_default().into(),
            elapsed_ms: 0.0,
            attempts: 0,
            trace_id: String::new(),
            routed: Some(Box::new(Routed { route: rt.name.to_string(), fallback: Some("static"), attempts_by_provider: attempts_by_provider(call), ..Default::default() })),
            cache: None,
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
    let body: Vec<u8> = match (call.route.as_ref().and_then(|r| r.json.as_ref()), &call.req.body) {
        (Some(v), _) => serde_json::to_vec(v).unwrap_or_default(),
        (None, Body::Json(v)) => serde_json::to_vec(v).unwrap_or_default(),
        (None, Body::JsonText(b) | Body::Bytes(b)) => b.to_vec(),
        (None, Body::Empty) => Vec::new(),
    };
    crate::routing::fallback::FallbackCache::key(&[
        call.plan.name.as_bytes(),
        call.method.as_str().as_bytes(),
        call.req.path.as_bytes(),
        call.plan.config.fallback.version.as_bytes(),
        &body,
    ])
}

//! The caches' part of the request path, before any attempt: a plain GET or HEAD
//! answered by the HTTP cache (RFC 9111) or sharing an identical call in flight; a chat
//! answered by the route's exact answer cache or sharing an identical chat in flight.
//!
//! Guarantees: a hit makes no attempt (no rate limit, breaker, bulkhead or credential is
//! touched) and is recorded like any answer, with its cache outcome; an answer is stored
//! only when it succeeded (and, for HTTP, matched its schema and the RFC allows it); an
//! answer to a request carrying credentials is stored only with `per_credential`, keyed
//! by a digest of the credential; every caller of a shared call gets the answer, and a
//! cancelled one cancels nobody else.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::buffered::buffered;
use super::call::Call;
use crate::adapters::{ChatRequest, ChatResponse};
use crate::cache::answers::{self, Answer};
use crate::cache::http::{self as rfc, HttpEntry, Lookup};
use crate::cache::store::{key, Key};
use crate::cache::stamp::CacheStamp;
use crate::cache::HttpCacheConfig;
use crate::engine::route::Rules;
use crate::engine::Engine;
use crate::error::{ErrorKind, HarnessError};
use crate::response::{Response, Routed};

/// Longest an entry with a validator is kept past its freshness, for a 304 to refresh it.
const KEEP_FOR_REVALIDATION: Duration = Duration::from_secs(24 * 3600);

/// The caching that applies to this call: a plain service's GET or HEAD whose service or
/// endpoint turns on `http` or `coalesce`.
pub(crate) fn http_rule(call: &Call) -> Option<HttpCacheConfig> {
    if call.plan.rules != Rules::Retry || !(call.method == http::Method::GET || call.method == http::Method::HEAD) {
        return None;
    }
    let (_, endpoint, method) = &call.ep.names;
    call.svc(0).cache_for(method, endpoint).filter(|c| c.http || c.coalesce).cloned()
}

/// The path and query as sent (the path's own query, then the request's parameters).
fn path_and_query(call: &Call) -> String {
    let mut out = call.req.path.clone();
    if !call.req.query.is_empty() {
        let mut ser = url::form_urlencoded::Serializer::new(String::new());
        ser.extend_pairs(call.req.query.iter());
        out.push(if out.contains('?') { '&' } else { '?' });
        out.push_str(&ser.finish());
    }
    out
}

/// A digest of what authenticates the request (the service's credential is the client's
/// own identity; a caller's credential headers are hashed), or `None` when it carries none.
fn credential_identity(call: &Call) -> Option<Vec<u8>> {
    let svc = call.svc(0);
    let caller: Vec<&(String, String)> = call.req.headers.iter().filter(|(k, _)| crate::redact::is_sensitive_name(k)).collect();
    if svc.credential.is_none() && svc.secrets.is_empty() && caller.is_empty() {
        return None;
    }
    let mut parts: Vec<&[u8]> = vec![b"credential", call.plan.name.as_bytes()];
    for (k, v) in &caller {
        parts.push(k.as_bytes());
        parts.push(v.as_bytes());
    }
    Some(key(&parts).to_vec())
}

/// A plain GET or HEAD with caching or coalescing on.
pub(crate) async fn http_call(engine: &Arc<Engine>, mut call: Call, rule: HttpCacheConfig) -> Result<Response, HarnessError> {
    let pq = path_and_query(&call);
    let identity = credential_identity(&call);
    let use_http = rule.http && (identity.is_none() || rule.per_credential);
    let parts = rfc::request_parts(&call.method, &pq, &call.req.headers);
    let principal = call.req.principal.clone().unwrap_or_default();
    let http_key = key(&[b"http", call.plan.name.as_bytes(), call.method.as_str().as_bytes(), pq.as_bytes(), principal.as_bytes(), identity.as_deref().unwrap_or(b"")]);
    let now = SystemTime::now();
    let mut stale = None;
    let mut conditional = false;
    if use_http {
        if let Some(vars) = engine.caches.http_get(&call.plan.name, &http_key).await {
            match vars.lookup(&parts, now) {
                Lookup::Fresh { entry, headers } => return served(engine, call, &entry, headers, "hit"),
                Lookup::Stale { entry, validators, serve_while_revalidating } => {
                    if serve_while_revalidating {
                        refresh_behind(engine, &call, &entry);
                        let headers = entry.headers_at(now);
                        return served(engine, call, &entry, headers, "stale");
                    }
                    conditional = !validators.is_empty();
                    if conditional {
                        for (k, v) in validators {
                            call.req.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&k));
                            call.req.headers.push((k, v));
                        }
                        // The prebuilt first attempt lacks the validators: rebuilt from the request.
                        call.first = None;
                    }
                    stale = Some(entry);
                }
                Lookup::Miss => {}
            }
        }
    } else if rule.http {
        call.cache = Some(CacheStamp::of("bypass"));
    }
    let fetch = Fetch { parts, key: http_key, stale, store: use_http, conditional };
    if !rule.coalesce {
        return fetch.run(engine, call).await;
    }
    // Every caller header counts, as do the principal and the credential: equal calls only.
    let mut flight_parts: Vec<&[u8]> = vec![b"flight", call.plan.name.as_bytes(), call.method.as_str().as_bytes(), pq.as_bytes(), principal.as_bytes(), identity.as_deref().unwrap_or(b"")];
    for (k, v) in &call.req.headers {
        flight_parts.push(k.as_bytes());
        flight_parts.push(v.as_bytes());
    }
    let fkey = key(&flight_parts);
    let mut slot = Some(call);
    let (shared, _) = engine.caches.flights.join(fkey, || {
        let call = slot.take().expect("the leader's call");
        let engine = engine.clone();
        Box::pin(async move {
            let r = fetch.run(&engine, call).await;
            engine.caches.flights.done(&fkey);
            r
        })
    });
    let result = shared.await;
    match slot.take() {
        // A follower: its own record, the shared answer.
        Some(mut call) => {
            call.cache = Some(CacheStamp::of("coalesced"));
            call.attempts = 0;
            call.finish(engine, result)
        }
        None => result,
    }
}

/// Answers the call from a stored entry (no attempt is made).
fn served(engine: &Engine, mut call: Call, entry: &HttpEntry, headers: Vec<(String, String)>, outcome: &'static str) -> Result<Response, HarnessError> {
    call.cache = Some(CacheStamp::of(outcome));
    let resp = Response { status: entry.status, headers, body: entry.body.clone(), elapsed_ms: 0.0, attempts: 0, trace_id: String::new(), routed: None, cache: None };
    call.finish(engine, Ok(resp))
}

/// `stale-while-revalidate`: the stale answer now, a revalidation behind it (one at a time per entry).
fn refresh_behind(engine: &Arc<Engine>, call: &Call, entry: &Arc<HttpEntry>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
    if !entry.start_refresh() {
        return;
    }
    let mut req = call.req.clone();
    req.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("cache-control"));
    req.headers.push(("cache-control".into(), "no-cache".into()));
    let engine = engine.clone();
    let entry = entry.clone();
    rt.spawn(async move {
        if let Ok(call) = Call::start(&engine, req, false) {
            if let Some(rule) = http_rule(&call) {
                // Boxed: this future is part of the one that spawned it.
                let _ = Box::pin(http_call(&engine, call, rule)).await;
            }
        }
        entry.end_refresh();
    });
}

/// One trip to the origin for an HTTP-cached call, and what it means for the store.
struct Fetch {
    parts: http::request::Parts,
    key: Key,
    /// The stored answer a 304 refreshes, or an error may be answered with (`stale-if-error`).
    stale: Option<Arc<HttpEntry>>,
    store: bool,
    /// The validators were added here (not by the caller).
    conditional: bool,
}

impl Fetch {
    async fn run(self, engine: &Arc<Engine>, mut call: Call) -> Result<Response, HarnessError> {
        let mut result = buffered(engine, &mut call).await;
        // A 304 no stored answer matches (its validator differs) must not reach a caller who
        // never asked a conditional question: asked again, unconditionally.
        if let (true, Ok(resp), Some(entry)) = (self.conditional, &result, &self.stale) {
            if resp.status == 304 && entry.refreshed(&self.parts, 304, &resp.headers, SystemTime::now()).is_none() {
                call.req.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("if-none-match") && !k.eq_ignore_ascii_case("if-modified-since"));
                call.first = None;
                result = buffered(engine, &mut call).await;
            }
        }
        let now = SystemTime::now();
        let owner = call.plan.name.clone();
        let result = match result {
            Ok(resp) if resp.status == 304 && self.stale.is_some() && self.conditional => {
                let entry = self.stale.as_ref().expect("checked");
                match entry.refreshed(&self.parts, 304, &resp.headers, now) {
                    Some((fresh, headers)) => {
                        let vars = engine.caches.http.get(&self.key).unwrap_or_default().with(&self.parts, fresh, now);
                        let keep = vars.0[0].keep_for(now, KEEP_FOR_REVALIDATION);
                        engine.caches.http_put(&owner, self.key, Arc::new(vars), keep);
                        call.cache = Some(CacheStamp::of("revalidated"));
                        Ok(Response { status: entry.status, headers, body: entry.body.clone(), ..resp })
                    }
                    None => Ok(resp),
                }
            }
            Ok(resp) => {
                if self.store && call.schema_violation.is_none() {
                    if let Some(entry) = rfc::storable(&self.parts, resp.status, &resp.headers, resp.body.clone(), now) {
                        let keep = entry.keep_for(now, KEEP_FOR_REVALIDATION);
                        let vars = engine.caches.http.get(&self.key).unwrap_or_default().with(&self.parts, entry, now);
                        engine.caches.http_put(&owner, self.key, Arc::new(vars), keep);
                    }
                }
                if call.cache.is_none() {
                    call.cache = Some(CacheStamp::of("miss"));
                }
                Ok(resp)
            }
            Err(e) => match &self.stale {
                Some(entry) if origin_failed(&e) && entry.serves_on_error(now) => {
                    call.cache = Some(CacheStamp::of("stale"));
                    Ok(Response { status: entry.status, headers: entry.headers_at(now), body: entry.body.clone(), elapsed_ms: 0.0, attempts: call.attempts, trace_id: String::new(), routed: None, cache: None })
                }
                _ => Err(e),
            },
        };
        call.finish(engine, result)
    }
}

/// The origin could not answer (`stale-if-error` applies): a 5xx, no connection, a timeout,
/// a broken answer, an open breaker.
fn origin_failed(e: &HarnessError) -> bool {
    match e.kind {
        ErrorKind::HttpStatus => e.status.is_some_and(|s| s >= 500),
        ErrorKind::Connect | ErrorKind::Timeout(_) | ErrorKind::Protocol | ErrorKind::CircuitOpen => true,
        _ => false,
    }
}

/// What the route's answer caches and coalescing do for one chat.
pub(crate) struct ChatCaching {
    /// The exact cache's key and time to live (a cacheable request on a route with `exact`).
    pub exact: Option<(Key, Duration)>,
    pub coalesce: Option<Key>,
    pub semantic: Option<SemanticPlan>,
}

/// A semantic lookup for one chat: what to embed, where, and the scope it may match in.
pub(crate) struct SemanticPlan {
    pub embeddings_route: String,
    pub text: String,
    /// The route, model pin, version, system prompt, tools and (unless route-wide) principal.
    pub scope: u64,
    pub threshold: f32,
    pub ttl: Duration,
    /// Where this chat's answer is stored when it is fetched.
    pub answer_key: Key,
}

impl ChatCaching {
    pub fn of(call: &Call, route: &str, chat: &ChatRequest) -> ChatCaching {
        let cfg = &call.plan.config.cache;
        let bypass = chat.bypasses_cache();
        let principal = chat.principal.as_deref();
        let exact = cfg
            .exact
            .as_ref()
            .filter(|e| !bypass && answers::deterministic(chat, e.any_temperature))
            .map(|e| (answers::chat_key("exact", route, &e.version, e.scope, principal, chat), Duration::from_millis(e.ttl_ms)));
        let coalesce = cfg.coalesce.then(|| answers::chat_key("flight", route, "", crate::cache::CacheScope::Principal, principal, chat));
        let semantic = cfg.semantic.as_ref().filter(|s| !bypass && answers::deterministic(chat, s.any_temperature)).and_then(|s| {
            let text = answers::embed_text(chat, s.embed)?;
            Some(SemanticPlan {
                embeddings_route: s.embeddings_route.clone(),
                scope: answers::semantic_scope(route, &s.version, s.scope, principal, chat),
                threshold: s.threshold,
                ttl: Duration::from_millis(s.ttl_ms),
                answer_key: answers::chat_key("semantic", route, &s.version, s.scope, principal, chat),
                text,
            })
        });
        ChatCaching { exact, coalesce, semantic }
    }

    pub fn is_off(&self) -> bool {
        self.exact.is_none() && self.coalesce.is_none() && self.semantic.is_none()
    }
}

/// The answer stored for the nearest earlier prompt of this scope, when close enough;
/// recorded as served (`semantic`, with the similarity and the cost saved).
pub(crate) async fn semantic_hit(engine: &Engine, call: &mut Call, plan: &SemanticPlan, vector: &[f32]) -> Option<Answer> {
    let hit = engine.caches.semantic.lookup(&call.plan.name, plan.scope, vector, plan.threshold)?;
    let key: Key = hit.answer.as_ref().try_into().ok()?;
    let answer = engine.caches.answer_get(&call.plan.name, &key).await?;
    call.cache = Some(CacheStamp { outcome: "semantic", similarity: Some(hit.similarity), saved_cost: answer.response.cost });
    let resp = Response {
        status: 200,
        headers: Vec::new(),
        body: answer.response.raw.clone(),
        elapsed_ms: 0.0,
        attempts: 0,
        trace_id: String::new(),
        routed: Some(Box::new(Routed { route: call.plan.name.to_string(), provider: answer.response.provider.clone(), model: answer.response.model.clone(), ..Default::default() })),
        cache: None,
    };
    let _ = call.finish(engine, Ok(resp));
    Some((*answer).clone())
}

/// Stores a provider's successful answer for later prompts close to this one.
pub(crate) fn semantic_store(engine: &Engine, route: &Arc<str>, plan: &SemanticPlan, vector: &[f32], answer: &ChatResponse) {
    if answer.fallback.is_some() || answer.cache.is_some() {
        return;
    }
    let mut stored = answer.clone();
    stored.cache = None;
    engine.caches.semantic_put(route, plan.scope, vector, plan.answer_key, Arc::new(Answer { response: stored, chunks: None }), plan.ttl);
}

/// A stored answer for this chat, recorded as served (no provider is called).
pub(crate) async fn chat_hit(engine: &Engine, call: &mut Call, key: &Key) -> Option<Answer> {
    let answer = engine.caches.answer_get(&call.plan.name, key).await?;
    call.cache = Some(CacheStamp { outcome: "exact", similarity: None, saved_cost: answer.response.cost });
    let resp = Response {
        status: 200,
        headers: Vec::new(),
        body: answer.response.raw.clone(),
        elapsed_ms: 0.0,
        attempts: 0,
        trace_id: String::new(),
        routed: Some(Box::new(Routed { route: call.plan.name.to_string(), provider: answer.response.provider.clone(), model: answer.response.model.clone(), ..Default::default() })),
        cache: None,
    };
    let _ = call.finish(engine, Ok(resp));
    Some((*answer).clone())
}

/// The stored answer as this caller's answer (its own trace id, no attempts, no cost).
pub(crate) fn answer_from(call: &Call, a: &Answer) -> ChatResponse {
    let mut r = a.response.clone();
    r.trace_id = call.trace.trace_id.to_string();
    r.elapsed_ms = call.started.elapsed().as_secs_f64() * 1000.0;
    r.attempts = 0;
    r.attempts_by_provider = Vec::new();
    r.cost = None;
    r.fallback = None;
    r.cache = call.cache.clone();
    r
}

/// Stores a provider's successful answer under the exact key (a degraded one never).
pub(crate) fn chat_store(engine: &Engine, route: &Arc<str>, exact: Option<(Key, Duration)>, answer: &ChatResponse) {
    let Some((k, ttl)) = exact else { return };
    if answer.fallback.is_some() || answer.cache.is_some() {
        return;
    }
    let mut stored = answer.clone();
    stored.cache = None;
    engine.caches.answer_put(route, k, Arc::new(Answer { response: stored, chunks: None }), ttl);
}

/// A chat through the route, shared with identical chats in flight when `coalesce` is on.
pub(crate) async fn chat_call(engine: &Arc<Engine>, call: Call, route: &str, caching: &ChatCaching) -> Result<ChatResponse, HarnessError> {
    let Some(fkey) = caching.coalesce else { return run_chat(engine, call, route).await };
    let mut slot = Some(call);
    let (shared, _) = engine.caches.chat_flights.join(fkey, || {
        let call = slot.take().expect("the leader's call");
        let engine = engine.clone();
        let route = route.to_string();
        Box::pin(async move {
            let r = run_chat(&engine, call, &route).await;
            engine.caches.chat_flights.done(&fkey);
            r
        })
    });
    let result = shared.await;
    match slot.take() {
        Some(mut call) => {
            call.cache = Some(CacheStamp::of("coalesced"));
            call.attempts = 0;
            let as_response = result.as_ref().map(|c| Response {
                status: 200,
                headers: Vec::new(),
                body: c.raw.clone(),
                elapsed_ms: 0.0,
                attempts: 0,
                trace_id: String::new(),
                routed: Some(Box::new(Routed { route: c.route.clone(), provider: c.provider.clone(), model: c.model.clone(), ..Default::default() })),
                cache: None,
            });
            match call.finish(engine, as_response.map_err(Clone::clone)) {
                Ok(resp) => {
                    let mut c = result.expect("the shared answer");
                    c.trace_id = resp.trace_id;
                    c.elapsed_ms = resp.elapsed_ms;
                    c.cost = None;
                    c.cache = Some(CacheStamp::of("coalesced"));
                    Ok(c)
                }
                Err(e) => Err(e),
            }
        }
        None => result,
    }
}

async fn run_chat(engine: &Arc<Engine>, mut call: Call, route: &str) -> Result<ChatResponse, HarnessError> {
    let result = buffered(engine, &mut call).await;
    let resp = call.finish(engine, result)?;
    super::chat::answer(&mut call, route, resp)
}

//! One request in flight: what every stage shares, built once by `Call::start`.
//!
//! Guarantees: the snapshot is loaded once and the request finishes under it; the name
//! resolves to a route (`route`, `route/model`) or a plain service (a route of one
//! provider) before anything else; the method, path, endpoint label, principal, headers
//! and body are checked before any attempt (a bad one is a `ConfigError` naming the
//! field, and nothing is sent); the total deadline starts here.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method};
use serde_json::Value;
use smallvec::SmallVec;
use tokio::time::Instant;

use crate::adapters::{ChatRequest, EmbedRequest, Parsed, Shaped, Usage};
use crate::deadline::Deadline;
use crate::endpoint;
use crate::engine::registry::EndpointState;
use crate::engine::route::{RouteRuntime, Rules};
use crate::engine::{Engine, ServiceRuntime, Snapshot};
use crate::error::{ErrorKind, HarnessError};
use crate::json;
use crate::observability::finish::{Finished, RouteStamp};
use crate::observability::otel::AttemptSpan;
use crate::observability::trace::TraceContext;
use crate::redact::escape_control;
use crate::request::{Body, Request};
use crate::routing::config::{AdapterKind, RouteKind};
use crate::routing::strategy::Tried;
use crate::target;
use crate::transport::OutgoingRequest;

/// Endpoint labels tracked per route (its own record, not a provider's).
const ROUTE_MAX_ENDPOINTS: u32 = 1000;

pub(crate) struct Call {
    pub snapshot: Arc<Snapshot>,
    /// What the name resolved to: a route, or a plain service as a route of one.
    pub plan: Arc<RouteRuntime>,
    /// The request's own endpoint: its record, latency and retry metrics (the service's,
    /// or the route's own).
    pub ep: Arc<EndpointState>,
    pub req: Request,
    pub method: Method,
    /// The request's span (its id is in the record; the caller's span is its parent).
    pub trace: TraceContext,
    /// The attempt on the wire: a child of `trace`, sent as `traceparent`.
    pub wire: TraceContext,
    /// Each attempt, for its span (only while exporting a sampled trace).
    pub spans: Option<Vec<AttemptSpan>>,
    pub deadline: Deadline,
    pub started: Instant,
    pub attempts: u32,
    /// A refused credential was refreshed (or rotated) and the request replayed once.
    pub auth_replayed: bool,
    /// The first attempt's request, built up front so bad input fails before any attempt.
    pub(crate) first: Option<OutgoingRequest>,
    pub lanes: Lanes,
    /// What only a configured route has: its chat body, its answer's usage and cost.
    pub route: Option<Box<RouteCall>>,
    /// `validate: warn` found the answer off its schema (for the record).
    pub schema_violation: Option<String>,
    /// The last fault injected into an attempt (for the record).
    pub fault: Option<&'static str>,
    /// May be resent whatever its method: it carries an idempotency key, or its operation
    /// is marked `x-idempotent`.
    pub declared_safe: bool,
    /// The application interceptors' `before` ran (once per call).
    pub intercepted: bool,
    /// Header values interceptors named secret: scrubbed like credentials (a hedge adds
    /// its own while the call is shared).
    pub extra_secrets: parking_lot::Mutex<Vec<String>>,
    /// What a cache did for this call (for the record and the answer).
    pub cache: Option<crate::cache::stamp::CacheStamp>,
}

/// A fresh `Idempotency-Key` (128 random bits, as hex) for an operation that declares one.
fn new_idempotency_key() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The request's state per provider of its plan (one for a plain service).
pub(crate) struct Lanes {
    /// The provider of the attempt in progress (or the last one).
    pub current: usize,
    /// Each provider's endpoint state (its breaker) for this request's endpoint.
    pub eps: SmallVec<[Arc<EndpointState>; 2]>,
    pub tried: SmallVec<[Tried; 2]>,
    /// Providers in the order first tried.
    pub order: SmallVec<[usize; 2]>,
    /// This request's last error per provider, summarised.
    pub errors: SmallVec<[Option<String>; 2]>,
    /// The provider that answered.
    pub answered: Option<usize>,
    /// The last failure: the next pick elsewhere is a failover.
    pub failed: Option<Failed>,
}

/// A provider's last failure, for the failover event that follows it.
pub(crate) struct Failed {
    pub from: usize,
    /// The error kind's name.
    pub reason: &'static str,
    pub status: Option<u16>,
    pub code: Option<String>,
}

impl Failed {
    pub fn of(from: usize, e: &HarnessError) -> Failed {
        Failed { from, reason: e.name(), status: e.status, code: e.code.clone() }
    }
}

/// What a request that names a configured route carries besides the common call.
#[derive(Default)]
pub(crate) struct RouteCall {
    /// `openai-compatible`: the caller's JSON body, prepared per provider.
    pub json: Option<Value>,
    /// Provider bodies ask for a stream.
    pub stream: bool,
    /// A streamed chat: each provider's first chunk (its head included) is due this long
    /// after its request is sent.
    pub ttft: Option<Duration>,
    /// A partial streamed answer a prefill-accepting provider is asked to continue.
    pub prefill: Option<String>,
    /// The last request sent carried the prefill.
    pub prefill_used: bool,
    /// The answer, read once (in the answering provider's format).
    pub parsed: Option<Parsed>,
    /// An embeddings batch of this many inputs (shaped and read as embeddings).
    pub embed: Option<usize>,
    /// The batch's vectors, read once.
    pub embedded: Option<crate::adapters::Embedded>,
    /// The request's `response_format`, which every answer must match.
    pub structured: Option<crate::adapters::structured::Structured>,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    pub cost: Option<f64>,
    pub fallback: Option<&'static str>,
}

impl Call {
    /// Resolves `req.service` and builds the call (checked input, a started deadline).
    pub fn start(engine: &Engine, req: Request, streaming: bool) -> Result<Call, HarnessError> {
        let snapshot = engine.snapshot();
        Self::start_in(engine, snapshot, req, streaming)
    }

    /// A chat on `route` (an `openai-compatible` route, or `route/model`), resolved in the
    /// same snapshot the call then runs under.
    pub fn start_chat(engine: &Engine, route: &str, chat: &ChatRequest, streaming: bool) -> Result<Call, HarnessError> {
        let snapshot = engine.snapshot();
        let name = route.split_once('/').filter(|(r, _)| snapshot.routes.contains_key(*r)).map_or(route, |(r, _)| r);
        let Some(rt) = snapshot.routes.get(name) else {
            let mut known: Vec<&str> = snapshot.routes.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(HarnessError::config(format!("route: unknown route `{}` (configured: {})", escape_control(route), known.join(", "))));
        };
        if rt.config.adapter != AdapterKind::OpenaiCompatible {
            return Err(HarnessError::config(format!("routes.{name}.adapter: chat needs `openai-compatible`")));
        }
        if rt.config.kind != RouteKind::Chat {
            return Err(HarnessError::config(format!("route: `{name}` is a route of kind embeddings (use embed)")));
        }
        let req = Request {
            service: route.to_string(),
            method: "POST".into(),
            path: rt.config.path.clone(),
            body: Body::Json(chat.body()?),
            headers: chat.headers.clone(),
            timeout_ms: chat.timeout_ms,
            traceparent: chat.traceparent.clone(),
            principal: chat.principal.clone(),
            ..Default::default()
        };
        Self::start_in(engine, snapshot, req, streaming)
    }

    /// One batch of an embeddings call on `route` (a route of `kind: embeddings`).
    pub fn start_embed(engine: &Engine, route: &str, embed: &EmbedRequest, batch: &[String]) -> Result<Call, HarnessError> {
        let snapshot = engine.snapshot();
        let Some(rt) = snapshot.routes.get(route) else {
            let mut known: Vec<&str> = snapshot.routes.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(HarnessError::config(format!("route: unknown route `{}` (configured: {})", escape_control(route), known.join(", "))));
        };
        if rt.config.kind != RouteKind::Embeddings {
            return Err(HarnessError::config(format!("routes.{route}.kind: embed needs a route of kind embeddings")));
        }
        let req = Request {
            service: route.to_string(),
            method: "POST".into(),
            path: rt.config.call_path().to_string(),
            body: Body::Json(embed.batch_body(batch)),
            headers: embed.headers.clone(),
            timeout_ms: embed.timeout_ms,
            traceparent: embed.traceparent.clone(),
            principal: embed.principal.clone(),
            ..Default::default()
        };
        let mut call = Self::start_in(engine, snapshot, req, false)?;
        if let Some(rc) = call.route.as_mut() {
            rc.embed = Some(batch.len());
        }
        Ok(call)
    }

    fn start_in(engine: &Engine, snapshot: Arc<Snapshot>, mut req: Request, streaming: bool) -> Result<Call, HarnessError> {
        let started = Instant::now();
        let (plan, model) = snapshot.resolve(&req.service)?;
        let method = target::method(&req.method)?;
        target::check_path(&req.path)?;
        if let Some(e) = &req.endpoint {
            target::check_endpoint(e)?;
        }
        target::check_principal(req.principal.as_deref())?;
        // A plain service with an OpenAPI document knows the operation: its label, and
        // whether it may be resent.
        let operation = match plan.rules {
            Rules::Retry => plan.providers[0].svc.operations.find(method.as_str(), &req.path),
            Rules::Failover => None,
        };
        let mut declared_safe = operation.is_some_and(|o| o.idempotent);
        if operation.is_some_and(|o| o.idempotency_key) && req.idempotency_key.is_none() {
            // The caller's own `Idempotency-Key` header, else a fresh key for every attempt of this call.
            let given = req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("idempotency-key")).map(|(_, v)| v.clone());
            req.idempotency_key = Some(given.unwrap_or_else(new_idempotency_key));
        }
        declared_safe |= req.idempotency_key.is_some();
        let template = match (&req.endpoint, operation) {
            (Some(e), _) => std::borrow::Cow::Borrowed(e.as_str()),
            (None, Some(o)) => std::borrow::Cow::Owned(o.id.to_string()),
            (None, None) => std::borrow::Cow::Owned(endpoint::template(&req.path)),
        };
        let (trace, spans) = trace_for(engine, &snapshot, &req);
        let wire = trace.next_span();
        let n = plan.providers.len();
        let mut lanes = Lanes {
            current: 0,
            eps: SmallVec::new(),
            tried: SmallVec::from_elem(Tried::default(), n),
            order: SmallVec::new(),
            errors: SmallVec::from_elem(None, n),
            answered: None,
            failed: None,
        };
        let (ep, route, first) = match plan.rules {
            Rules::Retry => {
                // Past `limits.max_endpoints` the state (and the label) is the shared `{other}`.
                let svc = &plan.providers[0].svc;
                let ep = engine.registry.endpoint(&plan.name, &template, method.as_str(), svc.config.limits.max_endpoints);
                lanes.eps.push(ep.clone());
                let first = build_request(svc, &req, &req.body, &method, &wire)?;
                (ep, None, Some(first))
            }
            Rules::Failover => {
                let ep = engine.registry.endpoint(&plan.name, &template, method.as_str(), ROUTE_MAX_ENDPOINTS);
                for p in &plan.providers {
                    lanes.eps.push(engine.registry.endpoint(&p.scope, &template, method.as_str(), p.svc.config.limits.max_endpoints));
                }
                pin_model(&plan, model.as_deref(), &mut lanes.tried)?;
                let json = match plan.config.adapter {
                    AdapterKind::OpenaiCompatible => Some(json_object(&req.body)?),
                    AdapterKind::Http => None,
                };
                // Bad headers or a bad body fail now, before any provider is tried.
                let check_body = if json.is_some() { Body::Empty } else { req.body.clone() };
                build_request(&plan.providers[0].svc, &req, &check_body, &method, &wire)?;
                let structured = match &json {
                    Some(j) => crate::adapters::structured::Structured::of(j)?,
                    None => None,
                };
                (ep, Some(Box::new(RouteCall { json, stream: streaming, structured, ..Default::default() })), None)
            }
        };
        let deadline = Deadline::after(Duration::from_millis(req.timeout_ms.unwrap_or(plan.request_ms)));
        plan.budgets.deposit(&plan.budget_key, &plan.budget);
        Ok(Call {
            snapshot,
            plan,
            ep,
            req,
            method,
            trace,
            wire,
            spans,
            deadline,
            started,
            attempts: 0,
            auth_replayed: false,
            first,
            lanes,
            route,
            schema_violation: None,
            fault: None,
            declared_safe,
            intercepted: false,
            extra_secrets: Default::default(),
            cache: None,
        })
    }

    /// What must never reach a caller or a record for provider `lane`: the service's
    /// credentials, the request's sensitive headers and what interceptors named secret.
    pub fn secrets(&self, lane: usize) -> crate::redact::Secrets {
        let mut s = self.svc(lane).secrets_for(&self.req);
        for v in self.extra_secrets.lock().iter() {
            s.add(v);
        }
        s
    }

    /// The service of provider `lane`.
    pub fn svc(&self, lane: usize) -> &Arc<ServiceRuntime> {
        &self.plan.providers[lane].svc
    }

    /// The request for the next attempt: the prebuilt one first, rebuilt for a retry
    /// (cheaper than cloning on every request for the rare retry), in the provider's wire
    /// format on a route.
    pub async fn outgoing(&mut self) -> Result<OutgoingRequest, HarnessError> {
        if let Some(r) = self.first.take() {
            return Ok(r);
        }
        self.wire = self.trace.next_span();
        let lane = self.lanes.current;
        let plan = self.plan.clone();
        let p = &plan.providers[lane];
        let shaped = match self.route.as_mut() {
            Some(rc) => rc.shaped_for(p, &plan.config, self.deadline.remaining()).await?,
            None => None,
        };
        match shaped {
            Some(s) => build_shaped(&p.svc, &self.req, s, &self.method, &self.wire),
            None => build_request(&p.svc, &self.req, &self.req.body, &self.method, &self.wire),
        }
    }

    /// The error with the request's context: service, endpoint, method, attempts, trace id
    /// (and the provider, for a route).
    pub fn with_context(&self, mut e: HarnessError) -> HarnessError {
        let (service, endpoint, method) = &self.ep.names;
        e.service = Some(service.to_string());
        e.endpoint = Some(endpoint.to_string());
        e.method = Some(method.to_string());
        e.attempts = self.attempts;
        e.trace_id = Some(self.trace.trace_id.to_string());
        if self.route.is_some() && e.provider.is_none() && e.kind != ErrorKind::NoHealthyProvider {
            e.provider = Some(self.plan.providers[self.lanes.current].id.to_string());
        }
        e
    }

    /// The request's one record (metrics, log line, audit, span, events): once, when it ends.
    pub fn observe(&self, engine: &Engine, status: Option<u16>, error: Option<&HarnessError>, streamed: bool, response: Option<&bytes::Bytes>) {
        let route = self.route.as_ref().map(|rc| {
            let idx = self.lanes.answered.or(Some(self.lanes.current));
            RouteStamp {
                route: self.plan.name.clone(),
                provider: idx.map(|i| self.plan.providers[i].id.clone()),
                breaker: idx.map(|i| self.lanes.eps[i].breaker.state().as_str()),
                model: rc.model.clone(),
                cost: rc.cost,
                fallback: rc.fallback,
            }
        });
        let svc = self.svc(self.lanes.current);
        crate::observability::finish::finish(
            engine,
            &Finished {
                snapshot: &self.snapshot,
                ep: &self.ep,
                req: &self.req,
                trace: &self.trace,
                elapsed_ms: self.started.elapsed().as_secs_f64() * 1000.0,
                status,
                error,
                streamed,
                attempts: self.attempts,
                route,
                schema_violation: self.schema_violation.clone(),
                fault: self.fault,
                spans: self.spans.as_deref(),
                server: server_of(svc),
                secrets: &|| self.secrets(self.lanes.current),
                response,
                cache: self.cache.as_ref(),
            },
        );
    }

    /// Fills the error's context, then the one record; returns the result stamped.
    pub fn finish(&self, engine: &Engine, result: Result<crate::response::Response, HarnessError>) -> Result<crate::response::Response, HarnessError> {
        match result {
            Ok(mut r) => {
                r.elapsed_ms = self.started.elapsed().as_secs_f64() * 1000.0;
                r.trace_id = self.trace.trace_id.to_string();
                if let Some(c) = &self.cache {
                    r.cache = Some(Box::new(c.clone()));
                }
                self.observe(engine, Some(r.status), None, false, Some(&r.body));
                Ok(r)
            }
            Err(e) => {
                let e = self.with_context(e);
                self.observe(engine, e.status, Some(&e), false, None);
                Err(e)
            }
        }
    }
}

/// `route/model` pins the route to that model's providers; a model no provider serves is a
/// `ConfigError` naming the ones that are.
fn pin_model(rt: &RouteRuntime, model: Option<&str>, tried: &mut [Tried]) -> Result<(), HarnessError> {
    let Some(model) = model else { return Ok(()) };
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
    Ok(())
}

/// The body of an `openai-compatible` request, as a JSON object.
pub(crate) fn json_object(body: &Body) -> Result<Value, HarnessError> {
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

/// `server.address` and `server.port` of a service's base URL.
pub(crate) fn server_of(svc: &ServiceRuntime) -> Option<(String, u16)> {
    Some((svc.base_url.host_str()?.to_string(), svc.base_url.port_or_known_default()?))
}

/// The request's span in the caller's trace (the explicit field, else a `traceparent` among
/// its headers), sampled at `otel.sample_ratio`; and a place for its attempts' spans when
/// they will be exported.
fn trace_for(engine: &Engine, snapshot: &Snapshot, req: &Request) -> (TraceContext, Option<Vec<AttemptSpan>>) {
    let parent = req.traceparent.as_deref().or_else(|| req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("traceparent")).map(|(_, v)| v.as_str()));
    let trace = TraceContext::child_of(parent, snapshot.config.otel.ratio());
    let spans = (trace.sampled && engine.otel.load().is_some()).then(Vec::new);
    (trace, spans)
}

/// Builds one attempt's request with `body` (the caller's, or a provider's form of it);
/// the path was checked (`target::check_path`) first.
pub(crate) fn build_request(svc: &ServiceRuntime, req: &Request, body: &Body, method: &Method, trace: &TraceContext) -> Result<OutgoingRequest, HarnessError> {
    build_at(svc, req, &req.path, body, method, trace)
}

/// A provider's request in its wire format: its path (when its format has one) and the
/// headers it needs unless the service already sets them.
pub(crate) fn build_shaped(svc: &ServiceRuntime, req: &Request, shaped: Shaped, method: &Method, trace: &TraceContext) -> Result<OutgoingRequest, HarnessError> {
    let path = shaped.path.as_deref().unwrap_or(&req.path);
    let mut out = build_at(svc, req, path, &Body::Json(shaped.body), method, trace)?;
    for (k, v) in shaped.headers {
        let name = HeaderName::try_from(k.as_str()).map_err(|_| HarnessError::config(format!("adapter header: invalid name {:?}", escape_control(&k))))?;
        if !out.headers.contains_key(&name) {
            let v = HeaderValue::try_from(v.as_str()).map_err(|_| HarnessError::config(format!("adapter header {k}: invalid value")))?;
            out.headers.insert(name, v);
        }
    }
    Ok(out)
}

fn build_at(svc: &ServiceRuntime, req: &Request, path: &str, body: &Body, method: &Method, trace: &TraceContext) -> Result<OutgoingRequest, HarnessError> {
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut url = svc.base_url.clone();
    if svc.base_path.is_empty() {
        url.set_path(path);
    } else {
        url.set_path(&format!("{}{}", svc.base_path, path));
    }
    url.set_query(query);
    if !req.query.is_empty() {
        url.query_pairs_mut().extend_pairs(req.query.iter());
    }
    // A caller's parameter beside the service's query credential would be read first by
    // many upstreams: refused, so the credential is always the one that counts.
    if let Some(param) = svc.credential.as_ref().and_then(|c| c.query_param()) {
        if url.query_pairs().any(|(k, _)| k == param) {
            return Err(HarnessError::config(format!(
                "request.query.{}: this parameter carries the service's credential; a caller may not set it",
                escape_control(param)
            )));
        }
    }
    let mut headers = svc.static_headers.clone();
    // A caller's header replaces a config header of the same name; repeated names are all sent, in order.
    let mut replaced: SmallVec<[HeaderName; 4]> = SmallVec::new();
    for (k, v) in &req.headers {
        if target::is_forbidden_header(k) {
            return Err(target::forbidden_header("request.headers", k));
        }
        let name = HeaderName::try_from(k.as_str()).map_err(|_| HarnessError::config(format!("request.headers: invalid header name {:?}", escape_control(k))))?;
        let mut value = HeaderValue::try_from(v.as_str()).map_err(|_| HarnessError::config(format!("request.headers.{k}: invalid header value")))?;
        value.set_sensitive(true);
        if !replaced.contains(&name) {
            headers.remove(&name);
            replaced.push(name.clone());
        }
        headers.append(name, value);
    }
    if let Some(key) = &req.idempotency_key {
        let v = HeaderValue::try_from(key.as_str()).map_err(|_| HarnessError::config("request.idempotency_key: not a valid header value"))?;
        headers.insert("idempotency-key", v);
    }
    headers.insert("traceparent", HeaderValue::from_bytes(&trace.header_bytes()).expect("hex is a valid header"));
    let body = match body {
        Body::Empty => None,
        Body::Bytes(b) => Some(b.clone()),
        Body::Json(v) => {
            json::check_value("json", v)?;
            let bytes = serde_json::to_vec(v).map_err(|e| HarnessError::config(format!("json: {e}")))?;
            set_json_type(&mut headers);
            Some(bytes.into())
        }
        Body::JsonText(text) => {
            json::check_text("json", text)?;
            set_json_type(&mut headers);
            Some(text.clone())
        }
    };
    if let Some(b) = &body {
        let max = svc.config.limits.max_request_bytes;
        if b.len() as u64 > max {
            return Err(HarnessError::config(format!("request.body: {} bytes is over limits.max_request_bytes ({max})", b.len())));
        }
    }
    Ok(OutgoingRequest { method: method.clone(), url, headers, body, fault: svc.faulty.then(Default::default) })
}

fn set_json_type(headers: &mut http::HeaderMap) {
    if !headers.contains_key(http::header::CONTENT_TYPE) {
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
}

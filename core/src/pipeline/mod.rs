//! The request path, in its one fixed order, readable top to bottom:
//!
//! snapshot (once) -> service and endpoint -> validate path, headers, body ->
//! total deadline -> attempt loop (`attempt.rs`) {
//!   breaker check -> bulkhead permit -> transport head -> body (buffered, or
//!   handed to the caller as a stream) -> record outcome -> retry decision
//!   (method, outcome, budget) -> backoff within the deadline
//! } -> typed result or typed error -> one record: metrics, log line, events.
//!
//! A stream records its outcome when it ends (`stream.rs`). The pipeline never
//! imports the client; it runs on an `Engine`.

mod attempt;
mod classify;
pub(crate) mod chat;
pub(crate) mod route;
pub mod stream;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderName, HeaderValue, Method};
use tokio::time::Instant;

use crate::deadline::Deadline;
use crate::endpoint;
use crate::engine::registry::EndpointState;
use crate::engine::{Engine, ServiceRuntime, Snapshot};
use crate::error::HarnessError;
use crate::json;
use crate::observability::log::RequestRecord;
use crate::observability::metrics::ErrorLabels;
use crate::observability::trace::TraceContext;
use crate::redact::escape_control;
use crate::request::{Body, Request};
use crate::response::Response;
use crate::target;
use crate::transport::OutgoingRequest;

pub use stream::StreamResponse;

/// Runs one request and reads its whole body.
pub(crate) async fn execute(engine: &Engine, req: Request) -> Result<Response, HarnessError> {
    let mut call = Call::start(engine, req, false)?;
    if call.route.is_some() {
        let result = route::execute(engine, &mut call).await;
        return call.finish(engine, result, false);
    }
    let result = attempt::run(engine, &mut call, attempt::Mode::Buffered).await;
    let result = match result {
        Ok(attempt::Reached::Buffered(resp)) => Ok(resp),
        Ok(attempt::Reached::Stream(_)) => unreachable!("a buffered call never reaches a stream"),
        Err(e) => Err(e),
    };
    call.finish(engine, result, false)
}

/// Runs one request up to its response head; the body is the caller's to pull.
pub(crate) async fn stream(engine: &Arc<Engine>, req: Request) -> Result<StreamResponse, HarnessError> {
    let mut call = Call::start(engine, req, true)?;
    let reached = if call.route.is_some() {
        route::run(engine, &mut call, attempt::Mode::Stream).await
    } else {
        attempt::run(engine, &mut call, attempt::Mode::Stream).await
    };
    match reached {
        Ok(attempt::Reached::Stream(open)) => Ok(StreamResponse::new(engine.clone(), call, open)),
        Ok(attempt::Reached::Buffered(_)) => unreachable!("a streaming call never buffers its success"),
        Err(e) => call.finish(engine, Err(e), true).map(|_: Response| unreachable!()),
    }
}

/// One request in flight: what every stage shares, built once.
pub(crate) struct Call {
    pub snapshot: Arc<Snapshot>,
    pub svc: Arc<ServiceRuntime>,
    pub ep: Arc<EndpointState>,
    pub req: Request,
    pub method: Method,
    /// The request's span (its id is in the record; the caller's span is its parent).
    pub trace: TraceContext,
    /// The attempt on the wire: a child of `trace`, sent as `traceparent`.
    pub wire: TraceContext,
    /// Each attempt, for its span (only while exporting a sampled trace).
    pub spans: Option<Vec<crate::observability::otel::AttemptSpan>>,
    pub deadline: Deadline,
    pub started: Instant,
    pub attempts: u32,
    /// A refused credential was refreshed (or rotated) and the request replayed once.
    pub auth_replayed: bool,
    /// The first attempt's request, built up front so bad input fails before any attempt.
    first: Option<OutgoingRequest>,
    /// Set when the request named a route.
    pub route: Option<Box<route::RouteCall>>,
    /// `validate: warn` found the answer off its schema (for the record).
    pub schema_violation: Option<String>,
    /// The last fault injected into an attempt (for the record).
    pub fault: Option<&'static str>,
}

impl Call {
    pub(crate) fn start(engine: &Engine, req: Request, streaming: bool) -> Result<Call, HarnessError> {
        let started = Instant::now();
        let snapshot = engine.snapshot();
        if let Some(rt) = snapshot.routes.get(&req.service).cloned() {
            return route::start(engine, snapshot, rt, req, started, streaming, None);
        }
        // `route/model`: the route, served only by its providers of that model.
        if let Some((name, model)) = req.service.split_once('/') {
            if let Some(rt) = snapshot.routes.get(name).cloned() {
                let model = model.to_string();
                return route::start(engine, snapshot, rt, req, started, streaming, Some(model));
            }
        }
        let Some(svc) = snapshot.services.get(&req.service).cloned() else {
            let mut known: Vec<&str> = snapshot.services.keys().chain(snapshot.routes.keys()).map(String::as_str).collect();
            known.sort_unstable();
            return Err(HarnessError::config(format!(
                "request.service: unknown service `{}` (configured services and routes: {})",
                escape_control(&req.service),
                known.join(", ")
            )));
        };
        let method = target::method(&req.method)?;
        target::check_path(&req.path)?;
        if let Some(e) = &req.endpoint {
            target::check_endpoint(e)?;
        }
        target::check_principal(req.principal.as_deref())?;
        let template = match &req.endpoint {
            Some(e) => std::borrow::Cow::Borrowed(e.as_str()),
            None => std::borrow::Cow::Owned(endpoint::template(&req.path)),
        };
        // Past `limits.max_endpoints` the state (and the label) is the shared `{other}`.
        let ep = engine.registry.endpoint(&req.service, &template, method.as_str(), svc.config.limits.max_endpoints);
        let (trace, spans) = trace_for(engine, &snapshot, &req);
        let wire = trace.next_span();
        let first = build_request(&svc, &req, &req.body, &method, &wire)?;
        let timeout = Duration::from_millis(req.timeout_ms.unwrap_or(svc.config.timeouts.request_ms));
        let deadline = Deadline::after(timeout);
        svc.budgets.deposit(&svc.name, &svc.budget);
        Ok(Call {
            snapshot,
            svc,
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
            first: Some(first),
            route: None,
            schema_violation: None,
            fault: None,
        })
    }

    /// The request for the next attempt: the prebuilt one first, rebuilt for a retry
    /// (cheaper than cloning on every request for the rare retry).
    fn outgoing(&mut self) -> Result<OutgoingRequest, HarnessError> {
        if let Some(r) = self.first.take() {
            return Ok(r);
        }
        self.wire = self.trace.next_span();
        match &mut self.route {
            Some(rc) => rc.outgoing(&self.svc, &self.req, &self.method, &self.wire),
            None => build_request(&self.svc, &self.req, &self.req.body, &self.method, &self.wire),
        }
    }

    /// Fills the error's context, then one record: metrics, the log line, events.
    fn finish<T: Finished>(&self, engine: &Engine, result: Result<T, HarnessError>, streamed: bool) -> Result<T, HarnessError> {
        let elapsed_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let result = match result {
            Ok(mut r) => {
                r.stamp(elapsed_ms, self.trace.trace_id.as_str());
                Ok(r)
            }
            Err(e) => Err(self.with_context(e)),
        };
        let status = match &result {
            Ok(r) => Some(r.status()),
            Err(e) => e.status,
        };
        self.observe_with(engine, elapsed_ms, status, result.as_ref().err(), streamed, result.as_ref().ok().and_then(|r| r.body()));
        result
    }

    pub(crate) fn with_context(&self, mut e: HarnessError) -> HarnessError {
        let (service, endpoint, method) = &self.ep.names;
        e.service = Some(service.to_string());
        e.endpoint = Some(endpoint.to_string());
        e.method = Some(method.to_string());
        e.attempts = self.attempts;
        e.trace_id = Some(self.trace.trace_id.to_string());
        if let Some(rc) = &self.route {
            rc.stamp_error(&mut e);
        }
        e
    }

    pub(crate) fn observe(&self, engine: &Engine, elapsed_ms: f64, status: Option<u16>, error: Option<&HarnessError>, streamed: bool) {
        self.observe_with(engine, elapsed_ms, status, error, streamed, None)
    }

    /// `observe`, with the answer's body for an audit record that includes bodies.
    pub(crate) fn observe_with(&self, engine: &Engine, elapsed_ms: f64, status: Option<u16>, error: Option<&HarnessError>, streamed: bool, response: Option<&bytes::Bytes>) {
        let m = &engine.metrics;
        let ep = &self.ep;
        ep.latency.observe(elapsed_ms / 1000.0);
        ep.requests_counter(m, status).inc();
        let (service, endpoint, method) = &ep.names;
        if let Some(e) = error {
            m.errors
                .get_or_create(&ErrorLabels {
                    service: service.as_ref().into(),
                    endpoint: endpoint.as_ref().into(),
                    method: method.as_ref().into(),
                    kind: e.name().into(),
                })
                .inc();
        }
        if let Some(masker) = &self.snapshot.audit_masker {
            self.audit(engine, masker, elapsed_ms, status, error, response);
        }
        if let Some(attempt_spans) = &self.spans {
            if let Some(otel) = engine.otel.load().as_ref() {
                self.export_span(otel, attempt_spans, elapsed_ms, status, error);
            }
        }
        let log = &self.snapshot.config.log;
        if !log.enabled && !engine.events.is_active() {
            return;
        }
        let record = RequestRecord {
            ts_ms: SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
            client: self.snapshot.client_name.clone(),
            trace_id: self.trace.trace_id,
            span_id: self.trace.span_id,
            service: service.clone(),
            endpoint: endpoint.clone(),
            method: method.clone(),
            status,
            duration_ms: (elapsed_ms * 1000.0).round() / 1000.0,
            attempts: self.attempts,
            retry_count: self.attempts.saturating_sub(1),
            breaker: ep.breaker.state().as_str(),
            streamed,
            error_kind: error.map(|e| e.name()),
            error_code: error.and_then(|e| e.code.clone()),
            error_message: error.map(|e| e.message.clone()),
            route: None,
            provider: None,
            model: None,
            cost: None,
            fallback: None,
            schema_violation: self.schema_violation.clone(),
            fault: self.fault,
        };
        let mut record = record;
        if let Some(rc) = &self.route {
            rc.stamp_record(&mut record);
        }
        tracing::info!(
            target: "harness.request",
            trace_id = %record.trace_id,
            service = %record.service,
            endpoint = %record.endpoint,
            method = %record.method,
            status = record.status,
            duration_ms = record.duration_ms,
            retry_count = record.retry_count,
            error_kind = record.error_kind,
        );
        engine.record(&self.snapshot, record);
    }
}

impl Call {
    fn export_span(&self, otel: &crate::observability::otel::Otel, attempt_spans: &[crate::observability::otel::AttemptSpan], elapsed_ms: f64, status: Option<u16>, error: Option<&HarnessError>) {
        use crate::observability::otel::{RequestSpan, RouteAttrs};
        let (service, endpoint, method) = &self.ep.names;
        let route = self.route.as_ref().map(|rc| RouteAttrs {
            provider: rc.answered.or(rc.current).map(|i| rc.rt.providers[i].id.as_ref()),
            model: rc.model.as_deref(),
            cost: rc.cost,
        });
        otel.export(&RequestSpan {
            trace: &self.trace,
            method,
            service,
            endpoint,
            elapsed: Duration::from_secs_f64(elapsed_ms / 1000.0),
            status,
            error: error.map(|e| e.name()),
            attempts: self.attempts,
            server: server_of(&self.svc),
            route,
            attempt_spans,
        });
    }

    /// One audit record: who asked for what, and how it ended; bodies only when asked, masked.
    fn audit(&self, engine: &Engine, masker: &crate::observability::audit::Masker, elapsed_ms: f64, status: Option<u16>, error: Option<&HarnessError>, response: Option<&bytes::Bytes>) {
        let cfg = &self.snapshot.config.audit;
        let (service, endpoint, method) = &self.ep.names;
        let request_bytes = match &self.req.body {
            Body::Empty => None,
            Body::Bytes(b) | Body::JsonText(b) => Some(b.clone()),
            Body::Json(v) => serde_json::to_vec(v).ok().map(bytes::Bytes::from),
        };
        let secrets = self.svc.secrets_for(&self.req);
        let (request_body, response_body) = crate::observability::audit::bodies(cfg, masker, request_bytes.as_ref(), response, &secrets);
        let route = self.route.as_ref();
        let record = crate::observability::audit::AuditRecord {
            ts_ms: SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
            client: self.snapshot.client_name.clone(),
            principal: self.req.principal.clone(),
            service: service.clone(),
            provider: route.and_then(|r| r.answered.or(r.current)).map(|i| route.expect("route").rt.providers[i].id.clone()),
            endpoint: endpoint.clone(),
            method: method.clone(),
            status,
            outcome: error.map(|e| e.name()).unwrap_or("ok"),
            attempts: self.attempts,
            duration_ms: (elapsed_ms * 1000.0).round() / 1000.0,
            cost: route.and_then(|r| r.cost),
            trace_id: self.trace.trace_id.to_string(),
            request_body,
            response_body,
        };
        if cfg.sink.listener && engine.events.is_active() {
            engine.events.emit(crate::host::Event::AuditRecord(record.clone()));
        }
        engine.audit.write(&cfg.sink, record);
    }
}

/// `server.address` and `server.port` of a service's base URL.
pub(crate) fn server_of(svc: &ServiceRuntime) -> Option<(String, u16)> {
    Some((svc.base_url.host_str()?.to_string(), svc.base_url.port_or_known_default()?))
}

/// A successful result the pipeline stamps before returning it.
trait Finished {
    fn stamp(&mut self, elapsed_ms: f64, trace_id: &str);
    fn status(&self) -> u16;
    /// The whole body, when there is one (not for a stream).
    fn body(&self) -> Option<&bytes::Bytes> {
        None
    }
}

impl Finished for Response {
    fn stamp(&mut self, elapsed_ms: f64, trace_id: &str) {
        self.elapsed_ms = elapsed_ms;
        self.trace_id = trace_id.to_string();
    }
    fn status(&self) -> u16 {
        self.status
    }
    fn body(&self) -> Option<&bytes::Bytes> {
        Some(&self.body)
    }
}

/// The request's span in the caller's trace (the explicit field, else a `traceparent` among
/// its headers), sampled at `otel.sample_ratio`; and a place for its attempts' spans when
/// they will be exported.
pub(crate) fn trace_for(engine: &Engine, snapshot: &Snapshot, req: &Request) -> (TraceContext, Option<Vec<crate::observability::otel::AttemptSpan>>) {
    let parent = req.traceparent.as_deref().or_else(|| {
        req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("traceparent")).map(|(_, v)| v.as_str())
    });
    let trace = TraceContext::child_of(parent, snapshot.config.otel.ratio());
    let spans = (trace.sampled && engine.otel.load().is_some()).then(Vec::new);
    (trace, spans)
}

/// Builds one attempt's request with `body` (the caller's, or a provider's form of it);
/// the path was checked (`target::check_path`) first.
fn build_request(svc: &ServiceRuntime, req: &Request, body: &Body, method: &Method, trace: &TraceContext) -> Result<OutgoingRequest, HarnessError> {
    let (path, query) = match req.path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (req.path.as_str(), None),
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
    let mut replaced: Vec<HeaderName> = Vec::new();
    for (k, v) in &req.headers {
        if target::is_forbidden_header(k) {
            return Err(target::forbidden_header("request.headers", k));
        }
        let name = HeaderName::try_from(k.as_str())
            .map_err(|_| HarnessError::config(format!("request.headers: invalid header name {:?}", escape_control(k))))?;
        let mut value = HeaderValue::try_from(v.as_str())
            .map_err(|_| HarnessError::config(format!("request.headers.{k}: invalid header value")))?;
        value.set_sensitive(true);
        if !replaced.contains(&name) {
            headers.remove(&name);
            replaced.push(name.clone());
        }
        headers.append(name, value);
    }
    if let Some(key) = &req.idempotency_key {
        let v = HeaderValue::try_from(key.as_str())
            .map_err(|_| HarnessError::config("request.idempotency_key: not a valid header value"))?;
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
    Ok(OutgoingRequest { method: method.clone(), url, headers, body, fault: svc.faulty.then(Default::default) })
}

fn set_json_type(headers: &mut http::HeaderMap) {
    if !headers.contains_key(http::header::CONTENT_TYPE) {
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
}

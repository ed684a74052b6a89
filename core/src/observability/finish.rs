//! A request's one record, built once when it ends: metrics, the log line and events, the
//! audit record, the span.
//!
//! Guarantees: each request is recorded exactly once, whatever way it ends (answer, error,
//! a stream finished, failed or dropped); secrets are gathered only when an audit record
//! asks for them.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::audit::{AuditRecord, Masker};
use super::log::RequestRecord;
use super::metrics::ErrorLabels;
use super::otel::{AttemptSpan, Otel, RequestSpan, RouteAttrs};
use super::trace::TraceContext;
use crate::engine::registry::EndpointState;
use crate::engine::{Engine, Snapshot};
use crate::error::HarnessError;
use crate::redact::Secrets;
use crate::request::{Body, Request};

/// What routing did, for a request that named a route.
pub(crate) struct RouteStamp {
    pub route: Arc<str>,
    pub provider: Option<Arc<str>>,
    /// The answering (or last tried) provider's breaker: the route's own is never used.
    pub breaker: Option<&'static str>,
    pub model: Option<String>,
    pub cost: Option<f64>,
    pub fallback: Option<&'static str>,
}

/// One finished request, as the pipeline saw it.
pub(crate) struct Finished<'a> {
    pub snapshot: &'a Snapshot,
    pub ep: &'a EndpointState,
    pub req: &'a Request,
    pub trace: &'a TraceContext,
    pub elapsed_ms: f64,
    pub status: Option<u16>,
    pub error: Option<&'a HarnessError>,
    pub streamed: bool,
    pub attempts: u32,
    pub route: Option<RouteStamp>,
    pub schema_violation: Option<String>,
    pub fault: Option<&'static str>,
    pub spans: Option<&'a [AttemptSpan]>,
    pub server: Option<(String, u16)>,
    /// The secrets to mask in an audit record (read only when one is written).
    pub secrets: &'a dyn Fn() -> Secrets,
    /// The answer's body, for an audit record that includes bodies.
    pub response: Option<&'a bytes::Bytes>,
    /// What a cache did for the request (`hit`, `miss`, `coalesced`, ...), when one had a part.
    pub cache: Option<&'a crate::cache::stamp::CacheStamp>,
}

/// Records one finished request.
pub(crate) fn finish(engine: &Engine, f: &Finished<'_>) {
    let m = &engine.metrics;
    let ep = f.ep;
    ep.latency.observe(f.elapsed_ms / 1000.0);
    ep.requests_counter(m, f.status).inc();
    let (service, endpoint, method) = &ep.names;
    if let Some(e) = f.error {
        m.errors
            .get_or_create(&ErrorLabels { service: service.as_ref().into(), endpoint: endpoint.as_ref().into(), method: method.as_ref().into(), kind: e.name().into() })
            .inc();
    }
    if let Some(c) = f.cache {
        m.cache.get_or_create(&super::metrics::CacheLabels { service: service.as_ref().into(), endpoint: endpoint.as_ref().into(), outcome: c.outcome.into() }).inc();
        if let Some(saved) = c.saved_cost {
            m.cache_saved.get_or_create(&super::metrics::ServiceLabels { service: service.as_ref().into() }).inc_by(saved);
        }
    }
    if let Some(masker) = &f.snapshot.audit_masker {
        audit(engine, masker, f);
    }
    if let Some(attempt_spans) = f.spans {
        if let Some(otel) = engine.otel.load().as_ref() {
            export_span(otel, attempt_spans, f);
        }
    }
    let log = &f.snapshot.config.log;
    if !log.enabled && !engine.events.is_active() {
        return;
    }
    let route = f.route.as_ref();
    let record = RequestRecord {
        ts_ms: unix_ms(),
        client: f.snapshot.client_name.clone(),
        trace_id: f.trace.trace_id,
        span_id: f.trace.span_id,
        service: service.clone(),
        endpoint: endpoint.clone(),
        method: method.clone(),
        status: f.status,
        duration_ms: (f.elapsed_ms * 1000.0).round() / 1000.0,
        attempts: f.attempts,
        retry_count: f.attempts.saturating_sub(1),
        breaker: route.and_then(|r| r.breaker).unwrap_or_else(|| ep.breaker.state().as_str()),
        streamed: f.streamed,
        error_kind: f.error.map(|e| e.name()),
        error_code: f.error.and_then(|e| e.code.clone()),
        error_message: f.error.map(|e| e.message.clone()),
        route: route.map(|r| r.route.clone()),
        provider: route.and_then(|r| r.provider.clone()),
        model: route.and_then(|r| r.model.clone()),
        cost: route.and_then(|r| r.cost),
        fallback: route.and_then(|r| r.fallback),
        schema_violation: f.schema_violation.clone(),
        fault: f.fault,
        cache: f.cache.map(|c| c.outcome),
        cache_similarity: f.cache.and_then(|c| c.similarity),
        cache_saved_cost: f.cache.and_then(|c| c.saved_cost),
    };
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
    engine.record(f.snapshot, record);
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn export_span(otel: &Otel, attempt_spans: &[AttemptSpan], f: &Finished<'_>) {
    let (service, endpoint, method) = &f.ep.names;
    let route = f.route.as_ref().map(|r| RouteAttrs { provider: r.provider.as_deref(), model: r.model.as_deref(), cost: r.cost });
    otel.export(&RequestSpan {
        trace: f.trace,
        method,
        service,
        endpoint,
        elapsed: Duration::from_secs_f64(f.elapsed_ms / 1000.0),
        status: f.status,
        error: f.error.map(|e| e.name()),
        attempts: f.attempts,
        server: f.server.clone(),
        route,
        attempt_spans,
    });
}

/// One audit record: who asked for what, and how it ended; bodies only when asked, masked.
fn audit(engine: &Engine, masker: &Masker, f: &Finished<'_>) {
    let cfg = &f.snapshot.config.audit;
    let (service, endpoint, method) = &f.ep.names;
    let request_bytes = match &f.req.body {
        Body::Empty => None,
        Body::Bytes(b) | Body::JsonText(b) => Some(b.clone()),
        Body::Json(v) => serde_json::to_vec(v).ok().map(bytes::Bytes::from),
    };
    let secrets = (f.secrets)();
    let (request_body, response_body) = super::audit::bodies(cfg, masker, request_bytes.as_ref(), f.response, &secrets);
    let route = f.route.as_ref();
    let record = AuditRecord {
        ts_ms: unix_ms(),
        client: f.snapshot.client_name.clone(),
        principal: f.req.principal.clone(),
        service: service.clone(),
        provider: route.and_then(|r| r.provider.clone()),
        endpoint: endpoint.clone(),
        method: method.clone(),
        status: f.status,
        outcome: f.error.map(|e| e.name()).unwrap_or("ok"),
        attempts: f.attempts,
        duration_ms: (f.elapsed_ms * 1000.0).round() / 1000.0,
        cost: route.and_then(|r| r.cost),
        trace_id: f.trace.trace_id.to_string(),
        request_body,
        response_body,
    };
    if cfg.sink.listener && engine.events.is_active() {
        engine.events.emit(crate::host::Event::AuditRecord(record.clone()));
    }
    engine.audit.write(&cfg.sink, record);
}

//! The request path, in its one fixed order, readable top to bottom:
//!
//! resolve service and endpoint -> total deadline -> attempt loop {
//!   breaker check -> bulkhead permit -> transport -> record outcome ->
//!   retry decision (method, outcome, budget) -> backoff within the deadline
//! } -> typed result or typed error -> one log record, metrics, listeners.

use std::time::{Duration, SystemTime};

use http::{HeaderName, HeaderValue, Method};
use tokio::time::Instant;

use crate::breaker::Outcome;
use crate::client::{ClientInner, EndpointState, ServiceState};
use crate::config::{Config, ServiceConfig};
use crate::deadline::Deadline;
use crate::endpoint;
use crate::error::{normalize_body, ErrorKind, HarnessError, TimeoutPhase, MAX_ERROR_BODY};
use crate::json;
use crate::redact::{escape_control, Secrets};
use crate::target;
use crate::observability::log::{self, RequestRecord};
use crate::observability::metrics::ErrorLabels;
use crate::observability::trace::TraceContext;
use crate::request::{Body, Request, Response};
use crate::retry::{self, Failure};
use crate::transport;

pub(crate) async fn execute(inner: &ClientInner, req: Request) -> Result<Response, HarnessError> {
    let started = Instant::now();
    let config = inner.config.load();
    let (svc_cfg, svc) = match (config.services.get(&req.service), inner.services.get(&req.service)) {
        (Some(c), Some(s)) => (c, s),
        _ => {
            let known: Vec<&str> = config.services.keys().map(String::as_str).collect();
            return Err(HarnessError::config(format!(
                "request.service: unknown service `{}` (configured: {})",
                req.service,
                known.join(", ")
            )));
        }
    };
    let method = target::method(&req.method)?;
    target::check_path(&req.path)?;
    if let Some(e) = &req.endpoint {
        target::check_endpoint(e)?;
    }
    let endpoint = req.endpoint.clone().unwrap_or_else(|| endpoint::template(&req.path));
    // Past `limits.max_endpoints` the state (and the label) is the shared `{other}`.
    let ep = inner.endpoint_state(&req.service, &endpoint, method.as_str(), svc_cfg.limits.max_endpoints);
    let endpoint = ep.names.1.to_string();
    // The caller's trace: the explicit field, else a `traceparent` among its headers.
    let parent = req.traceparent.as_deref().or_else(|| {
        req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("traceparent")).map(|(_, v)| v.as_str())
    });
    let trace = TraceContext::child_of(parent);
    // Built once up front so bad input fails before any attempt; retries rebuild it.
    let first = build_request(svc, &req, &method, &trace)?;

    let timeout = Duration::from_millis(req.timeout_ms.unwrap_or(svc_cfg.timeouts.request_ms));
    let deadline = Deadline::after(timeout);
    svc.budget.deposit();

    let mut attempts = 0u32;
    let result = attempt_loop(inner, svc_cfg, svc, &ep, &req, &method, &trace, first, &deadline, &mut attempts).await;

    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let result = match result {
        Ok(mut resp) => {
            resp.elapsed_ms = elapsed_ms;
            resp.trace_id = trace.trace_id.clone();
            Ok(resp)
        }
        Err(mut e) => {
            e.service = Some(req.service.clone());
            e.endpoint = Some(endpoint.clone());
            e.method = Some(method.as_str().to_string());
            e.attempts = attempts;
            e.trace_id = Some(trace.trace_id.clone());
            Err(e)
        }
    };
    observe(inner, &config, &ep, trace, attempts, elapsed_ms, &result);
    result
}

#[allow(clippy::too_many_arguments)]
async fn attempt_loop(
    inner: &ClientInner,
    cfg: &ServiceConfig,
    svc: &ServiceState,
    ep: &EndpointState,
    req: &Request,
    method: &Method,
    trace: &TraceContext,
    first: reqwest::Request,
    deadline: &Deadline,
    attempts: &mut u32,
) -> Result<Response, HarnessError> {
    let response_timeout = Duration::from_millis(cfg.timeouts.response_ms);
    let mut first = Some(first);
    loop {
        if deadline.expired() {
            return Err(HarnessError::new(ErrorKind::Timeout(TimeoutPhase::Total), "request deadline expired before the next attempt"));
        }
        // Breaker before every attempt.
        let permit = ep.breaker.acquire(&cfg.breaker).map_err(|r| {
            let mut e = HarnessError::new(ErrorKind::CircuitOpen, "circuit breaker is open: the call was not sent");
            e.retry_after_ms = Some(r.retry_in.as_millis() as u64);
            e
        })?;
        // Bulkhead: full means fail fast; the breaker permit drops unrecorded (ignored).
        let Some(bulkhead_permit) = svc.bulkhead.try_acquire() else {
            return Err(HarnessError::new(
                ErrorKind::BulkheadFull,
                format!("bulkhead full: {} requests already in flight", svc.bulkhead.max()),
            ));
        };
        *attempts += 1;
        // The first attempt sends the request built up front; a retry builds it again
        // (cheaper than cloning on every request for the rare retry).
        let request = match first.take() {
            Some(r) => r,
            None => build_request(svc, req, method, trace)?,
        };
        let outcome = transport::send(&svc.http, request, response_timeout, deadline, cfg.limits.max_response_bytes).await.map(|(status, headers, body)| {
            let headers: Vec<(String, String)> = headers
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            (status.as_u16(), headers, body)
        });
        drop(bulkhead_permit);

        let (failure, error, retry_after) = match outcome {
            Ok((status, headers, body)) if status < 400 => {
                permit.record(Outcome::Success, &cfg.breaker);
                return Ok(Response { status, headers, body, elapsed_ms: 0.0, attempts: *attempts, trace_id: String::new() });
            }
            Ok((status, headers, body)) => {
                let health = if status >= 500 { Outcome::Failure } else if status == 429 { Outcome::Ignored } else { Outcome::Success };
                permit.record(health, &cfg.breaker);
                let retry_after = headers
                    .iter()
                    .find(|(k, _)| k == "retry-after")
                    .and_then(|(_, v)| retry::parse_retry_after(v, SystemTime::now()));
                (Failure::Status(status), status_error(status, &headers, body, retry_after, &svc.secrets_for(req)), retry_after)
            }
            Err(tf) => {
                // An over-large body says nothing about the server's health.
                let health = if tf.failure == Failure::TooLarge { Outcome::Ignored } else { Outcome::Failure };
                permit.record(health, &cfg.breaker);
                (tf.failure, HarnessError::new(error_kind(&tf), tf.message), None)
            }
        };

        // May this be sent again?
        if !retry::is_retryable(failure, &cfg.retry)
            || *attempts > cfg.retry.max_retries
            || !retry::may_resend(method, req.idempotency_key.is_some(), failure)
        {
            return Err(error);
        }
        let delay = retry::delay_for(*attempts, &cfg.retry, retry_after, inner.jitter());
        // Never sleep past the deadline: when the wait cannot fit, fail now.
        if !deadline.fits(delay) || !svc.budget.try_withdraw() {
            return Err(error);
        }
        ep.retries.inc();
        tokio::time::sleep(delay).await;
    }
}

/// Refused, reset and cut-short connections are all ConnectError; timeouts name their phase.
fn error_kind(tf: &transport::TransportFailure) -> ErrorKind {
    match tf.failure {
        Failure::Protocol => ErrorKind::Protocol,
        Failure::TooLarge => ErrorKind::ResponseTooLarge,
        _ => tf.phase().map(ErrorKind::Timeout).unwrap_or(ErrorKind::Connect),
    }
}

fn status_error(
    status: u16,
    headers: &[(String, String)],
    body: bytes::Bytes,
    retry_after: Option<Duration>,
    secrets: &Secrets,
) -> HarnessError {
    let content_type = headers.iter().find(|(k, _)| k == "content-type").map(|(_, v)| v.as_str());
    let mut norm = normalize_body(content_type, &body);
    // A downstream may echo the request's credentials: scrub before the text goes anywhere.
    norm.message = norm.message.map(|m| secrets.downstream_message(&m));
    norm.code = norm.code.map(|c| secrets.downstream_message(&c));
    let kind = match status {
        401 | 403 => ErrorKind::Auth,
        429 => ErrorKind::RateLimited,
        _ => ErrorKind::HttpStatus,
    };
    let reason = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    let message = match &norm.message {
        Some(m) => format!("upstream answered {status} {reason}: {m}"),
        None => format!("upstream answered {status} {reason}"),
    };
    let mut e = HarnessError::new(kind, message);
    e.status = Some(status);
    e.code = norm.code;
    e.retry_after_ms = retry_after.map(|d| d.as_millis() as u64);
    // A copy, not a slice: a slice would keep the whole (up to max_response_bytes) buffer alive.
    e.body = Some(if body.len() > MAX_ERROR_BODY { bytes::Bytes::copy_from_slice(&body[..MAX_ERROR_BODY]) } else { body });
    e
}

/// Builds the request once; each attempt sends a clone.
/// The path was checked (`target::check_path`) before this is called.
fn build_request(svc: &ServiceState, req: &Request, method: &Method, trace: &TraceContext) -> Result<reqwest::Request, HarnessError> {
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
    let mut request = reqwest::Request::new(method.clone(), url);
    let headers = request.headers_mut();
    headers.extend(svc.static_headers.clone());
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
    headers.insert("traceparent", HeaderValue::try_from(trace.header()).expect("hex is a valid header"));
    match &req.body {
        Body::Empty => {}
        Body::Bytes(b) => *request.body_mut() = Some(b.clone().into()),
        Body::Json(v) => {
            json::check_value("json", v)?;
            let bytes = serde_json::to_vec(v).map_err(|e| HarnessError::config(format!("json: {e}")))?;
            set_json(&mut request, bytes.into());
        }
        Body::JsonText(text) => {
            json::check_text("json", text)?;
            set_json(&mut request, text.clone());
        }
    }
    Ok(request)
}

fn set_json(request: &mut reqwest::Request, bytes: bytes::Bytes) {
    if !request.headers().contains_key(http::header::CONTENT_TYPE) {
        request.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    *request.body_mut() = Some(bytes.into());
}

#[allow(clippy::too_many_arguments)]
fn observe(
    inner: &ClientInner,
    config: &Config,
    ep: &EndpointState,
    trace: TraceContext,
    attempts: u32,
    elapsed_ms: f64,
    result: &Result<Response, HarnessError>,
) {
    let m = &inner.metrics;
    ep.latency.observe(elapsed_ms / 1000.0);
    let status = match result {
        Ok(r) => Some(r.status),
        Err(e) => e.status,
    };
    ep.requests_counter(m, status).inc();
    let (service, endpoint, method) = &ep.names;
    if let Err(e) = result {
        m.errors
            .get_or_create(&ErrorLabels {
                service: service.as_ref().into(),
                endpoint: endpoint.as_ref().into(),
                method: method.as_ref().into(),
                kind: e.name().into(),
            })
            .inc();
    }
    let log_enabled = config.log.enabled;
    let listeners = inner.listeners.read().clone();
    if !log_enabled && listeners.is_empty() {
        return;
    }
    let record = RequestRecord {
        ts_ms: SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
        client: inner.client_name.clone(),
        trace_id: trace.trace_id,
        span_id: trace.span_id,
        service: service.clone(),
        endpoint: endpoint.clone(),
        method: method.clone(),
        status,
        duration_ms: (elapsed_ms * 1000.0).round() / 1000.0,
        attempts,
        retry_count: attempts.saturating_sub(1),
        breaker: ep.breaker.state().as_str(),
        error_kind: result.as_ref().err().map(|e| e.name()),
        error_code: result.as_ref().err().and_then(|e| e.code.clone()),
        error_message: result.as_ref().err().map(|e| e.message.clone()),
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
    // Listeners run after every lock is released (the read guard was dropped by clone()).
    for l in listeners {
        l.on_request(&record);
    }
    if log_enabled {
        log::write_stderr(record);
    }
}

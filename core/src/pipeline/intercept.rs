//! Host interceptors in the request path (`crate::interceptors`): an application
//! interceptor's `before` changes the call once, ahead of its first attempt, and its
//! `after` sees the answer the caller gets; an attempt interceptor's `before` changes each
//! attempt's request (ahead of credentials and signing, so a signature covers its changes)
//! and its `after` sees each answer an attempt accepted.
//!
//! Guarantees: with no interceptor registered, nothing here runs; a refusal in `before`
//! sends nothing; a change is checked as a caller's input is, and a rebuilt request is
//! built by the same code as the caller's.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};

use super::call::{build_request, Call};
use super::classify::Classified;
use super::outcome::{Once, Reached};
use crate::breaker::Outcome;
use crate::engine::Engine;
use crate::error::HarnessError;
use crate::interceptors::{self, Editable, Entry, Level, Limits, Phase, Seen, Site, Verdict};
use crate::request::Body;
use crate::retry::Failure;
use crate::transport::OutgoingRequest;

fn select(engine: &Engine, call: &Call, level: Level, phase: Phase) -> Vec<Arc<Entry>> {
    select_for(engine, call, level, phase, call.lanes.current)
}

fn select_for(engine: &Engine, call: &Call, level: Level, phase: Phase, lane: usize) -> Vec<Arc<Entry>> {
    let list = &engine.registry.interceptors;
    if list.is_empty() {
        return Vec::new();
    }
    let cfg = &call.snapshot.config.interceptors;
    let provider_service = call.svc(lane).name.as_ref();
    match level {
        Level::Application => list.select(cfg, level, phase, &[&call.plan.name, &call.req.service]),
        Level::Attempt => list.select(cfg, level, phase, &[&call.plan.name, &call.req.service, provider_service]),
    }
}

/// How long one interceptor may take now: `interceptors.timeout_ms`, within the deadline.
fn budget(call: &Call) -> impl Fn() -> Duration + '_ {
    let cap = Duration::from_millis(call.snapshot.config.interceptors.timeout_ms);
    move || cap.min(call.deadline.remaining())
}

fn site(call: &Call, level: Level, attempt: bool) -> Site<'_> {
    site_for(call, level, attempt.then_some((call.lanes.current, call.attempts)))
}

/// `attempt`: the attempt's provider and number.
fn site_for(call: &Call, level: Level, attempt: Option<(usize, u32)>) -> Site<'_> {
    let (service, endpoint, method) = &call.ep.names;
    let provider = attempt.filter(|_| call.route.is_some()).map(|(lane, _)| call.plan.providers[lane].id.as_ref());
    Site {
        level,
        method,
        service,
        endpoint,
        attempt: attempt.map(|(_, n)| n),
        provider,
        trace_id: call.trace.trace_id.as_str(),
    }
}

fn limits(call: &Call, lane: usize) -> (u64, Option<String>) {
    let svc = call.svc(lane);
    (svc.config.limits.max_request_bytes, svc.credential.as_ref().and_then(|c| c.query_param()).map(str::to_string))
}

/// The application interceptors' `before`, once per call, ahead of its first attempt.
pub(crate) async fn application_before(engine: &Engine, call: &mut Call) -> Result<(), HarnessError> {
    let list = select(engine, call, Level::Application, Phase::Before);
    if list.is_empty() {
        return Ok(());
    }
    let (max_request_bytes, param) = limits(call, call.lanes.current);
    let (mut path, mut query, mut headers) = (call.req.path.clone(), call.req.query.clone(), call.req.headers.clone());
    let mut body = match &call.req.body {
        Body::Empty => None,
        Body::Bytes(b) | Body::JsonText(b) => Some(b.clone()),
        Body::Json(v) => Some(Bytes::from(serde_json::to_vec(v).unwrap_or_default())),
    };
    let original = body.clone();
    let mut secrets = Vec::new();
    let mut edit = Editable { path: &mut path, query: &mut query, headers: &mut headers, body: &mut body, json_set: false, secrets: &mut secrets };
    {
        let site = site(call, Level::Application, false);
        interceptors::before(&list, &site, &mut edit, Limits { max_request_bytes, credential_param: param.as_deref() }, budget(call)).await?;
    }
    let json_set = edit.json_set;
    call.extra_secrets.lock().extend(secrets);
    call.req.path = path;
    call.req.query = query;
    call.req.headers = headers;
    if body != original {
        let was_json = matches!(call.req.body, Body::Json(_) | Body::JsonText(_));
        call.req.body = match body {
            None => Body::Empty,
            Some(b) if json_set || was_json => Body::JsonText(b),
            Some(b) => Body::Bytes(b),
        };
    }
    call.rebuild_first()
}

/// The attempt interceptors' `before` on one attempt's request (credentials come after).
/// `lane` is the attempt's provider and `attempt` its number (a hedge's is the next one).
pub(crate) async fn attempt_before(engine: &Engine, call: &Call, lane: usize, attempt: u32, request: &mut OutgoingRequest) -> Result<(), HarnessError> {
    let list = select_for(engine, call, Level::Attempt, Phase::Before, lane);
    if list.is_empty() {
        return Ok(());
    }
    let (max_request_bytes, param) = limits(call, lane);
    let svc = call.svc(lane).clone();
    let base = svc.base_path.as_str();
    let full = request.url.path().to_string();
    let mut path = full.strip_prefix(base).filter(|p| p.starts_with('/')).unwrap_or(&full).to_string();
    let original_path = path.clone();
    let original_query: Vec<(String, String)> = request.url.query_pairs().into_owned().collect();
    let mut query = original_query.clone();
    let mut headers: Vec<(String, String)> =
        request.headers.iter().filter(|(k, _)| *k != "traceparent").map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect();
    let original_headers = headers.clone();
    let mut body = request.body.clone();
    let mut secrets = Vec::new();
    let mut edit = Editable { path: &mut path, query: &mut query, headers: &mut headers, body: &mut body, json_set: false, secrets: &mut secrets };
    {
        let site = site_for(call, Level::Attempt, Some((lane, attempt)));
        interceptors::before(&list, &site, &mut edit, Limits { max_request_bytes, credential_param: param.as_deref() }, budget(call)).await?;
    }
    let json_set = edit.json_set;
    call.extra_secrets.lock().extend(secrets);
    if path != original_path {
        request.url.set_path(&format!("{base}{path}"));
    }
    if query != original_query {
        request.url.set_query(None);
        if !query.is_empty() {
            request.url.query_pairs_mut().extend_pairs(query.iter());
        }
    }
    if headers != original_headers {
        let trace = request.headers.get("traceparent").cloned();
        let mut map = http::HeaderMap::with_capacity(headers.len() + 1);
        for (k, v) in &headers {
            // Checked by `interceptors::apply`; a header the request had is valid as it was.
            let (Ok(name), Ok(mut value)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) else { continue };
            value.set_sensitive(true);
            map.append(name, value);
        }
        if let Some(t) = trace {
            map.insert("traceparent", t);
        }
        request.headers = map;
    }
    if json_set && !request.headers.contains_key(http::header::CONTENT_TYPE) {
        request.headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    request.body = body;
    Ok(())
}

/// The attempt interceptors' `after` on an answer the attempt accepted: a rejection makes
/// the attempt a failure (retried or failed over when retryable, else the call's error).
pub(crate) async fn attempt_after(engine: &Engine, call: &Call, once: Once, elapsed: Duration) -> Once {
    let Once::Reached(reached) = once else { return once };
    let list = select(engine, call, Level::Attempt, Phase::After);
    if list.is_empty() {
        return Once::Reached(reached);
    }
    let site = site(call, Level::Attempt, true);
    let (status, headers, body) = parts(&reached);
    let seen = Seen { status, headers: &headers, elapsed_ms: elapsed.as_secs_f64() * 1000.0, body: body.as_deref() };
    match interceptors::after(&list, &site, &seen, budget(call)).await {
        Verdict::Pass => Once::Reached(reached),
        Verdict::Fail { error, retryable: true } => Once::Failed(Classified { failure: Failure::Declared, health: Outcome::Failure, error, retry_after: None }),
        Verdict::Fail { error, retryable: false } => Once::Fatal(error),
    }
}

/// The application interceptors' `after` on the answer the caller gets.
pub(crate) async fn application_after(engine: &Engine, call: &Call, answer: (u16, Vec<(String, String)>, Option<Bytes>)) -> Result<(), HarnessError> {
    let list = select(engine, call, Level::Application, Phase::After);
    if list.is_empty() {
        return Ok(());
    }
    let site = site(call, Level::Application, false);
    let (status, headers, body) = answer;
    let seen = Seen { status, headers: &headers, elapsed_ms: call.started.elapsed().as_secs_f64() * 1000.0, body: body.as_deref() };
    match interceptors::after(&list, &site, &seen, budget(call)).await {
        Verdict::Pass => Ok(()),
        Verdict::Fail { error, .. } => Err(error),
    }
}

/// What `after` sees of an answer, owned (a stream's body source is not shared across an await).
pub(crate) fn parts(reached: &Reached) -> (u16, Vec<(String, String)>, Option<Bytes>) {
    match reached {
        Reached::Buffered(r) => (r.status, r.headers.clone(), Some(r.body.clone())),
        Reached::Stream(o) => (o.status, o.headers.clone(), None),
    }
}

/// A call's first request, rebuilt after its application interceptors changed it.
impl Call {
    fn rebuild_first(&mut self) -> Result<(), HarnessError> {
        if let Some(rc) = self.route.as_mut() {
            if rc.json.is_some() {
                rc.json = Some(super::call::json_object(&self.req.body)?);
            }
            return Ok(());
        }
        if self.first.is_some() {
            let svc = self.plan.providers[0].svc.clone();
            self.first = Some(build_request(&svc, &self.req, &self.req.body, &self.method, &self.wire)?);
        }
        Ok(())
    }
}

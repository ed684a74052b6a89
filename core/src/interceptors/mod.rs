//! Host interceptors: a team's own rules on every call (a tenant header, a body field one
//! partner needs, a response header to log, a 200 that is really an error), written in
//! Python, TypeScript or Kotlin and run by the pipeline (`client.add_interceptor`).
//!
//! Two levels, as OkHttp has: an `application` interceptor runs once per call (its
//! `before` ahead of the first attempt, its `after` on the answer the caller gets); an
//! `attempt` interceptor runs once per attempt, retries, hedges and failover attempts
//! included (its `before` ahead of credentials and signing, its `after` on each head
//! received). The level comes from the registration, or from `interceptors.levels`.
//!
//! JSON text crosses each way (`HostInterceptor::call`):
//! - `before`: `{"name", "level", "method", "service", "endpoint", "path", "query": [[k, v]],
//!   "headers": [[k, v]], "body_base64"?, "json"?, "attempt"?, "provider"?, "trace_id"}` ->
//!   `null` (no change) or changes `{"headers"?: {name: value | null}, "query"?: {name:
//!   value | null}, "path"?, "json"?: <value>, "body_base64"?, "secret"?: [header names]}`
//!   (`null` removes);
//! - `after`: `{"name", "level", "method", "service", "endpoint", "status", "headers",
//!   "elapsed_ms", "attempt"?, "provider"?, "trace_id", "body_base64"?, "json"?}` (the body
//!   only with `want_body`, and only for a buffered answer) -> `null`, or `{"fail":
//!   {"message", "retryable"?: bool, "code"?}}` (a binding's `Reject`).
//!
//! Guarantees: interceptors run in registration order, on the host's own threads (the
//! binding's concern), each call within `interceptors.timeout_ms` and the call's deadline;
//! one that raises, hangs or returns something else is an `InterceptorError` naming it
//! and the phase, never a crash; its changes are checked as a caller's input is (no
//! framing headers, no path escape, a body within `limits.max_request_bytes`), and a
//! header it names in `secret` is redacted and scrubbed like a credential. A client with
//! no interceptor pays one atomic load per call.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ErrorKind, HarnessError};
use crate::redact::escape_control;
use crate::transport::BoxFuture;

/// Which of an interceptor's functions the core calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Before,
    After,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::After => "after",
        }
    }
}

/// Once per call, or once per attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Application,
    Attempt,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Application => "application",
            Level::Attempt => "attempt",
        }
    }

    /// `application` or `attempt`; anything else a `ConfigError` naming `field`.
    pub fn parse(field: &str, s: &str) -> Result<Level, HarnessError> {
        match s {
            "application" => Ok(Level::Application),
            "attempt" => Ok(Level::Attempt),
            other => Err(HarnessError::config(format!("{field}: expected `application` or `attempt`, got {:?}", escape_control(other)))),
        }
    }
}

/// `interceptors:` in the config.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct InterceptorsConfig {
    /// The longest one interceptor function may take per call (within the call's deadline).
    pub timeout_ms: u64,
    /// A registered interceptor's level by name, over the one it was registered with.
    pub levels: BTreeMap<String, Level>,
}

impl Default for InterceptorsConfig {
    fn default() -> Self {
        InterceptorsConfig { timeout_ms: 1000, levels: BTreeMap::new() }
    }
}

impl InterceptorsConfig {
    pub fn validate(&self) -> Result<(), HarnessError> {
        if self.timeout_ms == 0 {
            return Err(HarnessError::config("interceptors.timeout_ms: expected an integer >= 1, got 0"));
        }
        Ok(())
    }
}

/// An interceptor as a binding gives it to the core: one entry point, JSON text each way.
/// `Err` is the host exception's description (`TypeName: message`).
pub trait HostInterceptor: Send + Sync {
    fn call(&self, phase: Phase, input: String) -> BoxFuture<'_, Result<String, String>>;
}

/// What a registration says besides the functions.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// Names it in errors and in `interceptors.levels`; letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// `None`: `application`, unless `interceptors.levels` says otherwise.
    pub level: Option<Level>,
    /// Only calls to these services or routes (an attempt interceptor: also a route's
    /// provider's service); empty means every call.
    pub services: Vec<String>,
    pub before: bool,
    pub after: bool,
    /// `after` sees a buffered answer's body.
    pub want_body: bool,
}

pub(crate) struct Entry {
    pub reg: Registration,
    host: Arc<dyn HostInterceptor>,
}

/// The interceptors a client has, in registration order.
#[derive(Default)]
pub struct Interceptors {
    list: ArcSwap<Vec<Arc<Entry>>>,
}

/// A name: 1-64 of letters, digits, `-`, `_` and `.`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Interceptors {
    /// Adds one (a second of the same name replaces the first, in its place).
    pub fn add(&self, reg: Registration, host: Arc<dyn HostInterceptor>) -> Result<(), HarnessError> {
        if !valid_name(&reg.name) {
            return Err(HarnessError::config(format!(
                "name: an interceptor's name is 1-64 letters, digits, `-`, `_` or `.`, got {:?}",
                escape_control(&reg.name)
            )));
        }
        if !reg.before && !reg.after {
            return Err(HarnessError::config(format!("interceptor `{}`: give `before`, `after` or both", reg.name)));
        }
        for (i, s) in reg.services.iter().enumerate() {
            if s.is_empty() {
                return Err(HarnessError::config(format!("services[{i}]: empty")));
            }
        }
        let entry = Arc::new(Entry { reg, host });
        self.list.rcu(|old| {
            let mut v: Vec<Arc<Entry>> = old.iter().cloned().collect();
            match v.iter().position(|e| e.reg.name == entry.reg.name) {
                Some(i) => v[i] = entry.clone(),
                None => v.push(entry.clone()),
            }
            v
        });
        Ok(())
    }

    /// Removes the one of this name; whether there was one.
    pub fn remove(&self, name: &str) -> bool {
        let mut found = false;
        self.list.rcu(|old| {
            let v: Vec<Arc<Entry>> = old.iter().filter(|e| e.reg.name != name).cloned().collect();
            found = v.len() != old.len();
            v
        });
        found
    }

    pub fn is_empty(&self) -> bool {
        self.list.load().is_empty()
    }

    /// Those of `level` and `phase` that apply to a call to `names` (the called name, and
    /// for an attempt the provider's service), in registration order.
    pub(crate) fn select(&self, cfg: &InterceptorsConfig, level: Level, phase: Phase, names: &[&str]) -> Vec<Arc<Entry>> {
        let list = self.list.load();
        if list.is_empty() {
            return Vec::new();
        }
        list.iter()
            .filter(|e| {
                let lvl = cfg.levels.get(&e.reg.name).copied().or(e.reg.level).unwrap_or(Level::Application);
                let wants = match phase {
                    Phase::Before => e.reg.before,
                    Phase::After => e.reg.after,
                };
                lvl == level && wants && (e.reg.services.is_empty() || e.reg.services.iter().any(|s| names.contains(&s.as_str())))
            })
            .cloned()
            .collect()
    }
}

/// What an interceptor's `before` sees (its JSON is what crosses to the host).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InterceptedRequest {
    /// The interceptor's name.
    pub name: String,
    pub level: Level,
    pub method: String,
    /// The called service or route.
    pub service: String,
    /// The endpoint label (template).
    pub endpoint: String,
    /// The path (without the service's base path), query not included.
    pub path: String,
    /// Query parameters as `[name, value]` pairs, in order.
    pub query: Vec<(String, String)>,
    /// Headers as `[name, value]` pairs; credentials are not among them (they come after).
    pub headers: Vec<(String, String)>,
    /// The body, base64 (a binding hands the host bytes); `null` when there is none.
    pub body_base64: Option<String>,
    /// The body parsed, when it is JSON.
    pub json: Option<Value>,
    /// The attempt number (an attempt interceptor), 1 for the first.
    pub attempt: Option<u32>,
    /// The route's provider of this attempt.
    pub provider: Option<String>,
    pub trace_id: String,
}

/// What an interceptor's `after` sees.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InterceptedResponse {
    pub name: String,
    pub level: Level,
    pub method: String,
    pub service: String,
    pub endpoint: String,
    pub status: u16,
    /// Headers as `[name, value]` pairs, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Since the attempt was sent (an attempt interceptor) or the call started.
    pub elapsed_ms: f64,
    pub attempt: Option<u32>,
    pub provider: Option<String>,
    pub trace_id: String,
    /// The body, base64: only with `want_body`, and only for a buffered answer.
    pub body_base64: Option<String>,
    /// The body parsed, when it is JSON (with `want_body`).
    pub json: Option<Value>,
}

/// What `before` may return (`null`: no change). A binding takes its language's form
/// (bytes for `body`) and crosses this.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestChanges {
    /// Headers to set (`null` removes one); framing headers may not be changed.
    pub headers: Option<BTreeMap<String, Option<String>>>,
    /// Query parameters to set (`null` removes one).
    pub query: Option<BTreeMap<String, Option<String>>>,
    /// A new path (checked as a caller's: no dot segments, no query).
    pub path: Option<String>,
    /// A new JSON body (sets `content-type: application/json` when none is set).
    pub json: Option<Value>,
    /// A new body, base64 (within `limits.max_request_bytes`).
    pub body_base64: Option<String>,
    /// Names of headers whose values are secret: redacted and scrubbed like credentials.
    pub secret: Option<Vec<String>>,
}

/// What `after` returns to fail an answer (a binding's `Reject`), as `{"fail": ...}`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
pub struct Rejection {
    pub message: String,
    /// Retried (or failed over) by the retry rules, as a 503 would be.
    #[serde(default)]
    pub retryable: bool,
    /// The error's `code` (default `rejected`).
    #[serde(default)]
    pub code: Option<String>,
}

/// Longest text an interceptor may return.
const MAX_OUTPUT: usize = 64 << 20;

/// Who is called, for the input: the level, the call's names, the attempt.
pub(crate) struct Site<'a> {
    pub level: Level,
    pub method: &'a str,
    pub service: &'a str,
    pub endpoint: &'a str,
    pub attempt: Option<u32>,
    pub provider: Option<&'a str>,
    pub trace_id: &'a str,
}

impl Site<'_> {
    fn request(&self, name: &str) -> InterceptedRequest {
        InterceptedRequest {
            name: name.to_string(),
            level: self.level,
            method: self.method.to_string(),
            service: self.service.to_string(),
            endpoint: self.endpoint.to_string(),
            path: String::new(),
            query: Vec::new(),
            headers: Vec::new(),
            body_base64: None,
            json: None,
            attempt: self.attempt,
            provider: self.provider.map(str::to_string),
            trace_id: self.trace_id.to_string(),
        }
    }
}

/// The error for interceptor `name` in `phase`: `code` says what happened (`raised`,
/// `timeout`, `invalid`, or a `Reject`'s own code).
pub fn error(name: &str, phase: Phase, code: &str, message: String) -> HarnessError {
    let mut e = HarnessError::new(ErrorKind::Interceptor, format!("interceptor `{name}` {}: {message}", phase.as_str()));
    e.code = Some(code.to_string());
    e
}

/// Calls one interceptor within `budget`; what it returned, parsed (`null` included).
async fn call(e: &Entry, phase: Phase, input: Value, budget: Duration) -> Result<Value, HarnessError> {
    let name = &e.reg.name;
    let out = match tokio::time::timeout(budget, e.host.call(phase, input.to_string())).await {
        Err(_) => return Err(error(name, phase, "timeout", format!("did not return within {} ms", budget.as_millis()))),
        Ok(Err(raised)) => return Err(error(name, phase, "raised", format!("raised {}", crate::redact::truncate_chars(&raised, 500)))),
        Ok(Ok(out)) => out,
    };
    if out.len() > MAX_OUTPUT {
        return Err(error(name, phase, "invalid", format!("returned more than {MAX_OUTPUT} bytes")));
    }
    serde_json::from_str(&out).map_err(|err| error(name, phase, "invalid", format!("did not return JSON: {err}")))
}

/// A request as an interceptor's `before` sees and changes it, whichever level.
pub(crate) struct Editable<'a> {
    pub path: &'a mut String,
    pub query: &'a mut Vec<(String, String)>,
    pub headers: &'a mut Vec<(String, String)>,
    pub body: &'a mut Option<bytes::Bytes>,
    /// The body was replaced with JSON (a `content-type: application/json` is due).
    pub json_set: bool,
    /// Header values named secret, to redact and scrub.
    pub secrets: &'a mut Vec<String>,
}

/// Whether a body is JSON by its content type (or, with none, by its first byte).
fn json_of(headers: &[(String, String)], body: &[u8]) -> Option<Value> {
    let ct = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.to_ascii_lowercase());
    let json = match &ct {
        Some(ct) => ct.contains("json"),
        None => body.first().is_some_and(|b| matches!(b, b'{' | b'[')),
    };
    if !json || body.is_empty() || crate::json::check_text("body", body).is_err() {
        return None;
    }
    serde_json::from_slice(body).ok()
}

fn body_fields(headers: &[(String, String)], body: Option<&[u8]>) -> (Option<String>, Option<Value>) {
    match body {
        Some(b) => (Some(base64::engine::general_purpose::STANDARD.encode(b)), json_of(headers, b)),
        None => (None, None),
    }
}

/// Runs the `before` of each of `list` on `req`, in order; an interceptor's change is
/// checked before the next one sees it.
pub(crate) async fn before(list: &[Arc<Entry>], site: &Site<'_>, req: &mut Editable<'_>, limits: Limits<'_>, budget: impl Fn() -> Duration) -> Result<(), HarnessError> {
    for e in list {
        let (body_base64, json) = body_fields(req.headers, req.body.as_deref());
        let input = InterceptedRequest { path: req.path.clone(), query: req.query.clone(), headers: req.headers.clone(), body_base64, json, ..site.request(&e.reg.name) };
        let out = call(e, Phase::Before, serde_json::to_value(&input).unwrap_or_default(), budget()).await?;
        apply(&e.reg.name, out, req, &limits)?;
    }
    Ok(())
}

/// What changes must stay within.
#[derive(Clone, Copy)]
pub(crate) struct Limits<'a> {
    pub max_request_bytes: u64,
    /// The service's query credential parameter, which no change may set.
    pub credential_param: Option<&'a str>,
}

/// The keys of `RequestChanges`.
const CHANGES: [&str; 6] = ["headers", "query", "path", "json", "body_base64", "secret"];

fn apply(name: &str, out: Value, req: &mut Editable<'_>, limits: &Limits<'_>) -> Result<(), HarnessError> {
    let bad = |m: String| error(name, Phase::Before, "invalid", m);
    let o = match out {
        Value::Null => return Ok(()),
        Value::Object(o) => o,
        other => return Err(bad(format!("returned {} (expected changes as an object, or nothing)", kind_of(&other)))),
    };
    for k in o.keys() {
        if !CHANGES.contains(&k.as_str()) {
            return Err(bad(format!("returned an unknown change `{}` (headers, query, path, json, body, secret)", escape_control(k))));
        }
    }
    if let Some(h) = o.get("headers").filter(|v| !v.is_null()) {
        let h = h.as_object().ok_or_else(|| bad("`headers` is not an object".into()))?;
        for (k, v) in h {
            if crate::target::is_forbidden_header(k) {
                return Err(bad(format!("headers.{}: this header is set by Harness (framing and target headers cannot be changed)", escape_control(k))));
            }
            if http::HeaderName::try_from(k.as_str()).is_err() {
                return Err(bad(format!("headers: invalid header name {:?}", escape_control(k))));
            }
            req.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
            match v {
                Value::Null => {}
                Value::String(s) => {
                    if http::HeaderValue::try_from(s.as_str()).is_err() {
                        return Err(bad(format!("headers.{k}: invalid header value (control characters)")));
                    }
                    req.headers.push((k.clone(), s.clone()));
                }
                other => return Err(bad(format!("headers.{k}: expected a string or null, got {}", kind_of(other)))),
            }
        }
    }
    if let Some(q) = o.get("query").filter(|v| !v.is_null()) {
        let q = q.as_object().ok_or_else(|| bad("`query` is not an object".into()))?;
        for (k, v) in q {
            if limits.credential_param == Some(k.as_str()) {
                return Err(bad(format!("query.{}: this parameter carries the service's credential", escape_control(k))));
            }
            req.query.retain(|(n, _)| n != k);
            match v {
                Value::Null => {}
                Value::String(s) => req.query.push((k.clone(), s.clone())),
                Value::Number(n) => req.query.push((k.clone(), n.to_string())),
                Value::Bool(b) => req.query.push((k.clone(), b.to_string())),
                other => return Err(bad(format!("query.{k}: expected a string or null, got {}", kind_of(other)))),
            }
        }
    }
    if let Some(p) = o.get("path").filter(|v| !v.is_null()) {
        let p = p.as_str().ok_or_else(|| bad("`path` is not a string".into()))?;
        if !p.starts_with('/') || p.contains('?') || p.contains('#') {
            return Err(bad(format!("path: {:?} is not a path starting with `/` (no query or fragment)", escape_control(p))));
        }
        crate::target::check_path(p).map_err(|e| bad(e.message))?;
        *req.path = p.to_string();
    }
    let body = match (o.get("json"), o.get("body_base64").filter(|v| !v.is_null())) {
        (Some(_), Some(_)) => return Err(bad("give `json` or `body`, not both".into())),
        (Some(j), None) => {
            crate::json::check_value("json", j).map_err(|e| bad(e.message))?;
            req.json_set = true;
            Some(bytes::Bytes::from(serde_json::to_vec(j).map_err(|e| bad(e.to_string()))?))
        }
        (None, Some(b)) => {
            let b = b.as_str().ok_or_else(|| bad("`body` is not bytes".into()))?;
            Some(bytes::Bytes::from(base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| bad(format!("body: {e}")))?))
        }
        (None, None) => None,
    };
    if let Some(b) = body {
        if b.len() as u64 > limits.max_request_bytes {
            return Err(bad(format!("body: {} bytes is over limits.max_request_bytes ({})", b.len(), limits.max_request_bytes)));
        }
        *req.body = Some(b);
    }
    if let Some(s) = o.get("secret").filter(|v| !v.is_null()) {
        let s = s.as_array().ok_or_else(|| bad("`secret` is not a list of header names".into()))?;
        for n in s {
            let n = n.as_str().ok_or_else(|| bad("`secret` is not a list of header names".into()))?;
            for (k, v) in req.headers.iter() {
                if k.eq_ignore_ascii_case(n) && !v.is_empty() {
                    req.secrets.push(v.clone());
                }
            }
        }
    }
    Ok(())
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// An answer as `after` sees it.
pub(crate) struct Seen<'a> {
    pub status: u16,
    pub headers: &'a [(String, String)],
    pub elapsed_ms: f64,
    /// A buffered answer's body.
    pub body: Option<&'a [u8]>,
}

/// What `after` decided about an answer.
pub(crate) enum Verdict {
    Pass,
    /// A `Reject`: the answer is a failure, retried (or failed over) when `retryable`.
    Fail { error: HarnessError, retryable: bool },
}

/// Runs the `after` of each of `list` on an answer, in order, up to the first that fails it.
pub(crate) async fn after(list: &[Arc<Entry>], site: &Site<'_>, seen: &Seen<'_>, budget: impl Fn() -> Duration) -> Verdict {
    for e in list {
        let (body_base64, json) = if e.reg.want_body { body_fields(seen.headers, seen.body) } else { (None, None) };
        let r = site.request(&e.reg.name);
        let input = InterceptedResponse {
            name: r.name,
            level: r.level,
            method: r.method,
            service: r.service,
            endpoint: r.endpoint,
            status: seen.status,
            headers: seen.headers.to_vec(),
            elapsed_ms: seen.elapsed_ms,
            attempt: r.attempt,
            provider: r.provider,
            trace_id: r.trace_id,
            body_base64,
            json,
        };
        let out = match call(e, Phase::After, serde_json::to_value(&input).unwrap_or_default(), budget()).await {
            Ok(out) => out,
            Err(error) => return Verdict::Fail { error, retryable: false },
        };
        let fail = match &out {
            Value::Null => continue,
            Value::Object(o) if o.len() == 1 && o.contains_key("fail") => &o["fail"],
            other => {
                let error = error(&e.reg.name, Phase::After, "invalid", format!("returned {} (expected nothing, or a Reject)", kind_of(other)));
                return Verdict::Fail { error, retryable: false };
            }
        };
        let r: Rejection = match serde_json::from_value(fail.clone()) {
            Ok(r) => r,
            Err(err) => return Verdict::Fail { error: error(&e.reg.name, Phase::After, "invalid", format!("returned a bad rejection: {err}")), retryable: false },
        };
        let code = r.code.as_deref().filter(|c| !c.is_empty()).unwrap_or("rejected");
        let retryable = r.retryable;
        let mut error = error(&e.reg.name, Phase::After, code, format!("rejected the answer ({}): {}", seen.status, crate::redact::truncate_chars(&r.message, 500)));
        error.status = Some(seen.status);
        return Verdict::Fail { error, retryable };
    }
    Verdict::Pass
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fixed(&'static str);
    impl HostInterceptor for Fixed {
        fn call(&self, _: Phase, _: String) -> BoxFuture<'_, Result<String, String>> {
            let out = self.0.to_string();
            Box::pin(async move { Ok(out) })
        }
    }

    fn reg(name: &str) -> Registration {
        Registration { name: name.into(), before: true, ..Default::default() }
    }

    #[test]
    fn names_and_order() {
        let i = Interceptors::default();
        assert!(i.add(reg("a b"), Arc::new(Fixed("null"))).is_err());
        assert!(i.add(Registration { name: "x".into(), ..Default::default() }, Arc::new(Fixed("null"))).is_err());
        i.add(reg("one"), Arc::new(Fixed("null"))).unwrap();
        i.add(Registration { level: Some(Level::Attempt), ..reg("two") }, Arc::new(Fixed("null"))).unwrap();
        i.add(reg("three"), Arc::new(Fixed("null"))).unwrap();
        i.add(reg("one"), Arc::new(Fixed("{}"))).unwrap();
        let cfg = InterceptorsConfig::default();
        let names: Vec<String> = i.select(&cfg, Level::Application, Phase::Before, &["svc"]).iter().map(|e| e.reg.name.clone()).collect();
        assert_eq!(names, ["one", "three"]);
        let cfg = InterceptorsConfig { levels: [("three".to_string(), Level::Attempt)].into(), ..Default::default() };
        let names: Vec<String> = i.select(&cfg, Level::Attempt, Phase::Before, &["svc"]).iter().map(|e| e.reg.name.clone()).collect();
        assert_eq!(names, ["two", "three"]);
        assert!(i.remove("two") && !i.remove("two"));
    }

    fn edit(out: Value) -> Result<(String, Vec<(String, String)>, Vec<(String, String)>, Option<bytes::Bytes>, Vec<String>), HarnessError> {
        let (mut path, mut query, mut headers, mut body, mut secrets) =
            ("/a".to_string(), vec![("q".to_string(), "1".to_string())], vec![("x-old".to_string(), "1".to_string())], None, Vec::new());
        let mut e = Editable { path: &mut path, query: &mut query, headers: &mut headers, body: &mut body, json_set: false, secrets: &mut secrets };
        apply("t", out, &mut e, &Limits { max_request_bytes: 16, credential_param: Some("api_key") })?;
        Ok((path, query, headers, body, secrets))
    }

    #[test]
    fn the_changes_read_are_the_schemas() {
        let schema = schemars::schema_for!(RequestChanges).to_value();
        let mut props: Vec<&str> = schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
        props.sort_unstable();
        let mut known = CHANGES.to_vec();
        known.sort_unstable();
        assert_eq!(props, known);
    }

    #[test]
    fn changes_are_checked_like_input() {
        let (_, q, h, b, s) = edit(json!({"headers": {"x-old": null, "x-tenant": "t1"}, "query": {"q": null, "page": 2}, "json": {"a": 1}, "secret": ["x-tenant"]})).unwrap();
        assert_eq!(h, [("x-tenant".to_string(), "t1".to_string())]);
        assert_eq!(q, [("page".to_string(), "2".to_string())]);
        assert_eq!(b.as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(s, ["t1"]);
        let refused = |v: Value, field: &str| {
            let e = edit(v).unwrap_err();
            assert_eq!((e.name(), e.code.as_deref()), ("InterceptorError", Some("invalid")));
            assert!(e.message.contains(field), "{}", e.message);
        };
        refused(json!({"headers": {"content-length": "1"}}), "headers.content-length");
        refused(json!({"headers": {"Host": "evil"}}), "headers.Host");
        refused(json!({"headers": {"x": "a\r\nb: c"}}), "headers.x");
        refused(json!({"path": "/a/../../admin"}), "path");
        refused(json!({"path": "/a/..;/admin"}), "path");
        refused(json!({"query": {"api_key": "mine"}}), "query.api_key");
        refused(json!({"json": "x".repeat(40)}), "limits.max_request_bytes");
        refused(json!({"body_base64": "%%%"}), "body");
        refused(json!({"nope": 1}), "unknown change `nope`");
        refused(json!([1]), "a list");
        assert_eq!(edit(json!({"path": "/b/c"})).unwrap().0, "/b/c");
    }
}

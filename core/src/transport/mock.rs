//! Mock mode: a transport that answers from rules, so business code runs with no downstream.
//!
//! The mock replaces only the socket: timeouts, retries, the breaker, metrics, logs and schema
//! validation run as they would for real. Rules come from config (`mock.services`) and from
//! host code (`client.mock(...)`, which take precedence, the latest first).
//!
//! Guarantees: off unless `mock.enabled` (or `HARNESS_MOCK=1`) or a host rule names the
//! service; announced once per client on stderr; a request no rule matches fails with a
//! `ConfigError` naming the method and path (never a real request); `{name}` path variables
//! are substituted into string values of the answer, escaped as JSON.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::exchange::{BodySource, BoxFuture, Exchange, Failure, OutgoingRequest, Transport, TransportFailure};
use crate::endpoint;
use crate::error::HarnessError;
use crate::redact::escape_control;

/// Rules named in an unmatched request's error, at most.
const MAX_LISTED: usize = 8;

/// `mock:`
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MockConfig {
    pub enabled: bool,
    /// Rules per service, tried in order.
    pub services: BTreeMap<String, Vec<MockRuleConfig>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MockRuleConfig {
    #[serde(rename = "match")]
    pub matches: MockMatch,
    #[serde(default = "ok")]
    pub status: u16,
    pub json: Option<Value>,
    /// A JSON file, read when the config is loaded (relative: to the config file's folder,
    /// or the working directory for a config given as data).
    pub json_file: Option<String>,
    /// A text body.
    pub body: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub latency_ms: u64,
}

fn ok() -> u16 {
    200
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MockMatch {
    /// Any method when absent.
    pub method: Option<String>,
    /// A path template (`/orders/{id}`) relative to the service's base URL, or `*`.
    pub path: String,
}

impl MockConfig {
    /// True when mocks replace every service: `enabled`, or `HARNESS_MOCK=1` in the environment.
    pub fn active(&self) -> bool {
        self.enabled || std::env::var("HARNESS_MOCK").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
    }
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct MockRule {
    method: Option<Method>,
    path: String,
    status: StatusCode,
    headers: HeaderMap,
    body: MockBody,
    latency: Duration,
}

#[derive(Debug, Clone)]
enum MockBody {
    Empty,
    Json(Value),
    Text(String),
}

/// What host code passes to `client.mock(...)`.
#[derive(Debug, Clone, Default)]
pub struct MockResponse {
    pub status: u16,
    pub json: Option<Value>,
    pub body: Option<String>,
    pub headers: Vec<(String, String)>,
    pub latency_ms: u64,
}

impl MockRule {
    /// Compiles a config rule; errors name `field` (e.g. `mock.services.orders[1]`).
    pub fn from_config(field: &str, r: &MockRuleConfig) -> Result<MockRule, HarnessError> {
        let bodies = [r.json.is_some(), r.json_file.is_some(), r.body.is_some()].iter().filter(|b| **b).count();
        if bodies > 1 {
            return Err(HarnessError::config(format!("{field}: give one of `json`, `json_file` or `body`")));
        }
        let body = match (&r.json, &r.json_file, &r.body) {
            (Some(v), _, _) => MockBody::Json(v.clone()),
            (_, Some(path), _) => {
                let text = crate::config::files::read_text(std::path::Path::new(path), &format!("{field}.json_file"))?;
                MockBody::Json(serde_json::from_str(&text).map_err(|e| HarnessError::config(format!("{field}.json_file: {:?} is not JSON: {e}", escape_control(path))))?)
            }
            (_, _, Some(t)) => MockBody::Text(t.clone()),
            _ => MockBody::Empty,
        };
        let headers: Vec<(String, String)> = r.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        MockRule::new(field, r.matches.method.as_deref(), &r.matches.path, r.status, body, &headers, r.latency_ms)
    }

    /// A rule from host code.
    pub fn from_host(method: &str, path: &str, resp: &MockResponse) -> Result<MockRule, HarnessError> {
        let body = match (&resp.json, &resp.body) {
            (Some(_), Some(_)) => return Err(HarnessError::config("mock: give `json` or `body`, not both")),
            (Some(v), None) => MockBody::Json(v.clone()),
            (None, Some(t)) => MockBody::Text(t.clone()),
            (None, None) => MockBody::Empty,
        };
        let method = (!method.is_empty() && method != "*").then_some(method);
        MockRule::new("mock", method, path, resp.status, body, &resp.headers, resp.latency_ms)
    }

    fn new(field: &str, method: Option<&str>, path: &str, status: u16, body: MockBody, headers: &[(String, String)], latency_ms: u64) -> Result<MockRule, HarnessError> {
        let method = method
            .map(|m| Method::from_bytes(m.to_ascii_uppercase().as_bytes()).map_err(|_| HarnessError::config(format!("{field}.match.method: not an HTTP method: {:?}", escape_control(m)))))
            .transpose()?;
        if path != "*" && (!path.starts_with('/') || path.chars().any(char::is_control)) {
            return Err(HarnessError::config(format!("{field}.match.path: expected a path template starting with `/` (or `*`), got {:?}", escape_control(path))));
        }
        let status = StatusCode::from_u16(status)
            .ok()
            .filter(|s| s.as_u16() >= 200)
            .ok_or_else(|| HarnessError::config(format!("{field}.status: expected an HTTP status from 200 to 999, got {status}")))?;
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) else {
                return Err(HarnessError::config(format!("{field}.headers.{}: not a valid HTTP header", escape_control(k))));
            };
            map.append(k, v);
        }
        if matches!(body, MockBody::Json(_)) && !map.contains_key(http::header::CONTENT_TYPE) {
            map.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if latency_ms > 600_000 {
            return Err(HarnessError::config(format!("{field}.latency_ms: expected at most 600000, got {latency_ms}")));
        }
        Ok(MockRule { method, path: path.to_string(), status, headers: map, body, latency: Duration::from_millis(latency_ms) })
    }

    fn describe(&self) -> String {
        format!("{} {}", self.method.as_ref().map(Method::as_str).unwrap_or("*"), self.path)
    }

    /// The answer, with captured path variables substituted, when this rule matches.
    fn answer(&self, method: &Method, path: &str) -> Option<(StatusCode, HeaderMap, Bytes)> {
        if self.method.as_ref().is_some_and(|m| m != method) {
            return None;
        }
        let vars = endpoint::capture(&self.path, path)?;
        let vars: Vec<(&str, String)> = vars.into_iter().map(|(k, v)| (k, percent_decode(v))).collect();
        let body = match &self.body {
            MockBody::Empty => Bytes::new(),
            MockBody::Json(v) => {
                let mut v = v.clone();
                if !vars.is_empty() {
                    substitute(&mut v, &vars);
                }
                Bytes::from(serde_json::to_vec(&v).expect("a JSON value serialises"))
            }
            MockBody::Text(t) => Bytes::from(vars.iter().fold(t.clone(), |acc, (k, v)| acc.replace(&format!("{{{k}}}"), v))),
        };
        Some((self.status, self.headers.clone(), body))
    }
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_else(|| s.to_string())
}

/// `{name}` inside string values (and keys are left alone).
fn substitute(v: &mut Value, vars: &[(&str, String)]) {
    match v {
        Value::String(s) if s.contains('{') => {
            for (k, val) in vars {
                *s = s.replace(&format!("{{{k}}}"), val);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| substitute(x, vars)),
        Value::Object(o) => o.values_mut().for_each(|x| substitute(x, vars)),
        _ => {}
    }
}

/// Host-set rules, per service; they outlive config reloads.
#[derive(Default)]
pub struct HostMocks {
    rules: RwLock<BTreeMap<String, Vec<MockRule>>>,
}

impl HostMocks {
    pub fn add(&self, service: &str, rule: MockRule) {
        self.rules.write().entry(service.to_string()).or_default().insert(0, rule);
    }

    /// Removes one service's rules, or all of them.
    pub fn clear(&self, service: Option<&str>) {
        match service {
            Some(s) => {
                self.rules.write().remove(s);
            }
            None => self.rules.write().clear(),
        }
    }

    pub fn has(&self, service: &str) -> bool {
        self.rules.read().get(service).is_some_and(|r| !r.is_empty())
    }
}

/// One service's mock.
pub struct MockTransport {
    service: String,
    base_path: String,
    rules: Vec<MockRule>,
    host: Arc<HostMocks>,
}

impl MockTransport {
    pub fn new(service: &str, base_path: &str, rules: Vec<MockRule>, host: Arc<HostMocks>) -> Self {
        MockTransport { service: service.to_string(), base_path: base_path.to_string(), rules, host }
    }

    fn answer(&self, method: &Method, path: &str) -> Result<(StatusCode, HeaderMap, Bytes, Duration), String> {
        let host = self.host.rules.read();
        let host_rules = host.get(&self.service).map(Vec::as_slice).unwrap_or(&[]);
        for r in host_rules.iter().chain(&self.rules) {
            if let Some((s, h, b)) = r.answer(method, path) {
                return Ok((s, h, b, r.latency));
            }
        }
        let count = host_rules.len() + self.rules.len();
        let mut known: Vec<String> = host_rules.iter().chain(&self.rules).take(MAX_LISTED).map(MockRule::describe).collect();
        if count > MAX_LISTED {
            known.push(format!("and {} more", count - MAX_LISTED));
        }
        Err(format!(
            "mock: no rule for {method} {} on service `{}` (rules: {})",
            escape_control(path),
            self.service,
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        ))
    }
}

impl Transport for MockTransport {
    fn send(&self, request: OutgoingRequest) -> BoxFuture<'_, Result<Exchange, TransportFailure>> {
        let path = request.url.path();
        let path = path.strip_prefix(self.base_path.as_str()).filter(|p| p.starts_with('/') || p.is_empty()).unwrap_or(path);
        let path = if path.is_empty() { "/" } else { path };
        let found = self.answer(&request.method, path);
        Box::pin(async move {
            match found {
                Ok((status, headers, body, latency)) => {
                    if !latency.is_zero() {
                        tokio::time::sleep(latency).await;
                    }
                    Ok(Exchange { status, headers, body: Box::new(OneChunk(Some(body))) })
                }
                Err(message) => Err(TransportFailure::new(Failure::Unmatched, message)),
            }
        })
    }
}

/// A whole body, handed over in one chunk.
pub(crate) struct OneChunk(pub Option<Bytes>);

impl BodySource for OneChunk {
    fn next_chunk(&mut self) -> BoxFuture<'_, Result<Option<Bytes>, TransportFailure>> {
        let next = self.0.take().filter(|b| !b.is_empty());
        Box::pin(async move { Ok(next) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(method: Option<&str>, path: &str, json: Value) -> MockRule {
        MockRule::new("t", method, path, 200, MockBody::Json(json), &[], 0).unwrap()
    }

    #[test]
    fn captures_become_values_escaped_as_json() {
        let r = rule(Some("GET"), "/orders/{id}", serde_json::json!({"id": "{id}", "note": "order {id}", "n": 1}));
        let (_, h, b) = r.answer(&Method::GET, "/orders/a%22b").unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v, serde_json::json!({"id": "a\"b", "note": "order a\"b", "n": 1}));
        assert_eq!(h.get("content-type").unwrap(), "application/json");
        assert!(r.answer(&Method::POST, "/orders/1").is_none());
        assert!(r.answer(&Method::GET, "/orders").is_none());
    }

    #[test]
    fn bad_rules_name_the_field() {
        let cfg: MockRuleConfig = serde_json::from_value(serde_json::json!({"match": {"path": "orders"}})).unwrap();
        assert!(MockRule::from_config("mock.services.o[0]", &cfg).unwrap_err().message.contains("mock.services.o[0].match.path"));
        let cfg: MockRuleConfig = serde_json::from_value(serde_json::json!({"match": {"path": "/x"}, "json_file": "/nonexistent/f.json"})).unwrap();
        assert!(MockRule::from_config("mock.services.o[1]", &cfg).unwrap_err().message.contains("mock.services.o[1].json_file"));
        let cfg: MockRuleConfig = serde_json::from_value(serde_json::json!({"match": {"path": "/x", "method": "G ET"}})).unwrap();
        assert!(MockRule::from_config("m", &cfg).unwrap_err().message.contains("m.match.method"));
        let cfg: MockRuleConfig = serde_json::from_value(serde_json::json!({"match": {"path": "/x"}, "status": 99})).unwrap();
        assert!(MockRule::from_config("m", &cfg).unwrap_err().message.contains("m.status"));
        assert!(serde_json::from_value::<MockRuleConfig>(serde_json::json!({"match": {"path": "/x"}, "jsn": 1})).is_err());
    }
}

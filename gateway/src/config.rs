//! The gateway's own sections of the config file: `gateway:` (limits, the admin key, drain)
//! and `callers:` (who may call, with which key, for what). Everything else is the core's
//! config, unchanged, so one file serves the library and the gateway alike.

use std::collections::BTreeMap;

use harness_core::ratelimit::RateLimitConfig;
use harness_core::{Config, HarnessError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `gateway:`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// SHA-256 (hex) of the admin key; without it the admin API answers 404.
    pub admin_key_sha256: Option<String>,
    /// Largest request body accepted (bytes).
    pub max_body_bytes: usize,
    /// Largest request head (request line and headers, bytes).
    pub max_header_bytes: usize,
    /// A request head must arrive within this long (slow-loris guard).
    pub header_timeout_ms: u64,
    /// A request body must arrive whole within this long after its head (408 after).
    pub body_timeout_ms: u64,
    /// On SIGTERM, in-flight requests and streams get this long to finish.
    pub drain_ms: u64,
    /// The output cap (`max_tokens`) reserved for, and sent with, the chat request of a caller
    /// with a budget that names none.
    pub default_max_tokens: u64,
    /// The same, per route.
    pub route_max_tokens: BTreeMap<String, u64>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig { admin_key_sha256: None, max_body_bytes: 1 << 20, max_header_bytes: 16 * 1024, header_timeout_ms: 5000, body_timeout_ms: 10_000, drain_ms: 10_000, default_max_tokens: 4096, route_max_tokens: BTreeMap::new() }
    }
}

/// One caller under `callers:`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CallerConfig {
    /// SHA-256 (hex) of the caller's key: the key itself is never stored.
    pub key_sha256: String,
    /// Routes this caller may use (`"*"`: all).
    #[serde(default)]
    pub routes: Vec<String>,
    /// Services this caller may reach under `/v1/services/` (`"*"`: all).
    #[serde(default)]
    pub services: Vec<String>,
    /// The caller's own rate limit (`rps`, `burst`, `max_wait_ms`, `shared` for a fleet).
    pub rate_limit: Option<RateLimitConfig>,
    /// Spend allowed per UTC day, in the routes' price unit.
    pub budget_per_day: Option<f64>,
}

/// The whole file, split.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub core: Config,
    pub gateway: GatewayConfig,
    pub callers: BTreeMap<String, CallerConfig>,
    /// Where this config reads the host (files, environment variables), by field path.
    pub host_references: BTreeMap<String, String>,
}

/// Where a config reads the host, by field path (`services.vault.auth.token.file`,
/// `mock.services.orders[0].json_file`): every `env` (an environment variable), every `file`
/// and `*_file` (a secret, an audit log, a fixture), every `response_schema` given as a path,
/// and the audit log's default file when auditing is on without one. Free-form data
/// (`headers`, mock `json` bodies, a route's `static` answer, inline schemas) is not searched.
pub fn host_references(config: &Value) -> BTreeMap<String, String> {
    fn walk(v: &Value, path: &str, out: &mut BTreeMap<String, String>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    let reads_host = k == "env" || k == "file" || k.ends_with("_file") || k == "response_schema";
                    match child {
                        Value::String(s) if reads_host => {
                            out.insert(p, s.clone());
                        }
                        Value::Null => {}
                        _ if reads_host && !child.is_object() => {
                            out.insert(p, child.to_string());
                        }
                        _ if matches!(k.as_str(), "headers" | "json" | "static" | "response_schema") => {}
                        _ => walk(child, &p, out),
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    walk(config, "", &mut out);
    // The core's own list of the files a config names, so the two can never disagree.
    out.extend(harness_core::config::files::file_refs(config));
    let audit = &config["audit"];
    if audit["enabled"] == Value::Bool(true) && audit["sink"]["file"].is_null() && audit["sink"]["listener"] != Value::Bool(true) {
        out.insert("audit.sink.file".into(), "audit.jsonl".into());
    }
    out
}

/// A reload sent over HTTP may read only what the config file already reads: each of its host
/// references must be in the file, in the same place. Else a `ConfigError` naming the field.
pub fn check_remote_reload(config: &Value, allowed: &BTreeMap<String, String>) -> Result<(), HarnessError> {
    for (field, target) in host_references(config) {
        if allowed.get(&field) != Some(&target) {
            return Err(bad(
                harness_core::redact::escape_control(&field).into_owned(),
                "a reload sent over HTTP may not add a file or environment variable the config file does not read there; put it in the file and reload with an empty body",
            ));
        }
    }
    Ok(())
}

fn bad(field: String, msg: impl std::fmt::Display) -> HarnessError {
    HarnessError::config(format!("{field}: {msg}"))
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Loaded {
    /// Reads a config file (`.yaml`, `.json`, `.toml`); its relative file references
    /// resolve against its folder.
    pub fn from_path(path: &str) -> Result<Loaded, HarnessError> {
        Self::from_value(Self::value_at(path)?)
    }

    /// A config file as a value, not yet checked for meaning (its relative file references
    /// made absolute against its folder).
    pub fn value_at(path: &str) -> Result<Value, HarnessError> {
        Config::parse_file(std::path::Path::new(path))
    }

    pub fn from_text(text: &str, format: &str) -> Result<Loaded, HarnessError> {
        Self::from_value(Config::parse_text(text, format)?)
    }

    /// Takes `gateway:` and `callers:` out; the rest must be a valid core config.
    pub fn from_value(mut value: Value) -> Result<Loaded, HarnessError> {
        let host_references = host_references(&value);
        let obj = value.as_object_mut().ok_or_else(|| HarnessError::config("config: expected a mapping at the top"))?;
        let gateway = match obj.remove("gateway") {
            Some(v) => serde_json::from_value::<GatewayConfig>(v).map_err(|e| bad("gateway".into(), e))?,
            None => GatewayConfig::default(),
        };
        let callers = match obj.remove("callers") {
            Some(v) => serde_json::from_value::<BTreeMap<String, CallerConfig>>(v).map_err(|e| bad("callers".into(), e))?,
            None => BTreeMap::new(),
        };
        let core = Config::from_value(value)?;
        let loaded = Loaded { core, gateway, callers, host_references };
        loaded.validate()?;
        Ok(loaded)
    }

    fn validate(&self) -> Result<(), HarnessError> {
        let g = &self.gateway;
        if let Some(h) = &g.admin_key_sha256 {
            if !is_sha256_hex(h) {
                return Err(bad("gateway.admin_key_sha256".into(), "expected 64 hex characters (sha256sum of the key)"));
            }
        }
        if !(1024..=1 << 30).contains(&g.max_body_bytes) {
            return Err(bad("gateway.max_body_bytes".into(), format!("expected 1024 to 1073741824, got {}", g.max_body_bytes)));
        }
        if !(1024..=1 << 20).contains(&g.max_header_bytes) {
            return Err(bad("gateway.max_header_bytes".into(), format!("expected 1024 to 1048576, got {}", g.max_header_bytes)));
        }
        if !(100..=600_000).contains(&g.header_timeout_ms) {
            return Err(bad("gateway.header_timeout_ms".into(), format!("expected 100 to 600000, got {}", g.header_timeout_ms)));
        }
        if !(100..=600_000).contains(&g.body_timeout_ms) {
            return Err(bad("gateway.body_timeout_ms".into(), format!("expected 100 to 600000, got {}", g.body_timeout_ms)));
        }
        if g.drain_ms > 3_600_000 {
            return Err(bad("gateway.drain_ms".into(), format!("expected at most 3600000, got {}", g.drain_ms)));
        }
        for (field, n) in std::iter::once(("default_max_tokens".to_string(), g.default_max_tokens)).chain(g.route_max_tokens.iter().map(|(r, n)| (format!("route_max_tokens.{}", harness_core::redact::escape_control(r)), *n))) {
            if !(1..=10_000_000).contains(&n) {
                return Err(bad(format!("gateway.{field}"), format!("expected 1 to 10000000, got {n}")));
            }
        }
        if let Some(r) = g.route_max_tokens.keys().find(|r| !self.core.routes.contains_key(*r)) {
            return Err(bad("gateway.route_max_tokens".into(), format!("unknown route `{}`", harness_core::redact::escape_control(r))));
        }
        let mut hashes = std::collections::HashSet::new();
        for (name, c) in &self.callers {
            let f = |x: &str| format!("callers.{name}.{x}");
            if name.is_empty() || name.len() > 128 || name.chars().any(|c| c.is_control() || c == '"') {
                return Err(bad(format!("callers.{}", harness_core::redact::escape_control(name)), "a caller name is 1 to 128 printable characters"));
            }
            if !is_sha256_hex(&c.key_sha256) {
                return Err(bad(f("key_sha256"), "expected 64 hex characters (sha256sum of the key)"));
            }
            if !hashes.insert(c.key_sha256.to_ascii_lowercase()) {
                return Err(bad(f("key_sha256"), "another caller has the same key"));
            }
            for r in &c.routes {
                if r != "*" && !self.core.routes.contains_key(r) {
                    return Err(bad(f("routes"), format!("unknown route `{}`", harness_core::redact::escape_control(r))));
                }
            }
            for s in &c.services {
                if s != "*" && !self.core.services.contains_key(s) {
                    return Err(bad(f("services"), format!("unknown service `{}`", harness_core::redact::escape_control(s))));
                }
            }
            if let Some(b) = c.budget_per_day {
                if !(b >= 0.0 && b.is_finite()) {
                    return Err(bad(f("budget_per_day"), format!("expected a number >= 0, got {b}")));
                }
            }
            if let Some(rl) = &c.rate_limit {
                if !(rl.rps > 0.0 && rl.rps.is_finite()) {
                    return Err(bad(f("rate_limit.rps"), format!("expected a number above 0, got {}", rl.rps)));
                }
            }
        }
        Ok(())
    }
}

/// Lower-case hex SHA-256 of `key`.
pub fn sha256_hex(key: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, key).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load(v: Value) -> Result<Loaded, String> {
        Loaded::from_value(v).map_err(|e| e.message)
    }

    #[test]
    fn gateway_sections_are_checked_and_the_rest_is_the_core_config() {
        let key = sha256_hex(b"k1");
        let ok = load(json!({"services": {"s": {"base_url": "http://h"}}, "callers": {"ann": {"key_sha256": key, "services": ["s"]}}})).unwrap();
        assert_eq!(ok.callers["ann"].services, vec!["s"]);
        assert!(load(json!({"callers": {"ann": {"key_sha256": "abc"}}})).unwrap_err().starts_with("callers.ann.key_sha256"));
        assert!(load(json!({"callers": {"ann": {"key_sha256": key, "routes": ["nope"]}}})).unwrap_err().starts_with("callers.ann.routes"));
        assert!(load(json!({"callers": {"a": {"key_sha256": key}, "b": {"key_sha256": key}}})).unwrap_err().contains("same key"));
        assert!(load(json!({"gateway": {"max_body_bytes": 1}})).unwrap_err().starts_with("gateway.max_body_bytes"));
        assert!(load(json!({"gateway": {"body_timeout_ms": 0}})).unwrap_err().starts_with("gateway.body_timeout_ms"));
        assert!(load(json!({"gateway": {"nope": 1}})).unwrap_err().starts_with("gateway"));
        assert!(load(json!({"services": {"s": {"base_url": "ftp://h"}}})).unwrap_err().starts_with("services.s.base_url"));
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn host_references_are_found_by_field_path() {
        let v = json!({
            "services": {"v": {"auth": {"token": {"file": "/run/t"}, "keys": [{"env": "K"}]}, "headers": {"file": "not a path"},
                "endpoints": {"GET /x": {"response_schema": "s.json"}, "GET /y": {"response_schema": {"properties": {"file": {"type": "string"}}}}}}},
            "mock": {"services": {"o": [{"match": {"path": "*"}, "json_file": "f.json", "json": {"env": "data"}}]}},
            "audit": {"enabled": true},
        });
        let refs: Vec<(String, String)> = host_references(&v).into_iter().collect();
        let want = [
            ("audit.sink.file", "audit.jsonl"),
            ("mock.services.o[0].json_file", "f.json"),
            ("services.v.auth.keys[0].env", "K"),
            ("services.v.auth.token.file", "/run/t"),
            ("services.v.endpoints.GET /x.response_schema", "s.json"),
        ];
        assert_eq!(refs, want.map(|(a, b)| (a.to_string(), b.to_string())));
        let allowed = host_references(&v);
        assert!(check_remote_reload(&v, &allowed).is_ok());
        let mut moved = v.clone();
        moved["services"]["w"] = json!({"auth": {"token": {"file": "/run/t"}}});
        assert!(check_remote_reload(&moved, &allowed).unwrap_err().message.starts_with("services.w.auth.token.file: "));
    }
}

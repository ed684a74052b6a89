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
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig { admin_key_sha256: None, max_body_bytes: 1 << 20, max_header_bytes: 16 * 1024, header_timeout_ms: 5000, body_timeout_ms: 10_000, drain_ms: 10_000 }
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
        Self::from_value(Config::parse_file(std::path::Path::new(path))?)
    }

    pub fn from_text(text: &str, format: &str) -> Result<Loaded, HarnessError> {
        Self::from_value(Config::parse_text(text, format)?)
    }

    /// Takes `gateway:` and `callers:` out; the rest must be a valid core config.
    pub fn from_value(mut value: Value) -> Result<Loaded, HarnessError> {
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
        let loaded = Loaded { core, gateway, callers };
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
}

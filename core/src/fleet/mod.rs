//! Fleet configuration (`config_source`): one versioned config kept in Redis and applied by
//! every instance, first on a canary share of the fleet, promoted or rolled back in one
//! command. This file holds what the operator side (the CLI) and the instances share: the
//! bootstrap settings, the Redis layout, the canary's bucket, the secret check; the
//! instance's loop is `source.rs`.
//!
//! Redis layout under `harness:config:<name>:`:
//! - `seq`: the last version number given out;
//! - `v:<n>`: version `n` as pushed (`ConfigDoc`: author, message, time, content hash, text);
//! - `state`: a hash: `stable` (every instance's version), `canary` (0: none) and `percent`
//!   (in basis points: the share of instances on the canary), `previous` (what a rollback
//!   of `stable` returns to);
//! - `log`: every push, promote and rollback (an audit record, JSON);
//! - `hb:<instance>`: each instance's heartbeat, expiring when it stops;
//! - `stats:<n>`: the last 2,000 beats' counts of the instances running version `n`
//!   (requests, errors, p99), which a canary's guard compares;
//! - `guard`: the guard of a canary (`Guard`, JSON), in force while that version is the canary;
//! - `events`: the channel a change is announced on (instances also poll).
//!
//! Guarantees: versions only grow; a pushed config that holds a literal secret (a `value:`
//! secret, a password in a URL) is refused with its field path before anything is stored;
//! an instance's share of a canary depends only on its id (the same instances, every time);
//! a guarded canary is rolled back at most once, by whichever instance first finds it over a
//! guard (the rollback script only withdraws the canary it was asked about).

pub mod source;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::HarnessError;

/// `config_source:` in the bootstrap config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ConfigSourceConfig {
    pub redis_url: String,
    /// The config's name in Redis (many fleets may share one Redis).
    pub name: String,
    /// How often an instance asks Redis, besides hearing the channel.
    pub poll_ms: u64,
    /// How often an instance writes its heartbeat (it expires after three missed ones).
    pub heartbeat_ms: u64,
    /// The last version applied is kept here; an instance starts from it (Redis down at start).
    pub cache_file: Option<String>,
    /// This instance's stable id (the canary share is chosen by it); default hostname-pid.
    pub instance_id: Option<String>,
}

impl Default for ConfigSourceConfig {
    fn default() -> Self {
        ConfigSourceConfig { redis_url: String::new(), name: String::new(), poll_ms: 5_000, heartbeat_ms: 5_000, cache_file: None, instance_id: None }
    }
}

impl ConfigSourceConfig {
    pub fn validate(&self) -> Result<(), HarnessError> {
        match url::Url::parse(&self.redis_url) {
            Ok(u) if matches!(u.scheme(), "redis" | "rediss") => {}
            _ => return Err(HarnessError::config("config_source.redis_url: expected a redis:// or rediss:// URL")),
        }
        check_name(&self.name).map_err(|why| HarnessError::config(format!("config_source.name: {why}")))?;
        if !(100..=3_600_000).contains(&self.poll_ms) {
            return Err(HarnessError::config(format!("config_source.poll_ms: must be 100..=3600000, got {}", self.poll_ms)));
        }
        if !(100..=600_000).contains(&self.heartbeat_ms) {
            return Err(HarnessError::config(format!("config_source.heartbeat_ms: must be 100..=600000, got {}", self.heartbeat_ms)));
        }
        if let Some(id) = &self.instance_id {
            check_name(id).map_err(|why| HarnessError::config(format!("config_source.instance_id: {why}")))?;
        }
        Ok(())
    }

    /// The id this instance goes by.
    pub fn instance(&self) -> String {
        self.instance_id.clone().unwrap_or_else(default_instance_id)
    }
}

/// Names and ids become Redis keys: printable, no spaces, at most 128 characters.
pub fn check_name(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 128 {
        return Err("must be 1 to 128 characters".into());
    }
    if s.chars().any(|c| c.is_control() || c.is_whitespace() || matches!(c, '*' | '?' | '[' | ']' | '\\')) {
        return Err(format!("`{}` may not hold spaces, control or glob characters", crate::redact::escape_control(s)));
    }
    Ok(())
}

/// hostname-pid.
pub fn default_instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").or_else(|_| std::fs::read_to_string("/etc/hostname")).unwrap_or_default();
    let host: String = host.trim().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')).collect();
    format!("{}-{}", if host.is_empty() { "host" } else { &host }, std::process::id())
}

/// Where an instance falls in 0..10000 (basis points): on the canary when below its share.
pub fn bucket(instance: &str) -> u32 {
    let d = ring::digest::digest(&ring::digest::SHA256, instance.as_bytes());
    let n = u64::from_le_bytes(d.as_ref()[..8].try_into().expect("8 bytes"));
    (n % 10_000) as u32
}

/// `"10%"`, `"12.5%"` or `"10"` as basis points (0..=10000).
pub fn parse_percent(s: &str) -> Result<u32, String> {
    let t = s.trim().trim_end_matches('%');
    match t.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok((p * 100.0).round() as u32),
        _ => Err(format!("`{}`: expected a percentage from 0% to 100%", crate::redact::escape_control(s))),
    }
}

/// One version as pushed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigDoc {
    pub version: u64,
    pub author: String,
    pub message: String,
    pub at_ms: u64,
    /// SHA-256 of `content`, hex.
    pub hash: String,
    /// `yaml`, `json` or `toml`.
    pub format: String,
    pub content: String,
}

/// Which version runs where.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetState {
    pub stable: u64,
    /// 0: no canary.
    pub canary: u64,
    /// The canary's share of instances, in basis points.
    pub percent: u32,
    pub previous: u64,
}

impl FleetState {
    /// The version an instance in `bucket` should run (0: none pushed yet).
    pub fn target(&self, bucket: u32) -> u64 {
        if self.canary > 0 && bucket < self.percent {
            self.canary
        } else {
            self.stable
        }
    }

    fn from_hash(h: &BTreeMap<String, String>) -> FleetState {
        let n = |k: &str| h.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        FleetState { stable: n("stable"), canary: n("canary"), percent: n("percent").min(10_000) as u32, previous: n("previous") }
    }
}

/// What an instance says about itself, every `heartbeat_ms`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub instance: String,
    /// The version applied (0: the bootstrap config, nothing from Redis yet).
    pub version: u64,
    pub rejected_version: Option<u64>,
    pub rejected_reason: Option<String>,
    pub uptime_s: f64,
    /// Since the previous beat.
    pub requests: u64,
    pub errors: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub at_ms: u64,
}

/// One version's instances as their last heartbeats tell it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionSummary {
    pub version: u64,
    pub instances: usize,
    /// Since each instance's previous beat.
    pub requests: u64,
    pub errors: u64,
    /// The highest of its instances' p99.
    pub p99_ms: Option<f64>,
}

/// Per version (ascending) from the live heartbeats; and the stragglers: instances on neither
/// the stable version nor the canary, with what they rejected if they did.
pub fn summarize(state: &FleetState, beats: &[Heartbeat]) -> (Vec<VersionSummary>, Vec<String>) {
    let mut versions: Vec<u64> = beats.iter().map(|b| b.version).collect();
    versions.sort_unstable();
    versions.dedup();
    let summary = versions
        .into_iter()
        .map(|v| {
            let of: Vec<&Heartbeat> = beats.iter().filter(|b| b.version == v).collect();
            VersionSummary {
                version: v,
                instances: of.len(),
                requests: of.iter().map(|b| b.requests).sum(),
                errors: of.iter().map(|b| b.errors).sum(),
                p99_ms: of.iter().filter_map(|b| b.p99_ms).fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x)))),
            }
        })
        .collect();
    let stragglers = beats
        .iter()
        .filter(|b| b.version != state.stable && !(state.canary > 0 && b.version == state.canary))
        .map(|b| match (&b.rejected_version, &b.rejected_reason) {
            (Some(r), Some(why)) => format!("{} (on {}, rejected {r}: {why})", b.instance, b.version),
            _ => format!("{} (on {})", b.instance, b.version),
        })
        .collect();
    (summary, stragglers)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

pub fn sha256_hex(text: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A canary's automatic rollback (`--guard error_rate=+2%,p99=+50%,window=60s`): over the
/// last `window_ms`, the canary's error rate may exceed the baseline's (the instances on
/// `stable`) by at most `error_rate_points` percentage points, and its p99 (the request-weighted
/// mean of its instances' per-beat p99) the baseline's by at most `p99_percent` percent. No
/// verdict until each side served `min_requests` in the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guard {
    /// The canary version it guards.
    pub version: u64,
    pub error_rate_points: Option<f64>,
    pub p99_percent: Option<f64>,
    pub window_ms: u64,
    pub min_requests: u64,
}

/// Parses `error_rate=+2%,p99=+50%,window=60s[,min_requests=20]` (the guard's version is set at push).
pub fn parse_guard(s: &str) -> Result<Guard, String> {
    let mut g = Guard { version: 0, error_rate_points: None, p99_percent: None, window_ms: 60_000, min_requests: 20 };
    let bad = |part: &str, want: &str| format!("`{}`: {want}", crate::redact::escape_control(part));
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| bad(part, "expected key=value"))?;
        let pct = || -> Result<f64, String> {
            let t = v.trim().trim_start_matches('+').trim_end_matches('%');
            t.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| bad(part, "expected a percentage such as +2%"))
        };
        match k.trim() {
            "error_rate" => g.error_rate_points = Some(pct()?),
            "p99" => g.p99_percent = Some(pct()?),
            "window" => {
                let ms = parse_ms(v.trim()).ok_or_else(|| bad(part, "expected a duration such as 60s"))?;
                if !(1_000..=86_400_000).contains(&ms) {
                    return Err(bad(part, "the window must be 1s to 24h"));
                }
                g.window_ms = ms;
            }
            "min_requests" => g.min_requests = v.trim().parse().map_err(|_| bad(part, "expected a whole number"))?,
            _ => return Err(bad(part, "expected error_rate, p99, window or min_requests")),
        }
    }
    if g.error_rate_points.is_none() && g.p99_percent.is_none() {
        return Err("a guard needs error_rate or p99".into());
    }
    Ok(g)
}

/// `500ms`, `60s`, `2m` or `1h` in milliseconds (four units: not worth a crate).
fn parse_ms(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok().filter(|x: &f64| x.is_finite())?;
    let scale = match unit {
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some((n * scale).round() as u64)
}

/// One beat's counts for one version (what `stats:<n>` holds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub at_ms: u64,
    pub instance: String,
    pub requests: u64,
    pub errors: u64,
    pub p99_ms: Option<f64>,
}

/// Requests, errors and the request-weighted p99 of the samples since `since_ms`.
fn totals(samples: &[Sample], since_ms: u64) -> (u64, u64, Option<f64>) {
    let recent = samples.iter().filter(|s| s.at_ms >= since_ms);
    let (mut requests, mut errors, mut weighted, mut weight) = (0u64, 0u64, 0.0f64, 0u64);
    for s in recent {
        requests += s.requests;
        errors += s.errors;
        if let Some(p) = s.p99_ms.filter(|p| p.is_finite()) {
            weighted += p * s.requests as f64;
            weight += s.requests;
        }
    }
    (requests, errors, (weight > 0).then(|| weighted / weight as f64))
}

impl Guard {
    /// Why the canary must go back, if it must: compared over the window ending `now_ms`.
    pub fn verdict(&self, canary: &[Sample], baseline: &[Sample], now_ms: u64) -> Option<String> {
        let since = now_ms.saturating_sub(self.window_ms);
        let (cr, ce, cp) = totals(canary, since);
        let (br, be, bp) = totals(baseline, since);
        if cr < self.min_requests.max(1) || br < self.min_requests.max(1) {
            return None;
        }
        let window = self.window_ms as f64 / 1000.0;
        let (c_rate, b_rate) = (100.0 * ce as f64 / cr as f64, 100.0 * be as f64 / br as f64);
        if let Some(limit) = self.error_rate_points {
            if c_rate - b_rate > limit {
                return Some(format!(
                    "guard error_rate=+{limit}%: canary {c_rate:.2}% of {cr} requests vs baseline {b_rate:.2}% of {br} over {window}s"
                ));
            }
        }
        if let (Some(limit), Some(c), Some(b)) = (self.p99_percent, cp, bp) {
            if c > b * (1.0 + limit / 100.0) {
                return Some(format!("guard p99=+{limit}%: canary p99 {c:.1} ms vs baseline {b:.1} ms over {window}s"));
            }
        }
        None
    }
}

/// The keys of config `name`.
pub struct Keys {
    pub prefix: String,
}

impl Keys {
    pub fn new(name: &str) -> Keys {
        Keys { prefix: format!("harness:config:{name}:") }
    }
    pub fn seq(&self) -> String {
        format!("{}seq", self.prefix)
    }
    pub fn doc(&self, v: u64) -> String {
        format!("{}v:{v}", self.prefix)
    }
    pub fn state(&self) -> String {
        format!("{}state", self.prefix)
    }
    pub fn log(&self) -> String {
        format!("{}log", self.prefix)
    }
    pub fn heartbeat(&self, instance: &str) -> String {
        format!("{}hb:{instance}", self.prefix)
    }
    pub fn channel(&self) -> String {
        format!("{}events", self.prefix)
    }
    pub fn stats(&self, v: u64) -> String {
        format!("{}stats:{v}", self.prefix)
    }
    pub fn guard(&self) -> String {
        format!("{}guard", self.prefix)
    }
}

/// The first literal secret in a config about to be pushed: a secret's `value:` (a secret
/// reference is `{env}` / `{file}` / `{value}`), or a password in a URL. Its field path.
pub fn literal_secret(config: &Value) -> Option<String> {
    fn walk(v: &Value, path: &str) -> Option<String> {
        match v {
            Value::Object(m) => {
                let secret_ref = m.contains_key("value") && m.keys().all(|k| matches!(k.as_str(), "env" | "file" | "value" | "name"));
                if secret_ref && m.get("value").is_some_and(|x| !x.is_null()) {
                    return Some(format!("{path}.value"));
                }
                for (k, x) in m {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    if let Some(found) = walk(x, &p) {
                        return Some(found);
                    }
                }
                None
            }
            Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| walk(x, &format!("{path}[{i}]"))),
            Value::String(s) => url::Url::parse(s).ok().filter(|u| u.password().is_some()).map(|_| path.to_string()),
            _ => None,
        }
    }
    walk(config, "")
}

/// What changed from config `a` to config `b`, one line per field path, in path order:
/// `+ path: value` (added), `- path: value` (removed), `~ path: old -> new` (changed). Objects
/// are compared key by key and arrays item by item; values are shown as compact JSON.
pub fn diff(a: &Value, b: &Value) -> Vec<String> {
    fn show(v: &Value) -> String {
        let t = v.to_string();
        match t.char_indices().nth(200) {
            Some((cut, _)) => format!("{}...", &t[..cut]),
            None => t,
        }
    }
    fn walk(a: Option<&Value>, b: Option<&Value>, path: &str, out: &mut Vec<String>) {
        let at = if path.is_empty() { "(root)" } else { path };
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    walk(x.get(k), y.get(k), &p, out);
                }
            }
            (Some(Value::Array(x)), Some(Value::Array(y))) => {
                for i in 0..x.len().max(y.len()) {
                    walk(x.get(i), y.get(i), &format!("{path}[{i}]"), out);
                }
            }
            (Some(x), Some(y)) if x == y => {}
            (Some(x), Some(y)) => out.push(format!("~ {at}: {} -> {}", show(x), show(y))),
            (None, Some(y)) => out.push(format!("+ {at}: {}", show(y))),
            (Some(x), None) => out.push(format!("- {at}: {}", show(x))),
            (None, None) => {}
        }
    }
    let mut out = Vec::new();
    walk(Some(a), Some(b), "", &mut out);
    out
}

/// An entry of `log`.
pub(crate) fn audit(action: &str, version: u64, author: &str, message: &str) -> String {
    serde_json::json!({"at_ms": now_ms(), "action": action, "version": version, "author": author, "message": message}).to_string()
}

/// What an operator does (the CLI and the gateway's admin API), on a plain connection.
pub struct Admin {
    conn: redis::aio::MultiplexedConnection,
    keys: Keys,
}

/// KEYS: state, log, channel, guard; ARGV: version, canary basis points ('' = everyone),
/// audit record, the canary's guard ('' = none).
const PUSH: &str = r#"
local stable = redis.call('HGET', KEYS[1], 'stable') or '0'
if ARGV[4] == '' then redis.call('DEL', KEYS[4]) else redis.call('SET', KEYS[4], ARGV[4]) end
if ARGV[2] == '' then
  redis.call('HSET', KEYS[1], 'previous', stable, 'stable', ARGV[1], 'canary', 0, 'percent', 0)
else
  redis.call('HSET', KEYS[1], 'canary', ARGV[1], 'percent', ARGV[2])
end
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('PUBLISH', KEYS[3], ARGV[1])
return 1
"#;

/// KEYS: state, log, channel; ARGV: basis points, audit record. 0: no canary to promote.
const PROMOTE: &str = r#"
local canary = tonumber(redis.call('HGET', KEYS[1], 'canary') or '0')
if canary == 0 then return 0 end
if tonumber(ARGV[1]) >= 10000 then
  local stable = redis.call('HGET', KEYS[1], 'stable') or '0'
  redis.call('HSET', KEYS[1], 'previous', stable, 'stable', canary, 'canary', 0, 'percent', 0)
else
  redis.call('HSET', KEYS[1], 'percent', ARGV[1])
end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('PUBLISH', KEYS[3], canary)
return canary
"#;

/// KEYS: state, log, channel; ARGV: audit record, the canary expected ('' = any). Returns
/// {what, version}: 1 canary withdrawn, 2 stable back to previous, 0 nothing to roll back.
pub(crate) const ROLLBACK: &str = r#"
local canary = tonumber(redis.call('HGET', KEYS[1], 'canary') or '0')
if canary > 0 then
  if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= canary then return {0, canary} end
  redis.call('HSET', KEYS[1], 'canary', 0, 'percent', 0)
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('PUBLISH', KEYS[3], 'rollback')
  return {1, canary}
end
if ARGV[2] ~= '' then return {0, 0} end
local previous = tonumber(redis.call('HGET', KEYS[1], 'previous') or '0')
if previous == 0 then return {0, 0} end
local stable = redis.call('HGET', KEYS[1], 'stable')
redis.call('HSET', KEYS[1], 'stable', previous, 'previous', 0)
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('PUBLISH', KEYS[3], 'rollback')
return {2, tonumber(stable)}
"#;

fn redis_err(e: redis::RedisError) -> HarnessError {
    HarnessError::config(format!("config source: redis: {:?}", e.kind()))
}

impl Admin {
    pub async fn connect(redis_url: &str, name: &str) -> Result<Admin, HarnessError> {
        check_name(name).map_err(|why| HarnessError::config(format!("--name: {why}")))?;
        let client = redis::Client::open(redis_url).map_err(|_| HarnessError::config("--redis: not a valid Redis URL"))?;
        let conn = tokio::time::timeout(std::time::Duration::from_secs(5), client.get_multiplexed_async_connection())
            .await
            .map_err(|_| HarnessError::config("config source: redis did not answer in 5 s"))?
            .map_err(redis_err)?;
        Ok(Admin { conn, keys: Keys::new(name) })
    }

    fn audit(action: &str, version: u64, author: &str, message: &str) -> String {
        audit(action, version, author, message)
    }

    /// Stores `content` (validated by the caller, checked here for literal secrets) as the
    /// next version, for everyone or for a canary share (basis points), the canary with its
    /// guard if given; its version.
    #[allow(clippy::too_many_arguments)]
    pub async fn push(&mut self, content: &str, format: &str, parsed: &Value, author: &str, message: &str, canary: Option<u32>, guard: Option<&Guard>) -> Result<u64, HarnessError> {
        if guard.is_some() && canary.is_none() {
            return Err(HarnessError::config("--guard: only a canary (--canary) has a guard"));
        }
        if let Some(path) = literal_secret(parsed) {
            return Err(HarnessError::config(format!("{path}: a pushed config may only reference secrets (env or file); a literal secret would be stored in Redis in clear text")));
        }
        let version: u64 = redis::cmd("INCR").arg(self.keys.seq()).query_async(&mut self.conn).await.map_err(redis_err)?;
        let doc = ConfigDoc { version, author: author.into(), message: message.into(), at_ms: now_ms(), hash: sha256_hex(content), format: format.into(), content: content.into() };
        let text = serde_json::to_string(&doc).map_err(|e| HarnessError::config(e.to_string()))?;
        let _: () = redis::cmd("SET").arg(self.keys.doc(version)).arg(text).query_async(&mut self.conn).await.map_err(redis_err)?;
        let action = if canary.is_some() { "push_canary" } else { "push" };
        let audit = Self::audit(action, version, author, message);
        let guard = guard.map(|g| serde_json::to_string(&Guard { version, ..g.clone() }).unwrap_or_default()).unwrap_or_default();
        let _: i64 = redis::Script::new(PUSH)
            .key(self.keys.state())
            .key(self.keys.log())
            .key(self.keys.channel())
            .key(self.keys.guard())
            .arg(version)
            .arg(canary.map(|c| c.to_string()).unwrap_or_default())
            .arg(audit)
            .arg(guard)
            .invoke_async(&mut self.conn)
            .await
            .map_err(redis_err)?;
        Ok(version)
    }

    /// The canary to `to` basis points (10000: it becomes stable); the canary's version.
    pub async fn promote(&mut self, to: u32, author: &str) -> Result<u64, HarnessError> {
        let canary = self.state().await?.canary;
        let audit = Self::audit(if to >= 10_000 { "promote" } else { "widen" }, canary, author, &format!("to {}%", to as f64 / 100.0));
        let v: u64 = redis::Script::new(PROMOTE).key(self.keys.state()).key(self.keys.log()).key(self.keys.channel()).arg(to).arg(audit).invoke_async(&mut self.conn).await.map_err(redis_err)?;
        if v == 0 {
            return Err(HarnessError::config("promote: there is no canary to promote"));
        }
        Ok(v)
    }

    /// Withdraws the canary (only `expect` when given), else returns `stable` to the
    /// previous version; what was rolled back.
    pub async fn rollback(&mut self, author: &str, reason: &str, expect: Option<u64>) -> Result<u64, HarnessError> {
        let now = self.state().await?;
        let audit = Self::audit("rollback", if now.canary > 0 { now.canary } else { now.stable }, author, reason);
        let (what, v): (u64, u64) = redis::Script::new(ROLLBACK)
            .key(self.keys.state())
            .key(self.keys.log())
            .key(self.keys.channel())
            .arg(audit)
            .arg(expect.map(|e| e.to_string()).unwrap_or_default())
            .invoke_async(&mut self.conn)
            .await
            .map_err(redis_err)?;
        if what == 0 {
            return Err(HarnessError::config("rollback: nothing to roll back (no canary, and no previous version)"));
        }
        Ok(v)
    }

    pub async fn state(&mut self) -> Result<FleetState, HarnessError> {
        let h: BTreeMap<String, String> = redis::cmd("HGETALL").arg(self.keys.state()).query_async(&mut self.conn).await.map_err(redis_err)?;
        Ok(FleetState::from_hash(&h))
    }

    /// The guard of the current canary, if it has one.
    pub async fn guard(&mut self) -> Result<Option<Guard>, HarnessError> {
        let text: Option<String> = redis::cmd("GET").arg(self.keys.guard()).query_async(&mut self.conn).await.map_err(redis_err)?;
        let canary = self.state().await?.canary;
        Ok(text.and_then(|t| serde_json::from_str::<Guard>(&t).ok()).filter(|g| canary > 0 && g.version == canary))
    }

    pub async fn doc(&mut self, version: u64) -> Result<Option<ConfigDoc>, HarnessError> {
        let text: Option<String> = redis::cmd("GET").arg(self.keys.doc(version)).query_async(&mut self.conn).await.map_err(redis_err)?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// Every push, promote and rollback, oldest first.
    pub async fn log(&mut self) -> Result<Vec<Value>, HarnessError> {
        let items: Vec<String> = redis::cmd("LRANGE").arg(self.keys.log()).arg(0).arg(-1).query_async(&mut self.conn).await.map_err(redis_err)?;
        Ok(items.iter().filter_map(|t| serde_json::from_str(t).ok()).collect())
    }

    /// Every live instance's last heartbeat.
    pub async fn heartbeats(&mut self) -> Result<Vec<Heartbeat>, HarnessError> {
        let pattern = format!("{}hb:*", self.keys.prefix);
        let mut out = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN").arg(cursor).arg("MATCH").arg(&pattern).arg("COUNT").arg(500).query_async(&mut self.conn).await.map_err(redis_err)?;
            if !keys.is_empty() {
                let values: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query_async(&mut self.conn).await.map_err(redis_err)?;
                out.extend(values.into_iter().flatten().filter_map(|t| serde_json::from_str::<Heartbeat>(&t).ok()));
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        out.sort_by(|a, b| a.instance.cmp(&b.instance));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn percentages_buckets_and_targets() {
        assert_eq!(parse_percent("10%"), Ok(1000));
        assert_eq!(parse_percent("12.5"), Ok(1250));
        assert!(parse_percent("101%").is_err() && parse_percent("x").is_err());
        let b = bucket("host-1");
        assert_eq!(b, bucket("host-1"), "the same id, the same bucket");
        assert!(b < 10_000);
        let s = FleetState { stable: 3, canary: 4, percent: 3400, previous: 2 };
        let on: usize = (0..1000).filter(|i| s.target(bucket(&format!("i{i}"))) == 4).count();
        assert!((280..=400).contains(&on), "{on} of 1000 on a 34% canary");
        assert_eq!(FleetState { canary: 0, ..s }.target(0), 3);
    }

    #[test]
    fn literal_secrets_are_found_with_their_path() {
        let ok = json!({"services": {"a": {"auth": {"type": "bearer", "token": {"env": "TOKEN"}}, "base_url": "https://a"}}});
        assert_eq!(literal_secret(&ok), None);
        let bad = json!({"services": {"a": {"auth": {"type": "bearer", "token": {"value": "s3cret"}}}}});
        assert_eq!(literal_secret(&bad).as_deref(), Some("services.a.auth.token.value"));
        let url = json!({"cache": {"shared": {"redis_url": "redis://:pw@r:6379/0"}}});
        assert_eq!(literal_secret(&url).as_deref(), Some("cache.shared.redis_url"));
        let list = json!({"services": {"a": {"auth": {"keys": [{"env": "K1"}, {"value": "k2", "name": "two"}]}}}});
        assert_eq!(literal_secret(&list).as_deref(), Some("services.a.auth.keys[1].value"));
    }

    #[test]
    fn diffs_name_each_changed_field_path() {
        let a = json!({"services": {"a": {"timeout_ms": 1000, "retry": {"max": 2}}, "b": {"x": 1}}, "routes": {"r": {"providers": [{"name": "p", "weight": 90}, {"name": "q", "weight": 10}]}}});
        let b = json!({"services": {"a": {"timeout_ms": 2000, "retry": {"max": 2}}, "c": {"x": 1}}, "routes": {"r": {"providers": [{"name": "p", "weight": 50}, {"name": "q", "weight": 10}, {"name": "z", "weight": 40}]}}});
        assert_eq!(
            diff(&a, &b),
            vec![
                "~ routes.r.providers[0].weight: 90 -> 50",
                "+ routes.r.providers[2]: {\"name\":\"z\",\"weight\":40}",
                "~ services.a.timeout_ms: 1000 -> 2000",
                "- services.b: {\"x\":1}",
                "+ services.c: {\"x\":1}",
            ]
        );
        assert!(diff(&a, &a).is_empty());
    }

    #[test]
    fn guards_parse_and_judge() {
        let g = parse_guard("error_rate=+2%,p99=+50%,window=60s").unwrap();
        assert_eq!((g.error_rate_points, g.p99_percent, g.window_ms, g.min_requests), (Some(2.0), Some(50.0), 60_000, 20));
        assert!(parse_guard("").unwrap_err().contains("error_rate or p99"));
        assert!(parse_guard("error_rate=lots").unwrap_err().contains("error_rate=lots"));
        assert!(parse_guard("window=5ms,p99=+1%").unwrap_err().contains("1s to 24h"));
        assert!(parse_guard("speed=+1%").unwrap_err().contains("speed"));
        let s = |at_ms, requests, errors, p99: f64| Sample { at_ms, instance: "i".into(), requests, errors, p99_ms: Some(p99) };
        let base = vec![s(100_000, 500, 5, 20.0), s(101_000, 500, 5, 22.0)];
        // 1% vs 1%: fine; 4% vs 1%: over +2 points; too few requests: no verdict.
        assert_eq!(g.verdict(&[s(100_500, 100, 1, 21.0)], &base, 101_000), None);
        let why = g.verdict(&[s(100_500, 100, 4, 21.0)], &base, 101_000).unwrap();
        assert!(why.contains("error_rate") && why.contains("4.00%") && why.contains("1.00%"), "{why}");
        assert_eq!(g.verdict(&[s(100_500, 10, 10, 21.0)], &base, 101_000), None);
        // p99 45 ms vs 21 ms: over +50%.
        assert!(g.verdict(&[s(100_500, 100, 1, 45.0)], &base, 101_000).unwrap().contains("p99"));
        // Samples older than the window do not count.
        assert_eq!(g.verdict(&[s(1_000, 100, 50, 21.0)], &base, 101_000), None);
    }

    #[test]
    fn names_and_settings_are_checked() {
        let mut c = ConfigSourceConfig { redis_url: "redis://127.0.0.1:6379/0".into(), name: "prod".into(), ..Default::default() };
        assert!(c.validate().is_ok());
        c.name = "a b".into();
        assert!(c.validate().unwrap_err().message.contains("config_source.name"));
        c.name = "prod".into();
        c.poll_ms = 1;
        assert!(c.validate().unwrap_err().message.contains("config_source.poll_ms"));
    }
}

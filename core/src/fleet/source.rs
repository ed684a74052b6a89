//! One instance of a fleet: follows its config in Redis (the channel, and a poll every
//! `poll_ms` for a missed message), applies the version meant for it through the client's
//! reload, keeps the last applied one on disk, and writes its heartbeat.
//!
//! Guarantees: a version is applied whole or not at all (the reload); a version the instance
//! rejects is reported (the heartbeat and `config_source_state`) with the field path, never
//! retried until another version is meant for it, and the last good one keeps running;
//! Redis away never stops the instance (each call bounded; it keeps its version and tries
//! again); at start, the cached copy (when there is one) is applied before Redis is asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::{bucket, now_ms, ConfigDoc, ConfigSourceConfig, FleetState, Guard, Heartbeat, Keys, Sample};
use crate::error::HarnessError;
use crate::host::{Event, EventSink};
use crate::state::redis::RedisConn;

/// What `config_source_state()` says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ConfigSourceState")]
pub struct SourceState {
    pub name: String,
    pub instance: String,
    /// The version applied (0: the bootstrap config).
    pub version: u64,
    /// Its content hash.
    pub hash: Option<String>,
    /// Where the applied version came from: `redis`, `cache_file` or `bootstrap`.
    pub applied_from: &'static str,
    /// The version Redis says this instance should run (0: none pushed, or Redis not reached yet).
    pub target: u64,
    pub rejected_version: Option<u64>,
    pub rejected_reason: Option<String>,
    /// Redis answered the last call.
    pub connected: bool,
    pub last_error: Option<String>,
    /// When the applied version was applied (ms since the epoch).
    pub applied_at_ms: Option<u64>,
}

/// What the instance's requests did since the last heartbeat (a listener on its events).
#[derive(Default)]
pub struct Traffic {
    requests: AtomicU64,
    errors: AtomicU64,
    latencies: Mutex<Vec<f64>>,
}

/// Latencies kept per beat (a sample: enough for p99 at any rate).
const MAX_SAMPLES: usize = 20_000;

impl EventSink for Traffic {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        if let Event::RequestFinished(r) = event {
            let n = self.requests.fetch_add(1, Ordering::Relaxed);
            if r.error_kind.is_some() {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
            let mut l = self.latencies.lock();
            if l.len() < MAX_SAMPLES {
                l.push(r.duration_ms);
            } else {
                // Reservoir sampling (Vitter's R) keeps the sample fair past the cap.
                let i = (rand::random::<u64>() % (n + 1)) as usize;
                if i < MAX_SAMPLES {
                    l[i] = r.duration_ms;
                }
            }
        }
        Ok(())
    }
}

impl Traffic {
    /// Counts and percentiles since the last call, and a fresh start.
    fn take(&self) -> (u64, u64, Option<f64>, Option<f64>) {
        let requests = self.requests.swap(0, Ordering::Relaxed);
        let errors = self.errors.swap(0, Ordering::Relaxed);
        let mut l = std::mem::take(&mut *self.latencies.lock());
        l.sort_by(f64::total_cmp);
        let at = |p: f64| (!l.is_empty()).then(|| l[((l.len() - 1) as f64 * p).round() as usize]);
        (requests, errors, at(0.5), at(0.99))
    }
}

/// Applies a version: its text and format, and the version number; `None` once the client is gone.
pub type Apply = Box<dyn Fn(&str, &str, u64) -> Option<Result<String, HarnessError>> + Send + Sync>;
/// Whether the client is still open.
pub type Alive = Box<dyn Fn() -> bool + Send + Sync>;

/// What the cache file holds.
#[derive(Serialize, Deserialize)]
struct Cached {
    name: String,
    doc: ConfigDoc,
}

pub struct Source {
    config: ConfigSourceConfig,
    instance: String,
    keys: Keys,
    state: Arc<Mutex<SourceState>>,
    traffic: Arc<Traffic>,
    apply: Apply,
    alive: Alive,
    started: Instant,
}

impl Source {
    pub fn new(config: ConfigSourceConfig, apply: Apply, alive: Alive) -> Source {
        let instance = config.instance();
        let state = SourceState { name: config.name.clone(), instance: instance.clone(), applied_from: "bootstrap", ..Default::default() };
        Source { keys: Keys::new(&config.name), config, instance, state: Arc::new(Mutex::new(state)), traffic: Arc::new(Traffic::default()), apply, alive, started: Instant::now() }
    }

    pub fn state(&self) -> Arc<Mutex<SourceState>> {
        self.state.clone()
    }

    pub fn traffic(&self) -> Arc<Traffic> {
        self.traffic.clone()
    }

    /// The cached copy, applied (Redis is asked later); false when there is none for this name.
    pub fn apply_cached(&self) -> bool {
        let Some(path) = &self.config.cache_file else { return false };
        let Ok(text) = std::fs::read_to_string(path) else { return false };
        let Ok(cached) = serde_json::from_str::<Cached>(&text) else { return false };
        if cached.name != self.config.name || super::sha256_hex(&cached.doc.content) != cached.doc.hash {
            return false;
        }
        self.apply_doc(&cached.doc, "cache_file") == Some(true)
    }

    /// Applies `doc`; `Some(applied)`, `None` when the client is gone.
    fn apply_doc(&self, doc: &ConfigDoc, from: &'static str) -> Option<bool> {
        let result = (self.apply)(&doc.content, &doc.format, doc.version)?;
        let mut s = self.state.lock();
        match result {
            Ok(_) => {
                // The next beat counts only what the new version served (a guard compares it).
                let _ = self.traffic.take();
                s.version = doc.version;
                s.hash = Some(doc.hash.clone());
                s.applied_from = from;
                s.applied_at_ms = Some(now_ms());
                if from == "redis" {
                    drop(s);
                    self.save(doc);
                }
                Some(true)
            }
            Err(e) => {
                s.rejected_version = Some(doc.version);
                s.rejected_reason = Some(e.message.clone());
                Some(false)
            }
        }
    }

    /// Keeps `doc` on disk (written aside, then renamed: never a half-written copy).
    fn save(&self, doc: &ConfigDoc) {
        let Some(path) = &self.config.cache_file else { return };
        let Ok(text) = serde_json::to_string(&Cached { name: self.config.name.clone(), doc: doc.clone() }) else { return };
        let tmp = format!("{path}.tmp-{}", std::process::id());
        if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Follows the config until the client is gone.
    pub async fn run(self, conn: Arc<RedisConn>) {
        let changed = Arc::new(tokio::sync::Notify::new());
        let listener = tokio::spawn(listen(conn.client().clone(), self.keys.channel(), changed.clone()));
        let my_bucket = bucket(&self.instance);
        let poll = Duration::from_millis(self.config.poll_ms);
        let beat_every = Duration::from_millis(self.config.heartbeat_ms);
        let mut next_beat = Instant::now();
        loop {
            if !(self.alive)() || self.step(&conn, my_bucket).await.is_none() {
                break;
            }
            if Instant::now() >= next_beat {
                self.beat(&conn).await;
                self.guard(&conn).await;
                next_beat = Instant::now() + beat_every;
            }
            let wait = poll.min(next_beat.saturating_duration_since(Instant::now()));
            tokio::select! {
                _ = changed.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
        listener.abort();
        let script = redis::Script::new("return redis.call('DEL', KEYS[1])");
        let _ = conn.script::<i64>(&script, &[&self.keys.heartbeat(&self.instance)], &[]).await;
    }

    /// Asks Redis which version this instance should run and applies it; `None` once the client is gone.
    async fn step(&self, conn: &RedisConn, my_bucket: u32) -> Option<()> {
        let script = redis::Script::new("return redis.call('HGETALL', KEYS[1])");
        let fleet = match conn.script::<std::collections::BTreeMap<String, String>>(&script, &[&self.keys.state()], &[]).await {
            Ok(h) => FleetState::from_hash(&h),
            Err(why) => {
                let mut s = self.state.lock();
                s.connected = false;
                if let Some(why) = why {
                    s.last_error = Some(why);
                }
                return Some(());
            }
        };
        let target = fleet.target(my_bucket);
        let (applied, rejected) = {
            let mut s = self.state.lock();
            s.connected = true;
            s.target = target;
            (s.version, s.rejected_version)
        };
        if target == 0 || target == applied || Some(target) == rejected {
            return Some(());
        }
        let script = redis::Script::new("return redis.call('GET', KEYS[1])");
        let doc = match conn.script::<Option<String>>(&script, &[&self.keys.doc(target)], &[]).await {
            Ok(Some(text)) => serde_json::from_str::<ConfigDoc>(&text).ok(),
            Ok(None) => None,
            Err(_) => return Some(()),
        };
        match doc {
            Some(doc) if doc.version == target && super::sha256_hex(&doc.content) == doc.hash => {
                self.apply_doc(&doc, "redis")?;
            }
            _ => {
                let mut s = self.state.lock();
                s.rejected_version = Some(target);
                s.rejected_reason = Some(format!("version {target}: missing or damaged in Redis"));
            }
        }
        Some(())
    }

    async fn beat(&self, conn: &RedisConn) {
        let (requests, errors, p50_ms, p99_ms) = self.traffic.take();
        let s = self.state.lock().clone();
        let hb = Heartbeat {
            instance: self.instance.clone(),
            version: s.version,
            rejected_version: s.rejected_version,
            rejected_reason: s.rejected_reason,
            uptime_s: self.started.elapsed().as_secs_f64(),
            requests,
            errors,
            p50_ms,
            p99_ms,
            at_ms: now_ms(),
        };
        let Ok(text) = serde_json::to_string(&hb) else { return };
        let ttl = (self.config.heartbeat_ms * 3).to_string();
        // This beat's counts go under the version that served them, for a canary's guard.
        let sample = Sample { at_ms: hb.at_ms, instance: hb.instance.clone(), requests, errors, p99_ms };
        let sample = if s.version > 0 && requests > 0 { serde_json::to_string(&sample).unwrap_or_default() } else { String::new() };
        let script = redis::Script::new(BEAT);
        let keys = [self.keys.heartbeat(&self.instance), self.keys.stats(s.version)];
        let _ = conn.script::<redis::Value>(&script, &[&keys[0], &keys[1]], &[text, ttl, sample]).await;
    }

    /// Rolls the canary back when it is over its guard (README "Running a fleet").
    async fn guard(&self, conn: &RedisConn) {
        let script = redis::Script::new(GUARD_READ);
        let Ok(head) = conn.script::<Vec<String>>(&script, &[&self.keys.state(), &self.keys.guard()], &[]).await else { return };
        let [canary, stable, guard] = head.as_slice() else { return };
        let (Ok(canary), Ok(stable), Ok(guard)) = (canary.parse::<u64>(), stable.parse::<u64>(), serde_json::from_str::<Guard>(guard)) else { return };
        if canary == 0 || guard.version != canary {
            return;
        }
        let script = redis::Script::new("return {redis.call('LRANGE', KEYS[1], 0, -1), redis.call('LRANGE', KEYS[2], 0, -1)}");
        let Ok((c, b)) = conn.script::<(Vec<String>, Vec<String>)>(&script, &[&self.keys.stats(canary), &self.keys.stats(stable)], &[]).await else { return };
        let parse = |v: Vec<String>| v.iter().filter_map(|t| serde_json::from_str::<Sample>(t).ok()).collect::<Vec<_>>();
        let Some(reason) = guard.verdict(&parse(c), &parse(b), now_ms()) else { return };
        let record = super::audit("rollback", canary, &format!("guard@{}", self.instance), &reason);
        let keys = [self.keys.state(), self.keys.log(), self.keys.channel()];
        let script = redis::Script::new(super::ROLLBACK);
        let _ = conn.script::<(u64, u64)>(&script, &[&keys[0], &keys[1], &keys[2]], &[record, canary.to_string()]).await;
    }
}

/// KEYS: heartbeat, this version's stats; ARGV: heartbeat, its ttl, the beat's sample ('' = none).
const BEAT: &str = r#"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('RPUSH', KEYS[2], ARGV[3])
  redis.call('LTRIM', KEYS[2], -2000, -1)
  redis.call('PEXPIRE', KEYS[2], 86400000)
end
return 1
"#;

/// KEYS: state, guard. {canary, stable, guard}, or nothing without a canary or a guard.
const GUARD_READ: &str = r#"
local canary = redis.call('HGET', KEYS[1], 'canary') or '0'
local guard = redis.call('GET', KEYS[2])
if canary == '0' or not guard then return {} end
return {canary, redis.call('HGET', KEYS[1], 'stable') or '0', guard}
"#;

/// Wakes the loop on every message of the channel; reconnects after a lost connection.
async fn listen(client: redis::Client, channel: String, changed: Arc<tokio::sync::Notify>) {
    loop {
        if let Ok(Ok(mut pubsub)) = tokio::time::timeout(Duration::from_secs(1), client.get_async_pubsub()).await {
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(1), pubsub.subscribe(&channel)).await {
                // Whatever changed while away is caught by the next step.
                changed.notify_one();
                let mut messages = pubsub.on_message();
                while messages.next().await.is_some() {
                    changed.notify_one();
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

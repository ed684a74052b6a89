//! The fleet's cache (`cache.shared`): HTTP-cache entries, exact answers and semantic
//! entries (vector and answer key) stored in Redis with their time to live, so one
//! instance's miss is every instance's hit. Each instance's semantic index is filled from
//! Redis at start (and after every reconnect) and kept current over a pub/sub channel.
//!
//! Guarantees: a Redis outage never fails a request: a read that cannot be answered is a
//! local miss, a write that cannot be made is dropped, each call is bounded (`RedisConn`),
//! and the outage is reported once (`on_outage`) until Redis answers again; writes never
//! delay an answer (they run behind it); what is read back is checked (a value of another
//! kind, a malformed one or one over the entry cap is a miss); keys are SHA-256 digests of
//! what identifies the answer, principal included, so no answer crosses principals in
//! Redis either; `clear` removes a name's entries fleet-wide and tells every instance.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::config::SharedCacheConfig;
use super::store::{hex, key, Key};
use crate::state::redis::{RedisConn, CALL_TIMEOUT};

/// What a stored value is: the letter in its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Http,
    Answer,
    Semantic,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Http => 'h',
            Kind::Answer => 'a',
            Kind::Semantic => 's',
        }
    }
}

/// A semantic entry as stored and as announced: where its answer is, and the prompt's vector.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SemanticWire {
    /// The route as named.
    pub r: String,
    /// The scope the prompt may match in.
    pub s: u64,
    /// The answer's key (hex).
    pub k: String,
    /// The vector, little-endian f32s in base64.
    pub v: String,
}

impl SemanticWire {
    pub fn new(route: &str, scope: u64, answer: &Key, vector: &[f32]) -> SemanticWire {
        let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
        SemanticWire { r: route.to_string(), s: scope, k: hex(answer), v: base64::engine::general_purpose::STANDARD.encode(bytes) }
    }

    pub fn vector(&self) -> Option<Vec<f32>> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(&self.v).ok()?;
        if bytes.is_empty() || bytes.len() % 4 != 0 || bytes.len() > MAX_VECTOR_BYTES {
            return None;
        }
        Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    pub fn answer_key(&self) -> Option<Key> {
        if self.k.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(self.k.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(out)
    }
}

/// No embedding model comes near this many dimensions (16k); a larger vector is not ours.
const MAX_VECTOR_BYTES: usize = 16_384 * 4;

/// What goes over the channel.
#[derive(Debug, Serialize, Deserialize)]
struct Message {
    /// The instance that sent it (it has applied it already).
    o: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sem: Option<SemanticWire>,
    /// Its time to live, for a semantic entry.
    #[serde(default)]
    t: u64,
    /// `Some`: every instance drops what it keeps for this name (`""`: everything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clear: Option<String>,
}

/// What the listener does with what other instances announce.
pub trait Apply: Send + Sync + 'static {
    /// A semantic entry stored elsewhere, live for `ttl`.
    fn semantic(&self, entry: &SemanticWire, vector: &[f32], ttl: Duration);
    /// Another instance cleared `name` (`None`: everything).
    fn clear(&self, name: Option<&str>);
}

const GET: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, redis.call('PTTL', KEYS[1])}
"#;

/// KEYS: the entries; ARGV: ttl_ms, then one value per key, then the channel and a message ('' for none).
const SET: &str = r#"
local ttl = ARGV[1]
for i, k in ipairs(KEYS) do
  redis.call('SET', k, ARGV[i + 1], 'PX', ttl)
end
local n = #KEYS
if ARGV[n + 3] ~= '' then redis.call('PUBLISH', ARGV[n + 2], ARGV[n + 3]) end
return 1
"#;

/// ARGV: cursor, pattern. One step of a scan: the next cursor and {value, pttl} per live key.
const SCAN_VALUES: &str = r#"
local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 500)
local out = {}
for _, k in ipairs(r[2]) do
  local v = redis.call('GET', k)
  if v then out[#out + 1] = {v, redis.call('PTTL', k)} end
end
return {r[1], out}
"#;

/// ARGV: cursor, pattern. One step of a clear: the next cursor and how many keys went.
const SCAN_UNLINK: &str = r#"
local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 1000)
for _, k in ipairs(r[2]) do redis.call('UNLINK', k) end
return {r[1], #r[2]}
"#;

const PUBLISH: &str = "return redis.call('PUBLISH', ARGV[1], ARGV[2])";

/// Most entries a warm-up reads (the index keeps at most its own cap anyway).
const WARM_MAX: usize = 1_000_000;

type OnOutage = Arc<dyn Fn(&str, String) + Send + Sync>;

pub struct SharedCache {
    conn: Arc<RedisConn>,
    config: SharedCacheConfig,
    me: u64,
    max_entry: usize,
    on_outage: OnOutage,
    listener: Mutex<Option<tokio::task::AbortHandle>>,
    /// Subscribed, and the index filled from Redis since.
    listening: Arc<AtomicBool>,
}

impl std::fmt::Debug for SharedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCache").field("key_prefix", &self.config.key_prefix).finish_non_exhaustive()
    }
}

impl Drop for SharedCache {
    fn drop(&mut self) {
        if let Some(h) = self.listener.lock().take() {
            h.abort();
        }
    }
}

/// A short, glob-free tag of a service's or route's name, so one name's keys can be found.
fn owner_tag(owner: &str) -> String {
    hex(&key(&[b"owner", owner.as_bytes()]))[..16].to_string()
}

/// `s` with Redis's glob characters escaped (a prefix is taken literally in MATCH).
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl SharedCache {
    /// The fleet's store at `config`; `apply` receives what other instances announce (a
    /// listener task runs until this is dropped). `max_entry` bounds what is read back.
    pub fn start(conn: Arc<RedisConn>, config: &SharedCacheConfig, max_entry: usize, apply: Arc<dyn Apply>, on_outage: OnOutage) -> Arc<SharedCache> {
        let me = rand::random::<u64>();
        let listening = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(SharedCache { conn, config: config.clone(), me, max_entry, on_outage, listener: Mutex::new(None), listening: listening.clone() });
        if let Ok(rt) = crate::runtime::handle() {
            let listener = Listener { conn: shared.conn.clone(), channel: shared.channel(), pattern: shared.pattern(Kind::Semantic, None), me, apply, listening, on_outage: shared.on_outage.clone() };
            let task = rt.spawn(listener.run());
            *shared.listener.lock() = Some(task.abort_handle());
        }
        shared
    }

    /// Whether this instance hears the others now (subscribed, its index filled since).
    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }

    pub fn config(&self) -> &SharedCacheConfig {
        &self.config
    }

    fn channel(&self) -> String {
        format!("{}events", self.config.key_prefix)
    }

    fn redis_key(&self, kind: Kind, owner: &str, k: &Key) -> String {
        format!("{}{}:{}:{}", self.config.key_prefix, kind.letter(), owner_tag(owner), hex(k))
    }

    /// Every key of `kind` (of one name, or of all).
    fn pattern(&self, kind: Kind, owner: Option<&str>) -> String {
        let owner = owner.map_or_else(|| "*".to_string(), owner_tag);
        format!("{}{}:{}:*", glob_escape(&self.config.key_prefix), kind.letter(), owner)
    }

    fn outage(&self, owner: &str, why: Option<String>) {
        if let Some(why) = why {
            (self.on_outage)(owner, why);
        }
    }

    /// The value stored under `k` and how long it has left; `None` on a miss or when Redis
    /// cannot answer now.
    pub async fn get(&self, kind: Kind, owner: &str, k: &Key) -> Option<(Vec<u8>, Duration)> {
        let script = redis::Script::new(GET);
        match self.conn.script::<Option<(Vec<u8>, i64)>>(&script, &[&self.redis_key(kind, owner, k)], &[]).await {
            Ok(Some((v, ttl))) if ttl > 0 && v.len() <= self.max_entry.saturating_mul(2).saturating_add(4096) => Some((v, Duration::from_millis(ttl as u64))),
            Ok(_) => None,
            Err(why) => {
                self.outage(owner, why);
                None
            }
        }
    }

    /// Stores `value` under `k` for `ttl`, behind the caller (never delaying it).
    pub fn put(self: &Arc<Self>, kind: Kind, owner: &str, k: &Key, value: Vec<u8>, ttl: Duration) {
        self.put_many(owner, vec![(self.redis_key(kind, owner, k), value)], ttl, None);
    }

    /// A semantic entry and its answer, stored together and announced to every instance.
    pub fn put_semantic(self: &Arc<Self>, owner: &str, entry: &SemanticWire, answer_key: &Key, answer: Vec<u8>, ttl: Duration) {
        let Ok(stored) = serde_json::to_vec(entry) else { return };
        let entry_key = key(&[b"semantic-entry", entry.r.as_bytes(), &entry.s.to_le_bytes(), answer_key]);
        let message = Message { o: self.me, sem: Some(entry.clone()), t: ttl.as_millis() as u64, clear: None };
        let message = serde_json::to_string(&message).ok();
        let values = vec![(self.redis_key(Kind::Answer, owner, answer_key), answer), (self.redis_key(Kind::Semantic, owner, &entry_key), stored)];
        self.put_many(owner, values, ttl, message);
    }

    fn put_many(self: &Arc<Self>, owner: &str, values: Vec<(String, Vec<u8>)>, ttl: Duration, message: Option<String>) {
        let ttl_ms = ttl.as_millis().clamp(1, i64::MAX as u128) as u64;
        let Ok(rt) = crate::runtime::handle() else { return };
        let me = self.clone();
        let owner = owner.to_string();
        rt.spawn(async move {
            let script = redis::Script::new(SET);
            let keys: Vec<&str> = values.iter().map(|(k, _)| k.as_str()).collect();
            let mut args = vec![ttl_ms.to_string()];
            // Values are JSON text (binary parts in base64).
            args.extend(values.iter().map(|(_, v)| String::from_utf8_lossy(v).into_owned()));
            args.push(me.channel());
            args.push(message.unwrap_or_default());
            if let Err(why) = me.conn.script::<i64>(&script, &keys, &args).await {
                me.outage(&owner, why);
            }
        });
    }

    /// Removes `name`'s entries (every entry when `None`) from Redis and tells every
    /// instance to drop its own; how many keys went (`None` when Redis could not answer).
    pub async fn clear(&self, name: Option<&str>) -> Option<usize> {
        let script = redis::Script::new(SCAN_UNLINK);
        let mut removed = 0usize;
        for kind in [Kind::Http, Kind::Answer, Kind::Semantic] {
            let pattern = self.pattern(kind, name);
            let mut cursor = "0".to_string();
            loop {
                match self.conn.script::<(String, usize)>(&script, &[], &[cursor.clone(), pattern.clone()]).await {
                    Ok((next, n)) => {
                        removed += n;
                        cursor = next;
                        if cursor == "0" {
                            break;
                        }
                    }
                    Err(why) => {
                        self.outage(name.unwrap_or("cache"), why);
                        return None;
                    }
                }
            }
        }
        let message = Message { o: self.me, sem: None, t: 0, clear: Some(name.unwrap_or("").to_string()) };
        let text = serde_json::to_string(&message).unwrap_or_default();
        if let Err(why) = self.conn.script::<i64>(&redis::Script::new(PUBLISH), &[], &[self.channel(), text]).await {
            self.outage(name.unwrap_or("cache"), why);
        }
        Some(removed)
    }
}

struct Listener {
    conn: Arc<RedisConn>,
    channel: String,
    pattern: String,
    me: u64,
    apply: Arc<dyn Apply>,
    listening: Arc<AtomicBool>,
    on_outage: OnOutage,
}

impl Listener {
    /// Reads the channel until aborted: subscribes, fills the index from Redis (every
    /// semantic entry still live), applies announcements as they come; on a lost
    /// connection, waits and starts over (the fill catches up what was missed).
    async fn run(self) {
        let mut backoff = Duration::from_millis(200);
        loop {
            if let Ok(Ok(mut pubsub)) = tokio::time::timeout(CALL_TIMEOUT, self.conn.client().get_async_pubsub()).await {
                if let Ok(Ok(())) = tokio::time::timeout(CALL_TIMEOUT, pubsub.subscribe(&self.channel)).await {
                    backoff = Duration::from_millis(200);
                    if self.warm().await {
                        self.listening.store(true, Ordering::Release);
                        let mut messages = pubsub.on_message();
                        while let Some(msg) = messages.next().await {
                            self.on_message(&msg);
                        }
                        self.listening.store(false, Ordering::Release);
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    fn on_message(&self, msg: &redis::Msg) {
        let Ok(payload) = msg.get_payload::<Vec<u8>>() else { return };
        let Ok(m) = serde_json::from_slice::<Message>(&payload) else { return };
        if m.o == self.me {
            return;
        }
        if let Some(name) = &m.clear {
            self.apply.clear((!name.is_empty()).then_some(name.as_str()));
        }
        if let Some(entry) = &m.sem {
            if let Some(v) = entry.vector() {
                self.apply.semantic(entry, &v, Duration::from_millis(m.t.max(1)));
            }
        }
    }

    /// Every live semantic entry in Redis into the index (a scan in steps, never one long
    /// call); false when Redis stopped answering part way.
    async fn warm(&self) -> bool {
        let script = redis::Script::new(SCAN_VALUES);
        let mut cursor = "0".to_string();
        let mut n = 0;
        loop {
            let (next, values) = match self.conn.script::<(String, Vec<(Vec<u8>, i64)>)>(&script, &[], &[cursor.clone(), self.pattern.clone()]).await {
                Ok(v) => v,
                Err(why) => {
                    if let Some(why) = why {
                        (self.on_outage)("cache", why);
                    }
                    return false;
                }
            };
            for (v, ttl) in values {
                if ttl <= 0 {
                    continue;
                }
                let Ok(entry) = serde_json::from_slice::<SemanticWire>(&v) else { continue };
                if let Some(vector) = entry.vector() {
                    self.apply.semantic(&entry, &vector, Duration::from_millis(ttl as u64));
                    n += 1;
                }
            }
            cursor = next;
            if cursor == "0" || n >= WARM_MAX {
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semantic_entry_round_trips_and_a_foreign_one_is_refused() {
        let k = key(&[b"a"]);
        let w = SemanticWire::new("r", 7, &k, &[0.5, -1.0, 2.0]);
        let back: SemanticWire = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back.vector().unwrap(), vec![0.5, -1.0, 2.0]);
        assert_eq!(back.answer_key().unwrap(), k);
        let bad = SemanticWire { v: "AAA".into(), k: "zz".into(), ..w };
        assert!(bad.vector().is_none() && bad.answer_key().is_none());
    }

    #[test]
    fn names_become_glob_free_tags_and_prefixes_are_escaped() {
        assert_eq!(owner_tag("a*b").len(), 16);
        assert!(owner_tag("a*b").chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(owner_tag("a"), owner_tag("b"));
        assert_eq!(glob_escape("h[1]*:"), "h\\[1\\]\\*:");
    }
}

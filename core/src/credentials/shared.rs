//! A token shared by every process of a fleet through Redis (`auth.shared`).
//!
//! Guarantees: across any number of processes exactly one refresh happens per
//! expiry (a `SET NX PX` lock holding a fencing number from `INCR`; the token is
//! written only while that fence still holds the lock, and the lock is released by
//! a Lua compare-and-delete); the others wait for the shared value; with an
//! encryption key the token is stored sealed (AES-256-GCM); every Redis call is
//! bounded in time, and when Redis is unavailable the caller falls back to a local
//! refresh (the connection manager keeps reconnecting). Never a secret in an error.

use std::time::{Duration, SystemTime};

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use super::secret::{Secret, SecretRef};
use crate::error::HarnessError;

/// Longest any one Redis call may take before it counts as unavailable.
const REDIS_CALL: Duration = Duration::from_millis(500);

/// `services.<name>.auth.shared`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SharedConfig {
    pub redis_url: String,
    pub key_prefix: String,
    /// Seals the token at rest (any text; a 256-bit key is derived from it).
    pub encryption_key: Option<SecretRef>,
}

impl Default for SharedConfig {
    fn default() -> Self {
        SharedConfig { redis_url: String::new(), key_prefix: "harness:cred:".into(), encryption_key: None }
    }
}

impl SharedConfig {
    pub fn validate(&self, path: &str) -> Result<(), HarnessError> {
        match url::Url::parse(&self.redis_url) {
            Ok(u) if u.scheme() == "redis" || u.scheme() == "rediss" => {}
            _ => {
                let shown = crate::redact::redact_url(&self.redis_url);
                return Err(HarnessError::config(format!("{path}.redis_url: expected a redis:// URL, got {:?}", crate::redact::escape_control(&shown))));
            }
        }
        if let Some(k) = &self.encryption_key {
            k.validate(&format!("{path}.encryption_key"))?;
        }
        Ok(())
    }
}

/// What is stored under the token key.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct Stored {
    /// The token, or hex of nonce + ciphertext when sealed.
    t: String,
    /// Expiry, Unix milliseconds (0: none).
    e: u64,
    sealed: bool,
}

pub struct SharedTokens {
    client: redis::Client,
    conn: tokio::sync::Mutex<Option<redis::aio::ConnectionManager>>,
    token_key: String,
    lock_key: String,
    fence_key: String,
    seal: Option<LessSafeKey>,
}

/// The shared store could not be used (the caller falls back to a local refresh).
#[derive(Debug, Clone)]
pub struct Unavailable(pub String);

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

impl SharedTokens {
    pub fn new(service: &str, cfg: &SharedConfig, path: &str) -> Result<Self, HarnessError> {
        let client = redis::Client::open(cfg.redis_url.as_str())
            .map_err(|_| HarnessError::config(format!("{path}.redis_url: not a valid Redis URL")))?;
        let seal = match &cfg.encryption_key {
            None => None,
            Some(r) => {
                let material = r.load(&format!("{path}.encryption_key"))?.current()?;
                let digest = ring::digest::digest(&ring::digest::SHA256, material.expose().as_bytes());
                Some(LessSafeKey::new(UnboundKey::new(&AES_256_GCM, digest.as_ref()).expect("32 bytes")))
            }
        };
        let base = format!("{}{service}", cfg.key_prefix);
        Ok(SharedTokens {
            client,
            conn: tokio::sync::Mutex::new(None),
            token_key: format!("{base}:token"),
            lock_key: format!("{base}:lock"),
            fence_key: format!("{base}:fence"),
            seal,
        })
    }

    async fn connection(&self) -> Result<redis::aio::ConnectionManager, Unavailable> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let made = tokio::time::timeout(REDIS_CALL, self.client.get_connection_manager())
            .await
            .map_err(|_| Unavailable("redis did not answer in time".into()))?
            .map_err(|e| Unavailable(format!("redis: {:?}", e.kind())))?;
        *slot = Some(made.clone());
        Ok(made)
    }

    async fn call<T: redis::FromRedisValue>(&self, cmd: &mut redis::Cmd) -> Result<T, Unavailable> {
        let mut conn = self.connection().await?;
        tokio::time::timeout(REDIS_CALL, cmd.query_async::<T>(&mut conn))
            .await
            .map_err(|_| Unavailable("redis did not answer in time".into()))?
            .map_err(|e| Unavailable(format!("redis: {:?}", e.kind())))
    }

    /// The shared token and its expiry, if one is stored.
    pub async fn get(&self) -> Result<Option<(Secret, Option<SystemTime>)>, Unavailable> {
        let raw: Option<String> = self.call(redis::cmd("GET").arg(&self.token_key)).await?;
        let Some(raw) = raw else { return Ok(None) };
        let Ok(stored) = serde_json::from_str::<Stored>(&raw) else { return Ok(None) };
        let value = if stored.sealed {
            let Some(key) = &self.seal else { return Ok(None) };
            let Some(mut bytes) = unhex(&stored.t) else { return Ok(None) };
            if bytes.len() < NONCE_LEN {
                return Ok(None);
            }
            let mut ciphertext = bytes.split_off(NONCE_LEN);
            let nonce = Nonce::try_assume_unique_for_key(&bytes).map_err(|_| Unavailable("bad nonce".into()))?;
            match key.open_in_place(nonce, Aad::empty(), &mut ciphertext) {
                Ok(plain) => String::from_utf8(plain.to_vec()).map_err(|_| Unavailable("bad token".into()))?,
                Err(_) => return Ok(None),
            }
        } else {
            stored.t
        };
        let expires = (stored.e > 0).then(|| SystemTime::UNIX_EPOCH + Duration::from_millis(stored.e));
        Ok(Some((Secret::new(value), expires)))
    }

    /// Takes the refresh lock for `ttl`; the fencing number when this process holds it.
    pub async fn try_lock(&self, ttl: Duration) -> Result<Option<i64>, Unavailable> {
        let fence: i64 = self.call(redis::cmd("INCR").arg(&self.fence_key)).await?;
        let set: Option<String> =
            self.call(redis::cmd("SET").arg(&self.lock_key).arg(fence).arg("NX").arg("PX").arg(ttl.as_millis() as u64)).await?;
        Ok(set.map(|_| fence))
    }

    /// Stores the token only while `fence` still holds the lock (a stale holder cannot overwrite).
    pub async fn put(&self, fence: i64, value: &Secret, expires: Option<SystemTime>) -> Result<bool, Unavailable> {
        let (t, sealed) = match &self.seal {
            None => (value.expose().to_string(), false),
            Some(key) => {
                let mut nonce = [0u8; NONCE_LEN];
                SystemRandom::new().fill(&mut nonce).map_err(|_| Unavailable("no randomness".into()))?;
                let mut data = value.expose().as_bytes().to_vec();
                key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
                    .map_err(|_| Unavailable("cannot seal".into()))?;
                (hex(&[&nonce[..], &data].concat()), true)
            }
        };
        let e = expires.map(unix_ms).unwrap_or(0);
        let stored = serde_json::to_string(&Stored { t, e, sealed }).expect("serialises");
        let ttl_ms = expires.and_then(|x| x.duration_since(SystemTime::now()).ok()).map(|d| d.as_millis().max(1) as u64).unwrap_or(0);
        let script = redis::Script::new(
            r#"if redis.call('GET', KEYS[1]) == ARGV[1] then
                 if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) else redis.call('SET', KEYS[2], ARGV[2]) end
                 return 1
               end
               return 0"#,
        );
        let mut conn = self.connection().await?;
        let mut invocation = script.key(&self.lock_key);
        invocation.key(&self.token_key).arg(fence).arg(stored).arg(ttl_ms);
        let written: i64 = tokio::time::timeout(REDIS_CALL, invocation.invoke_async(&mut conn))
            .await
            .map_err(|_| Unavailable("redis did not answer in time".into()))?
            .map_err(|e| Unavailable(format!("redis: {:?}", e.kind())))?;
        Ok(written == 1)
    }

    /// Releases the lock if `fence` still holds it (compare-and-delete).
    pub async fn unlock(&self, fence: i64) -> Result<(), Unavailable> {
        let script = redis::Script::new(
            r#"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"#,
        );
        let mut conn = self.connection().await?;
        let mut invocation = script.key(&self.lock_key);
        invocation.arg(fence);
        let _: i64 = tokio::time::timeout(REDIS_CALL, invocation.invoke_async(&mut conn))
            .await
            .map_err(|_| Unavailable("redis did not answer in time".into()))?
            .map_err(|e| Unavailable(format!("redis: {:?}", e.kind())))?;
        Ok(())
    }
}

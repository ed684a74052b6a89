//! The idempotent receiver: a handler runs at most once per message id, across a fleet.
//!
//! Per key: absent -> `PENDING` (claimed, with a lease and a fencing number) ->
//! `PROCESSED` (the stored result, kept for `ttl_ms`) or `FAILED`.
//! Guarantees: a duplicate of a processed key gets the stored result and the
//! handler does not run; a duplicate while pending gets `DuplicateInFlightError`
//! (with the lease time left as `retry_after`); a failed key may be claimed again
//! (`retry_failed`); a pending key whose lease expired (its worker died) may be
//! claimed again with a new fencing number, and the late worker's result is then
//! refused (`lease_lost`), never written over the new one's. In Redis every
//! transition is one Lua script on Redis's clock. When the store cannot answer,
//! `on_store_down` decides: `reject` (an error; the sender retries later) or
//! `process` (run without dedup, counted). A signed webhook is checked first, by the same
//! HMAC code that signs a service's requests (`credentials::hmac`; preset `harness`:
//! HMAC-SHA256 of `timestamp.body`), its timestamp within `max_skew_ms`: a bad one runs nothing.

pub mod config;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

pub use config::{IdempotencyConfig, OnStoreDown, SignatureConfig};

use crate::credentials::hmac::{HmacSigner, Parts};
use crate::credentials::secret::SecretSource;
use crate::error::{ErrorKind, HarnessError};
use crate::observability::metrics::Label;
use crate::redact::escape_control;
use crate::state::{ClaimState, Finish, IdempotencyStore};

/// A delivery's claim: run the handler, then `complete` or `fail` it.
#[derive(Debug, Clone)]
pub struct Lease {
    pub key: String,
    pub fence: u64,
    /// False when the store was down and `on_store_down: process` let it run without dedup.
    pub deduplicated: bool,
}

/// The outcome of `claim`.
#[derive(Debug, Clone)]
pub enum Claim {
    /// Run the handler.
    Run(Lease),
    /// Already processed: the stored result; do not run the handler.
    Done(Bytes),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: Label,
}

/// A receiver: claims, results and signature checks for one kind of delivery.
pub struct Idempotency {
    config: IdempotencyConfig,
    store: Arc<dyn IdempotencyStore>,
    /// The signature scheme and its secret (a file is re-read when it changes).
    signature: Option<(HmacSigner, SecretSource)>,
    outcomes: Family<OutcomeLabels, Counter>,
    registry: parking_lot::Mutex<prometheus_client::registry::Registry>,
    on_outage: parking_lot::Mutex<Option<String>>,
    pid: u32,
}

impl std::fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("prefix", &self.config.prefix)
            .field("backend", &if self.config.redis_url.is_some() { "redis" } else { "memory" })
            .field("signature", &self.signature.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Longest part of a key (tenant, event type, message id).
const MAX_PART: usize = 256;

impl Idempotency {
    pub fn new(config: IdempotencyConfig) -> Result<Self, HarnessError> {
        config.validate()?;
        let store: Arc<dyn IdempotencyStore> = match &config.redis_url {
            Some(url) => Arc::new(crate::state::redis::RedisReceiver::new(url, &config.prefix)?),
            None => Arc::new(crate::state::memory::MemoryReceiver::default()),
        };
        let signature = match &config.signature {
            Some(s) => {
                let signer = HmacSigner::new(&s.0, "signature")?;
                let source = s.0.secret.as_ref().expect("validated").load("signature.secret")?;
                signer.check_secret(&source.current()?, "signature.secret")?;
                Some((signer, source))
            }
            None => None,
        };
        let outcomes = Family::<OutcomeLabels, Counter>::default();
        let mut registry = prometheus_client::registry::Registry::with_prefix("harness");
        registry.register("idempotency", "Receiver outcomes per delivery", outcomes.clone());
        Ok(Idempotency { config, store, signature, outcomes, registry: parking_lot::Mutex::new(registry), on_outage: parking_lot::Mutex::new(None), pid: std::process::id() })
    }

    pub fn from_value(value: serde_json::Value) -> Result<Self, HarnessError> {
        Self::new(IdempotencyConfig::from_value(value)?)
    }

    pub fn config(&self) -> &IdempotencyConfig {
        &self.config
    }

    fn count(&self, outcome: &str) {
        self.outcomes.get_or_create(&OutcomeLabels { outcome: outcome.into() }).inc();
    }

    /// `{prefix}{tenant}:{event_type}:{msg_id}`; each part printable, at most 256 characters.
    pub fn key(&self, tenant: &str, event_type: &str, msg_id: &str) -> Result<String, HarnessError> {
        for (name, part) in [("tenant", tenant), ("event_type", event_type), ("msg_id", msg_id)] {
            if part.is_empty() || part.chars().count() > MAX_PART || part.chars().any(char::is_control) {
                return Err(HarnessError::config(format!("{name}: expected printable text of 1 to {MAX_PART} characters, got {:?}", escape_control(part))));
            }
        }
        Ok(format!("{}{tenant}:{event_type}:{msg_id}", self.config.prefix))
    }

    /// A receiver built before a `fork()` holds the parent's connection and state.
    fn check_usable(&self) -> Result<(), HarnessError> {
        let pid = std::process::id();
        if pid == self.pid {
            return Ok(());
        }
        Err(HarnessError::new(
            ErrorKind::Harness,
            format!("this receiver was created in process {} and cannot be used in forked child {pid}: create a new one in the child", self.pid),
        ))
    }

    fn check_key(&self, key: &str) -> Result<(), HarnessError> {
        if key.is_empty() || key.len() > 1024 || key.chars().any(char::is_control) {
            return Err(HarnessError::config(format!("key: expected printable text of 1 to 1024 bytes, got {:?}", escape_control(key))));
        }
        Ok(())
    }

    /// Claims `key` for this delivery (see the module doc for every outcome).
    pub async fn claim(&self, key: &str) -> Result<Claim, HarnessError> {
        self.check_usable()?;
        self.check_key(key)?;
        let lease = Duration::from_millis(self.config.lease_ms);
        let ttl = Duration::from_millis(self.config.ttl_ms);
        match self.store.claim(key, lease, ttl, self.config.retry_failed).await {
            Ok(ClaimState::Claimed { fence }) => {
                self.count("claimed");
                Ok(Claim::Run(Lease { key: key.to_string(), fence, deduplicated: true }))
            }
            Ok(ClaimState::Processed(result)) => {
                self.count("duplicate_processed");
                Ok(Claim::Done(Bytes::from(result)))
            }
            Ok(ClaimState::InFlight { lease_left }) => {
                self.count("duplicate_in_flight");
                let mut e = HarnessError::new(ErrorKind::DuplicateInFlight, "another delivery of this message is being processed");
                e.retry_after_ms = Some(lease_left.as_millis().max(1) as u64);
                e.code = Some("duplicate_in_flight".into());
                Err(e)
            }
            Ok(ClaimState::Failed) => {
                self.count("failed_before");
                let mut e = HarnessError::new(ErrorKind::Harness, "this message failed before and retry_failed is off: it is not run again");
                e.code = Some("failed_before".into());
                Err(e)
            }
            Err(why) => self.store_down(key, why),
        }
    }

    fn store_down(&self, key: &str, why: Option<String>) -> Result<Claim, HarnessError> {
        if let Some(why) = why {
            *self.on_outage.lock() = Some(why);
        }
        match self.config.on_store_down {
            OnStoreDown::Process => {
                self.count("store_down_processed");
                Ok(Claim::Run(Lease { key: key.to_string(), fence: 0, deduplicated: false }))
            }
            OnStoreDown::Reject => {
                self.count("store_down_rejected");
                let mut e = HarnessError::new(ErrorKind::Harness, "the idempotency store is unavailable: the message was not processed (retry later)");
                e.code = Some("store_unavailable".into());
                Err(e)
            }
        }
    }

    /// Stores the handler's result. `lease_lost` when the lease expired and another
    /// delivery took the key over (this result is not written).
    pub async fn complete(&self, lease: &Lease, result: &[u8]) -> Result<(), HarnessError> {
        if !lease.deduplicated {
            return Ok(());
        }
        let ttl = Duration::from_millis(self.config.ttl_ms);
        self.check_usable()?;
        if std::str::from_utf8(result).is_err() {
            return Err(HarnessError::config("result: a stored result is text (JSON); these bytes are not UTF-8"));
        }
        match self.store.complete(&lease.key, lease.fence, result, ttl).await {
            Ok(Finish::Written) => {
                self.count("processed");
                Ok(())
            }
            Ok(Finish::AlreadyFinished) => Ok(()),
            Ok(Finish::Lost) => {
                self.count("lease_lost");
                let mut e = HarnessError::new(ErrorKind::Harness, "the lease expired and another delivery took this message over: this result was not stored");
                e.code = Some("lease_lost".into());
                Err(e)
            }
            Err(_) => {
                let mut e = HarnessError::new(ErrorKind::Harness, "the idempotency store is unavailable: the result was not stored");
                e.code = Some("store_unavailable".into());
                Err(e)
            }
        }
    }

    /// Marks the claim failed (a redelivery may run it again when `retry_failed`).
    pub async fn fail(&self, lease: &Lease) -> Result<(), HarnessError> {
        if !lease.deduplicated {
            return Ok(());
        }
        self.check_usable()?;
        let ttl = Duration::from_millis(self.config.ttl_ms);
        match self.store.fail(&lease.key, lease.fence, ttl).await {
            Ok(Finish::Written) => {
                self.count("failed");
                Ok(())
            }
            // Already finished by this claim, or taken over: nothing to record.
            Ok(_) => Ok(()),
            Err(_) => {
                let mut e = HarnessError::new(ErrorKind::Harness, "the idempotency store is unavailable: the failure was not recorded");
                e.code = Some("store_unavailable".into());
                Err(e)
            }
        }
    }

    /// Checks a signed delivery with the configured preset: for `harness`, `signature` is hex
    /// HMAC-SHA256 of `{timestamp}.{body}` (optionally prefixed `sha256=`), `timestamp` Unix
    /// seconds within `max_skew_ms`. A scheme without a timestamp (`github`) ignores it.
    pub fn verify(&self, timestamp: &str, body: &[u8], signature: &str) -> Result<(), HarnessError> {
        let Some((signer, source)) = &self.signature else {
            return Err(HarnessError::config("signature: not configured for this receiver"));
        };
        let bad = |code: &str, msg: &str| {
            self.count("bad_signature");
            let mut e = HarnessError::new(ErrorKind::Auth, msg.to_string());
            e.code = Some(code.into());
            e
        };
        let timestamp = timestamp.trim();
        if signer.uses_timestamp() {
            let unit = if signer.unit_millis() { "milliseconds" } else { "seconds" };
            let Ok(ts) = timestamp.parse::<i64>() else {
                return Err(bad("bad_signature", &format!("the signature timestamp is not a Unix time in {unit}")));
            };
            let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
            let skew_ms = if signer.unit_millis() { (now.as_millis() as i64 - ts).unsigned_abs() } else { (now.as_secs() as i64 - ts).unsigned_abs().saturating_mul(1000) };
            if skew_ms > signer.max_skew_ms {
                return Err(bad("stale_signature", "the signature timestamp is outside max_skew_ms"));
            }
        }
        let secret = source.current()?;
        match signer.verify_parts(&secret, &Self::parts(timestamp, body), signature)? {
            true => Ok(()),
            false => Err(bad("bad_signature", "the signature does not match")),
        }
    }

    /// What a receiver's canonical string is built from: the timestamp and the body.
    fn parts<'a>(timestamp: &'a str, body: &'a [u8]) -> Parts<'a> {
        Parts { method: "", path: "", query: None, headers: None, host: None, body, timestamp, nonce: "" }
    }

    /// The signature `verify` expects for this delivery, as the preset writes it (for the
    /// harness preset: hex HMAC-SHA256 of `{timestamp}.{body}`), for senders and tests.
    pub fn sign(&self, timestamp: &str, body: &[u8]) -> Result<String, HarnessError> {
        let Some((signer, source)) = &self.signature else {
            return Err(HarnessError::config("signature: not configured for this receiver"));
        };
        signer.sign_parts(&source.current()?, &Self::parts(timestamp.trim(), body))
    }

    /// Runs `handler` at most once per key (Rust callers; bindings compose claim/complete/fail).
    pub async fn run<F, Fut>(&self, key: &str, handler: F) -> Result<Bytes, HarnessError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Bytes, HarnessError>>,
    {
        match self.claim(key).await? {
            Claim::Done(result) => Ok(result),
            Claim::Run(lease) => match handler().await {
                Ok(result) => {
                    self.complete(&lease, &result).await?;
                    Ok(result)
                }
                Err(e) => {
                    let _ = self.fail(&lease).await;
                    Err(e)
                }
            },
        }
    }

    /// The receiver's counters (`harness_idempotency_total{outcome}`), Prometheus text.
    pub fn metrics_text(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry.lock()).expect("writing to a String cannot fail");
        out
    }

    /// Why the store was last unavailable, if it was.
    pub fn last_store_error(&self) -> Option<String> {
        self.on_outage.lock().clone()
    }
}

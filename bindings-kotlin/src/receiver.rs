//! The idempotent receiver (`harness_core::Idempotency`) for the JVM: a UniFFI object for the
//! plain calls (key, signature check, metrics) and the records its async steps travel in.
//!
//! Translation only. The facade composes a delivery from the core's three steps, each one
//! downcall through the request path (`harness_kotlin_receive`, one upcall with the outcome):
//! claim -> the host handler -> complete (its result, JSON text) or fail. Which step may run,
//! leases, fencing and the store's outages are the core's.

use std::sync::Arc;

use harness_core::{ErrorKind, HarnessError, Idempotency, Lease};

use crate::handles::RECEIVERS;
use crate::values::NativeError;

/// A claim that lets the handler run; handed back to `complete` or `fail` as it came.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeLease {
    pub key: String,
    pub fence: u64,
    /// False when the store was down and `on_store_down: process` let it run without dedup.
    pub deduplicated: bool,
}

impl From<Lease> for NativeLease {
    fn from(l: Lease) -> Self {
        NativeLease { key: l.key, fence: l.fence, deduplicated: l.deduplicated }
    }
}

impl From<NativeLease> for Lease {
    fn from(l: NativeLease) -> Self {
        Lease { key: l.key, fence: l.fence, deduplicated: l.deduplicated }
    }
}

/// One step of a delivery, as the facade passes it to `harness_kotlin_receive`.
#[derive(uniffi::Enum, Debug, Clone)]
pub enum NativeReceiverCall {
    /// The outcome is a lease (run the handler) or the stored result (do not).
    Claim { key: String },
    /// Stores the handler's result (JSON text the facade wrote); the outcome is the end.
    Complete { lease: NativeLease, result: String },
    /// Marks the claim failed; the outcome is the end.
    Fail { lease: NativeLease },
}

/// A core `Idempotency`. The request path finds it by `handle`, which stops finding it once
/// this object is freed (the facade's `close`); steps already started keep their own reference.
#[derive(uniffi::Object)]
pub struct NativeIdempotency {
    receiver: Arc<Idempotency>,
    handle: u64,
}

impl std::fmt::Debug for NativeIdempotency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.receiver.fmt(f)
    }
}

impl Drop for NativeIdempotency {
    fn drop(&mut self) {
        RECEIVERS.remove(self.handle);
    }
}

#[uniffi::export]
impl NativeIdempotency {
    /// From the receiver's config as a JSON document (the facade serialises its Map); the core
    /// checks its nesting before parsing.
    #[uniffi::constructor]
    pub fn from_json(config: String) -> Result<Self, NativeError> {
        harness_core::json::check_text("config", config.as_bytes())?;
        let value = harness_core::json::parse_checked(&config).map_err(|e| HarnessError::config(format!("config: cannot parse json: {e}")))?;
        let receiver = Arc::new(Idempotency::from_value(value)?);
        let handle =
            RECEIVERS.insert(receiver.clone()).map_err(|_| HarnessError::new(ErrorKind::Harness, "too many Harness receivers in this process"))?;
        Ok(NativeIdempotency { receiver, handle })
    }

    /// What the facade passes to `harness_kotlin_receive`.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// `{prefix}{tenant}:{event_type}:{msg_id}`; a `ConfigError` naming a bad part.
    pub fn key(&self, tenant: String, event_type: String, msg_id: String) -> Result<String, NativeError> {
        Ok(self.receiver.key(&tenant, &event_type, &msg_id)?)
    }

    /// Checks a signed delivery (`AuthError`, code `bad_signature` or `stale_signature`).
    pub fn verify(&self, timestamp: String, body: Vec<u8>, signature: String) -> Result<(), NativeError> {
        Ok(self.receiver.verify(&timestamp, &body, &signature)?)
    }

    /// Signs `{timestamp}.{body}` as `verify` expects (hex HMAC-SHA256).
    pub fn sign(&self, timestamp: String, body: Vec<u8>) -> Result<String, NativeError> {
        Ok(self.receiver.sign(&timestamp, &body)?)
    }

    /// `harness_idempotency_total{outcome}`, Prometheus text.
    pub fn metrics_text(&self) -> String {
        self.receiver.metrics_text()
    }

    /// The core's `Debug` (prefix, backend, whether signed): never the secret.
    pub fn describe(&self) -> String {
        format!("{:?}", self.receiver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(e: NativeError) -> (String, String, Option<String>) {
        let NativeError::Failure { kind, reason, view, .. } = e;
        let view: serde_json::Value = serde_json::from_str(&view).unwrap();
        (kind, reason, view["code"].as_str().map(str::to_string))
    }

    #[test]
    fn a_bad_config_is_a_config_error_naming_the_field() {
        let (kind, reason, _) = native(NativeIdempotency::from_json(r#"{"lease_ms": 0}"#.into()).unwrap_err());
        assert_eq!(kind, "ConfigError");
        assert!(reason.starts_with("lease_ms"), "{reason}");
        let (kind, reason, _) = native(NativeIdempotency::from_json("[".into()).unwrap_err());
        assert_eq!(kind, "ConfigError");
        assert!(reason.starts_with("config:"), "{reason}");
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let (_, reason, _) = native(NativeIdempotency::from_json(deep).unwrap_err());
        assert!(reason.contains("nested deeper than 512"), "{reason}");
    }

    #[test]
    fn keys_signatures_and_debug_go_through_to_the_core_and_hide_the_secret() {
        let r = NativeIdempotency::from_json(r#"{"prefix": "p:", "signature": {"secret": {"value": "whsec-hidden"}}}"#.into()).unwrap();
        assert_eq!(r.key("t".into(), "e".into(), "m".into()).unwrap(), "p:t:e:m");
        let (kind, reason, _) = native(r.key("t".into(), "".into(), "m".into()).unwrap_err());
        assert_eq!(kind, "ConfigError");
        assert!(reason.starts_with("event_type"), "{reason}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().to_string();
        let sig = r.sign(now.clone(), b"{}".to_vec()).unwrap();
        r.verify(now.clone(), b"{}".to_vec(), sig).unwrap();
        let (kind, _, code) = native(r.verify(now, b"{}".to_vec(), "00".into()).unwrap_err());
        assert_eq!((kind.as_str(), code.as_deref()), ("AuthError", Some("bad_signature")));
        assert!(!r.describe().contains("whsec-hidden"), "{}", r.describe());
        assert!(!format!("{r:?}").contains("whsec-hidden"));
    }

    #[test]
    fn a_freed_receiver_is_no_longer_found_by_its_handle() {
        let r = NativeIdempotency::from_json("{}".into()).unwrap();
        let h = r.handle();
        assert!(RECEIVERS.get(h).is_some());
        drop(r);
        assert!(RECEIVERS.get(h).is_none());
    }
}

//! The receiver's config (its own object, apart from a client's).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use crate::credentials::hmac::{HmacAuth, HmacSigner};
use crate::error::HarnessError;
use crate::redact::{escape_control, redact_url};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnStoreDown {
    /// The caller gets an error; the sender retries later.
    #[default]
    Reject,
    /// The handler runs without dedup (counted in `harness_idempotency_total`).
    Process,
}

/// The idempotent receiver's config (its own object, apart from a client's); every key is optional.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct IdempotencyConfig {
    /// Prepended to every key: `{prefix}{tenant}:{event_type}:{msg_id}` (default `harness:idem:`).
    pub prefix: String,
    /// How long a processed (or failed) key is remembered (default 24 h); cover the sender's retry window.
    pub ttl_ms: u64,
    /// How long a claim holds before another delivery may take the key over (default 30 s).
    pub lease_ms: u64,
    /// A failed key may be claimed again (default true).
    pub retry_failed: bool,
    /// The Redis store shared by a fleet; without it, state is in this process's memory.
    pub redis_url: Option<String>,
    /// When the store cannot answer (default `reject`).
    pub on_store_down: OnStoreDown,
    /// Signed deliveries: checked with an HMAC preset (default `harness`: HMAC-SHA256 of
    /// `timestamp.body`) and its timestamp within `max_skew_ms`; the same block as a
    /// service's `auth: {type: hmac}`.
    pub signature: Option<SignatureConfig>,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        IdempotencyConfig {
            prefix: "harness:idem:".into(),
            ttl_ms: 24 * 3600 * 1000,
            lease_ms: 30_000,
            retry_failed: true,
            redis_url: None,
            on_store_down: OnStoreDown::Reject,
            signature: None,
        }
    }
}

/// A signed delivery's check: an HMAC scheme (a `preset`, default `harness`, and overrides),
/// its secret and how far its timestamp may be from now (`max_skew_ms`, default 5 min). It is
/// a service's `auth: {type: hmac}` block (whose `type: hmac`, if copied along, is accepted),
/// so that one config signs outgoing requests and verifies incoming ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct SignatureConfig(pub HmacAuth);

impl<'de> Deserialize<'de> for SignatureConfig {
    /// Read as a map (a `type: hmac` dropped), then as `HmacAuth` with its own path tracker:
    /// errors carry the path inside (`@preset: ...`), joined to the outer one.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        match map.remove("type") {
            None => {}
            Some(serde_json::Value::String(t)) if t == "hmac" => {}
            Some(other) => return Err(D::Error::custom(format!("@type: a receiver checks type hmac only, got {other}"))),
        }
        serde_path_to_error::deserialize(serde_json::Value::Object(map))
            .map(SignatureConfig)
            .map_err(|e| D::Error::custom(format!("@{}: {}", e.path(), e.inner())))
    }
}

impl schemars::JsonSchema for SignatureConfig {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SignatureConfig".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = HmacAuth::json_schema(generator);
        schema.insert(
            "description".into(),
            "A signed delivery's check: an HMAC scheme (`preset`, default `harness`, and overrides), its secret and `max_skew_ms`; the same block as a service's `auth: {type: hmac}`.".into(),
        );
        schema
    }
}

impl IdempotencyConfig {
    pub fn from_value(value: serde_json::Value) -> Result<Self, HarnessError> {
        let value = if value.is_null() { serde_json::Value::Object(Default::default()) } else { value };
        crate::json::check_value("config", &value)?;
        let c: IdempotencyConfig = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            HarnessError::config(crate::config::describe_error(&path, &e.into_inner().to_string()))
        })?;
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), HarnessError> {
        if self.prefix.chars().any(char::is_control) || self.prefix.len() > 256 {
            return Err(HarnessError::config(format!("prefix: expected printable text of at most 256 bytes, got {:?}", escape_control(&self.prefix))));
        }
        for (field, v) in [("ttl_ms", self.ttl_ms), ("lease_ms", self.lease_ms)] {
            if v == 0 {
                return Err(HarnessError::config(format!("{field}: expected an integer >= 1, got 0")));
            }
        }
        if let Some(url) = &self.redis_url {
            match url::Url::parse(url) {
                Ok(u) if u.scheme() == "redis" || u.scheme() == "rediss" => {}
                _ => return Err(HarnessError::config(format!("redis_url: expected a redis:// URL, got {:?}", escape_control(&redact_url(url))))),
            }
        }
        if let Some(s) = &self.signature {
            if s.0.secret.is_none() {
                return Err(HarnessError::config("signature.secret: required"));
            }
            HmacSigner::new(&s.0, "signature")?.check_receivable("signature")?;
        }
        Ok(())
    }
}

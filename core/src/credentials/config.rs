//! `services.<name>.auth`: one struct per auth type behind one tagged enum, so that the
//! compiler lists every place a new type must touch.
//!
//! Guarantees: `type` defaults to `bearer`; a key that does not belong to the type is an
//! error, as is a missing required one; every error names the field by its full path
//! (`services.orders.auth.keys[1].value: ...`), though the enum is read in one piece.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::secret::SecretRef;
use super::shared::SharedConfig;
use crate::error::HarnessError;
use crate::redact::escape_control;

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AuthConfig {
    /// `Authorization: Bearer <token>` (or another header and prefix).
    Bearer(BearerAuth),
    /// A named header (e.g. `X-Api-Key`), with an optional prefix.
    Header(HeaderAuth),
    /// A query parameter.
    Query(QueryAuth),
    /// OAuth2 client credentials: a token fetched, cached and refreshed.
    Oauth2ClientCredentials(OAuth2Auth),
    /// A token from host code (`set_token_provider`), cached and refreshed.
    Callback(CallbackAuth),
}

/// `type: bearer`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BearerAuth {
    pub token: Option<SecretRef>,
    /// A key pool instead of one token.
    pub keys: Vec<SecretRef>,
    /// Another header than `Authorization`.
    pub header: Option<String>,
    /// Put before the token (default `"Bearer "`).
    pub prefix: Option<String>,
}

/// `type: header`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HeaderAuth {
    pub token: Option<SecretRef>,
    pub keys: Vec<SecretRef>,
    /// Required: e.g. `X-Api-Key`, or `Authorization` with a prefix.
    pub header: Option<String>,
    pub prefix: Option<String>,
}

/// `type: query`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct QueryAuth {
    pub token: Option<SecretRef>,
    pub keys: Vec<SecretRef>,
    /// Required: the parameter (e.g. `api_key`).
    pub param: Option<String>,
}

/// `type: oauth2_client_credentials`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OAuth2Auth {
    pub token_url: Option<String>,
    pub client_id: Option<SecretRef>,
    pub client_secret: Option<SecretRef>,
    pub scope: Option<String>,
    pub refresh: RefreshConfig,
    /// A token shared by the fleet through Redis.
    pub shared: Option<SharedConfig>,
    pub header: Option<String>,
    pub prefix: Option<String>,
}

/// `type: callback`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CallbackAuth {
    pub refresh: RefreshConfig,
    /// A token shared by the fleet through Redis.
    pub shared: Option<SharedConfig>,
    pub header: Option<String>,
    pub prefix: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RefreshConfig {
    /// Before expiry: refresh in the background, requests do not wait.
    pub soft_ms: u64,
    /// Before expiry: requests wait for a fresh token.
    pub hard_ms: u64,
    /// Longest a provider or token endpoint may take.
    pub timeout_ms: u64,
}

impl Default for RefreshConfig {
    fn default() -> Self {
        RefreshConfig { soft_ms: 600_000, hard_ms: 60_000, timeout_ms: 10_000 }
    }
}

/// The names of the auth types, as `type:` takes them.
pub const AUTH_TYPES: [&str; 5] = ["bearer", "header", "query", "oauth2_client_credentials", "callback"];

impl<'de> Deserialize<'de> for AuthConfig {
    /// Read in one piece (the type decides the struct), then the struct with its own path
    /// tracker: an error carries the path inside `auth` (`@token.value: ...`), which
    /// `config::describe_error` joins to the outer one.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = serde_json::Map::<String, Value>::deserialize(d)?;
        let kind = match map.remove("type") {
            None => "bearer".to_string(),
            Some(Value::String(s)) => s,
            Some(other) => return Err(D::Error::custom(format!("@type: expected one of {}, got {other}", AUTH_TYPES.join(", ")))),
        };
        fn part<T: DeserializeOwned, E: serde::de::Error>(v: Value) -> Result<T, E> {
            serde_path_to_error::deserialize(v).map_err(|e| E::custom(format!("@{}: {}", e.path(), e.inner())))
        }
        let rest = Value::Object(map);
        Ok(match kind.as_str() {
            "bearer" => AuthConfig::Bearer(part(rest)?),
            "header" => AuthConfig::Header(part(rest)?),
            "query" => AuthConfig::Query(part(rest)?),
            "oauth2_client_credentials" => AuthConfig::Oauth2ClientCredentials(part(rest)?),
            "callback" => AuthConfig::Callback(part(rest)?),
            other => {
                return Err(D::Error::custom(format!("@type: unknown auth type `{}`, expected one of {}", escape_control(other), AUTH_TYPES.join(", "))));
            }
        })
    }
}

impl AuthConfig {
    /// The type's name, as `type:` takes it.
    pub fn type_name(&self) -> &'static str {
        match self {
            AuthConfig::Bearer(_) => "bearer",
            AuthConfig::Header(_) => "header",
            AuthConfig::Query(_) => "query",
            AuthConfig::Oauth2ClientCredentials(_) => "oauth2_client_credentials",
            AuthConfig::Callback(_) => "callback",
        }
    }

    /// The header the credential goes in and its prefix: `None` for a query parameter.
    pub fn header(&self) -> Option<(Option<&str>, Option<&str>)> {
        match self {
            AuthConfig::Bearer(a) => Some((a.header.as_deref(), a.prefix.as_deref())),
            AuthConfig::Header(a) => Some((a.header.as_deref(), a.prefix.as_deref())),
            AuthConfig::Query(_) => None,
            AuthConfig::Oauth2ClientCredentials(a) => Some((a.header.as_deref(), a.prefix.as_deref())),
            AuthConfig::Callback(a) => Some((a.header.as_deref(), a.prefix.as_deref())),
        }
    }

    /// A static token or a key pool (`bearer`, `header`, `query`).
    pub fn token_or_keys(&self) -> Option<(Option<&SecretRef>, &[SecretRef])> {
        match self {
            AuthConfig::Bearer(a) => Some((a.token.as_ref(), &a.keys)),
            AuthConfig::Header(a) => Some((a.token.as_ref(), &a.keys)),
            AuthConfig::Query(a) => Some((a.token.as_ref(), &a.keys)),
            AuthConfig::Oauth2ClientCredentials(_) | AuthConfig::Callback(_) => None,
        }
    }

    /// How a refreshing token (`oauth2_client_credentials`, `callback`) is refreshed and shared.
    pub fn refreshing(&self) -> Option<(&RefreshConfig, Option<&SharedConfig>)> {
        match self {
            AuthConfig::Oauth2ClientCredentials(a) => Some((&a.refresh, a.shared.as_ref())),
            AuthConfig::Callback(a) => Some((&a.refresh, a.shared.as_ref())),
            AuthConfig::Bearer(_) | AuthConfig::Header(_) | AuthConfig::Query(_) => None,
        }
    }

    /// Checks the shape, naming fields under `path` (`services.<name>.auth`).
    pub fn validate(&self, path: &str) -> Result<(), HarnessError> {
        let bad = |f: &str, m: &str| Err(HarnessError::config(format!("{path}.{f}: {m}")));
        if let Some((token, keys)) = self.token_or_keys() {
            if token.is_some() == !keys.is_empty() {
                return bad("token", "give exactly one of token or keys");
            }
            if let Some(t) = token {
                t.validate(&format!("{path}.token"))?;
            }
            for (i, k) in keys.iter().enumerate() {
                k.validate(&format!("{path}.keys[{i}]"))?;
            }
        }
        match self {
            AuthConfig::Header(a) if a.header.is_none() => return bad("header", "required for type header"),
            AuthConfig::Query(a) if a.param.is_none() => return bad("param", "required for type query"),
            AuthConfig::Oauth2ClientCredentials(a) => {
                match &a.token_url {
                    None => return bad("token_url", "required for oauth2_client_credentials"),
                    Some(u) if !matches!(url::Url::parse(u).map(|u| u.scheme().to_string()).as_deref(), Ok("http" | "https")) => {
                        return bad("token_url", "expected an http(s) URL");
                    }
                    _ => {}
                }
                for (field, r) in [("client_id", &a.client_id), ("client_secret", &a.client_secret)] {
                    match r {
                        None => return bad(field, "required for oauth2_client_credentials"),
                        Some(r) => r.validate(&format!("{path}.{field}"))?,
                    }
                }
            }
            _ => {}
        }
        if let Some((Some(h), _)) = self.header() {
            if http::HeaderName::try_from(h).is_err() || crate::target::is_forbidden_header(h) {
                return bad("header", &format!("not a header Harness can set: {:?}", escape_control(h)));
            }
        }
        if let Some((refresh, shared)) = self.refreshing() {
            if refresh.hard_ms > refresh.soft_ms {
                return bad("refresh.hard_ms", "must be <= refresh.soft_ms");
            }
            if refresh.timeout_ms == 0 {
                return bad("refresh.timeout_ms", "expected an integer >= 1, got 0");
            }
            if let Some(sh) = shared {
                sh.validate(&format!("{path}.shared"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use serde_json::json;

    fn err(auth: serde_json::Value) -> String {
        Config::from_value(json!({"services": {"s": {"base_url": "http://127.0.0.1:1", "auth": auth}}})).unwrap_err().message
    }

    #[test]
    fn errors_inside_an_auth_type_name_the_full_path() {
        assert!(err(json!({"type": "bearer", "token": {"value": 3}})).starts_with("services.s.auth.token.value: "), "{}", err(json!({"type": "bearer", "token": {"value": 3}})));
        let e = err(json!({"type": "header", "header": "x-k", "keys": [{"value": "a-key-1"}, {"valu": "b"}]}));
        assert!(e.starts_with("services.s.auth.keys[1].valu: unknown key"), "{e}");
        let e = err(json!({"type": "query", "param": "k", "token": {"value": "t"}, "header": "x"}));
        assert!(e.starts_with("services.s.auth.header: unknown key"), "a key of another type: {e}");
        let e = err(json!({"type": "basic"}));
        assert!(e.starts_with("services.s.auth.type: ") && e.contains("basic") && e.contains("oauth2_client_credentials"), "{e}");
        let e = err(json!({"type": "oauth2_client_credentials", "client_id": {"value": "i"}, "client_secret": {"value": "s"}}));
        assert!(e.starts_with("services.s.auth.token_url: required"), "{e}");
        // `type` defaults to bearer.
        Config::from_value(json!({"services": {"s": {"base_url": "http://127.0.0.1:1", "auth": {"token": {"value": "tok-1"}}}}})).unwrap();
    }

    #[test]
    fn the_config_round_trips_with_its_type_tag() {
        let c = Config::from_value(json!({"services": {"s": {"base_url": "http://127.0.0.1:1", "auth": {"type": "callback", "refresh": {"soft_ms": 1000, "hard_ms": 100}}}}})).unwrap();
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["services"]["s"]["auth"]["type"], "callback");
        assert_eq!(Config::from_value(v).unwrap().version(), c.version());
    }
}

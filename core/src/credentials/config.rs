//! `services.<name>.auth`: one struct per auth type behind one tagged enum, so that the
//! compiler lists every place a new type must touch.
//!
//! Guarantees: `type` defaults to `bearer`; a key that does not belong to the type is an
//! error, as is a missing required one; every error names the field by its full path
//! (`services.orders.auth.keys[1].value: ...`), though the enum is read in one piece.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::hmac::{HmacAuth, HmacSigner};
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
    /// Each attempt signed with an HMAC over a canonical string (`preset` or a template).
    Hmac(HmacAuth),
    /// Each attempt signed with AWS Signature Version 4 (`aws-sigv4` is accepted too).
    AwsSigv4(AwsSigV4Auth),
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

/// `type: aws_sigv4`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AwsSigV4Auth {
    /// Required: the signing name (`execute-api`, `es`, `lambda`...).
    pub service: Option<String>,
    /// Required: e.g. `us-east-1`.
    pub region: Option<String>,
    /// `config` (default: the keys below) or `callback` (a host provider's JSON token).
    pub credentials: AwsCredentials,
    /// Default `{env: AWS_ACCESS_KEY_ID}`.
    pub access_key_id: Option<SecretRef>,
    /// Default `{env: AWS_SECRET_ACCESS_KEY}`.
    pub secret_access_key: Option<SecretRef>,
    /// Default `{env: AWS_SESSION_TOKEN}` when that variable is set.
    pub session_token: Option<SecretRef>,
    /// Send `x-amz-content-sha256` (the body's hash as a header, as S3 wants).
    pub content_sha256: bool,
    /// How a provider's keys are refreshed (`credentials: callback`).
    pub refresh: RefreshConfig,
}

/// Where SigV4 keys come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AwsCredentials {
    /// `access_key_id`, `secret_access_key`, `session_token` (or the `AWS_*` environment).
    #[default]
    Config,
    /// `set_token_provider(service, fn)`: a token `{"access_key_id", "secret_access_key",
    /// "session_token"?}` whose `expires_in` drives the refresh.
    Callback,
}

impl AwsSigV4Auth {
    /// The config's key, else the `AWS_*` environment variable it defaults to (the session
    /// token's only when that variable is set).
    pub fn key(&self, field: &str) -> Option<SecretRef> {
        let (given, var) = match field {
            "access_key_id" => (&self.access_key_id, "AWS_ACCESS_KEY_ID"),
            "secret_access_key" => (&self.secret_access_key, "AWS_SECRET_ACCESS_KEY"),
            _ => (&self.session_token, "AWS_SESSION_TOKEN"),
        };
        if given.is_some() || self.credentials == AwsCredentials::Callback {
            return given.clone();
        }
        if field == "session_token" && std::env::var_os(var).is_none_or(|v| v.is_empty()) {
            return None;
        }
        Some(SecretRef { env: Some(var.to_string()), ..Default::default() })
    }
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
pub const AUTH_TYPES: [&str; 7] = ["bearer", "header", "query", "oauth2_client_credentials", "callback", "hmac", "aws_sigv4"];

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
            "hmac" => AuthConfig::Hmac(part(rest)?),
            "aws_sigv4" | "aws-sigv4" => AuthConfig::AwsSigv4(part(rest)?),
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
            AuthConfig::Hmac(_) => "hmac",
            AuthConfig::AwsSigv4(_) => "aws_sigv4",
        }
    }

    /// The header the credential goes in and its prefix: `None` for a query parameter or a
    /// signature (which places its own headers).
    pub fn header(&self) -> Option<(Option<&str>, Option<&str>)> {
        match self {
            AuthConfig::Bearer(a) => Some((a.header.as_deref(), a.prefix.as_deref())),
            AuthConfig::Header(a) => Some((a.header.as_deref(), a.prefix.as_deref())),
            AuthConfig::Query(_) | AuthConfig::Hmac(_) | AuthConfig::AwsSigv4(_) => None,
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
            AuthConfig::Oauth2ClientCredentials(_) | AuthConfig::Callback(_) | AuthConfig::Hmac(_) | AuthConfig::AwsSigv4(_) => None,
        }
    }

    /// How a refreshing token (`oauth2_client_credentials`, `callback`, SigV4 keys from a
    /// provider) is refreshed and shared.
    pub fn refreshing(&self) -> Option<(&RefreshConfig, Option<&SharedConfig>)> {
        match self {
            AuthConfig::Oauth2ClientCredentials(a) => Some((&a.refresh, a.shared.as_ref())),
            AuthConfig::Callback(a) => Some((&a.refresh, a.shared.as_ref())),
            AuthConfig::AwsSigv4(a) if a.credentials == AwsCredentials::Callback => Some((&a.refresh, None)),
            AuthConfig::Bearer(_) | AuthConfig::Header(_) | AuthConfig::Query(_) | AuthConfig::Hmac(_) | AuthConfig::AwsSigv4(_) => None,
        }
    }

    /// Whether the host supplies the credential (`set_token_provider`): `callback`, and
    /// `aws_sigv4` with `credentials: callback`.
    pub fn takes_token_provider(&self) -> bool {
        match self {
            AuthConfig::Callback(_) => true,
            AuthConfig::AwsSigv4(a) => a.credentials == AwsCredentials::Callback,
            _ => false,
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
            AuthConfig::Hmac(a) => {
                HmacSigner::new(a, path)?;
            }
            AuthConfig::AwsSigv4(a) => {
                for (field, v) in [("service", &a.service), ("region", &a.region)] {
                    match v {
                        None => return bad(field, "required for aws_sigv4"),
                        Some(v) if v.is_empty() || v.len() > 64 || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') => {
                            return bad(field, &format!("expected 1 to 64 letters, digits, `-` or `_`, got {:?}", escape_control(v)));
                        }
                        _ => {}
                    }
                }
                for field in ["access_key_id", "secret_access_key", "session_token"] {
                    let given = match field {
                        "access_key_id" => &a.access_key_id,
                        "secret_access_key" => &a.secret_access_key,
                        _ => &a.session_token,
                    };
                    match given {
                        Some(_) if a.credentials == AwsCredentials::Callback => {
                            return bad(field, "not with credentials: callback (the provider gives the keys)");
                        }
                        Some(r) => r.validate(&format!("{path}.{field}"))?,
                        None => {}
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
    fn signed_types_name_the_full_path_of_a_bad_field() {
        let k = json!({"value": "s3cret-k"});
        let e = err(json!({"type": "hmac", "preset": "stripe", "secret": k}));
        assert!(e.starts_with("services.s.auth.preset: ") && e.contains("slack"), "{e}");
        let e = err(json!({"type": "hmac", "algorithm": "md5", "secret": k}));
        assert!(e.starts_with("services.s.auth.algorithm: ") && e.contains("sha256"), "{e}");
        let e = err(json!({"type": "hmac", "canonical": "{verb}", "secret": k}));
        assert!(e.starts_with("services.s.auth.canonical: unknown token `{verb}`"), "{e}");
        let e = err(json!({"type": "aws_sigv4", "service": "execute-api", "access_key_id": k, "secret_access_key": k}));
        assert_eq!(e, "services.s.auth.region: required for aws_sigv4");
        let e = err(json!({"type": "aws-sigv4", "region": "us east", "service": "s", "access_key_id": k, "secret_access_key": k}));
        assert!(e.starts_with("services.s.auth.region: expected 1 to 64 letters"), "{e}");
        let e = err(json!({"type": "aws_sigv4", "region": "us-east-1", "service": "s", "credentials": "callback", "secret_access_key": k}));
        assert!(e.starts_with("services.s.auth.secret_access_key: not with credentials: callback"), "{e}");
        let e = err(json!({"type": "aws_sigv4", "region": "us-east-1", "service": "s", "acces_key_id": k}));
        assert!(e.starts_with("services.s.auth.acces_key_id: unknown key"), "{e}");
        for e in [err(json!({"type": "hmac", "preset": "stripe", "secret": k})), err(json!({"type": "aws_sigv4", "service": "s", "access_key_id": k, "secret_access_key": k}))] {
            assert!(!e.contains("s3cret-k"), "{e}");
        }
    }

    #[test]
    fn the_aws_keys_default_to_the_environment() {
        let a: super::AwsSigV4Auth = serde_json::from_value(json!({"service": "s", "region": "r"})).unwrap();
        assert_eq!(a.key("access_key_id").unwrap().env.as_deref(), Some("AWS_ACCESS_KEY_ID"));
        assert_eq!(a.key("secret_access_key").unwrap().env.as_deref(), Some("AWS_SECRET_ACCESS_KEY"));
        let cb: super::AwsSigV4Auth = serde_json::from_value(json!({"service": "s", "region": "r", "credentials": "callback"})).unwrap();
        assert!(cb.key("access_key_id").is_none() && cb.key("session_token").is_none());
    }

    #[test]
    fn the_config_round_trips_with_its_type_tag() {
        let c = Config::from_value(json!({"services": {"s": {"base_url": "http://127.0.0.1:1", "auth": {"type": "callback", "refresh": {"soft_ms": 1000, "hard_ms": 100}}}}})).unwrap();
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["services"]["s"]["auth"]["type"], "callback");
        assert_eq!(Config::from_value(v).unwrap().version(), c.version());
        let k = json!({"value": "k-1"});
        for auth in [
            json!({"type": "hmac", "preset": "slack", "secret": k, "timestamp_unit": "ms", "signature_param": "sig"}),
            json!({"type": "aws-sigv4", "service": "s", "region": "eu-west-1", "access_key_id": k, "secret_access_key": k, "content_sha256": true}),
        ] {
            let c = Config::from_value(json!({"services": {"s": {"base_url": "http://127.0.0.1:1", "auth": auth}}})).unwrap();
            let v = serde_json::to_value(&c).unwrap();
            assert!(["hmac", "aws_sigv4"].contains(&v["services"]["s"]["auth"]["type"].as_str().unwrap()));
            assert_eq!(Config::from_value(v).unwrap().version(), c.version());
        }
    }
}

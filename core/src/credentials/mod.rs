//! The credentials stage: which token or key a request carries, and how it is
//! placed (`Authorization: Bearer`, a named header with a prefix, or a query parameter).
//!
//! Guarantees: a secret is read from `env`, `file` (re-read when it changes) or a
//! literal `value`, and a missing one is a `ConfigError` naming the field; tokens
//! that expire are cached and refreshed by `cache::RefreshingToken` (two thresholds,
//! single-flight); a 401 refreshes and replays once (the caller does the replay);
//! key pools rotate and quarantine (`pool::KeyPool`); a credential survives a
//! reload when its config and secret values are unchanged, and is replaced
//! otherwise (requests in flight finish with the old one); no secret is ever in
//! an error, a log line, an event, a metric label or the state API.

pub mod cache;
pub mod oauth2;
pub mod pool;
pub mod secret;
pub mod shared;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::transport::config::{ClientSettings, RedirectConfig};
use crate::error::{ErrorKind, HarnessError};
use crate::host::TokenProvider;
use crate::observability::events::EventHub;
use crate::redact::escape_control;
use crate::transport::reqwest::ReqwestTransport;
use crate::transport::OutgoingRequest;
use cache::{Thresholds, RefreshingToken, TokenStatus};
use pool::{KeyPool, KeyStatus};
use secret::{Secret, SecretRef, SecretSource};

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AuthType {
    #[default]
    Bearer,
    Header,
    Query,
    Oauth2ClientCredentials,
    Callback,
}

/// `services.<name>.auth`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    #[serde(rename = "type")]
    pub kind: AuthType,
    /// The token (bearer, header, query).
    pub token: Option<SecretRef>,
    /// A key pool instead of one token (header, query, bearer).
    pub keys: Vec<SecretRef>,
    /// The header for `type: header` (e.g. `X-Api-Key`, or `Authorization` with a prefix).
    pub header: Option<String>,
    /// Put before the token in the header (e.g. `"Bearer "`).
    pub prefix: Option<String>,
    /// The query parameter for `type: query`.
    pub param: Option<String>,
    pub token_url: Option<String>,
    pub client_id: Option<SecretRef>,
    pub client_secret: Option<SecretRef>,
    pub scope: Option<String>,
    pub refresh: RefreshConfig,
    /// A token shared by the fleet through Redis (refreshing types only).
    pub shared: Option<shared::SharedConfig>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
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

impl AuthConfig {
    /// Checks the shape, naming fields under `path` (`services.<name>.auth`).
    pub fn validate(&self, path: &str) -> Result<(), HarnessError> {
        let bad = |f: &str, m: &str| Err(HarnessError::config(format!("{path}.{f}: {m}")));
        let pooled = !self.keys.is_empty();
        match self.kind {
            AuthType::Bearer | AuthType::Header | AuthType::Query => {
                if self.token.is_some() == pooled {
                    return bad("token", "give exactly one of token or keys");
                }
            }
            AuthType::Oauth2ClientCredentials => {
                match &self.token_url {
                    None => return bad("token_url", "required for oauth2_client_credentials"),
                    Some(u) if !matches!(url::Url::parse(u).map(|u| u.scheme().to_string()).as_deref(), Ok("http" | "https")) => {
                        return bad("token_url", "expected an http(s) URL");
                    }
                    _ => {}
                }
                if self.client_id.is_none() {
                    return bad("client_id", "required for oauth2_client_credentials");
                }
                if self.client_secret.is_none() {
                    return bad("client_secret", "required for oauth2_client_credentials");
                }
            }
            AuthType::Callback => {}
        }
        if self.kind == AuthType::Header && self.header.is_none() {
            return bad("header", "required for type header");
        }
        if self.kind == AuthType::Query && self.param.is_none() {
            return bad("param", "required for type query");
        }
        if let Some(h) = &self.header {
            if HeaderName::try_from(h.as_str()).is_err() || crate::target::is_forbidden_header(h) {
                return bad("header", &format!("not a header Harness can set: {:?}", escape_control(h)));
            }
        }
        if let Some(sh) = &self.shared {
            if !matches!(self.kind, AuthType::Oauth2ClientCredentials | AuthType::Callback) {
                return bad("shared", "only tokens that refresh (oauth2_client_credentials, callback) can be shared");
            }
            sh.validate(&format!("{path}.shared"))?;
        }
        if self.refresh.hard_ms > self.refresh.soft_ms {
            return bad("refresh.hard_ms", "must be <= refresh.soft_ms");
        }
        if self.refresh.timeout_ms == 0 {
            return bad("refresh.timeout_ms", "expected an integer >= 1, got 0");
        }
        for (field, r) in [("token", &self.token), ("client_id", &self.client_id), ("client_secret", &self.client_secret)] {
            if let Some(r) = r {
                r.validate(&format!("{path}.{field}"))?;
            }
        }
        for (i, k) in self.keys.iter().enumerate() {
            k.validate(&format!("{path}.keys[{i}]"))?;
        }
        Ok(())
    }
}

/// Where the credential goes on the request.
#[derive(Debug, Clone, PartialEq)]
enum Placement {
    Header { name: HeaderName, prefix: String },
    Query { param: String },
}

enum Source {
    Fixed(SecretSource),
    Pool(KeyPool),
    Refreshing(Arc<RefreshingToken>),
}

/// One service's credential, compiled.
pub struct Credential {
    placement: Placement,
    source: Source,
    /// What it was built from, to keep it across reloads when nothing changed.
    config: AuthConfig,
    loaded: Vec<Option<Secret>>,
    /// Every secret source (token, pool keys, client secret), for `secret_values`.
    sources: Vec<SecretSource>,
}

/// What a credential is built with besides its own config.
#[derive(Clone, Copy)]
pub struct BuildContext<'a> {
    pub providers: &'a Providers,
    pub events: &'a Arc<EventHub>,
    pub metrics: &'a crate::observability::metrics::Metrics,
    /// The service's `timeouts.connect_ms` (a token endpoint is connected to as fast).
    pub connect_ms: u64,
    /// The service's `retry.max_retry_after_ms` (the longest a pool key cools after a 429).
    pub max_retry_after_ms: u64,
}

/// The credential one attempt carried, for the 401/403/429 answer.
#[derive(Debug, Clone)]
pub struct Applied {
    pub secret: Secret,
    pub key: Option<usize>,
}

/// Host token providers by service (`set_token_provider`), shared by every snapshot.
pub type Providers = Arc<RwLock<HashMap<String, Arc<dyn TokenProvider>>>>;

/// What the state API shows of one service's credential.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CredentialState {
    pub service: String,
    #[serde(rename = "type")]
    pub kind: AuthType,
    /// `valid`, `refreshing`, `expired` or `dead` (a pool: `valid` while a key is usable).
    pub status: &'static str,
    pub expires_at_ms: Option<u64>,
    pub last_refresh_ms: Option<u64>,
    pub last_error: Option<String>,
    pub keys: Vec<KeyStatus>,
}

impl Credential {
    /// Builds (or keeps, when `previous` matches config and secret values) a service's credential.
    pub fn build(service: &str, cfg: &AuthConfig, ctx: &BuildContext<'_>, previous: Option<&Arc<Credential>>) -> Result<Arc<Credential>, HarnessError> {
        let BuildContext { providers, events, metrics, .. } = *ctx;
        let path = format!("services.{service}.auth");
        cfg.validate(&path)?;
        let placement = match cfg.kind {
            AuthType::Query => Placement::Query { param: cfg.param.clone().unwrap_or_default() },
            AuthType::Header => Placement::Header {
                name: HeaderName::try_from(cfg.header.clone().unwrap_or_default()).map_err(|_| HarnessError::config(format!("{path}.header: invalid")))?,
                prefix: cfg.prefix.clone().unwrap_or_default(),
            },
            _ => match &cfg.header {
                Some(h) => Placement::Header {
                    name: HeaderName::try_from(h.as_str()).map_err(|_| HarnessError::config(format!("{path}.header: invalid")))?,
                    prefix: cfg.prefix.clone().unwrap_or_else(|| "Bearer ".into()),
                },
                None => Placement::Header { name: http::header::AUTHORIZATION, prefix: cfg.prefix.clone().unwrap_or_else(|| "Bearer ".into()) },
            },
        };
        // Read every secret now: a missing one is an error naming the field.
        let load = |r: &SecretRef, f: String| r.load(&f);
        let token = cfg.token.as_ref().map(|r| load(r, format!("{path}.token"))).transpose()?;
        let keys: Vec<(String, SecretSource)> = cfg
            .keys
            .iter()
            .enumerate()
            .map(|(i, r)| Ok((r.name.clone().unwrap_or_else(|| i.to_string()), load(r, format!("{path}.keys[{i}]"))?)))
            .collect::<Result<_, HarnessError>>()?;
        let client_id = cfg.client_id.as_ref().map(|r| load(r, format!("{path}.client_id"))).transpose()?;
        let client_secret = cfg.client_secret.as_ref().map(|r| load(r, format!("{path}.client_secret"))).transpose()?;
        let fixed = |s: &Option<SecretSource>| s.as_ref().and_then(|s| match s { SecretSource::Fixed(v) => Some(v.clone()), _ => None });
        let mut loaded = vec![fixed(&token), fixed(&client_id), fixed(&client_secret)];
        loaded.extend(keys.iter().map(|(_, s)| fixed(&Some(s.clone()))));
        if let Some(prev) = previous {
            if prev.config == *cfg && prev.loaded == loaded {
                // A reload gives a dead credential another chance (the token endpoint may be fixed).
                prev.revive_if_dead();
                return Ok(prev.clone());
            }
        }
        let sources: Vec<SecretSource> = token.iter().chain(client_secret.iter()).chain(keys.iter().map(|(_, s)| s)).cloned().collect();
        let thresholds = Thresholds {
            soft: Duration::from_millis(cfg.refresh.soft_ms),
            hard: Duration::from_millis(cfg.refresh.hard_ms),
            timeout: Duration::from_millis(cfg.refresh.timeout_ms),
        };
        let shared = match &cfg.shared {
            None => None,
            Some(sh) => {
                let store = Arc::new(shared::SharedTokens::new(service, sh, &format!("{path}.shared"))?);
                let (events, name) = (events.clone(), service.to_string());
                let warn: Arc<dyn Fn(String) + Send + Sync> = Arc::new(move |error: String| {
                    events.emit(crate::host::Event::SharedStateUnavailable { service: name.clone(), what: "credentials", error });
                });
                Some((store, warn))
            }
        };
        let source = match cfg.kind {
            AuthType::Oauth2ClientCredentials => {
                let token_url = url::Url::parse(cfg.token_url.as_deref().unwrap_or_default())
                    .map_err(|e| HarnessError::config(format!("{path}.token_url: {e}")))?;
                let settings = ClientSettings {
                    base_url: token_url.as_str(),
                    user_agent: "harness-oauth2",
                    connect_ms: ctx.connect_ms,
                    redirects: &RedirectConfig::default(),
                    idle_pool: 8,
                };
                let transport = Arc::new(ReqwestTransport::new(&settings)?);
                let provider: Arc<dyn TokenProvider> = Arc::new(oauth2::ClientCredentials {
                    token_url: token_url.clone(),
                    client_id: client_id.expect("validated"),
                    client_secret: client_secret.expect("validated"),
                    scope: cfg.scope.clone(),
                    transport,
                });
                Source::Refreshing(RefreshingToken::with_shared(service, Arc::new(move || Some(provider.clone())), thresholds, shared, Some(metrics.refresh_counters(service))))
            }
            AuthType::Callback => {
                let (providers, name) = (providers.clone(), service.to_string());
                Source::Refreshing(RefreshingToken::with_shared(service, Arc::new(move || providers.read().get(&name).cloned()), thresholds, shared, Some(metrics.refresh_counters(service))))
            }
            _ if !keys.is_empty() => Source::Pool(
                KeyPool::new(service, keys)
                    .with_max_cool(Duration::from_millis(ctx.max_retry_after_ms))
                    .with_metrics(metrics.pool_keys.clone()),
            ),
            _ => Source::Fixed(token.expect("validated")),
        };
        Ok(Arc::new(Credential { placement, source, config: cfg.clone(), loaded, sources }))
    }

    /// The query parameter the credential goes in (`type: query`), which no caller may set.
    pub fn query_param(&self) -> Option<&str> {
        match &self.placement {
            Placement::Query { param } => Some(param),
            Placement::Header { .. } => None,
        }
    }

    /// Puts the credential on one attempt's request; waits for a refresh at most `wait`.
    pub async fn apply(&self, request: &mut OutgoingRequest, wait: Duration) -> Result<Applied, HarnessError> {
        let (secret, key) = match &self.source {
            Source::Fixed(s) => (s.current()?, None),
            Source::Pool(p) => {
                let (i, s) = p.pick()?;
                (s, Some(i))
            }
            Source::Refreshing(c) => (c.get(wait).await?, None),
        };
        match &self.placement {
            Placement::Header { name, prefix } => {
                let mut v = HeaderValue::try_from(format!("{prefix}{}", secret.expose()))
                    .map_err(|_| HarnessError::new(ErrorKind::Auth, "the credential is not a valid header value"))?;
                v.set_sensitive(true);
                request.headers.insert(name.clone(), v);
            }
            Placement::Query { param } => {
                request.url.query_pairs_mut().append_pair(param, secret.expose());
            }
        }
        Ok(Applied { secret, key })
    }

    /// A downstream answer about the credential an attempt carried: every answer about a
    /// pool key updates that key, a replay's included. Returns whether replaying the
    /// request once with a fresh credential may help (never after a replay: `replayed`).
    pub fn answer(&self, applied: &Applied, status: u16, retry_after: Option<Duration>, replayed: bool) -> bool {
        match (&self.source, status) {
            (Source::Refreshing(c), 401) if !replayed => {
                c.reject(&applied.secret);
                true
            }
            (Source::Pool(p), 401 | 403 | 429) => {
                let Some(i) = applied.key else { return false };
                p.report(i, status, retry_after);
                !replayed && (p.has_other(i) || status != 429)
            }
            _ => false,
        }
    }

    /// Every secret value this credential holds now: the token, each pool key, the OAuth2
    /// client secret and the access token in cache (to scrub them from what is passed on).
    pub fn secret_values(&self) -> Vec<Secret> {
        let mut out: Vec<Secret> = self.sources.iter().filter_map(|s| s.current().ok()).collect();
        if let Source::Refreshing(c) = &self.source {
            out.extend(c.peek());
        }
        out
    }

    fn revive_if_dead(&self) {
        if let Source::Refreshing(c) = &self.source {
            if c.status().status == "dead" {
                c.revive();
            }
        }
    }

    /// A new provider was set: a dead token cache may try again.
    pub fn revive(&self) {
        if let Source::Refreshing(c) = &self.source {
            c.revive();
        }
    }

    pub fn state(&self, service: &str) -> CredentialState {
        let mut s = CredentialState {
            service: service.to_string(),
            kind: self.config.kind,
            status: "valid",
            expires_at_ms: None,
            last_refresh_ms: None,
            last_error: None,
            keys: Vec::new(),
        };
        match &self.source {
            Source::Fixed(src) => {
                if let Err(e) = src.current() {
                    s.status = "expired";
                    s.last_error = Some(e.message);
                }
            }
            Source::Pool(p) => {
                s.keys = p.status();
                if !s.keys.iter().any(|k| k.status == "ok") {
                    s.status = if s.keys.iter().all(|k| k.status == "quarantined") { "dead" } else { "expired" };
                }
            }
            Source::Refreshing(c) => {
                let TokenStatus { status, expires_at_ms, last_refresh_ms, last_error } = c.status();
                s.status = status;
                s.expires_at_ms = expires_at_ms;
                s.last_refresh_ms = last_refresh_ms;
                s.last_error = last_error;
            }
        }
        s
    }
}

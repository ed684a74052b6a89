//! The credentials stage: which token or key a request carries, and how it is
//! placed (`Authorization: Bearer`, a named header with a prefix, or a query parameter),
//! or how the request is signed (`hmac`, `aws_sigv4`).
//!
//! Guarantees: a secret is read from `env`, `file` (re-read when it changes) or a
//! literal `value`, and a missing one is a `ConfigError` naming the field; tokens
//! that expire are cached and refreshed by `cache::RefreshingToken` (two thresholds,
//! single-flight); a 401 refreshes and replays once (the caller does the replay);
//! key pools rotate and quarantine (`pool::KeyPool`); a credential survives a
//! reload when its config and secret values are unchanged, and is replaced
//! otherwise (requests in flight finish with the old one); a signed request is signed
//! again on every attempt (a fresh timestamp and nonce), and its 401 is final unless its
//! keys come from a host provider; no secret is ever in an error, a log line, an event, a
//! metric label or the state API.

pub mod cache;
pub mod config;
pub mod hmac;
pub mod oauth2;
pub mod pool;
pub mod secret;
pub mod shared;
pub mod sigv4;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderName, HeaderValue};
use parking_lot::RwLock;
use serde::Serialize;

use crate::transport::config::{ClientSettings, RedirectConfig};
use crate::error::{ErrorKind, HarnessError};
use crate::host::TokenProvider;
use crate::observability::events::EventHub;
use crate::transport::reqwest::ReqwestTransport;
use crate::transport::OutgoingRequest;
use cache::{Thresholds, RefreshingToken, TokenStatus};
use config::AwsSigV4Auth;
use pool::{KeyPool, KeyStatus};
pub use config::{AuthConfig, AwsCredentials, RefreshConfig};
use secret::{Secret, SecretRef, SecretSource};

/// Where the credential goes on the request, or what signs it.
enum Placement {
    Header { name: HeaderName, prefix: String },
    Query { param: String },
    Hmac(hmac::HmacSigner),
    SigV4(sigv4::SigV4Signer),
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
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct CredentialState {
    pub service: String,
    /// The auth type (`bearer`, `header`, `query`, `oauth2_client_credentials`, `callback`,
    /// `hmac`, `aws_sigv4`).
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["bearer", "header", "query", "oauth2_client_credentials", "callback", "hmac", "aws_sigv4"]))]
    pub kind: &'static str,
    /// `valid`, `refreshing`, `expired` or `dead` (a pool: `valid` while a key is usable).
    #[schemars(extend("enum" = ["valid", "refreshing", "expired", "dead"]))]
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
        // The shape was validated with the config (`Config::validate`).
        let path = format!("services.{service}.auth");
        let header = |h: &str| HeaderName::try_from(h).map_err(|_| HarnessError::config(format!("{path}.header: invalid")));
        let placement = match (cfg, cfg.header()) {
            (AuthConfig::Query(q), _) => Placement::Query { param: q.param.clone().unwrap_or_default() },
            (AuthConfig::Hmac(h), _) => Placement::Hmac(hmac::HmacSigner::new(h, &path)?),
            (AuthConfig::AwsSigv4(a), _) => {
                let keys = match a.credentials {
                    AwsCredentials::Callback => sigv4::Keys::Callback,
                    AwsCredentials::Config => sigv4::Keys::Config {
                        access_key_id: a.key("access_key_id").expect("defaults to the environment").load(&format!("{path}.access_key_id"))?,
                        session_token: a.key("session_token").map(|r| r.load(&format!("{path}.session_token"))).transpose()?,
                    },
                };
                Placement::SigV4(sigv4::SigV4Signer::new(a.service.as_deref().unwrap_or_default(), a.region.as_deref().unwrap_or_default(), a.content_sha256, keys))
            }
            (AuthConfig::Header(_), Some((h, prefix))) => Placement::Header { name: header(h.unwrap_or_default())?, prefix: prefix.unwrap_or_default().to_string() },
            (_, Some((h, prefix))) => Placement::Header {
                name: match h {
                    Some(h) => header(h)?,
                    None => http::header::AUTHORIZATION,
                },
                prefix: prefix.unwrap_or("Bearer ").to_string(),
            },
            (_, None) => unreachable!("only a query credential has no header"),
        };
        // Read every secret now: a missing one is an error naming the field.
        let load = |r: &SecretRef, f: String| r.load(&f);
        let (token_ref, key_refs) = cfg.token_or_keys().unwrap_or((None, &[]));
        let mut token = token_ref.map(|r| load(r, format!("{path}.token"))).transpose()?;
        // A signature's key is its fixed source: read now, so a missing one names its field.
        match (cfg, &placement) {
            (AuthConfig::Hmac(h), Placement::Hmac(signer)) => {
                let field = format!("{path}.secret");
                let src = load(h.secret.as_ref().expect("validated"), field.clone())?;
                signer.check_secret(&src.current()?, &field)?;
                token = Some(src);
            }
            (AuthConfig::AwsSigv4(a), _) if a.credentials == AwsCredentials::Config => {
                token = Some(load(&a.key("secret_access_key").expect("defaults to the environment"), format!("{path}.secret_access_key"))?);
            }
            _ => {}
        }
        let keys: Vec<(String, SecretSource)> = key_refs
            .iter()
            .enumerate()
            .map(|(i, r)| Ok((r.name.clone().unwrap_or_else(|| i.to_string()), load(r, format!("{path}.keys[{i}]"))?)))
            .collect::<Result<_, HarnessError>>()?;
        let (client_id, client_secret) = match cfg {
            AuthConfig::Oauth2ClientCredentials(o) => (
                o.client_id.as_ref().map(|r| load(r, format!("{path}.client_id"))).transpose()?,
                o.client_secret.as_ref().map(|r| load(r, format!("{path}.client_secret"))).transpose()?,
            ),
            _ => (None, None),
        };
        let fixed = |s: &Option<SecretSource>| s.as_ref().and_then(|s| match s { SecretSource::Fixed(v) => Some(v.clone()), _ => None });
        let mut loaded = vec![fixed(&token), fixed(&client_id), fixed(&client_secret)];
        loaded.extend(keys.iter().map(|(_, s)| fixed(&Some(s.clone()))));
        if let Placement::SigV4(s) = &placement {
            // An env-read key id or session token that changed is a new credential too.
            loaded.extend(s.config_values().into_iter().map(Some));
        }
        if let Some(prev) = previous {
            if prev.config == *cfg && prev.loaded == loaded {
                // A reload gives a dead credential another chance (the token endpoint may be fixed).
                prev.revive_if_dead();
                return Ok(prev.clone());
            }
        }
        let sources: Vec<SecretSource> = token.iter().chain(client_secret.iter()).chain(keys.iter().map(|(_, s)| s)).cloned().collect();
        let refresh = cfg.refreshing().map(|(r, _)| *r).unwrap_or_default();
        let thresholds = Thresholds {
            soft: Duration::from_millis(refresh.soft_ms),
            hard: Duration::from_millis(refresh.hard_ms),
            timeout: Duration::from_millis(refresh.timeout_ms),
        };
        let shared = match cfg.refreshing().and_then(|(_, sh)| sh) {
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
        let counters = Some(metrics.refresh_counters(service));
        let source = match cfg {
            AuthConfig::Oauth2ClientCredentials(o) => {
                let token_url = url::Url::parse(o.token_url.as_deref().unwrap_or_default()).map_err(|e| HarnessError::config(format!("{path}.token_url: {e}")))?;
                let field = format!("{path}.token_url");
                let settings = ClientSettings {
                    base_url: token_url.as_str(),
                    field: &field,
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
                    scope: o.scope.clone(),
                    transport,
                });
                Source::Refreshing(RefreshingToken::with_shared(service, Arc::new(move || Some(provider.clone())), thresholds, shared, counters))
            }
            AuthConfig::Callback(_) | AuthConfig::AwsSigv4(AwsSigV4Auth { credentials: AwsCredentials::Callback, .. }) => {
                let (providers, name) = (providers.clone(), service.to_string());
                Source::Refreshing(RefreshingToken::with_shared(service, Arc::new(move || providers.read().get(&name).cloned()), thresholds, shared, counters))
            }
            AuthConfig::Hmac(_) | AuthConfig::AwsSigv4(_) => Source::Fixed(token.expect("loaded above")),
            AuthConfig::Bearer(_) | AuthConfig::Header(_) | AuthConfig::Query(_) if !keys.is_empty() => {
                Source::Pool(KeyPool::new(service, keys).with_max_cool(Duration::from_millis(ctx.max_retry_after_ms)).with_metrics(metrics.pool_keys.clone()))
            }
            AuthConfig::Bearer(_) | AuthConfig::Header(_) | AuthConfig::Query(_) => Source::Fixed(token.expect("validated")),
        };
        Ok(Arc::new(Credential { placement, source, config: cfg.clone(), loaded, sources }))
    }

    /// The query parameter the credential goes in (`type: query`, or an HMAC signature's
    /// `signature_param`), which no caller may set.
    pub fn query_param(&self) -> Option<&str> {
        match &self.placement {
            Placement::Query { param } => Some(param),
            Placement::Hmac(s) => s.query_param(),
            Placement::Header { .. } | Placement::SigV4(_) => None,
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
            // Signed last, over the request as it will be sent, at this attempt's own time.
            Placement::Hmac(s) => s.sign(request, &secret, SystemTime::now(), &hmac::nonce())?,
            Placement::SigV4(s) => s.sign(request, &secret, SystemTime::now())?,
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
    /// client secret, the access token in cache, an HMAC secret, AWS secret keys and session
    /// tokens (to scrub them from what is passed on).
    pub fn secret_values(&self) -> Vec<Secret> {
        let mut out: Vec<Secret> = self.sources.iter().filter_map(|s| s.current().ok()).collect();
        if let Source::Refreshing(c) = &self.source {
            let cached = c.peek();
            if let (Placement::SigV4(_), Some(t)) = (&self.placement, &cached) {
                out.extend(sigv4::provided_secrets(t));
            }
            out.extend(cached);
        }
        if let Placement::SigV4(s) = &self.placement {
            out.extend(s.config_secrets());
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
            kind: self.config.type_name(),
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

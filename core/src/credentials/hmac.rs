//! `type: hmac`: every attempt signed with an HMAC over a canonical string built from a
//! template, and the receiver's check of the same scheme (`idempotency`, `verify`).
//!
//! Guarantees: a preset is a set of defaults that every field overrides; the canonical
//! string is built from the request as sent (its percent-encoded path, its query, its body
//! bytes), after the timestamp and the nonce are placed, so each attempt carries a fresh
//! timestamp and a fresh 128-bit nonce; a template with an unknown token, a signed
//! timestamp or nonce the request would not carry, or a placement that is not one header or
//! one query parameter is a `ConfigError` naming the field; a signature is compared in
//! constant time; the secret is never in an error, a log line or a Debug.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use super::secret::{Secret, SecretRef};
use crate::error::{ErrorKind, HarnessError};
use crate::redact::escape_control;
use crate::transport::OutgoingRequest;

/// A vendor's scheme, as defaults for every other field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HmacPreset {
    /// Hex HMAC-SHA256 of `{timestamp}.{body}`; `x-timestamp` (Unix seconds), `x-signature`.
    #[default]
    Harness,
    /// Slack's request signing: `v0:{timestamp}:{body}`, `X-Slack-Signature: v0=<hex>`,
    /// `X-Slack-Request-Timestamp`.
    Slack,
    /// GitHub's webhook deliveries: `X-Hub-Signature-256: sha256=<hex of HMAC-SHA256(body)>`.
    Github,
    /// Standard Webhooks (Svix): `{nonce}.{timestamp}.{body}`, a base64 (`whsec_`) secret,
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`.
    StandardWebhooks,
}

/// The preset names, as `preset:` takes them.
pub const PRESETS: [&str; 4] = ["harness", "slack", "github", "standard_webhooks"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HmacAlgorithm {
    Sha1,
    Sha256,
    Sha512,
}

/// How the signature's bytes are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SignatureEncoding {
    Hex,
    Base64,
}

/// How the secret's text becomes the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SecretEncoding {
    /// Its UTF-8 bytes.
    Text,
    /// Base64 (a leading `whsec_` is dropped first, as Standard Webhooks secrets carry one).
    Base64,
    Hex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
pub enum TimestampUnit {
    /// Unix seconds.
    #[serde(rename = "s")]
    Seconds,
    /// Unix milliseconds.
    #[serde(rename = "ms")]
    Millis,
}

/// `type: hmac` (and the receiver's `signature:`): a preset, and any field of it overridden.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HmacAuth {
    /// `harness` (default), `slack`, `github` or `standard_webhooks`.
    pub preset: Option<HmacPreset>,
    /// Required: the shared secret.
    pub secret: Option<SecretRef>,
    /// `text` (default), `base64` (a `whsec_` prefix is dropped) or `hex`.
    pub secret_encoding: Option<SecretEncoding>,
    /// `sha256` (default), `sha1` or `sha512`.
    pub algorithm: Option<HmacAlgorithm>,
    /// The signed string. Tokens: `{method}`, `{path}` (as sent, percent-encoded), `{query}`
    /// (sorted), `{body}`, `{body_sha256_hex}`, `{body_sha256_base64}`, `{timestamp}`,
    /// `{nonce}`, `{header:Name}`; `{{` and `}}` are braces.
    pub canonical: Option<String>,
    /// The signature's encoding: `hex` or `base64`.
    pub encoding: Option<SignatureEncoding>,
    /// The timestamp's unit: `s` (default) or `ms`.
    pub timestamp_unit: Option<TimestampUnit>,
    /// The header the signature goes in (or `signature_param`).
    pub signature_header: Option<String>,
    /// The query parameter the signature goes in (instead of a header).
    pub signature_param: Option<String>,
    /// Put before the signature (`v0=`, `sha256=`).
    pub signature_prefix: Option<String>,
    /// The signature's value instead of a prefix: `{signature}`, `{timestamp}` and `{nonce}`
    /// (e.g. `t={timestamp},v1={signature}`).
    pub signature_template: Option<String>,
    /// The header the timestamp goes in (or `timestamp_param`).
    pub timestamp_header: Option<String>,
    pub timestamp_param: Option<String>,
    /// The header the nonce (128 bits, hex, fresh per attempt) goes in (or `nonce_param`).
    pub nonce_header: Option<String>,
    pub nonce_param: Option<String>,
    /// Receiver only: how far a delivery's timestamp may be from now (default 5 min).
    pub max_skew_ms: Option<u64>,
}

/// What a preset sets.
struct Defaults {
    canonical: &'static str,
    algorithm: HmacAlgorithm,
    encoding: SignatureEncoding,
    secret_encoding: SecretEncoding,
    prefix: &'static str,
    signature_header: &'static str,
    timestamp_header: Option<&'static str>,
    nonce_header: Option<&'static str>,
    /// A prefix the receiver also accepts (the harness receiver always took `sha256=`).
    also_accept: Option<&'static str>,
}

fn defaults(p: HmacPreset) -> Defaults {
    use HmacAlgorithm::Sha256;
    match p {
        HmacPreset::Harness => Defaults {
            canonical: "{timestamp}.{body}",
            algorithm: Sha256,
            encoding: SignatureEncoding::Hex,
            secret_encoding: SecretEncoding::Text,
            prefix: "",
            signature_header: "x-signature",
            timestamp_header: Some("x-timestamp"),
            nonce_header: None,
            also_accept: Some("sha256="),
        },
        HmacPreset::Slack => Defaults {
            canonical: "v0:{timestamp}:{body}",
            algorithm: Sha256,
            encoding: SignatureEncoding::Hex,
            secret_encoding: SecretEncoding::Text,
            prefix: "v0=",
            signature_header: "x-slack-signature",
            timestamp_header: Some("x-slack-request-timestamp"),
            nonce_header: None,
            also_accept: None,
        },
        HmacPreset::Github => Defaults {
            canonical: "{body}",
            algorithm: Sha256,
            encoding: SignatureEncoding::Hex,
            secret_encoding: SecretEncoding::Text,
            prefix: "sha256=",
            signature_header: "x-hub-signature-256",
            timestamp_header: None,
            nonce_header: None,
            also_accept: None,
        },
        HmacPreset::StandardWebhooks => Defaults {
            canonical: "{nonce}.{timestamp}.{body}",
            algorithm: Sha256,
            encoding: SignatureEncoding::Base64,
            secret_encoding: SecretEncoding::Base64,
            prefix: "v1,",
            signature_header: "webhook-signature",
            timestamp_header: Some("webhook-timestamp"),
            nonce_header: Some("webhook-id"),
            also_accept: None,
        },
    }
}

/// Where a value goes.
#[derive(Debug, Clone, PartialEq)]
enum Place {
    Header(HeaderName),
    Param(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Lit(String),
    Method,
    Path,
    Query,
    Body,
    BodySha256Hex,
    BodySha256Base64,
    Timestamp,
    Nonce,
    Header(HeaderName),
    Signature,
}

/// The canonical template's token names, for error messages.
const CANONICAL_TOKENS: &str = "{method}, {path}, {query}, {body}, {body_sha256_hex}, {body_sha256_base64}, {timestamp}, {nonce}, {header:Name}";

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
struct Template(Vec<Token>);

impl Template {
    /// Parses `text`: `{name}` tokens, `{{`/`}}` for braces; `value` says it is a signature
    /// value template (only `{signature}`, `{timestamp}`, `{nonce}`).
    fn parse(text: &str, value: bool, field: &str) -> Result<Template, HarnessError> {
        let bad = |m: String| HarnessError::config(format!("{field}: {m}"));
        if text.chars().any(char::is_control) && value {
            return Err(bad("a header or parameter value cannot hold a control character".into()));
        }
        let mut out = Vec::new();
        let mut lit = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    lit.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    lit.push('}');
                }
                '}' => return Err(bad("a `}` with no `{` (write `}}` for a brace)".into())),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => return Err(bad(format!("`{{{}` is not closed", escape_control(&name)))),
                        }
                    }
                    if !lit.is_empty() {
                        out.push(Token::Lit(std::mem::take(&mut lit)));
                    }
                    let token = Self::token(&name, value).ok_or_else(|| {
                        let expected = if value { "{signature}, {timestamp}, {nonce}" } else { CANONICAL_TOKENS };
                        bad(format!("unknown token `{{{}}}`, expected one of {expected}", escape_control(&name)))
                    })?;
                    out.push(token.map_err(bad)?);
                }
                c => lit.push(c),
            }
        }
        if !lit.is_empty() {
            out.push(Token::Lit(lit));
        }
        Ok(Template(out))
    }

    /// The token `name` names, `None` for an unknown one, an error for a bad header name.
    fn token(name: &str, value: bool) -> Option<Result<Token, String>> {
        let t = match (name, value) {
            ("signature", true) => Token::Signature,
            ("timestamp", _) => Token::Timestamp,
            ("nonce", _) => Token::Nonce,
            (_, true) => return None,
            ("method", _) => Token::Method,
            ("path", _) => Token::Path,
            ("query", _) => Token::Query,
            ("body", _) => Token::Body,
            ("body_sha256_hex", _) => Token::BodySha256Hex,
            ("body_sha256_base64", _) => Token::BodySha256Base64,
            _ => {
                let h = name.strip_prefix("header:")?;
                return Some(
                    HeaderName::try_from(h.trim())
                        .map(Token::Header)
                        .map_err(|_| format!("`{{header:{}}}` is not a header name", escape_control(h))),
                );
            }
        };
        Some(Ok(t))
    }

    fn uses(&self, t: &Token) -> bool {
        self.0.contains(t)
    }
}

/// What a canonical string is built from.
pub struct Parts<'a> {
    pub method: &'a str,
    /// The path as sent (percent-encoded).
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: Option<&'a HeaderMap>,
    /// `host[:port]`, for `{header:host}` (a transport sets that header itself).
    pub host: Option<String>,
    pub body: &'a [u8],
    pub timestamp: &'a str,
    pub nonce: &'a str,
}

/// One service's HMAC scheme, compiled: the preset with its overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct HmacSigner {
    preset: HmacPreset,
    algorithm: HmacAlgorithm,
    canonical: Template,
    /// Whether `canonical` was the user's (errors then name `canonical`, not `preset`).
    canonical_given: bool,
    encoding: SignatureEncoding,
    secret_encoding: SecretEncoding,
    unit: TimestampUnit,
    signature: Place,
    value: Template,
    timestamp: Option<Place>,
    nonce: Option<Place>,
    also_accept: Option<&'static str>,
    /// Receiver only.
    pub max_skew_ms: u64,
}

/// The receiver's default window for a delivery's timestamp.
pub const DEFAULT_MAX_SKEW_MS: u64 = 300_000;

fn place(header: &Option<String>, param: &Option<String>, path: &str, what: &str) -> Result<Option<Place>, HarnessError> {
    match (header, param) {
        (Some(_), Some(_)) => Err(HarnessError::config(format!("{path}.{what}_param: give {what}_header or {what}_param, not both"))),
        (Some(h), None) => {
            let field = format!("{path}.{what}_header");
            match HeaderName::try_from(h.as_str()) {
                Ok(n) if !crate::target::is_forbidden_header(h) => Ok(Some(Place::Header(n))),
                _ => Err(HarnessError::config(format!("{field}: not a header Harness can set: {:?}", escape_control(h)))),
            }
        }
        (None, Some(p)) => {
            if p.is_empty() || p.len() > 128 || !p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b)) {
                return Err(HarnessError::config(format!(
                    "{path}.{what}_param: expected 1 to 128 letters, digits, `-`, `_`, `.` or `~`, got {:?}",
                    escape_control(p)
                )));
            }
            Ok(Some(Place::Param(p.clone())))
        }
        (None, None) => Ok(None),
    }
}

impl HmacSigner {
    /// Resolves the preset and its overrides, naming fields under `path`
    /// (`services.<name>.auth`, or `signature` for the receiver).
    pub fn new(cfg: &HmacAuth, path: &str) -> Result<HmacSigner, HarnessError> {
        let preset = cfg.preset.unwrap_or_default();
        let d = defaults(preset);
        match &cfg.secret {
            None => return Err(HarnessError::config(format!("{path}.secret: required for type hmac"))),
            Some(s) => s.validate(&format!("{path}.secret"))?,
        }
        let canonical_text = cfg.canonical.as_deref().unwrap_or(d.canonical);
        let canonical = Template::parse(canonical_text, false, &format!("{path}.canonical"))?;
        if canonical.0.is_empty() {
            return Err(HarnessError::config(format!("{path}.canonical: the signed string is empty")));
        }
        // A placement given replaces the preset's (a header or a parameter, never both).
        let given = |h: &Option<String>, p: &Option<String>| h.is_some() || p.is_some();
        let default_place = |h: Option<&'static str>| h.map(|h| Place::Header(HeaderName::from_static(h)));
        let signature = if given(&cfg.signature_header, &cfg.signature_param) {
            place(&cfg.signature_header, &cfg.signature_param, path, "signature")?.expect("given")
        } else {
            Place::Header(HeaderName::from_static(d.signature_header))
        };
        let timestamp = if given(&cfg.timestamp_header, &cfg.timestamp_param) {
            place(&cfg.timestamp_header, &cfg.timestamp_param, path, "timestamp")?
        } else {
            default_place(d.timestamp_header)
        };
        let nonce = if given(&cfg.nonce_header, &cfg.nonce_param) { place(&cfg.nonce_header, &cfg.nonce_param, path, "nonce")? } else { default_place(d.nonce_header) };
        let value = match (&cfg.signature_prefix, &cfg.signature_template) {
            (Some(_), Some(_)) => return Err(HarnessError::config(format!("{path}.signature_template: give signature_prefix or signature_template, not both"))),
            (_, Some(t)) => {
                let field = format!("{path}.signature_template");
                let t = Template::parse(t, true, &field)?;
                if !t.uses(&Token::Signature) {
                    return Err(HarnessError::config(format!("{field}: the template must hold {{signature}}")));
                }
                t
            }
            (prefix, None) => {
                let prefix = prefix.as_deref().unwrap_or(d.prefix);
                if prefix.chars().any(char::is_control) {
                    return Err(HarnessError::config(format!("{path}.signature_prefix: a header or parameter value cannot hold a control character")));
                }
                let mut v = Vec::new();
                if !prefix.is_empty() {
                    v.push(Token::Lit(prefix.to_string()));
                }
                v.push(Token::Signature);
                Template(v)
            }
        };
        // A signed timestamp or nonce must reach the receiver.
        for (token, name, place) in [(Token::Timestamp, "timestamp", &timestamp), (Token::Nonce, "nonce", &nonce)] {
            if canonical.uses(&token) && place.is_none() && !value.uses(&token) {
                return Err(HarnessError::config(format!(
                    "{path}.{name}_header: the canonical string signs {{{name}}}, which the request would not carry: give {name}_header or {name}_param (or {{{name}}} in signature_template)"
                )));
            }
        }
        for other in [&timestamp, &nonce] {
            if let (Place::Header(a), Some(Place::Header(b))) = (&signature, other) {
                if a == b {
                    return Err(HarnessError::config(format!("{path}.signature_header: the signature and the timestamp or nonce cannot share the header {a}")));
                }
            }
        }
        let max_skew_ms = cfg.max_skew_ms.unwrap_or(DEFAULT_MAX_SKEW_MS);
        if max_skew_ms == 0 {
            return Err(HarnessError::config(format!("{path}.max_skew_ms: expected an integer >= 1, got 0")));
        }
        let signer = HmacSigner {
            preset,
            algorithm: cfg.algorithm.unwrap_or(d.algorithm),
            canonical,
            canonical_given: cfg.canonical.is_some(),
            encoding: cfg.encoding.unwrap_or(d.encoding),
            secret_encoding: cfg.secret_encoding.unwrap_or(d.secret_encoding),
            unit: cfg.timestamp_unit.unwrap_or(TimestampUnit::Seconds),
            signature,
            value,
            timestamp,
            nonce,
            // Only the preset's own value: an override of the value drops it.
            also_accept: d.also_accept.filter(|_| cfg.signature_prefix.is_none() && cfg.signature_template.is_none()),
            max_skew_ms,
        };
        Ok(signer)
    }

    /// Checks that `secret` makes a key (a `base64` or `hex` secret must decode), naming `field`.
    pub fn check_secret(&self, secret: &Secret, field: &str) -> Result<(), HarnessError> {
        self.key_bytes(secret).map(|_| ()).map_err(|m| HarnessError::config(format!("{field}: {m}")))
    }

    fn key_bytes(&self, secret: &Secret) -> Result<Vec<u8>, String> {
        let text = secret.expose();
        match self.secret_encoding {
            SecretEncoding::Text => Ok(text.as_bytes().to_vec()),
            SecretEncoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(text.strip_prefix("whsec_").unwrap_or(text))
                .map_err(|_| "secret_encoding is base64, but the secret is not base64".to_string()),
            SecretEncoding::Hex => super::shared::unhex(text).ok_or_else(|| "secret_encoding is hex, but the secret is not hex".to_string()),
        }
    }

    fn key(&self, secret: &Secret) -> Result<ring::hmac::Key, HarnessError> {
        let bytes = self.key_bytes(secret).map_err(|m| HarnessError::new(ErrorKind::Auth, format!("the hmac secret cannot be used: {m}")))?;
        let alg = match self.algorithm {
            HmacAlgorithm::Sha1 => ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            HmacAlgorithm::Sha256 => ring::hmac::HMAC_SHA256,
            HmacAlgorithm::Sha512 => ring::hmac::HMAC_SHA512,
        };
        Ok(ring::hmac::Key::new(alg, &bytes))
    }

    /// The timestamp for `now` in the configured unit.
    pub fn timestamp_at(&self, now: SystemTime) -> String {
        let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        match self.unit {
            TimestampUnit::Seconds => d.as_secs().to_string(),
            TimestampUnit::Millis => d.as_millis().to_string(),
        }
    }

    /// The signed string.
    pub fn canonical(&self, p: &Parts<'_>) -> Vec<u8> {
        let mut out = Vec::with_capacity(p.body.len() + 64);
        for t in &self.canonical.0 {
            match t {
                Token::Lit(s) => out.extend_from_slice(s.as_bytes()),
                Token::Method => out.extend_from_slice(p.method.as_bytes()),
                Token::Path => out.extend_from_slice(p.path.as_bytes()),
                Token::Query => out.extend_from_slice(sorted_query(p.query, self.signature_param()).as_bytes()),
                Token::Body => out.extend_from_slice(p.body),
                Token::BodySha256Hex => {
                    let d = ring::digest::digest(&ring::digest::SHA256, p.body);
                    out.extend_from_slice(hex(d.as_ref()).as_bytes());
                }
                Token::BodySha256Base64 => {
                    let d = ring::digest::digest(&ring::digest::SHA256, p.body);
                    out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(d.as_ref()).as_bytes());
                }
                Token::Timestamp => out.extend_from_slice(p.timestamp.as_bytes()),
                Token::Nonce => out.extend_from_slice(p.nonce.as_bytes()),
                Token::Header(name) => {
                    let values: Vec<&[u8]> = p.headers.map(|h| h.get_all(name).iter().map(|v| v.as_bytes()).collect()).unwrap_or_default();
                    if values.is_empty() && *name == http::header::HOST {
                        out.extend_from_slice(p.host.as_deref().unwrap_or("").as_bytes());
                    }
                    // A repeated header: its values joined with `,`, as HTTP reads them.
                    for (i, v) in values.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(v);
                    }
                }
                Token::Signature => {}
            }
        }
        out
    }

    fn signature_param(&self) -> Option<&str> {
        match &self.signature {
            Place::Param(p) => Some(p),
            Place::Header(_) => None,
        }
    }

    /// The query parameter the signature goes in, if it goes in one (no caller may set it).
    pub fn query_param(&self) -> Option<&str> {
        self.signature_param()
    }

    /// The signature's value (prefix or template applied) over `canonical`.
    fn value(&self, key: &ring::hmac::Key, canonical: &[u8], timestamp: &str, nonce: &str) -> String {
        let tag = ring::hmac::sign(key, canonical);
        let sig = match self.encoding {
            SignatureEncoding::Hex => hex(tag.as_ref()),
            SignatureEncoding::Base64 => base64::engine::general_purpose::STANDARD.encode(tag.as_ref()),
        };
        let mut out = String::with_capacity(sig.len() + 16);
        for t in &self.value.0 {
            match t {
                Token::Lit(s) => out.push_str(s),
                Token::Signature => out.push_str(&sig),
                Token::Timestamp => out.push_str(timestamp),
                Token::Nonce => out.push_str(nonce),
                _ => {}
            }
        }
        out
    }

    /// Signs one attempt's request at `now` with `nonce`: places the timestamp and nonce, then
    /// the signature over the request as it now stands.
    pub fn sign(&self, request: &mut OutgoingRequest, secret: &Secret, now: SystemTime, nonce: &str) -> Result<(), HarnessError> {
        let key = self.key(secret)?;
        let timestamp = self.timestamp_at(now);
        if let Some(p) = &self.timestamp {
            put(request, p, &timestamp)?;
        }
        if let Some(p) = &self.nonce {
            put(request, p, nonce)?;
        }
        let host = request.url.host_str().map(|h| match request.url.port() {
            Some(port) => format!("{h}:{port}"),
            None => h.to_string(),
        });
        let parts = Parts {
            method: request.method.as_str(),
            path: request.url.path(),
            query: request.url.query(),
            headers: Some(&request.headers),
            host,
            body: request.body.as_deref().unwrap_or(&[]),
            timestamp: &timestamp,
            nonce,
        };
        let canonical = self.canonical(&parts);
        let value = self.value(&key, &canonical, &timestamp, nonce);
        put(request, &self.signature, &value)
    }

    /// The signature value for `parts` (a receiver's `sign`, and tests).
    pub fn sign_parts(&self, secret: &Secret, parts: &Parts<'_>) -> Result<String, HarnessError> {
        let key = self.key(secret)?;
        Ok(self.value(&key, &self.canonical(parts), parts.timestamp, parts.nonce))
    }

    /// Whether `presented` is the signature for `parts`, compared in constant time.
    pub fn verify_parts(&self, secret: &Secret, parts: &Parts<'_>, presented: &str) -> Result<bool, HarnessError> {
        let expected = self.sign_parts(secret, parts)?;
        let presented = presented.trim();
        let mut ok = constant_time_eq(expected.as_bytes(), presented.as_bytes());
        if let Some(extra) = self.also_accept {
            ok |= presented.strip_prefix(extra).is_some_and(|rest| constant_time_eq(expected.as_bytes(), rest.as_bytes()));
        }
        // A hex signature is case-blind (the harness receiver always took either case).
        if !ok && self.encoding == SignatureEncoding::Hex && self.value.0 == [Token::Signature] {
            ok = constant_time_eq(expected.as_bytes(), presented.to_ascii_lowercase().as_bytes());
        }
        Ok(ok)
    }

    /// Whether the signed string or the value holds the timestamp.
    pub fn uses_timestamp(&self) -> bool {
        self.canonical.uses(&Token::Timestamp) || self.value.uses(&Token::Timestamp)
    }

    /// The timestamp's unit.
    pub fn unit_millis(&self) -> bool {
        self.unit == TimestampUnit::Millis
    }

    /// A receiver's `verify(timestamp, body, signature)` has only those three: a scheme that
    /// signs more (the method, the path, a header, a nonce) is refused, naming the field.
    pub fn check_receivable(&self, path: &str) -> Result<(), HarnessError> {
        let needs = |t: &Token| match t {
            Token::Method => Some("{method}"),
            Token::Path => Some("{path}"),
            Token::Query => Some("{query}"),
            Token::Nonce => Some("{nonce}"),
            Token::Header(_) => Some("{header:...}"),
            _ => None,
        };
        if let Some(what) = self.canonical.0.iter().chain(self.value.0.iter()).find_map(needs) {
            let field = if self.canonical_given { "canonical" } else { "preset" };
            let name = PRESETS[self.preset as usize];
            return Err(HarnessError::config(format!(
                "{path}.{field}: the receiver's verify(timestamp, body, signature) cannot supply {what}, which this scheme signs (preset {name})"
            )));
        }
        Ok(())
    }
}

/// Puts `value` in the header or query parameter `place`.
fn put(request: &mut OutgoingRequest, place: &Place, value: &str) -> Result<(), HarnessError> {
    match place {
        Place::Header(name) => {
            let mut v = HeaderValue::try_from(value).map_err(|_| HarnessError::new(ErrorKind::Auth, format!("the {name} value is not a valid header value")))?;
            v.set_sensitive(true);
            request.headers.insert(name.clone(), v);
        }
        Place::Param(param) => {
            request.url.query_pairs_mut().append_pair(param, value);
        }
    }
    Ok(())
}

/// A query's `name=value` pairs as sent (percent-encoded), sorted, joined with `&`; the
/// signature's own parameter left out (it is added after signing).
fn sorted_query(query: Option<&str>, skip: Option<&str>) -> String {
    let Some(q) = query else { return String::new() };
    let mut pairs: Vec<&str> = q.split('&').filter(|p| !p.is_empty()).filter(|p| skip.is_none_or(|s| p.split('=').next() != Some(s))).collect();
    pairs.sort_unstable_by(|a, b| {
        let (ka, va) = a.split_once('=').unwrap_or((a, ""));
        let (kb, vb) = b.split_once('=').unwrap_or((b, ""));
        (ka, va).cmp(&(kb, vb))
    });
    pairs.join("&")
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Equal bytes, in time that depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh 128-bit nonce, hex.
pub fn nonce() -> String {
    format!("{:032x}", rand::random::<u128>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn signer(v: serde_json::Value) -> HmacSigner {
        let cfg: HmacAuth = serde_json::from_value(v).unwrap();
        HmacSigner::new(&cfg, "services.s.auth").unwrap()
    }

    fn request(method: &str, url: &str, body: &[u8]) -> OutgoingRequest {
        OutgoingRequest {
            method: method.parse().unwrap(),
            url: url::Url::parse(url).unwrap(),
            headers: HeaderMap::new(),
            body: Some(bytes::Bytes::copy_from_slice(body)),
            fault: None,
        }
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn header<'a>(r: &'a OutgoingRequest, name: &str) -> &'a str {
        r.headers.get(name).unwrap_or_else(|| panic!("no {name}")).to_str().unwrap()
    }

    // Slack's worked example, "Verifying requests from Slack":
    // https://api.slack.com/authentication/verifying-requests-from-slack
    // (signing secret, X-Slack-Request-Timestamp, the slash command's body and the expected
    // X-Slack-Signature as the page gives them).
    #[test]
    fn the_slack_preset_reproduces_slacks_documented_example() {
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let s = signer(serde_json::json!({"preset": "slack", "secret": {"value": "8f742231b10e8888abcd99yyyzzz85a5"}}));
        let mut r = request("POST", "https://example.com/slack/commands", body.as_bytes());
        s.sign(&mut r, &Secret::new("8f742231b10e8888abcd99yyyzzz85a5"), at(1531420618), "unused").unwrap();
        assert_eq!(header(&r, "x-slack-request-timestamp"), "1531420618");
        assert_eq!(header(&r, "x-slack-signature"), "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503");
    }

    // GitHub's "Validating webhook deliveries", section "Testing the webhook payload validation":
    // https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
    // (secret "It's a Secret to Everybody", payload "Hello, World!").
    #[test]
    fn the_github_preset_reproduces_githubs_documented_test_values() {
        let s = signer(serde_json::json!({"preset": "github", "secret": {"value": "It's a Secret to Everybody"}}));
        let mut r = request("POST", "https://example.com/hook", b"Hello, World!");
        s.sign(&mut r, &Secret::new("It's a Secret to Everybody"), at(1), "unused").unwrap();
        assert_eq!(header(&r, "x-hub-signature-256"), "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
        // No timestamp or nonce goes with GitHub's scheme.
        assert_eq!(r.headers.len(), 1);
    }

    // Svix's "How to verify webhooks" example (the Standard Webhooks scheme):
    // https://docs.svix.com/receiving/verifying-payloads/how (secret, svix-id, svix-timestamp,
    // payload and the expected svix-signature as the page gives them; the construction is on
    // https://docs.svix.com/receiving/verifying-payloads/how-manual).
    #[test]
    fn the_standard_webhooks_preset_reproduces_svixs_documented_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let s = signer(serde_json::json!({"preset": "standard_webhooks", "secret": {"value": secret}}));
        let mut r = request("POST", "https://example.com/hook", br#"{"test": 2432232314}"#);
        s.sign(&mut r, &Secret::new(secret), at(1614265330), "msg_p5jXN8AQM9LWM0D4loKWxJek").unwrap();
        assert_eq!(header(&r, "webhook-id"), "msg_p5jXN8AQM9LWM0D4loKWxJek");
        assert_eq!(header(&r, "webhook-timestamp"), "1614265330");
        assert_eq!(header(&r, "webhook-signature"), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn the_harness_preset_is_the_receivers_format() {
        let s = signer(serde_json::json!({"secret": {"value": "whsec-test-123"}}));
        let mut r = request("POST", "http://127.0.0.1:1/x", b"{\"a\":1}");
        s.sign(&mut r, &Secret::new("whsec-test-123"), at(1700000000), "n").unwrap();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"whsec-test-123");
        let want = hex(ring::hmac::sign(&key, b"1700000000.{\"a\":1}").as_ref());
        assert_eq!(header(&r, "x-timestamp"), "1700000000");
        assert_eq!(header(&r, "x-signature"), want);
    }

    #[test]
    fn a_template_covers_method_path_sorted_query_body_hash_headers_and_a_nonce_in_the_query() {
        let s = signer(serde_json::json!({
            "secret": {"value": "k"},
            "algorithm": "sha512",
            "encoding": "base64",
            "timestamp_unit": "ms",
            "canonical": "{method}\n{path}\n{query}\n{body_sha256_hex}\n{body_sha256_base64}\n{header:X-Tenant}\n{header:host}\n{timestamp}\n{nonce}\n{{literal}}",
            "signature_param": "sig",
            "timestamp_param": "ts",
            "nonce_header": "x-nonce",
        }));
        let mut r = request("PUT", "http://api.example.com:8080/a%20b/c?z=1&a=2&a=1", b"hello");
        r.headers.insert("x-tenant", HeaderValue::from_static("t1"));
        s.sign(&mut r, &Secret::new("k"), UNIX_EPOCH + Duration::from_millis(1_700_000_000_123), "00ff").unwrap();
        let sha_hex = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        let sha_b64 = "LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=";
        let canonical = format!("PUT\n/a%20b/c\na=1&a=2&ts=1700000000123&z=1\n{sha_hex}\n{sha_b64}\nt1\napi.example.com:8080\n1700000000123\n00ff\n{{literal}}");
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA512, b"k");
        let want = base64::engine::general_purpose::STANDARD.encode(ring::hmac::sign(&key, canonical.as_bytes()).as_ref());
        let q: Vec<(String, String)> = r.url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        assert_eq!(q.last().unwrap(), &("sig".to_string(), want));
        assert!(q.contains(&("ts".to_string(), "1700000000123".to_string())));
        assert_eq!(header(&r, "x-nonce"), "00ff");
    }

    #[test]
    fn a_stripe_style_value_template_and_sha1() {
        let s = signer(serde_json::json!({
            "secret": {"value": "k"},
            "algorithm": "sha1",
            "signature_header": "Stripe-Signature",
            "signature_template": "t={timestamp},v1={signature}",
        }));
        let mut r = request("POST", "http://h/x", b"p");
        s.sign(&mut r, &Secret::new("k"), at(12), "n").unwrap();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, b"k");
        assert_eq!(header(&r, "stripe-signature"), format!("t=12,v1={}", hex(ring::hmac::sign(&key, b"12.p").as_ref())));
    }

    #[test]
    fn each_attempt_gets_its_own_nonce() {
        let (a, b) = (nonce(), nonce());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn a_preset_overridden_field_by_field() {
        let s = signer(serde_json::json!({"preset": "slack", "secret": {"value": "k"}, "signature_header": "x-sig", "timestamp_unit": "ms"}));
        let mut r = request("POST", "http://h/x", b"b");
        s.sign(&mut r, &Secret::new("k"), UNIX_EPOCH + Duration::from_millis(1500), "n").unwrap();
        assert!(header(&r, "x-sig").starts_with("v0="));
        assert_eq!(header(&r, "x-slack-request-timestamp"), "1500");
        assert!(r.headers.get("x-slack-signature").is_none());
    }

    fn err(v: serde_json::Value) -> String {
        let cfg: HmacAuth = serde_json::from_value(v).unwrap();
        HmacSigner::new(&cfg, "services.s.auth").unwrap_err().message
    }

    #[test]
    fn bad_schemes_are_config_errors_naming_the_field() {
        let k = serde_json::json!({"value": "k"});
        let e = err(serde_json::json!({"secret": k, "canonical": "{method}:{bogus}"}));
        assert!(e.starts_with("services.s.auth.canonical: unknown token `{bogus}`, expected one of {method}"), "{e}");
        let e = err(serde_json::json!({"secret": k, "canonical": "{method"}));
        assert!(e.starts_with("services.s.auth.canonical: `{method` is not closed"), "{e}");
        let e = err(serde_json::json!({"secret": k, "canonical": "{header:bad header}"}));
        assert!(e.starts_with("services.s.auth.canonical: `{header:bad header}` is not a header name"), "{e}");
        let e = err(serde_json::json!({"secret": k, "signature_template": "v1={sig}"}));
        assert!(e.starts_with("services.s.auth.signature_template: unknown token `{sig}`"), "{e}");
        let e = err(serde_json::json!({"secret": k, "signature_template": "v1"}));
        assert!(e.starts_with("services.s.auth.signature_template: the template must hold {signature}"), "{e}");
        let e = err(serde_json::json!({"secret": k, "signature_header": "x", "signature_param": "y"}));
        assert!(e.starts_with("services.s.auth.signature_param: give signature_header or signature_param"), "{e}");
        let e = err(serde_json::json!({"secret": k, "canonical": "{nonce}.{body}"}));
        assert!(e.starts_with("services.s.auth.nonce_header: the canonical string signs {nonce}"), "{e}");
        let e = err(serde_json::json!({"secret": k, "signature_header": "content-length"}));
        assert!(e.starts_with("services.s.auth.signature_header: not a header Harness can set"), "{e}");
        let e = err(serde_json::json!({"secret": k, "timestamp_param": "a b"}));
        assert!(e.starts_with("services.s.auth.timestamp_param: expected 1 to 128 letters"), "{e}");
        let e = err(serde_json::json!({"preset": "github"}));
        assert_eq!(e, "services.s.auth.secret: required for type hmac");
        let e = serde_json::from_value::<HmacAuth>(serde_json::json!({"algorithm": "md5"})).unwrap_err().to_string();
        assert!(e.contains("unknown variant `md5`"), "{e}");
    }

    #[test]
    fn a_receiver_refuses_a_scheme_it_cannot_check() {
        let s = signer(serde_json::json!({"preset": "standard_webhooks", "secret": {"value": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}));
        let e = s.check_receivable("signature").unwrap_err().message;
        assert!(e.starts_with("signature.preset: the receiver's verify(timestamp, body, signature) cannot supply {nonce}"), "{e}");
        let s = signer(serde_json::json!({"secret": {"value": "k"}, "canonical": "{method} {body}"}));
        assert!(s.check_receivable("signature").unwrap_err().message.starts_with("signature.canonical: "));
        for p in ["harness", "slack", "github"] {
            signer(serde_json::json!({"preset": p, "secret": {"value": "k"}})).check_receivable("signature").unwrap();
        }
    }

    #[test]
    fn verify_accepts_its_own_signature_only() {
        let s = signer(serde_json::json!({"preset": "slack", "secret": {"value": "k"}}));
        let secret = Secret::new("k");
        let parts = Parts { method: "", path: "", query: None, headers: None, host: None, body: b"x", timestamp: "5", nonce: "" };
        let sig = s.sign_parts(&secret, &parts).unwrap();
        assert!(s.verify_parts(&secret, &parts, &sig).unwrap());
        assert!(!s.verify_parts(&secret, &parts, &sig[3..]).unwrap());
        assert!(!s.verify_parts(&Secret::new("other"), &parts, &sig).unwrap());
        let h = signer(serde_json::json!({"secret": {"value": "k"}}));
        let sig = h.sign_parts(&secret, &parts).unwrap();
        assert!(h.verify_parts(&secret, &parts, &format!("sha256={sig}")).unwrap());
        assert!(h.verify_parts(&secret, &parts, &sig.to_ascii_uppercase()).unwrap());
    }

    #[test]
    fn a_base64_secret_that_does_not_decode_is_named_not_shown() {
        let s = signer(serde_json::json!({"preset": "standard_webhooks", "secret": {"value": "not base64!"}}));
        let e = s.check_secret(&Secret::new("not base64!"), "services.s.auth.secret").unwrap_err().message;
        assert_eq!(e, "services.s.auth.secret: secret_encoding is base64, but the secret is not base64");
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let cfg: HmacAuth = serde_json::from_value(serde_json::json!({"secret": {"value": "topsecret-1"}})).unwrap();
        assert!(!format!("{cfg:?}").contains("topsecret-1"));
        assert!(!format!("{:?}", HmacSigner::new(&cfg, "a").unwrap()).contains("topsecret-1"));
    }
}

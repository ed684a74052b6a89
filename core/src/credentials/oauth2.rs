//! OAuth2 client credentials (RFC 6749 §4.4) as a token provider.
//!
//! Guarantees: the client secret is sent only in the token request's form body;
//! `invalid_grant`, `invalid_client`, `unauthorized_client` and `access_denied`
//! mark the credential dead (no hammering of the token endpoint); any other
//! failure is transient; no error text carries the secret or the token: whatever the
//! endpoint echoes (the client id and secret, raw or form-encoded) is scrubbed from every
//! message before it reaches an error, the state API, an event or a log line. A lifetime
//! (`expires_in`) must be a positive number of seconds (a number or a numeric string);
//! 0, a negative number or a boolean is a malformed answer, and a lifetime past
//! `host::MAX_TOKEN_LIFETIME` is held for that long.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};

use super::secret::SecretSource;
use crate::host::{ProviderError, Token, TokenProvider};
use crate::transport::{BoxFuture, OutgoingRequest, Transport};

/// Largest token response read.
const MAX_TOKEN_RESPONSE: usize = 64 * 1024;

pub struct ClientCredentials {
    pub token_url: url::Url,
    pub client_id: SecretSource,
    pub client_secret: SecretSource,
    pub scope: Option<String>,
    pub transport: Arc<dyn Transport>,
}

fn form_escape(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

impl TokenProvider for ClientCredentials {
    fn fetch(&self) -> BoxFuture<'_, Result<Token, ProviderError>> {
        Box::pin(async move {
            let id = self.client_id.current().map_err(|e| ProviderError::new(e.message))?;
            let secret = self.client_secret.current().map_err(|e| ProviderError::new(e.message))?;
            let mut known = crate::redact::Secrets::default();
            for v in [id.expose(), secret.expose()] {
                known.add(v);
                known.add(&form_escape(v));
            }
            let scrub = |e: ProviderError| ProviderError { message: known.downstream_message(&e.message), dead: e.dead };
            self.exchange(id.expose(), secret.expose()).await.map_err(scrub)
        })
    }
}

impl ClientCredentials {
    async fn exchange(&self, id: &str, secret: &str) -> Result<Token, ProviderError> {
        {
            let mut form = format!(
                "grant_type=client_credentials&client_id={}&client_secret={}",
                form_escape(id),
                form_escape(secret)
            );
            if let Some(scope) = &self.scope {
                form.push_str("&scope=");
                form.push_str(&form_escape(scope));
            }
            let mut headers = HeaderMap::new();
            headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded"));
            headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/json"));
            let request = OutgoingRequest { method: Method::POST, url: self.token_url.clone(), headers, body: Some(Bytes::from(form)), fault: None };
            let exchange = self.transport.send(request).await.map_err(|f| ProviderError::new(format!("token endpoint: {}", f.message)))?;
            let status = exchange.status.as_u16();
            let mut body = exchange.body;
            let mut bytes = Vec::new();
            while let Some(chunk) = body.next_chunk().await.map_err(|f| ProviderError::new(format!("token endpoint: {}", f.message)))? {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > MAX_TOKEN_RESPONSE {
                    return Err(ProviderError::new("token endpoint: response over 64 KiB"));
                }
            }
            let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
            if (200..300).contains(&status) {
                let Some(token) = json.get("access_token").and_then(|v| v.as_str()).filter(|t| !t.is_empty()) else {
                    return Err(ProviderError::new(format!("token endpoint answered {status} without an access_token")));
                };
                let expires_in = match json.get("expires_in") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(v) => {
                        let secs = v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()));
                        let lifetime = secs.ok_or_else(|| "not a number".to_string()).and_then(Token::lifetime_from_secs);
                        match lifetime {
                            Ok(d) => Some(d),
                            Err(why) => return Err(ProviderError::new(format!("token endpoint answered {status} with a malformed expires_in ({why})"))),
                        }
                    }
                };
                return Ok(Token { value: super::secret::Secret::new(token), expires_in });
            }
            let code = json.get("error").and_then(|v| v.as_str()).unwrap_or("");
            let dead = matches!(code, "invalid_grant" | "invalid_client" | "unauthorized_client" | "access_denied");
            let what = if code.is_empty() { format!("status {status}") } else { code.chars().take(64).collect() };
            Err(ProviderError { message: format!("token endpoint refused: {what}"), dead })
        }
    }
}

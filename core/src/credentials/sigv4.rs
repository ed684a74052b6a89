//! `type: aws_sigv4`: every attempt signed with AWS Signature Version 4 (the `aws-sigv4` crate).
//!
//! Guarantees: the request is signed as it will be sent (method, URL, every header it carries,
//! the SHA-256 of its body) at the attempt's own time, so a retry carries a fresh `x-amz-date`;
//! credentials come from config (`access_key_id`, `secret_access_key`, `session_token`,
//! defaulting to the `AWS_*` environment variables) or from a host provider whose token is a
//! JSON object (`credentials: callback`, refreshed by its `expires_in`); neither the secret
//! key nor the session token is ever in an error, a log line or a Debug.

use std::time::SystemTime;

use aws_sigv4::http_request::{sign, PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use http::{HeaderName, HeaderValue};
use serde::Deserialize;

use super::secret::{Secret, SecretSource};
use crate::error::{ErrorKind, HarnessError};
use crate::transport::OutgoingRequest;

/// Where the signer's key comes from.
pub(crate) enum Keys {
    /// From config (or the `AWS_*` environment): the access key id and the session token; the
    /// secret key is the credential's own source.
    Config { access_key_id: SecretSource, session_token: Option<SecretSource> },
    /// From a host provider: the token is `{"access_key_id", "secret_access_key", "session_token"?}`.
    Callback,
}

/// One service's SigV4 signer.
pub struct SigV4Signer {
    service: String,
    region: String,
    content_sha256: bool,
    keys: Keys,
}

impl std::fmt::Debug for SigV4Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigV4Signer").field("service", &self.service).field("region", &self.region).finish_non_exhaustive()
    }
}

/// A host provider's token, read.
#[derive(Deserialize)]
struct ProvidedKeys {
    access_key_id: String,
    secret_access_key: String,
    #[serde(default)]
    session_token: Option<String>,
}

/// The secret values inside a provider's token (to scrub them); empty when it does not parse.
pub(crate) fn provided_secrets(token: &Secret) -> Vec<Secret> {
    match serde_json::from_str::<ProvidedKeys>(token.expose()) {
        Ok(k) => std::iter::once(k.secret_access_key).chain(k.session_token).filter(|s| !s.is_empty()).map(Secret::new).collect(),
        Err(_) => Vec::new(),
    }
}

impl SigV4Signer {
    pub(crate) fn new(service: &str, region: &str, content_sha256: bool, keys: Keys) -> SigV4Signer {
        SigV4Signer { service: service.to_string(), region: region.to_string(), content_sha256, keys }
    }

    /// The key id and session token from config, as read now (a credential whose values
    /// changed on reload is replaced).
    pub(crate) fn config_values(&self) -> Vec<Secret> {
        match &self.keys {
            Keys::Config { access_key_id, session_token } => access_key_id.current().into_iter().chain(session_token.iter().filter_map(|t| t.current().ok())).collect(),
            Keys::Callback => Vec::new(),
        }
    }

    /// The session token from config, if any (to scrub it).
    pub(crate) fn config_secrets(&self) -> Vec<Secret> {
        match &self.keys {
            Keys::Config { session_token: Some(t), .. } => t.current().into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// Signs one attempt's request at `now`. `secret` is the secret access key (config) or the
    /// provider's token (callback).
    pub fn sign(&self, request: &mut OutgoingRequest, secret: &Secret, now: SystemTime) -> Result<(), HarnessError> {
        let auth = |m: &str| HarnessError::new(ErrorKind::Auth, format!("aws_sigv4: {m}"));
        let (access_key_id, secret_key, token) = match &self.keys {
            Keys::Config { access_key_id, session_token } => (
                access_key_id.current()?.expose().to_string(),
                secret.expose().to_string(),
                session_token.as_ref().map(|t| t.current().map(|s| s.expose().to_string())).transpose()?,
            ),
            Keys::Callback => {
                // Never the token's text in the error: it holds the secret key.
                let k: ProvidedKeys = serde_json::from_str(secret.expose())
                    .map_err(|_| auth("the credential provider's token is not a JSON object with access_key_id and secret_access_key (and optionally session_token)"))?;
                (k.access_key_id, k.secret_access_key, k.session_token.filter(|t| !t.is_empty()))
            }
        };
        let identity = aws_credential_types::Credentials::new(access_key_id, secret_key, token, None, "harness").into();
        let mut settings = SigningSettings::default();
        if self.content_sha256 {
            settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        }
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(&self.service)
            .time(now)
            .settings(settings)
            .build()
            .map_err(|e| auth(&format!("cannot sign: {e}")))?
            .into();
        let mut headers = Vec::with_capacity(request.headers.len());
        for (name, value) in &request.headers {
            let value = value.to_str().map_err(|_| auth(&format!("the header {name} is not printable ASCII, which SigV4 cannot sign")))?;
            headers.push((name.as_str(), value));
        }
        let body = request.body.as_deref().unwrap_or(&[]);
        let signable = SignableRequest::new(request.method.as_str(), request.url.as_str(), headers.into_iter(), SignableBody::Bytes(body))
            .map_err(|e| auth(&format!("cannot sign this request: {e}")))?;
        let (instructions, _) = sign(signable, &params).map_err(|e| auth(&format!("cannot sign this request: {e}")))?.into_parts();
        let (add, query) = instructions.into_parts();
        for h in add {
            let name = HeaderName::from_bytes(h.name().as_bytes()).map_err(|_| auth("the signer gave an invalid header name"))?;
            let mut value = HeaderValue::try_from(h.value()).map_err(|_| auth("the signer gave an invalid header value"))?;
            value.set_sensitive(true);
            request.headers.insert(name, value);
        }
        // Header signing adds no query parameters; a presigned URL is not what a request needs.
        debug_assert!(query.is_empty());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    // The AWS SigV4 test suite as shipped in the aws-sigv4 crate (aws-signing-test-suite/v4, taken
    // from awslabs/aws-c-auth's suite): credentials AKIDEXAMPLE /
    // wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, region us-east-1, service `service`, signed at
    // 2015-08-30T12:36:00Z; each case's expected Authorization is its header-signed-request.txt.
    const AKID: &str = "AKIDEXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const T: u64 = 1440938160; // 2015-08-30T12:36:00Z

    fn signer(token: Option<&str>, content_sha256: bool) -> SigV4Signer {
        let keys = Keys::Config {
            access_key_id: SecretSource::Fixed(Secret::new(AKID)),
            session_token: token.map(|t| SecretSource::Fixed(Secret::new(t))),
        };
        SigV4Signer::new("service", "us-east-1", content_sha256, keys)
    }

    fn request(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> OutgoingRequest {
        let mut r = OutgoingRequest {
            method: method.parse().unwrap(),
            url: url::Url::parse(url).unwrap(),
            headers: http::HeaderMap::new(),
            body: Some(bytes::Bytes::copy_from_slice(body)),
            fault: None,
        };
        for (k, v) in headers {
            r.headers.insert(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        r
    }

    fn signed(s: &SigV4Signer, mut r: OutgoingRequest) -> OutgoingRequest {
        s.sign(&mut r, &Secret::new(SECRET), UNIX_EPOCH + Duration::from_secs(T)).unwrap();
        assert_eq!(r.headers["x-amz-date"], "20150830T123600Z");
        r
    }

    fn authorization(signed_headers: &str, signature: &str) -> String {
        format!("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders={signed_headers}, Signature={signature}")
    }

    #[test]
    fn get_vanilla() {
        let r = signed(&signer(None, false), request("GET", "https://example.amazonaws.com/", &[], b""));
        assert_eq!(r.headers["authorization"], authorization("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"));
        assert!(r.headers.get("x-amz-content-sha256").is_none());
    }

    #[test]
    fn get_vanilla_query_order_key_case() {
        let r = signed(&signer(None, false), request("GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1", &[], b""));
        assert_eq!(r.headers["authorization"], authorization("host;x-amz-date", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"));
    }

    #[test]
    fn post_vanilla() {
        let r = signed(&signer(None, false), request("POST", "https://example.amazonaws.com/", &[], b""));
        assert_eq!(r.headers["authorization"], authorization("host;x-amz-date", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"));
    }

    #[test]
    fn post_x_www_form_urlencoded_with_the_body_hash_header() {
        // This case signs the body (`sign_body: true`): the x-amz-content-sha256 header.
        let headers = [("content-type", "application/x-www-form-urlencoded"), ("content-length", "13")];
        let r = signed(&signer(None, true), request("POST", "https://example.amazonaws.com/", &headers, b"Param1=value1"));
        assert_eq!(r.headers["x-amz-content-sha256"], "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
        assert_eq!(
            r.headers["authorization"],
            authorization("content-length;content-type;host;x-amz-content-sha256;x-amz-date", "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b")
        );
    }

    #[test]
    fn get_vanilla_with_session_token() {
        let token = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";
        let r = signed(&signer(Some(token), false), request("GET", "https://example.amazonaws.com/", &[], b""));
        assert_eq!(r.headers["x-amz-security-token"], token);
        assert_eq!(r.headers["authorization"], authorization("host;x-amz-date;x-amz-security-token", "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"));
    }

    #[test]
    fn post_sts_header_before_from_a_host_providers_json_token() {
        let token = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";
        let s = SigV4Signer::new("service", "us-east-1", false, Keys::Callback);
        let provided = Secret::new(serde_json::json!({"access_key_id": AKID, "secret_access_key": SECRET, "session_token": token}).to_string());
        let mut r = request("POST", "https://example.amazonaws.com/", &[], b"");
        s.sign(&mut r, &provided, UNIX_EPOCH + Duration::from_secs(T)).unwrap();
        assert_eq!(r.headers["authorization"], authorization("host;x-amz-date;x-amz-security-token", "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"));
        let scrub = provided_secrets(&provided);
        assert_eq!(scrub.iter().map(|s| s.expose()).collect::<Vec<_>>(), [SECRET, token]);
    }

    #[test]
    fn a_malformed_provider_token_is_an_auth_error_without_its_text() {
        let s = SigV4Signer::new("service", "us-east-1", false, Keys::Callback);
        let mut r = request("GET", "https://example.amazonaws.com/", &[], b"");
        let e = s.sign(&mut r, &Secret::new("{\"secret_access_key\": \"leaky-secret\"}"), SystemTime::now()).unwrap_err();
        assert_eq!(e.name(), "AuthError");
        assert!(!e.message.contains("leaky-secret"), "{}", e.message);
    }

    #[test]
    fn each_attempt_is_signed_at_its_own_time() {
        let s = signer(None, false);
        let mut a = request("GET", "https://example.amazonaws.com/", &[], b"");
        let mut b = request("GET", "https://example.amazonaws.com/", &[], b"");
        s.sign(&mut a, &Secret::new(SECRET), UNIX_EPOCH + Duration::from_secs(T)).unwrap();
        s.sign(&mut b, &Secret::new(SECRET), UNIX_EPOCH + Duration::from_secs(T + 1)).unwrap();
        assert_eq!(b.headers["x-amz-date"], "20150830T123601Z");
        assert_ne!(a.headers["authorization"], b.headers["authorization"]);
    }
}

//! The real transport: reqwest over hyper, one client (pool) per service.
//!
//! Guarantees: no redirect is followed unless the service opts in, and then only
//! to the same origin as `base_url`, never with a `Referer`; a reply that is not
//! valid HTTP (a bad status line, conflicting lengths, too many headers, a final
//! 1xx) is a `Protocol` failure, not a connect error; error texts never carry the
//! URL (its query may hold secrets).

use std::sync::Once;
use std::time::Duration;

use bytes::Bytes;

use super::exchange::{declared_length, BodySource, BoxFuture, Exchange, Failure, OutgoingRequest, Transport, TransportFailure};
use super::config::ClientSettings;
use crate::error::HarnessError;

pub struct ReqwestTransport {
    client: reqwest::Client,
}

impl ReqwestTransport {
    /// One HTTP client per service: its own pool, connect timeout and redirect policy.
    ///
    /// TLS trusts the system's CA certificates (`SSL_CERT_FILE`/`SSL_CERT_DIR` when set). A
    /// system without any (a bare container) still reaches plain-`http` services: redirects
    /// stay on `base_url`'s origin, so such a client never needs a root; an `https` one
    /// fails here with a `ConfigError` naming the field and the fix.
    pub fn new(settings: &ClientSettings<'_>) -> Result<Self, HarnessError> {
        install_crypto();
        let builder = || {
            reqwest::Client::builder()
                .user_agent(settings.user_agent)
                .connect_timeout(Duration::from_millis(settings.connect_ms))
                .tcp_nodelay(true)
                .pool_idle_timeout(Duration::from_secs(60))
                .pool_max_idle_per_host(settings.idle_pool)
                .no_proxy()
                .redirect(redirect_policy(settings))
                .referer(false)
        };
        let client = build(builder, settings.base_url, settings.field)?;
        Ok(ReqwestTransport { client })
    }
}

/// Builds the client `make` describes for requests to `url` (named by `field` in errors).
/// Without any system CA certificate a plain-`http` client is built with no roots (it
/// never verifies a certificate) and an `https` one is refused with the fix.
pub(crate) fn build(make: impl Fn() -> reqwest::ClientBuilder, url: &str, field: &str) -> Result<reqwest::Client, HarnessError> {
    let e = match make().build() {
        Ok(client) => return Ok(client),
        Err(e) => e,
    };
    let why = error_chain(&e);
    if url::Url::parse(url).is_ok_and(|u| u.scheme() == "http") {
        if let Ok(client) = make().tls_certs_only(Vec::new()).build() {
            return Ok(client);
        }
    }
    if why.contains("No CA certificates") {
        return Err(HarnessError::config(format!(
            "{field}: an https URL needs CA certificates to verify the server, and this system has none \
             (install the ca-certificates package, or set SSL_CERT_FILE to a PEM bundle)"
        )));
    }
    Err(HarnessError::config(format!("{field}: cannot build the HTTP client: {why}")))
}

/// An error with its sources (`builder error: ...: ...`): reqwest's own text alone names
/// only the stage.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Installs the TLS crypto every reqwest client here needs (once per process).
pub(crate) fn install_crypto() {
    static CRYPTO: Once = Once::new();
    CRYPTO.call_once(|| {
        // Ring rather than aws-lc keeps the build free of a C toolchain step; ignore if the host set one.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// None by default; with `redirects.follow`, up to `redirects.max` hops to the
/// same scheme, host and port as `base_url`. A redirect not followed is returned as the 3xx.
fn redirect_policy(settings: &ClientSettings<'_>) -> reqwest::redirect::Policy {
    if !settings.redirects.follow {
        return reqwest::redirect::Policy::none();
    }
    let Ok(base) = url::Url::parse(settings.base_url) else { return reqwest::redirect::Policy::none() };
    let origin = base.origin();
    let max = settings.redirects.max as usize;
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > max || attempt.url().origin() != origin {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

impl Transport for ReqwestTransport {
    fn send(&self, request: OutgoingRequest) -> BoxFuture<'_, Result<Exchange, TransportFailure>> {
        let mut req = reqwest::Request::new(request.method, request.url);
        *req.headers_mut() = request.headers;
        if let Some(body) = request.body {
            *req.body_mut() = Some(body.into());
        }
        Box::pin(async move {
            let mut resp = self.client.execute(req).await.map_err(|e| classify(&e))?;
            let status = resp.status();
            if status.is_informational() {
                return Err(TransportFailure::new(
                    Failure::Protocol,
                    format!("the server answered {} as a final response (Harness never asks to switch protocols)", status.as_u16()),
                ));
            }
            let headers = std::mem::take(resp.headers_mut());
            declared_length(&headers)?;
            Ok(Exchange { status, headers, body: Box::new(ReqwestBody { resp }) })
        })
    }
}

struct ReqwestBody {
    resp: reqwest::Response,
}

impl BodySource for ReqwestBody {
    fn next_chunk(&mut self) -> BoxFuture<'_, Result<Option<Bytes>, TransportFailure>> {
        Box::pin(async move {
            self.resp.chunk().await.map_err(|e| {
                let c = classify(&e);
                if c.failure == Failure::Protocol {
                    c
                } else {
                    TransportFailure::new(Failure::Broken, format!("body cut short: {}", c.message))
                }
            })
        })
    }
}

fn classify(e: &reqwest::Error) -> TransportFailure {
    // Walk the source chain: reqwest's own Display would include the URL (and its query).
    let mut root: &dyn std::error::Error = e;
    let mut protocol: Option<String> = None;
    loop {
        if let Some(h) = root.downcast_ref::<hyper::Error>() {
            if h.is_parse() || h.is_parse_status() {
                protocol = Some(h.to_string());
            }
        }
        match root.source() {
            Some(next) => root = next,
            None => break,
        }
    }
    if let Some(cause) = protocol {
        return TransportFailure::new(Failure::Protocol, format!("the server did not answer with valid HTTP: {cause}"));
    }
    let detail = root.to_string();
    if e.is_connect() {
        if e.is_timeout() || detail.contains("timed out") {
            return TransportFailure::new(Failure::ConnectTimeout, "connect timed out");
        }
        return TransportFailure::new(Failure::ConnectRefused, format!("cannot connect: {detail}"));
    }
    TransportFailure::new(Failure::Broken, format!("connection broken: {detail}"))
}

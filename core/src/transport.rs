//! The network stage: one attempt over reqwest with the connect, response
//! (first byte) and total timeouts, and a failure classified for retrying.
//!
//! Guarantees: no redirect is followed unless the service opts in, and then only
//! to the same origin as `base_url`, never with a `Referer`; a body is never read
//! past `limits.max_response_bytes` (refused at once by `Content-Length`, else as
//! soon as the count passes it) and is read into one buffer sized once; a reply
//! that is not valid HTTP is a `Protocol` failure, not a connect error.
//!
//! The response head and the body are separate steps so a caller can take the
//! body as a stream instead of bytes (SSE, later).

use std::sync::Once;
use std::time::Duration;

use bytes::Bytes;

use crate::config::ServiceConfig;
use crate::deadline::Deadline;
use crate::error::{HarnessError, TimeoutPhase};
use crate::retry::Failure;

/// One HTTP client per service: its own pool and connect timeout.
pub fn build_client(service: &ServiceConfig, user_agent: &str) -> Result<reqwest::Client, HarnessError> {
    static CRYPTO: Once = Once::new();
    CRYPTO.call_once(|| {
        // Ring rather than aws-lc keeps the build free of a C toolchain step; ignore if the host set one.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
        .user_agent(user_agent)
        .connect_timeout(Duration::from_millis(service.timeouts.connect_ms))
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(1024)
        .no_proxy()
        .redirect(redirect_policy(service))
        .referer(false)
        .build()
        .map_err(|e| HarnessError::config(format!("cannot build the HTTP client: {e}")))
}

/// None by default; with `redirects.follow`, up to `redirects.max` hops to the
/// same scheme, host and port as `base_url`. A redirect not followed is returned as the 3xx.
fn redirect_policy(service: &ServiceConfig) -> reqwest::redirect::Policy {
    if !service.redirects.follow {
        return reqwest::redirect::Policy::none();
    }
    let Ok(base) = url::Url::parse(&service.base_url) else { return reqwest::redirect::Policy::none() };
    let origin = base.origin();
    let max = service.redirects.max as usize;
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > max || attempt.url().origin() != origin {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

/// Why one attempt failed at the transport level.
#[derive(Debug)]
pub struct TransportFailure {
    pub failure: Failure,
    pub message: String,
}

impl TransportFailure {
    pub fn phase(&self) -> Option<TimeoutPhase> {
        match self.failure {
            Failure::ConnectTimeout => Some(TimeoutPhase::Connect),
            Failure::ResponseTimeout => Some(TimeoutPhase::Response),
            Failure::TotalTimeout => Some(TimeoutPhase::Total),
            _ => None,
        }
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
        return TransportFailure { failure: Failure::Protocol, message: format!("the server did not answer with valid HTTP: {cause}") };
    }
    let detail = root.to_string();
    if e.is_connect() {
        if e.is_timeout() || detail.contains("timed out") {
            return TransportFailure { failure: Failure::ConnectTimeout, message: "connect timed out".into() };
        }
        return TransportFailure { failure: Failure::ConnectRefused, message: format!("cannot connect: {detail}") };
    }
    TransportFailure { failure: Failure::Broken, message: format!("connection broken: {detail}") }
}

/// Sends the request and reads the whole body, up to `max_body` bytes. The head
/// must come within the response timeout (and the deadline); the body within the
/// deadline. One timer serves both phases: it is re-armed, not re-registered.
pub async fn send(
    client: &reqwest::Client,
    request: reqwest::Request,
    response_timeout: Duration,
    deadline: &Deadline,
    max_body: u64,
) -> Result<(reqwest::StatusCode, reqwest::header::HeaderMap, Bytes), TransportFailure> {
    let (until, head_bound_is_total) = deadline.cap(response_timeout);
    let timer = tokio::time::sleep_until(until);
    tokio::pin!(timer);
    let head = tokio::select! {
        biased;
        r = client.execute(request) => r.map_err(|e| classify(&e))?,
        _ = &mut timer => {
            return Err(if head_bound_is_total {
                TransportFailure { failure: Failure::TotalTimeout, message: "request deadline expired".into() }
            } else {
                TransportFailure {
                    failure: Failure::ResponseTimeout,
                    message: format!("no response within {} ms", response_timeout.as_millis()),
                }
            });
        }
    };
    let mut head = head;
    let status = head.status();
    if status.is_informational() {
        return Err(TransportFailure {
            failure: Failure::Protocol,
            message: format!("the server answered {} as a final response (Harness never asks to switch protocols)", status.as_u16()),
        });
    }
    let headers = std::mem::take(head.headers_mut());
    let declared = declared_length(&headers)?;
    if let Some(len) = declared.filter(|len| *len > max_body) {
        return Err(too_large(max_body, format!("Content-Length is {len}")));
    }
    if !head_bound_is_total {
        timer.as_mut().reset(deadline.at());
    }
    tokio::select! {
        biased;
        r = read_body(&mut head, declared, max_body) => r.map(|body| (status, headers, body)),
        _ = &mut timer => Err(TransportFailure {
            failure: Failure::TotalTimeout,
            message: "request deadline expired while reading the body".into(),
        }),
    }
}

fn too_large(max: u64, what: String) -> TransportFailure {
    TransportFailure { failure: Failure::TooLarge, message: format!("response body over limits.max_response_bytes ({max}): {what}") }
}

/// The `Content-Length` the server declared; two different values are a protocol fault.
fn declared_length(headers: &reqwest::header::HeaderMap) -> Result<Option<u64>, TransportFailure> {
    let mut found: Option<u64> = None;
    for v in headers.get_all(reqwest::header::CONTENT_LENGTH) {
        for part in v.to_str().unwrap_or("").split(',') {
            let Ok(n) = part.trim().parse::<u64>() else {
                return Err(TransportFailure { failure: Failure::Protocol, message: "the server sent an invalid Content-Length".into() });
            };
            if found.is_some_and(|f| f != n) {
                return Err(TransportFailure { failure: Failure::Protocol, message: "the server sent conflicting Content-Length values".into() });
            }
            found = Some(n);
        }
    }
    Ok(found)
}

/// Reads the body into one buffer (sized from `Content-Length` when known), failing
/// as soon as it passes `max`.
async fn read_body(head: &mut reqwest::Response, declared: Option<u64>, max: u64) -> Result<Bytes, TransportFailure> {
    let mut buf: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0).min(max) as usize);
    loop {
        match head.chunk().await {
            Ok(Some(chunk)) => {
                if (buf.len() + chunk.len()) as u64 > max {
                    return Err(too_large(max, format!("more than {max} bytes received")));
                }
                if buf.is_empty() && declared.is_none_or(|d| d == chunk.len() as u64) {
                    // One chunk holds the whole body: keep it, no copy.
                    if declared.is_some() {
                        return Ok(chunk);
                    }
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(Bytes::from(buf)),
            Err(e) => {
                let c = classify(&e);
                if c.failure == Failure::Protocol {
                    return Err(c);
                }
                return Err(TransportFailure { failure: Failure::Broken, message: format!("body cut short: {}", c.message) });
            }
        }
    }
}

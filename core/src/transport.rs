//! The network stage: one attempt over reqwest with the connect, response
//! (first byte) and total timeouts, and a failure classified for retrying.
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
        .build()
        .map_err(|e| HarnessError::config(format!("cannot build the HTTP client: {e}")))
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
    while let Some(next) = root.source() {
        root = next;
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

/// Sends the request and waits for the response head, bounded by the response
/// timeout and the deadline; a connect failure is reported as such.
pub async fn send_head(
    client: &reqwest::Client,
    request: reqwest::Request,
    response_timeout: Duration,
    deadline: &Deadline,
) -> Result<reqwest::Response, TransportFailure> {
    let (until, is_total) = deadline.cap(response_timeout);
    match tokio::time::timeout_at(until, client.execute(request)).await {
        Ok(Ok(resp)) => Ok(resp),
        Ok(Err(e)) => Err(classify(&e)),
        Err(_) if is_total => Err(TransportFailure { failure: Failure::TotalTimeout, message: "request deadline expired".into() }),
        Err(_) => Err(TransportFailure {
            failure: Failure::ResponseTimeout,
            message: format!("no response within {} ms", response_timeout.as_millis()),
        }),
    }
}

/// Reads the whole body, bounded by the deadline; a short body is a broken connection.
pub async fn read_body(resp: reqwest::Response, deadline: &Deadline) -> Result<Bytes, TransportFailure> {
    match tokio::time::timeout_at(deadline.at(), resp.bytes()).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => Err(TransportFailure { failure: Failure::Broken, message: format!("body cut short: {}", classify(&e).message) }),
        Err(_) => Err(TransportFailure { failure: Failure::TotalTimeout, message: "request deadline expired while reading the body".into() }),
    }
}

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

/// Sends the request and reads the whole body. The head must come within the
/// response timeout (and the deadline); the body within the deadline. One timer
/// serves both phases: it is re-armed, not re-registered.
pub async fn send(
    client: &reqwest::Client,
    request: reqwest::Request,
    response_timeout: Duration,
    deadline: &Deadline,
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
    let headers = std::mem::take(head.headers_mut());
    if !head_bound_is_total {
        timer.as_mut().reset(deadline.at());
    }
    tokio::select! {
        biased;
        r = head.bytes() => match r {
            Ok(body) => Ok((status, headers, body)),
            Err(e) => Err(TransportFailure { failure: Failure::Broken, message: format!("body cut short: {}", classify(&e).message) }),
        },
        _ = &mut timer => Err(TransportFailure {
            failure: Failure::TotalTimeout,
            message: "request deadline expired while reading the body".into(),
        }),
    }
}

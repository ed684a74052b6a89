//! How the core reaches host code (Python, Node, JVM): small traits each binding
//! implements once. The event sink is the first; the token provider comes next.
//!
//! Guarantees: the core calls a sink only from the client's own event thread,
//! never from a tokio worker and never while holding a lock; a sink that fails
//! or panics is reported once on stderr and never fails a request.

use std::time::Duration;

use serde::Serialize;

use crate::credentials::secret::Secret;
use crate::observability::log::RequestRecord;
use crate::transport::BoxFuture;

/// A credential from a token provider: the value and, when it expires, how soon.
#[derive(Debug, Clone)]
pub struct Token {
    pub value: Secret,
    /// `None`: it does not expire.
    pub expires_in: Option<Duration>,
}

/// The longest lifetime a token is held for: a longer one (Java's `Long.MAX_VALUE` seconds,
/// `1e19`) is held this long, never overflowing a clock.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

impl Token {
    /// A lifetime in seconds as a token answer or a host callback gives it: a positive,
    /// finite number, saturated at `MAX_TOKEN_LIFETIME`. 0, a negative number or NaN is
    /// malformed (`Err` says why): a token that is already expired is of no use.
    pub fn lifetime_from_secs(secs: f64) -> Result<Duration, String> {
        if secs.is_nan() || secs <= 0.0 {
            return Err(format!("expected a positive number of seconds, got {secs}"));
        }
        Ok(Duration::try_from_secs_f64(secs).unwrap_or(MAX_TOKEN_LIFETIME).min(MAX_TOKEN_LIFETIME))
    }
}

/// Why a provider could not give a token.
#[derive(Debug, Clone)]
pub struct ProviderError {
    /// The host exception's or the token endpoint's message (never a secret).
    pub message: String,
    /// The credential is dead (`invalid_grant`, `invalid_client`...): stop asking until
    /// the config reloads or the provider changes.
    pub dead: bool,
}

impl ProviderError {
    pub fn new(message: impl Into<String>) -> Self {
        ProviderError { message: message.into(), dead: false }
    }
}

/// Host code (or the core's OAuth2 client) that fetches a token. The core calls it on its
/// runtime, from one refresh at a time per credential; a binding must not block a runtime
/// worker on host code (hop to the host's own thread or loop and await the answer).
pub trait TokenProvider: Send + Sync {
    fn fetch(&self) -> BoxFuture<'_, Result<Token, ProviderError>>;
}

/// Host code that wants the client's events (a Python function, a Node listener,
/// a Kotlin Flow, an SLF4J logger).
pub trait EventSink: Send + Sync {
    /// Called on the client's event thread, in order. An `Err` (a host exception)
    /// is reported once per sink; the event stream goes on.
    fn on_event(&self, event: &Event) -> Result<(), String>;

    /// Several events at once, in order (whatever was queued together). A binding may
    /// override it to cross into the host once per batch. The default calls `on_event`
    /// for each and returns the first failure after delivering them all.
    fn on_events(&self, events: &[Event]) -> Result<(), String> {
        let mut first_failure = None;
        for e in events {
            if let Err(m) = self.on_event(e) {
                first_failure.get_or_insert(m);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }
}

/// A structured record of something the engine did. `kind()` names it the same in every language.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// One per request, with every field of the log line.
    RequestFinished(RequestRecord),
    /// A retry will be sent after `delay_ms`.
    RetryScheduled {
        service: String,
        endpoint: String,
        method: String,
        trace_id: String,
        /// The attempt that failed (1 = the first).
        attempt: u32,
        delay_ms: u64,
        /// The error kind of the failed attempt (`HttpStatusError`, `TimeoutError`, ...).
        reason: &'static str,
        status: Option<u16>,
    },
    BreakerStateChanged { service: String, endpoint: String, method: String, from: &'static str, to: &'static str },
    BulkheadRejected { service: String, endpoint: String, method: String, max_concurrency: u32 },
    ConfigReloaded { version: String, source: String },
    /// Shared state (Redis) could not be used; Harness carries on with local state
    /// and keeps reconnecting. Once per outage.
    SharedStateUnavailable { service: String, what: &'static str, error: String },
    ConfigRejected { version: String, source: String, error: String },
    /// A routed request moves from one provider to another.
    ProviderFailover {
        route: String,
        from: String,
        to: String,
        trace_id: String,
        /// The error kind that made it move (`HttpStatusError`, `TimeoutError`, ...).
        reason: &'static str,
        status: Option<u16>,
        /// The provider's error code (`context_length_exceeded`...) when it gave one.
        code: Option<String>,
    },
    /// A streamed answer broke after it began and starts again elsewhere. `mode` is
    /// `hidden` (nothing had reached the caller), `restart` (the caller gets a restart
    /// chunk) or `continue` (the new provider continues the partial answer as a prefill).
    StreamRestarted { route: String, from: String, to: String, trace_id: String, reason: String, mode: &'static str },
    /// A malformed streamed chunk was skipped; the stream goes on.
    StreamChunkSkipped { route: String, provider: String, trace_id: String, reason: String },
    /// No provider could answer; a degraded answer was served (`cache` or `static`).
    FallbackServed { route: String, kind: &'static str, trace_id: String },
    /// A 2xx body did not match its endpoint's JSON Schema (`mode`: `enforce`, the caller got
    /// `SchemaError`; `warn`, the response was returned). `violation` names the pointer and
    /// what did not match, never the body's values.
    SchemaViolation { service: String, endpoint: String, method: String, trace_id: String, violation: String, mode: &'static str },
    /// One audit record, with `audit.sink.listener: true` (bodies masked as in the file).
    AuditRecord(crate::observability::audit::AuditRecord),
}

impl Event {
    /// The event's name: `request_finished`, `retry_scheduled`, `breaker_state_changed`,
    /// `bulkhead_rejected`, `config_reloaded`, `config_rejected`, `shared_state_unavailable`,
    /// `provider_failover`, `stream_restarted`, `stream_chunk_skipped`, `fallback_served`,
    /// `schema_violation`, `audit_record`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RequestFinished(_) => "request_finished",
            Event::RetryScheduled { .. } => "retry_scheduled",
            Event::BreakerStateChanged { .. } => "breaker_state_changed",
            Event::BulkheadRejected { .. } => "bulkhead_rejected",
            Event::ConfigReloaded { .. } => "config_reloaded",
            Event::SharedStateUnavailable { .. } => "shared_state_unavailable",
            Event::ConfigRejected { .. } => "config_rejected",
            Event::ProviderFailover { .. } => "provider_failover",
            Event::StreamRestarted { .. } => "stream_restarted",
            Event::StreamChunkSkipped { .. } => "stream_chunk_skipped",
            Event::FallbackServed { .. } => "fallback_served",
            Event::SchemaViolation { .. } => "schema_violation",
            Event::AuditRecord(_) => "audit_record",
        }
    }

    /// The event as one JSON object with a `type` field (what bindings hand to host code).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an event always serialises")
    }

    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("an event always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_with_their_type() {
        let e = Event::BreakerStateChanged { service: "s".into(), endpoint: "/x".into(), method: "GET".into(), from: "closed", to: "open" };
        let v = e.to_value();
        assert_eq!(v["type"], "breaker_state_changed");
        assert_eq!(v["to"], "open");
        assert_eq!(e.kind(), "breaker_state_changed");
    }
}

//! Events and log records to host code: the core's `host::EventSink`, implemented once as
//! a UniFFI foreign trait (`NativeEventSink`) that the Kotlin facade implements (an event
//! listener, the `events` Flow, the SLF4J logger).
//!
//! The core calls a sink on the client's own event thread (never a tokio worker, never
//! under a lock) and reports a sink's failure once; so the callback is a plain sync call.

use std::sync::Arc;

use harness_core::observability::audit::AuditRecord;
use harness_core::{Event, EventSink, RequestRecord};

/// One request's record: every field of the log line, named as in the JSON line.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeRequestRecord {
    pub ts_ms: u64,
    pub client: String,
    pub trace_id: String,
    pub span_id: String,
    pub service: String,
    pub endpoint: String,
    pub method: String,
    pub status: Option<u16>,
    pub duration_ms: f64,
    pub attempts: u32,
    pub retry_count: u32,
    pub breaker: String,
    pub streamed: bool,
    pub error_kind: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// Routed requests only: the route, the provider and model that answered, the cost,
    /// and `cache` or `static` when no provider answered.
    pub route: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub cost: Option<f64>,
    pub fallback: Option<String>,
    /// The fault injected into the last faulted attempt (`latency`, `status`, `reset`, `stream_cut`).
    pub fault: Option<String>,
    /// `validate: warn`: where and how the 2xx body did not match its schema.
    pub schema_violation: Option<String>,
}

/// One audit record (`audit.sink.listener: true`), named as in the audit file's JSON line.
/// The bodies (only with `include_bodies`, already masked by the core) are JSON text.
#[derive(uniffi::Record, Debug, Clone)]
pub struct NativeAuditRecord {
    pub ts_ms: u64,
    pub client: String,
    pub principal: Option<String>,
    /// The service, or the route the caller named.
    pub service: String,
    pub provider: Option<String>,
    pub endpoint: String,
    pub method: String,
    pub status: Option<u16>,
    /// `ok`, or the error kind name.
    pub outcome: String,
    pub attempts: u32,
    pub duration_ms: f64,
    pub cost: Option<f64>,
    pub trace_id: String,
    pub request_body: Option<String>,
    pub response_body: Option<String>,
}

/// The core's `Event`, field for field (the facade maps it to its public `HarnessEvent`).
// UniFFI enums carry their records by value (no Box); one event per request is small next to its I/O.
#[allow(clippy::large_enum_variant)]
#[derive(uniffi::Enum, Debug, Clone)]
pub enum NativeEvent {
    RequestFinished {
        record: NativeRequestRecord,
    },
    RetryScheduled {
        service: String,
        endpoint: String,
        method: String,
        trace_id: String,
        attempt: u32,
        delay_ms: u64,
        reason: String,
        status: Option<u16>,
    },
    BreakerStateChanged {
        service: String,
        endpoint: String,
        method: String,
        from: String,
        to: String,
    },
    BulkheadRejected {
        service: String,
        endpoint: String,
        method: String,
        max_concurrency: u32,
    },
    ConfigReloaded {
        version: String,
        source: String,
    },
    ConfigRejected {
        version: String,
        source: String,
        error: String,
    },
    SharedStateUnavailable {
        service: String,
        what: String,
        error: String,
    },
    ProviderFailover {
        route: String,
        from: String,
        to: String,
        trace_id: String,
        reason: String,
        status: Option<u16>,
        code: Option<String>,
    },
    StreamRestarted {
        route: String,
        from: String,
        to: String,
        trace_id: String,
        reason: String,
        mode: String,
    },
    StreamChunkSkipped {
        route: String,
        provider: String,
        trace_id: String,
        reason: String,
    },
    FallbackServed {
        route: String,
        kind: String,
        trace_id: String,
    },
    SchemaViolation {
        service: String,
        endpoint: String,
        method: String,
        trace_id: String,
        violation: String,
        mode: String,
    },
    AuditRecord {
        record: NativeAuditRecord,
    },
}

impl From<&RequestRecord> for NativeRequestRecord {
    fn from(r: &RequestRecord) -> Self {
        NativeRequestRecord {
            ts_ms: r.ts_ms,
            client: r.client.to_string(),
            trace_id: r.trace_id.to_string(),
            span_id: r.span_id.to_string(),
            service: r.service.to_string(),
            endpoint: r.endpoint.to_string(),
            method: r.method.to_string(),
            status: r.status,
            duration_ms: r.duration_ms,
            attempts: r.attempts,
            retry_count: r.retry_count,
            breaker: r.breaker.to_string(),
            streamed: r.streamed,
            error_kind: r.error_kind.map(str::to_string),
            error_code: r.error_code.clone(),
            error_message: r.error_message.clone(),
            route: r.route.as_deref().map(str::to_string),
            provider: r.provider.as_deref().map(str::to_string),
            model: r.model.clone(),
            cost: r.cost,
            fallback: r.fallback.map(str::to_string),
            fault: r.fault.map(str::to_string),
            schema_violation: r.schema_violation.clone(),
        }
    }
}

impl From<&AuditRecord> for NativeAuditRecord {
    fn from(r: &AuditRecord) -> Self {
        NativeAuditRecord {
            ts_ms: r.ts_ms,
            client: r.client.to_string(),
            principal: r.principal.clone(),
            service: r.service.to_string(),
            provider: r.provider.as_deref().map(str::to_string),
            endpoint: r.endpoint.to_string(),
            method: r.method.to_string(),
            status: r.status,
            outcome: r.outcome.to_string(),
            attempts: r.attempts,
            duration_ms: r.duration_ms,
            cost: r.cost,
            trace_id: r.trace_id.clone(),
            request_body: r.request_body.as_ref().map(|b| b.to_string()),
            response_body: r.response_body.as_ref().map(|b| b.to_string()),
        }
    }
}

impl From<&Event> for NativeEvent {
    fn from(e: &Event) -> Self {
        match e {
            Event::RequestFinished(r) => NativeEvent::RequestFinished { record: r.into() },
            Event::RetryScheduled { service, endpoint, method, trace_id, attempt, delay_ms, reason, status } => {
                NativeEvent::RetryScheduled {
                    service: service.clone(),
                    endpoint: endpoint.clone(),
                    method: method.clone(),
                    trace_id: trace_id.clone(),
                    attempt: *attempt,
                    delay_ms: *delay_ms,
                    reason: reason.to_string(),
                    status: *status,
                }
            }
            Event::BreakerStateChanged { service, endpoint, method, from, to } => NativeEvent::BreakerStateChanged {
                service: service.clone(),
                endpoint: endpoint.clone(),
                method: method.clone(),
                from: from.to_string(),
                to: to.to_string(),
            },
            Event::BulkheadRejected { service, endpoint, method, max_concurrency } => NativeEvent::BulkheadRejected {
                service: service.clone(),
                endpoint: endpoint.clone(),
                method: method.clone(),
                max_concurrency: *max_concurrency,
            },
            Event::ConfigReloaded { version, source } => NativeEvent::ConfigReloaded { version: version.clone(), source: source.clone() },
            Event::ConfigRejected { version, source, error } => {
                NativeEvent::ConfigRejected { version: version.clone(), source: source.clone(), error: error.clone() }
            }
            Event::SharedStateUnavailable { service, what, error } => {
                NativeEvent::SharedStateUnavailable { service: service.clone(), what: what.to_string(), error: error.clone() }
            }
            Event::ProviderFailover { route, from, to, trace_id, reason, status, code } => NativeEvent::ProviderFailover {
                route: route.clone(),
                from: from.clone(),
                to: to.clone(),
                trace_id: trace_id.clone(),
                reason: reason.to_string(),
                status: *status,
                code: code.clone(),
            },
            Event::StreamRestarted { route, from, to, trace_id, reason, mode } => NativeEvent::StreamRestarted {
                route: route.clone(),
                from: from.clone(),
                to: to.clone(),
                trace_id: trace_id.clone(),
                reason: reason.clone(),
                mode: mode.to_string(),
            },
            Event::StreamChunkSkipped { route, provider, trace_id, reason } => NativeEvent::StreamChunkSkipped {
                route: route.clone(),
                provider: provider.clone(),
                trace_id: trace_id.clone(),
                reason: reason.clone(),
            },
            Event::SchemaViolation { service, endpoint, method, trace_id, violation, mode } => NativeEvent::SchemaViolation {
                service: service.clone(),
                endpoint: endpoint.clone(),
                method: method.clone(),
                trace_id: trace_id.clone(),
                violation: violation.clone(),
                mode: mode.to_string(),
            },
            Event::FallbackServed { route, kind, trace_id } => {
                NativeEvent::FallbackServed { route: route.clone(), kind: kind.to_string(), trace_id: trace_id.clone() }
            }
            Event::AuditRecord(r) => NativeEvent::AuditRecord { record: r.into() },
        }
    }
}

/// Why a host listener failed: its exception, as text (the core reports it once).
#[derive(uniffi::Error, Debug, Clone)]
pub enum ListenerError {
    Failed { reason: String },
}

impl std::fmt::Display for ListenerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ListenerError::Failed { reason } = self;
        f.write_str(reason)
    }
}

impl std::error::Error for ListenerError {}

/// An exception the facade did not catch (it catches all, but UniFFI needs a way in).
impl From<uniffi::UnexpectedUniFFICallbackError> for ListenerError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        ListenerError::Failed { reason: e.reason }
    }
}

/// Host code that takes events: implemented in Kotlin, called on the client's event thread.
#[uniffi::export(with_foreign)]
pub trait NativeEventSink: Send + Sync {
    fn on_event(&self, event: NativeEvent) -> Result<(), ListenerError>;
}

/// The core's sink trait over a foreign one.
pub(crate) struct HostSink(pub Arc<dyn NativeEventSink>);

impl EventSink for HostSink {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        self.0.on_event(event.into()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_keeps_its_fields() {
        let e = Event::BreakerStateChanged { service: "s".into(), endpoint: "/x".into(), method: "GET".into(), from: "closed", to: "open" };
        match NativeEvent::from(&e) {
            NativeEvent::BreakerStateChanged { service, from, to, .. } => {
                assert_eq!((service.as_str(), from.as_str(), to.as_str()), ("s", "closed", "open"))
            }
            other => panic!("{other:?}"),
        }
        let e = Event::ConfigRejected { version: "v1".into(), source: "api".into(), error: "ConfigError: x".into() };
        assert!(
            matches!(NativeEvent::from(&e), NativeEvent::ConfigRejected { version, error, .. } if version == "v1" && error == "ConfigError: x")
        );
        let e = Event::ProviderFailover {
            route: "chat".into(),
            from: "primary".into(),
            to: "backup".into(),
            trace_id: "t".into(),
            reason: "HttpStatusError",
            status: Some(503),
            code: Some("overloaded".into()),
        };
        assert!(matches!(
            NativeEvent::from(&e),
            NativeEvent::ProviderFailover { from, to, status: Some(503), code: Some(code), .. } if from == "primary" && to == "backup" && code == "overloaded"
        ));
        let e = Event::FallbackServed { route: "chat".into(), kind: "cache", trace_id: "t".into() };
        assert!(matches!(NativeEvent::from(&e), NativeEvent::FallbackServed { kind, .. } if kind == "cache"));
    }

    #[test]
    fn an_audit_record_keeps_its_principal_and_its_masked_bodies_as_json_text() {
        let e = Event::AuditRecord(AuditRecord {
            ts_ms: 1,
            client: "c".into(),
            principal: Some("user-42".into()),
            service: "svc".into(),
            provider: None,
            endpoint: "/x".into(),
            method: "POST".into(),
            status: Some(200),
            outcome: "ok",
            attempts: 1,
            duration_ms: 2.5,
            cost: None,
            trace_id: "t".into(),
            request_body: Some(serde_json::json!({"password": "***", "n": 1})),
            response_body: None,
        });
        match NativeEvent::from(&e) {
            NativeEvent::AuditRecord { record } => {
                assert_eq!((record.principal.as_deref(), record.outcome.as_str(), record.status), (Some("user-42"), "ok", Some(200)));
                assert_eq!(record.request_body.as_deref(), Some(r#"{"password":"***","n":1}"#));
                assert!(record.response_body.is_none());
            }
            other => panic!("{other:?}"),
        }
    }

    struct Failing;
    impl NativeEventSink for Failing {
        fn on_event(&self, _: NativeEvent) -> Result<(), ListenerError> {
            Err(ListenerError::Failed { reason: "IllegalStateException: boom".into() })
        }
    }

    #[test]
    fn a_failing_listener_is_an_error_for_the_core_to_report() {
        let sink = HostSink(Arc::new(Failing));
        let e = Event::ConfigReloaded { version: "v".into(), source: "api".into() };
        assert_eq!(sink.on_event(&e).unwrap_err(), "IllegalStateException: boom");
    }
}

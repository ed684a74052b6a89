//! Events and log records to host code: the core's `host::EventSink`, implemented once as
//! a UniFFI foreign trait (`NativeEventSink`) that the Kotlin facade implements (an event
//! listener, the `events` Flow, the SLF4J logger). An event crosses as the core's JSON (its
//! serde form, the log line's names), which the facade decodes into the generated
//! `HarnessEvent` (Types.kt): no field is restated here.
//!
//! The core calls a sink on the client's own event thread (never a tokio worker, never
//! under a lock) and reports a sink's failure once; so the callback is a plain sync call.

use std::sync::Arc;

use harness_core::{Event, EventSink};

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

/// Host code that takes events: implemented in Kotlin, called on the client's event thread
/// with one event as JSON text (`{"type": "request_finished", ...}`).
#[uniffi::export(with_foreign)]
pub trait NativeEventSink: Send + Sync {
    fn on_event(&self, event: String) -> Result<(), ListenerError>;
}

/// The core's sink over a foreign one.
pub(crate) struct HostSink(pub Arc<dyn NativeEventSink>);

impl EventSink for HostSink {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        self.0.on_event(event.to_value().to_string()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use harness_core::observability::audit::AuditRecord;

    use super::*;

    #[derive(Default)]
    struct Recorded(Mutex<Vec<String>>);
    impl NativeEventSink for Recorded {
        fn on_event(&self, event: String) -> Result<(), ListenerError> {
            self.0.lock().unwrap().push(event);
            Ok(())
        }
    }

    fn crossed(e: &Event) -> serde_json::Value {
        let r = Arc::new(Recorded::default());
        HostSink(r.clone()).on_event(e).unwrap();
        let text = r.0.lock().unwrap().pop().unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn an_event_crosses_as_the_cores_json_with_its_type() {
        let e = Event::ProviderFailover {
            route: "chat".into(),
            from: "primary".into(),
            to: "backup".into(),
            trace_id: "t".into(),
            reason: "HttpStatusError",
            status: Some(503),
            code: Some("overloaded".into()),
        };
        let v = crossed(&e);
        assert_eq!((v["type"].as_str(), v["from"].as_str(), v["status"].as_u64()), (Some("provider_failover"), Some("primary"), Some(503)));
        assert_eq!(v, e.to_value());
    }

    #[test]
    fn an_audit_record_keeps_its_principal_and_its_masked_bodies() {
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
        let v = crossed(&e);
        assert_eq!((v["type"].as_str(), v["principal"].as_str(), v["status"].as_u64()), (Some("audit_record"), Some("user-42"), Some(200)));
        assert_eq!(v["request_body"], serde_json::json!({"password": "***", "n": 1}));
        assert!(v.get("response_body").is_none());
    }

    struct Failing;
    impl NativeEventSink for Failing {
        fn on_event(&self, _: String) -> Result<(), ListenerError> {
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

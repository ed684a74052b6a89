//! Logs, metrics, events and trace context, per client: one record per request,
//! Prometheus text, host event sinks, W3C traceparent, OpenTelemetry export.

pub mod audit;
pub mod events;
pub(crate) mod finish;
pub mod log;
pub mod metrics;
pub mod otel;
pub mod scrape;
pub mod trace;

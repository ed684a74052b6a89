//! Logs, metrics and trace context: one record per request, Prometheus text, W3C traceparent.

pub mod log;
pub mod metrics;
pub mod trace;

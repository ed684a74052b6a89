//! OpenTelemetry export: one client span per request, one child span per attempt, sent as
//! OTLP/HTTP protobuf by the SDK's batch processor on the core's own runtime.
//!
//! The spans are built from what the pipeline already knows when a request ends (its ids are
//! the ones sent downstream in `traceparent`, so a downstream's spans join the same tree), and
//! handed to the processor's bounded queue: a request never waits for the collector, and a full
//! queue drops spans (the SDK says so once in its own log) rather than holding memory.
//!
//! Guarantees: nothing is built or queued unless `otel.endpoint` is set and the trace is
//! sampled; a reload with the same `otel:` keeps the exporter; closing the client flushes it.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{BatchConfigBuilder, SpanData, SpanEvents, SpanLinks, SpanProcessor};
use opentelemetry_sdk::Resource;
use serde::{Deserialize, Serialize};

use super::trace::{Hex, TraceContext};
use crate::error::HarnessError;
use crate::redact::escape_control;

/// `otel:`; export is off until `endpoint` is set.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OtelConfig {
    /// The collector's OTLP/HTTP address (e.g. `http://127.0.0.1:4318`); spans go to `/v1/traces` under it.
    pub endpoint: Option<String>,
    /// The share of new traces recorded (a caller's `traceparent` decides for its own trace).
    pub sample_ratio: f64,
    /// The resource's `service.name` (default: `client.name`).
    pub service_name: Option<String>,
    /// One export's time limit.
    pub timeout_ms: u64,
    /// Spans held while waiting for export; past it new spans are dropped.
    pub max_queue: usize,
    /// Spans per export request.
    pub max_batch: usize,
    /// The longest a span waits for its batch.
    pub delay_ms: u64,
}

impl Default for OtelConfig {
    fn default() -> Self {
        OtelConfig { endpoint: None, sample_ratio: 1.0, service_name: None, timeout_ms: 10_000, max_queue: 2048, max_batch: 512, delay_ms: 1000 }
    }
}

impl OtelConfig {
    pub fn validate(&self) -> Result<(), HarnessError> {
        let bad = |field: &str, msg: String| Err(HarnessError::config(format!("otel.{field}: {msg}")));
        if let Some(e) = &self.endpoint {
            match url::Url::parse(e) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                    if !u.username().is_empty() || u.password().is_some() {
                        return bad("endpoint", "credentials in the URL are not accepted".into());
                    }
                }
                _ => return bad("endpoint", format!("expected an http(s) URL such as http://127.0.0.1:4318, got {:?}", escape_control(e))),
            }
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return bad("sample_ratio", format!("expected a number from 0 to 1, got {}", self.sample_ratio));
        }
        if !(1..=60_000).contains(&self.timeout_ms) {
            return bad("timeout_ms", format!("expected 1 to 60000, got {}", self.timeout_ms));
        }
        if !(1..=1_000_000).contains(&self.max_queue) {
            return bad("max_queue", format!("expected 1 to 1000000, got {}", self.max_queue));
        }
        if self.max_batch == 0 || self.max_batch > self.max_queue {
            return bad("max_batch", format!("expected 1 to max_queue ({}), got {}", self.max_queue, self.max_batch));
        }
        if !(1..=60_000).contains(&self.delay_ms) {
            return bad("delay_ms", format!("expected 1 to 60000, got {}", self.delay_ms));
        }
        Ok(())
    }

    /// The share of new traces to sample: all of them when nothing is exported (as before `otel:`).
    pub fn ratio(&self) -> f64 {
        if self.endpoint.is_some() {
            self.sample_ratio
        } else {
            1.0
        }
    }
}

/// One attempt, as the pipeline saw it (offsets from the request's start).
pub(crate) struct AttemptSpan {
    pub number: u32,
    pub span: TraceContext,
    pub start: Duration,
    pub end: Duration,
    pub status: Option<u16>,
    /// `success`, or the error name of a failed attempt.
    pub outcome: &'static str,
    pub server: Option<(String, u16)>,
    pub provider: Option<Arc<str>>,
}

/// The whole request, for its span.
pub(crate) struct RequestSpan<'a> {
    pub trace: &'a TraceContext,
    pub method: &'a str,
    pub service: &'a str,
    pub endpoint: &'a str,
    pub elapsed: Duration,
    pub status: Option<u16>,
    pub error: Option<&'static str>,
    pub attempts: u32,
    pub server: Option<(String, u16)>,
    pub route: Option<RouteAttrs<'a>>,
    pub attempt_spans: &'a [AttemptSpan],
}

pub(crate) struct RouteAttrs<'a> {
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
    pub cost: Option<f64>,
}

/// A live exporter for one `otel:` config.
pub(crate) struct Otel {
    /// What this exporter was built from: the config and the client's name.
    pub key: (OtelConfig, String),
    processor: BatchSpanProcessor<opentelemetry_sdk::runtime::Tokio>,
    scope: InstrumentationScope,
}

impl Otel {
    /// Builds the exporter on the core's runtime (the processor's task lives there).
    pub fn start(config: &OtelConfig, client_name: &str) -> Result<Otel, HarnessError> {
        let endpoint = config.endpoint.as_deref().ok_or_else(|| HarnessError::config("otel.endpoint: required to export"))?;
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let timeout = Duration::from_millis(config.timeout_ms);
        crate::transport::reqwest::install_crypto();
        let make = || reqwest::Client::builder().no_proxy().connect_timeout(timeout).timeout(timeout).redirect(reqwest::redirect::Policy::none());
        let http = crate::transport::reqwest::build(make, &url, "otel.endpoint")?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(timeout)
            .build()
            .map_err(|e| HarnessError::config(format!("otel.endpoint: {e}")))?;
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(config.max_queue)
            .with_max_export_batch_size(config.max_batch)
            .with_scheduled_delay(Duration::from_millis(config.delay_ms))
            .with_max_export_timeout(timeout)
            .build();
        let handle = crate::runtime::handle()?;
        let _inside = handle.enter();
        let mut processor = BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).with_batch_config(batch).build();
        let service_name = config.service_name.clone().unwrap_or_else(|| client_name.to_string());
        processor.set_resource(&Resource::builder_empty().with_service_name(service_name).build());
        let scope = InstrumentationScope::builder("harness").with_version(env!("CARGO_PKG_VERSION")).build();
        Ok(Otel { key: (config.clone(), client_name.to_string()), processor, scope })
    }

    /// Queues the request's span and its attempts' (never waits).
    pub fn export(&self, r: &RequestSpan<'_>) {
        let end = SystemTime::now();
        let start = end.checked_sub(r.elapsed).unwrap_or(end);
        let name: Cow<'static, str> = Cow::Owned(format!("{} {}", r.method, r.endpoint));
        let request_ctx = span_context(r.trace);
        let mut attrs = vec![
            KeyValue::new("http.request.method", r.method.to_string()),
            KeyValue::new("url.template", r.endpoint.to_string()),
            KeyValue::new("harness.service", r.service.to_string()),
            KeyValue::new("harness.endpoint", r.endpoint.to_string()),
            KeyValue::new("harness.attempts", i64::from(r.attempts)),
        ];
        push_server(&mut attrs, &r.server);
        if let Some(s) = r.status {
            attrs.push(KeyValue::new("http.response.status_code", i64::from(s)));
        }
        if let Some(e) = r.error {
            attrs.push(KeyValue::new("error.type", e));
        }
        if let Some(route) = &r.route {
            attrs.push(KeyValue::new("harness.route", r.service.to_string()));
            if let Some(p) = route.provider {
                attrs.push(KeyValue::new("harness.provider", p.to_string()));
            }
            if let Some(m) = route.model {
                attrs.push(KeyValue::new("harness.model", m.to_string()));
            }
            if let Some(c) = route.cost {
                attrs.push(KeyValue::new("harness.cost", c));
            }
        }
        for a in r.attempt_spans {
            let mut attrs = vec![
                KeyValue::new("http.request.method", r.method.to_string()),
                KeyValue::new("url.template", r.endpoint.to_string()),
                KeyValue::new("harness.attempt", i64::from(a.number)),
                KeyValue::new("harness.outcome", a.outcome),
            ];
            if a.number > 1 {
                attrs.push(KeyValue::new("http.request.resend_count", i64::from(a.number - 1)));
            }
            push_server(&mut attrs, &a.server);
            if let Some(s) = a.status {
                attrs.push(KeyValue::new("http.response.status_code", i64::from(s)));
            }
            if a.outcome != "success" {
                attrs.push(KeyValue::new("error.type", a.outcome));
            }
            if let Some(p) = &a.provider {
                attrs.push(KeyValue::new("harness.provider", p.to_string()));
            }
            let status = if a.outcome == "success" { Status::Unset } else { Status::error(a.outcome) };
            self.queue(SpanData {
                span_context: span_context(&a.span),
                parent_span_id: request_ctx.span_id(),
                parent_span_is_remote: false,
                span_kind: SpanKind::Client,
                name: name.clone(),
                start_time: start + a.start,
                end_time: (start + a.end).min(end),
                attributes: attrs,
                dropped_attributes_count: 0,
                events: SpanEvents::default(),
                links: SpanLinks::default(),
                status,
                instrumentation_scope: self.scope.clone(),
            });
        }
        self.queue(SpanData {
            span_context: request_ctx,
            parent_span_id: r.trace.parent.map(span_id).unwrap_or(SpanId::INVALID),
            parent_span_is_remote: r.trace.parent.is_some(),
            span_kind: SpanKind::Client,
            name,
            start_time: start,
            end_time: end,
            attributes: attrs,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: r.error.map(Status::error).unwrap_or(Status::Unset),
            instrumentation_scope: self.scope.clone(),
        });
    }

    fn queue(&self, span: SpanData) {
        self.processor.on_end(span);
    }

    /// Sends what is queued and stops the processor. Blocks up to the export timeout, so it
    /// runs on a thread of its own, joined unless the caller is itself a runtime thread.
    pub fn shutdown(self: Arc<Self>) {
        let in_runtime = tokio::runtime::Handle::try_current().is_ok();
        let t = std::thread::Builder::new().name("harness-otel-flush".into()).spawn(move || {
            let _ = self.processor.shutdown();
        });
        if let (Ok(t), false) = (t, in_runtime) {
            let _ = t.join();
        }
    }
}

fn span_id(h: Hex<16>) -> SpanId {
    SpanId::from_bytes(h.to_bytes::<8>())
}

fn span_context(t: &TraceContext) -> SpanContext {
    SpanContext::new(TraceId::from_bytes(t.trace_id.to_bytes::<16>()), span_id(t.span_id), TraceFlags::SAMPLED, false, TraceState::default())
}

fn push_server(attrs: &mut Vec<KeyValue>, server: &Option<(String, u16)>) {
    if let Some((host, port)) = server {
        attrs.push(KeyValue::new("server.address", host.clone()));
        attrs.push(KeyValue::new("server.port", i64::from(*port)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_field() {
        let c = |v: serde_json::Value| serde_json::from_value::<OtelConfig>(v).unwrap().validate().unwrap_err().to_string();
        assert!(c(serde_json::json!({"endpoint": "ftp://x"})).contains("otel.endpoint"));
        assert!(c(serde_json::json!({"endpoint": "http://u:p@h:4318"})).contains("credentials"));
        assert!(c(serde_json::json!({"sample_ratio": 1.5})).contains("otel.sample_ratio"));
        assert!(c(serde_json::json!({"max_queue": 10, "max_batch": 20})).contains("otel.max_batch"));
        assert!(serde_json::from_value::<OtelConfig>(serde_json::json!({"endpont": "x"})).is_err());
        assert_eq!(OtelConfig::default().ratio(), 1.0);
        let on = OtelConfig { endpoint: Some("http://127.0.0.1:4318".into()), sample_ratio: 0.1, ..Default::default() };
        assert!(on.validate().is_ok() && on.ratio() == 0.1);
    }
}

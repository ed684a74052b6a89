//! An OTLP/HTTP trace receiver, so tests can assert the spans Harness exports.
//!
//! `POST /v1/traces` (protobuf, as the OpenTelemetry exporters send it) keeps every span;
//! `GET /__admin/otlp/spans` returns them as JSON: `{"spans": [{trace_id, span_id,
//! parent_span_id, name, kind, service_name, start_ns, end_ns, status_code, status_message,
//! attributes: {key: value}}], "exports": n}`; `POST /__admin/otlp/reset` clears them.
//! `POST /__admin/otlp/hold/{ms}` delays every export's answer by `ms` (a slow collector).

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use parking_lot::Mutex;
use prost::Message;
use serde_json::{json, Map, Value};

#[derive(Default)]
pub struct Receiver {
    spans: Mutex<Vec<Value>>,
    exports: Mutex<u64>,
    hold_ms: Mutex<u64>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn attrs(kvs: &[KeyValue]) -> Map<String, Value> {
    kvs.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Any::StringValue(s)) => json!(s),
                Some(Any::IntValue(i)) => json!(i),
                Some(Any::DoubleValue(d)) => json!(d),
                Some(Any::BoolValue(b)) => json!(b),
                Some(other) => json!(format!("{other:?}")),
                None => Value::Null,
            };
            (kv.key.clone(), v)
        })
        .collect()
}

impl Receiver {
    /// Takes one export request body; returns the delay before answering, or a decode error.
    pub fn accept(&self, body: &[u8]) -> Result<u64, String> {
        let req = ExportTraceServiceRequest::decode(body).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for rs in &req.resource_spans {
            let resource = rs.resource.as_ref().map(|r| attrs(&r.attributes)).unwrap_or_default();
            let service_name = resource.get("service.name").cloned().unwrap_or(Value::Null);
            for ss in &rs.scope_spans {
                let scope = ss.scope.as_ref().map(|s| s.name.clone()).unwrap_or_default();
                for s in &ss.spans {
                    let status = s.status.as_ref();
                    out.push(json!({
                        "trace_id": hex(&s.trace_id),
                        "span_id": hex(&s.span_id),
                        "parent_span_id": hex(&s.parent_span_id),
                        "name": s.name,
                        "kind": s.kind,
                        "scope": scope,
                        "service_name": service_name,
                        "start_ns": s.start_time_unix_nano,
                        "end_ns": s.end_time_unix_nano,
                        "status_code": status.map(|x| x.code).unwrap_or(0),
                        "status_message": status.map(|x| x.message.clone()).unwrap_or_default(),
                        "attributes": attrs(&s.attributes),
                    }));
                }
            }
        }
        self.spans.lock().extend(out);
        *self.exports.lock() += 1;
        Ok(*self.hold_ms.lock())
    }

    pub fn dump(&self) -> Value {
        json!({"spans": *self.spans.lock(), "exports": *self.exports.lock()})
    }

    pub fn reset(&self) {
        self.spans.lock().clear();
        *self.exports.lock() = 0;
        *self.hold_ms.lock() = 0;
    }

    pub fn hold(&self, ms: u64) {
        *self.hold_ms.lock() = ms;
    }
}

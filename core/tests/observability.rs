//! Observability against the real loopback upstream: the retry heatmap series, JSON
//! Schema response validation (enforce, warn, reload), and the audit log (masking,
//! no secrets, rotation).

use std::sync::Arc;
use std::time::Duration;

use harness_core::{Body, Client, ClientOptions, Config, Event, EventSink, Request};
use parking_lot::Mutex;
use serde_json::{json, Value};

async fn script(base: &str, name: &str, steps: Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new().put(format!("{base}/__admin/script/{name}")).body(json!({ "steps": steps }).to_string()).send().await.unwrap();
    assert!(r.status().is_success());
}

#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl EventSink for Events {
    fn on_event(&self, e: &Event) -> Result<(), String> {
        self.0.lock().push(e.clone());
        Ok(())
    }
}

fn client(config: Value) -> (Client, Arc<Events>) {
    let events = Arc::new(Events::default());
    let sink: Arc<dyn EventSink> = events.clone();
    let client = Client::with_options(Config::from_value(config).unwrap(), ClientOptions { sinks: vec![sink], ..Default::default() }).unwrap();
    (client, events)
}

fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attempt_lands_in_the_retry_heatmap() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "heat", json!([{"status": 503}, {"status": 503}, {"status": 200}])).await;
    let (client, _) = client(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": u.url(),
        "retry": {"max_retries": 2, "base_delay_ms": 1, "max_delay_ms": 2, "jitter": false}}}}));
    assert_eq!(client.request(Request::new("svc", "GET", "/s/heat/x")).await.unwrap().attempts, 3);
    client.request(Request::new("svc", "GET", "/s/heat/x")).await.unwrap();
    let m = client.metrics_text();
    let series = |attempt: &str, outcome: &str| {
        metric(&m, &format!("harness_attempts_total{{service=\"svc\",endpoint=\"/s/heat/x\",attempt=\"{attempt}\",outcome=\"{outcome}\"}}"))
    };
    assert_eq!(series("1", "HttpStatusError"), Some(1.0), "{m}");
    assert_eq!(series("2", "HttpStatusError"), Some(1.0));
    assert_eq!(series("3", "success"), Some(1.0));
    assert_eq!(series("1", "success"), Some(1.0));
    for attempt in ["1", "2", "3"] {
        let count = metric(&m, &format!("harness_attempt_duration_seconds_count{{service=\"svc\",endpoint=\"/s/heat/x\",attempt=\"{attempt}\"}}"));
        assert_eq!(count, Some(if attempt == "1" { 2.0 } else { 1.0 }), "attempt {attempt}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_enforce_warn_and_are_recompiled_on_reload() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "order", json!([{"json": {"id": 7, "total": "12.50"}}])).await;
    let strict = json!({"type": "object", "required": ["id", "total"], "properties": {"total": {"type": "number"}}});
    let cfg = |mode: &str, schema: &Value| {
        json!({"log": {"enabled": false}, "services": {"svc": {"base_url": u.url(), "retry": {"max_retries": 0},
            "breaker": {"failure_threshold": 1}, "endpoints": {"GET /s/order/{id}": {"response_schema": schema, "validate": mode}}}}})
    };
    let (client, events) = client(cfg("enforce", &strict));
    let e = client.request(Request::new("svc", "GET", "/s/order/7")).await.unwrap_err();
    assert_eq!((e.name(), e.status, e.code.as_deref()), ("SchemaError", Some(200), Some("schema_mismatch")));
    assert!(e.message.contains("at /total") && !e.message.contains("12.50"), "{}", e.message);
    assert_eq!(client.breaker_state("svc", "GET", "/s/order/7", None), "closed", "a schema mismatch is not a downstream failure");

    // warn: the response comes back; the drift is counted, in the record and as a metric.
    client.reload_value(cfg("warn", &strict)).unwrap();
    let r = client.request(Request::new("svc", "GET", "/s/order/7")).await.unwrap();
    assert_eq!(r.status, 200);
    client.flush();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let rec = events.0.lock().iter().rev().find(|e| e.kind() == "request_finished").map(Event::to_value).unwrap();
    assert!(rec["schema_violation"].as_str().unwrap().contains("at /total"), "{rec}");
    let kinds: Vec<Value> = events.0.lock().iter().filter(|e| e.kind() == "schema_violation").map(Event::to_value).collect();
    assert_eq!(kinds.len(), 2, "one event per violation, enforced or warned: {kinds:?}");
    assert_eq!((kinds[0]["mode"].as_str(), kinds[1]["mode"].as_str()), (Some("enforce"), Some("warn")));
    assert!(!kinds[1]["violation"].as_str().unwrap().contains("12.50"));
    let m = client.metrics_text();
    assert_eq!(metric(&m, "harness_schema_violations_total{service=\"svc\",endpoint=\"/s/order/{id}\"}"), Some(2.0), "{m}");

    // A reload with a schema that matches: recompiled, no violation.
    client.reload_value(cfg("enforce", &json!({"type": "object", "required": ["id"]}))).unwrap();
    client.request(Request::new("svc", "GET", "/s/order/7")).await.unwrap();
    // A schema that is not one is refused, naming the field; the old one stays.
    let bad = client.reload_value(cfg("enforce", &json!({"type": 12}))).unwrap_err();
    assert!(bad.message.starts_with("services.svc.endpoints.GET /s/order/{id}.response_schema: not a valid JSON Schema"), "{}", bad.message);
    client.request(Request::new("svc", "GET", "/s/order/7")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_records_are_masked_and_hold_no_secret() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "pay", json!([{"json": {"ok": true, "phone": "555-0100", "echo": "Bearer tok-audit-secret-1"}}])).await;
    let dir = std::env::temp_dir().join(format!("harness-audit-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("audit.jsonl");
    let (client, _) = client(json!({"log": {"enabled": false},
        "audit": {"enabled": true, "include_bodies": true, "patterns": ["\\b\\d{4}-\\d{4}-\\d{4}-\\d{4}\\b"],
                  "sink": {"file": file.to_str().unwrap(), "max_bytes": 2048, "keep": 2}},
        "services": {"svc": {"base_url": u.url(), "headers": {"authorization": "Bearer tok-audit-secret-1"}}}}));
    for _ in 0..12 {
        let mut req = Request::new("svc", "POST", "/s/pay/charge");
        req.idempotency_key = Some("k-1".into());
        req.body = Body::Json(json!({"user": "ann", "password": "hunter2", "note": "card 4111-1111-1111-1111", "nested": [{"card_number": "4111111111111111"}]}));
        client.request(req).await.unwrap();
    }
    client.flush();
    let mut lines = Vec::new();
    for name in ["audit.jsonl.2", "audit.jsonl.1", "audit.jsonl"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            lines.extend(text.lines().map(str::to_string));
        }
    }
    assert!(dir.join("audit.jsonl.1").exists(), "the file rotated at max_bytes");
    assert!(!dir.join("audit.jsonl.3").exists(), "keep: 2");
    let all = lines.join("\n");
    for secret in ["tok-audit-secret-1", "hunter2", "4111", "555-0100"] {
        assert!(!all.contains(secret), "{secret} leaked into the audit log:\n{all}");
    }
    let rec: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!((rec["service"].as_str(), rec["method"].as_str(), rec["status"].as_u64(), rec["outcome"].as_str()), (Some("svc"), Some("POST"), Some(200), Some("ok")));
    assert_eq!(rec["request_body"]["password"], "***");
    assert_eq!(rec["request_body"]["note"], "card ***");
    assert_eq!(rec["response_body"]["phone"], "***");
    assert_eq!(rec["trace_id"].as_str().unwrap().len(), 32);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_series_the_dashboard_and_alerts_use_is_one_the_core_exports() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let text = std::fs::read_to_string(format!("{root}/dashboards/harness.json")).unwrap()
        + &std::fs::read_to_string(format!("{root}/alerts/harness.rules.yml")).unwrap();
    // The families the core registers (an empty family prints nothing, so read the registrations).
    let source = std::fs::read_to_string(format!("{root}/core/src/observability/metrics.rs")).unwrap();
    let registered: Vec<String> = source
        .split("registry.register(")
        .skip(1)
        .filter_map(|r| r.trim_start().strip_prefix('"'))
        .map(|r| format!("harness_{}", r.split('"').next().unwrap()))
        .collect();
    assert!(registered.len() >= 25 && registered.iter().any(|r| r == "harness_request_duration_seconds"), "{registered:?}");
    let mut names: Vec<String> = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("harness_") {
        let start = i + at;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        names.push(text[start..end].to_string());
        i = end;
    }
    names.sort();
    names.dedup();
    assert!(names.len() >= 14, "{names:?}");
    for name in names.iter().filter(|n| !n.starts_with("harness_dashboard")) {
        // A family is declared by `# TYPE <base> ...`; samples add _total/_bucket/_count/_sum.
        let base = ["_total", "_bucket", "_count", "_sum"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
        assert!(registered.iter().any(|r| r == base), "{name} is used by the dashboard or alerts but not exported");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_listen_serves_the_text_and_moves_with_a_reload() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let port = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (a, b) = (port(), port());
    let cfg = |p: u16| json!({"log": {"enabled": false}, "metrics": {"listen": format!("127.0.0.1:{p}")}, "services": {"svc": {"base_url": "http://127.0.0.1:9", "retry": {"max_retries": 0}}}});
    let client = Client::from_value(cfg(a)).unwrap();
    let _ = client.request(Request::new("svc", "GET", "/x")).await;
    let http = reqwest::Client::new();
    let text = http.get(format!("http://127.0.0.1:{a}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("harness_errors_total{service=\"svc\""), "{text}");
    assert_eq!(http.get(format!("http://127.0.0.1:{a}/other")).send().await.unwrap().status(), 404);
    client.reload_value(cfg(b)).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(http.get(format!("http://127.0.0.1:{b}/metrics")).send().await.unwrap().status().is_success());
    assert!(http.get(format!("http://127.0.0.1:{a}/metrics")).send().await.is_err(), "the old address is closed");
    client.close();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(http.get(format!("http://127.0.0.1:{b}/metrics")).send().await.is_err(), "closed with the client");
    let e = Config::from_value(json!({"metrics": {"listen": "localhost"}})).unwrap_err();
    assert!(e.message.starts_with("metrics.listen: expected host:port"), "{}", e.message);
}

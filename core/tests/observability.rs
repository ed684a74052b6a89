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
    // Whole card numbers: a bare "4111" also turns up in a random hex trace id now and then.
    for secret in ["tok-audit-secret-1", "hunter2", "4111-1111-1111-1111", "4111111111111111", "1111-1111", "555-0100"] {
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
    // The families the core registers (an empty family prints nothing, so read the registrations:
    // `r.add("name", "help", ...)` in `Metrics::new`).
    let source = std::fs::read_to_string(format!("{root}/core/src/observability/metrics.rs")).unwrap();
    let registered: Vec<String> = source
        .split("r.add(")
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

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    serde_json::from_slice(&http.get(url).send().await.unwrap().bytes().await.unwrap()).unwrap()
}

async fn otlp_spans(base: &str, want: usize) -> Vec<Value> {
    let http = reqwest::Client::new();
    for _ in 0..100 {
        let dump = get_json(&http, &format!("{base}/__admin/otlp/spans")).await;
        let spans = dump["spans"].as_array().unwrap().clone();
        if spans.len() >= want {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {want} spans reached the receiver");
}

fn otel(u: &harness_upstream::Upstream, extra: Value) -> Value {
    let mut o = json!({"endpoint": u.url(), "delay_ms": 50, "service_name": "checkout"});
    o.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_the_otlp_receiver_with_the_callers_parent_and_one_child_per_attempt() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "otel", json!([{"status": 503}, {"status": 200, "json": {"ok": true}}])).await;
    let (client, _) = client(json!({"log": {"enabled": false}, "otel": otel(&u, json!({})), "services": {"orders": {"base_url": u.url(),
        "retry": {"max_retries": 2, "base_delay_ms": 1, "max_delay_ms": 2, "jitter": false}}}}));
    let mut req = Request::new("orders", "GET", "/s/otel/42");
    req.endpoint = Some("/s/otel/{id}".into());
    req.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
    let r = client.request(req).await.unwrap();
    assert_eq!((r.status, r.attempts), (200, 2));

    let spans = otlp_spans(&u.url(), 3).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let root = spans.iter().find(|s| s["parent_span_id"] == "00f067aa0ba902b7").expect("the request span is the caller's child");
    assert_eq!(root["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!((root["name"].as_str(), root["kind"].as_i64()), (Some("GET /s/otel/{id}"), Some(3)), "a client span");
    assert_eq!(root["service_name"], "checkout");
    let a = &root["attributes"];
    assert_eq!(a["http.request.method"], "GET");
    assert_eq!(a["url.template"], "/s/otel/{id}");
    assert_eq!(a["server.address"], "127.0.0.1");
    assert_eq!(a["http.response.status_code"], 200);
    assert_eq!((a["harness.service"].as_str(), a["harness.endpoint"].as_str(), a["harness.attempts"].as_i64()), (Some("orders"), Some("/s/otel/{id}"), Some(2)));
    assert!(a.get("error.type").is_none() && root["status_code"] == 0);

    let mut children: Vec<&Value> = spans.iter().filter(|s| s["parent_span_id"] == root["span_id"]).collect();
    children.sort_by_key(|s| s["attributes"]["harness.attempt"].as_i64());
    assert_eq!(children.len(), 2);
    assert_eq!(children[0]["attributes"]["http.response.status_code"], 503);
    assert_eq!((children[0]["attributes"]["error.type"].as_str(), children[0]["status_code"].as_i64()), (Some("HttpStatusError"), Some(2)));
    assert_eq!(children[1]["attributes"]["http.request.resend_count"], 1);
    assert!(children[0]["end_ns"].as_u64() <= children[1]["start_ns"].as_u64());
    assert!(root["start_ns"].as_u64() <= children[0]["start_ns"].as_u64() && children[1]["end_ns"].as_u64() <= root["end_ns"].as_u64());

    // What the downstream saw: each attempt's own span id, in the caller's trace.
    let log: Value = get_json(&reqwest::Client::new(), &format!("{}/__admin/log/otel", u.url())).await;
    let sent: Vec<String> = log["requests"].as_array().unwrap().iter().map(|r| r["headers"]["traceparent"].as_str().unwrap().to_string()).collect();
    for (header, child) in sent.iter().zip(&children) {
        assert_eq!(header, &format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", child["span_id"].as_str().unwrap()));
    }
    client.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_is_an_error_span_and_unsampled_traces_are_not_exported() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "bad", json!([{"status": 404}])).await;
    let (client, _) = client(json!({"log": {"enabled": false}, "otel": otel(&u, json!({"sample_ratio": 0.0})), "services": {"orders": {"base_url": u.url()}}}));
    // A new trace at ratio 0 is not recorded, and says so downstream (flags 00).
    client.request(Request::new("orders", "GET", "/s/bad/1")).await.unwrap_err();
    // The caller's sampled trace is recorded whatever the ratio.
    let mut req = Request::new("orders", "GET", "/s/bad/2");
    req.traceparent = Some("00-11111111111111111111111111111111-2222222222222222-01".into());
    let e = client.request(req).await.unwrap_err();
    let spans = otlp_spans(&u.url(), 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let spans_later = otlp_spans(&u.url(), 2).await;
    assert_eq!(spans_later.len(), 2, "only the sampled trace: {spans:#?}");
    assert!(spans.iter().all(|s| s["trace_id"] == "11111111111111111111111111111111"));
    let root = spans.iter().find(|s| s["parent_span_id"] == "2222222222222222").unwrap();
    assert_eq!((root["status_code"].as_i64(), root["status_message"].as_str()), (Some(2), Some(e.name())));
    assert_eq!(root["attributes"]["error.type"], "HttpStatusError");
    assert_eq!(root["attributes"]["http.response.status_code"], 404);
    let log: Value = get_json(&reqwest::Client::new(), &format!("{}/__admin/log/bad", u.url())).await;
    assert!(log["requests"][0]["headers"]["traceparent"].as_str().unwrap().ends_with("-00"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_collector_never_slows_a_request_and_a_reload_moves_the_export() {
    let u = harness_upstream::start().await.unwrap();
    let collector = harness_upstream::start().await.unwrap();
    let http = reqwest::Client::new();
    http.post(format!("{}/__admin/otlp/hold/3000", u.url())).send().await.unwrap();
    let cfg = |endpoint: &str| json!({"log": {"enabled": false}, "otel": {"endpoint": endpoint, "delay_ms": 10, "max_batch": 4, "timeout_ms": 5000}, "services": {"orders": {"base_url": u.url()}}});
    let (client, _) = client(cfg(&u.url()));
    let started = std::time::Instant::now();
    for _ in 0..50 {
        client.request(Request::new("orders", "GET", "/fast")).await.unwrap();
    }
    assert!(started.elapsed() < Duration::from_millis(1500), "50 requests took {:?} behind a collector that answers in 3 s", started.elapsed());
    // A reload to another collector: new spans go there.
    let mut next = cfg(&collector.url());
    next["otel"]["service_name"] = json!("moved");
    client.reload_value(next).unwrap();
    client.request(Request::new("orders", "GET", "/after-reload")).await.unwrap();
    let spans = otlp_spans(&collector.url(), 2).await;
    assert!(spans.iter().all(|s| s["service_name"] == "moved" && s["attributes"]["url.template"] == "/after-reload"), "{spans:#?}");
    let e = client.reload_value(json!({"otel": {"endpoint": "tcp://x"}, "services": {"orders": {"base_url": u.url()}}})).unwrap_err();
    assert!(e.message.contains("otel.endpoint"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_request_names_its_provider_model_and_cost_and_each_failover_attempt() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let u = harness_upstream::start().await.unwrap();
    let http = reqwest::Client::new();
    let provider = |name: &'static str, spec: Value| {
        let http = http.clone();
        let url = format!("{}/__admin/provider/{name}", u.url());
        async move { assert_eq!(http.post(url).body(spec.to_string()).send().await.unwrap().status(), 200) }
    };
    provider("down", json!({"fail_rate": 1.0, "fail_status": 503})).await;
    provider("up", json!({"content": "hi", "prompt_tokens": 1000, "completion_tokens": 1000})).await;
    let svc = |name: &str| json!({"base_url": format!("{}/llm/{name}", u.url()), "retry": {"max_retries": 0}});
    let (client, _) = client(json!({"log": {"enabled": false}, "otel": otel(&u, json!({})),
        "services": {"down": svc("down"), "up": svc("up")},
        "routes": {"chat": {"adapter": "openai-compatible", "strategy": "priority", "same_provider_retries": 0, "providers": [
            {"id": "down", "service": "down", "model": "m-down", "weight": 1},
            {"id": "up", "service": "up", "model": "m-up", "weight": 1, "price": {"input_per_1k": 0.5, "output_per_1k": 1.5}}]}}}));
    let answer = client.chat("chat", harness_core::ChatRequest::new(json!([{"role": "user", "content": "hello"}]))).await.unwrap();
    assert_eq!(answer.provider.as_deref(), Some("up"));
    let spans = otlp_spans(&u.url(), 3).await;
    let root = spans.iter().find(|s| s["parent_span_id"] == "").expect("a root span");
    let a = &root["attributes"];
    assert_eq!((a["harness.route"].as_str(), a["harness.provider"].as_str(), a["harness.model"].as_str()), (Some("chat"), Some("up"), Some("m-up")));
    assert!((a["harness.cost"].as_f64().unwrap() - 2.0).abs() < 1e-9, "{a}");
    let mut tried: Vec<(String, i64)> = spans
        .iter()
        .filter(|s| s["parent_span_id"] == root["span_id"])
        .map(|s| (s["attributes"]["harness.provider"].as_str().unwrap().to_string(), s["attributes"]["http.response.status_code"].as_i64().unwrap()))
        .collect();
    tried.sort();
    assert_eq!(tried, vec![("down".to_string(), 503), ("up".to_string(), 200)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_records_reach_listeners_with_the_callers_principal_and_a_reload_moves_the_file() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "acct", json!([{"json": {"ok": true, "token": "tok-listener-secret-2"}}])).await;
    let dir = std::env::temp_dir().join(format!("harness-audit-listener-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = |sink: Value| json!({"log": {"enabled": false}, "audit": {"enabled": true, "include_bodies": true, "sink": sink},
        "services": {"svc": {"base_url": u.url(), "headers": {"x-api-key": "tok-listener-secret-2"}}}});
    let cwd_default = std::path::Path::new("audit.jsonl").exists();
    let (client, events) = client(cfg(json!({"listener": true})));
    let mut req = Request::new("svc", "GET", "/s/acct/1");
    req.principal = Some("user-42".into());
    client.request(req).await.unwrap();
    client.flush();
    let records: Vec<Value> = events.0.lock().iter().filter(|e| e.kind() == "audit_record").map(|e| e.to_value()).collect();
    assert_eq!(records.len(), 1);
    let rec = &records[0];
    assert_eq!((rec["type"].as_str(), rec["principal"].as_str(), rec["service"].as_str(), rec["outcome"].as_str()), (Some("audit_record"), Some("user-42"), Some("svc"), Some("ok")));
    assert_eq!(rec["response_body"]["token"], "***");
    assert!(!rec.to_string().contains("tok-listener-secret-2"), "{rec}");
    assert_eq!(std::path::Path::new("audit.jsonl").exists(), cwd_default, "listener only: no file written");

    // The principal is checked like every other field, and never sent downstream.
    let mut bad = Request::new("svc", "GET", "/s/acct/1");
    bad.principal = Some("ann\nforged-line".into());
    let e = client.request(bad).await.unwrap_err();
    assert!(e.name() == "ConfigError" && e.message.contains("request.principal"), "{}", e.message);
    let log = get_json(&reqwest::Client::new(), &format!("{}/__admin/log/acct", u.url())).await;
    assert!(!log.to_string().contains("user-42"));

    // A reload to a file: records go there from the next request on.
    let file = dir.join("moved.jsonl");
    client.reload_value(cfg(json!({"file": file.to_str().unwrap()}))).unwrap();
    let mut req = Request::new("svc", "GET", "/s/acct/2");
    req.principal = Some("user-43".into());
    client.request(req).await.unwrap();
    client.flush();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"principal\":\"user-43\"") && !text.contains("tok-listener-secret-2"), "{text}");
    assert_eq!(events.0.lock().iter().filter(|e| e.kind() == "audit_record").count(), 1, "file only now");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_deeply_nested_body_is_neither_audited_nor_validated_into_a_crash() {
    let u = harness_upstream::start().await.unwrap();
    let deep = "[".repeat(200_000);
    script(&u.url(), "deep", json!([{"status": 200, "body": deep, "headers": {"content-type": "application/json"}}])).await;
    let (client, events) = client(json!({"log": {"enabled": false},
        "audit": {"enabled": true, "include_bodies": true, "sink": {"listener": true}},
        "services": {"svc": {"base_url": u.url(), "retry": {"max_retries": 0},
            "endpoints": {"GET /s/deep": {"response_schema": {"type": "object"}, "validate": "enforce"}}}}}));
    let e = client.request(Request::new("svc", "GET", "/s/deep")).await.unwrap_err();
    assert_eq!(e.name(), "SchemaError");
    assert!(e.message.contains("not JSON"), "{}", e.message);
    // warn: the answer comes back, and its audit record notes the body instead of holding it.
    let mut cfg = client.config().as_ref().clone();
    cfg.services.get_mut("svc").unwrap().endpoints.values_mut().for_each(|ep| ep.validate = harness_core::validation::ValidateMode::Warn);
    client.reload(cfg).unwrap();
    assert_eq!(client.request(Request::new("svc", "GET", "/s/deep")).await.unwrap().body.len(), 200_000);
    client.flush();
    let recs: Vec<Value> = events.0.lock().iter().filter(|e| e.kind() == "audit_record").map(|e| e.to_value()).collect();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0]["outcome"], "SchemaError");
    assert!(recs[1]["response_body"].as_str().unwrap().contains("not JSON"), "{}", recs[1]);
}

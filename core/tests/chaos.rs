//! Mock mode and fault injection, through the whole pipeline: mocks answer with no network
//! (timeouts, retries, schema validation and metrics still apply); faults injected at the
//! transport are met by the same policies as real failures, counted, marked in the record,
//! replayable from their seed and switched on and off by a reload.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use harness_core::transport::mock::MockResponse;
use harness_core::{Body, Client, ClientOptions, Config, Event, EventSink, Request};
use parking_lot::Mutex;
use serde_json::{json, Value};

#[derive(Default)]
struct Records(Mutex<Vec<harness_core::RequestRecord>>);

impl EventSink for Records {
    fn on_event(&self, e: &Event) -> Result<(), String> {
        if let Event::RequestFinished(r) = e {
            self.0.lock().push(r.clone());
        }
        Ok(())
    }
}

fn client(config: Value) -> (Client, Arc<Records>) {
    let records = Arc::new(Records::default());
    let sink: Arc<dyn EventSink> = records.clone();
    let client = Client::with_options(Config::from_value(config).unwrap(), ClientOptions { sinks: vec![sink], ..Default::default() }).unwrap();
    (client, records)
}

fn metric(text: &str, prefix: &str) -> f64 {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// Nothing listens here: a request that reached the network would fail to connect.
const NOWHERE: &str = "http://127.0.0.1:9/api";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_mocks_answer_with_no_network_through_the_whole_pipeline() {
    let dir = std::env::temp_dir().join(format!("harness-mock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = dir.join("order-created.json");
    std::fs::write(&fixture, r#"{"id": "new", "state": "created"}"#).unwrap();
    let (client, records) = client(json!({"log": {"enabled": false},
        "mock": {"enabled": true, "services": {"orders": [
            {"match": {"method": "GET", "path": "/orders/{id}"}, "status": 200, "json": {"id": "{id}", "state": "paid"}, "latency_ms": 20},
            {"match": {"method": "POST", "path": "/orders"}, "status": 201, "json_file": fixture.to_str().unwrap()},
            {"match": {"method": "GET", "path": "/slow"}, "json": {}, "latency_ms": 500},
            {"match": {"method": "GET", "path": "/drift"}, "json": {"id": "not-a-number"}},
        ]}},
        "services": {"orders": {"base_url": NOWHERE, "timeouts": {"response_ms": 100},
            "retry": {"max_retries": 1, "base_delay_ms": 1, "jitter": false},
            "endpoints": {"GET /drift": {"response_schema": {"type": "object", "properties": {"id": {"type": "integer"}}}, "validate": "enforce"}}}}}));

    let t0 = std::time::Instant::now();
    let r = client.request(Request::new("orders", "GET", "/orders/A-17")).await.unwrap();
    assert!(t0.elapsed() >= std::time::Duration::from_millis(20), "latency_ms is honoured");
    assert_eq!((r.status, serde_json::from_slice::<Value>(&r.body).unwrap()), (200, json!({"id": "A-17", "state": "paid"})));
    let mut post = Request::new("orders", "POST", "/orders");
    post.body = Body::Json(json!({"sku": 1}));
    let r = client.request(post).await.unwrap();
    assert_eq!((r.status, serde_json::from_slice::<Value>(&r.body).unwrap()["state"].as_str()), (201, Some("created")));

    // The pipeline still applies: the response timeout (and its retry), schema validation.
    let e = client.request(Request::new("orders", "GET", "/slow")).await.unwrap_err();
    assert_eq!((e.name(), e.attempts), ("TimeoutError", 2));
    let e = client.request(Request::new("orders", "GET", "/drift")).await.unwrap_err();
    assert_eq!(e.name(), "SchemaError");

    // Nothing matches: a clear error naming the method and path, sent nowhere, not retried.
    let e = client.request(Request::new("orders", "DELETE", "/orders/9")).await.unwrap_err();
    assert_eq!((e.name(), e.attempts), ("ConfigError", 1));
    assert!(e.message.contains("DELETE /orders/9") && e.message.contains("GET /orders/{id}"), "{}", e.message);
    assert_eq!(client.breaker_state("orders", "DELETE", "/orders/9", None), "closed");

    client.flush();
    let m = client.metrics_text();
    assert!(metric(&m, "harness_requests_total{service=\"orders\",endpoint=\"/orders/{id}\",method=\"GET\",status=\"200\"}") >= 1.0, "{m}");
    assert_eq!(records.0.lock().len(), 5);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_mocks_take_over_a_service_until_cleared() {
    let u = harness_upstream::start().await.unwrap();
    let (client, _) = client(json!({"log": {"enabled": false}, "services": {"orders": {"base_url": u.url()}, "other": {"base_url": u.url()}}}));
    let real = client.request(Request::new("orders", "GET", "/orders/1")).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&real.body).unwrap(), json!({"ok": true}), "the real upstream first");

    client.mock("orders", "GET", "/orders/{id}", MockResponse { status: 200, json: Some(json!({"id": "{id}", "mocked": true})), ..Default::default() }).unwrap();
    client.mock("orders", "GET", "/orders/7", MockResponse { status: 404, body: Some("gone".into()), ..Default::default() }).unwrap();
    let r = client.request(Request::new("orders", "GET", "/orders/3")).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&r.body).unwrap(), json!({"id": "3", "mocked": true}));
    let e = client.request(Request::new("orders", "GET", "/orders/7")).await.unwrap_err();
    assert_eq!((e.status, e.name()), (Some(404), "HttpStatusError"), "the latest rule wins");
    let e = client.request(Request::new("orders", "GET", "/elsewhere")).await.unwrap_err();
    assert!(e.name() == "ConfigError" && e.message.contains("GET /elsewhere"), "{}", e.message);
    assert!(client.request(Request::new("other", "GET", "/x")).await.is_ok(), "other services still reach the network");

    // Mocks outlive a reload; bad ones are refused with the field named.
    client.reload_value(json!({"log": {"enabled": false}, "services": {"orders": {"base_url": u.url(), "retry": {"max_retries": 0}}, "other": {"base_url": u.url()}}})).unwrap();
    assert_eq!(client.request(Request::new("orders", "GET", "/orders/3")).await.unwrap().status, 200);
    let bad = client.mock("orders", "GET", "orders", MockResponse { status: 200, ..Default::default() }).unwrap_err();
    assert!(bad.message.contains("match.path"), "{}", bad.message);
    assert!(client.mock("nope", "GET", "/x", MockResponse { status: 200, ..Default::default() }).unwrap_err().message.contains("unknown service"));

    client.clear_mocks(Some("orders")).unwrap();
    let real = client.request(Request::new("orders", "GET", "/orders/3")).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&real.body).unwrap(), json!({"ok": true}));
}

fn faults(rules: Value, seed: u64) -> Value {
    json!({"enabled": true, "seed": seed, "rules": rules})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_faults_meet_the_same_policies_as_real_ones() {
    let u = harness_upstream::start().await.unwrap();
    let cfg = |rules: Value| {
        json!({"log": {"enabled": false}, "faults": faults(rules, 1),
            "services": {"svc": {"base_url": u.url(), "timeouts": {"response_ms": 100},
                "retry": {"max_retries": 2, "base_delay_ms": 1, "max_delay_ms": 2, "jitter": false}, "breaker": {"failure_threshold": 100}}}})
    };
    let (client, records) = client(cfg(json!([{"service": "svc", "endpoint": "GET /flaky/{id}", "rate": 1.0, "fault": "status", "status": 503, "retry_after_s": 0}])));
    let e = client.request(Request::new("svc", "GET", "/flaky/1")).await.unwrap_err();
    assert_eq!((e.name(), e.status, e.attempts, e.code.as_deref()), ("HttpStatusError", Some(503), 3, Some("injected_fault")));
    assert!(client.request(Request::new("svc", "GET", "/healthy")).await.is_ok(), "the rule names one endpoint");
    client.flush();
    let m = client.metrics_text();
    assert_eq!(metric(&m, "harness_faults_injected_total{service=\"svc\",fault=\"status\"}"), 3.0, "{m}");
    {
        let recs = records.0.lock();
        assert_eq!((recs[0].fault, recs[1].fault), (Some("status"), None));
    }

    // A reset before the head: a POST without a key is not resent (it may have been received).
    client.reload_value(cfg(json!([{"service": "svc", "rate": 1.0, "fault": "reset"}]))).unwrap();
    let mut post = Request::new("svc", "POST", "/pay");
    post.body = Body::Json(json!({"n": 1}));
    let e = client.request(post).await.unwrap_err();
    assert_eq!((e.name(), e.attempts), ("ConnectError", 1));
    assert!(e.message.contains("faults.rules[0]"), "{}", e.message);

    // Latency past the response timeout is a timeout, retried.
    client.reload_value(cfg(json!([{"service": "svc", "rate": 1.0, "fault": "latency", "latency_ms": 300}]))).unwrap();
    let e = client.request(Request::new("svc", "GET", "/slow")).await.unwrap_err();
    assert_eq!((e.name(), e.attempts), ("TimeoutError", 3));

    // A body cut short breaks the attempt; a stream reports it to its reader.
    client.reload_value(cfg(json!([{"service": "svc", "rate": 1.0, "fault": "stream_cut", "after_bytes": 5}]))).unwrap();
    let e = client.request(Request::new("svc", "GET", "/cut")).await.unwrap_err();
    assert_eq!((e.name(), e.attempts), ("ConnectError", 3));
    let mut s = client.stream(Request::new("svc", "GET", "/cut")).await.unwrap();
    let mut got = Vec::new();
    let end = loop {
        match s.next_chunk().await {
            Ok(Some(c)) => got.extend_from_slice(&c),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    assert_eq!(got.len(), 5);
    assert_eq!(end.map(|e| e.name()), Some("ConnectError"));

    // Switched off live.
    client.reload_value(json!({"log": {"enabled": false}, "faults": {"enabled": false, "rules": [{"service": "svc", "rate": 1.0, "fault": "reset"}]}, "services": {"svc": {"base_url": u.url()}}})).unwrap();
    assert!(client.request(Request::new("svc", "GET", "/fine")).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_replays_the_same_faults_and_the_rate_holds() {
    let u = harness_upstream::start().await.unwrap();
    let run = |seed: u64| {
        let url = u.url();
        async move {
            let (client, _) = client(json!({"log": {"enabled": false}, "faults": faults(json!([{"service": "svc", "rate": 0.3, "fault": "status", "status": 500}]), seed),
                "services": {"svc": {"base_url": url, "retry": {"max_retries": 0}, "breaker": {"failure_threshold": 1000}}}}));
            let mut outcomes = Vec::new();
            for i in 0..300 {
                outcomes.push(client.request(Request::new("svc", "GET", format!("/r/{i}"))).await.is_ok());
            }
            outcomes
        }
    };
    let (a, b, c) = (run(42).await, run(42).await, run(43).await);
    assert_eq!(a, b, "the same seed, the same faults");
    assert_ne!(a, c);
    let failed = a.iter().filter(|ok| !**ok).count();
    assert!((60..120).contains(&failed), "{failed} of 300 at rate 0.3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_and_mock_config_errors_name_the_field() {
    let err = |v: Value| Config::from_value(v).and_then(|c| Client::new(c).map(|_| ())).unwrap_err().message;
    let svc = json!({"svc": {"base_url": NOWHERE}});
    assert!(err(json!({"services": svc, "faults": {"rules": [{"service": "svc", "rate": 0.5, "fault": "latency"}]}})).contains("faults.rules[0].latency_ms"));
    assert!(err(json!({"services": svc, "faults": {"rules": [{"service": "x", "rate": 0.5, "fault": "reset"}]}})).contains("faults.rules[0].service"));
    assert!(err(json!({"services": svc, "mock": {"services": {"nope": []}}})).contains("mock.services.nope"));
    assert!(err(json!({"services": svc, "mock": {"enabled": true, "services": {"svc": [{"match": {"path": "/x"}, "json_file": "/no/such/file.json"}]}}})).contains("mock.services.svc[0].json_file"));
}

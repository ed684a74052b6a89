//! `services.<name>.openapi` against the real loopback upstream, with the example documents
//! of examples/openapi: each operation is its own endpoint (label, metrics, breaker), answers
//! are checked against the schema the operation declares (enforce and warn), operations that
//! declare an `Idempotency-Key` or `x-idempotent` are resent and others are not, and a bad
//! document is a `ConfigError` with the JSON pointer.

use std::path::{Path, PathBuf};
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

async fn log(base: &str, name: &str) -> Vec<Value> {
    let r = reqwest::Client::new().get(format!("{base}/__admin/log/{name}")).send().await.unwrap();
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    v["requests"].as_array().cloned().unwrap_or_default()
}

#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl EventSink for Events {
    fn on_event(&self, e: &Event) -> Result<(), String> {
        self.0.lock().push(e.clone());
        Ok(())
    }
}

fn new_client(config: Value) -> (Client, Arc<Events>) {
    let events = Arc::new(Events::default());
    let sink: Arc<dyn EventSink> = events.clone();
    let client = Client::with_options(Config::from_value(config).unwrap(), ClientOptions { sinks: vec![sink], ..Default::default() }).unwrap();
    (client, events)
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/openapi")
}

fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

const ORDER_ID: &str = "5b0a5f3e-8d2b-4a55-9c1e-3f1e7c1d2a10";

fn order() -> Value {
    json!({
        "id": ORDER_ID, "status": "open", "customer_id": "0f0e0d0c-0b0a-4909-8807-060504030201",
        "items": [{"sku": "tea", "quantity": 2, "unit_price": {"amount_minor": 450, "currency": "EUR"}}],
        "total": {"amount_minor": 900, "currency": "EUR"}, "note": null, "created_at": "2026-12-03T10:00:00Z"
    })
}

fn orders_config(base: &str, openapi: Value) -> Value {
    json!({"log": {"enabled": false}, "services": {"orders": {"base_url": format!("{base}/s/orders"), "openapi": openapi,
        "retry": {"max_retries": 2, "base_delay_ms": 1, "max_delay_ms": 2, "jitter": false}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_operation_is_its_own_endpoint_labelled_by_its_operation_id() {
    let u = harness_upstream::start().await.unwrap();
    let spec = examples().join("orders.yaml");
    let (client, _) = new_client(orders_config(&u.url(), json!(spec.to_str().unwrap())));
    script(&u.url(), "orders", json!([{"json": order()}, {"json": {"items": [], "next_cursor": null}}, {"json": order()}])).await;
    let r = client.request(Request::new("orders", "GET", format!("/orders/{ORDER_ID}"))).await.unwrap();
    assert_eq!(r.status, 200);
    client.request(Request::new("orders", "GET", "/orders?status=open")).await.unwrap();
    // A label the caller gives is kept.
    let mut own = Request::new("orders", "GET", format!("/orders/{ORDER_ID}"));
    own.endpoint = Some("order-by-id".into());
    client.request(own).await.unwrap();
    let m = client.metrics_text();
    for (label, n) in [("getOrder", 1.0), ("listOrders", 1.0), ("order-by-id", 1.0)] {
        assert_eq!(metric(&m, &format!("harness_requests_total{{service=\"orders\",endpoint=\"{label}\",method=\"GET\",status=\"200\"}}")), Some(n), "{label}: {m}");
    }
    assert!(!m.contains("endpoint=\"/orders/{id}\""), "no path template when the document names the operation: {m}");

    // Breakers are per operation: getOrder failing does not open listOrders'.
    let cfg = json!({"log": {"enabled": false}, "services": {"orders": {"base_url": format!("{}/s/orders", u.url()), "openapi": {"spec": spec.to_str().unwrap()},
        "retry": {"max_retries": 0}, "breaker": {"failure_threshold": 2}}}});
    client.reload_value(cfg).unwrap();
    script(&u.url(), "orders", json!([{"status": 503}, {"status": 503}, {"json": {"items": []}}])).await;
    for _ in 0..2 {
        let e = client.request(Request::new("orders", "GET", "/orders/x1")).await.unwrap_err();
        assert_eq!(e.endpoint.as_deref(), Some("getOrder"));
    }
    assert_eq!(client.breaker_state("orders", "GET", "/orders/x1", Some("getOrder")), "open");
    assert_eq!(client.breaker_state("orders", "GET", "/orders", Some("listOrders")), "closed");
    assert_eq!(client.request(Request::new("orders", "GET", "/orders")).await.unwrap().status, 200);

    // A rate limit keyed by operationId holds that operation only.
    let cfg = json!({"log": {"enabled": false}, "services": {"orders": {"base_url": format!("{}/s/orders", u.url()), "openapi": spec.to_str().unwrap(),
        "rate_limit": {"rps": 1000, "burst": 100, "max_wait_ms": 0, "endpoints": {"getOrder": {"rps": 0.01, "burst": 1}}}}}});
    let (limited, _) = new_client(cfg);
    script(&u.url(), "orders", json!([{"json": order()}, {"json": {"items": []}}, {"json": {"items": []}}])).await;
    limited.request(Request::new("orders", "GET", format!("/orders/{ORDER_ID}"))).await.unwrap();
    let e = limited.request(Request::new("orders", "GET", format!("/orders/{ORDER_ID}"))).await.unwrap_err();
    assert_eq!((e.name(), e.code.as_deref(), e.endpoint.as_deref()), ("RateLimitedError", Some("client_rate_limited"), Some("getOrder")));
    for _ in 0..2 {
        limited.request(Request::new("orders", "GET", "/orders")).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_answer_is_a_schema_error_naming_the_pointer_or_a_warning() {
    let u = harness_upstream::start().await.unwrap();
    let spec = examples().join("orders.yaml");
    let mut drifted = order();
    // The amount in cents became a decimal in yuan.
    drifted["total"]["amount_minor"] = json!("9.00");
    script(&u.url(), "orders", json!([{"json": drifted.clone()}, {"json": drifted.clone()}])).await;
    let (client, events) = new_client(orders_config(&u.url(), json!({"spec": spec.to_str().unwrap()})));
    let e = client.request(Request::new("orders", "GET", format!("/orders/{ORDER_ID}"))).await.unwrap_err();
    assert_eq!((e.name(), e.status, e.endpoint.as_deref()), ("SchemaError", Some(200), Some("getOrder")));
    assert!(e.message.contains("at /total/amount_minor"), "{}", e.message);
    assert!(!e.message.contains("9.00"), "the value is masked: {}", e.message);
    assert_eq!(e.attempts, 1, "a drifted answer is not retried");

    client.reload_value(orders_config(&u.url(), json!({"spec": spec.to_str().unwrap(), "validate": "warn"}))).unwrap();
    let r = client.request(Request::new("orders", "GET", format!("/orders/{ORDER_ID}"))).await.unwrap();
    assert_eq!(r.status, 200);
    client.flush();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let warned: Vec<Value> = events.0.lock().iter().filter(|e| e.kind() == "schema_violation").map(Event::to_value).collect();
    assert_eq!(warned.len(), 2, "{warned:?}");
    assert_eq!((warned[1]["mode"].as_str(), warned[1]["endpoint"].as_str()), (Some("warn"), Some("getOrder")));
    assert!(warned[1]["violation"].as_str().unwrap().contains("at /total/amount_minor"));
    let m = client.metrics_text();
    assert_eq!(metric(&m, "harness_schema_violations_total{service=\"orders\",endpoint=\"getOrder\"}"), Some(2.0), "{m}");

    // A declared error status is not checked as a success, and an answer that matches passes.
    script(&u.url(), "orders", json!([{"status": 404, "json": {"code": "order_not_found", "title": "No such order", "status": 404}}, {"json": order()}])).await;
    let e = client.request(Request::new("orders", "GET", format!("/orders/{ORDER_ID}"))).await.unwrap_err();
    assert_eq!((e.name(), e.status), ("HttpStatusError", Some(404)));
    client.reload_value(orders_config(&u.url(), json!({"spec": spec.to_str().unwrap()}))).unwrap();
    assert_eq!(client.request(Request::new("orders", "GET", format!("/orders/{ORDER_ID}"))).await.unwrap().status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_idempotent_operations_are_resent_and_other_posts_are_not() {
    let u = harness_upstream::start().await.unwrap();
    let spec = examples().join("orders.yaml");
    let (client, _) = new_client(orders_config(&u.url(), json!(spec.to_str().unwrap())));
    let created = json!([{"status": 503}, {"status": 201, "json": order()}]);

    // createOrder declares an Idempotency-Key: the caller sent none, so Harness sends a fresh
    // one, the same on every attempt, and the 503 is retried.
    script(&u.url(), "orders", created.clone()).await;
    let mut req = Request::new("orders", "POST", "/orders");
    req.body = Body::Json(json!({"customer_id": "0f0e0d0c-0b0a-4909-8807-060504030201", "items": [{"sku": "tea", "quantity": 2, "unit_price": {"amount_minor": 450, "currency": "EUR"}}]}));
    let r = client.request(req.clone()).await.unwrap();
    assert_eq!((r.status, r.attempts), (201, 2));
    let sent = log(&u.url(), "orders").await;
    let keys: Vec<&str> = sent.iter().map(|l| l["headers"]["idempotency-key"].as_str().unwrap_or("")).collect();
    assert_eq!(keys.len(), 2);
    assert!(keys[0].len() == 32 && keys[0] == keys[1], "one fresh key for both attempts: {keys:?}");

    // The caller's own header is kept (and makes it safe too).
    script(&u.url(), "orders", created.clone()).await;
    let mut own = req.clone();
    own.headers.push(("Idempotency-Key".into(), "order-7-attempt".into()));
    assert_eq!(client.request(own).await.unwrap().attempts, 2);
    let sent = log(&u.url(), "orders").await;
    assert!(sent.iter().rev().take(2).all(|l| l["headers"]["idempotency-key"] == "order-7-attempt"), "{sent:?}");

    // A POST the document does not make safe: one attempt, the 503 returned.
    let dir = std::env::temp_dir().join(format!("harness-openapi-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("jobs.yaml"),
        "openapi: 3.1.0\ninfo: {title: Jobs, version: '1'}\npaths:\n  /jobs:\n    post:\n      operationId: startJob\n      responses: {'202': {description: queued}}\n  /jobs/{id}/rerun:\n    post:\n      operationId: rerunJob\n      x-idempotent: true\n      parameters: [{name: id, in: path, required: true, schema: {type: string}}]\n      responses: {'202': {description: queued}}\n",
    )
    .unwrap();
    let (jobs, _) = client_for_jobs(&u.url(), &dir);
    script(&u.url(), "jobs", json!([{"status": 503}, {"status": 202}])).await;
    let e = jobs.request(Request::new("jobs", "POST", "/jobs")).await.unwrap_err();
    assert_eq!((e.status, e.attempts, e.endpoint.as_deref()), (Some(503), 1, Some("startJob")));
    let sent = log(&u.url(), "jobs").await;
    assert!(sent[0]["headers"].get("idempotency-key").is_none(), "no key for an operation that declares none");
    // x-idempotent: resent.
    script(&u.url(), "jobs", json!([{"status": 503}, {"status": 202}])).await;
    let r = jobs.request(Request::new("jobs", "POST", "/jobs/j1/rerun")).await.unwrap();
    assert_eq!((r.status, r.attempts), (202, 2));
    let _ = std::fs::remove_dir_all(&dir);
}

fn client_for_jobs(base: &str, dir: &Path) -> (Client, Arc<Events>) {
    // A config *file* naming its document relatively, in the short form.
    std::fs::write(
        dir.join("harness.yaml"),
        format!("log: {{enabled: false}}\nservices:\n  jobs:\n    base_url: {base}/s/jobs\n    openapi: jobs.yaml\n    retry: {{max_retries: 2, base_delay_ms: 1, max_delay_ms: 2, jitter: false}}\n"),
    )
    .unwrap();
    let events = Arc::new(Events::default());
    let sink: Arc<dyn EventSink> = events.clone();
    let c = Client::with_options(Config::from_path(dir.join("harness.yaml")).unwrap(), ClientOptions { sinks: vec![sink], ..Default::default() }).unwrap();
    (c, events)
}

#[test]
fn a_bad_document_is_a_config_error_with_the_pointer() {
    let dir = std::env::temp_dir().join(format!("harness-openapi-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.yaml"),
        "openapi: 3.0.3\ninfo: {title: B, version: '1'}\npaths:\n  /x:\n    get:\n      responses:\n        '200': {description: ok, content: {application/json: {schema: {$ref: 'common.yaml#/components/schemas/Gone'}}}}\n",
    )
    .unwrap();
    std::fs::write(dir.join("common.yaml"), "components: {schemas: {Here: {type: string}}}\n").unwrap();
    let cfg = json!({"services": {"svc": {"base_url": "http://127.0.0.1:9", "openapi": dir.join("bad.yaml").to_str().unwrap()}}});
    let e = Client::new(Config::from_value(cfg).unwrap()).unwrap_err();
    assert_eq!(e.name(), "ConfigError");
    assert!(
        e.message.starts_with("services.svc.openapi.spec: bad.yaml: #/paths/~1x/get/responses/200/content/application~1json/schema/$ref: `$ref: common.yaml#/components/schemas/Gone`: nothing is there"),
        "{}",
        e.message
    );
    let e = Config::from_value(json!({"services": {"svc": {"base_url": "http://127.0.0.1:9", "openapi": {"spec": " "}}}})).unwrap_err();
    assert!(e.message.starts_with("services.svc.openapi.spec: required"), "{}", e.message);
    let e = Config::from_value(json!({"services": {"svc": {"base_url": "http://127.0.0.1:9", "openapi": {"spec": "a.yaml", "valdiate": "warn"}}}})).unwrap_err();
    assert!(e.message.contains("services.svc.openapi") && e.message.contains("valdiate"), "{}", e.message);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The public documents of ../shared/openapi-corpus (read from there, never copied) load at
/// run time: every operation labelled, every declared JSON response schema compiled.
#[test]
fn the_public_corpus_loads_as_service_documents() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/openapi-corpus");
    assert!(corpus.is_dir(), "{} is missing: the corpus sits beside the project", corpus.display());
    for (doc, operations) in [("oai-petstore-expanded.json", 4), ("oai-uspto.json", 3), ("adyen-checkout-v71.json", 28), ("twilio-messaging-v1.json", 58)] {
        let spec = corpus.join(doc);
        let started = std::time::Instant::now();
        let cfg = json!({"log": {"enabled": false}, "services": {"svc": {"base_url": "http://127.0.0.1:9", "openapi": spec.to_str().unwrap()}}});
        let client = Client::new(Config::from_value(cfg).unwrap()).unwrap_or_else(|e| panic!("{doc}: {}", e.message));
        eprintln!("{doc}: {operations} operations, loaded and compiled in {:?}", started.elapsed());
        drop(client);
        let n = harness_openapi::contract::load(&spec).unwrap().len();
        assert_eq!(n, operations, "{doc}");
    }
}

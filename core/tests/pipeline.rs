//! Pipeline behaviour that the vectors cannot express: mass cancellation,
//! the log record, the metrics text and where secrets must never show up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::{Client, Event, EventSink, Request, RequestRecord, Operation};
use parking_lot::Mutex;
use serde_json::json;

const SECRET: &str = "s3cr3t-T0KEN-value";

async fn upstream() -> harness_upstream::Upstream {
    harness_upstream::start().await.unwrap()
}

async fn script(u: &harness_upstream::Upstream, name: &str, steps: serde_json::Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let body = json!({ "steps": steps }).to_string();
    let r = reqwest::Client::new().put(format!("{}/__admin/script/{name}", u.url())).body(body).send().await.unwrap();
    assert!(r.status().is_success());
}

#[derive(Default)]
struct Capture(Mutex<Vec<RequestRecord>>);

impl EventSink for Capture {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        if let Event::RequestFinished(record) = event {
            self.0.lock().push(record.clone());
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_random_cancellations_leak_no_permit() {
    let u = upstream().await;
    script(&u, "cancel", json!([{ "delay_ms": 20 }])).await;
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": u.url(), "bulkhead": {"max_concurrency": 256}}}
    }))
    .unwrap();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        // xorshift: fixed randomness, so a failure replays exactly.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _batch in 0..40 {
        let mut handles = Vec::new();
        for _ in 0..250 {
            let task = Operation::Request(client.clone(), Request::new("svc", "GET", "/s/cancel/x")).start().spawn().unwrap();
            let after = Duration::from_micros(next() % 30_000);
            handles.push(tokio::spawn(async move {
                let _ = tokio::time::timeout(after, task).await;
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
    }
    let start = Instant::now();
    while client.bulkhead_in_use("svc").unwrap() != 0 && start.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    assert!(client.metrics_text().contains("harness_bulkhead_permits_in_use{service=\"svc\"} 0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_record_per_request_with_every_field_and_no_secret() {
    let u = upstream().await;
    script(&u, "rec", json!([{ "status": 503, "json": {"code": "DOWN", "message": "maintenance"} }])).await;
    let capture = Arc::new(Capture::default());
    let client = Client::from_value(json!({
        "client": {"name": "records"},
        "log": {"enabled": false},
        "services": {"svc": {
            "base_url": u.url(),
            "headers": {"authorization": format!("Bearer {SECRET}")},
            "retry": {"base_delay_ms": 10, "max_delay_ms": 10}
        }}
    }))
    .unwrap();
    client.add_listener(capture.clone());
    let mut req = Request::new("svc", "GET", "/s/rec/orders/42");
    req.query = vec![("api_key".into(), SECRET.into())];
    req.headers = vec![("x-api-key".into(), SECRET.into())];
    let err = client.request(req).await.unwrap_err();
    assert_eq!(err.name(), "HttpStatusError");
    assert_eq!(err.code.as_deref(), Some("DOWN"));

    client.close(); // delivers the queued events
    let records = capture.0.lock().clone();
    assert_eq!(records.len(), 1, "exactly one record per request, retries included");
    let r = &records[0];
    assert_eq!(&*r.service, "svc");
    assert_eq!(&*r.endpoint, "/s/rec/orders/{id}");
    assert_eq!(&*r.method, "GET");
    assert_eq!(r.status, Some(503));
    assert_eq!(r.attempts, 2);
    assert_eq!(r.retry_count, 1);
    assert_eq!(r.breaker, "closed");
    assert_eq!(r.error_kind, Some("HttpStatusError"));
    assert_eq!(r.error_code.as_deref(), Some("DOWN"));
    assert_eq!(r.trace_id.as_str().len(), 32);
    assert_eq!(r.span_id.as_str().len(), 16);
    let line = r.to_json();
    let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
    for key in ["trace_id", "span_id", "service", "endpoint", "method", "status", "duration_ms", "retry_count", "breaker", "error_kind", "error_code", "error_message"] {
        assert!(parsed.get(key).is_some(), "log line lacks {key}: {line}");
    }
    for text in [line, err.to_string(), format!("{err:?}"), client.metrics_text(), format!("{client:?}"), format!("{:?}", client.config())] {
        assert!(!text.contains(SECRET), "secret leaked into: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_text_has_every_family() {
    let u = upstream().await;
    script(&u, "met", json!([{ "status": 503, "times": 2 }, { "status": 200 }])).await;
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": u.url(), "retry": {"base_delay_ms": 5, "max_delay_ms": 5, "max_retries": 0},
                             "breaker": {"failure_threshold": 1, "open_ms": 50}}}
    }))
    .unwrap();
    let _ = client.request(Request::new("svc", "GET", "/s/met/a")).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let _ = client.request(Request::new("svc", "GET", "/s/met/a")).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let _ = client.request(Request::new("svc", "GET", "/s/met/a")).await;
    let text = client.metrics_text();
    for needle in [
        "harness_requests_total{service=\"svc\",endpoint=\"/s/met/a\",method=\"GET\",status=\"503\"} 2",
        "harness_requests_total{service=\"svc\",endpoint=\"/s/met/a\",method=\"GET\",status=\"200\"} 1",
        "harness_errors_total{service=\"svc\",endpoint=\"/s/met/a\",method=\"GET\",kind=\"HttpStatusError\"} 2",
        "harness_request_duration_seconds_bucket{",
        "harness_retries_total{",
        "harness_breaker_transitions_total{service=\"svc\",endpoint=\"/s/met/a\",method=\"GET\",from=\"closed\",to=\"open\"} 1",
        "from=\"open\",to=\"half_open\"",
        "from=\"half_open\",to=\"closed\"} 1",
        "harness_bulkhead_permits_in_use{service=\"svc\"} 0",
    ] {
        assert!(text.contains(needle), "metrics lack {needle}:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_config_errors_naming_the_field() {
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": "http://127.0.0.1:9"}}})).unwrap();
    let e = client.request(Request::new("nope", "GET", "/x")).await.unwrap_err();
    assert_eq!((e.name(), e.message.starts_with("request.service:")), ("ConfigError", true), "{e}");
    let e = client.request(Request::new("svc", "GE T", "/x")).await.unwrap_err();
    assert!(e.message.starts_with("request.method:"), "{e}");
    let e = client.request(Request::new("svc", "GET", "x")).await.unwrap_err();
    assert!(e.message.starts_with("request.path:"), "{e}");
    let mut r = Request::new("svc", "GET", "/x");
    r.headers = vec![("bad header".into(), "v".into())];
    assert!(client.request(r).await.unwrap_err().message.starts_with("request.headers"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_client_refuses_requests() {
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": "http://127.0.0.1:9"}}})).unwrap();
    client.close();
    let e = client.request(Request::new("svc", "GET", "/x")).await.unwrap_err();
    assert_eq!(e.name(), "HarnessError");
    assert!(e.message.contains("closed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_url_prefix_path_query_and_query_params_compose() {
    let u = upstream().await;
    script(&u, "pfx", json!([{ "status": 200 }])).await;
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": format!("{}/s/pfx/", u.url())}}})).unwrap();
    let mut req = Request::new("svc", "GET", "/items/7?view=full");
    req.query = vec![("page".into(), "2".into()), ("q".into(), "a b".into())];
    assert_eq!(client.request(req).await.unwrap().status, 200);
    let log = reqwest::Client::new().get(format!("{}/__admin/log/pfx", u.url())).send().await.unwrap().bytes().await.unwrap();
    let log: serde_json::Value = serde_json::from_slice(&log).unwrap();
    assert_eq!(log["requests"][0]["path"], "/s/pfx/items/7?view=full&page=2&q=a+b");
}

// ---- a system without CA certificates (a bare container) ----

/// The child of the test below, run with `SSL_CERT_FILE`/`SSL_CERT_DIR` naming an empty
/// file and folder: the system then has no CA certificate at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of without_ca_certificates_http_services_work_and_an_https_one_is_named"]
async fn no_ca_certificates_child() {
    if std::env::var_os("HARNESS_NO_CA_CHILD").is_none() {
        return;
    }
    let u = upstream().await;
    let plain = json!({"log": {"enabled": false}, "services": {"plain": {"base_url": u.url(), "retry": {"max_retries": 0}}}});
    let client = Client::from_value(plain.clone()).unwrap();
    // The upstream's own answer (no script installed for the path): the request went out.
    let e = client.request(Request::new("plain", "GET", "/s/no-ca/x")).await.unwrap_err();
    assert_eq!((e.status, e.code.as_deref()), (Some(404), Some("no_script")), "{e:?}");
    let mut with_tls = plain;
    with_tls["services"]["tls"] = json!({"base_url": "https://api.example.com"});
    let e = Client::from_value(with_tls).err().expect("an https service needs a CA certificate");
    assert_eq!(e.name(), "ConfigError");
    assert!(e.message.starts_with("services.tls.base_url: ") && e.message.contains("no") && e.message.contains("SSL_CERT_FILE"), "{e}");
    println!("NO_CA_CHILD_OK");
}

#[test]
fn without_ca_certificates_http_services_work_and_an_https_one_is_named() {
    let dir = std::env::temp_dir().join(format!("harness-no-ca-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    std::fs::write(dir.join("empty.pem"), "").unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "no_ca_certificates_child", "--nocapture", "--test-threads", "1"])
        .env("SSL_CERT_FILE", dir.join("empty.pem"))
        .env("SSL_CERT_DIR", dir.join("certs"))
        .env("HARNESS_NO_CA_CHILD", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("NO_CA_CHILD_OK"), "{text}");
}

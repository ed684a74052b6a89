//! Resource bounds under hostile traffic: endpoint state and metrics stay bounded
//! however many distinct paths arrive; idle endpoint state is evicted; secrets
//! echoed by a downstream never reach a log record.

use std::sync::Arc;
use std::time::Duration;

use harness_core::{Client, Event, EventSink, Request, RequestRecord};
use parking_lot::Mutex;
use serde_json::json;

/// Resident set size of this process, from /proc (Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// A path word with no digits, so templating keeps it: every index gives a distinct endpoint.
fn word(mut i: usize) -> String {
    let mut s = String::new();
    loop {
        s.push((b'a' + (i % 26) as u8) as char);
        i /= 26;
        if i == 0 {
            return s;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_thousand_distinct_paths_keep_state_and_metrics_bounded() {
    let u = harness_upstream::start().await.unwrap();
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": u.url(), "bulkhead": {"max_concurrency": 1000}}}
    }))
    .unwrap();
    // Warm up: pools, allocator arenas and the first 1000 endpoints.
    for i in 0..2000 {
        client.request(Request::new("svc", "GET", format!("/p/{}", word(i)))).await.unwrap();
    }
    let before_rss = rss_bytes();
    let before_metrics = client.metrics_text().len();
    const N: usize = 200_000;
    const CONCURRENCY: usize = 64;
    let mut workers = Vec::new();
    for w in 0..CONCURRENCY {
        let client = client.clone();
        workers.push(tokio::spawn(async move {
            let mut i = 2000 + w;
            while i < N {
                let r = client.request(Request::new("svc", "GET", format!("/p/{}", word(i)))).await;
                assert_eq!(r.unwrap().status, 200);
                i += CONCURRENCY;
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let text = client.metrics_text();
    let grown_rss = rss_bytes().saturating_sub(before_rss);
    println!(
        "endpoints held: {}, metrics text {} -> {} bytes, RSS grew {} KiB over {N} distinct paths",
        client.endpoint_count(),
        before_metrics,
        text.len(),
        grown_rss / 1024
    );
    // 1000 labelled endpoints plus the shared `{other}`.
    assert_eq!(client.endpoint_count(), 1001);
    assert!(text.contains("endpoint=\"{other}\""));
    // The metrics text holds 1001 endpoints' series whatever the traffic (424 MB before the bound).
    assert!(text.len() < 4 * before_metrics.max(1), "metrics grew from {before_metrics} to {} bytes", text.len());
    // 1.9 KiB per path before the bound would be ~380 MB here.
    assert!(grown_rss < 48 * 1024 * 1024, "RSS grew by {} MiB", grown_rss / (1024 * 1024));
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

#[tokio::test(flavor = "current_thread")]
async fn idle_endpoint_state_with_a_closed_breaker_is_evicted_after_ten_minutes() {
    let u = harness_upstream::start().await.unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let steps = json!({"steps": [{"status": 503}]}).to_string();
    reqwest::Client::new().put(format!("{}/__admin/script/down", u.url())).body(steps).send().await.unwrap();
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": u.url(), "retry": {"max_retries": 0}, "breaker": {"failure_threshold": 1, "open_ms": 3600000}}}
    }))
    .unwrap();
    client.request(Request::new("svc", "GET", "/idle/one")).await.unwrap();
    let _ = client.request(Request::new("svc", "GET", "/s/down/x")).await;
    assert_eq!(client.breaker_state("svc", "GET", "/s/down/x", None), "open");
    assert!(client.metrics_text().contains("endpoint=\"/idle/one\""));

    // Only the clock moves: ten minutes and a bit, then any new endpoint (or a metrics read) sweeps.
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(601)).await;
    tokio::time::resume();
    client.request(Request::new("svc", "GET", "/fresh")).await.unwrap();
    let text = client.metrics_text();
    assert!(!text.contains("endpoint=\"/idle/one\""), "idle closed endpoint kept:\n{text}");
    // An open breaker is state worth keeping, however idle.
    assert_eq!(client.breaker_state("svc", "GET", "/s/down/x", None), "open");
    assert!(text.contains("endpoint=\"/s/down/x\""));
    assert_eq!(client.endpoint_count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echoed_secrets_never_reach_the_log_record() {
    let u = harness_upstream::start().await.unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let steps = json!({"steps": [{"status": 400, "json": {"message": "bad key k-static-9876543 and token t-req-1234567\r\nX: y"}}]}).to_string();
    reqwest::Client::new().put(format!("{}/__admin/script/echo", u.url())).body(steps).send().await.unwrap();
    let capture = Arc::new(Capture::default());
    let client = Client::with_options(
        harness_core::Config::from_value(json!({
            "log": {"enabled": false},
            "services": {"svc": {"base_url": u.url(), "headers": {"x-api-key": "k-static-9876543"}}}
        }))
        .unwrap(),
        harness_core::ClientOptions { sinks: vec![capture.clone()], ..Default::default() },
    )
    .unwrap();
    let mut req = Request::new("svc", "POST", "/s/echo/x");
    req.headers.push(("X-Auth-Token".into(), "t-req-1234567".into()));
    let err = client.request(req).await.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("k-static-9876543") && !shown.contains("t-req-1234567"), "{shown}");
    assert!(err.message.contains("bad key *** and token ***\\r\\nX: y"), "{}", err.message);
    client.close(); // delivers the queued events
    let records = capture.0.lock();
    let line = records[0].to_json();
    assert!(!line.contains("k-static-9876543") && !line.contains("t-req-1234567"), "{line}");
}

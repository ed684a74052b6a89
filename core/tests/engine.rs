//! The live engine: config snapshots and reload (state carried over, breakers closed when a
//! service moves to another base URL, bulkhead
//! resize, removed services), file watching, streaming bodies (idle timeout, cut,
//! cancel, back-pressure, outcome recorded at the end) and events, on the
//! in-memory transport with tokio's paused clock where time matters.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use harness_core::transport::memory::{Chunk, MemoryTransport, Reply};
use harness_core::transport::Transport;
use harness_core::{Client, ClientOptions, Config, Event, EventSink, Request};
use parking_lot::Mutex;
use serde_json::{json, Value};

fn config(extra: Value) -> Config {
    let mut base = json!({"log": {"enabled": false}, "services": {"svc": {"base_url": "http://127.0.0.1:9", "retry": {"max_retries": 0}}}});
    merge(&mut base, &extra);
    Config::from_value(base).unwrap()
}

use harness_upstream::merge_json as merge;

fn client_with(transport: Arc<MemoryTransport>, extra: Value) -> Client {
    let t: Arc<dyn Transport> = transport;
    Client::with_options(config(extra), ClientOptions { transport: Some(t), ..Default::default() }).unwrap()
}

#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl EventSink for Events {
    fn on_event(&self, event: &Event) -> Result<(), String> {
        self.0.lock().push(event.clone());
        Ok(())
    }
}

impl Events {
    fn kinds(&self) -> Vec<&'static str> {
        self.0.lock().iter().map(Event::kind).collect()
    }
}

#[tokio::test(start_paused = true)]
async fn reload_carries_breaker_state_and_refuses_an_invalid_config() {
    let t = Arc::new(MemoryTransport::new(vec![Reply::status(503)]));
    let client = client_with(t.clone(), json!({"services": {"svc": {"breaker": {"failure_threshold": 2}}}}));
    let v1 = client.config_version();
    for _ in 0..2 {
        assert_eq!(client.request(Request::new("svc", "GET", "/x")).await.unwrap_err().name(), "HttpStatusError");
    }
    assert_eq!(client.breaker_state("svc", "GET", "/x", None), "open");

    // A changed retry policy, same service: the open breaker carries over.
    let v2 = client.reload(config(json!({"services": {"svc": {"retry": {"max_retries": 2}, "breaker": {"failure_threshold": 2}}}}))).unwrap();
    assert_ne!(v1, v2);
    assert_eq!(client.config_version(), v2);
    assert_eq!(client.breaker_state("svc", "GET", "/x", None), "open");
    assert_eq!(client.request(Request::new("svc", "GET", "/x")).await.unwrap_err().name(), "CircuitOpenError");

    // Invalid: the error names the field and the old config stays.
    let bad = client.reload_value(json!({"services": {"svc": {"base_url": "http://x", "retry": {"max_retries": -1}}}})).unwrap_err();
    assert_eq!(bad.message, "services.svc.retry.max_retries: expected an integer >= 0, got -1");
    assert_eq!(client.config_version(), v2);
    let metrics = client.metrics_text();
    assert!(metrics.contains("harness_config_reloads_total{result=\"applied\"} 1"), "{metrics}");
    assert!(metrics.contains("harness_config_reloads_total{result=\"rejected\"} 1"), "{metrics}");

    // The service moved to another host (a rollback off a dead one): its breakers start closed.
    client.reload(config(json!({"services": {"svc": {"base_url": "http://127.0.0.1:10", "breaker": {"failure_threshold": 2}}}}))).unwrap();
    assert_eq!(client.breaker_state("svc", "GET", "/x", None), "closed");
    assert_eq!(client.request(Request::new("svc", "GET", "/x")).await.unwrap_err().name(), "HttpStatusError", "sent, not refused");
}

#[tokio::test(start_paused = true)]
async fn a_shrunk_bulkhead_lets_in_flight_finish_and_admits_below_the_new_limit() {
    let slow = Reply::Respond { status: 200, headers: vec![], delay: Duration::from_secs(1), body: vec![Chunk::Data(Bytes::from_static(b"ok"))] };
    let t = Arc::new(MemoryTransport::new(vec![slow]));
    let client = client_with(t, json!({"services": {"svc": {"bulkhead": {"max_concurrency": 10}}}}));
    let in_flight: Vec<_> = (0..8)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.request(Request::new("svc", "GET", "/x")).await })
        })
        .collect();
    tokio::task::yield_now().await;
    while client.bulkhead_in_use("svc").unwrap() < 8 {
        tokio::task::yield_now().await;
    }
    client.reload(config(json!({"services": {"svc": {"bulkhead": {"max_concurrency": 5}}}}))).unwrap();
    assert_eq!(client.request(Request::new("svc", "GET", "/x")).await.unwrap_err().name(), "BulkheadFullError");
    for h in in_flight {
        assert_eq!(h.await.unwrap().unwrap().status, 200, "in-flight requests finish after a resize");
    }
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    // Below the new limit again: admitted; five at once fill it.
    let five: Vec<_> = (0..5)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.request(Request::new("svc", "GET", "/x")).await })
        })
        .collect();
    while client.bulkhead_in_use("svc").unwrap() < 5 {
        tokio::task::yield_now().await;
    }
    assert_eq!(client.request(Request::new("svc", "GET", "/x")).await.unwrap_err().name(), "BulkheadFullError");
    for h in five {
        h.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_removed_service_refuses_new_requests_while_in_flight_ones_finish() {
    let slow = Reply::Respond { status: 200, headers: vec![], delay: Duration::from_secs(1), body: vec![Chunk::Data(Bytes::from_static(b"ok"))] };
    let t = Arc::new(MemoryTransport::new(vec![slow]));
    let client = client_with(t, json!({"services": {"other": {"base_url": "http://127.0.0.1:9"}}}));
    let c = client.clone();
    let flying = tokio::spawn(async move { c.request(Request::new("svc", "GET", "/x")).await });
    while client.bulkhead_in_use("svc").unwrap() < 1 {
        tokio::task::yield_now().await;
    }
    client.reload_value(json!({"log": {"enabled": false}, "services": {"other": {"base_url": "http://127.0.0.1:9"}}})).unwrap();
    let e = client.request(Request::new("svc", "GET", "/x")).await.unwrap_err();
    assert_eq!(e.name(), "ConfigError");
    assert!(e.message.starts_with("request.service: unknown service `svc`"), "{}", e.message);
    assert_eq!(flying.await.unwrap().unwrap().status, 200);
}

#[tokio::test(start_paused = true)]
async fn reload_emits_applied_and_rejected_events() {
    let events = Arc::new(Events::default());
    let client = Client::with_options(config(json!({})), ClientOptions { sinks: vec![events.clone()], ..Default::default() }).unwrap();
    client.reload(config(json!({"services": {"svc": {"retry": {"max_retries": 3}}}}))).unwrap();
    let _ = client.reload_value(json!({"services": {"svc": {}}}));
    client.close();
    assert_eq!(events.kinds(), vec!["config_reloaded", "config_rejected"]);
    let second = events.0.lock()[1].clone();
    match second {
        Event::ConfigRejected { error, .. } => assert!(error.contains("services.svc.base_url: required"), "{error}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_is_pulled_not_read_ahead_and_records_its_outcome_at_the_end() {
    let pulled = Arc::new(AtomicUsize::new(0));
    let chunks: Vec<Chunk> = (0..100).map(|i| Chunk::Data(Bytes::from(format!("chunk-{i};")))).collect();
    let t = Arc::new(MemoryTransport::new(vec![Reply::chunks(200, chunks)]).counting(pulled.clone()));
    let events = Arc::new(Events::default());
    let t2: Arc<dyn Transport> = t;
    let client = Client::with_options(config(json!({})), ClientOptions { transport: Some(t2), sinks: vec![events.clone()], ..Default::default() }).unwrap();
    let mut s = client.stream(Request::new("svc", "GET", "/events")).await.unwrap();
    assert_eq!(s.status, 200);
    assert_eq!(pulled.load(Ordering::SeqCst), 0, "nothing read before the consumer asks");
    let first = s.next_chunk().await.unwrap().unwrap();
    assert_eq!(&first[..], b"chunk-0;");
    assert_eq!(pulled.load(Ordering::SeqCst), 1, "one chunk read per pull");
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 1, "the stream holds its permit while open");
    let mut n = 1;
    while let Some(_c) = s.next_chunk().await.unwrap() {
        n += 1;
    }
    assert_eq!(n, 100);
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    assert!(s.next_chunk().await.unwrap().is_none());
    client.close();
    let records: Vec<_> = events
        .0
        .lock()
        .iter()
        .filter_map(|e| match e {
            Event::RequestFinished(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(records.len(), 1, "one record, when the stream ended");
    assert!(records[0].streamed && records[0].status == Some(200) && records[0].error_kind.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_silent_stream_times_out_with_phase_idle_and_counts_against_the_breaker() {
    let body = vec![Chunk::Data(Bytes::from_static(b"a")), Chunk::Pause(Duration::from_secs(5)), Chunk::Data(Bytes::from_static(b"b"))];
    let t = Arc::new(MemoryTransport::new(vec![Reply::chunks(200, body)]));
    let client = client_with(t, json!({"services": {"svc": {"timeouts": {"idle_ms": 1000}, "breaker": {"failure_threshold": 1}}}}));
    let mut s = client.stream(Request::new("svc", "GET", "/sse")).await.unwrap();
    assert_eq!(&s.next_chunk().await.unwrap().unwrap()[..], b"a");
    let e = s.next_chunk().await.unwrap_err();
    assert_eq!((e.name(), e.phase()), ("TimeoutError", Some("idle")));
    assert_eq!(e.service.as_deref(), Some("svc"));
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    assert_eq!(client.breaker_state("svc", "GET", "/sse", None), "open");
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_before_its_end_is_an_error_never_a_clean_end() {
    let body = vec![Chunk::Data(Bytes::from_static(b"partial")), Chunk::Cut];
    let t = Arc::new(MemoryTransport::new(vec![Reply::chunks(200, body)]));
    let client = client_with(t, json!({}));
    let mut s = client.stream(Request::new("svc", "GET", "/x")).await.unwrap();
    s.next_chunk().await.unwrap();
    assert_eq!(s.next_chunk().await.unwrap_err().name(), "ConnectError");
    let text = client.metrics_text();
    assert!(text.contains("kind=\"ConnectError\"} 1"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_or_dropped_stream_releases_its_permit_and_is_neutral_for_the_breaker() {
    let body: Vec<Chunk> = (0..10).map(|_| Chunk::Data(Bytes::from_static(b"x"))).collect();
    let t = Arc::new(MemoryTransport::new(vec![Reply::chunks(200, body)]));
    let client = client_with(t, json!({"services": {"svc": {"breaker": {"failure_threshold": 1}}}}));
    let mut s = client.stream(Request::new("svc", "GET", "/x")).await.unwrap();
    s.next_chunk().await.unwrap();
    s.cancel();
    assert!(s.next_chunk().await.unwrap().is_none());
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    let s2 = client.stream(Request::new("svc", "GET", "/x")).await.unwrap();
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 1);
    drop(s2);
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    assert_eq!(client.breaker_state("svc", "GET", "/x", None), "closed");
    let text = client.metrics_text();
    assert!(text.contains("kind=\"CancelledError\"} 2"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_stream_handle_cancels_a_waiting_next() {
    let body = vec![Chunk::Pause(Duration::from_secs(60)), Chunk::Data(Bytes::from_static(b"late"))];
    let t = Arc::new(MemoryTransport::new(vec![Reply::chunks(200, body)]));
    let client = client_with(t, json!({}));
    let handle = harness_core::StreamHandle::new(client.stream(Request::new("svc", "GET", "/x")).await.unwrap());
    let waiting = tokio::spawn(handle.next());
    tokio::task::yield_now().await;
    handle.cancel();
    assert_eq!(waiting.await.unwrap().unwrap_err().name(), "CancelledError");
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn retries_and_bulkhead_rejections_are_events() {
    let t = Arc::new(MemoryTransport::new(vec![Reply::status(503), Reply::status(200)]));
    let events = Arc::new(Events::default());
    let t2: Arc<dyn Transport> = t;
    let client = Client::with_options(
        config(json!({"services": {"svc": {"retry": {"max_retries": 1, "jitter": false}}}})),
        ClientOptions { transport: Some(t2), sinks: vec![events.clone()], ..Default::default() },
    )
    .unwrap();
    assert_eq!(client.request(Request::new("svc", "GET", "/x")).await.unwrap().status, 200);
    client.close();
    assert_eq!(events.kinds(), vec!["retry_scheduled", "request_finished"]);
    let first = events.0.lock()[0].clone();
    match first {
        Event::RetryScheduled { attempt, delay_ms, reason, status, .. } => {
            assert_eq!((attempt, delay_ms, reason, status), (1, 200, "HttpStatusError", Some(503)));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_watched_file_reloads_within_a_second_and_an_invalid_edit_is_rejected() {
    let dir = std::env::temp_dir().join(format!("harness-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("harness.yaml");
    let write = |max: u32| {
        std::fs::write(&path, format!("log: {{ enabled: false }}\nservices:\n  svc:\n    base_url: http://127.0.0.1:9\n    retry: {{ max_retries: {max} }}\n")).unwrap();
    };
    write(1);
    let client = Client::from_file(&path, true, ClientOptions::default()).unwrap();
    let wait_for = |pred: &dyn Fn() -> bool| {
        let start = std::time::Instant::now();
        while !pred() {
            assert!(start.elapsed() < Duration::from_secs(5), "no reload within 5 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        start.elapsed()
    };
    let v1 = client.config_version();
    write(3);
    let took = wait_for(&|| client.config_version() != v1);
    assert_eq!(client.config().services["svc"].retry.max_retries, 3);
    println!("reloaded {took:?} after the write");
    let v2 = client.config_version();
    std::fs::write(&path, "services:\n  svc:\n    retry: { max_retries: -1 }\n").unwrap();
    wait_for(&|| client.metrics_text().contains("harness_config_reloads_total{result=\"rejected\"}"));
    assert_eq!(client.config_version(), v2, "an invalid edit leaves the old config");
    client.close();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_fail_no_request() {
    let u = harness_upstream::start().await.unwrap();
    let cfg = |n: u32| {
        json!({"log": {"enabled": false}, "services": {"svc": {
            "base_url": u.url(),
            "bulkhead": {"max_concurrency": 100 + n},
            "retry": {"max_retries": n % 3},
            "headers": {"x-config": format!("v{n}")},
        }}})
    };
    let client = Client::from_value(cfg(0)).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..32 {
        let (client, stop) = (client.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let mut done = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let r = client.request(Request::new("svc", "GET", "/load")).await;
                assert_eq!(r.map(|r| r.status).map_err(|e| e.to_string()), Ok(200));
                done += 1;
            }
            done
        }));
    }
    let mut reloads = 0;
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        reloads += 1;
        client.reload_value(cfg(reloads)).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for w in workers {
        total += w.await.unwrap();
    }
    let rate = total as f64 / start.elapsed().as_secs_f64();
    println!("{total} requests ({rate:.0}/s) across {reloads} reloads, none failed");
    assert!(reloads >= 50 && total > 1000, "{reloads} reloads, {total} requests");
}

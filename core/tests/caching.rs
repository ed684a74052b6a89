//! Caching and coalescing as a caller sees them, beyond what the vectors express: 200
//! identical GETs with 50 of them cancelled, `cache_clear`, the metrics and the record.
//! The RFC 9111 rules themselves are the shared vectors (`cache_*`).

use std::sync::Arc;
use std::time::Duration;

use harness_core::{Client, Event, EventSink, Operation, Request, RequestRecord};
use parking_lot::Mutex;
use serde_json::{json, Value};

async fn upstream() -> harness_upstream::Upstream {
    let _ = rustls::crypto::ring::default_provider().install_default();
    harness_upstream::start().await.unwrap()
}

async fn script(u: &harness_upstream::Upstream, name: &str, steps: Value) {
    let body = json!({ "steps": steps }).to_string();
    let r = reqwest::Client::new().put(format!("{}/__admin/script/{name}", u.url())).body(body).send().await.unwrap();
    assert!(r.status().is_success());
}

async fn requests(u: &harness_upstream::Upstream, name: &str) -> u64 {
    let text = reqwest::get(format!("{}/__admin/stats/{name}", u.url())).await.unwrap().text().await.unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["requests"].as_u64().unwrap()
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
async fn two_hundred_identical_gets_make_one_call_and_cancelling_fifty_changes_nothing_for_the_rest() {
    let u = upstream().await;
    script(&u, "burst", json!([{ "delay_ms": 400, "body": "the answer" }])).await;
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": u.url(), "cache": {"coalesce": true}, "bulkhead": {"max_concurrency": 1000}}}
    }))
    .unwrap();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let task = Operation::Request(client.clone(), Request::new("svc", "GET", "/s/burst/item")).start().spawn().unwrap();
        // Every fourth caller gives up after 100 ms, the first (the leader) among them.
        let cancel = i % 4 == 0;
        tasks.push(tokio::spawn(async move {
            if cancel {
                match tokio::time::timeout(Duration::from_millis(100), task).await {
                    Err(_) => None,
                    Ok(_) => Some(Err("a cancelled caller was answered within 100 ms".to_string())),
                }
            } else {
                Some(match task.await {
                    Ok(Ok(harness_core::op::Outcome::Response(r))) if &r.body[..] == b"the answer" => Ok(()),
                    Ok(Ok(_)) => Err("not the shared answer".to_string()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(e) => Err(format!("{e:?}")),
                })
            }
        }));
    }
    let mut answered = 0;
    let mut cancelled = 0;
    for t in tasks {
        match t.await.unwrap() {
            Some(Ok(())) => answered += 1,
            Some(Err(e)) => panic!("a caller failed: {e}"),
            None => cancelled += 1,
        }
    }
    assert_eq!((answered, cancelled), (150, 50));
    assert_eq!(requests(&u, "burst").await, 1, "one downstream call for 200 callers");
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    let metrics = client.metrics_text();
    assert!(metrics.contains("outcome=\"coalesced\""), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_caller_cancels_the_shared_call_is_dropped() {
    let u = upstream().await;
    script(&u, "gone", json!([{ "delay_ms": 2000 }])).await;
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": u.url(), "cache": {"coalesce": true}}}
    }))
    .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let task = Operation::Request(client.clone(), Request::new("svc", "GET", "/s/gone/x")).start().spawn().unwrap();
        tasks.push(tokio::spawn(async move { tokio::time::timeout(Duration::from_millis(100), task).await.is_err() }));
    }
    for t in tasks {
        assert!(t.await.unwrap(), "cancelled");
    }
    // The permit goes with the dropped call (asynchronously).
    let until = std::time::Instant::now() + Duration::from_secs(2);
    while client.bulkhead_in_use("svc").unwrap() != 0 && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(client.bulkhead_in_use("svc").unwrap(), 0);
    // A new caller starts a new call rather than joining the abandoned one.
    script(&u, "gone", json!([{ "body": "fresh" }])).await;
    let r = client.request(Request::new("svc", "GET", "/s/gone/x")).await.unwrap();
    assert_eq!(&r.body[..], b"fresh");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hit_is_recorded_counted_and_cleared_by_name() {
    let u = upstream().await;
    script(&u, "clear", json!([{ "headers": {"cache-control": "max-age=60"}, "body": "v1" }, { "headers": {"cache-control": "max-age=60"}, "body": "v2" }])).await;
    let capture = Arc::new(Capture::default());
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": u.url(), "cache": {"http": true}}, "other": {"base_url": u.url()}}
    }))
    .unwrap();
    client.add_listener(capture.clone());
    let first = client.request(Request::new("svc", "GET", "/s/clear/a")).await.unwrap();
    let hit = client.request(Request::new("svc", "GET", "/s/clear/a")).await.unwrap();
    assert_eq!((&first.body[..], first.from_cache(), first.attempts), (&b"v1"[..], false, 1));
    assert_eq!((&hit.body[..], hit.from_cache(), hit.attempts), (&b"v1"[..], true, 0));
    assert!(hit.header("age").is_some(), "a stored answer says its age");
    assert_eq!(client.cache_clear(Some("other")).unwrap(), 0, "another service's entries stay");
    assert_eq!(client.cache_clear(Some("svc")).unwrap(), 1);
    let after = client.request(Request::new("svc", "GET", "/s/clear/a")).await.unwrap();
    assert_eq!((&after.body[..], after.from_cache()), (&b"v2"[..], false));
    let e = client.cache_clear(Some("nope")).unwrap_err();
    assert!(e.message.contains("nope"), "{e}");
    client.flush();
    let outcomes: Vec<Option<&str>> = capture.0.lock().iter().map(|r| r.cache).collect();
    assert_eq!(outcomes, vec![Some("miss"), Some("hit"), Some("miss")]);
    let metrics = client.metrics_text();
    assert!(metrics.contains("harness_cache_total{service=\"svc\""), "{metrics}");
    assert!(metrics.contains("outcome=\"hit\"} 1"), "{metrics}");
}

async fn provider(u: &harness_upstream::Upstream, name: &str, spec: Value) {
    let r = reqwest::Client::new().post(format!("{}/__admin/provider/{name}", u.url())).body(spec.to_string()).send().await.unwrap();
    assert!(r.status().is_success());
}

async fn provider_requests(u: &harness_upstream::Upstream, name: &str) -> u64 {
    let text = reqwest::get(format!("{}/__admin/provider-log/{name}", u.url())).await.unwrap().text().await.unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["count"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_semantic_cache_keeps_tenants_apart_and_says_how_close_the_hit_was() {
    let u = upstream().await;
    provider(&u, "sem-chat", json!({"content": "Paris.", "prompt_tokens": 1000, "completion_tokens": 1000})).await;
    provider(&u, "sem-emb", json!({"embedding": "words", "dimensions": 256})).await;
    let capture = Arc::new(Capture::default());
    let client = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {"chat": {"base_url": format!("{}/llm/sem-chat", u.url())}, "emb": {"base_url": format!("{}/llm/sem-emb", u.url())}},
        "routes": {
            "answers": {"adapter": "openai-compatible", "providers": [{"id": "main", "service": "chat", "model": "m", "weight": 1, "price": {"input_per_1k": 0.01, "output_per_1k": 0.02}}],
                        "cache": {"semantic": {"embeddings_route": "embed", "threshold": 0.9}}},
            "embed": {"kind": "embeddings", "adapter": "openai-compatible", "providers": [{"id": "e", "service": "emb", "model": "e", "weight": 1}]}
        }
    }))
    .unwrap();
    client.add_listener(capture.clone());
    let ask = |text: &str, tenant: &str| {
        let mut c = harness_core::ChatRequest::new(json!([{"role": "user", "content": text}]));
        c.params.insert("temperature".into(), json!(0));
        c.principal = Some(tenant.to_string());
        c
    };
    let first = client.chat("answers", ask("What is the capital of France?", "t1")).await.unwrap();
    assert!(first.cache.is_none() && first.cost.is_some());
    let hit = client.chat("answers", ask("what is the capital city of France", "t1")).await.unwrap();
    let stamp = hit.cache.clone().expect("a semantic hit");
    assert_eq!((stamp.outcome, hit.content.as_str(), hit.attempts, hit.cost), ("semantic", "Paris.", 0, None));
    let similarity = stamp.similarity.unwrap();
    assert!((0.9..=1.0).contains(&similarity), "{similarity}");
    assert_eq!(stamp.saved_cost, first.cost, "the hit saved what the first answer cost");
    let other = client.chat("answers", ask("What is the capital of France?", "t2")).await.unwrap();
    assert!(other.cache.is_none(), "another tenant's identical prompt is not served the first tenant's answer");
    assert_eq!(provider_requests(&u, "sem-chat").await, 2);
    client.flush();
    let records: Vec<RequestRecord> = capture.0.lock().iter().filter(|r| r.route.as_deref() == Some("answers")).cloned().collect();
    let hit_record = records.iter().find(|r| r.cache == Some("semantic")).expect("the hit's record");
    assert_eq!(hit_record.cache_similarity, Some(similarity));
    assert_eq!(hit_record.cache_saved_cost, first.cost);
    let metrics = client.metrics_text();
    assert!(metrics.contains("outcome=\"semantic\"} 1"), "{metrics}");
    assert!(metrics.contains("harness_cache_saved_cost_total{service=\"answers\"}"), "{metrics}");
    assert_eq!(client.cache_clear(Some("answers")).unwrap() > 0, true);
    let after = client.chat("answers", ask("what is the capital city of France", "t1")).await.unwrap();
    assert!(after.cache.is_none(), "cleared");
}

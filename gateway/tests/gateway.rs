//! The gateway against the real loopback upstream (simulated model providers and scripts),
//! called over real HTTP: the OpenAI-compatible API, callers, the admin API, errors, hostile
//! callers, reload and drain under load.
#![allow(clippy::result_large_err)]

use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_gateway::{sha256_hex, Loaded, Started};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ANN: &str = "sk-ann-0123456789";
const BOB: &str = "sk-bob-0123456789";
const ADMIN: &str = "admin-key-0123456789";

struct World {
    up: harness_upstream::Upstream,
    http: reqwest::Client,
}

impl World {
    async fn new() -> World {
        let _ = rustls::crypto::ring::default_provider().install_default();
        World { up: harness_upstream::start().await.unwrap(), http: reqwest::Client::new() }
    }

    async fn provider(&self, name: &str, spec: Value) {
        let r = self.http.post(format!("{}/__admin/provider/{name}", self.up.url())).body(spec.to_string()).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }

    async fn provider_count(&self, name: &str) -> u64 {
        let v: Value = serde_json::from_slice(&self.http.get(format!("{}/__admin/provider-log/{name}", self.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
        v["count"].as_u64().unwrap()
    }

    async fn script(&self, name: &str, steps: Value) {
        let r = self.http.put(format!("{}/__admin/script/{name}", self.up.url())).body(json!({"steps": steps}).to_string()).send().await.unwrap();
        assert!(r.status().is_success());
    }

    async fn script_log(&self, name: &str) -> Value {
        serde_json::from_slice(&self.http.get(format!("{}/__admin/log/{name}", self.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap()
    }

    /// Two providers for route `chat` (`{p}-a` preferred, `{p}-b`), a plain service `orders`
    /// holding its own credential, and callers ann (everything) and bob (orders only, 1 rps).
    fn config(&self, p: &str, extra: Value) -> Value {
        let u = self.up.url();
        let mut c = json!({
            "log": {"enabled": false},
            "services": {
                format!("{p}-a"): {"base_url": format!("{u}/llm/{p}-a"), "retry": {"max_retries": 0}, "timeouts": {"response_ms": 2000}},
                format!("{p}-b"): {"base_url": format!("{u}/llm/{p}-b"), "retry": {"max_retries": 0}, "timeouts": {"response_ms": 2000}},
                "orders": {"base_url": u, "headers": {"authorization": "Bearer svc-secret-orders"}, "retry": {"max_retries": 0}, "timeouts": {"response_ms": 300}},
            },
            "routes": {"chat": {"adapter": "openai-compatible", "strategy": "priority", "providers": [
                {"id": "a", "service": format!("{p}-a"), "model": "model-a", "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 1.0}},
                {"id": "b", "service": format!("{p}-b"), "model": "model-b", "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 1.0}}]}},
            "callers": {
                "ann": {"key_sha256": sha256_hex(ANN.as_bytes()), "routes": ["*"], "services": ["*"]},
                "bob": {"key_sha256": sha256_hex(BOB.as_bytes()), "services": ["orders"], "rate_limit": {"rps": 1, "burst": 1, "max_wait_ms": 0}},
            },
            "gateway": {"admin_key_sha256": sha256_hex(ADMIN.as_bytes()), "max_body_bytes": 4096, "max_header_bytes": 8192, "header_timeout_ms": 300, "drain_ms": 5000},
        });
        merge(&mut c, &extra);
        c
    }

    async fn gateway(&self, config: Value) -> Started {
        harness_gateway::start(Loaded::from_value(config).unwrap(), None, "127.0.0.1:0").await.unwrap()
    }
}

use harness_upstream::merge_json as merge;

fn url(g: &Started, path: &str) -> String {
    format!("http://{}{path}", g.addr)
}

async fn post(http: &reqwest::Client, g: &Started, key: Option<&str>, path: &str, body: Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut r = http.post(url(g, path)).header("content-type", "application/json").body(body.to_string());
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    let resp = r.send().await.unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let bytes = resp.bytes().await.unwrap();
    (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into())))
}

/// Sends `head` as is and returns the answer's status.
async fn raw_status(g: &Started, head: &str) -> u16 {
    let mut s = tokio::net::TcpStream::connect(g.addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

fn hello(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_models_and_costs_in_the_openai_shape() {
    let w = World::new().await;
    w.provider("g1-a", json!({"content": "hello from a", "prompt_tokens": 100, "completion_tokens": 100, "cached_tokens": 40})).await;
    w.provider("g1-b", json!({"content": "hello from b"})).await;
    let g = w.gateway(w.config("g1", json!({}))).await;
    let (status, headers, v) = post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "hello from a");
    assert_eq!(v["model"], "model-a");
    assert_eq!(v["usage"]["total_tokens"], 200);
    // The prompt-cache hit is passed on in the shape OpenAI's SDKs read.
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 40, "{v}");
    assert!((v["harness"]["cost"].as_f64().unwrap() - 0.2).abs() < 1e-9, "cached input at the input rate when no cached rate is set");
    assert_eq!(headers["x-harness-trace-id"].to_str().unwrap(), v["harness"]["trace_id"].as_str().unwrap());
    // route/model pins the model.
    let (_, _, v) = post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat/model-b")).await;
    assert_eq!(v["choices"][0]["message"]["content"], "hello from b");
    // Models: the routes and their models, for this caller.
    let models: Value = serde_json::from_slice(&w.http.get(url(&g, "/v1/models")).bearer_auth(ANN).send().await.unwrap().bytes().await.unwrap()).unwrap();
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["chat", "chat/model-a", "chat/model-b"]);
    let models: Value = serde_json::from_slice(&w.http.get(url(&g, "/v1/models")).bearer_auth(BOB).send().await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(models["data"].as_array().unwrap().len(), 0, "bob may use no route");
    // Caller identity in the metrics and cost.
    let m = w.http.get(url(&g, "/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("harness_gateway_requests_total{caller=\"ann\",api=\"chat\",target=\"chat\",status=\"200\"} 2"), "{m}");
    assert!(m.contains("harness_gateway_cost_total{caller=\"ann\"} 0.2"), "{m}");
    assert!(m.contains("harness_requests_total{"), "the core's series too");
    assert_eq!(m.matches("# EOF").count(), 1);
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_fails_over_mid_answer_and_ends_with_done() {
    let w = World::new().await;
    w.provider("g2-a", json!({"content": "one two three four five six", "stream": {"cut_after": 2, "done": true}})).await;
    w.provider("g2-b", json!({"content": "alpha beta gamma", "prompt_tokens": 10, "cached_tokens": 3, "stream": {"done": true, "usage": true}})).await;
    let g = w.gateway(w.config("g2", json!({}))).await;
    let mut body = hello("chat");
    body["stream"] = json!(true);
    let resp = w.http.post(url(&g, "/v1/chat/completions")).bearer_auth(ANN).body(body.to_string()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    let events: Vec<Value> = text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")).filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect();
    let content: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(content.contains("alpha") && content.contains("gamma"), "{content} / {text}");
    assert!(text.trim_end().ends_with("data: [DONE]"));
    assert!(events.iter().all(|e| e["object"] == "chat.completion.chunk"));
    assert_eq!(events.last().unwrap()["model"], "model-b", "the model that answered");
    assert_eq!(events.last().unwrap()["choices"][0]["finish_reason"], "stop");
    assert_eq!(events.last().unwrap()["usage"]["prompt_tokens_details"]["cached_tokens"], 3, "{text}");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_without_a_valid_key_or_leave_get_nothing_forwarded() {
    let w = World::new().await;
    w.provider("g3-a", json!({"content": "x", "prompt_tokens": 1000, "completion_tokens": 0})).await;
    w.provider("g3-b", json!({"content": "y"})).await;
    w.script("g3", json!([{"status": 200, "json": {"ok": true}}])).await;
    let g = w.gateway(w.config("g3", json!({"callers": {"ann": {"budget_per_day": 1.5}}}))).await;
    for key in [None, Some("sk-wrong")] {
        let (status, _, v) = post(&w.http, &g, key, "/v1/chat/completions", hello("chat")).await;
        assert_eq!((status, v["error"]["code"].as_str(), v["error"]["type"].as_str()), (401, Some("invalid_api_key"), Some("invalid_request_error")));
    }
    assert_eq!(w.provider_count("g3-a").await, 0, "nothing forwarded without a key");
    let (status, _, v) = post(&w.http, &g, Some(BOB), "/v1/chat/completions", hello("chat")).await;
    assert_eq!((status, v["error"]["code"].as_str()), (403, Some("not_allowed")));
    let (status, _, v) = post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("nope")).await;
    assert_eq!((status, v["error"]["code"].as_str()), (404, Some("model_not_found")));
    // bob: one request per second.
    let get = |key: &'static str| w.http.get(url(&g, "/v1/services/orders/s/g3/1")).bearer_auth(key).send();
    assert_eq!(get(BOB).await.unwrap().status(), 200);
    let limited = get(BOB).await.unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().get("retry-after").is_some());
    let v: Value = serde_json::from_slice(&limited.bytes().await.unwrap()).unwrap();
    assert_eq!((v["error"]["harness_kind"].as_str(), v["error"]["type"].as_str()), (Some("RateLimitedError"), Some("rate_limit_error")));
    // ann's budget: 1.5 a day; each answer costs 1.0.
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await.0, 200);
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await.0, 200);
    let (status, headers, v) = post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await;
    assert_eq!((status, v["error"]["code"].as_str()), (429, Some("budget_exceeded")));
    assert!(headers.get("retry-after").is_some());
    assert_eq!(w.provider_count("g3-a").await, 2, "the refused call was not forwarded");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_pass_through_without_the_callers_credentials_or_a_way_out() {
    let w = World::new().await;
    w.script("g4", json!([{"status": 200, "json": {"ok": true}, "headers": {"etag": "\"v1\"", "set-cookie": "a=b"}}, {"status": 404, "json": {"error": "no such order"}}])).await;
    let g = w.gateway(w.config("g4", json!({}))).await;
    let r = w.http.post(url(&g, "/v1/services/orders/s/g4/orders?x=1")).bearer_auth(ANN).header("content-type", "application/json")
        .header("cookie", "session=caller").header("x-forwarded-host", "evil").body("{\"n\":1}").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["etag"], "\"v1\"");
    assert!(r.headers().get("set-cookie").is_none());
    let log = w.script_log("g4").await;
    let sent = &log["requests"][0];
    assert_eq!(sent["path"], "/s/g4/orders?x=1");
    assert_eq!(sent["headers"]["authorization"], "Bearer svc-secret-orders", "the service's own credential, not the caller's key");
    assert!(sent["headers"].get("cookie").is_none() && sent["headers"].get("x-forwarded-host").is_none());
    assert_eq!(sent["body"], "{\"n\":1}");
    // The downstream's own 404 comes back as it is.
    let r = w.http.get(url(&g, "/v1/services/orders/s/g4/orders/9")).bearer_auth(ANN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.unwrap(), "{\"error\":\"no such order\"}");
    // No way out of the service's base URL, however spelled.
    // (Sent raw: an HTTP client library would resolve the dots itself.)
    for path in ["/v1/services/orders/s/../../etc/passwd", "/v1/services/orders/s/%2e%2e/x", "/v1/services/orders/s/%252e%252e/x", "/v1/services/orders/..%2f..%2fx"] {
        let status = raw_status(&g, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ANN}\r\nConnection: close\r\n\r\n")).await;
        assert_eq!(status, 400, "{path}");
    }
    assert_eq!(w.script_log("g4").await["requests"].as_array().unwrap().len(), 2);
    // A timeout is a 504, an open breaker a 503, in the OpenAI shape with the Harness kind.
    w.script("g4slow", json!([{"status": 200, "delay_ms": 1000}])).await;
    let r = w.http.get(url(&g, "/v1/services/orders/s/g4slow/x")).bearer_auth(ANN).send().await.unwrap();
    assert_eq!(r.status(), 504);
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(v["error"]["harness_kind"], "TimeoutError");
    assert_eq!(v["error"]["trace_id"].as_str().unwrap().len(), 32);
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_does_each_operation_and_refuses_without_its_key() {
    let w = World::new().await;
    w.provider("g5-a", json!({"content": "from a"})).await;
    w.provider("g5-b", json!({"content": "from b"})).await;
    let g = w.gateway(w.config("g5", json!({}))).await;
    let admin = |method: reqwest::Method, path: &str, key: Option<&str>, body: Option<String>| {
        let mut r = w.http.request(method, url(&g, path));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        if let Some(b) = body {
            r = r.body(b);
        }
        async move {
            let resp = r.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, serde_json::from_slice::<Value>(&resp.bytes().await.unwrap()).unwrap_or(Value::Null))
        }
    };
    use reqwest::Method as M;
    for key in [None, Some(ANN)] {
        assert_eq!(admin(M::GET, "/admin/routes", key, None).await.0, 401, "an API key is not the admin key");
    }
    let (s, v) = admin(M::GET, "/admin/routes/chat", Some(ADMIN), None).await;
    assert_eq!((s, v["providers"].as_array().unwrap().len()), (200, 2));
    let (s, _) = admin(M::POST, "/admin/routes/chat/providers/a/weight", Some(ADMIN), Some(json!({"weight": 0}).to_string())).await;
    assert_eq!(s, 200);
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await.2["choices"][0]["message"]["content"], "from b", "a at weight 0");
    // A direct test call reaches a provider at weight 0.
    let (s, v) = admin(M::POST, "/admin/routes/chat/providers/a/test", Some(ADMIN), None).await;
    assert_eq!((s, v["ok"].as_bool(), v["body"]["choices"][0]["message"]["content"].as_str()), (200, Some(true), Some("from a")), "{v}");
    // Breakers by hand.
    let ep = json!({"service": "orders", "method": "GET", "endpoint": "/x"}).to_string();
    assert_eq!(admin(M::POST, "/admin/breakers/open", Some(ADMIN), Some(ep.clone())).await.0, 200);
    let r = w.http.get(url(&g, "/v1/services/orders/x")).bearer_auth(ANN).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let (_, v) = admin(M::GET, "/admin/breakers", Some(ADMIN), None).await;
    assert!(v["breakers"].as_array().unwrap().iter().any(|b| b["endpoint"] == "/x" && b["state"] == "open"), "{v}");
    assert_eq!(admin(M::POST, "/admin/breakers/close", Some(ADMIN), Some(ep)).await.0, 200);
    assert_eq!(w.http.get(url(&g, "/v1/services/orders/x")).bearer_auth(ANN).send().await.unwrap().status(), 200);
    let (s, v) = admin(M::GET, "/admin/credentials", Some(ADMIN), None).await;
    assert!(s == 200 && !v.to_string().contains("svc-secret"), "{v}");
    // Reload: a bad config is refused with the field path, and the old one stays.
    let (s, v) = admin(M::POST, "/admin/reload", Some(ADMIN), Some("services:\n  orders:\n    base_url: ftp://x\n".into())).await;
    assert_eq!(s, 400);
    assert!(v["error"]["message"].as_str().unwrap().contains("services.orders.base_url"), "{v}");
    let mut next = w.config("g5", json!({}));
    next["callers"]["ann"]["routes"] = json!([]);
    let (s, v) = admin(M::POST, "/admin/reload", Some(ADMIN), Some(next.to_string())).await;
    assert_eq!(s, 200, "JSON is YAML too: {v}");
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await.0, 403, "ann's routes were taken away");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_health_readiness_and_hostile_callers() {
    let w = World::new().await;
    w.provider("g6-a", json!({"fail_rate": 1.0})).await;
    w.provider("g6-b", json!({"fail_rate": 1.0})).await;
    let g = w.gateway(w.config("g6", json!({}))).await;
    assert_eq!(w.http.get(url(&g, "/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(w.http.get(url(&g, "/readyz")).send().await.unwrap().status(), 200);
    let (status, _, v) = post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await;
    assert_eq!((status, v["error"]["harness_kind"].as_str()), (503, Some("NoHealthyProviderError")), "{v}");
    // An oversized body: 413, nothing forwarded.
    let big = json!({"model": "chat", "messages": [{"role": "user", "content": "x".repeat(10_000)}]});
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", big).await.0, 413);
    // An oversized head: refused (431), the connection closed.
    let big_head = format!("GET /healthz HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n", "y".repeat(20_000));
    assert_eq!(raw_status(&g, &big_head).await, 431);
    assert_eq!(raw_status(&g, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await, 200);
    // Slow loris: a head that never completes is dropped after header_timeout_ms.
    let mut s = tokio::net::TcpStream::connect(g.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf)).await.expect("the server closes a slow head").unwrap_or(0);
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert!(!String::from_utf8_lossy(&buf[..n]).contains(" 200 "), "a head that never completed was not served");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_and_drain_under_load_drop_no_request() {
    let w = World::new().await;
    w.script("g7", json!([{"status": 200, "json": {"ok": true}, "delay_ms": 20}])).await;
    let mut g = w.gateway(w.config("g7", json!({}))).await;
    let gw = g.gateway.clone();
    let addr = g.addr;
    let http = reqwest::Client::new();
    let draining = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let (http, draining) = (http.clone(), draining.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0;
            for _ in 0..10 {
                let r = http.get(format!("http://{addr}/v1/services/orders/s/g7/{i}")).bearer_auth(ANN).send().await;
                match r {
                    Ok(r) if r.status() == 200 => ok += 1,
                    Ok(r) => panic!("status {}", r.status()),
                    // Once draining, a new request on a closing connection (or a new connection)
                    // is refused before it is read: the caller sees it was not taken.
                    Err(_) if draining.load(std::sync::atomic::Ordering::SeqCst) => break,
                    Err(e) => panic!("before the drain: {e}"),
                }
            }
            ok
        }));
    }
    tokio::time::sleep(Duration::from_millis(60)).await;
    for _ in 0..3 {
        let mut next = w.config("g7", json!({}));
        next["services"]["orders"]["timeouts"]["response_ms"] = json!(900);
        gw.reload(Loaded::from_value(next).unwrap()).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(60)).await;
    draining.store(true, std::sync::atomic::Ordering::SeqCst);
    g.begin_shutdown();
    let mut ok = 0;
    for t in tasks {
        ok += t.await.expect("no request failed during reload and drain");
    }
    g.wait().await;
    let served = w.script_log("g7").await["requests"].as_array().unwrap().len();
    assert_eq!(ok, served, "every request the upstream served reached its caller");
    assert!(ok > 40, "{ok}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_sharing_one_redis_enforce_one_caller_limit_together() {
    let w = World::new().await;
    w.script("g8", json!([{"status": 200, "json": {"ok": true}}])).await;
    let redis = harness_upstream::redis_server::RedisServer::start();
    let shared = json!({"callers": {"bob": {"rate_limit": {"rps": 5, "burst": 5, "max_wait_ms": 0,
        "shared": {"redis_url": redis.url(), "key": "caller-bob", "expected_instances": 2}}}}});
    let (g1, g2) = (w.gateway(w.config("g8", shared.clone())).await, w.gateway(w.config("g8", shared)).await);
    // 20 calls alternating between the two instances, at once: the fleet allows the burst (5).
    let mut calls = Vec::new();
    for i in 0..20 {
        let u = url(if i % 2 == 0 { &g1 } else { &g2 }, &format!("/v1/services/orders/s/g8/{i}"));
        let http = w.http.clone();
        calls.push(tokio::spawn(async move { http.get(u).bearer_auth(BOB).send().await.unwrap().status().as_u16() }));
    }
    let mut ok = 0;
    for c in calls {
        match c.await.unwrap() {
            200 => ok += 1,
            429 => {}
            other => panic!("status {other}"),
        }
    }
    assert!((5..=6).contains(&ok), "{ok} of 20 passed the shared limit of burst 5 (each instance alone would pass 5)");
    assert_eq!(w.script_log("g8").await["requests"].as_array().unwrap().len(), ok);
    g1.shutdown().await;
    g2.shutdown().await;
}

/// `harness serve` as a real process, read as an operator reads it: this test binary run again
/// with only `serve_child_process` (below), which serves a config file through
/// `harness_gateway::run`, what the CLI's `serve` calls. Its stderr lines are kept.
struct ServeProcess {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl ServeProcess {
    fn start(config: &Value) -> ServeProcess {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!("harness-gw-{}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("harness.json");
        std::fs::write(&path, config.to_string()).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "serve_child_process", "--ignored", "--nocapture", "--test-threads", "1"])
            .env("HARNESS_GW_CHILD", &path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (lines, pipe) = (stderr.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let started = std::time::Instant::now();
        let addr = loop {
            let listening = stderr.lock().unwrap().iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|v| v["event"] == "harness.gateway_listening");
            if let Some(v) = listening {
                break v["addr"].as_str().unwrap().parse().unwrap();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "harness serve did not start: {:?}", stderr.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        };
        ServeProcess { child, addr, stderr }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The access log lines written so far (`{"event": "harness.gateway", ...}`).
    fn access_log(&self) -> Vec<Value> {
        self.stderr.lock().unwrap().iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == "harness.gateway").collect()
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gateway process of `ServeProcess` (does nothing when run on its own).
#[test]
#[ignore = "started by ServeProcess as `harness serve` in a child process"]
fn serve_child_process() {
    let Ok(config) = std::env::var("HARNESS_GW_CHILD") else { return };
    let _ = rustls::crypto::ring::default_provider().install_default();
    harness_gateway::run(&config, "127.0.0.1:0").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_access_log_line_carries_the_trace_id_of_an_upstream_error() {
    let w = World::new().await;
    w.provider("g9-a", json!({"fail_rate": 1.0, "fail_status": 400, "error_code": "bad_input", "error_type": "invalid_request_error"})).await;
    w.provider("g9-b", json!({"fail_rate": 1.0, "fail_status": 400, "error_code": "bad_input", "error_type": "invalid_request_error"})).await;
    w.script("g9", json!([{"status": 400, "json": {"error": "bad order"}}, {"status": 200, "delay_ms": 1000}])).await;
    let g = ServeProcess::start(&w.config("g9", json!({})));
    let mut traces = Vec::new();
    // A chat whose provider answered 400.
    let r = w.http.post(g.url("/v1/chat/completions")).bearer_auth(ANN).body(hello("chat").to_string()).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    traces.push(("chat", 400, v["error"]["trace_id"].as_str().expect("the error body names the trace").to_string()));
    // A service call the downstream answered 400, and one that timed out (504).
    let r = w.http.get(g.url("/v1/services/orders/s/g9/1")).bearer_auth(ANN).send().await.unwrap();
    assert_eq!(r.status(), 400);
    traces.push(("service", 400, r.headers()["x-harness-trace-id"].to_str().unwrap().to_string()));
    let r = w.http.get(g.url("/v1/services/orders/s/g9/2")).bearer_auth(ANN).send().await.unwrap();
    assert_eq!(r.status(), 504);
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    traces.push(("service", 504, v["error"]["trace_id"].as_str().unwrap().to_string()));
    for (api, status, trace) in traces {
        assert_eq!(trace.len(), 32);
        let started = std::time::Instant::now();
        loop {
            let log = g.access_log();
            let line = log.iter().find(|l| l["api"] == api && l["status"] == status);
            match line {
                Some(l) => {
                    assert_eq!(l["trace_id"].as_str(), Some(trace.as_str()), "{api} {status}: {l}");
                    break;
                }
                None if started.elapsed() < Duration::from_secs(5) => tokio::time::sleep(Duration::from_millis(20)).await,
                None => panic!("no access log line for {api} {status}: {log:?}"),
            }
        }
    }
}

const CAROL: &str = "sk-carol-0123456789";

/// Every line of a Prometheus text exposition is a comment or one well-formed sample, and no
/// sample is named `forged_total`.
fn assert_one_sample_per_line(text: &str) {
    let sample = regex::Regex::new(r#"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*")*\})? [^ ]+$"#).unwrap();
    for line in text.lines() {
        assert!(line.starts_with("# ") || sample.is_match(line), "not one sample: {line:?}\n{text}");
        assert!(!line.starts_with("forged"), "a forged sample: {line:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_labels_are_escaped_so_no_caller_can_forge_or_break_a_sample() {
    let w = World::new().await;
    w.provider("g10-a", json!({"content": "a"})).await;
    w.provider("g10-b", json!({"content": "b"})).await;
    w.script("g10", json!([{"status": 200, "json": {"ok": true}}])).await;
    let mut config = w.config("g10", json!({"callers": {"carol\\": {"key_sha256": sha256_hex(CAROL.as_bytes()), "routes": ["*"], "services": ["*"]}}}));
    config["services"]["we\"ird"] = json!({"base_url": w.up.url(), "retry": {"max_retries": 0}});
    let g = w.gateway(config).await;
    // A caller name ending in `\`, a service name with `"`, a model name that tries to end
    // the label and start a sample of its own.
    assert_eq!(post(&w.http, &g, Some(CAROL), "/v1/chat/completions", hello("chat")).await.0, 200);
    assert_eq!(w.http.get(url(&g, "/v1/services/we%22ird/s/g10/1")).bearer_auth(CAROL).send().await.unwrap().status(), 404, "the raw path names `we%22ird`");
    let status = raw_status(&g, &format!("GET /v1/services/we\"ird/s/g10/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ANN}\r\nConnection: close\r\n\r\n")).await;
    assert_eq!(status, 200, "a `\"` in a path segment reaches the service of that name");
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("nope\"} 1\nforged_total 42\nx{a=\"")).await.0, 404);
    let m = w.http.get(url(&g, "/metrics")).send().await.unwrap().text().await.unwrap();
    assert_one_sample_per_line(&m);
    assert!(m.contains(r#"harness_gateway_requests_total{caller="carol\\",api="chat",target="chat",status="200"} 1"#), "{m}");
    assert!(m.contains(r#"target="we\"ird",status="200"} 1"#), "{m}");
    g.shutdown().await;
}

/// The samples of a scrape (lines that are not comments).
fn samples(text: &str) -> Vec<String> {
    text.lines().filter(|l| !l.starts_with('#')).map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_models_and_services_share_one_metric_series() {
    let w = World::new().await;
    w.provider("g11-a", json!({"content": "a"})).await;
    w.provider("g11-b", json!({"content": "b"})).await;
    let g = w.gateway(w.config("g11", json!({}))).await;
    // One of each first, so that every series these requests can touch exists.
    let round = |i: usize| {
        let (http, chat, svc, pinned) = (w.http.clone(), url(&g, "/v1/chat/completions"), url(&g, &format!("/v1/services/nope-{i}/x")), hello(&format!("chat/nope-{i}")));
        async move {
            let statuses = [
                http.post(&chat).bearer_auth(ANN).body(hello(&format!("nope-{i}")).to_string()).send().await.unwrap().status().as_u16(),
                http.get(&svc).bearer_auth(ANN).send().await.unwrap().status().as_u16(),
                http.post(&chat).bearer_auth(ANN).body(pinned.to_string()).send().await.unwrap().status().as_u16(),
            ];
            assert_eq!(&statuses[..2], &[404, 404]);
        }
    };
    round(0).await;
    let before = samples(&w.http.get(url(&g, "/metrics")).send().await.unwrap().text().await.unwrap());
    for i in 1..=200 {
        round(i).await;
    }
    let text = w.http.get(url(&g, "/metrics")).send().await.unwrap().text().await.unwrap();
    let after = samples(&text);
    let added: Vec<&String> = after.iter().filter(|l| !before.iter().any(|b| b.split(' ').next() == l.split(' ').next())).collect();
    assert!(added.is_empty(), "600 requests naming 400 unknown targets added series: {added:#?}");
    assert_eq!(after.len(), before.len(), "600 requests naming 400 unknown targets added series:\n{text}");
    assert!(text.contains(r#"harness_gateway_requests_total{caller="ann",api="chat",target="{unknown}",status="404"} 201"#), "{text}");
    assert!(text.contains(r#"harness_gateway_requests_total{caller="ann",api="service",target="{unknown}",status="404"} 201"#), "{text}");
    g.shutdown().await;
}

/// Sends `head` (and nothing more, keeping the connection open) and returns the answer's
/// status and how long it took (status 0: no answer within 5 s).
async fn raw_status_timed(g: &Started, head: &str) -> (u16, Duration) {
    let started = std::time::Instant::now();
    let mut s = tokio::net::TcpStream::connect(g.addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // Until the status line is in (the connection stays open on our side).
    while !String::from_utf8_lossy(&out).contains("\r\n") && started.elapsed() < Duration::from_secs(5) {
        match tokio::time::timeout(Duration::from_secs(5) - started.elapsed().min(Duration::from_secs(5)), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&out);
    (text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_times_out_and_an_oversized_declared_length_is_refused_before_reading() {
    let w = World::new().await;
    w.provider("g12-a", json!({"content": "a"})).await;
    w.provider("g12-b", json!({"content": "b"})).await;
    let g = w.gateway(w.config("g12", json!({"gateway": {"body_timeout_ms": 500}}))).await;
    let head = |len: &str| format!("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ANN}\r\ncontent-type: application/json\r\nContent-Length: {len}\r\n\r\n");
    // 10^12 bytes declared, none sent: 413 at once.
    let (status, took) = raw_status_timed(&g, &head("1000000000000")).await;
    assert_eq!(status, 413, "after {took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}: not read first");
    // 10 of 100 bytes, then silence: 408 after body_timeout_ms.
    let (status, took) = raw_status_timed(&g, &format!("{}{{\"model\":\"", head("100"))).await;
    assert_eq!(status, 408, "after {took:?}");
    assert!(took >= Duration::from_millis(450) && took < Duration::from_millis(2500), "{took:?}");
    assert_eq!(w.provider_count("g12-a").await + w.provider_count("g12-b").await, 0, "nothing forwarded");
    // A body sent in pieces that arrives whole in time is served.
    let body = hello("chat").to_string();
    let mut s = tokio::net::TcpStream::connect(g.addr).await.unwrap();
    s.write_all(format!("{}{}", head(&body.len().to_string()).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"), &body[..5]).as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.write_all(&body.as_bytes()[5..]).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&out));
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_service_credential_reaches_a_caller_in_any_answer_header_or_stream() {
    let w = World::new().await;
    const QUERY_KEY: &str = "pg+key/42=secret";
    const QUERY_KEY_ENCODED: &str = "pg%2Bkey%2F42%3Dsecret";
    const PROVIDER_KEY: &str = "s3cr3t_a bc9z";
    let u = w.up.url();
    let extra = json!({
        "services": {
            "pager": {"base_url": u, "retry": {"max_retries": 0}, "auth": {"type": "query", "param": "api_key", "token": {"value": QUERY_KEY}}},
            "g13-a": {"auth": {"token": {"value": PROVIDER_KEY}}},
        },
        "routes": {"chat": {"stream": {"mid_stream": "restart"}}},
    });
    // A pagination link and a Location that carry the query key as the upstream saw it, a 2xx
    // body echoing a static header's secret, an error body, and chat content with a provider key.
    w.script("g13", json!([
        {"status": 200, "json": {"next": format!("{u}/s/g13/orders?page=2&api_key={QUERY_KEY_ENCODED}"), "raw": QUERY_KEY},
         "headers": {"location": format!("/s/g13/orders?page=2&api_key={QUERY_KEY_ENCODED}"), "etag": format!("\"{QUERY_KEY}\"")}},
        {"status": 201, "body": "created with Bearer svc-secret-orders"},
        {"status": 404, "json": {"error": format!("no such key {QUERY_KEY}")}},
    ])).await;
    let content = format!("the key {PROVIDER_KEY} ends here");
    w.provider("g13-a", json!({"content": content, "stream": {"delay_ms": 5}})).await;
    w.provider("g13-b", json!({"content": "b"})).await;
    let g = w.gateway(w.config("g13", extra)).await;
    let leaks = |text: &str| [QUERY_KEY, QUERY_KEY_ENCODED, "svc-secret-orders", "s3cr3t_a", "bc9z"].into_iter().filter(|k| text.contains(k)).collect::<Vec<_>>();

    let r = w.http.get(url(&g, "/v1/services/pager/s/g13/orders?page=1")).bearer_auth(ANN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let headers = format!("{:?}", r.headers());
    assert_eq!(r.headers()["location"], "/s/g13/orders?page=2&api_key=***");
    let body = r.text().await.unwrap();
    assert!(leaks(&headers).is_empty() && leaks(&body).is_empty(), "{headers} {body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["next"], format!("{u}/s/g13/orders?page=2&api_key=***"));
    let r = w.http.post(url(&g, "/v1/services/orders/s/g13/orders")).bearer_auth(ANN).body("{}").send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.text().await.unwrap()), (201, "created with ***".to_string()));
    let r = w.http.get(url(&g, "/v1/services/pager/s/g13/orders/9")).bearer_auth(ANN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let body = r.text().await.unwrap();
    assert!(leaks(&body).is_empty(), "{body}");
    // The upstream did get the key: the gateway scrubs answers, not requests.
    let log = w.script_log("g13").await;
    assert!(log["requests"][0]["path"].as_str().unwrap().contains(QUERY_KEY_ENCODED), "{log}");

    // Chat, whole and streamed: the provider's key, split over two chunks in the stream.
    let (status, _, v) = post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "the key *** ends here");
    let mut body = hello("chat");
    body["stream"] = json!(true);
    let text = w.http.post(url(&g, "/v1/chat/completions")).bearer_auth(ANN).body(body.to_string()).send().await.unwrap().text().await.unwrap();
    assert!(leaks(&text).is_empty(), "{text}");
    let events: Vec<Value> = text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")).filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect();
    let streamed: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(streamed, "the key *** ends here", "{text}");
    assert!(events.len() > 4, "the answer still streams in pieces: {text}");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_over_http_reads_no_host_file_or_env_var_the_config_file_does_not() {
    let w = World::new().await;
    w.script("g14", json!([{"status": 200, "json": {"ok": true}}])).await;
    let dir = std::env::temp_dir().join(format!("harness-gw-g14-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (token_file, secret_file) = (dir.join("vault-token"), dir.join("host-secret.json"));
    std::fs::write(&token_file, "vault-token-123").unwrap();
    std::fs::write(&secret_file, r#"{"host_secret": "only on this host"}"#).unwrap();
    // The file names its token file relative to its own folder.
    let mut on_disk = w.config("g14", json!({}));
    on_disk["services"]["vault"] = json!({"base_url": w.up.url(), "auth": {"token": {"file": "vault-token"}}});
    let path = dir.join("harness.json");
    std::fs::write(&path, on_disk.to_string()).unwrap();
    let path = path.display().to_string();
    let g = harness_gateway::start(Loaded::from_path(&path).unwrap(), Some(path.clone()), "127.0.0.1:0").await.unwrap();
    let reload = |body: Option<Value>| {
        let mut r = w.http.post(url(&g, "/admin/reload")).bearer_auth(ADMIN);
        if let Some(b) = body {
            r = r.header("content-type", "application/json").body(b.to_string());
        }
        async move {
            let resp = r.send().await.unwrap();
            (resp.status().as_u16(), serde_json::from_slice::<Value>(&resp.bytes().await.unwrap()).unwrap_or(Value::Null))
        }
    };
    let with = |extra: Value| {
        // The file as the gateway reads it: its reference made absolute.
        let mut c = on_disk.clone();
        c["services"]["vault"]["auth"]["token"]["file"] = json!(token_file.display().to_string());
        merge(&mut c, &extra);
        Some(c)
    };
    let file = |p: &std::path::Path| p.display().to_string();
    // Each way a reload body could read the host, and the field each refusal names.
    let attempts = [
        (json!({"mock": {"enabled": true, "services": {"orders": [{"match": {"path": "*"}, "json_file": file(&secret_file)}]}}}), "mock.services.orders[0].json_file"),
        (json!({"services": {"orders": {"auth": {"type": "header", "header": "x-leak", "token": {"env": "PATH"}}}}}), "services.orders.auth.token.env"),
        (json!({"services": {"orders": {"auth": {"type": "header", "header": "x-leak", "token": {"file": file(&token_file)}}}}}), "services.orders.auth.token.file"),
        (json!({"services": {"orders": {"endpoints": {"GET /x": {"response_schema": file(&secret_file)}}}}}), "services.orders.endpoints.GET /x.response_schema"),
        (json!({"audit": {"enabled": true, "sink": {"file": file(&dir.join("audit.jsonl"))}}}), "audit.sink.file"),
        (json!({"audit": {"enabled": true}}), "audit.sink.file"),
        // The file's own relative reference, sent as data, would be read from the working directory.
        (json!({"services": {"vault": {"auth": {"token": {"file": "vault-token"}}}}}), "services.vault.auth.token.file"),
    ];
    for (extra, field) in attempts {
        let (status, v) = reload(with(extra.clone())).await;
        assert_eq!(status, 400, "{extra}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{field}: ")), "{message}");
        assert!(!message.contains("only on this host") && !message.contains(&file(&secret_file)), "{message}");
    }
    // Nothing of the host reached a caller or the upstream.
    let r = w.http.get(url(&g, "/v1/services/orders/s/g14/x")).bearer_auth(ANN).send().await.unwrap();
    assert_eq!(r.text().await.unwrap(), r#"{"ok":true}"#);
    let log = w.script_log("g14").await;
    assert!(log["requests"].as_array().unwrap().iter().all(|r| r["headers"].get("x-leak").is_none()), "{log}");
    // The file's own references, in their own places, may be sent back; the file itself reloads.
    let (status, v) = reload(with(json!({"services": {"vault": {"timeouts": {"response_ms": 900}}}}))).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = reload(None).await;
    assert_eq!(status, 200, "{v}");
    g.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

const DAN: &str = "sk-dan-0123456789";

/// `harness_gateway_cost_total{caller=...}`, 0 when there is no such series yet.
async fn cost_of(w: &World, g: &Started, caller: &str) -> f64 {
    let text = w.http.get(url(g, "/metrics")).send().await.unwrap().text().await.unwrap();
    let prefix = format!("harness_gateway_cost_total{{caller=\"{caller}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(prefix.as_str())).map(|v| v.parse().unwrap()).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_overspend_a_budget_by_at_most_one_request() {
    let w = World::new().await;
    // Each answer: 1 prompt token and 100 completion tokens at 1 per 1k each: 0.101.
    w.provider("g15-a", json!({"content": "x", "completion_tokens": 100, "latency_ms": 300})).await;
    w.provider("g15-b", json!({"content": "y", "completion_tokens": 100})).await;
    let extra = json!({
        "callers": {"ann": {"budget_per_day": 0.25}, "dan": {"key_sha256": sha256_hex(DAN.as_bytes()), "routes": ["chat"], "budget_per_day": 100.0}},
        "gateway": {"route_max_tokens": {"chat": 50}},
    });
    let g = w.gateway(w.config("g15", extra)).await;
    let mut body = hello("chat");
    body["max_tokens"] = json!(100);
    let mut calls = Vec::new();
    for _ in 0..20 {
        let (http, u, body) = (w.http.clone(), url(&g, "/v1/chat/completions"), body.to_string());
        calls.push(tokio::spawn(async move { http.post(u).bearer_auth(ANN).body(body).send().await.unwrap().status().as_u16() }));
    }
    let mut ok = 0;
    for c in calls {
        match c.await.unwrap() {
            200 => ok += 1,
            429 => {}
            other => panic!("status {other}"),
        }
    }
    // The most one request can cost: its prompt (the messages' 32 bytes, a token each at most)
    // and its 100 tokens.
    let one_request = (32.0 + 100.0) / 1000.0;
    let spent = cost_of(&w, &g, "ann").await;
    assert!(ok >= 1 && spent <= 0.25 + one_request + 1e-9, "{ok} of 20 calls passed at once, spending {spent} of a 0.25 budget");
    assert_eq!(w.provider_count("g15-a").await, ok as u64, "refused calls were not forwarded");
    // One by one, calls pass while the budget lasts; the last one may pass it, by one request.
    let mut more = 0;
    while post(&w.http, &g, Some(ANN), "/v1/chat/completions", body.clone()).await.0 == 200 {
        more += 1;
        assert!(more < 5, "the budget never ran out");
    }
    let spent = cost_of(&w, &g, "ann").await;
    assert!(spent >= 0.25 && spent <= 0.25 + one_request + 1e-9, "{spent}");
    // A budgeted caller's request without max_tokens gets the route's default, sent and reserved.
    assert_eq!(post(&w.http, &g, Some(DAN), "/v1/chat/completions", hello("chat")).await.0, 200);
    let log: Value = serde_json::from_slice(&w.http.get(format!("{}/__admin/provider-log/g15-a", w.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(log["requests"].as_array().unwrap().last().unwrap()["body"]["max_tokens"], 50, "{log}");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_charged_for_what_it_streamed_even_when_the_caller_leaves_early() {
    let w = World::new().await;
    let content = (1..=20).map(|i| format!("word{i}")).collect::<Vec<_>>().join(" ");
    w.provider("g16-a", json!({"content": content, "prompt_tokens": 1000, "completion_tokens": 1000, "stream": {"delay_ms": 150}})).await;
    w.provider("g16-b", json!({"content": content, "stream": {"usage": false}})).await;
    let extra = json!({
        "callers": {"ann": {"budget_per_day": 100.0}, "dan": {"key_sha256": sha256_hex(DAN.as_bytes()), "routes": ["chat"]}},
        "routes": {"chat": {"stream": {"mid_stream": "restart"}}},
    });
    let g = w.gateway(w.config("g16", extra)).await;
    // ann reads the first three chunks of a slow stream, then leaves.
    let mut body = hello("chat");
    body["stream"] = json!(true);
    let mut resp = w.http.post(url(&g, "/v1/chat/completions")).bearer_auth(ANN).body(body.to_string()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut seen = String::new();
    while seen.matches("\"content\"").count() < 3 {
        seen.push_str(&String::from_utf8_lossy(&resp.chunk().await.unwrap().expect("more chunks")));
    }
    drop(resp);
    let started = std::time::Instant::now();
    let mut charged = 0.0;
    while charged == 0.0 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        charged = cost_of(&w, &g, "ann").await;
    }
    // An estimate of what was streamed: well under the whole answer's 2.0, but not nothing.
    assert!(charged > 0.0 && charged < 0.1, "charged {charged} for a stream left after 3 of 20 chunks");
    // dan's stream ends, but its provider reports no usage: estimated from the streamed text.
    body["model"] = json!("chat/model-b");
    let text = w.http.post(url(&g, "/v1/chat/completions")).bearer_auth(DAN).body(body.to_string()).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("word20") && text.trim_end().ends_with("[DONE]"), "{text}");
    let estimated = cost_of(&w, &g, "dan").await;
    let expected = ((32.0f64 / 4.0).ceil() + (content.len() as f64 / 4.0).ceil()) / 1000.0;
    assert!((estimated - expected).abs() < 1e-9, "charged {estimated}, expected {expected}");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_pass_through_chat_completions_both_ways_streamed_and_not() {
    let w = World::new().await;
    let args = r#"{"city":"Paris"}"#;
    let call = json!({"id": "call_1", "name": "get_weather", "arguments": args});
    w.provider("gtc-a", json!({"content": "", "finish_reason": "tool_calls", "tool_calls": [call]})).await;
    w.provider("gtc-b", json!({})).await;
    let g = w.gateway(w.config("gtc", json!({}))).await;
    let mut body = hello("chat");
    body["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
    body["tool_choice"] = json!({"type": "function", "function": {"name": "get_weather"}});
    body["response_format"] = json!({"type": "json_object"});
    body["seed"] = json!(3);
    let (status, _, v) = post(&w.http, &g, Some(ANN), "/v1/chat/completions", body.clone()).await;
    assert_eq!(status, 200, "{v}");
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null, "{v}");
    assert_eq!(message["tool_calls"], json!([{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": args}}]));
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let log: Value = serde_json::from_slice(&w.http.get(format!("{}/__admin/provider-log/gtc-a", w.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
    let sent = &log["requests"][0]["body"];
    for k in ["tools", "tool_choice", "response_format", "seed"] {
        assert_eq!(sent[k], body[k], "{k} reaches the provider");
    }
    // Streamed: OpenAI's delta.tool_calls pieces, which join into the same call.
    body["stream"] = json!(true);
    let text = w.http.post(url(&g, "/v1/chat/completions")).bearer_auth(ANN).body(body.to_string()).send().await.unwrap().text().await.unwrap();
    let events: Vec<Value> = text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")).filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect();
    let pieces: Vec<&Value> = events.iter().filter_map(|e| e["choices"][0]["delta"]["tool_calls"].as_array()).flatten().collect();
    assert_eq!(pieces[0], &json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}), "{text}");
    let joined: String = pieces.iter().filter_map(|p| p["function"]["arguments"].as_str()).collect();
    assert_eq!(joined, args);
    assert!(pieces.iter().all(|p| p["index"] == 0));
    assert_eq!(events.last().unwrap()["choices"][0]["finish_reason"], "tool_calls");
    assert!(text.trim_end().ends_with("data: [DONE]"));
    g.shutdown().await;
}

// ---- /v1/messages (Anthropic's Messages API) and /v1/embeddings ----

/// A POST with the key in `x-api-key`, as Anthropic's SDKs send it.
async fn post_x_api_key(w: &World, g: &Started, key: &str, path: &str, body: &Value) -> (u16, reqwest::header::HeaderMap, String) {
    let r = w.http.post(url(g, path)).header("x-api-key", key).header("anthropic-version", "2023-06-01").header("content-type", "application/json").body(body.to_string()).send().await.unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.text().await.unwrap())
}

/// Anthropic's named SSE events: (event, data).
fn named_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap_or_else(|| panic!("no event name in {e:?}")).to_string();
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or_else(|| panic!("no data in {e:?}"));
            (name, serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// A route `gem` whose one provider is a simulated Gemini (`adapter: gemini`), priced.
fn gemini_route(w: &World, p: &str) -> Value {
    json!({
        "services": {format!("{p}-gem"): {"base_url": format!("{}/llm/{p}-gem", w.up.url()), "retry": {"max_retries": 0}, "timeouts": {"response_ms": 2000},
            "auth": {"type": "header", "header": "x-goog-api-key", "keys": [{"value": "gem-secret-key-123"}]}}},
        "routes": {"gem": {"adapter": "openai-compatible", "strategy": "priority", "providers": [
            {"id": "g", "service": format!("{p}-gem"), "model": "gemini-x", "adapter": "gemini", "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 1.0}}]}},
    })
}

fn weather_request(model: &str) -> Value {
    json!({
        "model": model,
        "max_tokens": 256,
        "system": "Be brief.",
        "temperature": 0.3,
        "stop_sequences": ["END"],
        "metadata": {"user_id": "u-42"},
        "tools": [{"name": "get_weather", "description": "The weather in a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is in this picture, and the weather in Rome?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
            {"role": "assistant", "content": [{"type": "text", "text": "A cat. Checking Rome."}, {"type": "tool_use", "id": "toolu_rome", "name": "get_weather", "input": {"city": "Rome"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_rome", "content": "21C, sunny"}, {"type": "text", "text": "And Paris?"}]},
        ],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_reach_a_gemini_provider_buffered_and_streamed_with_text_and_a_tool_call() {
    let w = World::new().await;
    let args = r#"{"city":"Paris"}"#;
    w.provider("gm1-gem", json!({"content": "Looking it up now.", "finish_reason": "tool_calls", "prompt_tokens": 30, "completion_tokens": 7, "cached_tokens": 10,
        "tool_calls": [{"id": "unused", "name": "get_weather", "arguments": args}]})).await;
    let g = w.gateway(w.config("gm1", gemini_route(&w, "gm1"))).await;

    let (status, headers, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &weather_request("gem")).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["model"], "gemini-x");
    let trace = headers["x-harness-trace-id"].to_str().unwrap();
    assert_eq!(v["id"], format!("msg_{trace}"));
    assert_eq!(v["content"][0], json!({"type": "text", "text": "Looking it up now."}), "{v}");
    assert_eq!(v["content"][1]["type"], "tool_use");
    assert_eq!(v["content"][1]["name"], "get_weather");
    assert_eq!(v["content"][1]["input"], json!({"city": "Paris"}), "the input as parsed JSON");
    assert!(v["content"][1]["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["stop_sequence"], Value::Null);
    // Anthropic counts the cache read apart from the input.
    assert_eq!(v["usage"], json!({"input_tokens": 20, "output_tokens": 7, "cache_read_input_tokens": 10}));

    // What Gemini was sent: the whole conversation in its own shape.
    let log: Value = serde_json::from_slice(&w.http.get(format!("{}/__admin/provider-log/gm1-gem", w.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
    let sent = &log["requests"][0];
    assert_eq!(sent["path"], "/llm/gm1-gem/v1beta/models/gemini-x:generateContent", "{sent}");
    let body = &sent["body"];
    assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "Be brief."}]}), "{body}");
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 256);
    assert_eq!(body["generationConfig"]["stopSequences"], json!(["END"]));
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "get_weather");
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["parameters"]["required"], json!(["city"]));
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents[0]["parts"][1]["inlineData"], json!({"mimeType": "image/png", "data": "iVBORw0KGgo="}), "{body}");
    assert_eq!(contents[1]["parts"][1]["functionCall"], json!({"name": "get_weather", "args": {"city": "Rome"}}), "{body}");
    let response_part = contents[2]["parts"].as_array().unwrap().iter().find(|p| p.get("functionResponse").is_some()).unwrap_or_else(|| panic!("{body}"));
    assert_eq!(response_part["functionResponse"]["name"], "get_weather", "the tool result names the call it answers");

    // Streamed: Anthropic's named events, a text block then a tool_use block.
    let mut req = weather_request("gem");
    req["stream"] = json!(true);
    let (status, headers, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &req).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["content-type"], "text/event-stream");
    let events = named_events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{text}");
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"], "{text}");
    for (name, data) in &events {
        assert_eq!(data["type"], name.as_str(), "each event's data names its type");
    }
    assert_eq!(events[0].1["message"]["id"], format!("msg_{}", headers["x-harness-trace-id"].to_str().unwrap()));
    let starts: Vec<&Value> = events.iter().filter(|(n, _)| n == "content_block_start").map(|(_, d)| d).collect();
    assert_eq!(starts.len(), 2, "{text}");
    assert_eq!((starts[0]["index"].as_u64(), starts[0]["content_block"]["type"].as_str()), (Some(0), Some("text")));
    assert_eq!((starts[1]["index"].as_u64(), starts[1]["content_block"]["type"].as_str(), starts[1]["content_block"]["name"].as_str()), (Some(1), Some("tool_use"), Some("get_weather")));
    let deltas = |kind: &str, field: &str| -> String { events.iter().filter(|(_, d)| d["delta"]["type"] == kind).filter_map(|(_, d)| d["delta"][field].as_str()).collect() };
    assert_eq!(deltas("text_delta", "text"), "Looking it up now.");
    assert_eq!(serde_json::from_str::<Value>(&deltas("input_json_delta", "partial_json")).unwrap(), json!({"city": "Paris"}));
    assert_eq!(events.iter().filter(|(n, _)| n == "content_block_stop").count(), 2);
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 7);
    assert_eq!(delta["usage"]["cache_read_input_tokens"], 10);
    assert!(!text.contains("gem-secret-key-123"));

    // A prompt Gemini blocks is Anthropic's refusal, buffered and streamed.
    w.provider("gm1-gem", json!({"blocked": true})).await;
    let (status, _, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &weather_request("gem")).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((v["stop_reason"].as_str(), v["content"].as_array().map(Vec::len)), (Some("refusal"), Some(0)), "{v}");
    let (status, _, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &req).await;
    assert_eq!(status, 200, "{text}");
    let events = named_events(&text);
    assert_eq!(events.iter().find(|(n, _)| n == "message_delta").unwrap().1["delta"]["stop_reason"], "refusal", "{text}");
    assert_eq!(events.last().unwrap().0, "message_stop");

    let m = w.http.get(url(&g, "/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("harness_gateway_requests_total{caller=\"ann\",api=\"messages\",target=\"gem\",status=\"200\"} 4"), "{m}");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_through_an_openai_compatible_route_and_errors_in_anthropics_shape() {
    let w = World::new().await;
    let args = r#"{"city":"Paris"}"#;
    w.provider("gm2-a", json!({"content": "Sunny in Paris.", "prompt_tokens": 11, "completion_tokens": 4})).await;
    w.provider("gm2-b", json!({"content": "", "finish_reason": "tool_calls", "tool_calls": [{"id": "call_9", "name": "get_weather", "arguments": args}]})).await;
    let g = w.gateway(w.config("gm2", json!({}))).await;
    // Bearer works as well as x-api-key; the text answer from provider a.
    let (status, _, v) = post(&w.http, &g, Some(ANN), "/v1/messages", json!({"model": "chat", "max_tokens": 50, "messages": [{"role": "user", "content": "Weather?"}]})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["content"], json!([{"type": "text", "text": "Sunny in Paris."}]));
    assert_eq!((v["stop_reason"].as_str(), v["model"].as_str()), (Some("end_turn"), Some("model-a")));
    assert_eq!(v["usage"], json!({"input_tokens": 11, "output_tokens": 4, "cache_read_input_tokens": 0}));
    let log: Value = serde_json::from_slice(&w.http.get(format!("{}/__admin/provider-log/gm2-a", w.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(log["requests"][0]["body"]["messages"], json!([{"role": "user", "content": "Weather?"}]));
    assert_eq!(log["requests"][0]["body"]["max_tokens"], 50);
    // route/model pins provider b, whose answer is a tool call only, streamed in OpenAI's pieces.
    let mut req = weather_request("chat/model-b");
    let (status, _, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &req).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["content"], json!([{"type": "tool_use", "id": "call_9", "name": "get_weather", "input": {"city": "Paris"}}]));
    assert_eq!(v["stop_reason"], "tool_use");
    let log: Value = serde_json::from_slice(&w.http.get(format!("{}/__admin/provider-log/gm2-b", w.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
    let sent = &log["requests"][0]["body"];
    assert_eq!(sent["messages"][0], json!({"role": "system", "content": "Be brief."}), "{sent}");
    assert_eq!(sent["messages"][2]["tool_calls"][0]["function"], json!({"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}), "{sent}");
    assert_eq!(sent["messages"][3], json!({"role": "tool", "tool_call_id": "toolu_rome", "content": "21C, sunny"}), "{sent}");
    assert_eq!((sent["tool_choice"].as_str(), sent["user"].as_str(), sent["stop"].clone()), (Some("auto"), Some("u-42"), json!(["END"])));
    assert_eq!(sent["tools"][0]["function"]["parameters"]["required"], json!(["city"]));
    req["stream"] = json!(true);
    let (_, _, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &req).await;
    let events = named_events(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"], "{text}");
    assert_eq!(events[1].1["content_block"], json!({"type": "tool_use", "id": "call_9", "name": "get_weather", "input": {}}));
    let joined: String = events.iter().filter_map(|(_, d)| d["delta"]["partial_json"].as_str()).collect();
    assert_eq!(joined, args);

    // Errors, in Anthropic's shape.
    let err = |text: &str| -> (String, String) {
        let v: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("{text}"));
        assert_eq!(v["type"], "error", "{v}");
        (v["error"]["type"].as_str().unwrap().to_string(), v["error"]["message"].as_str().unwrap().to_string())
    };
    let hi = json!({"model": "chat", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    let (status, _, text) = post_x_api_key(&w, &g, "sk-wrong", "/v1/messages", &hi).await;
    assert_eq!((status, err(&text).0.as_str()), (401, "authentication_error"));
    assert!(err(&text).1.contains("x-api-key"));
    let (status, _, text) = post_x_api_key(&w, &g, BOB, "/v1/messages", &hi).await;
    assert_eq!((status, err(&text).0.as_str()), (403, "permission_error"));
    let (status, _, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &json!({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})).await;
    assert_eq!((status, err(&text).0.as_str()), (404, "not_found_error"));
    let (status, _, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &json!({"model": "chat", "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]})).await;
    assert_eq!((status, err(&text).0.as_str()), (400, "invalid_request_error"));
    assert!(err(&text).1.starts_with("`messages[0].content[0].type`"), "{text}");
    let (status, _, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &json!({"model": "chat", "max_tokens": 5, "messages": [{"role": "user", "content": "x".repeat(5000)}]})).await;
    assert_eq!((status, err(&text).0.as_str()), (413, "request_too_large"));
    // Every provider failing: 503, overloaded; the trace id named.
    w.provider("gm2-a", json!({"fail_rate": 1.0, "fail_status": 503})).await;
    w.provider("gm2-b", json!({"fail_rate": 1.0, "fail_status": 503})).await;
    let (status, headers, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &hi).await;
    assert_eq!((status, err(&text).0.as_str()), (503, "overloaded_error"), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["request_id"], headers["x-harness-trace-id"].to_str().unwrap());
    assert_eq!(v["harness"]["harness_kind"], "NoHealthyProviderError");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_failing_after_its_head_ends_with_an_anthropic_error_event() {
    let w = World::new().await;
    // `mid_stream: error`: a provider failing after the first chunk fails the stream, after its head.
    w.provider("gm3-a", json!({"content": "one two three four five", "stream": {"error_at": 3}})).await;
    w.provider("gm3-b", json!({"fail_rate": 1.0, "fail_status": 503})).await;
    let extra = json!({"routes": {"chat": {"stream": {"mid_stream": "error"}}}});
    let g = w.gateway(w.config("gm3", extra)).await;
    let req = json!({"model": "chat/model-a", "max_tokens": 50, "stream": true, "messages": [{"role": "user", "content": "count"}]});
    let (status, _, text) = post_x_api_key(&w, &g, ANN, "/v1/messages", &req).await;
    assert_eq!(status, 200, "{text}");
    let events = named_events(&text);
    assert_eq!(events[0].0, "message_start", "{text}");
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error", "{text}");
    assert_eq!(data["type"], "error");
    assert!(data["error"]["type"].as_str().is_some_and(|t| !t.is_empty()) && data["error"]["message"].as_str().is_some(), "{data}");
    assert!(!events.iter().any(|(n, _)| n == "message_stop"), "{text}");
    g.shutdown().await;
}

/// A route `emb` of kind embeddings on a simulated OpenAI embeddings endpoint, priced.
fn embeddings_route(w: &World, p: &str) -> Value {
    json!({
        "services": {format!("{p}-emb"): {"base_url": format!("{}/llm/{p}-emb", w.up.url()), "retry": {"max_retries": 0}, "timeouts": {"response_ms": 2000}}},
        "routes": {"emb": {"kind": "embeddings", "adapter": "openai-compatible", "strategy": "priority", "providers": [
            {"id": "e", "service": format!("{p}-emb"), "model": "embed-1", "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 0.0}}]}},
    })
}

/// The upstream's vector for a text: element k is (chars + k / 4) / 8.
fn expected_vector(text: &str, dims: usize) -> Vec<f32> {
    (0..dims).map(|k| (text.chars().count() as f32 + k as f32 * 0.25) / 8.0).collect()
}

fn decode_base64(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let digits: Vec<u8> = chunk.iter().copied().filter(|c| *c != b'=').map(value).collect();
        let n = digits.iter().enumerate().fold(0u32, |n, (i, d)| n | (u32::from(*d) << (18 - 6 * i)));
        for i in 0..digits.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_in_the_openai_shape_as_floats_or_base64_with_callers_costs_and_errors() {
    let w = World::new().await;
    w.provider("ge-emb", json!({"dimensions": 4})).await;
    let g = w.gateway(w.config("ge", embeddings_route(&w, "ge"))).await;
    let texts = ["hello", "embeddings!"];
    let (status, headers, v) = post(&w.http, &g, Some(ANN), "/v1/embeddings", json!({"model": "emb", "input": texts, "user": "u-1"})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "list");
    assert_eq!(v["model"], "embed-1");
    for (i, t) in texts.iter().enumerate() {
        assert_eq!(v["data"][i]["object"], "embedding");
        assert_eq!(v["data"][i]["index"], i);
        let got: Vec<f32> = v["data"][i]["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        assert_eq!(got, expected_vector(t, 4), "input {i}");
    }
    // ceil(chars / 4) tokens a text: 2 + 3.
    assert_eq!(v["usage"], json!({"prompt_tokens": 5, "total_tokens": 5}));
    assert_eq!(headers["x-harness-trace-id"].to_str().unwrap(), v["harness"]["trace_id"].as_str().unwrap());
    // One string, shorter vectors, base64 of little-endian f32s.
    let (status, _, v) = post(&w.http, &g, Some(ANN), "/v1/embeddings", json!({"model": "emb", "input": "hello", "dimensions": 3, "encoding_format": "base64"})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
    let bytes = decode_base64(v["data"][0]["embedding"].as_str().unwrap());
    let floats: Vec<f32> = bytes.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!(floats, expected_vector("hello", 3));
    let log: Value = serde_json::from_slice(&w.http.get(format!("{}/__admin/provider-log/ge-emb", w.up.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(log["requests"][1]["body"]["dimensions"], 3);
    // route/model: the route's one model.
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/embeddings", json!({"model": "emb/embed-1", "input": "x"})).await.0, 200);
    // Costs and metrics per caller: 5 + 2 + 1 tokens at 1.0 per 1k.
    let m = w.http.get(url(&g, "/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("harness_gateway_requests_total{caller=\"ann\",api=\"embeddings\",target=\"emb\",status=\"200\"} 3"), "{m}");
    let cost: f64 = m.lines().find_map(|l| l.strip_prefix("harness_gateway_cost_total{caller=\"ann\"} ")).unwrap_or_else(|| panic!("{m}")).parse().unwrap();
    assert!((cost - 0.008).abs() < 1e-12, "{cost}");

    // Errors, in the OpenAI shape.
    let bad = |body: Value| {
        let (http, g) = (&w.http, &g);
        async move { post(http, g, Some(ANN), "/v1/embeddings", body).await }
    };
    let (status, _, v) = bad(json!({"model": "emb", "input": [[1, 2, 3]]})).await;
    assert_eq!((status, v["error"]["type"].as_str()), (400, Some("invalid_request_error")));
    assert!(v["error"]["message"].as_str().unwrap().starts_with("`input`: token arrays"), "{v}");
    let (status, _, v) = bad(json!({"model": "emb", "input": [101, 102]})).await;
    assert!(status == 400 && v["error"]["message"].as_str().unwrap().contains("token arrays"), "{v}");
    let (status, _, v) = bad(json!({"model": "emb", "input": ["ok", ""]})).await;
    assert!(status == 400 && v["error"]["message"].as_str().unwrap().starts_with("`input[1]`"), "{v}");
    let (status, _, v) = bad(json!({"model": "emb", "input": "x", "encoding_format": "int8"})).await;
    assert!(status == 400 && v["error"]["message"].as_str().unwrap().starts_with("`encoding_format`"), "{v}");
    let (status, _, v) = bad(json!({"model": "chat", "input": "x"})).await;
    assert!(status == 400 && v["error"]["message"].as_str().unwrap().contains("kind embeddings"), "{v}");
    let (status, _, v) = bad(json!({"model": "nope", "input": "x"})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (404, Some("model_not_found")));
    let (status, _, v) = bad(json!({"model": "emb/other", "input": "x"})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (404, Some("model_not_found")));
    let (status, _, v) = post(&w.http, &g, Some("sk-wrong"), "/v1/embeddings", json!({"model": "emb", "input": "x"})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (401, Some("invalid_api_key")));
    let (status, _, v) = post(&w.http, &g, Some(BOB), "/v1/embeddings", json!({"model": "emb", "input": "x"})).await;
    assert_eq!((status, v["error"]["code"].as_str()), (403, Some("not_allowed")));
    assert_eq!(w.provider_count("ge-emb").await, 3, "no refused request was forwarded");
    // The provider failing: the core's error, with its trace id.
    w.provider("ge-emb", json!({"fail_rate": 1.0, "fail_status": 503})).await;
    let (status, _, v) = bad(json!({"model": "emb", "input": "x"})).await;
    assert!(status >= 500 && v["error"]["trace_id"].as_str().is_some_and(|t| t.len() == 32), "{status} {v}");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_clears_a_routes_cached_answers() {
    let w = World::new().await;
    w.provider("g9-a", json!({"content": "cached answer"})).await;
    let mut config = w.config("g9", json!({}));
    config["routes"]["chat"]["cache"] = json!({"exact": {"ttl_ms": 60000}});
    let g = w.gateway(config).await;
    let ask = || json!({"model": "chat", "temperature": 0, "messages": [{"role": "user", "content": "hi"}]});
    for _ in 0..2 {
        let (status, _, v) = post(&w.http, &g, Some(ANN), "/v1/chat/completions", ask()).await;
        assert_eq!((status, v["choices"][0]["message"]["content"].as_str()), (200, Some("cached answer")), "{v}");
    }
    assert_eq!(w.provider_count("g9-a").await, 1, "the repeat was answered from the exact cache");
    let clear = |path: &'static str, key: Option<&'static str>| {
        let mut r = w.http.post(url(&g, path));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        async move {
            let resp = r.send().await.unwrap();
            (resp.status().as_u16(), serde_json::from_slice::<Value>(&resp.bytes().await.unwrap()).unwrap_or(Value::Null))
        }
    };
    assert_eq!(clear("/admin/cache/clear/chat", Some(ANN)).await.0, 401, "an API key is not the admin key");
    let (s, v) = clear("/admin/cache/clear/nope", Some(ADMIN)).await;
    assert_eq!(s, 400, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("nope"), "{v}");
    let (s, v) = clear("/admin/cache/clear/chat", Some(ADMIN)).await;
    assert_eq!((s, v["cleared"].as_u64()), (200, Some(1)), "{v}");
    post(&w.http, &g, Some(ANN), "/v1/chat/completions", ask()).await;
    assert_eq!(w.provider_count("g9-a").await, 2, "cleared: the provider answers again");
    assert_eq!(clear("/admin/cache/clear", Some(ADMIN)).await.0, 200);
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_follows_the_fleet_config_and_shows_it_at_admin_fleet() {
    let w = World::new().await;
    w.provider("g9-a", json!({"content": "from a"})).await;
    w.provider("g9-b", json!({"content": "from b"})).await;
    let redis = harness_upstream::redis_server::RedisServer::start();
    let source = json!({"redis_url": redis.url(), "name": "edge", "poll_ms": 1000, "heartbeat_ms": 200, "instance_id": "gw-1"});
    let g = w.gateway(w.config("g9", json!({"config_source": source}))).await;
    let fleet = || async {
        let r = w.http.get(url(&g, "/admin/fleet")).bearer_auth(ADMIN).send().await.unwrap();
        (r.status().as_u16(), serde_json::from_slice::<Value>(&r.bytes().await.unwrap()).unwrap())
    };
    assert_eq!(w.http.get(url(&g, "/admin/fleet")).bearer_auth(ANN).send().await.unwrap().status(), 401);
    let (s, v) = fleet().await;
    assert_eq!((s, v["stable"].as_u64(), v["this_instance"]["version"].as_u64()), (200, Some(0), Some(0)), "{v}");
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await.2["choices"][0]["message"]["content"], "from a");

    // A pushed version (the core's sections: the gateway's own stay from its file) moves the
    // route to b; the callers still hold.
    let mut pushed = w.config("g9", json!({}));
    for own in ["gateway", "callers"] {
        pushed.as_object_mut().unwrap().remove(own);
    }
    pushed["routes"]["chat"]["providers"][0]["weight"] = json!(0);
    let text = pushed.to_string();
    let mut admin = harness_core::fleet::Admin::connect(&redis.url(), "edge").await.unwrap();
    assert_eq!(admin.push(&text, "json", &pushed, "ops", "a to 0", None, None).await.unwrap(), 1);
    let start = std::time::Instant::now();
    while fleet().await.1["this_instance"]["version"] != 1 {
        assert!(start.elapsed() < Duration::from_secs(5), "the gateway did not apply version 1");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await.2["choices"][0]["message"]["content"], "from b");
    assert_eq!(post(&w.http, &g, None, "/v1/chat/completions", hello("chat")).await.0, 401, "callers come from the gateway's file");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s, v) = fleet().await;
    assert_eq!(s, 200);
    assert_eq!((v["stable"].as_u64(), v["versions"][0]["version"].as_u64(), v["versions"][0]["instances"].as_u64()), (Some(1), Some(1), Some(1)), "{v}");
    assert_eq!(v["instances"][0]["instance"], "gw-1");
    assert_eq!(v["history"][0]["author"], "ops");
    assert!(!v.to_string().contains(&redis.url()), "no Redis URL in the answer");
    let m = w.http.get(url(&g, "/metrics")).bearer_auth(ADMIN).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("harness_config_version_info{name=\"edge\",version=\"1\"} 1"), "{m}");

    // Redis gone: 503, with what this gateway runs.
    drop(redis);
    let (s, v) = fleet().await;
    assert_eq!((s, v["this_instance"]["version"].as_u64()), (503, Some(1)), "{v}");
    g.shutdown().await;
}

// ---- the admin console and the API it reads ----

/// An admin call: status, headers and the JSON body (Null when the body is not JSON).
async fn admin_call(w: &World, g: &Started, method: reqwest::Method, path: &str, key: Option<&str>, body: Option<Value>) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut r = w.http.request(method, url(g, path));
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    if let Some(b) = body {
        r = r.header("content-type", "application/json").body(b.to_string());
    }
    let resp = r.send().await.unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    (status, headers, serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null))
}

fn admin_principal() -> String {
    format!("admin:{}", &sha256_hex(ADMIN.as_bytes())[..12])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_with_a_strict_policy_and_only_when_the_admin_api_is_on() {
    let w = World::new().await;
    let g = w.gateway(w.config("c1", json!({}))).await;
    let r = w.http.get(url(&g, "/admin/ui")).send().await.unwrap();
    assert_eq!(r.status(), 200, "the page carries no data: it needs no key");
    let h = r.headers().clone();
    let page = r.text().await.unwrap();
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    let csp = h["content-security-policy"].to_str().unwrap();
    for want in ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
        assert!(csp.contains(want), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "no inline or eval: {csp}");
    assert_eq!((h["x-frame-options"].to_str().unwrap(), h["cache-control"].to_str().unwrap(), h["x-content-type-options"].to_str().unwrap()), ("DENY", "no-store", "nosniff"));
    assert!(page.contains("/admin/ui/main.js"), "{page}");
    for (asset, ct) in [("main.js", "text/javascript"), ("api.js", "text/javascript"), ("dom.js", "text/javascript"), ("views.js", "text/javascript"), ("console.css", "text/css"), ("icon.svg", "image/svg+xml")] {
        let r = w.http.get(url(&g, &format!("/admin/ui/{asset}"))).send().await.unwrap();
        assert_eq!(r.status(), 200, "{asset}");
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with(ct), "{asset}");
        assert_eq!(r.headers()["x-frame-options"], "DENY");
    }
    for bad in ["/admin/ui/nope.js", "/admin/ui/..%2Fconsole.css", "/admin/ui/%3Cscript%3E"] {
        let r = w.http.get(url(&g, bad)).send().await.unwrap();
        assert_eq!(r.status(), 404, "{bad}");
        assert_eq!(r.headers()["cache-control"], "no-store");
    }
    // Every admin API answer, refusals included, is never cached and never framed.
    for key in [None, Some(ADMIN)] {
        let (_, h, _) = admin_call(&w, &g, reqwest::Method::GET, "/admin/routes", key, None).await;
        assert_eq!((h["cache-control"].to_str().unwrap(), h["x-frame-options"].to_str().unwrap()), ("no-store", "DENY"));
    }
    // Data-plane answers are left as they were.
    assert!(w.http.get(url(&g, "/healthz")).send().await.unwrap().headers().get("content-security-policy").is_none());
    g.shutdown().await;

    // Without an admin key the console is off like the API: 404 for the page and its assets.
    let mut off = w.config("c1", json!({}));
    off["gateway"].as_object_mut().unwrap().remove("admin_key_sha256");
    let g = w.gateway(off).await;
    for path in ["/admin/ui", "/admin/ui/", "/admin/ui/main.js", "/admin/callers", "/admin/services", "/admin/config", "/admin/audit"] {
        let (s, _, v) = admin_call(&w, &g, reqwest::Method::GET, path, Some(ADMIN), None).await;
        assert_eq!(s, 404, "{path}: {v}");
    }
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_admin_endpoints_refuse_without_the_admin_key() {
    let w = World::new().await;
    let g = w.gateway(w.config("c2", json!({}))).await;
    use reqwest::Method as M;
    for (method, path) in [(M::GET, "/admin/callers"), (M::GET, "/admin/services"), (M::GET, "/admin/config"), (M::GET, "/admin/audit"), (M::POST, "/admin/fleet/promote"), (M::POST, "/admin/fleet/rollback")] {
        for key in [None, Some(ANN), Some("admin-key-0123456789x")] {
            let (s, _, v) = admin_call(&w, &g, method.clone(), path, key, Some(json!({}))).await;
            assert_eq!((s, v["error"]["code"].as_str()), (401, Some("invalid_admin_key")), "{path} with {key:?}");
        }
    }
    // Refused calls are not actions: nothing audited.
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/audit", Some(ADMIN), None).await;
    assert_eq!(v["audit"], json!([]));
    // Without a config source there is no fleet to promote or roll back.
    for path in ["/admin/fleet/promote", "/admin/fleet/rollback"] {
        let (s, _, v) = admin_call(&w, &g, M::POST, path, Some(ADMIN), None).await;
        assert_eq!(s, 404, "{path}: {v}");
    }
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_views_show_callers_costs_services_reloads_and_audited_actions() {
    let w = World::new().await;
    w.provider("c3-a", json!({"content": "from a", "prompt_tokens": 500, "completion_tokens": 500})).await;
    w.provider("c3-b", json!({"content": "from b"})).await;
    // orders: two requests, then one per 100 s, and none waits.
    let orders_limit = json!({"rps": 0.01, "burst": 2, "max_wait_ms": 0});
    let g = w.gateway(w.config("c3", json!({"callers": {"ann": {"budget_per_day": 100.0}}, "services": {"orders": {"rate_limit": orders_limit}}}))).await;
    use reqwest::Method as M;
    // ann: one answer (cost 1.0 at 1.0 per 1k tokens), one refusal (no such route).
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("chat")).await.0, 200);
    assert_eq!(post(&w.http, &g, Some(ANN), "/v1/chat/completions", hello("nope")).await.0, 404);
    // bob: 1 rps, burst 1, no wait: the second call at once is refused by his rate limit.
    let mut bob_statuses = Vec::new();
    for _ in 0..2 {
        bob_statuses.push(w.http.get(url(&g, "/v1/services/orders/x")).bearer_auth(BOB).send().await.unwrap().status().as_u16());
    }
    assert_eq!(bob_statuses[1], 429, "{bob_statuses:?}");

    let (s, h, v) = admin_call(&w, &g, M::GET, "/admin/callers", Some(ADMIN), None).await;
    assert_eq!((s, h["cache-control"].to_str().unwrap()), (200, "no-store"));
    let caller = |name: &str| v["callers"].as_array().unwrap().iter().find(|c| c["name"] == name).cloned().unwrap();
    let ann = caller("ann");
    assert_eq!((ann["requests"].as_u64(), ann["errors"].as_u64(), ann["rate_limited"].as_u64()), (Some(2), Some(1), Some(0)), "{v}");
    assert!((ann["cost_today"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{v}");
    assert!((ann["budget_left"].as_f64().unwrap() - 99.0).abs() < 1e-9, "{v}");
    let bob = caller("bob");
    assert_eq!((bob["requests"].as_u64(), bob["rate_limited"].as_u64(), bob["budget_per_day"].clone()), (Some(2), Some(1), Value::Null), "{v}");
    assert_eq!(bob["rate_limit"]["rps"], 1.0);

    // Routes: what each provider was charged today.
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/routes/chat", Some(ADMIN), None).await;
    assert!((v["providers"][0]["cost_today"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{v}");
    assert_eq!(v["providers"][1]["cost_today"], 0.0);

    // Services: the rate limit's live state (bob took one cell, ann the second; ann's next
    // is refused by the service's limit, not a caller's), the bulkhead, and the breakers
    // per endpoint, a hand-opened one included.
    let mut ann_statuses = Vec::new();
    for _ in 0..2 {
        ann_statuses.push(w.http.get(url(&g, "/v1/services/orders/x")).bearer_auth(ANN).send().await.unwrap().status().as_u16());
    }
    assert_eq!(ann_statuses[1], 429, "{ann_statuses:?}");
    let ep = json!({"service": "orders", "method": "GET", "endpoint": "/x"});
    assert_eq!(admin_call(&w, &g, M::POST, "/admin/breakers/open", Some(ADMIN), Some(ep.clone())).await.0, 200);
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/services", Some(ADMIN), None).await;
    let orders = v["services"].as_array().unwrap().iter().find(|s| s["service"] == "orders").cloned().unwrap();
    assert_eq!(orders["rate_limit"]["state"], json!({"service": "orders", "paused_ms": 0, "refused": 1, "waited": 0}), "{v}");
    assert_eq!((orders["rate_limit"]["rps"].as_f64(), orders["rate_limit"]["burst"].as_u64()), (Some(0.01), Some(2)), "{v}");
    assert_eq!(v["services"].as_array().unwrap().iter().find(|s| s["service"] == "c3-a").unwrap()["rate_limit"], Value::Null, "{v}");
    assert_eq!((orders["bulkhead"]["in_use"].as_u64(), orders["bulkhead"]["limit"].as_u64().is_some()), (Some(0), true), "{v}");
    assert!(orders["endpoints"].as_array().unwrap().iter().any(|b| b["endpoint"] == "/x" && b["state"] == "open" && b["phase"] == "open"), "{v}");
    assert_eq!(admin_call(&w, &g, M::POST, "/admin/breakers/close", Some(ADMIN), Some(ep)).await.0, 200);

    // Config: the version, and each reload tried with the field a rejected one named.
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/config", Some(ADMIN), None).await;
    let first = v["version"].as_str().unwrap().to_string();
    assert_eq!((v["reloads"].clone(), v["config_source"].clone()), (json!([]), Value::Null));
    let bad = w.http.post(url(&g, "/admin/reload")).bearer_auth(ADMIN).body("services:\n  orders:\n    base_url: ftp://x\n").send().await.unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(admin_call(&w, &g, M::POST, "/admin/routes/chat/providers/a/weight", Some(ADMIN), Some(json!({"weight": 0}))).await.0, 200);
    assert_eq!(admin_call(&w, &g, M::POST, "/admin/routes/chat/providers/a/weight", Some(ADMIN), Some(json!({"weight": "x"}))).await.0, 400);
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/config", Some(ADMIN), None).await;
    let reloads = v["reloads"].as_array().unwrap();
    assert_eq!(reloads.len(), 2, "a malformed request is not a reload: {v}");
    assert_eq!((reloads[0]["source"].as_str(), reloads[0]["accepted"].as_bool(), reloads[0]["version"].as_str()), (Some("set_weight"), Some(true), v["version"].as_str()));
    assert_ne!(v["version"].as_str().unwrap(), first);
    assert_eq!((reloads[1]["accepted"].as_bool(), reloads[1]["field_path"].as_str(), reloads[1]["version"].as_str()), (Some(false), Some("services.orders.base_url"), Some(first.as_str())), "{v}");
    assert_eq!(reloads[1]["principal"], admin_principal());

    // Every action is audited with the admin principal, failures too; never the key.
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/audit", Some(ADMIN), None).await;
    let actions: Vec<(&str, bool)> = v["audit"].as_array().unwrap().iter().map(|a| (a["action"].as_str().unwrap(), a["ok"].as_bool().unwrap())).collect();
    assert_eq!(actions, [("set_weight", false), ("set_weight", true), ("reload", false), ("breaker_close", true), ("breaker_open", true)], "{v}");
    assert!(v["audit"].as_array().unwrap().iter().all(|a| a["principal"] == admin_principal()), "{v}");
    assert_eq!(v["audit"][1]["target"], "chat/a");
    assert_eq!(v["audit"][1]["detail"]["weight"], 0);
    assert!(!v.to_string().contains(ADMIN), "{v}");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_and_error_texts_come_back_as_exact_json_strings() {
    let w = World::new().await;
    let script = "<img src=x onerror=window.__pwned=2><script>window.__pwned=1</script>";
    let rtl = "\u{202e}gnp.exe";
    let long = "N".repeat(10 * 1024);
    w.provider("c4-a", json!({"fail_rate": 1.0, "fail_status": 500, "error_message": format!("{script} {rtl}")})).await;
    w.provider("c4-b", json!({"content": "from b"})).await;
    // A caller name is 1 to 128 printable characters without `"`: markup fits in that; the RTL override and
    // the 10 KB names go where outside text arrives unchecked (model names, provider errors).
    let extra = json!({"callers": {script: {"key_sha256": sha256_hex(b"sk-hostile-0123456789"), "routes": ["*"]}},
        "routes": {"chat": {"providers": [{"id": "a", "service": "c4-a", "model": format!("{script}{rtl}"), "weight": 1}, {"id": "b", "service": "c4-b", "model": long.clone(), "weight": 1}]}}});
    let g = w.gateway(w.config("c4", extra)).await;
    assert_eq!(post(&w.http, &g, Some("sk-hostile-0123456789"), "/v1/chat/completions", hello("chat")).await.0, 200);
    use reqwest::Method as M;
    let (s, h, v) = admin_call(&w, &g, M::GET, "/admin/callers", Some(ADMIN), None).await;
    assert_eq!((s, h["content-type"].to_str().unwrap(), h["x-content-type-options"].to_str().unwrap()), (200, "application/json", "nosniff"));
    let hostile = v["callers"].as_array().unwrap().iter().find(|c| c["name"] == script).cloned().unwrap();
    assert_eq!(hostile["requests"], 1, "the name as configured, unchanged: {v}");
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/routes/chat", Some(ADMIN), None).await;
    assert_eq!(v["providers"][0]["model"].as_str(), Some(format!("{script}{rtl}").as_str()));
    assert_eq!(v["providers"][1]["model"].as_str(), Some(long.as_str()));
    assert!(v["providers"][0]["last_error"].is_string(), "{v}");
    // A hostile target in an action is audited as a string.
    let (s, _, _) = admin_call(&w, &g, M::POST, &format!("/admin/routes/chat/providers/{}/weight", "%3Cscript%3E"), Some(ADMIN), Some(json!({"weight": 1}))).await;
    assert_eq!(s, 400);
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/audit", Some(ADMIN), None).await;
    assert_eq!(v["audit"][0]["target"], "chat/<script>");
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_canary_is_promoted_and_rolled_back_from_the_admin_api_with_the_principal_as_author() {
    let w = World::new().await;
    w.provider("c5-a", json!({"content": "from a"})).await;
    w.provider("c5-b", json!({"content": "from b"})).await;
    let redis = harness_upstream::redis_server::RedisServer::start();
    let source = json!({"redis_url": redis.url(), "name": "edge", "poll_ms": 1000, "heartbeat_ms": 200, "instance_id": "gw-1"});
    let g = w.gateway(w.config("c5", json!({"config_source": source}))).await;
    use reqwest::Method as M;
    let mut pushed = w.config("c5", json!({}));
    for own in ["gateway", "callers"] {
        pushed.as_object_mut().unwrap().remove(own);
    }
    let mut admin = harness_core::fleet::Admin::connect(&redis.url(), "edge").await.unwrap();
    assert_eq!(admin.push(&pushed.to_string(), "json", &pushed, "ops", "v1", None, None).await.unwrap(), 1);
    pushed["routes"]["chat"]["providers"][0]["weight"] = json!(0);
    assert_eq!(admin.push(&pushed.to_string(), "json", &pushed, "ops", "a to 0", Some(1000), None).await.unwrap(), 2);

    // Nothing in (0, 100] is refused before Redis is asked.
    assert_eq!(admin_call(&w, &g, M::POST, "/admin/fleet/promote", Some(ADMIN), Some(json!({"percent": 0}))).await.0, 400);
    let (s, _, v) = admin_call(&w, &g, M::POST, "/admin/fleet/promote", Some(ADMIN), Some(json!({"percent": 100}))).await;
    assert_eq!((s, v["version"].as_u64()), (200, Some(2)), "{v}");
    let state = admin.state().await.unwrap();
    assert_eq!((state.stable, state.canary), (2, 0));
    let (s, _, v) = admin_call(&w, &g, M::POST, "/admin/fleet/rollback", Some(ADMIN), Some(json!({"reason": "a <b>bad</b> version"}))).await;
    assert_eq!((s, v["rolled_back"].as_u64()), (200, Some(2)), "{v}");
    assert_eq!(admin.state().await.unwrap().stable, 1);
    let log = admin.log().await.unwrap();
    let last = &log[log.len() - 2..];
    assert_eq!((last[0]["action"].as_str(), last[0]["author"].as_str()), (Some("promote"), Some(admin_principal().as_str())));
    assert_eq!((last[1]["action"].as_str(), last[1]["message"].as_str()), (Some("rollback"), Some("a <b>bad</b> version")));
    // Nothing left to roll back to: refused, and audited as a failure.
    let (s, _, _) = admin_call(&w, &g, M::POST, "/admin/fleet/rollback", Some(ADMIN), None).await;
    assert_eq!(s, 400);
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/audit", Some(ADMIN), None).await;
    let actions: Vec<(&str, bool)> = v["audit"].as_array().unwrap().iter().map(|a| (a["action"].as_str().unwrap(), a["ok"].as_bool().unwrap())).collect();
    assert_eq!(actions, [("fleet_rollback", false), ("fleet_rollback", true), ("fleet_promote", true), ("fleet_promote", false)], "{v}");
    let (_, _, v) = admin_call(&w, &g, M::GET, "/admin/config", Some(ADMIN), None).await;
    assert_eq!(v["config_source"]["name"], "edge", "{v}");
    g.shutdown().await;
}

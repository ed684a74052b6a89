//! Host interceptors against the loopback upstream: what `before` changes reaches the
//! upstream; an attempt interceptor runs on every attempt and an application one once;
//! `after` turns a 200 carrying an error code into a retried failure; raising, hanging
//! and hostile interceptors are `InterceptorError`s and the client stays healthy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::interceptors::{HostInterceptor, Level, Phase, Registration};
use harness_core::transport::BoxFuture;
use harness_core::{Body, Client, Request};
use parking_lot::Mutex;
use serde_json::{json, Value};

async fn script(u: &harness_upstream::Upstream, name: &str, steps: Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new().put(format!("{}/__admin/script/{name}", u.url())).body(json!({ "steps": steps }).to_string()).send().await.unwrap();
    assert!(r.status().is_success());
}

async fn log(u: &harness_upstream::Upstream, name: &str) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&reqwest::get(format!("{}/__admin/log/{name}", u.url())).await.unwrap().bytes().await.unwrap()).unwrap();
    v["requests"].as_array().unwrap().clone()
}

type Hook = dyn Fn(Phase, Value) -> Result<Value, String> + Send + Sync;

/// A host interceptor from a closure, optionally slow; it records every input it saw.
struct Fn_ {
    hook: Box<Hook>,
    delay: Duration,
    seen: Mutex<Vec<(Phase, Value)>>,
}

impl Fn_ {
    fn new(hook: impl Fn(Phase, Value) -> Result<Value, String> + Send + Sync + 'static) -> Arc<Fn_> {
        Arc::new(Fn_ { hook: Box::new(hook), delay: Duration::ZERO, seen: Mutex::new(Vec::new()) })
    }

    fn slow(delay: Duration, hook: impl Fn(Phase, Value) -> Result<Value, String> + Send + Sync + 'static) -> Arc<Fn_> {
        Arc::new(Fn_ { hook: Box::new(hook), delay, seen: Mutex::new(Vec::new()) })
    }

    fn seen(&self, phase: Phase) -> Vec<Value> {
        self.seen.lock().iter().filter(|(p, _)| *p == phase).map(|(_, v)| v.clone()).collect()
    }
}

impl HostInterceptor for Fn_ {
    fn call(&self, phase: Phase, input: String) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move {
            let v: Value = serde_json::from_str(&input).unwrap();
            self.seen.lock().push((phase, v.clone()));
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            (self.hook)(phase, v).map(|o| o.to_string())
        })
    }
}

fn reg(name: &str, level: Level) -> Registration {
    Registration { name: name.into(), level: Some(level), before: true, after: true, ..Default::default() }
}

fn client(u: &harness_upstream::Upstream, extra: Value) -> Client {
    let mut cfg = json!({
        "log": {"enabled": false},
        "services": {"svc": {"base_url": u.url(), "retry": {"max_retries": 3, "base_delay_ms": 1, "max_delay_ms": 5}}, "other": {"base_url": u.url()}}
    });
    harness_upstream::merge_json(&mut cfg, &extra);
    Client::from_value(cfg).unwrap()
}

fn get(path: &str) -> Request {
    Request { service: "svc".into(), method: "GET".into(), path: path.into(), ..Default::default() }
}

#[tokio::test]
async fn before_changes_headers_query_and_body_as_the_upstream_sees_them() {
    let u = harness_upstream::start().await.unwrap();
    script(&u, "chg", json!([{"json": {"ok": true}}])).await;
    let c = client(&u, json!({}));
    let hook = Fn_::new(|phase, r| {
        if phase == Phase::After {
            return Ok(Value::Null);
        }
        // The parsed JSON body and the caller's header are seen.
        assert_eq!(r["json"], json!({"order": 7}));
        assert!(r["headers"].as_array().unwrap().iter().any(|h| h == &json!(["x-drop", "1"])));
        let mut body = r["json"].clone();
        body["tenant"] = json!("acme");
        Ok(json!({"headers": {"x-tenant": "acme", "x-drop": null}, "query": {"region": "eu"}, "json": body}))
    });
    c.add_interceptor(Registration { before: true, ..reg("tenant", Level::Application) }, hook.clone()).unwrap();
    let req = Request {
        method: "POST".into(),
        body: Body::Json(json!({"order": 7})),
        headers: vec![("x-drop".into(), "1".into())],
        query: vec![("page".into(), "2".into())],
        ..get("/s/chg/orders")
    };
    let r = c.request(req).await.unwrap();
    assert_eq!(r.status, 200);
    let seen = log(&u, "chg").await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["headers"]["x-tenant"], "acme");
    assert!(seen[0]["headers"].get("x-drop").is_none());
    assert_eq!(seen[0]["path"], "/s/chg/orders?page=2&region=eu");
    assert_eq!(serde_json::from_str::<Value>(seen[0]["body"].as_str().unwrap()).unwrap(), json!({"order": 7, "tenant": "acme"}));
    // `after` saw the answer, without its body (not asked for).
    let after = hook.seen(Phase::After);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0]["status"], 200);
    assert!(after[0]["body_base64"].is_null());
    assert_eq!(after[0]["trace_id"].as_str().unwrap(), r.trace_id);
}

#[tokio::test]
async fn attempt_interceptors_run_on_every_retry_and_application_ones_once() {
    let u = harness_upstream::start().await.unwrap();
    script(&u, "lvl", json!([{"status": 503, "times": 2}, {"json": {"ok": true}}])).await;
    let c = client(&u, json!({}));
    let app = Fn_::new(|_, _| Ok(Value::Null));
    let attempt = Fn_::new(|phase, r| Ok(if phase == Phase::Before { json!({"headers": {"x-attempt": r["attempt"].to_string()}}) } else { Value::Null }));
    c.add_interceptor(reg("app", Level::Application), app.clone()).unwrap();
    c.add_interceptor(reg("per-attempt", Level::Attempt), attempt.clone()).unwrap();
    let r = c.request(get("/s/lvl/x")).await.unwrap();
    assert_eq!((r.status, r.attempts), (200, 3));
    assert_eq!(app.seen(Phase::Before).len(), 1);
    assert_eq!(app.seen(Phase::After).len(), 1);
    let numbers: Vec<Value> = attempt.seen(Phase::Before).iter().map(|v| v["attempt"].clone()).collect();
    assert_eq!(numbers, [json!(1), json!(2), json!(3)]);
    let sent: Vec<Value> = log(&u, "lvl").await.iter().map(|r| r["headers"]["x-attempt"].clone()).collect();
    assert_eq!(sent, [json!("1"), json!("2"), json!("3")]);
    // `after` runs on the answers an attempt accepted (the 503s are errors, not answers).
    assert_eq!(attempt.seen(Phase::After).len(), 1);
    // The config may set the level by name: the attempt one becomes an application one.
    let c2 = client(&u, json!({"interceptors": {"levels": {"per-attempt": "application"}}}));
    script(&u, "lvl", json!([{"status": 503, "times": 2}, {"json": {"ok": true}}])).await;
    let attempt2 = Fn_::new(|_, _| Ok(Value::Null));
    c2.add_interceptor(reg("per-attempt", Level::Attempt), attempt2.clone()).unwrap();
    assert_eq!(c2.request(get("/s/lvl/x")).await.unwrap().attempts, 3);
    assert_eq!(attempt2.seen(Phase::Before).len(), 1);
}

/// A partner that answers errors with 200 and an error code in the body.
fn partner_check(phase: Phase, r: Value) -> Result<Value, String> {
    if phase == Phase::Before {
        return Ok(Value::Null);
    }
    match r["json"]["errCode"].as_str() {
        Some("BUSY") => Ok(json!({"fail": {"message": "partner busy", "retryable": true, "code": "BUSY"}})),
        Some(code) => Ok(json!({"fail": {"message": format!("partner error {code}"), "code": code}})),
        None => Ok(Value::Null),
    }
}

#[tokio::test]
async fn a_200_with_an_error_code_becomes_a_retried_failure() {
    let u = harness_upstream::start().await.unwrap();
    let c = client(&u, json!({}));
    c.add_interceptor(Registration { want_body: true, ..reg("partner", Level::Attempt) }, Fn_::new(partner_check)).unwrap();
    script(&u, "busy", json!([{"json": {"errCode": "BUSY"}}, {"json": {"result": 1}}])).await;
    let r = c.request(get("/s/busy/x")).await.unwrap();
    assert_eq!((r.status, r.attempts), (200, 2));
    assert_eq!(log(&u, "busy").await.len(), 2);
    // Always busy: retried up to max_retries, then the InterceptorError with its code.
    script(&u, "busy2", json!([{"json": {"errCode": "BUSY"}}])).await;
    let e = c.request(get("/s/busy2/x")).await.unwrap_err();
    assert_eq!((e.name(), e.code.as_deref(), e.status), ("InterceptorError", Some("BUSY"), Some(200)));
    assert_eq!(e.attempts, 4, "{e}");
    assert!(e.message.contains("interceptor `partner` after") && e.message.contains("partner busy"), "{}", e.message);
    // Not retryable: one attempt.
    script(&u, "bad", json!([{"json": {"errCode": "DENIED"}}])).await;
    let e = c.request(get("/s/bad/x")).await.unwrap_err();
    assert_eq!((e.name(), e.code.as_deref(), e.attempts), ("InterceptorError", Some("DENIED"), 1));
    // A POST is not resent after a rejected answer (it was executed): the retry rules hold.
    script(&u, "post", json!([{"json": {"errCode": "BUSY"}}, {"json": {"ok": 1}}])).await;
    let e = c.request(Request { method: "POST".into(), ..get("/s/post/x") }).await.unwrap_err();
    assert_eq!((e.name(), e.attempts), ("InterceptorError", 1));
}

#[tokio::test]
async fn raising_hanging_and_hostile_interceptors_are_typed_errors_and_send_nothing() {
    let u = harness_upstream::start().await.unwrap();
    script(&u, "h", json!([{"json": {"ok": true}}])).await;
    let c = client(&u, json!({"interceptors": {"timeout_ms": 200}, "services": {"svc": {"limits": {"max_request_bytes": 1024}}}}));
    let cases: Vec<(&str, Arc<Fn_>, &str, &str)> = vec![
        ("raises", Fn_::new(|_, _| Err("ValueError: no tenant in context".into())), "raised", "ValueError: no tenant in context"),
        ("hangs", Fn_::slow(Duration::from_secs(5), |_, _| Ok(Value::Null)), "timeout", "did not return within 200 ms"),
        ("framing", Fn_::new(|_, _| Ok(json!({"headers": {"Transfer-Encoding": "chunked"}}))), "invalid", "headers.Transfer-Encoding"),
        ("host", Fn_::new(|_, _| Ok(json!({"headers": {"host": "evil.example"}}))), "invalid", "headers.host"),
        ("escape", Fn_::new(|_, _| Ok(json!({"path": "/s/h/../../__admin/log/h"}))), "invalid", "path"),
        ("encoded", Fn_::new(|_, _| Ok(json!({"path": "/s/h/%2e%2e/%2e%2e/x"}))), "invalid", "path"),
        ("crlf", Fn_::new(|_, _| Ok(json!({"headers": {"x-a": "1\r\nx-b: 2"}}))), "invalid", "headers.x-a"),
        ("huge", Fn_::new(|_, _| Ok(json!({"json": "x".repeat(4096)}))), "invalid", "limits.max_request_bytes"),
        ("garbage", Fn_::new(|_, _| Ok(json!("yes"))), "invalid", "a string"),
    ];
    for level in [Level::Application, Level::Attempt] {
        for (name, hook, code, text) in &cases {
            c.add_interceptor(Registration { before: true, ..reg(name, level) }, hook.clone()).unwrap();
            let t = Instant::now();
            let e = c.request(get("/s/h/x")).await.unwrap_err();
            assert_eq!((e.name(), e.code.as_deref()), ("InterceptorError", Some(*code)), "{name}: {e}");
            assert!(e.message.contains(&format!("interceptor `{name}` before: ")) && e.message.contains(text), "{name}: {}", e.message);
            assert!(t.elapsed() < Duration::from_secs(2), "{name} took {:?}", t.elapsed());
            assert_eq!(e.attempts, 0, "{name}: nothing was sent");
            assert!(c.remove_interceptor(name));
        }
    }
    assert!(log(&u, "h").await.is_empty(), "no refused call reached the upstream");
    // The client stays healthy: breaker closed, nothing held, the next call goes through.
    assert_eq!(c.request(get("/s/h/x")).await.unwrap().status, 200);
    assert_eq!(c.bulkhead_in_use("svc").unwrap(), 0);
    // A raising `after` fails the call and says so.
    c.add_interceptor(Registration { after: true, ..Registration { name: "after-raises".into(), ..Default::default() } }, Fn_::new(|_, _| Err("KeyError: 'x'".into()))).unwrap();
    let e = c.request(get("/s/h/x")).await.unwrap_err();
    assert_eq!((e.name(), e.code.as_deref()), ("InterceptorError", Some("raised")));
    assert!(e.message.contains("interceptor `after-raises` after: raised KeyError"), "{}", e.message);
}

#[tokio::test]
async fn a_slow_interceptor_holds_only_its_own_calls() {
    let u = harness_upstream::start().await.unwrap();
    script(&u, "slow", json!([{"json": {"ok": true}}])).await;
    let c = Arc::new(client(&u, json!({"interceptors": {"timeout_ms": 5000}})));
    c.add_interceptor(Registration { services: vec!["svc".into()], after: false, ..reg("slow", Level::Application) }, Fn_::slow(Duration::from_secs(1), |_, _| Ok(Value::Null)))
        .unwrap();
    let t = Instant::now();
    let slow: Vec<_> = (0..8)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move {
                c.request(get("/s/slow/x")).await.map(|r| r.status)
            })
        })
        .collect();
    // Calls to another service are not held up by it.
    for _ in 0..20 {
        let r = c.request(Request { service: "other".into(), ..get("/s/slow/y") }).await.unwrap();
        assert_eq!(r.status, 200);
    }
    assert!(t.elapsed() < Duration::from_millis(800), "{:?}", t.elapsed());
    for s in slow {
        assert_eq!(s.await.unwrap().unwrap(), 200);
    }
    let all = t.elapsed();
    assert!(all >= Duration::from_secs(1) && all < Duration::from_millis(1900), "the slow calls ran side by side: {all:?}");
}

#[tokio::test]
async fn a_secret_an_interceptor_adds_is_scrubbed_like_a_credential() {
    let u = harness_upstream::start().await.unwrap();
    const KEY: &str = "partner-key-9f8e7d6c5b4a";
    // The upstream echoes the key back in its error.
    script(&u, "sec", json!([{"status": 400, "json": {"error": {"message": format!("bad key {KEY}"), "code": "bad_key"}}}])).await;
    let c = client(&u, json!({}));
    c.add_interceptor(
        Registration { before: true, ..reg("partner-auth", Level::Attempt) },
        Fn_::new(|_, _| Ok(json!({"headers": {"x-partner-key": KEY}, "secret": ["x-partner-key"]}))),
    )
    .unwrap();
    let e = c.request(get("/s/sec/x")).await.unwrap_err();
    assert_eq!(e.name(), "HttpStatusError");
    assert_eq!(log(&u, "sec").await[0]["headers"]["x-partner-key"], KEY);
    let text = format!("{e} {e:?} {}", String::from_utf8_lossy(e.body.as_deref().unwrap_or_default()));
    assert!(!text.contains(KEY), "{text}");
}

#[tokio::test]
async fn services_filter_and_routes_see_each_provider() {
    let u = harness_upstream::start().await.unwrap();
    let http = reqwest::Client::new();
    for (name, spec) in [("icpt-a", json!({"fail_first": 1, "fail_status": 503})), ("icpt-b", json!({"content": "from b"}))] {
        http.post(format!("{}/__admin/provider/{name}", u.url())).body(spec.to_string()).send().await.unwrap();
    }
    let c = Client::from_value(json!({
        "log": {"enabled": false},
        "services": {
            "pa": {"base_url": format!("{}/llm/icpt-a", u.url())},
            "pb": {"base_url": format!("{}/llm/icpt-b", u.url())},
            "svc": {"base_url": u.url()}
        },
        "routes": {"chat": {"adapter": "openai-compatible", "strategy": "priority", "same_provider_retries": 0, "providers": [
            {"id": "a", "service": "pa", "model": "m", "weight": 1},
            {"id": "b", "service": "pb", "model": "m", "weight": 1}
        ]}}
    }))
    .unwrap();
    let hook = Fn_::new(|_, r| Ok(json!({"headers": {"x-test-provider": r["provider"].as_str().unwrap_or("none")}})));
    c.add_interceptor(Registration { services: vec!["chat".into()], after: false, ..reg("per-provider", Level::Attempt) }, hook.clone()).unwrap();
    let chat: harness_core::ChatRequest = serde_json::from_value(json!({"messages": [{"role": "user", "content": "hi"}]})).unwrap();
    let r = c.chat("chat", chat).await.unwrap();
    assert_eq!(r.content, "from b");
    let providers: Vec<Value> = hook.seen(Phase::Before).iter().map(|v| v["provider"].clone()).collect();
    assert_eq!(providers, [json!("a"), json!("b")]);
    let logged: Value = serde_json::from_slice(&http.get(format!("{}/__admin/provider-log/icpt-b", u.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(logged["requests"][0]["headers"]["x-test-provider"], "b");
    // A call to another service does not run it.
    script(&u, "f", json!([{"json": {"ok": true}}])).await;
    c.request(get("/s/f/x")).await.unwrap();
    assert_eq!(hook.seen(Phase::Before).len(), 2);
}

#[tokio::test]
async fn a_hedge_is_an_attempt_its_interceptors_see() {
    let u = harness_upstream::start().await.unwrap();
    let c = client(&u, json!({"services": {"svc": {"retry": {"max_retries": 0}, "hedge": {"after_ms": 5, "budget_ratio": 1.0}}}}));
    // Fill the hedge budget first (each eligible read deposits).
    script(&u, "hedge", json!([{"json": {"ok": true}}])).await;
    for _ in 0..20 {
        c.request(get("/s/hedge/x")).await.unwrap();
    }
    let hook = Fn_::new(|_, r| Ok(json!({"headers": {"x-attempt": r["attempt"].to_string()}})));
    c.add_interceptor(Registration { after: false, ..reg("per-attempt", Level::Attempt) }, hook.clone()).unwrap();
    script(&u, "hedge", json!([{"delay_ms": 300, "json": {"first": true}}, {"json": {"hedge": true}}])).await;
    let r = c.request(get("/s/hedge/x")).await.unwrap();
    assert_eq!(r.status, 200);
    let numbers: Vec<Value> = hook.seen(Phase::Before).iter().map(|v| v["attempt"].clone()).collect();
    assert_eq!(numbers, [json!(1), json!(2)], "the first attempt and its hedge");
    let sent: Vec<Value> = log(&u, "hedge").await.iter().map(|r| r["headers"]["x-attempt"].clone()).collect();
    assert_eq!(sent, [json!("1"), json!("2")]);
}

//! What an operator (or a gateway) does to a live client: pin a route to one model, open and
//! close a breaker by hand, and hold a rate limit of its own.

use harness_core::deadline::Deadline;
use harness_core::ratelimit::RateLimitConfig;
use harness_core::{ChatRequest, Client, Request};
use serde_json::json;

async fn provider(base: &str, name: &str, spec: serde_json::Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new().post(format!("{base}/__admin/provider/{name}")).body(spec.to_string()).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_slash_model_is_served_only_by_that_models_providers() {
    let u = harness_upstream::start().await.unwrap();
    for p in ["op-a", "op-b"] {
        provider(&u.url(), p, json!({"content": "from {name}"})).await;
    }
    let svc = |p: &str| json!({"base_url": format!("{}/llm/{p}", u.url())});
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"op-a": svc("op-a"), "op-b": svc("op-b")},
        "routes": {"chat": {"adapter": "openai-compatible", "providers": [
            {"id": "a", "service": "op-a", "model": "model-a", "weight": 99}, {"id": "b", "service": "op-b", "model": "model-b", "weight": 1}]}}}))
    .unwrap();
    let hello = || ChatRequest::new(json!([{"role": "user", "content": "hi"}]));
    for _ in 0..10 {
        let r = client.chat("chat/model-b", hello()).await.unwrap();
        assert_eq!((r.provider.as_deref(), r.content.as_str()), (Some("b"), "from op-b"));
    }
    let e = client.chat("chat/model-z", hello()).await.unwrap_err();
    assert!(e.name() == "ConfigError" && e.message.contains("model-a, model-b"), "{}", e.message);
    // A plain request naming `route/model` is pinned the same way.
    let mut req = Request::new("chat/model-a", "POST", "/v1/chat/completions");
    req.body = harness_core::Body::Json(json!({"messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!(client.request(req).await.unwrap().provider(), Some("a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_opened_by_hand_stays_open_until_closed_by_hand() {
    let u = harness_upstream::start().await.unwrap();
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": u.url(), "breaker": {"open_ms": 10}}}})).unwrap();
    assert!(client.request(Request::new("svc", "GET", "/x")).await.is_ok());
    client.set_breaker("svc", "get", "/x", true).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let e = client.request(Request::new("svc", "GET", "/x")).await.unwrap_err();
    assert_eq!(e.name(), "CircuitOpenError", "held open past open_ms");
    assert!(client.breakers().contains(&("svc".into(), "/x".into(), "GET".into(), "open")), "{:?}", client.breakers());
    client.set_breaker("svc", "GET", "/x", false).unwrap();
    assert!(client.request(Request::new("svc", "GET", "/x")).await.is_ok());
    assert_eq!(client.breaker_state("svc", "GET", "/x", None), "closed");
    assert!(client.set_breaker("nope", "GET", "/x", true).unwrap_err().message.contains("unknown service"));
    assert!(client.set_breaker("svc", "G ET", "/x", true).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limiter_of_its_own_refuses_past_its_rate() {
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {}})).unwrap();
    let cfg: RateLimitConfig = serde_json::from_value(json!({"rps": 1, "burst": 2, "max_wait_ms": 0})).unwrap();
    let limiter = client.rate_limiter("caller:ann", &cfg).unwrap();
    let deadline = Deadline::after(std::time::Duration::from_secs(1));
    assert!(limiter.acquire("POST", "/v1/chat/completions", &deadline).await.is_ok());
    assert!(limiter.acquire("POST", "/v1/chat/completions", &deadline).await.is_ok());
    let e = limiter.acquire("POST", "/v1/chat/completions", &deadline).await.unwrap_err();
    assert_eq!(e.name(), "RateLimitedError");
    assert!(e.retry_after_ms.is_some());
}

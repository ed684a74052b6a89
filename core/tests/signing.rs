//! Signed requests (`auth: {type: hmac}` and `{type: aws_sigv4}`) against the test upstream,
//! which checks each signature with its own implementation (`tests/upstream/src/signed.rs`):
//! every preset verified live, every retry and every hedge signed afresh (a new timestamp and
//! nonce), a wrong key a 401 that is not replayed, SigV4 keys from a host provider refreshed on
//! a 401, secrets scrubbed from what a downstream echoes, and one `signature` block that signs
//! a service's requests and verifies them at the receiver.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use harness_core::{Body, Client, Idempotency, ProviderError, Request, Token, TokenProvider};
use serde_json::{json, Value};

const AKID: &str = "AKIDEXAMPLE";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn upstream() -> (harness_upstream::Upstream, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    (u, base)
}

async fn script(base: &str, name: &str, steps: Value) {
    let r = reqwest::Client::new().put(format!("{base}/__admin/script/{name}")).body(json!({ "steps": steps }).to_string()).send().await.unwrap();
    assert!(r.status().is_success());
}

async fn log(base: &str, name: &str) -> Vec<Value> {
    let bytes = reqwest::Client::new().get(format!("{base}/__admin/log/{name}")).send().await.unwrap().bytes().await.unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["requests"].as_array().unwrap().clone()
}

fn client(base: &str, auth: Value, extra: Value) -> Client {
    let mut svc = json!({"base_url": base, "auth": auth, "retry": {"max_retries": 3, "base_delay_ms": 10, "max_delay_ms": 10, "jitter": false}});
    if let Value::Object(o) = extra {
        for (k, v) in o {
            svc[k] = v;
        }
    }
    Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": svc}})).unwrap()
}

fn post(path: &str, body: Value) -> Request {
    let mut r = Request::new("svc", "POST", path);
    r.body = Body::Json(body);
    r
}

fn verify_step(scheme: &str, secret: &str) -> Value {
    json!({"verify": {"scheme": scheme, "secret": secret}})
}

fn sigv4_step() -> Value {
    json!({"verify": {"scheme": "aws_sigv4", "access_key_id": AKID, "secret_access_key": AWS_SECRET, "region": "us-east-1", "service": "service"}})
}

#[tokio::test]
async fn every_preset_is_verified_by_the_upstream() {
    let (_u, base) = upstream().await;
    for (preset, secret) in [("harness", "shared-secret-1"), ("slack", "8f742231b10e8888abcd99yyyzzz85a5"), ("github", "It's a Secret to Everybody"), ("standard_webhooks", SW_SECRET)] {
        let name = format!("preset-{preset}");
        script(&base, &name, json!([verify_step(preset, secret)])).await;
        let c = client(&base, json!({"type": "hmac", "preset": preset, "secret": {"value": secret}}), json!({}));
        let mut req = post(&format!("/s/{name}/hook"), json!({"event": "paid", "n": 1}));
        req.query = vec![("b".into(), "2".into()), ("a".into(), "1".into())];
        let r = c.request(req).await.unwrap();
        assert_eq!(r.status, 200, "{preset}: {}", String::from_utf8_lossy(&r.body));
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["verified"]["scheme"], preset);
    }
}

#[tokio::test]
async fn a_retry_is_signed_again_with_a_fresh_timestamp_and_nonce() {
    let (_u, base) = upstream().await;
    let v = verify_step("standard_webhooks", SW_SECRET);
    let failing = json!({"verify": v["verify"], "status": 503, "times": 2});
    script(&base, "retry", json!([failing, v])).await;
    let c = client(&base, json!({"type": "hmac", "preset": "standard_webhooks", "secret": {"value": SW_SECRET}, "timestamp_unit": "s"}), json!({}));
    let r = c.request(Request::new("svc", "GET", "/s/retry/x")).await.unwrap();
    assert_eq!((r.status, r.attempts), (200, 3));
    let seen = log(&base, "retry").await;
    assert_eq!(seen.len(), 3);
    // Each attempt verified, each with its own message id (a reused one would be refused).
    let ids: HashSet<&str> = seen.iter().map(|e| e["verified"]["nonce"].as_str().expect("verified")).collect();
    assert_eq!(ids.len(), 3);

    // A millisecond timestamp: each attempt's differs too, and each signs its own.
    script(&base, "retry-ms", json!([{"status": 503}, {"status": 200}])).await;
    let auth = json!({"type": "hmac", "secret": {"value": "k-1"}, "timestamp_unit": "ms", "canonical": "{method}\n{path}\n{timestamp}\n{nonce}\n{body}", "nonce_header": "x-nonce"});
    let c = client(&base, auth, json!({}));
    tokio::time::sleep(Duration::from_millis(2)).await;
    let mut req = post("/s/retry-ms/y", json!({"a": 1}));
    req.idempotency_key = Some("order-1".into());
    let r = c.request(req).await.unwrap();
    assert_eq!((r.status, r.attempts), (200, 2));
    let seen = log(&base, "retry-ms").await;
    let h = |e: &Value, n: &str| e["headers"][n].as_str().unwrap().to_string();
    assert_ne!(h(&seen[0], "x-timestamp"), h(&seen[1], "x-timestamp"));
    assert_ne!(h(&seen[0], "x-nonce"), h(&seen[1], "x-nonce"));
    for e in &seen {
        let canonical = format!("POST\n/s/retry-ms/y\n{}\n{}\n{}", h(e, "x-timestamp"), h(e, "x-nonce"), e["body"].as_str().unwrap());
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"k-1");
        let want: String = ring::hmac::sign(&key, canonical.as_bytes()).as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(h(e, "x-signature"), want);
    }
}

#[tokio::test]
async fn a_hedge_is_signed_on_its_own() {
    let (_u, base) = upstream().await;
    let v = verify_step("standard_webhooks", SW_SECRET);
    script(&base, "hedge", json!([{"verify": v["verify"], "delay_ms": 400}, v])).await;
    let auth = json!({"type": "hmac", "preset": "standard_webhooks", "secret": {"value": SW_SECRET}});
    let c = client(&base, auth, json!({"retry": {"max_retries": 0}, "hedge": {"after_ms": 50, "budget_ratio": 1.0}}));
    let r = c.request(Request::new("svc", "GET", "/s/hedge/x")).await.unwrap();
    assert_eq!(r.status, 200);
    let seen = log(&base, "hedge").await;
    assert_eq!(seen.len(), 2, "the read was hedged");
    let ids: HashSet<&str> = seen.iter().map(|e| e["verified"]["nonce"].as_str().unwrap_or_else(|| panic!("not verified: {e}"))).collect();
    assert_eq!(ids.len(), 2, "each hedge carries its own nonce");
}

#[tokio::test]
async fn a_wrong_secret_is_an_auth_error_not_replayed_and_never_shown() {
    let (_u, base) = upstream().await;
    script(&base, "wrong", json!([verify_step("slack", "the-right-secret")])).await;
    let c = client(&base, json!({"type": "hmac", "preset": "slack", "secret": {"value": "a-wrong-secret-77"}}), json!({}));
    let e = c.request(post("/s/wrong/x", json!({}))).await.unwrap_err();
    assert_eq!((e.name(), e.status, e.attempts), ("AuthError", Some(401), 1));
    assert_eq!(log(&base, "wrong").await.len(), 1, "a 401 on a signed request is not replayed");
    // A downstream that echoes the secret: scrubbed from the error, on a 401 as on a 500.
    script(&base, "echo", json!([{"status": 401, "json": {"message": "key a-wrong-secret-77 refused"}}, {"status": 500, "json": {"message": "key a-wrong-secret-77 broke"}}])).await;
    let c2 = client(&base, json!({"type": "hmac", "preset": "slack", "secret": {"value": "a-wrong-secret-77"}}), json!({"retry": {"max_retries": 0}}));
    for _ in 0..2 {
        let e = c2.request(post("/s/echo/x", json!({}))).await.unwrap_err();
        let text = format!("{e} {e:?} {}", String::from_utf8_lossy(e.body.as_deref().unwrap_or(&[])));
        assert!(!text.contains("a-wrong-secret-77"), "{text}");
    }
}

#[tokio::test]
async fn sigv4_is_verified_by_the_upstream_with_and_without_a_session_token() {
    let (_u, base) = upstream().await;
    script(&base, "v4", json!([sigv4_step()])).await;
    let auth = json!({"type": "aws_sigv4", "service": "service", "region": "us-east-1", "access_key_id": {"value": AKID}, "secret_access_key": {"value": AWS_SECRET}});
    let c = client(&base, auth.clone(), json!({}));
    let mut req = post("/s/v4/items", json!({"id": 7}));
    req.query = vec![("b".into(), "two words".into()), ("a".into(), "1".into())];
    req.headers.push(("x-tenant".into(), "  acme   corp ".into()));
    let r = c.request(req).await.unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(body["verified"]["signed_headers"].as_str().unwrap().contains("x-tenant"), "{body}");

    let mut with_token = auth.clone();
    with_token["session_token"] = json!({"value": "session-token-xyz"});
    with_token["content_sha256"] = json!(true);
    script(&base, "v4t", json!([sigv4_step(), {"status": 403, "json": {"message": "token session-token-xyz and key wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY rejected"}}])).await;
    let c = client(&base, with_token, json!({"retry": {"max_retries": 0}}));
    let r = c.request(Request::new("svc", "GET", "/s/v4t/x")).await.unwrap();
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["verified"]["session_token"], true);
    let seen = log(&base, "v4t").await;
    assert_eq!(seen[0]["headers"]["x-amz-content-sha256"], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // The secret key and the session token never come back in an error.
    let e = c.request(Request::new("svc", "GET", "/s/v4t/x")).await.unwrap_err();
    let text = format!("{e} {e:?} {}", String::from_utf8_lossy(e.body.as_deref().unwrap_or(&[])));
    assert!(!text.contains("session-token-xyz") && !text.contains(AWS_SECRET), "{text}");
    // The state API names the type, never a key.
    let state = serde_json::to_string(&c.credentials_state()).unwrap();
    assert!(state.contains("\"type\":\"aws_sigv4\"") && state.contains("\"status\":\"valid\""), "{state}");
    assert!(!state.contains("session-token-xyz") && !state.contains(AWS_SECRET));
}

/// Hands out SigV4 keys as a JSON token; the first ones are wrong.
struct Keys(AtomicUsize);

impl TokenProvider for Keys {
    fn fetch(&self) -> harness_core::transport::BoxFuture<'_, Result<Token, ProviderError>> {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let secret = if n == 0 { "stale-secret-key" } else { AWS_SECRET };
            let value = json!({"access_key_id": AKID, "secret_access_key": secret, "session_token": format!("tok-{n}")}).to_string();
            Ok(Token { value: harness_core::credentials::secret::Secret::new(value), expires_in: Some(Duration::from_secs(3600)) })
        })
    }
}

#[tokio::test]
async fn sigv4_keys_from_a_host_provider_are_refreshed_on_a_401_and_replayed_once() {
    let (_u, base) = upstream().await;
    script(&base, "cb", json!([sigv4_step()])).await;
    let c = client(&base, json!({"type": "aws-sigv4", "service": "service", "region": "us-east-1", "credentials": "callback"}), json!({"retry": {"max_retries": 0}}));
    let keys = Arc::new(Keys(AtomicUsize::new(0)));
    c.set_token_provider("svc", keys.clone()).unwrap();
    let r = c.request(post("/s/cb/x", json!({"k": 1}))).await.unwrap();
    assert_eq!((r.status, r.attempts), (200, 2));
    assert_eq!(keys.0.load(Ordering::SeqCst), 2, "refreshed once");
    let seen = log(&base, "cb").await;
    assert!(seen[0]["verified"]["error"].is_string() && seen[1]["verified"]["scheme"] == "aws_sigv4", "{seen:?}");
    let state = serde_json::to_string(&c.credentials_state()).unwrap();
    assert!(!state.contains(AWS_SECRET) && !state.contains("tok-1"), "{state}");
}

#[tokio::test]
async fn one_signature_block_signs_requests_and_verifies_them_at_the_receiver() {
    let (_u, base) = upstream().await;
    let block = json!({"type": "hmac", "preset": "slack", "secret": {"value": "8f742231b10e8888abcd99yyyzzz85a5"}});
    script(&base, "both", json!([{}])).await;
    let c = client(&base, block.clone(), json!({}));
    c.request(post("/s/both/x", json!({"event": 1}))).await.unwrap();
    let sent = &log(&base, "both").await[0];
    let idem = Idempotency::from_value(json!({ "signature": block })).unwrap();
    let (ts, sig) = (sent["headers"]["x-slack-request-timestamp"].as_str().unwrap(), sent["headers"]["x-slack-signature"].as_str().unwrap());
    let body = sent["body"].as_str().unwrap().as_bytes();
    idem.verify(ts, body, sig).unwrap();
    assert_eq!(idem.sign(ts, body).unwrap(), sig);
    assert_eq!(idem.verify(ts, b"tampered", sig).unwrap_err().code.as_deref(), Some("bad_signature"));
    // A scheme that signs what verify(timestamp, body, signature) cannot give is refused.
    let e = Idempotency::from_value(json!({"signature": {"preset": "standard_webhooks", "secret": {"value": SW_SECRET}}})).unwrap_err();
    assert!(e.message.starts_with("signature.preset: the receiver's verify(timestamp, body, signature) cannot supply {nonce}"), "{}", e.message);
    let e = Idempotency::from_value(json!({"signature": {"preset": "nope", "secret": {"value": "k"}}})).unwrap_err();
    assert!(e.message.starts_with("signature.preset: "), "{}", e.message);
}

#[tokio::test]
async fn the_state_api_and_debug_never_show_an_hmac_secret() {
    let (_u, base) = upstream().await;
    let c = client(&base, json!({"type": "hmac", "preset": "github", "secret": {"value": "gh-secret-123"}}), json!({}));
    let state = c.credentials_state();
    let text = serde_json::to_string(&state).unwrap();
    assert!(text.contains("\"type\":\"hmac\"") && text.contains("\"status\":\"valid\""), "{text}");
    assert!(!text.contains("gh-secret-123") && !format!("{state:?}").contains("gh-secret-123"));
    let secrets = c.service_secrets("svc").unwrap();
    assert_eq!(secrets.scrub("echo gh-secret-123"), "echo ***");
}

#[test]
fn a_missing_or_unusable_key_is_a_config_error_naming_the_field() {
    let build = |auth: Value| match Client::from_value(json!({"services": {"s": {"base_url": "http://127.0.0.1:1", "auth": auth}}})) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.message,
    };
    let e = build(json!({"type": "hmac", "secret": {"env": "HARNESS_TEST_SURELY_UNSET_HMAC"}}));
    assert_eq!(e, "services.s.auth.secret.env: environment variable HARNESS_TEST_SURELY_UNSET_HMAC is not set");
    let e = build(json!({"type": "hmac", "preset": "standard_webhooks", "secret": {"value": "not base64!"}}));
    assert_eq!(e, "services.s.auth.secret: secret_encoding is base64, but the secret is not base64");
    let e = build(json!({"type": "aws_sigv4", "region": "us-east-1", "service": "s", "access_key_id": {"value": AKID}, "secret_access_key": {"env": "HARNESS_TEST_SURELY_UNSET_AWS"}}));
    assert_eq!(e, "services.s.auth.secret_access_key.env: environment variable HARNESS_TEST_SURELY_UNSET_AWS is not set");
}

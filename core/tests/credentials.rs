//! Credentials against real parts: the test upstream's token endpoint and a real
//! `redis-server` (started here on a free loopback port, stopped on drop). Three OS
//! processes sharing one Redis make exactly one token call per expiry; Redis killed
//! mid-run and an auth server down in the soft window never fail a request; a
//! shared token is sealed at rest; no token appears in any record or event.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::{Client, ClientOptions, Config, Event, EventSink, Request};
use parking_lot::Mutex;
use serde_json::{json, Value};

use harness_upstream::redis_server::RedisServer as Redis;

async fn script(base: &str, name: &str, steps: Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new().put(format!("{base}/__admin/script/{name}")).body(json!({ "steps": steps }).to_string()).send().await.unwrap();
    assert!(r.status().is_success());
}

async fn log_count(base: &str, name: &str) -> usize {
    let bytes = reqwest::Client::new().get(format!("{base}/__admin/log/{name}")).send().await.unwrap().bytes().await.unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["requests"].as_array().unwrap().len()
}

fn oauth_config(base: &str, api: &str, redis: Option<&str>, extra: Value) -> Value {
    let mut auth = json!({
        "type": "oauth2_client_credentials",
        "token_url": format!("{base}/s/{api}-token/oauth/token"),
        "client_id": {"value": "client-1"},
        "client_secret": {"value": "client-secret-value"},
    });
    if let Some(url) = redis {
        auth["shared"] = json!({"redis_url": url, "key_prefix": format!("harness:test:{api}:")});
    }
    if let Value::Object(o) = extra {
        for (k, v) in o {
            auth[k] = v;
        }
    }
    json!({"log": {"enabled": false}, "services": {"svc": {"base_url": base, "retry": {"max_retries": 0}, "auth": auth}}})
}

/// Runs requests with 8 workers for `secs`; returns (ok, failed).
async fn hammer(client: &Client, path: &str, secs: f64) -> (usize, Vec<String>) {
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (c, p) = (client.clone(), path.to_string());
        workers.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (0, Vec::new());
            while Instant::now() < until {
                match c.request(Request::new("svc", "GET", p.clone())).await {
                    Ok(r) if r.status == 200 => ok += 1,
                    Ok(r) => failed.push(format!("status {}", r.status)),
                    Err(e) => failed.push(e.to_string()),
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (ok, failed)
        }));
    }
    let (mut ok, mut failed) = (0, Vec::new());
    for w in workers {
        let (o, f) = w.await.unwrap();
        ok += o;
        failed.extend(f);
    }
    (ok, failed)
}

/// One of the fleet's processes (run by `three_processes_share_one_refresh_per_expiry`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of three_processes_share_one_refresh_per_expiry"]
async fn fleet_member() {
    let base = std::env::var("HARNESS_FLEET_UPSTREAM").expect("run by the fleet test");
    let redis = std::env::var("HARNESS_FLEET_REDIS").unwrap();
    let client = Client::from_value(oauth_config(&base, "fleet", Some(&redis), json!({}))).unwrap();
    let (ok, failed) = hammer(&client, "/s/fleet/x", 2.5).await;
    assert!(failed.is_empty(), "{} failed: {:?}", failed.len(), &failed[..failed.len().min(3)]);
    assert!(ok > 50, "only {ok} requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_one_refresh_per_expiry() {
    let redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    script(&base, "fleet", json!([{"status": 200}])).await;
    // The first token lives 2 s: one refresh falls inside the run.
    script(&base, "fleet-token", json!([
        {"json": {"access_token": "fleet-tok-1", "expires_in": 2}},
        {"json": {"access_token": "fleet-tok-2", "expires_in": 3600}}
    ]))
    .await;
    let exe = std::env::current_exe().unwrap();
    let children: Vec<Child> = (0..3)
        .map(|_| {
            Command::new(&exe)
                .args(["--ignored", "--exact", "fleet_member", "--test-threads", "1"])
                .env("HARNESS_FLEET_UPSTREAM", &base)
                .env("HARNESS_FLEET_REDIS", redis.url())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = tokio::task::spawn_blocking(move || children.into_iter().map(|c| c.wait_with_output().unwrap()).collect())
        .await
        .unwrap();
    for o in &outputs {
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && out.contains("1 passed"), "a fleet member failed:\n{out}\n{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(log_count(&base, "fleet-token").await, 2, "one token call for the start and one per expiry, across 3 processes");
}

#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl EventSink for Events {
    fn on_event(&self, e: &Event) -> Result<(), String> {
        self.0.lock().push(e.clone());
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_run_fails_no_request() {
    let mut redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    script(&base, "kill", json!([{"status": 200}])).await;
    script(&base, "kill-token", json!([{"json": {"access_token": "kill-tok", "expires_in": 1}}])).await;
    let events = Arc::new(Events::default());
    let config = Config::from_value(oauth_config(&base, "kill", Some(&redis.url()), json!({}))).unwrap();
    let client = Client::with_options(config, ClientOptions { sinks: vec![events.clone()], ..Default::default() }).unwrap();
    let (ok1, failed1) = hammer(&client, "/s/kill/x", 0.8).await;
    redis.stop();
    let (ok2, failed2) = hammer(&client, "/s/kill/x", 2.0).await;
    assert!(failed1.is_empty() && failed2.is_empty(), "{failed1:?} {failed2:?}");
    assert!(ok1 > 10 && ok2 > 10);
    client.close();
    let warnings = events.0.lock().iter().filter(|e| e.kind() == "shared_state_unavailable").count();
    assert_eq!(warnings, 1, "one warning per outage");
    assert!(log_count(&base, "kill-token").await >= 2, "refreshed locally while Redis was down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_token_is_sealed_at_rest() {
    let redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    script(&base, "seal", json!([{"status": 200}])).await;
    script(&base, "seal-token", json!([{"json": {"access_token": "sealed-tok-value", "expires_in": 3600}}])).await;
    let extra = json!({});
    let mut cfg = oauth_config(&base, "seal", Some(&redis.url()), extra);
    cfg["services"]["svc"]["auth"]["shared"]["encryption_key"] = json!({"value": "a passphrase for tests"});
    let client = Client::from_value(cfg).unwrap();
    assert_eq!(client.request(Request::new("svc", "GET", "/s/seal/x")).await.unwrap().status, 200);
    let conn = redis::Client::open(redis.url()).unwrap();
    let mut c = conn.get_multiplexed_async_connection().await.unwrap();
    let raw: String = redis::cmd("GET").arg("harness:test:seal:svc:token").query_async(&mut c).await.unwrap();
    assert!(!raw.contains("sealed-tok-value") && raw.contains("\"sealed\":true"), "{raw}");
    // A second client (another process would do the same) reads the sealed token.
    let cfg2 = {
        let mut c = oauth_config(&base, "seal", Some(&redis.url()), json!({}));
        c["services"]["svc"]["auth"]["shared"]["encryption_key"] = json!({"value": "a passphrase for tests"});
        c
    };
    let other = Client::from_value(cfg2).unwrap();
    assert_eq!(other.request(Request::new("svc", "GET", "/s/seal/x")).await.unwrap().status, 200);
    assert_eq!(log_count(&base, "seal-token").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auth_server_down_in_the_soft_window_fails_no_request_and_no_token_leaks() {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    script(&base, "soft", json!([{"status": 200}])).await;
    script(&base, "soft-token", json!([
        {"json": {"access_token": "soft-tok-secret", "expires_in": 4}},
        {"status": 503, "times": 1000}
    ]))
    .await;
    let events = Arc::new(Events::default());
    let cfg = oauth_config(&base, "soft", None, json!({}));
    // Every log record reaches listeners as a `request_finished` event: checked below for leaks.
    let client = Client::with_options(Config::from_value(cfg).unwrap(), ClientOptions { sinks: vec![events.clone()], ..Default::default() }).unwrap();
    // Soft window: from 2 s before expiry; the token stays in use while refreshes fail.
    let (ok, failed) = hammer(&client, "/s/soft/x", 2.8).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert!(ok > 20);
    assert!(log_count(&base, "soft-token").await >= 2, "a background refresh was tried");
    let state = serde_json::to_string(&client.credentials_state()).unwrap();
    assert!(state.contains("token endpoint refused: status 503"), "{state}");
    client.close();
    let everything = format!("{state} {:?}", events.0.lock().iter().map(Event::to_json).collect::<Vec<_>>());
    assert!(!everything.contains("soft-tok-secret") && !everything.contains("client-secret-value"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_pool_metrics_name_keys_never_show_them() {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    script(&base, "pool", json!([{"status": 401}, {"status": 200, "times": 100}])).await;
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": base, "auth": {
        "type": "query", "param": "api_key",
        "keys": [{"value": "pool-key-secret-1", "name": "first"}, {"value": "pool-key-secret-2"}]
    }}}}))
    .unwrap();
    for _ in 0..3 {
        assert_eq!(client.request(Request::new("svc", "GET", "/s/pool/x")).await.unwrap().status, 200);
    }
    let text = client.metrics_text();
    assert!(text.contains(r#"harness_auth_pool_keys_total{service="svc",key="first",outcome="401"} 1"#), "{text}");
    assert!(text.contains(r#"harness_auth_pool_keys_total{service="svc",key="1",outcome="sent"} 3"#), "{text}");
    assert!(!text.contains("pool-key-secret"));
    let state = serde_json::to_string(&client.credentials_state()).unwrap();
    assert!(state.contains(r#""status":"quarantined""#) && !state.contains("pool-key-secret"), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_credential_is_given_another_chance_by_a_reload() {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    script(&base, "dead", json!([{"status": 200}])).await;
    script(&base, "dead-token", json!([
        {"status": 400, "json": {"error": "invalid_client"}},
        {"json": {"access_token": "revived-tok", "expires_in": 3600}}
    ]))
    .await;
    let cfg = oauth_config(&base, "dead", None, json!({}));
    let client = Client::from_value(cfg.clone()).unwrap();
    for _ in 0..3 {
        assert_eq!(client.request(Request::new("svc", "GET", "/s/dead/x")).await.unwrap_err().name(), "AuthError");
    }
    assert_eq!(log_count(&base, "dead-token").await, 1, "a dead credential does not hammer the token endpoint");
    assert_eq!(client.credentials_state()[0].status, "dead");
    client.reload_value(cfg).unwrap();
    assert_eq!(client.request(Request::new("svc", "GET", "/s/dead/x")).await.unwrap().status, 200);
}

// ---- regressions (issue 25) ----

async fn log_header(base: &str, name: &str, header: &str) -> Vec<String> {
    let bytes = reqwest::Client::new().get(format!("{base}/__admin/log/{name}")).send().await.unwrap().bytes().await.unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["requests"].as_array().unwrap().iter().map(|r| r["headers"][header].as_str().unwrap_or("").to_string()).collect()
}

fn pool_client(base: &str, keys: &[&str], extra: Value) -> Client {
    let keys: Vec<Value> = keys.iter().map(|k| json!({"value": k, "name": k})).collect();
    let mut svc = json!({"base_url": base, "retry": {"max_retries": 0}, "auth": {"type": "header", "header": "x-api-key", "keys": keys}});
    if let Value::Object(o) = extra {
        for (k, v) in o {
            svc[k] = v;
        }
    }
    Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": svc}})).unwrap()
}

/// Regression: with one key of three quarantined, its turn fell to the next key (k1 11, k3 19
/// of 30). The usable keys now share the load evenly: within 1 over any window of N.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_a_quarantined_key_spreads_load_evenly_over_the_others() {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    // Request 1 (key-one) is answered; request 2 goes out with the revoked key, refused.
    script(&base, "fair", json!([{"status": 200}, {"status": 401}, {"status": 200, "times": 1000}])).await;
    let client = pool_client(&base, &["key-one-1", "key-revoked-2", "key-three-3"], json!({}));
    // Request 1 goes out with key-one; request 2 with the revoked key, replayed with key-three.
    for _ in 0..31 {
        client.request(Request::new("svc", "GET", "/s/fair/x")).await.unwrap();
    }
    let sent = log_header(&base, "fair", "x-api-key").await;
    let after: Vec<&str> = sent.iter().skip(3).map(String::as_str).collect();
    let ones = after.iter().filter(|k| **k == "key-one-1").count();
    let threes = after.iter().filter(|k| **k == "key-three-3").count();
    assert_eq!(ones + threes, after.len(), "{sent:?}");
    assert!(ones.abs_diff(threes) <= 1, "key-one {ones}, key-three {threes}: {sent:?}");
    for w in after.windows(2) {
        assert_ne!(w[0], w[1], "the two usable keys alternate: {sent:?}");
    }
}

/// Regression: a 429 on the replayed attempt did not cool that key, so the next request went
/// out at once with it. Every answer about a key updates it; with every key cooling a call
/// fails with `RateLimitedError` (retry_after_ms: the soonest key) and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_on_the_replay_cools_that_key_too_and_then_nothing_is_sent() {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    script(&base, "cool", json!([{"status": 429, "headers": {"retry-after": "2"}}])).await;
    let client = pool_client(&base, &["key-a-1111", "key-b-2222"], json!({}));
    let e = client.request(Request::new("svc", "GET", "/s/cool/x")).await.unwrap_err();
    assert_eq!(e.name(), "RateLimitedError");
    assert_eq!(log_count(&base, "cool").await, 2, "sent with key a, replayed with key b");
    let state = client.credentials_state();
    let keys: Vec<&str> = state[0].keys.iter().map(|k| k.status).collect();
    assert_eq!(keys, vec!["cooling", "cooling"], "{state:?}");
    let e = client.request(Request::new("svc", "GET", "/s/cool/x")).await.unwrap_err();
    assert_eq!(e.name(), "RateLimitedError");
    assert!(e.retry_after_ms.is_some_and(|ms| ms > 0 && ms <= 2000), "{e:?}");
    assert_eq!(log_count(&base, "cool").await, 2, "nothing is sent while every key cools");
}

/// Regression: a token endpoint that echoed the client secret put it into `AuthError`, the
/// state API's `last_error`, events and log lines. Every secret the credential knows is
/// scrubbed from every text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoint_echoing_the_client_secret_never_leaks_it() {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    let echo = json!({"error": "invalid_client: client-secret-value is not valid for client-1-long-id", "error_description": "client-secret-value"});
    script(&base, "echo-token", json!([{"status": 401, "json": echo}])).await;
    script(&base, "echo", json!([{"status": 200}])).await;
    let mut cfg = oauth_config(&base, "echo", None, json!({"client_id": {"value": "client-1-long-id"}}));
    cfg["log"] = json!({"enabled": true});
    let events = Arc::new(Events::default());
    let sink: Arc<dyn EventSink> = events.clone();
    let client = Client::with_options(Config::from_value(cfg).unwrap(), ClientOptions { sinks: vec![sink], ..Default::default() }).unwrap();
    let e = client.request(Request::new("svc", "GET", "/s/echo/x")).await.unwrap_err();
    let state = format!("{:?}", client.credentials_state());
    client.flush();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let seen = format!("{e} {e:?} {state} {:?}", events.0.lock().iter().map(Event::to_value).collect::<Vec<_>>());
    assert!(seen.contains("invalid_client"), "the error still says what went wrong: {seen}");
    for secret in ["client-secret-value", "client-1-long-id"] {
        assert!(!seen.contains(secret), "{secret} leaked: {seen}");
    }
}

/// Regression: a token lifetime of ~9.2e18 s or more panicked the refresh task and every
/// request then failed; `expires_in` of -5, 0 or `true` meant "never expires". A huge
/// lifetime is held for `MAX_TOKEN_LIFETIME`; 0, a negative number or a boolean is a
/// malformed answer (the refresh fails, nothing panics).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_lifetimes_saturate_and_malformed_ones_are_refused() {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    for (i, expires_in) in [json!(9223372036854775807u64), json!(1e19), json!(1e300), json!("9223372036854775807")].into_iter().enumerate() {
        let api = format!("life{i}");
        script(&base, &format!("{api}-token"), json!([{"json": {"access_token": format!("tok-{i}-abcdef"), "expires_in": expires_in}}])).await;
        script(&base, &api, json!([{"status": 200}])).await;
        let client = Client::from_value(oauth_config(&base, &api, None, json!({}))).unwrap();
        for _ in 0..3 {
            let r = client.request(Request::new("svc", "GET", format!("/s/{api}/x"))).await;
            assert_eq!(r.map(|r| r.status).map_err(|e| e.to_string()), Ok(200), "expires_in {expires_in}");
        }
        assert_eq!(log_count(&base, &format!("{api}-token")).await, 1, "one token call for a long-lived token");
        let state = &client.credentials_state()[0];
        assert_eq!(state.status, "valid", "{state:?}");
    }
    for (i, expires_in) in [json!(-5), json!(0), json!(true), json!("soon")].into_iter().enumerate() {
        let api = format!("bad{i}");
        script(&base, &format!("{api}-token"), json!([{"json": {"access_token": "tok-bad-abcdef", "expires_in": expires_in}}])).await;
        script(&base, &api, json!([{"status": 200}])).await;
        let client = Client::from_value(oauth_config(&base, &api, None, json!({}))).unwrap();
        let e = client.request(Request::new("svc", "GET", format!("/s/{api}/x"))).await.unwrap_err();
        assert_eq!(e.name(), "AuthError", "expires_in {expires_in}: {e}");
        assert!(e.message.contains("malformed expires_in"), "{e}");
        assert_eq!(log_count(&base, &api).await, 0, "nothing sent without a usable token");
    }
}

/// Regression: a literal token with CR/LF or NUL was accepted when the client was built and
/// on reload, and then every request failed. It is a `ConfigError` naming the field.
#[test]
fn a_token_with_a_control_character_is_a_config_error_naming_the_field() {
    for bad in ["tok\r\nx-injected: 1", "tok\0en", "tok\nen"] {
        let cfg = json!({"services": {"svc": {"base_url": "http://127.0.0.1:9", "auth": {"type": "bearer", "token": {"value": bad}}}}});
        let e = Client::from_value(cfg).unwrap_err();
        assert_eq!(e.name(), "ConfigError");
        assert!(e.message.starts_with("services.svc.auth.token.value:"), "{}", e.message);
        assert!(!e.to_string().contains(bad) && !e.to_string().contains("injected"), "{e}");
        let ok = Client::from_value(json!({"services": {"svc": {"base_url": "http://127.0.0.1:9", "auth": {"type": "bearer", "token": {"value": "tok-fine"}}}}})).unwrap();
        let reload = json!({"services": {"svc": {"base_url": "http://127.0.0.1:9", "auth": {"type": "header", "header": "x-k", "keys": [{"value": "fine-key-1"}, {"value": bad}]}}}});
        let e = ok.reload_value(reload).unwrap_err();
        assert!(e.message.starts_with("services.svc.auth.keys[1].value:"), "{}", e.message);
    }
}

/// Regression: with `?api_key=CALLER&b=2`, the upstream got `?api_key=CALLER&b=2&api_key=<key>`,
/// and upstreams that read the first value used the caller's. A caller's parameter with the
/// credential's name, however spelled, is refused and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_query_parameter_cannot_stand_beside_the_query_credential() {
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    script(&base, "qcred", json!([{"status": 200}])).await;
    let client = Client::from_value(json!({"log": {"enabled": false}, "services": {"svc": {"base_url": base,
        "auth": {"type": "query", "param": "api_key", "token": {"value": "service-key-123"}}}}}))
    .unwrap();
    for path in ["/s/qcred/x?api_key=CALLER&b=2", "/s/qcred/x?b=2&api%5Fkey=CALLER", "/s/qcred/x?api_key"] {
        let e = client.request(Request::new("svc", "GET", path)).await.unwrap_err();
        assert_eq!(e.name(), "ConfigError", "{path}");
        assert!(e.message.starts_with("request.query.api_key:"), "{}", e.message);
    }
    let mut r = Request::new("svc", "GET", "/s/qcred/x");
    r.query = vec![("api_key".into(), "CALLER".into())];
    assert_eq!(client.request(r).await.unwrap_err().name(), "ConfigError");
    assert_eq!(log_count(&base, "qcred").await, 0, "nothing was sent");
    let ok = client.request(Request::new("svc", "GET", "/s/qcred/x?b=2")).await.unwrap();
    assert_eq!(ok.status, 200);
    let bytes = reqwest::Client::new().get(format!("{base}/__admin/log/qcred")).send().await.unwrap().bytes().await.unwrap();
    let log: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(log["requests"][0]["path"], "/s/qcred/x?b=2&api_key=service-key-123");
}

//! The fleet's config in Redis (`config_source`) on a real `redis-server`: ten instances
//! follow pushes, a 34% canary lands on exactly the hashed subset, promote reaches all, a
//! rollback restores the previous version everywhere within 2 s, a bad version is
//! rejected by every instance with its field path while the last good one keeps serving,
//! a literal secret is refused at push, and an instance starts from its cached copy when
//! Redis is down; a guard rolls a failing canary back; a new version makes every credential
//! read its source again. Prints the push-to-applied latency across instances.

use std::time::{Duration, Instant};

use harness_core::fleet::{bucket, Admin};
use harness_core::{Client, Request};
use serde_json::{json, Value};

use harness_upstream::redis_server::RedisServer as Redis;

fn bootstrap(base: &str, redis: &str, id: &str, cache_file: Option<&str>) -> Value {
    json!({
        "log": {"enabled": false},
        "services": {"api": {"base_url": base}},
        "config_source": {"redis_url": redis, "name": "shop", "poll_ms": 1000, "heartbeat_ms": 200, "instance_id": id, "cache_file": cache_file}
    })
}

/// A pushed version: the same service, its `client.name` saying which version it is.
fn version_text(base: &str, tag: &str) -> String {
    format!("client: {{ name: \"{tag}\" }}\nlog: {{ enabled: false }}\nservices:\n  api:\n    base_url: \"{base}\"\n")
}

fn versions(clients: &[Client]) -> Vec<u64> {
    clients.iter().map(|c| c.config_source_state().unwrap().version).collect()
}

/// Waits until every instance runs what `want` says; the time each took, in ms.
async fn until_applied(clients: &[Client], want: impl Fn(usize) -> u64, limit: Duration) -> Vec<f64> {
    let start = Instant::now();
    let mut took = vec![None; clients.len()];
    loop {
        for (i, c) in clients.iter().enumerate() {
            if took[i].is_none() && c.config_source_state().unwrap().version == want(i) {
                took[i] = Some(start.elapsed().as_secs_f64() * 1000.0);
            }
        }
        if took.iter().all(Option::is_some) {
            return took.into_iter().flatten().collect();
        }
        assert!(start.elapsed() < limit, "after {limit:?}: {:?}, wanted {:?}", versions(clients), (0..clients.len()).map(&want).collect::<Vec<_>>());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_canaries_promotes_rollbacks_rejections_and_a_cold_start_from_the_cached_copy() {
    let mut redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    let dir = std::env::temp_dir().join(format!("harness-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cache_file = dir.join("i0.json").display().to_string();
    let ids: Vec<String> = (0..10).map(|i| format!("i{i}")).collect();
    let clients: Vec<Client> = ids
        .iter()
        .map(|id| Client::from_value(bootstrap(&base, &redis.url(), id, (id == "i0").then_some(cache_file.as_str()))).unwrap())
        .collect();
    assert_eq!(versions(&clients), vec![0; 10], "the bootstrap config until something is pushed");
    let mut admin = Admin::connect(&redis.url(), "shop").await.unwrap();

    // Everyone.
    let text = version_text(&base, "v1");
    let parsed = harness_core::Config::parse_text(&text, "yaml").unwrap();
    assert_eq!(admin.push(&text, "yaml", &parsed, "test", "first", None, None).await.unwrap(), 1);
    let mut latencies = until_applied(&clients, |_| 1, Duration::from_secs(5)).await;
    for c in &clients {
        let m = c.metrics_text();
        assert!(m.contains("harness_config_version_info{name=\"shop\",version=\"1\"} 1") && !m.contains("version=\"0\""), "{m}");
        assert!(m.contains("harness_config_push_total{outcome=\"applied\"} 1"), "{m}");
        assert!(format!("{c:?}").contains("\"v1\""), "the pushed config is in force: {c:?}");
        assert_eq!(c.request(Request::new("api", "GET", "/ok")).await.unwrap().status, 200);
    }

    // A 34% canary: exactly the instances whose id hashes below 34%.
    let text = version_text(&base, "v2");
    let parsed = harness_core::Config::parse_text(&text, "yaml").unwrap();
    assert_eq!(admin.push(&text, "yaml", &parsed, "test", "canary", Some(3400), None).await.unwrap(), 2);
    let on_canary = |i: usize| bucket(&format!("i{i}")) < 3400;
    let expected = |i: usize| if on_canary(i) { 2 } else { 1 };
    latencies.extend(until_applied(&clients, expected, Duration::from_secs(5)).await.into_iter().enumerate().filter(|(i, _)| on_canary(*i)).map(|(_, t)| t));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(versions(&clients), (0..10).map(expected).collect::<Vec<_>>(), "no instance outside the subset moved");
    assert!((1..10).contains(&(0..10).filter(|i| on_canary(*i)).count()), "ten ids split between canary and baseline");

    // Promote: everyone.
    admin.promote(10_000, "test").await.unwrap();
    until_applied(&clients, |_| 2, Duration::from_secs(5)).await;

    // A canary, rolled back: everyone back on 2 within 2 s.
    let text = version_text(&base, "v3");
    let parsed = harness_core::Config::parse_text(&text, "yaml").unwrap();
    admin.push(&text, "yaml", &parsed, "test", "wide canary", Some(10_000), None).await.unwrap();
    until_applied(&clients, |_| 3, Duration::from_secs(5)).await;
    admin.rollback("test", "by hand", None).await.unwrap();
    until_applied(&clients, |_| 2, Duration::from_secs(2)).await;

    // A version every instance rejects: the field path, and version 2 keeps serving.
    let bad = format!("{}    retry: {{ max_retries: \"lots\" }}\n", version_text(&base, "v4"));
    let parsed = harness_core::Config::parse_text(&bad, "yaml").unwrap();
    assert_eq!(admin.push(&bad, "yaml", &parsed, "test", "bad", None, None).await.unwrap(), 4);
    let start = Instant::now();
    while clients.iter().any(|c| c.config_source_state().unwrap().rejected_version != Some(4)) {
        assert!(start.elapsed() < Duration::from_secs(5), "not every instance rejected version 4");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for c in &clients {
        let s = c.config_source_state().unwrap();
        assert_eq!(s.version, 2);
        assert!(s.rejected_reason.as_deref().unwrap().contains("services.api.retry.max_retries"), "{s:?}");
        let m = c.metrics_text();
        assert!(m.contains("harness_config_version_info{name=\"shop\",version=\"2\"} 1") && m.contains("harness_config_push_total{outcome=\"rejected\"} 1"), "{m}");
        assert_eq!(c.request(Request::new("api", "GET", "/ok")).await.unwrap().status, 200);
    }
    // Heartbeats say the same.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let beats = admin.heartbeats().await.unwrap();
    assert_eq!(beats.len(), 10, "{beats:?}");
    assert!(beats.iter().all(|b| b.version == 2 && b.rejected_version == Some(4)), "{beats:?}");
    // A rollback of the stable version goes back to the previous one (2), which they run.
    admin.rollback("test", "bad version", None).await.unwrap();
    assert_eq!(admin.state().await.unwrap().stable, 2);

    // A literal secret is refused before anything is stored.
    let secret = format!("{}    auth: {{ type: bearer, token: {{ value: \"s3cret-token\" }} }}\n", version_text(&base, "v5"));
    let parsed = harness_core::Config::parse_text(&secret, "yaml").unwrap();
    let e = admin.push(&secret, "yaml", &parsed, "test", "secret", None, None).await.unwrap_err();
    assert!(e.message.contains("services.api.auth.token.value") && !e.message.contains("s3cret"), "{e}");
    assert_eq!(admin.state().await.unwrap().stable, 2, "nothing pushed");
    let log = admin.log().await.unwrap();
    assert!(!serde_json::to_string(&log).unwrap().contains("s3cret"));
    assert_eq!(log.iter().filter(|r| r["action"] == "rollback").count(), 2, "{log:?}");

    // Redis down at start: an instance starts from its cached copy.
    drop(clients);
    redis.stop();
    let cold = Client::from_value(bootstrap(&base, &redis.url(), "i0", Some(&cache_file))).unwrap();
    let s = cold.config_source_state().unwrap();
    assert_eq!((s.version, s.applied_from), (2, "cache_file"), "{s:?}");
    assert!(format!("{cold:?}").contains("\"v2\""));
    assert_eq!(cold.request(Request::new("api", "GET", "/ok")).await.unwrap().status, 200);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!cold.config_source_state().unwrap().connected);
    let _ = std::fs::remove_dir_all(&dir);

    latencies.sort_by(f64::total_cmp);
    let at = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    println!("push-to-applied across {} instance applications: p50 {:.1} ms, p99 {:.1} ms", latencies.len(), at(0.5), at(0.99));
}

/// Chats on route `chat` from every instance, every 5 ms, until `stop`; each instance's
/// failures, with the version that served each.
fn traffic(clients: &[Client], stop: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> Vec<tokio::task::JoinHandle<Vec<u64>>> {
    clients
        .iter()
        .map(|c| {
            let (c, stop) = (c.clone(), stop.clone());
            tokio::spawn(async move {
                let mut failed_on = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let before = c.config_source_state().unwrap().version;
                    let chat = harness_core::ChatRequest::new(json!([{"role": "user", "content": "hello"}]));
                    if c.chat("chat", chat).await.is_err() {
                        // The version in force when it started (a switch may fall in between).
                        // The source records a version just after the engine swaps it in, so
                        // a call that failed at once on the new one may still read the old:
                        // read again once that moment has passed (a rollback is >= 200 ms away).
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let after = c.config_source_state().unwrap().version;
                        failed_on.push(if before == 2 || after == 2 { 2 } else { before });
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                failed_on
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_rolls_back_a_failing_canary_and_leaves_a_healthy_one() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    let r = reqwest::Client::new().post(format!("{base}/__admin/provider/guarded")).body(json!({"content": "hi"}).to_string()).send().await.unwrap();
    assert!(r.status().is_success());
    // Four instances: two hash below 50% (the canary), two above.
    let (mut ids, mut low, mut high) = (Vec::new(), 0, 0);
    for i in 0.. {
        let id = format!("g{i}");
        if bucket(&id) < 5000 && low < 2 {
            low += 1;
            ids.push(id);
        } else if bucket(&id) >= 5000 && high < 2 {
            high += 1;
            ids.push(id);
        }
        if ids.len() == 4 {
            break;
        }
    }
    let on_canary = |i: usize| bucket(&ids[i]) < 5000;
    let clients: Vec<Client> = ids.iter().map(|id| Client::from_value(bootstrap(&base, &redis.url(), id, None)).unwrap()).collect();
    let mut admin = Admin::connect(&redis.url(), "shop").await.unwrap();
    let push = |text: String| (harness_core::Config::parse_text(&text, "yaml").unwrap(), text);
    // A route `chat` with one provider, here served by the test upstream.
    let with_route = |provider_url: &str, tag: &str| {
        format!(
            "{}  llm: {{ base_url: \"{provider_url}\", retry: {{ max_retries: 0 }} }}\nroutes:\n  chat: {{ adapter: openai-compatible, providers: [{{ id: p, service: llm, model: m, weight: 1 }}] }}\n",
            version_text(&base, tag)
        )
    };
    let (parsed, text) = push(with_route(&format!("{base}/llm/guarded"), "v1"));
    admin.push(&text, "yaml", &parsed, "test", "first", None, None).await.unwrap();
    until_applied(&clients, |_| 1, Duration::from_secs(5)).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tasks = traffic(&clients, &stop);

    // A canary that breaks the route: its provider points at a closed port.
    let (parsed, text) = push(with_route("http://127.0.0.1:9", "v2"));
    let guard = harness_core::fleet::parse_guard("error_rate=+2%,p99=+400%,window=5s,min_requests=10").unwrap();
    let gone = admin.guard().await.unwrap();
    assert_eq!(gone, None, "no guard before a guarded push");
    assert_eq!(admin.push(&text, "yaml", &parsed, "test", "bad canary", Some(5000), Some(&guard)).await.unwrap(), 2);
    assert_eq!(admin.guard().await.unwrap().map(|g| g.version), Some(2));
    until_applied(&clients, |i| if on_canary(i) { 2 } else { 1 }, Duration::from_secs(5)).await;
    let start = Instant::now();
    while admin.state().await.unwrap().canary != 0 {
        assert!(start.elapsed() < Duration::from_secs(15), "the guard did not roll the failing canary back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("failing canary rolled back {:.1} s after it was applied", start.elapsed().as_secs_f64());
    until_applied(&clients, |_| 1, Duration::from_secs(3)).await;
    let log = admin.log().await.unwrap();
    let rollbacks: Vec<&Value> = log.iter().filter(|r| r["action"] == "rollback").collect();
    assert_eq!(rollbacks.len(), 1, "rolled back once, by one instance: {log:?}");
    assert!(rollbacks[0]["author"].as_str().unwrap().starts_with("guard@g"), "{log:?}");
    assert!(rollbacks[0]["message"].as_str().unwrap().starts_with("guard error_rate=+2%: canary "), "{log:?}");
    assert!(rollbacks[0]["message"].as_str().unwrap().contains("vs baseline 0.00% of "), "{log:?}");
    assert_eq!(rollbacks[0]["version"], 2);

    // A healthy canary under the same guard stays.
    let (parsed, text) = push(with_route(&format!("{base}/llm/guarded"), "v3"));
    admin.push(&text, "yaml", &parsed, "test", "good canary", Some(5000), Some(&guard)).await.unwrap();
    until_applied(&clients, |i| if on_canary(i) { 3 } else { 1 }, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(admin.state().await.unwrap().canary, 3, "{:?}", admin.log().await.unwrap());
    // An unguarded push clears the guard.
    let (parsed, text) = push(with_route(&format!("{base}/llm/guarded"), "v4"));
    admin.push(&text, "yaml", &parsed, "test", "everyone", None, None).await.unwrap();
    assert_eq!(admin.guard().await.unwrap(), None);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // The only requests that failed were the failing canary's, on its instances.
    for (i, t) in tasks.into_iter().enumerate() {
        let failed_on = t.await.unwrap();
        if on_canary(i) {
            assert!(!failed_on.is_empty() && failed_on.iter().all(|&v| v == 2), "{}: {failed_on:?}", ids[i]);
        } else {
            assert!(failed_on.is_empty(), "{} never ran the canary: {failed_on:?}", ids[i]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_makes_every_credential_read_its_source_again() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    let http = reqwest::Client::new();
    let r = http.put(format!("{base}/__admin/script/rotated")).body(json!({"steps": [{"status": 200}]}).to_string()).send().await.unwrap();
    assert!(r.status().is_success());
    let dir = std::env::temp_dir().join(format!("harness-fleet-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("token");
    std::fs::write(&secret, "tok-old-1111\n").unwrap();
    let stamp = std::fs::metadata(&secret).unwrap().modified().unwrap();
    let text = format!(
        "log: {{ enabled: false }}\nservices:\n  api:\n    base_url: \"{base}/s/rotated\"\n    auth: {{ type: bearer, token: {{ file: \"{}\" }} }}\n",
        secret.display()
    );
    let parsed = harness_core::Config::parse_text(&text, "yaml").unwrap();
    let clients: Vec<Client> = ["k0", "k1"].iter().map(|id| Client::from_value(bootstrap(&base, &redis.url(), id, None)).unwrap()).collect();
    let mut admin = Admin::connect(&redis.url(), "shop").await.unwrap();
    admin.push(&text, "yaml", &parsed, "test", "file token", None, None).await.unwrap();
    until_applied(&clients, |_| 1, Duration::from_secs(5)).await;
    let seen = || async {
        let log: Value = serde_json::from_slice(&http.get(format!("{base}/__admin/log/rotated")).send().await.unwrap().bytes().await.unwrap()).unwrap();
        log["requests"].as_array().unwrap().last().unwrap()["headers"]["authorization"].as_str().unwrap().to_string()
    };
    for c in &clients {
        c.request(Request::new("api", "GET", "/x")).await.unwrap();
        assert_eq!(seen().await, "Bearer tok-old-1111");
    }
    // The key is rotated in place, and the file keeps its time (a rotation the mtime check
    // cannot see): only a new version makes the instances read it again.
    std::fs::write(&secret, "tok-new-2222\n").unwrap();
    std::fs::File::options().write(true).open(&secret).unwrap().set_modified(stamp).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for c in &clients {
        c.request(Request::new("api", "GET", "/x")).await.unwrap();
        assert_eq!(seen().await, "Bearer tok-old-1111", "the cached key, before the push");
    }
    admin.push(&text, "yaml", &parsed, "test", "rotate the token", None, None).await.unwrap();
    until_applied(&clients, |_| 2, Duration::from_secs(5)).await;
    for c in &clients {
        c.request(Request::new("api", "GET", "/x")).await.unwrap();
        assert_eq!(seen().await, "Bearer tok-new-2222", "every instance reads the rotated key");
    }
    // Neither key is in Redis, the heartbeats or the history.
    let beats = serde_json::to_string(&admin.heartbeats().await.unwrap()).unwrap();
    let history = serde_json::to_string(&admin.log().await.unwrap()).unwrap();
    let doc = serde_json::to_string(&admin.doc(2).await.unwrap()).unwrap();
    for text in [beats, history, doc] {
        assert!(!text.contains("tok-old") && !text.contains("tok-new"), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! The fleet's config in Redis (`config_source`) on a real `redis-server`: ten instances
//! follow pushes, a 34% canary lands on exactly the hashed subset, promote reaches all, a
//! rollback restores the previous version everywhere within 2 s, a bad version is
//! rejected by every instance with its field path while the last good one keeps serving,
//! a literal secret is refused at push, and an instance starts from its cached copy when
//! Redis is down. Prints the push-to-applied latency across instances.

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
    assert_eq!(admin.push(&text, "yaml", &parsed, "test", "first", None).await.unwrap(), 1);
    let mut latencies = until_applied(&clients, |_| 1, Duration::from_secs(5)).await;
    for c in &clients {
        assert!(format!("{c:?}").contains("\"v1\""), "the pushed config is in force: {c:?}");
        assert_eq!(c.request(Request::new("api", "GET", "/ok")).await.unwrap().status, 200);
    }

    // A 34% canary: exactly the instances whose id hashes below 34%.
    let text = version_text(&base, "v2");
    let parsed = harness_core::Config::parse_text(&text, "yaml").unwrap();
    assert_eq!(admin.push(&text, "yaml", &parsed, "test", "canary", Some(3400)).await.unwrap(), 2);
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
    admin.push(&text, "yaml", &parsed, "test", "wide canary", Some(10_000)).await.unwrap();
    until_applied(&clients, |_| 3, Duration::from_secs(5)).await;
    admin.rollback("test", "by hand", None).await.unwrap();
    until_applied(&clients, |_| 2, Duration::from_secs(2)).await;

    // A version every instance rejects: the field path, and version 2 keeps serving.
    let bad = format!("{}    retry: {{ max_retries: \"lots\" }}\n", version_text(&base, "v4"));
    let parsed = harness_core::Config::parse_text(&bad, "yaml").unwrap();
    assert_eq!(admin.push(&bad, "yaml", &parsed, "test", "bad", None).await.unwrap(), 4);
    let start = Instant::now();
    while clients.iter().any(|c| c.config_source_state().unwrap().rejected_version != Some(4)) {
        assert!(start.elapsed() < Duration::from_secs(5), "not every instance rejected version 4");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for c in &clients {
        let s = c.config_source_state().unwrap();
        assert_eq!(s.version, 2);
        assert!(s.rejected_reason.as_deref().unwrap().contains("services.api.retry.max_retries"), "{s:?}");
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
    let e = admin.push(&secret, "yaml", &parsed, "test", "secret", None).await.unwrap_err();
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
    assert_eq!((s.version, s.from), (2, "cache_file"), "{s:?}");
    assert!(format!("{cold:?}").contains("\"v2\""));
    assert_eq!(cold.request(Request::new("api", "GET", "/ok")).await.unwrap().status, 200);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!cold.config_source_state().unwrap().connected);
    let _ = std::fs::remove_dir_all(&dir);

    latencies.sort_by(f64::total_cmp);
    let at = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    println!("push-to-applied across {} instance applications: p50 {:.1} ms, p99 {:.1} ms", latencies.len(), at(0.5), at(0.99));
}

//! Shared state against real parts: client-side rate limits (local, and fleet-wide on a
//! real `redis-server` started here on a free loopback port), the adaptive 429 pause,
//! a retry budget shared by clients, and the idempotent receiver (state machine, leases
//! and fencing, 1,000 concurrent deliveries from 3 OS processes, a worker killed
//! mid-handler, Redis killed mid-run, signatures).

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use harness_core::{Claim, Client, ClientOptions, Config, Event, EventSink, Idempotency, Request};
use parking_lot::Mutex;
use serde_json::{json, Value};

use harness_upstream::redis_server::RedisServer as Redis;

async fn script(base: &str, name: &str, steps: Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new().put(format!("{base}/__admin/script/{name}")).body(json!({ "steps": steps }).to_string()).send().await.unwrap();
    assert!(r.status().is_success());
}

async fn log(base: &str, name: &str) -> Vec<Value> {
    let body = reqwest::Client::new().get(format!("{base}/__admin/log/{name}")).send().await.unwrap().bytes().await.unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    v["requests"].as_array().unwrap().clone()
}

#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl EventSink for Events {
    fn on_event(&self, e: &Event) -> Result<(), String> {
        self.0.lock().push(e.clone());
        Ok(())
    }
}

impl Events {
    fn of(&self, kind: &str) -> Vec<Value> {
        self.0.lock().iter().filter(|e| e.kind() == kind).map(Event::to_value).collect()
    }
}

fn make(base: &str, svc: Value) -> (Client, Arc<Events>) {
    let mut s = json!({"base_url": base, "retry": {"max_retries": 0, "jitter": false}});
    merge(&mut s, &svc);
    let config = Config::from_value(json!({"log": {"enabled": false}, "services": {"svc": s}})).unwrap();
    let events = Arc::new(Events::default());
    let sink: Arc<dyn EventSink> = events.clone();
    (Client::with_options(config, ClientOptions { sinks: vec![sink], ..Default::default() }).unwrap(), events)
}

use harness_upstream::merge_json as merge;

// ---- local rate limits and the 429 pause ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_rate_a_request_waits_up_to_max_wait_then_fails_and_nothing_is_sent() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "rl", json!([{"status": 200}])).await;
    let (client, _) = make(&u.url(), json!({"rate_limit": {"rps": 20, "burst": 1, "max_wait_ms": 0}}));
    client.request(Request::new("svc", "GET", "/s/rl/a")).await.unwrap();
    let e = client.request(Request::new("svc", "GET", "/s/rl/a")).await.unwrap_err();
    assert_eq!((e.name(), e.code.as_deref()), ("RateLimitedError", Some("client_rate_limited")));
    assert!(e.retry_after_ms.is_some_and(|ms| ms > 0 && ms <= 50), "{e:?}");
    assert_eq!(log(&u.url(), "rl").await.len(), 1, "nothing sent for the refused request");
    assert!(client.metrics_text().contains("harness_rate_limited_total{service=\"svc\"} 1"));
    let state = client.rate_limit_state("svc").unwrap().unwrap();
    assert_eq!((state.service.as_str(), state.refused, state.waited, state.paused_ms), ("svc", 1, 0, 0), "{state:?}");
    assert_eq!(client.rate_limits(), [state]);
    assert_eq!(client.rate_limit_state("nope").unwrap_err().name(), "ConfigError");
    assert_eq!(make(&u.url(), json!({})).0.rate_limit_state("svc").unwrap(), None, "no rate_limit: no state");

    // With a wait allowed, requests are paced instead: 6 at 20/s take >= 250 ms.
    let (client, _) = client_with_wait(&u.url());
    let t0 = Instant::now();
    for _ in 0..6 {
        client.request(Request::new("svc", "GET", "/s/rl/b")).await.unwrap();
    }
    assert!(t0.elapsed() >= Duration::from_millis(240), "{:?}", t0.elapsed());
    let m = client.metrics_text();
    assert!(m.contains("harness_rate_limit_wait_seconds_count{service=\"svc\"} 5"), "{m}");
    let state = client.rate_limit_state("svc").unwrap().unwrap();
    assert_eq!((state.refused, state.waited), (0, 5), "{state:?}");
}

fn client_with_wait(base: &str) -> (Client, Arc<Events>) {
    make(base, json!({"rate_limit": {"rps": 20, "burst": 1, "max_wait_ms": 1000}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_limit_nests_under_the_service_limit() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "ep", json!([{"status": 200}])).await;
    let (client, _) = make(&u.url(), json!({"rate_limit": {"rps": 1000, "max_wait_ms": 0, "endpoints": {"POST /s/ep/slow": {"rps": 1, "burst": 1}}}}));
    let post = || {
        let mut r = Request::new("svc", "POST", "/s/ep/slow");
        r.idempotency_key = Some("k".into());
        r
    };
    client.request(post()).await.unwrap();
    assert_eq!(client.request(post()).await.unwrap_err().name(), "RateLimitedError");
    // Other endpoints (and other methods) only see the service's limit.
    for _ in 0..20 {
        client.request(Request::new("svc", "GET", "/s/ep/slow")).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_pauses_the_service_for_its_retry_after() {
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "p", json!([{"status": 429, "retry_after": "1"}, {"status": 200}])).await;
    let (client, _) = make(&u.url(), json!({"rate_limit": {"rps": 1000, "max_wait_ms": 100}}));
    let e = client.request(Request::new("svc", "GET", "/s/p/a")).await.unwrap_err();
    assert_eq!(e.name(), "RateLimitedError");
    assert_eq!(e.status, Some(429), "the downstream's own 429");
    // In the pause, with a short max wait: fails at once, nothing sent.
    let e = client.request(Request::new("svc", "GET", "/s/p/b")).await.unwrap_err();
    assert_eq!((e.name(), e.code.as_deref(), e.status), ("RateLimitedError", Some("client_rate_limited"), None));
    assert!(e.retry_after_ms.unwrap() > 500);
    assert!(client.metrics_text().lines().any(|l| l.starts_with("harness_rate_limit_paused_ms{service=\"svc\"}") && !l.ends_with(" 0")));
    assert_eq!(log(&u.url(), "p").await.len(), 1);
    let state = client.rate_limit_state("svc").unwrap().unwrap();
    assert!(state.paused_ms > 500 && state.paused_ms <= 1000 && state.refused == 1, "{state:?}");
    // A caller that can wait is held until the pause ends, then sent.
    let (client2, _) = make(&u.url(), json!({"rate_limit": {"rps": 1000, "max_wait_ms": 3000}}));
    script(&u.url(), "p", json!([{"status": 429, "retry_after": "1"}, {"status": 200}])).await;
    let _ = client2.request(Request::new("svc", "GET", "/s/p/c")).await;
    let t0 = Instant::now();
    client2.request(Request::new("svc", "GET", "/s/p/d")).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(800), "{:?}", t0.elapsed());
}

// ---- fleet-wide limits on Redis ----

/// One of three processes hammering one downstream at 200 req/s for `HARNESS_FLEET_SECS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of three_processes_share_one_rate_limit"]
async fn rate_fleet_member() {
    let base = std::env::var("HARNESS_FLEET_UPSTREAM").expect("run by the fleet test");
    let redis = std::env::var("HARNESS_FLEET_REDIS").unwrap();
    let secs: f64 = std::env::var("HARNESS_FLEET_SECS").unwrap().parse().unwrap();
    let (client, _) = make(&base, json!({"rate_limit": {"rps": 100, "burst": 2, "max_wait_ms": 0, "shared": {"redis_url": redis, "key": "fleet-limit", "expected_instances": 3}}}));
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    let (mut sent, mut limited, mut other) = (0, 0, 0);
    let mut tasks = Vec::new();
    while start.elapsed().as_secs_f64() < secs {
        tick.tick().await;
        let c = client.clone();
        tasks.push(tokio::spawn(async move { c.request(Request::new("svc", "GET", "/s/fleet/x")).await }));
    }
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => sent += 1,
            Err(e) if e.name() == "RateLimitedError" => limited += 1,
            Err(e) => {
                other += 1;
                eprintln!("{e}");
            }
        }
    }
    println!("sent={sent} limited={limited} other={other}");
    assert_eq!(other, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_one_rate_limit() {
    let redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "fleet", json!([{"status": 200}])).await;
    let secs = 10.0;
    let outputs = run_members("rate_fleet_member", &u.url(), &redis.url(), secs).await;
    for o in &outputs {
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && out.contains("1 passed"), "a fleet member failed:\n{out}\n{}", String::from_utf8_lossy(&o.stderr));
    }
    let at: Vec<f64> = log(&u.url(), "fleet").await.iter().map(|r| r["at_ms"].as_f64().unwrap()).collect();
    let first = at.iter().cloned().fold(f64::MAX, f64::min);
    let mut per_second: BTreeMap<u64, u32> = BTreeMap::new();
    for t in &at {
        *per_second.entry(((t - first) / 1000.0) as u64).or_default() += 1;
    }
    println!("per second: {per_second:?}");
    assert!(per_second.len() >= 9, "{per_second:?}");
    for (s, n) in &per_second {
        assert!(*n <= 105, "second {s}: the upstream saw {n} requests against a fleet limit of 100/s");
    }
    // The three processes together used the limit (600 req/s offered).
    let total: u32 = per_second.values().sum();
    assert!(total as f64 >= 85.0 * secs, "only {total} requests in {secs} s");
}

async fn run_members(test: &str, base: &str, redis: &str, secs: f64) -> Vec<std::process::Output> {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<Child> = (0..3)
        .map(|i| {
            Command::new(&exe)
                .args(["--ignored", "--exact", test, "--test-threads", "1", "--nocapture"])
                .env("HARNESS_FLEET_UPSTREAM", base)
                .env("HARNESS_FLEET_REDIS", redis)
                .env("HARNESS_FLEET_SECS", secs.to_string())
                .env("HARNESS_FLEET_MEMBER", i.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    tokio::task::spawn_blocking(move || children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_killed_mid_run_the_limit_goes_local_and_no_request_fails_for_it() {
    let mut redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "down", json!([{"status": 200}])).await;
    let (client, events) = make(&u.url(), json!({"rate_limit": {"rps": 200, "max_wait_ms": 2000, "shared": {"redis_url": redis.url(), "key": "down", "expected_instances": 2}}}));
    for _ in 0..20 {
        client.request(Request::new("svc", "GET", "/s/down/x")).await.unwrap();
    }
    redis.stop();
    let t0 = Instant::now();
    for _ in 0..100 {
        client.request(Request::new("svc", "GET", "/s/down/x")).await.unwrap();
    }
    // The local share (200/2 = 100/s, burst 100) still paces, and nothing waited for Redis per request.
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    client.flush();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let warned = events.of("shared_state_unavailable");
    assert_eq!(warned.len(), 1, "one warning per outage: {warned:?}");
    assert_eq!(warned[0]["what"], "rate_limit");
}

// ---- the shared retry budget ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_retry_budget_counts_every_clients_requests_and_goes_local_without_redis() {
    let mut redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "ok", json!([{"status": 200}])).await;
    script(&u.url(), "bad", json!([{"status": 503}])).await;
    let svc = json!({"breaker": {"failure_threshold": 1000}, "retry": {"max_retries": 1, "base_delay_ms": 1, "max_delay_ms": 1, "budget_ratio": 0.25, "budget_min_per_sec": 0,
        "budget_shared": {"redis_url": redis.url(), "key": "orders"}}});
    let (a, _) = make(&u.url(), svc.clone());
    let (b, events) = make(&u.url(), svc);
    // A's 40 good requests earn the fleet 10 retries; B's 20 failing ones 5 more.
    for _ in 0..40 {
        a.request(Request::new("svc", "GET", "/s/ok/x")).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    for _ in 0..20 {
        let e = b.request(Request::new("svc", "GET", "/s/bad/x")).await.unwrap_err();
        assert_eq!(e.status, Some(503), "{e}");
    }
    assert_eq!(log(&u.url(), "bad").await.len(), 20 + 15, "B retried on the fleet's budget, not only its own");

    // Without Redis, B's own budget decides (its 20 + 20 deposits earn 10, 5 were spent locally).
    redis.stop();
    script(&u.url(), "bad", json!([{"status": 503}])).await;
    for _ in 0..20 {
        let _ = b.request(Request::new("svc", "GET", "/s/bad/x")).await;
    }
    let sent = log(&u.url(), "bad").await.len();
    assert!((20..=30).contains(&sent), "local budget: {sent}");
    b.flush();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(events.of("shared_state_unavailable").iter().any(|e| e["what"] == "retry_budget"));
}

// ---- the idempotent receiver ----

#[tokio::test(start_paused = true)]
async fn the_receiver_state_machine_with_leases_and_fencing() {
    let idem = Idempotency::from_value(json!({"lease_ms": 1000, "retry_failed": false})).unwrap();
    let key = idem.key("acme", "invoice.paid", "msg-1").unwrap();
    assert_eq!(key, "harness:idem:acme:invoice.paid:msg-1");
    let Claim::Run(first) = idem.claim(&key).await.unwrap() else { panic!("claimed") };
    let dup = idem.claim(&key).await.unwrap_err();
    assert_eq!(dup.name(), "DuplicateInFlightError");
    assert!(dup.retry_after_ms.unwrap() <= 1000);
    // The worker stalls past its lease: another delivery takes the key over.
    tokio::time::advance(Duration::from_millis(1001)).await;
    let Claim::Run(second) = idem.claim(&key).await.unwrap() else { panic!("reclaimed after the lease") };
    assert!(second.fence > first.fence);
    // The late worker's result is refused; the new one's is stored, once.
    assert_eq!(idem.complete(&first, b"late").await.unwrap_err().code.as_deref(), Some("lease_lost"));
    idem.complete(&second, b"\"paid\"").await.unwrap();
    // Finishing the same claim again changes nothing and is not an error.
    idem.complete(&second, b"\"other\"").await.unwrap();
    idem.fail(&second).await.unwrap();
    match idem.claim(&key).await.unwrap() {
        Claim::Done(r) => assert_eq!(r, Bytes::from_static(b"\"paid\"")),
        other => panic!("{other:?}"),
    }
    // A failure: not run again while retry_failed is off.
    let k2 = idem.key("acme", "invoice.paid", "msg-2").unwrap();
    let Claim::Run(l) = idem.claim(&k2).await.unwrap() else { panic!() };
    idem.fail(&l).await.unwrap();
    assert_eq!(idem.claim(&k2).await.unwrap_err().code.as_deref(), Some("failed_before"));
    let retrying = Idempotency::from_value(json!({})).unwrap();
    let Claim::Run(l) = retrying.claim(&k2).await.unwrap() else { panic!() };
    retrying.fail(&l).await.unwrap();
    assert!(matches!(retrying.claim(&k2).await.unwrap(), Claim::Run(_)), "retry_failed: a failed key is claimable again");
    // Keys from hostile input are refused, naming the part.
    assert!(idem.key("acme", "x", "a\nb").unwrap_err().message.starts_with("msg_id:"));
    assert!(idem.key("", "x", "y").unwrap_err().message.starts_with("tenant:"));
    assert!(idem.metrics_text().contains("harness_idempotency_total{outcome=\"lease_lost\"} 1"));
}

/// One of three processes delivering the same message 333-334 times at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of a_message_delivered_1000_times_from_3_processes_runs_once"]
async fn receiver_fleet_member() {
    let redis = std::env::var("HARNESS_FLEET_REDIS").expect("run by the fleet test");
    let member: usize = std::env::var("HARNESS_FLEET_MEMBER").unwrap().parse().unwrap();
    let idem = Arc::new(Idempotency::from_value(json!({"redis_url": redis, "lease_ms": 10000})).unwrap());
    let key = idem.key("t", "order.created", "m-1000").unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let n = if member == 0 { 334 } else { 333 };
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (idem, key, ran) = (idem.clone(), key.clone(), ran.clone());
            tokio::spawn(async move {
                idem.run(&key, || async {
                    ran.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Ok(Bytes::from(format!("\"done by {}\"", std::process::id())))
                })
                .await
            })
        })
        .collect();
    let (mut results, mut dups, mut other) = (BTreeMap::new(), 0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(r) => *results.entry(String::from_utf8_lossy(&r).into_owned()).or_insert(0) += 1,
            Err(e) if e.name() == "DuplicateInFlightError" => dups += 1,
            Err(e) => {
                other += 1;
                eprintln!("{e}");
            }
        }
    }
    println!("RESULT {}", json!({"ran": ran.load(Ordering::SeqCst), "results": results, "dups": dups, "other": other}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_delivered_1000_times_from_3_processes_runs_once() {
    let redis = Redis::start();
    let outputs = run_members("receiver_fleet_member", "", &redis.url(), 0.0).await;
    let (mut ran, mut answered, mut dups) = (0, 0, 0);
    let mut values = std::collections::BTreeSet::new();
    for o in &outputs {
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "a member failed:\n{out}\n{}", String::from_utf8_lossy(&o.stderr));
        let line = out.lines().find_map(|l| l.split_once("RESULT ").map(|(_, r)| r)).unwrap_or_else(|| panic!("no result line:\n{out}\n{}", String::from_utf8_lossy(&o.stderr)));
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["other"], 0, "{v}");
        ran += v["ran"].as_u64().unwrap();
        dups += v["dups"].as_u64().unwrap();
        for (k, n) in v["results"].as_object().unwrap() {
            values.insert(k.clone());
            answered += n.as_u64().unwrap();
        }
    }
    assert_eq!(ran, 1, "the handler ran exactly once across the fleet");
    assert_eq!(answered + dups, 1000, "every caller got the stored result or DuplicateInFlightError");
    assert_eq!(values.len(), 1, "one stored result: {values:?}");
}

#[ignore = "a child process of a_worker_killed_mid_handler_frees_the_key_after_its_lease"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_doomed_worker() {
    let redis = std::env::var("HARNESS_FLEET_REDIS").expect("run by the crash test");
    let idem = Idempotency::from_value(json!({"redis_url": redis, "lease_ms": 700})).unwrap();
    let key = idem.key("t", "e", "crash-1").unwrap();
    assert!(matches!(idem.claim(&key).await.unwrap(), Claim::Run(_)));
    println!("CLAIMED");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_handler_frees_the_key_after_its_lease() {
    use std::io::BufRead;
    let redis = Redis::start();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(&exe)
        .args(["--ignored", "--exact", "receiver_doomed_worker", "--test-threads", "1", "--nocapture"])
        .env("HARNESS_FLEET_REDIS", redis.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.unwrap().contains("CLAIMED")));
    child.kill().unwrap();
    child.wait().unwrap();
    let idem = Idempotency::from_value(json!({"redis_url": redis.url(), "lease_ms": 700})).unwrap();
    let key = idem.key("t", "e", "crash-1").unwrap();
    assert_eq!(idem.claim(&key).await.unwrap_err().name(), "DuplicateInFlightError", "the dead worker's lease still holds");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let Claim::Run(lease) = idem.claim(&key).await.unwrap() else { panic!("claimable after the lease") };
    assert!(lease.fence >= 2);
    idem.complete(&lease, b"\"recovered\"").await.unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = {
        let runs = runs.clone();
        idem.run(&key, || async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(Bytes::from_static(b"\"again\""))
        })
        .await
        .unwrap()
    };
    assert_eq!((r, runs.load(Ordering::SeqCst)), (Bytes::from_static(b"\"recovered\""), 0), "the result is written once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_store_down_the_receiver_rejects_or_processes_as_configured() {
    let mut redis = Redis::start();
    let url = redis.url();
    redis.stop();
    let reject = Idempotency::from_value(json!({"redis_url": url})).unwrap();
    let e = reject.claim("harness:idem:t:e:down").await.unwrap_err();
    assert_eq!((e.name(), e.code.as_deref()), ("HarnessError", Some("store_unavailable")));
    let process = Idempotency::from_value(json!({"redis_url": url, "on_store_down": "process"})).unwrap();
    let r = process.run("harness:idem:t:e:down", || async { Ok(Bytes::from_static(b"1")) }).await.unwrap();
    assert_eq!(r, Bytes::from_static(b"1"));
    assert!(process.metrics_text().contains("harness_idempotency_total{outcome=\"store_down_processed\"} 1"));
    assert!(!format!("{process:?}").contains("127.0.0.1"), "no URL (it may hold a password) in Debug");
}

#[test]
fn signed_deliveries_are_checked_before_anything_runs() {
    let idem = Idempotency::from_value(json!({"signature": {"secret": {"value": "whsec-test-123"}, "max_skew_ms": 60000}})).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::SystemTime::UNIX_EPOCH).unwrap().as_secs().to_string();
    let body = br#"{"id":"evt_1"}"#;
    let sig = idem.sign(&now, body).unwrap();
    idem.verify(&now, body, &sig).unwrap();
    idem.verify(&now, body, &format!("sha256={sig}")).unwrap();
    let padded = format!(" {now} ");
    idem.verify(&padded, body, &idem.sign(&padded, body).unwrap()).unwrap();
    let e = idem.verify(&now, br#"{"id":"evt_2"}"#, &sig).unwrap_err();
    assert_eq!((e.name(), e.code.as_deref()), ("AuthError", Some("bad_signature")));
    let old = (now.parse::<u64>().unwrap() - 3600).to_string();
    let old_sig = idem.sign(&old, body).unwrap();
    assert_eq!(idem.verify(&old, body, &old_sig).unwrap_err().code.as_deref(), Some("stale_signature"));
    assert_eq!(idem.verify(&now, body, "zz").unwrap_err().code.as_deref(), Some("bad_signature"));
    assert!(!format!("{idem:?}").contains("whsec-test-123"));
    assert!(!e.to_string().contains("whsec-test-123"));
}

/// Regression: the first Redis call after a restart failed (its connection was dead), and
/// when that call stored a handler's result the result was lost and a redelivery ran the
/// handler again. It is now sent once more on a fresh connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_stored_as_the_first_call_after_a_redis_restart_is_kept_and_not_run_again() {
    let mut redis = Redis::start_persistent();
    let idem = Idempotency::from_value(json!({"redis_url": redis.url(), "lease_ms": 10000})).unwrap();
    // The connection is up and in use before the restart.
    let warm = idem.key("t", "order.created", "warm").unwrap();
    let Claim::Run(l) = idem.claim(&warm).await.unwrap() else { panic!("claimed") };
    idem.complete(&l, b"\"warm\"").await.unwrap();
    for round in 0..3 {
        let key = idem.key("t", "order.created", &format!("m-{round}")).unwrap();
        let Claim::Run(lease) = idem.claim(&key).await.unwrap() else { panic!("claimed") };
        redis.restart();
        // The handler finished while Redis was away and back: its result is the first call.
        idem.complete(&lease, b"\"paid\"").await.unwrap_or_else(|e| panic!("round {round}: the first call after a restart failed: {e}"));
        let runs = Arc::new(AtomicUsize::new(0));
        let again = {
            let runs = runs.clone();
            idem.run(&key, || async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(Bytes::from_static(b"\"again\""))
            })
            .await
            .unwrap()
        };
        assert_eq!((again, runs.load(Ordering::SeqCst)), (Bytes::from_static(b"\"paid\""), 0), "round {round}: a redelivery ran the handler again");
    }
}

/// Regression: with Redis down, a shared limit's local fallback had a burst of 1 when none
/// was set (1 of 20 quick calls passed); it now has the local limiter's default burst (one
/// second of the rate), shared out like the rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_the_local_fallback_keeps_the_default_burst() {
    let mut redis = Redis::start();
    let url = redis.url();
    redis.stop();
    let u = harness_upstream::start().await.unwrap();
    script(&u.url(), "burst", json!([{"status": 200}])).await;
    for (shared, want) in [(json!(null), 20), (json!({"redis_url": url, "key": "burst"}), 20), (json!({"redis_url": url, "key": "burst2", "expected_instances": 2}), 20)] {
        let mut rl = json!({"rps": 50, "max_wait_ms": 0});
        if !shared.is_null() {
            rl["shared"] = shared.clone();
        }
        let (client, _) = make(&u.url(), json!({ "rate_limit": rl }));
        let mut ok = 0;
        for _ in 0..20 {
            if client.request(Request::new("svc", "GET", "/s/burst/x")).await.is_ok() {
                ok += 1;
            }
        }
        assert_eq!(ok, want, "shared {shared}: {ok} of 20 quick calls passed");
    }
}

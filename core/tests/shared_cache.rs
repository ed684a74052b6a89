//! The caches shared by a fleet (`cache.shared`) on a real `redis-server` started here:
//! three OS processes, where one's misses (an HTTP answer, an exact chat answer, a
//! semantic entry) are the others' hits, whether they were running when it was stored
//! (pub/sub) or started after (the index warmed from Redis); and Redis killed mid-run,
//! which fails no request and is reported once.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_core::{ChatRequest, Client, ClientOptions, Config, Event, EventSink, Request};
use parking_lot::Mutex;
use serde_json::{json, Value};

use harness_upstream::redis_server::RedisServer as Redis;

async fn admin(method: reqwest::Method, url: String, body: Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new().request(method, url).body(body.to_string()).send().await.unwrap();
    assert!(r.status().is_success());
}

async fn get_json(url: String) -> Value {
    serde_json::from_str(&reqwest::get(url).await.unwrap().text().await.unwrap()).unwrap()
}

fn config(base: &str, redis: &str) -> Value {
    json!({
        "log": {"enabled": false},
        "cache": {"shared": {"redis_url": redis}},
        "services": {
            "api": {"base_url": base, "cache": {"http": true}, "retry": {"max_retries": 0}},
            "chat": {"base_url": format!("{base}/llm/fleet-chat")},
            "emb": {"base_url": format!("{base}/llm/fleet-emb")}
        },
        "routes": {
            "exact": {"adapter": "openai-compatible", "providers": [{"id": "p", "service": "chat", "model": "m", "weight": 1}],
                      "cache": {"exact": {"ttl_ms": 60000}}},
            "sem": {"adapter": "openai-compatible", "providers": [{"id": "p", "service": "chat", "model": "m", "weight": 1}],
                    "cache": {"semantic": {"embeddings_route": "embed", "threshold": 0.9}}},
            "embed": {"kind": "embeddings", "adapter": "openai-compatible", "providers": [{"id": "e", "service": "emb", "model": "e", "weight": 1}]}
        }
    })
}

fn ask(text: &str) -> ChatRequest {
    let mut c = ChatRequest::new(json!([{"role": "user", "content": text}]));
    c.params.insert("temperature".into(), json!(0));
    c.principal = Some("tenant-a".into());
    c
}

async fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < until, "waited 10 s for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One instance of the fleet (run as its own process by the test below). `writer`: asks
/// everything once and waits until Redis holds it; `reader`: says `ready` once it hears
/// the fleet, waits for a line on stdin, then asks again and prints what caches answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by two_processes_share_their_caches_through_redis"]
async fn fleet_cache_member() {
    let base = std::env::var("HARNESS_FLEET_UPSTREAM").expect("run by the fleet test");
    let redis = std::env::var("HARNESS_FLEET_REDIS").unwrap();
    let role = std::env::var("HARNESS_FLEET_ROLE").unwrap();
    let client = Client::from_value(config(&base, &redis)).unwrap();
    wait_for("the fleet's channel", || client.cache_sizes().shared_listening == Some(true)).await;
    if role == "writer" {
        let r = client.request(Request::new("api", "GET", "/s/fleet/item")).await.unwrap();
        assert!(!r.from_cache());
        assert!(client.chat("exact", ask("Name a prime.")).await.unwrap().cache.is_none());
        assert!(client.chat("sem", ask("What is the capital of France?")).await.unwrap().cache.is_none());
        // Writes go behind the answers: this process stays until Redis has them.
        let mut conn = redis::Client::open(redis.as_str()).unwrap().get_multiplexed_async_connection().await.unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let keys: Vec<String> = redis::cmd("KEYS").arg("harness:cache:*").query_async(&mut conn).await.unwrap();
            let kinds: std::collections::BTreeSet<char> = keys.iter().filter_map(|k| k.strip_prefix("harness:cache:")?.chars().next()).collect();
            if keys.len() >= 4 && kinds.len() == 3 {
                break;
            }
            assert!(Instant::now() < until, "redis holds {keys:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        return;
    }
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    // The semantic entry arrives over the channel (a running instance) or with the warm-up (a new one).
    wait_for("the writer's semantic entry", || client.cache_sizes().semantic_entries >= 1).await;
    let http = client.request(Request::new("api", "GET", "/s/fleet/item")).await.unwrap();
    let exact = client.chat("exact", ask("Name a prime.")).await.unwrap();
    let sem = client.chat("sem", ask("what is the capital city of France")).await.unwrap();
    let out = json!({
        "http": [String::from_utf8_lossy(&http.body), http.from_cache()],
        "exact": [exact.content, exact.cache.map(|c| c.outcome)],
        "semantic": [sem.content, sem.cache.as_ref().map(|c| c.outcome), sem.cache.and_then(|c| c.similarity)],
    });
    println!("result {out}");
}

fn member(role: &str, base: &str, redis: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "fleet_cache_member", "--test-threads", "1", "--nocapture", "--quiet"])
        .env("HARNESS_FLEET_UPSTREAM", base)
        .env("HARNESS_FLEET_REDIS", redis)
        .env("HARNESS_FLEET_ROLE", role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Starts a reader and waits for its `ready`.
fn ready_reader(base: &str, redis: &str) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut child = member("reader", base, redis);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the reader ended before it was ready");
        if line.trim() == "ready" {
            return (child, out);
        }
    }
}

/// Tells a reader to go and returns its result line.
fn result_of(mut child: std::process::Child, mut out: BufReader<std::process::ChildStdout>) -> Value {
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    let mut result = None;
    while out.read_line(&mut line).unwrap() > 0 {
        if let Some(r) = line.trim().strip_prefix("result ") {
            result = Some(serde_json::from_str(r).unwrap());
        }
        line.clear();
    }
    assert!(child.wait().unwrap().success(), "the reader failed");
    result.expect("the reader's result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_their_caches_through_redis() {
    let redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    let fresh = |body: &str| json!({"headers": {"cache-control": "max-age=60"}, "body": body});
    admin(reqwest::Method::PUT, format!("{base}/__admin/script/fleet"), json!({"steps": [fresh("v1"), fresh("v2"), fresh("v3"), fresh("v4")]})).await;
    admin(reqwest::Method::POST, format!("{base}/__admin/provider/fleet-chat"), json!({"content": "Paris."})).await;
    admin(reqwest::Method::POST, format!("{base}/__admin/provider/fleet-emb"), json!({"embedding": "words", "dimensions": 256})).await;

    let (b, b_out) = tokio::task::block_in_place(|| ready_reader(&base, &redis.url()));
    let writer = tokio::task::block_in_place(|| member("writer", &base, &redis.url()).wait_with_output().unwrap());
    assert!(writer.status.success(), "the writer failed: {}", String::from_utf8_lossy(&writer.stdout));
    let running = tokio::task::block_in_place(|| result_of(b, b_out));
    // Started after the writer stored everything: its index is warmed from Redis.
    let (c, c_out) = tokio::task::block_in_place(|| ready_reader(&base, &redis.url()));
    let started_after = tokio::task::block_in_place(|| result_of(c, c_out));
    for r in [&running, &started_after] {
        assert_eq!(r["http"], json!(["v1", true]), "{r}");
        assert_eq!(r["exact"], json!(["Paris.", "exact"]), "{r}");
        assert_eq!((&r["semantic"][0], &r["semantic"][1]), (&json!("Paris."), &json!("semantic")), "{r}");
        assert!(r["semantic"][2].as_f64().unwrap() >= 0.9, "{r}");
    }
    // One process's misses were the only calls made.
    assert_eq!(get_json(format!("{base}/__admin/stats/fleet")).await["requests"], 1);
    assert_eq!(get_json(format!("{base}/__admin/provider-log/fleet-chat")).await["count"], 2);
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
async fn redis_killed_mid_run_fails_no_request_is_reported_once_and_sharing_resumes() {
    let mut redis = Redis::start();
    let u = harness_upstream::start().await.unwrap();
    let base = u.url();
    admin(reqwest::Method::POST, format!("{base}/__admin/provider/fleet-chat"), json!({"content": "Paris."})).await;
    admin(reqwest::Method::POST, format!("{base}/__admin/provider/fleet-emb"), json!({"embedding": "words", "dimensions": 64})).await;
    for w in 0..8 {
        // Each answer fresh for 1 s: the run keeps storing, and serving, through the outage.
        admin(reqwest::Method::PUT, format!("{base}/__admin/script/mid{w}"), json!({"steps": [{"headers": {"cache-control": "max-age=1"}, "body": "ok"}]})).await;
    }
    let events = Arc::new(Events::default());
    let sink: Arc<dyn EventSink> = events.clone();
    let client = Client::with_options(Config::from_value(config(&base, &redis.url())).unwrap(), ClientOptions { sinks: vec![sink], ..Default::default() }).unwrap();
    wait_for("the fleet's channel", || client.cache_sizes().shared_listening == Some(true)).await;
    let stop = Instant::now() + Duration::from_millis(2500);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u32;
            while Instant::now() < stop {
                let path = format!("/s/mid{w}/item{}", n % 5);
                client.request(Request::new("api", "GET", path)).await.map_err(|e| format!("GET: {e}"))?;
                client.chat("exact", ask(&format!("question {}", n % 7))).await.map_err(|e| format!("exact: {e}"))?;
                client.chat("sem", ask(&format!("tell me about topic {}", n % 3))).await.map_err(|e| format!("semantic: {e}"))?;
                n += 1;
            }
            Ok::<u32, String>(n)
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    tokio::task::block_in_place(|| redis.stop());
    let mut done = 0;
    for t in tasks {
        done += t.await.unwrap().expect("no request fails while Redis is down");
    }
    assert!(done >= 16, "only {done} rounds");
    client.flush();
    let outages: Vec<Value> = events.0.lock().iter().filter(|e| e.kind() == "shared_state_unavailable").map(Event::to_value).collect();
    assert_eq!(outages.len(), 1, "one event for the outage: {outages:?}");
    assert_eq!(outages[0]["what"], "cache", "{outages:?}");
    // Redis back: the instance hears the fleet again and stores there again.
    tokio::task::block_in_place(|| redis.restart());
    wait_for("the channel after the restart", || client.cache_sizes().shared_listening == Some(true)).await;
    let mut conn = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let mut i = 0;
    loop {
        client.chat("exact", ask(&format!("after the restart {i}"))).await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("harness:cache:a:*").query_async(&mut conn).await.unwrap();
        if !keys.is_empty() {
            break;
        }
        assert!(Instant::now() < until, "nothing stored in Redis after its restart");
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
